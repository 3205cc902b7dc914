//! MCP tasks (SEP-2663) on real sockets, against `oxp-runtime/examples/task_server.rs` as
//! `oxp_runtime::serve()` runs it: the lifecycle and its MUSTs, asks inside a task, and what a
//! hostile or unlucky world does to them: another caller's ids, a flood, a huge result, two
//! replicas sharing Redis, a replica killed mid-run, Redis gone.
//!
//! Each wait polls a task's status, the event itself, with a bound on the polls (never a bound
//! on the wall clock a loaded machine could miss).

#[path = "harness/mod.rs"]
mod harness;

use std::time::Duration;

use serde_json::{Value, json};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// One JSON-RPC request to `/mcp` at 2026-07-28, with the headers that revision requires and
/// `_meta` declaring `capabilities`; the response object (result or error) and its HTTP status.
async fn rpc_as(
    base: &str,
    key: Option<&str>,
    method: &str,
    mut params: Value,
    capabilities: Value,
) -> (u16, Value) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    // A connection per request, closed after it: no idle keep-alive holds a draining server
    // up (which would hide a write it still owed when its last connection went).
    let mut request = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("connection", "close")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    let name = params["name"].as_str().or(params["taskId"].as_str());
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let reply = request.json(&body).send().await.unwrap();
    let status = reply.status().as_u16();
    let kind = reply.headers()["content-type"].to_str().unwrap().to_owned();
    let text = reply.text().await.unwrap();
    let message = harness::mcp_messages(&kind, &text).pop().unwrap();
    (status, message)
}

/// [`rpc_as`] by an anonymous caller that declares the tasks extension and elicitation.
async fn rpc(base: &str, method: &str, params: Value) -> Value {
    let capabilities = json!({"elicitation": {}, "extensions": {TASKS: {}}});
    rpc_as(base, None, method, params, capabilities).await.1
}

async fn call(base: &str, tool: &str, arguments: Value) -> Value {
    rpc(
        base,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
    .await
}

async fn get(base: &str, id: &str) -> Value {
    rpc(base, "tasks/get", json!({"taskId": id})).await
}

/// Polls the task until `done` holds of it (at most `polls` times, 20 ms apart); the task then.
async fn poll_until(base: &str, id: &str, polls: u32, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..polls {
        last = get(base, id).await;
        if done(&last["result"]) {
            return last["result"].clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the task never came to the state waited for; last seen: {last}")
}

/// The stores a test tries in turn: memory, and Redis's URL where there is one.
fn stores(redis: &Option<harness::RedisServer>) -> Vec<Option<String>> {
    std::iter::once(None)
        .chain(redis.iter().map(|redis| Some(redis.1.clone())))
        .collect()
}

/// The task server with `env`, on `store` (memory, or Redis at its URL).
fn start_on(store: &Option<String>, env: &[(&str, &str)]) -> harness::Example {
    let mut env = env.to_vec();
    if let Some(url) = store {
        env.push(("OXP_REDIS_URL", url));
    }
    harness::start_server(&harness::test_example_binary("task_server"), &env)
}

fn status_is(status: &'static str) -> impl Fn(&Value) -> bool {
    move |task| task["status"] == status
}

fn task_id(created: &Value) -> String {
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"].as_str().unwrap().to_owned()
}

fn text(task: &Value) -> &str {
    task["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// The lifecycle: a flat `CreateTaskResult` (every field the extension names, none it forbids),
/// found at once by `tasks/get`, progress as its status message, the result inlined when it
/// completes exactly as `tools/call` would have answered, and kept afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_made_polled_and_read_with_the_extension_s_shapes() {
    let server = harness::start_server(&harness::test_example_binary("task_server"), &[]);
    let created = call(
        &server.base,
        "Jobs_Count",
        json!({"steps": 3, "step_ms": 30}),
    )
    .await;
    let id = task_id(&created);
    let result = &created["result"];
    assert_eq!(result["status"], "working");
    for field in ["createdAt", "lastUpdatedAt"] {
        assert!(result[field].as_str().unwrap().ends_with('Z'), "{created}");
    }
    assert!(result["ttlMs"].as_u64().unwrap() > 0);
    assert!(result["pollIntervalMs"].as_u64().unwrap() > 0);
    for absent in [
        "task",
        "result",
        "error",
        "inputRequests",
        "requestState",
        "ttl",
    ] {
        assert!(result.get(absent).is_none(), "{absent} in {created}");
    }
    // Durable before it is answered: found at once.
    let first = get(&server.base, &id).await;
    assert_eq!(first["result"]["resultType"], "complete", "{first}");
    assert_eq!(first["result"]["taskId"], id.as_str());
    let done = poll_until(&server.base, &id, 500, status_is("completed")).await;
    assert!(text(&done).starts_with("counted to 3 (run 1 of"), "{done}");
    assert_eq!(done["result"]["isError"], false);
    assert_eq!(
        done["statusMessage"], "3/3: counting",
        "progress is the status message"
    );
    assert!(done.get("error").is_none());
    // Kept after it ends, counted, and in the store's size.
    let again = get(&server.base, &id).await;
    assert_eq!(again["result"]["status"], "completed");
    let metrics = reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "oxp_tasks_total{status=\"working\"} 1",
        "oxp_tasks_total{status=\"completed\"} 1",
        "oxp_idempotency_store_entries 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    // A sync tool and a tool that may be a task without the extension: plain results.
    let (_, plain) = rpc_as(
        &server.base,
        None,
        "tools/call",
        json!({"name": "Jobs_Count", "arguments": {"steps": 1, "step_ms": 1}}),
        json!({}),
    )
    .await;
    assert!(plain["result"].get("taskId").is_none(), "{plain}");
    assert!(text(&plain).starts_with("counted to 1"), "{plain}");
}

/// MUSTs of the extension's errors: a required-task tool without the extension is -32021
/// naming it; tasks methods without it are -32021; an unknown id is -32602; tasks/result and
/// tasks/list are gone (-32601); a mismatched `Mcp-Name` is -32020 with HTTP 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extension_s_errors_are_the_spec_s() {
    let server = harness::start_server(&harness::test_example_binary("task_server"), &[]);
    let base = &server.base;
    let (_, refused) = rpc_as(
        base,
        None,
        "tools/call",
        json!({"name": "Jobs_Hold"}),
        json!({}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"][TASKS],
        json!({}),
        "{refused}"
    );
    for method in ["tasks/get", "tasks/cancel"] {
        let (_, gated) = rpc_as(base, None, method, json!({"taskId": "t"}), json!({})).await;
        assert_eq!(gated["error"]["code"], -32021, "{method}: {gated}");
    }
    let unknown = get(base, "no-such-task").await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    for bad in [json!(7), json!(["t"]), json!(null)] {
        let (_, answer) = rpc_as(
            base,
            None,
            "tasks/get",
            json!({"taskId": bad}),
            json!({"extensions": {TASKS: {}}}),
        )
        .await;
        assert_eq!(answer["error"]["code"], -32602, "{bad}: {answer}");
    }
    for gone in ["tasks/result", "tasks/list"] {
        let answer = rpc(base, gone, json!({"taskId": "t"})).await;
        assert_eq!(answer["error"]["code"], -32601, "{gone}: {answer}");
    }
    let id = task_id(&call(base, "Jobs_Hold", json!({})).await);
    let mismatched = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tasks/get")
        .header("mcp-name", "another-task")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": id,
            "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(mismatched.status(), 400);
    let body: Value = mismatched.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32020, "{body}");
    rpc(base, "tasks/cancel", json!({"taskId": id})).await;
}

/// Cancellation: the running tool sees it and its task ends `cancelled`; cancelling an ended
/// task is the same empty ack and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_stops_its_run() {
    let server = harness::start_server(&harness::test_example_binary("task_server"), &[]);
    let base = &server.base;
    let id = task_id(&call(base, "Jobs_Hold", json!({})).await);
    poll_until(base, &id, 500, |t| t["statusMessage"] == "1/1: holding").await;
    let ack = rpc(base, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let ended = poll_until(base, &id, 500, status_is("cancelled")).await;
    assert!(ended.get("result").is_none(), "{ended}");
    let again = rpc(base, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(again["result"], json!({"resultType": "complete"}));
    assert_eq!(get(base, &id).await["result"]["status"], "cancelled");
}

/// Asks inside a task: it parks `input_required` with the asks as `inputRequests`; answers to
/// keys it did not ask are ignored; each answer resumes it; a second question under a used key
/// comes under a key of its own (no key names two requests in a task's life); an answer
/// replayed after it counted is ignored; and the tool runs its side effect once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_inside_a_task_park_it_until_answered() {
    let server = harness::start_server(&harness::test_example_binary("task_server"), &[]);
    let base = &server.base;
    let id = task_id(&call(base, "Jobs_Ship", json!({"items": ["a", "b"]})).await);
    let asked = poll_until(base, &id, 500, status_is("input_required")).await;
    assert_eq!(
        asked["inputRequests"]["ship"]["params"]["message"], "Ship a?",
        "{asked}"
    );
    let yes = json!({"action": "accept"});
    let ack = rpc(
        base,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"unasked": yes}}),
    )
    .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert_eq!(get(base, &id).await["result"]["status"], "input_required");
    rpc(
        base,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"ship": yes}}),
    )
    .await;
    let second = poll_until(base, &id, 500, |t| {
        t["inputRequests"].get("ship#2").is_some()
    })
    .await;
    assert_eq!(
        second["inputRequests"]["ship#2"]["params"]["message"],
        "Ship b?"
    );
    assert!(second["inputRequests"].get("ship").is_none(), "{second}");
    // The first answer again: it answered "Ship a?", and answers nothing now.
    rpc(
        base,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"ship": yes}}),
    )
    .await;
    assert_eq!(get(base, &id).await["result"]["status"], "input_required");
    rpc(
        base,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"ship#2": yes}}),
    )
    .await;
    let done = poll_until(base, &id, 500, status_is("completed")).await;
    assert!(text(&done).starts_with("shipped a, b (run 1 of"), "{done}");
}

