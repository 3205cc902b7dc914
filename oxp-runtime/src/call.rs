//! The one call pipeline every front uses: resolve → requirements → validate → invoke → outcome.
//!
//! It knows nothing of HTTP, MCP or model providers: a front turns its request into a
//! [`CallToolRequest`], runs [`Pipeline::call`], and translates the [`CallOutcome`] back.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use serde_json::Value;
use tracing::Instrument;

use crate::authorization::{AuthorizationProvider, ChallengeRequest};
use crate::context::ToolContext;
use crate::descriptor::{Invoke, InvokeError, InvokeResult};
use crate::error::ToolError;
use crate::protocol::{
    CallContext, CallResult, CallToolRequest, CallToolResponse, MissingRequirements,
    ServerErrorResponse, ToolAuthorizationChallenge, ValidationErrorResponse,
};
use crate::registry::{RegisteredTool, Registry};

/// What came of a call, one variant per class of answer OXP distinguishes.
#[derive(Clone, Debug, PartialEq)]
pub enum CallOutcome {
    /// The tool ran (or was started): `200`, successful or not.
    Completed(CallToolResponse),
    /// The call was refused before the tool ran: `400`.
    Rejected(ServerErrorResponse),
    /// The input did not match the tool's input schema: `422`.
    Invalid(ValidationErrorResponse),
}

impl CallOutcome {
    /// The HTTP status this outcome is answered with.
    ///
    /// ```
    /// use oxp_runtime::call::CallOutcome;
    /// use oxp_runtime::protocol::ServerErrorResponse;
    ///
    /// assert_eq!(CallOutcome::Rejected(ServerErrorResponse::default()).status(), 400);
    /// ```
    pub fn status(&self) -> u16 {
        match self {
            CallOutcome::Completed(_) => 200,
            CallOutcome::Rejected(_) => 400,
            CallOutcome::Invalid(_) => 422,
        }
    }
}

/// Runs calls against a registry.
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::call::{CallOutcome, Pipeline};
/// use oxp_runtime::protocol::{CallResult, CallToolRequest};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
/// let request = CallToolRequest {
///     tool_id: "Calculator.Add".into(),
///     input: Some(serde_json::json!({"a": 2, "b": 3})),
///     ..Default::default()
/// };
/// let CallOutcome::Completed(response) = pipeline.call(request).await else { panic!() };
/// assert_eq!(response.result, CallResult::Success { value: Some(5.into()) });
/// # });
/// ```
#[derive(Clone)]
pub struct Pipeline {
    registry: Arc<Registry>,
    default_timeout: Option<Duration>,
    authorization: Option<Arc<dyn AuthorizationProvider>>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("tools", &self.registry.tools().len())
            .field("default_timeout", &self.default_timeout)
            .field("authorization", &self.authorization.is_some())
            .finish()
    }
}

/// What a front knows about a call besides its body.
#[derive(Clone, Debug, Default)]
pub struct CallMeta {
    /// The base URL that authorization challenges' `check_url`s start with (the check id is
    /// appended); no `check_url` when `None`.
    pub check_url_base: Option<String>,
    /// Also resolve a `tool_id` that is a wire name (`Calculator_Add`), as LangChain's clients
    /// send (oxp-notes §3.19). Off: strict OXP.
    pub resolve_wire_names: bool,
}

impl Pipeline {
    /// A pipeline over `registry`, with no timeout unless a tool sets its own.
    pub fn new(registry: impl Into<Arc<Registry>>) -> Self {
        Pipeline {
            registry: registry.into(),
            default_timeout: None,
            authorization: None,
        }
    }

