//! The registry (version resolution, registration checks) and the in-process call pipeline.

#[path = "harness/mod.rs"]
mod harness;

use oxp_runtime::call::{CallOutcome, Pipeline};
use oxp_runtime::protocol::{CallResult, CallToolRequest};
use oxp_runtime::registry::ResolveError;
use oxp_runtime::{Registry, ToolError, tool};
use oxp_tests as fixtures;
use serde_json::{Value, json};

fn which_registry() -> Registry {
    Registry::builder()
        .tool(fixtures::which_1_2_0::TOOL)
        .tool(fixtures::which_0_9_0::TOOL)
        .tool(fixtures::which_1_10_0::TOOL)
        .tool(fixtures::which_1_0_0::TOOL)
        .build()
        .unwrap()
}

#[test]
fn latest_is_numeric_and_at_major_means_exactly_major_0_0() {
    let registry = which_registry();
    let id = |tool_id: &str| registry.resolve(tool_id).map(|t| t.id().to_owned());
    // oxp-notes §1 V.39 / §4 vector 30: no `@` is the latest, compared as numbers.
    assert_eq!(id("Math.Which").unwrap(), "Math.Which@1.10.0");
    // V.38 / vector 31: `@1` is 1.0.0, not the latest 1.x.
    assert_eq!(id("Math.Which@1").unwrap(), "Math.Which@1.0.0");
    // V.37 / vector 32.
    assert_eq!(id("Math.Which@1.2.0").unwrap(), "Math.Which@1.2.0");
    // Leading zeros compare numerically.
    assert_eq!(id("Math.Which@01.02.0").unwrap(), "Math.Which@1.2.0");
}

#[test]
fn bad_and_unavailable_ids_are_typed_errors() {
    let registry = which_registry();
    for bad in [
        "Math.Which@1.0",
        "Math.Which@1.10",
        "Math.Which@1.2.0-beta",
        "Math.Which@",
        "Math.Which@@1",
        "Which@1.0.0",
        "A.B.C@1.0.0",
        "",
    ] {
        assert!(
            matches!(registry.resolve(bad), Err(ResolveError::InvalidId { .. })),
            "{bad}"
        );
    }
    for unavailable in [
        "Math.Which@2",
        "Math.Which@0",
        "Math.Which@99999999999999999999999",
    ] {
        match registry.resolve(unavailable) {
            Err(ResolveError::VersionUnavailable {
                wire_name,
                available,
                ..
            }) => {
                assert_eq!(wire_name, "Math_Which");
                assert_eq!(available, ["0.9.0", "1.0.0", "1.2.0", "1.10.0"]);
            }
            other => panic!("{unavailable}: {other:?}"),
        }
    }
    // Ids are case-sensitive (oxp-notes §3.18).
    assert!(matches!(
        registry.resolve("math.which"),
        Err(ResolveError::UnknownTool { .. })
    ));
    let unknown = registry.resolve("Nope.Tool").unwrap_err();
    assert_eq!(unknown.to_string(), "Tool 'Nope_Tool' was not found");
}

#[test]
fn tools_are_listed_by_toolkit_name_and_version_with_all_six_fields() {
    let registry = which_registry();
    let ids: Vec<&str> = registry.tools().iter().map(|t| t.id()).collect();
    assert_eq!(
        ids,
        [
            "Math.Which@0.9.0",
            "Math.Which@1.0.0",
            "Math.Which@1.2.0",
            "Math.Which@1.10.0"
        ]
    );
    let definition = serde_json::to_value(registry.tools()[0].definition()).unwrap();
    assert_eq!(
        definition,
        json!({
            "id": "Math.Which@0.9.0",
            "name": "Math_Which",
            "description": "Return this tool's own version.",
            "version": "0.9.0",
            "input_schema": {"type": "object", "additionalProperties": false},
            "output_schema": {"type": "string"}
        })
    );
}

mod first {
    /// One.
    #[oxp_runtime::tool(toolkit = "Dup", name = "Tool", version = "1.0.0")]
    pub fn one() {}
}

mod second {
    /// Two.
    #[oxp_runtime::tool(toolkit = "Dup", name = "Tool", version = "1.0.0")]
    pub fn two() {}
}

/// Collides with `A.B_C` on the wire name `A_B_C`.
#[tool(toolkit = "A_B", name = "C", version = "1.0.0")]
fn ab_c() {}

