//! Asking mid-call (`oxp_runtime::ask`) on real sockets: over MCP 2026-07-28 a round that asks
//! is `input_required` with a sealed `requestState`, and the call goes on when repeated with the
//! answers; the state cannot be altered, moved to another call or caller, kept past its life, or
//! inflated; nothing runs unconfirmed; and OXP, which has no place for answers, says what the
//! tool needed.

#[path = "harness/mod.rs"]
mod harness;

use std::sync::Mutex;
use std::time::Duration;

use harness::Oxp;
use oxp_runtime::call::Pipeline;
use oxp_runtime::mcp::McpServer;
use oxp_runtime::server::{Server, ServerAuth};
use oxp_runtime::{Registry, ToolContext, ToolError, tool};
use serde_json::{Value, json};

/// The paths deleted, in order: each test asserts on its own paths (they run at once).
static DELETED: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn deleted(path: &str) -> usize {
    DELETED
        .lock()
        .unwrap()
        .iter()
        .filter(|p| *p == path)
        .count()
}

/// Delete a path, once the user confirms.
#[tool(toolkit = "Files", version = "1.0.0", destructive)]
fn delete(ctx: &ToolContext, path: String) -> Result<String, ToolError> {
    ctx.confirm("delete", &format!("Delete {path}?"))?;
    DELETED.lock().unwrap().push(path.clone());
    Ok(format!("deleted {path}"))
}

/// Empty a bin, once the user confirms the question the attribute states.
#[tool(
    toolkit = "Files",
    version = "1.0.0",
    confirm = "Empty the bin {bin} ({days} days)?"
)]
fn empty(bin: String, days: u32) -> String {
    DELETED.lock().unwrap().push(bin.clone());
    format!("emptied {bin}, {days} days")
}

/// A name.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    /// The name.
    name: String,
}

/// Greet someone by the name the user gives, then by their colour.
#[tool(toolkit = "Greeter", version = "1.0.0")]
fn greet(ctx: &ToolContext) -> Result<String, ToolError> {
    let Name { name } = ctx.ask("who", "Whom shall I greet?")?;
    let Name { name: colour } = ctx.ask("colour", "Which colour?")?;
    Ok(format!("Hello, {name} in {colour}!"))
}

const KEY: &str = "k_0123456789abcdef0123456789abcdef";
const OTHER_KEY: &str = "k_fedcba9876543210fedcba9876543210";

async fn start(ttl: Duration) -> Oxp {
    let registry = Registry::builder()
        .tool(delete::TOOL)
        .tool(empty::TOOL)
        .tool(greet::TOOL)
        .build()
        .unwrap();
    let pipeline = Pipeline::new(registry);
    let mcp = McpServer::new(pipeline.clone())
        .state_key(b"a state key of thirty-two bytes or more".to_vec(), ttl)
        .unwrap()
        .into_router();
    let auth = ServerAuth::default().api_key(KEY).api_key(OTHER_KEY);
    Oxp::start(Server::from_pipeline(pipeline).auth(auth).nest("/mcp", mcp)).await
}

