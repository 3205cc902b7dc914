//! The invoke step: runs a tool's glue with panics contained, the time limit enforced, and the
//! call's secrets scrubbed from whatever text leaves it.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Either};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::context::ToolContext;
use crate::descriptor::{Invoke, InvokeError, InvokeResult, ToolDescriptor};
use crate::error::ToolError;
use crate::protocol::{CallResult, CallToolResponse, ValidationErrorResponse};

use super::CallOutcome;
use super::gate::{Admission, Gate};

/// Scrubs a call's secret and token values out of text that leaves the tool: error messages
/// and log lines. A tool that puts a key into an error (a URL with `?key=…` in a transport
/// error, say) does not leak it. Values shorter than four characters are left alone: replacing
/// them would garble the text without protecting anything.
///
/// Answers about the input (`422`s) quote the caller's values, so they are scrubbed of the user
/// id too; tool errors may name the user on purpose ("no mail for ada@…"), so they are not.
pub(super) struct Redactor {
    secrets: Vec<String>,
    user: Option<String>,
}

impl Redactor {
    const MIN_LEN: usize = 4;

    pub(super) fn new(context: &ToolContext) -> Self {
        let long_enough = |v: &&str| v.len() >= Self::MIN_LEN;
        Redactor {
            secrets: context
                .sensitive_values()
                .filter(long_enough)
                .map(str::to_owned)
                .collect(),
            user: context.user_id().filter(long_enough).map(str::to_owned),
        }
    }

    /// A `422` with the secrets, tokens and user id scrubbed from every message.
    pub(super) fn invalid(&self, mut invalid: ValidationErrorResponse) -> ValidationErrorResponse {
        let scrub = |text: &mut String| {
            self.text(text);
            if let Some(user) = &self.user {
                redact(text, user);
            }
        };
        scrub(&mut invalid.message);
        invalid.parameter_errors.values_mut().for_each(scrub);
        invalid
    }

    fn text(&self, text: &mut String) {
        for value in &self.secrets {
            redact(text, value);
        }
    }

    fn tool_error(&self, mut error: ToolError) -> ToolError {
        self.text(&mut error.message);
        for field in [
            &mut error.developer_message,
            &mut error.additional_prompt_content,
        ]
        .into_iter()
        .flatten()
        {
            self.text(field);
        }
        error
    }
}

fn redact(text: &mut String, value: &str) {
    if text.contains(value) {
        *text = text.replace(value, "<redacted>");
    }
}

