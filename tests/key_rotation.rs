//! `OXP_STATE_KEY` changes without breaking a call in flight: replicas (server processes on
//! 127.0.0.1, configured by their environment as `cargo run` serves) one step apart in a
//! rotation open each other's request states and session ids mid-call, and a replica that
//! dropped the old key refuses what it sealed, saying how to keep it.

#[path = "harness/mod.rs"]
mod harness;

use serde_json::{Value, json};

const OLD: &str = "the old state key of 32 bytes or more";
const NEW: &str = "the new state key of 32 bytes or more";

/// Each step of the rotation from `OLD` to `NEW`, as one replica's environment.
const ADDED: [(&str, &str); 2] = [("OXP_STATE_KEY", OLD), ("OXP_STATE_KEYS_PREVIOUS", NEW)];
const SWAPPED: [(&str, &str); 2] = [("OXP_STATE_KEY", NEW), ("OXP_STATE_KEYS_PREVIOUS", OLD)];
const DROPPED: [(&str, &str); 1] = [("OXP_STATE_KEY", NEW)];

/// One MCP request to `base`'s `/mcp` at `revision`, with `session` when given; the status, the
/// session id answered, and the last JSON-RPC message.
async fn mcp(
    base: &str,
    revision: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", revision);
    if revision >= "2026-07-28" {
        request = request.header("mcp-method", body["method"].as_str().unwrap());
        if let Some(name) = body["params"]["name"].as_str() {
            request = request.header("mcp-name", name);
        }
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let reply = harness::bounded("the replica answers", request.json(&body).send())
        .await
        .unwrap();
    let status = reply.status().as_u16();
    let session = (reply.headers().get("mcp-session-id")).map(|id| id.to_str().unwrap().to_owned());
    let kind = (reply.headers().get("content-type"))
        .map_or(String::new(), |kind| kind.to_str().unwrap().to_owned());
    let text = harness::bounded("the answer's body", reply.text())
        .await
        .unwrap();
    // A refusal by the transport (a session that ended) may carry no JSON-RPC message.
    let last = match status {
        200 => harness::mcp_messages(&kind, &text).pop().unwrap(),
        _ => Value::String(text),
    };
    (status, session, last)
}

/// One round of a 2026-07-28 `tools/call` of `name` with `arguments`, `extra` params besides.
async fn round(base: &str, name: &str, arguments: Value, extra: Value) -> Value {
    let mut params = json!({"name": name, "arguments": arguments, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }});
    for (key, value) in extra.as_object().unwrap() {
        params[key] = value.clone();
    }
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params});
    let (status, _, answer) = mcp(base, "2026-07-28", None, call).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

/// The next round's params: `answer`'s state, and a yes to each question it asked.
fn yes_to(answer: &Value) -> Value {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let asked = result["inputRequests"].as_object().unwrap();
    let responses: serde_json::Map<String, Value> = (asked.keys())
        .map(|key| (key.clone(), json!({"action": "accept", "content": {}})))
        .collect();
    json!({"requestState": result["requestState"], "inputResponses": responses})
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// A call of three rounds goes back and forth between replicas at adjacent steps: asked at the
/// one still sealing with the old key, answered at the one sealing with the new (which asks its
/// second question under the new key), finished at the first. Then the same between the
/// second and third steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_one_step_apart_continue_each_other_s_calls() {
    let binary = harness::test_example_binary("confirm_server");
    let added = harness::start_server(&binary, &ADDED);
    let swapped = harness::start_server(&binary, &SWAPPED);
    let dropped = harness::start_server(&binary, &DROPPED);
    for (bin, [first, second]) in [
        ("b1", [&added, &swapped]),
        ("b2", [&swapped, &added]),
        ("b3", [&swapped, &dropped]),
        ("b4", [&dropped, &swapped]),
    ] {
        let purge = |base: &str, extra: Value| {
            let base = base.to_owned();
            async move { round(&base, "Files_Purge", json!({"bin": bin}), extra).await }
        };
        let asked = purge(&first.base, json!({})).await;
        assert_eq!(
            asked["result"]["inputRequests"]["oxp.confirm"]["params"]["message"],
            format!("Purge the bin {bin}?"),
            "{asked}"
        );
        let asked_again = purge(&second.base, yes_to(&asked)).await;
        let again = asked_again["result"]["inputRequests"].to_string();
        assert!(
            again.contains(&format!("Also delete every backup of {bin}?")),
            "the second question, from the other replica: {asked_again}"
        );
        let done = purge(&first.base, yes_to(&asked_again)).await;
        assert!(
            text(&done).starts_with(&format!("purged {bin} and its backups (run ")),
            "{done}"
        );
    }
}

/// A session id issued under the old key (an earlier revision's client that can be asked) is
/// still a session at the replica that swapped keys, and a session that ended at the replica
/// that dropped the old key, so its client initializes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_id_outlives_the_swap_and_ends_with_the_old_key() {
    let binary = harness::test_example_binary("confirm_server");
    let added = harness::start_server(&binary, &ADDED);
    let swapped = harness::start_server(&binary, &SWAPPED);
    let dropped = harness::start_server(&binary, &DROPPED);
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let (status, session, _) = mcp(&added.base, "2025-11-25", None, initialize).await;
    assert_eq!(status, 200);
    let session = session.expect("a client that can be asked gets a session id");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    for (replica, expected) in [(&added, 200), (&swapped, 200), (&dropped, 404)] {
        let (status, _, answer) =
            mcp(&replica.base, "2025-11-25", Some(&session), list.clone()).await;
        assert_eq!(status, expected, "{answer}");
    }
}

/// A replica that dropped the old key refuses a state it sealed, saying which key it needs and
/// where; nothing runs, and the same call asked anew goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_dropped_the_old_key_refuses_its_states_clearly() {
    let binary = harness::test_example_binary("confirm_server");
    let added = harness::start_server(&binary, &ADDED);
    let dropped = harness::start_server(&binary, &DROPPED);
    let empty = |base: &str, extra: Value| {
        let base = base.to_owned();
        async move { round(&base, "Files_Empty", json!({"bin": "b9"}), extra).await }
    };
    let asked = empty(&added.base, json!({})).await;
    let refused = empty(&dropped.base, yes_to(&asked)).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("sealed with another key"), "{message}");
    assert!(message.contains("OXP_STATE_KEYS_PREVIOUS"), "{message}");
    assert!(
        !message.contains(OLD) && !message.contains(NEW),
        "no key shown: {message}"
    );
    let anew = empty(&dropped.base, json!({})).await;
    let done = empty(&dropped.base, yes_to(&anew)).await;
    assert!(
        text(&done).starts_with("emptied b9 (run 1 of"),
        "the refused round ran nothing: {done}"
    );
}

/// A bad entry in `OXP_STATE_KEYS_PREVIOUS` stops the server with exit 2, naming the variable
/// and the entry's place, and never showing a key.
#[test]
fn a_short_previous_key_is_named_by_its_place_and_never_shown() {
    let output = std::process::Command::new(harness::example_binary())
        .env("OXP_ADDR", "127.0.0.1:0")
        .env("OXP_STATE_KEY", NEW)
        .env("OXP_STATE_KEYS_PREVIOUS", format!("{OLD}, short-secret"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("OXP_STATE_KEYS_PREVIOUS: entry 2 is shorter than 32 bytes"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("short-secret") && !stderr.contains(OLD),
        "{stderr}"
    );
}
