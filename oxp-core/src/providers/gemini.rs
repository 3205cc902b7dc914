//! Google Gemini (`generateContent`).
//!
//! Sources: function calling, <https://ai.google.dev/gemini-api/docs/function-calling>, and the
//! `Schema` object, <https://ai.google.dev/api/caching#Schema> (an OpenAPI 3.0 subset: `type` is
//! one of STRING, NUMBER, INTEGER, BOOLEAN, ARRAY, OBJECT; `nullable` instead of type arrays;
//! `enum` for strings only; no `$ref`, `const`, `additionalProperties`). Seed 003 §6 adds: no
//! `oneOf`/`anyOf`, no parallel calls guarantee, and calls without ids (§3.2: generate
//! `call_{timestamp}_{name}`). Results go back as `functionResponse` parts with `output` or
//! `error` (§3.3).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::{DispatchError, Dispatcher, ExportError, Limits, ToolCall, ToolResult, export};
use crate::content::Content;
use crate::registry::Registry;

const PROVIDER: &str = "Gemini";

/// Keywords with no counterpart in Gemini's schema.
const UNSUPPORTED: [&str; 13] = [
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "propertyNames",
    "prefixItems",
    "contains",
    "uniqueItems",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];
/// Keywords kept as they are.
const KEPT: [&str; 13] = [
    "description",
    "title",
    "required",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "minProperties",
    "maxProperties",
    "default",
];
/// Formats Gemini documents, by type.
const FORMATS: [(&str, &str); 5] = [
    ("INTEGER", "int32"),
    ("INTEGER", "int64"),
    ("NUMBER", "float"),
    ("NUMBER", "double"),
    ("STRING", "date-time"),
];

/// Gemini `tools`: one `{"functionDeclarations": [{name, description, parameters}]}`.
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::providers::{gemini, Limits};
///
/// /// Count to n.
/// #[tool(toolkit = "Math", version = "1.0.0")]
/// async fn count(n: Option<u8>) -> Vec<u8> { (0..n.unwrap_or(3)).collect() }
///
/// let registry = Registry::builder().tool(count::TOOL).build().unwrap();
/// let tools = gemini::tools(&registry, &Limits::default()).unwrap();
/// let n = &tools[0]["functionDeclarations"][0]["parameters"]["properties"]["n"];
/// assert_eq!(n["type"], "INTEGER");
/// assert_eq!(n["maximum"], 255);
/// ```
pub fn tools(registry: &Registry, limits: &Limits) -> Result<Vec<Value>, Vec<ExportError>> {
    let declarations = export(registry, limits, |tool| {
        let definition = tool.definition();
        let parameters = schema(&super::schema_walk::for_model(&definition.input_schema)).map_err(
            |features| ExportError::SchemaIncompatible {
                tool: definition.name.clone(),
                provider: PROVIDER,
                incompatible_features: features,
            },
        )?;
        let mut declaration = json!({
            "name": definition.name,
            "description": tool.description_for_models(),
        });
        // A tool without parameters declares none (an empty OBJECT is refused).
        if parameters["properties"]
            .as_object()
            .is_some_and(|p| !p.is_empty())
        {
            declaration["parameters"] = parameters;
        }
        Ok(declaration)
    })?;
    Ok(vec![json!({ "functionDeclarations": declarations })])
}

/// The Gemini projection of a policy schema, or the features it cannot express.
///
/// ```
/// let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
/// let projected = oxp_runtime::providers::gemini::schema(&schema).unwrap();
/// assert_eq!(projected["type"], "OBJECT");
/// assert_eq!(projected["properties"]["n"]["type"], "INTEGER");
/// ```
pub fn schema(schema: &Value) -> Result<Value, Vec<String>> {
    let mut incompatible = Vec::new();
    let projected = project(schema, &mut incompatible);
    incompatible.sort();
    incompatible.dedup();
    if incompatible.is_empty() {
        Ok(projected)
    } else {
        Err(incompatible)
    }
}

fn project(schema: &Value, incompatible: &mut Vec<String>) -> Value {
    let Value::Object(source) = schema else {
        // `true` (anything) has no counterpart.
        incompatible.push(format!("the schema `{schema}`"));
        return Value::Null;
    };
    let mut source = source.clone();
    let mut out = Map::new();
    // A union reported as incompatible has no single type either; say so once.
    let reported = incompatible.len();
    unions(&mut source, &mut out, incompatible);
    let kind = kind(&source, &mut out, incompatible, reported);
    keywords(&source, kind.as_deref(), &mut out, incompatible);
    Value::Object(out)
}

