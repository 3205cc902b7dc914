//! The Redis store: replicas behind a load balancer share it, so a retry that lands on another
//! replica still does not run the tool twice.
//!
//! Per key: `SET key pending:<fingerprint> NX PX <pending ttl>` claims the run. The claimer runs
//! the tool and stores the outcome (`SET key <fingerprint>:<json> PX <ttl>`); everyone else polls
//! until it is there, and is refused at once if its request's fingerprint is not the one stored.
//! A claimer that dies leaves `pending` to expire, after which the next caller claims the run.
//! When Redis cannot be reached, the call is refused as temporarily unavailable rather than run
//! without the guarantee.

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use redis::aio::ConnectionManager;

use super::{Fingerprint, IdempotencyKey, IdempotencyStore, Reuse};
use crate::outcome::CallOutcome;

const PENDING: &str = "pending";
/// How long a claim holds without an outcome before another caller may take it over.
const DEFAULT_PENDING_TTL: Duration = Duration::from_secs(300);
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
    pending_ttl: Duration,
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
            pending_ttl: DEFAULT_PENDING_TTL,
            prefix: "oxp:call:".to_owned(),
        })
    }

    /// How long a claimed run may go without an outcome before another caller takes it over:
    /// make it longer than your slowest tool's timeout.
    ///
    /// ```no_run
    /// # async fn run() -> redis::RedisResult<()> {
    /// use std::time::Duration;
    /// use oxp_runtime::idempotency::RedisIdempotency;
    ///
    /// let store = RedisIdempotency::connect("redis://127.0.0.1:6379/0", Duration::from_secs(3600))
    ///     .await?
    ///     .pending_ttl(Duration::from_secs(120));
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry).idempotency(Some(store));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn pending_ttl(mut self, ttl: Duration) -> Self {
        self.pending_ttl = ttl;
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

    async fn claim(&self, key: &str, fingerprint: &str) -> redis::RedisResult<bool> {
        let claimed: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(format!("{PENDING}:{fingerprint}"))
            .arg("NX")
            .arg("PX")
            .arg(millis(self.pending_ttl))
            .query_async(&mut self.connection.clone())
            .await?;
        Ok(claimed.is_some())
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
            .query_async(&mut self.connection.clone())
            .await
    }

    async fn forget(&self, key: &str) -> redis::RedisResult<()> {
        redis::cmd("DEL")
            .arg(key)
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
            if self.claim(&key, &fingerprint).await? {
                let run = run.take().expect("a key is claimed once per call");
                // One task runs the tool and stores its outcome, so both happen even if this
                // caller goes away mid-call (else the claim would expire and a retry run again).
                let store = self.clone();
                let (stored_key, stored_fingerprint) = (key.clone(), fingerprint.clone());
                let task = tokio::spawn(async move {
                    let outcome = run.await;
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
            if stored != fingerprint {
                return Ok((super::reused_call_id(), Reuse::Conflict));
            }
            if pending {
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
