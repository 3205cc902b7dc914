//! The same tools, handed in process to Rust agent frameworks: [`rig`] (rig-core's
//! `DynamicTool`, feature `rig`) and [`adk`] (adk-rust's `Tool` and `Toolset`, feature `adk`).
//!
//! Like [`providers`](crate::providers), these fronts only translate: every call runs through a
//! [`Dispatcher`] and its [`Pipeline`](crate::call::Pipeline) — schema validation and its
//! words, the limits, time-outs, a panic contained, metrics, the app's secrets and the user id —
//! and every failure reaches the model as the dispatcher words it, in the framework's own error
//! type. No framework type crosses into the pipeline, and no MCP type crosses out.
//!
//! A tool that asks (see [`ask`](crate::ask)) is answered by the app's [`Asker`], in the
//! same call: the framework never sees the question. Without one, or when it gives no answer,
//! the model is told what the tool needed and that it cannot be asked from here.

#[cfg(feature = "adk")]
#[cfg_attr(docsrs, doc(cfg(feature = "adk")))]
pub mod adk;
#[cfg(feature = "rig")]
#[cfg_attr(docsrs, doc(cfg(feature = "rig")))]
pub mod rig;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::principal::Grant;
use crate::providers::{
    Dispatcher, ExportError, Failure, PendingInput, Step, ToolCall, ToolResult, exported_tools,
};
use crate::registry::RegisteredTool;

/// The answers to a [`PendingInput`]'s asks, by ask key, in MCP's result shapes (an
/// elicitation's `{"action": "accept", "content": {…}}` or `{"action": "decline"}`, a sampling
/// result, a roots list); what [`Dispatcher::resume`] takes.
pub type Answers = BTreeMap<String, Value>;

/// How the app answers a tool's questions in process: it shows [`PendingInput::asks`] to its
/// own user (or its own model, or its roots) and returns the [`Answers`], or `None` when it
/// cannot answer; the tool then runs again with them, within the same call.
///
/// Any `Fn(PendingInput) -> impl Future<Output = Option<Answers>>` is one.
///
/// ```
/// use oxp_runtime::agents::{Answers, Asker};
/// use oxp_runtime::providers::PendingInput;
///
/// // An app whose user agrees to everything the tool asks to confirm.
/// fn yes() -> impl Asker {
///     |pending: PendingInput| async move {
///         let yes = serde_json::json!({"action": "accept"});
///         Some(pending.asks.keys().map(|key| (key.clone(), yes.clone())).collect::<Answers>())
///     }
/// }
/// ```
pub trait Asker: Send + Sync + 'static {
    /// The answers to `pending`'s asks, or `None`.
    fn ask(&self, pending: PendingInput) -> Pin<Box<dyn Future<Output = Option<Answers>> + Send>>;
}

impl<F, Fut> Asker for F
where
    F: Fn(PendingInput) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<Answers>> + Send + 'static,
{
    fn ask(&self, pending: PendingInput) -> Pin<Box<dyn Future<Output = Option<Answers>> + Send>> {
        Box::pin(self(pending))
    }
}

/// Rounds of asking in one call before it is given up: a tool asks each question once per
/// round, so more than a few rounds is a tool (or an app) going round in circles.
const MAX_ROUNDS: usize = 16;

/// What both fronts share: the dispatcher, what the caller may call, and the asker.
#[derive(Clone)]
pub(crate) struct InProcess {
    pub(crate) dispatcher: Dispatcher,
    pub(crate) grant: Grant,
    pub(crate) asker: Option<Arc<dyn Asker>>,
}

/// One call as an in-process front makes it.
pub(crate) struct Call<'a> {
    /// The tool's wire name.
    pub(crate) name: &'a str,
    pub(crate) arguments: Value,
    /// The framework's id for the call, when it has one (adk-rust's `function_call_id`): kept
    /// in the call id for the logs, never trusted to be unique.
    pub(crate) framework_id: Option<&'a str>,
    /// The user the framework says the call is for, over the dispatcher's.
    pub(crate) user_id: Option<String>,
    /// The scopes the framework says the caller holds, over the front's grant.
    pub(crate) grant: Option<Grant>,
    /// Secrets the framework supplies (adk-rust's secret service), for those the dispatcher
    /// lacks.
    pub(crate) secrets: Vec<(String, String)>,
}

