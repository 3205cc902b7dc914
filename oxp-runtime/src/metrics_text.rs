//! `GET /metrics`: the core's counters written in the OpenMetrics text format Prometheus
//! scrapes, with the Prometheus project's own client crate.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry as Families;

use crate::ask::{AskOutcome, Capability};
use crate::call::{Front, Pipeline};
use crate::idempotency::Reuse;
use crate::metrics::{Fallback, Levels, Metrics, Reading, Refusal, TASK_STATUSES, Table};
use crate::seal::BadState;
use crate::striped::Striped;

/// The content type `GET /metrics` answers with.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A pipeline's metrics as text: what `GET /metrics` answers.
pub trait MetricsText {
    /// Every metric, in the OpenMetrics text format Prometheus scrapes (what `GET /metrics`
    /// answers); `None` when metrics are off. The names and labels are in the repository's
    /// `docs/observability.md`.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, tool, MetricsText, Registry};
    ///
    /// /// Add two integers.
    /// #[tool(toolkit = "Calculator", version = "1.0.0")]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let pipeline = Pipeline::new(Registry::builder().tool(add::TOOL).build().unwrap());
    /// let request = serde_json::from_str(r#"{"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}"#).unwrap();
    /// pipeline.call(request).await;
    /// let text = pipeline.metrics_text().unwrap();
    /// assert!(text.contains(r#"oxp_calls_total{front="oxp",tool="Calculator.Add@1.0.0",outcome="success"} 1"#));
    /// # });
    /// ```
    fn metrics_text(&self) -> Option<String>;
}

impl MetricsText for Pipeline {
    fn metrics_text(&self) -> Option<String> {
        Some(render(self.metrics_handle()?, self.metrics_levels()))
    }
}

/// The text of `metrics`, with the levels known only when scraped.
fn render(metrics: &Metrics, levels: Levels) -> String {
    let level = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let mut families = Families::default();
    families.register_collector(Box::new(Calls(metrics.clone())));
    let gauge = |value: u64| {
        let gauge = Gauge::<i64>::default();
        gauge.set(level(value));
        gauge
    };
    let (entries, bytes) = levels.store.map_or((0, 0), |s| (s.entries, s.bytes));
    families.register(
        "oxp_blocking_tools_in_use",
        "Sync tools occupying a blocking thread",
        gauge(levels.blocking_in_use),
    );
    families.register(
        "oxp_idempotency_store_entries",
        "Answers, runs in flight and task records the in-memory idempotency store keeps",
        gauge(entries),
    );
    families.register(
        "oxp_idempotency_store_bytes",
        "Bytes of answers and task records the in-memory idempotency store keeps, as JSON",
        gauge(bytes),
    );
    families.register(
        "oxp_build",
        "The oxp runtime serving",
        Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
    );
    // Labelled by what the registry registered (URI templates, prompt names), never by the
    // URI read or an argument: as bounded as the tool labels.
    families.register(
        "oxp_resource_reads",
        "Resource reads, by resource (its URI or URI template) and outcome",
        reads(metrics, false),
    );
    families.register(
        "oxp_prompt_gets",
        "Prompt gets, by prompt and outcome",
        reads(metrics, true),
    );
    let mut text = String::with_capacity(4096);
    prometheus_client::encoding::text::encode(&mut text, &families)
        .expect("writing to a String cannot fail");
    text
}

/// Resource reads (`prompt` false) or prompt gets, by name and outcome.
fn reads(metrics: &Metrics, prompt: bool) -> Family<Vec<(&'static str, String)>, Counter> {
    let label = if prompt { "prompt" } else { "resource" };
    let family = Family::<Vec<(&'static str, String)>, Counter>::default();
    for (name, outcome, count) in metrics.reads(prompt) {
        family
            .get_or_create(&vec![
                (label, name.to_owned()),
                ("outcome", outcome.to_owned()),
            ])
            .inc_by(count);
    }
    family
}

/// The counts kept per call and per event, encoded when scraped.
#[derive(Debug)]
struct Calls(Metrics);

impl Collector for Calls {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let table = self.0.table();
        calls(table, &mut encoder)?;
        events(table, &mut encoder)
    }
}

