//! Progress and cancellation: `ctx.progress` reaches an MCP client that sent a
//! progress token as `notifications/progress`; `notifications/cancelled` stops a run before its
//! side effect; a dropped provider dispatch cancels its calls; OXP keeps its rule (a hang-up
//! cancels nothing).

#[path = "harness/mod.rs"]
mod harness;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::Oxp;
use oxp_runtime::call::Pipeline;
use oxp_runtime::mcp::McpServer;
use oxp_runtime::providers::{Dispatcher, ToolCall};
use oxp_runtime::server::Server;
use oxp_runtime::{Registry, ToolContext, tool};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::json;

/// Work in three steps.
#[tool(toolkit = "Steps", version = "1.0.0")]
async fn run(ctx: &ToolContext) -> &'static str {
    for step in 1..=3 {
        tokio::time::sleep(Duration::from_millis(80)).await;
        ctx.progress(step, Some(3), Some("working"));
    }
    "done"
}

static SENT: AtomicU32 = AtomicU32::new(0);
static STARTED: AtomicU32 = AtomicU32::new(0);

/// Send after a while (the side effect is counted, and the start).
#[tool(toolkit = "Mail", version = "1.0.0")]
async fn send_later() -> &'static str {
    STARTED.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(400)).await;
    SENT.fetch_add(1, Ordering::SeqCst);
    "sent"
}

static FINISHED: AtomicU32 = AtomicU32::new(0);

/// Send after a while, and finish even when cancelled.
#[tool(toolkit = "Mail", version = "1.0.0")]
async fn send_surely(ctx: &ToolContext) -> &'static str {
    ctx.finish_when_cancelled();
    STARTED.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    FINISHED.fetch_add(1, Ordering::SeqCst);
    "sent"
}

fn registry() -> Registry {
    Registry::builder()
        .tool(run::TOOL)
        .tool(send_later::TOOL)
        .tool(send_surely::TOOL)
        .tool(post::TOOL)
        .build()
        .unwrap()
}

async fn start() -> Oxp {
    start_with_pipeline().await.0
}

/// The server, and its pipeline for waiting on its runs.
async fn start_with_pipeline() -> (Oxp, Pipeline) {
    let pipeline = Pipeline::new(registry());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline.clone()).nest("/mcp", mcp)).await;
    (oxp, pipeline)
}

/// Until `counter` reaches `n` (at most 5 s): an event to wait on, not a guess at a duration.
async fn reaches(counter: &AtomicU32, n: u32) {
    for _ in 0..500 {
        if counter.load(Ordering::SeqCst) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the counter stayed at {}", counter.load(Ordering::SeqCst));
}

/// An rmcp client that keeps the progress and the log messages it is sent.
#[derive(Clone, Default)]
struct Recorder(
    Arc<Mutex<Vec<ProgressNotificationParam>>>,
    Arc<Mutex<Vec<serde_json::Value>>>,
);

#[allow(deprecated)] // rmcp marks MCP logging deprecated (SEP-2577); clients still use it
impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.1
            .lock()
            .unwrap()
            .push(serde_json::to_value(params).unwrap());
    }
}

