//! What a tool tells hosts about itself: behaviour hints and titles as MCP
//! annotations, examples checked by the registry and given to Anthropic, deprecation marked for
//! hosts and models and logged when called, and `OXP_TOOLS` choosing what every front exposes.

#[path = "harness/mod.rs"]
mod harness;

use harness::Oxp;
use oxp_runtime::call::Pipeline;
use oxp_runtime::mcp::McpServer;
use oxp_runtime::providers::{Limits, Provider};
use oxp_runtime::registry::RegistryProblem;
use oxp_runtime::server::Server;
use oxp_runtime::{Registry, ToolDescriptor, tool};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

/// Read a file.
#[tool(toolkit = "Files", version = "1.0.0", title = "Read a file", read_only, open_world = false,
       tags = ["files", "safe"], example = r#"{"path": "/etc/hostname"}"#)]
fn read(path: String) -> String {
    path
}

/// Delete a file.
#[tool(toolkit = "Files", version = "1.0.0", destructive, idempotent, tags = ["files"])]
fn delete(path: String) -> bool {
    !path.is_empty()
}

/// Overwrite a file.
#[tool(toolkit = "Files", version = "1.0.0", destructive = false, open_world)]
fn write(path: String, text: String) -> usize {
    path.len() + text.len()
}

/// Ping.
#[tool(toolkit = "Util", version = "1.0.0", deprecated = "use Util.Health")]
fn ping() -> String {
    "pong".into()
}

/// Health.
#[tool(toolkit = "Util", version = "1.0.0", tags = ["safe"])]
fn health() -> bool {
    true
}

/// Add two numbers.
#[tool(toolkit = "Math", version = "1.0.0", tags = ["math"])]
fn add(a: f64, b: f64) -> f64 {
    a + b
}

/// Add two numbers, twice as well.
#[tool(toolkit = "Math", name = "Add", version = "2.0.0", tags = ["math"])]
fn add_two(a: f64, b: f64) -> f64 {
    a + b
}

/// Multiply.
#[tool(toolkit = "Math", version = "1.0.0", tags = ["math"])]
fn mul(a: f64, b: f64) -> f64 {
    a * b
}

/// Divide.
#[tool(toolkit = "Math", version = "1.1.0", tags = ["math"])]
fn div(a: f64, b: f64) -> f64 {
    a / b
}

/// Echo.
#[tool(toolkit = "Text", version = "0.3.0")]
fn echo(text: String) -> String {
    text
}

/// The ten tools.
const TEN: [&ToolDescriptor; 10] = [
    read::TOOL,
    delete::TOOL,
    write::TOOL,
    ping::TOOL,
    health::TOOL,
    add::TOOL,
    add_two::TOOL,
    mul::TOOL,
    div::TOOL,
    echo::TOOL,
];

fn ten() -> oxp_runtime::RegistryBuilder {
    TEN.iter().fold(Registry::builder(), |b, t| b.tool(t))
}

fn ids(registry: &Registry) -> Vec<&str> {
    registry.tools().iter().map(|t| t.id()).collect()
}

#[test]
fn selections_over_ten_tools() {
    for (selection, expected) in [
        (
            "Files.*",
            vec![
                "Files.Delete@1.0.0",
                "Files.Read@1.0.0",
                "Files.Write@1.0.0",
            ],
        ),
        (
            "tag:math,-Math.Add",
            vec!["Math.Div@1.1.0", "Math.Mul@1.0.0"],
        ),
        ("Math.Add@1", vec!["Math.Add@1.0.0"]),
        (
            "Math.Add@2.0.0, Text.Echo",
            vec!["Math.Add@2.0.0", "Text.Echo@0.3.0"],
        ),
        ("Math.Div@1.1", vec!["Math.Div@1.1.0"]),
        ("tag:safe", vec!["Files.Read@1.0.0", "Util.Health@1.0.0"]),
        (
            "-Files.*,-tag:math",
            vec!["Text.Echo@0.3.0", "Util.Health@1.0.0", "Util.Ping@1.0.0"],
        ),
    ] {
        let registry = ten().select(selection).build().unwrap();
        assert_eq!(ids(&registry), expected, "{selection}");
    }
    for (selection, says) in [
        ("", "names nothing"),
        (" , ", "names nothing"),
        ("Mail.*", "`Mail.*` in the tool selection matches no tool"),
        ("tag:nope", "matches no tool"),
        ("Math.Add@3", "matches no tool"),
        ("Math", "no `.` between toolkit and name"),
        ("Math.Add@1.x", "the version is"),
        ("Files.*@1", "a whole toolkit has no version"),
        ("-Files.*,-Math.*,-Util.*,-Text.*", "leaves no tool"),
    ] {
        let error = ten().select(selection).build().unwrap_err();
        assert!(matches!(
            error.problems[0],
            RegistryProblem::Selection { .. }
        ));
        assert!(error.to_string().contains(says), "{selection:?}: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_hosts_see_titles_and_only_the_stated_hints() {
    let pipeline = Pipeline::new(ten().build().unwrap());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline).nest("/mcp", mcp)).await;
    let transport = StreamableHttpClientTransport::from_uri(format!("{}/mcp", oxp.base));
    let client = ().serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let listed = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        serde_json::to_value(tool).unwrap()
    };
    let read = listed("Files_Read");
    assert_eq!(read["title"], "Read a file");
    assert_eq!(
        read["annotations"],
        json!({"title": "Read a file", "readOnlyHint": true, "openWorldHint": false})
    );
    assert_eq!(
        listed("Files_Delete")["annotations"],
        json!({"destructiveHint": true, "idempotentHint": true})
    );
    assert_eq!(
        listed("Files_Write")["annotations"],
        json!({"destructiveHint": false, "openWorldHint": true})
    );
    // A tool that states nothing says nothing: the host applies the spec's defaults.
    let echo = listed("Text_Echo");
    assert!(
        echo.get("annotations").is_none() && echo.get("title").is_none(),
        "{echo}"
    );
    assert_eq!(
        listed("Util_Ping")["description"],
        "Deprecated: use Util.Health. Ping."
    );
    client.cancel().await.unwrap();
}