/// Asks before the task: the first round answers `input_required` with no task; the round
/// with the answer makes the task, whose result has the answer; that round replayed gets the
/// same task, not a second run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_before_a_task_are_rounds_of_the_call() {
    let server = harness::start_server(&harness::test_example_binary("task_server"), &[]);
    let base = &server.base;
    let first = call(base, "Jobs_Welcome", json!({})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert!(first["result"].get("taskId").is_none());
    let answer = json!({"name": "Jobs_Welcome", "arguments": {},
        "requestState": first["result"]["requestState"],
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}}});
    let made = rpc(base, "tools/call", answer.clone()).await;
    let id = task_id(&made);
    assert!(made["result"].get("requestState").is_none(), "{made}");
    let replayed = rpc(base, "tools/call", answer).await;
    assert_eq!(task_id(&replayed), id, "the replayed round finds its task");
    let done = poll_until(base, &id, 500, status_is("completed")).await;
    assert!(
        text(&done).starts_with("Welcome, Alice (run 1 of"),
        "{done}"
    );
}

/// Asks before a tool's first wait are rounds by one rule, in memory and in Redis alike (the
/// store's own I/O is no wait of the tool's): a second question asked before the first wait is
/// an ordinary `input_required` round, never a task. The same round sent three times at once
/// never hands out a task id that is then not found: each is answered with the round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ask_before_the_first_wait_is_a_round_on_every_store() {
    let redis = harness::start_redis();
    for store in stores(&redis) {
        let server = start_on(&store, &[]);
        let base = &server.base;
        for attempt in 0..5 {
            let first = call(base, "Jobs_Introduce", json!({})).await;
            assert_eq!(first["result"]["resultType"], "input_required", "{first}");
            let answer = json!({"name": "Jobs_Introduce", "arguments": {},
                "requestState": first["result"]["requestState"],
                "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ann"}}}});
            let sent = [answer.clone(), answer.clone(), answer];
            let replies = futures_util::future::join_all(
                sent.iter()
                    .map(|answer| rpc(base, "tools/call", answer.clone())),
            )
            .await;
            for reply in replies {
                let result = &reply["result"];
                assert_eq!(
                    result["resultType"], "input_required",
                    "{store:?} #{attempt}: {reply}"
                );
                assert!(result["inputRequests"]["proceed"].is_object(), "{reply}");
                assert!(result.get("taskId").is_none(), "{store:?}: {reply}");
            }
        }
    }
}

/// A panic is `failed` with a JSON-RPC error and no result; a tool's own error would be
/// `completed` with `isError`; a sync tool on a blocking thread runs as a task too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_failed_and_tool_errors_completed() {
    let server = harness::start_server(&harness::test_example_binary("task_server"), &[]);
    let base = &server.base;
    let id = task_id(&call(base, "Jobs_Crash", json!({})).await);
    let failed = poll_until(base, &id, 500, status_is("failed")).await;
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    assert!(failed["error"]["message"].is_string());
    assert!(failed.get("result").is_none());
    let id = task_id(&call(base, "Jobs_Grind", json!({"ms": 5})).await);
    let done = poll_until(base, &id, 500, status_is("completed")).await;
    assert!(text(&done).starts_with("ground (run 1 of"), "{done}");
    // Refused before it ever waited: a plain answer, no task.
    let invalid = call(base, "Jobs_Count", json!({"steps": "many", "step_ms": 1})).await;
    assert!(invalid["result"].get("taskId").is_none(), "{invalid}");
    assert_eq!(invalid["result"]["isError"], true, "{invalid}");
}

