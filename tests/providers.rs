//! Provider formats: definitions for OpenAI (Chat Completions, Responses, strict), Anthropic and
//! Gemini; their tool calls parsed from responses shaped as each provider documents them; the
//! calls run through the pipeline; and the results in each provider's format, matched by id.
//! Fixtures follow seed 004's shapes and the providers' API references (no network).

#[path = "harness/mod.rs"]
mod harness;

use std::collections::BTreeMap;

use oxp_runtime::call::Pipeline;
use oxp_runtime::providers::{
    DispatchError, Dispatcher, ExportError, Limits, anthropic, gemini, openai,
};
use oxp_runtime::{Registry, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A place.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Place {
    /// The city.
    pub city: String,
    /// The country code, if known.
    pub country: Option<String>,
}

/// Get the weather.
#[tool(toolkit = "Weather", name = "Get", version = "1.0.0")]
async fn weather(
    /// Where.
    place: Place,
    /// Celsius or Fahrenheit.
    unit: Option<Unit>,
) -> String {
    format!(
        "22 degrees {} in {}",
        unit.map_or("C", |u| u.symbol()),
        place.city
    )
}

/// A temperature unit.
#[derive(Deserialize, Serialize, JsonSchema)]
pub enum Unit {
    /// Degrees Celsius.
    C,
    /// Degrees Fahrenheit.
    F,
}

impl Unit {
    fn symbol(&self) -> &'static str {
        match self {
            Unit::C => "C",
            Unit::F => "F",
        }
    }
}

/// A shape: a data-carrying enum, so a `oneOf` of objects.
#[derive(Deserialize, JsonSchema)]
pub enum Shape {
    /// A circle.
    Circle {
        /// Its radius.
        radius: f64,
    },
    /// A square.
    Square {
        /// Its side.
        side: f64,
    },
}

/// Compute an area.
#[tool(toolkit = "Geometry", version = "1.0.0")]
async fn area(
    /// The shape.
    shape: Shape,
) -> f64 {
    match shape {
        Shape::Circle { radius } => std::f64::consts::PI * radius * radius,
        Shape::Square { side } => side * side,
    }
}

/// Count words per label: an open map.
#[tool(toolkit = "Text", version = "1.0.0")]
async fn tally(
    /// Counts by label.
    counts: BTreeMap<String, u32>,
) -> u32 {
    counts.values().sum()
}

/// Fail, as a tool does.
#[tool(toolkit = "Doorbell", version = "0.1.0")]
async fn ring(
    /// Which doorbell.
    doorbell_id: String,
) -> Result<(), ToolError> {
    Err(ToolError::new("Doorbell ID not found")
        .can_retry(true)
        .additional_prompt_content(format!("ids: doorbell42,doorbell84 (not {doorbell_id})")))
}

/// Return a lot of text.
#[tool(toolkit = "Text", version = "1.0.0")]
async fn big() -> String {
    "x".repeat(100_000)
}