/// Nullable, unions, enums of constants and `const`, rewritten in `source` to what Gemini
/// has (`nullable`, a string `enum`), or reported.
fn unions(
    source: &mut Map<String, Value>,
    out: &mut Map<String, Value>,
    incompatible: &mut Vec<String>,
) {
    // `anyOf: [S, {"type": "null"}]` is exactly S with `nullable: true`; any other union is not.
    if crate::schema::collapse_nullable(source) {
        out.insert("nullable".into(), Value::Bool(true));
    } else if source.contains_key("anyOf") {
        incompatible.push("anyOf".to_owned());
    }
    // A documented unit enum (`oneOf` of string constants) is a string enum; the variants'
    // docs move into the description so the model still reads them.
    if let Some(Value::Array(branches)) = source.remove("oneOf") {
        let values: Vec<&str> = branches
            .iter()
            .filter_map(|b| b.get("const").and_then(Value::as_str))
            .collect();
        if values.len() == branches.len() {
            let notes: Vec<String> = branches
                .iter()
                .filter_map(|b| {
                    let value = b.get("const")?.as_str()?;
                    let doc = b.get("description")?.as_str()?;
                    Some(format!("{value}: {doc}"))
                })
                .collect();
            if !notes.is_empty() {
                let description = source
                    .get("description")
                    .and_then(Value::as_str)
                    .map(|d| format!("{d} ({})", notes.join("; ")))
                    .unwrap_or_else(|| notes.join("; "));
                source.insert("description".into(), description.into());
            }
            source.insert("type".into(), "string".into());
            source.insert("enum".into(), json!(values));
        } else {
            incompatible.push("oneOf".to_owned());
        }
    }
    if let Some(constant) = source.remove("const") {
        match constant {
            Value::String(_) => {
                source.insert("enum".into(), json!([constant]));
                source.entry("type").or_insert_with(|| "string".into());
            }
            _ => incompatible.push("const (not a string)".to_owned()),
        }
    }
}

/// Gemini's `type` for `source` (upper case), set in `out`; `None` when it has none, reported
/// unless an `enum` sets it or a union already reported says so (`reported`: the problems
/// before this schema's).
fn kind(
    source: &Map<String, Value>,
    out: &mut Map<String, Value>,
    incompatible: &mut Vec<String>,
    reported: usize,
) -> Option<String> {
    let kind = match source.get("type") {
        Some(Value::String(t)) => Some(t.to_ascii_uppercase()),
        Some(Value::Array(types)) => {
            let named: Vec<&str> = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            if types.iter().any(|t| t == "null") {
                out.insert("nullable".into(), Value::Bool(true));
            }
            match named[..] {
                [one] => Some(one.to_ascii_uppercase()),
                _ => {
                    incompatible.push("a union of types".to_owned());
                    None
                }
            }
        }
        _ => None,
    };
    let kind = kind.or_else(|| {
        source
            .contains_key("properties")
            .then(|| "OBJECT".to_owned())
    });
    match &kind {
        Some(kind) if kind == "NULL" => incompatible.push("type null".to_owned()),
        Some(kind) => {
            out.insert("type".into(), Value::String(kind.clone()));
        }
        // An `enum` sets its own type below; anything else untyped ("any value") has no
        // counterpart.
        None if source.contains_key("enum") || incompatible.len() > reported => {}
        None => incompatible.push("a schema without a type (any value)".to_owned()),
    }
    kind
}

/// Every other keyword of `source`, of a schema of type `kind`: kept, projected (properties,
/// items), translated (`examples`), dropped as an annotation, or reported.
fn keywords(
    source: &Map<String, Value>,
    kind: Option<&str>,
    out: &mut Map<String, Value>,
    incompatible: &mut Vec<String>,
) {
    for (key, value) in source {
        let key = key.as_str();
        match key {
            "type" => {}
            "properties" => {
                let properties: Map<String, Value> = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, sub)| (name.clone(), project(sub, incompatible)))
                    .collect();
                out.insert("properties".into(), Value::Object(properties));
            }
            "items" => {
                out.insert("items".into(), project(value, incompatible));
            }
            "enum" => {
                if value
                    .as_array()
                    .is_some_and(|v| v.iter().all(Value::is_string))
                {
                    out.insert("enum".into(), value.clone());
                    out.insert("type".into(), "STRING".into());
                } else {
                    incompatible.push("enum (of non-strings)".to_owned());
                }
            }
            "format" => {
                let format = value.as_str().unwrap_or_default();
                let kind = kind.unwrap_or_default();
                if FORMATS.contains(&(kind, format)) {
                    out.insert("format".into(), value.clone());
                }
                // Other formats are assertions Gemini cannot take; the server still checks
                // them when the call arrives.
            }
            // Gemini objects carry only their declared properties, which is what `false`
            // says; an open map (`additionalProperties: {…}`) has no counterpart.
            "additionalProperties" if value == &Value::Bool(false) => {}
            "additionalProperties" => {
                incompatible.push("additionalProperties (an open map)".to_owned())
            }
            "$ref" | "$defs" | "definitions" => incompatible.push(key.to_owned()),
            "examples" => {
                if let Some(first) = value.as_array().and_then(|e| e.first()) {
                    out.insert("example".into(), first.clone());
                }
            }
            _ if KEPT.contains(&key) => {
                out.insert(key.to_owned(), value.clone());
            }
            _ if UNSUPPORTED.contains(&key) => incompatible.push(key.to_owned()),
            // Annotations with no Gemini counterpart (`$comment`, `readOnly`, …) carry no
            // constraint; anything else is reported rather than dropped.
            "$comment" | "readOnly" | "writeOnly" | "deprecated" | "$id" => {}
            other => incompatible.push(other.to_owned()),
        }
    }
}