/// A caller sees only its own tasks: another API key's get, update and cancel find nothing
/// (-32602), and the task goes on untouched; ids are not guessable from one another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_caller_s_task_is_not_found() {
    let server = harness::start_server(
        &harness::test_example_binary("task_server"),
        &[("OXP_API_KEYS", "key-of-ada,key-of-bob")],
    );
    let base = &server.base;
    let caps = json!({"elicitation": {}, "extensions": {TASKS: {}}});
    let as_ = |key: &'static str, method: &'static str, params: Value| {
        let caps = caps.clone();
        async move { rpc_as(base, Some(key), method, params, caps).await.1 }
    };
    let made = as_(
        "key-of-ada",
        "tools/call",
        json!({"name": "Jobs_Ship", "arguments": {"items": ["x"]}}),
    )
    .await;
    let id = task_id(&made);
    let other = task_id(&as_("key-of-ada", "tools/call", json!({"name": "Jobs_Hold"})).await);
    assert_ne!(id, other);
    assert!(id.len() >= 32, "an id of 128 random bits: {id}");
    for (method, params) in [
        ("tasks/get", json!({"taskId": id})),
        (
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"ship": {"action": "accept"}}}),
        ),
        ("tasks/cancel", json!({"taskId": id})),
    ] {
        let answer = as_("key-of-bob", method, params).await;
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
    }
    let mine = as_("key-of-ada", "tasks/get", json!({"taskId": id})).await;
    assert!(
        ["working", "input_required"].contains(&mine["result"]["status"].as_str().unwrap()),
        "{mine}"
    );
    as_("key-of-ada", "tasks/cancel", json!({"taskId": other})).await;
}

/// A flood of task creations is bounded by the store: past its capacity, a creation is refused
/// with an error that says so, and nothing runs for it; a result over the result cap is the
/// cap's error, not a huge record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_tasks_and_a_huge_result_are_bounded() {
    let server = harness::start_server(
        &harness::test_example_binary("task_server"),
        &[
            ("OXP_IDEMPOTENCY_CAPACITY", "4"),
            ("OXP_TASKS_PER_CALLER", "100"),
            ("OXP_MAX_RESULT_BYTES", "1000"),
        ],
    );
    let base = &server.base;
    let mut held = Vec::new();
    let mut refused = None;
    for _ in 0..6 {
        let answer = call(base, "Jobs_Hold", json!({})).await;
        match answer["result"]["taskId"].as_str() {
            Some(id) => held.push(id.to_owned()),
            None => {
                refused = Some(answer);
                break;
            }
        }
    }
    let refused = refused.expect("the store's capacity bounds the tasks kept");
    assert_eq!(held.len(), 4, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no room") && message.contains("did not run"),
        "{message}"
    );
    for id in &held {
        rpc(base, "tasks/cancel", json!({"taskId": id})).await;
    }
    let server = harness::start_server(
        &harness::test_example_binary("task_server"),
        &[("OXP_MAX_RESULT_BYTES", "1000")],
    );
    let id = task_id(&call(&server.base, "Jobs_Large", json!({"bytes": 100_000})).await);
    let capped = poll_until(&server.base, &id, 500, status_is("completed")).await;
    assert_eq!(capped["result"]["isError"], true, "{capped}");
    assert!(
        capped.to_string().len() < 2000,
        "the record holds the cap's error, not the result"
    );
}

/// Two replicas sharing Redis: a task made through one is found at once through the other,
/// answered there (its next round runs there), cancelled there (stopping the run on the
/// first), and read there; a run ten times its lease long is never taken over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_replica_answers_for_a_task() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let env = [("OXP_REDIS_URL", redis.1.as_str()), ("OXP_LEASE_MS", "100")];
    let (a, b) = (
        harness::start_server(&binary, &env),
        harness::start_server(&binary, &env),
    );
    // Made on A, found on B at once, completed on A across many leases, read on B.
    let id = task_id(&call(&a.base, "Jobs_Count", json!({"steps": 20, "step_ms": 50})).await);
    assert_eq!(get(&b.base, &id).await["result"]["taskId"], id.as_str());
    let done = poll_until(&b.base, &id, 1000, |t| t["status"] != "working").await;
    assert_eq!(done["status"], "completed", "never taken over: {done}");
    assert!(text(&done).starts_with("counted to 20 (run 1 of"), "{done}");
    // Asked on A, answered on B: B runs the next round.
    let id = task_id(&call(&a.base, "Jobs_Ship", json!({"items": ["z"]})).await);
    poll_until(&b.base, &id, 500, status_is("input_required")).await;
    let yes = json!({"ship": {"action": "accept"}});
    rpc(
        &b.base,
        "tasks/update",
        json!({"taskId": id, "inputResponses": yes}),
    )
    .await;
    let done = poll_until(&a.base, &id, 500, status_is("completed")).await;
    let b_pid = b.child.id().to_string();
    assert!(text(&done).ends_with(&format!("of {b_pid})")), "{done}");
    // Held on A, cancelled on B: A's run stops (only its end writes `cancelled`).
    let id = task_id(&call(&a.base, "Jobs_Hold", json!({})).await);
    poll_until(&b.base, &id, 500, |t| t["statusMessage"] == "1/1: holding").await;
    rpc(&b.base, "tasks/cancel", json!({"taskId": id})).await;
    poll_until(&b.base, &id, 500, status_is("cancelled")).await;
}

/// A replica killed mid-run (SIGKILL): its task is `failed`, saying the server stopped, once
/// its lease lapses, never `working` forever and never run again; a `call_id` run it held is
/// answered, on the other replica, as interrupted rather than run a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_run_leaves_its_runs_ended_not_repeated() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let env = [("OXP_REDIS_URL", redis.1.as_str()), ("OXP_LEASE_MS", "200")];
    let mut a = harness::start_server(&binary, &env);
    let b = harness::start_server(&binary, &env);
    let id = task_id(&call(&a.base, "Jobs_Hold", json!({})).await);
    poll_until(&b.base, &id, 500, |t| t["statusMessage"] == "1/1: holding").await;
    // A call_id run on A, going on when A dies.
    let long = json!({"tool_id": "Jobs.Count", "call_id": "long-1",
        "input": {"steps": 1000, "step_ms": 50}});
    tokio::select! {
        _ = oxp_call(&a.base, &long) => panic!("the long run answered"),
        () = claimed(&redis.1, "long-1") => {}
    }
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let failed = poll_until(&b.base, &id, 1000, |t| t["status"] != "working").await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stopped"),
        "{failed}"
    );
    let retried = oxp_call(&b.base, &long).await;
    assert!(
        retried.contains("stopped before it answered"),
        "the retry is told, not run again: {retried}"
    );
}

