//! What a tool returns besides a JSON value: images, audio, links to resources and resources
//! themselves, alone or mixed with text and a structured value.
//!
//! A tool that returns [`Contents`] is answered over each front in that front's own terms:
//! - **MCP**: the blocks are the result's `content`, its structured value the
//!   `structuredContent` (and the structured value's schema the tool's `outputSchema`);
//! - **OXP**: one JSON value, `{"content": [...], "structuredContent": ...}`, its blocks in MCP's
//!   shape (`{"type": "image", "data": "<base64>", "mimeType": "image/png"}`);
//! - **providers**: the format's own image part where the provider has one in a tool result,
//!   a short text notice where it has none (see [`providers`](crate::providers)).
//!
//! ```
//! use oxp_runtime::content::{Content, Contents};
//! use oxp_runtime::{tool, ToolError};
//!
//! /// Render a chart of the week's sales.
//! #[tool(toolkit = "Sales", version = "1.0.0")]
//! fn chart() -> Result<Contents, ToolError> {
//!     let png: &[u8] = b"\x89PNG\r\n\x1a\n"; // the rendered chart
//!     Ok(Contents::new([
//!         Content::text("Sales rose 12% this week."),
//!         // Checked: an image's media type is `image/…` (a `ContentError` otherwise).
//!         Content::image(png, "image/png")?,
//!     ]))
//! }
//!
//! let contents = chart().unwrap();
//! assert_eq!(contents.content.len(), 2);
//! let value = serde_json::to_value(&contents).unwrap();
//! assert_eq!(value["content"][1]["type"], "image");
//! assert_eq!(value["content"][1]["data"], "iVBORw0KGgo=");
//! ```
//!
//! A structured value goes beside the blocks, with its own schema:
//!
//! ```
//! use oxp_runtime::content::{Content, Contents};
//! use oxp_runtime::{__private::schemars, tool, ToolError};
//!
//! #[derive(serde::Serialize, schemars::JsonSchema)]
//! # #[schemars(crate = "oxp_runtime::__private::schemars")]
//! struct Totals { units: u32 }
//!
//! /// The week's totals, with a chart.
//! #[tool(toolkit = "Sales", version = "1.0.0")]
//! fn totals() -> Result<Contents<Totals>, ToolError> {
//!     let chart = Content::image(b"...", "image/png")?;
//!     Ok(Contents::new([chart]).with_structured(Totals { units: 42 }))
//! }
//! # assert_eq!(totals().unwrap().structured.unwrap().units, 42);
//! ```

use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The key that marks a tool's output schema as [`Contents`]: fronts read it to answer in
/// blocks. A vendor keyword, which JSON Schema validators ignore.
pub(crate) const CONTENTS_MARK: &str = "x-oxp-contents";

/// One block of a tool's result, in MCP's shape. Binary data is base64 in `data` / `blob`:
/// build blocks with the constructors, which encode it.
///
/// ```
/// use oxp_runtime::content::Content;
/// let block = Content::image(b"GIF89a", "image/gif").unwrap();
/// assert!(matches!(block, Content::Image { ref mime_type, .. } if mime_type == "image/gif"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[schemars(
    description = "One block of the result: text, an image, audio, a resource link or a resource."
)]
#[non_exhaustive]
pub enum Content {
    /// Text for the model.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    #[non_exhaustive]
    Image {
        /// The image's bytes, base64.
        #[serde(deserialize_with = "checked::base64")]
        data: String,
        /// Its media type (`image/png`).
        #[serde(rename = "mimeType", deserialize_with = "checked::image_type")]
        mime_type: String,
    },
    /// A sound.
    #[non_exhaustive]
    Audio {
        /// The sound's bytes, base64.
        #[serde(deserialize_with = "checked::base64")]
        data: String,
        /// Its media type (`audio/wav`).
        #[serde(rename = "mimeType", deserialize_with = "checked::audio_type")]
        mime_type: String,
    },
    /// A link to a resource the client may fetch.
    #[non_exhaustive]
    ResourceLink {
        /// Where it is.
        #[serde(deserialize_with = "checked::link")]
        uri: String,
        /// Its name.
        name: String,
        /// What it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Its media type.
        #[serde(
            rename = "mimeType",
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "checked::some_media_type"
        )]
        mime_type: Option<String>,
    },
    /// A resource, carried whole.
    #[non_exhaustive]
    Resource {
        /// The resource.
        resource: Resource,
    },
}

