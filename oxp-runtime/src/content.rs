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
//! use oxp_runtime::tool;
//!
//! /// Render a chart of the week's sales.
//! #[tool(toolkit = "Sales", version = "1.0.0")]
//! fn chart() -> Contents {
//!     let png: &[u8] = b"\x89PNG\r\n\x1a\n"; // the rendered chart
//!     Contents::new([
//!         Content::text("Sales rose 12% this week."),
//!         Content::image(png, "image/png"),
//!     ])
//! }
//!
//! let contents = chart();
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
//! use oxp_runtime::{__private::schemars, tool};
//!
//! #[derive(serde::Serialize, schemars::JsonSchema)]
//! # #[schemars(crate = "oxp_runtime::__private::schemars")]
//! struct Totals { units: u32 }
//!
//! /// The week's totals, with a chart.
//! #[tool(toolkit = "Sales", version = "1.0.0")]
//! fn totals() -> Contents<Totals> {
//!     Contents::new([Content::image(b"...", "image/png")]).with_structured(Totals { units: 42 })
//! }
//! # assert_eq!(totals().structured.unwrap().units, 42);
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
/// let block = Content::image(b"GIF89a", "image/gif");
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
    Image {
        /// The image's bytes, base64.
        data: String,
        /// Its media type (`image/png`).
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A sound.
    Audio {
        /// The sound's bytes, base64.
        data: String,
        /// Its media type (`audio/wav`).
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A link to a resource the client may fetch.
    ResourceLink {
        /// Where it is.
        uri: String,
        /// Its name.
        name: String,
        /// What it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Its media type.
        #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A resource, carried whole.
    Resource {
        /// The resource.
        resource: Resource,
    },
}

/// A resource carried in a result: text, or bytes (base64).
///
/// ```
/// use oxp_runtime::content::{Content, Resource};
/// let Content::Resource { resource } = Content::text_resource("file:///a.md", "text/markdown", "# A")
/// else { unreachable!() };
/// assert!(matches!(resource, Resource::Text { ref text, .. } if text == "# A"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Resource {
    /// A text resource.
    Text {
        /// Its URI.
        uri: String,
        /// Its media type.
        #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Its text.
        text: String,
    },
    /// A binary resource.
    Blob {
        /// Its URI.
        uri: String,
        /// Its media type.
        #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Its bytes, base64.
        blob: String,
    },
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
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

    /// An image from its bytes.
    ///
    /// ```
    /// let image = oxp_runtime::content::Content::image(b"GIF89a", "image/gif");
    /// assert_eq!(serde_json::to_value(image).unwrap()["data"], "R0lGODlh");
    /// ```
    pub fn image(bytes: impl AsRef<[u8]>, mime_type: impl Into<String>) -> Self {
        Content::Image {
            data: base64(bytes.as_ref()),
            mime_type: mime_type.into(),
        }
    }

    /// A sound from its bytes.
    ///
    /// ```
    /// let audio = oxp_runtime::content::Content::audio(b"RIFF", "audio/wav");
    /// assert_eq!(serde_json::to_value(audio).unwrap()["mimeType"], "audio/wav");
    /// ```
    pub fn audio(bytes: impl AsRef<[u8]>, mime_type: impl Into<String>) -> Self {
        Content::Audio {
            data: base64(bytes.as_ref()),
            mime_type: mime_type.into(),
        }
    }

    /// A link to a resource.
    ///
    /// ```
    /// let link = oxp_runtime::content::Content::link("file:///reports/q3.pdf", "Q3 report");
    /// assert_eq!(serde_json::to_value(link).unwrap()["type"], "resource_link");
    /// ```
    pub fn link(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Content::ResourceLink {
            uri: uri.into(),
            name: name.into(),
            description: None,
            mime_type: None,
        }
    }

    /// A text resource, carried whole.
    ///
    /// ```
    /// let notes = oxp_runtime::content::Content::text_resource("file:///notes.md", "text/markdown", "# Notes");
    /// assert_eq!(serde_json::to_value(notes).unwrap()["resource"]["text"], "# Notes");
    /// ```
    pub fn text_resource(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Content::Resource {
            resource: Resource::Text {
                uri: uri.into(),
                mime_type: Some(mime_type.into()),
                text: text.into(),
            },
        }
    }

    /// A binary resource from its bytes, carried whole.
    ///
    /// ```
    /// let pdf = oxp_runtime::content::Content::blob_resource("file:///q3.pdf", "application/pdf", b"%PDF");
    /// assert_eq!(serde_json::to_value(pdf).unwrap()["resource"]["blob"], "JVBERg==");
    /// ```
    pub fn blob_resource(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        bytes: impl AsRef<[u8]>,
    ) -> Self {
        Content::Resource {
            resource: Resource::Blob {
                uri: uri.into(),
                mime_type: Some(mime_type.into()),
                blob: base64(bytes.as_ref()),
            },
        }
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
    /// assert_eq!(Content::image(b"...", "image/png").notice(), "[image/png image]");
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
pub(crate) fn structured_schema(output: &serde_json::Value) -> Option<Option<&serde_json::Value>> {
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
            Content::image([1, 2, 3], "image/png"),
            Content::audio([4], "audio/wav"),
            Content::link("https://example.com/r", "r"),
            Content::text_resource("file:///a.txt", "text/plain", "hello"),
            Content::blob_resource("file:///b.bin", "application/octet-stream", [0xff]),
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
