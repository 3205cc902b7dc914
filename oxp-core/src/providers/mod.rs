//! The same tools, handed to model providers in their own formats, and the calls those models
//! make run through the one [`Pipeline`].
//!
//! Each provider has a module ([`openai`], [`anthropic`], [`gemini`]) that holds its rules —
//! the schema projection, the shape of its tool definitions, tool calls and tool results — each
//! rule with its source. What is common lives here: [`Provider`], the one shape every provider
//! is driven through; [`Limits`] (seed 003 §7), the typed [`ExportError`], and [`Dispatcher`],
//! which runs a model's tool calls concurrently and turns every outcome into text a model can
//! act on (seed 003 §5.3, §8).
//!
//! ```
//! use oxp_runtime::{tool, Registry};
//! use oxp_runtime::providers::{anthropic, Limits};
//!
//! /// Add two numbers.
//! #[tool(toolkit = "Calculator", version = "1.0.0")]
//! async fn add(a: f64, b: f64) -> f64 { a + b }
//!
//! let registry = Registry::builder().tool(add::TOOL).build().unwrap();
//! let tools = anthropic::tools(&registry, &Limits::default()).unwrap();
//! assert_eq!(tools[0]["name"], "Calculator_Add");
//! assert_eq!(tools[0]["input_schema"]["required"], serde_json::json!(["a", "b"]));
//! ```

pub mod anthropic;
pub mod gemini;
pub mod openai;
mod provider;
mod schema_walk;

pub use provider::Provider;
#[doc(hidden)]
pub use schema_walk::for_model as schema_for_model;

use std::fmt;

use serde_json::{Value, json};

use crate::call::{CallMeta, CallOutcome, Pipeline};
use crate::protocol::{
    AuthorizationToken, CallContext, CallResult, CallToolRequest, Sensitive, ToolSecret,
};
use crate::registry::{RegisteredTool, Registry};
use crate::signals::Cancellation;

/// The guardrails of seed 003 §7.1, checked when exporting tools and when dispatching calls.
///
/// ```
/// use oxp_runtime::providers::Limits;
/// let limits = Limits { max_tools: 32, ..Limits::default() };
/// assert_eq!(limits.max_name_len, 64);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Tools in one request (default 128).
    pub max_tools: usize,
    /// Characters in a tool's name (default 64).
    pub max_name_len: usize,
    /// Characters in a tool's description (default 1024).
    pub max_description_len: usize,
    /// Nesting levels of a parameters schema (default 5).
    pub max_schema_depth: usize,
    /// Bytes of one call's arguments (default 64 KB).
    pub max_arguments_bytes: usize,
    /// Tool calls in one model response (default 20).
    pub max_calls_per_response: usize,
    /// Bytes of one tool result sent back to the model (seed 003 §8.3: 64 KB).
    pub max_result_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_tools: 128,
            max_name_len: 64,
            max_description_len: 1024,
            max_schema_depth: 5,
            max_arguments_bytes: 64 * 1024,
            max_calls_per_response: 20,
            max_result_bytes: 64 * 1024,
        }
    }
}

/// Why tools cannot be exported to a provider. Nothing is exported in a different shape than
/// the tool declares: a tool the provider cannot express is an error, never a silent change.
///
/// ```
/// use oxp_runtime::{providers::{anthropic, ExportError, Limits}, tool, Registry};
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// fn add(a: i64, b: i64) -> i64 { a + b }
///
/// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
/// let limits = Limits { max_description_len: 8, ..Limits::default() };
/// let errors = anthropic::tools(&registry, &limits).unwrap_err();
/// assert!(matches!(&errors[0], ExportError::LimitExceeded { tool: Some(_), .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportError {
    /// `tool_schema_incompatible`: the tool's schema uses features the provider lacks.
    SchemaIncompatible {
        /// The tool's wire name.
        tool: String,
        /// The provider.
        provider: &'static str,
        /// The JSON Schema features it cannot express (`oneOf`, `additionalProperties`, …).
        incompatible_features: Vec<String>,
    },
    /// A limit of [`Limits`] is exceeded.
    LimitExceeded {
        /// The tool's wire name, when the limit is per tool.
        tool: Option<String>,
        /// Which limit, and by how much.
        detail: String,
    },
}

impl ExportError {
    /// The error's code: `tool_schema_incompatible` or `limit_exceeded`.
    ///
    /// ```
    /// use oxp_runtime::providers::ExportError;
    /// let error = ExportError::LimitExceeded { tool: None, detail: "200 tools, the limit is 128".into() };
    /// assert_eq!(error.code(), "limit_exceeded");
    /// ```
    pub fn code(&self) -> &'static str {
        match self {
            ExportError::SchemaIncompatible { .. } => "tool_schema_incompatible",
            ExportError::LimitExceeded { .. } => "limit_exceeded",
        }
    }

    /// The error as seed 003 §5.4 shapes it: `{"error": {"code", "message", "type", …}}`.
    ///
    /// ```
    /// use oxp_runtime::providers::ExportError;
    /// let error = ExportError::LimitExceeded { tool: None, detail: "200 tools, the limit is 128".into() };
    /// assert_eq!(error.to_json()["error"]["code"], "limit_exceeded");
    /// ```
    pub fn to_json(&self) -> Value {
        let mut error = json!({
            "code": self.code(),
            "message": self.to_string(),
            "type": "semantic_error",
        });
        if let ExportError::SchemaIncompatible {
            incompatible_features,
            ..
        } = self
        {
            error["incompatible_features"] = json!(incompatible_features);
        }
        json!({ "error": error })
    }
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::SchemaIncompatible {
                tool,
                provider,
                incompatible_features,
            } => write!(
                f,
                "Tool '{tool}' uses {} which {provider} does not support",
                incompatible_features
                    .iter()
                    .map(|f| format!("'{f}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ExportError::LimitExceeded {
                tool: Some(tool),
                detail,
            } => write!(f, "Tool '{tool}': {detail}"),
            ExportError::LimitExceeded { tool: None, detail } => f.write_str(detail),
        }
    }
}

