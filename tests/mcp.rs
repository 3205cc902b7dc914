//! MCP: the registry over streamable HTTP (`/mcp`) and stdio (`<bin> mcp`), driven by the
//! official Rust SDK's client (rmcp) in process, and by the Python `mcp` package's client.

#[path = "harness/mod.rs"]
mod harness;

use std::process::Command;

use harness::Oxp;
use oxp_runtime::mcp::McpServer;
use oxp_runtime::protocol::{CallContext, Sensitive, ToolSecret};
use oxp_runtime::server::{Server, ServerAuth};
use oxp_runtime::{call::Pipeline, tool};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// A point: an object value, so it comes back as structured content.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Point {
    /// Across.
    pub x: i64,
    /// Down.
    pub y: i64,
}

/// Make a point.
#[tool(toolkit = "Geometry", version = "1.0.0")]
async fn point(
    /// Across.
    x: i64,
    /// Down.
    y: i64,
) -> Point {
    Point { x, y }
}

/// A photo of the point, with the point beside it.
#[tool(toolkit = "Geometry", version = "1.0.0")]
fn photo(
    /// Across.
    x: i64,
) -> oxp_runtime::content::Contents<Point> {
    use oxp_runtime::content::{Content, Contents};
    Contents::new([
        Content::text("a point"),
        Content::image(b"PNG", "image/png").expect("an image type"),
    ])
    .with_structured(Point { x, y: 0 })
}

/// The forecast for a region, which MCP clients mirror into the `Mcp-Param-Region` header.
#[tool(toolkit = "Weather", version = "1.0.0")]
async fn forecast(#[mcp_header("Region")] region: String) -> String {
    format!("sunny in {region}")
}

fn pipeline() -> Pipeline {
    Pipeline::new(
        oxp_tests::all_tools()
            .tool(point::TOOL)
            .tool(photo::TOOL)
            .tool(forecast::TOOL)
            .build()
            .unwrap(),
    )
}

/// A server with MCP at `/mcp`, over one pipeline, as `serve()` composes them.
fn with_mcp(configure: impl FnOnce(McpServer) -> McpServer) -> Server {
    let pipeline = pipeline();
    let mcp = configure(McpServer::new(pipeline.clone())).into_router();
    Server::from_pipeline(pipeline).nest("/mcp", mcp)
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    name: &str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!()
    };
    let call = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
    harness::bounded(
        &format!("rmcp's tools/call of {name}"),
        client.call_tool(call),
    )
    .await
    .expect("a tool result")
}

