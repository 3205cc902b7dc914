//! The Redis store: replicas behind a load balancer share it, so a retry that lands on another
//! replica still does not run the tool twice.
//!
//! Per key: `SET key pending:<fingerprint>:<holder> NX PX <ttl>` claims the run, and
//! `SET <prefix>lease:<key> <holder> PX <lease>` holds it; the claimer renews the lease while the tool runs
//! and stores the outcome (`SET key <fingerprint>:<json> PX <ttl>`); everyone else polls until
//! it is there, and is refused at once if its request's fingerprint is not the one stored. A
//! claim whose lease lapsed (its process died) is turned, by the first caller to see it, into
//! an answer saying so: the call is never run a second time without its caller knowing. When
//! Redis cannot be reached, the call is refused as temporarily unavailable rather than run
//! without the guarantee.
//!
//! Tasks' records (see [`crate::tasks`]) live beside answers under `<prefix>record:<key>`, a
//! hash of the body and its version, changed only by compare-and-set scripts.

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use redis::aio::ConnectionManager;

use super::{
    Fingerprint, IdempotencyKey, IdempotencyStore, Reuse, StoreError, StoreSize, Versioned,
};
use crate::outcome::CallOutcome;

const PENDING: &str = "pending";
const POLL: Duration = Duration::from_millis(20);
const SLACK: usize = super::RECORD_SLACK;
/// How often the time replicas share is set by Redis's clock again, besides every record read.
const CLOCK_CHECK: Duration = Duration::from_secs(30);

/// An [`IdempotencyStore`] in Redis (cargo feature `redis`).
///
/// ```no_run
/// # async fn run() -> redis::RedisResult<()> {
/// use oxp_runtime::idempotency::RedisIdempotency;
///
/// // Several replicas behind one balancer: a retried call_id is answered once, whichever gets it.
/// let store = RedisIdempotency::connect("redis://127.0.0.1:6379", std::time::Duration::from_secs(600)).await?;
/// let pipeline = oxp_runtime::call::Pipeline::new(oxp_runtime::Registry::from_inventory().unwrap())
///     .idempotency(Some(store));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisIdempotency {
    connection: ConnectionManager,
    ttl: Duration,
    lease: Duration,
    prefix: String,
    /// How many task records, how many bytes of them, and how many of one caller's, may be
    /// kept at once.
    record_limits: (u64, u64, u64),
    /// How many records (and bytes of them) this replica last saw kept, for the gauges.
    seen: std::sync::Arc<[std::sync::atomic::AtomicU64; 2]>,
    /// The runs this store drives on its own (so that a caller who hangs up still gets its
    /// answer kept) whose answers are not written yet: a drain waits for them.
    writes: std::sync::Arc<Writes>,
}

/// A count of writes under way, and what wakes whoever waits for none.
#[derive(Default)]
struct Writes {
    count: std::sync::atomic::AtomicU64,
    done: tokio::sync::Notify,
}

/// One of [`Writes`], counted until it drops.
struct Writing(std::sync::Arc<Writes>);

impl Writing {
    fn new(writes: &std::sync::Arc<Writes>) -> Self {
        writes
            .count
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Writing(writes.clone())
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        self.0
            .count
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.done.notify_waiters();
    }
}