/// What runs: a tool, or another fn with a tool's glue (a resource's read, a prompt's get)
/// under its name.
#[derive(Clone, Copy)]
pub(super) enum Subject {
    Tool(&'static ToolDescriptor),
    Other { name: &'static str, invoke: Invoke },
}

impl Subject {
    pub(super) fn invoke(self) -> Invoke {
        match self {
            Subject::Tool(tool) => tool.invoke,
            Subject::Other { invoke, .. } => invoke,
        }
    }
}

/// How long a run may take, and how large its result may be.
pub(super) struct Bounds {
    pub(super) timeout: Option<Duration>,
    pub(super) max_result_bytes: usize,
}

/// A tool run, ready to start: the tool's future is made here, and nothing runs until it is
/// polled. Owns everything it needs, so it can run as a task of its own that a client's
/// disconnect does not cancel; owns the call's admission too, so that the concurrency limit
/// counts the run for as long as it goes on.
pub(super) fn execute(
    subject: Subject,
    context: ToolContext,
    input: Value,
    bounds: Bounds,
    admission: Admission,
    gate: Arc<Gate>,
    taken: Option<OwnedSemaphorePermit>,
) -> Execution {
    let Bounds {
        timeout,
        max_result_bytes,
    } = bounds;
    let call_id = context.call_id().to_owned();
    let redactor = Redactor::new(&context);
    let mut first_wait = context.signals().first_wait();
    let (run, admission) = match subject.invoke() {
        // The glue reads the input (a parameter's own `Deserialize` is tool code, and may
        // panic) and boxes the tool's future without running any of the fn.
        Invoke::Async(glue) => {
            let made = std::panic::catch_unwind(AssertUnwindSafe(|| {
                let _in_tool = InToolGuard::enter();
                glue(context, input)
            }));
            let run = match made {
                Ok(future) => Either::Left(AssertUnwindSafe(InTool(future)).catch_unwind()),
                Err(panic) => Either::Right(futures_util::future::ready(Err(panic)).boxed()),
            };
            (run, Some(admission))
        }
        // A sync tool's thread cannot be stopped: the admission goes with it, and is given
        // back when the thread returns, whatever became of the call.
        Invoke::Blocking(glue) => {
            // A thread is a wait, whether or not it has ended by the first look.
            if let Some(first_wait) = first_wait.take() {
                first_wait.mark();
            }
            let place = match taken {
                Some(permit) => Place::Taken(permit),
                None => Place::WaitFor(gate.blocking.clone()),
            };
            let run = blocking(glue, context, input, place, admission);
            (Either::Right(run.boxed()), None)
        }
    };
    Execution {
        subject,
        call_id,
        redactor,
        run,
        limit: timeout,
        deadline: None,
        gate,
        _admission: admission,
        started: None,
        max_result_bytes,
        first_wait,
    }
}

/// A panic's payload, caught on whichever thread the tool ran.
type Panic = Box<dyn std::any::Any + Send>;

/// The tool's future, panics caught: on the async workers, or on the blocking pool.
type Run = Either<
    futures_util::future::CatchUnwind<AssertUnwindSafe<InTool>>,
    BoxFuture<'static, Result<InvokeResult, Panic>>,
>;

/// A tool run in flight: drives the tool within its time limit and shapes what came of it as a
/// `200` response (or a `422` when the input passed the schema but not the tool's own
/// `Deserialize`).
///
/// Written out rather than as an `async fn`, which would keep storage for its arguments and
/// its locals besides (three times this size): every call's future is moved into the tasks and
/// boxes of the HTTP stack, so its size is paid per call.
pub(super) struct Execution {
    subject: Subject,
    call_id: String,
    redactor: Redactor,
    run: Run,
    /// The time limit, and its timer: made when the tool first waits, to fire `limit` after
    /// the run started (a timer needs the runtime, which a caller may enter only to poll).
    limit: Option<Duration>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    gate: Arc<Gate>,
    /// The call's place, for an async tool: given back when the run ends or is dropped (a
    /// sync tool's thread holds it instead).
    _admission: Option<Admission>,
    /// Set when first polled, which counts the run as started; a run the idempotency store
    /// drops unpolled never started.
    started: Option<Instant>,
    max_result_bytes: usize,
    /// Marked (and dropped) the first time the tool waits, for a front that asks.
    first_wait: Option<Arc<crate::signals::FirstWait>>,
}

impl Execution {
    pub(super) fn call_id(&self) -> &str {
        &self.call_id
    }
}

impl Future for Execution {
    type Output = CallOutcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CallOutcome> {
        let this = &mut *self;
        let started = *this.started.get_or_insert_with(|| {
            this.gate.run_started();
            Instant::now()
        });
        let ran = match this.run.poll_unpin(cx) {
            Poll::Ready(ran) => ran,
            Poll::Pending => {
                if let Some(first_wait) = this.first_wait.take() {
                    first_wait.mark();
                }
                // The timer is made the first time the tool waits, counting from its start: a
                // tool that answers at once (most do) costs no timer.
                if this.deadline.is_none() {
                    this.deadline = this
                        .limit
                        .map(|limit| Box::pin(tokio::time::sleep_until((started + limit).into())));
                }
                let expired = this
                    .deadline
                    .as_mut()
                    .is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready());
                match this.limit {
                    // Out of time: the tool's future is dropped with this one.
                    Some(limit) if expired => Ok(Err(timed_out(limit))),
                    _ => return Poll::Pending,
                }
            }
        };
        let started = this.started.take().unwrap_or_else(Instant::now);
        let outcome = this.shape(ran, started.elapsed().as_secs_f64() * 1000.0);
        this.gate.run_finished();
        Poll::Ready(outcome)
    }
}

impl Drop for Execution {
    /// A run dropped mid-way (its timeout, or its task aborted) still finished.
    fn drop(&mut self) {
        if self.started.is_some() {
            self.gate.run_finished();
        }
    }
}

impl Execution {
    fn shape(&mut self, ran: Result<InvokeResult, Panic>, duration: f64) -> CallOutcome {
        let redactor = &self.redactor;
        let result = match ran.unwrap_or_else(|panic| Err(panicked(panic.as_ref(), redactor))) {
            Ok(Some(value)) if over(&value, self.max_result_bytes) => CallResult::Failure {
                error: ToolError::new("The tool's result is too large to send.").developer_message(
                    format!(
                        "the result is over the server's limit of {} bytes (OXP_MAX_RESULT_BYTES)",
                        self.max_result_bytes
                    ),
                ),
            },
            Ok(value) => CallResult::Success { value },
            Err(InvokeError::Tool(error)) => CallResult::Failure {
                error: redactor.tool_error(error),
            },
            Err(InvokeError::Input(e)) => {
                return CallOutcome::Invalid(self.redactor.invalid(ValidationErrorResponse {
                    message: match self.subject {
                        Subject::Tool(tool) => format!(
                            "The input for '{}_{}' is invalid: {e}",
                            tool.toolkit, tool.name
                        ),
                        Subject::Other { name, .. } => {
                            format!("The input for '{name}' is invalid: {e}")
                        }
                    },
                    parameter_errors: BTreeMap::new(),
                }));
            }
            Err(InvokeError::Output(e)) => CallResult::Failure {
                error: ToolError::new("The tool produced a value that could not be sent.")
                    .developer_message(format!("serializing the value failed: {e}")),
            },
        };
        CallOutcome::Completed(CallToolResponse {
            call_id: std::mem::take(&mut self.call_id),
            duration: Some(duration),
            result,
        })
    }
}

/// Whether `value`'s JSON is longer than `limit`: counted, and given up on at the limit, so a
/// huge result is never written out to be measured.
fn over(value: &Value, limit: usize) -> bool {
    // Most results are scalars or short strings: no need to count (a character is at most 6
    // bytes of JSON, as `\uXXXX`).
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => return false,
        Value::String(s) if s.len().saturating_mul(6).saturating_add(2) <= limit => return false,
        _ => {}
    }
    struct Budget(usize);
    impl std::io::Write for Budget {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self
                .0
                .checked_sub(buf.len())
                .ok_or(std::io::ErrorKind::WriteZero)?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Budget(limit), value).is_err()
}