/// See `ab_c`.
#[tool(toolkit = "A", name = "B_C", version = "1.0.0")]
fn a_bc() {}

#[test]
fn duplicate_ids_name_both_fns_and_their_modules() {
    let error = Registry::builder()
        .tool(first::one::TOOL)
        .tool(second::two::TOOL)
        .build()
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("`Dup.Tool@1.0.0` is registered twice"),
        "{text}"
    );
    assert!(text.contains("registry::first::one"), "{text}");
    assert!(text.contains("registry::second::two"), "{text}");
}

#[test]
fn wire_name_collisions_are_rejected() {
    let error = Registry::builder()
        .tool(ab_c::TOOL)
        .tool(a_bc::TOOL)
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("share the wire name `A_B_C`"),
        "{error}"
    );
}

/// Greets, under an exact wire name.
#[tool(
    toolkit = "Hello",
    name = "Greet",
    wire_name = "greet",
    version = "1.0.0"
)]
fn greet_1() {}

/// Greets, a newer version that forgot the wire name.
#[tool(toolkit = "Hello", name = "Greet", version = "2.0.0")]
fn greet_2() {}

/// Waves, under the name `greet` another tool has.
#[tool(
    toolkit = "Hello",
    name = "Wave",
    wire_name = "greet",
    version = "1.0.0"
)]
fn wave() {}

/// An exact wire name is the tool's name everywhere; two tools cannot share one, and the
/// versions of one tool cannot differ in it, each said at start-up naming both.
#[test]
fn an_exact_wire_name_is_unique_and_shared_by_every_version() {
    let registry = Registry::builder().tool(greet_1::TOOL).build().unwrap();
    let tool = registry.resolve_wire_name("greet").unwrap();
    assert_eq!(tool.id(), "Hello.Greet@1.0.0");
    assert_eq!(registry.resolve("Hello.Greet").unwrap().name(), "greet");
    let collision = Registry::builder()
        .tool(greet_1::TOOL)
        .tool(wave::TOOL)
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        collision.contains("`Hello.Greet` and `Hello.Wave`")
            && collision.contains("share the wire name `greet`"),
        "{collision}"
    );
    let versions = Registry::builder()
        .tool(greet_1::TOOL)
        .tool(greet_2::TOOL)
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        versions.contains("`Hello.Greet@2.0.0` has the wire name `Hello_Greet` but `Hello.Greet@1.0.0` has `greet`"),
        "{versions}"
    );
    // Written by hand, a bad one is caught as the attribute would have.
    static SPACED: oxp_runtime::ToolDescriptor = oxp_runtime::ToolDescriptor {
        wire_name: Some("two words"),
        ..*greet_1::TOOL
    };
    let error = Registry::builder().tool(&SPACED).build().unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`two words` cannot be a wire name"),
        "{error}"
    );
}

#[test]
fn invalid_versions_names_and_descriptions_are_caught_at_build_time() {
    // The macro rejects these when they are literals; a descriptor built another way (or a
    // version from CARGO_PKG_VERSION like "0.1.0-alpha") is caught here, naming the fn.
    static BAD_VERSION: oxp_runtime::ToolDescriptor = oxp_runtime::ToolDescriptor {
        version: "0.1.0-alpha",
        ..*first::one::TOOL
    };
    static BAD_NAME: oxp_runtime::ToolDescriptor = oxp_runtime::ToolDescriptor {
        name: "Has Space",
        ..*first::one::TOOL
    };
    static NO_DESCRIPTION: oxp_runtime::ToolDescriptor = oxp_runtime::ToolDescriptor {
        description: "  ",
        ..*first::one::TOOL
    };
    let error = Registry::builder()
        .tool(&BAD_VERSION)
        .tool(&BAD_NAME)
        .tool(&NO_DESCRIPTION)
        .build()
        .unwrap_err();
    assert_eq!(error.problems.len(), 3, "{error}");
    let text = error.to_string();
    // The same words `#[tool]` uses at compile time (ui/short_version.stderr,
    // ui/toolkit_with_space.stderr, ui/missing_doc.stderr): both read them from one file.
    assert!(
        text.contains("`0.1.0-alpha` is not a tool version: write three whole numbers"),
        "{text}"
    );
    assert!(
        text.contains("the name `Has Space` may only have letters, digits and underscores"),
        "{text}"
    );
    assert!(
        text.contains("a tool needs a description, which models read"),
        "{text}"
    );
    assert!(text.contains("registry::first::one"), "{text}");
}

