//! The typed client against a real server on 127.0.0.1: lists, calls, typed errors per status
//! class, tool errors as values, and retries that reuse one `call_id`.

#[path = "harness/mod.rs"]
mod harness;

use std::time::{Duration, Instant};

use harness::Oxp;
use oxp_runtime::client::{Client, ClientError, Dialect, RetryPolicy};
use oxp_runtime::protocol::CallResult;
use oxp_runtime::server::{Server, ServerAuth};
use oxp_tests::runs;
use serde_json::json;

fn server() -> Server {
    Server::new(oxp_tests::all_tools().build().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_calls_in_both_dialects() {
    let oxp = Oxp::start(server()).await;
    for dialect in [Dialect::Envelope, Dialect::Bare] {
        let client = Client::new(&oxp.base).dialect(dialect);
        let tools = client.list().await.unwrap();
        assert!(tools.iter().any(|t| t.id == "Calculator.Add@1.0.0"));
        let response = client
            .call("Calculator.Add", json!({"a": 1, "b": 2}))
            .await
            .unwrap();
        assert_eq!(
            response.result,
            CallResult::Success {
                value: Some(json!(3.0))
            }
        );
        assert!(!response.call_id.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_are_values_and_other_failures_are_typed() {
    let oxp = Oxp::start(server()).await;
    let client = Client::new(&oxp.base).retry(RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    });
    let rung = client
        .call("Doorbell.Ring", json!({"doorbell_id": "d1"}))
        .await
        .unwrap();
    let CallResult::Failure { error } = rung.result else {
        panic!()
    };
    assert_eq!(
        (error.message.as_str(), error.retry_after_ms),
        ("Doorbell ID not found", Some(500))
    );

    let unknown = client.call("Nope.Tool", json!({})).await.unwrap_err();
    assert!(
        matches!(&unknown, ClientError::Server(e) if e.message == "Tool 'Nope_Tool' was not found"),
        "{unknown}"
    );
    let invalid = client
        .call("Calculator.Add", json!({"a": 1}))
        .await
        .unwrap_err();
    let ClientError::Validation(invalid) = invalid else {
        panic!("{invalid}")
    };
    assert!(invalid.parameter_errors.contains_key("b"));
    let missing = client
        .request("SMS.Send")
        .input(json!({"to": "+1", "body": "x"}))
        .send()
        .await
        .unwrap_err();
    assert!(matches!(missing, ClientError::Server(e) if e.missing_requirements.is_some()));
    let sent = client
        .request("SMS.Send")
        .input(json!({"to": "+1", "body": "x"}))
        .secret("TWILIO_API_KEY", "sk-12345")
        .trace_id("t1")
        .send()
        .await
        .unwrap();
    assert!(matches!(sent.result, CallResult::Success { .. }));

    let closed = Client::new("http://127.0.0.1:9").retry(RetryPolicy {
        max_attempts: 2,
        initial_backoff: Duration::from_millis(10),
        ..RetryPolicy::default()
    });
    assert!(matches!(
        closed.list().await.unwrap_err(),
        ClientError::Transport(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_by_api_key_or_bearer() {
    let oxp =
        Oxp::start(server().auth(ServerAuth::default().api_key("client-key-0123456789abcdef")))
            .await;
    assert!(matches!(
        Client::new(&oxp.base).list().await.unwrap_err(),
        ClientError::Unauthorized(_)
    ));
    assert!(
        Client::new(&oxp.base)
            .api_key("client-key-0123456789abcdef")
            .list()
            .await
            .is_ok()
    );
    assert!(
        Client::new(&oxp.base)
            .bearer("client-key-0123456789abcdef")
            .list()
            .await
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_tool_error_is_retried_with_the_same_call_id_after_its_delay() {
    let oxp = Oxp::start(server()).await;
    let client = Client::new(&oxp.base);
    let started = Instant::now();
    let response = client
        .request("Flaky.Once")
        .call_id("flaky-1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.result,
        CallResult::Success {
            value: Some(json!(2))
        }
    );
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "waited retry_after_ms"
    );
    assert_eq!(runs("flaky-1"), 2, "two runs, both under the one call_id");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporarily_unavailable_answers_are_retried_after_retry_after_ms() {
    let oxp = Oxp::start(Server::from_pipeline(
        harness::pipeline().limits(Some(1), 4),
    ))
    .await;
    let busy = Client::new(&oxp.base);
    let slow = tokio::spawn({
        let busy = busy.clone();
        async move { busy.call("Util.Sleep", json!({"ms": 400})).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let response = busy
        .call("Calculator.Add", json!({"a": 1, "b": 1}))
        .await
        .unwrap();
    assert_eq!(
        response.result,
        CallResult::Success {
            value: Some(json!(2.0))
        }
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "honoured Retry-After-Ms: {:?}",
        started.elapsed()
    );
    assert!(slow.await.unwrap().is_ok());
}

/// A server's retry hint is honoured only up to the client's own longest backoff; a
/// hostile or broken server that says "retry in an hour" cannot park the caller for an hour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_retry_hint_is_capped_by_the_clients_backoff() {
    let busy = axum::Router::new().route(
        "/tools/call",
        axum::routing::post(|| async {
            let mut response = axum::response::Response::new(axum::body::Body::from(
                r#"{"message": "The server is temporarily unavailable; retry shortly."}"#,
            ));
            *response.status_mut() = axum::http::StatusCode::BAD_REQUEST;
            let headers = response.headers_mut();
            headers.insert("content-type", "application/json".parse().unwrap());
            headers.insert("oxp-version", "1.0".parse().unwrap());
            headers.insert("retry-after-ms", "3600000".parse().unwrap());
            headers.insert("x-should-retry", "true".parse().unwrap());
            response
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, busy).await.unwrap() });
    let client = Client::new(&base).retry(RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(100),
        retry_tool_errors: true,
    });
    let started = Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(5),
        client.call("Calculator.Add", json!({"a": 1, "b": 2})),
    )
    .await
    .expect("the hint was capped, not slept for an hour");
    assert!(outcome.is_err());
    assert!(started.elapsed() < Duration::from_secs(2));
}
