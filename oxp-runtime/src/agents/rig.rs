//! rig in process (feature `rig`): the registry as rig-core [`DynamicTool`]s, one per wire
//! name, for an agent's builder (`.dynamic_tools(…)`) or any [`ManagedToolSink`] (rig-agent's
//! `ToolServerHandle`), kept in sync by [`ManagedRigTools`] when the registry is rebuilt.
//!
//! Each call runs through the [`Dispatcher`]'s pipeline. A failure is a
//! [`ToolExecutionError`] of the kind rig's policies read (`invalid_args` for arguments that
//! do not match the schema, with the words that say what to fix; `not_found`, a refusal,
//! `rate_limited`, or `other` retryable as the tool said), its model-visible output the
//! dispatcher's words. A run's user and scopes may come from rig's own per-run
//! [`ToolContext`] ([`User`], [`Scopes`]).
//!
//! Pinned to rig-core 0.44, the newest minor this workspace's toolchain (Rust 1.95) builds:
//! rig-core 0.45 and 0.46 declare `rust-version = "1.97.1"`. 0.44's `ToolDefinition` has no
//! annotations (0.45 added `with_annotations`), so the tools' `read_only`, `destructive`, … are
//! not exported here; the description, schema and behaviour are.
//!
//! ```
//! use oxp_runtime::{agents::rig::RigTools, call::Pipeline, providers::Dispatcher, tool, Registry};
//!
//! /// Add two integers.
//! #[tool(toolkit = "Calculator", version = "1.0.0")]
//! async fn add(a: i64, b: i64) -> i64 { a + b }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let registry = Registry::builder().tool(add::TOOL).build().unwrap();
//! let tools = RigTools::new(Dispatcher::new(Pipeline::new(registry))).export().unwrap();
//! assert_eq!(tools[0].name(), "Calculator_Add");
//! // What rig runs when the model calls it (an agent: `AgentBuilder::new(model).dynamic_tools(tools)`).
//! let output = tools[0].execute(serde_json::json!({"a": 2, "b": 3})).await.unwrap();
//! assert_eq!(output.as_json(), Some(&serde_json::json!(5)));
//! let invalid = tools[0].execute(serde_json::json!({"a": "two"})).await.unwrap_err();
//! assert_eq!(invalid.kind(), rig_core::tool::ToolErrorKind::InvalidArgs);
//! # });
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rig_core::message::ToolName;
use rig_core::tool::{
    ContextValue, DynamicTool, ManagedToolSink, ManagedToolToken, ToolContext, ToolExecutionError,
    ToolOutput,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Asker, Call, InProcess};
use crate::principal::Grant;
use crate::providers::{Dispatcher, ExportError, Failure, ToolResult};

/// The registry's tools for rig, calling through a [`Dispatcher`] (its pipeline, limits,
/// secrets, tokens and user).
///
/// ```
/// use oxp_runtime::{agents::rig::RigTools, call::Pipeline, providers::Dispatcher, server::Grant};
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// let dispatcher = Dispatcher::new(Pipeline::new(registry)).user_id("ada").secret("SMTP_PASSWORD", "…");
/// let tools = RigTools::new(dispatcher)
///     .grant(Grant::scopes(["files:read"]))
///     .export()
///     .unwrap();
/// ```
#[derive(Clone)]
pub struct RigTools {
    front: Arc<InProcess>,
}

impl RigTools {
    /// The tools of `dispatcher`'s registry, every one callable, no asker.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use oxp_runtime::{agents::rig::RigTools, call::Pipeline, providers::Dispatcher};
    /// let tools = RigTools::new(Dispatcher::new(Pipeline::new(registry)));
    /// assert!(tools.export().unwrap().is_empty());
    /// ```
    pub fn new(dispatcher: Dispatcher) -> Self {
        RigTools {
            front: Arc::new(InProcess::new(dispatcher)),
        }
    }