/// A resource carried in a result: text, or bytes (base64).
///
/// ```
/// use oxp_runtime::content::{Content, Resource};
/// let Content::Resource { resource, .. } =
///     Content::text_resource("file:///a.md", "text/markdown", "# A").unwrap()
/// else { unreachable!() };
/// assert!(matches!(resource, Resource::Text { ref text, .. } if text == "# A"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Resource {
    /// A text resource.
    #[non_exhaustive]
    Text {
        /// Its URI.
        uri: String,
        /// Its media type.
        #[serde(
            rename = "mimeType",
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "checked::some_media_type"
        )]
        mime_type: Option<String>,
        /// Its text.
        text: String,
    },
    /// A binary resource.
    #[non_exhaustive]
    Blob {
        /// Its URI.
        uri: String,
        /// Its media type.
        #[serde(
            rename = "mimeType",
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "checked::some_media_type"
        )]
        mime_type: Option<String>,
        /// Its bytes, base64.
        #[serde(deserialize_with = "checked::base64")]
        blob: String,
    },
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Why a block cannot be made: a media type that is not one, or not of the block's kind; data
/// that is not base64; a link a host cannot open.
///
/// ```
/// use oxp_runtime::content::Content;
/// let error = Content::image(b"<svg/>", "text/html").unwrap_err();
/// assert_eq!(error.to_string(), "an image's media type must be image/…, not `text/html`");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentError(String);

impl std::fmt::Display for ContentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ContentError {}

/// The schemes a resource link may use: those a host can open for its user.
///
/// ```
/// use oxp_runtime::content::{Content, LINK_SCHEMES};
/// assert!(LINK_SCHEMES.contains(&"https"));
/// assert!(Content::link("mailto:a@example.com", "mail").is_err());
/// ```
pub const LINK_SCHEMES: [&str; 3] = ["https", "http", "file"];

/// The rules every block keeps, whether made by a constructor or read from JSON: one place, so
/// that what reaches a client (a data URL built from a media type, a link a host opens) was
/// checked on every path.
mod checked {
    use super::ContentError;
    use serde::{Deserialize, Deserializer};

    /// A media type, `type/subtype` with RFC 6838's restricted names and no parameters, of
    /// `kind` when one is given (`image`).
    pub(super) fn media_type(value: &str, kind: Option<&str>) -> Result<(), ContentError> {
        let name = |part: &str| {
            let mut chars = part.chars();
            part.len() <= 127
                && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
                && chars.all(|c| c.is_ascii_alphanumeric() || "!#$&-^_.+".contains(c))
        };
        let well_formed = value
            .split_once('/')
            .is_some_and(|(top, sub)| name(top) && name(sub));
        let problem = match kind {
            _ if !well_formed => format!("`{value}` is not a media type (type/subtype)"),
            Some(kind)
                if !value
                    .split_once('/')
                    .is_some_and(|(top, _)| top.eq_ignore_ascii_case(kind)) =>
            {
                let article = if kind == "image" {
                    "an image"
                } else {
                    "a sound"
                };
                format!("{article}'s media type must be {kind}/…, not `{value}`")
            }
            _ => return Ok(()),
        };
        Err(ContentError(problem))
    }

    /// Standard base64, padded.
    pub(super) fn base64_text(value: &str) -> Result<(), ContentError> {
        use base64::Engine as _;
        let mut buffer = [0u8; 768];
        // In pieces (4 characters make 3 bytes), so that checking allocates nothing.
        let pieces = value.as_bytes().chunks(1024);
        let count = pieces.len();
        for (i, piece) in pieces.enumerate() {
            let whole = piece.len() % 4 == 0 || i + 1 == count;
            let decoded =
                base64::engine::general_purpose::STANDARD.decode_slice(piece, &mut buffer);
            if !whole || decoded.is_err() || (i + 1 < count && piece.contains(&b'=')) {
                return Err(ContentError("the data is not base64".into()));
            }
        }
        Ok(())
    }

