//! The end-to-end harness: a server on 127.0.0.1, an HTTP client, and the OXP OpenAPI schemas
//! every response body is validated against.
#![allow(dead_code)] // Each test binary uses its own part of the harness.

pub mod answering;

use std::sync::OnceLock;

use oxp_runtime::server::Server;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;

/// `spec/oxp-1.0-openapi.json` from the OXP repository, vendored with its license, so the suite
/// runs on a machine that has only this repository.
const SPEC: &str = include_str!("../spec/oxp-1.0-openapi.json");

/// The schemas responses are checked against, by JSON pointer into the spec.
pub const LIST_200: &str = "#/paths/~1tools/get/responses/200/content/application~1json/schema";
pub const CALL_200: &str =
    "#/paths/~1tools~1call/post/responses/200/content/application~1json/schema";
pub const CALL_RESPONSE: &str = "#/components/schemas/CallToolResponse";
pub const SERVER_ERROR: &str = "#/components/schemas/ServerErrorResponse";
pub const VALIDATION_ERROR: &str = "#/components/schemas/ValidationErrorResponse";
pub const TOOL_DEFINITION: &str = "#/components/schemas/ToolDefinition";

fn spec() -> &'static Value {
    static SPEC_VALUE: OnceLock<Value> = OnceLock::new();
    SPEC_VALUE.get_or_init(|| {
        let mut spec: Value = serde_json::from_str(SPEC).expect("the vendored spec is JSON");
        // The spec's known bug (`tests/spec/oxp-notes.md` §2): `CallToolResponse` is closed at the
        // top while `value` and `error` are declared only inside its `oneOf`, so a strict
        // validator rejects every response that has either. Declaring them at the top as well
        // makes the allowed keys {call_id, duration, success, value, error}, as intended; the
        // `oneOf` still checks their types and that exactly one applies.
        let properties = &mut spec["components"]["schemas"]["CallToolResponse"]["properties"];
        properties["value"] = Value::Bool(true);
        properties["error"] = Value::Bool(true);
        spec
    })
}

/// Validates `body` against the schema at `pointer`; panics with every error found.
pub fn assert_valid(pointer: &str, body: &Value) {
    let mut root = spec().clone();
    root["$ref"] = Value::String(pointer.to_owned());
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&root)
        .unwrap_or_else(|e| panic!("schema {pointer}: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "body does not match {pointer}:\n  {}\nbody: {body}",
        errors.join("\n  ")
    );
}

/// A server under test, on an ephemeral loopback port, stopped when dropped.
pub struct Oxp {
    pub base: String,
    client: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Oxp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One answer: status, headers, and the body parsed as JSON (`Null` when empty).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Oxp {
    /// Serves `server` as `serve()` does, through its own accept loop (its connection limits,
    /// and the lingering close that lets a 413 sent before the body is read reach the client).
    pub async fn start(server: Server) -> Oxp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let forever = std::future::pending();
            server
                .serve(listener, forever, std::time::Duration::from_secs(1))
                .await
                .unwrap();
        });
        Oxp {
            base,
            client: reqwest::Client::new(),
            task,
        }
    }

    /// Serves a bare router with `axum::serve` (benchmarks compare routers, not accept loops).
    #[allow(dead_code)] // not every test binary serves a bare router
    pub async fn start_router(router: axum::Router) -> Oxp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Oxp {
            base,
            client: reqwest::Client::new(),
            task,
        }
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.base))
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!("a non-JSON body ({e}): {}", String::from_utf8_lossy(&bytes))
            })
        };
        // Every answer carries OXP-Version (oxp-notes §1 G.9, §3.6).
        assert_eq!(
            headers.get("oxp-version").and_then(|v| v.to_str().ok()),
            Some("1.0"),
            "OXP-Version header on {status}"
        );
        Reply {
            status,
            headers,
            body,
        }
    }

    /// Sends a call on a raw socket and hangs up without reading the answer, as a client that
    /// dies mid-call does; returns once the request is written (after `linger`).
    pub async fn call_and_hang_up(&self, body: &serde_json::Value, linger: std::time::Duration) {
        use tokio::io::AsyncWriteExt;
        let body = body.to_string();
        let addr = self.base.trim_start_matches("http://");
        let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "POST /tools/call HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(request.as_bytes()).await.unwrap();
        tokio::time::sleep(linger).await;
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    /// `GET /tools`, its 200 body validated.
    pub async fn list(&self, request: reqwest::RequestBuilder) -> Reply {
        let reply = self.send(request).await;
        if reply.status == StatusCode::OK && reply.body.is_object() {
            assert_valid(LIST_200, &reply.body);
        }
        reply
    }

    /// `POST /tools/call` with a JSON body, the answer validated by its status.
    pub async fn call(&self, body: Value) -> Reply {
        self.call_with(
            self.request(reqwest::Method::POST, "/tools/call")
                .json(&body),
        )
        .await
    }

    /// An envelope call: `{"$schema": "urn:oxp:1.0", "request": request}`.
    pub async fn call_request(&self, request: Value) -> Reply {
        self.call(serde_json::json!({"$schema": "urn:oxp:1.0", "request": request}))
            .await
    }

    /// Any `POST /tools/call`, the answer validated by its status and dialect.
    pub async fn call_with(&self, request: reqwest::RequestBuilder) -> Reply {
        let reply = self.send(request).await;
        check_call_reply(&reply);
        reply
    }
}

