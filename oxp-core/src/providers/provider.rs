//! [`Provider`]: every model provider behind one shape — export the tools, read the model's
//! calls, run them and answer in the provider's format — so that the command line, an agent
//! loop and the tests drive each provider alike, and a new one is one more variant.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use super::{DispatchError, Dispatcher, ExportError, Limits, ToolCall, anthropic, gemini, openai};
use crate::registry::Registry;

/// A model provider's tool-calling format.
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::call::Pipeline;
/// use oxp_runtime::providers::{Dispatcher, Limits, Provider};
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
/// // Hand the tools to the model…
/// let tools = Provider::Anthropic.export(&registry, &Limits::default(), false).unwrap();
/// assert_eq!(tools[0]["name"], "Calculator_Add");
/// // …run the calls in its reply, and send back what it expects.
/// let reply = serde_json::json!({"content": [
///     {"type": "tool_use", "id": "toolu_1", "name": "Calculator_Add", "input": {"a": 2, "b": 3}}
/// ]});
/// let dispatcher = Dispatcher::new(Pipeline::new(registry));
/// let messages = Provider::Anthropic.dispatch(&dispatcher, &reply).await.unwrap();
/// assert_eq!(messages[0]["content"][0]["content"], "5");
/// # });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI Chat Completions.
    OpenAiChat,
    /// OpenAI Responses.
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini.
    Gemini,
}

impl Provider {
    /// Every provider, in the order the command line lists them.
    ///
    /// ```
    /// use oxp_runtime::providers::Provider;
    /// let names: Vec<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
    /// assert_eq!(names, ["openai", "openai-responses", "anthropic", "gemini"]);
    /// ```
    pub const ALL: [Provider; 4] = [
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
    ];

    /// The name the command line and errors use.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::providers::Provider::Gemini.name(), "gemini");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAiChat => "openai",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }

    /// The registry's tools as this provider's tool definitions, or every incompatibility found.
    /// `strict` asks for OpenAI's strict mode; the other providers have none and ignore it.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    /// use oxp_runtime::providers::{Limits, Provider};
    ///
    /// /// Add two integers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// let registry = Registry::builder().tool(add::TOOL).build().unwrap();
    /// let tools = Provider::Gemini.export(&registry, &Limits::default(), false).unwrap();
    /// assert_eq!(tools[0]["functionDeclarations"][0]["name"], "Calculator_Add");
    /// ```
    pub fn export(
        self,
        registry: &Registry,
        limits: &Limits,
        strict: bool,
    ) -> Result<Vec<Value>, Vec<ExportError>> {
        match self {
            Provider::OpenAiChat => openai::chat_tools(registry, limits, strict),
            Provider::OpenAiResponses => openai::responses_tools(registry, limits, strict),
            Provider::Anthropic => anthropic::tools(registry, limits),
            Provider::Gemini => gemini::tools(registry, limits),
        }
    }

    /// The tool calls in a model's response.
    ///
    /// ```
    /// use oxp_runtime::providers::Provider;
    /// let response = serde_json::json!({"tool_calls": [{"id": "call_1", "type": "function",
    ///     "function": {"name": "Calculator_Add", "arguments": "{\"a\": 2, \"b\": 3}"}}]});
    /// let calls = Provider::OpenAiChat.parse_calls(&response).unwrap();
    /// assert_eq!(calls[0].id, "call_1");
    /// ```
    pub fn parse_calls(self, response: &Value) -> Result<Vec<ToolCall>, DispatchError> {
        match self {
            Provider::OpenAiChat => openai::parse_chat_calls(response),
            Provider::OpenAiResponses => openai::parse_responses_calls(response),
            Provider::Anthropic => anthropic::parse_calls(response),
            Provider::Gemini => gemini::parse_calls(response),
        }
    }

    /// Runs the calls of a model's response and returns the messages (or items) to append to
    /// the conversation, in this provider's format: empty when the response made no calls.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    /// use oxp_runtime::call::Pipeline;
    /// use oxp_runtime::providers::{Dispatcher, Provider};
    ///
    /// /// Add two integers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dispatcher = Dispatcher::new(Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap()));
    /// let response = serde_json::json!({"output": [{"type": "function_call", "call_id": "c1",
    ///     "name": "Calculator_Add", "arguments": "{\"a\": 2, \"b\": 3}"}]});
    /// let items = Provider::OpenAiResponses.dispatch(&dispatcher, &response).await.unwrap();
    /// assert_eq!(items[0]["output"], "5");
    /// # });
    /// ```
    pub async fn dispatch(
        self,
        dispatcher: &Dispatcher,
        response: &Value,
    ) -> Result<Vec<Value>, DispatchError> {
        match self {
            Provider::OpenAiChat => openai::dispatch_chat(dispatcher, response).await,
            Provider::OpenAiResponses => openai::dispatch_responses(dispatcher, response).await,
            Provider::Anthropic => Ok(anthropic::dispatch(dispatcher, response)
                .await?
                .into_iter()
                .collect()),
            Provider::Gemini => Ok(gemini::dispatch(dispatcher, response)
                .await?
                .into_iter()
                .collect()),
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Provider {
    type Err = String;

    /// A provider by [`name`](Provider::name).
    fn from_str(name: &str) -> Result<Self, String> {
        Provider::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| format!("unknown provider `{name}`"))
    }
}