fn registry(tools: &[&'static oxp_runtime::ToolDescriptor]) -> Registry {
    tools
        .iter()
        .fold(Registry::builder(), |b, t| b.tool(t))
        .build()
        .unwrap()
}

fn dispatcher() -> Dispatcher {
    Dispatcher::new(Pipeline::new(registry(&[
        weather::TOOL,
        area::TOOL,
        ring::TOOL,
        big::TOOL,
        oxp_tests::calculator_add::TOOL,
        oxp_tests::send::TOOL,
    ])))
    .secret("TWILIO_API_KEY", "sk-test-key")
}

// ---- Definitions ----------------------------------------------------------------------------

#[test]
fn openai_chat_and_responses_definitions() {
    let registry = registry(&[weather::TOOL]);
    let chat = openai::chat_tools(&registry, &Limits::default(), false).unwrap();
    assert_eq!(chat[0]["type"], "function");
    assert_eq!(chat[0]["function"]["name"], "Weather_Get");
    assert_eq!(chat[0]["function"]["description"], "Get the weather.");
    assert_eq!(
        chat[0]["function"]["parameters"]["required"],
        json!(["place"])
    );
    assert_eq!(chat[0]["function"]["strict"], false);
    let responses = openai::responses_tools(&registry, &Limits::default(), false).unwrap();
    assert_eq!(responses[0]["type"], "function");
    // The Responses API takes a tool without `strict` as strict, and this schema (an optional
    // parameter, not nullable) is not made for strict mode: `strict` is stated.
    assert_eq!(responses[0]["strict"], false);
    let strict = openai::responses_tools(&registry, &Limits::default(), true).unwrap();
    assert_eq!(strict[0]["strict"], true);
    assert_eq!(responses[0]["name"], "Weather_Get");
    assert_eq!(
        responses[0]["parameters"],
        chat[0]["function"]["parameters"]
    );
}

#[test]
fn openai_strict_closes_every_object_requires_every_property_and_nulls_the_optional_ones() {
    let registry = registry(&[weather::TOOL]);
    let tools = openai::chat_tools(&registry, &Limits::default(), true).unwrap();
    let function = &tools[0]["function"];
    assert_eq!(function["strict"], true);
    let parameters = &function["parameters"];
    assert_eq!(parameters["additionalProperties"], false);
    assert_eq!(parameters["required"], json!(["place", "unit"]));
    let place = &parameters["properties"]["place"];
    assert_eq!(place["additionalProperties"], false);
    assert_eq!(place["required"], json!(["city", "country"]));
    assert_eq!(
        place["properties"]["country"]["type"],
        json!(["string", "null"])
    );
    // The optional documented enum: `oneOf` of constants becomes `anyOf`, made nullable.
    let unit = &parameters["properties"]["unit"];
    assert_eq!(unit["anyOf"][1], json!({"type": "null"}));
    assert_eq!(unit["anyOf"][0]["anyOf"][0]["const"], "C");
    assert!(!parameters.to_string().contains("oneOf"));
}

#[test]
fn anthropic_definitions() {
    let tools =
        anthropic::tools(&registry(&[weather::TOOL, area::TOOL]), &Limits::default()).unwrap();
    assert_eq!(tools[0]["name"], "Geometry_Area");
    assert_eq!(tools[1]["name"], "Weather_Get");
    assert_eq!(tools[1]["input_schema"]["type"], "object");
    assert_eq!(
        tools[1]["input_schema"]["properties"]["place"]["properties"]["city"]["type"],
        "string"
    );
}

#[test]
fn gemini_definitions_use_its_openapi_subset() {
    let tools = gemini::tools(&registry(&[weather::TOOL]), &Limits::default()).unwrap();
    let declaration = &tools[0]["functionDeclarations"][0];
    assert_eq!(declaration["name"], "Weather_Get");
    let parameters = &declaration["parameters"];
    assert_eq!(parameters["type"], "OBJECT");
    assert!(parameters.get("additionalProperties").is_none());
    assert_eq!(
        parameters["properties"]["place"]["properties"]["country"],
        json!({"type": "STRING", "description": "The country code, if known."})
    );
    // A documented enum becomes a string enum, its variants' docs kept in the description.
    let unit = &parameters["properties"]["unit"];
    assert_eq!(unit["type"], "STRING");
    assert_eq!(unit["enum"], json!(["C", "F"]));
    assert!(
        unit["description"]
            .as_str()
            .unwrap()
            .contains("C: Degrees Celsius.")
    );
}

#[test]
fn gemini_schema_rules() {
    for (schema, expected) in [
        (
            json!({"type": ["integer", "null"]}),
            Ok(json!({"type": "INTEGER", "nullable": true})),
        ),
        (
            json!({"anyOf": [{"type": "string"}, {"type": "null"}], "description": "d"}),
            Ok(json!({"type": "STRING", "nullable": true, "description": "d"})),
        ),
        (
            json!({"const": "x"}),
            Ok(json!({"type": "STRING", "enum": ["x"]})),
        ),
        (
            json!({"type": "string", "format": "uuid"}),
            Ok(json!({"type": "STRING"})),
        ),
        (
            json!({"type": "integer", "format": "int64"}),
            Ok(json!({"type": "INTEGER", "format": "int64"})),
        ),
        (
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}),
            Err(vec!["anyOf".to_owned()]),
        ),
        (
            json!({"type": "integer", "enum": [1, 2]}),
            Err(vec!["enum (of non-strings)".to_owned()]),
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            Err(vec!["additionalProperties (an open map)".to_owned()]),
        ),
        (
            json!({}),
            Err(vec!["a schema without a type (any value)".to_owned()]),
        ),
    ] {
        assert_eq!(gemini::schema(&schema), expected, "{schema}");
    }
}

// ---- Seed 003 §6: the capability matrix cells that concern schemas -------------------------

#[test]
fn matrix_nested_object_params_work_everywhere() {
    let registry = registry(&[weather::TOOL]);
    let limits = Limits::default();
    let place = |tools: Vec<Value>, pointer: &str| tools[0].pointer(pointer).unwrap().clone();
    // Each provider gets the nested `place` object with its own fields, in its own dialect.
    for (provider, place) in [
        (
            "openai",
            place(
                openai::chat_tools(&registry, &limits, false).unwrap(),
                "/function/parameters/properties/place",
            ),
        ),
        (
            "openai strict",
            place(
                openai::chat_tools(&registry, &limits, true).unwrap(),
                "/function/parameters/properties/place",
            ),
        ),
        (
            "anthropic",
            place(
                anthropic::tools(&registry, &limits).unwrap(),
                "/input_schema/properties/place",
            ),
        ),
        (
            "gemini",
            place(
                gemini::tools(&registry, &limits).unwrap(),
                "/functionDeclarations/0/parameters/properties/place",
            ),
        ),
    ] {
        let kind = place["type"].as_str().map(str::to_ascii_lowercase);
        assert_eq!(kind.as_deref(), Some("object"), "{provider}: {place}");
        assert!(
            place["properties"]["city"].is_object(),
            "{provider}: {place}"
        );
        assert!(
            place["properties"]["country"].is_object(),
            "{provider}: {place}"
        );
    }
}

