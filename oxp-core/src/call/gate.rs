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

/// Tool runs each core may have in flight by default: runs mostly wait on I/O, so many per
/// core, but a bounded number, so that clients sending fresh `call_id`s and hanging up cannot
/// start runs without end (a run outlives its client's hang-up).
const RUNS_PER_CORE: usize = 512;

/// The default cap on calls at once: 512 for each core the process may use
/// (`std::thread::available_parallelism`, which honours CPU affinity and cgroup quotas).
///
/// ```
/// let max = oxp_runtime::call::default_max_calls();
/// assert!(max >= 512);
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// // Twice the default, for tools that mostly wait on slow upstreams.
/// let pipeline = oxp_runtime::call::Pipeline::new(registry)
///     .limits(Some(2 * max), oxp_runtime::call::DEFAULT_MAX_BLOCKING);
/// ```
pub fn default_max_calls() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    cores.saturating_mul(RUNS_PER_CORE)
}

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
    /// Calls admitted and not yet ended: one counter, so that "idle" is one load and exact
    /// (a sum over stripes is not a snapshot: a call could end on one stripe and another start
    /// on a stripe already read).
    active: AtomicU64,
    /// Writes owed to the store after a run ended (a task's end, a round handed back): a drain
    /// waits for them as for calls, so a process never exits owing one.
    owed: AtomicU64,
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
            active: AtomicU64::new(0),
            owed: AtomicU64::new(0),
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
    ///
    /// The call is counted before `draining` is read, and both are `SeqCst` (as in `drain` and
    /// `is_idle`): either this sees the drain and takes its count back, or the drain's idleness
    /// check sees this call. Checking first and counting after would let a call in after the
    /// drain had found the server idle.
    pub(crate) fn admit(self: &Arc<Self>) -> Result<Admission, Refusal> {
        self.admit_between(|| ())
    }

    /// [`admit`](Self::admit), running `between` after the call is counted and before
    /// `draining` is read: where a drain on another thread may come, which a test puts there.
    #[inline(always)]
    fn admit_between(self: &Arc<Self>, between: impl FnOnce()) -> Result<Admission, Refusal> {
        self.active.fetch_add(1, Ordering::SeqCst);
        // From here on, dropping the admission takes every count back.
        let mut admission = Admission {
            gate: self.clone(),
            place: false,
        };
        between();
        if self.draining.load(Ordering::SeqCst) {
            return Err(Refusal::Draining);
        }
        if let Some(limit) = &self.calls {
            if limit.taken.fetch_add(1, Ordering::AcqRel) >= limit.max {
                limit.taken.fetch_sub(1, Ordering::AcqRel);
                return Err(Refusal::Full);
            }
        }
        admission.place = true;
        Ok(admission)
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

    /// Counts a write owed to the store until the returned guard drops: unlike a call, it is
    /// taken while draining too (what a run came to must be written whatever the server does).
    /// Taken while something that will owe it is still counted (a run, a request being
    /// answered), so a drain never finds the gate idle between the two.
    #[doc(hidden)]
    pub fn owe(self: &Arc<Self>) -> Owed {
        self.owed.fetch_add(1, Ordering::SeqCst);
        Owed { gate: self.clone() }
    }

    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
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
            active: self.active.load(Ordering::SeqCst),
            started: self.started.sum(),
            finished: self.finished.sum(),
        }
    }

    /// No call admitted and not ended. A tool run is inside its call's admission (the
    /// admission moves with the run into its task or onto its blocking thread, and is dropped
    /// after the run is counted finished), so this also means no tool runs.
    fn is_idle(&self) -> bool {
        self.active.load(Ordering::SeqCst) == 0 && self.owed.load(Ordering::SeqCst) == 0
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
    /// Whether it holds a place under the concurrency limit (a refused admission does not).
    place: bool,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if self.place {
            if let Some(limit) = &self.gate.calls {
                limit.taken.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.gate.active.fetch_sub(1, Ordering::SeqCst);
        self.gate.ended();
    }
}

/// A write owed to the store (see [`Gate::owe`]); dropping it says the write is done or given up.
#[doc(hidden)]
pub struct Owed {
    gate: Arc<Gate>,
}

impl Drop for Owed {
    fn drop(&mut self) {
        self.gate.owed.fetch_sub(1, Ordering::SeqCst);
        self.gate.ended();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shutdown's promise: once a drain has found the gate idle, no call is in, and none gets
    /// in after. The one interleaving that could break it, a drain that comes while a call is
    /// being admitted, put there on purpose: the drain must see the call (not idle), and the
    /// call must see the drain (refused). Reading `draining` before counting the call would
    /// find the gate idle here and then admit the call.
    #[test]
    fn a_drain_during_an_admission_sees_the_call_and_the_call_sees_the_drain() {
        let gate = Arc::new(Gate::new(None, 1));
        let mut idle_at_drain = None;
        let admitted = gate.admit_between(|| {
            gate.drain();
            idle_at_drain = Some(gate.is_idle());
        });
        assert_eq!(idle_at_drain, Some(false), "the drain found the gate idle");
        assert!(matches!(admitted, Err(Refusal::Draining)));
        assert!(gate.is_idle(), "the refused call's count was taken back");
    }

    #[test]
    fn a_drain_waits_for_the_writes_owed_after_the_runs() {
        let gate = Arc::new(Gate::new(None, 1));
        let run = gate.admit().ok().expect("admitted");
        let owed = gate.owe();
        drop(run);
        gate.drain();
        assert!(
            !gate.is_idle(),
            "the run ended, but its end is not written yet"
        );
        let more = gate.owe();
        drop(owed);
        assert!(
            !gate.is_idle(),
            "a write owed while draining is waited for too"
        );
        drop(more);
        assert!(gate.is_idle());
    }

    #[test]
    fn a_refused_admission_gives_back_its_count() {
        let gate = Arc::new(Gate::new(Some(1), 1));
        let first = gate.admit().ok().expect("room for one");
        assert!(matches!(gate.admit(), Err(Refusal::Full)));
        assert_eq!(gate.stats().active, 1);
        drop(first);
        gate.drain();
        assert!(matches!(gate.admit(), Err(Refusal::Draining)));
        assert!(gate.is_idle());
    }
}