impl std::error::Error for ExportError {}

/// The tools to export: the latest version of each wire name (models call tools by name), in
/// registry order, with the per-tool limits checked.
#[doc(hidden)]
pub fn exported_tools<'r>(
    registry: &'r Registry,
    limits: &Limits,
) -> Result<Vec<&'r RegisteredTool>, Vec<ExportError>> {
    let mut tools: Vec<&RegisteredTool> = Vec::new();
    for tool in registry.tools() {
        // `tools()` is ordered by version within a name: the last one wins.
        match tools.last() {
            Some(previous) if previous.name() == tool.name() => {
                *tools.last_mut().expect("just matched") = tool;
            }
            _ => tools.push(tool),
        }
    }
    let mut errors = Vec::new();
    if tools.len() > limits.max_tools {
        errors.push(ExportError::LimitExceeded {
            tool: None,
            detail: format!(
                "{} tools exceed the limit of {} per request",
                tools.len(),
                limits.max_tools
            ),
        });
    }
    for tool in &tools {
        let definition = tool.definition();
        let name = &definition.name;
        let too_long = |what: &str, len: usize, max: usize| ExportError::LimitExceeded {
            tool: Some(name.clone()),
            detail: format!("the {what} is {len} characters; the limit is {max}"),
        };
        if name.chars().count() > limits.max_name_len {
            errors.push(too_long("name", name.chars().count(), limits.max_name_len));
        }
        let description = tool.description_for_models().chars().count();
        if description > limits.max_description_len {
            errors.push(too_long(
                "description",
                description,
                limits.max_description_len,
            ));
        }
        let depth = schema_walk::depth(&definition.input_schema);
        if depth > limits.max_schema_depth {
            errors.push(ExportError::LimitExceeded {
                tool: Some(name.clone()),
                detail: format!(
                    "the parameters schema nests {depth} levels; the limit is {}",
                    limits.max_schema_depth
                ),
            });
        }
    }
    if errors.is_empty() {
        Ok(tools)
    } else {
        Err(errors)
    }
}

/// Projects every exported tool with `project`, collecting every error.
pub(crate) fn export<T>(
    registry: &Registry,
    limits: &Limits,
    mut project: impl FnMut(&RegisteredTool) -> Result<T, ExportError>,
) -> Result<Vec<T>, Vec<ExportError>> {
    let tools = exported_tools(registry, limits)?;
    let mut projected = Vec::with_capacity(tools.len());
    let mut errors = Vec::new();
    for tool in tools {
        match project(tool) {
            Ok(value) => projected.push(value),
            Err(error) => errors.push(error),
        }
    }
    if errors.is_empty() {
        Ok(projected)
    } else {
        Err(errors)
    }
}

/// One tool call a model made, in provider-neutral form.
///
/// ```
/// let message = serde_json::json!({"content": [{"type": "tool_use", "id": "toolu_1", "name": "Calculator_Add", "input": {"a": 1}}]});
/// let call = &oxp_runtime::providers::anthropic::parse_calls(&message).unwrap()[0];
/// assert_eq!((call.id.as_str(), call.name.as_str()), ("toolu_1", "Calculator_Add"));
/// ```
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (generated for Gemini), echoed in the result.
    pub id: String,
    /// The tool's wire name.
    pub name: String,
    /// The arguments, or why they could not be read (malformed JSON from the model).
    pub arguments: Result<Value, String>,
}

/// A call's arguments when the provider sends them as a JSON object (Anthropic's `input`,
/// Gemini's `args`): anything but an object is an error for the model, not a dispatch failure.
pub(crate) fn object_arguments(value: Option<&Value>, field: &str) -> Result<Value, String> {
    match value {
        Some(object @ Value::Object(_)) => Ok(object.clone()),
        Some(other) => Err(format!("`{field}` must be an object, not {other}")),
        None => Err(format!("`{field}` is missing")),
    }
}

/// What every format's dispatch does, the format supplying only its wire shape: read the
/// model's calls with `parse`, run them through `dispatcher`, and answer each result with
/// `answer`, in the calls' order.
pub(crate) async fn dispatch(
    dispatcher: &Dispatcher,
    response: &Value,
    parse: fn(&Value) -> Result<Vec<ToolCall>, DispatchError>,
    answer: fn(ToolResult) -> Value,
) -> Result<Vec<Value>, DispatchError> {
    let results = dispatcher.run(parse(response)?).await?;
    Ok(results.into_iter().map(answer).collect())
}

/// The one `role: "user"` message that carries every answer under `field` (Anthropic's
/// `content`, Gemini's `parts`), for the formats that answer so: none when the model called no
/// tool, since both APIs refuse a message with nothing in it.
pub(crate) fn user_message(field: &str, answers: Vec<Value>) -> Option<Value> {
    (!answers.is_empty()).then(|| json!({"role": "user", field: answers}))
}