#[test]
fn matrix_one_of_any_of_work_for_openai_and_anthropic_not_gemini() {
    let registry = registry(&[area::TOOL]);
    let openai = openai::chat_tools(&registry, &Limits::default(), false).unwrap();
    assert!(openai[0].to_string().contains("oneOf"));
    let anthropic = anthropic::tools(&registry, &Limits::default()).unwrap();
    assert!(
        anthropic[0]["input_schema"]["properties"]["shape"]["oneOf"].is_array(),
        "{}",
        anthropic[0]
    );
    let errors = gemini::tools(&registry, &Limits::default()).unwrap_err();
    assert_eq!(
        errors,
        vec![ExportError::SchemaIncompatible {
            tool: "Geometry_Area".into(),
            provider: "Gemini",
            incompatible_features: vec!["oneOf".into()],
        }]
    );
    let json = errors[0].to_json();
    assert_eq!(json["error"]["code"], "tool_schema_incompatible");
    assert_eq!(json["error"]["type"], "semantic_error");
    assert_eq!(json["error"]["incompatible_features"], json!(["oneOf"]));
    assert_eq!(
        json["error"]["message"],
        "Tool 'Geometry_Area' uses 'oneOf' which Gemini does not support"
    );
    // OpenAI strict has no `oneOf` of objects either.
    let strict = openai::chat_tools(&registry, &Limits::default(), true).unwrap_err();
    assert!(
        matches!(&strict[0], ExportError::SchemaIncompatible { incompatible_features, .. } if incompatible_features == &["oneOf"])
    );
}

#[test]
fn matrix_ref_never_reaches_any_provider() {
    // The schema policy inlines every `$ref` (recursive types are refused at registration),
    // so the ❌ for `$ref` at Anthropic and Google never bites.
    let registry = registry(&[weather::TOOL, area::TOOL, tally::TOOL]);
    for tools in [
        openai::chat_tools(&registry, &Limits::default(), false).unwrap(),
        anthropic::tools(&registry, &Limits::default()).unwrap(),
    ] {
        assert!(!Value::from(tools).to_string().contains("$ref"));
    }
}

#[test]
fn open_maps_cannot_be_strict_or_gemini() {
    let registry = registry(&[tally::TOOL]);
    let loose = openai::chat_tools(&registry, &Limits::default(), false).unwrap();
    assert_eq!(loose[0]["function"]["name"], "Text_Tally", "{}", loose[0]);
    for errors in [
        openai::chat_tools(&registry, &Limits::default(), true).unwrap_err(),
        gemini::tools(&registry, &Limits::default()).unwrap_err(),
    ] {
        assert!(
            matches!(&errors[0], ExportError::SchemaIncompatible { incompatible_features, .. } if incompatible_features[0].starts_with("additionalProperties"))
        );
    }
}

// ---- Seed 003 §7: limits -------------------------------------------------------------------

#[test]
fn export_limits_are_clear_errors() {
    let registry = registry(&[weather::TOOL, area::TOOL]);
    let tight = Limits {
        max_tools: 1,
        max_description_len: 5,
        max_schema_depth: 1,
        ..Limits::default()
    };
    let errors = anthropic::tools(&registry, &tight).unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|t| t == "2 tools exceed the limit of 1 per request"),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("Weather_Get': the description is 16 characters; the limit is 5")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|t| t
                .contains("Weather_Get': the parameters schema nests 2 levels; the limit is 1")),
        "{text:?}"
    );
    assert!(errors.iter().all(|e| e.code() == "limit_exceeded"));
}

#[test]
fn only_the_latest_version_of_a_name_is_exported() {
    let registry = registry(&[oxp_tests::which_1_10_0::TOOL, oxp_tests::which_1_2_0::TOOL]);
    let tools = anthropic::tools(&registry, &Limits::default()).unwrap();
    assert_eq!(tools.len(), 1);
}

// ---- Calls and results ------------------------------------------------------------------------

