//! The rules of a tool's identity, and the words that say one is broken: the single source for
//! `#[tool]`, which checks what is written as a literal at compile time, and for the registry,
//! which checks every descriptor again at start-up (a version taken from `CARGO_PKG_VERSION`, a
//! descriptor written by hand). `oxp-runtime/src/rules.rs` is a link to this file — a proc-macro
//! crate can export nothing but macros, so the file is shared rather than the crate (serde_derive
//! shares its `internals` with serde_derive_internals the same way).
//!
//! Each check returns the problem as a sentence that ends in the fix; the caller decides where
//! it points (a span, a source location).

/// Characters in a wire name (`Toolkit_Name`): what OXP and every model provider allow.
pub const MAX_NAME_LEN: usize = 64;
/// Characters in a description: what model providers allow.
pub const MAX_DESCRIPTION_LEN: usize = 1024;

/// Characters in a `search_hint`. A hint is a few words a host's tool search matches beside
/// the name and description, and a host that defers tools may show it in the short catalogue
/// its model reads in every conversation: 200 characters hold some thirty keywords, more than
/// a search query matches, and stop a hint from becoming a second description.
pub const MAX_SEARCH_HINT_LEN: usize = 200;

/// Whether `s` may be a toolkit or tool name, a segment of the id `Toolkit.Name@x.y.z`:
/// `[A-Za-z0-9_]+`.
pub fn is_segment(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `s` is a tool version: three whole numbers, `x.y.z`, each fitting a `u64`.
pub fn is_version(s: &str) -> bool {
    let mut parts = 0;
    let numeric = s.split('.').all(|part| {
        parts += 1;
        !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) && part.parse::<u64>().is_ok()
    });
    numeric && parts == 3
}

/// The toolkit or name (`kind`) `value`, unless it is a segment; with a corrected spelling when
/// one can be made (`"my-tools"` → `MyTools`).
pub fn segment_problem(kind: &str, value: &str) -> Option<String> {
    if is_segment(value) {
        return None;
    }
    let cleaned: String = value
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .map(capitalized)
        .collect();
    let hint = if cleaned.is_empty() {
        String::new()
    } else {
        format!(", e.g. `{kind} = \"{cleaned}\"`")
    };
    Some(format!(
        "the {kind} `{value}` may only have letters, digits and underscores (it is part of the id `Toolkit.Name@x.y.z`){hint}"
    ))
}

/// The wire name `toolkit_name`, when it is longer than [`MAX_NAME_LEN`].
pub fn wire_name_problem(toolkit: &str, name: &str) -> Option<String> {
    let len = toolkit.len() + 1 + name.len();
    (len > MAX_NAME_LEN).then(|| {
        format!(
            "the wire name `{toolkit}_{name}` is {len} characters; OXP and model providers allow {MAX_NAME_LEN}: shorten the toolkit or the name"
        )
    })
}

/// An exact wire name (`wire_name = "greet"`), unless it is 1 to [`MAX_NAME_LEN`] letters,
/// digits, `_` and `-`: what OXP's `name`, MCP and every model provider accept.
pub fn exact_wire_name_problem(value: &str) -> Option<String> {
    let usable = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if value.is_empty() {
        Some("a wire name cannot be empty: leave `wire_name` out for `Toolkit_Name`, or write one, e.g. `wire_name = \"greet\"`".to_owned())
    } else if !usable {
        Some(format!(
            "`{}` cannot be a wire name: use only letters, digits, `_` and `-`, e.g. `wire_name = \"greet\"`",
            value.escape_debug()
        ))
    } else if value.len() > MAX_NAME_LEN {
        Some(format!(
            "the wire name `{value}` is {} characters; OXP and model providers allow {MAX_NAME_LEN}: shorten it",
            value.len()
        ))
    } else {
        None
    }
}

/// The version `value`, unless it is `x.y.z`.
pub fn version_problem(value: &str) -> Option<String> {
    (!is_version(value)).then(|| {
        format!("`{value}` is not a tool version: write three whole numbers, `version = \"1.0.0\"`")
    })
}

