//! What the pipeline and the fronts count, for `GET /metrics` (the server writes it in the
//! OpenMetrics text format Prometheus scrapes, reading these counters).
//!
//! The hot path never hashes a label set nor shares a cache line between cores: a call's series
//! is found by index — the tool's place in the registry, the front, the outcome — in a table
//! filled on first use, and every count is [`Striped`] by thread, so a call pays four atomic
//! adds on its own thread's lines and two clock reads. Scrapes add the stripes up. Labels are
//! bounded by the registry: tool ids, never inputs, users or call ids.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::ask::{AskOutcome, Capability};
use crate::idempotency::Reuse;
use crate::registry::Registry;
use crate::striped::{STRIPES, Striped, stripe};

/// Which front carried a call: the `front` label of the call metrics.
///
/// ```
/// use oxp_runtime::call::{CallMeta, Front};
/// // A front of your own that hands models' tool calls to the pipeline counts as `dispatch`.
/// let meta = CallMeta { front: Front::Dispatch, ..CallMeta::default() };
/// assert_eq!(meta.front.as_str(), "dispatch");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Front {
    /// `POST /tools/call` (and a direct [`Pipeline::call`](crate::call::Pipeline::call)).
    #[default]
    Oxp,
    /// MCP's `tools/call`, over streamable HTTP or stdio.
    Mcp,
    /// A model's tool call run by a provider adapter's dispatcher.
    Dispatch,
}

impl Front {
    #[doc(hidden)]
    pub const ALL: [Front; 3] = [Front::Oxp, Front::Mcp, Front::Dispatch];

    /// The label value.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::call::Front::Mcp.as_str(), "mcp");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Front::Oxp => "oxp",
            Front::Mcp => "mcp",
            Front::Dispatch => "dispatch",
        }
    }
}

/// What came of a call, as the `outcome` label and the "call finished" log line name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    ToolError,
    Timeout,
    Panic,
    InvalidInput,
    MissingRequirements,
    UnknownTool,
    Refused,
}

impl Outcome {
    const COUNT: usize = 8;
    /// Every outcome, in label order.
    pub const ALL: [Outcome; Outcome::COUNT] = [
        Outcome::Success,
        Outcome::ToolError,
        Outcome::Timeout,
        Outcome::Panic,
        Outcome::InvalidInput,
        Outcome::MissingRequirements,
        Outcome::UnknownTool,
        Outcome::Refused,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::ToolError => "tool_error",
            Outcome::Timeout => "timeout",
            Outcome::Panic => "panic",
            Outcome::InvalidInput => "invalid_input",
            Outcome::MissingRequirements => "missing_requirements",
            Outcome::UnknownTool => "unknown_tool",
            Outcome::Refused => "refused",
        }
    }
}

/// Why a request or a call was turned away: the `reason` label of `oxp_refusals_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The concurrency limit, or every blocking thread for sync tools taken.
    ConcurrencyLimit,
    Draining,
    /// No or a bad token (`401`).
    Auth,
    /// A body over the limit, or over its connection's budget (`413`).
    BodySize,
    /// A browser's `Origin` or `Host` that is not allowed (`403`).
    Origin,
    /// A `call_id`, `trace_id` or `tool_id` too long or with control characters.
    InvalidIds,
    /// A `call_id` sent again with another request.
    ReusedCallId,
    /// An OAuth access token that is not valid (`401 invalid_token`; other 401s are `auth`).
    InvalidToken,
    /// A caller whose token lacks a scope the request needs (`403 insufficient_scope`).
    InsufficientScope,
    /// A token that could not be checked: the identity provider's keys could not be had (`503`).
    KeysUnavailable,
    /// A client held back for sending too many forged tokens (`429`), its token not looked at.
    InvalidTokensHeldBack,
    /// An opaque token not introspected: too many introspections under way (`429`, `503`).
    IntrospectionsBusy,
    /// A call naming a user other than its token's subject (`403`).
    ForeignUser,
}

