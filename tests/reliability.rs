//! Idempotency, limits, blocking-tool bounds and graceful shutdown, over real HTTP on 127.0.0.1.

#[path = "harness/mod.rs"]
mod harness;

use std::time::{Duration, Instant};

use harness::Oxp;
use oxp_runtime::call::Pipeline;
use oxp_runtime::idempotency::{InMemoryIdempotency, RedisIdempotency};
use oxp_runtime::protocol::CallToolRequest;
use oxp_runtime::server::{Server, ServerAuth, Shutdown};
use oxp_tests::runs;
use reqwest::Method;
use serde_json::{Value, json};

fn server() -> Server {
    Server::new(oxp_tests::all_tools().build().unwrap())
}

/// Until `condition` holds (at most 5 s): a wait on the server's own counters, not on a
/// guess at how long something takes.
async fn until(condition: impl Fn() -> bool) {
    for _ in 0..1000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the condition never held");
}

fn record(call_id: &str, ms: u64) -> Value {
    json!({"call_id": call_id, "tool_id": "Once.Record", "input": {"ms": ms}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_call_id_returns_the_first_answer_without_running_again() {
    let oxp = Oxp::start(server()).await;
    let first = oxp.call_request(record("idem-1", 0)).await;
    let second = oxp.call_request(record("idem-1", 0)).await;
    assert_eq!(
        first.body, second.body,
        "the same answer, duration included"
    );
    assert_eq!(runs("idem-1"), 1);
    // Without a call_id every call runs: each gets its own generated id and a fresh run (a
    // replay would repeat the first id).
    let mut ids = Vec::new();
    for _ in 0..2 {
        let reply = oxp
            .call_request(json!({"tool_id": "Once.Record", "input": {"ms": 0}}))
            .await;
        assert_eq!(reply.body["result"]["value"], 1, "{:?}", reply.body);
        let id = reply.body["result"]["call_id"].as_str().unwrap().to_owned();
        assert_eq!(runs(&id), 1, "it ran under its own id");
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_wait_for_the_first_and_share_its_answer() {
    let oxp = Oxp::start(server()).await;
    let calls = (0..16).map(|_| oxp.call_request(record("idem-concurrent", 200)));
    let replies = futures_util::future::join_all(calls).await;
    assert!(replies.iter().all(|r| r.body == replies[0].body));
    assert_eq!(replies[0].body["result"]["value"], 1);
    assert_eq!(runs("idem-concurrent"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_ids_are_scoped_per_principal() {
    let server = server().auth(
        ServerAuth::default()
            .api_key("key-of-tenant-a-0123456789")
            .api_key("key-of-tenant-b-0123456789"),
    );
    let oxp = Oxp::start(server).await;
    for key in ["key-of-tenant-a-0123456789", "key-of-tenant-b-0123456789"] {
        let reply = oxp
            .call_with(
                oxp.request(Method::POST, "/tools/call")
                    .header("OXP-API-Key", key)
                    .json(&json!({"request": record("shared-id", 0)})),
            )
            .await;
        assert_eq!(reply.status, 200);
    }
    assert_eq!(runs("shared-id"), 2, "each tenant's call ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_call_loses_nothing() {
    let oxp = Oxp::start(server()).await;
    // Send the request and hang up before the answer.
    oxp.call_and_hang_up(
        &json!({"request": record("idem-dropped", 300)}),
        Duration::from_millis(50),
    )
    .await;
    // The retry gets the answer of the run the first request started: one run started, and it
    // finished (a hang-up that cut the run off would leave the retry to start a second).
    let retry = oxp.call_request(record("idem-dropped", 300)).await;
    assert_eq!(retry.status, 200);
    assert_eq!(retry.body["result"]["value"], 1);
    assert_eq!(oxp_tests::starts("idem-dropped"), 1, "one run started");
    assert_eq!(runs("idem-dropped"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_server_answers_at_once_with_retry_hints() {
    let pipeline = harness::pipeline().limits(Some(2), 8);
    let oxp = Oxp::start(Server::from_pipeline(pipeline.clone())).await;
    let slow = || oxp.call_request(json!({"tool_id": "Util.Sleep", "input": {"ms": 500}}));
    let (first, second, refused) = tokio::join!(slow(), slow(), async {
        // Once both slow calls hold their places, the server is full.
        until(|| pipeline.stats().active == 2).await;
        let started = Instant::now();
        let reply = oxp
            .call_request(json!({"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}))
            .await;
        (reply, started.elapsed())
    });
    assert_eq!((first.status.as_u16(), second.status.as_u16()), (200, 200));
    let (refused, took) = refused;
    assert_eq!(refused.status, 400);
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("temporarily unavailable")
    );
    assert_eq!(refused.header("x-should-retry"), Some("true"));
    assert_eq!(refused.header("retry-after-ms"), Some("1000"));
    assert!(
        took < Duration::from_millis(300),
        "refused at once, not queued ({took:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_sync_tools_time_out_and_cannot_take_every_thread() {
    // One blocking slot: a stuck sync tool holds it past its 200 ms timeout.
    let oxp = Oxp::start(Server::from_pipeline(harness::pipeline().limits(None, 1))).await;
    let stuck = || oxp.call_request(json!({"tool_id": "Util.Block", "input": {"ms": 1500}}));
    let (a, b) = tokio::join!(stuck(), stuck());
    for reply in [a, b] {
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body["result"]["error"]["can_retry"], true);
    }
    // Async tools are unaffected.
    let reply = oxp
        .call_request(json!({"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}))
        .await;
    assert_eq!(reply.body["result"]["value"], 3.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_health_turns_503_and_in_flight_calls_are_answered() {
    let server = server();
    let pipeline = server.pipeline().clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(
        listener,
        async move {
            let _ = stopped.await;
        },
        Duration::from_secs(5),
    ));
    let client = reqwest::Client::new();
    let call = |request: Value| {
        client
            .post(format!("{base}/tools/call"))
            .json(&json!({"request": request}))
            .send()
    };
    let in_flight = tokio::spawn(call(json!({"tool_id": "Util.Sleep", "input": {"ms": 600}})));
    // Stopped once the call runs; the drain has begun once /health says so.
    until(|| pipeline.stats().started == 1).await;
    stop.send(()).unwrap();
    let mut health = client.get(format!("{base}/health")).send().await.unwrap();
    for _ in 0..1000 {
        if health.status() != 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        health = client.get(format!("{base}/health")).send().await.unwrap();
    }
    assert_eq!(health.status(), 503);
    let refused = call(json!({"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}))
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert_eq!(refused.headers()["x-should-retry"], "true");

    let answered = in_flight.await.unwrap().unwrap();
    assert_eq!(answered.status(), 200);
    let body: Value = answered.json().await.unwrap();
    assert_eq!(body["result"]["value"], 600);
    let ended = tokio::time::timeout(Duration::from_secs(3), serving)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(ended, Shutdown::Drained);
}

#[test]
fn sigterm_stops_the_example_with_exit_code_0() {
    let mut example = harness::start_example(&[("OXP_SHUTDOWN_GRACE_MS", "2000")]);
    let pid = example.child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = example.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "it stops within the grace period"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_sharing_redis_run_a_call_id_once() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let replica = || async {
        let store = RedisIdempotency::connect(&redis.1, Duration::from_secs(60))
            .await
            .unwrap();
        Pipeline::new(oxp_tests::all_tools().build().unwrap()).idempotency(Some(store))
    };
    let (a, b) = (replica().await, replica().await);
    let request: CallToolRequest = serde_json::from_value(record("redis-shared", 200)).unwrap();
    // The same call reaches both replicas at once, and again later.
    let (first, second) = tokio::join!(a.call(request.clone()), b.call(request.clone()));
    let third = b.call(request).await;
    assert_eq!(first, second);
    assert_eq!(first, third);
    assert_eq!(runs("redis-shared"), 1);

    // Redis gone: refused as temporarily unavailable, never run unguarded.
    drop(redis);
    let request: CallToolRequest = serde_json::from_value(record("redis-down", 0)).unwrap();
    let outcome = a.call(request).await;
    assert_eq!(outcome.status(), 400, "{outcome:?}");
    assert_eq!(runs("redis-down"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_memory_store_is_bounded() {
    let store = InMemoryIdempotency::new(10, Duration::from_millis(200));
    let pipeline =
        Pipeline::new(oxp_tests::all_tools().build().unwrap()).idempotency(Some(store.clone()));
    let call = |id: String| {
        let request: CallToolRequest = serde_json::from_value(record(&id, 0)).unwrap();
        pipeline.call(request)
    };
    call("ttl-1".into()).await;
    call("ttl-1".into()).await;
    assert_eq!(runs("ttl-1"), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    call("ttl-1".into()).await;
    assert_eq!(runs("ttl-1"), 2, "after the TTL the key is new again");
    // Three times the capacity: the store never holds more than 10, and the oldest is new again.
    for i in 0..30 {
        call(format!("cap-{i}")).await;
        assert!(store.len() <= 10, "{store:?}");
    }
    call("cap-29".into()).await;
    assert_eq!(runs("cap-29"), 1, "the newest is kept");
    call("cap-0".into()).await;
    assert_eq!(runs("cap-0"), 2, "the oldest was forgotten");
}
