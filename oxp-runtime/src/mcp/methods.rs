//! Every MCP method by name: [`McpServer::handle`] is the one dispatch both transports use
//! (`http/` for `/mcp`, `connection.rs` for stdio), with the rules MCP sets on any request
//! before and after its method runs: the revision it names, the `_meta` a self-contained request
//! must carry, the methods each lifecycle has, and the shape each revision's result takes.

use std::borrow::Cow;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CacheScope, CallToolResponse, ClientCapabilities, ClientRequest, ConstString, DiscoverResult,
    ErrorCode, Implementation, InitializeRequestParams, InitializeResult, JsonObject,
    ListToolsResult, ProtocolVersion, ServerCapabilities, ServerConfig, ServerResult, Tool,
};
use serde_json::Value;

use crate::time::millis;

use super::exchange::Exchange;
use super::{McpServer, fallback, prompts, resources, skills};

/// The revisions served: every one rmcp knows.
pub(crate) fn supported_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::KNOWN_VERSIONS
}

impl McpServer {
    /// Answers one request: the revision's rules, then its method.
    ///
    /// The request comes boxed: an `async fn` keeps its arguments for as long as it runs, and
    /// a request held by value at each level of the dispatch would size every request's future
    /// several times over.
    pub(crate) async fn handle(
        &self,
        request: Box<ClientRequest>,
        exchange: &Exchange,
    ) -> Result<ServerResult, McpError> {
        let newest = exchange.newest();
        let initialize = matches!(*request, ClientRequest::InitializeRequest(_));
        let requested = &exchange.requested;
        if let Some(requested) = requested.as_ref().filter(|_| !initialize)
            && !supported_versions().contains(requested)
        {
            return Err(McpError::unsupported_protocol_version(
                requested.clone(),
                supported_versions(),
            ));
        }
        // A request is self-contained (2026-07-28's lifecycle) when it opens with
        // `server/discover`, names that revision or later itself, or comes on a connection that
        // never initialized; it then carries the `_meta` the revision requires.
        let self_contained = !initialize
            && (matches!(*request, ClientRequest::DiscoverRequest(_))
                || requested.as_ref().is_some_and(|version| {
                    version.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
                })
                || (!exchange.over_http() && exchange.connection_info().is_none()));
        if self_contained && !exchange.complete {
            let missing = (exchange.meta).missing_required_keys(&ProtocolVersion::V_2026_07_28);
            {
                return Err(McpError::invalid_params(
                    format!(
                        "request _meta is missing or has malformed required fields: {}",
                        missing.join(", ")
                    ),
                    None,
                ));
            }
        }
        let legacy = !self_contained
            && (exchange.version.as_ref()).is_none_or(ProtocolVersion::has_initialize);
        let mut result = self.method(request, exchange, legacy).await;
        // Shaped where it lies: a result is large, and each move copies it whole.
        match &mut result {
            Ok(ServerResult::InputRequiredResult(_)) if !newest => {
                result = Err(McpError::invalid_request(
                    "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                    None,
                ));
            }
            // 2026-07-28 requires caching hints on cacheable results; earlier revisions keep
            // their shape, without `resultType` and without non-object tool output.
            Ok(result) if newest => result.fill_missing_cache_hints(),
            Ok(result) => {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
            }
            // 2026-07-28 answers a resource that is not there with invalid params.
            Err(error) if newest && error.code == ErrorCode::RESOURCE_NOT_FOUND => {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            Err(_) => {}
        }
        result
    }

    /// The method itself. `legacy`: the request is in an initialized session's lifecycle (the
    /// revisions before 2026-07-28), which has `ping` and `resources/subscribe` and no
    /// `subscriptions/listen`.
    ///
    /// One arm per method, each a line or two handing the request to the module that serves
    /// it: long as MCP's list of methods is, and kept whole so that the one dispatch reads as
    /// that list.
    #[allow(deprecated)] // logging and subscriptions: earlier revisions' clients still use them
    async fn method(
        &self,
        request: Box<ClientRequest>,
        exchange: &Exchange,
        legacy: bool,
    ) -> Result<ServerResult, McpError> {
        use rmcp::model::{
            PingRequestMethod, SubscribeRequestMethod, SubscriptionsListenRequestMethod,
            UnsubscribeRequestMethod,
        };
        let registry = self.pipeline.registry();
        Ok(match *request {
            ClientRequest::InitializeRequest(request) => {
                ServerResult::InitializeResult(self.initialize(&request.params, exchange)?)
            }
            ClientRequest::DiscoverRequest(_) => ServerResult::DiscoverResult(
                DiscoverResult::from_server_info(supported_versions().to_vec(), self.info()),
            ),
            ClientRequest::PingRequest(_) if legacy => ServerResult::empty(()),
            ClientRequest::PingRequest(_) => {
                return Err(McpError::method_not_found::<PingRequestMethod>());
            }
            ClientRequest::CompleteRequest(request) => {
                ServerResult::CompleteResult(prompts::complete(registry, &request.params)?)
            }
            ClientRequest::SetLevelRequest(request) => {
                self.log_level.set(request.params.level);
                ServerResult::empty(())
            }
            ClientRequest::GetPromptRequest(request) => {
                // Boxed, as `tools/call` is: this future would otherwise size every request's.
                Box::pin(prompts::get(self, request.params, exchange))
                    .await?
                    .into()
            }
            ClientRequest::ListPromptsRequest(_) => ServerResult::ListPromptsResult(prompts::list(
                registry,
                &exchange.grant(),
                self.list_ttl,
            )),
            ClientRequest::ListResourcesRequest(_) => {
                let mut list = resources::list(registry, &exchange.grant(), self.list_ttl);
                list.resources.extend(skills::resources(registry));
                ServerResult::ListResourcesResult(list)
            }
            ClientRequest::ListResourceTemplatesRequest(_) => {
                ServerResult::ListResourceTemplatesResult(resources::templates(
                    registry,
                    &exchange.grant(),
                    self.list_ttl,
                ))
            }
            ClientRequest::ReadResourceRequest(request) => {
                self.read_resource(request.params, exchange).await?
            }
            // No subscription filter is accepted: resources change only with a deployment.
            ClientRequest::SubscriptionsListenRequest(_) => {
                return Err(McpError::method_not_found::<SubscriptionsListenRequestMethod>());
            }
            ClientRequest::SubscribeRequest(request) if legacy => {
                (self.subscriptions).subscribe(registry, request.params.uri, exchange)?;
                ServerResult::empty(())
            }
            ClientRequest::SubscribeRequest(_) => {
                return Err(McpError::method_not_found::<SubscribeRequestMethod>());
            }
            ClientRequest::UnsubscribeRequest(request) if legacy => {
                (self.subscriptions).unsubscribe(registry, &request.params.uri, exchange)?;
                ServerResult::empty(())
            }
            ClientRequest::UnsubscribeRequest(_) => {
                return Err(McpError::method_not_found::<UnsubscribeRequestMethod>());
            }
            // Only the params are taken: the rest is left in the box rather than held in this
            // future while the call runs.
            ClientRequest::CallToolRequest(rmcp::model::CallToolRequest { params, .. }) => {
                // Not boxed: the transports hold each request's whole future in one allocation.
                let response = self.call(params, exchange).await?;
                // SEP-2663: a task is no answer to a request that did not declare tasks.
                if matches!(response, CallToolResponse::Task(_)) && !self.declared_tasks(exchange) {
                    return Err(missing_tasks());
                }
                ServerResult::from(response)
            }
            ClientRequest::ListToolsRequest(_) => {
                ServerResult::ListToolsResult(self.list_tools(exchange))
            }
            ClientRequest::CustomRequest(request) => {
                return Err(custom_request(&request.method, exchange.newest()));
            }
            ClientRequest::GetTaskRequest(request) => {
                self.tasks_served(exchange, <rmcp::model::GetTaskMethod as ConstString>::VALUE)?;
                let key = self.task_key_for(exchange, &request.params.task_id);
                ServerResult::GetTaskResult(self.get_task_of(&key).await?)
            }
            ClientRequest::UpdateTaskRequest(request) => {
                self.tasks_served(
                    exchange,
                    <rmcp::model::UpdateTaskMethod as ConstString>::VALUE,
                )?;
                let key = self.task_key_for(exchange, &request.params.task_id);
                self.update_task_of(&key, request.params.input_responses)
                    .await?;
                ServerResult::task_ack(())
            }
            ClientRequest::CancelTaskRequest(request) => {
                self.tasks_served(
                    exchange,
                    <rmcp::model::CancelTaskMethod as ConstString>::VALUE,
                )?;
                let key = self.task_key_for(exchange, &request.params.task_id);
                self.cancel_task_of(&key).await?;
                ServerResult::task_ack(())
            }
            ClientRequest::ListSkillsRequest(_) => {
                self.skills_served(<rmcp::model::ListSkillsRequestMethod as ConstString>::VALUE)?;
                ServerResult::ListSkillsResult(skills::list(registry, self.list_ttl))
            }
            ClientRequest::GetSkillRequest(request) => {
                self.skills_served(<rmcp::model::GetSkillRequestMethod as ConstString>::VALUE)?;
                if rmcp::model::skill_name_from_uri(&request.params.uri).is_none() {
                    return Err(McpError::invalid_params(
                        format!("{} is not the uri of a SKILL.md", request.params.uri),
                        None,
                    ));
                }
                ServerResult::GetSkillResult(skills::get(registry, &request.params, self.list_ttl)?)
            }
            ClientRequest::ReadResourceDirectoryRequest(request) => {
                self.skills_served(
                    <rmcp::model::ReadResourceDirectoryRequestMethod as ConstString>::VALUE,
                )?;
                ServerResult::ListResourcesResult(skills::directory(
                    registry,
                    &request.params.uri,
                    self.list_ttl,
                )?)
            }
            // A method a newer rmcp knows and this server does not serve.
            other => {
                return Err(McpError::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    other.method().to_owned(),
                    None,
                ));
            }
        })
    }

