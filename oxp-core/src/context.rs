//! [`ToolContext`]: what a call carries besides its input (secrets, tokens, the user, ids).

use std::collections::HashMap;
use std::fmt;

use crate::protocol::Sensitive;
use crate::signals::{CallSignals, Progress};

/// Everything a call brings besides the tool's input: secrets, authorization tokens, the user's
/// id, and the call's own ids.
///
/// A tool asks for it by taking a `&ToolContext` (or `ToolContext`) parameter; it never appears in
/// the tool's input schema. Its `Debug` output never shows a secret or token value.
///
/// ```
/// use oxp_runtime::ToolContext;
///
/// let ctx = ToolContext::new("call-1")
///     .with_secret("TWILIO_API_KEY", "sk-123")
///     .with_authorization_token("google", "ya29.token")
///     .with_user_id("user@example.com");
/// assert_eq!(ctx.secret("TWILIO_API_KEY"), Some("sk-123"));
/// assert_eq!(ctx.authorization_token("google"), Some("ya29.token"));
/// assert_eq!(ctx.user_id(), Some("user@example.com"));
/// assert_eq!(ctx.call_id(), "call-1");
/// assert!(!format!("{ctx:?}").contains("sk-123"));
/// ```
#[derive(Clone, Default)]
pub struct ToolContext {
    call_id: String,
    trace_id: Option<String>,
    user_id: Option<String>,
    secrets: HashMap<String, Sensitive>,
    authorization: HashMap<String, Sensitive>,
    signals: CallSignals,
}

impl ToolContext {
    /// A context for the call `call_id`, with no secrets, tokens or user.
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1");
    /// assert_eq!(ctx.secret("ANY"), None);
    /// ```
    pub fn new(call_id: impl Into<String>) -> Self {
        ToolContext {
            call_id: call_id.into(),
            ..ToolContext::default()
        }
    }

    /// The value of the secret `id`, if the caller sent it.
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1").with_secret("KEY", "v");
    /// assert_eq!(ctx.secret("KEY"), Some("v"));
    /// ```
    pub fn secret(&self, id: &str) -> Option<&str> {
        self.secrets.get(id).map(Sensitive::expose)
    }

    /// The authorization token for provider `id`, if the caller sent it.
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1").with_authorization_token("google", "t");
    /// assert_eq!(ctx.authorization_token("google"), Some("t"));
    /// ```
    pub fn authorization_token(&self, id: &str) -> Option<&str> {
        self.authorization.get(id).map(Sensitive::expose)
    }

    /// The id of the user the call is made for, if the caller sent it.
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1").with_user_id("u1");
    /// assert_eq!(ctx.user_id(), Some("u1"));
    /// ```
    pub fn user_id(&self) -> Option<&str> {
        self.user_id.as_deref()
    }

    /// The call's id: the client's `call_id`, or one the server generated.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::ToolContext::new("c1").call_id(), "c1");
    /// ```
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The client's `trace_id`, if it sent one.
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1").with_trace_id("t1");
    /// assert_eq!(ctx.trace_id(), Some("t1"));
    /// ```
    pub fn trace_id(&self) -> Option<&str> {
        self.trace_id.as_deref()
    }

    /// Adds a secret (for tests, and for the fronts that build contexts).
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1").with_secret("KEY", "v");
    /// assert!(ctx.secret("KEY").is_some());
    /// ```
    #[must_use]
    pub fn with_secret(mut self, id: impl Into<String>, value: impl Into<String>) -> Self {
        self.secrets.insert(id.into(), Sensitive::new(value));
        self
    }

    /// Adds an authorization token for provider `id`.
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1").with_authorization_token("github", "gho_x");
    /// assert!(ctx.authorization_token("github").is_some());
    /// ```
    #[must_use]
    pub fn with_authorization_token(
        mut self,
        id: impl Into<String>,
        token: impl Into<String>,
    ) -> Self {
        self.authorization.insert(id.into(), Sensitive::new(token));
        self
    }

    /// Sets the user id.
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1").with_user_id("u1");
    /// assert!(ctx.user_id().is_some());
    /// ```
    #[must_use]
    pub fn with_user_id(mut self, user_id: impl Into<String>) -> Self {
        self.user_id = Some(user_id.into());
        self
    }

    /// Sets the trace id.
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1").with_trace_id("t1");
    /// assert!(ctx.trace_id().is_some());
    /// ```
    #[must_use]
    pub fn with_trace_id(mut self, trace_id: impl Into<String>) -> Self {
        self.trace_id = Some(trace_id.into());
        self
    }
}

