//! The promises `docs/hostile-clients.md` makes, held against hostile and broken clients on a real socket
//! (127.0.0.1). Each test names the promise it holds, and fails when the promise breaks.

#[path = "harness/mod.rs"]
mod harness;

use std::time::Duration;

use harness::Oxp;
use oxp_runtime::server::Server;
use oxp_tests::{HOLDS, THREADS};
use serde_json::json;

fn server() -> Server {
    Server::new(oxp_tests::all_tools().build().unwrap())
}

/// Limits count runs, not connections: clients that send unique call_ids and hang up at once
/// cannot start more runs than `OXP_MAX_CONCURRENT_CALLS`: a run goes on in a task after its
/// client hangs up, so a place given back with the handler would let every hang-up start one
/// more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_ups_with_call_ids_cannot_escape_the_concurrency_limit() {
    let server = Server::from_pipeline(harness::pipeline().limits(Some(4), 8));
    let pipeline = server.pipeline().clone();
    let oxp = Oxp::start(server).await;
    let floods = (0..40).map(|i| {
        let body =
            json!({"tool_id": "Gauge.Hold", "call_id": format!("flood-{i}"), "input": {"ms": 400}});
        let oxp = &oxp;
        async move { oxp.call_and_hang_up(&body, Duration::from_millis(20)).await }
    });
    futures_util::future::join_all(floods).await;
    // While the admitted runs go on, the limit still counts them: a polite call is refused.
    let refused = oxp
        .call(json!({"tool_id": "Gauge.Hold", "input": {"ms": 1}}))
        .await;
    assert_eq!(refused.status, 400, "{:?}", refused.body);
    assert_eq!(refused.header("x-should-retry"), Some("true"));
    assert!(pipeline.wait_idle(Duration::from_secs(10)).await);
    assert!(
        HOLDS.peak() <= 4,
        "{} runs at once under a limit of 4",
        HOLDS.peak()
    );
    assert!(HOLDS.finished() >= 4, "the admitted runs ran to the end");
    // Every run's place came back: the server takes calls again.
    let ok = oxp
        .call(json!({"tool_id": "Gauge.Hold", "input": {"ms": 1}}))
        .await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
}

/// A sync tool holds its blocking place until its thread returns: timed-out calls are answered
/// at once, but no more threads than the cap ever run, and a drain waits for the threads: a
/// place given back with the timeout would let stuck tools pile up on tokio's own thread cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_sync_tools_keep_their_blocking_places_until_their_threads_return() {
    let server = Server::from_pipeline(harness::pipeline().limits(None, 2));
    let pipeline = server.pipeline().clone();
    let oxp = Oxp::start(server).await;
    let calls =
        (0..6).map(|_| oxp.call(json!({"tool_id": "Gauge.HoldThread", "input": {"ms": 1500}})));
    for reply in futures_util::future::join_all(calls).await {
        // Answered as timed out (the tool's limit is 100 ms; waiting for a place counts in it).
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body["success"], false, "{:?}", reply.body);
    }
    // Every call was answered while the threads still run: the timeouts answered at once,
    // without waiting for the threads (no clock needed to tell).
    assert!(THREADS.live() >= 1, "the timed-out threads still run");
    // Answered, but not idle: a drain must wait for the threads.
    assert!(!pipeline.wait_idle(Duration::from_millis(50)).await);
    assert!(pipeline.stats().active >= 1);
    assert!(pipeline.wait_idle(Duration::from_secs(5)).await);
    assert!(
        THREADS.peak() <= 2,
        "{} threads at once under a cap of 2",
        THREADS.peak()
    );
    assert_eq!(THREADS.live(), 0);
}

/// A call_id names one request: the same id with another input, or another tool, is a 400 that
/// says so and runs nothing, never the first request's answer; a true retry gets the first
/// answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_id_reused_for_another_request_is_refused_not_answered() {
    let oxp = Oxp::start(server()).await;
    let add = |a: i64| json!({"tool_id": "Calculator.Add", "call_id": "reuse-1", "input": {"a": a, "b": 2}});
    let first = oxp.call(add(1)).await;
    assert_eq!(first.body["value"], 3.0);
    let other_input = oxp.call(add(40)).await;
    assert_eq!(other_input.status, 400, "{:?}", other_input.body);
    assert!(
        other_input.body["message"]
            .as_str()
            .unwrap()
            .contains("call_id was already used"),
        "{:?}",
        other_input.body
    );
    let other_tool = oxp
        .call(json!({"tool_id": "Once.Record", "call_id": "reuse-1", "input": {"ms": 0}}))
        .await;
    assert_eq!(other_tool.status, 400);
    assert_eq!(oxp_tests::runs("reuse-1"), 0, "the other tool did not run");
    // The same request again is a retry: the first answer, unchanged.
    let retry = oxp.call(add(1)).await;
    assert_eq!(retry.body, first.body);
    // Keys order does not make a request another.
    let reordered = oxp
        .call(json!({"input": {"b": 2, "a": 1}, "call_id": "reuse-1", "tool_id": "Calculator.Add"}))
        .await;
    assert_eq!(reordered.body, first.body);
}

/// The longest call_ids the server takes (`MAX_ID_BYTES`) are keys like any other: a retry gets
/// the first answer, another request under the same id is refused, and ids that differ only at
/// their end are two keys. (The store writes a short key on the stack and a long one on the
/// heap; these take the long way.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_call_ids_are_keys_like_any_other() {
    let oxp = Oxp::start(server()).await;
    let max = oxp_runtime::call::MAX_ID_BYTES;
    let id = |last: char| format!("{}{last}", "k".repeat(max - 1));
    let add = |call_id: &str, a: i64| json!({"tool_id": "Calculator.Add", "call_id": call_id, "input": {"a": a, "b": 2}});
    let first = oxp.call(add(&id('x'), 1)).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.body["call_id"], id('x'));
    let retry = oxp.call(add(&id('x'), 1)).await;
    assert_eq!(
        retry.body, first.body,
        "the first answer, duration included"
    );
    let reused = oxp.call(add(&id('x'), 40)).await;
    assert_eq!(reused.status, 400, "{:?}", reused.body);
    // Differs only in its last byte: another key, so another run with its own answer.
    let other = oxp.call(add(&id('y'), 40)).await;
    assert_eq!(other.status, 200, "{:?}", other.body);
    assert_eq!(other.body["value"], 42.0);
    // One byte longer is refused before any key is made.
    let too_long = oxp.call(add(&format!("{}z", id('x')), 1)).await;
    assert_eq!(too_long.status, 400, "{:?}", too_long.body);
}

