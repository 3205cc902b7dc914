//! MCP's tasks extension (see [`crate::tasks`]) in MCP's terms: a call made a task, and
//! `tasks/get`, `tasks/update` and `tasks/cancel`. What a task is, how its record changes and
//! how its rounds run under a lease is the store's side ([`crate::tasks`]); this translates.

use std::collections::BTreeMap;

use rmcp::ErrorData as McpError;
use rmcp::model::{CreateTaskResult, DetailedTask, GetTaskResult, Task, TaskPayload, TaskStatus};
use serde_json::Value;

use super::McpServer;
use crate::ask::Round;
use crate::call::{CallMeta, CallOutcome, Owed};
use crate::idempotency::{IdempotencyKey, StoreError};
use crate::protocol::CallToolRequest;
use crate::tasks::{
    ANONYMOUS, Again, FirstRound, Line, Record, Run, Status, TaskError, TaskStore, until_first_wait,
};
pub(super) use crate::tasks::{Render, TaskConfig};
use crate::time::millis;

/// How often a client is told to poll.
const POLL_INTERVAL_MS: u64 = 1000;

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

fn mcp_error(error: TaskError) -> McpError {
    match error {
        TaskError::Store(error) => store_error(&error),
        TaskError::Unreadable(why) => {
            McpError::internal_error(format!("a task record is unreadable: {why}"), None)
        }
    }
}

fn not_found() -> McpError {
    McpError::invalid_params("Failed to retrieve task: Task not found", None)
}

fn store_error(error: &StoreError) -> McpError {
    McpError::internal_error(format!("The task store could not be used: {error}"), None)
}

fn wire(status: Status) -> TaskStatus {
    match status {
        Status::Working => TaskStatus::Working,
        Status::InputRequired => TaskStatus::InputRequired,
        Status::Completed => TaskStatus::Completed,
        Status::Failed => TaskStatus::Failed,
        Status::Cancelled => TaskStatus::Cancelled,
    }
}

/// What a completed round is kept as: what `tools/call` would have answered.
fn shape(outcome: CallOutcome, render: &Render) -> Option<Value> {
    let result = super::mcp_result(
        outcome,
        render.any_output,
        render.per_caller,
        render.contents,
    );
    serde_json::to_value(result).ok()
}

/// A task record as MCP shows it.
trait Shown {
    fn task(&self, id: &str) -> Task;
    fn detailed(&self, id: &str) -> DetailedTask;
}

impl Shown for Record {
    fn task(&self, id: &str) -> Task {
        let mut task = Task::new(id, wire(self.status), iso(self.created), iso(self.updated))
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
}

impl McpServer {
    /// This server's tasks in its pipeline's store.
    fn task_store(&self) -> TaskStore {
        TaskStore::new(self.pipeline.clone(), self.tasks, shape)
    }

    /// The key a task is kept under: its id, within its caller and user.
    pub(super) fn task_key(
        principal: Option<&str>,
        user: Option<String>,
        id: &str,
    ) -> IdempotencyKey {
        TaskStore::key(principal, user, id)
    }

    /// Reads a task as it stands (see [`TaskStore::read_task`]), running here the round it
    /// took up, if it took one up.
    async fn read_task(&self, key: &IdempotencyKey) -> Result<Option<Record>, TaskError> {
        let read = self.task_store().read_task(key).await?;
        if let (Some(record), Some(holder)) = (&read.record, read.taken) {
            self.next_round(key.clone(), holder, record.clone(), self.pipeline.owe());
        }
        Ok(read.record)
    }

    /// Starts a call that may be a task: its record is written first (so that nothing runs
    /// unless the task can be kept), then its run goes until the tool first waits (see
    /// [`FirstWait`](crate::signals::FirstWait)). If it answered by then, the record goes and
    /// the answer is the call's; else the run goes on as the task's, and the client is
    /// answered with the task.
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
        let tasks = self.task_store();
        let key = Self::task_key(seed.principal.as_deref(), seed.user.clone(), &seed.id);
        let holder = crate::random::uuid_v4().simple();
        let now = tasks.store()?.now_ms().await?;
        let record = Record::starting(
            seed.tool_id,
            seed.user,
            seed.can,
            seed.render,
            &holder,
            self.tasks.lease,
            now,
            millis(self.tasks.ttl),
        );
        if let Some(existing) = tasks.make_task(&key, &record, &seed.input).await? {
            return Ok(Begun::Task(CreateTaskResult::new(existing.task(&seed.id))));
        }
        let line = Line::default();
        let run = self.round_run(call, seed.principal, &line, round);
        match until_first_wait(run, &line).await {
            FirstRound::Waited(run) => {
                let task = CreateTaskResult::new(record.task(&seed.id));
                tasks.hand_off(key, holder, run, round, line);
                Ok(Begun::Task(task))
            }
            FirstRound::Answered(outcome) => {
                // The answer is the call's whatever the store says now: the tool has run.
                tasks.unmake_task(&key).await;
                Ok(Begun::Answered(outcome))
            }
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

    /// `tasks/get`.
    pub(super) async fn get_task_of(
        &self,
        key: &IdempotencyKey,
    ) -> Result<GetTaskResult, McpError> {
        let record = (self.read_task(key).await)
            .map_err(mcp_error)?
            .ok_or_else(not_found)?;
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
        let tasks = self.task_store();
        let holder = crate::random::uuid_v4().simple();
        let mut resumed = false;
        let record = tasks
            .change_task(key, |record, now| {
                record.answer(&responses, &holder, self.tasks.lease, now, &mut resumed)
            })
            .await
            .map_err(mcp_error)?
            .ok_or_else(not_found)?;
        if resumed {
            tasks.count_task(Status::Working);
            self.next_round(key.clone(), holder, record, self.pipeline.owe());
        }
        Ok(())
    }

    /// Runs a task's next round, with the answers its asks got, on its kept input.
    fn next_round(&self, key: IdempotencyKey, holder: String, record: Record, owed: Owed) {
        let server = self.clone();
        tokio::spawn(async move {
            let tasks = server.task_store();
            let input = match tasks.input_of(&key, &record).await {
                Ok(input) => input,
                Err(error) => {
                    let why = format!("The task's next round could not start: {error}");
                    let ended = tasks
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
            tasks
                .drive(key, holder, run, Some(again), round, line, owed)
                .await;
        });
    }

    /// `tasks/cancel`: a task waiting for answers ends at once; a running one is stopped at its
    /// run's next beat (at once when it runs here). One that has ended stays as it is.
    pub(super) async fn cancel_task_of(&self, key: &IdempotencyKey) -> Result<(), McpError> {
        let tasks = self.task_store();
        let mut ended = false;
        let record = tasks
            .change_task(key, |record, now| record.cancel(now, &mut ended))
            .await
            .map_err(mcp_error)?
            .ok_or_else(not_found)?;
        if ended {
            tasks.count_task(Status::Cancelled);
            tasks.forget_input(key).await;
        }
        if let Some(lease) = &record.lease {
            self.pipeline.task_runs().cancel(&lease.holder);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_iso_8601_in_utc() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
    }
}
