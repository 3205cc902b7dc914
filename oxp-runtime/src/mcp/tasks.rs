//! MCP's tasks extension (see [`crate::tasks`]): each task's record in the pipeline's store,
//! the runs that drive it under a lease, and `tasks/get`, `tasks/update` and `tasks/cancel`.
//!
//! A task is changed only by compare-and-set on its record, so replicas that race (a
//! `tasks/update` on one, the run's end on another) never lose each other's writes; and only
//! the holder of a task's lease writes its end, so a run that lost its lease (its process
//! stalled past it) never overwrites what another made of the task.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{CreateTaskResult, DetailedTask, GetTaskResult, Task, TaskPayload, TaskStatus};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::McpServer;
use crate::ask::Round;
use crate::call::{CallMeta, CallOutcome, Owed};
use crate::idempotency::{IdempotencyKey, StoreError};
use crate::protocol::{CallResult, CallToolRequest, CallToolResponse};
use crate::seal::Ledger;
use crate::signals::{CallSignals, Cancellation, FirstWait, Progress};
use crate::time::millis;

/// The principal of a task key whose caller did not authenticate.
const ANONYMOUS: &str = "anonymous";

/// How often a client is told to poll.
const POLL_INTERVAL_MS: u64 = 1000;

/// Why a task whose lease lapsed failed: its run's process stopped renewing it, which is all
/// another replica can know.
const LAPSED: &str = "The server running this task stopped renewing its lease before the task \
                      ended: it stopped, stalled, or lost the task store.";

/// The longest status message a task keeps of a tool's progress (in bytes, cut at a character):
/// well within a record's reserve, so that progress never needs room the store may not have.
const MAX_STATUS_MESSAGE: usize = 1024;

/// How tasks are kept and run (`OXP_TASK_TTL_MS`, `OXP_LEASE_MS`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskConfig {
    /// How long a task is kept from its creation.
    pub(crate) ttl: Duration,
    /// How long a run's lease holds without renewal.
    pub(crate) lease: Duration,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            ttl: crate::tasks::DEFAULT_TTL,
            lease: crate::tasks::DEFAULT_LEASE,
        }
    }
}

/// A task's round going on in this process.
struct Running {
    server: McpServer,
    key: IdempotencyKey,
    cancellation: Cancellation,
}

/// The rounds going on in this process, by their lease's holder: cancelled at once by a
/// `tasks/cancel` that lands here, and marked interrupted if the process stops with them (what
/// one process drives, as its count of calls in flight: nothing a later request needs).
static RUNNING: std::sync::LazyLock<Mutex<HashMap<String, Running>>> =
    std::sync::LazyLock::new(Mutex::default);

