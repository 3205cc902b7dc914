//! OpenAI: Chat Completions and Responses.
//!
//! Sources: function calling, <https://platform.openai.com/docs/guides/function-calling>
//! (tool definitions for both APIs, `tool_calls` with `arguments` as a JSON *string*, results as
//! `role: "tool"` messages / `function_call_output` items); structured outputs,
//! <https://platform.openai.com/docs/guides/structured-outputs#supported-schemas> (the strict
//! subset: every object closed, every property required, optional ones nullable; no
//! `oneOf`/`allOf`/`not`/`if`, no `patternProperties`, no open maps; at most 5 nesting levels).

use serde_json::{Map, Value, json};

use super::schema_walk::for_each_subschema;
use super::{DispatchError, Dispatcher, ExportError, Limits, ToolCall, ToolResult, export};
use crate::registry::{RegisteredTool, Registry};

const PROVIDER: &str = "OpenAI strict mode";

/// Keywords strict mode rejects (structured outputs, "Supported schemas").
const STRICT_UNSUPPORTED: [&str; 15] = [
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
];

/// Chat Completions `tools`: `{"type": "function", "function": {name, description, parameters}}`.
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::providers::{openai, Limits};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: Option<f64>) -> f64 { a + b.unwrap_or(0.0) }
///
/// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
/// let tools = openai::chat_tools(&registry, &Limits::default(), true).unwrap();
/// let parameters = &tools[0]["function"]["parameters"];
/// assert_eq!(tools[0]["function"]["strict"], true);
/// assert_eq!(parameters["required"], serde_json::json!(["a", "b"]));
/// assert_eq!(parameters["properties"]["b"]["type"], serde_json::json!(["number", "null"]));
/// ```
pub fn chat_tools(
    registry: &Registry,
    limits: &Limits,
    strict: bool,
) -> Result<Vec<Value>, Vec<ExportError>> {
    export(registry, limits, |tool| {
        Ok(json!({ "type": "function", "function": function(tool, strict)? }))
    })
}

/// Responses API `tools`: `{"type": "function", name, description, parameters, strict}`.
///
/// ```
/// use oxp_runtime::{tool, Registry};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
/// let tools = oxp_runtime::providers::openai::responses_tools(&registry, &Default::default(), false).unwrap();
/// assert_eq!(tools[0]["type"], "function");
/// assert_eq!(tools[0]["name"], "Calculator_Add");
/// ```
pub fn responses_tools(
    registry: &Registry,
    limits: &Limits,
    strict: bool,
) -> Result<Vec<Value>, Vec<ExportError>> {
    export(registry, limits, |tool| {
        let Value::Object(mut function) = function(tool, strict)? else {
            unreachable!("a function definition is an object")
        };
        function.insert("type".into(), "function".into());
        Ok(Value::Object(function))
    })
}

fn function(tool: &RegisteredTool, strict: bool) -> Result<Value, ExportError> {
    let definition = tool.definition();
    let input_schema = super::schema_walk::for_model(&definition.input_schema);
    let parameters = if strict {
        strict_schema(&input_schema).map_err(|features| ExportError::SchemaIncompatible {
            tool: definition.name.clone(),
            provider: PROVIDER,
            incompatible_features: features,
        })?
    } else {
        let mut schema = input_schema;
        // Function parameters must list `properties`, even when there are none.
        if let Value::Object(map) = &mut schema {
            map.entry("properties").or_insert_with(|| json!({}));
        }
        schema
    };
    // `strict` is stated either way: the Responses API takes a tool that omits it as strict,
    // and would refuse (or constrain) schemas that were not made strict.
    Ok(json!({
        "name": definition.name,
        "description": tool.description_for_models(),
        "parameters": parameters,
        "strict": strict,
    }))
}

/// The strict projection of a policy schema, or the features it cannot express.
///
/// ```
/// let schema = serde_json::json!({"type": "object", "additionalProperties": false,
///     "properties": {"n": {"type": "integer"}, "label": {"type": "string"}}, "required": ["n"]});
/// let strict = oxp_runtime::providers::openai::strict_schema(&schema).unwrap();
/// // Every property required (in the schema's order); the optional one may be null instead.
/// let mut required: Vec<&str> = strict["required"].as_array().unwrap().iter()
///     .map(|name| name.as_str().unwrap()).collect();
/// required.sort();
/// assert_eq!(required, ["label", "n"]);
/// ```
pub fn strict_schema(schema: &Value) -> Result<Value, Vec<String>> {
    let mut schema = schema.clone();
    let mut incompatible = Vec::new();
    if let Value::Object(map) = &mut schema {
        strict_object(map, &mut incompatible);
    }
    incompatible.sort();
    incompatible.dedup();
    if incompatible.is_empty() {
        Ok(schema)
    } else {
        Err(incompatible)
    }
}