#[tokio::test]
async fn openai_chat_parallel_calls_malformed_arguments_and_unknown_names() {
    // A chat.completion with three parallel tool calls (seed 004, OpenAI ChatCompletion).
    let response = json!({
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "Weather_Get", "arguments": "{\"place\": {\"city\": \"Paris\"}, \"unit\": null}"}},
                {"id": "call_b", "type": "function", "function": {"name": "Weather_Get", "arguments": "{\"place\": {\"city\": "}},
                {"id": "call_c", "type": "function", "function": {"name": "Nope_Tool", "arguments": "{}"}}
            ]
        }}]
    });
    let results = openai::dispatch_chat(&dispatcher(), &response)
        .await
        .unwrap();
    assert_eq!(results.len(), 3);
    // Strict-mode nulls for optional properties are read as "omitted".
    assert_eq!(
        results[0],
        json!({"role": "tool", "tool_call_id": "call_a", "content": "22 degrees C in Paris"})
    );
    assert_eq!(results[1]["tool_call_id"], "call_b");
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: Invalid JSON in arguments")
    );
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .ends_with("Please retry with valid JSON.")
    );
    assert_eq!(results[2]["tool_call_id"], "call_c");
    let unknown = results[2]["content"].as_str().unwrap();
    assert!(
        unknown.starts_with("Error: Tool 'Nope_Tool' is not available. Available tools:"),
        "{unknown}"
    );
    assert!(unknown.contains("Weather_Get"));
}

#[tokio::test]
async fn invalid_input_and_tool_errors_tell_the_model_how_to_retry() {
    let message = json!({"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "Calculator_Add", "arguments": "{\"a\": 1, \"b\": \"two\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "Doorbell_Ring", "arguments": "{\"doorbell_id\": \"d1\"}"}},
        {"id": "c3", "type": "function", "function": {"name": "SMS_Send", "arguments": "{\"to\": \"+1\", \"body\": \"hi\"}"}}
    ]});
    let results = openai::dispatch_chat(&dispatcher(), &message)
        .await
        .unwrap();
    let invalid = results[0]["content"].as_str().unwrap();
    assert!(
        invalid.starts_with("Error: Invalid arguments for 'Calculator_Add'; `b`:"),
        "{invalid}"
    );
    assert!(invalid.ends_with("Please retry with arguments that match the tool's schema."));
    assert_eq!(
        results[1]["content"],
        "Error: Doorbell ID not found\nids: doorbell42,doorbell84 (not d1)\nYou may retry this call."
    );
    // The secret comes from the dispatcher, never from the model.
    assert_eq!(
        results[2]["content"],
        "sent 2 chars to +1 with a 11-char key"
    );
}

#[tokio::test]
async fn openai_responses_function_calls_and_outputs() {
    let response = json!({"id": "resp_1", "object": "response", "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "id": "fc_1", "call_id": "call_x", "name": "Calculator_Add", "arguments": "{\"a\": 2, \"b\": 3}"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_y", "name": "Calculator_Add", "arguments": "{\"a\": 4, \"b\": 5}"}
    ]});
    let items = openai::dispatch_responses(&dispatcher(), &response)
        .await
        .unwrap();
    assert_eq!(
        items,
        vec![
            json!({"type": "function_call_output", "call_id": "call_x", "output": "5.0"}),
            json!({"type": "function_call_output", "call_id": "call_y", "output": "9.0"}),
        ]
    );
}

#[tokio::test]
async fn anthropic_tool_use_blocks_and_tool_results() {
    // A message with text and two parallel tool_use blocks (seed 004, Anthropic).
    let response = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "Weather_Get", "input": {"place": {"city": "Oslo"}, "unit": "F"}},
            {"type": "tool_use", "id": "toolu_2", "name": "Doorbell_Ring", "input": {"doorbell_id": "d9"}}
        ]
    });
    let message = anthropic::dispatch(&dispatcher(), &response)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(message["role"], "user");
    assert_eq!(
        message["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "22 degrees F in Oslo"})
    );
    assert_eq!(message["content"][1]["tool_use_id"], "toolu_2");
    assert_eq!(message["content"][1]["is_error"], true);
    // No tool_use: nothing to send back.
    let text_only = json!({"role": "assistant", "content": [{"type": "text", "text": "Hi"}]});
    assert_eq!(
        anthropic::dispatch(&dispatcher(), &text_only)
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn gemini_function_calls_get_generated_ids_and_function_responses() {
    // A generateContent response (seed 004, Google): no ids on the calls.
    let response = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "Calculator_Add", "args": {"a": 1, "b": 2}}},
        {"functionCall": {"name": "Calculator_Add", "args": {"a": 3, "b": 4}}},
        {"functionCall": {"name": "Doorbell_Ring", "args": {"doorbell_id": "d1"}}}
    ]}, "finishReason": "STOP"}]});
    let calls = gemini::parse_calls(&response).unwrap();
    assert!(
        calls[0].id.starts_with("call_") && calls[0].id.ends_with("_Calculator_Add"),
        "{}",
        calls[0].id
    );
    assert!(calls[1].id.ends_with("_Calculator_Add"), "{}", calls[1].id);
    assert_ne!(calls[0].id, calls[1].id, "unique within a response");
    // …and across responses parsed in the same millisecond (ids are idempotency keys).
    let again = gemini::parse_calls(&response).unwrap();
    assert!(
        calls.iter().all(|c| again.iter().all(|a| a.id != c.id)),
        "unique across responses"
    );
    let content = gemini::dispatch(&dispatcher(), &response)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(content["role"], "user");
    let parts = content["parts"].as_array().unwrap();
    assert_eq!(parts[0]["functionResponse"]["name"], "Calculator_Add");
    assert_eq!(
        parts[0]["functionResponse"]["response"],
        json!({"output": 3.0})
    );
    assert_eq!(
        parts[1]["functionResponse"]["response"],
        json!({"output": 7.0})
    );
    assert!(
        parts[2]["functionResponse"]["response"]["error"]
            .as_str()
            .unwrap()
            .starts_with("Error: Doorbell ID not found")
    );
}

