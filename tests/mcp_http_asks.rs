//! Clients of the revisions before 2026-07-28 over HTTP (Claude Code, Cursor and VS Code connect
//! to a URL at 2025-06-18 or 2025-11-25) are asked mid-call as over stdio: the server's
//! `elicitation/create` goes out on the call's own SSE stream, and the answer, POSTed to any
//! replica, reaches the waiting call through the store replicas share. Driven by rmcp's client
//! and the Python `mcp` client, against one process and against two with `redis-server`
//! behind a balancer that sends each request to the other replica than the last; and by a
//! hostile client that answers what was asked of someone else, twice, or never.

#[path = "harness/mod.rs"]
mod harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use harness::answering::{Answering, user};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

const STATE_KEY: &str = "a state key every replica shares, 32+ bytes";

/// A question waits this long for its answer.
const WAIT_MS: &str = "3000";

fn text(result: &CallToolResult) -> String {
    let value = serde_json::to_value(&result.content).unwrap();
    value[0]["text"].as_str().unwrap_or_default().to_owned()
}

/// A balancer in front of `bases` that sends each request to the next one in turn (streamed
/// answers streamed back), and counts what each got.
struct Alternating {
    url: String,
    served: Arc<[AtomicUsize; 2]>,
}

async fn alternating(bases: [String; 2]) -> Alternating {
    let served: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let turn = Arc::new(AtomicUsize::new(0));
    let client = reqwest::Client::new();
    let counted = served.clone();
    let forward = move |request: axum::extract::Request| {
        let (client, bases, turn, served) =
            (client.clone(), bases.clone(), turn.clone(), counted.clone());
        async move {
            let replica = turn.fetch_add(1, Ordering::SeqCst) % 2;
            served[replica].fetch_add(1, Ordering::SeqCst);
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            let mut sent = client.request(
                parts.method.clone(),
                format!("{}{}", bases[replica], parts.uri.path()),
            );
            for (name, value) in &parts.headers {
                if name != "host" && name != "content-length" {
                    sent = sent.header(name, value);
                }
            }
            let answer = sent.body(body).send().await.unwrap();
            let mut response = axum::response::Response::builder().status(answer.status());
            for (name, value) in answer.headers() {
                if name != "content-length" && name != "transfer-encoding" {
                    response = response.header(name, value);
                }
            }
            response
                .body(axum::body::Body::from_stream(answer.bytes_stream()))
                .unwrap()
        }
    };
    let app = axum::Router::new().fallback(forward);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Alternating { url, served }
}