/// Redis unreachable: a task is refused with a clear error and nothing runs unguarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_store_no_task_is_made() {
    let Some(mut redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let server = harness::start_server(&binary, &[("OXP_REDIS_URL", redis.1.as_str())]);
    redis.0.kill().unwrap();
    redis.0.wait().unwrap();
    let refused = call(
        &server.base,
        "Jobs_Count",
        json!({"steps": 1, "step_ms": 1}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("unreachable") && message.contains("did not run"),
        "{message}"
    );
}

/// An OXP `tools/call` of `body` at `base`: the answer's text.
async fn oxp_call(base: &str, body: &Value) -> String {
    let reply = reqwest::Client::new()
        .post(format!("{base}/tools/call"))
        .json(body)
        .send()
        .await
        .unwrap();
    reply.text().await.unwrap()
}

/// Waits until Redis at `url` holds the lease of the `call_id` run `call_id` (an anonymous
/// caller's), i.e. until the run is claimed and going on.
async fn claimed(url: &str, call_id: &str) {
    let lease = format!("oxp:call:lease:9:anonymous:-:{call_id}");
    while !redis_has(url, &lease) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Sends `signal` (`-STOP`, `-TERM`, …) to `server`'s process.
fn signal(server: &harness::Example, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([signal, &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Waits (bounded) for `server`'s process to exit; its exit status.
fn exited(server: &mut harness::Example) -> std::process::ExitStatus {
    for _ in 0..1200 {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the server did not exit within two minutes of its SIGTERM");
}

/// A rolling deploy's SIGTERM loses nothing: a task that finishes while its replica drains is
/// `completed` with its result, and a resumed round still waiting there for a place is handed
/// back and run by the other replica; the replica exits 0 only once both are written, though
/// no connection is left open to hold it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_writes_every_task_end_and_hand_back_before_the_process_exits() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let env = [
        ("OXP_REDIS_URL", redis.1.as_str()),
        ("OXP_SHUTDOWN_GRACE_MS", "60000"),
    ];
    let mut one_place = env.to_vec();
    one_place.push(("OXP_MAX_CONCURRENT_CALLS", "1"));
    let mut a = harness::start_server(&binary, &one_place);
    let b = harness::start_server(&binary, &env);
    let shipped = task_id(&call(&b.base, "Jobs_Ship", json!({"items": ["r"]})).await);
    poll_until(&b.base, &shipped, 500, status_is("input_required")).await;
    // A's one place: a run that ends a couple of seconds after it starts.
    let counted = call(&a.base, "Jobs_Count", json!({"steps": 40, "step_ms": 100})).await;
    let counted = task_id(&counted);
    let running = poll_until(&a.base, &counted, 500, |t| t["statusMessage"].is_string()).await;
    assert_eq!(running["status"], "working", "{running}");
    // The answers land on A, whose round waits for the place the count holds.
    let yes = json!({"ship": {"action": "accept"}});
    let taken = rpc(
        &a.base,
        "tasks/update",
        json!({"taskId": shipped, "inputResponses": yes}),
    )
    .await;
    assert!(taken.get("error").is_none(), "{taken}");
    signal(&a, "-TERM");
    let status = exited(&mut a);
    assert!(status.success(), "the drain ended with {status}");
    let a_pid = a.child.id().to_string();
    let count = get(&b.base, &counted).await["result"].clone();
    assert_eq!(count["status"], "completed", "{count}");
    assert!(text(&count).starts_with("counted to 40"), "{count}");
    assert!(text(&count).ends_with(&format!("of {a_pid})")), "{count}");
    let done = poll_until(&b.base, &shipped, 1000, |t| t["status"] != "working").await;
    assert_eq!(done["status"], "completed", "{done}");
    let b_pid = b.child.id().to_string();
    assert!(text(&done).ends_with(&format!("of {b_pid})")), "{done}");
}

/// A sync tool that asks before anything else is a task every time (its blocking thread is its
/// first wait), never a plain `input_required` round on some calls and a task on others: twenty
/// calls, twenty tasks, each parked on its question and completed by its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_task_tool_that_asks_first_is_always_a_task() {
    let server = harness::start_server(&harness::test_example_binary("task_server"), &[]);
    let base = &server.base;
    for i in 0..20 {
        let made = call(base, "Jobs_Approve", json!({"what": format!("plan {i}")})).await;
        let id = task_id(&made);
        let asked = poll_until(base, &id, 500, |t| t["status"] != "working").await;
        assert_eq!(asked["status"], "input_required", "call {i}: {asked}");
        let key = asked["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .clone();
        let yes = json!({key: {"action": "accept"}});
        rpc(
            base,
            "tasks/update",
            json!({"taskId": id, "inputResponses": yes}),
        )
        .await;
        let done = poll_until(base, &id, 500, |t| t["status"] != "working").await;
        assert!(
            text(&done).starts_with(&format!("approved plan {i}")),
            "{done}"
        );
    }
}

/// A task's result survives a Redis that stalls as the tool ends: Redis is stopped (SIGSTOP)
/// for a second and a half across the run's end, the end write fails meanwhile, and is written
/// once Redis is back: the task is `completed` with its result, not `failed` as if its server
/// had stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_s_result_survives_a_store_that_stalls_as_it_ends() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let env = [
        ("OXP_REDIS_URL", redis.1.as_str()),
        ("OXP_LEASE_MS", "5000"),
    ];
    let server = harness::start_server(&binary, &env);
    let id = task_id(
        &call(
            &server.base,
            "Jobs_Count",
            json!({"steps": 1, "step_ms": 500}),
        )
        .await,
    );
    let pid = redis.0.id().to_string();
    let stop = |signal: &str| {
        let sent = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    stop("-STOP");
    // The fault itself: the store is away for this long, across the tool's end.
    std::thread::sleep(Duration::from_millis(1500));
    stop("-CONT");
    let done = poll_until(&server.base, &id, 1000, |t| t["status"] != "working").await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(text(&done).starts_with("counted to 1"), "{done}");
}

/// Where Debian's `libfaketime` puts its library (the multi-threaded one: the server's
/// runtime has several threads).
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// One clock: replicas whose wall clocks are 90 s behind, 90 s ahead and a day ahead of the
/// others share tasks with them as if their clocks agreed. A task made on either is found on
/// the other at once, its lease is not taken for lapsed (its run is never failed as "stopped")
/// nor held past its real lapse, and it completes with its result, read on either; a question
/// one asks is answered at the other (its sealed state's expiry judged on the shared time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_whose_clocks_disagree_agree_on_every_task() {
    if !std::path::Path::new(FAKETIME).exists() {
        harness::skip("libfaketime (Debian package `faketime`)");
        return;
    }
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    // A short lease, so that 90 s of skew is many leases; a shared state key, so that a call
    // that asks goes on at either.
    let env = [
        ("OXP_REDIS_URL", redis.1.as_str()),
        ("OXP_LEASE_MS", "2000"),
        (
            "OXP_STATE_KEY",
            "a-state-key-shared-by-every-replica-of-the-test",
        ),
    ];
    let honest = harness::start_server(&binary, &env);
    for skew in ["-90s", "+90s", "+1d"] {
        let mut skewed = env.to_vec();
        skewed.extend([
            ("LD_PRELOAD", FAKETIME),
            ("FAKETIME", skew),
            ("DONT_FAKE_MONOTONIC", "1"),
        ]);
        let other = harness::start_server(&binary, &skewed);
        for (from, to) in [(&honest, &other), (&other, &honest)] {
            // Runs three leases long; read on the other replica all along.
            let made = call(
                &from.base,
                "Jobs_Count",
                json!({"steps": 12, "step_ms": 500}),
            )
            .await;
            let id = task_id(&made);
            let found = get(&to.base, &id).await;
            assert_eq!(found["result"]["status"], "working", "{skew}: {found}");
            let done = poll_until(&to.base, &id, 1500, |t| t["status"] != "working").await;
            assert_eq!(done["status"], "completed", "{skew}: {done}");
            assert!(text(&done).starts_with("counted to 12"), "{skew}: {done}");
            assert_eq!(done["ttlMs"], 3_600_000, "{skew}: {done}");
            let again = get(&from.base, &id).await;
            assert_eq!(again["result"]["status"], "completed", "{skew}: {again}");
            // A question asked by one is answered at the other: the state has not expired
            // there, nor lives on past its time.
            let asked = call(&from.base, "Jobs_Welcome", json!({})).await;
            assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
            let answer = json!({"name": "Jobs_Welcome", "arguments": {},
                "requestState": asked["result"]["requestState"],
                "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ann"}}}});
            let made = rpc(&to.base, "tools/call", answer).await;
            let id = task_id(&made);
            let done = poll_until(&to.base, &id, 500, status_is("completed")).await;
            assert!(text(&done).starts_with("Welcome, Ann"), "{skew}: {done}");
        }
    }
}

