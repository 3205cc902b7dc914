//! The one call pipeline every front uses: admit → resolve → requirements → validate → invoke
//! → outcome.
//!
//! It knows nothing of HTTP, MCP or model providers: a front turns its request into a
//! [`CallToolRequest`], runs [`Pipeline::call`], and translates the [`CallOutcome`] back.

mod gate;
#[doc(hidden)]
pub use gate::Owed;
mod invoke;
mod requirements;
mod resources_prompts;
mod validate;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tracing::Instrument;

pub use crate::metrics::Front;
pub use crate::outcome::{CallOutcome, RETRY_AFTER_MS};
pub use gate::{CallStats, DEFAULT_MAX_BLOCKING, default_max_calls};
pub use invoke::install_panic_hook;
pub use resources_prompts::ReadError;

use crate::authorization::AuthorizationProvider;
use crate::context::ToolContext;
use crate::descriptor::Invoke;
use crate::idempotency::{
    Fingerprint, IdempotencyKey, IdempotencyStore, InMemoryIdempotency, Reuse,
};
use crate::metrics::{Metrics, Outcome, Refusal as Refused};
use crate::protocol::{CallResult, CallToolRequest, CallToolResponse, ServerErrorResponse};
use crate::registry::{RegisteredTool, Registry, ResolveError};
use gate::{Gate, Refusal};

/// The time limit of a tool that sets no `timeout_ms` of its own, unless the pipeline is told
/// otherwise ([`Pipeline::default_timeout`], `OXP_TOOL_TIMEOUT_MS`): no tool runs forever by
/// accident.
///
/// ```
/// assert_eq!(oxp_runtime::call::DEFAULT_TOOL_TIMEOUT.as_secs(), 60);
/// ```
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest result a tool may return, by default, as JSON: 16 MiB. A larger one is answered
/// as a tool error saying so (see [`Pipeline::max_result_bytes`]).
///
/// ```
/// assert_eq!(oxp_runtime::call::DEFAULT_MAX_RESULT_BYTES, 16 * 1024 * 1024);
/// ```
pub const DEFAULT_MAX_RESULT_BYTES: usize = 16 * 1024 * 1024;

/// What makes a call's span a child of the span its `traceparent` names. The exporter that can
/// do it (oxp-runtime's `otel` feature) sets it, so the core names no tracing backend.
static ADOPT_PARENT: std::sync::OnceLock<fn(&tracing::Span, &str)> = std::sync::OnceLock::new();

/// Sets how a call's span adopts its caller's `traceparent` (the first setting stays).
#[doc(hidden)]
pub fn set_adopt_parent(adopt: fn(&tracing::Span, &str)) {
    let _ = ADOPT_PARENT.set(adopt);
}

/// The longest `call_id`, `trace_id` or `tool_id` a call may carry, in bytes. Longer ones, and
/// ones with control characters, are refused with a `400`: they are echoed and logged.
///
/// ```
/// assert_eq!(oxp_runtime::call::MAX_ID_BYTES, 256);
/// ```
pub const MAX_ID_BYTES: usize = 256;

/// What a front knows about a call besides its body.
///
/// ```
/// use oxp_runtime::call::CallMeta;
/// // What an HTTP front knows besides the body: who called, and where challenges are checked.
/// # use oxp_runtime::{call::Pipeline, protocol::CallToolRequest, Registry};
/// # async fn front(pipeline: Pipeline, request: CallToolRequest) {
/// let meta = CallMeta {
///     principal: Some("jwt:ada".into()),
///     check_url_base: Some("https://tools.example.com/authorization/".into()),
///     ..CallMeta::default()
/// };
/// let outcome = pipeline.call_with(request, &meta).await;
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct CallMeta {
    /// Who sent it, for idempotency scoping (`anonymous` when `None`).
    pub principal: Option<String>,
    /// The base URL that authorization challenges' `check_url`s start with (the check id is
    /// appended); no `check_url` when `None`.
    pub check_url_base: Option<String>,
    /// Also resolve a `tool_id` that is a wire name (`Calculator_Add`), as LangChain's clients
    /// send (oxp-notes §3.19). Off: strict OXP.
    pub resolve_wire_names: bool,
    /// Progress and cancellation, for a front that carries them (MCP); none by default.
    pub signals: crate::signals::CallSignals,
    /// Which front carried the call (the metrics' `front` label); `oxp` by default.
    pub front: Front,
    /// The caller's W3C `traceparent` (an HTTP header, MCP's `_meta.traceparent`): with the
    /// `otel` feature, the call's span is exported as a child of the caller's.
    pub traceparent: Option<String>,
}