#[test]
fn models_read_examples_and_deprecations_where_the_format_has_room() {
    let registry = ten().build().unwrap();
    let anthropic = Value::from(
        Provider::Anthropic
            .export(&registry, &Limits::default(), false)
            .unwrap(),
    );
    let tool = |tools: &Value, name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name || t["function"]["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        tool(&anthropic, "Files_Read")["input_examples"],
        json!([{"path": "/etc/hostname"}])
    );
    assert!(
        tool(&anthropic, "Files_Delete")
            .get("input_examples")
            .is_none()
    );
    assert_eq!(
        tool(&anthropic, "Util_Ping")["description"],
        "Deprecated: use Util.Health. Ping."
    );
    // OpenAI has no field for examples: nothing is invented; the deprecation is in the text.
    let openai = Value::from(
        Provider::OpenAiChat
            .export(&registry, &Limits::default(), false)
            .unwrap(),
    );
    let read = tool(&openai, "Files_Read");
    assert!(!read.to_string().contains("hostname"), "{read}");
    assert_eq!(
        tool(&openai, "Util_Ping")["function"]["description"],
        "Deprecated: use Util.Health. Ping."
    );
}

/// Count things.
#[tool(toolkit = "Bad", version = "1.0.0", example = r#"{"n": "three"}"#)]
fn count(n: u32) -> u32 {
    n
}

#[test]
fn an_example_that_does_not_fit_the_input_schema_refuses_the_registry() {
    let error = Registry::builder().tool(count::TOOL).build().unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("hints::count")
            && text.contains("example 1 does not fit the input schema: /n"),
        "{text}"
    );
}