/// Two end users behind one principal never share an answer through a call_id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_users_behind_one_principal_never_share_an_answer() {
    let oxp = Oxp::start(server()).await;
    let call = |user: &str| {
        json!({"tool_id": "Once.Record", "call_id": "shared-id", "input": {"ms": 0},
               "context": {"user_id": user}})
    };
    let ada = oxp.call(call("ada")).await;
    let bob = oxp.call(call("bob")).await;
    assert_eq!(ada.body["value"], 1);
    assert_eq!(
        bob.body["value"], 2,
        "bob's call ran for bob: {:?}",
        bob.body
    );
}

/// A server started the way `serve()` starts it: `Server::serve` on a loopback listener.
async fn served(server: Server) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending(), Duration::from_secs(1)));
    base
}

/// Browsers cannot drive the server: a call must say it is JSON, a foreign `Origin` is a 403 on
/// every route (MCP's `initialize` included, and CORS preflights), and a loopback server answers
/// only to loopback names (DNS rebinding). The tool's run counter shows nothing ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsers_cannot_drive_the_server() {
    let pipeline = harness::pipeline();
    let mcp = oxp_runtime::mcp::McpServer::new(pipeline.clone()).into_router();
    let server = Server::from_pipeline(pipeline).nest("/mcp", mcp);
    let base = served(server.allowed_origins(["https://agent.example.com"])).await;
    let client = reqwest::Client::new();
    let record = |call_id: &str| {
        json!({"tool_id": "Once.Record", "call_id": call_id, "input": {"ms": 0}}).to_string()
    };
    let post = |path: &str| client.post(format!("{base}{path}"));
    // What `fetch(url, {mode: "no-cors", body: new Blob([...])})` sends: no Content-Type.
    let typeless = post("/tools/call")
        .body(record("csrf-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(typeless.status(), 400);
    let plain = post("/tools/call")
        .header("content-type", "text/plain")
        .body(record("csrf-2"))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 400);
    for (method, path) in [
        (reqwest::Method::POST, "/tools/call"),
        (reqwest::Method::GET, "/tools"),
        (reqwest::Method::GET, "/health"),
        (reqwest::Method::POST, "/mcp"),
        (reqwest::Method::OPTIONS, "/tools/call"),
    ] {
        let reply = client
            .request(method.clone(), format!("{base}{path}"))
            .header("origin", "https://evil.example")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(if path == "/mcp" {
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "evil", "version": "1"}}})
                .to_string()
            } else {
                record("csrf-3")
            })
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 403, "{method} {path} from a foreign origin");
        assert_eq!(reply.headers()["oxp-version"], "1.0");
        assert!(reply.headers().get("access-control-allow-origin").is_none());
        let body: serde_json::Value = reply.json().await.unwrap();
        harness::assert_valid(harness::SERVER_ERROR, &body);
    }
    // A foreign Host on a loopback server: a rebound name.
    let rebound = post("/tools/call")
        .header("host", "evil.example")
        .header("content-type", "application/json")
        .body(record("csrf-4"))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    for call_id in ["csrf-1", "csrf-2", "csrf-3", "csrf-4"] {
        assert_eq!(oxp_tests::runs(call_id), 0, "{call_id} ran");
    }
    // The server's own origin (the playground's) and a listed one are served.
    let own = base.clone();
    for origin in [own.as_str(), "https://agent.example.com"] {
        let reply = post("/tools/call")
            .header("origin", origin)
            .header("content-type", "application/json")
            .body(json!({"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{origin}");
    }
    let localhost = base.replace("127.0.0.1", "localhost");
    let reply = client
        .get(format!("{localhost}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200, "localhost is a loopback name");
}

/// A server listening on every interface answers only to its own names (its addresses, the
/// loopback names, its public URL's host, `OXP_ALLOWED_HOSTS`), and takes no origin from the
/// request: a DNS-rebound page names its own host in `Host` (and in `Origin` when it sends one)
/// and is refused on every route — reading the tool list, the playground's hints or the metrics
/// with a GET (no `Origin`) as much as calling a tool with a POST. Its own addresses' pages and a
/// public URL's are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebound_page_cannot_reach_a_server_on_every_interface() {
    let server = server()
        .public_url("https://tools.example.com")
        .playground(true);
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(server.serve(listener, std::future::pending(), Duration::from_secs(1)));
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let call = |host: String, origin: Option<String>, call_id: &str| {
        let mut request = client
            .post(format!("{base}/tools/call"))
            .header("host", host)
            .header("content-type", "application/json");
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request
            .body(
                json!({"tool_id": "Once.Record", "call_id": call_id, "input": {"ms": 0}})
                    .to_string(),
            )
            .send()
    };
    let evil = format!("evil.example:{port}");
    let rebound = call(
        evil.clone(),
        Some(format!("http://evil.example:{port}")),
        "rebound-1",
    )
    .await
    .unwrap();
    assert_eq!(rebound.status(), 403, "a rebound page's call");
    let without_origin = call(evil.clone(), None, "rebound-2").await.unwrap();
    assert_eq!(
        without_origin.status(),
        403,
        "a rebound call with no Origin"
    );
    for call_id in ["rebound-1", "rebound-2"] {
        assert_eq!(oxp_tests::runs(call_id), 0, "{call_id} ran");
    }
    let get = |path: &str, host: &str| {
        client
            .get(format!("{base}{path}"))
            .header("host", host)
            .send()
    };
    for path in ["/tools", "/", "/playground/hints", "/metrics", "/health"] {
        let read = get(path, &evil).await.unwrap();
        assert_eq!(read.status(), 403, "a rebound page's GET {path}");
        let own = get(path, &format!("127.0.0.1:{port}")).await.unwrap();
        assert_eq!(own.status(), 200, "GET {path} by the server's address");
    }
    // By a name the server has: its public URL's host, a loopback name.
    for host in ["tools.example.com", "localhost:8443"] {
        let named = get("/tools", host).await.unwrap();
        assert_eq!(named.status(), 200, "{host}");
    }
    for origin in [
        format!("http://127.0.0.1:{port}"),
        "https://tools.example.com".to_owned(),
    ] {
        let own = call(format!("127.0.0.1:{port}"), Some(origin.clone()), "")
            .await
            .unwrap();
        assert_ne!(own.status(), 403, "{origin} is the server's own");
    }
}

/// `OXP_METRICS_ADDR`'s listener is served like the main port: a foreign origin is refused, a
/// connection that sends nothing is closed after the header timeout, a body over the cap is a
/// 413.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_listener_has_the_main_port_s_guard_and_limits() {
    let server = server()
        .metrics_route(false)
        .max_body_bytes(1024)
        .connection_limits(limits(|l| l.header_timeout = Duration::from_millis(300)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve_metrics(listener, std::future::pending()));
    let client = reqwest::Client::new();
    let scrape = client.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(scrape.status(), 200);
    let foreign = client
        .get(format!("{base}/metrics"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    let rebound = client
        .get(format!("{base}/metrics"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        rebound.status(),
        403,
        "a loopback listener answers loopback names only"
    );
    let big = client
        .post(format!("{base}/metrics"))
        .header("content-type", "application/json")
        .body(vec![b' '; 4096])
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 413);
    let mut idle = tokio::net::TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap();
    assert!(
        closed_within(&mut idle, Duration::from_secs(5)).await,
        "a silent connection is closed after the header timeout"
    );
}

/// One connection budget per process: under a file limit of 600, idle connections sent to both
/// the main port and `OXP_METRICS_ADDR` cannot together exhaust the process's files. The metrics
/// port holds a small share of the budget, and the main port keeps the rest: `/health` answers
/// with 290 idle connections on the main port and 300 sent to the metrics port. (Were each
/// listener capped near the file limit on its own, accepting them would run out of files and
/// `/health` would wait in the backlog.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listeners_share_one_connection_budget_and_the_main_port_keeps_its_share() {
    use std::io::{BufRead, BufReader};
    let _turn = HEAVY.lock().await;
    // A port of its own for the metrics (port 0 for both would be "the same address").
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_addr = free.local_addr().unwrap().to_string();
    drop(free);
    let mut child = std::process::Command::new("sh")
        .args([
            "-c",
            "ulimit -n 600 && exec \"$0\"",
            &harness::example_binary(),
        ])
        .env("OXP_ADDR", "127.0.0.1:0")
        .env("OXP_METRICS_ADDR", &metrics_addr)
        .env("OXP_LOG_FORMAT", "json")
        // Idle connections stay until the test is done with them.
        .env("OXP_HEADER_TIMEOUT_MS", "600000")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the example starts");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let _child = Kill(child);
    let after = |line: &str, marker: &str| {
        let at = line.find(marker)? + marker.len();
        Some(line[at..].split(['"', ' ', '/']).next()?.to_owned())
    };
    let (mut main, mut metrics) = (None, None);
    while main.is_none() || metrics.is_none() {
        let line = lines
            .next()
            .expect("the example logs its addresses")
            .unwrap();
        main = main.or_else(|| after(&line, "serving OXP 1.0 on http://"));
        metrics = metrics.or_else(|| after(&line, "serving metrics on http://"));
    }
    std::thread::spawn(move || lines.for_each(drop));
    let (main, metrics) = (main.unwrap(), metrics.unwrap());
    let mut idle = Vec::new();
    for (addr, count) in [(&metrics, 300), (&main, 290)] {
        for _ in 0..count {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
    }
    // Asked after every idle connection: it waits behind them in the backlog.
    let health = reqwest::Client::new()
        .get(format!("http://{main}/health"))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("/health answers");
    assert_eq!(health.status(), 200);
    drop(idle);
}

/// The check order the guide gives (`oxp-runtime/guide/deploying.md`): a declared length over the cap is a 413 by its head, before
/// authentication; a chunked body from a caller without credentials is a 401, unread; with
/// credentials, the same body is cut off at the cap as it is read, a 413.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_body_cap_and_authentication_come_in_the_documented_order() {
    let auth = oxp_runtime::server::ServerAuth::default().api_key(API_KEY);
    let oxp = Oxp::start(server().auth(auth).max_body_bytes(1024)).await;
    let big = || vec![b' '; 64 * 1024];
    let declared = oxp
        .request(reqwest::Method::POST, "/tools/call")
        .header("content-type", "application/json")
        .body(big())
        .send()
        .await
        .unwrap();
    assert_eq!(declared.status(), 413, "declared too large, no credentials");
    // 64 chunks of 1 KiB, without a length, on a raw socket.
    let chunked = |key: Option<&str>| {
        let addr = oxp.base.trim_start_matches("http://");
        let credential = key.map_or(String::new(), |key| format!("oxp-api-key: {key}\r\n"));
        let mut request = format!(
            "POST /tools/call HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             {credential}transfer-encoding: chunked\r\n\r\n"
        )
        .into_bytes();
        for _ in 0..64 {
            request.extend_from_slice(b"400\r\n");
            request.extend(std::iter::repeat_n(b' ', 1024));
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        request
    };
    let unauthenticated = raw(&oxp.base, &chunked(None), Duration::from_secs(3)).await;
    assert!(
        unauthenticated.starts_with("HTTP/1.1 401"),
        "{unauthenticated}"
    );
    let authenticated = raw(&oxp.base, &chunked(Some(API_KEY)), Duration::from_secs(3)).await;
    assert!(authenticated.starts_with("HTTP/1.1 413"), "{authenticated}");
}

/// The write deadline on a real socket: a client that asks for a large answer and never reads
/// it is disconnected once a write has waited `OXP_WRITE_TIMEOUT_MS` (its socket buffers full),
/// and the server goes on serving others. The client reads only once the server has logged
/// closing its connection, found by the client's own address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_answer_is_cut_off_at_the_write_deadline() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let log = harness::Log::captured();
    let server = server()
        .max_body_bytes(1024)
        .connection_limits(limits(|l| l.write_timeout = Duration::from_millis(300)));
    let oxp = Oxp::start(server).await;
    let addr = oxp.base.trim_start_matches("http://").to_owned();
    // 8 MiB of answer (under the result cap): far more than the two sockets' buffers hold.
    let body = json!({"tool_id": "Util.BigText", "input": {"n": 8 * 1024 * 1024}}).to_string();
    let request = format!(
        "POST /tools/call HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         oxp-version: 1.0\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    // A small receive window (set before connecting, so the handshake offers it), and no read:
    // the server's writes must wait.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stuck = socket.connect(addr.parse().unwrap()).await.unwrap();
    let marker = format!("connection of {} (", stuck.local_addr().unwrap());
    stuck.write_all(request.as_bytes()).await.unwrap();
    assert!(
        log.wait_for(marker).await,
        "the server closed the stuck connection at its write deadline"
    );
    // The server's side is closed: reading drains what was in flight, then ends short.
    let mut chunk = vec![0u8; 1 << 20];
    let mut read = 0;
    loop {
        match stuck.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    assert!(read < 8 * 1024 * 1024, "{read} bytes: the whole answer");
    let health = oxp.get("/health").await;
    assert_eq!(health.status, 200, "the server goes on serving");
}

/// Sends raw bytes on a fresh connection and returns what comes back within `wait` (the
/// status line and headers, at least).
async fn raw(base: &str, request: &[u8], wait: Duration) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap();
    socket.write_all(request).await.unwrap();
    let mut answer = vec![0; 4096];
    let read = tokio::time::timeout(wait, socket.read(&mut answer)).await;
    match read {
        Ok(Ok(n)) => String::from_utf8_lossy(&answer[..n]).into_owned(),
        Ok(Err(e)) => format!("error: {e}"),
        Err(_) => "no answer".to_owned(),
    }
}

/// Every route honours the body cap (413 with OXP-Version, at once when the declared length is
/// over it), and a body that does not arrive in time is a 400, not a 413: `GET /tools` and
/// `/mcp` read no more than the cap, and a declared 100 MB is not waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_honours_the_body_cap_and_deadline() {
    let server = server()
        .max_body_bytes(64 * 1024)
        .body_timeout(Duration::from_millis(300));
    let oxp = Oxp::start(server).await;
    let big = "x".repeat(200 * 1024);
    for (method, path) in [
        (reqwest::Method::GET, "/tools"),
        (reqwest::Method::POST, "/tools/call"),
        (reqwest::Method::POST, "/mcp"),
    ] {
        let reply = oxp
            .send(
                oxp.request(method.clone(), path)
                    .header("content-type", "application/json")
                    .body(big.clone()),
            )
            .await;
        assert_eq!(reply.status, 413, "{method} {path}");
    }
    // Streamed without a length (chunked): cut off at the cap.
    let addr = oxp.base.trim_start_matches("http://").to_owned();
    let mut chunked = format!("POST /tools/call HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n").into_bytes();
    for _ in 0..20 {
        chunked.extend_from_slice(format!("{:x}\r\n", 16 * 1024).as_bytes());
        chunked.extend(std::iter::repeat_n(b' ', 16 * 1024));
        chunked.extend_from_slice(b"\r\n");
    }
    let answer = raw(&oxp.base, &chunked, Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // A declared 100 MB with no body: refused at once, not waited for.
    let answer = raw(
        &oxp.base,
        format!("POST /tools/call HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: 100000000\r\n\r\n").as_bytes(),
        Duration::from_secs(2),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("oxp-version: 1.0"),
        "{answer}"
    );
    // Half a body, then silence: a 400 once the body's deadline passes.
    let answer = raw(
        &oxp.base,
        format!("POST /tools/call HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"tool_id\":").as_bytes(),
        Duration::from_secs(3),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("did not arrive in time"), "{answer}");
}

/// A client still sending a body the server refused unread, or cut off as it read it, gets its
/// `413` with `Connection: close`, every time: the server reads that body away before it closes
/// (closing first, even with a lingering read, made hyper's client now and then report a failed
/// request instead of the answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_body_still_being_sent_gets_its_413() {
    let oxp = Oxp::start(server().max_body_bytes(64 * 1024)).await;
    let big = "x".repeat(400 * 1024);
    for round in 0..25 {
        let reply = oxp
            .send(
                oxp.request(reqwest::Method::POST, "/tools/call")
                    .header("content-type", "application/json")
                    .body(big.clone()),
            )
            .await;
        assert_eq!(reply.status, 413, "round {round}");
        assert_eq!(reply.headers["connection"], "close", "round {round}");
        assert_eq!(reply.headers["oxp-version"], "1.0", "round {round}");
    }
    // Refused for its origin, with a body under the cap: the same.
    for round in 0..10 {
        let reply = oxp
            .send(
                oxp.request(reqwest::Method::POST, "/tools/call")
                    .header("content-type", "application/json")
                    .header("origin", "https://evil.example")
                    .body("y".repeat(48 * 1024)),
            )
            .await;
        assert_eq!(reply.status, 403, "round {round}");
        assert_eq!(reply.headers["connection"], "close", "round {round}");
    }
    // A body with no declared length (chunked) that goes over the cap mid-way: cut off as it
    // is read, and answered the same way, so that no client reuses a connection whose request
    // is still being sent.
    let addr = oxp.base.trim_start_matches("http://").to_owned();
    for round in 0..5 {
        let socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let (mut read, mut write) = socket.into_split();
        let head = format!(
            "POST /tools/call HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        let sending = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            write.write_all(head.as_bytes()).await?;
            let chunk = format!("4000\r\n{}\r\n", "z".repeat(0x4000));
            for _ in 0..25 {
                write.write_all(chunk.as_bytes()).await?;
            }
            write.write_all(b"0\r\n\r\n").await
        });
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                tokio::io::AsyncReadExt::read(&mut read, &mut buffer),
            )
            .await
            .expect("an answer within 10 s")
            .unwrap();
            assert!(n > 0, "round {round}: closed before an answer");
            answer.extend_from_slice(&buffer[..n]);
        }
        let head = String::from_utf8_lossy(&answer).to_lowercase();
        assert!(head.starts_with("http/1.1 413"), "round {round}: {head}");
        assert!(
            head.contains("\r\nconnection: close\r\n"),
            "round {round}: {head}"
        );
        // What the client still sends is read away (or refused by a closed socket).
        let _ = sending.await.unwrap();
    }
    // A client that declares a large body, sends a little of it and hangs up: the server reads
    // nothing more, and answers the next call.
    let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /tools/call HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: 10000000\r\n\r\n"
    );
    tokio::io::AsyncWriteExt::write_all(&mut socket, head.as_bytes())
        .await
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut socket, &[b' '; 4096])
        .await
        .unwrap();
    drop(socket);
    let reply = oxp
        .call(json!({"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}))
        .await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
}

fn jwt(claims: serde_json::Value, header: jsonwebtoken::Header) -> String {
    jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap()
}

const JWT_SECRET: &str = "a-test-secret-of-at-least-32-bytes!";
const API_KEY: &str = "k_0123456789abcdef0123456789abcdef";

/// A principal is someone, and a request carries one credential: JWTs without a string `sub`,
/// with a `crit` header, and requests with two credentials are 401s: tokens without a usable
/// `sub` would share one principal, an ignored `crit` would accept what the issuer said must
/// not be, and picking one of two credentials is picking the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_name_someone_and_requests_carry_one_credential() {
    let auth = oxp_runtime::server::ServerAuth::default()
        .jwt_secret(JWT_SECRET)
        .api_key(API_KEY);
    let oxp = Oxp::start(server().auth(auth)).await;
    let exp = 4_000_000_000u64;
    let call = json!({"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}});
    let with = |token: String| {
        oxp.request(reqwest::Method::POST, "/tools/call")
            .bearer_auth(token)
            .json(&call)
    };
    let good = oxp
        .call_with(with(jwt(
            json!({"sub": "ada", "exp": exp}),
            Default::default(),
        )))
        .await;
    assert_eq!(good.status, 200);
    for claims in [
        json!({"exp": exp}),
        json!({"sub": 42, "exp": exp}),
        json!({"sub": "", "exp": exp}),
        json!({"sub": ["ada"], "exp": exp}),
    ] {
        let reply = oxp
            .call_with(with(jwt(claims.clone(), Default::default())))
            .await;
        assert_eq!(reply.status, 401, "{claims}");
    }
    let critical = jsonwebtoken::Header {
        crit: Some(vec!["urn:example:unknown".into()]),
        ..Default::default()
    };
    let reply = oxp
        .call_with(with(jwt(json!({"sub": "ada", "exp": exp}), critical)))
        .await;
    assert_eq!(reply.status, 401);
    assert!(reply.body["message"].as_str().unwrap().contains("critical"));
    // Two credentials, of one kind or two: refused, whichever would have been valid.
    let ada = jwt(json!({"sub": "ada", "exp": exp}), Default::default());
    let twice = oxp
        .call_with(
            oxp.request(reqwest::Method::POST, "/tools/call")
                .header("authorization", format!("Bearer {ada}"))
                .header("authorization", "Bearer wrong")
                .json(&call),
        )
        .await;
    assert_eq!(twice.status, 401);
    let keys = oxp
        .call_with(
            oxp.request(reqwest::Method::POST, "/tools/call")
                .header("oxp-api-key", API_KEY)
                .header("x-api-key", "another")
                .json(&call),
        )
        .await;
    assert_eq!(keys.status, 401);
    let mixed = oxp
        .call_with(
            oxp.request(reqwest::Method::POST, "/tools/call")
                .header("oxp-api-key", API_KEY)
                .bearer_auth(&ada)
                .json(&call),
        )
        .await;
    assert_eq!(mixed.status, 401);
}

/// Tests that open thousands of sockets or measure this process's memory take turns: the
/// others' sockets would fill the caps under test, and their buffers the RSS measured.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The resident memory of this process, in bytes (Linux; `None` elsewhere).
fn rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn limits(
    configure: impl FnOnce(&mut oxp_runtime::server::ConnectionLimits),
) -> oxp_runtime::server::ConnectionLimits {
    let mut limits = oxp_runtime::server::ConnectionLimits::default();
    configure(&mut limits);
    limits
}

/// Whether the server closed `socket` (EOF or reset) within `wait`; what it sent first is
/// allowed (a 408 or 431 before closing).
async fn closed_within(socket: &mut tokio::net::TcpStream, wait: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buffer = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, socket.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// Connections are bounded in time: 2,000 slowloris clients trickling header lines, and idle
/// keep-alive sockets, are closed after the header timeout, and `/health` answers in time while
/// they are open: without a timeout they would stay open indefinitely, until the file limit
/// left `/health` unanswered for everyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_and_idle_connections_are_closed_and_health_keeps_answering() {
    let _turn = HEAVY.lock().await;
    use tokio::io::AsyncWriteExt;
    let server = server().connection_limits(limits(|l| {
        l.header_timeout = Duration::from_millis(800);
        l.max_connections = Some(4_000);
    }));
    let base = served(server).await;
    let addr = base.trim_start_matches("http://").to_owned();
    let mut sockets = Vec::new();
    for _ in 0..2_000 {
        let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
        socket
            .write_all(format!("GET /health HTTP/1.1\r\nhost: {addr}\r\n").as_bytes())
            .await
            .unwrap();
        sockets.push(socket);
    }
    // Trickle a header line on each, as slowloris does, while /health is asked.
    for socket in &mut sockets {
        let _ = socket.write_all(b"x-slow: 1\r\n").await;
    }
    let health = reqwest::Client::new()
        .get(format!("{base}/health"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .expect("/health answers while 2,000 slowloris connections are open");
    assert_eq!(health.status(), 200);
    // The header timeout closes them all, trickling or not.
    let mut closed = 0;
    for socket in &mut sockets {
        if closed_within(socket, Duration::from_secs(3)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, 2_000, "every slowloris connection was closed");
    // An idle keep-alive connection after an answered request is closed too.
    let mut idle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    idle.write_all(format!("GET /health HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    assert!(
        closed_within(&mut idle, Duration::from_secs(3)).await,
        "idle keep-alive closed"
    );
}

/// A cap on open connections: over it, a connection is closed at once (not queued in the
/// backlog), and places come back as connections close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_are_closed_at_once() {
    let _turn = HEAVY.lock().await;
    let server = server().connection_limits(limits(|l| {
        l.header_timeout = Duration::from_millis(600);
        l.max_connections = Some(20);
    }));
    let base = served(server).await;
    let addr = base.trim_start_matches("http://").to_owned();
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut over = tokio::net::TcpStream::connect(&addr).await.unwrap();
    assert!(
        closed_within(&mut over, Duration::from_millis(400)).await,
        "closed at once"
    );
    // The held ones time out; then the server answers again.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let answer = raw(
        &base,
        format!("GET /health HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes(),
        Duration::from_secs(2),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(held);
}

/// A request head over the cap is a 431 and costs no more than the cap: 300 connections each
/// sending 400 KB of unfinished headers leave RSS nearly where it was (hyper's default buffer
/// would hold 400 KB for each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_headers_are_a_431_and_cost_little_memory() {
    let _turn = HEAVY.lock().await;
    use tokio::io::AsyncWriteExt;
    let base = served(server()).await;
    let addr = base.trim_start_matches("http://").to_owned();
    let before = rss();
    let line = format!("x-big: {}\r\n", "y".repeat(1000));
    let mut sockets = Vec::new();
    let mut answered_431 = 0;
    for _ in 0..300 {
        let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let _ = socket
            .write_all(format!("GET /health HTTP/1.1\r\nhost: {addr}\r\n").as_bytes())
            .await;
        for _ in 0..400 {
            if socket.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
        sockets.push(socket);
    }
    for socket in &mut sockets {
        use tokio::io::AsyncReadExt;
        let mut answer = vec![0; 64];
        let read = tokio::time::timeout(Duration::from_secs(2), socket.read(&mut answer)).await;
        if let Ok(Ok(n)) = read
            && String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 431")
        {
            answered_431 += 1;
        }
    }
    assert!(answered_431 >= 290, "{answered_431} of 300 got a 431");
    if let (Some(before), Some(after)) = (before, rss()) {
        let grown = after.saturating_sub(before) / (1024 * 1024);
        eprintln!("RSS grew {grown} MB for 300 × 400 KB of headers");
        assert!(grown < 60, "RSS grew {grown} MB");
    }
}

/// Results are bounded: one over `max_result_bytes` is a `success: false` tool error saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_cap_is_a_tool_error() {
    let pipeline = harness::pipeline().max_result_bytes(100_000);
    let oxp = Oxp::start(Server::from_pipeline(pipeline)).await;
    let small = oxp
        .call(json!({"tool_id": "Util.BigText", "input": {"n": 10_000}}))
        .await;
    assert_eq!(small.body["success"], true);
    let big = oxp
        .call(json!({"tool_id": "Util.BigText", "input": {"n": 1_000_000}}))
        .await;
    assert_eq!(big.status, 200);
    assert_eq!(big.body["success"], false);
    assert_eq!(
        big.body["error"]["message"],
        "The tool's result is too large to send."
    );
}

/// Ids that would forge log lines or drive a terminal (CR/LF, ESC), and absurdly long ones, are
/// refused with a 400 that does not echo them; the request is not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_and_huge_ids_are_refused() {
    let oxp = Oxp::start(server()).await;
    for (field, value) in [
        (
            "tool_id",
            "Calculator.Add\r\n2026-01-01T00:00:00Z INFO forged".to_owned(),
        ),
        ("call_id", "c1\u{1b}[31mred".to_owned()),
        ("call_id", "c".repeat(1_000_000)),
        ("trace_id", "t\nforged".to_owned()),
    ] {
        let mut body = json!({"tool_id": "Once.Record", "call_id": "ids-1", "input": {"ms": 0}});
        body[field] = json!(value);
        let reply = oxp.call(body).await;
        assert_eq!(reply.status, 400, "{field}");
        let text = reply.body.to_string();
        assert!(
            !text.contains("forged") && !text.contains("red") && text.len() < 1_000,
            "{text}"
        );
    }
    assert_eq!(oxp_tests::runs("ids-1"), 0);
}

/// A key twice in one object is a 400, whichever object it is in (`tool_id` twice ran the
/// second tool before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_json_keys_are_refused() {
    let oxp = Oxp::start(server()).await;
    for body in [
        r#"{"tool_id": "Calculator.Add", "tool_id": "Once.Record", "input": {"ms": 0}, "call_id": "dup-1"}"#,
        r#"{"$schema": "urn:oxp:1.0", "request": {"tool_id": "Calculator.Add", "call_id": "dup-1", "input": {"a": 1, "b": 2, "a": 5}}}"#,
        r#"{"request": {"tool_id": "Once.Record", "call_id": "dup-1", "input": {"ms": 0}, "context": {"user_id": "a", "user_id": "b"}}}"#,
        // The envelope's own keys, ones OXP does not define, and deep in the input.
        r#"{"$schema": "urn:oxp:1.0", "$schema": "urn:oxp:1.0", "request": {"tool_id": "Once.Record", "call_id": "dup-1", "input": {"ms": 0}}}"#,
        r#"{"note": 1, "request": {"tool_id": "Once.Record", "call_id": "dup-1", "input": {"ms": 0}}, "note": 2}"#,
        r#"{"request": {"tool_id": "Once.Record", "call_id": "dup-1", "input": {"ms": 0, "tags": [{"k": 1, "k": 2}]}}}"#,
        r#"{"request": {"tool_id": "Once.Record", "call_id": "dup-1", "input": {"ms": 0}, "context": {"secrets": [{"id": "A", "value": "x", "id": "B"}]}}}"#,
        r#"{"request": {"tool_id": "Once.Record", "call_id": "dup-1", "input": {"ms": 0}, "context": {"extra": 1, "extra": 2}}}"#,
    ] {
        let reply = oxp
            .call_with(
                oxp.request(reqwest::Method::POST, "/tools/call")
                    .header("content-type", "application/json")
                    .body(body),
            )
            .await;
        assert_eq!(reply.status, 400, "{body}");
        assert!(
            reply.body["message"].as_str().unwrap().contains("twice"),
            "{:?}",
            reply.body
        );
    }
    assert_eq!(oxp_tests::runs("dup-1"), 0);
}

/// Error messages never echo a value from `context`: a malformed context's 400, and a 422 that
/// would quote a secret pasted into the wrong parameter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_never_echo_context_values() {
    let oxp = Oxp::start(server()).await;
    let secret = "sk-live-0123456789-very-secret";
    let malformed = oxp
        .call(json!({"tool_id": "SMS.Send", "input": {}, "context": {"secrets": secret}}))
        .await;
    assert_eq!(malformed.status, 400);
    assert!(
        !malformed.body.to_string().contains(secret),
        "{:?}",
        malformed.body
    );
    // Counter.Bump takes an integer and requires COUNTER_KEY.
    let pasted = oxp
        .call(json!({"tool_id": "Counter.Bump", "input": {"by": secret},
                     "context": {"secrets": [{"id": "COUNTER_KEY", "value": secret}]}}))
        .await;
    assert_eq!(pasted.status, 422, "{:?}", pasted.body);
    assert!(
        !pasted.body.to_string().contains(secret),
        "{:?}",
        pasted.body
    );
}

/// An empty string is no secret: a tool that requires one is refused, not run with "".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_secret_does_not_satisfy_a_requirement() {
    let oxp = Oxp::start(server()).await;
    let reply = oxp
        .call(
            json!({"tool_id": "SMS.Send", "input": {"to": "+1", "body": "hi"},
                     "context": {"secrets": [{"id": "TWILIO_API_KEY", "value": ""}]}}),
        )
        .await;
    assert_eq!(reply.status, 400, "{:?}", reply.body);
    assert_eq!(
        reply.body["missing_requirements"]["secrets"],
        json!(["TWILIO_API_KEY"])
    );
}

/// A server with tools that need authorization and no provider to mint challenges still says,
/// in a field a program reads, which providers' tokens are missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_providers_are_listed_without_an_authorization_provider() {
    let oxp = Oxp::start(server()).await;
    let reply = oxp
        .call(json!({"tool_id": "Gmail.GetEmails", "input": {}, "context": {"user_id": "ada"}}))
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body["missing_requirements"]["authorization_providers"],
        json!(["google"])
    );
}