/// Drives `run` until its caller cancels: then it is dropped at its next await point (unless
/// the tool asked to finish) and answered as cancelled — an answer the front does not send, and
/// the one an idempotency store keeps for the `call_id`.
///
/// Not an `async fn`: that would keep `run` twice (as its argument, and as the local a borrow
/// of it needs), and the future is boxed per call.
#[allow(clippy::manual_async_fn)] // see above
fn cancellable(
    mut run: invoke::Execution,
    cancellation: crate::signals::Cancellation,
) -> impl Future<Output = CallOutcome> + Send {
    async move {
        tokio::select! {
            biased;
            outcome = &mut run => outcome,
            () = cancellation.dropping() => CallOutcome::Completed(CallToolResponse {
                call_id: run.call_id().to_owned(),
                duration: None,
                result: CallResult::Failure {
                    error: crate::error::ToolError::new("The call was cancelled."),
                },
            }),
        }
    }
}

/// Runs calls against a registry.
///
/// ```
/// use oxp_runtime::{tool, Registry};
/// use oxp_runtime::call::{CallOutcome, Pipeline};
/// use oxp_runtime::protocol::{CallResult, CallToolRequest};
///
/// /// Add two numbers.
/// #[tool(toolkit = "Calculator", version = "1.0.0")]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
/// let request = CallToolRequest {
///     tool_id: "Calculator.Add".into(),
///     input: Some(serde_json::json!({"a": 2, "b": 3})),
///     ..Default::default()
/// };
/// let CallOutcome::Completed(response) = pipeline.call(request).await else { panic!() };
/// assert_eq!(response.result, CallResult::Success { value: Some(5.into()) });
/// # });
/// ```
#[derive(Clone)]
pub struct Pipeline {
    registry: Arc<Registry>,
    default_timeout: Option<Duration>,
    authorization: Option<Arc<dyn AuthorizationProvider>>,
    idempotency: Option<Arc<dyn IdempotencyStore>>,
    gate: Arc<Gate>,
    /// The task rounds this pipeline's fronts run in this process.
    task_runs: crate::tasks::Runs,
    max_result_bytes: usize,
    metrics: Option<Metrics>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("tools", &self.registry.tools().len())
            .field("default_timeout", &self.default_timeout)
            .field("authorization", &self.authorization.is_some())
            .field("idempotency", &self.idempotency.is_some())
            .field("stats", &self.gate.stats())
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

impl Pipeline {
    /// A pipeline over `registry`: a time limit of [`DEFAULT_TOOL_TIMEOUT`] for tools that set
    /// none, no concurrency limit, in-memory idempotency by `call_id`, and metrics.
    ///
    /// ```no_run
    /// use oxp_runtime::{call::Pipeline, server::Server, Registry};
    ///
    /// // Every `#[tool]` in the binary, served over OXP with the pipeline's defaults.
    /// let pipeline = Pipeline::new(Registry::from_inventory().expect("the tools register"));
    /// let app: axum::Router = Server::from_pipeline(pipeline).router();
    /// ```
    pub fn new(registry: impl Into<Arc<Registry>>) -> Self {
        let registry = registry.into();
        Pipeline {
            metrics: Some(Metrics::new(&registry)),
            registry,
            default_timeout: Some(DEFAULT_TOOL_TIMEOUT),
            authorization: None,
            idempotency: Some(Arc::new(InMemoryIdempotency::default())),
            gate: Arc::new(Gate::new(Some(default_max_calls()), DEFAULT_MAX_BLOCKING)),
            task_runs: crate::tasks::Runs::default(),
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }

    /// Whether calls are counted and timed for `metrics_text` (oxp-runtime's `MetricsText`,
    /// and the server's `GET /metrics`); on by default, `OXP_METRICS=false` turns it off.
    ///
    /// ```
    /// # use oxp_runtime::MetricsText;
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry).metrics(false);
    /// assert!(pipeline.metrics_text().is_none());
    /// ```
    #[must_use]
    pub fn metrics(mut self, on: bool) -> Self {
        // On stays on with the counts so far: configuring twice loses nothing.
        self.metrics = match (on, self.metrics.take()) {
            (false, _) => None,
            (true, Some(metrics)) => Some(metrics),
            (true, None) => Some(Metrics::new(&self.registry)),
        };
        self
    }

    /// What the pipeline knows only when scraped: the sync tools in their blocking threads, and
    /// what the idempotency store keeps.
    #[doc(hidden)]
    pub fn metrics_levels(&self) -> crate::metrics::Levels {
        crate::metrics::Levels {
            blocking_in_use: self.gate.blocking_in_use(),
            store: self.idempotency.as_ref().and_then(|store| store.size()),
        }
    }

    /// The metrics the fronts add their refusals to.
    #[doc(hidden)]
    pub fn metrics_handle(&self) -> Option<&Metrics> {
        self.metrics.as_ref()
    }