/// An rmcp client on the server's `/mcp`.
async fn connect(oxp: &Oxp) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_uri(format!("{}/mcp", oxp.base));
    harness::bounded("rmcp's initialize", ().serve(transport))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_over_streamable_http() {
    let oxp = Oxp::start(with_mcp(|mcp| mcp)).await;
    let client = connect(&oxp).await;

    let tools = harness::bounded("rmcp's tools/list", client.list_all_tools())
        .await
        .unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    // The latest version under the wire name, older ones with a version suffix.
    assert!(names.contains(&"Calculator_Add"));
    assert!(names.contains(&"Math_Which"));
    assert!(names.contains(&"Math_Which__v1_0_0"));
    assert!(names.contains(&"Math_Which__v0_9_0"));
    let add = tools.iter().find(|t| t.name == "Calculator_Add").unwrap();
    assert_eq!(add.description.as_deref(), Some("Add two numbers."));
    assert_eq!(add.input_schema["required"], json!(["a", "b"]));
    let point_tool = tools.iter().find(|t| t.name == "Geometry_Point").unwrap();
    assert_eq!(point_tool.output_schema.as_ref().unwrap()["type"], "object");

    let sum = call(&client, "Calculator_Add", json!({"a": 2, "b": 3})).await;
    assert_eq!((text(&sum), sum.is_error), ("5.0".to_owned(), Some(false)));
    let latest = call(&client, "Math_Which", json!({})).await;
    assert_eq!(text(&latest), "1.10.0");
    let older = call(&client, "Math_Which__v1_0_0", json!({})).await;
    assert_eq!(text(&older), "1.0.0");
    let structured = call(&client, "Geometry_Point", json!({"x": 1, "y": 2})).await;
    assert_eq!(structured.structured_content, Some(json!({"x": 1, "y": 2})));

    // A ToolError: isError with its message and retry hint.
    let failed = call(&client, "Doorbell_Ring", json!({"doorbell_id": "d1"})).await;
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(
        text(&failed),
        "Doorbell ID not found\nids: doorbell42,doorbell84"
    );
    // Invalid input: a clear error naming the parameter, the tool not run.
    let invalid = call(&client, "Calculator_Add", json!({"a": 2, "b": "three"})).await;
    assert_eq!(invalid.is_error, Some(true));
    assert!(text(&invalid).contains("`b`"), "{}", text(&invalid));
    // A requirement MCP cannot carry, absent on the server side: refused, naming it.
    let refused = call(&client, "SMS_Send", json!({"to": "+1", "body": "hi"})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("TWILIO_API_KEY"),
        "{}",
        text(&refused)
    );
    // Unknown tools are protocol errors.
    let Value::Object(empty) = json!({}) else {
        panic!()
    };
    let unknown = client
        .call_tool(CallToolRequestParams::new("Nope_Tool").with_arguments(empty))
        .await;
    assert!(unknown.is_err());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_secrets_reach_tools_called_over_mcp() {
    let context = CallContext {
        secrets: vec![ToolSecret {
            id: "TWILIO_API_KEY".into(),
            value: Sensitive::new("sk-mcp-key"),
            extra: Default::default(),
        }],
        ..Default::default()
    };
    let mcp = McpServer::new(pipeline()).with_context(context);
    let app = axum::Router::new().nest("/mcp", mcp.into_router());
    let oxp = Oxp::start_router(app).await;
    let client = connect(&oxp).await;
    let sent = call(&client, "SMS_Send", json!({"to": "+1", "body": "hi"})).await;
    assert_eq!(text(&sent), "sent 2 chars to +1 with a 10-char key");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_is_behind_the_servers_authentication() {
    let oxp = Oxp::start(
        with_mcp(|mcp| mcp).auth(ServerAuth::default().api_key("mcp-key-0123456789abcdef")),
    )
    .await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let refused = oxp
        .send(
            oxp.request(reqwest::Method::POST, "/mcp")
                .header("accept", "application/json, text/event-stream")
                .json(&initialize),
        )
        .await;
    assert_eq!(refused.status, 401);
    let client = reqwest::Client::new();
    let accepted = client
        .post(format!("{}/mcp", oxp.base))
        .header("accept", "application/json, text/event-stream")
        .header("OXP-API-Key", "mcp-key-0123456789abcdef")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_over_the_stdio_subcommand() {
    let mut command = tokio::process::Command::new(harness::example_binary());
    command.arg("mcp").env("OXP_LOG", "warn");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let tools = harness::bounded("rmcp's tools/list", client.list_all_tools())
        .await
        .unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "Calculator_Add__v1_0_0",
            "Calculator_Add",
            "Doorbell_Forget",
            "Doorbell_Ring",
            "Doorbell_RingAll"
        ]
    );
    let sum = call(&client, "Calculator_Add__v1_0_0", json!({"a": 2, "b": 3})).await;
    assert_eq!(text(&sum), "5");
    // rmcp's client initializes at 2025-11-25: output schemas describe objects only.
    let add = tools.iter().find(|t| t.name == "Calculator_Add").unwrap();
    assert!(add.output_schema.is_none());
    assert_eq!(sum.structured_content, None);
    let failed = call(&client, "Doorbell_Ring", json!({"doorbell_id": "d1"})).await;
    assert_eq!(failed.is_error, Some(true));
    client.cancel().await.unwrap();
}

fn python() -> String {
    std::env::var("OXP_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Runs `tests/python/<script>` with the Python `mcp` package and `args`, and checks it ends
/// saying `ok`; prints the skip line (and returns) when the package is missing.
async fn python_mcp_script(script: &str, args: Vec<String>, ok: &str) {
    let found = Command::new(python())
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        harness::skip(
            "Python with the `mcp` package (`pip install mcp`, then set OXP_TEST_PYTHON)",
        );
        return;
    }
    let script = format!("{}/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python())
            .arg(script)
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(ok), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_mcp_client_over_http_and_stdio() {
    let example = harness::start_example(&[]);
    let args = vec![format!("{}/mcp", example.base), harness::example_binary()];
    python_mcp_script("mcp_client.py", args, "mcp client: ok").await;
}

/// The Python `mcp` client answers a tool's questions over stdio at its own (earlier) revision:
/// the server asks by requests of its own, and each call goes on with the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_mcp_client_answers_questions_over_stdio() {
    let args = vec![harness::test_example_binary("confirm_server")];
    python_mcp_script("mcp_asking.py", args, "mcp asking: ok").await;
}

/// Over HTTP, an MCP caller is itself. A server started with the operator's user and
/// Google token (what `OXP_USER_ID` and `OXP_TOKEN_GOOGLE` give `serve()`) does not let a remote
/// caller act as the operator: the user is the caller's JWT `sub`, and the operator's token is
/// not used, else every HTTP caller would read the operator's Gmail. Only the single-tenant
/// switch brings the operator's back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_mcp_callers_are_themselves_not_the_operator() {
    use oxp_runtime::protocol::AuthorizationToken;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let secret = "an-mcp-jwt-secret-of-at-least-32-bytes";
    let operator = CallContext {
        user_id: Some("operator@example.com".into()),
        authorization: vec![AuthorizationToken {
            id: "google".into(),
            token: Sensitive::new("ya29.operator-token"),
            extra: Default::default(),
        }],
        ..Default::default()
    };
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"sub": "ada@example.com", "exp": 4_000_000_000u64}),
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap();
    let connect_as = |oxp: &Oxp| {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", oxp.base))
            .auth_header(token.clone());
        ().serve(StreamableHttpClientTransport::from_config(config))
    };
    let server = |single_tenant: bool| {
        with_mcp(|mcp| {
            mcp.with_context(operator.clone())
                .single_tenant(single_tenant)
        })
        .auth(ServerAuth::default().jwt_secret(secret))
    };

    let oxp = Oxp::start(server(false)).await;
    let client = connect_as(&oxp).await.unwrap();
    let emails = call(&client, "Gmail_GetEmails", json!({})).await;
    assert_eq!(
        emails.is_error,
        Some(true),
        "ada has no Google token of her own"
    );
    let refusal = text(&emails);
    assert!(refusal.contains("authorization for google"), "{refusal}");
    assert!(!refusal.contains("operator"), "{refusal}");
    client.cancel().await.unwrap();

    let oxp = Oxp::start(server(true)).await;
    let client = connect_as(&oxp).await.unwrap();
    let emails = call(&client, "Gmail_GetEmails", json!({"n_emails": 1})).await;
    assert_eq!(emails.is_error, Some(false), "{emails:?}");
    let body = serde_json::to_string(&emails).unwrap();
    assert!(body.contains("Hello operator@example.com"), "{body}");
    client.cancel().await.unwrap();
}