/// Absurd configuration is a clear error and exit 2 naming the variable, never a panic deep in
/// the runtime (tokio's semaphore panics above its `MAX_PERMITS`, which a huge
/// `OXP_MAX_BLOCKING_TOOLS` would ask for).
#[test]
fn absurd_configuration_exits_2_naming_the_variable() {
    for (variable, value) in [
        ("OXP_MAX_BLOCKING_TOOLS", "9223372036854775807"),
        ("OXP_IDEMPOTENCY_TTL_MS", "18446744073709551615"),
        ("OXP_TOOL_TIMEOUT_MS", "99999999999999999"),
        ("OXP_MAX_HEADER_BYTES", "10"),
        ("OXP_MAX_CONNECTIONS", "0"),
        ("OXP_MCP_SINGLE_TENANT", "maybe"),
        ("OXP_TOOLS", " , "),
        ("OXP_TOOLS", "Nothing.Here"),
        ("OXP_STATE_KEY", "short"),
        ("OXP_MCP_MAX_SESSIONS", "10"),
    ] {
        let output = std::process::Command::new(harness::example_binary())
            .env("OXP_ADDR", "127.0.0.1:0")
            .env(variable, value)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{variable}={value}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(variable), "{variable}: {stderr}");
        assert!(!stderr.contains("panicked"), "{variable}: {stderr}");
    }
}