#[tokio::test]
async fn dispatch_limits_and_large_results() {
    let many: Vec<Value> = (0..21)
        .map(|i| json!({"id": format!("c{i}"), "type": "function", "function": {"name": "Calculator_Add", "arguments": "{\"a\":1,\"b\":2}"}}))
        .collect();
    let error = openai::dispatch_chat(&dispatcher(), &json!({"tool_calls": many}))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        DispatchError::TooManyCalls {
            calls: 21,
            limit: 20
        }
    );

    let huge = json!({"place": {"city": "x".repeat(70_000)}}).to_string();
    let message = json!({"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Weather_Get", "arguments": huge}}]});
    let results = openai::dispatch_chat(&dispatcher(), &message)
        .await
        .unwrap();
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: The arguments are"),
        "{}",
        results[0]["content"]
    );

    let message = json!({"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Text_Big", "arguments": "{}"}}]});
    let results = openai::dispatch_chat(&dispatcher(), &message)
        .await
        .unwrap();
    let content = results[0]["content"].as_str().unwrap();
    assert!(content.len() <= 64 * 1024);
    assert!(content.ends_with("[Truncated: Result exceeded 64KB limit]"));

    let malformed = openai::dispatch_chat(&dispatcher(), &json!({"tool_calls": [{"id": 1}]}))
        .await
        .unwrap_err();
    assert!(matches!(malformed, DispatchError::Malformed(_)));
}

#[test]
fn every_provider_exports_through_one_shape() {
    use oxp_runtime::providers::Provider;
    let limits = Limits::default();
    for provider in Provider::ALL {
        let tools = provider.export(&registry(&[weather::TOOL]), &limits, false);
        assert!(
            tools.as_ref().is_ok_and(|t| t.to_vec().len() == 1),
            "{provider}: {tools:?}"
        );
        assert_eq!(provider.name().parse::<Provider>(), Ok(provider));
    }
    // Incompatibilities are typed errors naming the provider, as `tools` prints them.
    let gemini = Provider::Gemini.export(&registry(&[area::TOOL]), &limits, false);
    assert!(
        matches!(&gemini, Err(e) if matches!(&e[0], ExportError::SchemaIncompatible { provider: "Gemini", .. })),
        "{gemini:?}"
    );
    assert!(
        Provider::OpenAiChat
            .export(&registry(&[area::TOOL]), &limits, true)
            .is_err()
    );
    assert!(
        Provider::Anthropic
            .export(&registry(&[area::TOOL]), &limits, false)
            .is_ok()
    );
}

/// A model's call id is an idempotency key, but only within one dispatcher (one
/// conversation): two conversations that reuse `toolu_1` each get the answer to their own call,
/// and one conversation that reuses it for another request is told so instead of being handed
/// the first answer.
#[tokio::test]
async fn two_conversations_reusing_a_model_call_id_each_get_their_own_result() {
    let pipeline = dispatcher().pipeline().clone();
    let (first, second) = (Dispatcher::new(pipeline.clone()), Dispatcher::new(pipeline));
    let add = |a: i64| {
        json!({"content": [{"type": "tool_use", "id": "toolu_1", "name": "Calculator_Add",
                            "input": {"a": a, "b": 2}}]})
    };
    let result = |reply: Option<Value>| reply.unwrap()["content"][0].clone();
    let first_answer = result(anthropic::dispatch(&first, &add(1)).await.unwrap());
    let second_answer = result(anthropic::dispatch(&second, &add(40)).await.unwrap());
    assert_eq!(first_answer["content"], "3.0", "{first_answer}");
    assert_eq!(second_answer["content"], "42.0", "{second_answer}");
    // The same conversation replaying its id for another request is refused, not answered 3.
    let reused = result(anthropic::dispatch(&first, &add(7)).await.unwrap());
    assert_eq!(reused["is_error"], true, "{reused}");
    assert!(
        reused["content"]
            .as_str()
            .unwrap()
            .contains("call_id was already used"),
        "{reused}"
    );
    // A true retry (same id, same request) gets the first answer.
    let retried = result(anthropic::dispatch(&first, &add(1)).await.unwrap());
    assert_eq!(retried["content"], "3.0");
}

