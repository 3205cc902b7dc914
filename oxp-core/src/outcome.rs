//! [`CallOutcome`]: what came of a call, as every front and every idempotency store sees it.
//! It sits below both the pipeline that makes outcomes and the stores that keep them, so that
//! neither imports the other. Reached as `oxp_runtime::call::CallOutcome`.

use serde::{Deserialize, Serialize};

use crate::protocol::{CallResult, CallToolResponse, ServerErrorResponse, ValidationErrorResponse};

/// How long a client is asked to wait when the server is full or shutting down.
///
/// ```
/// use oxp_runtime::call::{CallOutcome, RETRY_AFTER_MS};
/// let CallOutcome::Unavailable { retry_after_ms, .. } = CallOutcome::unavailable("full") else { unreachable!() };
/// assert_eq!(retry_after_ms, RETRY_AFTER_MS);
/// ```
pub const RETRY_AFTER_MS: u64 = 1000;

/// What came of a call, one variant per class of answer OXP distinguishes.
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::call::{CallOutcome, Pipeline};
///
/// /// Add two integers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
/// let request = serde_json::from_str(r#"{"tool_id": "Calculator.Add", "input": {"a": 1.5, "b": 2}}"#).unwrap();
/// let CallOutcome::Invalid(invalid) = pipeline.call(request).await else { panic!("1.5 is no integer") };
/// assert!(invalid.parameter_errors.contains_key("a"));
/// # });
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "class", content = "body", rename_all = "snake_case")]
pub enum CallOutcome {
    /// The tool ran: `200`, successful or not.
    Completed(CallToolResponse),
    /// The call was refused before the tool ran: `400`.
    Rejected(ServerErrorResponse),
    /// The server is full or shutting down: `400`, and worth retrying after `retry_after_ms`.
    Unavailable {
        /// The answer's body.
        error: ServerErrorResponse,
        /// When to retry.
        retry_after_ms: u64,
    },
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
            CallOutcome::Rejected(_) | CallOutcome::Unavailable { .. } => 400,
            CallOutcome::Invalid(_) => 422,
        }
    }

    /// Whether the tool ran and returned a value: anything else (a failure, a refusal, an
    /// input that did not validate) ended without one, which is where a round that asked
    /// goes on.
    ///
    /// ```
    /// use oxp_runtime::call::CallOutcome;
    /// use oxp_runtime::protocol::{CallResult, CallToolResponse};
    /// let done = CallOutcome::Completed(CallToolResponse {
    ///     call_id: "c1".into(),
    ///     duration: None,
    ///     result: CallResult::Success { value: Some(3.into()) },
    /// });
    /// assert!(done.succeeded());
    /// assert!(!CallOutcome::unavailable("down").succeeded());
    /// ```
    pub fn succeeded(&self) -> bool {
        matches!(
            self,
            CallOutcome::Completed(CallToolResponse {
                result: CallResult::Success { .. },
                ..
            })
        )
    }

    /// Whether the tool ran and failed with `can_retry: true` (an answer not to keep).
    ///
    /// ```
    /// use oxp_runtime::call::CallOutcome;
    /// use oxp_runtime::protocol::{CallResult, CallToolResponse};
    /// use oxp_runtime::ToolError;
    /// let failed = CallOutcome::Completed(CallToolResponse {
    ///     call_id: "c1".into(),
    ///     duration: None,
    ///     result: CallResult::Failure { error: ToolError::new("Busy").can_retry(true) },
    /// });
    /// assert!(failed.is_retryable_failure());
    /// ```
    pub fn is_retryable_failure(&self) -> bool {
        matches!(
            self,
            CallOutcome::Completed(CallToolResponse {
                result: CallResult::Failure { error },
                ..
            }) if error.can_retry
        )
    }

    /// The "temporarily unavailable" answer, with `detail` for the developer.
    ///
    /// ```
    /// let outcome = oxp_runtime::call::CallOutcome::unavailable("the database is down");
    /// assert_eq!(outcome.status(), 400);
    /// ```
    pub fn unavailable(detail: impl Into<String>) -> Self {
        CallOutcome::Unavailable {
            error: ServerErrorResponse {
                message: "The server is temporarily unavailable; retry shortly.".into(),
                developer_message: Some(detail.into()),
                missing_requirements: None,
            },
            retry_after_ms: RETRY_AFTER_MS,
        }
    }
}