    /// The largest result a tool may return, as JSON (default [`DEFAULT_MAX_RESULT_BYTES`]). A
    /// larger one is answered `success: false` with an error that says so; it is measured, not
    /// written out, so a huge result costs no second copy.
    ///
    /// ```
    /// use oxp_runtime::{call::{CallOutcome, Pipeline}, protocol::CallResult, tool, Registry};
    ///
    /// /// Repeat a letter.
    /// #[tool(toolkit = "Text", version = "1.0.0")]
    /// async fn repeat(times: usize) -> String { "a".repeat(times) }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let registry = Registry::builder().tool(repeat::TOOL).build().unwrap();
    /// let pipeline = Pipeline::new(registry).max_result_bytes(1024);
    /// let request = serde_json::from_str(r#"{"tool_id": "Text.Repeat", "input": {"times": 5000}}"#).unwrap();
    /// let CallOutcome::Completed(response) = pipeline.call(request).await else { panic!() };
    /// let CallResult::Failure { error } = response.result else { panic!("too big to send") };
    /// assert!(error.message.contains("too large"), "{}", error.message);
    /// # });
    /// ```
    #[must_use]
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }

    /// The time limit for tools that do not set `timeout_ms` themselves; `Duration::ZERO` for
    /// none (such tools may then run for as long as they like).
    ///
    /// ```
    /// use oxp_runtime::{call::{CallOutcome, Pipeline}, protocol::CallResult, tool, Registry};
    /// use std::time::Duration;
    ///
    /// /// Wait a while.
    /// #[tool(toolkit = "Clock", version = "1.0.0")]
    /// async fn wait(ms: u64) { tokio::time::sleep(Duration::from_millis(ms)).await }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let registry = Registry::builder().tool(wait::TOOL).build().unwrap();
    /// let pipeline = Pipeline::new(registry).default_timeout(Duration::from_millis(50));
    /// let request = serde_json::from_str(r#"{"tool_id": "Clock.Wait", "input": {"ms": 10000}}"#).unwrap();
    /// let CallOutcome::Completed(response) = pipeline.call(request).await else { panic!() };
    /// assert!(matches!(response.result, CallResult::Failure { .. }), "stopped after 50 ms");
    /// # });
    /// ```
    #[must_use]
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = (!timeout.is_zero()).then_some(timeout);
        self
    }

    /// The provider that mints challenges when a call lacks an authorization token.
    ///
    /// ```
    /// use oxp_runtime::{authorization::InMemoryAuthorization, call::Pipeline, Registry};
    ///
    /// # let registry = Registry::builder().build().unwrap();
    /// let pipeline = Pipeline::new(registry)
    ///     .authorization(InMemoryAuthorization::new("https://auth.example.com/authorize"));
    /// assert!(pipeline.authorization_provider().is_some());
    /// ```
    #[must_use]
    pub fn authorization(mut self, provider: impl AuthorizationProvider) -> Self {
        self.authorization = Some(Arc::new(provider));
        self
    }

    /// Where answers to calls with a `call_id` are kept, so a repeated call does not run the tool
    /// again; `None` turns idempotency off.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, idempotency::InMemoryIdempotency, tool, Registry};
    /// use std::sync::atomic::{AtomicU32, Ordering};
    ///
    /// static SENT: AtomicU32 = AtomicU32::new(0);
    ///
    /// /// Send a mail (counted, not sent).
    /// #[tool(toolkit = "Mail", version = "1.0.0")]
    /// async fn send(to: String) -> u32 { SENT.fetch_add(1, Ordering::SeqCst) + 1 }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// // Answers kept for an hour, at most 100,000 of them.
    /// let store = InMemoryIdempotency::new(100_000, std::time::Duration::from_secs(3600));
    /// let pipeline = Pipeline::new(Registry::builder().tool(send::TOOL).build().unwrap())
    ///     .idempotency(Some(store));
    /// let request = r#"{"tool_id": "Mail.Send", "call_id": "send-1", "input": {"to": "ada"}}"#;
    /// for _retry in 0..3 {
    ///     let outcome = pipeline.call(serde_json::from_str(request).unwrap()).await;
    ///     assert_eq!(outcome.status(), 200);
    /// }
    /// assert_eq!(SENT.load(Ordering::SeqCst), 1, "a repeated call_id gets the first answer");
    /// # });
    /// ```
    #[must_use]
    pub fn idempotency(mut self, store: Option<impl IdempotencyStore>) -> Self {
        self.idempotency = store.map(|s| Arc::new(s) as Arc<dyn IdempotencyStore>);
        self
    }

    /// At most `max_calls` calls at once (`None`: no limit; the default is
    /// [`default_max_calls`]), and at most `max_blocking` sync tools on blocking threads. A call
    /// over the limit is answered at once as temporarily unavailable.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, Registry};
    ///
    /// # let registry = Registry::builder().build().unwrap();
    /// // 512 calls at once, 64 of them sync tools on blocking threads.
    /// let pipeline = Pipeline::new(registry).limits(Some(512), 64);
    /// assert_eq!(pipeline.stats().active, 0);
    /// ```
    #[must_use]
    pub fn limits(mut self, max_calls: Option<usize>, max_blocking: usize) -> Self {
        self.gate = Arc::new(Gate::new(max_calls, max_blocking));
        self
    }

    /// The registry calls resolve against.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// assert!(pipeline.registry().tools().is_empty());
    /// ```
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The authorization provider, if any.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use oxp_runtime::authorization::InMemoryAuthorization;
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry)
    ///     .authorization(InMemoryAuthorization::new("https://auth.example.com/authorize"));
    /// assert!(pipeline.authorization_provider().is_some());
    /// ```
    pub fn authorization_provider(&self) -> Option<&dyn AuthorizationProvider> {
        self.authorization.as_deref()
    }

    /// How much work is under way and done.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// let stats = pipeline.stats();
    /// assert_eq!((stats.active, stats.started, stats.finished), (0, 0, 0));
    /// ```
    pub fn stats(&self) -> CallStats {
        self.gate.stats()
    }

    /// Stops admitting calls (they are answered as temporarily unavailable); calls already
    /// admitted go on. For graceful shutdown.
    ///
    /// ```
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// use oxp_runtime::call::{CallOutcome, Pipeline};
    /// use oxp_runtime::protocol::CallToolRequest;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let pipeline = Pipeline::new(registry);
    /// pipeline.drain();
    /// let outcome = pipeline.call(CallToolRequest { tool_id: "Calculator.Add".into(), ..Default::default() }).await;
    /// assert!(matches!(outcome, CallOutcome::Unavailable { .. }));
    /// # });
    /// ```
    pub fn drain(&self) {
        self.gate.drain();
    }

    /// The store that keeps `call_id` answers and tasks, if any.
    #[doc(hidden)]
    pub fn store(&self) -> Option<&Arc<dyn IdempotencyStore>> {
        self.idempotency.as_ref()
    }

    /// The task rounds this pipeline's fronts run in this process: what a cancellation that
    /// lands here stops at once, and what a shutdown marks interrupted.
    #[doc(hidden)]
    pub fn task_runs(&self) -> &crate::tasks::Runs {
        &self.task_runs
    }

    /// Whether [`drain`](Self::drain) was called.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// pipeline.drain();
    /// assert!(pipeline.is_draining());
    /// ```
    pub fn is_draining(&self) -> bool {
        self.gate.is_draining()
    }

    /// Counts a write owed to the store after a run (see [`Gate::owe`]) until the guard drops.
    #[doc(hidden)]
    pub fn owe(&self) -> Owed {
        self.gate.owe()
    }

    /// Waits until no call is active, no tool runs and no write is owed to the store, at most
    /// `limit`; `true` if it got there.
    ///
    /// ```
    /// # let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::builder().build().unwrap());
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// assert!(pipeline.wait_idle(std::time::Duration::from_millis(10)).await);
    /// # });
    /// ```
    pub async fn wait_idle(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        if !self.gate.wait_idle(limit).await {
            return false;
        }
        match &self.idempotency {
            Some(store) => tokio::time::timeout_at(deadline, store.settled())
                .await
                .is_ok(),
            None => true,
        }
    }

    /// Runs one call through every step, in the order oxp-notes §3.28 fixes.
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
    /// let request = serde_json::from_str(r#"{"tool_id": "Calculator.Add@1.0.0", "input": {"a": 1, "b": 2}}"#).unwrap();
    /// let CallOutcome::Completed(response) = pipeline.call(request).await else { panic!() };
    /// assert!(!response.call_id.is_empty());
    /// # });
    /// ```
    pub fn call(&self, request: CallToolRequest) -> impl Future<Output = CallOutcome> + Send + '_ {
        /// What a call arriving with nothing but its body is known as.
        static ANONYMOUS: CallMeta = CallMeta {
            principal: None,
            check_url_base: None,
            resolve_wire_names: false,
            signals: crate::signals::CallSignals::new(),
            front: Front::Oxp,
            traceparent: None,
        };
        self.call_with(request, &ANONYMOUS)
    }

    /// [`call`](Self::call), with what the front knows besides the body.
    ///
    /// ```
    /// use oxp_runtime::{tool, Registry};
    /// use oxp_runtime::call::{CallMeta, CallOutcome, Pipeline};
    ///
    /// /// Add two integers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
    /// // A LangChain client calls by wire name.
    /// let meta = CallMeta { resolve_wire_names: true, ..CallMeta::default() };
    /// let request = serde_json::from_str(r#"{"tool_id": "Calculator_Add", "input": {"a": 1, "b": 2}}"#).unwrap();
    /// assert_eq!(pipeline.call_with(request, &meta).await.status(), 200);
    /// # });
    /// ```
    pub fn call_with<'a>(
        &'a self,
        request: CallToolRequest,
        meta: &'a CallMeta,
    ) -> impl Future<Output = CallOutcome> + Send + 'a {
        let watch = self.metrics.as_ref().map(|m| m.begin(meta.front));
        // What the tool asked, counted when the call ends (only calls whose front can answer
        // asks carry a round).
        let asks = self.metrics.as_ref().zip(meta.signals.round());
        let Started {
            run,
            span,
            tool,
            outcome,
        } = self.start(request, meta);
        // A call whose span nobody listens to (a server logging at `warn`) is not timed for
        // the log: its end would not be logged.
        let logged = span
            .as_ref()
            .filter(|span| !span.is_disabled())
            .map(|_| Instant::now());
        run.instrument(span.clone().unwrap_or_else(tracing::Span::none))
            .map(move |answer| {
                if let Some((metrics, round)) = asks {
                    metrics.asks(&round.outcomes());
                }
                if watch.is_some() || logged.is_some() {
                    let outcome = outcome.unwrap_or_else(|| classify(&answer));
                    if let Some(watch) = watch {
                        watch.finish(tool, outcome);
                    }
                    if let (Some(span), Some(started)) = (span, logged) {
                        span.in_scope(|| finished(outcome, started));
                    }
                }
                answer
            })
    }

    /// The synchronous steps: admit → resolve → requirements → validate, up to the tool's run.
    ///
    /// Doing them here rather than in an `async fn` keeps the call's future small (an `async
    /// fn` keeps storage for its arguments and its locals), and every front moves that future
    /// into tasks and boxes, paying for its size per call.
    fn start<'a>(&'a self, mut request: CallToolRequest, meta: &'a CallMeta) -> Started<'a> {
        let refused = |reason: Refused, answer: CallOutcome| {
            if let Some(metrics) = &self.metrics {
                metrics.refused(reason);
            }
            Started::answered(answer, Outcome::Refused)
        };
        if let Some(refusal) = bad_ids(&request, meta.front) {
            // At debug, as every refusal a client can repeat at will.
            tracing::debug!(target: "oxp_runtime::call", reason = refusal.message, "call refused");
            return refused(Refused::InvalidIds, CallOutcome::Rejected(refusal));
        }
        let admission = match self.gate.admit() {
            Ok(admission) => admission,
            Err(Refusal::Full) => {
                let answer = CallOutcome::unavailable("the server is at its concurrency limit");
                return refused(Refused::ConcurrencyLimit, answer);
            }
            Err(Refusal::Draining) => {
                let answer = CallOutcome::unavailable("the server is shutting down");
                return refused(Refused::Draining, answer);
            }
        };
        // Only a client's own `call_id` is an idempotency key; a generated one is unique anyway.
        let client_call_id = request.call_id.take();
        let idempotency_key = client_call_id.clone().map(|call_id| {
            let user = request.context.as_ref().and_then(|c| c.user_id.clone());
            let principal = meta.principal.as_deref().unwrap_or("anonymous");
            IdempotencyKey::new(principal, user, call_id)
        });
        let call_id = client_call_id.unwrap_or_else(new_call_id);

        let tool = match self.resolve(&request.tool_id, meta) {
            Ok(tool) => tool,
            Err(error) => {
                tracing::debug!(
                    target: "oxp_runtime::call",
                    call_id = ?call_id, tool_id = ?request.tool_id, reason = ?error.to_string(), "call refused",
                );
                let answer = CallOutcome::Rejected(rejection(&request.tool_id, &error));
                return Started::answered(answer, Outcome::UnknownTool);
            }
        };
        let span = tracing::info_span!(
            target: "oxp_runtime::call",
            "oxp.call",
            call_id = ?call_id,
            trace_id = request.trace_id.as_deref().unwrap_or(""),
            tool = %tool.id(),
            outcome = tracing::field::Empty,
            answers = tracing::field::Empty,
        );
        // A call that may ask notes how many answers its round came with (none: its first
        // round; recording costs every call a formatting of its fields, so only when there are).
        if let Some(answers) = (meta.signals.round()).map(|round| round.answers())
            && answers > 0
        {
            span.record("answers", answers);
        }
        if let (Some(traceparent), Some(adopt)) = (&meta.traceparent, ADOPT_PARENT.get()) {
            adopt(&span, traceparent);
        }
        if let Some(why) = tool.hints().deprecated {
            span.in_scope(|| {
                tracing::warn!(
                    target: "oxp_runtime::call",
                    deprecated = why, "a deprecated tool was called",
                )
            });
        }
        let run =
            span.in_scope(|| self.run(tool, request, call_id, idempotency_key, meta, admission));
        Started {
            run,
            span: Some(span),
            tool: Some(self.registry.place_of(tool)),
            outcome: None,
        }
    }

    fn resolve(&self, tool_id: &str, meta: &CallMeta) -> Result<&RegisteredTool, ResolveError> {
        self.registry.resolve(tool_id).or_else(|error| {
            meta.resolve_wire_names
                .then(|| self.registry.resolve_wire_name(tool_id))
                .flatten()
                .ok_or(error)
        })
    }

    /// The steps after resolution: requirements → validate → the run (at most once per key).
    fn run<'a>(
        &'a self,
        tool: &'a RegisteredTool,
        request: CallToolRequest,
        call_id: String,
        idempotency_key: Option<IdempotencyKey>,
        meta: &'a CallMeta,
        admission: gate::Admission,
    ) -> Run<'a> {
        let context =
            match requirements::requirements(tool, request.context.unwrap_or_default(), call_id) {
                Ok(context) => context,
                Err(missing) => {
                    let refusal = self.missing(tool, missing, meta);
                    return Run::Boxed(refusal.map(CallOutcome::Rejected).boxed());
                }
            };
        let context = match request.trace_id {
            Some(trace_id) => context.with_trace_id(trace_id),
            None => context,
        }
        .with_signals(meta.signals.clone());

        let input = request
            .input
            .unwrap_or_else(|| Value::Object(Default::default()));
        if let Some(invalid) = validate::validate(tool, &input) {
            // A 422 quotes the input, which may carry a value of the context (a secret pasted
            // into the wrong field): scrubbed like a tool's errors.
            let invalid = invoke::Redactor::new(&context).invalid(invalid);
            return Run::Ready(Some(CallOutcome::Invalid(invalid)));
        }

        // What was asked, for telling a retry from another request under the same call_id.
        let once = self
            .idempotency
            .as_ref()
            .zip(idempotency_key)
            .map(|(store, key)| {
                let fingerprint = Fingerprint::of(tool.id(), &input, &context.requirement_ids());
                (store, key, fingerprint)
            });

        // `confirm = "…"`: the user says yes before the tool runs, or it does not run. A no
        // ends the call as a run would, kept under its `call_id` (a replayed round gets it, not
        // a run); a round still asking is retryable, so never kept.
        if let Some(template) = tool.descriptor().hints.confirm {
            let question = crate::ask::confirmation(template, &input);
            if let Err(no) = context.confirm_declared(&question) {
                let mut error = crate::error::ToolError::from(no.clone());
                if matches!(
                    no,
                    crate::ask::AskError::Declined | crate::ask::AskError::Cancelled
                ) {
                    error.message = format!(
                        "The user did not confirm \"{question}\", so the tool did not run."
                    );
                }
                let answer = CallOutcome::Completed(CallToolResponse {
                    call_id: context.call_id().to_owned(),
                    duration: None,
                    result: CallResult::Failure { error },
                });
                return match once {
                    Some((store, key, fingerprint)) => Run::Once {
                        answer: store.once_reporting(
                            key,
                            fingerprint,
                            futures_util::future::ready(answer).boxed(),
                        ),
                        metrics: self.metrics.as_ref(),
                    },
                    None => Run::Ready(Some(answer)),
                };
            }
        }

        let descriptor = tool.descriptor();
        let subject = invoke::Subject::Tool(descriptor);
        let execution =
            match self.execute(subject, descriptor.timeout_ms, context, input, admission) {
                Ok(execution) => execution,
                Err(why) => return Run::Ready(Some(CallOutcome::unavailable(why))),
            };
        // A call its front may cancel races its cancellation (only such calls pay for it).
        let run = match meta.signals.cancellation() {
            Some(cancellation) => Run::Boxed(cancellable(execution, cancellation).boxed()),
            None => Run::Direct(execution),
        };
        match once {
            Some((store, key, fingerprint)) => Run::Once {
                answer: store.once_reporting(key, fingerprint, run.boxed()),
                metrics: self.metrics.as_ref(),
            },
            None => run,
        }
    }
}

