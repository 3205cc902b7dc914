//! `OXP_ADDR=127.0.0.1:8001 cargo run --release -p bare`

use std::time::Instant;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
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

#[tokio::main]
async fn main() {
    let addr = std::env::var("OXP_ADDR").unwrap_or_else(|_| "127.0.0.1:8001".into());
    let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
    println!("bare serving on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, Router::new().route("/tools/call", post(call)))
        .await
        .unwrap();
}