fn strict_object(schema: &mut Map<String, Value>, incompatible: &mut Vec<String>) {
    for keyword in STRICT_UNSUPPORTED {
        if schema.contains_key(keyword) {
            incompatible.push(keyword.to_owned());
        }
    }
    // `oneOf` of distinct constants (a documented unit enum) means the same as `anyOf`;
    // any other `oneOf` does not, and strict mode has no `oneOf`.
    if let Some(Value::Array(branches)) = schema.get("oneOf") {
        let constants: Vec<&Value> = branches.iter().filter_map(|b| b.get("const")).collect();
        // Distinct anywhere in the list, not only next to each other (`dedup` would be that).
        let distinct = constants
            .iter()
            .enumerate()
            .all(|(i, c)| !constants[..i].contains(c));
        if constants.len() == branches.len() && distinct {
            let branches = schema.remove("oneOf").expect("just matched");
            schema.insert("anyOf".into(), branches);
        } else {
            incompatible.push("oneOf".to_owned());
        }
    }
    // An annotation strict mode does not take: with every property required, the server
    // applies the default when the model sends null.
    schema.remove("default");
    if schema.contains_key("properties") || schema.get("type") == Some(&json!("object")) {
        match schema.get("additionalProperties") {
            Some(Value::Object(_)) | Some(Value::Bool(true)) => {
                incompatible.push("additionalProperties (an open map)".to_owned());
            }
            _ => {
                schema.insert("additionalProperties".into(), Value::Bool(false));
            }
        }
        let required = crate::schema::required(schema);
        let properties = schema
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("properties is an object");
        let names: Vec<String> = properties.keys().cloned().collect();
        for (name, property) in properties.iter_mut() {
            if !required.contains(name) {
                make_nullable(property);
            }
        }
        schema.insert("required".into(), json!(names));
    }
    for_each_subschema(schema, |sub| strict_object(sub, incompatible));
}

/// `{"type": "T"}` → `{"type": ["T", "null"]}`; anything else → `{"anyOf": [S, {"type": "null"}]}`.
fn make_nullable(property: &mut Value) {
    let Value::Object(map) = property else { return };
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = t.clone();
            map.insert("type".into(), json!([t, "null"]));
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.push(Value::Null);
            }
        }
        Some(Value::Array(types)) => {
            if !types.iter().any(|t| t == "null") {
                types.push("null".into());
            }
        }
        _ => {
            let description = map.remove("description");
            let inner = std::mem::take(map);
            map.insert(
                "anyOf".into(),
                json!([Value::Object(inner), {"type": "null"}]),
            );
            if let Some(description) = description {
                map.insert("description".into(), description);
            }
        }
    }
}

/// Reads Chat Completions tool calls from a `message` (or a whole response: the first choice's
/// message). `arguments` is a JSON string the model wrote, so it may not parse: such a call
/// gets an error result asking the model to retry, and the tool does not run.
///
/// ```
/// let message = serde_json::json!({"role": "assistant", "tool_calls": [
///     {"id": "call_1", "type": "function", "function": {"name": "Calculator_Add", "arguments": "{\"a\": 2"}}
/// ]});
/// let calls = oxp_runtime::providers::openai::parse_chat_calls(&message).unwrap();
/// // The model's JSON did not parse: the call gets an error result, the tool does not run.
/// assert!(calls[0].arguments.is_err());
/// ```
pub fn parse_chat_calls(response: &Value) -> Result<Vec<ToolCall>, DispatchError> {
    let message = response.pointer("/choices/0/message").unwrap_or(response);
    let Some(calls) = message.get("tool_calls") else {
        return Ok(Vec::new());
    };
    let calls = calls
        .as_array()
        .ok_or_else(|| DispatchError::Malformed("`tool_calls` is not an array".into()))?;
    calls
        .iter()
        .map(|call| {
            let id = string(call, "/id")?;
            let name = string(call, "/function/name")?;
            let arguments = string(call, "/function/arguments")?;
            Ok(ToolCall {
                id,
                name,
                arguments: parse_arguments(&arguments),
            })
        })
        .collect()
}

