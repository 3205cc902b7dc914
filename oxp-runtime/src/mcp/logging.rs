//! `tracing` events a tool emits during an MCP call, sent to that call's client as
//! `notifications/message` at or above the level its request names (or, before 2026-07-28, the
//! level chosen with `logging/setLevel` over stdio; `info` over stateless HTTP). Tools keep
//! logging with `tracing`; the [`log_layer`] (installed by `serve()` and the `mcp` subcommand)
//! finds the call an event belongs to through a task-local the MCP front sets around the run.
//!
//! Only events the server's own filter (`OXP_LOG`) lets through are seen. The newest MCP
//! revision deprecates logging (SEP-2577; rmcp marks its types so): clients that still ask for
//! it get it.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};

use super::exchange::{Back, Exchange};
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Messages waiting for the client at most; a tool that logs faster loses the excess, counted.
const QUEUE: usize = 256;

tokio::task_local! {
    static CALL_LOG: CallLog;
}

/// The level a stdio client chose: `None` until it sends `logging/setLevel`, and then no message
/// is sent below it.
#[derive(Clone, Debug, Default)]
pub(super) struct SessionLevel(Arc<Mutex<Option<LoggingLevel>>>);

impl SessionLevel {
    pub(super) fn set(&self, level: LoggingLevel) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(level);
    }

    fn get(&self) -> Option<LoggingLevel> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The least severe level a call's log messages are sent at, if any are:
/// - the level its request names in `_meta` (2026-07-28's `io.modelcontextprotocol/logLevel`);
/// - from 2026-07-28 (`newest`), none when it names none (the revision's MUST);
/// - before, over HTTP, `info`: a revision with sessions lets a server choose until its client
///   sets a level, and a stateless server cannot remember a `logging/setLevel`;
/// - over stdio (one process, one client), the level the client set, if it set one.
pub(super) fn call_level(exchange: &Exchange, stdio: &SessionLevel) -> Option<LoggingLevel> {
    if let Some(level) = exchange.meta.log_level() {
        return Some(level);
    }
    if exchange.newest() {
        return None;
    }
    if exchange.over_http() {
        return Some(LoggingLevel::Info);
    }
    stdio.get()
}

/// One call's line to its client: messages queue here, a task sends them.
#[derive(Clone)]
pub(super) struct CallLog {
    min: u8,
    sender: tokio::sync::mpsc::Sender<LoggingMessageNotificationParam>,
    /// The call's secret and token values, scrubbed from what is sent.
    secrets: Arc<[String]>,
}

/// Severity, for comparing levels (rmcp's `LoggingLevel` has no order).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The sending side's task, awaited before the call's answer so every message precedes it.
pub(super) struct Flush(tokio::task::JoinHandle<()>);

impl Flush {
    pub(super) async fn done(self) {
        let _ = tokio::time::timeout(Duration::from_secs(1), self.0).await;
    }
}

impl CallLog {
    /// A line for a call whose messages go out at `level` and above; `None` when none go out.
    /// `secrets` is asked for only then: a call without logging pays nothing.
    pub(super) fn open(
        level: Option<LoggingLevel>,
        back: Back,
        secrets: impl FnOnce() -> Vec<String>,
    ) -> Option<(CallLog, Flush)> {
        let min = rank(level?);
        let secrets = secrets();
        let (sender, mut receiver) = tokio::sync::mpsc::channel(QUEUE);
        let task = tokio::spawn(async move {
            while let Some(message) = receiver.recv().await {
                let message = rmcp::model::LoggingMessageNotification::new(message);
                if back.notify(message.into()).await.is_err() {
                    return; // the client is gone
                }
            }
        });
        let secrets = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        Some((
            CallLog {
                min,
                sender,
                secrets,
            },
            Flush(task),
        ))
    }

    /// Runs `run` with its events going to this call's client.
    pub(super) async fn scope<F: Future>(self, run: F) -> F::Output {
        CALL_LOG.scope(self, run).await
    }
}

/// The layer that sends a tool's `tracing` events to the MCP client whose call it serves. Add
/// it to your own subscriber if you install one instead of `serve()`'s:
///
/// ```
/// use tracing_subscriber::layer::SubscriberExt;
/// let subscriber = tracing_subscriber::registry().with(oxp_runtime::mcp::log_layer());
/// ```
pub fn log_layer<S: Subscriber>() -> impl Layer<S> {
    McpLogLayer
}

struct McpLogLayer;

impl<S: Subscriber> Layer<S> for McpLogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let _ = CALL_LOG.try_with(|log| {
            let metadata = event.metadata();
            let level = match *metadata.level() {
                Level::ERROR => LoggingLevel::Error,
                Level::WARN => LoggingLevel::Warning,
                Level::INFO => LoggingLevel::Info,
                _ => LoggingLevel::Debug,
            };
            // The pipeline's own bookkeeping (a call started, finished) is the server's, not
            // the tool's; its warnings (a deprecated tool) are worth the client's eyes.
            let ours = metadata.target().starts_with("oxp_runtime");
            if rank(level) < log.min || (ours && rank(level) < rank(LoggingLevel::Warning)) {
                return;
            }
            let mut fields = Fields(Map::new());
            event.record(&mut fields);
            for value in fields.0.values_mut() {
                if let Value::String(text) = value {
                    for secret in log.secrets.iter() {
                        if text.contains(secret.as_str()) {
                            *text = text.replace(secret.as_str(), "[redacted]");
                        }
                    }
                }
            }
            let mut message = LoggingMessageNotificationParam::new(level, Value::Object(fields.0));
            message.logger = Some(metadata.target().to_owned());
            // Never blocks the tool: a full queue drops the message.
            let _ = log.sender.try_send(message);
        });
    }
}

/// An event's fields as a JSON object (`message` among them).
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().to_owned(), Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
}