    /// Only the tools whose scopes `grant` covers are handed over, and only they may be
    /// called (a run's [`Scopes`] narrows it per run).
    ///
    /// ```
    /// use oxp_runtime::{agents::rig::RigTools, call::Pipeline, providers::Dispatcher, server::Grant, tool, Registry};
    ///
    /// /// Delete a file.
    /// #[tool(toolkit = "Files", version = "1.0.0", scopes = ["files:write"])]
    /// fn delete(path: String) -> String { path }
    ///
    /// let registry = Registry::builder().tool(delete::TOOL).build().unwrap();
    /// let tools = RigTools::new(Dispatcher::new(Pipeline::new(registry)))
    ///     .grant(Grant::scopes(["files:read"]));
    /// assert!(tools.export().unwrap().is_empty());
    /// ```
    #[must_use]
    pub fn grant(mut self, grant: Grant) -> Self {
        Arc::make_mut(&mut self.front).grant = grant;
        self
    }

    /// Answers the questions of tools that ask (see [`Asker`]) within the call. Without one,
    /// the model is told what the tool needs and that it cannot be asked from here.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use oxp_runtime::{agents::rig::RigTools, call::Pipeline, providers::{Dispatcher, PendingInput}};
    /// let tools = RigTools::new(Dispatcher::new(Pipeline::new(registry)))
    ///     .asker(|pending: PendingInput| async move {
    ///         // Show `pending.asks` to the user; here, a "no" to everything.
    ///         let no = serde_json::json!({"action": "decline"});
    ///         Some(pending.asks.keys().map(|key| (key.clone(), no.clone())).collect())
    ///     });
    /// ```
    #[must_use]
    pub fn asker(mut self, asker: impl Asker) -> Self {
        Arc::make_mut(&mut self.front).asker = Some(Arc::new(asker));
        self
    }

    /// One [`DynamicTool`] per wire name (the latest version of each), with the description
    /// and input schema models are given, or every tool that breaks the dispatcher's
    /// [`Limits`](crate::providers::Limits).
    pub fn export(&self) -> Result<Vec<DynamicTool>, Vec<ExportError>> {
        let tools = self.front.exported()?;
        Ok(tools
            .into_iter()
            .map(|tool| {
                let name = tool.name().to_owned();
                let description = tool.description_for_models().into_owned();
                let schema = crate::providers::schema_for_model(&tool.definition().input_schema);
                let front = Arc::clone(&self.front);
                DynamicTool::new_with_context(
                    ToolName::new(name.clone()).expect("a registered tool's name is not empty"),
                    description,
                    schema,
                    move |context: &mut ToolContext, arguments: Value| {
                        let user_id = context.get::<User>().ok().flatten().map(|user| user.0);
                        let grant = context
                            .get::<Scopes>()
                            .ok()
                            .flatten()
                            .map(|scopes| Grant::scopes(scopes.0));
                        let front = Arc::clone(&front);
                        let name = name.clone();
                        Box::pin(async move {
                            let call = Call {
                                name: &name,
                                arguments,
                                framework_id: None,
                                user_id,
                                grant,
                                secrets: Vec::new(),
                            };
                            let (result, failure) = front.call(call).await;
                            answer(result, failure)
                        })
                    },
                )
            })
            .collect())
    }
}

/// A dispatcher's result as rig takes it.
fn answer(result: ToolResult, failure: Failure) -> Result<ToolOutput, ToolExecutionError> {
    let text = result.content;
    let error = match failure {
        Failure::None if !result.is_error => {
            return Ok(match result.value {
                Some(Value::String(_)) | None => ToolOutput::text(text),
                // Structured: providers that take JSON results get it as JSON.
                Some(value) if result.media.is_empty() => ToolOutput::json(value),
                Some(_) => ToolOutput::text(text),
            });
        }
        Failure::InvalidArguments => ToolExecutionError::invalid_args(text),
        Failure::NotFound => ToolExecutionError::not_found(text),
        Failure::Refused => ToolExecutionError::refused(text),
        Failure::Unavailable => ToolExecutionError::rate_limited(text),
        Failure::None => ToolExecutionError::other(text).with_retryable(false),
        Failure::Tool { retryable } => ToolExecutionError::other(text).with_retryable(retryable),
    };
    Err(error)
}

/// The user a run's calls are made for, in rig's per-run [`ToolContext`]
/// (`agent.prompt(…).tool_context(context)`), over the dispatcher's.
///
/// ```
/// use oxp_runtime::agents::rig::User;
/// let mut context = rig_core::tool::ToolContext::new();
/// context.insert(User("ada".into())).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User(pub String);

