//! Agent Skills (MCP's skills extension, SEP-2640): folders that teach an agent how to use the
//! server's tools, each a `SKILL.md` with a frontmatter and the files beside it, embedded at
//! compile time by [`skills!`](https://docs.rs/oxp-runtime/latest/oxp_runtime/macro.skills.html) and served as `skill://<name>/<path>` resources with
//! `skills/list` and `skills/get`.
//!
//! ```text
//! my-server/
//! ├── Cargo.toml
//! ├── src/main.rs          oxp_runtime::skills!();   (the `skills` folder beside Cargo.toml)
//! └── skills/
//!     └── pdf-forms/
//!         ├── SKILL.md     ---\nname: pdf-forms\ndescription: Fill PDF forms…\n---\n…
//!         └── scripts/fill.py
//! ```

use base64::Engine;
use sha2::{Digest, Sha256};

/// One file of a skill, embedded.
///
/// ```
/// let file = oxp_runtime::skill::SkillFile { path: "SKILL.md", bytes: b"---\n" };
/// assert_eq!(file.bytes.len(), 4);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SkillFile {
    /// Its path inside the skill, `/`-separated (`SKILL.md`, `scripts/fill.py`).
    pub path: &'static str,
    /// Its bytes.
    pub bytes: &'static [u8],
}

/// A skill, as [`skills!`](https://docs.rs/oxp-runtime/latest/oxp_runtime/macro.skills.html) embeds it.
///
/// ```
/// use oxp_runtime::skill::{SkillDescriptor, SkillFile};
///
/// static SKILL: SkillDescriptor = SkillDescriptor {
///     name: "greeting",
///     description: "Greet people warmly.",
///     frontmatter: r#"{"name": "greeting", "description": "Greet people warmly."}"#,
///     files: &[SkillFile { path: "SKILL.md", bytes: b"---\nname: greeting\ndescription: Greet people warmly.\n---\n" }],
///     source: "skills/greeting/SKILL.md",
/// };
/// let registry = oxp_runtime::Registry::builder().skill(&SKILL).build().unwrap();
/// assert_eq!(registry.skills()[0].uri(), "skill://greeting/SKILL.md");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SkillDescriptor {
    /// The frontmatter's `name`, which is also the folder's.
    pub name: &'static str,
    /// The frontmatter's `description`.
    pub description: &'static str,
    /// The whole frontmatter, as JSON text.
    pub frontmatter: &'static str,
    /// Every file, `SKILL.md` among them.
    pub files: &'static [SkillFile],
    /// Where its `SKILL.md` is in the author's crate, for errors.
    pub source: &'static str,
}

inventory::collect!(SkillDescriptor);

/// A skill that passed the registry's checks, with each file's digest.
///
/// ```
/// # use oxp_runtime::skill::{SkillDescriptor, SkillFile};
/// # static SKILL: SkillDescriptor = SkillDescriptor {
/// #     name: "greeting", description: "Greet people warmly.",
/// #     frontmatter: r#"{"name": "greeting", "description": "Greet people warmly."}"#,
/// #     files: &[SkillFile { path: "SKILL.md", bytes: b"hi" }], source: "skills/greeting/SKILL.md",
/// # };
/// let registry = oxp_runtime::Registry::builder().skill(&SKILL).build().unwrap();
/// let skill = &registry.skills()[0];
/// let (uri, digest, size) = skill.files().next().unwrap();
/// assert_eq!((uri.as_str(), size), ("skill://greeting/SKILL.md", 2));
/// assert!(digest.starts_with("sha256:"));
/// ```
#[derive(Debug)]
pub struct RegisteredSkill {
    descriptor: &'static SkillDescriptor,
    frontmatter: serde_json::Map<String, serde_json::Value>,
    /// Each file's URI and digest, in the descriptor's order.
    files: Vec<(String, String)>,
}

impl RegisteredSkill {
    /// `descriptor` as the registry accepted it, with its frontmatter read and each file's URI
    /// and digest worked out once.
    pub(crate) fn new(
        descriptor: &'static SkillDescriptor,
        frontmatter: serde_json::Map<String, serde_json::Value>,
    ) -> Self {
        let files = descriptor
            .files
            .iter()
            .map(|file| {
                let digest: String = Sha256::digest(file.bytes)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                (
                    file_uri(descriptor.name, file.path),
                    format!("sha256:{digest}"),
                )
            })
            .collect();
        RegisteredSkill {
            descriptor,
            frontmatter,
            files,
        }
    }