impl Pipeline {
    /// Makes the run of `subject` (a tool's, a resource's read, a prompt's get) within its time
    /// limit: `timeout_ms`, else the server's default. A sync fn with a time limit may wait for
    /// a blocking thread within it; one without must find a place now, or be refused (counted
    /// as a concurrency refusal, answered with the words returned): it may never wait without
    /// bound.
    fn execute(
        &self,
        subject: invoke::Subject,
        timeout_ms: Option<u64>,
        context: ToolContext,
        input: Value,
        admission: gate::Admission,
    ) -> Result<invoke::Execution, &'static str> {
        let timeout = timeout_ms
            .map(Duration::from_millis)
            .or(self.default_timeout);
        let taken = match (subject.invoke(), timeout) {
            (Invoke::Blocking(_), None) => match self.gate.blocking.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    if let Some(metrics) = &self.metrics {
                        metrics.refused(Refused::ConcurrencyLimit);
                    }
                    // The pool is the one `OXP_MAX_BLOCKING` sizes for sync tools; resources
                    // and prompts share it.
                    return Err("every blocking thread for sync tools is taken");
                }
            },
            _ => None,
        };
        Ok(invoke::execute(
            subject,
            context,
            input,
            invoke::Bounds {
                timeout,
                max_result_bytes: self.max_result_bytes,
            },
            admission,
            self.gate.clone(),
            taken,
        ))
    }
}