/// `list` once it holds `n` entries (at most 5 s), for assertions on it. rmcp's client runs
/// each notification's handler in a task of its own, so a call's answer can reach the test
/// before the handlers of the notifications sent ahead of it have run.
async fn settled<T: Clone>(list: &Mutex<Vec<T>>, n: usize) -> Vec<T> {
    for _ in 0..500 {
        if list.lock().unwrap().len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    list.lock().unwrap().clone()
}

/// A `tools/call` of `name`, without arguments.
fn call(name: &str) -> ClientRequest {
    ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new(
        name.to_owned(),
    )))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_mcp_client_that_asked_for_it() {
    let oxp = start().await;
    let recorder = Recorder::default();
    let transport = StreamableHttpClientTransport::from_uri(format!("{}/mcp", oxp.base));
    let client = recorder.clone().serve(transport).await.unwrap();
    // rmcp's client sends a progress token with every request.
    let handle = client
        .send_cancellable_request(call("Steps_Run"), PeerRequestOptions::no_options())
        .await
        .unwrap();
    let token = handle.progress_token.clone();
    handle.await_response().await.unwrap();
    let got = settled(&recorder.0, 3).await;
    // The client handles each notification in a task of its own, so they may be recorded out
    // of the order they came in: compared sorted.
    let mut steps: Vec<(f64, Option<f64>)> = got.iter().map(|p| (p.progress, p.total)).collect();
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(
        steps,
        [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]
    );
    assert!(
        got.iter()
            .all(|p| p.progress_token == token && p.message.as_deref() == Some("working"))
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_sent_only_when_the_request_carries_a_token() {
    let oxp = start().await;
    let progress = |events: &[serde_json::Value]| -> Vec<serde_json::Value> {
        events
            .iter()
            .filter(|e| e["method"] == "notifications/progress")
            .map(|e| e["params"]["progress"].clone())
            .collect()
    };
    let asked = harness::mcp_2026_events(
        &oxp,
        "tools/call",
        json!({"name": "Steps_Run", "_meta": {"progressToken": "p-1"}}),
    )
    .await;
    assert_eq!(
        progress(&asked),
        [json!(1.0), json!(2.0), json!(3.0)],
        "{asked:?}"
    );
    assert_eq!(
        asked.last().unwrap()["result"]["content"][0]["text"],
        "done"
    );
    let unasked = harness::mcp_2026_events(&oxp, "tools/call", json!({"name": "Steps_Run"})).await;
    assert!(progress(&unasked).is_empty(), "{unasked:?}");
    assert_eq!(unasked.len(), 1, "the answer alone: {unasked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_mcp_call_never_makes_its_side_effect() {
    let (oxp, pipeline) = start_with_pipeline().await;
    let transport = StreamableHttpClientTransport::from_uri(format!("{}/mcp", oxp.base));
    let client = ().serve(transport).await.unwrap();
    let handle = client
        .send_cancellable_request(call("Mail_SendLater"), PeerRequestOptions::no_options())
        .await
        .unwrap();
    // Cancelled once it runs; then, once no run is left, it has not sent.
    reaches(&STARTED, 1).await;
    handle
        .cancel(Some("the user changed their mind".into()))
        .await
        .unwrap();
    assert!(pipeline.wait_idle(Duration::from_secs(5)).await);
    assert_eq!(
        SENT.load(Ordering::SeqCst),
        0,
        "dropped at its next await point"
    );

    // A tool that asked to finish does, though its answer is not the client's.
    let handle = client
        .send_cancellable_request(call("Mail_SendSurely"), PeerRequestOptions::no_options())
        .await
        .unwrap();
    reaches(&STARTED, 2).await;
    handle.cancel(None).await.unwrap();
    assert!(pipeline.wait_idle(Duration::from_secs(5)).await);
    assert_eq!(FINISHED.load(Ordering::SeqCst), 1);

    // An uncancelled call still runs to its end.
    let done = client
        .send_cancellable_request(call("Mail_SendLater"), PeerRequestOptions::no_options())
        .await
        .unwrap()
        .await_response()
        .await;
    assert!(done.is_ok());
    assert_eq!(SENT.load(Ordering::SeqCst), 1);
    client.cancel().await.unwrap();
}

static POSTED: AtomicU32 = AtomicU32::new(0);

/// Post a letter after a while.
#[tool(toolkit = "Mail", version = "1.0.0")]
async fn post() -> &'static str {
    tokio::time::sleep(Duration::from_millis(300)).await;
    POSTED.fetch_add(1, Ordering::SeqCst);
    "posted"
}

/// Call a service, saying so in the log.
#[tool(toolkit = "Service", version = "1.0.0", secret = "SERVICE_KEY")]
async fn call_service(ctx: &ToolContext) -> &'static str {
    let key = ctx.secret("SERVICE_KEY").unwrap_or_default();
    tracing::info!("calling the service with {key}");
    tracing::warn!(attempt = 2, "the service was slow");
    "called"
}

#[allow(deprecated)] // logging levels: see `Recorder`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_tracing_events_reach_the_mcp_client_at_its_level() {
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let _ = tracing_subscriber::registry()
            .with(oxp_runtime::mcp::log_layer())
            .try_init();
    }
    let registry = Registry::builder()
        .tool(call_service::TOOL)
        .build()
        .unwrap();
    let pipeline = Pipeline::new(registry);
    let context: oxp_runtime::protocol::CallContext =
        serde_json::from_value(json!({"secrets": [{"id": "SERVICE_KEY", "value": "sk-live-123"}]}))
            .unwrap();
    let mcp = McpServer::new(pipeline.clone())
        .with_context(context)
        .into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline).nest("/mcp", mcp)).await;
    // A 2026-07-28 request names its level in `_meta`, or gets no messages at all.
    let messages = |level: Option<&str>| {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        });
        if let Some(level) = level {
            meta["io.modelcontextprotocol/logLevel"] = json!(level);
        }
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "Service_CallService", "arguments": {}, "_meta": meta}});
        let request = reqwest::Client::new()
            .post(format!("{}/mcp", oxp.base))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "Service_CallService")
            .json(&body);
        async move {
            let reply = request.send().await.unwrap();
            let kind = reply.headers()["content-type"].to_str().unwrap().to_owned();
            let streamed = kind == "text/event-stream";
            let text = reply.text().await.unwrap();
            let frames = harness::mcp_messages(&kind, &text);
            assert!(
                frames
                    .iter()
                    .any(|f| f["id"] == 7 && f["result"].is_object()),
                "the call's result: {frames:?}"
            );
            let logged: Vec<serde_json::Value> = frames
                .into_iter()
                .filter(|f| f["method"] == "notifications/message")
                .map(|f| f["params"].clone())
                .collect();
            (streamed, logged)
        }
    };
    let (streamed, none) = messages(None).await;
    assert!(
        none.is_empty() && !streamed,
        "no level, no messages, JSON: {none:?}"
    );
    let (streamed, warnings) = messages(Some("warning")).await;
    assert!(streamed, "messages before the result come on a stream");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["level"], "warning");
    assert_eq!(warnings[0]["data"]["message"], "the service was slow");
    assert_eq!(warnings[0]["data"]["attempt"], 2);
    let (_, all) = messages(Some("debug")).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0]["level"], "info", "in the order logged: {all:?}");
    assert_eq!(
        all[0]["data"]["message"],
        "calling the service with [redacted]"
    );
    assert!(!serde_json::to_string(&all).unwrap().contains("sk-live-123"));

    // An earlier revision's client, served statelessly: `info` and above, the server's choice
    // until a client sets a level (which a stateless server cannot remember).
    let recorder = Recorder::default();
    let transport = StreamableHttpClientTransport::from_uri(format!("{}/mcp", oxp.base));
    let client = recorder.clone().serve(transport).await.unwrap();
    client
        .send_cancellable_request(
            call("Service_CallService"),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap()
        .await_response()
        .await
        .unwrap();
    let all = settled(&recorder.1, 2).await;
    assert_eq!(all.len(), 2, "{all:?}");
    // rmcp's client handles each notification in a task of its own, so the two may be
    // recorded in either order: each is found by its level.
    let at = |level: &str| {
        all.iter()
            .find(|message| message["level"] == level)
            .unwrap_or_else(|| panic!("no {level} message: {all:?}"))
    };
    assert_eq!(
        at("info")["data"]["message"],
        "calling the service with [redacted]"
    );
    assert_eq!(at("warning")["data"]["message"], "the service was slow");
    assert!(!serde_json::to_string(&all).unwrap().contains("sk-live-123"));
    client.cancel().await.unwrap();
}

