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

/// Archive a file, named as the caller's JSON names it.
#[tool(toolkit = "Files", version = "1.0.0", confirm = "Archive {fileName}?")]
fn archive(
    /// The file.
    #[serde(rename = "fileName")]
    file_name: String,
) -> String {
    format!("archived {file_name}")
}

/// Shred a document once the user says yes, relayed through the model when its client cannot ask.
#[tool(
    toolkit = "Files",
    version = "1.0.0",
    confirm = "Shred {doc}?",
    cannot_ask = "relay"
)]
fn shred(doc: String) -> String {
    DELETED.lock().unwrap().push(doc.clone());
    format!("shredded {doc}")
}

/// Wipe a disk once the user says yes; unseen by callers that cannot ask.
#[tool(
    toolkit = "Files",
    version = "1.0.0",
    confirm = "Wipe {disk}?",
    cannot_ask = "hide"
)]
fn wipe(disk: String) -> String {
    format!("wiped {disk}")
}

/// Connect a calendar after the user signs in.
#[tool(toolkit = "Calendar", version = "1.0.0")]
fn connect(ctx: &ToolContext) -> Result<String, ToolError> {
    ctx.ask_url(
        "signin",
        "Sign in to the calendar",
        "https://calendar.example.com/signin",
    )?;
    Ok("connected".into())
}

/// Purge a bin, then its backups, each once the user says yes to that question.
#[tool(toolkit = "Files", version = "1.0.0", confirm = "Purge the bin {bin}?")]
fn purge(ctx: &ToolContext, bin: String) -> Result<String, ToolError> {
    ctx.confirm("confirm", &format!("Also delete every backup of {bin}?"))?;
    DELETED
        .lock()
        .unwrap()
        .push(format!("{bin} and its backups"));
    Ok(format!("purged {bin}"))
}

/// Delete some files, each once the user says yes to it.
#[tool(toolkit = "Files", version = "1.0.0")]
fn delete_each(ctx: &ToolContext, paths: Vec<String>) -> Result<String, ToolError> {
    for path in &paths {
        ctx.confirm("delete", &format!("Delete {path}?"))?;
        DELETED.lock().unwrap().push(path.clone());
    }
    Ok(format!("deleted {}", paths.len()))
}

/// A rating.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Rating {
    /// One to five stars.
    #[schemars(range(min = 1, max = 5))]
    stars: u8,
}

/// Rate a stay, as the user says.
#[tool(toolkit = "Hotel", version = "1.0.0")]
fn rate(ctx: &ToolContext, stay: String) -> Result<String, ToolError> {
    let Rating { stars } = ctx.ask("rating", "How many stars?")?;
    DELETED.lock().unwrap().push(format!("{stay} rated"));
    Ok(format!("{stay}: {stars} stars"))
}

/// An address no MCP form can ask for.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Address {
    #[schemars(extend("format" = "ipv4"))]
    ip: String,
}

/// Block an address the user gives.
#[tool(toolkit = "Net", version = "1.0.0")]
fn block(ctx: &ToolContext) -> Result<String, ToolError> {
    let Address { ip } = ctx.ask("address", "Which address?")?;
    Ok(format!("blocked {ip}"))
}

/// A text.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Essay {
    /// The text.
    text: String,
}

/// Publish the text the user writes, once they say yes.
#[tool(toolkit = "Blog", version = "1.0.0")]
fn publish(ctx: &ToolContext, slug: String) -> Result<String, ToolError> {
    let Essay { text } = ctx.ask("essay", "Write it:")?;
    ctx.confirm("publish", "Publish it?")?;
    DELETED.lock().unwrap().push(slug.clone());
    Ok(format!("published {} characters", text.len()))
}

const KEY: &str = "k_0123456789abcdef0123456789abcdef";
const OTHER_KEY: &str = "k_fedcba9876543210fedcba9876543210";