#[tokio::test]
async fn a_deprecated_tool_is_served_and_its_call_logged() {
    let log = harness::Log::captured();
    let pipeline = Pipeline::new(ten().build().unwrap());
    let request = serde_json::from_str(r#"{"tool_id": "Util.Ping"}"#).unwrap();
    assert_eq!(pipeline.call(request).await.status(), 200);
    let request = serde_json::from_str(r#"{"tool_id": "Util.Health"}"#).unwrap();
    assert_eq!(pipeline.call(request).await.status(), 200);
    let text = log.text();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("a deprecated tool was called"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("use Util.Health") && lines[0].contains("Util.Ping@1.0.0"),
        "{}",
        lines[0]
    );
}

#[test]
fn oxp_tools_narrows_every_front_of_the_example() {
    let binary = harness::example_binary();
    let run = |args: &[&str], tools: &str| {
        let output = std::process::Command::new(&binary)
            .args(args)
            .env("OXP_TOOLS", tools)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    for format in ["oxp", "openai", "anthropic", "gemini"] {
        let (code, out, err) = run(&["tools", "--format", format], "Doorbell.*");
        assert_eq!(code, Some(0), "{err}");
        assert!(
            out.contains("Doorbell_Ring") && !out.contains("Calculator_Add"),
            "{format}: {out}"
        );
    }
    let (code, _, err) = run(&["tools", "--format", "oxp"], "");
    assert_eq!(code, Some(2));
    assert!(err.contains("names nothing"), "{err}");
    let (code, _, err) = run(&["tools", "--format", "oxp"], "Mail.*");
    assert_eq!(code, Some(2));
    assert!(
        err.contains("`Mail.*` in the tool selection matches no tool"),
        "{err}"
    );
    // dispatch: a model's call to a tool left out is an unknown tool for the model.
    let mut child = std::process::Command::new(&binary)
        .args(["dispatch", "--format", "anthropic"])
        .env("OXP_TOOLS", "-Calculator.*")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"content": [{"type": "tool_use", "id": "t1", "name": "Calculator_Add", "input": {"a": 1, "b": 2}}]}"#)
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let reply: Value = serde_json::from_slice(&output.stdout).unwrap();
    let result = &reply[0]["content"][0];
    assert_eq!(result["is_error"], true, "{reply}");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("'Calculator_Add' is not available"),
        "{reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oxp_tools_narrows_the_served_list_and_mcp() {
    let example = harness::start_example(&[("OXP_TOOLS", "Calculator.Add@2")]);
    let list: Value = reqwest::Client::new()
        .get(format!("{}/tools", example.base))
        .header("OXP-Version", "1.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["Calculator.Add@2.0.0"]);
    let transport = StreamableHttpClientTransport::from_uri(format!("{}/mcp", example.base));
    let client = ().serve(transport).await.unwrap();
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["Calculator_Add"]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_playgrounds_hints_are_behind_the_servers_authentication() {
    use oxp_runtime::server::ServerAuth;
    let key = "a-playground-test-key-of-at-least-32-bytes";
    let server = Server::new(ten().build().unwrap())
        .playground(true)
        .auth(ServerAuth::default().api_key(key));
    let oxp = Oxp::start(server).await;
    let anonymous = oxp
        .request(reqwest::Method::GET, "/playground/hints")
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let hints: Value = oxp
        .request(reqwest::Method::GET, "/playground/hints")
        .header("OXP-API-Key", key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(hints["Files.Read@1.0.0"]["title"], "Read a file");
    assert_eq!(
        hints["Files.Read@1.0.0"]["examples"],
        json!([{"path": "/etc/hostname"}])
    );
    assert_eq!(hints["Files.Delete@1.0.0"]["destructive"], true);
    assert_eq!(hints["Text.Echo@0.3.0"]["read_only"], Value::Null);
    // What `/mcp` calls each version by, for the page's calls over MCP: an older one by its
    // version, never the latest's name.
    assert_eq!(hints["Math.Add@2.0.0"]["mcp_name"], "Math_Add");
    assert_eq!(hints["Math.Add@1.0.0"]["mcp_name"], "Math_Add__v1_0_0");
    // A page of another origin cannot read them (the guard's 403, before authentication).
    let foreign = oxp
        .request(reqwest::Method::GET, "/playground/hints")
        .header("OXP-API-Key", key)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    // Without the playground there is no such route.
    let off = Oxp::start(Server::new(ten().build().unwrap()).playground(false)).await;
    let missing = off
        .request(reqwest::Method::GET, "/playground/hints")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

/// Find invoices.
#[tool(
    toolkit = "Billing",
    version = "1.0.0",
    always_load,
    search_hint = "invoice receipt pdf"
)]
fn find(text: String) -> String {
    text
}

/// Find invoices.
#[tool(toolkit = "Billing", name = "Find", version = "1.0.0")]
fn find_unhinted(text: String) -> String {
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_that_defer_tools_read_the_search_hints_in_mcp_meta_and_nowhere_else() {
    let registry = || {
        Registry::builder()
            .tool(find::TOOL)
            .tool(echo::TOOL)
            .build()
            .unwrap()
    };
    let pipeline = Pipeline::new(registry());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline).nest("/mcp", mcp)).await;
    let transport = StreamableHttpClientTransport::from_uri(format!("{}/mcp", oxp.base));
    let client = ().serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let listed = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        serde_json::to_value(tool).unwrap()
    };
    assert_eq!(
        listed("Billing_Find")["_meta"],
        json!({"anthropic/alwaysLoad": true, "anthropic/searchHint": "invoice receipt pdf"})
    );
    // A tool that states neither is deferred or not as the host decides.
    let echo = listed("Text_Echo");
    assert!(echo.get("_meta").is_none(), "{echo}");
    client.cancel().await.unwrap();
    // OXP's closed ToolDefinition and the providers' formats have no field for them.
    let definitions = oxp
        .request(reqwest::Method::GET, "/tools")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for exported in [
        definitions,
        Value::from(
            Provider::Anthropic
                .export(&registry(), &Limits::default(), false)
                .unwrap(),
        )
        .to_string(),
    ] {
        assert!(
            !exported.contains("invoice receipt") && !exported.contains("lwaysLoad"),
            "{exported}"
        );
    }
}

#[test]
fn a_search_hint_changes_no_published_definition_and_is_checked_by_hand_too() {
    // `tools.lock` records what `GET /tools` publishes; the hints are not part of it, so adding,
    // changing or dropping one is no change a caller sees and needs no new version.
    let hinted = Registry::builder().tool(find::TOOL).build().unwrap();
    let plain = Registry::builder()
        .tool(find_unhinted::TOOL)
        .build()
        .unwrap();
    let lock = oxp_runtime::lock::Lock::of(&plain);
    assert_eq!(lock, oxp_runtime::lock::Lock::of(&hinted));
    assert!(lock.check(&hinted).is_empty());
    // Written by hand, a hint the attribute would refuse is refused in the same words
    // (ui/bad_search_hint.stderr).
    static TWO_LINES: ToolDescriptor = ToolDescriptor {
        hints: oxp_runtime::ToolHints::NONE.__search(false, Some("receipt\ninvoice")),
        ..*find::TOOL
    };
    let error = Registry::builder().tool(&TWO_LINES).build().unwrap_err();
    assert!(
        error.to_string().contains("`search_hint` holds '\\n'"),
        "{error}"
    );
}