/// Client text never reaches the log raw: a `tool_id` with CR/LF cannot forge a log line, and an
/// ESC sequence in a `call_id` or a path never reaches the reader's terminal. Read back from the
/// example's own log, in the human-readable format.
#[test]
fn client_text_never_reaches_the_log_raw() {
    use std::io::{BufRead, BufReader, Write};
    let mut child = std::process::Command::new(harness::example_binary())
        .env("OXP_ADDR", "127.0.0.1:0")
        .env("OXP_LOG_FORMAT", "pretty")
        .env("NO_COLOR", "1")
        .env("OXP_LOG", "debug")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let kept = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).split(b'\n').map_while(Result::ok) {
            let line = String::from_utf8_lossy(&line).into_owned();
            if let Some(at) = line.find("serving OXP 1.0 on http://") {
                let rest = &line[at + "serving OXP 1.0 on http://".len()..];
                let address: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
                let _ = address_tx.send(address);
            }
            kept.lock().unwrap().push(line);
        }
    });
    let address = address_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    let send = |request: String| {
        let mut socket = std::net::TcpStream::connect(&address).unwrap();
        socket.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = std::io::Read::read_to_string(&mut socket, &mut answer);
    };
    let call = |body: serde_json::Value| {
        let body = body.to_string();
        send(format!(
            "POST /tools/call HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ))
    };
    call(
        json!({"tool_id": "Nope\r\n2026-11-23T00:00:00Z  INFO forged: admin logged in", "input": {}}),
    );
    call(
        json!({"tool_id": "Calculator.Add", "call_id": "c\u{1b}[2J\u{1b}[31mred", "input": {"a": 1, "b": 2}}),
    );
    call(json!({"tool_id": "Calculator.Nope\u{7f}", "input": {}}));
    call(json!({"tool_id": "Calculator.Nope \" quoted", "input": {}}));
    send(format!(
        "GET /\u{1b}[31mpath HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\n\r\n"
    ));
    std::thread::sleep(Duration::from_millis(500));
    let _ = child.kill();
    let _ = child.wait();
    let lines = lines.lock().unwrap();
    assert!(
        lines.iter().any(|l| l.contains("call refused")),
        "the refusals were logged: {lines:?}"
    );
    for line in lines.iter() {
        assert!(!line.contains('\u{1b}'), "a raw ESC in the log: {line:?}");
        assert!(
            !line.starts_with("2026-11-23T00:00:00Z"),
            "a forged line: {line:?}"
        );
    }
}

/// A default server speaks HTTP/1.1 alone: a client that opens with HTTP/2's preface (h2c with
/// prior knowledge) has its connection closed at once, not held until the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_preface_to_a_default_server_is_closed_at_once() {
    use tokio::io::AsyncWriteExt;
    let base = served(server()).await;
    let mut socket = tokio::net::TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap();
    socket
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    // The header timeout is 10 s.
    assert!(closed_within(&mut socket, Duration::from_secs(2)).await);
}

