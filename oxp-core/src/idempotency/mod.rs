//! `call_id` as an idempotency key: a call repeated with the same `call_id` (by the same
//! principal, for the same user) and the same request returns the first answer without running
//! the tool again, and a duplicate that arrives while the first still runs waits for it. The
//! same `call_id` with another request — another tool, another input — is refused: a `call_id`
//! names one request, and never returns the answer to a different one.
//!
//! A store decides, per key, whether a tool run happens at all: [`IdempotencyStore::once`] is
//! handed the run as a future and either drives it (the first time) or answers from what the
//! first run produced. A run outlives its caller: the first call drives it, and if that call is
//! dropped mid-run (its client disconnected) the run moves to a task of its own, so it cancels
//! nothing: the tool finishes, and the retry gets its answer.
//!
//! One outcome is not kept: a tool failure with `can_retry: true` (a timeout, say). The tool asked
//! to be tried again, so the retry runs it again.

mod fingerprint;
mod memory;

use std::fmt;
use std::time::Duration;

use futures_util::future::FutureExt;

use crate::outcome::CallOutcome;
use crate::protocol::ServerErrorResponse;

pub use fingerprint::Fingerprint;
pub use memory::InMemoryIdempotency;

/// The boxed future [`IdempotencyStore::once`] takes and returns, so that a store's author needs
/// nothing but this crate.
pub use futures_util::future::BoxFuture;

/// Who sent a call, for which user, and which `call_id` it carried: duplicates are only
/// duplicates within one principal and one user, so neither two tenants nor two end users
/// behind one API key can read each other's answers by reusing ids.
///
/// ```
/// use oxp_runtime::idempotency::IdempotencyKey;
/// let key = IdempotencyKey::new("jwt:ada", Some("ada@example.com".into()), "send-42");
/// assert_eq!(key.to_string(), "7:jwt:ada:15:ada@example.com:send-42");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct IdempotencyKey {
    /// The authenticated principal (`anonymous` when authentication is off).
    pub principal: String,
    /// The `user_id` of the call's context, if it had one.
    pub user: Option<String>,
    /// The client's `call_id`.
    pub call_id: String,
}

impl IdempotencyKey {
    /// The key of `call_id`, sent by `principal` for `user`.
    ///
    /// ```
    /// let key = oxp_runtime::idempotency::IdempotencyKey::new("anonymous", None, "c1");
    /// assert_eq!(key.call_id, "c1");
    /// ```
    pub fn new(
        principal: impl Into<String>,
        user: Option<String>,
        call_id: impl Into<String>,
    ) -> Self {
        IdempotencyKey {
            principal: principal.into(),
            user,
            call_id: call_id.into(),
        }
    }
}

impl fmt::Display for IdempotencyKey {
    /// A flat form that cannot be confused across principals or users: each part before the
    /// `call_id` is prefixed with its length (`-` for no user).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:", self.principal.len(), self.principal)?;
        match &self.user {
            Some(user) => write!(f, "{}:{user}:", user.len())?,
            None => f.write_str("-:")?,
        }
        f.write_str(&self.call_id)
    }
}

/// The answer to a `call_id` reused for another request: a `400` that says so, the tool not run.
///
/// ```
/// let outcome = oxp_runtime::idempotency::reused_call_id();
/// assert_eq!(outcome.status(), 400);
/// ```
pub fn reused_call_id() -> CallOutcome {
    CallOutcome::Rejected(ServerErrorResponse {
        message: "The call_id was already used for another request; send a new call_id for a \
                  new request."
            .into(),
        developer_message: Some(
            "a call_id names one request: the same tool and input (a retry) get the first \
             answer, anything else is refused"
                .into(),
        ),
        missing_requirements: None,
    })
}