fn running() -> std::sync::MutexGuard<'static, HashMap<String, Running>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Marks the tasks this process still runs as failed, the server having stopped: for a
/// shutdown whose grace period ran out with task runs going.
pub(crate) async fn interrupt_running() {
    let running: Vec<(String, McpServer, IdempotencyKey)> = (running().iter())
        .map(|(holder, run)| (holder.clone(), run.server.clone(), run.key.clone()))
        .collect();
    for (holder, server, key) in running {
        let why = "The server stopped before the task ended.";
        let ended = server
            .change_task(&key, |record, now| {
                if !record.held_by(&holder) {
                    return false;
                }
                record.fail(why, now);
                true
            })
            .await;
        if let Err(error) = ended {
            tracing::error!(%error, "could not mark a task interrupted");
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }

    fn wire(self) -> TaskStatus {
        match self {
            Status::Working => TaskStatus::Working,
            Status::InputRequired => TaskStatus::InputRequired,
            Status::Completed => TaskStatus::Completed,
            Status::Failed => TaskStatus::Failed,
            Status::Cancelled => TaskStatus::Cancelled,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// How a call's result is put in MCP's terms (what `tools/call` would have answered).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct Render {
    pub(super) any_output: bool,
    pub(super) per_caller: bool,
    pub(super) contents: bool,
}

/// Who holds a task's run, and until when (milliseconds since the epoch).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Lease {
    holder: String,
    until: u64,
}

impl Lease {
    /// `holder`'s lease for `lease` from `now` (the store's clock).
    fn new(holder: &str, lease: Duration, now: u64) -> Self {
        Lease {
            holder: holder.to_owned(),
            until: now + millis(lease),
        }
    }
}

/// A task, as the store keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Record {
    tool_id: String,
    /// Kept beside the record ([`IdempotencyStore::attach`]), not in it: the record is written
    /// at every renewal, and the input, which may be large, never changes. Read here only
    /// from records an earlier version wrote.
    ///
    /// [`IdempotencyStore::attach`]: crate::idempotency::IdempotencyStore::attach
    #[serde(default, skip_serializing_if = "Value::is_null")]
    input: Value,
    user: Option<String>,
    /// The capabilities the creating request declared: what the tool's asks inside the task
    /// may need.
    can: Vec<String>,
    render: Render,
    status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    created: u64,
    updated: u64,
    ttl_ms: u64,
    /// What the tool's asks established so far, for its next round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ledger: Option<Ledger>,
    /// The asks not yet answered: key on the wire → (the tool's key, the request as sent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    asked: BTreeMap<String, (String, Value)>,
    /// Every key on the wire the task ever asked under: none is used twice.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    issued: BTreeSet<String>,
    /// Answers to this round's asks so far, by the tool's key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    answers: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
    /// A client asked to cancel it; its run stops at its next beat.
    #[serde(default)]
    cancel: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease: Option<Lease>,
    /// Made, and its first round not yet past its first wait: it may yet be answered as a
    /// plain call and forgotten, so the same round sent again meanwhile waits to see.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    starting: bool,
}

/// A new task's record, before its first round runs.
pub(super) struct Seed {
    pub(super) tool_id: String,
    pub(super) input: Value,
    pub(super) user: Option<String>,
    pub(super) can: Vec<String>,
    pub(super) render: Render,
    /// The task's id: fresh, or the call's own when its first rounds asked (a replay of the
    /// round that made it finds it).
    pub(super) id: String,
    pub(super) principal: Option<String>,
}

/// How a call that may be a task went.
pub(super) enum Begun {
    /// It answered before it ever waited: a plain call's answer.
    Answered(CallOutcome),
    /// It is a task.
    Task(CreateTaskResult),
}

fn iso(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Why a task could not be read or changed.
enum TaskError {
    Store(StoreError),
    /// A record this server did not write (another version's, or damaged).
    Unreadable(String),
}

impl From<StoreError> for TaskError {
    fn from(error: StoreError) -> Self {
        TaskError::Store(error)
    }
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskError::Store(error) => error.fmt(f),
            TaskError::Unreadable(why) => write!(f, "a task record is unreadable: {why}"),
        }
    }
}

impl From<TaskError> for McpError {
    fn from(error: TaskError) -> Self {
        match error {
            TaskError::Store(error) => store_error(&error),
            TaskError::Unreadable(why) => {
                McpError::internal_error(format!("a task record is unreadable: {why}"), None)
            }
        }
    }
}

fn parse(body: &str) -> Result<Record, TaskError> {
    serde_json::from_str(body).map_err(|e| TaskError::Unreadable(e.to_string()))
}

fn not_found() -> McpError {
    McpError::invalid_params("Failed to retrieve task: Task not found", None)
}

fn store_error(error: &StoreError) -> McpError {
    McpError::internal_error(format!("The task store could not be used: {error}"), None)
}

/// The JSON-RPC error a task fails with.
fn rpc_error(message: &str) -> Value {
    json!({"code": -32603, "message": message})
}

impl Record {
    fn task(&self, id: &str) -> Task {
        let mut task = Task::new(id, self.status.wire(), iso(self.created), iso(self.updated))
            .with_ttl_ms(self.ttl_ms)
            .with_poll_interval_ms(POLL_INTERVAL_MS);
        task.status_message = self.message.clone();
        task
    }

    fn detailed(&self, id: &str) -> DetailedTask {
        let object = |value: &Option<Value>| match value {
            Some(Value::Object(object)) => object.clone(),
            _ => Default::default(),
        };
        let payload = match self.status {
            Status::Working => TaskPayload::Working,
            Status::Cancelled => TaskPayload::Cancelled,
            Status::Completed => TaskPayload::Completed {
                result: object(&self.result),
            },
            Status::Failed => TaskPayload::Failed {
                error: object(&self.error),
            },
            Status::InputRequired => TaskPayload::InputRequired {
                input_requests: (self.asked.iter())
                    .filter_map(|(wire, (_, request))| {
                        Some((wire.clone(), serde_json::from_value(request.clone()).ok()?))
                    })
                    .collect(),
            },
        };
        DetailedTask::new(self.task(id), payload)
    }