static DISPATCHED: AtomicU32 = AtomicU32::new(0);

/// Charge a card after a while.
#[tool(toolkit = "Billing", version = "1.0.0")]
async fn charge() -> &'static str {
    tokio::time::sleep(Duration::from_millis(300)).await;
    DISPATCHED.fetch_add(1, Ordering::SeqCst);
    "charged"
}

#[tokio::test]
async fn a_dropped_dispatch_cancels_its_calls() {
    let registry = Registry::builder().tool(charge::TOOL).build().unwrap();
    let dispatcher = Dispatcher::new(Pipeline::new(registry));
    let calls = vec![ToolCall {
        id: "call_1".into(),
        name: "Billing_Charge".into(),
        arguments: Ok(json!({})),
    }];
    // The host gives up on the turn after 50 ms.
    let gave_up = tokio::time::timeout(Duration::from_millis(50), dispatcher.run(calls)).await;
    assert!(gave_up.is_err());
    // Once no run is left, the charge has not gone through.
    assert!(
        dispatcher
            .pipeline()
            .wait_idle(Duration::from_secs(5))
            .await
    );
    assert_eq!(
        DISPATCHED.load(Ordering::SeqCst),
        0,
        "the charge never went through"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oxp_hang_up_cancels_nothing() {
    let oxp = start().await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let hung_up = client
        .post(format!("{}/tools/call", oxp.base))
        .header("OXP-Version", "1.0")
        .json(&json!({"tool_id": "Mail.Post", "call_id": "mail-1"}))
        .send()
        .await;
    assert!(hung_up.is_err(), "the client gave up");
    // The retry with the same call_id gets the one run's answer.
    let reply: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/tools/call", oxp.base))
        .header("OXP-Version", "1.0")
        .json(&json!({"tool_id": "Mail.Post", "call_id": "mail-1"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["value"], "posted");
    assert_eq!(POSTED.load(Ordering::SeqCst), 1);
}

// ---- Hostile MCP clients ----------------------------------------------------------------------

/// A client that hangs up while its call reports progress: the run ends, its place is given
/// back, nothing waits on the gone client, and the next call is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_mid_progress_leaves_nothing_behind() {
    let pipeline = Pipeline::new(registry());
    let mcp = McpServer::new(pipeline.clone()).into_router();
    let oxp = Oxp::start(Server::from_pipeline(pipeline.clone()).nest("/mcp", mcp)).await;
    let gone = reqwest::Client::builder()
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap()
        .post(format!("{}/mcp", oxp.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "Steps_Run")
        .json(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "Steps_Run",
            "_meta": {
                "progressToken": "p-gone",
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "gone", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }}}),
        )
        .send()
        .await
        .and_then(|r| r.error_for_status());
    // The client gave up before the answer (the headers may have come, the body not).
    let gone = match gone {
        Ok(response) => response.text().await.is_err(),
        Err(_) => true,
    };
    assert!(gone, "the client hung up");
    // Bounded: the three steps take 240 ms, a stuck progress flush at most a second more.
    let mut waited = 0;
    while pipeline.stats().active > 0 && waited < 40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    assert_eq!(
        pipeline.stats().active,
        0,
        "the run ended and gave its place back"
    );
    let next = harness::mcp_2026(&oxp, "tools/call", json!({"name": "Steps_Run"})).await;
    assert_eq!(next["content"][0]["text"], "done");
}

/// Broken MCP input around progress, cancellation and logging is refused or ignored, never
/// fatal: `logging/setLevel` with a level that does not exist (the 2026-07-28 revision has no
/// such method at all), a cancellation of a request that never was (twice), a revision from the
/// future.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_mcp_signals_are_refused_not_fatal() {
    let oxp = start().await;
    let bad_level =
        harness::mcp_2026_events(&oxp, "logging/setLevel", json!({"level": "loud"})).await;
    assert!(
        bad_level.last().is_some_and(|e| e.get("error").is_some()),
        "{bad_level:?}"
    );
    for _ in 0..2 {
        let cancel = oxp
            .request(reqwest::Method::POST, "/mcp")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "notifications/cancelled")
            .json(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 424242, "reason": "never sent"}}),
            )
            .send()
            .await
            .unwrap();
        assert!(cancel.status().as_u16() < 500, "{}", cancel.status());
    }
    let future = harness::mcp_2026_events(
        &oxp,
        "tools/call",
        json!({"name": "Steps_Run", "_meta": {"io.modelcontextprotocol/protocolVersion": "9999-01-01"}}),
    )
    .await;
    assert!(
        future.last().is_some_and(|e| e.get("error").is_some()),
        "a revision nobody knows is refused: {future:?}"
    );
    // And the server goes on.
    let fine = harness::mcp_2026(&oxp, "tools/call", json!({"name": "Steps_Run"})).await;
    assert_eq!(fine["content"][0]["text"], "done");
}