    /// The provider that mints challenges when a call lacks an authorization token.
    ///
    /// ```
    /// use oxp_runtime::authorization::InMemoryAuthorization;
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry)
    ///     .authorization(InMemoryAuthorization::new("https://auth.example.com/authorize"));
    /// # let _ = pipeline;
    /// ```
    #[must_use]
    pub fn authorization(mut self, provider: impl AuthorizationProvider) -> Self {
        self.authorization = Some(Arc::new(provider));
        self
    }

    /// The authorization provider, if any.
    pub fn authorization_provider(&self) -> Option<&dyn AuthorizationProvider> {
        self.authorization.as_deref()
    }

    /// The timeout for tools that do not set `timeout_ms` themselves.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry)
    ///     .default_timeout(std::time::Duration::from_secs(30));
    /// # let _ = pipeline;
    /// ```
    #[must_use]
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = Some(timeout);
        self
    }

    /// The registry calls resolve against.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Runs one call through every step, in the order oxp-notes §3.28 fixes.
    pub async fn call(&self, request: CallToolRequest) -> CallOutcome {
        self.call_with(request, &CallMeta::default()).await
    }

    /// [`call`](Self::call), with what the front knows besides the body.
    pub async fn call_with(&self, mut request: CallToolRequest, meta: &CallMeta) -> CallOutcome {
        let call_id = request
            .call_id
            .take()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());

        let resolved = self.registry.resolve(&request.tool_id).or_else(|error| {
            meta.resolve_wire_names
                .then(|| self.registry.resolve_wire_name(&request.tool_id))
                .flatten()
                .ok_or(error)
        });
        let tool = match resolved {
            Ok(tool) => tool,
            Err(error) => {
                let message = match &error {
                    crate::registry::ResolveError::InvalidId { .. } => {
                        format!("Invalid tool id '{}'", request.tool_id)
                    }
                    other => other.to_string(),
                };
                tracing::info!(call_id = %call_id, tool_id = %request.tool_id, reason = %error, "call refused");
                return CallOutcome::Rejected(ServerErrorResponse {
                    message,
                    developer_message: Some(error.to_string()),
                    missing_requirements: None,
                });
            }
        };

        let span = tracing::info_span!(
            "oxp.call",
            call_id = %call_id,
            trace_id = request.trace_id.as_deref().unwrap_or(""),
            tool = %tool.id(),
        );
        let started = Instant::now();
        let outcome = self
            .run(tool, request, call_id, meta)
            .instrument(span.clone())
            .await;
        span.in_scope(|| {
            let outcome_name = match &outcome {
                CallOutcome::Completed(CallToolResponse {
                    result: CallResult::Success { .. },
                    ..
                }) => "success",
                CallOutcome::Completed(_) => "tool_error",
                CallOutcome::Rejected(_) => "missing_requirements",
                CallOutcome::Invalid(_) => "invalid_input",
            };
            tracing::info!(
                outcome = outcome_name,
                duration_ms = started.elapsed().as_secs_f64() * 1000.0,
                "call finished"
            );
        });
        outcome
    }

    /// The steps after resolution: requirements → validate → invoke → response.
    async fn run(
        &self,
        tool: &RegisteredTool,
        request: CallToolRequest,
        call_id: String,
        meta: &CallMeta,
    ) -> CallOutcome {
        let context = match requirements(tool, request.context.unwrap_or_default(), call_id) {
            Ok(context) => context,
            Err(missing) => {
                return CallOutcome::Rejected(self.missing(tool, missing, meta).await);
            }
        };
        let context = match request.trace_id {
            Some(trace_id) => context.with_trace_id(trace_id),
            None => context,
        };

        let input = request
            .input
            .unwrap_or_else(|| Value::Object(Default::default()));
        if let Some(invalid) = validate(tool, &input) {
            return CallOutcome::Invalid(invalid);
        }

        let call_id = context.call_id().to_owned();
        let redactor = Redactor::new(&context);
        let started = Instant::now();
        let timeout = tool
            .descriptor()
            .timeout_ms
            .map(Duration::from_millis)
            .or(self.default_timeout);
        let result = invoke(tool, context, input, timeout, &redactor).await;
        let duration = started.elapsed().as_secs_f64() * 1000.0;
        let result = match result {
            Ok(value) => CallResult::Success { value },
            Err(InvokeError::Tool(error)) => CallResult::Failure {
                error: redactor.tool_error(error),
            },
            Err(InvokeError::Input(e)) => {
                return CallOutcome::Invalid(ValidationErrorResponse {
                    message: format!("The input for '{}' is invalid: {e}", tool.definition().name),
                    parameter_errors: BTreeMap::new(),
                })
            }
            Err(InvokeError::Output(e)) => CallResult::Failure {
                error: ToolError::new("The tool produced a value that could not be sent.")
                    .developer_message(format!("serializing the value failed: {e}")),
            },
        };
        CallOutcome::Completed(CallToolResponse {
            call_id,
            duration: Some(duration),
            result,
        })
    }
}

/// Scrubs a call's secret and token values out of text that leaves the tool: error messages
/// and log lines. A tool that puts a key into an error (a URL with `?key=…` in a transport
/// error, say) does not leak it. Values shorter than four characters are left alone: replacing
/// them would garble the text without protecting anything.
struct Redactor(Vec<String>);

impl Redactor {
    const MIN_LEN: usize = 4;

    fn new(context: &ToolContext) -> Self {
        Redactor(
            context
                .sensitive_values()
                .filter(|v| v.len() >= Self::MIN_LEN)
                .map(str::to_owned)
                .collect(),
        )
    }

    fn text(&self, text: &mut String) {
        for value in &self.0 {
            if text.contains(value.as_str()) {
                *text = text.replace(value.as_str(), "<redacted>");
            }
        }
    }