#[test]
fn a_definition_kept_as_json_reads_back_exactly() {
    // The registry keeps each definition as the JSON `GET /tools` sends and parses it on
    // demand: the parsed form must write the same JSON again, byte for byte.
    let registry = fixtures::all_tools().build().unwrap();
    for tool in registry.tools() {
        let written = serde_json::to_string(tool.definition()).unwrap();
        assert_eq!(written, tool.definition_json(), "{}", tool.id());
        assert_eq!(tool.definition().name, tool.name());
    }
}

#[test]
fn from_inventory_collects_every_tool_in_the_binary() {
    let error = Registry::from_inventory().unwrap_err();
    // This binary deliberately links a duplicate pair and a colliding pair.
    let text = error.to_string();
    assert!(
        text.contains("`Dup.Tool@1.0.0` is registered twice"),
        "{text}"
    );
    // Both places are named, and the colliding pair too: found in the binary without anyone
    // listing them.
    assert!(
        text.contains("first::one") && text.contains("second::two"),
        "{text}"
    );
    assert!(text.contains("share the wire name `A_B_C`"), "{text}");
}

fn pipeline() -> Pipeline {
    Pipeline::new(
        Registry::builder()
            .tool(fixtures::calculator_add::TOOL)
            .tool(fixtures::ring::TOOL)
            .tool(fixtures::panic::TOOL)
            .tool(fixtures::slow::TOOL)
            .tool(fixtures::send::TOOL)
            .tool(fixtures::get_emails::TOOL)
            .tool(fixtures::get_timestamp::TOOL)
            .tool(fixtures::util_null::TOOL)
            .build()
            .unwrap(),
    )
}

async fn call(tool_id: &str, input: Value, context: Value) -> CallOutcome {
    let request: CallToolRequest = serde_json::from_value(json!({
        "call_id": "c1", "tool_id": tool_id, "input": input, "context": context
    }))
    .unwrap();
    pipeline().call(request).await
}

#[tokio::test]
async fn a_call_runs_the_tool_and_echoes_the_call_id() {
    let CallOutcome::Completed(response) =
        call("Calculator.Add", json!({"a": 10, "b": 5}), json!({})).await
    else {
        panic!()
    };
    assert_eq!(response.call_id, "c1");
    assert_eq!(
        response.result,
        CallResult::Success {
            value: Some(json!(15.0))
        }
    );
}

#[tokio::test]
async fn invalid_input_is_422_keyed_by_parameter() {
    let outcome = call(
        "Calculator.Add",
        json!({"a": 10, "b": "infinity", "c": 3}),
        json!({}),
    )
    .await;
    let CallOutcome::Invalid(invalid) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        invalid.parameter_errors["b"].contains("number"),
        "{invalid:?}"
    );
    assert!(invalid.parameter_errors.contains_key("c"), "{invalid:?}");
    let CallOutcome::Invalid(missing) = call("Calculator.Add", json!({"a": 10}), json!({})).await
    else {
        panic!()
    };
    assert_eq!(missing.parameter_errors["b"], "is required");
    let CallOutcome::Invalid(_) = call("Calculator.Add", json!([1, 2]), json!({})).await else {
        panic!()
    };
    let CallOutcome::Invalid(_) = call("Calculator.Add", Value::Null, json!({})).await else {
        panic!()
    };
}

#[tokio::test]
async fn tool_errors_panics_and_timeouts_are_failed_results() {
    let log = harness::Log::captured();
    let CallOutcome::Completed(rung) = call(
        "Doorbell.Ring",
        json!({"doorbell_id": "doorbell1"}),
        json!({}),
    )
    .await
    else {
        panic!()
    };
    let CallResult::Failure { error } = rung.result else {
        panic!()
    };
    assert_eq!(
        error,
        ToolError::new("Doorbell ID not found")
            .developer_message("The doorbell with ID 'doorbell1' does not exist.")
            .can_retry(true)
            .additional_prompt_content("ids: doorbell42,doorbell84")
            .retry_after_ms(500)
    );
    let CallOutcome::Completed(panicked) = call("Util.Panic", json!({}), json!({})).await else {
        panic!()
    };
    let CallResult::Failure { error } = panicked.result else {
        panic!()
    };
    // Each panic test finds its own marker: the log is one for the whole process.
    assert!(
        !error.message.contains("the fixture panicked on purpose"),
        "the panic text stays out of the answer"
    );
    assert!(
        log.text().contains("the fixture panicked on purpose"),
        "…and is in the log"
    );
    let CallOutcome::Completed(slow) = call("Util.Slow", json!({}), json!({})).await else {
        panic!()
    };
    let CallResult::Failure { error } = slow.result else {
        panic!()
    };
    assert!(error.can_retry);
}