/// MCP keeps no sessions: a 2025-06-18 `initialize` is answered without an `MCP-Session-Id`,
/// as JSON, and a later call with no session is served; a plain result is JSON, never a
/// stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_keeps_no_sessions_and_answers_plain_results_as_json() {
    let oxp = Oxp::start(with_mcp(|mcp| mcp)).await;
    let post = |body: serde_json::Value, version: &str| {
        let mut request = reqwest::Client::new()
            .post(format!("{}/mcp", oxp.base))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version);
        // 2026-07-28's standard headers (SEP-2243), checked against the body.
        if body["method"] == "tools/call" {
            request = request
                .header("mcp-method", "tools/call")
                .header("mcp-name", body["params"]["name"].as_str().unwrap());
        }
        request.json(&body).send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let reply = post(initialize, "2025-06-18").await.unwrap();
    assert_eq!(reply.status(), 200);
    assert!(
        reply.headers().get("mcp-session-id").is_none(),
        "no session"
    );
    assert_eq!(reply.headers()["content-type"], "application/json");
    let call = |version: &str| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "Calculator_Add", "arguments": {"a": 1, "b": 2},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {}
        }}})
    };
    for version in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        let reply = post(call(version), version).await.unwrap();
        assert_eq!(reply.status(), 200, "{version}");
        assert_eq!(
            reply.headers()["content-type"],
            "application/json",
            "{version}"
        );
        let body: serde_json::Value = reply.json().await.unwrap();
        assert_eq!(body["result"]["isError"], false, "{version}: {body}");
        assert_eq!(body["id"], 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_the_newest_revision_get_structured_content_for_any_value() {
    let oxp = Oxp::start(with_mcp(|mcp| mcp)).await;
    let list = harness::mcp_2026(&oxp, "tools/list", json!({})).await;
    let add = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Calculator_Add")
        .unwrap();
    assert_eq!(add["outputSchema"]["type"], "number", "{add}");
    let sum = harness::mcp_2026(
        &oxp,
        "tools/call",
        json!({"name": "Calculator_Add", "arguments": {"a": 2, "b": 3}}),
    )
    .await;
    assert_eq!(sum["structuredContent"], json!(5.0), "{sum}");
    assert_eq!(sum["content"][0]["text"], "5.0", "the text beside it");
}

/// A tool returning `Contents`: over MCP, its blocks are the result's `content` and its
/// structured value the `structuredContent` (with that value's schema as `outputSchema`); over
/// OXP, one value `{"content": [...], "structuredContent": ...}`, valid against the OpenAPI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_s_media_reach_mcp_as_blocks_and_oxp_as_one_value() {
    let oxp = Oxp::start(with_mcp(|mcp| mcp)).await;
    let client = connect(&oxp).await;
    let tools = harness::bounded("rmcp's tools/list", client.list_all_tools())
        .await
        .unwrap();
    let photo = tools.iter().find(|t| t.name == "Geometry_Photo").unwrap();
    let output = serde_json::to_value(photo.output_schema.as_ref().unwrap()).unwrap();
    assert_eq!(output["properties"]["x"]["type"], "integer", "{output}");
    let result = call(&client, "Geometry_Photo", json!({"x": 3})).await;
    let blocks = serde_json::to_value(&result.content).unwrap();
    assert_eq!(blocks[0], json!({"type": "text", "text": "a point"}));
    assert_eq!(
        blocks[1],
        json!({"type": "image", "data": "UE5H", "mimeType": "image/png"})
    );
    assert_eq!(result.structured_content, Some(json!({"x": 3, "y": 0})));
    client.cancel().await.unwrap();

    let reply = oxp
        .call(json!({"tool_id": "Geometry.Photo", "input": {"x": 3}}))
        .await;
    assert_eq!(reply.status, 200);
    harness::assert_valid(harness::CALL_RESPONSE, &reply.body);
    let value = &reply.body["value"];
    assert_eq!(value["content"][1]["mimeType"], "image/png");
    assert_eq!(value["structuredContent"], json!({"x": 3, "y": 0}));
}