impl ToolContext {
    /// The progress, cancellation and asks of the call, as the front that carries it passes
    /// them.
    ///
    /// ```
    /// use oxp_runtime::signals::{CallSignals, Cancellation};
    /// let cancellation = Cancellation::new();
    /// let ctx = oxp_runtime::ToolContext::new("c1")
    ///     .with_signals(CallSignals::new().cancelled_by(&cancellation));
    /// cancellation.cancel();
    /// assert!(ctx.is_cancelled());
    /// ```
    #[must_use]
    pub fn with_signals(mut self, signals: CallSignals) -> Self {
        self.signals = signals;
        self
    }

    pub(crate) fn signals(&self) -> &CallSignals {
        &self.signals
    }

    /// Reports progress: `done` of `total` (when known), with a message for people. Over MCP,
    /// a client that sent a `progressToken` receives `notifications/progress` (at most one
    /// every 50 ms, the latest report winning); elsewhere it costs nothing. Never blocks.
    ///
    /// ```
    /// use oxp_runtime::{tool, ToolContext};
    ///
    /// /// Import the rows.
    /// #[tool(toolkit = "Sheets", version = "1.0.0")]
    /// async fn import(ctx: &ToolContext, rows: u64) -> u64 {
    ///     for row in 1..=rows {
    ///         // … one row's work …
    ///         ctx.progress(row, Some(rows), Some("importing"));
    ///     }
    ///     rows
    /// }
    /// ```
    pub fn progress(&self, done: u64, total: Option<u64>, message: Option<&str>) {
        self.signals.report(|| Progress {
            done,
            total,
            message: message.map(str::to_owned),
        });
    }

    /// Whether the caller cancelled the call (MCP's `notifications/cancelled`): for a sync tool,
    /// or an async one between steps, to stop early. Over OXP nothing turns it true: a call
    /// with a `call_id` runs to its end when its client hangs up (the retry with that
    /// `call_id` gets the answer), and one without is dropped at its next await point, as any
    /// future whose caller went away.
    ///
    /// ```
    /// use oxp_runtime::{tool, ToolContext};
    ///
    /// /// Crunch numbers.
    /// #[tool(toolkit = "Batch", version = "1.0.0")]
    /// fn crunch(ctx: &ToolContext, n: u64) -> u64 {
    ///     let mut done = 0;
    ///     while done < n && !ctx.is_cancelled() {
    ///         done += 1;
    ///     }
    ///     done
    /// }
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.signals.is_cancelled()
    }

    /// Resolves when the caller cancels the call; never, where calls cannot be cancelled.
    ///
    /// An async tool need not wait for it: a cancelled call is dropped at its next await
    /// point, its answer never sent — unless it called
    /// [`finish_when_cancelled`](Self::finish_when_cancelled).
    ///
    /// ```
    /// use oxp_runtime::{tool, ToolContext};
    ///
    /// /// Watch a queue.
    /// #[tool(toolkit = "Queue", version = "1.0.0")]
    /// async fn watch(ctx: &ToolContext) -> &'static str {
    ///     ctx.finish_when_cancelled(); // stop on our own terms
    ///     tokio::select! {
    ///         _ = ctx.cancelled() => "stopped",
    ///         _ = tokio::time::sleep(std::time::Duration::from_secs(60)) => "nothing came",
    ///     }
    /// }
    /// ```
    pub async fn cancelled(&self) {
        self.signals.cancelled().await;
    }

    /// Asks that a cancelled call run to its end instead of being dropped at its next await
    /// point: for a tool with a side effect it must not leave half done. Its answer is still
    /// not sent to a caller that cancelled.
    ///
    /// ```
    /// let ctx = oxp_runtime::ToolContext::new("c1");
    /// ctx.finish_when_cancelled(); // harmless where nothing can cancel
    /// ```
    pub fn finish_when_cancelled(&self) {
        self.signals.finish_when_cancelled();
    }

    /// The ids of the secrets and authorization tokens it carries (never their values).
    pub(crate) fn requirement_ids(&self) -> Vec<&str> {
        self.secrets
            .keys()
            .chain(self.authorization.keys())
            .map(String::as_str)
            .collect()
    }

    /// Every secret and token value, for scrubbing them out of errors and logs.
    pub(crate) fn sensitive_values(&self) -> impl Iterator<Item = &str> {
        self.secrets
            .values()
            .chain(self.authorization.values())
            .map(Sensitive::expose)
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut secrets: Vec<_> = self.secrets.keys().collect();
        secrets.sort();
        let mut authorization: Vec<_> = self.authorization.keys().collect();
        authorization.sort();
        f.debug_struct("ToolContext")
            .field("call_id", &self.call_id)
            .field("trace_id", &self.trace_id)
            .field("user_id", &self.user_id)
            .field("secrets", &secrets)
            .field("authorization", &authorization)
            .finish()
    }
}
