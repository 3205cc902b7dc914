//! Long-running tools as tasks: MCP's tasks extension (`io.modelcontextprotocol/tasks`,
//! SEP-2663), over the same store that keeps `call_id` answers.
//!
//! Hosts give up on a call after a minute or two. A tool marked `#[tool(task = "optional")]`
//! (or `"required"`) is answered, for a client that declares the extension on its request,
//! with a task at once; the client polls `tasks/get` for its status and result, answers its
//! questions with `tasks/update`, and may `tasks/cancel` it. The tool's body is unchanged:
//! [`ctx.progress`](crate::ToolContext::progress) becomes the task's status message,
//! [`ctx.is_cancelled`](crate::ToolContext::is_cancelled) turns true on `tasks/cancel`, and an
//! ask ([`ctx.ask`](crate::ToolContext::ask), `confirm`, …) parks the task as `input_required`
//! until `tasks/update` answers it, then runs the tool again from the top with the answers, as
//! every round of an ask does (see [`ask`](crate::ask)).
//!
//! ```
//! use oxp_runtime::{tool, ToolContext, ToolError};
//!
//! /// Build the monthly report.
//! #[tool(toolkit = "Reports", version = "1.0.0", task = "optional")]
//! async fn monthly(ctx: &ToolContext, month: String) -> Result<String, ToolError> {
//!     for step in 1..=3 {
//!         ctx.progress(step, Some(3), Some("crunching"));
//!         if ctx.is_cancelled() {
//!             return Err(ToolError::new("stopped"));
//!         }
//!     }
//!     Ok(format!("report for {month}"))
//! }
//! assert_eq!(monthly::TOOL.hints.task, Some(oxp_runtime::tasks::TaskSupport::Optional));
//! ```
//!
//! **When a call becomes a task.** The call starts as any call does; while the tool only asks
//! (its questions before its first real wait) the rounds are MCP's ordinary multi-round ones,
//! answered at once. When the tool first waits on something else (a sleep, I/O, a blocking
//! thread for a sync tool), the call is a task, and the client is answered with it. A tool that
//! answers before it ever waits is answered as a plain call, which the extension allows. What
//! counts is the tool's own first wait, seen from inside its run: the store's work around the
//! call (Redis's I/O) is none, so the rule is the same in memory and in Redis, and a sync tool,
//! whose thread is a wait however soon it ends, is a task from its first round every time.
//!
//! **One store for runs.** A task is a call whose answer is kept: its record lives in the
//! pipeline's [`IdempotencyStore`](crate::idempotency::IdempotencyStore) beside `call_id`
//! answers, in memory by default (one process) and in Redis with `OXP_REDIS_URL` (replicas),
//! within the same count and byte budgets, for the task's time to live. It is written before the
//! client hears of the task, so a `tasks/get` right after finds it on any replica.
//!
//! **Leases.** The process running a task (or a `call_id` run, in Redis) holds a lease on it
//! ([`DEFAULT_LEASE`], `OXP_LEASE_MS`) and renews it every [`beat`]: a run far longer than the
//! lease is never run twice; `tasks/cancel` on any replica reaches the run within a beat; a
//! process that dies mid-run leaves its task `failed` ("the server running it stopped"), seen
//! by the first `tasks/get` after its lease lapses, never `working` forever and never run again.
//!
//! | status | what the client sees | goes to |
//! |---|---|---|
//! | `working` | `statusMessage`: the tool's last progress | any other |
//! | `input_required` | `inputRequests` still unanswered | `working` when all are answered, `cancelled` |
//! | `completed` | `result`: what `tools/call` would have answered (a tool's error too) | — |
//! | `failed` | `error`: a JSON-RPC error (a panic, a lapsed lease, the server stopping) | — |
//! | `cancelled` | — | — |

use std::time::Duration;

// The store's side of tasks (records, leases, the runs of a process), public for the fronts
// that make tasks (MCP's), and hidden from the docs.
#[doc(hidden)]
pub mod record;
#[doc(hidden)]
pub mod runs;
#[doc(hidden)]
pub mod store;

#[doc(hidden)]
pub use record::{Record, Render, Status, TaskError};
#[doc(hidden)]
pub use runs::{Again, FirstRound, Line, Run, Runs, until_first_wait};
#[doc(hidden)]
pub use store::{ANONYMOUS, TaskConfig, TaskStore};

/// Whether a tool may run as a task: `#[tool(task = "optional")]` or `#[tool(task = "required")]`.
///
/// ```
/// use oxp_runtime::tasks::TaskSupport;
/// assert_eq!("required".parse::<TaskSupport>(), Ok(TaskSupport::Required));
/// assert!("always".parse::<TaskSupport>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskSupport {
    /// A task for a client that declares the extension; a plain call for one that does not,
    /// and over OXP and provider dispatch.
    Optional,
    /// A task for a client that declares the extension; over MCP, a client that does not gets
    /// the "missing required client capability" error (-32021). Over OXP and provider
    /// dispatch, a plain call within the tool's time limit (a retry with the same `call_id`
    /// gets its answer).
    Required,
}

impl std::str::FromStr for TaskSupport {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "optional" => Ok(TaskSupport::Optional),
            "required" => Ok(TaskSupport::Required),
            other => Err(format!(
                "`{other}` is not one of {}",
                crate::rules::TASK.join(", ")
            )),
        }
    }
}

/// How long a run's lease holds without its process renewing it, by default.
///
/// ```
/// assert_eq!(oxp_runtime::tasks::DEFAULT_LEASE.as_secs(), 30);
/// ```
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How long a task is kept from its creation by default (`OXP_TASK_TTL_MS`), its `ttlMs`:
/// SEP-2663 leaves the time to the server (a client has no way to ask for another).
///
/// ```
/// assert_eq!(oxp_runtime::tasks::DEFAULT_TTL.as_secs(), 3600);
/// ```
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// How often a running process renews its lease and looks for a cancellation: a tenth of the
/// lease, at most a second.
///
/// ```
/// use std::time::Duration;
/// use oxp_runtime::tasks::beat;
/// assert_eq!(beat(Duration::from_secs(30)), Duration::from_secs(1));
/// assert_eq!(beat(Duration::from_millis(500)), Duration::from_millis(50));
/// ```
pub fn beat(lease: Duration) -> Duration {
    (lease / 10).clamp(Duration::from_millis(1), Duration::from_secs(1))
}
