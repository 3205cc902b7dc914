//! Tasks in the pipeline's store: made, read, changed and ended by compare-and-set on their
//! records, and their rounds driven under a lease.
//!
//! A task is changed only by compare-and-set on its record, so replicas that race (a
//! `tasks/update` on one, the run's end on another) never lose each other's writes; and only
//! the holder of a task's lease writes its end, so a run that lost its lease (its process
//! stalled past it) never overwrites what another made of the task.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::record::{LAPSED, Record, Render, Status, TaskError, parse, rpc_error};
use super::runs::{Again, Line, Run};
use crate::ask::Round;
use crate::call::{CallOutcome, Owed, Pipeline};
use crate::idempotency::{IdempotencyKey, IdempotencyStore, StoreError};
use crate::protocol::{CallResult, CallToolResponse};

/// The principal of a task key whose caller did not authenticate.
pub const ANONYMOUS: &str = "anonymous";

/// How tasks are kept and run (`OXP_TASK_TTL_MS`, `OXP_LEASE_MS`).
#[derive(Clone, Copy, Debug)]
pub struct TaskConfig {
    /// How long a task is kept from its creation.
    pub ttl: Duration,
    /// How long a run's lease holds without renewal.
    pub lease: Duration,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            ttl: super::DEFAULT_TTL,
            lease: super::DEFAULT_LEASE,
        }
    }
}

/// What a round that completed is kept as, in the terms of the front that made the task: what
/// a client of that front would have been answered by the call.
pub type Shape = fn(CallOutcome, &Render) -> Option<Value>;

/// A task as read: the record, if there is one, and the holder this process took its round up
/// as, when it was one handed back by a replica shutting down (the front runs the round).
pub struct Read {
    pub record: Option<Record>,
    pub taken: Option<String>,
}

/// The tasks of a pipeline's store, kept as `config` says, their results shaped by `shape`.
/// Cheap to clone.
#[derive(Clone)]
pub struct TaskStore {
    pipeline: Pipeline,
    config: TaskConfig,
    shape: Shape,
}

impl TaskStore {
    pub fn new(pipeline: Pipeline, config: TaskConfig, shape: Shape) -> Self {
        TaskStore {
            pipeline,
            config,
            shape,
        }
    }

    pub fn store(&self) -> Result<&Arc<dyn IdempotencyStore>, StoreError> {
        self.pipeline.store().ok_or(StoreError::NoRecords)
    }

    /// The key a task is kept under: its id, within its caller and user.
    pub fn key(principal: Option<&str>, user: Option<String>, id: &str) -> IdempotencyKey {
        IdempotencyKey::new(principal.unwrap_or(ANONYMOUS), user, id)
    }

    pub fn count_task(&self, status: Status) {
        if let Some(metrics) = self.pipeline.metrics_handle() {
            metrics.task(status.as_str());
        }
    }