/// Calls answered and their durations, by front, tool and outcome; calls in flight by front.
fn calls(table: &Table, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    let used: Vec<(usize, Reading)> = table
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
        let labels = table.labels(*i);
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
        let labels = table.labels(*i);
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
        let now = table.in_flight[front as usize].sum() as i64;
        in_flight
            .encode_family(&[("front", front.as_str())])?
            .encode_gauge(&now)?;
    }
    Ok(())
}

/// Everything else counted: refusals, idempotency results, asks, request states, fallbacks,
/// then [`identity_and_tasks`].
fn events(table: &Table, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    counters(
        encoder,
        ("oxp_refusals", "Requests and calls turned away, by reason"),
        "reason",
        Refusal::ALL.map(|reason| (reason.as_str(), &table.refusals[reason as usize])),
    )?;
    counters(
        encoder,
        (
            "oxp_idempotency",
            "Calls with a call_id, by how the idempotency store answered them",
        ),
        "result",
        Reuse::ALL.map(|reuse| (reuse.as_str(), &table.idempotency[reuse as usize])),
    )?;
    let mut asks = encoder.encode_descriptor(
        "oxp_asks",
        "What tools asked mid-call, by kind, and what came of it",
        None,
        MetricType::Counter,
    )?;
    for (k, kind) in Capability::ALL.iter().enumerate() {
        for (o, outcome) in AskOutcome::ALL.iter().enumerate() {
            let count = table.asks[k * AskOutcome::ALL.len() + o].sum();
            asks.encode_family(&[("kind", kind.name()), ("outcome", outcome.as_str())])?
                .encode_counter::<NoLabelSet, _, u64>(&count, None)?;
        }
    }
    counters(
        encoder,
        (
            "oxp_request_states_refused",
            "Request states of calls that ask, refused: altered or not this call's, sealed \
                 with another key (replicas without a shared key), or expired",
        ),
        "reason",
        std::array::from_fn::<_, 3, _>(|at| (BadState::REASONS[at], &table.refused_states[at])),
    )?;
    counters(
        encoder,
        (
            "oxp_ask_fallbacks",
            "Calls of tools that ask, by callers that cannot answer, by what they got: \
                 refused, hidden (refused, not listed), relayed (the question through the model), \
                 link (a URL ask as a link in the result)",
        ),
        "fallback",
        std::array::from_fn::<_, 4, _>(|at| (Fallback::ALL[at].label(), &table.fallbacks[at])),
    )?;
    identity_and_tasks(table, encoder)
}

/// The identity provider's key sets and introspections; MCP tasks and lost leases.
fn identity_and_tasks(table: &Table, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    counters(
        encoder,
        (
            "oxp_oauth_key_set_fetches",
            "Fetches of an identity provider's key set (JWKS), by result",
        ),
        "result",
        [
            ("ok", &table.key_set_fetches[0]),
            ("error", &table.key_set_fetches[1]),
        ],
    )?;
    #[cfg(feature = "oauth")]
    counters(
        encoder,
        (
            "oxp_oauth_introspections",
            "Introspections of opaque tokens at the identity provider, by result: active, \
                 inactive, refused (active, but its answer failed a check), error (the endpoint \
                 failed), busy (not asked: too many under way)",
        ),
        "result",
        std::array::from_fn::<_, { crate::metrics::INTROSPECTIONS }, _>(|at| {
            (
                crate::oauth::Introspected::ALL[at].label(),
                &table.introspections[at],
            )
        }),
    )?;
    counters(
        encoder,
        (
            "oxp_tasks",
            "MCP tasks that came to a status in this process: working (made, or resumed by \
                 answers), input_required, completed, failed (a panic, a lapsed lease, a stop), \
                 cancelled",
        ),
        "status",
        std::array::from_fn::<_, 5, _>(|at| (TASK_STATUSES[at], &table.tasks[at])),
    )?;
    let lost = table.leases_lost.sum();
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
