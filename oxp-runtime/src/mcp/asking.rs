//! A call's rounds over MCP 2026-07-28 (SEP-2322): what the client can answer, and the round's
//! end, an `input_required` result whose `requestState` seals the answers so far
//! ([`seal`](crate::seal)).

use rmcp::model::InputRequiredResult;

use crate::ask::{Capability, Round};

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

/// The round's end when it asked: its asks, and the answers so far sealed for the next round
/// (`state` is called only then).
pub(crate) fn input_required(
    round: &Round,
    state: impl FnOnce() -> String,
) -> Option<InputRequiredResult> {
    let asked = round.asked();
    if asked.is_empty() {
        return None;
    }
    let requests = asked
        .into_iter()
        .filter_map(|(key, request)| Some((key, serde_json::from_value(request).ok()?)))
        .collect();
    let mut result = InputRequiredResult::from_request_state(state());
    result.input_requests = Some(requests);
    Some(result)
}