/// A call after its synchronous steps: what is left to await (which holds the call's place in
/// the gate), the tool's place in the registry, and — when it was admitted and resolved — its
/// span; `outcome` when the steps already know it (the answer alone does not tell an unknown
/// tool from another refusal).
struct Started<'a> {
    run: Run<'a>,
    span: Option<tracing::Span>,
    tool: Option<usize>,
    outcome: Option<Outcome>,
}

impl Started<'_> {
    fn answered(answer: CallOutcome, outcome: Outcome) -> Self {
        Started {
            run: Run::Ready(Some(answer)),
            span: None,
            tool: None,
            outcome: Some(outcome),
        }
    }
}

/// What is left of a call to await, by how it ends: answered already, the tool's run itself,
/// the run behind an idempotency store (which says how it answered), or another future.
enum Run<'a> {
    Ready(Option<CallOutcome>),
    Direct(invoke::Execution),
    Once {
        answer: BoxFuture<'a, (CallOutcome, Reuse)>,
        metrics: Option<&'a Metrics>,
    },
    Boxed(BoxFuture<'a, CallOutcome>),
}

impl Future for Run<'_> {
    type Output = CallOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CallOutcome> {
        match self.get_mut() {
            Run::Ready(answer) => Poll::Ready(answer.take().expect("a call is answered once")),
            Run::Direct(execution) => execution.poll_unpin(cx),
            Run::Once { answer, metrics } => answer.poll_unpin(cx).map(|(answer, reuse)| {
                if let Some(metrics) = metrics {
                    metrics.idempotency(reuse);
                }
                answer
            }),
            Run::Boxed(run) => run.poll_unpin(cx),
        }
    }
}