/// Whether Redis at `url` holds `key` (one inline command over RESP).
fn redis_has(url: &str, key: &str) -> bool {
    use std::io::{Read, Write};
    let address = url.trim_start_matches("redis://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .write_all(format!("EXISTS {key}\r\n").as_bytes())
        .unwrap();
    let mut reply = [0u8; 4];
    let read = stream.read(&mut reply).unwrap();
    &reply[..read] == b":1\r\n"
}

/// A task's input is kept beside its record, once, not in it: the record, which every renewal
/// and status change writes, stays small however large the input; the input is there for each
/// round that runs on it, and its bytes are let go when the task ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_s_input_is_kept_once_beside_its_record() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let server = harness::start_server(&binary, &[("OXP_REDIS_URL", redis.1.as_str())]);
    let base = &server.base;
    // A hundred kilobytes of items; each question names one.
    let items: Vec<String> = (0..4000).map(|i| format!("item-{i:05}-of-many")).collect();
    let id = task_id(&call(base, "Jobs_Ship", json!({"items": items})).await);
    let record = format!("oxp:call:record:9:anonymous:-:{id}");
    let length = |field: &str| {
        let reply = redis_command(&redis.1, &[b"HSTRLEN", record.as_bytes(), field.as_bytes()]);
        reply.trim_start_matches(':').parse::<usize>().unwrap()
    };
    for round in 0..3 {
        let asked = poll_until(base, &id, 500, status_is("input_required")).await;
        assert!(
            length("body") < 5_000,
            "round {round}: the record holds {}",
            length("body")
        );
        assert!(
            length("att") > 80_000,
            "round {round}: the input is kept beside it"
        );
        let key = asked["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .clone();
        let yes = json!({key: {"action": "accept"}});
        rpc(
            base,
            "tasks/update",
            json!({"taskId": id, "inputResponses": yes}),
        )
        .await;
    }
    poll_until(base, &id, 500, status_is("input_required")).await;
    rpc(base, "tasks/cancel", json!({"taskId": id})).await;
    poll_until(base, &id, 500, status_is("cancelled")).await;
    assert_eq!(length("att"), 0, "the ended task's input is let go");
}

/// Sends `parts` to Redis at `url` as one command; its reply's first line.
fn redis_command(url: &str, parts: &[&[u8]]) -> String {
    use std::io::{BufRead, Write};
    let address = url.trim_start_matches("redis://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let mut command = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        command.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
        command.extend_from_slice(part);
        command.extend_from_slice(b"\r\n");
    }
    stream.write_all(&command).unwrap();
    let mut reply = String::new();
    std::io::BufReader::new(stream)
        .read_line(&mut reply)
        .unwrap();
    reply.trim_end().to_owned()
}

/// In Redis, the store's gauges count the task records all replicas keep; and a Redis at its
/// `maxmemory` (with `noeviction`) refuses a task's record as it refuses a `call_id`'s claim:
/// the task is refused, saying so, and its tool does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_the_gauges_count_records_and_a_full_redis_refuses_them() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let server = harness::start_server(&binary, &[("OXP_REDIS_URL", redis.1.as_str())]);
    let base = &server.base;
    let id = task_id(&call(base, "Jobs_Count", json!({"steps": 1, "step_ms": 1})).await);
    poll_until(base, &id, 500, status_is("completed")).await;
    let metrics = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let entries: u64 = (metrics.lines())
        .find_map(|line| line.strip_prefix("oxp_idempotency_store_entries "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(entries >= 1, "{metrics}");
    // Past maxmemory: a megabyte kept, a limit of a hundred kilobytes.
    let filler = vec![b'x'; 1 << 20];
    assert_eq!(
        redis_command(&redis.1, &[b"SET", b"filler", &filler]),
        "+OK"
    );
    let limit: [&[u8]; 4] = [b"CONFIG", b"SET", b"maxmemory", b"100kb"];
    assert_eq!(redis_command(&redis.1, &limit), "+OK");
    let refused = call(base, "Jobs_Count", json!({"steps": 1, "step_ms": 1})).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("did not run") && message.contains("OOM"),
        "{refused}"
    );
    let body = json!({"tool_id": "Jobs.Count", "call_id": "full-1",
                      "input": {"steps": 0, "step_ms": 0}});
    let answer = oxp_call(base, &body).await;
    assert!(answer.contains("unreachable"), "{answer}");
}

/// A replica stopped (SIGTERM) while a task runs past its grace period: the task is marked
/// `failed` as it exits, seen at once on the other replica, not a lease later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_still_running_at_shutdown_is_marked_interrupted() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    // A lease far longer than the polls below: only the interruption can end the task.
    let env = [
        ("OXP_REDIS_URL", redis.1.as_str()),
        ("OXP_LEASE_MS", "600000"),
        ("OXP_SHUTDOWN_GRACE_MS", "50"),
    ];
    let mut a = harness::start_server(&binary, &env);
    let b = harness::start_server(&binary, &env);
    let id = task_id(&call(&a.base, "Jobs_Hold", json!({})).await);
    poll_until(&b.base, &id, 500, |t| t["statusMessage"] == "1/1: holding").await;
    signal(&a, "-TERM");
    a.child.wait().unwrap();
    let ended = poll_until(&b.base, &id, 500, |t| t["status"] != "working").await;
    assert_eq!(ended["status"], "failed", "{ended}");
    assert_eq!(
        ended["error"]["message"], "The server stopped before the task ended.",
        "{ended}"
    );
}