/// One JSON-RPC request to `/mcp` of `base` at protocol `version`, with the headers its
/// revision asks for; the messages that came back (an SSE stream's events, or one JSON body).
async fn exchange(base: &str, version: &str, body: Value) -> (String, Vec<Value>) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version);
    if version >= "2026-07-28" {
        request = request.header("mcp-method", body["method"].as_str().unwrap());
        if let Some(name) = body["params"]["name"].as_str() {
            request = request.header("mcp-name", name);
        }
    }
    let reply = request.json(&body).send().await.unwrap();
    assert_eq!(reply.status(), 200, "{body}");
    let kind = reply.headers()["content-type"].to_str().unwrap().to_owned();
    let text = reply.text().await.unwrap();
    let messages = harness::mcp_messages(&kind, &text);
    (kind, messages)
}

/// No MCP state lives in one process: a client of each revision runs initialize (where it has
/// one) → list → call → call with progress against two replicas, every request going to the
/// other replica than the last, with no error; progress still arrives on the call's own
/// stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_replica_answers_any_request_of_every_revision() {
    let replicas = [harness::start_example(&[]), harness::start_example(&[])];
    let mut turn = 0usize;
    let mut next = || {
        turn += 1;
        replicas[turn % 2].base.clone()
    };
    for version in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        if version < "2026-07-28" {
            let (_, init) = exchange(
                &next(),
                version,
                json!({"jsonrpc": "2.0", "id": 1,
                "method": "initialize", "params": {"protocolVersion": version,
                "capabilities": {}, "clientInfo": {"name": "replica-test", "version": "1"}}}),
            )
            .await;
            assert_eq!(init[0]["result"]["protocolVersion"], version, "{init:?}");
        }
        let (_, list) = exchange(
            &next(),
            version,
            json!({"jsonrpc": "2.0", "id": 2,
            "method": "tools/list", "params": {"_meta": meta}}),
        )
        .await;
        let tools = list[0]["result"]["tools"].as_array().unwrap();
        assert!(
            tools.iter().any(|t| t["name"] == "Doorbell_RingAll"),
            "{version}"
        );
        let (kind, added) = exchange(
            &next(),
            version,
            json!({"jsonrpc": "2.0", "id": 3,
            "method": "tools/call", "params": {"name": "Calculator_Add",
            "arguments": {"a": 2, "b": 3}, "_meta": meta}}),
        )
        .await;
        assert_eq!(kind, "application/json", "{version}: nothing streamed");
        assert_eq!(
            added[0]["result"]["content"][0]["text"], "5.0",
            "{version}: {added:?}"
        );
        let mut with_progress = meta.clone();
        with_progress["progressToken"] = json!("ring-1");
        let (kind, rung) = exchange(
            &next(),
            version,
            json!({"jsonrpc": "2.0", "id": 4,
            "method": "tools/call", "params": {"name": "Doorbell_RingAll",
            "arguments": {"doorbells": 3}, "_meta": with_progress}}),
        )
        .await;
        assert!(kind.starts_with("text/event-stream"), "{version}: {kind}");
        let progress: Vec<&Value> = rung
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert!(!progress.is_empty(), "{version}: no progress in {rung:?}");
        assert!(
            progress
                .iter()
                .all(|p| p["params"]["progressToken"] == "ring-1")
        );
        let last = rung.last().unwrap();
        assert_eq!(last["id"], 4, "{version}: the result comes last: {rung:?}");
        assert_eq!(last["result"]["isError"], false, "{version}: {last}");
    }
}

/// A `tools/call` at 2026-07-28 from a client that can answer elicitations, with `extra`
/// params; the JSON-RPC answer.
async fn call_asking(base: &str, bin: &str, extra: Value) -> Value {
    let mut params = json!({"name": "Files_Empty", "arguments": {"bin": bin}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let (_, answer) = exchange(
        base,
        "2026-07-28",
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}),
    )
    .await;
    answer.last().unwrap().clone()
}

const STATE_KEY: &str = "a state key every replica shares, 32+ bytes";