/// Validates a call's answer against the schema its status has in the spec.
pub fn check_call_reply(reply: &Reply) {
    match reply.status.as_u16() {
        200 if reply.body.get("result").is_some() => assert_valid(CALL_200, &reply.body),
        200 => assert_valid(CALL_RESPONSE, &reply.body),
        400 | 403 | 413 => assert_valid(SERVER_ERROR, &reply.body),
        422 => assert_valid(VALIDATION_ERROR, &reply.body),
        401 => assert!(reply.body["message"].is_string(), "{:?}", reply.body),
        other => panic!("unexpected status {other}: {}", reply.body),
    }
}

/// How long [`bounded`] lets one step of a test run: far past anything a step takes on a loaded
/// 2-core machine, and far short of CI's own limit.
pub const HANG: std::time::Duration = std::time::Duration::from_secs(120);

/// Awaits `step`, failing the test with `what` if it has not finished within [`HANG`]. Not a
/// timed assertion: it turns a hang (a peer, or the server, that never answers) into a failure
/// that names the step, with the end of the process's log when one is captured ([`Log`]),
/// instead of holding the whole run until CI gives up on it.
pub async fn bounded<T>(what: &str, step: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(HANG, step).await {
        Ok(value) => value,
        Err(_) => {
            let tail = LOG.get().map(Log::text).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(60).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "{what}: not finished after {} s (a hang); the log's last lines:\n{}",
                HANG.as_secs(),
                tail.join("\n")
            )
        }
    }
}

/// Whether a test that needs an outside program may skip: not under `OXP_REQUIRE_ALL_TESTS=1`.
pub fn skip(what: &str) {
    let message = format!("SKIPPED: needs {what}");
    if std::env::var("OXP_REQUIRE_ALL_TESTS").as_deref() == Ok("1") {
        panic!("{message} (OXP_REQUIRE_ALL_TESTS=1 forbids skipping)");
    }
    // Straight to the process's stderr: libtest captures `println!`/`eprintln!`, and a skip
    // must be seen even when the test passes.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// The example server, built and run as `cargo run` would, on a free loopback port.
pub struct Example {
    pub child: std::process::Child,
    pub base: String,
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The example's binary, built as `cargo run` would. Built together with this package, so
/// cargo unifies features as the test build did and finds the binary up to date.
pub fn example_binary() -> String {
    cargo_build(&["-p", "calculator", "-p", "oxp-tests"])
        .join("debug/calculator")
        .display()
        .to_string()
}

/// `cargo build --quiet` of `args` in the workspace; the target directory it built into.
pub fn cargo_build(args: &[&str]) -> std::path::PathBuf {
    let workspace = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let built = std::process::Command::new(env!("CARGO"))
        .args(["build", "--quiet"])
        .args(args)
        .current_dir(workspace)
        .status()
        .expect("cargo runs");
    assert!(built.success(), "cargo build {args:?}");
    // Where cargo put it: `CARGO_TARGET_DIR` (relative to the workspace) when set.
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => std::path::Path::new(workspace).join(dir),
        None => std::path::Path::new(workspace).join("target"),
    }
}

pub fn start_example(env: &[(&str, &str)]) -> Example {
    start_server(&example_binary(), env)
}

/// `oxp-runtime/examples/<name>.rs`, built with the features this package turns on (so that a
/// test may give it `OXP_REDIS_URL`, say); its path.
pub fn test_example_binary(name: &str) -> String {
    cargo_build(&[
        "-p",
        "calculator",
        "-p",
        "oxp-tests",
        "-p",
        "oxp-runtime",
        "--example",
        name,
    ])
    .join("debug/examples")
    .join(name)
    .display()
    .to_string()
}

/// The server `binary` (one that calls `oxp_runtime::serve()`), on a free loopback port with
/// `env`.
pub fn start_server(binary: &str, env: &[(&str, &str)]) -> Example {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(binary)
        .env("OXP_ADDR", "127.0.0.1:0")
        .env("OXP_LOG_FORMAT", "json")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the server starts");
    // `serve()` logs the address it serves; read it from the first lines.
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        let line = lines.next().expect("the server logs its address").unwrap();
        if let Some(at) = line.find("serving OXP 1.0 on ") {
            let rest = &line[at + "serving OXP 1.0 on ".len()..];
            break rest.split(['"', ' ']).next().unwrap().to_owned();
        }
    };
    // Keep draining the log so the server never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Example { child, base }
}