#[tokio::test]
async fn requirements_are_checked_before_input_and_values_stay_out_of_errors() {
    // Invalid input *and* a missing secret: the requirement is reported first (oxp-notes §3.28).
    let CallOutcome::Rejected(rejected) = call("SMS.Send", json!({}), json!({})).await else {
        panic!()
    };
    assert_eq!(
        rejected.missing_requirements.unwrap().secrets,
        ["TWILIO_API_KEY"]
    );
    let context = json!({"secrets": [{"id": "TWILIO_API_KEY", "value": "sk-very-secret"}]});
    let outcome = call("SMS.Send", json!({"to": "+1", "body": "hi"}), context).await;
    let CallOutcome::Completed(sent) = &outcome else {
        panic!()
    };
    assert_eq!(
        sent.result,
        CallResult::Success {
            value: Some(json!("sent 2 chars to +1 with a 14-char key"))
        }
    );
    assert!(!format!("{outcome:?}").contains("sk-very-secret"));

    let CallOutcome::Rejected(rejected) = call(
        "Gmail.GetEmails",
        json!({}),
        json!({"authorization": [{"id": "google", "token": "t"}]}),
    )
    .await
    else {
        panic!()
    };
    assert!(rejected.missing_requirements.unwrap().user_id);
    let CallOutcome::Rejected(rejected) =
        call("Gmail.GetEmails", json!({}), json!({"user_id": "u"})).await
    else {
        panic!()
    };
    assert!(
        rejected.message.contains("authorization for google"),
        "{}",
        rejected.message
    );
    let full = json!({"user_id": "u", "authorization": [{"id": "google", "token": "t"}]});
    let CallOutcome::Completed(emails) =
        call("Gmail.GetEmails", json!({"n_emails": 1}), full).await
    else {
        panic!()
    };
    assert_eq!(
        emails.result,
        CallResult::Success {
            value: Some(json!([{"from": "sender0@example.com", "subject": "Hello u"}]))
        }
    );
}

#[tokio::test]
async fn sync_tools_and_unit_tools_work() {
    let CallOutcome::Completed(now) = call("System.GetTimestamp", json!({}), json!({})).await
    else {
        panic!()
    };
    assert!(matches!(
        now.result,
        CallResult::Success {
            value: Some(Value::Number(_))
        }
    ));
    let CallOutcome::Completed(null) = call("Util.Null", json!({}), json!({})).await else {
        panic!()
    };
    assert_eq!(null.result, CallResult::Success { value: None });
}

// ---- The glue: how a validated input reaches the fn's parameters ----------------------------