    /// Whether its run's process stopped renewing its lease.
    fn lapsed(&self, now: u64) -> bool {
        !self.status.is_terminal() && self.lease.as_ref().is_some_and(|lease| lease.until <= now)
    }

    /// Whether it is a round handed back to the store, waiting for a replica to run it.
    fn unheld(&self) -> bool {
        self.status == Status::Working && self.lease.is_none()
    }

    fn held_by(&self, holder: &str) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|lease| lease.holder == holder)
    }

    /// Ends the task `failed` with a JSON-RPC error saying `why`.
    fn fail(&mut self, why: &str, now: u64) {
        self.error = Some(rpc_error(why));
        self.end(Status::Failed, Some(why.to_owned()), now);
    }

    /// Ends the task's round with `status`. A terminal one drops what only its runs needed
    /// (its input, its asks and their answers), so that a task's end never needs more room
    /// than its reserve.
    fn end(&mut self, status: Status, message: Option<String>, now: u64) {
        self.status = status;
        self.message = message;
        self.lease = None;
        self.updated = now;
        if status.is_terminal() {
            self.input = Value::Null;
            self.ledger = None;
            self.asked.clear();
            self.answers.clear();
        }
    }
}

/// The tool's last progress, for the task's status message.
fn status_message(progress: &Progress) -> String {
    let count = match progress.total {
        Some(total) => format!("{}/{total}", progress.done),
        None => progress.done.to_string(),
    };
    let mut message = match &progress.message {
        Some(message) => format!("{count}: {message}"),
        None => count,
    };
    if message.len() > MAX_STATUS_MESSAGE {
        let cut = (0..=MAX_STATUS_MESSAGE - 3)
            .rev()
            .find(|at| message.is_char_boundary(*at))
            .unwrap_or(0);
        message.truncate(cut);
        message.push('…');
    }
    message
}

/// A run's line to its task: its cancellation, its last progress, and whether the tool has
/// waited yet.
#[derive(Clone, Default)]
struct Line {
    cancellation: Cancellation,
    progress: Arc<Mutex<Option<String>>>,
    first_wait: Arc<FirstWait>,
}

impl Line {
    fn signals(&self, round: &Round) -> CallSignals {
        let progress = self.progress.clone();
        CallSignals::new()
            .cancelled_by(&self.cancellation)
            .asking(round)
            .on_first_wait(&self.first_wait)
            .on_progress(move |p| {
                *progress.lock().unwrap_or_else(|e| e.into_inner()) = Some(status_message(&p));
            })
    }

