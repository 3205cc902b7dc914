//! A typed OXP client (cargo feature `client`, off by default: a server needs no HTTP client),
//! for Rust agents that call remote tool servers — any OXP 1.0 server, this one included.
//!
//! Tool execution errors are values ([`CallResult::Failure`]), not `Err`: the call worked, the
//! tool did not. `Err` is for everything else, one variant per status class. Retries are
//! bounded, jittered, and always reuse the call's `call_id`, so a server's idempotency keeps a
//! retried call from running twice: connection errors and "temporarily unavailable" answers
//! (honouring `Retry-After-Ms`) are retried; a tool error only when it says `can_retry`,
//! after its `retry_after_ms`.
//!
//! ```no_run
//! # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
//! use oxp_runtime::client::Client;
//! use oxp_runtime::protocol::CallResult;
//!
//! let client = Client::new("http://127.0.0.1:8000").api_key("k_…");
//! for tool in client.list().await? {
//!     println!("{}: {}", tool.id, tool.description);
//! }
//! let response = client.call("Calculator.Add", serde_json::json!({"a": 1, "b": 2})).await?;
//! match response.result {
//!     CallResult::Success { value } => println!("{value:?}"),
//!     CallResult::Failure { error } => println!("the tool failed: {}", error.message),
//! }
//! # Ok(()) }
//! ```

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::protocol::{
    AuthorizationToken, CallContext, CallResult, CallToolRequest, CallToolResponse, Sensitive,
    ServerErrorResponse, ToolDefinition, ToolSecret, ValidationErrorResponse,
};

/// How the client frames requests.
///
/// ```no_run
/// use oxp_runtime::client::{Client, Dialect};
///
/// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
/// // Every OXP server takes both; a bare request is the smaller one on the wire.
/// let client = Client::new("http://127.0.0.1:8000").dialect(Dialect::Bare);
/// let response = client.call("Calculator.Add", serde_json::json!({"a": 1, "b": 2})).await?;
/// println!("{response:?}");
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    /// The OpenAPI envelope `{"$schema", "request"}` (what every OXP server accepts).
    #[default]
    Envelope,
    /// A bare `CallToolRequest` with the `OXP-Version` header.
    Bare,
}

#[derive(Clone)]
enum Credentials {
    None,
    Bearer(Sensitive),
    ApiKey(Sensitive),
}

/// How hard to try.
///
/// ```
/// use oxp_runtime::client::{Client, RetryPolicy};
/// use std::time::Duration;
///
/// // Five tries, waiting 50 ms, then 100 ms, … never more than 2 s between them.
/// let policy = RetryPolicy {
///     max_attempts: 5,
///     initial_backoff: Duration::from_millis(50),
///     max_backoff: Duration::from_secs(2),
///     ..RetryPolicy::default()
/// };
/// assert!(policy.retry_tool_errors, "a tool error that says `can_retry` is retried too");
/// let client = Client::new("http://127.0.0.1:8000").retry(policy);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1: no retries).
    pub max_attempts: u32,
    /// The first backoff; each next one doubles, with jitter.
    pub initial_backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
    /// Whether tool errors with `can_retry: true` are retried too.
    pub retry_tool_errors: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(8),
            retry_tool_errors: true,
        }
    }
}

/// An OXP client.
///
/// ```no_run
/// use oxp_runtime::client::Client;
///
/// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
/// let client = Client::new("http://127.0.0.1:8000");
/// let sum = client.call("Calculator.Add", serde_json::json!({"a": 1, "b": 2})).await?;
/// println!("{:?}", sum.result);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
    credentials: Credentials,
    dialect: Dialect,
    retry: RetryPolicy,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("dialect", &self.dialect)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// Why a call or list did not produce an answer. Never a tool's own error: that is a value.