/// A 2026-07-28 `tools/call` as `key`'s caller, with `extra` params; its JSON-RPC answer.
async fn call(oxp: &Oxp, key: &str, name: &str, arguments: Value, extra: Value) -> Value {
    let mut params = json!({"name": name, "arguments": arguments, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let reply = reqwest::Client::new()
        .post(format!("{}/mcp", oxp.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .header("oxp-api-key", key)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
        .send()
        .await
        .unwrap();
    reply.json().await.unwrap()
}

fn accept() -> Value {
    json!({"action": "accept", "content": {}})
}

/// Round one asks and deletes nothing; the repeat with the user's yes and the state deletes,
/// once; a no deletes nothing and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_runs_unconfirmed_and_a_confirmed_call_runs_once() {
    let oxp = start(Duration::from_secs(600)).await;
    let path = json!({"path": "/srv/data"});
    let first = call(&oxp, KEY, "Files_Delete", path.clone(), json!({})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let ask = &result["inputRequests"]["delete"];
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(ask["params"]["message"], "Delete /srv/data?");
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert_eq!(deleted("/srv/data"), 0);

    let no = call(
        &oxp,
        KEY,
        "Files_Delete",
        path.clone(),
        json!({"requestState": state, "inputResponses": {"delete": {"action": "decline"}}}),
    )
    .await;
    assert_eq!(no["result"]["isError"], true, "{no}");
    assert!(no.to_string().contains("declined"), "{no}");
    assert_eq!(deleted("/srv/data"), 0, "a declined call ran");

    let yes = call(
        &oxp,
        KEY,
        "Files_Delete",
        path,
        json!({"requestState": state, "inputResponses": {"delete": accept()}}),
    )
    .await;
    assert_eq!(
        yes["result"]["content"][0]["text"], "deleted /srv/data",
        "{yes}"
    );
    assert_eq!(deleted("/srv/data"), 1);
}

/// Several rounds: the second round's state carries the first answer; its input is still
/// validated each round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_carry_over_rounds_in_the_state() {
    let oxp = start(Duration::from_secs(600)).await;
    let first = call(&oxp, KEY, "Greeter_Greet", json!({}), json!({})).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let who = json!({"action": "accept", "content": {"name": "Ada"}});
    let second = call(
        &oxp,
        KEY,
        "Greeter_Greet",
        json!({}),
        json!({"requestState": state, "inputResponses": {"who": who}}),
    )
    .await;
    let asks = &second["result"]["inputRequests"];
    assert!(
        asks.get("colour").is_some() && asks.get("who").is_none(),
        "{second}"
    );
    let state = second["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let colour = json!({"action": "accept", "content": {"name": "blue"}});
    let third = call(
        &oxp,
        KEY,
        "Greeter_Greet",
        json!({}),
        json!({"requestState": state, "inputResponses": {"colour": colour}}),
    )
    .await;
    assert_eq!(
        third["result"]["content"][0]["text"], "Hello, Ada in blue!",
        "{third}"
    );
    let invalid = call(
        &oxp,
        KEY,
        "Greeter_Greet",
        json!({"extra": 1}),
        json!({"requestState": state, "inputResponses": {"colour": colour}}),
    )
    .await;
    assert!(
        invalid.get("error").is_some() || invalid["result"]["isError"] == true,
        "{invalid}"
    );
}

/// A state altered, for another input, another tool or another caller, expired, or oversized
/// is refused with -32602, and nothing runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_cannot_be_forged_moved_kept_or_inflated() {
    let oxp = start(Duration::from_secs(600)).await;
    let path = json!({"path": "/srv/keep"});
    let first = call(&oxp, KEY, "Files_Delete", path.clone(), json!({})).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let mut tampered = state.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let oversized = "A".repeat(300 * 1024);
    let refused = [
        ("altered", KEY, "Files_Delete", path.clone(), tampered),
        (
            "another input",
            KEY,
            "Files_Delete",
            json!({"path": "/"}),
            state.clone(),
        ),
        (
            "another tool",
            KEY,
            "Greeter_Greet",
            json!({}),
            state.clone(),
        ),
        (
            "another caller",
            OTHER_KEY,
            "Files_Delete",
            path.clone(),
            state.clone(),
        ),
        ("oversized", KEY, "Files_Delete", path.clone(), oversized),
    ];
    for (what, key, tool, input, state) in refused {
        let answer = call(
            &oxp,
            key,
            tool,
            input,
            json!({"requestState": state, "inputResponses": {"delete": accept(), "who": accept()}}),
        )
        .await;
        assert_eq!(answer["error"]["code"], -32602, "{what}: {answer}");
    }
    assert_eq!(
        deleted("/srv/keep") + deleted("/"),
        0,
        "a forged state ran the tool"
    );

    let short = start(Duration::from_millis(1)).await;
    let first = call(&short, KEY, "Files_Delete", path.clone(), json!({})).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    // Expiry is checked against the clock: wait past the state's millisecond of life.
    let expires = std::time::Instant::now() + Duration::from_millis(20);
    while std::time::Instant::now() < expires {
        tokio::task::yield_now().await;
    }
    let expired = call(
        &short,
        KEY,
        "Files_Delete",
        path,
        json!({"requestState": state, "inputResponses": {"delete": accept()}}),
    )
    .await;
    assert_eq!(expired["error"]["code"], -32602, "expired: {expired}");
    assert_eq!(deleted("/srv/keep"), 0);
    let metrics = scrape(&short).await;
    assert!(
        metrics.contains("oxp_request_states_refused_total{reason=\"expired\"} 1"),
        "{metrics}"
    );
}

/// OXP 1.0 has no place for answers: a tool that asks ends with `success: false`, a message
/// naming what it needed, `can_retry: false`; and it does not go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_oxp_an_ask_says_what_the_tool_needed() {
    let oxp = start(Duration::from_secs(600)).await;
    let reply = oxp
        .call_with(
            oxp.request(reqwest::Method::POST, "/tools/call")
                .header("oxp-api-key", KEY)
                .json(&json!({"tool_id": "Files.Delete", "input": {"path": "/srv/oxp"}})),
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["success"], false, "{:?}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("ask its user a question"), "{message}");
    assert_eq!(reply.body["error"]["can_retry"], false);
    assert_eq!(deleted("/srv/oxp"), 0);
}

/// A client that did not declare elicitation gets MCP's "missing required client capability"
/// (-32021, HTTP 400), never a hang; an earlier revision's client, an error naming its revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_cannot_answer_is_told_so() {
    let oxp = start(Duration::from_secs(600)).await;
    let reply = reqwest::Client::new()
        .post(format!("{}/mcp", oxp.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "Files_Delete")
        .header("oxp-api-key", KEY)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "Files_Delete", "arguments": {"path": "/x"}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 400);
    let body: Value = reply.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32021, "{body}");
    assert!(body["error"]["data"]["requiredCapabilities"]["elicitation"].is_object());

    let legacy = reqwest::Client::new()
        .post(format!("{}/mcp", oxp.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("oxp-api-key", KEY)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "Files_Delete", "arguments": {"path": "/x"}}}),
        )
        .send()
        .await
        .unwrap();
    let body: Value = legacy.json().await.unwrap();
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert!(body.to_string().contains("2025-06-18"), "{body}");
}

