//! Admission: the concurrency limit, draining for shutdown, and the counters that prove no call
//! was lost (every tool started also finished).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::striped::Striped;

use tokio::sync::{Notify, Semaphore};

/// How many sync tools may occupy blocking threads at once, by default.
///
/// ```
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// use oxp_runtime::call::{Pipeline, DEFAULT_MAX_BLOCKING};
/// // A toolkit of mostly sync tools that wait on disks: twice the default threads.
/// let pipeline = Pipeline::new(registry).limits(Some(1024), DEFAULT_MAX_BLOCKING * 2);
/// let server = oxp_runtime::server::Server::from_pipeline(pipeline);
/// ```
pub const DEFAULT_MAX_BLOCKING: usize = 64;

/// Counts of a pipeline's work, for health checks, tests and metrics.
///
/// ```
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// let pipeline = oxp_runtime::call::Pipeline::new(registry);
/// let stats = pipeline.stats();
/// assert_eq!(stats.started, stats.finished);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallStats {
    /// Calls admitted whose work has not ended: a call holds its place until its tool run
    /// ends, answered or not (a client that hangs up does not free it; a sync tool's place is
    /// free only when its thread returns).
    pub active: u64,
    /// Tool runs started.
    pub started: u64,
    /// Tool runs finished (successfully or not, panics and timeouts included).
    pub finished: u64,
}

pub(crate) struct Gate {
    calls: Option<Limit>,
    /// Places for sync tools on blocking threads; a permit moves into the thread and is given
    /// back when the thread returns, not when the call is answered.
    pub(super) blocking: Arc<Semaphore>,
    /// How many places `blocking` has.
    max_blocking: usize,
    draining: AtomicBool,
    active: Striped,
    started: Striped,
    finished: Striped,
    /// Wakes `wait_idle`; only notified while someone waits, since `notify_waiters` takes a
    /// lock that every call would otherwise contend on twice.
    idle: Notify,
    waiting: AtomicU64,
}

/// At most `max` calls at once, and how many are in: a counter, not a semaphore, since a full
/// server never queues (and releasing a semaphore permit takes a lock).
struct Limit {
    max: usize,
    taken: AtomicUsize,
}

/// Why a call was not admitted.
pub(crate) enum Refusal {
    Full,
    Draining,
}

impl Gate {
    pub(crate) fn new(max_calls: Option<usize>, max_blocking: usize) -> Self {
        let max_blocking = max_blocking.clamp(1, Semaphore::MAX_PERMITS);
        Gate {
            calls: max_calls.map(|max| Limit {
                max,
                taken: AtomicUsize::new(0),
            }),
            blocking: Arc::new(Semaphore::new(max_blocking)),
            max_blocking,
            draining: AtomicBool::new(false),
            active: Striped::default(),
            started: Striped::default(),
            finished: Striped::default(),
            idle: Notify::new(),
            waiting: AtomicU64::new(0),
        }
    }

    /// Sync tools occupying a blocking thread now.
    pub(crate) fn blocking_in_use(&self) -> u64 {
        self.max_blocking
            .saturating_sub(self.blocking.available_permits()) as u64
    }

    /// Admits a call now or refuses it now: a full server answers at once, it never queues.
    /// The admission is owned, so that it can move with the call's run into a task or onto a
    /// blocking thread and stay taken for as long as the run goes on.
    pub(crate) fn admit(self: &Arc<Self>) -> Result<Admission, Refusal> {
        if self.draining.load(Ordering::Acquire) {
            return Err(Refusal::Draining);
        }
        if let Some(limit) = &self.calls {
            if limit.taken.fetch_add(1, Ordering::AcqRel) >= limit.max {
                limit.taken.fetch_sub(1, Ordering::AcqRel);
                return Err(Refusal::Full);
            }
        }
        self.active.add(1);
        Ok(Admission { gate: self.clone() })
    }

    /// Counts a tool run as started; [`run_finished`](Self::run_finished) must follow.
    pub(super) fn run_started(&self) {
        self.started.add(1);
    }

    /// Counts a started tool run as finished (whatever became of it).
    pub(super) fn run_finished(&self) {
        self.finished.add(1);
        self.ended();
    }

    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        self.idle.notify_waiters();
    }

    /// After a call or a run ended: wakes `wait_idle` if anyone waits. `SeqCst` on both sides
    /// (here after the count's change, there before reading the counts) means either the
    /// waiter sees the new count or this sees the waiter.
    fn ended(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.idle.notify_waiters();
        }
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub(crate) fn stats(&self) -> CallStats {
        CallStats {
            active: self.active.sum(),
            started: self.started.sum(),
            finished: self.finished.sum(),
        }
    }

    fn is_idle(&self) -> bool {
        let stats = self.stats();
        stats.active == 0 && stats.started == stats.finished
    }

    /// Waits until no call is active and no tool is running, or `limit` passes; `true` if idle.
    pub(crate) async fn wait_idle(&self, limit: Duration) -> bool {
        /// Counts a waiter for as long as it waits (also when the timeout drops it).
        struct Waiting<'a>(&'a AtomicU64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        let wait = async {
            loop {
                let notified = self.idle.notified();
                if self.is_idle() {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok()
    }
}

/// A call's place in the pipeline. It lives as long as the call's work: with the answer for a
/// call that never reaches a tool, with the run for one that does (in a task that outlives a
/// client's hang-up, or on the blocking thread of a sync tool). Dropping it lets another in.
pub(crate) struct Admission {
    gate: Arc<Gate>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(limit) = &self.gate.calls {
            limit.taken.fetch_sub(1, Ordering::AcqRel);
        }
        self.gate.active.add(u64::MAX); // −1, wrapping
        self.gate.ended();
    }
}