/// The `tools` and `dispatch` subcommands of a real binary (the example), through the process
/// layer: definitions on stdout with exit 0, a model's calls run and answered, usage errors 2.
#[test]
fn the_binarys_subcommands_export_and_dispatch() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let binary = harness::example_binary();
    let tools = Command::new(&binary)
        .args(["tools", "--format", "anthropic"])
        .output()
        .unwrap();
    assert_eq!(tools.status.code(), Some(0));
    let exported: Value = serde_json::from_slice(&tools.stdout).unwrap();
    assert!(
        exported
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "Calculator_Add")
    );
    let mut dispatch = Command::new(&binary)
        .args(["dispatch", "--format", "anthropic"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let reply = json!({"content": [{"type": "tool_use", "id": "toolu_9", "name": "Calculator_Add",
                                    "input": {"a": 2, "b": 3}}]});
    dispatch
        .stdin
        .take()
        .unwrap()
        .write_all(reply.to_string().as_bytes())
        .unwrap();
    let out = dispatch.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let messages: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(messages[0]["content"][0]["tool_use_id"], "toolu_9");
    assert_eq!(messages[0]["content"][0]["content"], "5.0");
    // A broken model response on stdin is a clear exit 2, not a panic.
    let mut broken = Command::new(&binary)
        .args(["dispatch", "--format", "openai"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    broken
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"tool_calls\": [{\"id\": ")
        .unwrap();
    let out = broken.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stdin is not JSON") && !stderr.contains("panicked"),
        "{stderr}"
    );
    for bad in [
        &["tools", "--format", "cohere"][..],
        &["dispatch", "--format", "oxp"],
        &["frobnicate"],
    ] {
        let out = Command::new(&binary).args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("usage:"),
            "{bad:?}"
        );
    }
}

/// Draw a chart, with a recording and a report beside it.
#[tool(toolkit = "Chart", name = "Draw", version = "1.0.0")]
fn draw() -> oxp_runtime::content::Contents<serde_json::Value> {
    use oxp_runtime::content::{Content, Contents};
    Contents::new([
        Content::text("Sales rose."),
        Content::image(b"PNGDATA", "image/png").expect("an image type"),
        Content::audio(b"WAVDATA", "audio/wav").expect("an audio type"),
        Content::link("https://example.com/q3.pdf", "Q3 report").expect("an https link"),
    ])
    .with_structured(json!({"rise": 12}))
}

/// A tool's image reaches each provider as that format's image part where it has one, and as a
/// notice in the text where it has none; base64 never lands in a text field.
#[tokio::test]
async fn media_results_take_each_provider_s_own_shape() {
    let registry = Registry::builder().tool(draw::TOOL).build().unwrap();
    let dispatcher = Dispatcher::new(Pipeline::new(registry));
    let png = "UE5HREFUQQ==";
    let wav = "V0FWREFUQQ==";
    let no_base64_in = |text: &str| {
        assert!(!text.contains(png) && !text.contains(wav), "{text}");
    };

    let message = json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Chart_Draw", "input": {}}]});
    let reply = anthropic::dispatch(&dispatcher, &message)
        .await
        .unwrap()
        .unwrap();
    let content = &reply["content"][0]["content"];
    assert_eq!(content[0]["type"], "text");
    let text = content[0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Sales rose.\n[image/png image]\n[audio/wav audio]"),
        "{text}"
    );
    no_base64_in(text);
    assert_eq!(
        content[1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}})
    );
    assert_eq!(
        content.as_array().unwrap().len(),
        2,
        "audio has no Anthropic part"
    );

    let responses = json!({"output": [{"type": "function_call", "call_id": "call_1",
        "name": "Chart_Draw", "arguments": "{}"}]});
    let items = openai::dispatch_responses(&dispatcher, &responses)
        .await
        .unwrap();
    let output = &items[0]["output"];
    assert_eq!(output[0]["type"], "input_text");
    no_base64_in(output[0]["text"].as_str().unwrap());
    assert_eq!(
        output[1],
        json!({"type": "input_image", "image_url": format!("data:image/png;base64,{png}")})
    );

    let chat = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "Chart_Draw", "arguments": "{}"}}]}}]});
    let messages = openai::dispatch_chat(&dispatcher, &chat).await.unwrap();
    let text = messages[0]["content"].as_str().unwrap();
    assert!(text.contains("[image/png image]"), "{text}");
    no_base64_in(text);

    let gemini_response = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "Chart_Draw", "args": {}}}]}}]});
    let reply = gemini::dispatch(&dispatcher, &gemini_response)
        .await
        .unwrap()
        .unwrap();
    let answer = &reply["parts"][0]["functionResponse"];
    assert_eq!(
        answer["response"]["output"],
        json!({"rise": 12}),
        "the structured value"
    );
    assert_eq!(
        answer["parts"],
        json!([
            {"inlineData": {"mimeType": "image/png", "data": png}},
            {"inlineData": {"mimeType": "audio/wav", "data": wav}},
        ])
    );
}