/// With the `http2` feature, HTTP/2 (h2c, prior knowledge) is served on the same port, with the
/// stream limit advertised in the server's SETTINGS, and a call on it answered like any other.
/// This package builds the runtime without the feature (every other test runs on a default
/// server), so the server here is `oxp-runtime/examples/accept_loop.rs`, built with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_with_its_feature_serves_calls_under_its_stream_limit() {
    let (mut child, base) = accept_loop_with_http2(&[]);
    let address = base.trim_start_matches("http://").to_owned();

    let socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (client, connection) = h2::client::handshake(socket).await.unwrap();
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let body = br#"{"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}"#;
    let request = http::Request::post(format!("{base}/tools/call"))
        .header("content-type", "application/json")
        .header("host", &address)
        .body(())
        .unwrap();
    let (answer, mut send) = client.send_request(request, false).unwrap();
    send.send_data(bytes::Bytes::from_static(body), true)
        .unwrap();
    let answer = answer.await.unwrap();
    assert_eq!(answer.status(), 200);
    // The server's SETTINGS have arrived with its first answer: the default limit.
    assert_eq!(client.current_max_send_streams(), 64);
    let mut received = answer.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = received.data().await {
        let chunk = chunk.unwrap();
        received
            .flow_control()
            .release_capacity(chunk.len())
            .unwrap();
        text.extend_from_slice(&chunk);
    }
    let _ = child.kill();
    let _ = child.wait();
    let answer: serde_json::Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(answer["value"], 3, "{answer}");
}