    /// Reads a task as it stands; one whose run's process stopped renewing its lease is
    /// `failed` from then on.
    pub async fn read_task(&self, key: &IdempotencyKey) -> Result<Read, TaskError> {
        let Some(found) = self.store()?.read_record(key).await? else {
            return Ok(Read {
                record: None,
                taken: None,
            });
        };
        let record = parse(&found.body)?;
        if record.unheld() && !self.pipeline.is_draining() {
            return self.take_up(key).await;
        }
        if !record.lapsed(found.now) {
            return Ok(Read {
                record: Some(record),
                taken: None,
            });
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
        Ok(Read {
            record: ended,
            taken: None,
        })
    }

    /// Hands a round that never ran back to the store, its answers kept: the task stays
    /// `working`, held by no one, until a replica that can run it reads it.
    async fn release(&self, key: &IdempotencyKey, holder: &str) -> Result<(), TaskError> {
        self.change_task(key, |record, now| record.release(holder, now))
            .await
            .map(drop)
    }

    /// Takes up, here, a round handed back by a replica that was shutting down: the task as it
    /// then is, and the holder it was taken as.
    async fn take_up(&self, key: &IdempotencyKey) -> Result<Read, TaskError> {
        let holder = crate::random::uuid_v4().simple();
        let mut taken = false;
        let record = self
            .change_task(key, |record, now| {
                taken = record.take(&holder, self.config.lease, now);
                taken
            })
            .await?;
        Ok(Read {
            taken: (taken && record.is_some()).then_some(holder),
            record,
        })
    }

    /// Changes a task by `change` (which says whether it changed anything), again on the
    /// record as it now is when another write came first; the record as it ends, if any.
    /// `change` is given the store's clock as the record was read: every time in a record is
    /// the store's, so replicas whose clocks disagree agree on its lease.
    pub async fn change_task(
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

    /// Writes a new task's `record` under `key` (so that nothing runs unless the task can be
    /// kept), and its `input` beside it; `Some` of the record already there when the round
    /// that made it was sent again (a replay, or several at once).
    ///
    /// While the first is still before its first wait, the same round sent again waits to see
    /// whether a task comes of it (and returns `None`, to run the round itself, if not).
    pub async fn make_task(
        &self,
        key: &IdempotencyKey,
        record: &Record,
        input: &Value,
    ) -> Result<Option<Record>, StoreError> {
        let store = self.store()?;
        let body = serde_json::to_string(record).expect("records serialize");
        let patience = tokio::time::Instant::now() + self.config.lease;
        while !store
            .create_record(key, body.clone(), self.config.ttl)
            .await?
        {
            let existing = store
                .read_record(key)
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
                Some(existing) => return Ok(Some(existing)),
            }
        }
        // Counted in the caller's share as the task is made: one that could not keep its
        // input is refused now, not when its first round parks.
        let input = serde_json::to_string(input).expect("inputs serialize");
        if let Err(error) = store.attach(key, input).await {
            self.unmake_task(key).await;
            return Err(error);
        }
        Ok(None)
    }

    /// Removes a task just made whose first round answered before it ever waited: a plain
    /// call's answer, which the store does not keep as a task.
    pub async fn unmake_task(&self, key: &IdempotencyKey) {
        let Ok(store) = self.store() else { return };
        if let Err(error) = store.remove_record(key).await {
            tracing::warn!(%error, "an unused task record could not be removed");
        }
    }

    /// Goes on with a task's first round, past its first wait, as the task's: it is counted,
    /// marked started, and driven to its end beside the caller, who is answered with the task.
    pub fn hand_off(
        &self,
        key: IdempotencyKey,
        holder: String,
        run: Run,
        round: &Round,
        line: Line,
    ) {
        self.count_task(Status::Working);
        // Owed from here, while the run still holds its call's place: a drain waits for the
        // task's end to be written, not only for the tool.
        let owed = self.pipeline.owe();
        // Beside the run, which must not wait on the store to go on.
        let (tasks, started) = (self.clone(), key.clone());
        tokio::spawn(async move { tasks.started(&started).await });
        tokio::spawn(
            self.clone()
                .drive(key, holder, run, None, round.clone(), line, owed),
        );
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

    /// Drives a task's round to its end, renewing its lease every beat and stopping it when a
    /// client cancels the task, then writes what came of it.
    /// A round that `again` can start anew (one resumed by answers) and that found the server
    /// at its concurrency limit waits for a place, holding its lease, rather than end the task.
    #[allow(clippy::too_many_arguments)]
    pub async fn drive(
        self,
        key: IdempotencyKey,
        holder: String,
        run: Run,
        again: Option<Again>,
        round: Round,
        line: Line,
        _owed: Owed,
    ) {
        let runs = self.pipeline.task_runs().clone();
        runs.insert(&holder, &self, &key, &line);
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
                    runs.remove(&holder);
                    return;
                }
                Some(again) if unplaced => {
                    tokio::select! {
                        () = tokio::time::sleep(super::beat(self.config.lease)) => {}
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
        runs.remove(&holder);
    }

    /// Renews the run's lease every beat, hands on a cancellation and the tool's progress;
    /// returns only when the lease is lost. A renewal that cannot also take the progress (no
    /// room for it) renews the lease alone: progress never costs a run its lease.
    async fn heartbeat(&self, key: &IdempotencyKey, holder: &str, line: &Line) {
        let (lease, beat) = (self.config.lease, super::beat(self.config.lease));
        loop {
            tokio::time::sleep(beat).await;
            let mut progress = line.progress();
            let renewed = loop {
                let renewed = self
                    .change_task(key, |record, now| {
                        record.renew(holder, lease, &progress, now)
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
    pub async fn retrying<F, T>(
        &self,
        what: &str,
        mut write: impl FnMut() -> F,
    ) -> Result<T, TaskError>
    where
        F: Future<Output = Result<T, TaskError>>,
    {
        let deadline = tokio::time::Instant::now() + self.config.ttl;
        let mut pause = Duration::from_millis(20);
        loop {
            match write().await {
                Err(TaskError::Store(StoreError::Unreachable(error)))
                    if tokio::time::Instant::now() + pause < deadline =>
                {
                    tracing::warn!(%error, "could not {what} yet; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(super::beat(self.config.lease));
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
        let asks = (!outcome.succeeded() && round.unsupported().is_none())
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
                if let Some((ledger, asked)) = asks.as_ref().filter(|_| !cancelled) {
                    record.park(ledger, asked, now);
                    ended = Some(Status::InputRequired);
                    return true;
                }
                let (status, message) = if cancelled {
                    (
                        Status::Cancelled,
                        Some("Cancelled at the client's request.".to_owned()),
                    )
                } else if let Some(failure) = &failure {
                    record.error = Some(rpc_error(failure));
                    (
                        Status::Failed,
                        Some(format!("Tool execution failed: {failure}")),
                    )
                } else {
                    record.result = (self.shape)(outcome.clone(), &record.render);
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
    pub async fn forget_input(&self, key: &IdempotencyKey) {
        let Ok(store) = self.store() else { return };
        if let Err(error) = store.detach(key).await {
            tracing::warn!(%error, "the input of an ended task could not be forgotten");
        }
    }

    /// The input a task's next round runs on: kept beside it (or, in a record an earlier
    /// version wrote, in it).
    pub async fn input_of(
        &self,
        key: &IdempotencyKey,
        record: &Record,
    ) -> Result<Value, TaskError> {
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
}
