//! `prompts/list`, `prompts/get` and `completion/complete`: the registry's `#[prompt]`s,
//! rendered through the pipeline, and the values offered for prompt arguments and resource
//! template parameters.

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CacheScope, CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage,
    Reference,
};
use serde_json::{Map, Value};

use crate::ask::{Capability, Round};
use crate::call::{CallMeta, Front, ReadError};
use crate::principal::Grant;
use crate::registry::Registry;
use crate::signals::CallSignals;
use crate::time::millis;

use super::exchange::Exchange;

/// Every prompt the caller's scopes reach (as `tools/list` shows tools), with its arguments.
pub(super) fn list(registry: &Registry, grant: &Grant, ttl: Duration) -> ListPromptsResult {
    let prompts = registry
        .prompts()
        .iter()
        .filter(|prompt| grant.allows(prompt.descriptor().scopes))
        .map(|prompt| {
            let d = prompt.descriptor();
            let arguments: Vec<PromptArgument> = d
                .arguments
                .iter()
                .zip(prompt.required())
                .map(|(argument, required)| {
                    let mut listed = PromptArgument::new(argument.name).with_required(required);
                    if !argument.description.is_empty() {
                        listed = listed.with_description(argument.description);
                    }
                    listed
                })
                .collect();
            let description = Some(d.description).filter(|text| !text.is_empty());
            let mut listed = Prompt::new(d.name, description, Some(arguments));
            if let Some(title) = d.title {
                listed = listed.with_title(title);
            }
            listed
        })
        .collect();
    ListPromptsResult::with_all_items(prompts)
        .with_ttl_ms(millis(ttl))
        .with_cache_scope(CacheScope::Private)
}

/// Renders a prompt; a name no prompt has is `-32602`, naming it. A prompt asks as a tool does
/// (its `ToolContext`'s `ask`, `sample`, `roots`): over 2026-07-28 the get ends in an
/// `input_required` result whose sealed `requestState` is bound to the prompt, its arguments
/// and the caller, and the client's next get with the answers renders it.
pub(super) async fn get(
    server: &super::McpServer,
    request: GetPromptRequestParams,
    exchange: &Exchange,
) -> Result<GetPromptResponse, McpError> {
    let pipeline = &server.pipeline;
    let arguments: Map<String, Value> = request.arguments.unwrap_or_default().into_iter().collect();
    let principal = exchange.caller();
    let input = Value::Object(arguments.clone());
    let binding = crate::seal::Binding::prompt(&request.name, &input, principal.as_deref());
    let ledger = match request.request_state.as_deref() {
        Some(state) => Some(server.open_state(state, &binding, "requestState")?),
        None => None,
    };
    let newest = exchange.newest();
    let client = super::asking::supports(exchange.capabilities.as_ref().filter(|_| newest));
    if let Some(capability) = super::asking::lacking(ledger.as_ref(), &client) {
        return Err(cannot_ask(capability, newest));
    }
    let round = Round::resume(ledger, request.input_responses.unwrap_or_default(), &client);
    let meta = CallMeta {
        front: Front::Mcp,
        signals: CallSignals::new().asking(&round),
        ..CallMeta::default()
    };
    let get = tokio::select! {
        get = pipeline.get_prompt(&request.name, arguments, &meta) => get,
        () = exchange.cancelled() => {
            return Err(McpError::internal_error("the get was cancelled", None));
        }
    };
    let messages = match get {
        Ok(messages) => messages,
        Err(ReadError::Failed(_)) if round.next().is_some() => {
            let ledger = round.next().expect("checked just above");
            let asked = server
                .input_required(&round, ledger, &binding)
                .map_err(|problem| {
                    McpError::internal_error(
                        format!("The prompt's question could not be sent: {problem}."),
                        None,
                    )
                })?;
            return Ok(asked.into());
        }
        Err(ReadError::Failed(_)) if round.unsupported().is_some() => {
            let capability = round.unsupported().expect("checked just above");
            return Err(cannot_ask(capability, newest));
        }
        Err(error) => {
            return Err(super::resources::error_of(error, "prompt", &request.name));
        }
    };
    let messages = messages
        .into_iter()
        .map(|message| {
            serde_json::to_value(message)
                .and_then(serde_json::from_value::<PromptMessage>)
                .map_err(|e| McpError::internal_error(e.to_string(), None))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut result = GetPromptResult::new(messages);
    if let Some(prompt) = pipeline.registry().prompt(&request.name) {
        result = result.with_description(prompt.descriptor().description);
    }
    Ok(result.into())
}

/// A prompt that asks what this client cannot answer: 2026-07-28's "missing required client
/// capability", or, before, an error naming the revision's limit.
fn cannot_ask(capability: Capability, newest: bool) -> McpError {
    if newest {
        let required: rmcp::model::ClientCapabilities =
            serde_json::from_value(capability.declared()).unwrap_or_default();
        let mut error = McpError::missing_required_client_capability(required);
        error.message = format!(
            "This prompt needs to ask through {}, which this client did not declare",
            capability.name()
        )
        .into();
        return error;
    }
    McpError::invalid_request(
        format!(
            "This prompt asks through {} while it is rendered, which MCP carries from revision 2026-07-28",
            capability.name()
        ),
        None,
    )
}

/// The values offered for a prompt's argument or a resource template's parameter: from the
/// author's `#[complete]` fn, or the enum's variants that start with what was typed.
pub(super) fn complete(
    registry: &Registry,
    request: &CompleteRequestParams,
) -> Result<CompleteResult, McpError> {
    let (argument, typed) = (&request.argument.name, &request.argument.value);
    let offered = match &request.r#ref {
        Reference::Prompt(reference) => registry
            .prompt(&reference.name)
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!("Prompt not found: {}", reference.name),
                    Some(serde_json::json!({ "name": reference.name })),
                )
            })?
            .complete(argument, typed),
        Reference::Resource(reference) => registry
            .resources()
            .iter()
            .find(|r| r.descriptor().uri == reference.uri)
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!("Resource template not found: {}", reference.uri),
                    Some(serde_json::json!({ "uri": reference.uri })),
                )
            })?
            .complete(argument, typed),
        _ => None,
    };
    let Some((values, total)) = offered else {
        return Err(McpError::invalid_params(
            format!("no argument `{argument}` to complete"),
            None,
        ));
    };
    let more = total > values.len();
    let total = u32::try_from(total).unwrap_or(u32::MAX);
    let completion = CompletionInfo::with_pagination(values, Some(total), more)
        .map_err(|e| McpError::internal_error(e, None))?;
    Ok(CompleteResult::new(completion))
}