/// What came of one tool call, ready to be put in the provider's result format.
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::{call::Pipeline, providers::{anthropic, Dispatcher}};
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap()));
/// let calls = anthropic::parse_calls(&serde_json::json!({"content": [
///     {"type": "tool_use", "id": "toolu_1", "name": "Calculator_Add", "input": {"a": 2, "b": 3}},
///     {"type": "tool_use", "id": "toolu_2", "name": "Calculator_Add", "input": {"a": "two"}}
/// ]})).unwrap();
/// let results = dispatcher.run(calls).await.unwrap();
/// assert_eq!((results[0].content.as_str(), results[0].is_error), ("5", false));
/// assert!(results[1].is_error, "invalid input is an error result the model can correct");
/// # });
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    /// The call's id.
    pub id: String,
    /// The tool's wire name.
    pub name: String,
    /// The text for the model: the value, or an error that says how to retry.
    pub content: String,
    /// Whether it is an error (Anthropic's `is_error`).
    pub is_error: bool,
    /// The value itself, for providers that take structured results (Gemini); for a tool
    /// returning [`Contents`](crate::content::Contents), its structured value.
    pub value: Option<Value>,
    /// For a tool returning [`Contents`](crate::content::Contents): its blocks other than
    /// text, which a format with a place for them carries in its own shape (an image part);
    /// `content` names each with a short notice, for formats without one.
    pub media: Vec<crate::content::Content>,
}

/// Runs a model's tool calls through a pipeline, concurrently, with the secrets, tokens and
/// user id the app supplies (a model never sees or sends them).
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::call::Pipeline;
/// use oxp_runtime::providers::{openai, Dispatcher};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: f64, b: f64) -> f64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap()));
/// let message = serde_json::json!({"role": "assistant", "tool_calls": [
///     {"id": "call_1", "type": "function", "function": {"name": "Calculator_Add", "arguments": "{\"a\": 2, \"b\": 3}"}}
/// ]});
/// let results = openai::dispatch_chat(&dispatcher, &message).await.unwrap();
/// assert_eq!(results[0], serde_json::json!({"role": "tool", "tool_call_id": "call_1", "content": "5.0"}));
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct Dispatcher {
    pipeline: Pipeline,
    limits: Limits,
    context: CallContext,
    /// The principal its calls' idempotency keys are scoped to: its own, made when it is, so
    /// that a model's call id can never fetch another dispatcher's (another conversation's)
    /// answer. Clones share it: a clone is the same conversation.
    meta: CallMeta,
    /// Seals the answers of calls that ask ([`PendingInput`]), with a key of its own.
    sealer: crate::seal::Sealer,
}

/// A tool call that stopped to ask (see [`ask`](crate::ask)): what the app shows its own user
/// before anything goes back to the model, and what [`Dispatcher::resume`] takes back with the
/// answers. What the call established so far (the questions asked, the answers given) is
/// sealed in it, bound to the call, the conversation and the user: it may be kept (it is
/// `Serialize`) and resumed later, in another request or process, by a dispatcher with the same
/// [`state_key`](Dispatcher::state_key) and [`conversation`](Dispatcher::conversation).
///
/// ```
/// use oxp_runtime::{call::Pipeline, providers::{Dispatcher, Step, ToolCall}, tool, Registry};
///
/// /// Empty the bin.
/// #[tool(toolkit = "Files", version = "1.0.0", confirm = "Empty {bin}?")]
/// fn empty(bin: String) -> String { format!("emptied {bin}") }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(empty::TOOL).build().unwrap()));
/// let call = ToolCall { id: "c".into(), name: "Files_Empty".into(),
///     arguments: Ok(serde_json::json!({"bin": "trash"})) };
/// let Step::Asks(pending) = dispatcher.steps(vec![call]).await.unwrap().remove(0) else { panic!() };
/// assert_eq!(pending.call.id, "c");
/// assert_eq!(pending.message("oxp.confirm"), Some("Empty trash?"));
/// // Kept as JSON between two requests of the app, and read back.
/// let kept = serde_json::to_string(&pending).unwrap();
/// let pending: oxp_runtime::providers::PendingInput = serde_json::from_str(&kept).unwrap();
/// assert_eq!(pending.asks["oxp.confirm"]["method"], "elicitation/create");
/// # });
/// ```
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PendingInput {
    /// The model's call.
    pub call: ToolCall,
    /// What the tool asks, by key, in MCP's request shapes: `{"method": "elicitation/create",
    /// "params": {"message": …, "requestedSchema": …}}` for a question (a confirmation has no
    /// fields; `"mode": "url"` asks to visit `params.url`), `sampling/createMessage` for the
    /// app's model, `roots/list` for its roots. A tool's `confirm = "…"` asks under
    /// `oxp.confirm`.
    pub asks: std::collections::BTreeMap<String, Value>,
    state: String,
}

impl PendingInput {
    /// The question of ask `key`, when it is one for the user.
    ///
    /// ```
    /// # let pending: Option<oxp_runtime::providers::PendingInput> = None;
    /// # if let Some(pending) = pending {
    /// for key in pending.asks.keys() {
    ///     println!("{}", pending.message(key).unwrap_or("(the model's or the app's part)"));
    /// }
    /// # }
    /// ```
    pub fn message(&self, key: &str) -> Option<&str> {
        self.asks.get(key)?.pointer("/params/message")?.as_str()
    }
}

/// What became of one call of [`Dispatcher::steps`]: its result for the model, or what it asks.
///
/// ```
/// use oxp_runtime::{call::Pipeline, providers::{Dispatcher, Step, ToolCall}, tool, Registry};
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// fn add(a: i64, b: i64) -> i64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap()));
/// let call = ToolCall { id: "c".into(), name: "Calculator_Add".into(),
///     arguments: Ok(serde_json::json!({"a": 2, "b": 3})) };
/// let Step::Done(result) = dispatcher.steps(vec![call]).await.unwrap().remove(0) else { panic!() };
/// assert_eq!(result.content, "5"); // a tool that asks nothing is done at once
/// # });
/// ```
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // handed out once per call, never stored in bulk
pub enum Step {
    /// The result, for the model.
    Done(ToolResult),
    /// The tool asks first; [`Dispatcher::resume`] goes on with the answers.
    Asks(PendingInput),
}