/// Reads `functionCall` parts from a response (the first candidate) or a bare `content`.
/// Gemini's calls carry no id (unless the API adds one); one is generated after seed 003 §3.2's
/// `call_{timestamp}_{name}`, with a random part after the timestamp: the ids are the calls'
/// idempotency keys, so two responses parsed in the same millisecond must not share one.
///
/// ```
/// let response = serde_json::json!({"candidates": [{"content": {"role": "model", "parts": [
///     {"functionCall": {"name": "Calculator_Add", "args": {"a": 2, "b": 3}}}
/// ]}}]});
/// let calls = oxp_runtime::providers::gemini::parse_calls(&response).unwrap();
/// assert_eq!(calls[0].name, "Calculator_Add");
/// assert!(calls[0].id.ends_with("_Calculator_Add"), "a generated id: {}", calls[0].id);
/// ```
pub fn parse_calls(response: &Value) -> Result<Vec<ToolCall>, DispatchError> {
    let content = response
        .pointer("/candidates/0/content")
        .unwrap_or(response);
    let parts = content
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| DispatchError::Malformed("the content has no `parts` array".into()))?;
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    parts
        .iter()
        .filter_map(|part| part.get("functionCall"))
        .map(|call| {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| DispatchError::Malformed("a functionCall lacks `name`".into()))?
                .to_owned();
            let id = match call.get("id").and_then(Value::as_str) {
                Some(id) => id.to_owned(),
                None => {
                    let unique = crate::random::uuid_v4().simple();
                    format!("call_{timestamp}_{}_{name}", &unique[..16])
                }
            };
            // A call without `args` takes no arguments.
            let arguments = match call.get("args") {
                None => Ok(json!({})),
                args => super::object_arguments(args, "args"),
            };
            Ok(ToolCall {
                id,
                name,
                arguments,
            })
        })
        .collect()
}

/// Runs a response's function calls; returns the `role: "user"` content of `functionResponse`
/// parts to append (or `None` when it called no function).
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::{call::Pipeline, providers::{gemini, Dispatcher}};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap()));
/// let response = serde_json::json!({"candidates": [{"content": {"role": "model", "parts": [
///     {"functionCall": {"name": "Calculator_Add", "args": {"a": 2, "b": 3}}}
/// ]}}]});
/// let reply = gemini::dispatch(&dispatcher, &response).await.unwrap().unwrap();
/// assert_eq!(reply["parts"][0]["functionResponse"]["name"], "Calculator_Add");
/// # });
/// ```
pub async fn dispatch(
    dispatcher: &Dispatcher,
    response: &Value,
) -> Result<Option<Value>, DispatchError> {
    let parts = super::dispatch(dispatcher, response, parse_calls, function_response).await?;
    Ok(super::user_message("parts", parts))
}

/// A `functionResponse` part.
fn function_response(r: ToolResult) -> Value {
    let response = if r.is_error {
        json!({ "error": r.content })
    } else {
        // Structured when whole; the (truncated) text otherwise.
        json!({ "output": r.value.unwrap_or(Value::String(r.content)) })
    };
    let mut answer = json!({"id": r.id, "name": r.name, "response": response});
    // Images and sounds ride beside the response as inline data (multimodal function
    // responses); other media have only their notice in the text.
    let inline: Vec<Value> = r
        .media
        .iter()
        .filter_map(|block| match block {
            Content::Image { data, mime_type } | Content::Audio { data, mime_type } => {
                Some(json!({"inlineData": {"mimeType": mime_type, "data": data}}))
            }
            _ => None,
        })
        .collect();
    if !inline.is_empty() {
        answer["parts"] = Value::Array(inline);
    }
    json!({ "functionResponse": answer })
}