impl ContextValue for User {
    const KEY: &'static str = "oxp.user_id";
}

/// The scopes a run's caller holds, in rig's per-run [`ToolContext`], over the
/// [`grant`](RigTools::grant): a tool needing others is refused, in words the model can tell
/// the user.
///
/// ```
/// use oxp_runtime::agents::rig::Scopes;
/// let mut context = rig_core::tool::ToolContext::new();
/// context.insert(Scopes(vec!["files:read".into()])).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scopes(pub Vec<String>);

impl ContextValue for Scopes {
    const KEY: &'static str = "oxp.scopes";
}

/// The tools installed in a [`ManagedToolSink`] (rig-agent's `ToolServerHandle`), and the
/// generation tokens that let a rebuilt registry replace them: [`update`](Self::update)
/// changes, adds and removes this source's tools and leaves every other tool of the sink alone
/// (one registered since under the same name wins).
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
/// use oxp_runtime::agents::rig::{ManagedRigTools, RigTools};
/// use oxp_runtime::{call::Pipeline, providers::Dispatcher, tool, Registry};
/// use rig_core::tool::{DynamicTool, ManagedToolSink, ManagedToolToken};
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// fn add(a: i64, b: i64) -> i64 { a + b }
/// /// Subtract two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// fn sub(a: i64, b: i64) -> i64 { a - b }
///
/// // A sink of the simplest kind (rig-agent's `ToolServerHandle` is one).
/// #[derive(Default)]
/// struct Names(Mutex<Vec<String>>);
/// impl ManagedToolSink for Names {
///     fn add_managed_tools(&self, tools: Vec<DynamicTool>) -> HashMap<String, ManagedToolToken> {
///         self.reconcile_managed_tools(HashMap::new(), tools)
///     }
///     fn reconcile_managed_tools(&self, _: HashMap<String, ManagedToolToken>, tools: Vec<DynamicTool>)
///         -> HashMap<String, ManagedToolToken> {
///         *self.0.lock().unwrap() = tools.iter().map(|t| t.name().to_string()).collect();
///         tools.iter().map(|t| (t.name().to_string(), ManagedToolToken::new())).collect()
///     }
/// }
///
/// let tools = |registry| RigTools::new(Dispatcher::new(Pipeline::new(registry)));
/// let sink = Names::default();
/// let managed = ManagedRigTools::install(&sink, &tools(Registry::builder().tool(add::TOOL).build().unwrap())).unwrap();
/// assert_eq!(*sink.0.lock().unwrap(), ["Calculator_Add"]);
/// // The registry is rebuilt: the agent's set follows.
/// managed.update(&sink, &tools(Registry::builder().tool(sub::TOOL).build().unwrap())).unwrap();
/// assert_eq!(*sink.0.lock().unwrap(), ["Calculator_Sub"]);
/// ```
#[derive(Debug)]
pub struct ManagedRigTools {
    tokens: Mutex<HashMap<String, ManagedToolToken>>,
}

impl ManagedRigTools {
    /// Installs `tools` in `sink`.
    pub fn install(
        sink: &(impl ManagedToolSink + ?Sized),
        tools: &RigTools,
    ) -> Result<Self, Vec<ExportError>> {
        let tokens = sink.add_managed_tools(tools.export()?);
        Ok(ManagedRigTools {
            tokens: Mutex::new(tokens),
        })
    }

    /// Replaces the tools installed before with `tools` (those of a rebuilt registry): this
    /// source's names missing from `tools` leave the sink. On an export error nothing changes.
    pub fn update(
        &self,
        sink: &(impl ManagedToolSink + ?Sized),
        tools: &RigTools,
    ) -> Result<(), Vec<ExportError>> {
        let tools = tools.export()?;
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        *tokens = sink.reconcile_managed_tools(std::mem::take(&mut *tokens), tools);
        Ok(())
    }

    /// The names this source has installed.
    pub fn names(&self) -> Vec<String> {
        let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = tokens.keys().cloned().collect();
        names.sort();
        names
    }
}