/// Over OXP 1.0, which has no tasks, a tool that must be a task over MCP is a call like any
/// other: it answers within its time limit, and a retry with its `call_id` gets that answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_oxp_a_task_tool_is_an_ordinary_call() {
    let server = harness::start_server(&harness::test_example_binary("task_server"), &[]);
    let body = json!({"tool_id": "Jobs.Ship", "call_id": "ship-1", "input": {"items": []}});
    let mut answers = Vec::new();
    for _ in 0..2 {
        let answer: Value = serde_json::from_str(&oxp_call(&server.base, &body).await).unwrap();
        answers.push(answer["value"].as_str().unwrap().to_owned());
    }
    assert!(answers[0].starts_with("shipped  (run 1 of"), "{answers:?}");
    assert_eq!(answers[0], answers[1], "the retry gets the first answer");
}

/// A `call_id` run ten times its lease long, and longer than answers are kept, retried at
/// another replica while it runs: the retry waits for it and gets its answer (its claim
/// renewed all along), never a second run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_id_run_longer_than_its_lease_runs_once() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    // Ten leases long and three times as long as answers are kept; then with answers kept for
    // less than one renewal's interval (a beat is a tenth of the lease).
    for (lease, kept, call_id) in [("100", "300", "long-2"), ("2000", "150", "long-3")] {
        let env = [
            ("OXP_REDIS_URL", redis.1.as_str()),
            ("OXP_LEASE_MS", lease),
            ("OXP_IDEMPOTENCY_TTL_MS", kept),
        ];
        let (a, b) = (
            harness::start_server(&binary, &env),
            harness::start_server(&binary, &env),
        );
        let body = json!({"tool_id": "Jobs.Count", "call_id": call_id,
            "input": {"steps": 20, "step_ms": 50}});
        let first = tokio::spawn({
            let (base, body) = (a.base.clone(), body.clone());
            async move { oxp_call(&base, &body).await }
        });
        claimed(&redis.1, call_id).await;
        let retry: Value = serde_json::from_str(&oxp_call(&b.base, &body).await).unwrap();
        let first: Value = serde_json::from_str(&first.await.unwrap()).unwrap();
        let a_pid = a.child.id().to_string();
        assert_eq!(
            first["value"],
            format!("counted to 20 (run 1 of {a_pid})"),
            "{call_id}: {first}"
        );
        assert_eq!(retry["value"], first["value"], "{call_id}: {retry}");
    }
}

/// A replica that stalls (SIGSTOP) past its lease mid-run: the retry elsewhere is told the run
/// was interrupted; when the replica wakes and finishes, that stays the `call_id`'s one answer,
/// for its own caller too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_replica_does_not_change_an_answer_given() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let env = [("OXP_REDIS_URL", redis.1.as_str()), ("OXP_LEASE_MS", "200")];
    let (a, b) = (
        harness::start_server(&binary, &env),
        harness::start_server(&binary, &env),
    );
    let body = json!({"tool_id": "Jobs.Count", "call_id": "stall-1",
        "input": {"steps": 4, "step_ms": 50}});
    let first = tokio::spawn({
        let (base, body) = (a.base.clone(), body.clone());
        async move { oxp_call(&base, &body).await }
    });
    claimed(&redis.1, "stall-1").await;
    signal(&a, "-STOP");
    let lease = "oxp:call:lease:9:anonymous:-:stall-1";
    while redis_has(&redis.1, lease) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let told = oxp_call(&b.base, &body).await;
    assert!(told.contains("stopped before it answered"), "{told}");
    signal(&a, "-CONT");
    let own = first.await.unwrap();
    assert_eq!(own, told, "its own caller gets the same one answer");
    assert_eq!(oxp_call(&b.base, &body).await, told);
}

/// With Redis, the budgets bound task records across replicas: past `OXP_IDEMPOTENCY_CAPACITY`
/// a creation is refused, on either replica, and runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_records_in_redis_are_bounded_too() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let env = [
        ("OXP_REDIS_URL", redis.1.as_str()),
        ("OXP_IDEMPOTENCY_CAPACITY", "3"),
        ("OXP_TASKS_PER_CALLER", "100"),
    ];
    let (a, b) = (
        harness::start_server(&binary, &env),
        harness::start_server(&binary, &env),
    );
    let mut made = Vec::new();
    for base in [&a.base, &b.base, &a.base] {
        made.push(task_id(&call(base, "Jobs_Hold", json!({})).await));
    }
    for base in [&a.base, &b.base] {
        let refused = call(base, "Jobs_Hold", json!({})).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("no room") && message.contains("did not run"),
            "{refused}"
        );
    }
    for id in &made {
        rpc(&a.base, "tasks/cancel", json!({"taskId": id})).await;
    }
}

/// A task's result that would take the in-memory store past its byte budget ends the task
/// `failed`, saying so; the store stays within its budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_past_the_store_s_bytes_fails_its_task() {
    let server = harness::start_server(
        &harness::test_example_binary("task_server"),
        &[("OXP_IDEMPOTENCY_MAX_BYTES", "100000")],
    );
    let base = &server.base;
    let id = task_id(&call(base, "Jobs_Large", json!({"bytes": 80_000})).await);
    let failed = poll_until(base, &id, 500, |t| t["status"] != "working").await;
    assert_eq!(failed["status"], "failed", "{}", &failed.to_string()[..300]);
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains("OXP_IDEMPOTENCY_MAX_BYTES"), "{message}");
    let metrics = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let bytes: u64 = (metrics.lines())
        .find_map(|line| line.strip_prefix("oxp_idempotency_store_bytes "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(bytes <= 100_000, "{bytes}");
}

/// Task runs hold places under the concurrency limit as any run: past it, a call that would be a
/// task is answered at once as temporarily unavailable, and no task is kept for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_runs_count_against_the_concurrency_limit() {
    let server = harness::start_server(
        &harness::test_example_binary("task_server"),
        &[("OXP_MAX_CONCURRENT_CALLS", "2")],
    );
    let base = &server.base;
    let held = [
        task_id(&call(base, "Jobs_Hold", json!({})).await),
        task_id(&call(base, "Jobs_Hold", json!({})).await),
    ];
    let refused = call(base, "Jobs_Count", json!({"steps": 1, "step_ms": 1})).await;
    assert!(refused["result"].get("taskId").is_none(), "{refused}");
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(
        text(&refused).contains("temporarily unavailable"),
        "{refused}"
    );
    for id in &held {
        rpc(base, "tasks/cancel", json!({"taskId": id})).await;
    }
    for id in &held {
        poll_until(base, id, 500, status_is("cancelled")).await;
    }
    let id = task_id(&call(base, "Jobs_Count", json!({"steps": 1, "step_ms": 1})).await);
    poll_until(base, &id, 500, status_is("completed")).await;
}