/// Why a model response could not be dispatched at all (as opposed to one call failing, which
/// becomes an error result for the model).
///
/// ```
/// use oxp_runtime::providers::{openai, DispatchError};
/// let error = openai::parse_chat_calls(&serde_json::json!({"tool_calls": 7})).unwrap_err();
/// assert!(matches!(error, DispatchError::Malformed(_)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DispatchError {
    /// The response is not in the provider's documented shape.
    Malformed(String),
    /// More tool calls than [`Limits::max_calls_per_response`].
    TooManyCalls {
        /// How many the response had.
        calls: usize,
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for DispatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DispatchError::Malformed(what) => write!(f, "malformed model response: {what}"),
            DispatchError::TooManyCalls { calls, limit } => write!(
                f,
                "the response has {calls} tool calls; the limit is {limit} per response"
            ),
        }
    }
}

impl std::error::Error for DispatchError {}

/// Cancels when dropped (a finished run's cancellation reaches nothing).
struct CancelOnDrop(Cancellation);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl Dispatcher {
    /// Dispatches through `pipeline` with the default [`Limits`] and an empty context.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, providers::{Dispatcher, ToolCall}, tool, Registry};
    ///
    /// /// Add two integers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap()));
    /// // What a provider's parser makes of a model's tool call.
    /// let call = ToolCall {
    ///     id: "call_1".into(),
    ///     name: "Calculator_Add".into(),
    ///     arguments: Ok(serde_json::json!({"a": 2, "b": 3})),
    /// };
    /// let results = dispatcher.run(vec![call]).await.unwrap();
    /// assert_eq!((results[0].id.as_str(), results[0].content.as_str()), ("call_1", "5"));
    /// # });
    /// ```
    pub fn new(pipeline: Pipeline) -> Self {
        let principal = format!("dispatch:{}", crate::random::uuid_v4().simple());
        Dispatcher {
            pipeline,
            limits: Limits::default(),
            context: CallContext::default(),
            meta: CallMeta {
                principal: Some(principal),
                front: crate::call::Front::Dispatch,
                ..CallMeta::default()
            },
            sealer: crate::seal::Sealer::new(None, crate::seal::DEFAULT_TTL)
                .expect("the system's random source works"),
        }
    }