/// The answer to a call whose run's process stopped before it answered (its claim's lease
/// lapsed): the call is not run again under the same `call_id`, and its caller is told so.
///
/// ```
/// let outcome = oxp_runtime::idempotency::interrupted();
/// assert_eq!(outcome.status(), 400);
/// ```
pub fn interrupted() -> CallOutcome {
    CallOutcome::Rejected(ServerErrorResponse {
        message: "The server running this call stopped before it answered, so the call may \
                  have partly run (or all of it). Send a new call_id to run it again."
            .into(),
        developer_message: Some(
            "the run's lease lapsed without its process renewing it (OXP_LEASE_MS): the \
             process died, stalled past the lease, or lost its connection to the store; this \
             stays the call_id's answer"
                .into(),
        ),
        missing_requirements: None,
    })
}

/// Runs each key's call at most once within the store's time-to-live.
///
/// ```
/// use oxp_runtime::call::CallOutcome;
/// use oxp_runtime::idempotency::{BoxFuture, Fingerprint, IdempotencyKey, IdempotencyStore};
///
/// /// Keeps nothing: every call runs (what `Pipeline::idempotency(None)` does, as a store).
/// struct Forgetful;
///
/// impl IdempotencyStore for Forgetful {
///     fn once<'a>(
///         &'a self,
///         _key: IdempotencyKey,
///         _fingerprint: Fingerprint,
///         run: BoxFuture<'static, CallOutcome>,
///     ) -> BoxFuture<'a, CallOutcome> {
///         run
///     }
/// }
///
/// /// Ring a bell.
/// #[oxp_runtime::tool(toolkit = "Bell", version = "1.0.0")]
/// async fn ring() {}
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let registry = oxp_runtime::Registry::builder().tool(ring::TOOL).build().unwrap();
/// let pipeline = oxp_runtime::call::Pipeline::new(registry).idempotency(Some(Forgetful));
/// for _ in 0..2 {
///     let request = serde_json::from_str(r#"{"tool_id": "Bell.Ring", "call_id": "r1"}"#).unwrap();
///     pipeline.call(request).await;
/// }
/// assert_eq!(pipeline.stats().started, 2, "nothing kept: the same call_id ran twice");
/// # });
/// ```
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Drives `run` if `key` is new; answers as the first run with `key` did if `fingerprint`
    /// matches its (waiting for it if it is still running); answers [`reused_call_id`] if it
    /// does not. `run` is dropped unpolled when it is not needed.
    fn once<'a>(
        &'a self,
        key: IdempotencyKey,
        fingerprint: Fingerprint,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, CallOutcome>;

    /// [`once`](Self::once), also saying how the answer came (for `oxp_idempotency_total`).
    /// The pipeline calls this one. Its default tells a fresh run by whether `run` was polled
    /// and a conflict by its `400`, and calls every other answer replayed; a store that can
    /// tell a replay from a wait for a run in flight says so by overriding it.
    ///
    /// ```
    /// use futures_util::FutureExt;
    /// use oxp_runtime::call::CallOutcome;
    /// use oxp_runtime::idempotency::{Fingerprint, IdempotencyKey, IdempotencyStore, InMemoryIdempotency, Reuse};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let store = InMemoryIdempotency::default();
    /// let key = || IdempotencyKey::new("anonymous", None, "c1");
    /// let fingerprint = Fingerprint::of("Bell.Ring@1.0.0", &serde_json::json!({}), &[]);
    /// let run = || async { CallOutcome::unavailable("a stand-in answer") }.boxed();
    /// let (_, first) = store.once_reporting(key(), fingerprint, run()).await;
    /// assert_eq!(first, Reuse::Fresh);
    /// # });
    /// ```
    fn once_reporting<'a>(
        &'a self,
        key: IdempotencyKey,
        fingerprint: Fingerprint,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, (CallOutcome, Reuse)> {
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran.clone();
        let run = futures_util::future::lazy(move |_| {
            flag.store(true, std::sync::atomic::Ordering::Relaxed)
        })
        .then(|()| run)
        .boxed();
        self.once(key, fingerprint, run)
            .map(move |outcome| {
                let reuse = if ran.load(std::sync::atomic::Ordering::Relaxed) {
                    Reuse::Fresh
                } else if matches!(outcome, CallOutcome::Rejected(_)) {
                    Reuse::Conflict
                } else {
                    Reuse::Replayed
                };
                (outcome, reuse)
            })
            .boxed()
    }

    /// How much the store keeps, if it knows cheaply (for the metrics, read at each scrape);
    /// `None` by default.
    ///
    /// ```
    /// use oxp_runtime::idempotency::{IdempotencyStore, InMemoryIdempotency};
    /// assert_eq!(InMemoryIdempotency::default().size().unwrap().entries, 0);
    /// ```
    fn size(&self) -> Option<StoreSize> {
        None
    }

    /// Waits until the writes the store does on its own are done (an answer it keeps for a
    /// caller that hung up mid-run): a server's drain waits for this after its last call, so
    /// the process never exits owing one. Done at once by default.
    ///
    /// ```
    /// use oxp_runtime::idempotency::{IdempotencyStore, InMemoryIdempotency};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// InMemoryIdempotency::default().settled().await;
    /// # });
    /// ```
    fn settled(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// The store's clock, in milliseconds since the Unix epoch: what a task's lease and times
    /// are judged by, so that replicas whose clocks disagree agree on them. The process's own
    /// clock by default (right for a store in one process); a shared store answers with its
    /// own (Redis's `TIME`).
    ///
    /// ```
    /// use oxp_runtime::idempotency::{IdempotencyStore, InMemoryIdempotency};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let now = InMemoryIdempotency::default().now_ms().await.unwrap();
    /// assert!(now > 1_700_000_000_000);
    /// # });
    /// ```
    fn now_ms(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(std::future::ready(Ok(crate::time::now_ms())))
    }

    /// Keeps `body` under `key` for `ttl` from now, by the store's clock, if nothing is kept
    /// there yet: `Ok(false)` when something is. A task's record (see [`tasks`](crate::tasks))
    /// is written so, once, before its id is given out.
    ///
    /// The three record methods are what tasks need of a store; a store without them (the
    /// default) serves calls with a `call_id` but no tasks: a tool that may run as a task runs
    /// as a plain call, and one that must is refused.
    fn create_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        body: String,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let _ = (key, body, ttl);
        no_records()
    }

    /// The record under `key` with its version, if one is kept and has not expired.
    fn read_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<Versioned>, StoreError>> {
        let _ = key;
        no_records()
    }

    /// Replaces the record under `key` with `body` if it is still at `version` (its version
    /// then grows by one), keeping its expiry: `Ok(false)` when another write came first, or
    /// the record is gone. Every change to a task goes through this, so replicas that race
    /// to change one never lose each other's writes.
    fn replace_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        version: u64,
        body: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let _ = (key, version, body);
        no_records()
    }

    /// Keeps `blob` beside the record under `key`, counted in its bytes (not as another
    /// record), if the record is kept and holds none yet: `Ok(false)` when it does, or the
    /// record is gone. What never changes over a record's life (a task's input) is kept so,
    /// out of the body every replacement writes.
    ///
    /// ```
    /// use oxp_runtime::idempotency::{IdempotencyKey, IdempotencyStore, InMemoryIdempotency};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let store = InMemoryIdempotency::default();
    /// let key = IdempotencyKey::new("anonymous", None, "t1");
    /// let ttl = std::time::Duration::from_secs(60);
    /// assert!(store.create_record(&key, "{}".into(), ttl).await.unwrap());
    /// assert!(store.attach(&key, "[1, 2, 3]".into()).await.unwrap());
    /// assert_eq!(store.attachment(&key).await.unwrap().as_deref(), Some("[1, 2, 3]"));
    /// store.detach(&key).await.unwrap();
    /// assert_eq!(store.attachment(&key).await.unwrap(), None);
    /// # });
    /// ```
    fn attach<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        blob: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let _ = (key, blob);
        no_records()
    }

    /// What [`attach`](Self::attach) kept beside the record under `key`, if anything.
    fn attachment<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        let _ = key;
        no_records()
    }

    /// Forgets what was kept beside the record under `key`, freeing its bytes.
    fn detach<'a>(&'a self, key: &'a IdempotencyKey) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = key;
        no_records()
    }

    /// Forgets the record under `key`: one made for a call that turned out not to need it.
    fn remove_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = key;
        no_records()
    }
}

