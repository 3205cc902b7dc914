//! The MCP Server Card (SEP-2127): the public document that tells a client, before it
//! connects, what this server is and where its MCP endpoint is — identity and transport only,
//! never its tools or capabilities (those a client lists once connected). The server answers it
//! at `GET /mcp/server-card` (the location MCP reserves beside its endpoint) and at the older
//! `/.well-known/mcp/server-card.json`, and points at it from the domain's AI Catalog,
//! `/.well-known/ai-catalog.json`; `<bin> card` prints it.
//!
//! The card describes the user's binary, not oxp, so its fields are read in the user's crate:
//! [`server_card!`](crate::server_card) takes the package's name, version, description,
//! repository and homepage from `Cargo.toml`, and [`serve!`](crate::serve!) serves it.
//!
//! ```
//! let card = oxp_runtime::server_card!()
//!     .name("com.example/calculator")
//!     .description("Adds and divides numbers.")
//!     .remote("https://tools.example.com/mcp");
//! let json = card.to_json().unwrap();
//! assert_eq!(json["name"], "com.example/calculator");
//! assert_eq!(json["remotes"][0]["type"], "streamable-http");
//! ```

use std::fmt;

use serde_json::{Map, Value, json};

/// The media type of a Server Card.
pub const MEDIA_TYPE: &str = "application/mcp-server-card+json";

/// The media type of an AI Catalog.
pub const CATALOG_MEDIA_TYPE: &str = "application/ai-catalog+json";

/// The v1 Server Card schema every card names in `$schema`.
pub const SCHEMA: &str =
    "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json";

/// Characters in a card's `description` and `title`: the v1 schema's `maxLength`.
pub const MAX_TEXT_LEN: usize = 100;

/// What a Server Card says, before it is checked and written out.
///
/// Empty strings count as unset, so that `env!("CARGO_PKG_HOMEPAGE")` of a package without a
/// homepage sets nothing.
///
/// ```
/// use oxp_runtime::card::ServerCard;
///
/// let card = ServerCard::new("calculator", "1.2.0")
///     .description("Adds numbers.")
///     .repository("https://github.com/acme/calculator");
/// // No name given: the namespace comes from the repository, as the MCP registry names
/// // GitHub projects.
/// assert_eq!(card.to_json().unwrap()["name"], "io.github.acme/calculator");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerCard {
    package: String,
    version: String,
    name: Option<String>,
    description: Option<String>,
    title: Option<String>,
    website_url: Option<String>,
    repository: Option<String>,
    icons: Vec<(String, Option<String>)>,
    remote: Option<String>,
}

/// Why a card cannot be served: the field and what to do about it.
///
/// ```
/// let card = oxp_runtime::card::ServerCard::new("calculator", "1.0.0").name("com.example/calc");
/// let error = card.to_json().unwrap_err();
/// assert_eq!(error.field, "description");
/// assert!(error.to_string().contains("Cargo.toml"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CardError {
    /// The card's field (`name`, `description`, …).
    pub field: &'static str,
    /// What is wrong, ending in the fix.
    pub problem: String,
}

impl fmt::Display for CardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the server card's `{}` {}", self.field, self.problem)
    }
}

impl std::error::Error for CardError {}