/// What came of a call, read off its answer: a failure is a timeout or a panic by its kind,
/// which only the pipeline sets (a tool's error with the same text is still the tool's). An
/// answer read back from an idempotency store has lost its kind, and counts as the tool's
/// (the store's own metric says it was replayed).
fn classify(answer: &CallOutcome) -> Outcome {
    match answer {
        CallOutcome::Completed(CallToolResponse {
            result: CallResult::Success { .. },
            ..
        }) => Outcome::Success,
        CallOutcome::Completed(CallToolResponse {
            result: CallResult::Failure { error },
            ..
        }) => match error.kind {
            crate::error::FailureKind::Timeout => Outcome::Timeout,
            crate::error::FailureKind::Panic => Outcome::Panic,
            crate::error::FailureKind::Tool => Outcome::ToolError,
        },
        CallOutcome::Rejected(refusal) if refusal.missing_requirements.is_some() => {
            Outcome::MissingRequirements
        }
        CallOutcome::Rejected(_) | CallOutcome::Unavailable { .. } => Outcome::Refused,
        CallOutcome::Invalid(_) => Outcome::InvalidInput,
    }
}

/// A `400` for ids no log line or echo should carry: over [`MAX_ID_BYTES`], or with control
/// characters (a CR/LF would forge a log line, an ESC drive the reader's terminal). The message
/// names the field, never its value.
fn bad_ids(request: &CallToolRequest, front: Front) -> Option<ServerErrorResponse> {
    // The MCP front alone names a call that asks by its state; a client's own `call_id` may
    // not, or it could read or take that call's record.
    let reserved = crate::seal::ASK_CALL_ID_PREFIX;
    if front != Front::Mcp
        && (request.call_id.as_deref()).is_some_and(|id| id.starts_with(reserved))
    {
        return Some(ServerErrorResponse {
            message: format!(
                "The `call_id` begins with `{reserved}`, which the server keeps for calls that ask."
            ),
            developer_message: Some(format!(
                "choose a `call_id` that does not begin with `{reserved}`"
            )),
            missing_requirements: None,
        });
    }
    let fields = [
        ("tool_id", Some(request.tool_id.as_str())),
        ("call_id", request.call_id.as_deref()),
        ("trace_id", request.trace_id.as_deref()),
    ];
    fields.into_iter().find_map(|(field, value)| {
        let value = value?;
        let problem = if value.len() > MAX_ID_BYTES {
            format!("is longer than {MAX_ID_BYTES} bytes")
        } else if value.chars().any(char::is_control) {
            "contains control characters".to_owned()
        } else {
            return None;
        };
        Some(ServerErrorResponse {
            message: format!("The `{field}` {problem}."),
            developer_message: Some(format!(
                "`{field}` must be at most {MAX_ID_BYTES} bytes of printable text"
            )),
            missing_requirements: None,
        })
    })
}

