//! adk-rust in process (feature `adk`): the registry as adk-core [`Tool`]s, one per wire name,
//! handed over together by an [`AdkToolset`] (`LlmAgentBuilder::toolset(Arc::new(…))`) or one
//! by one (`.tool(…)`).
//!
//! Each tool says what adk-rust asks of it: [`required_scopes`](Tool::required_scopes) are the
//! tool's `scopes`, [`is_read_only`](Tool::is_read_only) its `read_only` hint,
//! [`is_long_running`](Tool::is_long_running) whether it runs as a task, and its response schema
//! its output schema. Each call runs through the [`Dispatcher`]'s pipeline, for the user of
//! adk-rust's context ([`user_id`](adk_core::ReadonlyContext::user_id)), with the scopes that
//! context grants ([`user_scopes`](ToolContext::user_scopes): a tool needing others is refused,
//! as adk-rust documents) and, besides the dispatcher's secrets, those its secret service holds
//! ([`get_secret`](ToolContext::get_secret)) for the secrets the tool declares. A failure is an
//! [`AdkError`] of the tool component and the category that fits (`invalid_input` for
//! arguments that do not match the schema, with the words that say what to fix); adk-rust's
//! agent hands its text to the model as `{"error": …}`.
//!
//! Only adk-core (its traits) is a dependency: adk-rust's umbrella crate would bring its
//! models, sessions and servers.
//!
//! ```
//! use oxp_runtime::{agents::adk::AdkToolset, call::Pipeline, providers::Dispatcher, tool, Registry};
//!
//! /// Add two integers.
//! #[tool(toolkit = "Calculator", version = "1.0.0", read_only)]
//! async fn add(a: i64, b: i64) -> i64 { a + b }
//!
//! let registry = Registry::builder().tool(add::TOOL).build().unwrap();
//! let toolset = AdkToolset::new(Dispatcher::new(Pipeline::new(registry)));
//! let tools = toolset.export().unwrap();
//! assert_eq!(tools[0].name(), "Calculator_Add");
//! assert!(tools[0].is_read_only());
//! assert_eq!(tools[0].parameters_schema().unwrap()["required"], serde_json::json!(["a", "b"]));
//! ```

use std::sync::Arc;

use adk_core::{
    AdkError, ErrorCategory, ErrorComponent, ReadonlyContext, RetryHint, Tool, ToolContext,
    Toolset, async_trait,
};
use serde_json::Value;

use super::{Asker, Call, InProcess};
use crate::principal::Grant;
use crate::providers::{Dispatcher, ExportError, Failure, ToolResult};

/// The registry's tools for adk-rust, as one [`Toolset`], calling through a [`Dispatcher`]
/// (its pipeline, limits, secrets, tokens; the user is adk-rust's).
///
/// ```no_run
/// # fn agent(model: std::sync::Arc<dyn adk_core::Llm>, registry: oxp_runtime::Registry) {
/// use std::sync::Arc;
/// use oxp_runtime::{agents::adk::AdkToolset, call::Pipeline, providers::Dispatcher};
/// let toolset = AdkToolset::new(Dispatcher::new(Pipeline::new(registry)).secret("SMTP_PASSWORD", "…"));
/// // With adk-agent: LlmAgentBuilder::new("assistant").model(model).toolset(Arc::new(toolset)).build()
/// # }
/// ```
#[derive(Clone)]
pub struct AdkToolset {
    front: Arc<InProcess>,
    name: String,
}

impl AdkToolset {
    /// The tools of `dispatcher`'s registry, as the toolset `oxp`, with no asker.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use adk_core::Toolset;
    /// use oxp_runtime::{agents::adk::AdkToolset, call::Pipeline, providers::Dispatcher};
    /// let toolset = AdkToolset::new(Dispatcher::new(Pipeline::new(registry)));
    /// assert_eq!(toolset.name(), "oxp");
    /// ```
    pub fn new(dispatcher: Dispatcher) -> Self {
        AdkToolset {
            front: Arc::new(InProcess::new(dispatcher)),
            name: "oxp".to_owned(),
        }
    }

    /// Another name for the toolset (adk-rust tells toolsets apart by it).
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use adk_core::Toolset;
    /// use oxp_runtime::{agents::adk::AdkToolset, call::Pipeline, providers::Dispatcher};
    /// let toolset = AdkToolset::new(Dispatcher::new(Pipeline::new(registry))).named("files");
    /// assert_eq!(toolset.name(), "files");
    /// ```
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Answers the questions of tools that ask (see [`Asker`]) within the call. Without one,
    /// the model is told what the tool needs and that it cannot be asked from here.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use oxp_runtime::{agents::adk::AdkToolset, call::Pipeline, providers::{Dispatcher, PendingInput}};
    /// let toolset = AdkToolset::new(Dispatcher::new(Pipeline::new(registry)))
    ///     .asker(|pending: PendingInput| async move {
    ///         // Show `pending.asks` to the user; here, no one is there to answer.
    ///         None
    ///     });
    /// ```
    #[must_use]
    pub fn asker(mut self, asker: impl Asker) -> Self {
        Arc::make_mut(&mut self.front).asker = Some(Arc::new(asker));
        self
    }