    /// What this server is and serves, as `initialize` and `server/discover` say.
    #[allow(deprecated)] // logging: see `logging/setLevel`
    pub(crate) fn info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .build();
        // The skills extension, declared by a server that has skills (settings inline), with
        // the folder reads it serves.
        if self.has_skills() {
            let settings = JsonObject::from_iter([("directoryRead".to_owned(), Value::Bool(true))]);
            capabilities
                .extensions
                .get_or_insert_default()
                .insert(rmcp::model::SKILLS_EXTENSION_ID.to_owned(), settings);
        }
        // Tasks (SEP-2663), for a server with a tool that may run as one.
        if self.has_task_tools() {
            capabilities.extensions.get_or_insert_default().insert(
                rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                JsonObject::new(),
            );
        }
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("oxp", env!("CARGO_PKG_VERSION")))
    }

    fn has_skills(&self) -> bool {
        !self.pipeline.registry().skills().is_empty()
    }

    fn has_task_tools(&self) -> bool {
        (self.pipeline.registry().tools().iter()).any(|tool| tool.hints().task.is_some())
    }

    /// `initialize` (revisions before 2026-07-28): the revision agreed on, and
    /// `resources.subscribe` declared on a connection, where notifications can reach the
    /// client, never over HTTP.
    fn initialize(
        &self,
        request: &InitializeRequestParams,
        exchange: &Exchange,
    ) -> Result<InitializeResult, McpError> {
        let mut result = self.info();
        result.protocol_version = negotiate(&request.protocol_version, result.protocol_version)?;
        if !exchange.over_http()
            && let Some(resources) = result.capabilities.resources.as_mut()
        {
            resources.subscribe = Some(true);
        }
        Ok(result)
    }

    /// `tools/list`: over HTTP, the caller's scopes (left by the OXP server's authentication)
    /// filter the list, so a tool is shown only to whom may call it; a caller that cannot
    /// answer does not see the tools that would ask it and hide.
    fn list_tools(&self, exchange: &Exchange) -> ListToolsResult {
        let grant = exchange.grant();
        let answers = self.caller_can_answer(exchange);
        let tools: Vec<Tool> = self
            .tools_for(exchange.newest())
            .iter()
            .zip(self.pipeline.registry().tools())
            .filter(|(_, registered)| grant.allows(registered.descriptor().scopes))
            .filter(|(_, registered)| {
                answers
                    || fallback::policy(registered, self.cannot_ask) != crate::ask::CannotAsk::Hide
            })
            .map(|(tool, _)| tool.clone())
            .collect();
        // Private: once scopes filter the list, it is the caller's own.
        ListToolsResult::with_all_items(tools)
            .with_ttl_ms(millis(self.list_ttl))
            .with_cache_scope(CacheScope::Private)
    }

    /// `resources/read`: a skill's file from the registry, any other resource through the
    /// pipeline; an unknown URI is SEP-2164's not-found.
    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        exchange: &Exchange,
    ) -> Result<ServerResult, McpError> {
        if request.uri.starts_with(skills::SCHEME)
            && let Some(contents) = skills::read(self.pipeline.registry(), &request.uri)
        {
            return Ok(rmcp::model::ReadResourceResult::new(vec![contents])
                .with_ttl_ms(millis(self.list_ttl))
                .with_cache_scope(CacheScope::Private)
                .into());
        }
        // Boxed, as `tools/call` is: this future would otherwise size every request's.
        Box::pin(resources::read(&self.pipeline, request, exchange))
            .await
            .map(|read| rmcp::model::ReadResourceResponse::from(read).into())
    }

    /// Whether the request declared the tasks extension.
    pub(crate) fn declared_tasks(&self, exchange: &Exchange) -> bool {
        (exchange.capabilities.as_ref()).is_some_and(ClientCapabilities::supports_tasks)
    }

    /// `tasks/*` are served by a server with task tools, to a request that declared them.
    fn tasks_served(&self, exchange: &Exchange, method: &'static str) -> Result<(), McpError> {
        if !self.has_task_tools() {
            return Err(not_found(method));
        }
        if self.declared_tasks(exchange) {
            Ok(())
        } else {
            Err(missing_tasks())
        }
    }

    /// `skills/*` and directory reads are served by a server with skills (SEP-2640).
    fn skills_served(&self, method: &'static str) -> Result<(), McpError> {
        if self.has_skills() {
            Ok(())
        } else {
            Err(not_found(method))
        }
    }
}