/// Photograph the warehouse: three photos of 40,000 bytes each.
#[tool(toolkit = "Chart", name = "Photos", version = "1.0.0")]
fn photos() -> oxp_runtime::content::Contents {
    use oxp_runtime::content::{Content, Contents};
    let photo = || Content::image(vec![7u8; 40_000], "image/jpeg").expect("an image type");
    Contents::new([
        Content::text("Three photos."),
        photo(),
        photo(),
        Content::audio(vec![9u8; 40_000], "audio/wav").expect("an audio type"),
    ])
}

/// The result cap (64 KB by default) counts a result's images and audio with its text: a result
/// of 160 KB of base64 media reaches each provider within the cap, the blocks that did not fit
/// left out and said to be, never sent uncapped.
#[tokio::test]
async fn the_result_cap_counts_images_and_audio() {
    let registry = Registry::builder().tool(photos::TOOL).build().unwrap();
    let dispatcher = Dispatcher::new(Pipeline::new(registry));
    let cap = 64 * 1024;
    // What a provider message adds around the result: ids, types, the data URL's prefix.
    let envelope = 1024;
    let within = |what: &str, reply: &Value| {
        let size = reply.to_string().len();
        assert!(size <= cap + envelope, "{what}: {size} bytes");
        let text = reply.to_string();
        assert!(
            text.contains("left out"),
            "{what} says what was left out: {text:.300}"
        );
    };
    let message = json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Chart_Photos", "input": {}}]});
    let reply = anthropic::dispatch(&dispatcher, &message)
        .await
        .unwrap()
        .unwrap();
    within("anthropic", &reply);
    let responses = json!({"output": [{"type": "function_call", "call_id": "call_1",
        "name": "Chart_Photos", "arguments": "{}"}]});
    let items = openai::dispatch_responses(&dispatcher, &responses)
        .await
        .unwrap();
    within("openai responses", &Value::Array(items));
    let gemini_response = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "Chart_Photos", "args": {}}}]}}]});
    let reply = gemini::dispatch(&dispatcher, &gemini_response)
        .await
        .unwrap()
        .unwrap();
    within("gemini", &reply);
}

static SENT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Send an invoice, once the user picks the address and confirms.
#[tool(
    toolkit = "Billing",
    name = "Send",
    version = "1.0.0",
    confirm = "Send invoice {number}?"
)]
fn send_invoice(ctx: &oxp_runtime::ToolContext, number: u32) -> Result<String, ToolError> {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct To {
        email: String,
    }
    let To { email } = ctx.ask("to", "To which address?")?;
    SENT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Ok(format!("invoice {number} sent to {email}"))
}

