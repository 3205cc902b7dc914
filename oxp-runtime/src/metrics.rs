//! What the pipeline and the fronts count, for `GET /metrics` in the OpenMetrics text format
//! (what Prometheus scrapes), with the Prometheus project's own client crate.
//!
//! The hot path never hashes a label set: a call's counter and histogram are found by index —
//! the tool's place in the registry, the front, the outcome — in a table filled on first use,
//! so a call pays two atomic adds, one uncontended lock (the histogram's) and two clock reads.
//! Labels are bounded by the registry: tool ids, never inputs, users or call ids.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry as Families;

use crate::idempotency::Reuse;
use crate::registry::Registry;

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
}

impl Refusal {
    const ALL: [Refusal; 7] = [
        Refusal::ConcurrencyLimit,
        Refusal::Draining,
        Refusal::Auth,
        Refusal::BodySize,
        Refusal::Origin,
        Refusal::InvalidIds,
        Refusal::ReusedCallId,
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
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    front: &'static str,
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FrontLabel {
    front: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// Seconds, from 100 µs to 60 s (the default time limit): roughly ×2.5 a step, so that a fast
/// tool's p99 and a slow one's both fall between two bounds that tell them apart.
const DURATION_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0, 60.0,
];

/// The `tool` label of calls that named no tool of the registry (or were refused before it
/// was looked up). Tool ids always hold a `.`, so it is no tool's.
const NO_TOOL: &str = "none";

/// A call's counter and histogram, found by index.
type Series = (Counter, Histogram);

/// The metrics of one pipeline and the fronts over it. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    families: Families,
    calls: Family<CallLabels, Counter>,
    durations: Family<CallLabels, Histogram>,
    /// Tool ids by place, for the labels of series made on first use.
    tools: Box<[String]>,
    /// `[tool place + 1][front][outcome]`, flattened; place 0 is [`NO_TOOL`].
    series: Box<[OnceLock<Series>]>,
    in_flight: [Gauge; 3],
    refusals: [Counter; Refusal::ALL.len()],
    idempotency: [Counter; Reuse::ALL.len()],
    blocking_in_use: Gauge,
    store_entries: Gauge,
    store_bytes: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("tools", &self.inner.tools.len())
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
        let mut families = Families::default();
        let calls = Family::<CallLabels, Counter>::default();
        families.register(
            "oxp_calls",
            "Calls answered, by front, tool and outcome",
            calls.clone(),
        );
        let durations = Family::<CallLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(DURATION_BUCKETS)) as fn() -> Histogram,
        );
        families.register(
            "oxp_call_duration_seconds",
            "How long calls took to answer, by front, tool and outcome",
            durations.clone(),
        );
        let in_flight = Family::<FrontLabel, Gauge>::default();
        families.register(
            "oxp_calls_in_flight",
            "Calls being answered, by front",
            in_flight.clone(),
        );
        let in_flight = Front::ALL.map(|front| {
            in_flight
                .get_or_create(&FrontLabel {
                    front: front.as_str(),
                })
                .clone()
        });
        let refusals = Family::<ReasonLabel, Counter>::default();
        families.register(
            "oxp_refusals",
            "Requests and calls turned away, by reason",
            refusals.clone(),
        );
        let refusals = Refusal::ALL.map(|reason| {
            refusals
                .get_or_create(&ReasonLabel {
                    reason: reason.as_str(),
                })
                .clone()
        });
        let idempotency = Family::<ResultLabel, Counter>::default();
        families.register(
            "oxp_idempotency",
            "Calls with a call_id, by how the idempotency store answered them",
            idempotency.clone(),
        );
        let idempotency = Reuse::ALL.map(|reuse| {
            idempotency
                .get_or_create(&ResultLabel {
                    result: reuse.as_str(),
                })
                .clone()
        });
        let blocking_in_use = Gauge::default();
        families.register(
            "oxp_blocking_tools_in_use",
            "Sync tools occupying a blocking thread",
            blocking_in_use.clone(),
        );
        let store_entries = Gauge::default();
        families.register(
            "oxp_idempotency_store_entries",
            "Answers (and runs in flight) the in-memory idempotency store keeps",
            store_entries.clone(),
        );
        let store_bytes = Gauge::default();
        families.register(
            "oxp_idempotency_store_bytes",
            "Bytes of answers the in-memory idempotency store keeps, as JSON",
            store_bytes.clone(),
        );
        families.register(
            "oxp_build",
            "The oxp runtime serving",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        let tools: Box<[String]> = registry.tools().iter().map(|t| t.id().to_owned()).collect();
        let series = (0..(tools.len() + 1) * Front::ALL.len() * Outcome::COUNT)
            .map(|_| OnceLock::new())
            .collect();
        Metrics {
            inner: Arc::new(Inner {
                families,
                calls,
                durations,
                tools,
                series,
                in_flight,
                refusals,
                idempotency,
                blocking_in_use,
                store_entries,
                store_bytes,
            }),
        }
    }

    /// A call has begun on `front`: counted in flight until the returned watch is finished or
    /// dropped (a client that hangs up).
    pub(crate) fn begin(&self, front: Front) -> Watch {
        let gauge = &self.inner.in_flight[front as usize];
        gauge.inc();
        Watch {
            metrics: self.clone(),
            front,
            started: Instant::now(),
        }
    }

    pub(crate) fn refused(&self, reason: Refusal) {
        self.inner.refusals[reason as usize].inc();
    }

    pub(crate) fn idempotency(&self, reuse: Reuse) {
        self.inner.idempotency[reuse as usize].inc();
        if reuse == Reuse::Conflict {
            self.refused(Refusal::ReusedCallId);
        }
    }

    /// The series of `(tool, front, outcome)`, made on its first use.
    fn series(&self, tool: Option<usize>, front: Front, outcome: Outcome) -> &Series {
        let inner = &*self.inner;
        let place = tool.map_or(0, |i| i + 1);
        let index = (place * Front::ALL.len() + front as usize) * Outcome::COUNT + outcome as usize;
        inner.series[index].get_or_init(|| {
            let labels = CallLabels {
                front: front.as_str(),
                tool: tool.map_or(NO_TOOL, |i| &inner.tools[i]).to_owned(),
                outcome: outcome.as_str(),
            };
            let counter = inner.calls.get_or_create(&labels).clone();
            let histogram = inner.durations.get_or_create(&labels).clone();
            (counter, histogram)
        })
    }

    /// The text `GET /metrics` answers with.
    pub(crate) fn render(&self, levels: Levels) -> String {
        let inner = &*self.inner;
        inner
            .blocking_in_use
            .set(i64::try_from(levels.blocking_in_use).unwrap_or(i64::MAX));
        let (entries, bytes) = levels.store.map_or((0, 0), |s| (s.entries, s.bytes));
        inner
            .store_entries
            .set(i64::try_from(entries).unwrap_or(i64::MAX));
        inner
            .store_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        let mut text = String::with_capacity(4096);
        prometheus_client::encoding::text::encode(&mut text, &inner.families)
            .expect("writing to a String cannot fail");
        text
    }
}

/// A call in flight, timed from its start.
pub(crate) struct Watch {
    metrics: Metrics,
    front: Front,
    started: Instant,
}

impl Watch {
    /// The call was answered with `outcome`, for the tool at `tool` in the registry.
    pub(crate) fn finish(self, tool: Option<usize>, outcome: Outcome) {
        let (counter, histogram) = self.metrics.series(tool, self.front, outcome);
        counter.inc();
        histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.metrics.inner.in_flight[self.front as usize].dec();
    }
}