/// One client session at `url`: a confirmation, a form, a loop of questions under one key, a
/// no, and a question never answered; each asked once, in order, and the calls that were not
/// confirmed never ran. Returns how many tool runs it made.
async fn ask_through(url: &str, revision: &'static str) -> usize {
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let client = Answering {
        revision,
        capabilities: json!({"elicitation": {}}),
        asked: asked.clone(),
        answer: user,
    };
    let client = harness::bounded(
        "the client connects",
        client.serve(StreamableHttpClientTransport::from_uri(url.to_owned())),
    )
    .await
    .unwrap();
    let call = |name: &str, arguments: Value| {
        let Value::Object(arguments) = arguments else {
            panic!()
        };
        let request = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        harness::bounded("the call answers", client.call_tool(request))
    };
    let emptied = call("Files_Empty", json!({"bin": "b1"})).await.unwrap();
    assert!(
        text(&emptied).starts_with("emptied b1"),
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
    let unanswered = call("Files_Empty", json!({"bin": "silent"})).await.unwrap();
    assert_eq!(unanswered.is_error, Some(true), "{unanswered:?}");
    assert!(
        text(&unanswered).contains(&format!("not answered within {WAIT_MS} ms")),
        "a clear error: {unanswered:?}"
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
    3
}

/// How many times `base`'s tools ran so far: one more confirmed call reports its run number.
async fn runs_at(base: &str) -> usize {
    let client = Answering {
        revision: "2025-11-25",
        capabilities: json!({"elicitation": {}}),
        asked: Arc::default(),
        answer: user,
    };
    let client = harness::bounded(
        "the client connects",
        client.serve(StreamableHttpClientTransport::from_uri(format!(
            "{base}/mcp"
        ))),
    )
    .await
    .unwrap();
    let arguments = json!({"bin": "count"}).as_object().unwrap().clone();
    let request = CallToolRequestParams::new("Files_Empty").with_arguments(arguments);
    let counted = harness::bounded("the count", client.call_tool(request))
        .await
        .unwrap();
    client.cancel().await.unwrap();
    // "emptied count (run N of PID)"
    let text = text(&counted);
    let run = text
        .split("(run ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next());
    run.and_then(|n| n.parse::<usize>().ok()).expect(&text) - 1
}

/// rmcp's client at 2025-06-18 and 2025-11-25 over HTTP, one process (the memory store): every
/// question on the call's stream, each answer reaching its call, a no and a silence running
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earlier_revisions_over_http_are_asked_on_the_call_s_stream() {
    let binary = harness::test_example_binary("confirm_server");
    let server = harness::start_server(&binary, &[("OXP_STATE_TTL_MS", WAIT_MS)]);
    let mut runs = 0;
    for revision in ["2025-06-18", "2025-11-25"] {
        runs += ask_through(&format!("{}/mcp", server.base), revision).await;
    }
    assert_eq!(runs_at(&server.base).await, runs, "nothing unconfirmed ran");
}

/// The same across two replicas sharing Redis and the state key, every request going to the
/// other replica than the last: the answer lands on the replica that did not ask, and reaches
/// the call waiting on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_posted_to_another_replica_reaches_the_waiting_call() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("confirm_server");
    let env = [
        ("OXP_REDIS_URL", redis.1.as_str()),
        ("OXP_STATE_KEY", STATE_KEY),
        ("OXP_STATE_TTL_MS", WAIT_MS),
    ];
    let replicas = [
        harness::start_server(&binary, &env),
        harness::start_server(&binary, &env),
    ];
    let balancer = alternating([replicas[0].base.clone(), replicas[1].base.clone()]).await;
    let mut runs = 0;
    for revision in ["2025-06-18", "2025-11-25"] {
        runs += ask_through(&balancer.url, revision).await;
    }
    for served in balancer.served.iter() {
        assert!(served.load(Ordering::SeqCst) > 5, "both replicas served");
    }
    let ran = runs_at(&replicas[0].base).await + runs_at(&replicas[1].base).await;
    assert_eq!(ran, runs, "each confirmed call ran once, the others never");
    python_asks(&balancer.url).await;
}

/// The Python `mcp` client at both revisions, through the balancer.
async fn python_asks(url: &str) {
    let python = std::env::var("OXP_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = std::process::Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        harness::skip(
            "Python with the `mcp` package (`pip install mcp`, then set OXP_TEST_PYTHON)",
        );
        return;
    }
    for revision in ["2025-06-18", "2025-11-25"] {
        let script = format!("{}/python/mcp_asking_http.py", env!("CARGO_MANIFEST_DIR"));
        let (python, url) = (python.clone(), url.to_owned());
        let output = tokio::task::spawn_blocking(move || {
            std::process::Command::new(python)
                .args([script, url, revision.to_owned()])
                .output()
                .unwrap()
        });
        let output = harness::bounded("the Python client", output).await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{revision}: {stdout}\n{stderr}");
        assert!(stdout.contains("mcp asking over http: ok"), "{stdout}");
    }
}

/// A raw client: an `initialize` that declares elicitation, and the session id it is given.
async fn initialize(base: &str, key: &str) -> String {
    let answer = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("x-api-key", key)
        .json(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    answer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

fn post(base: &str, key: &str, session: &str, body: Value) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", session)
        .header("x-api-key", key)
        .json(&body)
}

/// The next SSE event's message from `stream`.
async fn next_event(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<axum::body::Bytes>> + Unpin),
    buffer: &mut String,
) -> Value {
    use futures_util::StreamExt;
    loop {
        if let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if let Some(data) = event.lines().find_map(|line| line.strip_prefix("data: ")) {
                return serde_json::from_str(data).unwrap();
            }
            continue;
        }
        let chunk = harness::bounded("the next event", stream.next()).await;
        buffer.push_str(std::str::from_utf8(&chunk.unwrap().unwrap()).unwrap());
    }
}

