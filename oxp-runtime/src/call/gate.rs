//! Admission: the concurrency limit, draining for shutdown, and the counters that prove no call
//! was lost (every tool started also finished).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// How many sync tools may occupy blocking threads at once, by default.
pub const DEFAULT_MAX_BLOCKING: usize = 64;

/// Counts of a pipeline's work, for health checks, tests and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallStats {
    /// Calls admitted and not yet answered.
    pub active: u64,
    /// Tool runs started.
    pub started: u64,
    /// Tool runs finished (successfully or not, panics and timeouts included).
    pub finished: u64,
}

pub(crate) struct Gate {
    calls: Option<Arc<Semaphore>>,
    pub(super) blocking: Semaphore,
    draining: AtomicBool,
    active: AtomicU64,
    started: AtomicU64,
    finished: AtomicU64,
    /// Wakes `wait_idle`; only notified while someone waits, since `notify_waiters` takes a
    /// lock that every call would otherwise contend on twice.
    idle: Notify,
    waiting: AtomicU64,
}

/// Why a call was not admitted.
pub(crate) enum Refusal {
    Full,
    Draining,
}

impl Gate {
    pub(crate) fn new(max_calls: Option<usize>, max_blocking: usize) -> Self {
        Gate {
            calls: max_calls.map(|n| Arc::new(Semaphore::new(n))),
            blocking: Semaphore::new(max_blocking.max(1)),
            draining: AtomicBool::new(false),
            active: AtomicU64::new(0),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            idle: Notify::new(),
            waiting: AtomicU64::new(0),
        }
    }

    /// Admits a call now or refuses it now: a full server answers at once, it never queues.
    pub(crate) fn admit(self: &Arc<Self>) -> Result<Admission, Refusal> {
        if self.draining.load(Ordering::Acquire) {
            return Err(Refusal::Draining);
        }
        let permit = match &self.calls {
            Some(calls) => Some(
                calls
                    .clone()
                    .try_acquire_owned()
                    .map_err(|_| Refusal::Full)?,
            ),
            None => None,
        };
        self.active.fetch_add(1, Ordering::AcqRel);
        Ok(Admission {
            gate: self.clone(),
            _permit: permit,
        })
    }

    /// Marks a tool run as started until the guard drops.
    pub(super) fn started(&self) -> Running<'_> {
        self.started.fetch_add(1, Ordering::AcqRel);
        Running(self)
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
            active: self.active.load(Ordering::Acquire),
            started: self.started.load(Ordering::Acquire),
            finished: self.finished.load(Ordering::Acquire),
        }
    }

    fn is_idle(&self) -> bool {
        let stats = CallStats {
            active: self.active.load(Ordering::SeqCst),
            started: self.started.load(Ordering::SeqCst),
            finished: self.finished.load(Ordering::SeqCst),
        };
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

/// A call in the pipeline; dropping it (answered, or the client went away) lets another in.
pub(crate) struct Admission {
    gate: Arc<Gate>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.gate.active.fetch_sub(1, Ordering::SeqCst);
        self.gate.ended();
    }
}

/// A tool run in progress.
pub(super) struct Running<'a>(&'a Gate);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.finished.fetch_add(1, Ordering::SeqCst);
        self.0.ended();
    }
}
