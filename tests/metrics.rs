//! `GET /metrics` (issue 17): a mix of calls on every front — OXP over HTTP, MCP over HTTP, the
//! providers' dispatcher — then a scrape parsed by the Prometheus project's own Python parser
//! (`prometheus_client`'s OpenMetrics parser: a real parser, not a regex), its counts checked
//! against the calls made; the auth rule, the separate listener (`OXP_METRICS_ADDR`, in the
//! example's real process), `OXP_METRICS=false`, and labels that stay bounded whatever a
//! hostile client sends.
//!
//! The parser is `$OXP_TEST_PYTHON` with `prometheus_client` (`.ci/run` installs it); without
//! it, the tests that parse print `SKIPPED: needs …` (a failure under `OXP_REQUIRE_ALL_TESTS=1`).

#[path = "harness/mod.rs"]
mod harness;

use std::collections::BTreeMap;
use std::process::Command;

use harness::Oxp;
use oxp_runtime::MetricsText;
use oxp_runtime::call::Pipeline;
use oxp_runtime::mcp::McpServer;
use oxp_runtime::providers::{Dispatcher, ToolCall};
use oxp_runtime::server::{Server, ServerAuth};
use serde_json::{Value, json};

const API_KEY: &str = "k_metrics_test_0123456789abcdef";

fn python() -> String {
    std::env::var("OXP_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// A scrape as the Python parser read it.
struct Scrape {
    families: BTreeMap<String, String>,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Scrape {
    /// The values of the samples `name` whose labels include every pair of `labels`.
    fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = f64> + 'a {
        self.samples
            .iter()
            .filter(move |(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, v)| *v)
    }

    /// The value of the one sample `name` with `labels` (0 when there is none: a series not
    /// yet made counts nothing).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found: Vec<f64> = self.matching(name, labels).collect();
        assert!(found.len() <= 1, "{name} {labels:?} matches {found:?}");
        found.first().copied().unwrap_or(0.0)
    }

    /// The sum of every sample `name` whose labels include `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).sum()
    }
}