impl Refusal {
    /// Every reason, in label order.
    pub const ALL: [Refusal; 13] = [
        Refusal::ConcurrencyLimit,
        Refusal::Draining,
        Refusal::Auth,
        Refusal::BodySize,
        Refusal::Origin,
        Refusal::InvalidIds,
        Refusal::ReusedCallId,
        Refusal::InvalidToken,
        Refusal::InsufficientScope,
        Refusal::KeysUnavailable,
        Refusal::InvalidTokensHeldBack,
        Refusal::IntrospectionsBusy,
        Refusal::ForeignUser,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::ConcurrencyLimit => "concurrency_limit",
            Refusal::Draining => "draining",
            Refusal::Auth => "auth",
            Refusal::BodySize => "body_size",
            Refusal::Origin => "origin",
            Refusal::InvalidIds => "invalid_ids",
            Refusal::ReusedCallId => "reused_call_id",
            Refusal::InvalidToken => "invalid_token",
            Refusal::InsufficientScope => "insufficient_scope",
            Refusal::KeysUnavailable => "jwks_unavailable",
            Refusal::InvalidTokensHeldBack => "invalid_tokens_held_back",
            Refusal::IntrospectionsBusy => "introspections_busy",
            Refusal::ForeignUser => "foreign_user",
        }
    }
}

/// The bucket bounds in microseconds, from 100 µs to 60 s (the default time limit): roughly
/// ×2.5 a step, so that a fast tool's p99 and a slow one's both fall between two bounds that
/// tell them apart.
pub const BUCKET_MICROS: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 10_000_000, 60_000_000,
];

/// [`BUCKET_MICROS`] in nanoseconds, for the hot path's comparisons.
const BUCKET_NANOS: [u64; 16] = {
    let mut nanos = [0; 16];
    let mut i = 0;
    while i < 16 {
        nanos[i] = BUCKET_MICROS[i] * 1_000;
        i += 1;
    }
    nanos
};

/// [`BUCKET_MICROS`] in seconds, as the histogram is written.
pub const DURATION_BUCKETS: [f64; 16] = {
    let mut seconds = [0.0; 16];
    let mut i = 0;
    while i < 16 {
        seconds[i] = BUCKET_MICROS[i] as f64 / 1e6;
        i += 1;
    }
    seconds
};

/// The `tool` label of calls refused before their tool was resolved (invalid ids, the
/// concurrency limit, draining) or naming no tool of the registry. Tool ids always hold a `.`,
/// so it is no tool's.
pub const NO_TOOL: &str = "none";

/// One series' durations, spread over stripes: per stripe, a count per bucket (the last one
/// past 60 s) and the sum in nanoseconds. The series' count is its buckets' sum, so that
/// `oxp_calls_total` and the histogram are read from the same numbers and always agree.
#[derive(Default)]
pub struct Timings([TimingLine; STRIPES]);