impl InProcess {
    pub(crate) fn new(dispatcher: Dispatcher) -> Self {
        InProcess {
            dispatcher,
            grant: Grant::All,
            asker: None,
        }
    }

    /// The tools to hand over: the latest version of each wire name, within the dispatcher's
    /// limits, that the grant lets the caller call.
    pub(crate) fn exported(&self) -> Result<Vec<&RegisteredTool>, Vec<ExportError>> {
        let registry = self.dispatcher.pipeline().registry();
        let tools = exported_tools(registry, self.dispatcher.limits_in_force())?;
        Ok(tools
            .into_iter()
            .filter(|tool| self.grant.allows(tool.descriptor().scopes))
            .collect())
    }

    /// Runs one call through the dispatcher, answering its asks with the asker.
    pub(crate) async fn call(&self, call: Call<'_>) -> (ToolResult, Failure) {
        let id = match call.framework_id {
            // A fresh id each time: a framework's id may repeat (scripted models, providers
            // without ids), and a repeated id would get the first call's answer.
            Some(framework_id) => format!("{framework_id}.{}", crate::random::uuid_v4().simple()),
            None => crate::random::uuid_v4().simple().to_string(),
        };
        let tool_call = ToolCall {
            id,
            name: call.name.to_owned(),
            arguments: Ok(call.arguments),
        };
        let grant = call.grant.as_ref().unwrap_or(&self.grant);
        if let Some(tool) = self
            .dispatcher
            .pipeline()
            .registry()
            .resolve_wire_name(call.name)
            && !grant.allows(tool.descriptor().scopes)
        {
            let scopes = tool.descriptor().scopes.join("`, `");
            let text = format!(
                "Error: the user may not call '{}': it needs the scope(s) `{scopes}`, which \
                 they were not granted. Tell the user; calling it again will not help.",
                call.name
            );
            return (refusal(&tool_call, text), Failure::Refused);
        }
        let mut dispatcher = self.dispatcher.clone();
        if let Some(user) = call.user_id {
            dispatcher = dispatcher.user_id(user);
        }
        for (id, value) in call.secrets {
            if !dispatcher.has_secret(&id) {
                dispatcher = dispatcher.secret(id, value);
            }
        }
        let (mut step, mut failure) = dispatcher.step_one(tool_call).await;
        for _ in 0..MAX_ROUNDS {
            let pending = match step {
                Step::Done(result) => return (result, failure),
                Step::Asks(pending) => pending,
            };
            let answers = match &self.asker {
                Some(asker) => asker.ask(pending.clone()).await,
                None => None,
            };
            let Some(answers) = answers else {
                return (cannot_ask(&pending), Failure::Refused);
            };
            (step, failure) = dispatcher.resume_one(pending, answers).await;
        }
        let result = match step {
            Step::Done(result) => result,
            Step::Asks(pending) => refusal(
                &pending.call,
                format!(
                    "Error: '{}' asked more than {MAX_ROUNDS} rounds of questions and was \
                     stopped. Tell the user it could not finish.",
                    pending.call.name
                ),
            ),
        };
        (result, failure)
    }
}

fn refusal(call: &ToolCall, content: String) -> ToolResult {
    ToolResult {
        id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error: true,
        value: None,
        media: Vec::new(),
    }
}

/// A call whose questions no one here can answer: the model is told what the tool needed, so
/// that it can tell its user, and that calling again will ask the same.
fn cannot_ask(pending: &PendingInput) -> ToolResult {
    let needs: Vec<String> = pending
        .asks
        .iter()
        .map(|(key, ask)| match pending.message(key) {
            Some(message) => format!("\"{message}\""),
            None => match ask.get("method").and_then(Value::as_str) {
                Some("sampling/createMessage") => "an answer from the app's model".to_owned(),
                Some("roots/list") => "the app's roots".to_owned(),
                _ => format!("an answer to `{key}`"),
            },
        })
        .collect();
    refusal(
        &pending.call,
        format!(
            "Error: '{}' needs the user's answer before it can run ({}), and this app cannot \
             ask the user from inside a tool call. Nothing was done. Tell the user what the \
             tool needs; calling it again will ask the same.",
            pending.call.name,
            needs.join("; ")
        ),
    )
}