    /// Other limits.
    ///
    /// ```
    /// use oxp_runtime::call::Pipeline;
    /// use oxp_runtime::providers::{DispatchError, Dispatcher, Limits, ToolCall};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let dispatcher = Dispatcher::new(Pipeline::new(registry))
    ///     .limits(Limits { max_calls_per_response: 5, ..Limits::default() });
    /// let runaway: Vec<ToolCall> = (0..6)
    ///     .map(|i| ToolCall { id: format!("call_{i}"), name: "Mail_Send".into(), arguments: Ok(serde_json::json!({})) })
    ///     .collect();
    /// let refused = dispatcher.run(runaway).await.unwrap_err();
    /// assert_eq!(refused, DispatchError::TooManyCalls { calls: 6, limit: 5 });
    /// # });
    /// ```
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The whole context every call carries (secrets, tokens, user), replacing any set before.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, protocol::CallContext, providers::Dispatcher, Registry};
    ///
    /// # let registry = Registry::builder().build().unwrap();
    /// // The context a host keeps per signed-in user, e.g. read from its session store.
    /// let context: CallContext = serde_json::from_str(
    ///     r#"{"user_id": "ada", "secrets": [{"id": "SMTP_PASSWORD", "value": "…"}]}"#,
    /// ).unwrap();
    /// let dispatcher = Dispatcher::new(Pipeline::new(registry)).with_context(context);
    /// ```
    #[must_use]
    pub fn with_context(mut self, context: CallContext) -> Self {
        self.context = context;
        self
    }

    /// A secret every call may use (tools get only those they declare).
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, providers::{Dispatcher, ToolCall}, tool, Registry, ToolContext};
    ///
    /// /// Say which mail server the key opens.
    /// #[tool(toolkit = "Mail", version = "1.0.0", secret = "SMTP_PASSWORD")]
    /// async fn check(ctx: &ToolContext) -> usize { ctx.secret("SMTP_PASSWORD").map_or(0, str::len) }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(check::TOOL).build().unwrap()))
    ///     .secret("SMTP_PASSWORD", "hunter22");
    /// let call = ToolCall { id: "c1".into(), name: "Mail_Check".into(), arguments: Ok(serde_json::json!({})) };
    /// assert_eq!(dispatcher.run(vec![call]).await.unwrap()[0].content, "8");
    /// # });
    /// ```
    #[must_use]
    pub fn secret(mut self, id: impl Into<String>, value: impl Into<String>) -> Self {
        self.context.secrets.push(ToolSecret {
            id: id.into(),
            value: Sensitive::new(value),
            extra: Default::default(),
        });
        self
    }

    /// An authorization token for provider `id`.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, providers::{Dispatcher, ToolCall}, tool, Registry, ToolContext};
    ///
    /// /// Whether the user's GitHub token arrived.
    /// #[tool(toolkit = "GitHub", version = "1.0.0", authorization(id = "github"))]
    /// async fn signed_in(ctx: &ToolContext) -> bool { ctx.authorization_token("github").is_some() }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(signed_in::TOOL).build().unwrap()))
    ///     .authorization_token("github", "gho_…");
    /// let call = ToolCall { id: "c1".into(), name: "GitHub_SignedIn".into(), arguments: Ok(serde_json::json!({})) };
    /// assert_eq!(dispatcher.run(vec![call]).await.unwrap()[0].content, "true");
    /// # });
    /// ```
    #[must_use]
    pub fn authorization_token(mut self, id: impl Into<String>, token: impl Into<String>) -> Self {
        self.context.authorization.push(AuthorizationToken {
            id: id.into(),
            token: Sensitive::new(token),
            extra: Default::default(),
        });
        self
    }

    /// The user the calls are made for.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, providers::{Dispatcher, ToolCall}, tool, Registry, ToolContext};
    ///
    /// /// Greet the user.
    /// #[tool(toolkit = "Greeter", version = "1.0.0", user_id)]
    /// async fn hello(ctx: &ToolContext) -> String { format!("hello, {}", ctx.user_id().unwrap_or("?")) }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(hello::TOOL).build().unwrap()))
    ///     .user_id("ada");
    /// let call = ToolCall { id: "c1".into(), name: "Greeter_Hello".into(), arguments: Ok(serde_json::json!({})) };
    /// assert_eq!(dispatcher.run(vec![call]).await.unwrap()[0].content, "hello, ada");
    /// # });
    /// ```
    #[must_use]
    pub fn user_id(mut self, user_id: impl Into<String>) -> Self {
        self.context.user_id = Some(user_id.into());
        self
    }

    /// Names the conversation this dispatcher serves, for an app that keeps it across
    /// requests or processes: a dispatcher made with the same name (and the same
    /// [`state_key`](Self::state_key)) resumes its [`PendingInput`]s and shares its `call_id`
    /// answers. Without one, each dispatcher is a conversation of its own.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use oxp_runtime::{call::Pipeline, providers::Dispatcher};
    /// let dispatcher = Dispatcher::new(Pipeline::new(registry)).conversation("chat-7f3a");
    /// ```
    #[must_use]
    pub fn conversation(mut self, id: impl AsRef<str>) -> Self {
        self.meta.principal = Some(format!("conversation:{}", id.as_ref()));
        self
    }

    /// The key (32 bytes or more) that seals [`PendingInput`]s, for pending inputs resumed by
    /// another dispatcher (another process, after a restart): without one, each dispatcher
    /// makes its own. `Err` for a shorter key.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use oxp_runtime::{call::Pipeline, providers::Dispatcher};
    /// let key = std::env::var("APP_STATE_KEY").unwrap_or_else(|_| "k".repeat(32));
    /// let dispatcher = Dispatcher::new(Pipeline::new(registry)).state_key(key.as_bytes())?;
    /// # Ok::<(), String>(())
    /// ```
    pub fn state_key(mut self, key: &[u8]) -> Result<Self, String> {
        self.sealer = crate::seal::Sealer::new(Some(key), self.sealer.ttl())?;
        Ok(self)
    }

    /// How long a [`PendingInput`] may wait for its answers (default: 10 minutes, counted from
    /// the first answer once there is one). Keep it within the pipeline's idempotency
    /// time-to-live, which is how long a finished call is remembered against replays.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use oxp_runtime::{call::Pipeline, providers::Dispatcher};
    /// let dispatcher = Dispatcher::new(Pipeline::new(registry))
    ///     .state_ttl(std::time::Duration::from_secs(120));
    /// ```
    #[must_use]
    pub fn state_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.sealer = self.sealer.with_ttl(ttl);
        self
    }

    /// Whether a call carries secret `id` (the in-process fronts add a framework's own).
    #[doc(hidden)]
    pub fn has_secret(&self, id: &str) -> bool {
        self.context.secrets.iter().any(|secret| secret.id == id)
    }

    /// Its limits (the in-process fronts export with them).
    #[doc(hidden)]
    pub fn limits_in_force(&self) -> &Limits {
        &self.limits
    }

    /// The pipeline calls run through.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use oxp_runtime::{call::Pipeline, providers::{Dispatcher, Limits}};
    /// let dispatcher = Dispatcher::new(Pipeline::new(registry));
    /// assert_eq!(dispatcher.pipeline().stats().active, 0);
    /// ```
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Runs `calls` concurrently; results come back in the calls' order, matched by id.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    /// use oxp_runtime::{call::Pipeline, providers::{anthropic, Dispatcher}};
    ///
    /// /// Add two integers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap()));
    /// let calls = anthropic::parse_calls(&serde_json::json!({"content": [
    ///     {"type": "tool_use", "id": "toolu_1", "name": "Calculator_Add", "input": {"a": 2, "b": 3}},
    ///     {"type": "tool_use", "id": "toolu_2", "name": "Calculator_Add", "input": {"a": "two"}}
    /// ]})).unwrap();
    /// let results = dispatcher.run(calls).await.unwrap();
    /// assert_eq!(results[0].content, "5");
    /// assert!(results[1].is_error, "\"two\" is no integer: the model is told so and may retry");
    /// # });
    /// ```
    pub async fn run(&self, calls: Vec<ToolCall>) -> Result<Vec<ToolResult>, DispatchError> {
        self.within_limits(&calls)?;
        // Dropping this future (the host gave up on the model's turn) cancels its calls: a
        // tool sees `ctx.is_cancelled()`, and a run is dropped at its next await point.
        let cancellation = Cancellation::new();
        let _cancel_when_dropped = CancelOnDrop(cancellation.clone());
        let meta = CallMeta {
            signals: self.meta.signals.clone().cancelled_by(&cancellation),
            ..self.meta.clone()
        };
        let runs = calls.into_iter().map(|call| self.run_one(call, &meta));
        Ok(futures_util::future::join_all(runs).await)
    }

    /// Like [`run`](Self::run), for tools that may ask (see [`ask`](crate::ask)): a call that
    /// asks comes back as [`Step::Asks`], for the app to show its own user; the model sees
    /// nothing of it until [`resume`](Self::resume) gives a result.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, providers::{Dispatcher, Step, ToolCall}, tool, Registry, ToolContext, ToolError};
    ///
    /// /// Delete a file.
    /// #[tool(toolkit = "Files", version = "1.0.0", confirm = "Delete {path}?")]
    /// fn delete(path: String) -> String { format!("deleted {path}") }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(delete::TOOL).build().unwrap()));
    /// let call = ToolCall { id: "call_1".into(), name: "Files_Delete".into(),
    ///     arguments: Ok(serde_json::json!({"path": "/tmp/x"})) };
    /// let Step::Asks(pending) = dispatcher.steps(vec![call]).await.unwrap().remove(0) else { panic!() };
    /// assert_eq!(pending.message("oxp.confirm"), Some("Delete /tmp/x?"));
    /// // The app asks its user; a yes:
    /// let yes = [("oxp.confirm".to_owned(), serde_json::json!({"action": "accept"}))].into();
    /// let Step::Done(result) = dispatcher.resume(pending, yes).await else { panic!() };
    /// assert_eq!(result.content, "deleted /tmp/x");
    /// # });
    /// ```
    pub async fn steps(&self, calls: Vec<ToolCall>) -> Result<Vec<Step>, DispatchError> {
        self.within_limits(&calls)?;
        let cancellation = Cancellation::new();
        let _cancel_when_dropped = CancelOnDrop(cancellation.clone());
        let runs = calls.into_iter().map(|call| {
            let round = crate::ask::Round::resume(None, Default::default(), |_| true);
            self.step(call, round, &cancellation)
        });
        let steps = futures_util::future::join_all(runs).await;
        Ok(steps.into_iter().map(|(step, _)| step).collect())
    }

    /// One call as [`steps`](Self::steps) runs it, with what kind of failure its result is:
    /// for the in-process fronts, which answer in their framework's error types.
    #[doc(hidden)]
    pub async fn step_one(&self, call: ToolCall) -> (Step, Failure) {
        let cancellation = Cancellation::new();
        let _cancel_when_dropped = CancelOnDrop(cancellation.clone());
        let round = crate::ask::Round::resume(None, Default::default(), |_| true);
        self.step(call, round, &cancellation).await
    }

    /// Goes on with a call that asked, with the app's `answers` by ask key (an elicitation's
    /// `{"action": "accept", "content": {…}}`, `{"action": "decline"}`; a sampling result; a
    /// roots list): the tool runs again from the top with every answer so far. It may ask
    /// again. Only answers to what `pending` asks count; a pending input this dispatcher
    /// cannot open (another key or conversation, altered, expired) is an error result for the
    /// model, and nothing runs. Resuming the same pending input twice runs the tool once: the
    /// second gets the first's result.
    ///
    /// ```no_run
    /// # async fn go(dispatcher: oxp_runtime::providers::Dispatcher, pending: oxp_runtime::providers::PendingInput) {
    /// use oxp_runtime::providers::Step;
    /// let no = [("oxp.confirm".to_owned(), serde_json::json!({"action": "decline"}))].into();
    /// let Step::Done(result) = dispatcher.resume(pending, no).await else { return };
    /// assert!(result.is_error, "the model is told the user said no");
    /// # }
    /// ```
    pub async fn resume(
        &self,
        pending: PendingInput,
        answers: std::collections::BTreeMap<String, Value>,
    ) -> Step {
        self.resume_one(pending, answers).await.0
    }

    /// [`resume`](Self::resume), with what kind of failure its result is.
    #[doc(hidden)]
    pub async fn resume_one(
        &self,
        pending: PendingInput,
        answers: std::collections::BTreeMap<String, Value>,
    ) -> (Step, Failure) {
        let PendingInput { call, state, .. } = pending;
        let metrics = self.pipeline.metrics_handle();
        let opened = self.bound(&call, |binding| {
            self.sealer.open_counted(&state, binding, metrics)
        });
        let ledger = match opened {
            Ok(ledger) => ledger,
            Err(bad) => {
                let result = failed(
                    &call,
                    format!(
                        "the user's answers to this tool's questions could not be used: \
                         the pending input {}. Call the tool again to ask anew.",
                        bad.reason()
                    ),
                );
                return (Step::Done(result), Failure::Refused);
            }
        };
        let cancellation = Cancellation::new();
        let _cancel_when_dropped = CancelOnDrop(cancellation.clone());
        let round = crate::ask::Round::resume(Some(ledger), answers, |_| true);
        self.step(call, round, &cancellation).await
    }

    /// At most [`Limits::max_calls_per_response`] calls in one response.
    fn within_limits(&self, calls: &[ToolCall]) -> Result<(), DispatchError> {
        let limit = self.limits.max_calls_per_response;
        if calls.len() > limit {
            return Err(DispatchError::TooManyCalls {
                calls: calls.len(),
                limit,
            });
        }
        Ok(())
    }

    /// `f` with what a pending input of `call` is bound to: the tool its wire name resolves
    /// to (none: the call fails on its own), its arguments, this conversation and its user.
    fn bound<R>(&self, call: &ToolCall, f: impl FnOnce(&crate::seal::Binding<'_>) -> R) -> R {
        let tool_id = self
            .pipeline
            .registry()
            .resolve_wire_name(&call.name)
            .map_or("", |tool| tool.id());
        let no_input = Value::Null;
        f(&crate::seal::Binding::call(
            tool_id,
            call.arguments.as_ref().unwrap_or(&no_input),
            self.meta.principal.as_deref(),
            self.context.user_id.as_deref(),
        ))
    }

    /// One round of one call. Every round runs under the model's call id, so a round resumed
    /// twice is answered once.
    async fn step(
        &self,
        call: ToolCall,
        round: crate::ask::Round,
        cancellation: &Cancellation,
    ) -> (Step, Failure) {
        let meta = CallMeta {
            signals: self
                .meta
                .signals
                .clone()
                .cancelled_by(cancellation)
                .asking(&round),
            ..self.meta.clone()
        };
        let (result, failure) = self.run_classified(call.clone(), &meta).await;
        let asks = round.asked();
        let ledger = round.next().filter(|_| result.is_error);
        let Some(ledger) = ledger else {
            return (Step::Done(result), failure);
        };
        match self.bound(&call, |binding| self.sealer.seal(ledger, binding)) {
            Ok(state) => (Step::Asks(PendingInput { call, asks, state }), failure),
            Err(too_large) => (
                Step::Done(ToolResult {
                    content: format!("Error: the tool could not ask its question: {too_large}."),
                    ..result
                }),
                Failure::Tool { retryable: false },
            ),
        }
    }

    async fn run_one(&self, call: ToolCall, meta: &CallMeta) -> ToolResult {
        self.run_classified(call, meta).await.0
    }

    async fn run_classified(&self, call: ToolCall, meta: &CallMeta) -> (ToolResult, Failure) {
        let error = |content: String| failed(&call, content);
        let bad_arguments = |content: String| (failed(&call, content), Failure::InvalidArguments);
        let mut arguments = match &call.arguments {
            Ok(arguments) => arguments.clone(),
            Err(problem) => {
                return bad_arguments(format!(
                    "Invalid JSON in arguments ({problem}). Please retry with valid JSON."
                ));
            }
        };
        let size = arguments.to_string().len();
        if size > self.limits.max_arguments_bytes {
            return bad_arguments(format!(
                "The arguments are {size} bytes; the limit is {}. Please retry with smaller arguments.",
                self.limits.max_arguments_bytes
            ));
        }
        let Some(tool) = self.pipeline.registry().resolve_wire_name(&call.name) else {
            let mut names: Vec<&str> = self
                .pipeline
                .registry()
                .tools()
                .iter()
                .map(RegisteredTool::name)
                .collect();
            names.dedup();
            let text = format!(
                "Tool '{}' is not available. Available tools: {}.",
                call.name,
                names.join(", ")
            );
            return (error(text), Failure::NotFound);
        };
        schema_walk::strip_optional_nulls(&mut arguments, &tool.definition().input_schema);
        let request = CallToolRequest {
            tool_id: tool.id().to_owned(),
            call_id: Some(call.id.clone()),
            trace_id: None,
            input: Some(arguments),
            context: Some(self.context.clone()),
        };
        let contents = tool
            .definition()
            .output_schema
            .as_ref()
            .is_some_and(|output| crate::content::structured_schema(output).is_some());
        let outcome = self.pipeline.call_with(request, meta).await;
        let (mut result, failure) = match outcome {
            CallOutcome::Completed(response) => match response.result {
                CallResult::Success { value: Some(value) } if contents => {
                    match serde_json::from_value::<crate::content::Contents<Value>>(value) {
                        Ok(contents) => (blocks_result(&call, contents), Failure::None),
                        Err(_) => (
                            error("the tool's result is not the content it declared".into()),
                            Failure::Tool { retryable: false },
                        ),
                    }
                }
                CallResult::Success { value } => (
                    ToolResult {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        content: match &value {
                            None => String::new(),
                            Some(Value::String(text)) => text.clone(),
                            Some(other) => other.to_string(),
                        },
                        is_error: false,
                        value,
                        media: Vec::new(),
                    },
                    Failure::None,
                ),
                CallResult::Failure { error: failure } => {
                    let mut text = failure.for_model();
                    if failure.can_retry {
                        text.push_str("\nYou may retry this call.");
                    }
                    let retryable = failure.can_retry;
                    (error(text), Failure::Tool { retryable })
                }
            },
            CallOutcome::Invalid(invalid) => {
                let mut text = format!("Invalid arguments for '{}'", call.name);
                for (parameter, problem) in &invalid.parameter_errors {
                    text.push_str(&format!("; `{parameter}`: {problem}"));
                }
                text.push_str(". Please retry with arguments that match the tool's schema.");
                bad_arguments(text)
            }
            CallOutcome::Rejected(rejected) => (error(rejected.message), Failure::Refused),
            CallOutcome::Unavailable { error: busy, .. } => (
                error(format!("{} You may retry this call.", busy.message)),
                Failure::Unavailable,
            ),
        };
        cap(&mut result, self.limits.max_result_bytes);
        (result, failure)
    }
}