async fn start(ttl: Duration) -> Oxp {
    let registry = Registry::builder()
        .tool(delete::TOOL)
        .tool(empty::TOOL)
        .tool(greet::TOOL)
        .tool(purge::TOOL)
        .tool(archive::TOOL)
        .tool(shred::TOOL)
        .tool(wipe::TOOL)
        .tool(connect::TOOL)
        .tool(delete_each::TOOL)
        .tool(rate::TOOL)
        .tool(block::TOOL)
        .tool(publish::TOOL)
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
    // The call was answered: a yes sent with the same state now gets that first answer.
    let late_yes = call(
        &oxp,
        KEY,
        "Files_Delete",
        path.clone(),
        json!({"requestState": state, "inputResponses": {"delete": accept()}}),
    )
    .await;
    assert_eq!(late_yes["result"], no["result"], "{late_yes}");
    assert_eq!(deleted("/srv/data"), 0, "a declined call ran after all");

    let again = call(&oxp, KEY, "Files_Delete", path.clone(), json!({})).await;
    let state = again["result"]["requestState"].as_str().unwrap().to_owned();
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
    // Each round's input is validated like any call's: the answer says what is wrong with it.
    assert!(invalid.to_string().contains("Invalid input"), "{invalid}");
    assert!(
        !invalid.to_string().contains("requestState"),
        "the state was checked before the input: {invalid}"
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
/// (-32021, HTTP 400), never a hang; an earlier revision's client, a tool error saying what the
/// tool needed.
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
    // What the tool needs, in words a model relays, and why this client cannot give it.
    let said = body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("confirmation"), "{said}");
    assert!(said.contains("did not declare `elicitation`"), "{said}");
}

/// `#[tool(confirm = "…")]`: the question, with the call's values in it, is asked before the
/// tool runs; a no is a tool error that says so, and the tool does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_confirmation_is_asked_before_the_tool_runs() {
    let oxp = start(Duration::from_secs(600)).await;
    let input = json!({"bin": "trash-7", "days": 30});
    let first = call(&oxp, KEY, "Files_Empty", input.clone(), json!({})).await;
    let ask = &first["result"]["inputRequests"]["oxp.confirm"];
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
        json!({"requestState": state, "inputResponses": {"oxp.confirm": {"action": "decline"}}}),
    )
    .await;
    assert_eq!(no["result"]["isError"], true);
    assert!(no.to_string().contains("did not confirm"), "{no}");
    assert_eq!(deleted("trash-7"), 0, "a declined tool ran");
    // The user's no ended the call: a yes sent with the same state gets that no.
    let late_yes = call(
        &oxp,
        KEY,
        "Files_Empty",
        input.clone(),
        json!({"requestState": state, "inputResponses": {"oxp.confirm": accept()}}),
    )
    .await;
    assert_eq!(late_yes["result"], no["result"], "{late_yes}");
    assert_eq!(deleted("trash-7"), 0, "a declined tool ran after all");
    let again = call(&oxp, KEY, "Files_Empty", input.clone(), json!({})).await;
    let state = again["result"]["requestState"].as_str().unwrap().to_owned();
    let yes = call(
        &oxp,
        KEY,
        "Files_Empty",
        input,
        json!({"requestState": state, "inputResponses": {"oxp.confirm": accept()}}),
    )
    .await;
    assert_eq!(
        yes["result"]["content"][0]["text"], "emptied trash-7, 30 days",
        "{yes}"
    );
    assert_eq!(deleted("trash-7"), 1);
    let metrics = scrape(&oxp).await;
    // Asked in two first rounds; one no, and two yeses received (the late one among them).
    for (outcome, count) in [("asked", 2), ("declined", 1), ("answered", 2)] {
        let line = format!("oxp_asks_total{{kind=\"elicitation\",outcome=\"{outcome}\"}} {count}");
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
}

fn state_of(answer: &Value) -> String {
    answer["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestState: {answer}"))
        .to_owned()
}

/// Answers sent with no state, or under a key the state does not say was asked, count for
/// nothing: a `confirm` cannot be skipped by answering it in advance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_to_questions_not_asked_are_ignored() {
    let oxp = start(Duration::from_secs(600)).await;
    let input = json!({"bin": "unasked-bin", "days": 1});
    let sneaky = json!({"inputResponses": {"oxp.confirm": accept(), "confirm": accept()}});
    let first = call(&oxp, KEY, "Files_Empty", input, sneaky).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let path = json!({"path": "/unasked"});
    let first = call(
        &oxp,
        KEY,
        "Files_Delete",
        path.clone(),
        json!({"inputResponses": {"delete": accept()}}),
    )
    .await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    // With the state, a response under another key than the one asked still answers nothing.
    let state = state_of(&first);
    let other = call(
        &oxp,
        KEY,
        "Files_Delete",
        path,
        json!({"requestState": state, "inputResponses": {"other": accept()}}),
    )
    .await;
    assert_eq!(other["result"]["resultType"], "input_required", "{other}");
    assert_eq!(deleted("unasked-bin") + deleted("/unasked"), 0);
}