///
/// ```no_run
/// use oxp_runtime::client::Client;
///
/// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
/// let client = Client::new("http://127.0.0.1:8000");
/// match client.call("Calculator.Add", serde_json::json!({"a": "one"})).await {
///     Err(oxp_runtime::client::ClientError::Validation(invalid)) => println!("{:?}", invalid.parameter_errors),
///     other => println!("{other:?}"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// `400`: refused before the tool ran (unknown tool, missing requirements, …).
    Server(ServerErrorResponse),
    /// `401`: not authenticated.
    Unauthorized(String),
    /// `422`: the input does not match the tool's schema; see `parameter_errors`.
    Validation(ValidationErrorResponse),
    /// Any other status.
    Status {
        /// The status.
        status: u16,
        /// The body, as text.
        body: String,
    },
    /// The answer could not be read as OXP.
    Protocol(String),
    /// The server could not be reached (after the retries).
    Transport(reqwest::Error),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Server(e) => write!(f, "server error (400): {}", e.message),
            ClientError::Unauthorized(m) => write!(f, "unauthorized (401): {m}"),
            ClientError::Validation(e) => write!(f, "invalid input (422): {}", e.message),
            ClientError::Status { status, body } => write!(f, "unexpected status {status}: {body}"),
            ClientError::Protocol(m) => write!(f, "not an OXP answer: {m}"),
            ClientError::Transport(e) => write!(f, "transport: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl Client {
    /// A client for the server at `base_url` (e.g. `http://127.0.0.1:8000`), unauthenticated,
    /// in the envelope dialect, with the default [`RetryPolicy`].
    ///
    /// ```no_run
    /// use oxp_runtime::protocol::CallResult;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = oxp_runtime::client::Client::new("http://127.0.0.1:8000/");
    /// let response = client.call("Calculator.Add", serde_json::json!({"a": 1, "b": 2})).await?;
    /// match response.result {
    ///     CallResult::Success { value } => println!("1 + 2 = {value:?}"),
    ///     CallResult::Failure { error } => eprintln!("the tool failed: {}", error.message),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn new(base_url: impl Into<String>) -> Self {
        Client {
            base: base_url.into().trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            credentials: Credentials::None,
            dialect: Dialect::Envelope,
            retry: RetryPolicy::default(),
        }
    }

    /// Sends `Authorization: Bearer <token>` (an HS256 JWT, or a key the server takes as one).
    ///
    /// ```no_run
    /// use oxp_runtime::client::{Client, ClientError};
    ///
    /// # async fn run() -> Result<(), ClientError> {
    /// let token = std::env::var("OXP_CLIENT_TOKEN").expect("a token to call with");
    /// let client = Client::new("http://127.0.0.1:8000").bearer(token);
    /// match client.list().await {
    ///     Err(ClientError::Unauthorized(why)) => eprintln!("the server refused the token: {why}"),
    ///     tools => println!("{} tools", tools?.len()),
    /// }
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.credentials = Credentials::Bearer(Sensitive::new(token));
        self
    }

    /// Sends `OXP-API-Key: <key>`.
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000").api_key(std::env::var("OXP_API_KEY").unwrap());
    /// let tools = client.list().await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.credentials = Credentials::ApiKey(Sensitive::new(key));
        self
    }

    /// Which dialect to speak.
    ///
    /// ```no_run
    /// use oxp_runtime::client::{Client, Dialect};
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000").dialect(Dialect::Bare);
    /// // Sent as `{"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}, …}` with `OXP-Version: 1.0`.
    /// let response = client.call("Calculator.Add", serde_json::json!({"a": 1, "b": 2})).await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// How to retry.
    ///
    /// ```no_run
    /// use oxp_runtime::client::{Client, RetryPolicy};
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// // Retry a refused connection or a 503 up to 5 times; the call_id makes a repeat safe.
    /// let client = Client::new("http://127.0.0.1:8000")
    ///     .retry(RetryPolicy { max_attempts: 5, ..RetryPolicy::default() });
    /// let response = client.request("Mail.Send").call_id("send-42").send().await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Uses this HTTP client (for proxies, TLS settings, timeouts).
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build()?;
    /// let client = Client::new("http://127.0.0.1:8000").http_client(http);
    /// let tools = client.list().await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = http;
        self
    }

    fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.credentials {
            Credentials::None => request,
            Credentials::Bearer(token) => request.bearer_auth(token.expose()),
            Credentials::ApiKey(key) => request.header("OXP-API-Key", key.expose()),
        }
    }

    /// `GET /tools`: every tool definition.
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000");
    /// for tool in client.list().await? {
    ///     println!("{} — {}", tool.id, tool.description);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list(&self) -> Result<Vec<ToolDefinition>, ClientError> {
        #[derive(Deserialize)]
        struct List {
            items: Vec<ToolDefinition>,
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let sent = self
                .authorize(self.http.get(format!("{}/tools", self.base)))
                .header("OXP-Version", "1.0")
                .send()
                .await;
            match sent {
                Err(error) if attempt < self.retry.max_attempts && is_transient(&error) => {
                    tokio::time::sleep(self.backoff(attempt, None)).await;
                }
                Err(error) => return Err(ClientError::Transport(error)),
                Ok(response) => {
                    let status = response.status().as_u16();
                    let body = response.bytes().await.map_err(ClientError::Transport)?;
                    return match status {
                        200 => serde_json::from_slice::<List>(&body)
                            .map(|l| l.items)
                            .map_err(|e| ClientError::Protocol(e.to_string())),
                        _ => Err(status_error(status, &body)),
                    };
                }
            }
        }
    }

    /// Calls `tool_id` with `input` and a fresh `call_id`.
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000");
    /// let response = client.call("Calculator.Add@1.0.0", serde_json::json!({"a": 1, "b": 2})).await?;
    /// assert!(matches!(response.result, oxp_runtime::protocol::CallResult::Success { .. }));
    /// # Ok(()) }
    /// ```
    pub async fn call(&self, tool_id: &str, input: Value) -> Result<CallToolResponse, ClientError> {
        self.request(tool_id).input(input).send().await
    }

    /// A call to build: `call_id`, `trace_id`, context.
    ///
    /// ```no_run
    /// # async fn run(client: oxp_runtime::client::Client) -> Result<(), oxp_runtime::client::ClientError> {
    /// let response = client
    ///     .request("SMS.Send@0.1.2")
    ///     .input(serde_json::json!({"to": "+1", "body": "hi"}))
    ///     .call_id("order-42-sms")
    ///     .secret("TWILIO_API_KEY", "sk-…")
    ///     .send()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn request(&self, tool_id: &str) -> CallBuilder<'_> {
        CallBuilder {
            client: self,
            request: CallToolRequest {
                tool_id: tool_id.to_owned(),
                ..CallToolRequest::default()
            },
        }
    }

    fn backoff(&self, attempt: u32, server_hint_ms: Option<u64>) -> Duration {
        if let Some(ms) = server_hint_ms {
            // The server (or the tool) said how long: honour it, up to the longest backoff this
            // client would choose itself — a server cannot park the caller for a day.
            return Duration::from_millis(ms).min(self.retry.max_backoff);
        }
        let exponential = self
            .retry
            .initial_backoff
            .saturating_mul(1 << attempt.saturating_sub(1).min(16))
            .min(self.retry.max_backoff);
        // Full jitter in [½, 1] of the backoff, so retrying clients do not move in lockstep.
        let jitter = 0.5 + (crate::random::uuid_v4().as_u128() % 1000) as f64 / 2000.0;
        exponential.mul_f64(jitter)
    }

    async fn send_once(&self, request: &CallToolRequest) -> Result<Sent, reqwest::Error> {
        let body = match self.dialect {
            Dialect::Envelope => json!({"$schema": "urn:oxp:1.0", "request": request}),
            Dialect::Bare => serde_json::to_value(request).expect("requests serialize"),
        };
        let response = self
            .authorize(self.http.post(format!("{}/tools/call", self.base)))
            .header("OXP-Version", "1.0")
            .json(&body)
            .send()
            .await?;
        let status = response.status().as_u16();
        let retry_after_ms = response
            .headers()
            .get("retry-after-ms")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let should_retry = response
            .headers()
            .get("x-should-retry")
            .is_some_and(|v| v.as_bytes() == b"true");
        let body = response.bytes().await?;
        Ok(Sent {
            status,
            body: body.to_vec(),
            retry_after_ms,
            should_retry,
        })
    }
}