impl std::fmt::Debug for RedisIdempotency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisIdempotency")
            .field("ttl", &self.ttl)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisIdempotency {
    /// Connects to `url` (`redis://host:port/db`); answers are kept for `ttl`.
    ///
    /// ```no_run
    /// # async fn run() -> redis::RedisResult<()> {
    /// use std::time::Duration;
    /// use oxp_runtime::idempotency::RedisIdempotency;
    ///
    /// let store = RedisIdempotency::connect("redis://127.0.0.1:6379/0", Duration::from_secs(3600))
    ///     .await?;
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry).idempotency(Some(store));
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str, ttl: Duration) -> redis::RedisResult<Self> {
        let client = redis::Client::open(url)?;
        let connection = ConnectionManager::new(client).await?;
        let store = RedisIdempotency {
            connection,
            ttl,
            lease: crate::tasks::DEFAULT_LEASE,
            prefix: "oxp:call:".to_owned(),
            record_limits: (
                super::DEFAULT_CAPACITY,
                super::DEFAULT_MAX_BYTES,
                super::DEFAULT_CAPACITY / super::CALLERS_SHARING,
            ),
            writes: Default::default(),
            seen: Default::default(),
        };
        // The time replicas share follows Redis's clock (see `crate::time`): read now, and
        // again now and then, for as long as the process runs.
        let time: (u64, u64) = redis::cmd("TIME")
            .query_async(&mut store.connection.clone())
            .await?;
        crate::time::store_read(time.0 * 1000 + time.1 / 1000);
        let watch = store.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(CLOCK_CHECK).await;
                if let Err(error) = watch.now_ms().await {
                    tracing::debug!(
                        target: "oxp_runtime::idempotency::redis_store",
                        %error, "could not read Redis's clock",
                    );
                }
            }
        });
        Ok(store)
    }

    /// How long a claimed run holds without its process renewing the claim (default
    /// [`DEFAULT_LEASE`](crate::tasks::DEFAULT_LEASE), `OXP_LEASE_MS`): the process renews it
    /// every tenth of that while the tool runs, however long that is; a process that dies is
    /// found out within it.
    ///
    /// ```no_run
    /// # async fn run() -> redis::RedisResult<()> {
    /// use std::time::Duration;
    /// use oxp_runtime::idempotency::RedisIdempotency;
    ///
    /// let store = RedisIdempotency::connect("redis://127.0.0.1:6379/0", Duration::from_secs(3600))
    ///     .await?
    ///     .lease(Duration::from_secs(10));
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry).idempotency(Some(store));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How many task records (see [`tasks`](crate::tasks)), and how many bytes of them, all
    /// the replicas may keep at once (default [`DEFAULT_CAPACITY`](super::DEFAULT_CAPACITY)
    /// and [`DEFAULT_MAX_BYTES`](super::DEFAULT_MAX_BYTES); `OXP_IDEMPOTENCY_CAPACITY` and
    /// `OXP_IDEMPOTENCY_MAX_BYTES`): a task past them is refused, and runs nothing. Answers to
    /// `call_id`s are bounded by their time-to-live.
    ///
    /// ```no_run
    /// # async fn run() -> redis::RedisResult<()> {
    /// use std::time::Duration;
    /// use oxp_runtime::idempotency::RedisIdempotency;
    ///
    /// let store = RedisIdempotency::connect("redis://127.0.0.1:6379/0", Duration::from_secs(3600))
    ///     .await?
    ///     .records(100_000, 1 << 30);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn records(mut self, capacity: u64, max_bytes: u64) -> Self {
        self.record_limits = (capacity, max_bytes, self.record_limits.2);
        self
    }

    /// How many task records one caller (a principal and user) may have kept at once (default
    /// a tenth of [`DEFAULT_CAPACITY`](super::DEFAULT_CAPACITY); `OXP_TASKS_PER_CALLER`), and
    /// the same fraction of the records' bytes, so that no caller fills the store for
    /// everyone: past either, that caller's new task is refused.
    ///
    /// ```no_run
    /// # async fn run() -> redis::RedisResult<()> {
    /// use std::time::Duration;
    /// use oxp_runtime::idempotency::RedisIdempotency;
    ///
    /// let store = RedisIdempotency::connect("redis://127.0.0.1:6379/0", Duration::from_secs(3600))
    ///     .await?
    ///     .records_per_caller(50);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn records_per_caller(mut self, count: u64) -> Self {
        self.record_limits.2 = count;
        self
    }

    /// The prefix of every key (default `oxp:call:`), to share a Redis between servers.
    ///
    /// ```no_run
    /// # async fn run() -> redis::RedisResult<()> {
    /// use std::time::Duration;
    /// use oxp_runtime::idempotency::RedisIdempotency;
    ///
    /// let store = RedisIdempotency::connect("redis://127.0.0.1:6379/0", Duration::from_secs(3600))
    ///     .await?
    ///     .prefix("tools-eu:call:");
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry).idempotency(Some(store));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Claims `key` for a run by `holder`, its lease taken with it.
    async fn claim(&self, key: &str, fingerprint: &str, holder: &str) -> redis::RedisResult<bool> {
        let claimed: i64 = redis::cmd("EVAL")
            .arg(
                "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
               redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4]) return 1 end return 0",
            )
            .arg(2)
            .arg(key)
            .arg(self.lease_key(key))
            .arg(format!("{PENDING}:{fingerprint}:{holder}"))
            .arg(self.claim_ttl())
            .arg(holder)
            .arg(millis(self.lease))
            .query_async(&mut self.connection.clone())
            .await?;
        Ok(claimed == 1)
    }

    /// Turns a claim whose lease lapsed into the answer that says so, if it still is one.
    async fn end_lapsed(
        &self,
        key: &str,
        pending: &str,
        fingerprint: &str,
    ) -> redis::RedisResult<()> {
        let outcome = serde_json::to_string(&super::interrupted()).expect("outcomes serialize");
        let _: i64 = redis::cmd("EVAL")
            .arg(
            "if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('EXISTS', KEYS[2]) == 0 then \
               redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end return 0")
            .arg(2)
        .arg(key)
        .arg(self.lease_key(key))
        .arg(pending)
        .arg(format!("{fingerprint}:{outcome}"))
        .arg(millis(self.ttl))
        .query_async(&mut self.connection.clone())
        .await?;
        Ok(())
    }

    /// How long a claim lives without renewal: as long as an answer, and never less than its
    /// lease, so that a time-to-live shorter than a beat cannot let a running claim lapse.
    fn claim_ttl(&self) -> u64 {
        millis(self.ttl.max(self.lease))
    }

    /// Where the lease of the claim on `key` (a prefixed key) lives: apart from keys of calls,
    /// which start with a digit after the prefix, so no `call_id` can name another's lease.
    fn lease_key(&self, key: &str) -> String {
        let call = key.strip_prefix(self.prefix.as_str()).unwrap_or(key);
        format!("{}lease:{call}", self.prefix)
    }

    fn record_key(&self, key: &IdempotencyKey) -> String {
        format!("{}record:{key}", self.prefix)
    }

    /// Runs `body`, a script over the record of `key`, with what bounds every record: the
    /// index of records by expiry (`KEYS[2]`), their sizes (`KEYS[3]`) and their total
    /// (`KEYS[4]`, in `total` for the script), the index of the records of the key's caller
    /// (`KEYS[5]`), which caller each record is of (`KEYS[6]`) and the bytes each caller keeps
    /// (`KEYS[7]`, this caller's in `mine`), first forgetting the records that expired.
    /// `ARGV[1..=2]` are `args`, `ARGV[3]` the reserve each record holds
    /// ([`super::RECORD_SLACK`]), `ARGV[4]` the count and `ARGV[5]` the bytes allowed, `ARGV[6]`
    /// the count and `ARGV[7]` the bytes allowed one caller; `now` is Redis's time.
    ///
    /// The script declares itself (`#!lua`), so Redis refuses it at `maxmemory` as it refuses
    /// a `call_id`'s claim, unless `allow_oom` (a removal, which frees memory).
    async fn records_script(
        &self,
        body: &str,
        key: &IdempotencyKey,
        args: [String; 2],
        allow_oom: bool,
    ) -> Result<i64, StoreError> {
        // Redis's own clock decides what expired, as it does for the records themselves: a
        // replica's clock that runs ahead must not forget a record that still counts.
        let flags = if allow_oom { " flags=allow-oom" } else { "" };
        let script = format!(
            "#!lua{flags}\n\
             local clock = redis.call('TIME') \
             local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) \
             for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do \
               local size = tonumber(redis.call('HGET', KEYS[3], gone) or '0') \
               redis.call('INCRBY', KEYS[4], -size) \
               local of = redis.call('HGET', KEYS[6], gone) \
               if of and redis.call('HINCRBY', KEYS[7], of, -size) <= 0 then \
                 redis.call('HDEL', KEYS[7], of) end \
               redis.call('HDEL', KEYS[3], gone) redis.call('HDEL', KEYS[6], gone) \
               redis.call('ZREM', KEYS[2], gone) \
             end \
             redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now) \
             local total = tonumber(redis.call('GET', KEYS[4]) or '0') \
             local mine = tonumber(redis.call('HGET', KEYS[7], KEYS[5]) or '0') \
             local done = (function() {body} end)() \
             return {{done, tonumber(redis.call('GET', KEYS[4]) or '0'), redis.call('ZCARD', KEYS[2])}}"
        );
        let [first, second] = args;
        let (capacity, max_bytes, per_caller) = self.record_limits;
        let (done, bytes, count): (i64, u64, u64) = redis::cmd("EVAL")
            .arg(script)
            .arg(7)
            .arg(self.record_key(key))
            .arg(format!("{}records", self.prefix))
            .arg(format!("{}records:bytes", self.prefix))
            .arg(format!("{}records:total", self.prefix))
            .arg(format!("{}records:of:{}", self.prefix, super::owner(key)))
            .arg(format!("{}records:owner", self.prefix))
            .arg(format!("{}records:owner-bytes", self.prefix))
            .arg(first)
            .arg(second)
            .arg(SLACK)
            .arg(capacity)
            .arg(max_bytes)
            .arg(per_caller)
            .arg(super::share_of(max_bytes, per_caller, capacity))
            .query_async(&mut self.connection.clone())
            .await
            .map_err(unreachable)?;
        let [seen_count, seen_bytes] = &*self.seen;
        seen_count.store(count, std::sync::atomic::Ordering::Relaxed);
        seen_bytes.store(bytes, std::sync::atomic::Ordering::Relaxed);
        Ok(done)
    }

    async fn exists(&self, key: &str) -> redis::RedisResult<bool> {
        redis::cmd("EXISTS")
            .arg(key)
            .query_async(&mut self.connection.clone())
            .await
    }

    async fn get(&self, key: &str) -> redis::RedisResult<Option<String>> {
        redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.connection.clone())
            .await
    }

    /// Keeps `outcome` as the answer under `key` if the claim `pending` still stands there (a
    /// claim a lapse ended holds the answer that says so, and keeps it: one `call_id`, one
    /// answer); the answer kept, when it is not `outcome`.
    async fn store(
        &self,
        key: &str,
        pending: &str,
        fingerprint: &str,
        outcome: &CallOutcome,
    ) -> redis::RedisResult<Option<CallOutcome>> {
        let json = serde_json::to_string(outcome).expect("outcomes serialize");
        let kept: i64 = redis::cmd("EVAL")
            .arg(
                "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end \
                 redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) \
                 redis.call('DEL', KEYS[2]) return 1",
            )
            .arg(2)
            .arg(key)
            .arg(self.lease_key(key))
            .arg(pending)
            .arg(format!("{fingerprint}:{json}"))
            .arg(millis(self.ttl))
            .query_async(&mut self.connection.clone())
            .await?;
        if kept == 1 {
            return Ok(None);
        }
        let stored = self.get(key).await?.unwrap_or_default();
        let answer = stored
            .strip_prefix(fingerprint)
            .and_then(|rest| rest.strip_prefix(':'));
        Ok(answer.and_then(|json| serde_json::from_str(json).ok()))
    }

    /// Holds the claim `pending` on `key` while its run goes on: every beat, its lease is
    /// renewed and the claim itself kept for another time-to-live (a run may outlive the
    /// answers' time-to-live). Returns if the claim is no longer this run's.
    async fn hold(&self, key: String, pending: String, holder: String) {
        let beat = crate::tasks::beat(self.lease);
        loop {
            tokio::time::sleep(beat).await;
            let renewed: redis::RedisResult<i64> = redis::cmd("EVAL")
                .arg(
                    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end \
                     redis.call('PEXPIRE', KEYS[1], ARGV[2]) \
                     redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4]) return 1",
                )
                .arg(2)
                .arg(&key)
                .arg(self.lease_key(&key))
                .arg(&pending)
                .arg(self.claim_ttl())
                .arg(&holder)
                .arg(millis(self.lease))
                .query_async(&mut self.connection.clone())
                .await;
            match renewed {
                Ok(1) => {}
                Ok(_) => {
                    tracing::warn!(
                        target: "oxp_runtime::idempotency::redis_store",
                        "a call_id run's claim lapsed while it ran (its process stalled past \
                         OXP_LEASE_MS): its answer is the one that says so"
                    );
                    return std::future::pending().await;
                }
                Err(error) => {
                    tracing::warn!(
                        target: "oxp_runtime::idempotency::redis_store",
                        %error, "could not renew a run's lease in Redis",
                    )
                }
            }
        }
    }

    /// Lets go of the claim `pending` on `key`, if it still stands, keeping no answer.
    async fn forget(&self, key: &str, pending: &str) -> redis::RedisResult<()> {
        let _: i64 = redis::cmd("EVAL")
            .arg(
                "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end \
                 redis.call('DEL', KEYS[1], KEYS[2]) return 1",
            )
            .arg(2)
            .arg(key)
            .arg(self.lease_key(key))
            .arg(pending)
            .query_async(&mut self.connection.clone())
            .await?;
        Ok(())
    }

    async fn once_inner(
        &self,
        key: String,
        fingerprint: Fingerprint,
        mut run: Option<BoxFuture<'static, CallOutcome>>,
    ) -> redis::RedisResult<(CallOutcome, Reuse)> {
        let fingerprint = fingerprint.to_hex();
        // Whether the first run was still going on when this call first looked.
        let mut waited = false;
        loop {
            let holder = crate::random::uuid_v4().simple();
            if self.claim(&key, &fingerprint, &holder).await? {
                let run = run.take().expect("a key is claimed once per call");
                // One task runs the tool and stores its outcome, so both happen even if this
                // caller goes away mid-call (else the claim would lapse with the run going on).
                let store = self.clone();
                let (stored_key, stored_fingerprint) = (key.clone(), fingerprint.clone());
                let pending = format!("{PENDING}:{fingerprint}:{holder}");
                let writing = Writing::new(&self.writes);
                let task = tokio::spawn(async move {
                    let _writing = writing;
                    let hold = store.hold(stored_key.clone(), pending.clone(), holder);
                    let outcome = tokio::select! {
                        outcome = run => outcome,
                        () = hold => unreachable!("a claim is held until the run ends"),
                    };
                    let kept = if outcome.is_retryable_failure() {
                        store.forget(&stored_key, &pending).await.map(|()| None)
                    } else {
                        let stored =
                            store.store(&stored_key, &pending, &stored_fingerprint, &outcome);
                        stored.await
                    };
                    match kept {
                        Ok(None) => outcome,
                        Ok(Some(kept)) => kept,
                        Err(error) => {
                            tracing::error!(
                                target: "oxp_runtime::idempotency::redis_store",
                                %error, "could not record an idempotent outcome in Redis",
                            );
                            outcome
                        }
                    }
                });
                return Ok((task.await.unwrap_or_else(super::task_ended), Reuse::Fresh));
            }
            let Some(value) = self.get(&key).await? else {
                // The claim expired between our SET and GET: try to claim it ourselves.
                continue;
            };
            let (pending, rest) = match value.strip_prefix(PENDING) {
                Some(rest) => (true, rest.strip_prefix(':').unwrap_or(rest)),
                None => (false, value.as_str()),
            };
            let (stored, json) = rest.split_once(':').unwrap_or((rest, ""));
            // A claim's value ends with its holder, an answer's with its JSON.
            if stored != fingerprint {
                return Ok((super::reused_call_id(), Reuse::Conflict));
            }
            if pending {
                if !self.exists(&self.lease_key(&key)).await? {
                    // Its process died mid-run: the answer says so, once, for every caller.
                    self.end_lapsed(&key, &value, &fingerprint).await?;
                    continue;
                }
                waited = true;
                tokio::time::sleep(POLL).await;
                continue;
            }
            let outcome = serde_json::from_str(json).unwrap_or_else(|e| {
                CallOutcome::unavailable(format!("a stored outcome is unreadable: {e}"))
            });
            return Ok((
                outcome,
                if waited {
                    Reuse::Waited
                } else {
                    Reuse::Replayed
                },
            ));
        }
    }
}