    /// One [`Tool`] per wire name (the latest version of each), or every tool that breaks the
    /// dispatcher's [`Limits`](crate::providers::Limits): what [`Toolset::tools`] hands over,
    /// for an app that adds them one by one.
    pub fn export(&self) -> Result<Vec<Arc<dyn Tool>>, Vec<ExportError>> {
        let tools = self.front.exported()?;
        Ok(tools
            .into_iter()
            .map(|tool| {
                let descriptor = tool.descriptor();
                let definition = tool.definition();
                Arc::new(AdkTool {
                    front: Arc::clone(&self.front),
                    name: tool.name().to_owned(),
                    description: tool.description_for_models().into_owned(),
                    parameters: crate::providers::schema_for_model(&definition.input_schema),
                    response: definition
                        .output_schema
                        .as_ref()
                        .map(crate::providers::schema_for_model),
                    scopes: descriptor.scopes.to_vec(),
                    secrets: descriptor.secrets,
                    read_only: descriptor.hints.read_only == Some(true),
                    long_running: descriptor.hints.task.is_some(),
                }) as Arc<dyn Tool>
            })
            .collect())
    }
}

#[async_trait]
impl Toolset for AdkToolset {
    fn name(&self) -> &str {
        &self.name
    }

    async fn tools(&self, _ctx: Arc<dyn ReadonlyContext>) -> adk_core::Result<Vec<Arc<dyn Tool>>> {
        self.export().map_err(|errors| {
            let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
            AdkError::config(format!(
                "toolset '{}' cannot hand its tools over: {}",
                self.name,
                errors.join("; ")
            ))
        })
    }
}

/// One oxp tool, as adk-rust calls it.
struct AdkTool {
    front: Arc<InProcess>,
    name: String,
    description: String,
    parameters: Value,
    response: Option<Value>,
    scopes: Vec<&'static str>,
    secrets: &'static [&'static str],
    read_only: bool,
    long_running: bool,
}

#[async_trait]
impl Tool for AdkTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters_schema(&self) -> Option<Value> {
        Some(self.parameters.clone())
    }

    fn response_schema(&self) -> Option<Value> {
        self.response.clone()
    }

    fn required_scopes(&self) -> &[&str] {
        &self.scopes
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The pipeline runs any number of calls of a tool side by side (a server does): whether
    /// adk-rust may run two calls of one reply at once is still [`is_read_only`]'s to say.
    fn is_concurrency_safe(&self) -> bool {
        true
    }

    fn is_long_running(&self) -> bool {
        self.long_running
    }

    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> adk_core::Result<Value> {
        let user_id = Some(ctx.user_id()).filter(|user| !user.is_empty());
        let mut secrets = Vec::new();
        for id in self.secrets {
            if self.front.dispatcher.has_secret(id) {
                continue;
            }
            match ctx.get_secret(id).await {
                Ok(Some(value)) => secrets.push(((*id).to_owned(), value)),
                Ok(None) => {}
                // The tool runs without it and says what it lacks.
                Err(error) => {
                    tracing::debug!(secret = id, %error, "adk-rust's secret service failed")
                }
            }
        }
        let call = Call {
            name: &self.name,
            arguments: args,
            framework_id: Some(ctx.function_call_id()).filter(|id| !id.is_empty()),
            user_id: user_id.map(str::to_owned),
            grant: Some(Grant::scopes(ctx.user_scopes())),
            secrets,
        };
        let (result, failure) = self.front.call(call).await;
        answer(result, failure)
    }
}

/// A dispatcher's result as adk-rust takes it: the value, or an error whose text is the
/// dispatcher's words (adk-rust shows the model `{"error": "tool.<category>: <words>"}`).
fn answer(result: ToolResult, failure: Failure) -> adk_core::Result<Value> {
    let (category, code, retry) = match failure {
        Failure::None if !result.is_error => {
            return Ok(match result.value {
                Some(value) if result.media.is_empty() => value,
                None => Value::Null,
                Some(_) => Value::String(result.content),
            });
        }
        Failure::InvalidArguments => (ErrorCategory::InvalidInput, "tool.invalid_arguments", None),
        Failure::NotFound => (ErrorCategory::NotFound, "tool.not_found", None),
        Failure::Refused => (ErrorCategory::Forbidden, "tool.refused", None),
        Failure::Unavailable => (ErrorCategory::Unavailable, "tool.unavailable", None),
        Failure::None => (ErrorCategory::Internal, "tool.failed", Some(false)),
        Failure::Tool { retryable } => (ErrorCategory::Internal, "tool.failed", Some(retryable)),
    };
    // adk-rust's text already says it is an error.
    let words = result.content;
    let words = words.strip_prefix("Error: ").unwrap_or(&words);
    let mut error = AdkError::new(ErrorComponent::Tool, category, code, words);
    if let Some(should_retry) = retry {
        error = error.with_retry(RetryHint {
            should_retry,
            ..RetryHint::default()
        });
    }
    Err(error)
}
