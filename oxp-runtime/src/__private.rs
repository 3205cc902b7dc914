//! The paths `#[tool]`'s expansion uses. Each helper is generic only where it must touch the
//! user's types; everything else is in the runtime, compiled once.

pub use futures_util::future::BoxFuture;
pub use inventory;
pub use schemars;
pub use serde;
pub use serde_json;

pub use crate::context::ToolContext;
pub use crate::descriptor::{
    AuthorizationSpec, Input, Invoke, InvokeError, InvokeResult, ToolDescriptor,
};
pub use crate::error::ToolError;
pub use crate::schema::{input_schema, output_schema};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// What a tool parameter must be. The blanket impl is the whole definition; the trait exists so
/// that a wrong type gets a message in our words.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool parameter",
    label = "this type needs `Deserialize` and `JsonSchema`",
    note = "a #[tool] parameter is read from JSON and described by a JSON Schema: add \
            `#[derive(serde::Deserialize, schemars::JsonSchema)]` to the type, or use a type that has both"
)]
pub trait ToolParameter {}
impl<T: DeserializeOwned + schemars::JsonSchema> ToolParameter for T {}

/// What a tool's value must be.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a tool",
    label = "this type needs `Serialize` and `JsonSchema`",
    note = "a #[tool] value is sent as JSON and described by a JSON Schema: add \
            `#[derive(serde::Serialize, schemars::JsonSchema)]` to the type, or return a type that has both"
)]
pub trait ToolOutput {}
impl<T: Serialize + schemars::JsonSchema> ToolOutput for T {}

/// What a tool's error type must be.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's error type",
    label = "this type does not convert into `ToolError`",
    note = "return `Result<T, ToolError>`, or an error type that implements `std::error::Error` \
            (it converts into `ToolError` with its text in `developer_message`)"
)]
pub trait IntoToolError: Into<ToolError> {}
impl<E: Into<ToolError>> IntoToolError for E {}

/// Compile-time checks, called from a fn the expansion never runs.
pub const fn assert_parameter<T: ToolParameter + ?Sized>() {}
/// See [`assert_parameter`].
pub const fn assert_output<T: ToolOutput + ?Sized>() {}
/// See [`assert_parameter`].
pub const fn assert_error<E: IntoToolError>() {}

/// Reads the generated input struct from the validated input.
pub fn decode<T: DeserializeOwned>(input: Value) -> Result<T, InvokeError> {
    serde_json::from_value(input).map_err(InvokeError::Input)
}

/// A tool that returns a value.
pub fn value<T: Serialize>(value: T) -> InvokeResult {
    serde_json::to_value(value)
        .map(Some)
        .map_err(InvokeError::Output)
}

/// A tool that returns nothing.
pub fn unit(_: ()) -> InvokeResult {
    Ok(None)
}

/// A tool that returns `Result<T, E>`.
pub fn result<T: Serialize, E: Into<ToolError>>(result: Result<T, E>) -> InvokeResult {
    value(result.map_err(|e| InvokeError::Tool(e.into()))?)
}

/// A tool that returns `Result<(), E>`.
pub fn unit_result<E: Into<ToolError>>(result: Result<(), E>) -> InvokeResult {
    result
        .map(|()| None)
        .map_err(|e| InvokeError::Tool(e.into()))
}