    fn tool_error(&self, mut error: ToolError) -> ToolError {
        self.text(&mut error.message);
        for field in [
            &mut error.developer_message,
            &mut error.additional_prompt_content,
        ]
        .into_iter()
        .flatten()
        {
            self.text(field);
        }
        error
    }
}

/// What a call lacked: the requirements step's answer when it refuses.
struct Missing {
    user_id: Option<String>,
    lacks_user_id: bool,
    secrets: Vec<String>,
    authorization: Vec<&'static crate::descriptor::AuthorizationSpec>,
}

impl Pipeline {
    /// The `400` for a call that lacks requirements, with challenges when a provider mints them.
    async fn missing(
        &self,
        tool: &RegisteredTool,
        missing: Missing,
        meta: &CallMeta,
    ) -> ServerErrorResponse {
        let mut challenges = Vec::new();
        if let Some(provider) = &self.authorization {
            for spec in &missing.authorization {
                let request = ChallengeRequest {
                    provider_id: spec.id,
                    scopes: spec.scopes,
                    user_id: missing.user_id.as_deref(),
                    tool_id: tool.id(),
                };
                if let Some(challenge) = provider.challenge(request).await {
                    challenges.push(ToolAuthorizationChallenge {
                        id: spec.id.to_owned(),
                        url: challenge.url,
                        check_url: meta
                            .check_url_base
                            .as_ref()
                            .map(|base| format!("{base}{}", challenge.check_id)),
                    });
                }
            }
        }
        let mut lacking = Vec::new();
        if missing.lacks_user_id {
            lacking.push("a user_id".to_owned());
        }
        if !missing.secrets.is_empty() {
            lacking.push(format!("the secrets {}", missing.secrets.join(", ")));
        }
        if !missing.authorization.is_empty() {
            let ids: Vec<&str> = missing.authorization.iter().map(|a| a.id).collect();
            lacking.push(format!("authorization for {}", ids.join(", ")));
        }
        ServerErrorResponse {
            message: format!(
                "Tool '{}' cannot run without {}",
                tool.definition().name,
                lacking.join(" and ")
            ),
            developer_message: Some(format!(
                "{} requires these in the call's context",
                tool.id()
            )),
            missing_requirements: Some(MissingRequirements {
                authorization: challenges,
                secrets: missing.secrets,
                user_id: missing.lacks_user_id,
            }),
        }
    }
}

/// Checks `user_id`, then secrets, then authorization, and builds the tool's context.
fn requirements(
    tool: &RegisteredTool,
    context: CallContext,
    call_id: String,
) -> Result<ToolContext, Missing> {
    let descriptor = tool.descriptor();
    let user_id = context.user_id.filter(|u| !u.is_empty());
    let lacks_user_id = descriptor.user_id && user_id.is_none();

    let mut tool_context = ToolContext::new(call_id);
    for secret in context.secrets {
        if descriptor.secrets.contains(&secret.id.as_str()) {
            tool_context = tool_context.with_secret(secret.id, secret.value.expose());
        }
    }
    let secrets: Vec<String> = descriptor
        .secrets
        .iter()
        .filter(|id| tool_context.secret(id).is_none())
        .map(|id| (*id).to_owned())
        .collect();

    for grant in context.authorization {
        let required = descriptor.authorization.iter().any(|a| a.id == grant.id);
        if required && !grant.token.expose().is_empty() {
            tool_context = tool_context.with_authorization_token(grant.id, grant.token.expose());
        }
    }
    let authorization: Vec<_> = descriptor
        .authorization
        .iter()
        .filter(|a| tool_context.authorization_token(a.id).is_none())
        .collect();

    if lacks_user_id || !secrets.is_empty() || !authorization.is_empty() {
        return Err(Missing {
            user_id,
            lacks_user_id,
            secrets,
            authorization,
        });
    }
    Ok(match user_id {
        Some(user_id) => tool_context.with_user_id(user_id),
        None => tool_context,
    })
}

