//! OpenTelemetry (cargo feature `otel`): each call's `oxp.call` span, exported over OTLP/HTTP
//! by a batch thread, a child of the caller's span when the call carries a W3C `traceparent`.
//!
//! Configured by OpenTelemetry's own variables: spans are exported when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (a collector's base URL, `http://127.0.0.1:4318`; spans go to
//! its `/v1/traces`) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) is set — a binary
//! built with the feature exports nothing, and tries no connection, until pointed at a
//! collector. Also `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`,
//! `OTEL_SERVICE_NAME` (default: the binary's name), `OTEL_RESOURCE_ATTRIBUTES`, the batch's
//! `OTEL_BSP_*`; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn the export off.
//!
//! A span's attributes are the call's `call_id`, `trace_id`, `tool` and `outcome`: never its
//! input, context, secrets or tokens. Its events are the call's log events (a panic's text,
//! scrubbed of the call's secrets like the log line).

use std::collections::HashMap;
use std::sync::OnceLock;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The provider the layer exports through, kept to flush it at shutdown.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The layer that exports call spans, unless OpenTelemetry's variables turn the export off or
/// the exporter cannot be built (said on stderr: logging is not set up yet).
pub(crate) fn layer<S>() -> Option<impl tracing_subscriber::Layer<S>>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    crate::call::set_adopt_parent(adopt_parent);
    let env = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|v| v.trim().to_ascii_lowercase())
            .filter(|v| !v.is_empty())
    };
    let pointed = env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
        || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
    if !pointed
        || env("OTEL_SDK_DISABLED").as_deref() == Some("true")
        || env("OTEL_TRACES_EXPORTER").as_deref() == Some("none")
    {
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("OpenTelemetry export is off: the OTLP exporter failed to start ({error})");
            return None;
        }
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(binary_name());
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("oxp");
    let _ = PROVIDER.set(provider);
    Some(tracing_opentelemetry::layer().with_tracer(tracer))
}

/// The service's name when `OTEL_SERVICE_NAME` does not give one: the binary's.
fn binary_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|path| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "oxp".to_owned())
}

/// Makes `span` a child of the span `traceparent` names. A malformed one is ignored (a call is
/// never refused for its tracing header): the span then starts a trace of its own.
fn adopt_parent(span: &tracing::Span, traceparent: &str) {
    let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    let parent = TraceContextPropagator::new().extract(&carrier);
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// Sends the spans still waiting in the batch: call it before the process exits (`serve()`
/// does). Does nothing when the export is off.
///
/// ```
/// oxp_runtime::otel::flush();
/// ```
pub fn flush() {
    if let Some(provider) = PROVIDER.get() {
        if let Err(error) = provider.force_flush() {
            tracing::warn!(%error, "some spans could not be exported");
        }
    }
}
