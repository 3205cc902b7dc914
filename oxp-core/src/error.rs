//! [`ToolError`]: what a tool returns when it fails, shaped like the OXP `ToolError` object.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The failure of a tool, sent to the client as a `200` response with `success: false`.
///
/// The builder methods are named after the wire fields, so what you write is what the model sees:
///
/// ```
/// use oxp_runtime::ToolError;
///
/// let err = ToolError::new("Doorbell ID not found")
///     .developer_message("The doorbell with ID 'doorbell1' does not exist.")
///     .can_retry(true)
///     .additional_prompt_content("ids: doorbell42,doorbell84")
///     .retry_after_ms(500);
/// assert_eq!(err.message, "Doorbell ID not found");
/// assert_eq!(err.retry_after_ms, Some(500));
/// ```
///
/// Any `std::error::Error` converts into a `ToolError` (so `?` works inside a tool). Its text is
/// detail for the developer, not for the model or the user: it goes to `developer_message`, and the
/// `message` stays generic.
///
/// ```
/// use oxp_runtime::ToolError;
///
/// let io = std::io::Error::new(std::io::ErrorKind::NotFound, "/etc/secret.conf missing");
/// let err = ToolError::from(io);
/// assert!(!err.message.contains("/etc"));
/// assert!(err.developer_message.unwrap().contains("/etc/secret.conf"));
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolError {
    /// Shown to the user or the model.
    pub message: String,
    /// Internal detail, for logs; not shown to the user or the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub developer_message: Option<String>,
    /// Whether the client may retry the call (the spec's default is `false`).
    #[serde(default)]
    pub can_retry: bool,
    /// Extra text for the model's retry prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_prompt_content: Option<String>,
    /// How long the client should wait before retrying, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// Whose failure it is: the tool's own, or the pipeline's answer for a run that timed out
    /// or panicked (for metrics and logs; never on the wire, so a tool's error can never pass
    /// for the pipeline's by its text).
    #[serde(skip)]
    #[doc(hidden)]
    pub kind: FailureKind,
}

/// Whose failure a [`ToolError`] is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[doc(hidden)]
pub enum FailureKind {
    /// The tool returned it.
    #[default]
    Tool,
    /// The pipeline stopped a run past its time limit.
    Timeout,
    /// The tool panicked.
    Panic,
}

/// Equal when what the wire carries is equal: the kind is the server's own bookkeeping (an
/// answer read back from a store has lost it).
impl PartialEq for ToolError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
            && self.developer_message == other.developer_message
            && self.can_retry == other.can_retry
            && self.additional_prompt_content == other.additional_prompt_content
            && self.retry_after_ms == other.retry_after_ms
    }
}

impl Eq for ToolError {}

impl ToolError {
    /// The text a model reads for this error, over MCP or a provider's tool result: the message,
    /// then the additional prompt content (which exists to be shown to the model). Never the
    /// developer message, which is for logs.
    ///
    /// ```
    /// use oxp_runtime::ToolError;
    /// let error = ToolError::new("Doorbell ID not found")
    ///     .developer_message("no row 42 in doorbells")
    ///     .additional_prompt_content("ids: doorbell42, doorbell84");
    /// assert_eq!(error.for_model(), "Doorbell ID not found\nids: doorbell42, doorbell84");
    /// ```
    pub fn for_model(&self) -> String {
        match &self.additional_prompt_content {
            Some(more) => format!("{}\n{more}", self.message),
            None => self.message.clone(),
        }
    }

    /// A tool error with the given user-facing message and no retry hints.
    ///
    /// ```
    /// let err = oxp_runtime::ToolError::new("Quota exceeded");
    /// assert!(!err.can_retry);
    /// ```
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            developer_message: None,
            can_retry: false,
            additional_prompt_content: None,
            retry_after_ms: None,
            kind: FailureKind::Tool,
        }
    }

    /// The same error as the pipeline's own answer of `kind`.
    pub(crate) fn of_kind(mut self, kind: FailureKind) -> Self {
        self.kind = kind;
        self
    }

    /// Sets the internal message, kept out of the model's and the user's sight.
    ///
    /// ```
    /// let err = oxp_runtime::ToolError::new("Failed").developer_message("db timeout");
    /// assert_eq!(err.developer_message.as_deref(), Some("db timeout"));
    /// ```
    #[must_use]
    pub fn developer_message(mut self, message: impl Into<String>) -> Self {
        self.developer_message = Some(message.into());
        self
    }

    /// Says whether the client may retry the call.
    ///
    /// ```
    /// assert!(oxp_runtime::ToolError::new("Busy").can_retry(true).can_retry);
    /// ```
    #[must_use]
    pub fn can_retry(mut self, can_retry: bool) -> Self {
        self.can_retry = can_retry;
        self
    }

    /// Adds text for the model to use when it retries.
    ///
    /// ```
    /// let err = oxp_runtime::ToolError::new("Unknown city").additional_prompt_content("try: Paris");
    /// assert_eq!(err.additional_prompt_content.as_deref(), Some("try: Paris"));
    /// ```
    #[must_use]
    pub fn additional_prompt_content(mut self, content: impl Into<String>) -> Self {
        self.additional_prompt_content = Some(content.into());
        self
    }

    /// Asks the client to wait this many milliseconds before retrying.
    ///
    /// ```
    /// let err = oxp_runtime::ToolError::new("Rate limited").can_retry(true).retry_after_ms(1_000);
    /// assert_eq!(err.retry_after_ms, Some(1_000));
    /// ```
    #[must_use]
    pub fn retry_after_ms(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// `ToolError` deliberately does not implement `std::error::Error`: that is what lets every error
/// type convert into it (the same trade-off as `anyhow::Error`).
impl<E> From<E> for ToolError
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(error: E) -> Self {
        let mut detail = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            detail.push_str(": ");
            detail.push_str(&cause.to_string());
            source = cause.source();
        }
        ToolError::new("The tool failed with an internal error.").developer_message(detail)
    }
}
