//! Secrets, tokens, API keys and JWTs never reach a log line or an error message: a full call
//! cycle at TRACE level, with careless tools that put their key into errors and panics.

#[path = "harness/mod.rs"]
mod harness;

use std::time::{SystemTime, UNIX_EPOCH};

use harness::Oxp;
use oxp_runtime::authorization::InMemoryAuthorization;
use oxp_runtime::server::{Server, ServerAuth};
use reqwest::Method;
use serde_json::json;

const CANARY: &str = "LEAKCANARY";
const API_KEY: &str = "k_LEAKCANARY_0123456789abcdef01234567";
const JWT_SECRET: &str = "jwt-LEAKCANARY-secret-of-32-bytes-or-more";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_a_log_line_or_a_response() {
    // Every line at TRACE, the panic hook installed.
    let logs = harness::Log::captured();

    let pipeline = harness::pipeline().authorization(InMemoryAuthorization::new(
        "https://auth.example.com/authorize",
    ));
    let server = Server::from_pipeline(pipeline).auth(
        ServerAuth::default()
            .jwt_secret(JWT_SECRET)
            .api_key(API_KEY),
    );
    let oxp = Oxp::start(server).await;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let jwt = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"sub": "u1", "exp": now + 300}),
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap();

    let secret = |id: &str| json!({"secrets": [{"id": id, "value": format!("sk-{CANARY}-{id}")}]});
    let calls = [
        json!({"tool_id": "SMS.Send", "input": {"to": "+1", "body": "hi"}, "context": secret("TWILIO_API_KEY")}),
        json!({"tool_id": "Gmail.GetEmails", "context": {"user_id": "u1", "authorization": [{"id": "google", "token": format!("ya29.{CANARY}.token")}]}}),
        json!({"tool_id": "Leaky.Fail", "context": secret("LEAKY_KEY")}),
        json!({"tool_id": "Leaky.Panic", "context": secret("LEAKY_KEY")}),
        json!({"tool_id": "Gmail.GetEmails", "context": {"user_id": "u1", "authorization": [{"id": "other", "token": format!("ya29.{CANARY}.other")}]}}),
    ];
    let mut answers = String::new();
    for request in calls {
        for auth in [
            ("OXP-API-Key", API_KEY.to_owned()),
            ("Authorization", format!("Bearer {jwt}")),
        ] {
            let reply = oxp
                .call_with(
                    oxp.request(Method::POST, "/tools/call")
                        .header(auth.0, &auth.1)
                        .json(&json!({"request": request})),
                )
                .await;
            assert!(reply.status == 200 || reply.status == 400, "{reply:?}");
            answers.push_str(&reply.body.to_string());
        }
    }
    // Refused credentials are not echoed or logged either.
    let refused = oxp
        .send(
            oxp.request(Method::GET, "/tools")
                .header("X-API-Key", format!("wrong-{CANARY}")),
        )
        .await;
    assert_eq!(refused.status, 401);
    answers.push_str(&refused.body.to_string());

    let logs = logs.text();
    assert!(logs.contains("call finished"), "the capture works:\n{logs}");
    assert!(
        logs.contains("tool panicked"),
        "the panic is logged:\n{logs}"
    );
    assert!(
        answers.contains("<redacted>"),
        "careless errors are scrubbed: {answers}"
    );
    for (what, text) in [("a log line", &logs), ("a response", &answers)] {
        assert!(!text.contains(CANARY), "a secret reached {what}:\n{text}");
        assert!(!text.contains(&jwt), "the JWT reached {what}");
    }
}