/// The process's log, once a test has asked for it.
static LOG: OnceLock<Log> = OnceLock::new();

/// The log of this test process, captured at TRACE from the first call on: a test that says
/// something "stays in the log" reads it here, and one that waits for something the server
/// logs waits on it here.
#[derive(Clone, Default)]
pub struct Log(std::sync::Arc<(std::sync::Mutex<Vec<u8>>, std::sync::Condvar)>);

impl std::io::Write for Log {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let (text, written) = &*self.0;
        text.lock().unwrap().extend_from_slice(bytes);
        written.notify_all();
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    /// The process's log (installing the capturing subscriber on first use).
    pub fn captured() -> &'static Log {
        LOG.get_or_init(|| {
            let log = Log::default();
            let writer = log.clone();
            tracing_subscriber::fmt()
                .with_max_level(tracing_subscriber::filter::LevelFilter::TRACE)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .init();
            oxp_runtime::call::install_panic_hook();
            log
        })
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.0.lock().unwrap()).into_owned()
    }

    /// Waits (on a blocking thread) until the log holds `marker`: woken by each write, with
    /// no clock. `false` if a minute passes first, so that a test whose event never comes
    /// fails instead of hanging.
    #[allow(dead_code)] // not every test binary waits on its log
    pub async fn wait_for(&'static self, marker: String) -> bool {
        self.wait_for_times(marker, 1).await
    }

    /// [`wait_for`](Self::wait_for) until the log holds `marker` `times` times.
    #[allow(dead_code)] // not every test binary waits on its log
    pub async fn wait_for_times(&'static self, marker: String, times: usize) -> bool {
        tokio::task::spawn_blocking(move || {
            let (text, written) = &*self.0;
            let mut searched = 0usize;
            let mut found = 0usize;
            let mut guard = text.lock().unwrap();
            loop {
                // Only what came since the last look (and a marker's length before it, which
                // holds no whole marker already counted).
                let from = searched.saturating_sub(marker.len() - 1);
                found += guard[from..]
                    .windows(marker.len())
                    .filter(|window| *window == marker.as_bytes())
                    .count();
                if found >= times {
                    return true;
                }
                searched = guard.len();
                let (next, timeout) = written
                    .wait_timeout(guard, std::time::Duration::from_secs(60))
                    .unwrap();
                if timeout.timed_out() {
                    return false;
                }
                guard = next;
            }
        })
        .await
        .unwrap()
    }
}

/// A pipeline over every fixture tool, to configure (limits, idempotency, authorization) before
/// a server is made from it.
pub fn pipeline() -> oxp_runtime::call::Pipeline {
    oxp_runtime::call::Pipeline::new(oxp_tests::all_tools().build().unwrap())
}

/// An MCP request of the 2026-07-28 revision to `/mcp`: no session, the revision and the
/// client's description on each request (SEP-2243 headers, `_meta` keys). The answer is an SSE
/// stream — its events' JSON, notifications first, the result last — or one JSON error.
#[allow(dead_code)] // not every test binary speaks MCP
pub async fn mcp_2026_events(oxp: &Oxp, method: &str, params: Value) -> Vec<Value> {
    let mut params = params;
    let meta = params["_meta"].take();
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "revision-2026", "version": "1.0.0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    if let Value::Object(extra) = meta {
        params["_meta"].as_object_mut().unwrap().extend(extra);
    }
    let mut request = oxp
        .request(reqwest::Method::POST, "/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        request = request.header("mcp-name", name);
    }
    let body = request
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // An error the transport answers itself comes as one JSON body, not a stream.
    if body.starts_with('{') {
        return vec![serde_json::from_str(&body).unwrap()];
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| !data.is_empty())
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// The result of an MCP request of the 2026-07-28 revision (see [`mcp_2026_events`]).
#[allow(dead_code)]
pub async fn mcp_2026(oxp: &Oxp, method: &str, params: Value) -> Value {
    let events = mcp_2026_events(oxp, method, params).await;
    let last = events
        .last()
        .unwrap_or_else(|| panic!("no answer to {method}"));
    last["result"].clone()
}

/// The JSON-RPC messages of an MCP answer: an SSE stream's `data:` events, or one JSON body.
pub fn mcp_messages(content_type: &str, body: &str) -> Vec<Value> {
    if content_type.starts_with("text/event-stream") {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    } else {
        vec![serde_json::from_str(body).expect("a JSON answer")]
    }
}

/// A `redis-server` of our own on a free loopback port, stopped on drop.
pub struct RedisServer(pub std::process::Child, pub String);

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start_redis() -> Option<RedisServer> {
    if std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        skip("redis-server (Debian package `redis-server`)");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "redis-server listens"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Some(RedisServer(child, format!("redis://127.0.0.1:{port}")))
}