/// Parses `text` with `prometheus_client`'s OpenMetrics parser; `None` (after the skip line)
/// when the parser is not installed.
fn parse(text: &str) -> Option<Scrape> {
    let found = Command::new(python())
        .args(["-c", "import prometheus_client.openmetrics.parser"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        harness::skip(
            "Python with prometheus_client (`pip install prometheus_client`, then set OXP_TEST_PYTHON)",
        );
        return None;
    }
    // Tests run at once in this process: each scrape has a file of its own.
    static SCRAPES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SCRAPES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("oxp-metrics-{}-{n}.txt", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/parse_metrics.py");
    let output = Command::new(python())
        .arg(script)
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(
        output.status.success(),
        "the parser refused the scrape: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    let parsed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let families = serde_json::from_value(parsed["families"].clone()).unwrap();
    let samples = parsed["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s[0].as_str().unwrap().to_owned(),
                serde_json::from_value(s[1].clone()).unwrap(),
                s[2].as_f64().unwrap(),
            )
        })
        .collect();
    Some(Scrape { families, samples })
}

/// The scrape's text, checked for the content type Prometheus negotiates.
async fn scrape_text(oxp: &Oxp, key: Option<&str>) -> (reqwest::StatusCode, String) {
    let mut request = oxp.request(reqwest::Method::GET, "/metrics");
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    if status == 200 {
        assert_eq!(
            response.headers()["content-type"],
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
    }
    (status, response.text().await.unwrap())
}

/// OXP, MCP and the dispatcher over one pipeline, on one port without authentication.
async fn everything(pipeline: Pipeline) -> Oxp {
    let mcp = McpServer::new(pipeline.clone()).into_router();
    Oxp::start(
        Server::from_pipeline(pipeline)
            .max_body_bytes(4096)
            .nest("/mcp", mcp),
    )
    .await
}

#[tokio::test]
async fn a_scrape_counts_every_call_on_every_front_by_tool_and_outcome() {
    let pipeline = harness::pipeline();
    let oxp = everything(pipeline.clone()).await;
    let add = |a: Value| json!({"tool_id": "Calculator.Add", "input": {"a": a, "b": 2}});

    // OXP: one of each outcome.
    assert_eq!(oxp.call(add(json!(1))).await.status, 200);
    let mut once = add(json!(1));
    once["call_id"] = json!("metrics-once");
    assert_eq!(oxp.call(once.clone()).await.status, 200); // fresh
    assert_eq!(oxp.call(once.clone()).await.status, 200); // replayed
    once["input"]["a"] = json!(5);
    assert_eq!(oxp.call(once).await.status, 400); // conflict
    assert_eq!(oxp.call(add(json!("one"))).await.status, 422);
    let ring = json!({"tool_id": "Doorbell.Ring", "input": {"doorbell_id": "d1"}});
    assert_eq!(oxp.call(ring).await.body["success"], false);
    let panic = json!({"tool_id": "Util.Panic"});
    assert_eq!(oxp.call(panic).await.body["success"], false);
    let slow = json!({"tool_id": "Util.Slow"});
    assert_eq!(oxp.call(slow).await.body["success"], false);
    let sms = json!({"tool_id": "SMS.Send", "input": {"to": "+1555", "body": "hi"}});
    assert_eq!(oxp.call(sms).await.status, 400);
    assert_eq!(
        oxp.call(json!({"tool_id": "Nope.Nothing"})).await.status,
        400
    );
    let forged = json!({"tool_id": "Calculator.Add", "call_id": "a\nb", "input": {"a": 1, "b": 2}});
    assert_eq!(oxp.call(forged).await.status, 400);
    // Two calls with one call_id at once: the second waits for the first's run.
    let sleep = json!({"tool_id": "Util.Sleep", "call_id": "metrics-wait", "input": {"ms": 300}});
    let (first, second) = tokio::join!(oxp.call(sleep.clone()), async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        oxp.call(sleep.clone()).await
    });
    assert_eq!((first.status.as_u16(), second.status.as_u16()), (200, 200));
    // Refused at the door: a foreign origin, a body over the limit.
    let foreign = oxp
        .request(reqwest::Method::POST, "/tools/call")
        .header("origin", "https://evil.example")
        .json(&add(json!(1)));
    assert_eq!(oxp.send(foreign).await.status, 403);
    let big = oxp
        .request(reqwest::Method::POST, "/tools/call")
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"tool_id": "Calculator.Add", "pad": "{}"}}"#,
            "x".repeat(8000)
        ));
    assert_eq!(oxp.send(big).await.status, 413);

    // MCP: a success and a panic.
    let result = harness::mcp_2026(
        &oxp,
        "tools/call",
        json!({"name": "Calculator_Add", "arguments": {"a": 1, "b": 2}}),
    )
    .await;
    assert_eq!(result["isError"], false, "{result}");
    let result = harness::mcp_2026(&oxp, "tools/call", json!({"name": "Util_Panic"})).await;
    assert_eq!(result["isError"], true, "{result}");

    // The dispatcher: two successes in one model turn.
    let calls = (1..=2)
        .map(|i| ToolCall {
            id: format!("call_{i}"),
            name: "Calculator_Add".into(),
            arguments: Ok(json!({"a": i, "b": 2})),
        })
        .collect();
    let results = Dispatcher::new(pipeline.clone()).run(calls).await.unwrap();
    assert!(results.iter().all(|r| !r.is_error), "{results:?}");

    let (status, text) = scrape_text(&oxp, None).await;
    assert_eq!(status, 200, "{text}");
    let Some(scrape) = parse(&text) else { return };

    let types: BTreeMap<&str, &str> = [
        ("oxp_calls", "counter"),
        ("oxp_call_duration_seconds", "histogram"),
        ("oxp_calls_in_flight", "gauge"),
        ("oxp_blocking_tools_in_use", "gauge"),
        ("oxp_refusals", "counter"),
        ("oxp_idempotency", "counter"),
        ("oxp_idempotency_store_entries", "gauge"),
        ("oxp_idempotency_store_bytes", "gauge"),
        ("oxp_build", "info"),
    ]
    .into();
    for (family, kind) in types {
        assert_eq!(
            scrape.families.get(family).map(String::as_str),
            Some(kind),
            "{family}"
        );
    }

    let calls = |front: &str, tool: &str, outcome: &str| {
        scrape.value(
            "oxp_calls_total",
            &[("front", front), ("tool", tool), ("outcome", outcome)],
        )
    };
    let add_id = "Calculator.Add@1.0.0";
    assert_eq!(
        calls("oxp", add_id, "success"),
        3.0,
        "plain, fresh, replayed"
    );
    assert_eq!(calls("oxp", add_id, "refused"), 1.0, "the reused call_id");
    assert_eq!(calls("oxp", add_id, "invalid_input"), 1.0);
    assert_eq!(calls("oxp", "Doorbell.Ring@0.1.0", "tool_error"), 1.0);
    assert_eq!(calls("oxp", "Util.Panic@1.0.0", "panic"), 1.0);
    assert_eq!(calls("oxp", "Util.Slow@1.0.0", "timeout"), 1.0);
    assert_eq!(calls("oxp", "SMS.Send@0.1.2", "missing_requirements"), 1.0);
    assert_eq!(calls("oxp", "none", "unknown_tool"), 1.0);
    assert_eq!(calls("oxp", "none", "refused"), 1.0, "the forged call_id");
    assert_eq!(calls("oxp", "Util.Sleep@1.0.0", "success"), 2.0);
    assert_eq!(calls("mcp", add_id, "success"), 1.0);
    assert_eq!(calls("mcp", "Util.Panic@1.0.0", "panic"), 1.0);
    assert_eq!(calls("dispatch", add_id, "success"), 2.0);
    assert_eq!(
        scrape.sum("oxp_calls_total", &[]),
        17.0,
        "every call counted once"
    );

    // Each call is in its histogram too, under the same labels.
    let histogram_count = scrape.value(
        "oxp_call_duration_seconds_count",
        &[
            ("front", "oxp"),
            ("tool", "Util.Slow@1.0.0"),
            ("outcome", "timeout"),
        ],
    );
    assert_eq!(histogram_count, 1.0);
    let within_60s = scrape.value(
        "oxp_call_duration_seconds_bucket",
        &[
            ("front", "oxp"),
            ("tool", "Util.Slow@1.0.0"),
            ("outcome", "timeout"),
            ("le", "60.0"),
        ],
    );
    let under_50ms = scrape.value(
        "oxp_call_duration_seconds_bucket",
        &[
            ("front", "oxp"),
            ("tool", "Util.Slow@1.0.0"),
            ("outcome", "timeout"),
            ("le", "0.025"),
        ],
    );
    assert_eq!(
        (within_60s, under_50ms),
        (1.0, 0.0),
        "the 50 ms time limit, timed"
    );
    assert_eq!(scrape.sum("oxp_call_duration_seconds_count", &[]), 17.0);

    let idempotency = |result: &str| scrape.value("oxp_idempotency_total", &[("result", result)]);
    // The dispatcher's calls carry the model's ids as call_ids.
    assert_eq!(
        idempotency("fresh"),
        4.0,
        "metrics-once, metrics-wait, call_1, call_2"
    );
    assert_eq!(idempotency("replayed"), 1.0);
    assert_eq!(idempotency("waited"), 1.0);
    assert_eq!(idempotency("conflict"), 1.0);
    assert_eq!(scrape.value("oxp_idempotency_store_entries", &[]), 4.0);
    assert!(scrape.value("oxp_idempotency_store_bytes", &[]) > 0.0);

    let refusals = |reason: &str| scrape.value("oxp_refusals_total", &[("reason", reason)]);
    assert_eq!(refusals("origin"), 1.0);
    assert_eq!(refusals("body_size"), 1.0);
    assert_eq!(refusals("invalid_ids"), 1.0);
    assert_eq!(refusals("reused_call_id"), 1.0);
    assert_eq!(refusals("auth"), 0.0);

    for front in ["oxp", "mcp", "dispatch"] {
        assert_eq!(
            scrape.value("oxp_calls_in_flight", &[("front", front)]),
            0.0
        );
    }
    assert_eq!(scrape.value("oxp_blocking_tools_in_use", &[]), 0.0);
    let build: Vec<_> = scrape
        .samples
        .iter()
        .filter(|(n, _, _)| n == "oxp_build_info")
        .collect();
    assert_eq!(build.len(), 1);
    let (_, labels, value) = build[0];
    assert_eq!(*value, 1.0);
    assert_eq!(
        labels["version"].split('.').count(),
        3,
        "the runtime's version: {labels:?}"
    );
}

