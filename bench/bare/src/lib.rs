//! The baseline of the load benchmark: a bare axum handler doing the same JSON work as an OXP
//! call of `Calculator.Add` — parse the envelope, add, write the same result shape — with no
//! registry, no validation, no pipeline. The ratio oxp/bare is what the framework costs.

use std::time::Instant;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "$schema")]
    schema: Option<String>,
    request: Request,
}

#[derive(Deserialize)]
struct Request {
    call_id: Option<String>,
    #[allow(dead_code)]
    tool_id: String,
    input: Input,
}

#[derive(Deserialize)]
struct Input {
    a: i64,
    b: i64,
}

#[derive(Serialize)]
struct Answer {
    #[serde(rename = "$schema")]
    schema: String,
    result: Result,
}

#[derive(Serialize)]
struct Result {
    call_id: String,
    duration: f64,
    success: bool,
    value: i64,
}

async fn call(body: axum::body::Bytes) -> Response {
    let started = Instant::now();
    let envelope: Envelope = match serde_json::from_slice(&body) {
        Ok(envelope) => envelope,
        Err(e) => return (axum::http::StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let value = envelope.request.input.a + envelope.request.input.b;
    let answer = Answer {
        schema: envelope.schema.unwrap_or_else(|| "urn:oxp:1.0".into()),
        result: Result {
            call_id: envelope
                .request
                .call_id
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            duration: started.elapsed().as_secs_f64() * 1000.0,
            success: true,
            value,
        },
    };
    let mut response = serde_json::to_vec(&answer).unwrap().into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert("oxp-version", HeaderValue::from_static("1.0"));
    response
}

/// The bare server's routes: `POST /tools/call` only.
pub fn router() -> Router {
    Router::new().route("/tools/call", post(call))
}
