//! Anthropic Messages API.
//!
//! Source: tool use, <https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview>:
//! tools are `{name, description, input_schema}` with a JSON Schema object (no `$ref`: seed 003
//! §6, which the schema policy already guarantees); the model answers with `tool_use` content
//! blocks `{id, name, input}` (`input` an object, so never malformed JSON); results go back in one
//! `role: "user"` message of `tool_result` blocks `{tool_use_id, content, is_error}`.

use serde_json::{Value, json};

use super::{DispatchError, Dispatcher, ExportError, Limits, ToolCall, ToolResult, export};
use crate::registry::Registry;

/// Anthropic `tools`: `{name, description, input_schema}`.
///
/// ```
/// use oxp_runtime::{tool, Registry};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
/// let tools = oxp_runtime::providers::anthropic::tools(&registry, &Default::default()).unwrap();
/// assert_eq!(tools[0]["name"], "Calculator_Add");
/// assert_eq!(tools[0]["input_schema"]["required"], serde_json::json!(["a", "b"]));
/// ```
pub fn tools(registry: &Registry, limits: &Limits) -> Result<Vec<Value>, Vec<ExportError>> {
    export(registry, limits, |tool| {
        let definition = tool.definition();
        let mut exported = json!({
            "name": definition.name,
            "description": tool.description_for_models(),
            "input_schema": super::schema_walk::for_model(&definition.input_schema),
        });
        if !tool.examples().is_empty() {
            exported["input_examples"] = Value::from(tool.examples());
        }
        Ok(exported)
    })
}

/// Reads the `tool_use` blocks of a message's `content` (or a whole response).
///
/// ```
/// let message = serde_json::json!({"role": "assistant", "content": [
///     {"type": "text", "text": "Adding."},
///     {"type": "tool_use", "id": "toolu_1", "name": "Calculator_Add", "input": {"a": 2, "b": 3}}
/// ]});
/// let calls = oxp_runtime::providers::anthropic::parse_calls(&message).unwrap();
/// assert_eq!((calls[0].id.as_str(), calls[0].name.as_str()), ("toolu_1", "Calculator_Add"));
/// assert_eq!(calls[0].arguments, Ok(serde_json::json!({"a": 2, "b": 3})));
/// ```
pub fn parse_calls(response: &Value) -> Result<Vec<ToolCall>, DispatchError> {
    let content = response
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| DispatchError::Malformed("the message has no `content` array".into()))?;
    content
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
        .map(|block| {
            let field = |name: &str| {
                block
                    .get(name)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        DispatchError::Malformed(format!("a tool_use block lacks `{name}`"))
                    })
            };
            let arguments = super::object_arguments(block.get("input"), "input");
            Ok(ToolCall {
                id: field("id")?,
                name: field("name")?,
                arguments,
            })
        })
        .collect()
}

/// Runs a message's tool calls; returns the one `role: "user"` message of `tool_result` blocks
/// to append (or `None` when the message called no tool).
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::{call::Pipeline, providers::{anthropic, Dispatcher}};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap()));
/// let message = serde_json::json!({"role": "assistant", "content": [
///     {"type": "tool_use", "id": "toolu_1", "name": "Calculator_Add", "input": {"a": 2, "b": 3}}
/// ]});
/// let reply = anthropic::dispatch(&dispatcher, &message).await.unwrap().unwrap();
/// assert_eq!(reply["content"][0]["tool_use_id"], "toolu_1");
/// assert_eq!(reply["content"][0]["content"], "5.0");
/// # });
/// ```
pub async fn dispatch(
    dispatcher: &Dispatcher,
    response: &Value,
) -> Result<Option<Value>, DispatchError> {
    let blocks = super::dispatch(dispatcher, response, parse_calls, tool_result).await?;
    Ok(super::user_message("content", blocks))
}

/// A `tool_result` block.
fn tool_result(r: ToolResult) -> Value {
    let (id, is_error) = (r.id.clone(), r.is_error);
    // Images in the result are image blocks beside its text; other media have only
    // their notice in the text.
    let content = r.with_images(
        |text| json!({"type": "text", "text": text}),
        |data, mime| {
            json!({"type": "image",
            "source": {"type": "base64", "media_type": mime, "data": data}})
        },
    );
    let mut block = json!({"type": "tool_result", "tool_use_id": id, "content": content});
    if is_error {
        block["is_error"] = Value::Bool(true);
    }
    block
}