/// A failed call's result: `Error: ` and words the model can act on.
fn failed(call: &ToolCall, content: String) -> ToolResult {
    ToolResult {
        id: call.id.clone(),
        name: call.name.clone(),
        content: format!("Error: {content}"),
        is_error: true,
        value: None,
        media: Vec::new(),
    }
}

/// What kind of failure a [`ToolResult`] is, for the fronts that answer in a framework's own
/// error types (rig's `ToolErrorKind`, adk-rust's `ErrorCategory`); its words are the same.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// It did not fail.
    None,
    /// The arguments are not what the tool takes (the 422 words): the model retries.
    InvalidArguments,
    /// No tool by that name.
    NotFound,
    /// Refused before the tool ran.
    Refused,
    /// The server is full or draining: worth retrying.
    Unavailable,
    /// The tool ran and failed (or panicked, or timed out), retryable as it said.
    Tool {
        /// The tool's `can_retry`.
        retryable: bool,
    },
}

impl ToolResult {
    /// Its images, as `(base64 data, media type)`, for the formats that carry them.
    pub(crate) fn images(&self) -> impl Iterator<Item = (&str, &str)> {
        self.media.iter().filter_map(|block| match block {
            crate::content::Content::Image { data, mime_type } => Some((&**data, &**mime_type)),
            _ => None,
        })
    }

