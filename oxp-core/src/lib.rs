//! The transport-neutral core of oxp: what a tool is and how a call runs, with no server
//! under it. Users depend on [`oxp-runtime`](https://docs.rs/oxp-runtime), which re-exports
//! every module here under the same path and adds the fronts (the OXP and MCP servers, the
//! process layer, OAuth, Prometheus text); this crate is what those fronts and the provider
//! adapters stand on.
//!
//! ```
//! use oxp_runtime::{tool, Registry};
//!
//! /// Add two numbers.
//! #[tool(toolkit = "Calculator", version = "1.0.0")]
//! async fn add(a: i64, b: i64) -> i64 {
//!     a + b
//! }
//!
//! let registry = Registry::builder().tool(add::TOOL).build().unwrap();
//! assert_eq!(registry.resolve("Calculator.Add").unwrap().definition().id, "Calculator.Add@1.0.0");
//! ```
//!
//! The modules, in the order data flows through them: [`protocol`] (wire types) →
//! [`registry`] (tools, versions, validators) → [`call`] (the one pipeline) → the fronts.
//! It never depends on an HTTP, MCP, TLS or JWT-crypto crate, nor on Prometheus'.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod ask;
pub mod authorization;
pub mod call;
pub mod content;
#[doc(hidden)]
pub mod context;
#[doc(hidden)]
pub mod descriptor;
#[doc(hidden)]
pub mod error;
pub mod idempotency;
pub mod lock;
#[doc(hidden)]
pub mod metrics;
#[doc(hidden)]
pub mod outcome;
#[doc(hidden)]
pub mod principal;
pub mod prompt;
pub mod protocol;
pub mod providers;
#[doc(hidden)]
pub mod random;
pub mod registry;
pub mod resource;
// The identity rules, shared with `#[tool]` (the file is `oxp-macros/src/rules.rs`); the macro
// alone names fns and crates.
#[allow(dead_code)]
#[doc(hidden)]
pub mod rules;
pub mod schema;
#[doc(hidden)]
pub mod seal;
#[doc(hidden)]
pub mod selection;
pub mod signals;
pub mod skill;
#[doc(hidden)]
pub mod striped;
pub mod tasks;
#[doc(hidden)]
pub mod time;
pub mod version;

pub use context::ToolContext;
pub use descriptor::{
    AuthorizationSpec, Input, Invoke, InvokeError, InvokeResult, ToolDescriptor, ToolHints,
};
pub use error::ToolError;
pub use registry::{Registry, RegistryBuilder, RegistryError};
pub use version::ToolVersion;

/// What `#[tool]` expands to reaches its dependencies only through here (as
/// `oxp_runtime::__private`). Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private;