fn unreachable(error: redis::RedisError) -> StoreError {
    StoreError::Unreachable(error.to_string())
}

/// Redis refuses a time to live of 0, so the shortest is 1 ms.
fn millis(duration: Duration) -> u64 {
    crate::time::millis(duration).max(1)
}

impl IdempotencyStore for RedisIdempotency {
    fn once<'a>(
        &'a self,
        key: IdempotencyKey,
        fingerprint: Fingerprint,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, CallOutcome> {
        self.once_reporting(key, fingerprint, run)
            .map(|(outcome, _)| outcome)
            .boxed()
    }

    fn settled(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            loop {
                let done = self.writes.done.notified();
                if self.writes.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    return;
                }
                done.await;
            }
        })
    }

    fn size(&self) -> Option<StoreSize> {
        // Only records are counted in Redis (answers live by their time to live): what the
        // last script this replica ran found, every replica's records together.
        let [count, bytes] = &*self.seen;
        Some(StoreSize {
            entries: count.load(std::sync::atomic::Ordering::Relaxed),
            bytes: bytes.load(std::sync::atomic::Ordering::Relaxed),
        })
    }

    fn now_ms(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let (seconds, micros): (u64, u64) = redis::cmd("TIME")
                .query_async(&mut self.connection.clone())
                .await
                .map_err(unreachable)?;
            let now = seconds * 1000 + micros / 1000;
            crate::time::store_read(now);
            Ok(now)
        })
    }

    fn create_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        body: String,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            // Its time to live is a duration Redis applies on its own clock.
            let created: i64 = self
                .records_script(
                    "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end \
                     local counted = string.len(ARGV[1]) + tonumber(ARGV[3]) \
                     if redis.call('ZCARD', KEYS[5]) >= tonumber(ARGV[6]) \
                        or mine + counted > tonumber(ARGV[7]) then return -2 end \
                     if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) \
                        or total + counted > tonumber(ARGV[5]) then return -1 end \
                     local expires = now + tonumber(ARGV[2]) \
                     redis.call('HSET', KEYS[1], 'v', 1, 'body', ARGV[1], 'base', string.len(ARGV[1])) \
                     redis.call('PEXPIRE', KEYS[1], ARGV[2]) \
                     redis.call('ZADD', KEYS[2], expires, KEYS[1]) \
                     redis.call('ZADD', KEYS[5], expires, KEYS[1]) \
                     if redis.call('PTTL', KEYS[5]) < tonumber(ARGV[2]) then \
                       redis.call('PEXPIRE', KEYS[5], ARGV[2]) end \
                     redis.call('HSET', KEYS[3], KEYS[1], counted) \
                     redis.call('HSET', KEYS[6], KEYS[1], KEYS[5]) \
                     redis.call('HINCRBY', KEYS[7], KEYS[5], counted) \
                     redis.call('INCRBY', KEYS[4], counted) return 1",
                    key,
                    [body, millis(ttl).to_string()],
                    false,
                )
                .await?;
            match created {
                -1 => Err(StoreError::Full),
                -2 => Err(StoreError::CallerFull),
                created => Ok(created == 1),
            }
        })
    }

    fn read_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<Versioned>, StoreError>> {
        Box::pin(async move {
            // The record and Redis's clock in one reply: what its lease is judged by.
            let (version, body, seconds, micros): (Option<u64>, Option<String>, u64, u64) =
                redis::cmd("EVAL")
                    .arg(
                        "#!lua flags=no-writes\n\
                         local clock = redis.call('TIME') \
                         local found = redis.call('HMGET', KEYS[1], 'v', 'body') \
                         return {found[1], found[2], clock[1], clock[2]}",
                    )
                    .arg(1)
                    .arg(self.record_key(key))
                    .query_async(&mut self.connection.clone())
                    .await
                    .map_err(unreachable)?;
            let now = seconds * 1000 + micros / 1000;
            crate::time::store_read(now);
            Ok(version
                .zip(body)
                .map(|(version, body)| Versioned { version, body, now }))
        })
    }

    fn replace_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        version: u64,
        body: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let replaced: i64 = self
                .records_script(
                    "if redis.call('HGET', KEYS[1], 'v') ~= ARGV[2] then return 0 end \
                     local base = tonumber(redis.call('HGET', KEYS[1], 'base') or '0') \
                     local counted = math.max(string.len(ARGV[1]), base + tonumber(ARGV[3])) \
                       + string.len(redis.call('HGET', KEYS[1], 'att') or '') \
                     local grown = counted - tonumber(redis.call('HGET', KEYS[3], KEYS[1]) or '0') \
                     if grown > 0 and (total + grown > tonumber(ARGV[5]) \
                        or mine + grown > tonumber(ARGV[7])) then return -1 end \
                     if not redis.call('ZSCORE', KEYS[2], KEYS[1]) then \
                       redis.call('ZADD', KEYS[2], now + redis.call('PTTL', KEYS[1]), KEYS[1]) end \
                     redis.call('HSET', KEYS[1], 'v', tonumber(ARGV[2]) + 1, 'body', ARGV[1]) \
                     redis.call('HSET', KEYS[3], KEYS[1], counted) \
                     if redis.call('HEXISTS', KEYS[6], KEYS[1]) == 0 then \
                       redis.call('HSET', KEYS[6], KEYS[1], KEYS[5]) grown = counted end \
                     redis.call('HINCRBY', KEYS[7], KEYS[5], grown) \
                     redis.call('INCRBY', KEYS[4], grown) return 1",
                    key,
                    [body, version.to_string()],
                    false,
                )
                .await?;
            match replaced {
                -1 => Err(StoreError::Full),
                replaced => Ok(replaced == 1),
            }
        })
    }

    fn attach<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        blob: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let attached: i64 = self
                .records_script(
                    "if redis.call('EXISTS', KEYS[1]) == 0 \
                        or redis.call('HEXISTS', KEYS[1], 'att') == 1 then return 0 end \
                     local size = string.len(ARGV[1]) \
                     if mine + size > tonumber(ARGV[7]) then return -2 end \
                     if total + size > tonumber(ARGV[5]) then return -1 end \
                     redis.call('HSET', KEYS[1], 'att', ARGV[1]) \
                     redis.call('HINCRBY', KEYS[3], KEYS[1], size) \
                     redis.call('HINCRBY', KEYS[7], KEYS[5], size) \
                     redis.call('INCRBY', KEYS[4], size) return 1",
                    key,
                    [blob, String::new()],
                    false,
                )
                .await?;
            match attached {
                -1 => Err(StoreError::Full),
                -2 => Err(StoreError::CallerFull),
                attached => Ok(attached == 1),
            }
        })
    }

    fn attachment<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(async move {
            redis::cmd("HGET")
                .arg(self.record_key(key))
                .arg("att")
                .query_async(&mut self.connection.clone())
                .await
                .map_err(unreachable)
        })
    }

    fn detach<'a>(&'a self, key: &'a IdempotencyKey) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let _: i64 = self
                .records_script(
                    "local att = redis.call('HGET', KEYS[1], 'att') \
                     if not att then return 0 end \
                     local size = string.len(att) \
                     redis.call('HDEL', KEYS[1], 'att') \
                     if redis.call('HEXISTS', KEYS[3], KEYS[1]) == 1 then \
                       redis.call('HINCRBY', KEYS[3], KEYS[1], -size) \
                       redis.call('INCRBY', KEYS[4], -size) \
                       if redis.call('HINCRBY', KEYS[7], KEYS[5], -size) <= 0 then \
                         redis.call('HDEL', KEYS[7], KEYS[5]) end \
                     end return 1",
                    key,
                    [String::new(), String::new()],
                    true,
                )
                .await?;
            Ok(())
        })
    }

    fn remove_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let _: i64 = self
                .records_script(
                    "redis.call('DEL', KEYS[1]) redis.call('ZREM', KEYS[2], KEYS[1]) \
                     redis.call('ZREM', KEYS[5], KEYS[1]) \
                     local size = tonumber(redis.call('HGET', KEYS[3], KEYS[1]) or '0') \
                     redis.call('INCRBY', KEYS[4], -size) \
                     if redis.call('HDEL', KEYS[6], KEYS[1]) == 1 \
                        and redis.call('HINCRBY', KEYS[7], KEYS[5], -size) <= 0 then \
                       redis.call('HDEL', KEYS[7], KEYS[5]) end \
                     redis.call('HDEL', KEYS[3], KEYS[1]) return 1",
                    key,
                    [String::new(), String::new()],
                    true,
                )
                .await?;
            Ok(())
        })
    }

    fn once_reporting<'a>(
        &'a self,
        key: IdempotencyKey,
        fingerprint: Fingerprint,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, (CallOutcome, Reuse)> {
        Box::pin(async move {
            let key = format!("{}{key}", self.prefix);
            self.once_inner(key, fingerprint, Some(run)).await.unwrap_or_else(|error| {
                tracing::error!(
                    target: "oxp_runtime::idempotency::redis_store",
                    %error, "Redis is unreachable; refusing the call rather than risk running it twice",
                );
                let outcome = CallOutcome::unavailable(format!("the idempotency store is unreachable: {error}"));
                (outcome, Reuse::Unavailable)
            })
        })
    }
}