    /// The result's text, and beside it the parts `part` makes of its images: the text alone
    /// when it has none, else `[text_part(text), parts…]`.
    pub(crate) fn with_images(
        self,
        text_part: impl FnOnce(String) -> Value,
        part: impl Fn(&str, &str) -> Value,
    ) -> Value {
        let images: Vec<Value> = self.images().map(|(data, mime)| part(data, mime)).collect();
        if images.is_empty() {
            return Value::String(self.content);
        }
        Value::Array(
            std::iter::once(text_part(self.content))
                .chain(images)
                .collect(),
        )
    }
}

/// A [`Contents`](crate::content::Contents) result: its text blocks (and a notice for each
/// other block) as the text, the other blocks as media.
fn blocks_result(call: &ToolCall, contents: crate::content::Contents<Value>) -> ToolResult {
    use crate::content::Content;
    let text: Vec<String> = contents.content.iter().map(Content::notice).collect();
    let media = contents
        .content
        .into_iter()
        .filter(|block| !matches!(block, Content::Text { .. }))
        .collect();
    ToolResult {
        id: call.id.clone(),
        name: call.name.clone(),
        content: text.join("\n"),
        is_error: false,
        value: contents.structured,
        media,
    }
}

/// Seed 003 §8.3 over the whole result: its text and its media (images and audio are base64, and
/// count as sent) fit in `max_bytes` together. The text comes first; media are kept in order
/// while they fit beside it, and those that do not are left out, the text saying so; then the
/// text is cut to the room left.
fn cap(result: &mut ToolResult, max_bytes: usize) {
    let text = result.content.len().min(max_bytes);
    let (mut media, mut left_out) = (0, 0);
    result.media.retain(|block| {
        let weight = block.weight();
        let fits = text + media + weight <= max_bytes;
        if fits {
            media += weight;
        } else {
            left_out += 1;
        }
        fits
    });
    let notice = (left_out > 0).then(|| {
        format!(
            "\n[{left_out} media block(s) left out: the result exceeded the {} limit]",
            limit_name(max_bytes)
        )
    });
    let room = max_bytes.saturating_sub(media + notice.as_ref().map_or(0, String::len));
    if truncate(&mut result.content, room) {
        result.value = None;
    }
    if let Some(notice) = notice {
        result.content.push_str(&notice);
    }
}