/// A yes answers the question it was given to: the declared confirmation does not approve the
/// tool's own later question, and in a loop over one key, a yes to the first file does not
/// delete the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_bound_to_its_question_not_its_key() {
    let oxp = start(Duration::from_secs(600)).await;
    let bin = json!({"bin": "b4"});
    let first = call(&oxp, KEY, "Files_Purge", bin.clone(), json!({})).await;
    let yes =
        json!({"requestState": state_of(&first), "inputResponses": {"oxp.confirm": accept()}});
    let second = call(&oxp, KEY, "Files_Purge", bin.clone(), yes).await;
    let asks = &second["result"]["inputRequests"];
    assert_eq!(
        asks["confirm"]["params"]["message"], "Also delete every backup of b4?",
        "{second}"
    );
    assert_eq!(
        deleted("b4 and its backups"),
        0,
        "one yes approved two questions"
    );
    let third = call(
        &oxp,
        KEY,
        "Files_Purge",
        bin,
        json!({"requestState": state_of(&second), "inputResponses": {"confirm": accept()}}),
    )
    .await;
    assert_eq!(
        third["result"]["content"][0]["text"], "purged b4",
        "{third}"
    );

    let files = json!({"paths": ["loop-a.txt", "loop-b.txt", "loop-c.txt"]});
    let first = call(&oxp, KEY, "Files_DeleteEach", files.clone(), json!({})).await;
    let second = call(
        &oxp,
        KEY,
        "Files_DeleteEach",
        files,
        json!({"requestState": state_of(&first), "inputResponses": {"delete": accept()}}),
    )
    .await;
    assert_eq!(
        second["result"]["inputRequests"]["delete"]["params"]["message"], "Delete loop-b.txt?",
        "{second}"
    );
    assert_eq!(
        (
            deleted("loop-a.txt"),
            deleted("loop-b.txt"),
            deleted("loop-c.txt")
        ),
        (1, 0, 0),
        "a yes to one file deleted another"
    );
}

/// A call completes once: its last round sent again gets the first answer and the tool does
/// not run again; a state sent back without answers is sealed anew with the same expiry, never
/// a later one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_call_cannot_be_replayed_or_kept_alive() {
    let oxp = start(Duration::from_secs(600)).await;
    let path = json!({"path": "/replayed"});
    let first = call(&oxp, KEY, "Files_Delete", path.clone(), json!({})).await;
    let last = json!({"requestState": state_of(&first), "inputResponses": {"delete": accept()}});
    let done = call(&oxp, KEY, "Files_Delete", path.clone(), last.clone()).await;
    assert_eq!(done["result"]["content"][0]["text"], "deleted /replayed");
    for _ in 0..3 {
        let replay = call(&oxp, KEY, "Files_Delete", path.clone(), last.clone()).await;
        assert_eq!(replay["result"], done["result"], "{replay}");
    }
    // Even an earlier round of the same call, replayed: the call has ended.
    let early = json!({"requestState": state_of(&first), "inputResponses": {}});
    let replay = call(&oxp, KEY, "Files_Delete", path, early).await;
    assert_eq!(replay["result"], done["result"], "{replay}");
    assert_eq!(
        deleted("/replayed"),
        1,
        "a replayed round ran the tool again"
    );

    let first = call(&oxp, KEY, "Greeter_Greet", json!({}), json!({})).await;
    let who = json!({"action": "accept", "content": {"name": "Ada"}});
    let answered = call(
        &oxp,
        KEY,
        "Greeter_Greet",
        json!({}),
        json!({"requestState": state_of(&first), "inputResponses": {"who": who}}),
    )
    .await;
    let resent = call(
        &oxp,
        KEY,
        "Greeter_Greet",
        json!({}),
        json!({"requestState": state_of(&answered)}),
    )
    .await;
    assert_eq!(
        expiry(&state_of(&resent)),
        expiry(&state_of(&answered)),
        "re-sending a state moved its expiry"
    );
}

