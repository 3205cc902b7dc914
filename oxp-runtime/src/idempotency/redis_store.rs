//! The Redis store: replicas behind a load balancer share it, so a retry that lands on another
//! replica still does not run the tool twice.
//!
//! Per key: `SET key pending:<fingerprint>:<holder> NX PX <ttl>` claims the run, and
//! `SET key:lease <holder> PX <lease>` holds it; the claimer renews the lease while the tool runs
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

use super::{Fingerprint, IdempotencyKey, IdempotencyStore, Reuse, StoreError, Versioned};
use crate::outcome::CallOutcome;

const PENDING: &str = "pending";
const POLL: Duration = Duration::from_millis(20);

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
        Ok(RedisIdempotency {
            connection,
            ttl,
            lease: crate::tasks::DEFAULT_LEASE,
            prefix: "oxp:call:".to_owned(),
        })
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
            .arg(format!("{key}:lease"))
            .arg(format!("{PENDING}:{fingerprint}:{holder}"))
            .arg(millis(self.ttl))
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
        .arg(format!("{key}:lease"))
        .arg(pending)
        .arg(format!("{fingerprint}:{outcome}"))
        .arg(millis(self.ttl))
        .query_async(&mut self.connection.clone())
        .await?;
        Ok(())
    }

    fn record_key(&self, key: &IdempotencyKey) -> String {
        format!("{}record:{key}", self.prefix)
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

    async fn store(
        &self,
        key: &str,
        fingerprint: &str,
        outcome: &CallOutcome,
    ) -> redis::RedisResult<()> {
        let json = serde_json::to_string(outcome).expect("outcomes serialize");
        redis::cmd("SET")
            .arg(key)
            .arg(format!("{fingerprint}:{json}"))
            .arg("PX")
            .arg(millis(self.ttl))
            .query_async::<()>(&mut self.connection.clone())
            .await?;
        self.release(key).await
    }

    async fn release(&self, key: &str) -> redis::RedisResult<()> {
        redis::cmd("DEL")
            .arg(format!("{key}:lease"))
            .query_async(&mut self.connection.clone())
            .await
    }

    /// Renews `holder`'s lease on `key` every tenth of the lease until dropped.
    async fn hold(&self, key: String, holder: String) {
        let beat = crate::tasks::beat(self.lease);
        loop {
            tokio::time::sleep(beat).await;
            let renewed: redis::RedisResult<()> = redis::cmd("SET")
                .arg(format!("{key}:lease"))
                .arg(&holder)
                .arg("PX")
                .arg(millis(self.lease))
                .query_async(&mut self.connection.clone())
                .await;
            if let Err(error) = renewed {
                tracing::warn!(%error, "could not renew a run's lease in Redis");
            }
        }
    }

    async fn forget(&self, key: &str) -> redis::RedisResult<()> {
        redis::cmd("DEL")
            .arg(key)
            .arg(format!("{key}:lease"))
            .query_async(&mut self.connection.clone())
            .await
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
                let task = tokio::spawn(async move {
                    let hold = store.hold(stored_key.clone(), holder);
                    let outcome = tokio::select! {
                        outcome = run => outcome,
                        () = hold => unreachable!("a lease is held until the run ends"),
                    };
                    let kept = if outcome.is_retryable_failure() {
                        store.forget(&stored_key).await
                    } else {
                        store
                            .store(&stored_key, &stored_fingerprint, &outcome)
                            .await
                    };
                    if let Err(error) = kept {
                        tracing::error!(%error, "could not record an idempotent outcome in Redis");
                    }
                    outcome
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
                if !self.exists(&format!("{key}:lease")).await? {
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

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
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

    fn create_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        body: String,
        expires_at: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let created: i64 = redis::cmd("EVAL")
                .arg(
                    "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end \
                 redis.call('HSET', KEYS[1], 'v', 1, 'body', ARGV[1]) \
                 redis.call('PEXPIREAT', KEYS[1], ARGV[2]) return 1",
                )
                .arg(1)
                .arg(self.record_key(key))
                .arg(body)
                .arg(expires_at)
                .query_async(&mut self.connection.clone())
                .await
                .map_err(unreachable)?;
            Ok(created == 1)
        })
    }

    fn read_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<Versioned>, StoreError>> {
        Box::pin(async move {
            let (version, body): (Option<u64>, Option<String>) = redis::cmd("HMGET")
                .arg(self.record_key(key))
                .arg("v")
                .arg("body")
                .query_async(&mut self.connection.clone())
                .await
                .map_err(unreachable)?;
            Ok(version
                .zip(body)
                .map(|(version, body)| Versioned { version, body }))
        })
    }

    fn replace_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        version: u64,
        body: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let replaced: i64 = redis::cmd("EVAL")
                .arg(
                    "if redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then return 0 end \
                 redis.call('HSET', KEYS[1], 'v', tonumber(ARGV[1]) + 1, 'body', ARGV[2]) return 1",
                )
                .arg(1)
                .arg(self.record_key(key))
                .arg(version)
                .arg(body)
                .query_async(&mut self.connection.clone())
                .await
                .map_err(unreachable)?;
            Ok(replaced == 1)
        })
    }

    fn remove_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            redis::cmd("DEL")
                .arg(self.record_key(key))
                .query_async(&mut self.connection.clone())
                .await
                .map_err(unreachable)
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
                tracing::error!(%error, "Redis is unreachable; refusing the call rather than risk running it twice");
                let outcome = CallOutcome::unavailable(format!("the idempotency store is unreachable: {error}"));
                (outcome, Reuse::Unavailable)
            })
        })
    }
}