fn set(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

impl ServerCard {
    /// A card for the package `package` (its Cargo name) at `version`; see
    /// [`server_card!`](crate::server_card) for one filled from `Cargo.toml`.
    ///
    /// ```
    /// let card = oxp_runtime::card::ServerCard::new("calculator", "1.0.0");
    /// assert!(card.to_json().is_err(), "a card needs a description and a name's namespace");
    /// ```
    pub fn new(package: &str, version: &str) -> ServerCard {
        ServerCard {
            package: package.trim().to_owned(),
            version: version.trim().to_owned(),
            ..ServerCard::default()
        }
    }

    /// The reverse-DNS name, `namespace/server` (`com.example/calculator`). Without it the
    /// namespace comes from the repository (`github.com/acme/…` → `io.github.acme`), else from
    /// the website's or the MCP endpoint's host reversed, and the server part is the package.
    ///
    /// ```
    /// let card = oxp_runtime::card::ServerCard::new("calc", "1.0.0").description("Adds.");
    /// let card = card.name("com.example/calculator");
    /// assert_eq!(card.to_json().unwrap()["name"], "com.example/calculator");
    /// ```
    #[must_use]
    pub fn name(mut self, name: &str) -> ServerCard {
        self.name = set(name);
        self
    }

    /// What the server does, in at most [`MAX_TEXT_LEN`] characters (`Cargo.toml`'s
    /// `description`).
    ///
    /// ```
    /// let card = oxp_runtime::card::ServerCard::new("calc", "1.0.0").name("com.example/calc");
    /// assert_eq!(card.description("Adds.").to_json().unwrap()["description"], "Adds.");
    /// ```
    #[must_use]
    pub fn description(mut self, description: &str) -> ServerCard {
        self.description = set(description);
        self
    }

    /// A display name, at most [`MAX_TEXT_LEN`] characters.
    ///
    /// ```
    /// let card = oxp_runtime::server_card!().name("com.example/calc").description("Adds.");
    /// assert_eq!(card.title("Calculator").to_json().unwrap()["title"], "Calculator");
    /// ```
    #[must_use]
    pub fn title(mut self, title: &str) -> ServerCard {
        self.title = set(title);
        self
    }

    /// The project's website (`Cargo.toml`'s `homepage`): an `http(s)` URL.
    ///
    /// ```
    /// let card = oxp_runtime::server_card!().name("com.example/calc").description("Adds.");
    /// let card = card.website_url("https://example.com/calc");
    /// assert_eq!(card.to_json().unwrap()["websiteUrl"], "https://example.com/calc");
    /// ```
    #[must_use]
    pub fn website_url(mut self, url: &str) -> ServerCard {
        self.website_url = set(url);
        self
    }

    /// The source repository (`Cargo.toml`'s `repository`): an `http(s)` URL; its host names
    /// the card's `repository.source` (`github`, `gitlab`, …).
    ///
    /// ```
    /// let card = oxp_runtime::server_card!().name("com.example/calc").description("Adds.");
    /// let json = card.repository("https://gitlab.com/acme/calc").to_json().unwrap();
    /// assert_eq!(json["repository"], serde_json::json!({"url": "https://gitlab.com/acme/calc", "source": "gitlab"}));
    /// ```
    #[must_use]
    pub fn repository(mut self, url: &str) -> ServerCard {
        self.repository = set(url);
        self
    }

    /// An icon: an `http(s)` or `data:` URL and, if the URL does not say it, its media type.
    ///
    /// ```
    /// let card = oxp_runtime::server_card!().name("com.example/calc").description("Adds.");
    /// let json = card.icon("https://example.com/calc.png", Some("image/png")).to_json().unwrap();
    /// assert_eq!(json["icons"][0]["mimeType"], "image/png");
    /// ```
    #[must_use]
    pub fn icon(mut self, src: &str, mime_type: Option<&str>) -> ServerCard {
        self.icons
            .push((src.trim().to_owned(), mime_type.and_then(set)));
        self
    }

    /// The MCP endpoint's public URL (streamable HTTP). A server fills it from its public URL
    /// (`OXP_PUBLIC_URL` + `/mcp`) when it is not given; without either the card has no
    /// `remotes`.
    ///
    /// ```
    /// let card = oxp_runtime::server_card!().name("com.example/calc").description("Adds.");
    /// let json = card.remote("https://tools.example.com/mcp").to_json().unwrap();
    /// assert_eq!(json["remotes"][0]["type"], "streamable-http");
    /// assert_eq!(json["remotes"][0]["url"], "https://tools.example.com/mcp");
    /// ```
    #[must_use]
    pub fn remote(mut self, url: &str) -> ServerCard {
        self.remote = set(url).map(|url| url.trim_end_matches('/').to_owned());
        self
    }

    /// The endpoint under `public_url` (the server's own, with `/mcp`), unless one was given.
    pub(crate) fn with_public_url(mut self, public_url: Option<&str>) -> ServerCard {
        if self.remote.is_none() {
            self.remote = public_url.map(|url| format!("{}/mcp", url.trim_end_matches('/')));
        }
        self
    }

    /// The card as the v1 schema has it, or the first field that cannot be served.
    ///
    /// ```
    /// let card = oxp_runtime::server_card!().name("com.example/calc").description("Adds.");
    /// let json = card.to_json().unwrap();
    /// assert_eq!(json["$schema"], oxp_runtime::card::SCHEMA);
    /// assert!(json.get("tools").is_none() && json.get("capabilities").is_none());
    /// ```
    pub fn to_json(&self) -> Result<Value, CardError> {
        let error = |field, problem: String| CardError { field, problem };
        let mut card = Map::new();
        card.insert("$schema".into(), SCHEMA.into());
        card.insert("name".into(), self.full_name()?.into());
        if self.version.is_empty() || self.version.chars().count() > 255 {
            return Err(error(
                "version",
                "must be a version of at most 255 characters: the package's `version`".into(),
            ));
        }
        card.insert("version".into(), self.version.clone().into());
        let Some(description) = &self.description else {
            return Err(error(
                "description",
                format!(
                    "is missing: set `description` in Cargo.toml (at most {MAX_TEXT_LEN} characters), or call `ServerCard::description`"
                ),
            ));
        };
        card.insert(
            "description".into(),
            text(
                "description",
                description,
                "set a shorter `description` in Cargo.toml, or call `ServerCard::description`",
            )?
            .into(),
        );
        if let Some(title) = &self.title {
            card.insert(
                "title".into(),
                text(
                    "title",
                    title,
                    "call `ServerCard::title` with a shorter one",
                )?
                .into(),
            );
        }
        if let Some(url) = &self.website_url {
            card.insert("websiteUrl".into(), web_url("websiteUrl", url)?.into());
        }
        if let Some(url) = &self.repository {
            let url = web_url("repository", url)?;
            let source = match host(url) {
                "github.com" => "github",
                "gitlab.com" => "gitlab",
                "bitbucket.org" => "bitbucket",
                "codeberg.org" => "codeberg",
                other => other,
            };
            card.insert("repository".into(), json!({"url": url, "source": source}));
        }
        if !self.icons.is_empty() {
            let mut icons = Vec::new();
            for (src, mime_type) in &self.icons {
                if !src.starts_with("data:") {
                    web_url("icons", src)?;
                }
                let mut icon = json!({"src": src});
                if let Some(mime_type) = mime_type {
                    icon["mimeType"] = mime_type.clone().into();
                }
                icons.push(icon);
            }
            card.insert("icons".into(), icons.into());
        }
        if let Some(url) = &self.remote {
            let url = web_url("remotes", url)?;
            #[cfg_attr(not(feature = "mcp"), allow(unused_mut))]
            let mut remote = json!({"type": "streamable-http", "url": url});
            // Every revision `/mcp` serves, so that a client picks one before it connects.
            #[cfg(feature = "mcp")]
            {
                let revisions = rmcp::model::ProtocolVersion::KNOWN_VERSIONS.iter();
                remote["supportedProtocolVersions"] =
                    revisions.map(|v| v.as_str().to_owned()).collect();
            }
            card.insert("remotes".into(), json!([remote]));
        }
        Ok(Value::Object(card))
    }

    /// The domain's AI Catalog, with this card as its one entry: by `card_url` where the card
    /// is reachable, else inline.
    ///
    /// ```
    /// let card = oxp_runtime::server_card!().name("com.example/calc").description("Adds.");
    /// let catalog = card.catalog(Some("https://example.com/mcp/server-card")).unwrap();
    /// assert_eq!(catalog["entries"][0]["identifier"], "urn:air:example.com:mcp:calc");
    /// assert_eq!(catalog["entries"][0]["url"], "https://example.com/mcp/server-card");
    /// ```
    pub fn catalog(&self, card_url: Option<&str>) -> Result<Value, CardError> {
        let card = self.to_json()?;
        let name = card["name"].as_str().unwrap_or_default();
        let (namespace, server) = name.split_once('/').unwrap_or((name, name));
        let publisher: Vec<&str> = namespace.split('.').rev().collect();
        let mut entry = json!({
            "identifier": format!("urn:air:{}:mcp:{server}", publisher.join(".")),
            "type": MEDIA_TYPE,
        });
        match card_url {
            Some(url) => entry["url"] = url.into(),
            None => entry["data"] = card,
        }
        Ok(json!({"specVersion": "1.0", "entries": [entry]}))
    }

    /// `namespace/server`: the given name, or one made from the package and where it lives.
    fn full_name(&self) -> Result<String, CardError> {
        let problem = |problem: String| CardError {
            field: "name",
            problem,
        };
        let name = match &self.name {
            Some(name) => name.clone(),
            None => {
                let namespace = self
                    .repository
                    .as_deref()
                    .and_then(forge_namespace)
                    .or_else(|| self.website_url.as_deref().and_then(reversed_host))
                    .or_else(|| self.remote.as_deref().and_then(reversed_host))
                    .ok_or_else(|| problem("cannot be made: it is reverse-DNS, `namespace/server`, and its namespace comes from `repository` or `homepage` in Cargo.toml or OXP_PUBLIC_URL; set one, or call `ServerCard::name(\"com.example/calculator\")`".into()))?;
                format!("{namespace}/{}", self.package)
            }
        };
        let well_formed = name.split_once('/').is_some_and(|(namespace, server)| {
            !namespace.is_empty()
                && !server.is_empty()
                && namespace
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                && server
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        });
        let len = name.chars().count();
        if !well_formed || !(3..=200).contains(&len) {
            return Err(problem(format!(
                "`{name}` is not a reverse-DNS name: write `namespace/server` with one `/`, letters, digits, `.` and `-` before it (and `_` after), at most 200 characters, e.g. `com.example/calculator`"
            )));
        }
        Ok(name)
    }
}

/// `text` when it fits the schema's 1 to [`MAX_TEXT_LEN`] characters.
fn text<'a>(field: &'static str, text: &'a str, fix: &str) -> Result<&'a str, CardError> {
    let len = text.chars().count();
    if len > MAX_TEXT_LEN {
        return Err(CardError {
            field,
            problem: format!("is {len} characters; the v1 schema allows {MAX_TEXT_LEN}: {fix}"),
        });
    }
    Ok(text)
}

/// `url` when it is an absolute `http(s)` URL with a host and no spaces.
fn web_url<'a>(field: &'static str, url: &'a str) -> Result<&'a str, CardError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(rest) if !host(url).is_empty() && !rest.chars().any(char::is_whitespace) => Ok(url),
        _ => Err(CardError {
            field,
            problem: format!(
                "`{url}` is not an absolute http(s) URL: write it whole, e.g. `https://example.com/…`"
            ),
        }),
    }
}