/// A call that asks goes on at any replica when they share `OXP_STATE_KEY`: the question from
/// one, the answer to the other; and without the key, the refusal says so, runs nothing, and
/// blames no one's client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_asks_goes_on_at_any_replica_with_a_shared_key() {
    let binary = harness::test_example_binary("confirm_server");
    let shared = [("OXP_STATE_KEY", STATE_KEY)];
    let replicas = [
        harness::start_server(&binary, &shared),
        harness::start_server(&binary, &shared),
    ];
    let first = call_asking(&replicas[0].base, "b1", json!({})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(
        result["inputRequests"]["oxp.confirm"]["params"]["message"],
        "Empty the bin b1?"
    );
    let yes = json!({"requestState": result["requestState"],
        "inputResponses": {"oxp.confirm": {"action": "accept"}}});
    let done = call_asking(&replicas[1].base, "b1", yes).await;
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("emptied b1 (run 1 of"), "{done}");

    let apart = [
        harness::start_server(&binary, &[]),
        harness::start_server(&binary, &[]),
    ];
    let first = call_asking(&apart[0].base, "b2", json!({})).await;
    let yes = json!({"requestState": first["result"]["requestState"],
        "inputResponses": {"oxp.confirm": {"action": "accept"}}});
    let refused = call_asking(&apart[1].base, "b2", yes).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("sealed with another key") && message.contains("OXP_STATE_KEY"),
        "{message}"
    );
}

/// Replicas sharing Redis and a state key complete a call that asks once: its last round
/// replayed at the other replica gets the first answer (the same run), not a second run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmed_call_replayed_at_another_replica_runs_once() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("confirm_server");
    let env = [
        ("OXP_STATE_KEY", STATE_KEY),
        ("OXP_REDIS_URL", redis.1.as_str()),
    ];
    let replicas = [
        harness::start_server(&binary, &env),
        harness::start_server(&binary, &env),
    ];
    let first = call_asking(&replicas[0].base, "b3", json!({})).await;
    let last = json!({"requestState": first["result"]["requestState"],
        "inputResponses": {"oxp.confirm": {"action": "accept"}}});
    let done = call_asking(&replicas[1].base, "b3", last.clone()).await;
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("emptied b3 (run 1 of"), "{done}");
    for replica in [&replicas[0], &replicas[1]] {
        let replay = call_asking(&replica.base, "b3", last.clone()).await;
        assert_eq!(replay["result"], done["result"], "{replay}");
    }
}

/// One `tools/call` of `name` with `arguments` to `/mcp`, at `version` (none: no
/// `MCP-Protocol-Version` header, as a 2025-03-26 client sends), with `headers` besides; the
/// tool's text when it ran, else the error.
async fn call_with_headers(
    oxp: &Oxp,
    version: Option<&str>,
    name: &str,
    arguments: Value,
    headers: &[(&str, &str)],
) -> Result<String, Value> {
    let mut request = oxp
        .request(reqwest::Method::POST, "/mcp")
        .header("accept", "application/json, text/event-stream");
    let mut params = json!({"name": name, "arguments": arguments});
    if let Some(version) = version {
        request = request.header("mcp-protocol-version", version);
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {}
        });
    }
    for (header, value) in headers {
        request = request.header(*header, *value);
    }
    let reply = request
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}))
        .send()
        .await
        .unwrap();
    let kind = reply.headers()["content-type"].to_str().unwrap().to_owned();
    let messages = harness::mcp_messages(&kind, &reply.text().await.unwrap());
    let last = messages.last().unwrap().clone();
    match last["result"]["content"][0]["text"].as_str() {
        Some(text) if last["result"]["isError"] == false => Ok(text.to_owned()),
        _ => Err(last),
    }
}

/// A gateway routes on `Mcp-Name` and `Mcp-Param-*` (SEP-2243) without reading the body: a
/// header that disagrees with the body is refused whatever revision the request names (or with
/// none), before the tool runs; the headers a revision does not know are not required of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_headers_that_disagree_with_the_body_are_refused_at_every_revision() {
    let oxp = Oxp::start(with_mcp(|mcp| mcp)).await;
    let add = json!({"a": 2, "b": 3});
    for version in [
        None,
        Some("2025-06-18"),
        Some("2025-11-25"),
        Some("2026-07-28"),
    ] {
        let newest = version == Some("2026-07-28");
        let method = [("mcp-method", "tools/call")];
        let standard: &[(&str, &str)] = if newest { &method } else { &[] };
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut all = standard.to_vec();
            all.extend_from_slice(extra);
            all
        };
        // Agreeing headers, and (before 2026-07-28) none at all, are served.
        let named = with(&[("mcp-name", "Calculator_Add")]);
        let sum = call_with_headers(&oxp, version, "Calculator_Add", add.clone(), &named).await;
        assert_eq!(sum, Ok("5.0".to_owned()), "{version:?}");
        let region = with(&[("mcp-name", "Weather_Forecast"), ("mcp-param-region", "eu")]);
        let eu = json!({"region": "eu"});
        let sunny = call_with_headers(&oxp, version, "Weather_Forecast", eu.clone(), &region).await;
        assert_eq!(sunny, Ok("sunny in eu".to_owned()), "{version:?}");
        if !newest {
            let bare = call_with_headers(&oxp, version, "Weather_Forecast", eu.clone(), &[]).await;
            assert_eq!(bare, Ok("sunny in eu".to_owned()), "{version:?}");
        }

        // The body calls one tool, the header names another.
        let other = with(&[("mcp-name", "Geometry_Point")]);
        let refused = call_with_headers(&oxp, version, "Calculator_Add", add.clone(), &other).await;
        assert!(refused.is_err(), "{version:?}: {refused:?}");
        // The body says eu, the header us.
        let us = with(&[("mcp-name", "Weather_Forecast"), ("mcp-param-region", "us")]);
        let refused = call_with_headers(&oxp, version, "Weather_Forecast", eu.clone(), &us).await;
        assert!(refused.is_err(), "{version:?}: {refused:?}");
        // A header for a parameter the body does not carry.
        let absent = with(&[("mcp-name", "Weather_Forecast"), ("mcp-param-region", "us")]);
        let refused =
            call_with_headers(&oxp, version, "Weather_Forecast", json!({}), &absent).await;
        let message = refused.expect_err("refused").to_string();
        assert!(!message.contains("sunny"), "{version:?}: {message}");
        // The method header names another method.
        let listed = [("mcp-method", "tools/list"), ("mcp-name", "Calculator_Add")];
        let refused =
            call_with_headers(&oxp, version, "Calculator_Add", add.clone(), &listed).await;
        assert!(refused.is_err(), "{version:?}: {refused:?}");
    }
}