    /// A URI of one of [`LINK_SCHEMES`](super::LINK_SCHEMES), with no spaces or control
    /// characters.
    pub(super) fn link_uri(value: &str) -> Result<(), ContentError> {
        let scheme = value.split_once(':').map(|(scheme, _)| scheme);
        let known = scheme.is_some_and(|scheme| {
            super::LINK_SCHEMES
                .iter()
                .any(|known| known.eq_ignore_ascii_case(scheme))
        });
        if !known {
            return Err(ContentError(format!(
                "a resource link must be {} (a host can open it), not `{value}`",
                super::LINK_SCHEMES.join(", ")
            )));
        }
        if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ContentError(format!(
                "a resource link has no spaces or control characters: `{value}`"
            )));
        }
        Ok(())
    }

    fn read<'de, D: Deserializer<'de>>(
        deserializer: D,
        check: impl FnOnce(&str) -> Result<(), ContentError>,
    ) -> Result<String, D::Error> {
        let value = String::deserialize(deserializer)?;
        check(&value).map_err(serde::de::Error::custom)?;
        Ok(value)
    }

    pub(super) fn base64<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        read(d, base64_text)
    }

    pub(super) fn image_type<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        read(d, |value| media_type(value, Some("image")))
    }

    pub(super) fn audio_type<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        read(d, |value| media_type(value, Some("audio")))
    }

    pub(super) fn link<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        read(d, link_uri)
    }

    pub(super) fn some_media_type<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<String>, D::Error> {
        read(d, |value| media_type(value, None)).map(Some)
    }
}

impl Content {
    /// A text block.
    ///
    /// ```
    /// let text = oxp_runtime::content::Content::text("done");
    /// assert_eq!(serde_json::to_value(text).unwrap(), serde_json::json!({"type": "text", "text": "done"}));
    /// ```
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }

    /// An image from its bytes; its media type must be `image/…` (a data URL is built from it).
    ///
    /// ```
    /// use oxp_runtime::content::Content;
    /// let image = Content::image(b"GIF89a", "image/gif").unwrap();
    /// assert_eq!(serde_json::to_value(image).unwrap()["data"], "R0lGODlh");
    /// assert!(Content::image(b"GIF89a", "image/gif;base64,AAAA").is_err());
    /// ```
    pub fn image(
        bytes: impl AsRef<[u8]>,
        mime_type: impl Into<String>,
    ) -> Result<Self, ContentError> {
        let mime_type = mime_type.into();
        checked::media_type(&mime_type, Some("image"))?;
        Ok(Content::Image {
            data: base64(bytes.as_ref()),
            mime_type,
        })
    }

    /// A sound from its bytes; its media type must be `audio/…`.
    ///
    /// ```
    /// use oxp_runtime::content::Content;
    /// let audio = Content::audio(b"RIFF", "audio/wav").unwrap();
    /// assert_eq!(serde_json::to_value(audio).unwrap()["mimeType"], "audio/wav");
    /// assert!(Content::audio(b"RIFF", "image/png").is_err());
    /// ```
    pub fn audio(
        bytes: impl AsRef<[u8]>,
        mime_type: impl Into<String>,
    ) -> Result<Self, ContentError> {
        let mime_type = mime_type.into();
        checked::media_type(&mime_type, Some("audio"))?;
        Ok(Content::Audio {
            data: base64(bytes.as_ref()),
            mime_type,
        })
    }

    /// A link to a resource, which a host may open for its user: its URI must be one of
    /// [`LINK_SCHEMES`] (`https`, `http`, `file`) — not `javascript:`, not `data:`. A resource
    /// this server serves under another scheme (a [`#[resource]`](https://docs.rs/oxp-runtime/latest/oxp_runtime/attr.resource.html) at
    /// `notes://today`) cannot be linked: carry it whole with
    /// [`text_resource`](Self::text_resource) or [`blob_resource`](Self::blob_resource), whose
    /// URI is not checked (the client is handed the contents, and opens nothing).
    ///
    /// ```
    /// use oxp_runtime::content::Content;
    /// let link = Content::link("file:///reports/q3.pdf", "Q3 report").unwrap();
    /// assert_eq!(serde_json::to_value(link).unwrap()["type"], "resource_link");
    /// assert!(Content::link("javascript:alert(1)", "Q3 report").is_err());
    /// // A resource of this server's own scheme is carried whole, not linked.
    /// assert!(Content::link("notes://today", "Today").is_err());
    /// assert!(Content::text_resource("notes://today", "text/plain", "buy milk").is_ok());
    /// ```
    pub fn link(uri: impl Into<String>, name: impl Into<String>) -> Result<Self, ContentError> {
        let uri = uri.into();
        checked::link_uri(&uri)?;
        Ok(Content::ResourceLink {
            uri,
            name: name.into(),
            description: None,
            mime_type: None,
        })
    }

    /// A text resource, carried whole.
    ///
    /// ```
    /// use oxp_runtime::content::Content;
    /// let notes = Content::text_resource("file:///notes.md", "text/markdown", "# Notes").unwrap();
    /// assert_eq!(serde_json::to_value(notes).unwrap()["resource"]["text"], "# Notes");
    /// ```
    pub fn text_resource(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Result<Self, ContentError> {
        let mime_type = mime_type.into();
        checked::media_type(&mime_type, None)?;
        Ok(Content::Resource {
            resource: Resource::Text {
                uri: uri.into(),
                mime_type: Some(mime_type),
                text: text.into(),
            },
        })
    }

    /// A binary resource from its bytes, carried whole.
    ///
    /// ```
    /// use oxp_runtime::content::Content;
    /// let pdf = Content::blob_resource("file:///q3.pdf", "application/pdf", b"%PDF").unwrap();
    /// assert_eq!(serde_json::to_value(pdf).unwrap()["resource"]["blob"], "JVBERg==");
    /// ```
    pub fn blob_resource(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        bytes: impl AsRef<[u8]>,
    ) -> Result<Self, ContentError> {
        let mime_type = mime_type.into();
        checked::media_type(&mime_type, None)?;
        Ok(Content::Resource {
            resource: Resource::Blob {
                uri: uri.into(),
                mime_type: Some(mime_type),
                blob: base64(bytes.as_ref()),
            },
        })
    }

    /// The bytes this block takes in a result sent on (base64 as it is): what a result cap
    /// counts.
    pub(crate) fn weight(&self) -> usize {
        let optional = |text: &Option<String>| text.as_ref().map_or(0, String::len);
        match self {
            Content::Text { text } => text.len(),
            Content::Image { data, mime_type } | Content::Audio { data, mime_type } => {
                data.len() + mime_type.len()
            }
            Content::ResourceLink {
                uri,
                name,
                description,
                mime_type,
            } => uri.len() + name.len() + optional(description) + optional(mime_type),
            Content::Resource {
                resource:
                    Resource::Text {
                        uri,
                        mime_type,
                        text: data,
                    }
                    | Resource::Blob {
                        uri,
                        mime_type,
                        blob: data,
                    },
            } => uri.len() + optional(mime_type) + data.len(),
        }
    }

    /// What a format without a place for this block says instead: the text itself, or a
    /// short notice naming the block (never its data).
    ///
    /// ```
    /// use oxp_runtime::content::Content;
    /// assert_eq!(Content::image(b"...", "image/png").unwrap().notice(), "[image/png image]");
    /// assert_eq!(Content::text("hi").notice(), "hi");
    /// ```
    pub fn notice(&self) -> String {
        match self {
            Content::Text { text } => text.clone(),
            Content::Image { mime_type, .. } => format!("[{mime_type} image]"),
            Content::Audio { mime_type, .. } => format!("[{mime_type} audio]"),
            Content::ResourceLink { uri, name, .. } => format!("[{name}: {uri}]"),
            Content::Resource {
                resource: Resource::Text { text, .. },
            } => text.clone(),
            Content::Resource {
                resource: Resource::Blob { uri, mime_type, .. },
            } => format!(
                "[{} resource {uri}]",
                mime_type.as_deref().unwrap_or("binary")
            ),
        }
    }
}

