//! The server's own requests to an earlier revision's HTTP client (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`), and their answers, on any replica.
//!
//! The request goes out on the waiting call's SSE stream with an id of 122 random bits
//! (`oxp-ask-<uuid>`). The client POSTs its answer to `/mcp` as a JSON-RPC response, and the
//! load balancer may send that POST to any replica; so the question is a record in the store
//! replicas share (memory, or Redis with `OXP_REDIS_URL`), keyed by the id *and the caller*:
//! the replica that receives the answer writes it into the record, once, and the call waiting
//! on its own replica reads it there. Another caller's answer finds no record; a second answer
//! finds the record answered; neither changes anything. The record lives as long as a
//! question may wait (`OXP_STATE_TTL_MS`) and counts in its caller's share of the store.
//!
//! What the answer then does is the asking core's: it is matched to the question asked,
//! validated, and the tool runs again with it, as in every round.

use std::time::Duration;

use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientJsonRpcMessage, ClientResult, NumberOrString, ServerJsonRpcMessage, ServerRequest,
};
use serde_json::{Value, json};

use super::super::McpServer;
use super::super::exchange::Exchange;
use super::Stream;
use crate::idempotency::StoreError;

/// The ids of the server's own requests.
const PREFIX: &str = "oxp-ask-";

/// A question's record before its answer.
const WAITING: &str = r#"{"waiting":true}"#;

/// How often the waiting call looks for its answer, at first and at most.
const FIRST_LOOK: Duration = Duration::from_millis(20);
const LOOK_AT_MOST: Duration = Duration::from_millis(250);

impl McpServer {
    /// Asks `request` of the client on `stream` and waits (at most `wait`) for its answer,
    /// POSTed to any replica.
    pub(in crate::mcp) async fn ask_over_http(
        &self,
        exchange: &Exchange,
        stream: &Stream,
        request: ServerRequest,
        wait: Duration,
    ) -> Result<ClientResult, String> {
        let store = self.pipeline.store().ok_or(
            "this server keeps no store (OXP_IDEMPOTENCY_TTL_MS=0), where an answer POSTed to \
             another request could reach this call",
        )?;
        let ask = crate::random::uuid_v4().simple().to_string();
        let key = self.task_key_for(exchange, &record_id(&ask));
        match store.create_record(&key, WAITING.to_owned(), wait).await {
            Ok(true) => {}
            Ok(false) => return Err("the question's id was taken".into()),
            Err(StoreError::CallerFull) => {
                return Err("it was not asked: this caller's share of the store \
                            (OXP_TASKS_PER_CALLER) is full of its questions and tasks; \
                            call again when some have ended"
                    .into());
            }
            Err(StoreError::Full) => {
                return Err("it was not asked: the store is full; call again shortly".into());
            }
            Err(error) => return Err(format!("the question could not be kept: {error}")),
        }
        let id = NumberOrString::String(format!("{PREFIX}{ask}").into());
        if stream
            .send(ServerJsonRpcMessage::request(request, id))
            .await
            .is_err()
        {
            let _ = store.remove_record(&key).await;
            return Err("the client is gone".into());
        }
        let answer = tokio::time::timeout(wait, async {
            let mut look = FIRST_LOOK;
            loop {
                match store.read_record(&key).await {
                    Ok(Some(record)) if record.body != WAITING => return Ok(record.body),
                    Ok(Some(_)) => {}
                    Ok(None) => return Err("the question expired".to_owned()),
                    // A store that stalls is looked at again: the answer may be there.
                    Err(_) => {}
                }
                tokio::time::sleep(look).await;
                look = (look * 2).min(LOOK_AT_MOST);
            }
        })
        .await;
        let _ = store.remove_record(&key).await;
        let body =
            answer.map_err(|_| format!("it was not answered within {} ms", wait.as_millis()))??;
        let answer: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        if let Some(error) = answer.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("");
            return Err(format!("the client answered with an error: {message}"));
        }
        serde_json::from_value(answer["result"].clone())
            .map_err(|e| format!("the answer is not one MCP defines: {e}"))
    }

    /// A JSON-RPC response or error POSTed to `/mcp`: the answer to a question of this
    /// server's, from the caller it was asked of, kept for the call that waits on it, once.
    pub(super) async fn answered(&self, parts: &Parts, message: ClientJsonRpcMessage) -> Response {
        let (id, answer) = match message {
            ClientJsonRpcMessage::Response(response) => (
                response.id,
                json!({"result": serde_json::to_value(response.result).unwrap_or_default()}),
            ),
            ClientJsonRpcMessage::Error(error) => match error.id {
                Some(id) => (id, json!({"error": error.error})),
                None => return accepted(), // an error about nothing in particular
            },
            _ => unreachable!("only answers come here"),
        };
        let unknown = || {
            refused(
                StatusCode::NOT_FOUND,
                "no question of this server's has this id for this caller (it was answered, \
                 expired, or asked of someone else)",
            )
        };
        let Some(ask) = (match &id {
            NumberOrString::String(id) => id.strip_prefix(PREFIX),
            NumberOrString::Number(_) => None,
        }) else {
            return unknown();
        };
        let Some(store) = self.pipeline.store() else {
            return unknown();
        };
        let principal = crate::mcp::exchange::principal_in(parts);
        let key = self.key_of(principal, true, &record_id(ask));
        let answered = async {
            let Some(record) = store.read_record(&key).await? else {
                return Ok(false);
            };
            if record.body != WAITING {
                return Ok(false);
            }
            store
                .replace_record(&key, record.version, answer.to_string())
                .await
        };
        match answered.await {
            Ok(true) => accepted(),
            Ok(false) => unknown(),
            Err(StoreError::Full | StoreError::CallerFull) => refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the answer is larger than this caller's share of the store can keep",
            ),
            Err(error) => refused(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the answer could not be kept: {error}; send it again"),
            ),
        }
    }
}

/// The record of question `ask`.
fn record_id(ask: &str) -> String {
    format!("ask:{ask}")
}

fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

fn refused(status: StatusCode, message: &str) -> Response {
    let error = McpError::invalid_request(message.to_owned(), None);
    super::json(&ServerJsonRpcMessage::error(error, None), status)
}