/// The names a call may use are the names `tools/list` shows, and no others: a rule written
/// against a listed name (a gateway's deny list on `Weather_Forecast`, the header checks) covers
/// every call. The latest version is not reachable by its versioned spelling, nor a version by
/// another spelling of its number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_listed_names_resolve() {
    let oxp = Oxp::start(with_mcp(|mcp| mcp)).await;
    let list = harness::mcp_2026(&oxp, "tools/list", json!({})).await;
    let listed: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    let version = Some("2026-07-28");
    for (name, which) in [
        ("Math_Which", "1.10.0"),
        ("Math_Which__v1_0_0", "1.0.0"),
        ("Math_Which__v0_9_0", "0.9.0"),
    ] {
        assert!(listed.contains(&name), "{listed:?}");
        let headers = [("mcp-method", "tools/call"), ("mcp-name", name)];
        let answer = call_with_headers(&oxp, version, name, json!({}), &headers).await;
        assert_eq!(answer, Ok(which.to_owned()), "{name}");
    }
    for name in [
        "Weather_Forecast__v1_0_0",
        "Math_Which__v1_10_0",
        "Math_Which__v01_0_0",
        "Math_Which__v1_0",
    ] {
        assert!(!listed.contains(&name));
        let headers = [
            ("mcp-method", "tools/call"),
            ("mcp-name", name),
            ("mcp-param-region", "us"),
        ];
        let refused =
            call_with_headers(&oxp, version, name, json!({"region": "eu"}), &headers).await;
        let error = refused.expect_err(name);
        assert!(error.to_string().contains("not found"), "{name}: {error}");
    }
}