struct Sent {
    status: u16,
    body: Vec<u8>,
    retry_after_ms: Option<u64>,
    should_retry: bool,
}

fn is_transient(error: &reqwest::Error) -> bool {
    error.is_connect() || error.is_timeout() || error.is_request()
}

fn status_error(status: u16, body: &[u8]) -> ClientError {
    match status {
        400 => serde_json::from_slice(body)
            .map(ClientError::Server)
            .unwrap_or_else(|e| ClientError::Protocol(e.to_string())),
        401 => ClientError::Unauthorized(
            serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned()),
        ),
        422 => serde_json::from_slice(body)
            .map(ClientError::Validation)
            .unwrap_or_else(|e| ClientError::Protocol(e.to_string())),
        _ => ClientError::Status {
            status,
            body: String::from_utf8_lossy(body).into_owned(),
        },
    }
}

/// A call being built by [`Client::request`].
///
/// ```no_run
/// use oxp_runtime::client::Client;
///
/// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
/// let client = Client::new("http://127.0.0.1:8000");
/// let response = client
///     .request("Mail.Send")
///     .input(serde_json::json!({"to": "ada@example.com"}))
///     .call_id("send-42")
///     .user_id("ada")
///     .secret("SMTP_PASSWORD", "…")
///     .send()
///     .await?;
/// println!("sent as {} in {:?} ms", response.call_id, response.duration);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CallBuilder<'c> {
    client: &'c Client,
    request: CallToolRequest,
}