/// What a call that ran out of time is answered with (the metrics class it by it).
pub(super) const TIMED_OUT: &str = "The tool took too long and was stopped.";

/// What a call whose tool panicked is answered with (the metrics class it by it).
pub(super) const PANICKED: &str = "The tool failed unexpectedly.";

fn timed_out(limit: Duration) -> InvokeError {
    InvokeError::Tool(
        ToolError::new(TIMED_OUT)
            .developer_message(format!("timed out after {} ms", limit.as_millis()))
            .can_retry(true)
            .of_kind(crate::error::FailureKind::Timeout),
    )
}

/// A place on a blocking thread: taken before the call (a sync tool without a time limit to
/// wait within), or to wait for within the run's limit.
enum Place {
    Taken(OwnedSemaphorePermit),
    WaitFor(Arc<Semaphore>),
}

/// A sync tool on the blocking pool, within a bounded share of it. The thread itself holds the
/// permit and the call's admission until it returns: a tool that timed out (or whose caller
/// hung up) still occupies its place, so stuck tools can never take more threads than the cap,
/// and a drain waits for them.
async fn blocking(
    glue: fn(ToolContext, Value) -> InvokeResult,
    context: ToolContext,
    input: Value,
    place: Place,
    admission: Admission,
) -> Result<InvokeResult, Panic> {
    let permit = match place {
        Place::Taken(permit) => permit,
        // Waited for within the run's time limit, which the `Execution` enforces.
        Place::WaitFor(places) => match places.acquire_owned().await {
            Ok(permit) => permit,
            Err(_) => {
                return Ok(Err(InvokeError::Tool(ToolError::new(
                    "The server is shutting down.",
                ))));
            }
        },
    };
    let run = move || {
        let _held = (permit, admission);
        let _in_tool = InToolGuard::enter();
        glue(context, input)
    };
    match tokio::task::spawn_blocking(run).await {
        Ok(result) => Ok(result),
        Err(join) if join.is_panic() => Err(join.into_panic()),
        Err(join) => Ok(Err(InvokeError::Tool(
            ToolError::new("The tool was cancelled.").developer_message(join.to_string()),
        ))),
    }
}