/// A default server (`cargo run`, no `OXP_LOG`) logs its start-up and its shutdown, and nothing
/// per request: a few hundred OXP and MCP calls of every revision, `initialize` included,
/// calls that fail as clients make them fail (an unknown tool, invalid input, the tool's own
/// error) and requests refused for their origin add no line to its log (a dependency's
/// per-request lines would be most of a busy server's log, and of its time; a client decides
/// how many failed calls it sends). The log is read to its end once the process has exited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_server_logs_nothing_per_request() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(harness::example_binary())
        .env("OXP_ADDR", "127.0.0.1:0")
        .env_remove("OXP_LOG")
        .env_remove("OXP_LOG_FORMAT")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the example starts");
    let (lines_out, lines_in) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let _ = lines_out.send(line.clone());
        }
    });
    let mut log = Vec::new();
    let base = loop {
        let line = lines_in.recv().expect("the example logs its address");
        log.push(line.clone());
        let marker = "serving OXP 1.0 on ";
        if let Some(at) = line.find(marker) {
            let rest = &line[at + marker.len()..];
            break rest.split(['"', ' ']).next().unwrap().to_owned();
        }
    };
    let client = reqwest::Client::new();
    for i in 0..100 {
        let reply = client
            .post(format!("{base}/tools/call"))
            .json(
                &json!({"tool_id": "Calculator.Add", "call_id": format!("quiet-{i}"),
                "input": {"a": i, "b": 1}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200);
        // Calls that fail as clients make them fail, every day: an unknown tool, invalid input,
        // the tool's own error.
        for (call, status) in [
            (json!({"tool_id": "Calculator.Nope", "input": {}}), 400),
            (
                json!({"tool_id": "Calculator.Add", "input": {"a": "one", "b": 1}}),
                422,
            ),
            (
                json!({"tool_id": "Doorbell.Ring", "input": {"doorbell_id": "nope"}}),
                200,
            ),
        ] {
            let reply = client
                .post(format!("{base}/tools/call"))
                .json(&call)
                .send()
                .await
                .unwrap();
            assert_eq!(reply.status(), status, "{call}");
        }
        // Refused at the door, as a page on another origin is.
        let foreign = client
            .get(format!("{base}/tools"))
            .header("origin", "https://elsewhere.example")
            .send()
            .await
            .unwrap();
        assert_eq!(foreign.status(), 403);
        let (_, list) = exchange(
            &base,
            "2026-07-28",
            json!({"jsonrpc": "2.0", "id": 1,
            "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}}),
        )
        .await;
        assert!(list[0]["result"]["tools"].is_array());
        for version in ["2025-06-18", "2026-07-28"] {
            if version < "2026-07-28" {
                exchange(
                    &base,
                    version,
                    json!({"jsonrpc": "2.0", "id": 1,
                    "method": "initialize", "params": {"protocolVersion": version,
                    "capabilities": {}, "clientInfo": {"name": "quiet", "version": "1"}}}),
                )
                .await;
            }
            let (_, added) = exchange(
                &base,
                version,
                json!({"jsonrpc": "2.0", "id": 2,
                "method": "tools/call", "params": {"name": "Calculator_Add",
                "arguments": {"a": i, "b": 2}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": version,
                    "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .await;
            assert_eq!(added[0]["result"]["isError"], false, "{added:?}");
        }
    }
    let stopped = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    reader.join().unwrap();
    log.extend(lines_in.try_iter());
    let last_start_up = log.iter().rposition(|l| l.contains("serving ")).unwrap();
    let shutdown = log
        .iter()
        .position(|l| l.contains("shutting down"))
        .expect("the shutdown is logged");
    assert_eq!(
        shutdown,
        last_start_up + 1,
        "lines logged while serving: {:#?}",
        &log[last_start_up + 1..shutdown.min(last_start_up + 8)]
    );
}

use harness::answering::Answering;

/// Over stdio, a client of a revision before 2026-07-28 is asked by requests of the server's
/// own, on the call's connection, and the call goes on with its answers: a declared
/// confirmation, a form, a loop of questions under one key, and a no.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earlier_revisions_over_stdio_are_asked_by_requests() {
    let binary = harness::test_example_binary("confirm_server");
    for revision in ["2025-06-18", "2025-11-25"] {
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let client = Answering {
            revision,
            capabilities: json!({"elicitation": {}}),
            asked: asked.clone(),
            answer: harness::answering::user,
        };
        let mut command = tokio::process::Command::new(&binary);
        // A question waits at most this long for its answer.
        command
            .arg("mcp")
            .env("OXP_LOG", "warn")
            .env("OXP_STATE_TTL_MS", "2000");
        let client = client
            .serve(TokioChildProcess::new(command).unwrap())
            .await
            .unwrap();
        let call = |name: &str, arguments: Value| {
            let Value::Object(arguments) = arguments else {
                panic!()
            };
            client.call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        };
        let emptied = call("Files_Empty", json!({"bin": "b1"})).await.unwrap();
        assert!(
            text(&emptied).starts_with("emptied b1 (run 1"),
            "{revision}: {emptied:?}"
        );
        let rated = call("Hotel_Rate", json!({"stay": "s"})).await.unwrap();
        assert!(
            text(&rated).starts_with("s: 4 stars"),
            "{revision}: {rated:?}"
        );
        let each = json!({"paths": ["a.txt", "b.txt"]});
        let deleted = call("Files_DeleteEach", each).await.unwrap();
        assert!(
            text(&deleted).starts_with("deleted a.txt, b.txt"),
            "{deleted:?}"
        );
        let kept = call("Files_Empty", json!({"bin": "never"})).await.unwrap();
        assert_eq!(kept.is_error, Some(true), "{kept:?}");
        // A client that never answers does not hold the call past the wait.
        let unanswered = call("Files_Empty", json!({"bin": "silent"})).await.unwrap();
        assert!(
            text(&unanswered).contains("not answered within"),
            "{unanswered:?}"
        );
        assert_eq!(
            *asked.lock().unwrap(),
            [
                "Empty the bin b1?",
                "How many stars?",
                "Delete a.txt?",
                "Delete b.txt?",
                "Empty the bin never?",
                "Empty the bin silent?"
            ],
            "{revision}: each question asked once, in order"
        );
        client.cancel().await.unwrap();
    }
}

/// Over stdio, a client that declared no elicitation is never sent a question: a relayed
/// confirmation goes through its model, and the call made again with it runs the tool once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_client_that_cannot_ask_gets_the_relay() {
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let client = Answering {
        revision: "2025-11-25",
        capabilities: json!({}),
        asked: asked.clone(),
        answer: |_| Some(json!({"action": "accept", "content": {}})),
    };
    let mut command = tokio::process::Command::new(harness::test_example_binary("confirm_server"));
    command.arg("mcp").env("OXP_LOG", "warn");
    let client = client
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();
    let call = |arguments: Value| {
        let Value::Object(arguments) = arguments else {
            panic!()
        };
        client.call_tool(CallToolRequestParams::new("Files_Shred").with_arguments(arguments))
    };
    let first = call(json!({"doc": "d1"})).await.unwrap();
    let relayed = text(&first);
    assert!(relayed.contains("\"Shred d1?\""), "{relayed}");
    assert!(
        asked.lock().unwrap().is_empty(),
        "a question was sent to a client that cannot ask"
    );
    let token = relayed.rsplit("\"oxp_confirmation\": \"").next().unwrap();
    let token = token.split('"').next().unwrap();
    let done = call(json!({"doc": "d1", "oxp_confirmation": token}))
        .await
        .unwrap();
    assert!(text(&done).starts_with("shredded d1 (run 1"), "{done:?}");
    client.cancel().await.unwrap();
}

/// An answer carries none of its request's headers. A JSON answer's header map is its
/// request's own, emptied (hyper reads the connection's next request into it, so neither
/// allocates); two requests pipelined on one kept-alive connection each get their own answer,
/// and neither answer shows anything either request sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_carry_none_of_their_requests_headers() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let oxp = Oxp::start(with_mcp(|mcp| mcp)).await;
    let request = |id: u32, canary: &str, last: bool| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "Calculator_Add", "arguments": {"a": id, "b": 1},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: Calculator_Add\r\nX-Canary: {canary}\r\n\
             Cookie: session={canary}\r\n{}Content-Length: {}\r\n\r\n{body}",
            if last { "Connection: close\r\n" } else { "" },
            body.len()
        )
    };
    let mut socket = tokio::net::TcpStream::connect(oxp.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let both = request(1, "canary-first", false) + &request(2, "canary-second", true);
    socket.write_all(both.as_bytes()).await.unwrap();
    let mut answers = Vec::new();
    harness::bounded("both answers", socket.read_to_end(&mut answers))
        .await
        .unwrap();
    let answers = String::from_utf8(answers).unwrap();
    assert_eq!(answers.matches("HTTP/1.1 200 OK").count(), 2, "{answers}");
    assert!(
        answers.contains(r#""id":1,"#) && answers.contains(r#""id":2,"#),
        "{answers}"
    );
    assert_eq!(
        answers.matches("content-type: application/json").count(),
        2,
        "{answers}"
    );
    assert!(
        !answers.to_ascii_lowercase().contains("canary"),
        "{answers}"
    );
    assert!(
        !answers.to_ascii_lowercase().contains("mcp-name"),
        "{answers}"
    );
}

/// What is no JSON is a parse error wherever it sits in a call, in a member the call does not
/// use as well: the call never runs on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_json_in_an_unused_member_is_a_parse_error() {
    let oxp = Oxp::start(with_mcp(|mcp| mcp)).await;
    let post = |body: Vec<u8>| {
        oxp.request(reqwest::Method::POST, "/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "Calculator_Add")
            .body(body)
            .send()
    };
    let call = |unused: &[u8]| {
        [
            &br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"#[..],
            unused,
            br#""name":"Calculator_Add","arguments":{"a":1,"b":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        ]
        .concat()
    };
    let reply = harness::bounded("polite", post(call(b""))).await.unwrap();
    assert_eq!(reply.status(), 200);
    let nothings: [&[u8]; 3] = [br#""x":1E400,"#, br#""x":"\udc00","#, b"\"x\":\"\xff\","];
    for nothing in nothings {
        let shown = String::from_utf8_lossy(nothing).into_owned();
        let reply = harness::bounded("no json", post(call(nothing)))
            .await
            .unwrap();
        assert_eq!(reply.status(), 400, "{shown}");
        let body: Value = reply.json().await.unwrap();
        assert!(body["result"].is_null(), "{shown}: {body}");
        assert_eq!(body["error"]["code"], -32700, "{shown}: {body}");
    }
}

/// A `_meta` that is malformed, or says a standard key twice, gets the answer rmcp's own
/// reading would give it (the transport reads the two standard keys as the body is parsed):
/// capabilities that do not read are the 2026-07-28 "malformed required fields" error, and a
/// revision said twice is read as its last saying, which then disagrees with the header. Each
/// is a 400 and no result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_or_doubled_meta_is_refused_as_rmcp_would() {
    let oxp = Oxp::start(with_mcp(|mcp| mcp)).await;
    let post = |body: String| {
        oxp.request(reqwest::Method::POST, "/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "Calculator_Add")
            .body(body)
            .send()
    };
    let call = |meta: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"Calculator_Add","arguments":{{"a":1,"b":2}},"_meta":{meta}}}}}"#
        )
    };
    let malformed = call(
        r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"all"}"#,
    );
    let reply = harness::bounded("malformed", post(malformed))
        .await
        .unwrap();
    assert_eq!(reply.status(), 400);
    let body: Value = reply.json().await.unwrap();
    assert!(body["result"].is_null(), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("malformed") && message.contains("clientCapabilities"),
        "{body}"
    );
    let doubled = call(
        r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2025-06-18"}"#,
    );
    let reply = harness::bounded("doubled", post(doubled)).await.unwrap();
    assert_eq!(reply.status(), 400);
    let body: Value = reply.json().await.unwrap();
    assert!(body["result"].is_null(), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("does not match"),
        "{body}"
    );
}