/// A tool's result as blocks, with an optional structured value of type `S` beside them.
///
/// Its schema (the tool's output schema) is an object with `content` and, unless `S` is `()`,
/// `structuredContent`; see the [module docs](self) for what each front makes of it.
///
/// ```
/// use oxp_runtime::content::{Content, Contents};
/// let contents = Contents::new([Content::text("done")]);
/// assert_eq!(
///     serde_json::to_value(&contents).unwrap(),
///     serde_json::json!({"content": [{"type": "text", "text": "done"}]})
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(
    extend("x-oxp-contents" = true),
    description = "The result as content blocks, with an optional structured value beside them."
)]
#[serde(bound(serialize = "S: Serialize", deserialize = "S: Deserialize<'de>"))]
pub struct Contents<S = ()> {
    /// The blocks, in order.
    pub content: Vec<Content>,
    /// The structured value, if any.
    #[serde(
        rename = "structuredContent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub structured: Option<S>,
}

impl Contents {
    /// Blocks without a structured value.
    ///
    /// ```
    /// use oxp_runtime::content::{Content, Contents};
    /// let contents: Contents = Contents::new([Content::text("one"), Content::text("two")]);
    /// assert_eq!(contents.content.len(), 2);
    /// ```
    pub fn new(content: impl IntoIterator<Item = Content>) -> Self {
        Contents {
            content: content.into_iter().collect(),
            structured: None,
        }
    }
}

