//! What the pipeline and the fronts count, for `GET /metrics` in the OpenMetrics text format
//! (what Prometheus scrapes), with the Prometheus project's own client crate.
//!
//! The hot path never hashes a label set nor shares a cache line between cores: a call's series
//! is found by index — the tool's place in the registry, the front, the outcome — in a table
//! filled on first use, and every count is [`Striped`] by thread, so a call pays four atomic
//! adds on its own thread's lines and two clock reads. Scrapes add the stripes up. Labels are
//! bounded by the registry: tool ids, never inputs, users or call ids.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry as Families;

use crate::ask::{AskOutcome, Capability};
use crate::idempotency::Reuse;
use crate::registry::Registry;
use crate::striped::{STRIPES, Striped, stripe};

/// The content type `GET /metrics` answers with.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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
    const ALL: [Front; 3] = [Front::Oxp, Front::Mcp, Front::Dispatch];

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
pub(crate) enum Outcome {
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
    const ALL: [Outcome; Outcome::COUNT] = [
        Outcome::Success,
        Outcome::ToolError,
        Outcome::Timeout,
        Outcome::Panic,
        Outcome::InvalidInput,
        Outcome::MissingRequirements,
        Outcome::UnknownTool,
        Outcome::Refused,
    ];

    pub(crate) fn as_str(self) -> &'static str {
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
pub(crate) enum Refusal {
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
    const ALL: [Refusal; 13] = [
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

    fn as_str(self) -> &'static str {
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
const BUCKET_MICROS: [u64; 16] = [
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
const DURATION_BUCKETS: [f64; 16] = {
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
const NO_TOOL: &str = "none";

/// One series' durations, spread over stripes: per stripe, a count per bucket (the last one
/// past 60 s) and the sum in nanoseconds. The series' count is its buckets' sum, so that
/// `oxp_calls_total` and the histogram are read from the same numbers and always agree.
#[derive(Default)]
struct Timings([TimingLine; STRIPES]);

#[derive(Default)]
#[repr(align(128))]
struct TimingLine {
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
    fn read(&self) -> Reading {
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
struct Reading {
    count: u64,
    seconds: f64,
    buckets: Vec<(f64, u64)>,
}

/// Everything counted per call, by index.
struct Table {
    /// Tool ids by place, for the labels.
    tools: Box<[String]>,
    /// `[tool place + 1][front][outcome]`, flattened; place 0 is [`NO_TOOL`].
    series: Box<[OnceLock<Box<Timings>>]>,
    in_flight: [Striped; Front::ALL.len()],
    refusals: [Striped; Refusal::ALL.len()],
    idempotency: [Striped; Reuse::ALL.len()],
    /// `[capability][outcome]`, flattened.
    asks: [Striped; Capability::ALL.len() * AskOutcome::ALL.len()],
    /// Request states refused: `[invalid, expired]`.
    refused_states: [Striped; 3],
    /// Calls of tools that ask by callers that cannot answer, by what they got.
    fallbacks: [Striped; 4],
    /// Fetches of an identity provider's key set: `[ok, error]`.
    key_set_fetches: [Striped; 2],
    /// Introspections of opaque tokens, by `oauth::Introspected`'s order.
    #[cfg(feature = "oauth")]
    introspections: [Striped; crate::oauth::Introspected::ALL.len()],
    /// Tasks that came to each status, by [`TASK_STATUSES`]' order.
    tasks: [Striped; TASK_STATUSES.len()],
    /// Task runs stopped because their lease was lost.
    leases_lost: Striped,
}

/// The statuses of MCP tasks, the `status` label of `oxp_tasks_total`.
const TASK_STATUSES: [&str; 5] = [
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
    fn labels(&self, index: usize) -> [(&'static str, &str); 3] {
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

impl Collector for Table {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let used: Vec<(usize, Reading)> = self
            .series
            .iter()
            .enumerate()
            .filter_map(|(i, series)| Some((i, series.get()?.read())))
            .collect();
        let mut calls = encoder.encode_descriptor(
            "oxp_calls",
            "Calls answered, by front, tool and outcome",
            None,
            MetricType::Counter,
        )?;
        for (i, reading) in &used {
            let labels = self.labels(*i);
            calls
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&reading.count, None)?;
        }
        let mut durations = encoder.encode_descriptor(
            "oxp_call_duration_seconds",
            "How long calls took to answer, by front, tool and outcome",
            None,
            MetricType::Histogram,
        )?;
        for (i, reading) in &used {
            let labels = self.labels(*i);
            durations
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(
                    reading.seconds,
                    reading.count,
                    &reading.buckets,
                    None,
                )?;
        }
        let mut in_flight = encoder.encode_descriptor(
            "oxp_calls_in_flight",
            "Calls being answered, by front",
            None,
            MetricType::Gauge,
        )?;
        for front in Front::ALL {
            let now = self.in_flight[front as usize].sum() as i64;
            in_flight
                .encode_family(&[("front", front.as_str())])?
                .encode_gauge(&now)?;
        }
        counters(
            &mut encoder,
            ("oxp_refusals", "Requests and calls turned away, by reason"),
            "reason",
            Refusal::ALL.map(|reason| (reason.as_str(), &self.refusals[reason as usize])),
        )?;
        counters(
            &mut encoder,
            (
                "oxp_idempotency",
                "Calls with a call_id, by how the idempotency store answered them",
            ),
            "result",
            Reuse::ALL.map(|reuse| (reuse.as_str(), &self.idempotency[reuse as usize])),
        )?;
        let mut asks = encoder.encode_descriptor(
            "oxp_asks",
            "What tools asked mid-call, by kind, and what came of it",
            None,
            MetricType::Counter,
        )?;
        for (k, kind) in Capability::ALL.iter().enumerate() {
            for (o, outcome) in AskOutcome::ALL.iter().enumerate() {
                let count = self.asks[k * AskOutcome::ALL.len() + o].sum();
                asks.encode_family(&[("kind", kind.name()), ("outcome", outcome.as_str())])?
                    .encode_counter::<NoLabelSet, _, u64>(&count, None)?;
            }
        }
        counters(
            &mut encoder,
            (
                "oxp_request_states_refused",
                "Request states of calls that ask, refused: altered or not this call's, sealed \
                 with another key (replicas without a shared key), or expired",
            ),
            "reason",
            std::array::from_fn::<_, 3, _>(|at| {
                (crate::seal::BadState::REASONS[at], &self.refused_states[at])
            }),
        )?;
        counters(
            &mut encoder,
            (
                "oxp_ask_fallbacks",
                "Calls of tools that ask, by callers that cannot answer, by what they got: \
                 refused, hidden (refused, not listed), relayed (the question through the model), \
                 link (a URL ask as a link in the result)",
            ),
            "fallback",
            std::array::from_fn::<_, 4, _>(|at| (Fallback::ALL[at].label(), &self.fallbacks[at])),
        )?;
        counters(
            &mut encoder,
            (
                "oxp_oauth_key_set_fetches",
                "Fetches of an identity provider's key set (JWKS), by result",
            ),
            "result",
            [
                ("ok", &self.key_set_fetches[0]),
                ("error", &self.key_set_fetches[1]),
            ],
        )?;
        #[cfg(feature = "oauth")]
        counters(
            &mut encoder,
            (
                "oxp_oauth_introspections",
                "Introspections of opaque tokens at the identity provider, by result: active, \
                 inactive, refused (active, but its answer failed a check), error (the endpoint \
                 failed), busy (not asked: too many under way)",
            ),
            "result",
            std::array::from_fn::<_, { crate::oauth::Introspected::ALL.len() }, _>(|at| {
                (
                    crate::oauth::Introspected::ALL[at].label(),
                    &self.introspections[at],
                )
            }),
        )?;
        counters(
            &mut encoder,
            (
                "oxp_tasks",
                "MCP tasks that came to a status in this process: working (made, or resumed by \
                 answers), input_required, completed, failed (a panic, a lapsed lease, a stop), \
                 cancelled",
            ),
            "status",
            std::array::from_fn::<_, 5, _>(|at| (TASK_STATUSES[at], &self.tasks[at])),
        )?;
        let lost = self.leases_lost.sum();
        encoder
            .encode_descriptor(
                "oxp_leases_lost",
                "Task runs stopped because another process took over their task (their lease \
                 lapsed while they ran)",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, _, u64>(&lost, None)
    }
}

/// What a caller that cannot answer got of a tool that asks: the `oxp_ask_fallbacks_total`
/// label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fallback {
    Refused = 0,
    Hidden = 1,
    Relayed = 2,
    Link = 3,
}

impl Fallback {
    const ALL: [Fallback; 4] = [
        Fallback::Refused,
        Fallback::Hidden,
        Fallback::Relayed,
        Fallback::Link,
    ];

    fn label(self) -> &'static str {
        match self {
            Fallback::Refused => "refused",
            Fallback::Hidden => "hidden",
            Fallback::Relayed => "relayed",
            Fallback::Link => "link",
        }
    }
}

/// A counter family with one label, a series per value.
fn counters<const N: usize>(
    encoder: &mut DescriptorEncoder,
    (name, help): (&str, &str),
    label: &str,
    series: [(&str, &Striped); N],
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (value, count) in series {
        family
            .encode_family(&[(label, value)])?
            .encode_counter::<NoLabelSet, _, u64>(&count.sum(), None)?;
    }
    Ok(())
}

/// The metrics of one pipeline and the fronts over it. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    families: Families,
    /// Resource reads by resource (its registered URI or template) and outcome.
    resource_reads: Family<Vec<(&'static str, String)>, Counter>,
    /// Prompt gets by prompt name and outcome.
    prompt_gets: Family<Vec<(&'static str, String)>, Counter>,
    table: Arc<Table>,
    blocking_in_use: Gauge,
    store_entries: Gauge,
    store_bytes: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("table", &self.inner.table)
            .finish_non_exhaustive()
    }
}

/// What the pipeline knows only when scraped.
pub(crate) struct Levels {
    pub(crate) blocking_in_use: u64,
    pub(crate) store: Option<crate::idempotency::StoreSize>,
}

impl Metrics {
    pub(crate) fn new(registry: &Registry) -> Self {
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
            #[cfg(feature = "oauth")]
            introspections: Default::default(),
            tasks: Default::default(),
            leases_lost: Striped::default(),
        });
        let mut families = Families::default();
        families.register_collector(Box::new(table.clone()));
        let blocking_in_use = Gauge::default();
        families.register(
            "oxp_blocking_tools_in_use",
            "Sync tools occupying a blocking thread",
            blocking_in_use.clone(),
        );
        let store_entries = Gauge::default();
        families.register(
            "oxp_idempotency_store_entries",
            "Answers, runs in flight and task records the in-memory idempotency store keeps",
            store_entries.clone(),
        );
        let store_bytes = Gauge::default();
        families.register(
            "oxp_idempotency_store_bytes",
            "Bytes of answers and task records the in-memory idempotency store keeps, as JSON",
            store_bytes.clone(),
        );
        families.register(
            "oxp_build",
            "The oxp runtime serving",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        // Labelled by what the registry registered (URI templates, prompt names), never by the
        // URI read or an argument: as bounded as the tool labels.
        let resource_reads = Family::default();
        families.register(
            "oxp_resource_reads",
            "Resource reads, by resource (its URI or URI template) and outcome",
            resource_reads.clone(),
        );
        let prompt_gets = Family::default();
        families.register(
            "oxp_prompt_gets",
            "Prompt gets, by prompt and outcome",
            prompt_gets.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                families,
                resource_reads,
                prompt_gets,
                table,
                blocking_in_use,
                store_entries,
                store_bytes,
            }),
        }
    }

    /// A call has begun on `front`: counted in flight until the returned watch is finished or
    /// dropped (a client that hangs up).
    pub(crate) fn begin(&self, front: Front) -> Watch<'_> {
        let table = &*self.inner.table;
        table.in_flight[front as usize].add(1);
        Watch {
            table,
            front,
            started: Instant::now(),
        }
    }

    /// A resource read (`prompt` false) or a prompt get, of the registered `name`, ended.
    pub(crate) fn read(&self, prompt: bool, name: &'static str, outcome: Outcome) {
        let (family, label) = if prompt {
            (&self.inner.prompt_gets, "prompt")
        } else {
            (&self.inner.resource_reads, "resource")
        };
        family
            .get_or_create(&vec![
                (label, name.to_owned()),
                ("outcome", outcome.as_str().to_owned()),
            ])
            .inc();
    }

    pub(crate) fn refused(&self, reason: Refusal) {
        self.inner.table.refusals[reason as usize].add(1);
    }

    pub(crate) fn idempotency(&self, reuse: Reuse) {
        self.inner.table.idempotency[reuse as usize].add(1);
        if reuse == Reuse::Conflict {
            self.refused(Refusal::ReusedCallId);
        }
    }

    /// What a round's asks came to.
    pub(crate) fn asks(&self, outcomes: &[(Capability, AskOutcome)]) {
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
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) fn key_set_fetched(&self, ok: bool) {
        self.inner.table.key_set_fetches[usize::from(!ok)].add(1);
    }

    /// An introspection of an opaque token, and what came of it.
    #[cfg(feature = "oauth")]
    pub(crate) fn introspected(&self, result: crate::oauth::Introspected) {
        self.inner.table.introspections[result as usize].add(1);
    }

    /// A task that came to `status` (one of `TASK_STATUSES`).
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub(crate) fn task(&self, status: &str) {
        if let Some(at) = TASK_STATUSES.iter().position(|s| *s == status) {
            self.inner.table.tasks[at].add(1);
        }
    }

    /// A task run stopped because its lease was lost.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub(crate) fn lease_lost(&self) {
        self.inner.table.leases_lost.add(1);
    }

    /// A call of a tool that asks, by a caller that cannot answer, and what it got.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub(crate) fn fallback(&self, fallback: Fallback) {
        self.inner.table.fallbacks[fallback as usize].add(1);
    }

    /// A request state refused, for the reason its label names.
    pub(crate) fn refused_state(&self, bad: crate::seal::BadState) {
        self.inner.table.refused_states[bad.reason_index()].add(1);
    }

    /// The text `GET /metrics` answers with.
    pub(crate) fn render(&self, levels: Levels) -> String {
        let inner = &*self.inner;
        let level = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        inner.blocking_in_use.set(level(levels.blocking_in_use));
        let (entries, bytes) = levels.store.map_or((0, 0), |s| (s.entries, s.bytes));
        inner.store_entries.set(level(entries));
        inner.store_bytes.set(level(bytes));
        let mut text = String::with_capacity(4096);
        prometheus_client::encoding::text::encode(&mut text, &inner.families)
            .expect("writing to a String cannot fail");
        text
    }
}

/// A call in flight, timed from its start.
pub(crate) struct Watch<'a> {
    table: &'a Table,
    front: Front,
    started: Instant,
}

impl Watch<'_> {
    /// The call was answered with `outcome`, for the tool at `tool` in the registry.
    pub(crate) fn finish(self, tool: Option<usize>, outcome: Outcome) {
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