/// A fresh `call_id`: a v4 UUID, written without the formatting machinery of `to_string`.
fn new_call_id() -> String {
    crate::random::uuid_v4().hyphenated()
}

/// Logs a call's end in its span. What the server owes its operator — a tool that ran out of
/// time or panicked — at info, where operators look; the rest at debug: a successful call (a
/// log line per call costs more than the call), and what a client's request decided (invalid
/// input, missing requirements, the tool's own error), which a client can send without end and
/// `/metrics` counts by outcome anyway.
fn finished(outcome: Outcome, started: Instant) {
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::Span::current().record("outcome", outcome.as_str());
    if matches!(outcome, Outcome::Timeout | Outcome::Panic) {
        tracing::info!(
            target: "oxp_runtime::call",
            outcome = outcome.as_str(), duration_ms, "call finished",
        );
    } else {
        tracing::debug!(
            target: "oxp_runtime::call",
            outcome = outcome.as_str(), duration_ms, "call finished",
        );
    }
}

/// The `400` for a `tool_id` that names no tool: a message for the user naming the tool's wire
/// name, the detail for the developer.
fn rejection(tool_id: &str, error: &ResolveError) -> ServerErrorResponse {
    let message = match error {
        ResolveError::InvalidId { .. } => format!("Invalid tool id '{tool_id}'"),
        other => other.to_string(),
    };
    ServerErrorResponse {
        message,
        developer_message: Some(error.to_string()),
        missing_requirements: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Z.
    #[oxp_macros::tool(toolkit = "Z", crate = "crate")]
    async fn echo(a: i64) -> i64 {
        a
    }

    /// A call's future may be made outside the runtime and polled inside it: the time limit's
    /// timer is made on the first poll.
    #[test]
    fn a_call_made_outside_the_runtime_runs_inside_it() {
        let pipeline = Pipeline::new(Registry::builder().tool(echo::TOOL).build().unwrap())
            .default_timeout(Duration::from_secs(5));
        let request = CallToolRequest {
            tool_id: "Z.Echo".into(),
            input: Some(serde_json::json!({"a": 7})),
            ..Default::default()
        };
        let call = pipeline.call(request);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let CallOutcome::Completed(response) = runtime.block_on(call) else {
            panic!("the call ran")
        };
        assert_eq!(
            response.result,
            CallResult::Success {
                value: Some(7.into())
            }
        );
    }

    /// Z.
    #[oxp_macros::tool(toolkit = "Z", crate = "crate")]
    fn sync_echo(a: i64) -> i64 {
        a
    }

    /// A log.
    #[oxp_macros::resource(uri = "z://log", crate = "crate")]
    fn log() -> String {
        "log".into()
    }

    /// Without a time limit to wait within, a sync tool and a sync resource alike are refused
    /// at once, in the same words, when every blocking thread is taken.
    #[tokio::test]
    async fn a_sync_fn_without_a_time_limit_finds_a_blocking_thread_now_or_is_refused() {
        let registry = Registry::builder()
            .tool(sync_echo::TOOL)
            .resource(log::RESOURCE)
            .build()
            .unwrap();
        let pipeline = Pipeline::new(registry)
            .limits(None, 1)
            .default_timeout(Duration::ZERO);
        let held = pipeline.gate.blocking.clone().try_acquire_owned().unwrap();
        let request = CallToolRequest {
            tool_id: "Z.SyncEcho".into(),
            input: Some(serde_json::json!({"a": 7})),
            ..Default::default()
        };
        let CallOutcome::Unavailable { error, .. } = pipeline.call(request.clone()).await else {
            panic!("a sync tool waited for a thread without a time limit")
        };
        let words = "every blocking thread for sync tools is taken";
        assert_eq!(error.developer_message.as_deref(), Some(words));
        let read = pipeline
            .read_resource("z://log", &CallMeta::default())
            .await;
        assert!(
            matches!(&read, Err(ReadError::Unavailable(why)) if why == words),
            "{read:?}"
        );
        drop(held);
        assert!(matches!(
            pipeline.call(request).await,
            CallOutcome::Completed(_)
        ));
        assert!(
            pipeline
                .read_resource("z://log", &CallMeta::default())
                .await
                .is_ok()
        );
    }

    /// Every front moves a call's future into tasks and boxes, paying a copy of its whole size
    /// per call: it was 2.4 KB while the steps were one `async fn`, and is 224 bytes now.
    #[test]
    fn a_call_future_stays_small() {
        let pipeline = Pipeline::new(Registry::builder().tool(echo::TOOL).build().unwrap());
        let call = pipeline.call(CallToolRequest::default());
        let size = std::mem::size_of_val(&call);
        assert!(size <= 384, "a call's future takes {size} bytes");
    }
}
