//! The task rounds one process runs: each run's line to its task, and the table of rounds going
//! on here, which a pipeline owns (one per server, shared by its fronts), so that nothing of it
//! is global to the process.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use super::TaskStore;
use super::record::status_message;
use crate::ask::Round;
use crate::call::CallOutcome;
use crate::idempotency::IdempotencyKey;
use crate::signals::{CallSignals, Cancellation, FirstWait};

/// A run's line to its task: its cancellation, its last progress, and whether the tool has
/// waited yet.
#[derive(Clone, Default)]
pub struct Line {
    pub cancellation: Cancellation,
    progress: Arc<Mutex<Option<String>>>,
    pub first_wait: Arc<FirstWait>,
}

impl Line {
    pub fn signals(&self, round: &Round) -> CallSignals {
        let progress = self.progress.clone();
        CallSignals::new()
            .cancelled_by(&self.cancellation)
            .asking(round)
            .on_first_wait(&self.first_wait)
            .on_progress(move |p| {
                *progress.lock().unwrap_or_else(|e| e.into_inner()) = Some(status_message(&p));
            })
    }

    pub fn progress(&self) -> Option<String> {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

pub type Run = Pin<Box<dyn Future<Output = CallOutcome> + Send>>;

/// Starts a round's run anew.
pub type Again = Box<dyn Fn() -> Run + Send + Sync>;

/// A task's round going on in this process.
struct Running {
    tasks: TaskStore,
    key: IdempotencyKey,
    cancellation: Cancellation,
}

/// The rounds going on in this process, by their lease's holder: cancelled at once by a
/// `tasks/cancel` that lands here, and marked interrupted if the process stops with them (what
/// one process drives, as its count of calls in flight: nothing a later request needs). Cheap
/// to clone: clones share the table.
#[derive(Clone, Default)]
pub struct Runs(Arc<Mutex<HashMap<String, Running>>>);

impl Runs {
    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes `holder`'s round of the task `key`, run here.
    pub fn insert(&self, holder: &str, tasks: &TaskStore, key: &IdempotencyKey, line: &Line) {
        let here = Running {
            tasks: tasks.clone(),
            key: key.clone(),
            cancellation: line.cancellation.clone(),
        };
        self.running().insert(holder.to_owned(), here);
    }

    /// Forgets `holder`'s round, which has ended here.
    pub fn remove(&self, holder: &str) {
        self.running().remove(holder);
    }

    /// Stops `holder`'s round at once, if it runs here.
    pub fn cancel(&self, holder: &str) {
        if let Some(run) = self.running().get(holder) {
            run.cancellation.cancel();
        }
    }

    /// Marks the tasks this process still runs as failed, the server having stopped: for a
    /// shutdown whose grace period ran out with task runs going.
    pub async fn interrupt(&self) {
        let running: Vec<(String, TaskStore, IdempotencyKey)> = (self.running().iter())
            .map(|(holder, run)| (holder.clone(), run.tasks.clone(), run.key.clone()))
            .collect();
        for (holder, tasks, key) in running {
            let why = "The server stopped before the task ended.";
            let ended = tasks
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
}

/// How a task's first round went by the time the tool first waited.
pub enum FirstRound {
    /// The tool waited: the run goes on as the task's.
    Waited(Run),
    /// It answered before it ever waited: a plain call's answer.
    Answered(CallOutcome),
}

/// Runs a task's first round until the tool first waits (see [`FirstWait`]).
pub async fn until_first_wait(mut run: Run, line: &Line) -> FirstRound {
    let ended = tokio::select! {
        biased;
        outcome = &mut run => Some(outcome),
        () = line.first_wait.wait() => None,
    };
    match ended {
        // It ended after it waited (a sync tool's thread, say): a task all the same, that
        // one rule decides, not how quickly the run went.
        Some(outcome) if line.first_wait.waited() => {
            FirstRound::Waited(Box::pin(std::future::ready(outcome)))
        }
        Some(outcome) => FirstRound::Answered(outcome),
        None => FirstRound::Waited(run),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Pipeline;
    use crate::registry::Registry;
    use crate::tasks::{Record, Render, Status, TaskConfig, TaskStore};

    fn pipeline() -> Pipeline {
        Pipeline::new(
            Registry::builder()
                .build()
                .expect("an empty registry builds"),
        )
    }

    /// A task made in `tasks`' store, held by `holder`.
    async fn held_task(tasks: &TaskStore, holder: &str, id: &str) -> IdempotencyKey {
        let key = TaskStore::key(None, None, id);
        let render = Render {
            any_output: false,
            per_caller: false,
            contents: false,
        };
        let (lease, now) = (TaskConfig::default().lease, crate::time::now_ms());
        let record = Record::starting(
            "T.A@1.0.0".into(),
            None,
            vec![],
            render,
            holder,
            lease,
            now,
            60_000,
        );
        let made = tasks.make_task(&key, &record, &serde_json::json!({})).await;
        assert!(matches!(made, Ok(None)), "the task is new");
        key
    }

    async fn status(tasks: &TaskStore, key: &IdempotencyKey) -> Status {
        let read = tasks.read_task(key).await.ok().and_then(|read| read.record);
        read.expect("the task is kept").status
    }

    /// The rounds a pipeline runs are its own: a stopping server interrupts them, and neither
    /// cancels nor interrupts another pipeline's in the same process.
    #[tokio::test]
    async fn each_pipeline_interrupts_and_cancels_only_its_own_runs() {
        let (one, other) = (pipeline(), pipeline());
        let shape: crate::tasks::store::Shape = |_, _| None;
        let tasks = TaskStore::new(one.clone(), TaskConfig::default(), shape);
        let elsewhere = TaskStore::new(other.clone(), TaskConfig::default(), shape);
        let key = held_task(&tasks, "here", "t1").await;
        let other_key = held_task(&elsewhere, "there", "t2").await;
        let (line, other_line) = (Line::default(), Line::default());
        one.task_runs().insert("here", &tasks, &key, &line);
        other
            .task_runs()
            .insert("there", &elsewhere, &other_key, &other_line);

        one.task_runs().cancel("there");
        assert!(!other_line.cancellation.is_cancelled());
        one.task_runs().cancel("here");
        assert!(line.cancellation.is_cancelled());

        one.task_runs().interrupt().await;
        assert_eq!(status(&tasks, &key).await, Status::Failed);
        assert_eq!(status(&elsewhere, &other_key).await, Status::Working);
        other.task_runs().interrupt().await;
        assert_eq!(status(&elsewhere, &other_key).await, Status::Failed);
    }
}