/// The revision `initialize` agrees on: the client's, if served and it has the handshake; else
/// the newest served that has it.
fn negotiate(
    requested: &ProtocolVersion,
    preferred: ProtocolVersion,
) -> Result<ProtocolVersion, McpError> {
    if requested.has_initialize() && supported_versions().contains(requested) {
        return Ok(requested.clone());
    }
    let newest = || {
        (supported_versions().iter())
            .filter(|version| version.has_initialize())
            .max_by(|a, b| a.as_str().cmp(b.as_str()))
            .cloned()
    };
    Some(preferred)
        .filter(ProtocolVersion::has_initialize)
        .or_else(newest)
        .ok_or_else(|| {
            McpError::unsupported_protocol_version(requested.clone(), supported_versions())
        })
}

fn not_found(method: &'static str) -> McpError {
    McpError::new(ErrorCode::METHOD_NOT_FOUND, Cow::Borrowed(method), None)
}

fn missing_tasks() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

/// What rmcp could not read as any request it knows: a tasks method whose params are not the
/// extension's shape (a `taskId` that is no string), or a subscription's without its `uri` from
/// a revision that has subscriptions, is invalid params, not an unknown method.
fn custom_request(method: &str, newest: bool) -> McpError {
    let expected = match method {
        "tools/call" => "`name`, a string, and `arguments`, an object if present",
        "tasks/get" | "tasks/cancel" => "`taskId`, a string",
        "tasks/update" => "`taskId`, a string, and `inputResponses`, an object",
        "resources/subscribe" | "resources/unsubscribe" if !newest => "`uri`, a string",
        _ => {
            return McpError::new(ErrorCode::METHOD_NOT_FOUND, method.to_owned(), None);
        }
    };
    McpError::invalid_params(format!("{method}'s params must carry {expected}"), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A known method whose params rmcp could not read is invalid params naming what they must
    /// carry; an unknown method is not found.
    #[test]
    fn a_known_method_with_unreadable_params_is_invalid_params() {
        let call = custom_request("tools/call", true);
        assert_eq!(call.code, ErrorCode::INVALID_PARAMS);
        assert!(call.message.contains("`name`"), "{}", call.message);
        assert_eq!(
            custom_request("tasks/get", false).code,
            ErrorCode::INVALID_PARAMS
        );
        assert_eq!(
            custom_request("no/such", true).code,
            ErrorCode::METHOD_NOT_FOUND
        );
        assert_eq!(
            custom_request("resources/subscribe", true).code,
            ErrorCode::METHOD_NOT_FOUND,
            "2026-07-28 has no resources/subscribe"
        );
    }
}