/// The expiry a state's (authenticated, not encrypted) payload carries.
fn expiry(state: &str) -> u64 {
    use base64::Engine as _;
    let payload = state.split('.').next().unwrap();
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice::<Value>(&payload).unwrap()["exp"]
        .as_u64()
        .unwrap()
}

/// A form's answer is checked against the schema it was asked with, and an `accept` without
/// content is no answer: either ends the call, and the tool does not go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_validated_against_their_question() {
    let oxp = start(Duration::from_secs(600)).await;
    for (stay, answer, says) in [
        (
            "too-many-stars",
            json!({"action": "accept", "content": {"stars": 200}}),
            "200",
        ),
        ("no-content", json!({"action": "accept"}), "content"),
    ] {
        let input = json!({"stay": stay});
        let first = call(&oxp, KEY, "Hotel_Rate", input.clone(), json!({})).await;
        let asked = &first["result"]["inputRequests"]["rating"]["params"]["requestedSchema"];
        assert_eq!(asked["properties"]["stars"]["maximum"], 5, "{first}");
        let reply = call(
            &oxp,
            KEY,
            "Hotel_Rate",
            input,
            json!({"requestState": state_of(&first), "inputResponses": {"rating": answer}}),
        )
        .await;
        assert_eq!(reply["result"]["isError"], true, "{reply}");
        let text = reply["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("rating") && text.contains(says), "{text}");
        assert_eq!(
            deleted(&format!("{stay} rated")),
            0,
            "{stay}: the tool went on"
        );
    }
}

/// A confirmation's content, when it has one, is an object (its form has no fields): a `"yes"`
/// in its place is no answer, and the tool does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_is_checked_too() {
    let oxp = start(Duration::from_secs(600)).await;
    let input = json!({"bin": "odd-answer", "days": 1});
    let first = call(&oxp, KEY, "Files_Empty", input.clone(), json!({})).await;
    let odd = json!({"action": "accept", "content": "yes"});
    let reply = call(
        &oxp,
        KEY,
        "Files_Empty",
        input,
        json!({"requestState": state_of(&first), "inputResponses": {"oxp.confirm": odd}}),
    )
    .await;
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert_eq!(deleted("odd-answer"), 0);
}

/// The `call_id`s of calls that ask are the server's: an OXP client's own may not take one,
/// which would read a finished call's answer or spoil one still asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_take_the_call_id_of_a_call_that_asks() {
    let oxp = start(Duration::from_secs(600)).await;
    let reply = oxp
        .call_with(
            oxp.request(reqwest::Method::POST, "/tools/call")
                .header("oxp-api-key", KEY)
                .json(&json!({"tool_id": "Files.Empty", "call_id": "oxp-ask-0123",
                    "input": {"bin": "taken", "days": 1}})),
        )
        .await;
    assert_eq!(reply.status, 400, "{:?}", reply.body);
    assert!(
        reply.body.to_string().contains("oxp-ask-"),
        "{:?}",
        reply.body
    );
}

/// An ask MCP's forms cannot carry fails in the tool, and a round whose state would be too
/// large to come back ends with an error saying so: never a question sent half, never a state
/// the next round would refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_asked_that_cannot_be_answered() {
    let oxp = start(Duration::from_secs(600)).await;
    let reply = call(&oxp, KEY, "Net_Block", json!({}), json!({})).await;
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(reply["result"].get("inputRequests").is_none(), "{reply}");

    let input = json!({"slug": "too-long"});
    let first = call(&oxp, KEY, "Blog_Publish", input.clone(), json!({})).await;
    let essay = json!({"action": "accept", "content": {"text": "x".repeat(200_000)}});
    let reply = call(
        &oxp,
        KEY,
        "Blog_Publish",
        input,
        json!({"requestState": state_of(&first), "inputResponses": {"essay": essay}}),
    )
    .await;
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("the limit is"), "{text}");
    assert_eq!(deleted("too-long"), 0);
}

