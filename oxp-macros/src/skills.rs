//! `skills!("skills")`: every `<dir>/<name>/SKILL.md` with the files beside it, embedded at
//! compile time (`include_bytes!`, so an edit of a file rebuilds), each `SKILL.md`'s frontmatter
//! checked by the Agent Skills rules: a malformed one is a compile error naming the file.

use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream};
use quote::quote;
use serde_json::{Map, Value};
use syn::LitStr;
use syn::parse::{Parse, ParseStream};

/// `skills!()`, `skills!("dir")`, `skills!("dir", crate = "my_oxp")`.
struct Args {
    dir: Option<LitStr>,
    krate: Option<syn::Path>,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args {
            dir: None,
            krate: None,
        };
        if input.peek(LitStr) {
            args.dir = Some(input.parse()?);
            if input.is_empty() {
                return Ok(args);
            }
            input.parse::<syn::Token![,]>()?;
        }
        if !input.is_empty() {
            let key: syn::Ident = input.call(syn::ext::IdentExt::parse_any)?;
            if key != "crate" {
                return Err(syn::Error::new(
                    key.span(),
                    "write `skills!(\"skills\")`, or `skills!(\"skills\", crate = \"my_oxp\")` for a renamed dependency",
                ));
            }
            input.parse::<syn::Token![=]>()?;
            let path: LitStr = input.parse()?;
            args.krate = Some(path.parse()?);
        }
        Ok(args)
    }
}