/// The description, when there is none (models read it to decide when to call the tool) or it
/// is longer than [`MAX_DESCRIPTION_LEN`].
pub fn description_problem(description: &str) -> Option<String> {
    let len = description.trim().chars().count();
    if len == 0 {
        Some("a tool needs a description, which models read to decide when to call it: add a doc comment (`/// What the tool does.`) above the fn".to_owned())
    } else if len > MAX_DESCRIPTION_LEN {
        Some(format!(
            "the description is {len} characters; model providers allow {MAX_DESCRIPTION_LEN}: shorten the doc comment"
        ))
    } else {
        None
    }
}

/// The `search_hint`, unless it is one line of at most [`MAX_SEARCH_HINT_LEN`] characters with
/// words in it.
pub fn search_hint_problem(hint: &str) -> Option<String> {
    let len = hint.chars().count();
    if hint.trim().is_empty() {
        Some("`search_hint` needs the words a user would search for: e.g. `search_hint = \"pdf invoice receipt\"`; leave the key out to let hosts search the name and description alone".to_owned())
    } else if let Some(bad) = hint.chars().find(|c| c.is_control()) {
        Some(format!(
            "`search_hint` holds {bad:?}: a hint is one line of keywords, hosts match it as one phrase; write the words on one line, e.g. `search_hint = \"pdf invoice receipt\"`"
        ))
    } else if len > MAX_SEARCH_HINT_LEN {
        Some(format!(
            "`search_hint` is {len} characters; at most {MAX_SEARCH_HINT_LEN}: a hint is a few words a user would search for, not a second description (the description is searched too)"
        ))
    } else {
        None
    }
}

/// The OAuth scope `value`, unless it is a scope token (RFC 6749 §3.3): one or more printable
/// ASCII characters other than space, `"` and `\`, so that a `403` challenge can name it as it is.
pub fn scope_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return Some("a scope cannot be empty: write the scope the identity provider grants, e.g. `scopes = [\"files:write\"]`".to_owned());
    }
    let bad = value
        .chars()
        .find(|c| !matches!(*c, '\x21' | '\x23'..='\x5B' | '\x5D'..='\x7E'))?;
    Some(format!(
        "the scope `{}` holds {bad:?}: a scope is printable ASCII without spaces, `\"` or `\\` (RFC 6749 §3.3); list several as several strings, e.g. `scopes = [\"files:read\", \"files:write\"]`",
        value.escape_debug()
    ))
}

/// Characters in an Agent Skill's name.
pub const MAX_SKILL_NAME_LEN: usize = 64;

/// The Agent Skills name `name`, unless it is 1 to [`MAX_SKILL_NAME_LEN`] lowercase letters,
/// digits and hyphens, not starting or ending with a hyphen, no two hyphens together.
pub fn skill_name_problem(name: &str) -> Option<String> {
    let problem = if name.is_empty() || name.chars().count() > MAX_SKILL_NAME_LEN {
        "must have 1 to 64 characters"
    } else if !name
        .chars()
        .all(|c| c.is_lowercase() || c.is_numeric() || c == '-')
    {
        "may only have lowercase letters, digits and hyphens"
    } else if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        "may not start or end with a hyphen, nor have two together"
    } else {
        return None;
    };
    Some(format!("the name `{name}` {problem}"))
}

/// `get_emails` → `GetEmails`, `my-crate` → `MyCrate`: the default name of a fn or a crate.
pub fn pascal_case(s: &str) -> String {
    s.split(['_', '-']).map(capitalized).collect()
}

