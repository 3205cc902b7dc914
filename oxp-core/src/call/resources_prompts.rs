//! Reads of resources and gets of prompts: run as a call's tool runs (admitted within the
//! concurrency limit, within a time limit, panics contained, the result capped, secrets
//! scrubbed), counted under their own metrics, answered in their own terms.

use futures_util::FutureExt;
use serde_json::{Map, Value, json};

use super::{CallMeta, Pipeline, cancellable, classify, invoke, new_call_id};
use crate::content::Resource;
use crate::context::ToolContext;
use crate::descriptor::Invoke;
use crate::error::ToolError;
use crate::metrics::{Outcome, Refusal as Refused};
use crate::outcome::CallOutcome;
use crate::prompt::Message;
use crate::protocol::CallResult;

/// Why a resource read or a prompt get brought no contents.
///
/// ```
/// use oxp_runtime::call::{CallMeta, Pipeline, ReadError};
/// use oxp_runtime::Registry;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let pipeline = Pipeline::new(Registry::builder().build().unwrap());
/// let read = pipeline.read_resource("file:///nothing", &CallMeta::default()).await;
/// assert!(matches!(read, Err(ReadError::NotFound)));
/// # });
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// No resource serves the URI, or no prompt has the name.
    NotFound,
    /// A prompt argument or template value missing, or not of its parameter's type.
    InvalidArguments(String),
    /// The fn failed: its error, a panic, its time limit, a result over the cap.
    Failed(ToolError),
    /// Not run: the server is at its concurrency limit, or shutting down.
    Unavailable(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NotFound => f.write_str("not found"),
            ReadError::InvalidArguments(why) | ReadError::Unavailable(why) => f.write_str(why),
            ReadError::Failed(error) => f.write_str(&error.message),
        }
    }
}

impl std::error::Error for ReadError {}

impl Pipeline {
    /// Reads the resource at `uri`: the fixed resource of that URI, or the template it matches
    /// with its parameters taken from the URI.
    ///
    /// ```
    /// use oxp_runtime::call::{CallMeta, Pipeline};
    /// use oxp_runtime::content::Resource;
    /// use oxp_runtime::{resource, Registry};
    ///
    /// /// A user's profile.
    /// #[resource(uri = "users://{id}/profile")]
    /// fn profile(id: u64) -> String { format!("user {id}") }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let pipeline = Pipeline::new(Registry::builder().resource(profile::RESOURCE).build().unwrap());
    /// let contents = pipeline.read_resource("users://7/profile", &CallMeta::default()).await.unwrap();
    /// assert!(matches!(&contents[0], Resource::Text { text, .. } if text == "user 7"));
    /// # });
    /// ```
    pub async fn read_resource(
        &self,
        uri: &str,
        meta: &CallMeta,
    ) -> Result<Vec<Resource>, ReadError> {
        let Some((resource, values)) = self.registry.resolve_resource(uri) else {
            return Err(ReadError::NotFound);
        };
        let descriptor = resource.descriptor();
        let input = json!({ "uri": uri, "arguments": values });
        let value = self
            .run_other(
                (false, descriptor.uri),
                descriptor.read,
                descriptor.timeout_ms,
                input,
                meta,
            )
            .await?;
        decoded(value, "The resource's contents could not be sent.")
    }