/// Plain parameters: read one by one by the runtime (no per-tool `Deserialize`).
#[tool(toolkit = "Glue", version = "1.0.0")]
async fn plain(
    /// A count.
    count: i64,
    /// A label.
    label: Option<String>,
    /// A keyword parameter.
    r#type: String,
) -> String {
    format!("{count}/{label:?}/{type}", type = r#type)
}

/// A parameter with `#[serde]` attributes: read by a derived `Deserialize`, which honours them.
#[tool(toolkit = "Glue", version = "1.0.0")]
fn renamed(
    /// A count, `n` on the wire.
    #[serde(rename = "n")]
    count: i64,
) -> i64 {
    count * 2
}

async fn invoke(
    descriptor: &'static oxp_runtime::ToolDescriptor,
    input: Value,
) -> Result<Value, String> {
    use oxp_runtime::{Invoke, InvokeError};
    let context = oxp_runtime::ToolContext::new("c".to_owned());
    let result = match descriptor.invoke {
        Invoke::Async(glue) => glue(context, input).await,
        Invoke::Blocking(glue) => glue(context, input),
    };
    match result {
        Ok(value) => Ok(value.unwrap_or(Value::Null)),
        Err(InvokeError::Input(e)) => Err(e.to_string()),
        Err(_) => Err("another error".to_owned()),
    }
}

#[tokio::test]
async fn plain_parameters_are_read_by_name_with_options_absent_or_null() {
    let read = |input| invoke(plain::TOOL, input);
    assert_eq!(
        read(json!({"count": 3, "type": "t"})).await.unwrap(),
        json!("3/None/t")
    );
    assert_eq!(
        read(json!({"count": 3, "label": null, "type": "t"}))
            .await
            .unwrap(),
        json!("3/None/t")
    );
    assert_eq!(
        read(json!({"count": 3, "label": "x", "type": "t"}))
            .await
            .unwrap(),
        json!("3/Some(\"x\")/t")
    );
    // What the schema lets through but the type does not (1.0 is a JSON Schema integer), and
    // what a caller that skips validation could send: each error names the parameter.
    let error = read(json!({"count": 1.0, "type": "t"})).await.unwrap_err();
    assert!(error.starts_with("`count`: invalid type"), "{error}");
    assert_eq!(
        read(json!({"type": "t"})).await.unwrap_err(),
        "missing field `count`"
    );
    let error = read(json!({"count": 1, "type": "t", "extra": 1}))
        .await
        .unwrap_err();
    assert!(
        error.starts_with("unknown field `extra`, expected one of `count`, `label`, `type`"),
        "{error}"
    );
    let error = read(json!([1, 2])).await.unwrap_err();
    assert!(
        error.contains("expected an object of the tool's parameters"),
        "{error}"
    );
}

/// Sum fifteen numbers and an optional sixteenth (more parameters than the runtime's tuple
/// reader takes, 16: read by the tool's own glue).
#[tool(toolkit = "Glue", version = "1.0.0")]
#[allow(clippy::too_many_arguments)]
async fn seventeen(
    /// 1
    a: i64,
    /// 2
    b: i64,
    /// 3
    c: i64,
    /// 4
    d: i64,
    /// 5
    e: i64,
    /// 6
    f: i64,
    /// 7
    g: i64,
    /// 8
    h: i64,
    /// 9
    i: i64,
    /// 10
    j: i64,
    /// 11
    k: i64,
    /// 12
    l: i64,
    /// 13
    m: i64,
    /// 14
    n: i64,
    /// 15
    o: i64,
    /// 16
    p: Option<i64>,
    /// 17
    q: String,
) -> String {
    let sum = a + b + c + d + e + f + g + h + i + j + k + l + m + n + o + p.unwrap_or(100);
    format!("{sum}/{q}")
}

#[tokio::test]
async fn a_tool_with_more_parameters_than_the_tuple_reader_takes_reads_them_all() {
    let mut input = json!({"q": "last"});
    for (name, n) in "abcdefghijklmno".chars().zip(1..) {
        input[name.to_string()] = json!(n);
    }
    // 1 + … + 15 = 120, and the absent `p` is `None`.
    assert_eq!(
        invoke(seventeen::TOOL, input.clone()).await.unwrap(),
        json!("220/last")
    );
    input["p"] = json!(0);
    assert_eq!(
        invoke(seventeen::TOOL, input.clone()).await.unwrap(),
        json!("120/last")
    );
    input["r"] = json!(1);
    let error = invoke(seventeen::TOOL, input).await.unwrap_err();
    assert!(error.starts_with("unknown field `r`"), "{error}");
}

/// A parameter whose own `Deserialize` panics: reading the input is the tool's code too.
#[derive(schemars::JsonSchema)]
struct Touchy(String);

impl<'de> serde::Deserialize<'de> for Touchy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        panic!("Touchy refused {text:?} while reading its input")
    }
}

/// Echo the text, if its parameter lets it be read.
#[tool(toolkit = "Glue", version = "1.0.0")]
async fn touchy(
    /// Any text.
    value: Touchy,
) -> String {
    value.0
}

