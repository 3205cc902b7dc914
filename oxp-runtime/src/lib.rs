//! Write agent tools as plain Rust functions; serve them over OXP 1.0.
//!
//! ```
//! use oxp_runtime::{tool, Registry};
//!
//! /// Add two numbers.
//! #[tool(toolkit = "Calculator", version = "1.0.0")]
//! async fn add(
//!     /// The first addend.
//!     a: i64,
//!     /// The second addend.
//!     b: i64,
//! ) -> i64 {
//!     a + b
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // The function is still a function…
//! assert_eq!(add(2, 3).await, 5);
//! // …and a registered, versioned tool with a schema.
//! let registry = Registry::builder().tool(add::TOOL).build().unwrap();
//! let definition = registry.resolve("Calculator.Add").unwrap().definition();
//! assert_eq!(definition.id, "Calculator.Add@1.0.0");
//! assert_eq!(definition.name, "Calculator_Add");
//! assert_eq!(definition.input_schema["properties"]["a"]["description"], "The first addend.");
//! # });
//! ```
//!
//! The modules, in the order data flows through them: [`protocol`] (wire types) →
//! [`registry`] (tools, versions, validators) → [`call`] (the one pipeline) → the fronts.
//!
//! **The [`guide`]** teaches the rest, a page per topic, each built around a compiled example:
//! [writing tools](guide::writing_tools), [asking mid-call](guide::asking),
//! [tasks](guide::tasks), [resources, prompts and skills](guide::resources_prompts_skills),
//! [versioning](guide::versioning), [embedding](guide::embedding),
//! [model providers](guide::providers), [agent frameworks](guide::agents),
//! [testing](guide::testing), [MCP](guide::mcp) and [deploying](guide::deploying).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(any(feature = "rig", feature = "adk"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "rig", feature = "adk"))))]
pub mod agents;
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod app;
#[doc(inline)]
pub use oxp_core::ask;
#[doc(inline)]
pub use oxp_core::authorization;
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod card;
extern crate self as oxp_runtime;
#[doc(inline)]
pub use oxp_core::call;
#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
pub mod client;
#[doc(inline)]
pub use oxp_core::content;
#[cfg(feature = "server")]
mod fronts;
pub mod guide;
#[cfg(feature = "server")]
mod hs256;
#[doc(inline)]
pub use oxp_core::idempotency;
#[doc(inline)]
pub use oxp_core::lock;
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub mod mcp;
#[cfg(feature = "server")]
mod metrics_text;
#[cfg(feature = "oauth")]
#[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
pub mod oauth;
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub mod otel;
#[doc(inline)]
pub use oxp_core::prompt;
#[doc(inline)]
pub use oxp_core::protocol;
#[doc(inline)]
pub use oxp_core::providers;
#[doc(inline)]
pub use oxp_core::registry;
#[doc(inline)]
pub use oxp_core::resource;
#[doc(inline)]
pub use oxp_core::schema;
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod server;
#[doc(inline)]
pub use oxp_core::signals;
#[doc(inline)]
pub use oxp_core::skill;
#[doc(inline)]
pub use oxp_core::tasks;
#[cfg(feature = "testing")]
pub mod testing;
#[doc(inline)]
pub use oxp_core::version;

#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub use metrics_text::MetricsText;

// The core's own modules, under the paths the fronts name them by (`crate::seal::…`); not
// every set of features uses every one. `rules` is `oxp-macros/src/rules.rs`, shared with
// `#[tool]`.
#[allow(unused_imports)]
use oxp_core::{
    context, descriptor, error, metrics, outcome, principal, random, rules, seal, striped, time,
};

#[cfg(feature = "server")]
pub use app::serve;

/// The one-line `main` that also publishes this binary's MCP Server Card: [`serve()`], with
/// the card filled from the calling crate's `Cargo.toml` ([`server_card!`]) and served at
/// `/mcp/server-card` and in `/.well-known/ai-catalog.json`; `<bin> card` prints it.
///
/// ```no_run
/// #[tokio::main]
/// async fn main() {
///     oxp_runtime::serve!().await
/// }
/// ```
#[cfg(feature = "server")]
#[macro_export]
macro_rules! serve {
    () => {
        $crate::app::serve_with($crate::server_card!())
    };
}
pub use context::ToolContext;
pub use descriptor::{
    AuthorizationSpec, Input, Invoke, InvokeError, InvokeResult, ToolDescriptor, ToolHints,
};
pub use error::ToolError;
#[doc(no_inline)]
pub use registry::{Registry, RegistryBuilder, RegistryError};
#[doc(no_inline)]
pub use version::ToolVersion;

#[doc = include_str!("tool_attribute.md")]
pub use oxp_macros::tool;

#[doc = include_str!("resource_attribute.md")]
pub use oxp_macros::resource;

#[doc = include_str!("prompt_attribute.md")]
pub use oxp_macros::prompt;

#[doc = include_str!("skills_macro.md")]
pub use oxp_macros::skills;

/// The serde `#[tool]` reads inputs and writes results with, so that one dependency is enough:
/// derive through it, and tell the derive where it is.
///
/// ```
/// use oxp_runtime::{schemars, serde, tool};
///
/// /// A point.
/// #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
/// #[serde(crate = "oxp_runtime::serde")]
/// #[schemars(crate = "oxp_runtime::schemars")]
/// struct Point { x: i64, y: i64 }
///
/// /// Move a point right.
/// #[tool(toolkit = "Geometry", version = "1.0.0")]
/// fn right(point: Point) -> Point { Point { x: point.x + 1, ..point } }
/// # assert_eq!(right(Point { x: 1, y: 2 }).x, 2);
/// ```
pub use serde;

/// The schemars `#[tool]` describes inputs and results with (see [`serde`] for deriving
/// through it).
pub use schemars;

/// serde_json, for the values tools read and return.
pub use serde_json;

/// What `#[tool]` expands to reaches its dependencies only through here, so a user's Cargo.toml
/// needs `oxp-runtime` and nothing else. Not a public API: it changes without notice.
#[doc(hidden)]
pub use oxp_core::__private;