#[derive(Default)]
#[repr(align(128))]
pub struct TimingLine {
    buckets: [AtomicU64; BUCKET_NANOS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Timings {
    fn observe(&self, nanos: u64) {
        let line = &self.0[stripe()];
        let bucket = BUCKET_NANOS.partition_point(|&bound| bound < nanos);
        line.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        line.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The count, the sum in seconds, and each bucket's own count (as the encoder wants them).
    pub fn read(&self) -> Reading {
        let mut counts = [0u64; BUCKET_NANOS.len() + 1];
        let mut sum = 0u64;
        for line in &self.0 {
            for (count, bucket) in counts.iter_mut().zip(&line.buckets) {
                *count += bucket.load(Ordering::Relaxed);
            }
            sum = sum.wrapping_add(line.sum_nanos.load(Ordering::Relaxed));
        }
        let bounds = DURATION_BUCKETS.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds.zip(counts).collect();
        Reading {
            count: counts.iter().sum(),
            seconds: sum as f64 / 1e9,
            buckets,
        }
    }
}

/// A series as one scrape read it.
pub struct Reading {
    /// The calls.
    pub count: u64,
    /// Their durations' sum.
    pub seconds: f64,
    /// Each bucket's upper bound and own count.
    pub buckets: Vec<(f64, u64)>,
}

/// Everything counted per call, by index.
pub struct Table {
    /// Tool ids by place, for the labels.
    pub tools: Box<[String]>,
    /// `[tool place + 1][front][outcome]`, flattened; place 0 is [`NO_TOOL`].
    pub series: Box<[OnceLock<Box<Timings>>]>,
    pub in_flight: [Striped; Front::ALL.len()],
    pub refusals: [Striped; Refusal::ALL.len()],
    pub idempotency: [Striped; Reuse::ALL.len()],
    /// `[capability][outcome]`, flattened.
    pub asks: [Striped; Capability::ALL.len() * AskOutcome::ALL.len()],
    /// Request states refused: `[invalid, expired]`.
    pub refused_states: [Striped; 3],
    /// Calls of tools that ask by callers that cannot answer, by what they got.
    pub fallbacks: [Striped; 4],
    /// Fetches of an identity provider's key set: `[ok, error]`.
    pub key_set_fetches: [Striped; 2],
    /// Introspections of opaque tokens, by the OAuth front's `Introspected` order.
    pub introspections: [Striped; INTROSPECTIONS],
    /// Tasks that came to each status, by [`TASK_STATUSES`]' order.
    pub tasks: [Striped; TASK_STATUSES.len()],
    /// Task runs stopped because their lease was lost.
    pub leases_lost: Striped,
}

/// The results an introspection of an opaque token can have (the OAuth front's `Introspected`).
pub const INTROSPECTIONS: usize = 5;

/// The statuses of MCP tasks, the `status` label of `oxp_tasks_total`.
pub const TASK_STATUSES: [&str; 5] = [
    "working",
    "input_required",
    "completed",
    "failed",
    "cancelled",
];

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl Table {
    fn index(tool: Option<usize>, front: Front, outcome: Outcome) -> usize {
        let place = tool.map_or(0, |i| i + 1);
        (place * Front::ALL.len() + front as usize) * Outcome::COUNT + outcome as usize
    }

    /// The labels of the series at `index`.
    pub fn labels(&self, index: usize) -> [(&'static str, &str); 3] {
        let outcome = Outcome::ALL[index % Outcome::COUNT];
        let front = Front::ALL[index / Outcome::COUNT % Front::ALL.len()];
        let place = index / Outcome::COUNT / Front::ALL.len();
        let tool = match place {
            0 => NO_TOOL,
            place => &self.tools[place - 1],
        };
        [
            ("front", front.as_str()),
            ("tool", tool),
            ("outcome", outcome.as_str()),
        ]
    }
}

/// What a caller that cannot answer got of a tool that asks: the `oxp_ask_fallbacks_total`
/// label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    Refused = 0,
    Hidden = 1,
    Relayed = 2,
    Link = 3,
}

impl Fallback {
    /// Every fallback, in label order.
    pub const ALL: [Fallback; 4] = [
        Fallback::Refused,
        Fallback::Hidden,
        Fallback::Relayed,
        Fallback::Link,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Fallback::Refused => "refused",
            Fallback::Hidden => "hidden",
            Fallback::Relayed => "relayed",
            Fallback::Link => "link",
        }
    }
}

/// The metrics of one pipeline and the fronts over it. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    /// Resource reads (`false`) and prompt gets (`true`), by the registered name (a resource's
    /// URI or template, a prompt's name) and outcome. Reads are rare beside calls: a lock is
    /// cheap enough.
    reads: Mutex<BTreeMap<(bool, &'static str, &'static str), u64>>,
    table: Arc<Table>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("table", &self.inner.table)
            .finish_non_exhaustive()
    }
}

/// What the pipeline knows only when scraped.
pub struct Levels {
    /// Sync tools occupying a blocking thread.
    pub blocking_in_use: u64,
    /// What the idempotency store keeps, when it says.
    pub store: Option<crate::idempotency::StoreSize>,
}

impl Metrics {
    #[doc(hidden)]
    pub fn new(registry: &Registry) -> Self {
        let tools: Box<[String]> = registry.tools().iter().map(|t| t.id().to_owned()).collect();
        let series = (0..(tools.len() + 1) * Front::ALL.len() * Outcome::COUNT)
            .map(|_| OnceLock::new())
            .collect();
        let table = Arc::new(Table {
            tools,
            series,
            in_flight: Default::default(),
            refusals: Default::default(),
            idempotency: Default::default(),
            asks: Default::default(),
            refused_states: Default::default(),
            fallbacks: Default::default(),
            key_set_fetches: Default::default(),
            introspections: Default::default(),
            tasks: Default::default(),
            leases_lost: Striped::default(),
        });
        Metrics {
            inner: Arc::new(Inner {
                reads: Mutex::default(),
                table,
            }),
        }
    }