/// The host of an `http(s)` URL, lowercase, without port or user.
fn host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    authority.split(':').next().unwrap_or_default()
}

/// `https://tools.example.com/…` → `com.example.tools`.
fn reversed_host(url: &str) -> Option<String> {
    let host = host(url).to_ascii_lowercase();
    let usable = host.contains('.')
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    usable.then(|| host.split('.').rev().collect::<Vec<_>>().join("."))
}

/// A forge project's namespace: `github.com/acme/…` → `io.github.acme` (the MCP registry's
/// spelling for GitHub), `gitlab.com/acme/…` → `com.gitlab.acme`; another host, reversed.
fn forge_namespace(url: &str) -> Option<String> {
    let reversed = reversed_host(url)?;
    let owner = url
        .split_once("://")?
        .1
        .split('/')
        .nth(1)
        .filter(|owner| {
            !owner.is_empty() && owner.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        .map(str::to_ascii_lowercase);
    match (host(url), owner) {
        ("github.com", Some(owner)) => Some(format!("io.github.{owner}")),
        ("gitlab.com" | "bitbucket.org" | "codeberg.org", Some(owner)) => {
            Some(format!("{reversed}.{owner}"))
        }
        ("github.com" | "gitlab.com" | "bitbucket.org" | "codeberg.org", None) => None,
        _ => Some(reversed),
    }
}

/// A [`ServerCard`] filled from the calling crate's `Cargo.toml`: its package name, version,
/// description, repository and homepage (read by `env!` where the macro is written, so in the
/// user's binary, not in oxp).
///
/// ```
/// let card = oxp_runtime::server_card!().name("com.example/calc").description("Adds.");
/// assert_eq!(card.to_json().unwrap()["version"], env!("CARGO_PKG_VERSION"));
/// ```
#[macro_export]
macro_rules! server_card {
    () => {
        $crate::card::ServerCard::new(
            ::core::env!("CARGO_PKG_NAME"),
            ::core::env!("CARGO_PKG_VERSION"),
        )
        .description(::core::env!("CARGO_PKG_DESCRIPTION"))
        .repository(::core::env!("CARGO_PKG_REPOSITORY"))
        .website_url(::core::env!("CARGO_PKG_HOMEPAGE"))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card() -> ServerCard {
        ServerCard::new("calc", "1.0.0").description("Adds.")
    }

    #[test]
    fn names_come_from_where_the_package_lives() {
        let name = |card: ServerCard| card.to_json().map(|c| c["name"].clone());
        assert_eq!(
            name(card().repository("https://github.com/Acme/calc.git")).unwrap(),
            "io.github.acme/calc"
        );
        assert_eq!(
            name(card().repository("https://git.example.org/x/calc")).unwrap(),
            "org.example.git/calc"
        );
        assert_eq!(
            name(card().website_url("https://tools.example.com")).unwrap(),
            "com.example.tools/calc"
        );
        assert_eq!(
            name(card().remote("https://mcp.example.com:8443/mcp")).unwrap(),
            "com.example.mcp/calc"
        );
        let none = card().to_json().unwrap_err();
        assert_eq!(none.field, "name");
        let bad = card().name("calculator").to_json().unwrap_err();
        assert!(
            bad.to_string()
                .contains("`calculator` is not a reverse-DNS name"),
            "{bad}"
        );
    }

    #[test]
    fn fields_the_schema_refuses_are_errors_naming_the_fix() {
        let card = card().name("com.example/calc");
        let long = "x".repeat(101);
        for (broken, field, says) in [
            (
                card.clone().description(&long),
                "description",
                "is 101 characters",
            ),
            (card.clone().title(&long), "title", "is 101 characters"),
            (
                card.clone().website_url("example.com"),
                "websiteUrl",
                "not an absolute",
            ),
            (
                card.clone().repository("https://"),
                "repository",
                "not an absolute",
            ),
            (
                card.clone().remote("https://a b/mcp"),
                "remotes",
                "not an absolute",
            ),
            (
                card.clone().icon("javascript:x", None),
                "icons",
                "not an absolute",
            ),
        ] {
            let error = broken.to_json().unwrap_err();
            assert_eq!(error.field, field);
            assert!(error.to_string().contains(says), "{error}");
        }
        // An unset field stays unset: `env!` of an empty Cargo.toml key sets nothing.
        let json = card.website_url("").repository(" ").to_json().unwrap();
        assert!(json.get("websiteUrl").is_none() && json.get("repository").is_none());
    }
}