/// A limit as the model is told it: `64KB`, or bytes when not a whole number of KB.
fn limit_name(max_bytes: usize) -> String {
    if max_bytes % 1024 == 0 {
        format!("{}KB", max_bytes / 1024)
    } else {
        format!("{max_bytes} bytes")
    }
}

/// Seed 003 §8.3, option 1: cut at a character boundary and say so, naming the limit in force;
/// `true` if it cut. The result, notice included, fits in `max_bytes`.
fn truncate(content: &mut String, max_bytes: usize) -> bool {
    if content.len() <= max_bytes {
        return false;
    }
    let notice = format!(
        "\n\n[Truncated: Result exceeded {} limit]",
        limit_name(max_bytes)
    );
    let mut cut = max_bytes.saturating_sub(notice.len());
    while !content.is_char_boundary(cut) {
        cut -= 1;
    }
    content.truncate(cut);
    content.push_str(&notice);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_distinct_constants_make_a_one_of_an_any_of() {
        let unit_enum = serde_json::json!({"oneOf": [{"const": "a"}, {"const": "b"}]});
        assert!(openai::strict_schema(&unit_enum).unwrap()["anyOf"].is_array());
        // Equal constants apart from each other: `oneOf` (exactly one) is not `anyOf` here.
        let repeated =
            serde_json::json!({"oneOf": [{"const": "a"}, {"const": "b"}, {"const": "a"}]});
        assert_eq!(
            openai::strict_schema(&repeated),
            Err(vec!["oneOf".to_owned()])
        );
    }

    #[test]
    fn truncation_keeps_characters_whole_and_says_so() {
        let mut text = "é".repeat(40_000);
        truncate(&mut text, 64 * 1024);
        assert!(text.ends_with("[Truncated: Result exceeded 64KB limit]"));
        assert!(text.len() <= 64 * 1024);
        let mut short = "ok".to_owned();
        truncate(&mut short, 64 * 1024);
        assert_eq!(short, "ok");
        // The limit in force, whatever it is, is the one cut at and named.
        let mut text = "x".repeat(10_000);
        assert!(truncate(&mut text, 5_000));
        assert!(text.len() <= 5_000, "{}", text.len());
        assert!(text.ends_with("[Truncated: Result exceeded 5000 bytes limit]"));
        let mut text = "x".repeat(100_000);
        truncate(&mut text, 8 * 1024);
        assert!(text.ends_with("[Truncated: Result exceeded 8KB limit]"));
    }
}