    /// The counts of every call series, refusal, ask, fallback and task, for the encoder.
    pub fn table(&self) -> &Table {
        &self.inner.table
    }

    /// Resource reads (`prompt` false) or prompt gets so far: the registered name, the outcome,
    /// and the count.
    pub fn reads(&self, prompt: bool) -> Vec<(&'static str, &'static str, u64)> {
        let reads = self.inner.reads.lock().unwrap_or_else(|e| e.into_inner());
        (reads.iter())
            .filter(|((p, _, _), _)| *p == prompt)
            .map(|(&(_, name, outcome), &count)| (name, outcome, count))
            .collect()
    }

    /// A call has begun on `front`: counted in flight until the returned watch is finished or
    /// dropped (a client that hangs up).
    pub fn begin(&self, front: Front) -> Watch<'_> {
        let table = &*self.inner.table;
        table.in_flight[front as usize].add(1);
        Watch {
            table,
            front,
            started: Instant::now(),
        }
    }

    /// A resource read (`prompt` false) or a prompt get, of the registered `name`, ended.
    pub fn read(&self, prompt: bool, name: &'static str, outcome: Outcome) {
        let mut reads = self.inner.reads.lock().unwrap_or_else(|e| e.into_inner());
        *reads.entry((prompt, name, outcome.as_str())).or_default() += 1;
    }

    pub fn refused(&self, reason: Refusal) {
        self.inner.table.refusals[reason as usize].add(1);
    }

    pub fn idempotency(&self, reuse: Reuse) {
        self.inner.table.idempotency[reuse as usize].add(1);
        if reuse == Reuse::Conflict {
            self.refused(Refusal::ReusedCallId);
        }
    }

    /// What a round's asks came to.
    pub fn asks(&self, outcomes: &[(Capability, AskOutcome)]) {
        for &(kind, outcome) in outcomes {
            let k = Capability::ALL.iter().position(|c| *c == kind).unwrap_or(0);
            let o = AskOutcome::ALL
                .iter()
                .position(|x| *x == outcome)
                .unwrap_or(0);
            self.inner.table.asks[k * AskOutcome::ALL.len() + o].add(1);
        }
    }

    /// A fetch of an identity provider's key set, and whether it brought usable keys.
    pub fn key_set_fetched(&self, ok: bool) {
        self.inner.table.key_set_fetches[usize::from(!ok)].add(1);
    }

    /// An introspection of an opaque token, and what came of it (its place among
    /// [`INTROSPECTIONS`]).
    pub fn introspected(&self, result: usize) {
        self.inner.table.introspections[result].add(1);
    }

    /// A task that came to `status` (one of `TASK_STATUSES`).
    pub fn task(&self, status: &str) {
        if let Some(at) = TASK_STATUSES.iter().position(|s| *s == status) {
            self.inner.table.tasks[at].add(1);
        }
    }

    /// A task run stopped because its lease was lost.
    pub fn lease_lost(&self) {
        self.inner.table.leases_lost.add(1);
    }

    /// A call of a tool that asks, by a caller that cannot answer, and what it got.
    pub fn fallback(&self, fallback: Fallback) {
        self.inner.table.fallbacks[fallback as usize].add(1);
    }

    /// A request state refused, for the reason its label names.
    pub fn refused_state(&self, bad: crate::seal::BadState) {
        self.inner.table.refused_states[bad.reason_index()].add(1);
    }
}

/// A call in flight, timed from its start.
pub struct Watch<'a> {
    table: &'a Table,
    front: Front,
    started: Instant,
}

impl Watch<'_> {
    /// The call was answered with `outcome`, for the tool at `tool` in the registry.
    pub fn finish(self, tool: Option<usize>, outcome: Outcome) {
        let nanos = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.table.series[Table::index(tool, self.front, outcome)]
            .get_or_init(Box::default)
            .observe(nanos);
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        self.table.in_flight[self.front as usize].add(u64::MAX); // −1, wrapping
    }
}