    fn progress(&self) -> Option<String> {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

type Run = Pin<Box<dyn Future<Output = CallOutcome> + Send>>;

/// Starts a round's run anew.
type Again = Box<dyn Fn() -> Run + Send + Sync>;

impl McpServer {
    fn store(&self) -> Result<&Arc<dyn crate::idempotency::IdempotencyStore>, StoreError> {
        self.pipeline.store().ok_or(StoreError::NoRecords)
    }

    /// The key a task is kept under: its id, within its caller and user.
    pub(super) fn task_key(
        principal: Option<&str>,
        user: Option<String>,
        id: &str,
    ) -> IdempotencyKey {
        IdempotencyKey::new(principal.unwrap_or(ANONYMOUS), user, id)
    }

    fn count_task(&self, status: Status) {
        if let Some(metrics) = self.pipeline.metrics_handle() {
            metrics.task(status.as_str());
        }
    }

    /// Reads a task as it stands; one whose run's process stopped renewing its lease is
    /// `failed` from then on.
    async fn read_task(&self, key: &IdempotencyKey) -> Result<Option<Record>, TaskError> {
        let Some(found) = self.store()?.read_record(key).await? else {
            return Ok(None);
        };
        let record = parse(&found.body)?;
        if record.unheld() && !self.pipeline.is_draining() {
            return self.take_up(key).await;
        }
        if !record.lapsed(found.now) {
            return Ok(Some(record));
        }
        let mut ended_here = false;
        let ended = self
            .change_task(key, |record, now| {
                ended_here = record.lapsed(now);
                if ended_here {
                    record.fail(LAPSED, now);
                }
                ended_here
            })
            .await?;
        if ended_here {
            self.count_task(Status::Failed);
            self.forget_input(key).await;
        }
        Ok(ended)
    }

    /// Hands a round that never ran back to the store, its answers kept: the task stays
    /// `working`, held by no one, until a replica that can run it reads it.
    async fn release(&self, key: &IdempotencyKey, holder: &str) -> Result<(), TaskError> {
        self.change_task(key, |record, now| {
            if !record.held_by(holder) {
                return false;
            }
            record.lease = None;
            record.message = Some("Waiting for a server to run it.".to_owned());
            record.updated = now;
            true
        })
        .await
        .map(drop)
    }

    /// Runs a round handed back by a replica that was shutting down, here: the task as it then
    /// is.
    async fn take_up(&self, key: &IdempotencyKey) -> Result<Option<Record>, TaskError> {
        let holder = crate::random::uuid_v4().simple();
        let mut taken = false;
        let record = self
            .change_task(key, |record, now| {
                taken = record.unheld();
                if taken {
                    record.lease = Some(Lease::new(&holder, self.tasks.lease, now));
                    record.message = None;
                    record.updated = now;
                }
                taken
            })
            .await?;
        if let Some(record) = record.as_ref().filter(|_| taken) {
            self.next_round(key.clone(), holder, record.clone(), self.pipeline.owe());
        }
        Ok(record)
    }

    /// Changes a task by `change` (which says whether it changed anything), again on the
    /// record as it now is when another write came first; the record as it ends, if any.
    /// `change` is given the store's clock as the record was read: every time in a record is
    /// the store's, so replicas whose clocks disagree agree on its lease.
    async fn change_task(
        &self,
        key: &IdempotencyKey,
        mut change: impl FnMut(&mut Record, u64) -> bool,
    ) -> Result<Option<Record>, TaskError> {
        let store = self.store()?;
        loop {
            let Some(found) = store.read_record(key).await? else {
                return Ok(None);
            };
            let mut record = parse(&found.body)?;
            if !change(&mut record, found.now) {
                return Ok(Some(record));
            }
            let body = serde_json::to_string(&record).expect("records serialize");
            if store.replace_record(key, found.version, body).await? {
                return Ok(Some(record));
            }
        }
    }

    /// Starts a call that may be a task: its record is written first (so that nothing runs
    /// unless the task can be kept), then its run goes until the tool first waits (see
    /// [`FirstWait`]). If it answered by then, the record goes and the answer is the call's;
    /// else the run goes on as the task's, and the client is answered with the task.
    ///
    /// The same round sent again (a replay, or several at once) finds the record: while the
    /// first is still before its first wait, it waits to see whether a task comes of it (and
    /// runs the round itself if not); then it is answered with the task.
    pub(super) async fn begin_task(
        &self,
        seed: Seed,
        call: CallToolRequest,
        round: &Round,
    ) -> Result<Begun, StoreError> {
        let store = self.store()?.clone();
        let key = Self::task_key(seed.principal.as_deref(), seed.user.clone(), &seed.id);
        let holder = crate::random::uuid_v4().simple();
        let now = store.now_ms().await?;
        let ttl = millis(self.tasks.ttl);
        let record = Record {
            tool_id: seed.tool_id,
            input: Value::Null,
            user: seed.user,
            can: seed.can,
            render: seed.render,
            status: Status::Working,
            message: None,
            created: now,
            updated: now,
            ttl_ms: ttl,
            ledger: None,
            asked: BTreeMap::new(),
            issued: BTreeSet::new(),
            answers: BTreeMap::new(),
            result: None,
            error: None,
            cancel: false,
            lease: Some(Lease::new(&holder, self.tasks.lease, now)),
            starting: true,
        };
        let body = serde_json::to_string(&record).expect("records serialize");
        let patience = tokio::time::Instant::now() + self.tasks.lease;
        while !store
            .create_record(&key, body.clone(), self.tasks.ttl)
            .await?
        {
            let existing = store
                .read_record(&key)
                .await?
                .and_then(|found| serde_json::from_str::<Record>(&found.body).ok());
            match existing {
                // Answered as a plain call and forgotten: this round runs too (a kept answer
                // to its call_id answers it, if there is one).
                None if tokio::time::Instant::now() < patience => continue,
                None => {
                    return Err(StoreError::Unreachable(
                        "the task vanished as it was made".into(),
                    ));
                }
                Some(existing) if existing.starting && tokio::time::Instant::now() < patience => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                // The round that made it, replayed: the task it made, not a second run.
                Some(existing) => {
                    return Ok(Begun::Task(CreateTaskResult::new(existing.task(&seed.id))));
                }
            }
        }
        // Counted in the caller's share as the task is made: one that could not keep its
        // input is refused now, not when its first round parks.
        let input = serde_json::to_string(&seed.input).expect("inputs serialize");
        if let Err(error) = store.attach(&key, input).await {
            if let Err(error) = store.remove_record(&key).await {
                tracing::warn!(%error, "an unused task record could not be removed");
            }
            return Err(error);
        }
        let line = Line::default();
        let mut run = self.round_run(call, seed.principal, &line, round);
        let ended = tokio::select! {
            biased;
            outcome = &mut run => Some(outcome),
            () = line.first_wait.wait() => None,
        };
        match ended {
            // It ended after it waited (a sync tool's thread, say): a task all the same, that
            // one rule decides, not how quickly the run went.
            Some(outcome) if line.first_wait.waited() => {
                run = Box::pin(std::future::ready(outcome));
            }
            Some(outcome) => {
                // The answer is the call's whatever the store says now: the tool has run.
                if let Err(error) = store.remove_record(&key).await {
                    tracing::warn!(%error, "an unused task record could not be removed");
                }
                return Ok(Begun::Answered(outcome));
            }
            None => {}
        }
        self.count_task(Status::Working);
        let task = CreateTaskResult::new(record.task(&seed.id));
        // Owed from here, while the run still holds its call's place: a drain waits for the
        // task's end to be written, not only for the tool.
        let owed = self.pipeline.owe();
        // Beside the run, which must not wait on the store to go on.
        let (server, started) = (self.clone(), key.clone());
        tokio::spawn(async move { server.started(&started).await });
        tokio::spawn(
            self.clone()
                .drive(key, holder, run, None, round.clone(), line, owed),
        );
        Ok(Begun::Task(task))
    }

    /// Marks a task's record past its first round's first wait: the same round sent again is
    /// answered with it from then on.
    async fn started(&self, key: &IdempotencyKey) {
        let marked = self
            .retrying("mark a task started", || {
                self.change_task(key, |record, _| std::mem::take(&mut record.starting))
            })
            .await;
        if let Err(error) = marked {
            tracing::warn!(%error, "could not mark a task started");
        }
    }

    /// One round of a task's tool, as a run that owns what it needs.
    fn round_run(
        &self,
        call: CallToolRequest,
        principal: Option<String>,
        line: &Line,
        round: &Round,
    ) -> Run {
        let meta = CallMeta {
            principal,
            signals: line.signals(round),
            front: crate::call::Front::Mcp,
            ..CallMeta::default()
        };
        let pipeline = self.pipeline.clone();
        Box::pin(async move { pipeline.call_with(call, &meta).await })
    }

    /// Drives a task's round to its end, renewing its lease every beat and stopping it when a
    /// client cancels the task, then writes what came of it.
    /// A round that `again` can start anew (one resumed by answers) and that found the server
    /// at its concurrency limit waits for a place, holding its lease, rather than end the task.
    #[allow(clippy::too_many_arguments)]
    async fn drive(
        self,
        key: IdempotencyKey,
        holder: String,
        run: Run,
        again: Option<Again>,
        round: Round,
        line: Line,
        _owed: Owed,
    ) {
        let here = Running {
            server: self.clone(),
            key: key.clone(),
            cancellation: line.cancellation.clone(),
        };
        running().insert(holder.clone(), here);
        let heart = self.heartbeat(&key, &holder, &line);
        tokio::pin!(heart);
        let mut run = run;
        let outcome = loop {
            let outcome = tokio::select! {
                outcome = &mut run => outcome,
                () = &mut heart => break None,
            };
            let unplaced = matches!(outcome, CallOutcome::Unavailable { .. })
                && !line.cancellation.is_cancelled();
            match &again {
                // Shutting down: the round, which never ran, goes back to the store for
                // another replica to run (see `read_task`).
                Some(_) if unplaced && self.pipeline.is_draining() => {
                    let released = self
                        .retrying("hand a task's round back", || self.release(&key, &holder))
                        .await;
                    if let Err(error) = released {
                        tracing::error!(%error, "a task's round could not be handed back");
                    }
                    running().remove(&holder);
                    return;
                }
                Some(again) if unplaced => {
                    tokio::select! {
                        () = tokio::time::sleep(crate::tasks::beat(self.tasks.lease)) => {}
                        () = &mut heart => break None,
                    }
                    run = again();
                }
                _ => break Some(outcome),
            }
        };
        match outcome {
            Some(outcome) => {
                let ended = self
                    .retrying("write a task's end", || {
                        self.end_round(&key, &holder, outcome.clone(), &round, &line)
                    })
                    .await;
                if let Err(error) = ended {
                    tracing::error!(
                        %error,
                        "a task's end could not be recorded: the store stayed out of reach \
                         for the task's time to live"
                    );
                }
            }
            None => {
                // Another made something else of the task: this run's answer is not its.
                line.cancellation.cancel();
                if let Some(metrics) = self.pipeline.metrics_handle() {
                    metrics.lease_lost();
                }
                tracing::warn!("a task's run lost its lease and was stopped");
            }
        }
        running().remove(&holder);
    }

    /// Renews the run's lease every beat, hands on a cancellation and the tool's progress;
    /// returns only when the lease is lost. A renewal that cannot also take the progress (no
    /// room for it) renews the lease alone: progress never costs a run its lease.
    async fn heartbeat(&self, key: &IdempotencyKey, holder: &str, line: &Line) {
        let (lease, beat) = (self.tasks.lease, crate::tasks::beat(self.tasks.lease));
        loop {
            tokio::time::sleep(beat).await;
            let mut progress = line.progress();
            let renewed = loop {
                let renewed = self
                    .change_task(key, |record, now| {
                        if !record.held_by(holder) {
                            return false;
                        }
                        record.lease = Some(Lease::new(holder, lease, now));
                        if progress.is_some() && record.message != progress {
                            record.message = progress.clone();
                            record.updated = now;
                        }
                        true
                    })
                    .await;
                match renewed {
                    Err(TaskError::Store(StoreError::Full)) if progress.is_some() => {
                        progress = None;
                    }
                    renewed => break renewed,
                }
            };
            match renewed {
                Ok(Some(record)) if record.held_by(holder) => {
                    if record.cancel {
                        line.cancellation.cancel();
                    }
                }
                Ok(Some(_)) => return,
                Ok(None) => {
                    tracing::warn!(
                        "a task's record expired while its tool ran (OXP_TASK_TTL_MS is shorter \
                         than the run): the run is stopped"
                    );
                    return;
                }
                // The store is out of reach: the run goes on, and the lease holds as long as
                // it was renewed; if it lapses, others see the task failed, and so will this.
                Err(error) => {
                    tracing::warn!(%error, "could not renew a task's lease")
                }
            }
        }
    }

    /// Runs `write` until it is done or fails for a reason other than a store out of reach,
    /// trying again (every beat at most) for as long as the task may live: what a run came to
    /// survives a store that stalls or restarts. The store ends a task whose lease lapsed
    /// meanwhile, and `write` then finds it no longer this run's.
    async fn retrying<F, T>(&self, what: &str, mut write: impl FnMut() -> F) -> Result<T, TaskError>
    where
        F: Future<Output = Result<T, TaskError>>,
    {
        let deadline = tokio::time::Instant::now() + self.tasks.ttl;
        let mut pause = Duration::from_millis(20);
        loop {
            match write().await {
                Err(TaskError::Store(StoreError::Unreachable(error)))
                    if tokio::time::Instant::now() + pause < deadline =>
                {
                    tracing::warn!(%error, "could not {what} yet; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(crate::tasks::beat(self.tasks.lease));
                }
                done => return done,
            }
        }
    }

    /// Writes what a round came to (see [`write_end`](Self::write_end)); an end the store
    /// has no room for (a result past its byte budget) is written as a failure that says so,
    /// so the task still ends.
    async fn end_round(
        &self,
        key: &IdempotencyKey,
        holder: &str,
        outcome: CallOutcome,
        round: &Round,
        line: &Line,
    ) -> Result<(), TaskError> {
        let ended = self.write_end(key, holder, outcome, round, line).await;
        if let Err(TaskError::Store(StoreError::Full)) = ended {
            let why = "The task's result is larger than the store may keep \
                       (OXP_IDEMPOTENCY_MAX_BYTES).";
            let ended = self
                .change_task(key, |record, now| {
                    if !record.held_by(holder) {
                        return false;
                    }
                    record.fail(why, now);
                    true
                })
                .await?;
            if ended.is_some() {
                self.count_task(Status::Failed);
            }
            return Ok(());
        }
        ended
    }

    /// Writes what a round came to: asks park the task, anything else ends it.
    async fn write_end(
        &self,
        key: &IdempotencyKey,
        holder: &str,
        outcome: CallOutcome,
        round: &Round,
        line: &Line,
    ) -> Result<(), TaskError> {
        let (cancelled, progress) = (line.cancellation.is_cancelled(), line.progress());
        let asks = (super::failed(&outcome) && round.unsupported().is_none())
            .then(|| round.next().map(|ledger| (ledger, round.asked())))
            .flatten();
        let failure = match &outcome {
            CallOutcome::Completed(CallToolResponse {
                result: CallResult::Failure { error },
                ..
            }) if error.kind == crate::error::FailureKind::Panic => Some(error.message.clone()),
            CallOutcome::Unavailable { error, .. } => Some(error.message.clone()),
            _ => None,
        };
        let mut ended = None;
        let record = self
            .change_task(key, |record, now| {
                if !record.held_by(holder) {
                    return false;
                }
                let (status, message) = if cancelled {
                    (
                        Status::Cancelled,
                        Some("Cancelled at the client's request.".to_owned()),
                    )
                } else if let Some((ledger, asked)) = &asks {
                    record.answers.clear();
                    record.asked.clear();
                    for (key, request) in asked {
                        let wire = unused_key(&record.issued, key);
                        record.issued.insert(wire.clone());
                        record.asked.insert(wire, (key.clone(), request.clone()));
                    }
                    record.ledger = Some(ledger.clone());
                    (
                        Status::InputRequired,
                        Some("Waiting for an answer.".to_owned()),
                    )
                } else if let Some(failure) = &failure {
                    record.error = Some(rpc_error(failure));
                    (
                        Status::Failed,
                        Some(format!("Tool execution failed: {failure}")),
                    )
                } else {
                    let result = super::mcp_result(
                        outcome.clone(),
                        record.render.any_output,
                        record.render.per_caller,
                        record.render.contents,
                    );
                    record.result = serde_json::to_value(result).ok();
                    (
                        Status::Completed,
                        progress.clone().or(record.message.clone()),
                    )
                };
                record.end(status, message, now);
                ended = Some(status);
                true
            })
            .await?;
        if let (Some(status), Some(_)) = (ended, record) {
            self.count_task(status);
            if status.is_terminal() {
                self.forget_input(key).await;
            }
        }
        Ok(())
    }

    /// Forgets the input kept beside the task `key`, which has ended: its bytes are free for
    /// the rest of the task's time to live.
    async fn forget_input(&self, key: &IdempotencyKey) {
        let Ok(store) = self.store() else { return };
        if let Err(error) = store.detach(key).await {
            tracing::warn!(%error, "the input of an ended task could not be forgotten");
        }
    }

    /// The input a task's next round runs on: kept beside it (or, in a record an earlier
    /// version wrote, in it).
    async fn input_of(&self, key: &IdempotencyKey, record: &Record) -> Result<Value, TaskError> {
        if !record.input.is_null() {
            return Ok(record.input.clone());
        }
        let found = self
            .retrying("read a task's input", || async {
                Ok(self.store()?.attachment(key).await?)
            })
            .await?;
        let found = found.ok_or_else(|| TaskError::Unreadable("its input is not kept".into()))?;
        serde_json::from_str(&found).map_err(|e| TaskError::Unreadable(e.to_string()))
    }

    /// `tasks/get`.
    pub(super) async fn get_task_of(
        &self,
        key: &IdempotencyKey,
    ) -> Result<GetTaskResult, McpError> {
        let record = self.read_task(key).await?.ok_or_else(not_found)?;
        Ok(GetTaskResult::new(record.detailed(&key.call_id)))
    }

    /// `tasks/update`: answers count for the asks still outstanding (others are ignored); when
    /// none is left, the tool's next round runs here.
    pub(super) async fn update_task_of(
        &self,
        key: &IdempotencyKey,
        responses: BTreeMap<String, Value>,
    ) -> Result<(), McpError> {
        if self.pipeline.is_draining() {
            // Taken here, the answers would resume the task where nothing may run any more.
            return Err(McpError::internal_error(
                "This server is shutting down: send the answers again (to another replica); \
                 the task still waits for them",
                None,
            ));
        }
        let holder = crate::random::uuid_v4().simple();
        let mut resumed = false;
        let record = self
            .change_task(key, |record, now| {
                resumed = false;
                if record.status != Status::InputRequired {
                    return false;
                }
                let mut changed = false;
                for (wire, response) in &responses {
                    if let Some((key, _)) = record.asked.remove(wire) {
                        record.answers.insert(key, response.clone());
                        changed = true;
                    }
                }
                if changed && record.asked.is_empty() {
                    record.status = Status::Working;
                    record.message = None;
                    record.updated = now;
                    record.lease = Some(Lease::new(&holder, self.tasks.lease, now));
                    resumed = true;
                }
                changed
            })
            .await?
            .ok_or_else(not_found)?;
        if resumed {
            self.count_task(Status::Working);
            self.next_round(key.clone(), holder, record, self.pipeline.owe());
        }
        Ok(())
    }

    /// Runs a task's next round, with the answers its asks got, on its kept input.
    fn next_round(&self, key: IdempotencyKey, holder: String, record: Record, owed: Owed) {
        let server = self.clone();
        tokio::spawn(async move {
            let input = match server.input_of(&key, &record).await {
                Ok(input) => input,
                Err(error) => {
                    let why = format!("The task's next round could not start: {error}");
                    let ended = server
                        .change_task(&key, |record, now| {
                            let held = record.held_by(&holder);
                            if held {
                                record.fail(&why, now);
                            }
                            held
                        })
                        .await;
                    if let Err(error) = ended {
                        tracing::error!(%error, "a task could not be marked failed");
                    }
                    drop(owed);
                    return;
                }
            };
            // The caller's principal, as the key has it (an anonymous caller has none).
            let principal = (key.principal != ANONYMOUS).then(|| key.principal.clone());
            let can = record.can.clone();
            let round = Round::resume(record.ledger, record.answers, |capability| {
                can.iter().any(|name| name == capability.name())
            });
            let mut context = (*server.context).clone();
            if record.render.per_caller {
                context.user_id = record.user;
                context.authorization.clear();
            }
            let call = CallToolRequest {
                tool_id: record.tool_id,
                call_id: None,
                trace_id: None,
                input: Some(input),
                context: Some(context),
            };
            let line = Line::default();
            let run = server.round_run(call.clone(), principal.clone(), &line, &round);
            let again: Again = {
                let (server, line, round) = (server.clone(), line.clone(), round.clone());
                Box::new(move || server.round_run(call.clone(), principal.clone(), &line, &round))
            };
            (server.clone())
                .drive(key, holder, run, Some(again), round, line, owed)
                .await;
        });
    }

    /// `tasks/cancel`: a task waiting for answers ends at once; a running one is stopped at its
    /// run's next beat (at once when it runs here). One that has ended stays as it is.
    pub(super) async fn cancel_task_of(&self, key: &IdempotencyKey) -> Result<(), McpError> {
        let mut ended = false;
        let record = self
            .change_task(key, |record, now| {
                ended = false;
                match record.status {
                    _ if record.status.is_terminal() || record.cancel => false,
                    _ if record.unheld() || record.status == Status::InputRequired => {
                        record.end(
                            Status::Cancelled,
                            Some("Cancelled at the client's request.".into()),
                            now,
                        );
                        ended = true;
                        true
                    }
                    _ => {
                        record.cancel = true;
                        true
                    }
                }
            })
            .await?
            .ok_or_else(not_found)?;
        if ended {
            self.count_task(Status::Cancelled);
            self.forget_input(key).await;
        }
        if let Some(lease) = &record.lease {
            if let Some(run) = running().get(&lease.holder) {
                run.cancellation.cancel();
            }
        }
        Ok(())
    }
}

/// `key` if the task never asked under it, else `key#2`, `key#3`, …: a key on the wire names
/// one request over a task's life.
fn unused_key(issued: &BTreeSet<String>, key: &str) -> String {
    if !issued.contains(key) {
        return key.to_owned();
    }
    (2..)
        .map(|n| format!("{key}#{n}"))
        .find(|wire| !issued.contains(wire))
        .expect("some suffix is free")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_on_the_wire_is_never_used_twice() {
        let mut issued = BTreeSet::new();
        for expected in ["confirm", "confirm#2", "confirm#3"] {
            let wire = unused_key(&issued, "confirm");
            assert_eq!(wire, expected);
            issued.insert(wire);
        }
    }

    #[test]
    fn a_status_message_is_bounded_and_cut_at_a_character() {
        let progress = |message: String| Progress {
            done: 1,
            total: Some(2),
            message: Some(message),
        };
        let long = status_message(&progress("é".repeat(4000)));
        assert!(long.len() <= MAX_STATUS_MESSAGE, "{}", long.len());
        assert!(long.starts_with("1/2: é") && long.ends_with('…'));
        assert_eq!(status_message(&progress("ok".into())), "1/2: ok");
    }

    #[test]
    fn times_are_iso_8601_in_utc() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
    }
}