#[tokio::test]
async fn calls_in_flight_and_blocking_threads_are_seen_while_they_run() {
    let pipeline = harness::pipeline();
    let oxp = everything(pipeline.clone()).await;
    let sleeping = json!({"tool_id": "Util.Sleep", "input": {"ms": 600}});
    let blocking = json!({"tool_id": "Util.Block", "input": {"ms": 150}});
    let calls = async { tokio::join!(oxp.call(sleeping.clone()), oxp.call(blocking.clone())) };
    let scrape = async {
        tokio::time::sleep(std::time::Duration::from_millis(80)).await;
        scrape_text(&oxp, None).await
    };
    let (_, (status, text)) = tokio::join!(calls, scrape);
    assert_eq!(status, 200);
    let Some(scrape) = parse(&text) else { return };
    assert_eq!(
        scrape.value("oxp_calls_in_flight", &[("front", "oxp")]),
        2.0,
        "{text}"
    );
    assert_eq!(
        scrape.value("oxp_blocking_tools_in_use", &[]),
        1.0,
        "{text}"
    );
}

#[tokio::test]
async fn metrics_sit_behind_the_servers_authentication_and_count_its_refusals() {
    let pipeline = harness::pipeline();
    let oxp =
        Oxp::start(Server::from_pipeline(pipeline).auth(ServerAuth::default().api_key(API_KEY)))
            .await;
    let (status, _) = scrape_text(&oxp, None).await;
    assert_eq!(status, 401, "no key, no metrics");
    let (status, _) = scrape_text(&oxp, Some("k_wrong_key_0123456789abcdefghij")).await;
    assert_eq!(status, 401);
    let (status, text) = scrape_text(&oxp, Some(API_KEY)).await;
    assert_eq!(status, 200);
    assert!(
        text.contains(r#"oxp_refusals_total{reason="auth"} 2"#),
        "{text}"
    );
    assert!(
        !text.contains(API_KEY) && !text.contains("k_wrong_key"),
        "no token in metrics"
    );
    assert!(text.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
    // Hostile: a page of another origin cannot read them, key or not (the guard's 403).
    let foreign = oxp
        .request(reqwest::Method::GET, "/metrics")
        .bearer_auth(API_KEY)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    if let Some(scrape) = parse(&text) {
        assert_eq!(
            scrape.value("oxp_refusals_total", &[("reason", "auth")]),
            2.0
        );
    }
}

#[tokio::test]
async fn metrics_on_a_listener_of_their_own_are_off_the_public_port() {
    let pipeline = harness::pipeline();
    let server = Server::from_pipeline(pipeline)
        .auth(ServerAuth::default().api_key(API_KEY))
        .metrics_route(false);
    let metrics = Oxp::start_router(server.metrics_router().unwrap()).await;
    let oxp = Oxp::start(server).await;
    let reply = oxp.call_with(
        oxp.request(reqwest::Method::POST, "/tools/call")
            .bearer_auth(API_KEY)
            .json(&json!({"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}})),
    );
    assert_eq!(reply.await.status, 200);
    let (status, _) = scrape_text(&oxp, Some(API_KEY)).await;
    assert_eq!(status, 404, "not on the public port");
    let (status, text) = scrape_text(&metrics, None).await;
    assert_eq!(status, 200, "the metrics port needs no token");
    assert!(
        text.contains(
            r#"oxp_calls_total{front="oxp",tool="Calculator.Add@1.0.0",outcome="success"} 1"#
        ),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_off_answers_nothing_and_counts_nothing() {
    let pipeline = harness::pipeline().metrics(false);
    assert!(pipeline.metrics_text().is_none());
    let oxp = Oxp::start(Server::from_pipeline(pipeline)).await;
    let (status, _) = scrape_text(&oxp, None).await;
    assert_eq!(status, 404);
}

/// Hostile: a client that sends a thousand unknown tool ids, call_ids and user ids makes no new
/// series — labels are the registry's tool ids, never what a request carries.
#[tokio::test]
async fn labels_stay_bounded_whatever_a_client_sends() {
    let pipeline = harness::pipeline();
    let oxp = everything(pipeline.clone()).await;
    let before = pipeline.metrics_text().unwrap();
    for i in 0..1000 {
        let call = json!({
            "tool_id": format!("Evil.Tool{i}"),
            "call_id": format!("evil-call-{i}"),
            "context": {"user_id": format!("evil-user-{i}")},
            "input": {"a": i, "b": 2}
        });
        assert_eq!(oxp.call(call).await.status, 400);
    }
    let after = pipeline.metrics_text().unwrap();
    assert!(
        !after.contains("Evil") && !after.contains("evil-"),
        "no input becomes a label"
    );
    let series = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
    // One new series: (oxp, none, unknown_tool), its counter and its histogram's lines.
    assert!(
        series(&after) <= series(&before) + 1 + 2 + 17,
        "{} series before, {} after",
        series(&before),
        series(&after)
    );
    assert!(
        after.contains(r#"oxp_calls_total{front="oxp",tool="none",outcome="unknown_tool"} 1000"#)
    );
}

/// `OXP_METRICS_ADDR` in the example's real process: `/metrics` on its own port, without the
/// API key the main port requires, and not on the main port.
#[test]
fn the_example_serves_metrics_on_oxp_metrics_addr() {
    let port = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap().port()
    };
    let metrics_addr = format!("127.0.0.1:{port}");
    let example = harness::start_example(&[
        ("OXP_METRICS_ADDR", metrics_addr.as_str()),
        ("OXP_API_KEYS", API_KEY),
    ]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let call = client
            .post(format!("{}/tools/call", example.base))
            .bearer_auth(API_KEY)
            .json(&json!({"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}))
            .send()
            .await
            .unwrap();
        assert_eq!(call.status(), 200);
        let main = client
            .get(format!("{}/metrics", example.base))
            .bearer_auth(API_KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(main.status(), 404, "not on the main port");
        // The listener comes up beside the main one; give it a moment on a slow machine.
        let mut text = String::new();
        for _ in 0..50 {
            if let Ok(response) = client
                .get(format!("http://{metrics_addr}/metrics"))
                .send()
                .await
            {
                assert_eq!(response.status(), 200);
                text = response.text().await.unwrap();
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(
            text.contains(
                r#"oxp_calls_total{front="oxp",tool="Calculator.Add@2.0.0",outcome="success"} 1"#
            ),
            "{text}"
        );
    });
}

/// Says it took too long, in the pipeline's own words.
#[oxp_runtime::tool(toolkit = "Mimic", version = "1.0.0")]
fn timeout() -> Result<(), oxp_runtime::ToolError> {
    Err(oxp_runtime::ToolError::new(
        "The tool took too long and was stopped.",
    ))
}

/// Takes too long.
#[oxp_runtime::tool(toolkit = "Mimic", version = "1.0.0", timeout_ms = 20)]
async fn slow() {
    std::future::pending::<()>().await;
}

/// A failure is classed by its kind, which only the pipeline sets: a tool's error in the
/// timeout's very words is the tool's error, and a real timeout is a timeout.
#[tokio::test]
async fn a_tool_s_error_in_the_pipeline_s_words_is_still_the_tool_s() {
    let registry = oxp_runtime::Registry::builder()
        .tool(timeout::TOOL)
        .tool(slow::TOOL)
        .build()
        .unwrap();
    let oxp = Oxp::start(Server::new(registry)).await;
    for tool in ["Mimic.Timeout", "Mimic.Slow"] {
        let reply = oxp.call(json!({"tool_id": tool, "input": {}})).await;
        assert_eq!(
            reply.body["error"]["message"],
            "The tool took too long and was stopped."
        );
    }
    let text = reqwest::get(format!("{}/metrics", oxp.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for (tool, outcome) in [
        ("Mimic.Timeout@1.0.0", "tool_error"),
        ("Mimic.Slow@1.0.0", "timeout"),
    ] {
        let line =
            format!("oxp_calls_total{{front=\"oxp\",tool=\"{tool}\",outcome=\"{outcome}\"}} 1");
        assert!(text.contains(&line), "{line} in {text}");
    }
}