/// By default one caller may have kept a task record count of the store's capacity divided by
/// this (`OXP_TASKS_PER_CALLER`): no caller alone fills the store for the others.
///
/// ```
/// use oxp_runtime::idempotency::{CALLERS_SHARING, DEFAULT_CAPACITY};
/// assert_eq!(DEFAULT_CAPACITY / CALLERS_SHARING, 1000);
/// ```
pub const CALLERS_SHARING: u64 = 10;

/// Who `key` is for, without its call: the part of its flat form ([`IdempotencyKey`]'s
/// `Display`) before the `call_id`.
#[cfg(feature = "redis")]
pub(crate) fn owner(key: &IdempotencyKey) -> String {
    IdempotencyKey::new(key.principal.clone(), key.user.clone(), "").to_string()
}

/// A caller's share of `total` bytes when it may keep `per_caller` of `capacity` entries: the
/// same fraction of each budget.
pub(crate) fn share_of(total: u64, per_caller: u64, capacity: u64) -> u64 {
    let share = u128::from(total) * u128::from(per_caller) / u128::from(capacity.max(1));
    u64::try_from(share)
        .unwrap_or(u64::MAX)
        .clamp(1, total.max(1))
}

/// The room each record holds in reserve from when it is made: it counts against the byte
/// budget as at least its first size and this much more, so that its later small writes (a
/// task's status, progress or end, which drops what only the running task needed) always fit
/// and a full store never strands a task; growth past the reserve (a result, answers) needs
/// room like a new record.
pub(crate) const RECORD_SLACK: usize = 4096;

