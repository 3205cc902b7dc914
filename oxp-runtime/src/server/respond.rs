//! Writing answers: every response the server builds itself, in the caller's dialect, and the
//! error bodies it answers before any tool is involved. (`OXP-Version` is the guard's to add.)

use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde::Serialize;
use serde_json::{Value, json};

use super::body::BodyFailure;
use super::dialect::{self, DEFAULT_SCHEMA, Dialect};
use crate::call::CallOutcome;

pub(super) fn json_response(status: StatusCode, body: &impl Serialize) -> Response {
    let mut bytes = Vec::with_capacity(256);
    serde_json::to_writer(&mut bytes, body).expect("wire types serialize");
    json_bytes(status, bytes)
}

pub(super) fn json_bytes(status: StatusCode, bytes: impl Into<Bytes>) -> Response {
    response(status, "application/json", bytes.into())
}

/// Every response the server builds itself goes through here. (`OXP-Version` is the guard's to
/// add, to every answer alike: these, axum's own rejections, and the nested fronts'.)
pub(super) fn response(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Body>,
) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

pub(super) fn too_large(limit: usize) -> Response {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        "The request body is too large.",
        &format!("the limit is {limit} bytes"),
    )
}

/// A body that could not be read: over the cap is a `413`; too slow or cut off, a `400`.
pub(super) fn body_failure(error: &axum::Error, limit: usize) -> Response {
    match BodyFailure::of(error) {
        BodyFailure::TooLarge => too_large(limit),
        BodyFailure::OverBudget => error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "This connection is sending too many request bodies at once.",
            "the bodies in flight on one connection are capped (ConnectionLimits::max_buffered_bytes)",
        ),
        BodyFailure::TooSlow => error_response(
            StatusCode::BAD_REQUEST,
            "The request body did not arrive in time.",
            "the whole body must arrive within the server's body timeout (OXP_BODY_TIMEOUT_MS)",
        ),
        BodyFailure::Broken => error_response(
            StatusCode::BAD_REQUEST,
            "The request body could not be read.",
            "the connection failed or the body's framing was broken mid-way",
        ),
    }
}

/// An error the server answers before any tool is involved, in the `ServerErrorResponse` shape.
pub(super) fn error_response(
    status: StatusCode,
    message: &str,
    developer_message: &str,
) -> Response {
    json_response(
        status,
        &json!({ "message": message, "developer_message": developer_message }),
    )
}

/// The HTTP answer to a call's outcome.
pub(super) fn respond(dialect: &Dialect, outcome: CallOutcome, compat: bool) -> Response {
    match &outcome {
        CallOutcome::Completed(response) => answer(dialect, StatusCode::OK, response, compat),
        CallOutcome::Rejected(error) => answer(dialect, StatusCode::BAD_REQUEST, error, false),
        CallOutcome::Unavailable {
            error,
            retry_after_ms,
        } => {
            // The SDKs' retry logic reads these (oxp-notes §5): wait, then try again.
            let mut response = answer(dialect, StatusCode::BAD_REQUEST, error, false);
            let headers = response.headers_mut();
            headers.insert("retry-after-ms", HeaderValue::from(*retry_after_ms));
            headers.insert("x-should-retry", HeaderValue::from_static("true"));
            response
        }
        CallOutcome::Invalid(error) => {
            answer(dialect, StatusCode::UNPROCESSABLE_ENTITY, error, false)
        }
    }
}

/// Error bodies go back in the dialect the request looked like, even when it did not parse:
/// an `OXP-Version` header without an envelope means bare.
pub(super) fn dialect_guess(headers: &HeaderMap, body: &[u8]) -> Dialect {
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let enveloped = parsed.as_ref().is_some_and(|v| v.get("request").is_some());
    if headers.contains_key("oxp-version") && !enveloped {
        return Dialect::Bare;
    }
    let schema = parsed
        .as_ref()
        .and_then(|v| v.get("$schema").and_then(Value::as_str))
        .filter(|s| dialect::schema_major(s) == Some(1));
    Dialect::Envelope(std::borrow::Cow::Owned(
        schema.unwrap_or(DEFAULT_SCHEMA).to_owned(),
    ))
}

/// Writes a call's answer: a `200` result wrapped in the envelope (or bare), and `400`/`422`
/// bodies at the top level with `$schema` added in the envelope dialect (oxp-notes §2, §3.36).
pub(super) fn answer(
    dialect: &Dialect,
    status: StatusCode,
    body: &impl Serialize,
    compat: bool,
) -> Response {
    /// The common answer, written straight out with no intermediate `Value`.
    #[derive(Serialize)]
    struct Enveloped<'a, T> {
        #[serde(rename = "$schema")]
        schema: &'a str,
        result: &'a T,
    }
    let value = match dialect {
        Dialect::Bare => return json_response(status, body),
        Dialect::Envelope(schema) if status == StatusCode::OK && !compat => {
            return json_response(
                status,
                &Enveloped {
                    schema,
                    result: body,
                },
            );
        }
        _ => serde_json::to_value(body).expect("wire types serialize"),
    };
    let value = match dialect {
        Dialect::Bare => value,
        Dialect::Envelope(schema) if status == StatusCode::OK => {
            let mut envelope = serde_json::Map::new();
            envelope.insert("$schema".into(), Value::String(schema.to_string()));
            if compat {
                // LangChain's clients read `success`/`value` at the top (oxp-notes §3.2); the
                // envelope is open, so the copies keep it schema-valid.
                if let Value::Object(result) = &value {
                    for (k, v) in result {
                        envelope.insert(k.clone(), v.clone());
                    }
                }
            }
            envelope.insert("result".into(), value);
            Value::Object(envelope)
        }
        Dialect::Envelope(schema) => dialect::with_schema(value, Some(schema)),
    };
    json_response(status, &value)
}