/// A panic becomes a generic tool error; its text goes to the log only (scrubbed of the call's
/// secrets), since it may hold anything the tool had in hand.
fn panicked(payload: &(dyn std::any::Any + Send), redactor: &Redactor) -> InvokeError {
    let mut text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned());
    redactor.text(&mut text);
    tracing::error!(target: "oxp_runtime::call::invoke", panic = ?text, "tool panicked");
    InvokeError::Tool(ToolError::new(PANICKED).of_kind(crate::error::FailureKind::Panic))
}

thread_local! {
    static IN_TOOL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is running a tool's code right now: the panic hook of
/// [`install_panic_hook`] leaves such panics' text to the pipeline, which scrubs it.
fn in_tool() -> bool {
    IN_TOOL.with(std::cell::Cell::get)
}

/// Marks the thread as running tool code until dropped (also when the tool panics).
struct InToolGuard(bool);

impl InToolGuard {
    fn enter() -> Self {
        InToolGuard(IN_TOOL.with(|flag| flag.replace(true)))
    }
}

impl Drop for InToolGuard {
    fn drop(&mut self) {
        IN_TOOL.with(|flag| flag.set(self.0));
    }
}

/// A tool's future, marked as tool code while it is polled.
struct InTool(futures_util::future::BoxFuture<'static, InvokeResult>);

impl std::future::Future for InTool {
    type Output = InvokeResult;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<InvokeResult> {
        let _in_tool = InToolGuard::enter();
        self.0.as_mut().poll(cx)
    }
}

/// Wraps the panic hook in force (the default one, or the app's own) with one that keeps the
/// text of panics inside tools to the pipeline, which logs it with the call's secrets scrubbed;
/// other panics are logged through `tracing` and then handed to the hook that was there.
/// [`serve`](https://docs.rs/oxp-runtime/latest/oxp_runtime/fn.serve.html) installs it; an app that embeds the router may call it at start-up,
/// after installing its own hook. Installing it again does nothing.
///
/// ```
/// oxp_runtime::call::install_panic_hook();
/// oxp_runtime::call::install_panic_hook(); // once is enough; twice does not wrap twice
/// ```
pub fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            log_panic(info);
            // A tool's panic text may hold anything the tool had in hand: no other hook (the
            // default one prints to stderr) sees it.
            if !in_tool() {
                previous(info);
            }
        }));
    });
}

/// Logs a panic: a tool's only by where it happened (its text is the pipeline's to log).
fn log_panic(info: &std::panic::PanicHookInfo<'_>) {
    let location = info
        .location()
        .map(|l| format!("{}:{}", l.file(), l.line()))
        .unwrap_or_default();
    if in_tool() {
        tracing::debug!(
            target: "oxp_runtime::call::invoke",
            %location, "a tool panicked (its message is logged with the call)",
        );
        return;
    }
    let payload = info.payload();
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string panic payload");
    tracing::error!(
        target: "oxp_runtime::call::invoke",
        %location, panic = ?text, "a thread panicked",
    );
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The app's own hook still sees panics outside tools, and never a tool's (whose text may
    /// hold a secret); installing twice does not wrap twice.
    #[test]
    fn the_panic_hook_chains_the_apps_own_and_keeps_tool_panics_from_it() {
        static SEEN: AtomicUsize = AtomicUsize::new(0);
        // The hook is the process's: the test puts back what it found, so that no other test
        // of this binary runs under the test's hook.
        let found = std::panic::take_hook();
        std::panic::set_hook(Box::new(|info| {
            if info.payload().downcast_ref::<&str>() == Some(&"hook-test") {
                SEEN.fetch_add(1, Ordering::SeqCst);
            }
        }));
        super::install_panic_hook();
        super::install_panic_hook();
        let _ = std::thread::spawn(|| panic!("hook-test")).join();
        let seen_outside = SEEN.load(Ordering::SeqCst);
        let _ = std::thread::spawn(|| {
            let _in_tool = super::InToolGuard::enter();
            panic!("hook-test")
        })
        .join();
        let seen = SEEN.load(Ordering::SeqCst);
        std::panic::set_hook(found);
        assert_eq!(seen_outside, 1, "the app's hook saw it, once");
        assert_eq!(seen, 1, "a tool's panic stays with the pipeline");
    }
}