/// What a store without records answers each record method with.
fn no_records<'a, T: Send + 'a>() -> BoxFuture<'a, Result<T, StoreError>> {
    Box::pin(std::future::ready(Err(StoreError::NoRecords)))
}

/// A record's body and its version, as [`IdempotencyStore::read_record`] returns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// Grows by one with each replacement.
    pub version: u64,
    /// The record, as it was written (JSON).
    pub body: String,
    /// The store's clock when it was read ([`IdempotencyStore::now_ms`]).
    pub now: u64,
}

/// Why a store could not keep or read a record.
///
/// ```
/// use oxp_runtime::idempotency::StoreError;
/// assert!(StoreError::Full.to_string().starts_with("the store has no room"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The store keeps no records (a custom store that does not implement them).
    NoRecords,
    /// Its count or byte budget is taken by records kept (a task's record is kept for its time
    /// to live, even once the task ends).
    Full,
    /// The caller (a principal and user) has as many records kept as one caller may.
    CallerFull,
    /// It could not be reached (Redis down): nothing is run unguarded.
    Unreachable(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NoRecords => f.write_str("the store keeps no task records"),
            StoreError::Full => f.write_str(
                "the store has no room for another task (OXP_IDEMPOTENCY_CAPACITY records, \
                 OXP_IDEMPOTENCY_MAX_BYTES bytes; a task is kept for OXP_TASK_TTL_MS, even \
                 once it ends)",
            ),
            StoreError::CallerFull => f.write_str(
                "this caller has as many tasks kept as one caller may (OXP_TASKS_PER_CALLER; a \
                 task is kept for OXP_TASK_TTL_MS, even once it ends)",
            ),
            StoreError::Unreachable(why) => write!(f, "the store is unreachable: {why}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// How an idempotency store answered a call with a `call_id`: the `result` label of
/// `oxp_idempotency_total`.
///
/// ```
/// use oxp_runtime::idempotency::Reuse;
/// assert_eq!(Reuse::Waited.as_str(), "waited");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reuse {
    /// The first call with its key: the tool ran.
    Fresh,
    /// A retry, answered with the answer kept from the first run.
    Replayed,
    /// A retry while the first run was still going on, answered when it ended.
    Waited,
    /// The same `call_id` with another request: refused.
    Conflict,
    /// The store could not be asked (Redis unreachable): refused as temporarily unavailable
    /// rather than risk running the tool twice.
    Unavailable,
}

impl Reuse {
    #[doc(hidden)]
    pub const ALL: [Reuse; 5] = [
        Reuse::Fresh,
        Reuse::Replayed,
        Reuse::Waited,
        Reuse::Conflict,
        Reuse::Unavailable,
    ];

    /// The label value.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::idempotency::Reuse::Fresh.as_str(), "fresh");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Reuse::Fresh => "fresh",
            Reuse::Replayed => "replayed",
            Reuse::Waited => "waited",
            Reuse::Conflict => "conflict",
            Reuse::Unavailable => "unavailable",
        }
    }
}

