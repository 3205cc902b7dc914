//! A call's rounds over MCP 2026-07-28 (SEP-2322): what the client can answer, and the round's
//! end, an `input_required` result whose `requestState` seals the answers so far
//! ([`seal`](crate::seal)).

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::InputRequiredResult;
use serde_json::Value;

use crate::ask::{Capability, Round};
use crate::seal::{Binding, Ledger};

use super::exchange::{Back, Exchange};

/// The most rounds of questions one call may ask by requests of the server's own: a tool that
/// keeps asking must not hold its client forever.
pub(crate) const MAX_ROUNDS: usize = 16;

/// Whether the server can ask this request's client by requests of its own, mid-call: over a
/// connection, and over HTTP on the call's stream when the client declared what it answers
/// at `initialize` (its session id carries that); from 2026-07-28 a call asks by ending its
/// round instead.
pub(crate) fn by_request(exchange: &Exchange) -> bool {
    !exchange.newest()
        && match exchange.back {
            Back::Connection(_) => true,
            Back::Stream(_) => exchange.capabilities.is_some(),
        }
}

impl super::McpServer {
    /// Asks `asked` (MCP request shapes, by key) of the request's client by requests of the
    /// server's own, one after another, waiting at most `wait` for each (a person answers);
    /// the answers by key.
    pub(crate) async fn ask_by_request(
        &self,
        exchange: &Exchange,
        asked: BTreeMap<String, Value>,
        wait: Duration,
    ) -> Result<BTreeMap<String, Value>, String> {
        let mut answers = BTreeMap::new();
        for (key, request) in asked {
            let answer = self.ask_one(exchange, &key, request, wait).await?;
            answers.insert(key, answer);
        }
        Ok(answers)
    }

    async fn ask_one(
        &self,
        exchange: &Exchange,
        key: &str,
        request: Value,
        wait: Duration,
    ) -> Result<Value, String> {
        let request: rmcp::model::ServerRequest = serde_json::from_value(request)
            .map_err(|e| format!("The tool's question `{key}` is not one MCP can carry: {e}."))?;
        let asked = async {
            match &exchange.back {
                Back::Connection(peer) => {
                    let options = rmcp::service::PeerRequestOptions::no_options();
                    let handle = (peer.send_request_with_option(request, options).await)
                        .map_err(|e| e.to_string())?;
                    handle.await_response().await.map_err(|e| e.to_string())
                }
                Back::Stream(stream) => self.ask_over_http(exchange, stream, request, wait).await,
            }
        };
        // Bounded here rather than by the peer's own option: a client that never answers
        // must not hold the call past the wait.
        let answer = match tokio::time::timeout(wait, asked).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => {
                return Err(format!(
                    "The tool's question `{key}` got no answer: {error}."
                ));
            }
            Err(_) => {
                return Err(format!(
                    "The tool's question `{key}` was not answered within {} ms.",
                    wait.as_millis()
                ));
            }
        };
        serde_json::to_value(answer).map_err(|e| e.to_string())
    }
}

/// Which asks a client can answer: what it declared in the request's `_meta` (2026-07-28);
/// none before (those revisions cannot carry an `input_required` result).
pub(crate) fn supports(
    capabilities: Option<&rmcp::model::ClientCapabilities>,
) -> impl Fn(Capability) -> bool + '_ {
    move |capability| {
        capabilities.is_some_and(|c| match capability {
            // An empty `elicitation` object declares forms alone (2025-11-25 on).
            Capability::Elicitation => c
                .elicitation
                .as_ref()
                .is_some_and(|e| e.form.is_some() || e.url.is_none()),
            Capability::UrlElicitation => c.elicitation.as_ref().is_some_and(|e| e.url.is_some()),
            Capability::Sampling => c.sampling.is_some(),
            Capability::Roots => c.roots.is_some(),
            // A kind of ask this front does not know: no client declares it here.
            _ => false,
        })
    }
}