/// Validates the input against the tool's compiled schema; `None` when it is valid.
fn validate(tool: &RegisteredTool, input: &Value) -> Option<ValidationErrorResponse> {
    let mut parameter_errors: BTreeMap<String, String> = BTreeMap::new();
    let mut general = Vec::new();
    for error in tool.validator().iter_errors(input) {
        let pointer = error.instance_path().as_str();
        let (parameter, text) = match first_segment(pointer) {
            Some(parameter) => (
                Some(parameter.clone()),
                if pointer == format!("/{}", escape(&parameter)) {
                    error.to_string()
                } else {
                    format!("at {pointer}: {error}")
                },
            ),
            None => match error.kind() {
                jsonschema::error::ValidationErrorKind::Required { property } => (
                    property.as_str().map(str::to_owned),
                    "is required".to_owned(),
                ),
                jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                    for name in unexpected {
                        parameter_errors
                            .entry(name.clone())
                            .or_insert_with(|| "is not a parameter of this tool".to_owned());
                    }
                    continue;
                }
                _ => (None, error.to_string()),
            },
        };
        match parameter {
            Some(parameter) => {
                let entry = parameter_errors.entry(parameter).or_default();
                if !entry.is_empty() {
                    entry.push_str("; ");
                }
                entry.push_str(&text);
            }
            None => general.push(text),
        }
    }
    if parameter_errors.is_empty() && general.is_empty() {
        return None;
    }
    let mut message = format!("Invalid input for tool '{}'", tool.definition().name);
    if !general.is_empty() {
        message.push_str(": ");
        message.push_str(&general.join("; "));
    } else {
        let names: Vec<&str> = parameter_errors.keys().map(String::as_str).collect();
        message.push_str(&format!(" (parameters: {})", names.join(", ")));
    }
    Some(ValidationErrorResponse {
        message,
        parameter_errors,
    })
}

/// The top-level parameter a JSON pointer starts with (`/address/zip` → `address`).
fn first_segment(pointer: &str) -> Option<String> {
    let segment = pointer.strip_prefix('/')?.split('/').next()?;
    Some(segment.replace("~1", "/").replace("~0", "~"))
}

fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Runs the tool's glue, containing panics and enforcing the timeout.
async fn invoke(
    tool: &RegisteredTool,
    context: ToolContext,
    input: Value,
    timeout: Option<Duration>,
    redactor: &Redactor,
) -> InvokeResult {
    let run = async move {
        match tool.descriptor().invoke {
            Invoke::Async(glue) => AssertUnwindSafe(InTool(glue(context, input)))
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| Err(panicked(panic.as_ref(), redactor))),
            Invoke::Blocking(glue) => {
                let run = move || {
                    let _in_tool = InToolGuard::enter();
                    glue(context, input)
                };
                match tokio::task::spawn_blocking(run).await {
                    Ok(result) => result,
                    Err(join) if join.is_panic() => {
                        Err(panicked(join.into_panic().as_ref(), redactor))
                    }
                    Err(join) => Err(InvokeError::Tool(
                        ToolError::new("The tool was cancelled.")
                            .developer_message(join.to_string()),
                    )),
                }
            }
        }
    };
    match timeout {
        None => run.await,
        Some(limit) => tokio::time::timeout(limit, run).await.unwrap_or_else(|_| {
            Err(InvokeError::Tool(
                ToolError::new("The tool took too long and was stopped.")
                    .developer_message(format!("timed out after {} ms", limit.as_millis()))
                    .can_retry(true),
            ))
        }),
    }
}

/// A panic becomes a generic tool error; its text goes to the log only (scrubbed of the call's
/// secrets), since it may hold anything the tool had in hand.
fn panicked(payload: &(dyn std::any::Any + Send), redactor: &Redactor) -> InvokeError {
    let mut text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned());
    redactor.text(&mut text);
    tracing::error!(panic = %text, "tool panicked");
    InvokeError::Tool(ToolError::new("The tool failed unexpectedly."))
}

thread_local! {
    static IN_TOOL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is running a tool's code right now: the panic hook of
/// [`install_panic_hook`] leaves such panics' text to the pipeline, which scrubs it.
pub(crate) fn in_tool() -> bool {
    IN_TOOL.with(std::cell::Cell::get)
}

/// Marks the thread as running tool code until dropped (also when the tool panics).
struct InToolGuard(bool);

impl InToolGuard {
    fn enter() -> Self {
        InToolGuard(IN_TOOL.with(|flag| flag.replace(true)))
    }
}

impl Drop for InToolGuard {
    fn drop(&mut self) {
        IN_TOOL.with(|flag| flag.set(self.0));
    }
}

/// A tool's future, marked as tool code while it is polled.
struct InTool(futures_util::future::BoxFuture<'static, InvokeResult>);

impl std::future::Future for InTool {
    type Output = InvokeResult;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<InvokeResult> {
        let _in_tool = InToolGuard::enter();
        self.0.as_mut().poll(cx)
    }
}

/// Replaces the default panic hook (which prints every panic's text to stderr) with one that
/// logs through `tracing`, and leaves out the text of panics inside tools: the pipeline logs
/// that text itself, with the call's secrets scrubbed. [`serve`](crate::serve) installs it; an
/// app that embeds the router may call it once at start-up.
///
/// ```
/// oxp_runtime::call::install_panic_hook();
/// ```
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if in_tool() {
            tracing::debug!(%location, "a tool panicked (its message is logged with the call)");
            return;
        }
        let payload = info.payload();
        let text = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a non-string panic payload");
        tracing::error!(%location, panic = text, "a thread panicked");
    }));
}