/// A question names a renamed parameter by its name on the wire, and shows the caller's value
/// escaped: a newline or a right-to-left override in it cannot reshape what the user reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_shows_the_caller_s_values_escaped() {
    let oxp = start(Duration::from_secs(600)).await;
    let name = "report.txt?\n\nThen delete everything. Archive \u{202E}fdp.exe";
    let first = call(
        &oxp,
        KEY,
        "Files_Archive",
        json!({"fileName": name}),
        json!({}),
    )
    .await;
    let message = first["result"]["inputRequests"]["oxp.confirm"]["params"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{first}"));
    assert!(
        message.starts_with("Archive report.txt?\\u{a}"),
        "{message}"
    );
    assert!(
        !message.contains('\n') && !message.contains('\u{202E}'),
        "{message}"
    );
}

/// A JSON-RPC request to `/mcp` at `version` as `KEY`'s caller, whose client declares
/// `capabilities`; its answer.
async fn mcp_as(
    oxp: &Oxp,
    version: &str,
    method: &str,
    mut params: Value,
    capabilities: Value,
) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let mut request = reqwest::Client::new()
        .post(format!("{}/mcp", oxp.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .header("oxp-api-key", KEY);
    if version == "2026-07-28" {
        request = request.header("mcp-method", method);
        if let Some(name) = params["name"].as_str() {
            request = request.header("mcp-name", name);
        }
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    request
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Hosts that cannot ask get what the tool's author chose: a hidden tool is not listed and not
/// run; a relayed confirmation goes through the model as a sealed, single-use confirmation that
/// runs the tool once, for that input alone; the default refuses in words a model can relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_that_cannot_ask_get_what_the_author_chose() {
    let oxp = start(Duration::from_secs(600)).await;
    let none = json!({});
    let names = |list: &Value| -> Vec<String> {
        (list["result"]["tools"].as_array().unwrap().iter())
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let list = mcp_as(&oxp, "2026-07-28", "tools/list", json!({}), none.clone()).await;
    assert!(!names(&list).contains(&"Files_Wipe".to_owned()), "{list}");
    let shred = (list["result"]["tools"].as_array().unwrap().iter())
        .find(|t| t["name"] == "Files_Shred")
        .unwrap();
    assert!(shred["inputSchema"]["properties"]["oxp_confirmation"].is_object());
    let asking = json!({"elicitation": {}});
    let list = mcp_as(&oxp, "2026-07-28", "tools/list", json!({}), asking.clone()).await;
    assert!(names(&list).contains(&"Files_Wipe".to_owned()), "{list}");

    let wipe = json!({"name": "Files_Wipe", "arguments": {"disk": "sda"}});
    let hidden = mcp_as(&oxp, "2026-07-28", "tools/call", wipe, none.clone()).await;
    assert_eq!(hidden["error"]["code"], -32021, "{hidden}");
    let empty = json!({"name": "Files_Empty", "arguments": {"bin": "refused-bin", "days": 1}});
    let refused = mcp_as(&oxp, "2026-07-28", "tools/call", empty, none.clone()).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("this client cannot give it")
    );

    // Relayed, at 2026-07-28 without elicitation and at an earlier revision alike.
    for (version, doc) in [("2026-07-28", "relayed-1"), ("2025-06-18", "relayed-2")] {
        let call = |arguments: Value| json!({"name": "Files_Shred", "arguments": arguments});
        let first = mcp_as(
            &oxp,
            version,
            "tools/call",
            call(json!({"doc": doc})),
            none.clone(),
        )
        .await;
        let text = first["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(first["result"]["isError"], true, "{first}");
        assert!(text.contains(&format!("\"Shred {doc}?\"")), "{text}");
        assert_eq!(
            deleted(doc),
            0,
            "{version}: shredded before the user said yes"
        );
        let token = text.rsplit("\"oxp_confirmation\": \"").next().unwrap();
        let token = token.split('"').next().unwrap().to_owned();
        let confirmed = call(json!({"doc": doc, "oxp_confirmation": token}));
        let done = mcp_as(&oxp, version, "tools/call", confirmed.clone(), none.clone()).await;
        assert_eq!(
            done["result"]["content"][0]["text"],
            format!("shredded {doc}"),
            "{done}"
        );
        let again = mcp_as(&oxp, version, "tools/call", confirmed, none.clone()).await;
        assert_eq!(again["result"], done["result"], "{version}: {again}");
        assert_eq!(
            deleted(doc),
            1,
            "{version}: a confirmation ran the tool twice"
        );
        let moved = call(json!({"doc": "another", "oxp_confirmation": token}));
        let moved = mcp_as(&oxp, version, "tools/call", moved, none.clone()).await;
        assert_eq!(moved["error"]["code"], -32602, "{version}: {moved}");
        assert_eq!(deleted("another"), 0);
    }
    let forged =
        json!({"name": "Files_Shred", "arguments": {"doc": "forged", "oxp_confirmation": "yes"}});
    let forged = mcp_as(&oxp, "2026-07-28", "tools/call", forged, none.clone()).await;
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    assert_eq!(deleted("forged"), 0);
    // What each caller got, for the operator.
    let metrics = scrape(&oxp).await;
    for (fallback, count) in [("hidden", 1), ("refused", 1), ("relayed", 2)] {
        let line = format!("oxp_ask_fallbacks_total{{fallback=\"{fallback}\"}} {count}");
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
}

/// A round presented by a client that cannot answer what was asked is refused before anything
/// runs, and the call is not used up: the same state from a client that can goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_its_client_cannot_answer_does_not_use_the_call_up() {
    let oxp = start(Duration::from_secs(600)).await;
    let input = json!({"bin": "kept-for-later", "days": 1});
    let first = call(&oxp, KEY, "Files_Empty", input.clone(), json!({})).await;
    let yes = json!({"oxp.confirm": accept()});
    let params = |state: &str| {
        json!({"name": "Files_Empty", "arguments": input, "requestState": state,
            "inputResponses": yes})
    };
    let state = state_of(&first);
    let refused = mcp_as(&oxp, "2026-07-28", "tools/call", params(&state), json!({})).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    let done = call(
        &oxp,
        KEY,
        "Files_Empty",
        input.clone(),
        json!({"requestState": state, "inputResponses": yes}),
    )
    .await;
    assert_eq!(
        done["result"]["content"][0]["text"], "emptied kept-for-later, 1 days",
        "{done}"
    );
}

/// A server whose default relays every `confirm`: a relayed confirmation does not answer the
/// body's own later question, which a caller that cannot ask is refused (never a hang).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_confirmation_answers_only_the_confirmation() {
    let registry = Registry::builder().tool(purge::TOOL).build().unwrap();
    let pipeline = Pipeline::new(registry);
    let mcp = McpServer::new(pipeline.clone())
        .cannot_ask(oxp_runtime::ask::CannotAsk::Relay)
        .into_router();
    let auth = ServerAuth::default().api_key(KEY);
    let oxp = Oxp::start(Server::from_pipeline(pipeline).auth(auth).nest("/mcp", mcp)).await;
    let call = |arguments: Value| json!({"name": "Files_Purge", "arguments": arguments});
    let first = mcp_as(
        &oxp,
        "2026-07-28",
        "tools/call",
        call(json!({"bin": "rb"})),
        json!({}),
    )
    .await;
    let text = first["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = text.rsplit("\"oxp_confirmation\": \"").next().unwrap();
    let token = token.split('"').next().unwrap();
    let second = call(json!({"bin": "rb", "oxp_confirmation": token}));
    let refused = mcp_as(&oxp, "2026-07-28", "tools/call", second, json!({})).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(deleted("rb and its backups"), 0);
}

/// A URL ask to a client that shows forms but not links ends with the link and what to do
/// with it; a client that declares URL elicitation is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_goes_where_links_can_be_shown() {
    let oxp = start(Duration::from_secs(600)).await;
    let connect = json!({"name": "Calendar_Connect", "arguments": {}});
    let forms = json!({"elicitation": {}});
    let told = mcp_as(&oxp, "2026-07-28", "tools/call", connect.clone(), forms).await;
    let text = told["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("https://calendar.example.com/signin"),
        "{told}"
    );
    let links = json!({"elicitation": {"url": {}}});
    let asked = mcp_as(&oxp, "2026-07-28", "tools/call", connect, links).await;
    let ask = &asked["result"]["inputRequests"]["signin"]["params"];
    assert_eq!(ask["mode"], "url", "{asked}");
    assert!(ask["elicitationId"].is_string());
    let metrics = scrape(&oxp).await;
    assert!(
        metrics.contains("oxp_ask_fallbacks_total{fallback=\"link\"} 1"),
        "{metrics}"
    );
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