/// What an idempotency store keeps: answers (and runs in flight), and their bytes as JSON.
///
/// ```
/// use oxp_runtime::idempotency::{IdempotencyStore, InMemoryIdempotency};
/// let size = InMemoryIdempotency::default().size().unwrap();
/// assert_eq!((size.entries, size.bytes), (0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreSize {
    /// Keys kept.
    pub entries: u64,
    /// Bytes of kept answers, as JSON.
    pub bytes: u64,
}

/// A boxed store is a store: what a configuration that picks one at run time holds.
impl<S: IdempotencyStore + ?Sized> IdempotencyStore for Box<S> {
    fn once<'a>(
        &'a self,
        key: IdempotencyKey,
        fingerprint: Fingerprint,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, CallOutcome> {
        (**self).once(key, fingerprint, run)
    }

    fn once_reporting<'a>(
        &'a self,
        key: IdempotencyKey,
        fingerprint: Fingerprint,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, (CallOutcome, Reuse)> {
        (**self).once_reporting(key, fingerprint, run)
    }

    fn size(&self) -> Option<StoreSize> {
        (**self).size()
    }

    fn settled(&self) -> BoxFuture<'_, ()> {
        (**self).settled()
    }

    fn now_ms(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        (**self).now_ms()
    }

    fn create_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        body: String,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        (**self).create_record(key, body, ttl)
    }

    fn read_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<Versioned>, StoreError>> {
        (**self).read_record(key)
    }

    fn replace_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        version: u64,
        body: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        (**self).replace_record(key, version, body)
    }

    fn remove_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        (**self).remove_record(key)
    }

    fn attach<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        blob: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        (**self).attach(key, blob)
    }

    fn attachment<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        (**self).attachment(key)
    }

    fn detach<'a>(&'a self, key: &'a IdempotencyKey) -> BoxFuture<'a, Result<(), StoreError>> {
        (**self).detach(key)
    }
}

/// Answers kept by default.
///
/// ```
/// use oxp_runtime::idempotency::{InMemoryIdempotency, DEFAULT_CAPACITY, DEFAULT_TTL};
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// // A busy server: ten times the answers, each kept as long as by default.
/// let store = InMemoryIdempotency::new(DEFAULT_CAPACITY * 10, DEFAULT_TTL);
/// let pipeline = oxp_runtime::call::Pipeline::new(registry).idempotency(Some(store));
/// ```
pub const DEFAULT_CAPACITY: u64 = 10_000;
/// How long an answer is kept by default.
///
/// ```
/// assert_eq!(oxp_runtime::idempotency::DEFAULT_TTL.as_secs(), 600);
/// ```
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// The bytes of answers kept by default (as their JSON), 64 MiB.
///
/// ```
/// use oxp_runtime::idempotency::{InMemoryIdempotency, DEFAULT_MAX_BYTES};
/// # let registry = oxp_runtime::Registry::builder().build().unwrap();
/// // A small container: a quarter of the default memory for kept answers.
/// let store = InMemoryIdempotency::default().max_bytes(DEFAULT_MAX_BYTES / 4);
/// let pipeline = oxp_runtime::call::Pipeline::new(registry).idempotency(Some(store));
/// ```
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// A run's task ended without an outcome. The run contains panics itself, so this means the
/// runtime is shutting down: worth a retry elsewhere.
#[cfg(feature = "redis")]
pub(crate) fn task_ended(error: tokio::task::JoinError) -> CallOutcome {
    CallOutcome::unavailable(format!("the tool's task ended: {error}"))
}

#[cfg(feature = "redis")]
mod redis_store;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use redis_store::RedisIdempotency;
