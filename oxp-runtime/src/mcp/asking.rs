//! A call's rounds over MCP 2026-07-28 (SEP-2322): the answers a round carries, read from its
//! sealed `requestState` and its `inputResponses`; and the round's end, an `input_required`
//! result whose `requestState` seals the answers so far.
//!
//! The state is sealed (HMAC, rmcp's `RequestStateCodec`) with the server's key and bound to
//! the tool as resolved, its input, the caller and the user; it expires. Nothing is stored on
//! the server, so any replica holding the same key continues any call.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{InputRequiredResult, RequestStateCodec, SealOptions};
use serde_json::Value;

use crate::ask::{Capability, Round};
use crate::idempotency::Fingerprint;

/// The largest `requestState` read: a state carries the answers of earlier rounds, which a
/// form or a model's answer keeps small; anything larger is not one of ours.
const MAX_STATE_BYTES: usize = 256 * 1024;

/// How long a round's state is good for, by default: long enough for a person to answer.
pub(crate) const DEFAULT_STATE_TTL: Duration = Duration::from_secs(15 * 60);

/// The server's key for request states, and how long they live.
#[derive(Clone)]
pub(crate) struct Sealer {
    codec: Arc<RequestStateCodec>,
    ttl: Duration,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("ttl", &self.ttl).finish()
    }
}

/// Why a round's state was refused.
#[derive(Debug)]
pub(crate) struct BadState(pub(crate) &'static str);

impl Sealer {
    /// A sealer with `key` (at least 32 bytes), or with a key of its own when none is given.
    pub(crate) fn new(key: Option<&[u8]>, ttl: Duration) -> Result<Self, String> {
        let codec = match key {
            Some(key) => RequestStateCodec::try_new(key.to_vec()).map_err(|e| e.to_string())?,
            None => {
                let mut key = [0u8; 32];
                getrandom::fill(&mut key).map_err(|e| e.to_string())?;
                RequestStateCodec::try_new(key.to_vec()).map_err(|e| e.to_string())?
            }
        };
        Ok(Sealer {
            codec: Arc::new(codec),
            ttl,
        })
    }

    /// What a state is bound to: the tool as resolved, its input, the caller and the user.
    fn binding(tool_id: &str, input: &Value, principal: &str, user: &str) -> Vec<u8> {
        let call = Fingerprint::of(tool_id, input, &[]).to_hex();
        format!(
            "{call}:{}:{principal}{}:{user}",
            principal.len(),
            user.len()
        )
        .into_bytes()
    }

    /// The answers a state carries, if it is ours, for this call, and not expired.
    pub(crate) fn open(
        &self,
        state: &str,
        tool_id: &str,
        input: &Value,
        principal: &str,
        user: &str,
    ) -> Result<BTreeMap<String, Value>, BadState> {
        if state.len() > MAX_STATE_BYTES {
            return Err(BadState(
                "requestState is larger than any this server makes",
            ));
        }
        let binding = Self::binding(tool_id, input, principal, user);
        // One answer for every failure, as the codec asks: which check failed is no one's
        // business but the server's.
        self.codec.open_json_with(state, &binding).map_err(|_| {
            BadState(
                "requestState failed its integrity check: it was altered, has expired, or \
                 belongs to another call, caller or server",
            )
        })
    }

    /// A sealed state carrying `answers`.
    pub(crate) fn seal(
        &self,
        answers: &BTreeMap<String, Value>,
        tool_id: &str,
        input: &Value,
        principal: &str,
        user: &str,
    ) -> String {
        let binding = Self::binding(tool_id, input, principal, user);
        let options = SealOptions::new().associated_data(&binding).ttl(self.ttl);
        self.codec
            .seal_json_with(answers, &options)
            .expect("a map of JSON values serializes")
    }
}

/// Which asks a client can answer: what it declared in the request's `_meta` (2026-07-28);
/// none before (those revisions cannot carry an `input_required` result).
pub(crate) fn supports(
    capabilities: Option<&rmcp::model::ClientCapabilities>,
) -> impl Fn(Capability) -> bool + '_ {
    move |capability| {
        capabilities.is_some_and(|c| match capability {
            Capability::Elicitation => c.elicitation.is_some(),
            Capability::Sampling => c.sampling.is_some(),
            Capability::Roots => c.roots.is_some(),
        })
    }
}

/// The round's end when it asked: its asks, and the answers so far sealed for the next round.
pub(crate) fn input_required(round: &Round, state: String) -> Option<InputRequiredResult> {
    let asked = round.asked();
    if asked.is_empty() {
        return None;
    }
    let requests = asked
        .into_iter()
        .filter_map(|(key, request)| Some((key, serde_json::from_value(request).ok()?)))
        .collect();
    let mut result = InputRequiredResult::from_request_state(state);
    result.input_requests = Some(requests);
    Some(result)
}