impl CallBuilder<'_> {
    /// The input object.
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000");
    /// let response = client.request("Calculator.Add").input(serde_json::json!({"a": 1, "b": 2})).send().await?;
    /// println!("{:?}", response.result);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn input(mut self, input: Value) -> Self {
        self.request.input = Some(input);
        self
    }

    /// The `call_id` (the idempotency key); one is generated when not set, and kept across
    /// retries either way.
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000");
    /// let response = client.request("Calculator.Add").call_id("add-1").send().await?;
    /// assert_eq!(response.call_id, "add-1", "the server answers under the client's call_id");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn call_id(mut self, call_id: impl Into<String>) -> Self {
        self.request.call_id = Some(call_id.into());
        self
    }

    /// The `trace_id`.
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000");
    /// // The server logs the call under this trace, beside the agent's own spans.
    /// let response = client.request("Calculator.Add").trace_id("4bf92f3577b34da6").send().await?;
    /// println!("{:?}", response.result);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn trace_id(mut self, trace_id: impl Into<String>) -> Self {
        self.request.trace_id = Some(trace_id.into());
        self
    }

    /// The user the call is made for.
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000");
    /// let response = client
    ///     .request("Calendar.ListEvents")
    ///     .input(serde_json::json!({"day": "2026-11-23"}))
    ///     .user_id("ada@example.com")
    ///     .send()
    ///     .await?;
    /// println!("{:?}", response.result);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn user_id(mut self, user_id: impl Into<String>) -> Self {
        self.context().user_id = Some(user_id.into());
        self
    }

    /// A secret for the tool.
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000");
    /// let key = std::env::var("WEATHER_API_KEY").expect("the weather service's key");
    /// let response = client
    ///     .request("Weather.Forecast")
    ///     .input(serde_json::json!({"city": "Lisbon"}))
    ///     .secret("WEATHER_API_KEY", key)
    ///     .send()
    ///     .await?;
    /// println!("{:?}", response.result);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn secret(mut self, id: impl Into<String>, value: impl Into<String>) -> Self {
        self.context().secrets.push(ToolSecret {
            id: id.into(),
            value: Sensitive::new(value),
            extra: Map::new(),
        });
        self
    }

    /// An authorization token for provider `id`.
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000");
    /// let token = std::env::var("GITHUB_TOKEN").expect("the user's GitHub token");
    /// let response = client
    ///     .request("GitHub.ListIssues")
    ///     .input(serde_json::json!({"repo": "oxp/oxp"}))
    ///     .authorization_token("github", token)
    ///     .send()
    ///     .await?;
    /// println!("{:?}", response.result);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn authorization_token(mut self, id: impl Into<String>, token: impl Into<String>) -> Self {
        self.context().authorization.push(AuthorizationToken {
            id: id.into(),
            token: Sensitive::new(token),
            extra: Map::new(),
        });
        self
    }

    fn context(&mut self) -> &mut CallContext {
        self.request
            .context
            .get_or_insert_with(CallContext::default)
    }

    /// Sends the call, retrying as the client's [`RetryPolicy`] says, with one `call_id`.
    ///
    /// ```no_run
    /// use oxp_runtime::client::Client;
    ///
    /// # async fn run() -> Result<(), oxp_runtime::client::ClientError> {
    /// let client = Client::new("http://127.0.0.1:8000");
    /// let response = client.request("Calculator.Add").input(serde_json::json!({"a": 1, "b": 2})).send().await?;
    /// println!("{} took {:?} ms", response.call_id, response.duration);
    /// # Ok(()) }
    /// ```
    pub async fn send(mut self) -> Result<CallToolResponse, ClientError> {
        let client = self.client;
        self.request
            .call_id
            .get_or_insert_with(|| crate::random::uuid_v4().hyphenated());
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= client.retry.max_attempts;
            let sent = match client.send_once(&self.request).await {
                Ok(sent) => sent,
                Err(error) if !last && is_transient(&error) => {
                    tokio::time::sleep(client.backoff(attempt, None)).await;
                    continue;
                }
                Err(error) => return Err(ClientError::Transport(error)),
            };
            match sent.status {
                200 => {
                    let response = read_result(&sent.body)?;
                    if let CallResult::Failure { error } = &response.result {
                        if error.can_retry && client.retry.retry_tool_errors && !last {
                            tokio::time::sleep(client.backoff(attempt, error.retry_after_ms)).await;
                            continue;
                        }
                    }
                    return Ok(response);
                }
                400 if sent.should_retry && !last => {
                    tokio::time::sleep(client.backoff(attempt, sent.retry_after_ms)).await;
                }
                status => return Err(status_error(status, &sent.body)),
            }
        }
    }
}

/// A `200` body in either dialect.
fn read_result(body: &[u8]) -> Result<CallToolResponse, ClientError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ClientError::Protocol(e.to_string()))?;
    let result = match value.get("result") {
        Some(result) => result.clone(),
        None => value,
    };
    serde_json::from_value(result).map_err(|e| ClientError::Protocol(e.to_string()))
}