#[tokio::test]
async fn a_panic_while_reading_the_input_is_contained_like_the_tools_own() {
    let log = harness::Log::captured();
    let pipeline = Pipeline::new(
        Registry::builder()
            .tool(touchy::TOOL)
            .tool(fixtures::calculator_add::TOOL)
            .build()
            .unwrap(),
    );
    let request = |tool_id: &str, input: Value| -> CallToolRequest {
        serde_json::from_value(json!({"tool_id": tool_id, "input": input})).unwrap()
    };
    let CallOutcome::Completed(touched) = pipeline
        .call(request("Glue.Touchy", json!({"value": "secret-ish"})))
        .await
    else {
        panic!()
    };
    let CallResult::Failure { error } = touched.result else {
        panic!("{:?}", touched.result)
    };
    assert!(
        !error.message.contains("while reading its input"),
        "the panic text stays out of the answer: {error:?}"
    );
    assert!(
        log.text()
            .contains("Touchy refused \\\"secret-ish\\\" while reading its input")
            || log
                .text()
                .contains("Touchy refused \"secret-ish\" while reading its input"),
        "…and is in the log"
    );
    // The pipeline goes on serving.
    let CallOutcome::Completed(added) = pipeline
        .call(request("Calculator.Add", json!({"a": 1, "b": 2})))
        .await
    else {
        panic!()
    };
    assert!(matches!(added.result, CallResult::Success { .. }));
}

#[tokio::test]
async fn serde_attributes_on_parameters_are_honoured() {
    assert_eq!(
        invoke(renamed::TOOL, json!({"n": 4})).await.unwrap(),
        json!(8)
    );
    let schema = Registry::builder()
        .tool(renamed::TOOL)
        .build()
        .unwrap()
        .tools()[0]
        .definition()
        .input_schema
        .clone();
    assert_eq!(schema["required"], json!(["n"]));
    assert!(invoke(renamed::TOOL, json!({"count": 4})).await.is_err());
}

/// `crate = "path"`: a crate that reaches the runtime by another path (a renamed dependency, or
/// a re-export) says so, and the generated code goes through it (`ui/crate_path_not_found.rs`
/// shows a wrong path is an error on the string).
mod runtime_alias {
    pub use oxp_runtime::__private;
}

/// Add two integers, through a renamed path.
#[tool(toolkit = "Renamed", version = "1.0.0", crate = "crate::runtime_alias")]
async fn renamed_add(a: i64, b: i64) -> i64 {
    a + b
}

#[tokio::test]
async fn a_tool_reaches_the_runtime_by_the_path_it_names() {
    let registry = Registry::builder().tool(renamed_add::TOOL).build().unwrap();
    let outcome = Pipeline::new(registry)
        .call(
            serde_json::from_value(
                json!({"tool_id": "Renamed.RenamedAdd", "input": {"a": 2, "b": 3}}),
            )
            .unwrap(),
        )
        .await;
    let CallOutcome::Completed(response) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        response.result,
        CallResult::Success {
            value: Some(json!(5))
        }
    );
}

/// Mirrors a list into a header, which carries one value.
#[tool(toolkit = "Headers", name = "List", version = "1.0.0")]
fn header_list(#[mcp_header("Tags")] tags: Vec<String>) -> usize {
    tags.len()
}

/// Mirrors two parameters into one header.
#[tool(toolkit = "Headers", name = "Twice", version = "1.0.0")]
fn header_twice(#[mcp_header("Region")] a: String, #[mcp_header("region")] b: String) -> String {
    a + &b
}

/// Mirrors a string and an optional number.
#[tool(toolkit = "Headers", name = "Fine", version = "1.0.0")]
fn header_fine(
    #[mcp_header("Region")] region: String,
    #[mcp_header("Limit")] limit: Option<u32>,
) -> String {
    format!("{region} {limit:?}")
}

/// `#[mcp_header]` puts `x-mcp-header` on a primitive parameter's schema; a header cannot carry
/// a list, and two parameters cannot share one (names ignore case): both are build errors.
#[test]
fn mcp_headers_mirror_one_primitive_each() {
    let registry = Registry::builder().tool(header_fine::TOOL).build().unwrap();
    let schema = &registry
        .resolve("Headers.Fine")
        .unwrap()
        .definition()
        .input_schema;
    assert_eq!(schema["properties"]["region"]["x-mcp-header"], "Region");
    assert_eq!(schema["properties"]["limit"]["x-mcp-header"], "Limit");
    assert_eq!(schema["required"], serde_json::json!(["region"]));
    let list = Registry::builder()
        .tool(header_list::TOOL)
        .build()
        .unwrap_err();
    assert!(
        list.to_string()
            .contains("`tags` is mirrored into the `Mcp-Param-Tags` header"),
        "{list}"
    );
    let twice = Registry::builder()
        .tool(header_twice::TOOL)
        .build()
        .unwrap_err();
    assert!(
        twice
            .to_string()
            .contains("are both mirrored into `Mcp-Param-region`"),
        "{twice}"
    );
}