    /// Renders the prompt `name` with `arguments` (strings, read as each parameter's type).
    ///
    /// ```
    /// use oxp_runtime::call::{CallMeta, Pipeline};
    /// use oxp_runtime::prompt::Message;
    /// use oxp_runtime::{prompt, Registry};
    ///
    /// /// Greet someone.
    /// #[prompt]
    /// fn greet(name: String) -> String { format!("Say hello to {name}.") }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let pipeline = Pipeline::new(Registry::builder().prompt(greet::PROMPT).build().unwrap());
    /// let arguments = serde_json::json!({"name": "Ada"}).as_object().unwrap().clone();
    /// let messages = pipeline.get_prompt("greet", arguments, &CallMeta::default()).await.unwrap();
    /// assert_eq!(messages, [Message::user("Say hello to Ada.")]);
    /// # });
    /// ```
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        meta: &CallMeta,
    ) -> Result<Vec<Message>, ReadError> {
        let Some(prompt) = self.registry.prompt(name) else {
            return Err(ReadError::NotFound);
        };
        let descriptor = prompt.descriptor();
        let known: Vec<&str> = descriptor.arguments.iter().map(|a| a.name).collect();
        if let Some(unknown) = arguments.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(ReadError::InvalidArguments(format!(
                "the prompt `{name}` has no argument `{unknown}`; it takes {known:?}"
            )));
        }
        let input = json!({ "arguments": arguments });
        let value = self
            .run_other(
                (true, descriptor.name),
                descriptor.get,
                descriptor.timeout_ms,
                input,
                meta,
            )
            .await?;
        decoded(value, "The prompt's messages could not be sent.")
    }

    /// Runs a resource's or a prompt's glue as a tool's run, counted under `label` (whether
    /// it is a prompt, and its registered name).
    async fn run_other(
        &self,
        label: (bool, &'static str),
        invoke: Invoke,
        timeout_ms: Option<u64>,
        input: Value,
        meta: &CallMeta,
    ) -> Result<Value, ReadError> {
        let answer = self
            .run_glue(label.1, invoke, timeout_ms, input, meta)
            .await;
        let outcome = match &answer {
            Ok(answer) => classify(answer),
            Err(_) => Outcome::Refused,
        };
        if let Some(metrics) = &self.metrics {
            metrics.read(label.0, label.1, outcome);
        }
        match answer? {
            CallOutcome::Completed(response) => match response.result {
                CallResult::Success { value: Some(value) } => Ok(value),
                CallResult::Success { value: None } => Err(ReadError::Failed(ToolError::new(
                    "The function returned nothing.",
                ))),
                CallResult::Failure { mut error } => {
                    // The pipeline's own words about a run (its time limit, a panic, the cap)
                    // name what ran.
                    const RUNS: [&str; 5] = [
                        invoke::TIMED_OUT,
                        invoke::PANICKED,
                        "The tool's result is too large to send.",
                        "The tool produced a value that could not be sent.",
                        "The tool was cancelled.",
                    ];
                    if RUNS.contains(&error.message.as_str()) {
                        let what = if label.0 { "prompt" } else { "resource" };
                        error.message = error.message.replacen("tool", what, 1);
                    }
                    Err(ReadError::Failed(error))
                }
            },
            CallOutcome::Invalid(invalid) => Err(ReadError::InvalidArguments(invalid.message)),
            CallOutcome::Rejected(rejected) => Err(ReadError::Unavailable(rejected.message)),
            CallOutcome::Unavailable { error, .. } => Err(ReadError::Unavailable(error.message)),
        }
    }

    async fn run_glue(
        &self,
        name: &'static str,
        invoke: Invoke,
        timeout_ms: Option<u64>,
        input: Value,
        meta: &CallMeta,
    ) -> Result<CallOutcome, ReadError> {
        let refused = |reason: Refused, why: &str| {
            if let Some(metrics) = &self.metrics {
                metrics.refused(reason);
            }
            ReadError::Unavailable(why.to_owned())
        };
        let admission = match self.gate.admit() {
            Ok(admission) => admission,
            Err(super::gate::Refusal::Full) => {
                return Err(refused(
                    Refused::ConcurrencyLimit,
                    "the server is at its concurrency limit",
                ));
            }
            Err(super::gate::Refusal::Draining) => {
                return Err(refused(Refused::Draining, "the server is shutting down"));
            }
        };
        let context = ToolContext::new(new_call_id()).with_signals(meta.signals.clone());
        let subject = invoke::Subject::Other { name, invoke };
        let execution = self
            .execute(subject, timeout_ms, context, input, admission)
            .map_err(|why| ReadError::Unavailable(why.to_owned()))?;
        Ok(match meta.signals.cancellation() {
            Some(cancellation) => cancellable(execution, cancellation).boxed().await,
            None => execution.await,
        })
    }
}

/// What a resource's or a prompt's glue returned, read back as its type; `failure` the message
/// when it cannot be.
fn decoded<T: serde::de::DeserializeOwned>(value: Value, failure: &str) -> Result<T, ReadError> {
    serde_json::from_value(value)
        .map_err(|e| ReadError::Failed(ToolError::new(failure).developer_message(e.to_string())))
}