/// A store at its byte budget still ends the tasks it keeps: a cancellation (a status write,
/// which may always grow a record a little) reaches every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_still_ends_its_tasks() {
    let server = harness::start_server(
        &harness::test_example_binary("task_server"),
        // One caller's share is the whole store here: what is tried is the store's budget.
        &[
            ("OXP_IDEMPOTENCY_MAX_BYTES", "20000"),
            ("OXP_TASKS_PER_CALLER", "10000"),
        ],
    );
    let base = &server.base;
    let mut held = Vec::new();
    for _ in 0..50 {
        match call(base, "Jobs_Hold", json!({})).await["result"]["taskId"].as_str() {
            Some(id) => held.push(id.to_owned()),
            None => break,
        }
    }
    assert!(!held.is_empty() && held.len() < 50, "{} tasks", held.len());
    for id in &held {
        poll_until(base, id, 500, |t| t["statusMessage"] == "1/1: holding").await;
        rpc(base, "tasks/cancel", json!({"taskId": id})).await;
    }
    for id in &held {
        poll_until(base, id, 500, status_is("cancelled")).await;
    }
}

/// Answers that resume a task at a server with no place to run it: at its concurrency limit,
/// the round waits for a place (the task stays `working`) instead of failing; shutting down,
/// the answers are refused, the task still waits for them, and another replica takes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_not_lost_to_a_busy_or_stopping_server() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let env = [
        ("OXP_REDIS_URL", redis.1.as_str()),
        ("OXP_MAX_CONCURRENT_CALLS", "1"),
        ("OXP_SHUTDOWN_GRACE_MS", "60000"),
    ];
    let (a, b) = (
        harness::start_server(&binary, &env),
        harness::start_server(&binary, &env),
    );
    let yes = json!({"ship": {"action": "accept"}});
    // Busy: A's one place is held; the answered round waits for it.
    let shipped = task_id(&call(&a.base, "Jobs_Ship", json!({"items": ["p"]})).await);
    poll_until(&a.base, &shipped, 500, status_is("input_required")).await;
    let holding = task_id(&call(&a.base, "Jobs_Hold", json!({})).await);
    poll_until(&a.base, &holding, 500, |t| {
        t["statusMessage"] == "1/1: holding"
    })
    .await;
    rpc(
        &a.base,
        "tasks/update",
        json!({"taskId": shipped, "inputResponses": yes}),
    )
    .await;
    let waiting = get(&a.base, &shipped).await;
    assert_eq!(waiting["result"]["status"], "working", "{waiting}");
    rpc(&a.base, "tasks/cancel", json!({"taskId": holding})).await;
    let done = poll_until(&a.base, &shipped, 500, status_is("completed")).await;
    assert!(text(&done).starts_with("shipped p (run 1 of"), "{done}");
    // Stopping: B drains (a task holds it open); answers sent to it are refused, kept for A.
    let parked = task_id(&call(&a.base, "Jobs_Ship", json!({"items": ["q"]})).await);
    poll_until(&a.base, &parked, 500, status_is("input_required")).await;
    let keeps_b_open = task_id(&call(&b.base, "Jobs_Hold", json!({})).await);
    poll_until(&b.base, &keeps_b_open, 500, |t| {
        t["statusMessage"] == "1/1: holding"
    })
    .await;
    signal(&b, "-TERM");
    // Until B is draining it would take the answers: it is asked about a task nobody has (not
    // found until then, refused as shutting down from then on) before it is sent the real ones.
    let nobody = json!({"taskId": "0123456789abcdef0123456789abcdef", "inputResponses": yes});
    for _ in 0..500 {
        let probe = rpc(&b.base, "tasks/update", nobody.clone()).await;
        let said = probe["error"]["message"].as_str().unwrap_or_default();
        if said.contains("shutting down") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = rpc(
        &b.base,
        "tasks/update",
        json!({"taskId": parked, "inputResponses": yes}),
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("shutting down"), "{refused}");
    assert_eq!(
        get(&a.base, &parked).await["result"]["status"],
        "input_required"
    );
    rpc(
        &a.base,
        "tasks/update",
        json!({"taskId": parked, "inputResponses": yes}),
    )
    .await;
    let done = poll_until(&a.base, &parked, 500, status_is("completed")).await;
    assert!(text(&done).starts_with("shipped q (run"), "{done}");
    rpc(&a.base, "tasks/cancel", json!({"taskId": keeps_b_open})).await;
}

/// One caller cannot fill the store for the others: past `OXP_TASKS_PER_CALLER` its new task is
/// refused, saying so, while another caller's is made; in memory and in Redis alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_cannot_fill_the_store_for_the_others() {
    let redis = harness::start_redis();
    for store in stores(&redis) {
        let env = [
            ("OXP_API_KEYS", "key-of-ada,key-of-bob"),
            ("OXP_TASKS_PER_CALLER", "2"),
        ];
        let server = start_on(&store, &env);
        let caps = json!({"extensions": {TASKS: {}}});
        let hold = |key: &'static str| {
            let (base, caps) = (server.base.clone(), caps.clone());
            async move {
                let params = json!({"name": "Jobs_Hold"});
                rpc_as(&base, Some(key), "tools/call", params, caps).await.1
            }
        };
        let mut made = vec![("key-of-ada", task_id(&hold("key-of-ada").await))];
        made.push(("key-of-ada", task_id(&hold("key-of-ada").await)));
        let refused = hold("key-of-ada").await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("OXP_TASKS_PER_CALLER") && message.contains("did not run"),
            "{store:?}: {refused}"
        );
        made.push(("key-of-bob", task_id(&hold("key-of-bob").await)));
        for (key, id) in made {
            let params = json!({"taskId": id});
            rpc_as(
                &server.base,
                Some(key),
                "tasks/cancel",
                params,
                caps.clone(),
            )
            .await;
        }
    }
}