/// A hostile client cannot answer another caller's question, answer one twice, answer one
/// nobody asked, or forge a session: each is refused and the waiting call is untouched, and the
/// asked caller's own answer still goes through, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_the_asked_caller_s_and_is_used_once() {
    let (ada, eve) = (
        "k_ada_0123456789abcdef0123456789ab",
        "k_eve_0123456789abcdef0123456789ab",
    );
    let keys = format!("{ada},{eve}");
    let binary = harness::test_example_binary("confirm_server");
    let server = harness::start_server(
        &binary,
        &[
            ("OXP_API_KEYS", keys.as_str()),
            ("OXP_STATE_TTL_MS", "30000"),
        ],
    );
    let base = &server.base;
    let session = initialize(base, ada).await;
    // A session id this server did not issue is a session that ended.
    let forged = post(
        base,
        ada,
        "x.y",
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(forged.status(), 404);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "Files_Empty", "arguments": {"bin": "b9"}}});
    let answer = post(base, ada, &session, call).send().await.unwrap();
    assert_eq!(answer.headers()["content-type"], "text/event-stream");
    let mut stream = Box::pin(answer.bytes_stream());
    let mut buffer = String::new();
    let asked = next_event(&mut stream, &mut buffer).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Empty the bin b9?");
    let id = asked["id"].clone();
    assert!(id.as_str().unwrap().len() > 30, "an unguessable id: {id}");
    let yes = |id: Value| json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept", "content": {}}});
    // Eve, with Ada's session and question id, is refused.
    let stolen = post(base, eve, &session, yes(id.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(stolen.status(), 404, "another caller's answer");
    // A question nobody asked.
    let made_up = post(
        base,
        ada,
        &session,
        yes(json!("oxp-ask-00000000000000000000000000000000")),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(made_up.status(), 404);
    // Ada's own answer goes through, once.
    let answered = post(base, ada, &session, yes(id.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 202);
    let again = post(base, ada, &session, yes(id)).send().await.unwrap();
    assert_eq!(again.status(), 404, "an answer is used once");
    let result = next_event(&mut stream, &mut buffer).await;
    assert_eq!(result["id"], 7, "{result}");
    let said = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(said.starts_with("emptied b9 (run 1 "), "ran once: {said}");
}

/// A replica that dies while its call waits for an answer loses nothing and runs nothing: the
/// answer, POSTed to the other replica, finds the question (kept in Redis) and is taken, but no
/// call waits on it, so the tool runs nowhere; the client's stream ended with the replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_dies_while_it_asks_runs_nothing() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let key = "k_ada_0123456789abcdef0123456789ab";
    let binary = harness::test_example_binary("confirm_server");
    let env = [
        ("OXP_REDIS_URL", redis.1.as_str()),
        ("OXP_STATE_KEY", STATE_KEY),
        ("OXP_STATE_TTL_MS", "30000"),
        ("OXP_API_KEYS", key),
    ];
    let mut asking = harness::start_server(&binary, &env);
    let other = harness::start_server(&binary, &env);
    let session = initialize(&asking.base, key).await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "Files_Empty", "arguments": {"bin": "b7"}}});
    let answer = post(&asking.base, key, &session, call)
        .send()
        .await
        .unwrap();
    let mut stream = Box::pin(answer.bytes_stream());
    let mut buffer = String::new();
    let asked = next_event(&mut stream, &mut buffer).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    // The replica holding the call dies before the answer comes.
    asking.child.kill().unwrap();
    asking.child.wait().unwrap();
    let yes =
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}});
    let taken = post(&other.base, key, &session, yes).send().await.unwrap();
    assert_eq!(taken.status(), 202, "the question outlives its replica");
    // The call's stream ended with its replica, without a result.
    use futures_util::StreamExt;
    let rest = harness::bounded("the stream ends", async {
        let mut rest = Vec::new();
        while let Some(Ok(chunk)) = stream.next().await {
            rest.extend_from_slice(&chunk);
        }
        rest
    })
    .await;
    assert!(
        !String::from_utf8_lossy(&rest).contains("emptied"),
        "no result came"
    );
    // Nothing ran on the replica that took the answer: its next confirmed call is its first run.
    let client = Answering {
        revision: "2025-11-25",
        capabilities: json!({"elicitation": {}}),
        asked: Arc::default(),
        answer: user,
    };
    // An API key is accepted as a bearer token too.
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            format!("{}/mcp", other.base),
        )
        .auth_header(key);
    let transport = StreamableHttpClientTransport::from_config(config);
    let client = harness::bounded("the client connects", client.serve(transport))
        .await
        .unwrap();
    let arguments = json!({"bin": "count"}).as_object().unwrap().clone();
    let request = CallToolRequestParams::new("Files_Empty").with_arguments(arguments);
    let counted = harness::bounded("the count", client.call_tool(request))
        .await
        .unwrap();
    assert!(
        text(&counted).starts_with("emptied count (run 1 "),
        "the answered question ran nothing: {counted:?}"
    );
    client.cancel().await.unwrap();
}

/// A client that declared nothing it could answer is told what the tool needed, and the
/// question, in words a model can relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_cannot_ask_hears_the_question() {
    let binary = harness::test_example_binary("confirm_server");
    let server = harness::start_server(&binary, &[]);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "Files_Empty", "arguments": {"bin": "b9"}}});
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/mcp", server.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&call)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let said = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("confirmation"), "{said}");
    assert!(
        said.contains("Empty the bin b9?"),
        "the question itself: {said}"
    );
    assert_eq!(answer["result"]["isError"], true);
}