fn capitalized(part: &str) -> String {
    let mut chars = part.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

/// What `cannot_ask = "…"` may say a tool does for a caller that cannot answer its questions.
pub const CANNOT_ASK: [&str; 3] = ["refuse", "hide", "relay"];

/// What `task = "…"` may say of a tool: whether it may, or must, run as an MCP task.
pub const TASK: [&str; 2] = ["optional", "required"];

/// A piece of a `confirm = "…"` question: text as written (`{{` and `}}` read as braces), or
/// the name of a parameter whose value goes there.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Text shown as it is.
    Text(std::borrow::Cow<'a, str>),
    /// `{name}`: the call's value of the parameter `name` (its name on the wire).
    Param(&'a str),
}

/// The pieces of a `confirm = "…"` question, the one reading of its syntax that `#[tool]`, the
/// registry and the rendering of each call's question share. `Err` with the problem when a
/// brace is unmatched or a `{}` names nothing.
pub fn template(template: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    while let Some(at) = rest.find(['{', '}']) {
        text.push_str(&rest[..at]);
        let (brace, after) = (&rest[at..=at], &rest[at + 1..]);
        if after.starts_with(brace) {
            text.push_str(brace);
            rest = &after[1..];
            continue;
        }
        if brace == "}" {
            return Err("a `}` closes nothing: write `}}` for a brace".into());
        }
        let end = after
            .find('}')
            .ok_or("a `{` is never closed: write `{{` for a brace")?;
        let name = &after[..end];
        if name.trim().is_empty() || name.contains('{') {
            return Err(format!(
                "`{{{name}}}` names no parameter: write `{{path}}` for the parameter `path`, \
                 `{{{{` for a brace"
            ));
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text).into()));
        }
        pieces.push(Piece::Param(name));
        rest = &after[end + 1..];
    }
    text.push_str(rest);
    if !text.is_empty() {
        pieces.push(Piece::Text(text.into()));
    }
    Ok(pieces)
}

/// The parameters a `confirm = "…"` question names (`{path}`), in order. `Err` with the
/// problem when the template does not parse ([`template`]).
pub fn placeholders(template: &str) -> Result<Vec<&str>, String> {
    Ok(self::template(template)?
        .into_iter()
        .filter_map(|piece| match piece {
            Piece::Param(name) => Some(name),
            Piece::Text(_) => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments() {
        assert!(is_segment("Calculator_2"));
        for bad in ["", "Calc.ulator", "my-tools", "Ünï"] {
            assert!(!is_segment(bad), "{bad}");
        }
        let problem = segment_problem("toolkit", "my-tools").unwrap();
        assert!(
            problem.ends_with("e.g. `toolkit = \"MyTools\"`"),
            "{problem}"
        );
        assert!(!segment_problem("name", "!!").unwrap().contains("e.g."));
    }

    #[test]
    fn versions() {
        assert!(is_version("1.0.0") && is_version("10.20.30"));
        for bad in [
            "1.0",
            "1.0.0.0",
            "v1.0.0",
            "1.0.x",
            "1..0",
            "99999999999999999999.0.0",
        ] {
            assert!(version_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn lengths() {
        let long = "A".repeat(MAX_NAME_LEN);
        assert!(
            wire_name_problem(&long, "B")
                .unwrap()
                .contains("66 characters")
        );
        assert!(wire_name_problem("Calculator", "Add").is_none());
        assert!(description_problem("  ").unwrap().contains("doc comment"));
        assert!(description_problem(&"x".repeat(MAX_DESCRIPTION_LEN + 1)).is_some());
        assert!(description_problem("Add two numbers.").is_none());
    }

    #[test]
    fn skill_names() {
        assert_eq!(skill_name_problem("pdf-tools"), None);
        assert_eq!(skill_name_problem("é2-x"), None);
        for bad in ["", "PDF", "-pdf", "pdf-", "pdf--tools", "pdf_tools"] {
            assert!(skill_name_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(skill_name_problem(&"a".repeat(MAX_SKILL_NAME_LEN)), None);
        let long = skill_name_problem(&"a".repeat(MAX_SKILL_NAME_LEN + 1)).unwrap();
        assert!(long.ends_with("must have 1 to 64 characters"), "{long}");
        assert_eq!(
            skill_name_problem("Upper").unwrap(),
            "the name `Upper` may only have lowercase letters, digits and hyphens"
        );
    }

    #[test]
    fn pascal() {
        assert_eq!(pascal_case("get_emails"), "GetEmails");
        assert_eq!(pascal_case("my-crate"), "MyCrate");
    }
}
