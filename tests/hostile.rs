//! Issue #13: the promises README makes, held against hostile and broken clients on a real
//! socket (127.0.0.1). Each test names the promise it holds, and each failed on the code before.

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
/// cannot start more runs than `OXP_MAX_CONCURRENT_CALLS`. (Before: each call's run went on in
/// a task while its place was given back with the handler, so every hang-up started one more.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_ups_with_call_ids_cannot_escape_the_concurrency_limit() {
    let server = server().limits(Some(4), 8);
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
/// at once, but no more threads than the cap ever run, and a drain waits for the threads. (Before:
/// the place went back with the timeout, and stuck tools piled up on tokio's own thread cap.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_sync_tools_keep_their_blocking_places_until_their_threads_return() {
    let server = server().limits(None, 2);
    let pipeline = server.pipeline().clone();
    let oxp = Oxp::start(server).await;
    let started = std::time::Instant::now();
    let calls =
        (0..6).map(|_| oxp.call(json!({"tool_id": "Gauge.HoldThread", "input": {"ms": 700}})));
    for reply in futures_util::future::join_all(calls).await {
        // Answered within the tool's limit of 100 ms (waiting for a place counts in it).
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body["success"], false, "{:?}", reply.body);
    }
    assert!(
        started.elapsed() < Duration::from_millis(650),
        "timeouts answer at once"
    );
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
/// says so and runs nothing; a true retry gets the first answer. (Before: both got the first
/// answer, `3`, duration included.)
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
