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

use crate::context::ToolContext;
use crate::descriptor::{Invoke, InvokeError, InvokeResult};
use crate::error::ToolError;
use crate::protocol::{
    CallContext, CallResult, CallToolRequest, CallToolResponse, MissingRequirements,
    ServerErrorResponse, ValidationErrorResponse,
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
#[derive(Clone, Debug)]
pub struct Pipeline {
    registry: Arc<Registry>,
    default_timeout: Option<Duration>,
}

impl Pipeline {
    /// A pipeline over `registry`, with no timeout unless a tool sets its own.
    pub fn new(registry: impl Into<Arc<Registry>>) -> Self {
        Pipeline {
            registry: registry.into(),
            default_timeout: None,
        }
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
        let call_id = request
            .call_id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());

        let tool = match self.registry.resolve(&request.tool_id) {
            Ok(tool) => tool,
            Err(error) => {
                let message = match &error {
                    crate::registry::ResolveError::InvalidId { .. } => {
                        format!("Invalid tool id '{}'", request.tool_id)
                    }
                    other => other.to_string(),
                };
                return CallOutcome::Rejected(ServerErrorResponse {
                    message,
                    developer_message: Some(error.to_string()),
                    missing_requirements: None,
                });
            }
        };

        let context = match requirements(tool, request.context.unwrap_or_default(), call_id) {
            Ok(context) => context,
            Err(rejection) => return CallOutcome::Rejected(rejection),
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
        let started = Instant::now();
        let timeout = tool
            .descriptor()
            .timeout_ms
            .map(Duration::from_millis)
            .or(self.default_timeout);
        let result = invoke(tool, context, input, timeout).await;
        let duration = started.elapsed().as_secs_f64() * 1000.0;
        let result = match result {
            Ok(value) => CallResult::Success { value },
            Err(InvokeError::Tool(error)) => CallResult::Failure { error },
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

/// Checks `user_id`, then secrets, then authorization, and builds the tool's context.
fn requirements(
    tool: &RegisteredTool,
    context: CallContext,
    call_id: String,
) -> Result<ToolContext, ServerErrorResponse> {
    let descriptor = tool.descriptor();
    let mut missing = MissingRequirements::default();
    let user_id = context.user_id.filter(|u| !u.is_empty());
    missing.user_id = descriptor.user_id && user_id.is_none();

    let mut tool_context = ToolContext::new(call_id);
    for secret in context.secrets {
        if descriptor.secrets.contains(&secret.id.as_str()) {
            tool_context = tool_context.with_secret(secret.id, secret.value.expose());
        }
    }
    missing.secrets = descriptor
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
    let missing_authorization: Vec<&str> = descriptor
        .authorization
        .iter()
        .filter(|a| tool_context.authorization_token(a.id).is_none())
        .map(|a| a.id)
        .collect();

    if missing.user_id || !missing.secrets.is_empty() || !missing_authorization.is_empty() {
        let mut lacking = Vec::new();
        if missing.user_id {
            lacking.push("a user_id".to_owned());
        }
        if !missing.secrets.is_empty() {
            lacking.push(format!("the secrets {}", missing.secrets.join(", ")));
        }
        if !missing_authorization.is_empty() {
            lacking.push(format!(
                "authorization for {}",
                missing_authorization.join(", ")
            ));
        }
        return Err(ServerErrorResponse {
            message: format!(
                "Tool '{}' cannot run without {}",
                tool.definition().name,
                lacking.join(" and ")
            ),
            developer_message: Some(format!(
                "{} requires these in the call's context",
                tool.id()
            )),
            missing_requirements: Some(missing),
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
) -> InvokeResult {
    let id = tool.id().to_owned();
    let run = async move {
        match tool.descriptor().invoke {
            Invoke::Async(glue) => AssertUnwindSafe(glue(context, input))
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| Err(panicked(&id, panic.as_ref()))),
            Invoke::Blocking(glue) => {
                match tokio::task::spawn_blocking(move || glue(context, input)).await {
                    Ok(result) => result,
                    Err(join) if join.is_panic() => Err(panicked(&id, join.into_panic().as_ref())),
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

/// A panic becomes a generic tool error; its text goes to the log only, since it may hold
/// anything the tool had in hand.
fn panicked(tool_id: &str, payload: &(dyn std::any::Any + Send)) -> InvokeError {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned());
    tracing::error!(tool = tool_id, panic = %text, "tool panicked");
    InvokeError::Tool(ToolError::new("The tool failed unexpectedly."))
}