    /// What [`skills!`](https://docs.rs/oxp-runtime/latest/oxp_runtime/macro.skills.html) embedded.
    ///
    /// ```
    /// # use oxp_runtime::skill::{SkillDescriptor, SkillFile};
    /// # static SKILL: SkillDescriptor = SkillDescriptor {
    /// #     name: "greeting", description: "Greet people warmly.",
    /// #     frontmatter: r#"{"name": "greeting", "description": "Greet people warmly."}"#,
    /// #     files: &[SkillFile { path: "SKILL.md", bytes: b"hi" }], source: "skills/greeting/SKILL.md",
    /// # };
    /// let registry = oxp_runtime::Registry::builder().skill(&SKILL).build().unwrap();
    /// assert_eq!(registry.skills()[0].descriptor().name, "greeting");
    /// ```
    pub fn descriptor(&self) -> &'static SkillDescriptor {
        self.descriptor
    }

    /// The URI of its `SKILL.md`: `skill://<name>/SKILL.md`.
    ///
    /// ```
    /// # use oxp_runtime::skill::{SkillDescriptor, SkillFile};
    /// # static SKILL: SkillDescriptor = SkillDescriptor {
    /// #     name: "greeting", description: "Greet people warmly.",
    /// #     frontmatter: r#"{"name": "greeting", "description": "Greet people warmly."}"#,
    /// #     files: &[SkillFile { path: "SKILL.md", bytes: b"hi" }], source: "skills/greeting/SKILL.md",
    /// # };
    /// let registry = oxp_runtime::Registry::builder().skill(&SKILL).build().unwrap();
    /// assert_eq!(registry.skills()[0].uri(), "skill://greeting/SKILL.md");
    /// ```
    pub fn uri(&self) -> String {
        file_uri(self.descriptor.name, "SKILL.md")
    }

    /// Its frontmatter.
    #[doc(hidden)]
    pub fn frontmatter(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.frontmatter
    }

    /// Each file's URI, digest (`sha256:<hex>`) and size in bytes.
    ///
    /// ```
    /// # use oxp_runtime::skill::{SkillDescriptor, SkillFile};
    /// # static SKILL: SkillDescriptor = SkillDescriptor {
    /// #     name: "greeting", description: "Greet people warmly.",
    /// #     frontmatter: r#"{"name": "greeting", "description": "Greet people warmly."}"#,
    /// #     files: &[SkillFile { path: "SKILL.md", bytes: b"hi" }], source: "skills/greeting/SKILL.md",
    /// # };
    /// let registry = oxp_runtime::Registry::builder().skill(&SKILL).build().unwrap();
    /// assert_eq!(registry.skills()[0].files().count(), 1);
    /// ```
    pub fn files(&self) -> impl Iterator<Item = (&String, &String, u64)> {
        self.files
            .iter()
            .zip(self.descriptor.files)
            .map(|((uri, digest), file)| (uri, digest, file.bytes.len() as u64))
    }

    /// The file at `uri`, if it is one of this skill's.
    #[doc(hidden)]
    pub fn file(&self, uri: &str) -> Option<&'static SkillFile> {
        let position = self.files.iter().position(|(u, _)| u == uri)?;
        self.descriptor.files.get(position)
    }
}

/// A file's URI: the skill's name and the path, each segment percent-encoded where a URI needs
/// it.
#[doc(hidden)]
pub fn file_uri(name: &str, path: &str) -> String {
    let encode = |segment: &str| {
        let mut out = String::with_capacity(segment.len());
        for byte in segment.bytes() {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                out.push(byte as char);
            } else {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
        out
    };
    let path: Vec<String> = path.split('/').map(encode).collect();
    format!("skill://{}/{}", encode(name), path.join("/"))
}

/// The skill file at `uri` as a read answers it (MCP's `resources/read`, the playground's): its
/// text when it is UTF-8 and not an image or a PDF, its bytes (base64) otherwise.
#[doc(hidden)]
pub fn read(skills: &[RegisteredSkill], uri: &str) -> Option<crate::content::Resource> {
    use crate::content::Resource;
    let file = skills.iter().find_map(|skill| skill.file(uri))?;
    let mime_type = Some(media_type(file.path, file.bytes).to_owned());
    let binary = |t: &str| t.starts_with("image/") || t == "application/pdf";
    Some(match std::str::from_utf8(file.bytes) {
        Ok(text) if !mime_type.as_deref().is_some_and(binary) => Resource::Text {
            uri: uri.to_owned(),
            mime_type,
            text: text.to_owned(),
        },
        _ => Resource::Blob {
            uri: uri.to_owned(),
            mime_type,
            blob: base64::engine::general_purpose::STANDARD.encode(file.bytes),
        },
    })
}

/// The media type a file is served with, by its extension: a skill's files are text the agent
/// reads, or bytes it passes on.
#[doc(hidden)]
pub fn media_type(path: &str, bytes: &[u8]) -> &'static str {
    let extension = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref() {
        Some("md") => "text/markdown",
        Some("json") => "application/json",
        Some("py") => "text/x-python",
        Some("sh") => "text/x-shellscript",
        Some("html") => "text/html",
        Some("csv") => "text/csv",
        Some("yaml" | "yml") => "application/yaml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("pdf") => "application/pdf",
        _ if std::str::from_utf8(bytes).is_ok() => "text/plain",
        _ => "application/octet-stream",
    }
}