/// One caller's bytes cannot fill the store for the others, in memory and in Redis: a caller
/// making tasks with large inputs is refused once it holds its share of the byte budget (long
/// before its count), while another caller's task with the same input is made; and, in memory,
/// where answers and records share one budget, a flood of one caller's large `call_id` answers
/// does not push out another's: that caller's retry is answered without running again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_s_bytes_cannot_fill_the_store_for_the_others() {
    let redis = harness::start_redis();
    for store in stores(&redis) {
        // A share is a tenth: 400 KB of the 4 MB, while the count allows 1,000 tasks.
        let env = [
            ("OXP_API_KEYS", "key-of-ada,key-of-bob"),
            ("OXP_IDEMPOTENCY_MAX_BYTES", "4000000"),
        ];
        let server = start_on(&store, &env);
        let base = &server.base;
        let oxp = |key: &'static str, body: Value| {
            let base = base.clone();
            async move {
                let reply = reqwest::Client::new()
                    .post(format!("{base}/tools/call"))
                    .bearer_auth(key)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let answer: Value = reply.json().await.unwrap();
                answer["value"].as_str().unwrap_or_default().to_owned()
            }
        };
        let bobs_call = json!({"tool_id": "Jobs.Count", "call_id": "bob-1",
                               "input": {"steps": 0, "step_ms": 0}});
        let first = oxp("key-of-bob", bobs_call.clone()).await;
        assert!(first.starts_with("counted to 0 (run"), "{first}");
        // Ada's tasks, each parked on its question with a 100 KB input kept.
        let caps = json!({"elicitation": {}, "extensions": {TASKS: {}}});
        let ship = |key: &'static str| {
            let (base, caps) = (base.clone(), caps.clone());
            async move {
                let params =
                    json!({"name": "Jobs_Ship", "arguments": {"items": ["x".repeat(100_000)]}});
                rpc_as(&base, Some(key), "tools/call", params, caps).await.1
            }
        };
        let mut made = 0;
        let refused = loop {
            let answer = ship("key-of-ada").await;
            if answer["result"]["taskId"].is_string() {
                made += 1;
                assert!(
                    made < 10,
                    "{store:?}: a tenth of the bytes holds 3 such tasks"
                );
            } else {
                break answer;
            }
        };
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("OXP_TASKS_PER_CALLER") && message.contains("did not run"),
            "{store:?}: {refused}"
        );
        assert!(made >= 1, "{store:?}");
        task_id(&ship("key-of-bob").await);
        // Ada's answers: forty of 100 KB, the whole budget.
        for i in 0..40 {
            let body = json!({"tool_id": "Jobs.Large", "call_id": format!("ada-{i}"),
                              "input": {"bytes": 100_000}});
            oxp("key-of-ada", body).await;
        }
        let again = oxp("key-of-bob", bobs_call).await;
        assert_eq!(again, first, "{store:?}: Bob's call_id ran a second time");
    }
}

/// Answers cannot grow a task past the store's budget: each record holds a small reserve for
/// its status and end, and growth past it needs room like a new record, so a caller answering
/// every question of a long task with bulky content is refused once the budget is spent, and
/// the store stays within it. Each answer is smaller than the reserve, so a store that let every
/// write grow a record by that much would never refuse one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_cannot_grow_a_task_past_the_budget() {
    let redis = harness::start_redis();
    for store in stores(&redis) {
        // One caller's share is the whole store here: what is tried is the store's budget.
        let env = [
            ("OXP_IDEMPOTENCY_MAX_BYTES", "30000"),
            ("OXP_TASKS_PER_CALLER", "10000"),
        ];
        let server = start_on(&store, &env);
        let base = &server.base;
        let items: Vec<String> = (0..40).map(|i| format!("item-{i}")).collect();
        let id = task_id(&call(base, "Jobs_Ship", json!({"items": items})).await);
        let bulky = json!({"action": "accept", "content": {"junk": "x".repeat(2000)}});
        let mut refused = None;
        for _ in 0..40 {
            let asked = poll_until(base, &id, 500, |t| t["status"] != "working").await;
            let requests = asked["inputRequests"].as_object();
            let Some(key) = requests.and_then(|r| r.keys().next().cloned()) else {
                break;
            };
            let responses = json!({key: bulky});
            let answer = rpc(
                base,
                "tasks/update",
                json!({"taskId": id, "inputResponses": responses}),
            )
            .await;
            if answer.get("error").is_some() {
                refused = Some(answer);
                break;
            }
        }
        let refused = refused.expect("the budget stops the answers");
        assert!(
            refused.to_string().contains("no room"),
            "{store:?}: {refused}"
        );
        if store.is_none() {
            let metrics = reqwest::get(format!("{base}/metrics")).await.unwrap();
            let metrics = metrics.text().await.unwrap();
            let bytes: u64 = (metrics.lines())
                .find_map(|line| line.strip_prefix("oxp_idempotency_store_bytes "))
                .unwrap()
                .parse()
                .unwrap();
            assert!(bytes <= 30_000, "{bytes}");
        }
        rpc(base, "tasks/cancel", json!({"taskId": id})).await;
        poll_until(base, &id, 500, status_is("cancelled")).await;
    }
}

/// A round resumed by answers that is still waiting for a place when its server begins to shut
/// down is handed back, its answers kept, and runs on the next replica that reads the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_waiting_on_a_stopping_server_runs_elsewhere() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    let binary = harness::test_example_binary("task_server");
    let env = [
        ("OXP_REDIS_URL", redis.1.as_str()),
        ("OXP_SHUTDOWN_GRACE_MS", "60000"),
    ];
    let a = harness::start_server(&binary, &env);
    let mut busy = env.to_vec();
    busy.push(("OXP_MAX_CONCURRENT_CALLS", "1"));
    let b = harness::start_server(&binary, &busy);
    // B's one place is held; an answer that lands on B waits for it.
    let holding = task_id(&call(&b.base, "Jobs_Hold", json!({})).await);
    poll_until(&b.base, &holding, 500, |t| {
        t["statusMessage"] == "1/1: holding"
    })
    .await;
    let shipped = task_id(&call(&a.base, "Jobs_Ship", json!({"items": ["r"]})).await);
    poll_until(&a.base, &shipped, 500, status_is("input_required")).await;
    let yes = json!({"ship": {"action": "accept"}});
    rpc(
        &b.base,
        "tasks/update",
        json!({"taskId": shipped, "inputResponses": yes}),
    )
    .await;
    signal(&b, "-TERM");
    // Read on A: handed back by B, it runs on A.
    let done = poll_until(&a.base, &shipped, 1000, |t| t["status"] != "working").await;
    assert_eq!(done["status"], "completed", "{done}");
    let a_pid = a.child.id().to_string();
    assert!(text(&done).ends_with(&format!("of {a_pid})")), "{done}");
    rpc(&a.base, "tasks/cancel", json!({"taskId": holding})).await;
}
