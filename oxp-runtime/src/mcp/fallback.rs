//! What a tool that asks does for a caller whose client cannot answer
//! ([`CannotAsk`](crate::ask::CannotAsk)): refuse, stay out of its `tools/list`, or relay a
//! `confirm` question through the model with a sealed, single-use confirmation.

use rmcp::model::JsonObject;
use serde_json::{Value, json};

use crate::ask::CannotAsk;
use crate::registry::RegisteredTool;

/// The optional argument a relayed tool takes its confirmation in.
pub(crate) const CONFIRMATION: &str = "oxp_confirmation";

/// Whether `tool` is known to ask before it is called: it declares a question
/// (`confirm = "…"`), or says what it does for a caller that cannot answer.
fn asks(tool: &RegisteredTool) -> bool {
    let hints = tool.hints();
    hints.confirm.is_some() || hints.cannot_ask.is_some()
}

/// What `tool` does for a caller that cannot answer, given the server's `default`: only a tool
/// known to ask is hidden, and only a `confirm` question is relayed.
pub(crate) fn policy(tool: &RegisteredTool, default: CannotAsk) -> CannotAsk {
    let hints = tool.hints();
    match hints.cannot_ask.unwrap_or(default) {
        CannotAsk::Hide if asks(tool) => CannotAsk::Hide,
        CannotAsk::Relay if hints.confirm.is_some() => CannotAsk::Relay,
        _ => CannotAsk::Refuse,
    }
}

/// A relayed tool's listed input schema gains the optional confirmation argument.
pub(crate) fn add_confirmation_argument(input: &mut JsonObject) {
    if let Some(Value::Object(properties)) = input.get_mut("properties") {
        properties.insert(
            CONFIRMATION.into(),
            json!({"type": "string", "description": "Leave out. When a call of this tool \
                answers that it needs its user's confirmation, ask the user its question; only \
                if they say yes, call again with the same arguments and this set to the \
                confirmation that answer gave."}),
        );
    }
}

/// The answer to a relayed tool's first call by a client that cannot ask: the question, and
/// the sealed `confirmation` to call again with once the user says yes.
pub(crate) fn relay_text(tool_name: &str, question: &str, confirmation: &str) -> String {
    format!(
        "This tool needs its user's confirmation, and this client cannot ask for it. Ask the \
         user: \"{question}\". Only if they say yes, call {tool_name} again with the same \
         arguments and \"{CONFIRMATION}\": \"{confirmation}\". Nothing has run yet."
    )
}