/// `#[tool(confirm = "…")]`: the question, with the call's values in it, is asked before the
/// tool runs; a no is a tool error that says so, and the tool does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_confirmation_is_asked_before_the_tool_runs() {
    let oxp = start(Duration::from_secs(600)).await;
    let input = json!({"bin": "trash-7", "days": 30});
    let first = call(&oxp, KEY, "Files_Empty", input.clone(), json!({})).await;
    let ask = &first["result"]["inputRequests"]["confirm"];
    assert_eq!(
        ask["params"]["message"], "Empty the bin trash-7 (30 days)?",
        "{first}"
    );
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let no = call(
        &oxp,
        KEY,
        "Files_Empty",
        input.clone(),
        json!({"requestState": state, "inputResponses": {"confirm": {"action": "decline"}}}),
    )
    .await;
    assert_eq!(no["result"]["isError"], true);
    assert!(no.to_string().contains("did not confirm"), "{no}");
    assert_eq!(deleted("trash-7"), 0, "a declined tool ran");
    let yes = call(
        &oxp,
        KEY,
        "Files_Empty",
        input,
        json!({"requestState": state, "inputResponses": {"confirm": accept()}}),
    )
    .await;
    assert_eq!(
        yes["result"]["content"][0]["text"], "emptied trash-7, 30 days",
        "{yes}"
    );
    assert_eq!(deleted("trash-7"), 1);
    // Asked once, declined once, answered once: counted by kind and outcome.
    let metrics = scrape(&oxp).await;
    for outcome in ["asked", "declined", "answered"] {
        let line = format!("oxp_asks_total{{kind=\"elicitation\",outcome=\"{outcome}\"}} 1");
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
}

/// The server's metrics, as its operator scrapes them.
async fn scrape(oxp: &Oxp) -> String {
    reqwest::Client::new()
        .get(format!("{}/metrics", oxp.base))
        .header("oxp-api-key", KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