/// Provider dispatch asks the app, not the model: a call that asks comes back as pending input
/// (the declared confirmation first, then the body's form), resumes with the app's answers, and
/// runs once, however often the completed round is resumed. A no is a result saying so; another
/// dispatcher's pending input runs nothing.
#[tokio::test]
async fn dispatch_asks_the_app_and_runs_once_answered() {
    use oxp_runtime::providers::{Step, ToolCall};
    use std::sync::atomic::Ordering;
    let registry = || {
        Registry::builder()
            .tool(send_invoice::TOOL)
            .build()
            .unwrap()
    };
    let dispatcher = Dispatcher::new(Pipeline::new(registry()));
    let call = ToolCall {
        id: "call_7".into(),
        name: "Billing_Send".into(),
        arguments: Ok(json!({"number": 7})),
    };
    let Step::Asks(first) = dispatcher
        .steps(vec![call.clone()])
        .await
        .unwrap()
        .remove(0)
    else {
        panic!("the confirmation comes first")
    };
    assert_eq!(first.message("oxp.confirm"), Some("Send invoice 7?"));
    let yes = |key: &str| [(key.to_owned(), json!({"action": "accept", "content": {}}))].into();
    // An answer to what was not asked answers nothing: the confirmation is asked again.
    let Step::Asks(unasked) = dispatcher.resume(first.clone(), yes("to")).await else {
        panic!("still asking")
    };
    assert_eq!(unasked.message("oxp.confirm"), Some("Send invoice 7?"));
    let Step::Asks(second) = dispatcher.resume(first.clone(), yes("oxp.confirm")).await else {
        panic!("then the form")
    };
    assert_eq!(second.message("to"), Some("To which address?"));
    assert_eq!(
        SENT.load(Ordering::SeqCst),
        0,
        "nothing sent before the last answer"
    );
    let to = [(
        "to".to_owned(),
        json!({"action": "accept", "content": {"email": "ada@example.com"}}),
    )]
    .into();
    let Step::Done(sent) = dispatcher.resume(second.clone(), to).await else {
        panic!("done")
    };
    assert_eq!(sent.content, "invoice 7 sent to ada@example.com");
    let Step::Done(again) = dispatcher
        .resume(
            second,
            [(
                "to".to_owned(),
                json!({"action": "accept", "content": {"email": "ada@example.com"}}),
            )]
            .into(),
        )
        .await
    else {
        panic!("done")
    };
    assert_eq!(again.content, sent.content, "the first answer");
    assert_eq!(SENT.load(Ordering::SeqCst), 1, "sent once");

    // The call has ended: its first round resumed again gets that answer, not a second run.
    let Step::Done(late) = dispatcher.resume(first.clone(), yes("oxp.confirm")).await else {
        panic!("done")
    };
    assert_eq!(late.content, sent.content);

    let other_call = ToolCall {
        id: "call_8".into(),
        ..call.clone()
    };
    let Step::Asks(other) = dispatcher.steps(vec![other_call]).await.unwrap().remove(0) else {
        panic!("asks")
    };
    let Step::Done(declined) = dispatcher
        .resume(
            other,
            [("oxp.confirm".to_owned(), json!({"action": "decline"}))].into(),
        )
        .await
    else {
        panic!("a no is a result")
    };
    assert!(
        declined.is_error && declined.content.contains("did not confirm"),
        "{declined:?}"
    );

    let stranger = Dispatcher::new(Pipeline::new(registry()));
    let Step::Done(refused) = stranger.resume(first, yes("oxp.confirm")).await else {
        panic!("refused")
    };
    assert!(
        refused.is_error && refused.content.contains("sealed with another key"),
        "{refused:?}"
    );
    assert_eq!(SENT.load(Ordering::SeqCst), 1);
}

/// A pending input kept as JSON is resumed by another dispatcher of the same conversation and
/// key (another request, another process), and by no other: another conversation's is refused.
#[tokio::test]
async fn a_pending_input_is_kept_and_resumed_elsewhere() {
    use oxp_runtime::providers::{PendingInput, Step, ToolCall};
    let key = b"an app's state key, 32 bytes or more";
    let dispatcher = |conversation: &str| {
        let registry = Registry::builder()
            .tool(send_invoice::TOOL)
            .build()
            .unwrap();
        Dispatcher::new(Pipeline::new(registry))
            .conversation(conversation)
            .state_key(key)
            .unwrap()
    };
    let call = ToolCall {
        id: "call_kept".into(),
        name: "Billing_Send".into(),
        arguments: Ok(json!({"number": 9})),
    };
    let Step::Asks(pending) = dispatcher("chat-1")
        .steps(vec![call])
        .await
        .unwrap()
        .remove(0)
    else {
        panic!("asks")
    };
    let kept = serde_json::to_string(&pending).unwrap();
    let yes: std::collections::BTreeMap<String, serde_json::Value> =
        [("oxp.confirm".to_owned(), json!({"action": "accept"}))].into();

    let foreign: PendingInput = serde_json::from_str(&kept).unwrap();
    let Step::Done(refused) = dispatcher("chat-2").resume(foreign, yes.clone()).await else {
        panic!("refused")
    };
    assert!(
        refused.is_error && refused.content.contains("another call or caller"),
        "{refused:?}"
    );

    let restored: PendingInput = serde_json::from_str(&kept).unwrap();
    let Step::Asks(next) = dispatcher("chat-1").resume(restored, yes).await else {
        panic!("the form comes next")
    };
    assert_eq!(next.message("to"), Some("To which address?"));
}

/// Reindexes; only ever a task over MCP.
#[oxp_runtime::tool(toolkit = "Search", version = "1.0.0", task = "required")]
async fn reindex(shards: u32) -> String {
    tokio::task::yield_now().await;
    format!("reindexed {shards} shards")
}

/// Provider dispatch has no tasks: a tool that must be a task over MCP is a call like any
/// other here, its result handed to the model.
#[tokio::test]
async fn a_task_tool_is_dispatched_as_a_call() {
    use oxp_runtime::providers::{Step, ToolCall};
    let registry = Registry::builder().tool(reindex::TOOL).build().unwrap();
    let dispatcher = Dispatcher::new(Pipeline::new(registry));
    let call = ToolCall {
        id: "call_1".into(),
        name: "Search_Reindex".into(),
        arguments: Ok(json!({"shards": 3})),
    };
    let Step::Done(result) = dispatcher.steps(vec![call]).await.unwrap().remove(0) else {
        panic!("a task tool asks nothing here");
    };
    assert_eq!(result.content, "reindexed 3 shards");
    assert!(!result.is_error);
}
