//! `prompts/list`, `prompts/get` and `completion/complete`: the registry's `#[prompt]`s,
//! rendered through the pipeline, and the values offered for prompt arguments and resource
//! template parameters.

use std::time::Duration;

use rmcp::model::{
    CacheScope, CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams,
    GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage, Reference,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Map, Value};

use crate::call::{CallMeta, Front, Pipeline};
use crate::registry::Registry;

/// Every prompt, with its arguments.
pub(super) fn list(registry: &Registry, ttl: Duration) -> ListPromptsResult {
    let prompts = registry
        .prompts()
        .iter()
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
        .with_ttl_ms(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
        .with_cache_scope(CacheScope::Private)
}

/// Renders a prompt; a name no prompt has is `-32602`, naming it.
pub(super) async fn get(
    pipeline: &Pipeline,
    request: GetPromptRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<GetPromptResult, McpError> {
    let meta = CallMeta {
        front: Front::Mcp,
        ..CallMeta::default()
    };
    let arguments: Map<String, Value> = request.arguments.unwrap_or_default().into_iter().collect();
    let get = tokio::select! {
        get = pipeline.get_prompt(&request.name, arguments, &meta) => get,
        () = context.ct.cancelled() => {
            return Err(McpError::internal_error("the get was cancelled", None));
        }
    };
    let messages =
        get.map_err(|error| super::resources::error_of(error, "prompt", &request.name))?;
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
    Ok(result)
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