impl<S> Contents<S> {
    /// With a structured value beside the blocks.
    ///
    /// ```
    /// use oxp_runtime::content::{Content, Contents};
    /// let contents = Contents::new([Content::text("3 items")]).with_structured(3);
    /// assert_eq!(serde_json::to_value(&contents).unwrap()["structuredContent"], 3);
    /// ```
    #[must_use]
    pub fn with_structured<T>(self, structured: T) -> Contents<T> {
        Contents {
            content: self.content,
            structured: Some(structured),
        }
    }
}

/// A published output schema's parts when it is [`Contents`]': the structured value's schema
/// (`None` when the tool returns blocks only).
#[doc(hidden)]
pub fn structured_schema(output: &serde_json::Value) -> Option<Option<&serde_json::Value>> {
    if output.get(CONTENTS_MARK) != Some(&serde_json::Value::Bool(true)) {
        return None;
    }
    Some(output.pointer("/properties/structuredContent"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_in_mcp_s_shape() {
        let contents = Contents::new([
            Content::text("a"),
            Content::image([1, 2, 3], "image/png").unwrap(),
            Content::audio([4], "audio/wav").unwrap(),
            Content::link("https://example.com/r", "r").unwrap(),
            Content::text_resource("file:///a.txt", "text/plain", "hello").unwrap(),
            Content::blob_resource("file:///b.bin", "application/octet-stream", [0xff]).unwrap(),
        ]);
        let value = serde_json::to_value(&contents).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"content": [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "AQID", "mimeType": "image/png"},
                {"type": "audio", "data": "BA==", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "https://example.com/r", "name": "r"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"}},
                {"type": "resource", "resource": {"uri": "file:///b.bin", "mimeType": "application/octet-stream", "blob": "/w=="}},
            ]})
        );
        let back: Contents = serde_json::from_value(value).unwrap();
        assert_eq!(back, contents);
    }

    /// A block read from JSON keeps the constructors' rules: what a client is sent (a data URL
    /// built from the media type, a link it opens) was checked on every path.
    #[test]
    fn blocks_read_from_json_are_checked_like_constructed_ones() {
        use serde_json::json;
        let read = |block: serde_json::Value| serde_json::from_value::<Content>(block);
        assert!(read(json!({"type": "image", "data": "AQID", "mimeType": "image/png"})).is_ok());
        for bad in [
            json!({"type": "image", "data": "not base64!", "mimeType": "image/png"}),
            json!({"type": "image", "data": "AQI", "mimeType": "image/png"}),
            json!({"type": "image", "data": "AQ==AQID", "mimeType": "image/png"}),
            json!({"type": "image", "data": "AQID", "mimeType": "text/html"}),
            json!({"type": "image", "data": "AQID", "mimeType": "image/png;base64,AAAA"}),
            json!({"type": "image", "data": "AQID", "mimeType": "image/png\"><script>"}),
            json!({"type": "audio", "data": "AQID", "mimeType": "image/png"}),
            json!({"type": "resource_link", "uri": "javascript:alert(1)", "name": "x"}),
            json!({"type": "resource_link", "uri": "data:text/html,hi", "name": "x"}),
            json!({"type": "resource_link", "uri": "https://a b", "name": "x"}),
            json!({"type": "resource", "resource": {"uri": "file:///b", "blob": "%%%%"}}),
            json!({"type": "resource", "resource": {"uri": "file:///b", "mimeType": "x", "text": ""}}),
        ] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
        // Base64 long enough to be checked in several pieces.
        let long = base64(&[5u8; 3000]);
        assert!(read(json!({"type": "image", "data": long, "mimeType": "image/png"})).is_ok());
        let broken = format!("{}!{}", &long[..2000], &long[2001..]);
        assert!(read(json!({"type": "image", "data": broken, "mimeType": "image/png"})).is_err());
    }

    #[test]
    fn the_schema_is_marked_and_names_the_structured_part() {
        let blocks = crate::schema::finalize_output(crate::schema::output_schema::<Contents>())
            .unwrap()
            .unwrap();
        assert_eq!(structured_schema(&blocks), Some(None), "{blocks}");
        let with = crate::schema::finalize_output(crate::schema::output_schema::<Contents<u8>>())
            .unwrap()
            .unwrap();
        let structured = structured_schema(&with).unwrap().unwrap();
        assert_eq!(structured["type"], "integer", "{with}");
        let plain = crate::schema::finalize_output(crate::schema::output_schema::<u8>())
            .unwrap()
            .unwrap();
        assert_eq!(structured_schema(&plain), None);
    }
}
