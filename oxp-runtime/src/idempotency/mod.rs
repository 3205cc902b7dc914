//! `call_id` as an idempotency key: a call repeated with the same `call_id` (by the same
//! principal) returns the first answer without running the tool again, and a duplicate that
//! arrives while the first still runs waits for it.
//!
//! A store decides, per key, whether a tool run happens at all: [`IdempotencyStore::once`] is
//! handed the run as a future and either drives it (the first time) or answers from what the
//! first run produced. Runs are spawned as tasks of their own, so a client that disconnects
//! mid-call cancels nothing: the tool finishes, and the retry gets its answer.
//!
//! One outcome is not kept: a tool failure with `can_retry: true` (a timeout, say). The tool asked
//! to be tried again, so the retry runs it again.

use std::fmt;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};

use crate::call::CallOutcome;

/// Who sent a call and which `call_id` it carried: duplicates are only duplicates within one
/// principal, so two tenants cannot read each other's answers by guessing ids.
///
/// ```
/// use oxp_runtime::idempotency::IdempotencyKey;
/// let key = IdempotencyKey { principal: "jwt:ada".into(), call_id: "send-42".into() };
/// # let _ = key;
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdempotencyKey {
    /// The authenticated principal (`anonymous` when authentication is off).
    pub principal: String,
    /// The client's `call_id`.
    pub call_id: String,
}

impl fmt::Display for IdempotencyKey {
    /// A flat form that cannot be confused across principals (`7:tenant-a:c1`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}",
            self.principal.len(),
            self.principal,
            self.call_id
        )
    }
}

/// Runs each key's call at most once within the store's time-to-live.
///
/// ```
/// use oxp_runtime::call::CallOutcome;
/// use oxp_runtime::idempotency::{IdempotencyKey, IdempotencyStore};
/// use oxp_runtime::__private::BoxFuture;
///
/// /// Keeps nothing: every call runs (what `Pipeline::idempotency(None)` does, as a store).
/// struct Forgetful;
///
/// impl IdempotencyStore for Forgetful {
///     fn once<'a>(&'a self, _key: IdempotencyKey, run: BoxFuture<'static, CallOutcome>) -> BoxFuture<'a, CallOutcome> {
///         run
///     }
/// }
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// let pipeline = oxp_runtime::call::Pipeline::new(registry).idempotency(Some(Forgetful));
/// # let _ = pipeline;
/// ```
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Drives `run` if `key` is new, or answers as the first run with that key did (waiting for
    /// it if it is still running). `run` is dropped unpolled when it is not needed.
    fn once<'a>(
        &'a self,
        key: IdempotencyKey,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, CallOutcome>;
}

/// The default store: in memory, bounded in entries and time.
///
/// ```
/// use oxp_runtime::idempotency::InMemoryIdempotency;
///
/// let store = InMemoryIdempotency::new(10_000, std::time::Duration::from_secs(600));
/// # let _ = store;
/// ```
pub struct InMemoryIdempotency {
    runs: moka::future::Cache<IdempotencyKey, Shared<BoxFuture<'static, CallOutcome>>>,
}

impl fmt::Debug for InMemoryIdempotency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryIdempotency")
            .field("entries", &self.runs.entry_count())
            .finish()
    }
}

/// Entries kept by default.
///
/// ```
/// use oxp_runtime::idempotency::{InMemoryIdempotency, DEFAULT_CAPACITY, DEFAULT_TTL};
/// let store = InMemoryIdempotency::new(DEFAULT_CAPACITY * 10, DEFAULT_TTL);
/// # let _ = store;
/// ```
pub const DEFAULT_CAPACITY: u64 = 10_000;
/// How long an answer is kept by default.
///
/// ```
/// assert_eq!(oxp_runtime::idempotency::DEFAULT_TTL.as_secs(), 600);
/// ```
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);

impl Default for InMemoryIdempotency {
    fn default() -> Self {
        InMemoryIdempotency::new(DEFAULT_CAPACITY, DEFAULT_TTL)
    }
}

impl InMemoryIdempotency {
    /// Keeps at most `capacity` answers, each for `ttl`.
    ///
    /// ```
    /// let store = oxp_runtime::idempotency::InMemoryIdempotency::new(100_000, std::time::Duration::from_secs(3600));
    /// # let _ = store;
    /// ```
    pub fn new(capacity: u64, ttl: Duration) -> Self {
        InMemoryIdempotency {
            runs: moka::future::Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
        }
    }
}

/// Spawns `run` and shares its outcome with every waiter.
pub(crate) fn spawn_shared(
    run: BoxFuture<'static, CallOutcome>,
) -> Shared<BoxFuture<'static, CallOutcome>> {
    let task = tokio::spawn(run);
    async move { task.await.unwrap_or_else(task_ended) }
        .boxed()
        .shared()
}

/// A run's task ended without an outcome. The run contains panics itself, so this means the
/// runtime is shutting down: worth a retry elsewhere.
pub(crate) fn task_ended(error: tokio::task::JoinError) -> CallOutcome {
    CallOutcome::unavailable(format!("the tool's task ended: {error}"))
}

impl IdempotencyStore for InMemoryIdempotency {
    fn once<'a>(
        &'a self,
        key: IdempotencyKey,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, CallOutcome> {
        // The init future *returns* the shared run rather than awaiting it: awaiting inside
        // `or_insert_with` would make the run cancellable with its first caller.
        #[allow(clippy::async_yields_async)]
        Box::pin(async move {
            // `or_insert_with` inserts atomically: of concurrent first callers, one spawns the
            // run and the rest wait for it. The init has no await point, so it cannot be cancelled
            // half-way (which would let a second caller spawn the run again).
            let entry = self
                .runs
                .entry(key)
                .or_insert_with(async move { spawn_shared(run) })
                .await;
            let outcome = entry.value().clone().await;
            // A failure the tool calls retryable is not an answer to keep: the retry it asks
            // for must run the tool again. Only the caller that started the run forgets it.
            if entry.is_fresh() && outcome.is_retryable_failure() {
                self.runs.invalidate(entry.key()).await;
            }
            outcome
        })
    }
}

#[cfg(feature = "redis")]
mod redis_store;
#[cfg(feature = "redis")]
pub use redis_store::RedisIdempotency;
