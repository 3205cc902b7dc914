//! `oxp_runtime::testing::store_contract` against the stores oxp ships: in memory, and in a
//! `redis-server` of the test's own; and against stores broken on purpose, whose broken
//! promises it must name.

#[path = "harness/mod.rs"]
mod harness;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use oxp_runtime::call::CallOutcome;
use oxp_runtime::idempotency::{
    BoxFuture, Fingerprint, IdempotencyKey, IdempotencyStore, InMemoryIdempotency,
    RedisIdempotency, Reuse, StoreError, Versioned,
};
use oxp_runtime::testing::{StoreLimits, store_contract};

fn in_memory(limits: StoreLimits) -> InMemoryIdempotency {
    InMemoryIdempotency::new(limits.capacity, limits.ttl)
        .max_bytes(limits.max_bytes)
        .records_per_caller(limits.records_per_caller)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_memory_store_keeps_every_promise() {
    store_contract(|limits| async move { in_memory(limits) }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_keeps_every_promise() {
    let Some(redis) = harness::start_redis() else {
        return;
    };
    static STORES: AtomicUsize = AtomicUsize::new(0);
    let url = redis.1.clone();
    store_contract(|limits| {
        let url = url.clone();
        async move {
            let prefix = format!("contract-{}:", STORES.fetch_add(1, Ordering::Relaxed));
            RedisIdempotency::connect(&url, limits.ttl)
                .await
                .expect("the test's redis-server answers")
                .lease(limits.lease)
                .records(limits.capacity, limits.max_bytes)
                .records_per_caller(limits.records_per_caller)
                .prefix(prefix)
        }
    })
    .await;
}

/// What is wrong with a [`Flawed`] store.
#[derive(Clone, Copy)]
enum Flaw {
    /// Keeps nothing: every call runs, and it keeps no records.
    Forgetful,
    /// Takes every caller for one: keys lose their principal and user.
    OneCaller,
    /// Replaces a record whatever version the writer read.
    NoCompareAndSet,
}

/// The in-memory store with one flaw.
struct Flawed {
    inner: InMemoryIdempotency,
    flaw: Flaw,
}

impl Flawed {
    fn key(&self, key: &IdempotencyKey) -> IdempotencyKey {
        match self.flaw {
            Flaw::OneCaller => IdempotencyKey::new("everyone", None, key.call_id.clone()),
            _ => key.clone(),
        }
    }
}

impl IdempotencyStore for Flawed {
    fn once<'a>(
        &'a self,
        key: IdempotencyKey,
        fingerprint: Fingerprint,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, CallOutcome> {
        match self.flaw {
            Flaw::Forgetful => run,
            _ => self.inner.once(self.key(&key), fingerprint, run),
        }
    }

    fn once_reporting<'a>(
        &'a self,
        key: IdempotencyKey,
        fingerprint: Fingerprint,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, (CallOutcome, Reuse)> {
        match self.flaw {
            Flaw::Forgetful => Box::pin(async move { (run.await, Reuse::Fresh) }),
            _ => self.inner.once_reporting(self.key(&key), fingerprint, run),
        }
    }

    fn create_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        body: String,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            match self.flaw {
                Flaw::Forgetful => Err(StoreError::NoRecords),
                _ => self.inner.create_record(&self.key(key), body, ttl).await,
            }
        })
    }

    fn read_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<Versioned>, StoreError>> {
        Box::pin(async move {
            match self.flaw {
                Flaw::Forgetful => Err(StoreError::NoRecords),
                _ => self.inner.read_record(&self.key(key)).await,
            }
        })
    }

    fn replace_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        version: u64,
        body: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let key = self.key(key);
            let version = match self.flaw {
                Flaw::Forgetful => return Err(StoreError::NoRecords),
                Flaw::NoCompareAndSet => match self.inner.read_record(&key).await? {
                    Some(current) => current.version,
                    None => version,
                },
                Flaw::OneCaller => version,
            };
            self.inner.replace_record(&key, version, body).await
        })
    }

    fn attach<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        blob: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move { self.inner.attach(&self.key(key), blob).await })
    }

    fn attachment<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(async move { self.inner.attachment(&self.key(key)).await })
    }

    fn detach<'a>(&'a self, key: &'a IdempotencyKey) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.inner.detach(&self.key(key)).await })
    }

    fn remove_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.inner.remove_record(&self.key(key)).await })
    }
}

/// The contract's verdict on a store with `flaw`: the promises it names broken.
async fn broken_promises(flaw: Flaw) -> String {
    let verdict = tokio::spawn(store_contract(move |limits| async move {
        Flawed {
            inner: in_memory(limits),
            flaw,
        }
    }))
    .await
    .expect_err("a flawed store passed the contract");
    let panic = verdict.into_panic();
    panic
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_else(|| "a panic without a message".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_keeps_nothing_breaks_the_promises_of_answers_and_records() {
    let verdict = broken_promises(Flaw::Forgetful).await;
    for promise in [
        "runs_a_new_key_once_and_replays_its_answer",
        "refuses_a_call_id_reused_for_another_request",
        "makes_a_duplicate_wait_for_the_run_in_flight",
        "finishes_a_run_whose_caller_hung_up",
        "makes_a_record_once",
        "replaces_a_record_only_at_its_version",
    ] {
        assert!(
            verdict.contains(&format!("- {promise}:")),
            "{promise} not named:\n{verdict}"
        );
    }
    assert!(
        verdict.contains("failed: the store keeps no task records"),
        "{verdict}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_takes_every_caller_for_one_breaks_exactly_the_promises_of_callers() {
    let verdict = broken_promises(Flaw::OneCaller).await;
    let named: Vec<&str> = verdict
        .lines()
        .filter_map(|line| line.strip_prefix("- "))
        .filter_map(|line| line.split(':').next())
        .collect();
    assert_eq!(
        named,
        [
            "keeps_callers_and_users_apart",
            "keeps_a_caller_s_answers_within_its_share_whatever_others_do",
            "keeps_records_of_callers_and_users_apart",
            "keeps_a_caller_s_records_within_its_share",
            "is_bounded_by_count_and_bytes",
            "forgets_a_record_once_its_time_to_live_has_passed",
        ],
        "{verdict}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_without_compare_and_set_breaks_that_promise() {
    let verdict = broken_promises(Flaw::NoCompareAndSet).await;
    assert!(
        verdict.contains("- replaces_a_record_only_at_its_version: a replacement at a version already replaced was made"),
        "{verdict}"
    );
}