/// Reads Responses API `function_call` items from a response's `output` (or a bare item list).
///
/// ```
/// let response = serde_json::json!({"output": [
///     {"type": "function_call", "call_id": "call_1", "name": "Calculator_Add", "arguments": "{\"a\": 2, \"b\": 3}"}
/// ]});
/// let calls = oxp_runtime::providers::openai::parse_responses_calls(&response).unwrap();
/// assert_eq!(calls[0].arguments, Ok(serde_json::json!({"a": 2, "b": 3})));
/// ```
pub fn parse_responses_calls(response: &Value) -> Result<Vec<ToolCall>, DispatchError> {
    let items = response
        .get("output")
        .unwrap_or(response)
        .as_array()
        .ok_or_else(|| DispatchError::Malformed("`output` is not an array".into()))?;
    items
        .iter()
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("function_call"))
        .map(|item| {
            Ok(ToolCall {
                id: string(item, "/call_id")?,
                name: string(item, "/name")?,
                arguments: parse_arguments(&string(item, "/arguments")?),
            })
        })
        .collect()
}

fn parse_arguments(arguments: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(format!("the arguments must be a JSON object, not {other}")),
        Err(e) => Err(e.to_string()),
    }
}

fn string(value: &Value, pointer: &str) -> Result<String, DispatchError> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            DispatchError::Malformed(format!("a tool call lacks the string `{pointer}`"))
        })
}

/// Runs a Chat Completions response's tool calls; returns the `role: "tool"` messages to append.
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::{call::Pipeline, providers::{openai, Dispatcher}};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap()));
/// let message = serde_json::json!({"role": "assistant", "tool_calls": [
///     {"id": "call_1", "type": "function", "function": {"name": "Calculator_Add", "arguments": "{\"a\": 2, \"b\": 3}"}}
/// ]});
/// let messages = openai::dispatch_chat(&dispatcher, &message).await.unwrap();
/// assert_eq!(messages[0]["role"], "tool");
/// # });
/// ```
pub async fn dispatch_chat(
    dispatcher: &Dispatcher,
    response: &Value,
) -> Result<Vec<Value>, DispatchError> {
    super::dispatch(dispatcher, response, parse_chat_calls, tool_message).await
}

/// A Chat Completions `role: "tool"` message: text only, so media are their notices.
fn tool_message(r: ToolResult) -> Value {
    json!({"role": "tool", "tool_call_id": r.id, "content": r.content})
}

/// Runs a Responses API response's function calls; returns the `function_call_output` items.
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::{call::Pipeline, providers::{openai, Dispatcher}};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap()));
/// let response = serde_json::json!({"output": [
///     {"type": "function_call", "call_id": "call_1", "name": "Calculator_Add", "arguments": "{\"a\": 2, \"b\": 3}"}
/// ]});
/// let items = openai::dispatch_responses(&dispatcher, &response).await.unwrap();
/// assert_eq!(items[0], serde_json::json!({"type": "function_call_output", "call_id": "call_1", "output": "5.0"}));
/// # });
/// ```
pub async fn dispatch_responses(
    dispatcher: &Dispatcher,
    response: &Value,
) -> Result<Vec<Value>, DispatchError> {
    super::dispatch(dispatcher, response, parse_responses_calls, call_output).await
}

/// A Responses API `function_call_output` item.
fn call_output(r: ToolResult) -> Value {
    // The Responses API takes images in a function's output (`input_image`); Chat
    // Completions' tool messages take text only, so there media are their notices. The
    // data URL is made of a checked block: an `image/…` type of restricted characters
    // (no `;` or `,` to end it early) and base64 data (`content::Content`'s rules).
    let id = r.id.clone();
    let output = r.with_images(
        |text| json!({"type": "input_text", "text": text}),
        |data, mime| {
            json!({"type": "input_image",
            "image_url": format!("data:{mime};base64,{data}")})
        },
    );
    json!({"type": "function_call_output", "call_id": id, "output": output})
}