/// A connection's bodies in flight are capped as a whole (what bounds HTTP/2's many streams on
/// one connection): over the budget, a body is refused with a 413 even under the per-body cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connections_bodies_in_flight_are_capped() {
    let server = server().connection_limits(limits(|l| l.max_buffered_bytes = 16 * 1024));
    let base = served(server).await;
    let client = reqwest::Client::new();
    let padded = |n: usize| {
        format!(
            r#"{{"tool_id": "Calculator.Add", "input": {{"a": 1, "b": 2}}}}{}"#,
            " ".repeat(n)
        )
    };
    let send = |body: String| {
        client
            .post(format!("{base}/tools/call"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(send(padded(1_000)).await.unwrap().status(), 200);
    let over = send(padded(40_000)).await.unwrap();
    assert_eq!(over.status(), 413);
    // The budget comes back when a body is done with: the connection serves calls again.
    assert_eq!(send(padded(1_000)).await.unwrap().status(), 200);
}

/// 2,000 answers of 100 KB under a byte cap of 20 MB: the store keeps within it (the oldest
/// finished answers go first), and the process's memory shows it: bounded by count alone,
/// 10,000 answers of 1 MB would be 10 GB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_answers_are_bounded_by_bytes() {
    let _turn = HEAVY.lock().await;
    let store =
        oxp_runtime::idempotency::InMemoryIdempotency::new(1_000_000, Duration::from_secs(600))
            .max_bytes(20 * 1024 * 1024);
    let oxp = Oxp::start(Server::from_pipeline(
        harness::pipeline().idempotency(Some(store.clone())),
    ))
    .await;
    let before = rss();
    let calls = (0..2_000).map(|i| {
        let oxp = &oxp;
        async move {
            let reply = oxp
                .call(json!({"tool_id": "Util.BigText", "call_id": format!("big-{i}"), "input": {"n": 100_000}}))
                .await;
            assert_eq!(reply.status, 200);
        }
    });
    // Eight at a time: the point is the store, not the client's memory.
    let mut calls = futures_util::stream::iter(calls).buffer_unordered(8);
    use futures_util::StreamExt;
    while calls.next().await.is_some() {}
    assert!(store.bytes() <= 20 * 1024 * 1024, "{store:?}");
    assert!(store.len() < 400, "{store:?}");
    if let (Some(before), Some(after)) = (before, rss()) {
        let grown = after.saturating_sub(before) / (1024 * 1024);
        eprintln!("RSS grew {grown} MB for 2,000 × 100 KB answers under a 20 MB cap");
        assert!(grown < 120, "RSS grew {grown} MB");
    }
}

/// HTTP/2's windows and keep-alive pings, on a raw socket to a server built with the `http2`
/// feature: its SETTINGS name the per-stream window (256 KiB) and a WINDOW_UPDATE raises the
/// connection's to 1 MiB (the buffers a client may fill unread); and a client that never answers
/// the server's PING is disconnected once the keep-alive timeout passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_windows_and_keep_alive_pings_hold_on_a_real_socket() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut child, base) = accept_loop_with_http2(&[("ACCEPT_LOOP_KEEP_ALIVE_MS", "300")]);
    let address = base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    // The preface and an empty SETTINGS frame; then silence: no ACK, no PING answered.
    socket
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut received = Vec::new();
    let read_all = async {
        let mut chunk = [0u8; 4096];
        loop {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let closed = tokio::time::timeout(Duration::from_secs(10), read_all).await;
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        closed.is_ok(),
        "a client that never answers PING is disconnected"
    );
    // The frames: 3 bytes of length, a type, flags, 4 bytes of stream id, the payload.
    let mut frames = Vec::new();
    let mut rest = &received[..];
    while rest.len() >= 9 {
        let length = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        let (kind, flags) = (rest[3], rest[4]);
        let payload = rest[9..(9 + length).min(rest.len())].to_vec();
        frames.push((kind, flags, payload));
        rest = &rest[(9 + length).min(rest.len())..];
    }
    let settings = frames
        .iter()
        .find(|(kind, flags, _)| *kind == 0x4 && *flags == 0)
        .expect("the server's SETTINGS");
    let initial_window = settings.2.chunks(6).find_map(|setting| {
        (setting.len() == 6 && setting[..2] == [0, 4])
            .then(|| u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]))
    });
    assert_eq!(initial_window, Some(256 * 1024), "{frames:?}");
    let connection_window = frames.iter().find_map(|(kind, _, payload)| {
        (*kind == 0x8 && payload.len() == 4)
            .then(|| u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]))
    });
    assert_eq!(
        connection_window,
        Some(1024 * 1024 - 65_535),
        "the connection window raised to 1 MiB"
    );
    assert!(
        frames
            .iter()
            .any(|(kind, flags, _)| *kind == 0x6 && *flags == 0),
        "the server pinged: {frames:?}"
    );
}

/// `oxp-runtime/examples/accept_loop.rs` built with the `http2` feature (this package leaves it
/// off), serving OXP on a free port with `env`; the process and its base URL.
fn accept_loop_with_http2(env: &[(&str, &str)]) -> (std::process::Child, String) {
    use std::io::BufRead;
    let target = harness::cargo_build(&[
        "-p",
        "oxp-runtime",
        "--example",
        "accept_loop",
        "--features",
        "http2",
    ]);
    let mut child = std::process::Command::new(target.join("debug/examples/accept_loop"))
        .arg("oxp")
        .env("OXP_ADDR", "127.0.0.1:0")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("accept_loop starts");
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    (child, first.trim().to_owned())
}