pub fn expand(tokens: TokenStream) -> TokenStream {
    let args: Args = match syn::parse2(tokens) {
        Ok(args) => args,
        Err(error) => return error.to_compile_error(),
    };
    let span = args.dir.as_ref().map_or_else(Span::call_site, LitStr::span);
    let written = args
        .dir
        .as_ref()
        .map_or_else(|| "skills".to_owned(), LitStr::value);
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join(&written);
    let oxp = match &args.krate {
        Some(path) => quote!(#path::__private),
        None => quote!(::oxp_runtime::__private),
    };
    match skills(&root, &written) {
        Ok(skills) => {
            let items = skills.iter().enumerate().map(|(i, skill)| {
                let ident = quote::format_ident!("__OXP_SKILL_{}", i);
                let (name, description, frontmatter, source) = (
                    &skill.name,
                    &skill.description,
                    &skill.frontmatter,
                    &skill.source,
                );
                let files = skill.files.iter().map(|(path, absolute)| {
                    let absolute = absolute.display().to_string();
                    quote!(#oxp::SkillFile { path: #path, bytes: ::core::include_bytes!(#absolute) })
                });
                quote! {
                    const #ident: #oxp::SkillDescriptor = #oxp::SkillDescriptor {
                        name: #name,
                        description: #description,
                        frontmatter: #frontmatter,
                        files: &[#(#files),*],
                        source: #source,
                    };
                    #oxp::inventory::submit! { #ident }
                }
            });
            quote!(const _: () = { #(#items)* };)
        }
        Err(problem) => syn::Error::new(span, problem).to_compile_error(),
    }
}

struct Skill {
    name: String,
    description: String,
    /// The frontmatter as JSON text.
    frontmatter: String,
    /// Where its `SKILL.md` is, as the author wrote the folder.
    source: String,
    /// Each file: its path inside the skill (`/`-separated), and where it is on disk.
    files: Vec<(String, PathBuf)>,
}

/// The most files a skill may have, and the most bytes (the extension's limits).
const MAX_FILES: usize = 512;
const MAX_BYTES: u64 = 16 * 1024 * 1024;

fn skills(root: &Path, written: &str) -> Result<Vec<Skill>, String> {
    let entries = std::fs::read_dir(root).map_err(|e| {
        format!(
            "cannot read the skills folder `{}` ({e}): put each skill in `{written}/<name>/SKILL.md`",
            root.display()
        )
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(format!(
            "the skills folder `{}` has no skill: put each in `{written}/<name>/SKILL.md`",
            root.display()
        ));
    }
    dirs.iter().map(|dir| skill(dir, written)).collect()
}

fn skill(dir: &Path, written: &str) -> Result<Skill, String> {
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let source = format!("{written}/{folder}/SKILL.md");
    let manifest = dir.join("SKILL.md");
    let text = std::fs::read_to_string(&manifest).map_err(|e| {
        format!("{source}: cannot read it ({e}); every skill folder has a SKILL.md")
    })?;
    let frontmatter = frontmatter(&text).map_err(|problem| format!("{source}: {problem}"))?;
    let text_of = |key: &str| {
        frontmatter
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let Some(name) = text_of("name") else {
        return Err(format!(
            "{source}: the frontmatter needs `name: {folder}` (the folder's name)"
        ));
    };
    if let Some(problem) = crate::rules::skill_name_problem(&name) {
        return Err(format!("{source}: {problem}"));
    }
    if name != folder {
        return Err(format!(
            "{source}: the name `{name}` must be the folder's name, `{folder}`"
        ));
    }
    let description = text_of("description").unwrap_or_default();
    if description.trim().is_empty() {
        return Err(format!(
            "{source}: the frontmatter needs a `description`: what the skill does and when to use it"
        ));
    }
    if description.chars().count() > 1024 {
        return Err(format!(
            "{source}: the description is {} characters; the Agent Skills spec allows 1024",
            description.chars().count()
        ));
    }
    let mut files = Vec::new();
    collect(dir, "", &mut files).map_err(|e| format!("{source}: {e}"))?;
    files.sort();
    let total: u64 = files
        .iter()
        .filter_map(|(_, path)| std::fs::metadata(path).ok())
        .map(|m| m.len())
        .sum();
    if files.len() > MAX_FILES || total > MAX_BYTES {
        return Err(format!(
            "{source}: the skill has {} files and {total} bytes; a skill may have {MAX_FILES} files and {MAX_BYTES} bytes",
            files.len()
        ));
    }
    Ok(Skill {
        name,
        description,
        frontmatter: Value::Object(frontmatter).to_string(),
        source,
        files,
    })
}

/// Every file under `dir`, by its path inside the skill; hidden files (`.DS_Store`, `.git`)
/// are not part of it.
fn collect(dir: &Path, prefix: &str, files: &mut Vec<(String, PathBuf)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let inside = format!("{prefix}{name}");
        if path.is_dir() {
            collect(&path, &format!("{inside}/"), files)?;
        } else {
            files.push((inside, path));
        }
    }
    Ok(())
}

/// The frontmatter between the `---` lines at the top, read as YAML's plain subset: `key: value`
/// scalars (quoted or not), `|`/`>` blocks, and one level of nested maps and `- item` lists.
fn frontmatter(text: &str) -> Result<Map<String, Value>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("it must begin with a frontmatter: a `---` line, `name: …` and `description: …`, and a closing `---`".into());
    }
    let mut body = Vec::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        body.push(line);
    }
    if !closed {
        return Err("its frontmatter has no closing `---` line".into());
    }
    let mut map = Map::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        i += 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(format!(
                "frontmatter line `{line}` is indented but belongs to no key"
            ));
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("frontmatter line `{line}` is not `key: value`"));
        };
        let (key, value) = (key.trim().to_owned(), value.trim());
        // The indented lines that follow belong to this key.
        let start = i;
        while i < body.len() && (body[i].starts_with([' ', '\t']) || body[i].trim().is_empty()) {
            i += 1;
        }
        let nested: Vec<&str> = body[start..i]
            .iter()
            .copied()
            .filter(|l| !l.trim().is_empty())
            .collect();
        let parsed = match value {
            "|" | "|-" => Value::String(
                nested
                    .iter()
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            ">" | ">-" => Value::String(
                nested
                    .iter()
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            "" if nested.is_empty() => Value::Null,
            "" if nested.iter().all(|l| l.trim_start().starts_with("- ")) => Value::Array(
                nested
                    .iter()
                    .map(|l| scalar(l.trim_start().trim_start_matches("- ")))
                    .collect(),
            ),
            "" => {
                let mut inner = Map::new();
                for l in nested {
                    let Some((k, v)) = l.split_once(':') else {
                        return Err(format!(
                            "frontmatter line `{l}` under `{key}` is not `key: value`"
                        ));
                    };
                    inner.insert(unquote(k.trim()), scalar(v.trim()));
                }
                Value::Object(inner)
            }
            _ if !nested.is_empty() => {
                return Err(format!("`{key}` has a value and indented lines below it"));
            }
            _ => scalar(value),
        };
        if map.insert(unquote(&key), parsed).is_some() {
            return Err(format!("`{key}` is given twice in the frontmatter"));
        }
    }
    Ok(map)
}

fn unquote(text: &str) -> String {
    let quoted = |q: char| text.len() >= 2 && text.starts_with(q) && text.ends_with(q);
    if quoted('"') {
        serde_json::from_str(text).unwrap_or_else(|_| text[1..text.len() - 1].to_owned())
    } else if quoted('\'') {
        text[1..text.len() - 1].replace("''", "'")
    } else {
        text.to_owned()
    }
}

/// A scalar as text: names, descriptions and versions are strings to the Agent Skills spec, so
/// `version: 1.0` stays `"1.0"`; `true`/`false` are booleans.
fn scalar(text: &str) -> Value {
    match text {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(unquote(text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frontmatter_subset_reads_what_skills_write() {
        let text = "---\nname: pdf-tools\ndescription: \"Fill PDF forms: text and checkboxes\"\nlicense: Apache-2.0\nmetadata:\n  author: ada\n  version: \"1.0\"\nallowed-tools:\n  - Read\n  - Bash\nnotes: >\n  one\n  two\n---\n# Body\n";
        let map = frontmatter(text).unwrap();
        assert_eq!(map["name"], "pdf-tools");
        assert_eq!(map["description"], "Fill PDF forms: text and checkboxes");
        assert_eq!(map["metadata"]["version"], "1.0");
        assert_eq!(map["allowed-tools"][1], "Bash");
        assert_eq!(map["notes"], "one two");
        assert!(frontmatter("# no frontmatter").is_err());
        assert!(
            frontmatter("---\nname: x\n")
                .unwrap_err()
                .contains("closing")
        );
        assert!(
            frontmatter("---\nname x\n---\n")
                .unwrap_err()
                .contains("key: value")
        );
    }

    /// A folder of skills written for one test, removed after.
    struct Folder(PathBuf);

    impl Folder {
        fn new(test: &str, skills: &[(&str, &str)]) -> Folder {
            let root =
                std::env::temp_dir().join(format!("oxp-skills-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            for (name, manifest) in skills {
                std::fs::create_dir_all(root.join(name)).unwrap();
                std::fs::write(root.join(name).join("SKILL.md"), manifest).unwrap();
            }
            Folder(root)
        }
    }

    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_malformed_skill_is_an_error_naming_its_file() {
        let cases = [
            (
                "no-frontmatter",
                "# Just a body\n",
                "must begin with a frontmatter",
            ),
            (
                "no-name",
                "---\ndescription: d\n---\n",
                "needs `name: no-name`",
            ),
            (
                "Upper",
                "---\nname: Upper\ndescription: d\n---\n",
                "lowercase letters",
            ),
            (
                "other",
                "---\nname: another\ndescription: d\n---\n",
                "the folder's name, `other`",
            ),
            (
                "no-description",
                "---\nname: no-description\n---\n",
                "needs a `description`",
            ),
        ];
        for (name, manifest, expected) in cases {
            let folder = Folder::new(name, &[(name, manifest)]);
            let error = skills(&folder.0, "skills").err().unwrap_or_default();
            assert!(
                error.starts_with(&format!("skills/{name}/SKILL.md: ")),
                "{error}"
            );
            assert!(error.contains(expected), "{name}: {error}");
        }
        let good = Folder::new(
            "good",
            &[(
                "good",
                "---\nname: good\ndescription: Does good.\n---\nBody\n",
            )],
        );
        let read = skills(&good.0, "skills").unwrap();
        assert_eq!((read[0].name.as_str(), read[0].files.len()), ("good", 1));
        let empty = Folder::new("empty", &[]);
        std::fs::create_dir_all(&empty.0).unwrap();
        assert!(
            skills(&empty.0, "skills")
                .err()
                .unwrap()
                .contains("has no skill")
        );
    }
}