/// What a round presented with `ledger` needs of its client that `can` says it cannot give:
/// such a round is refused before it runs (it neither runs nor uses its call up).
pub(crate) fn lacking(
    ledger: Option<&Ledger>,
    can: impl Fn(Capability) -> bool,
) -> Option<Capability> {
    (ledger.into_iter())
        .flat_map(|ledger| ledger.needs.iter())
        .filter_map(|name| Capability::from_name(name))
        .find(|capability| !can(*capability))
}

impl super::McpServer {
    /// The ledger a request's `state` carries (named `what` in the refusal), bound to
    /// `binding`; a refused state is counted and answered -32602 saying which check failed.
    pub(crate) fn open_state(
        &self,
        state: &str,
        binding: &Binding<'_>,
        what: &str,
    ) -> Result<Ledger, rmcp::ErrorData> {
        (self.sealer)
            .open_counted(state, binding, self.pipeline.metrics_handle())
            .map_err(|bad| {
                rmcp::ErrorData::invalid_params(format!("The {what} {}.", bad.reason()), None)
            })
    }

    /// The end of a round that asked: its asks, and `ledger` sealed for the next round. Every
    /// ask goes out: one MCP's types cannot carry, or a state too large to come back, is an
    /// error here, never a request left out (the tool checks its forms when it asks; this is
    /// the last line).
    pub(crate) fn input_required(
        &self,
        round: &Round,
        ledger: Ledger,
        binding: &Binding<'_>,
    ) -> Result<InputRequiredResult, String> {
        let state = self
            .sealer
            .seal(ledger, binding)
            .map_err(|too_large| too_large.to_string())?;
        let requests = round
            .asked()
            .into_iter()
            .map(|(key, request)| match serde_json::from_value(request) {
                Ok(request) => Ok((key, request)),
                Err(error) => Err(format!("the ask `{key}` is not one MCP can carry: {error}")),
            })
            .collect::<Result<_, _>>()?;
        let mut result = InputRequiredResult::from_request_state(state);
        result.input_requests = Some(requests);
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// The ask core's reading of what a form may hold agrees with MCP's types: a schema it
    /// lets a tool ask is one rmcp can send, and one it refuses is one rmcp cannot.
    #[test]
    fn the_form_rule_is_mcp_s() {
        let fields = [
            json!({"type": "string"}),
            json!({"type": "string", "format": "email"}),
            json!({"type": "string", "format": "date-time", "minLength": 1}),
            json!({"type": "string", "format": "ipv4"}),
            json!({"type": "integer", "minimum": 1, "maximum": 5}),
            json!({"type": "number"}),
            json!({"type": "boolean", "default": true}),
            json!({"type": "string", "enum": ["a", "b"]}),
            json!({"type": "string", "oneOf": [{"const": "a", "title": "A"}]}),
            json!({"type": "string", "oneOf": [{"const": "a", "description": "A"}]}),
            json!({"oneOf": [{"type": "object", "properties": {"r": {"type": "number"}}}]}),
            json!({"type": "array", "items": {"type": "string", "enum": ["x", "y"]}}),
            json!({"type": "array", "items": {"type": "string"}}),
            json!({"type": "object", "properties": {}}),
            json!({"type": ["string", "null"]}),
        ];
        for field in fields {
            let schema = json!({"type": "object", "properties": {"f": field}});
            let ours = crate::ask::form_problem(&schema);
            // What rmcp would send: a schema it cannot read, or reads only in part, loses
            // what the tool asked for.
            let carried = serde_json::from_value::<rmcp::model::ElicitationSchema>(schema.clone())
                .ok()
                .and_then(|read| serde_json::to_value(read).ok());
            let intact = carried
                .as_ref()
                .map(|c| c["properties"]["f"] == schema["properties"]["f"]);
            assert_eq!(
                ours.is_none(),
                intact == Some(true),
                "{field}: ours {ours:?}, rmcp carries {carried:?}"
            );
        }
    }
}
