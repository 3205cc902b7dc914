//! What a test of an app built on oxp can reuse (cargo feature `testing`): [`store_contract`],
//! the promises every [`IdempotencyStore`] keeps, checked against a store of yours.
//!
//! The in-memory store and the Redis store both pass it; a store of your own (another
//! database, a wrapper that adds metrics) is one test away from knowing it keeps them too.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::idempotency::{
    Fingerprint, IdempotencyKey, IdempotencyStore, Reuse, StoreError, Versioned, reused_call_id,
};
use crate::outcome::CallOutcome;
use crate::protocol::{CallResult, CallToolResponse};
use crate::time::millis;

/// The budgets a store under test is made with: [`store_contract`] asks for a fresh store with
/// these for each promise it checks, small where a promise is about a bound.
///
/// ```
/// let limits = oxp_runtime::testing::StoreLimits::default();
/// assert_eq!(limits.records_per_caller, limits.capacity / 10);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreLimits {
    /// How many answers and task records it keeps at once (in a store that bounds answers by
    /// their time to live alone, how many records).
    pub capacity: u64,
    /// How many bytes of them.
    pub max_bytes: u64,
    /// How many task records one caller (a principal and user) may keep, and the same
    /// fraction of `max_bytes` for their bytes.
    pub records_per_caller: u64,
    /// How long an answer is kept.
    pub ttl: Duration,
    /// How long a run's claim holds without its process renewing it, in a store that leases
    /// runs (one shared by replicas); a store in one process has nothing to renew.
    pub lease: Duration,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            capacity: 1_000,
            max_bytes: 16 * 1024 * 1024,
            records_per_caller: 100,
            ttl: Duration::from_secs(600),
            lease: Duration::from_secs(30),
        }
    }
}

/// The longest one promise's check may take: past it, the store is taken to hang.
const CHECK_TIME: Duration = Duration::from_secs(60);

/// How short a time to live the checks of expiry give, and how much longer they wait on the
/// store's clock than that (a store in this process times expiry on the monotonic clock, and
/// reads its time off the wall clock).
const SHORT_TTL: Duration = Duration::from_millis(100);
const CLOCK_MARGIN_MS: u64 = 50;

type Check<S> = fn(Arc<S>) -> BoxFuture<'static, Result<(), String>>;

/// Checks every promise of [`IdempotencyStore`] against stores `make_store` makes, a fresh and
/// empty one for each promise (for a shared store, under a key prefix of its own), made with
/// the [`StoreLimits`] given; panics naming each promise broken and how. Each is named for
/// what it holds:
///
/// - `runs_a_new_key_once_and_replays_its_answer`: the first call with a key runs, and a
///   repeat gets its answer exactly, without running; [`once_reporting`] says which.
/// - `refuses_a_call_id_reused_for_another_request`: the same key with another fingerprint is
///   [`reused_call_id`], nothing run.
/// - `keeps_callers_and_users_apart`: keys differing in principal, user or `call_id` are
///   different keys, however their parts would run together.
/// - `makes_a_duplicate_wait_for_the_run_in_flight`: a repeat while the first runs waits for
///   it, and gets its answer.
/// - `finishes_a_run_whose_caller_hung_up`: a run goes on when its caller is dropped, its
///   answer is kept ([`settled`] waits for that), and the retry gets it.
/// - `runs_again_only_after_a_failure_that_asks_to_be_retried`: a failure with `can_retry`
///   is not kept; any other answer is.
/// - `never_evicts_a_running_entry`: however many answers pass through a full store, a run
///   in flight is still the one its duplicates wait for.
/// - `never_runs_twice_a_run_that_outlives_its_lease_and_time_to_live`: a run held past both
///   is still in flight to its duplicates.
/// - `keeps_a_caller_s_answers_within_its_share_whatever_others_do`: another caller's load
///   never costs a caller within its share an answer.
/// - `forgets_an_answer_once_its_time_to_live_has_passed`: then the key runs again.
/// - `makes_a_record_once`: [`create_record`] is `true` once, then `false`, the first body
///   kept.
/// - `reads_a_record_with_the_store_s_clock`: [`read_record`] gives the body, its version and
///   the store's time ([`now_ms`]), and nothing for a key without one.
/// - `replaces_a_record_only_at_its_version`: [`replace_record`] is a compare-and-set, the
///   version growing by one.
/// - `loses_no_write_when_replacements_race`: writers that retry at the version they read all
///   land.
/// - `keeps_one_attachment_beside_a_record`: [`attach`] once per record (again once
///   [`detach`]ed), untouched by replacements.
/// - `forgets_a_removed_record`: [`remove_record`] takes its attachment with it, and the key
///   may be used again.
/// - `keeps_records_of_callers_and_users_apart`.
/// - `keeps_a_caller_s_records_within_its_share`: past its count or its bytes,
///   [`StoreError::CallerFull`]; another caller's share is its own.
/// - `is_bounded_by_count_and_bytes`: past them, [`StoreError::Full`] for callers within
///   their shares, a record outgrowing the room left is refused and kept as it was, and a
///   record already kept is still found (`Ok(false)`).
/// - `forgets_a_record_once_its_time_to_live_has_passed`: with its attachment, giving back
///   its caller's share.
///
/// Call it from within a Tokio runtime (`#[tokio::test]`). The checks of time to live and
/// lease wait, a second or so, for the store's own clock ([`now_ms`]) to pass them: that clock
/// is what a store judges them by, and no timer stands in for it.
///
/// ```
/// use oxp_runtime::idempotency::InMemoryIdempotency;
/// use oxp_runtime::testing::{StoreLimits, store_contract};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// store_contract(|limits: StoreLimits| async move {
///     InMemoryIdempotency::new(limits.capacity, limits.ttl)
///         .max_bytes(limits.max_bytes)
///         .records_per_caller(limits.records_per_caller)
/// })
/// .await;
/// # });
/// ```
///
/// A shared store gives each fresh store a namespace of its own:
///
/// ```no_run
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use oxp_runtime::idempotency::RedisIdempotency;
/// use oxp_runtime::testing::{StoreLimits, store_contract};
///
/// # async fn run() {
/// static STORES: AtomicUsize = AtomicUsize::new(0);
/// store_contract(|limits: StoreLimits| async move {
///     let prefix = format!("contract-{}:", STORES.fetch_add(1, Ordering::Relaxed));
///     RedisIdempotency::connect("redis://127.0.0.1:6379", limits.ttl)
///         .await
///         .expect("Redis answers")
///         .lease(limits.lease)
///         .records(limits.capacity, limits.max_bytes)
///         .records_per_caller(limits.records_per_caller)
///         .prefix(prefix)
/// })
/// .await;
/// # }
/// ```
///
/// [`once_reporting`]: IdempotencyStore::once_reporting
/// [`settled`]: IdempotencyStore::settled
/// Its length is the table of checks: one row per promise, each its own function run on a
/// fresh store with the limits it needs, so that the list reads whole.
///
/// [`create_record`]: IdempotencyStore::create_record
/// [`read_record`]: IdempotencyStore::read_record
/// [`now_ms`]: IdempotencyStore::now_ms
/// [`replace_record`]: IdempotencyStore::replace_record
/// [`attach`]: IdempotencyStore::attach
/// [`detach`]: IdempotencyStore::detach
/// [`remove_record`]: IdempotencyStore::remove_record
pub async fn store_contract<S, F, Fut>(mut make_store: F)
where
    S: IdempotencyStore,
    F: FnMut(StoreLimits) -> Fut,
    Fut: Future<Output = S>,
{
    let default = StoreLimits::default();
    // Small budgets where a promise is about a bound: ten records and a mebibyte in all, two
    // records and a fifth of the bytes a caller.
    let small = StoreLimits {
        capacity: 10,
        max_bytes: 1024 * 1024,
        records_per_caller: 2,
        ..default
    };
    let short = StoreLimits {
        ttl: SHORT_TTL,
        lease: Duration::from_millis(200),
        ..default
    };
    let checks: [(&str, StoreLimits, Check<S>); 20] = [
        ("runs_a_new_key_once_and_replays_its_answer", default, |s| {
            runs_a_new_key_once_and_replays_its_answer(s).boxed()
        }),
        (
            "refuses_a_call_id_reused_for_another_request",
            default,
            |s| refuses_a_call_id_reused_for_another_request(s).boxed(),
        ),
        ("keeps_callers_and_users_apart", default, |s| {
            keeps_callers_and_users_apart(s).boxed()
        }),
        (
            "makes_a_duplicate_wait_for_the_run_in_flight",
            default,
            |s| makes_a_duplicate_wait_for_the_run_in_flight(s).boxed(),
        ),
        ("finishes_a_run_whose_caller_hung_up", default, |s| {
            finishes_a_run_whose_caller_hung_up(s).boxed()
        }),
        (
            "runs_again_only_after_a_failure_that_asks_to_be_retried",
            default,
            |s| runs_again_only_after_a_failure_that_asks_to_be_retried(s).boxed(),
        ),
        ("never_evicts_a_running_entry", small, |s| {
            never_evicts_a_running_entry(s).boxed()
        }),
        (
            "never_runs_twice_a_run_that_outlives_its_lease_and_time_to_live",
            short,
            |s| never_runs_twice_a_run_that_outlives_its_lease_and_time_to_live(s).boxed(),
        ),
        (
            "keeps_a_caller_s_answers_within_its_share_whatever_others_do",
            small,
            |s| keeps_a_caller_s_answers_within_its_share_whatever_others_do(s).boxed(),
        ),
        (
            "forgets_an_answer_once_its_time_to_live_has_passed",
            short,
            |s| forgets_an_answer_once_its_time_to_live_has_passed(s).boxed(),
        ),
        ("makes_a_record_once", default, |s| {
            makes_a_record_once(s).boxed()
        }),
        ("reads_a_record_with_the_store_s_clock", default, |s| {
            reads_a_record_with_the_store_s_clock(s).boxed()
        }),
        ("replaces_a_record_only_at_its_version", default, |s| {
            replaces_a_record_only_at_its_version(s).boxed()
        }),
        ("loses_no_write_when_replacements_race", default, |s| {
            loses_no_write_when_replacements_race(s).boxed()
        }),
        ("keeps_one_attachment_beside_a_record", default, |s| {
            keeps_one_attachment_beside_a_record(s).boxed()
        }),
        ("forgets_a_removed_record", default, |s| {
            forgets_a_removed_record(s).boxed()
        }),
        ("keeps_records_of_callers_and_users_apart", default, |s| {
            keeps_records_of_callers_and_users_apart(s).boxed()
        }),
        ("keeps_a_caller_s_records_within_its_share", small, |s| {
            keeps_a_caller_s_records_within_its_share(s).boxed()
        }),
        ("is_bounded_by_count_and_bytes", small, |s| {
            is_bounded_by_count_and_bytes(s).boxed()
        }),
        (
            "forgets_a_record_once_its_time_to_live_has_passed",
            small,
            |s| forgets_a_record_once_its_time_to_live_has_passed(s).boxed(),
        ),
    ];
    let mut broken = Vec::new();
    for (promise, limits, check) in checks {
        let store = Arc::new(make_store(limits).await);
        let held = match tokio::time::timeout(CHECK_TIME, check(store)).await {
            Ok(held) => held,
            Err(_) => Err(format!("did not finish within {} s", CHECK_TIME.as_secs())),
        };
        if let Err(why) = held {
            broken.push(format!("- {promise}: {why}"));
        }
    }
    assert!(
        broken.is_empty(),
        "the store breaks {} of the {} promises of an IdempotencyStore:\n{}",
        broken.len(),
        checks.len(),
        broken.join("\n")
    );
}

/// `Err(why())` unless the promise `held`.
fn ensure(held: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if held { Ok(()) } else { Err(why()) }
}

/// A store's answer to a record call, or what it said instead.
fn answered<T>(what: &str, result: Result<T, StoreError>) -> Result<T, String> {
    result.map_err(|error| format!("{what} failed: {error}"))
}

fn key(caller: &str, call_id: &str) -> IdempotencyKey {
    IdempotencyKey::new(caller, None, call_id)
}

fn fingerprint(n: u64) -> Fingerprint {
    Fingerprint::of("Contract.Check@1.0.0", &json!({ "n": n }), &[])
}

fn answer(value: Value) -> CallOutcome {
    CallOutcome::Completed(CallToolResponse {
        call_id: "contract".into(),
        duration: Some(1.5),
        result: CallResult::Success { value: Some(value) },
    })
}

fn text(text: &str) -> CallOutcome {
    answer(Value::String(text.into()))
}

/// An answer that only an exact copy equals: extreme numbers, floats that do not round-trip
/// through a careless writer, escapes.
fn exact_answer() -> CallOutcome {
    answer(json!({
        "max": u64::MAX, "min": i64::MIN, "third": 1.0 / 3.0, "tiny": 5e-324,
        "text": "line\nbreak \u{1F980} \"quoted\" \\", "none": null, "list": [true, {}, []],
    }))
}

/// A run that counts its starts in `runs` and answers `outcome`.
fn counted(runs: &Arc<AtomicUsize>, outcome: CallOutcome) -> BoxFuture<'static, CallOutcome> {
    let runs = runs.clone();
    async move {
        runs.fetch_add(1, Ordering::SeqCst);
        outcome
    }
    .boxed()
}

/// A run held until released: it says when it starts and when it ends.
struct Held {
    run: Option<BoxFuture<'static, CallOutcome>>,
    started: oneshot::Receiver<()>,
    release: oneshot::Sender<()>,
    ended: oneshot::Receiver<()>,
}

fn held(outcome: CallOutcome) -> Held {
    let (started_tx, started) = oneshot::channel();
    let (release, release_rx) = oneshot::channel();
    let (ended_tx, ended) = oneshot::channel();
    let run = async move {
        let _ = started_tx.send(());
        let _ = release_rx.await;
        let _ = ended_tx.send(());
        outcome
    };
    Held {
        run: Some(run.boxed()),
        started,
        release,
        ended,
    }
}

/// Asks `store` for `key` in a task of its own, so that it can wait while the test goes on.
fn ask_in_task<S: IdempotencyStore>(
    store: &Arc<S>,
    key: IdempotencyKey,
    fingerprint: Fingerprint,
    run: BoxFuture<'static, CallOutcome>,
) -> tokio::task::JoinHandle<(CallOutcome, Reuse)> {
    let store = store.clone();
    tokio::spawn(async move { store.once_reporting(key, fingerprint, run).await })
}

async fn joined<T>(task: tokio::task::JoinHandle<T>, what: &str) -> Result<T, String> {
    task.await
        .map_err(|error| format!("{what} ended without an answer: {error}"))
}

/// Whether `task` is still waiting after the store has had several turns to answer it: each
/// turn a trip to the store (its clock) and a yield to the task.
async fn still_waiting<S: IdempotencyStore, T>(
    store: &S,
    task: &tokio::task::JoinHandle<T>,
) -> Result<bool, String> {
    for _ in 0..8 {
        tokio::task::yield_now().await;
        answered("now_ms", store.now_ms().await)?;
    }
    Ok(!task.is_finished())
}

/// Waits until the store's clock reads `until_ms` or later. The store's own clock is what its
/// times to live and leases are judged by: it is asked again and again, and no timer stands in
/// for it.
async fn wait_for_store_clock<S: IdempotencyStore>(store: &S, until_ms: u64) -> Result<(), String> {
    while answered("now_ms", store.now_ms().await)? < until_ms {
        tokio::task::yield_now().await;
    }
    Ok(())
}

async fn runs_a_new_key_once_and_replays_its_answer<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let runs = Arc::new(AtomicUsize::new(0));
    let (first, reuse) = store
        .once_reporting(
            key("ada", "c1"),
            fingerprint(1),
            counted(&runs, exact_answer()),
        )
        .await;
    ensure(first == exact_answer(), || {
        format!("the first call answered {first:?}")
    })?;
    ensure(reuse == Reuse::Fresh, || {
        format!("the first call was reported {reuse:?}")
    })?;
    let (again, reuse) = store
        .once_reporting(
            key("ada", "c1"),
            fingerprint(1),
            counted(&runs, text("ran again")),
        )
        .await;
    let runs = runs.load(Ordering::SeqCst);
    ensure(runs == 1, || format!("the tool ran {runs} times"))?;
    ensure(again == first, || {
        format!("the repeat answered {again:?}, not the first answer")
    })?;
    ensure(reuse == Reuse::Replayed, || {
        format!("the repeat was reported {reuse:?}")
    })
}

async fn refuses_a_call_id_reused_for_another_request<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let runs = Arc::new(AtomicUsize::new(0));
    store
        .once(
            key("ada", "c1"),
            fingerprint(1),
            counted(&runs, text("one")),
        )
        .await;
    let (other, reuse) = store
        .once_reporting(
            key("ada", "c1"),
            fingerprint(2),
            counted(&runs, text("two")),
        )
        .await;
    let runs = runs.load(Ordering::SeqCst);
    ensure(runs == 1, || format!("the tool ran {runs} times"))?;
    ensure(other == reused_call_id(), || {
        format!("another request under the same call_id was answered {other:?}")
    })?;
    ensure(reuse == Reuse::Conflict, || {
        format!("it was reported {reuse:?}")
    })
}

async fn keeps_callers_and_users_apart<S: IdempotencyStore>(store: Arc<S>) -> Result<(), String> {
    // Parts that would run together if written one after another.
    let keys = [
        ("ab", None, "c"),
        ("a", None, "bc"),
        ("a", Some("b"), "c"),
        ("a", Some(""), "bc"),
        ("", Some("a"), "bc"),
        ("", None, "abc"),
    ];
    let key = |(principal, user, call_id): (&str, Option<&str>, &str)| {
        IdempotencyKey::new(principal, user.map(str::to_owned), call_id)
    };
    let runs = Arc::new(AtomicUsize::new(0));
    for round in ["first", "again"] {
        for (i, parts) in keys.into_iter().enumerate() {
            let run = counted(&runs, text(&format!("{round} {i}")));
            // One fingerprint for all: a store that took one key for another would answer
            // with the other's answer, not refuse.
            let got = store.once(key(parts), fingerprint(0), run).await;
            let own = text(&format!("first {i}"));
            ensure(got == own, || {
                format!("{parts:?} ({round} call) answered {got:?}, not its own first answer")
            })?;
        }
    }
    let runs = runs.load(Ordering::SeqCst);
    ensure(runs == keys.len(), || {
        format!("{runs} runs for {} keys asked twice each", keys.len())
    })
}

async fn makes_a_duplicate_wait_for_the_run_in_flight<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let mut first = held(text("first"));
    let run = first.run.take().expect("a new run");
    let leader = ask_in_task(&store, key("ada", "c1"), fingerprint(1), run);
    (&mut first.started)
        .await
        .map_err(|_| "the first call's run was never started".to_owned())?;
    let runs = Arc::new(AtomicUsize::new(0));
    let duplicate = ask_in_task(
        &store,
        key("ada", "c1"),
        fingerprint(1),
        counted(&runs, text("second")),
    );
    let waited = still_waiting(&*store, &duplicate).await?;
    let _ = first.release.send(());
    let (leader, _) = joined(leader, "the first call").await?;
    let (got, reuse) = joined(duplicate, "the duplicate").await?;
    let runs = runs.load(Ordering::SeqCst);
    ensure(runs == 0, || "the duplicate ran the tool again".to_owned())?;
    ensure(waited, || {
        format!("the duplicate was answered {got:?} while the first run was still going")
    })?;
    ensure(leader == text("first"), || {
        format!("the first call answered {leader:?}")
    })?;
    ensure(got == text("first"), || {
        format!("the duplicate answered {got:?}, not the first run's answer")
    })?;
    ensure(matches!(reuse, Reuse::Waited | Reuse::Replayed), || {
        format!("the duplicate was reported {reuse:?}")
    })
}

async fn finishes_a_run_whose_caller_hung_up<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let mut first = held(text("finished"));
    let run = first.run.take().expect("a new run");
    let caller = ask_in_task(&store, key("ada", "c1"), fingerprint(1), run);
    (&mut first.started)
        .await
        .map_err(|_| "the run was never started".to_owned())?;
    caller.abort();
    let _ = caller.await;
    let _ = first.release.send(());
    first
        .ended
        .await
        .map_err(|_| "the run was dropped with its caller".to_owned())?;
    store.settled().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let retry = store
        .once(
            key("ada", "c1"),
            fingerprint(1),
            counted(&runs, text("again")),
        )
        .await;
    let runs = runs.load(Ordering::SeqCst);
    ensure(runs == 0, || "the retry ran the tool again".to_owned())?;
    ensure(retry == text("finished"), || {
        format!("the retry answered {retry:?}, not the run's answer")
    })
}

async fn runs_again_only_after_a_failure_that_asks_to_be_retried<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let failure = |can_retry| {
        CallOutcome::Completed(CallToolResponse {
            call_id: "contract".into(),
            duration: None,
            result: CallResult::Failure {
                error: crate::error::ToolError::new("busy").can_retry(can_retry),
            },
        })
    };
    let runs = Arc::new(AtomicUsize::new(0));
    for (call_id, can_retry, runs_expected) in [("retryable", true, 2), ("final", false, 1)] {
        runs.store(0, Ordering::SeqCst);
        let first = store
            .once(
                key("ada", call_id),
                fingerprint(1),
                counted(&runs, failure(can_retry)),
            )
            .await;
        let again = store
            .once(
                key("ada", call_id),
                fingerprint(1),
                counted(&runs, text("ran again")),
            )
            .await;
        let ran = runs.load(Ordering::SeqCst);
        ensure(ran == runs_expected, || {
            format!("a failure with can_retry: {can_retry} was followed by {ran} runs in two calls")
        })?;
        let expected = if can_retry { text("ran again") } else { first };
        ensure(again == expected, || {
            format!("after a failure with can_retry: {can_retry}, the repeat answered {again:?}")
        })?;
    }
    Ok(())
}

async fn never_evicts_a_running_entry<S: IdempotencyStore>(store: Arc<S>) -> Result<(), String> {
    let mut long = held(text("long"));
    let run = long.run.take().expect("a new run");
    let leader = ask_in_task(&store, key("ada", "long"), fingerprint(1), run);
    (&mut long.started)
        .await
        .map_err(|_| "the run was never started".to_owned())?;
    // Many times the store's capacity of answers, from several callers, while it runs.
    let runs = Arc::new(AtomicUsize::new(0));
    for i in 0..100 {
        let caller = format!("caller-{}", i % 5);
        store
            .once(
                key(&caller, &format!("c{i}")),
                fingerprint(1),
                counted(&runs, text("x")),
            )
            .await;
    }
    duplicate_waits(
        &store,
        long,
        leader,
        "of the running call ran the tool again: its entry was evicted",
        "of the running call",
    )
    .await
}

async fn never_runs_twice_a_run_that_outlives_its_lease_and_time_to_live<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let mut long = held(text("long"));
    let run = long.run.take().expect("a new run");
    let leader = ask_in_task(&store, key("ada", "long"), fingerprint(1), run);
    (&mut long.started)
        .await
        .map_err(|_| "the run was never started".to_owned())?;
    // Past three leases (200 ms each, given the store) and seven times the answers' time to
    // live.
    let started = answered("now_ms", store.now_ms().await)?;
    wait_for_store_clock(&*store, started + 700).await?;
    duplicate_waits(
        &store,
        long,
        leader,
        "ran the tool again once the run had outlived its lease",
        "of a run past its lease",
    )
    .await
}

/// A duplicate of the call `long` holds (`ada`'s `long`), asked while it runs: it waits for
/// the running call and takes its answer, and never runs the tool itself. `ran_twice` and
/// `whose` finish the sentences that say otherwise.
async fn duplicate_waits<S: IdempotencyStore>(
    store: &Arc<S>,
    long: Held,
    leader: tokio::task::JoinHandle<(CallOutcome, Reuse)>,
    ran_twice: &str,
    whose: &str,
) -> Result<(), String> {
    let again = Arc::new(AtomicUsize::new(0));
    let duplicate = ask_in_task(
        store,
        key("ada", "long"),
        fingerprint(1),
        counted(&again, text("ran twice")),
    );
    let waited = still_waiting(&**store, &duplicate).await?;
    let _ = long.release.send(());
    joined(leader, "the long call").await?;
    let (got, _) = joined(duplicate, "the duplicate").await?;
    ensure(again.load(Ordering::SeqCst) == 0, || {
        format!("a duplicate {ran_twice}")
    })?;
    ensure(waited && got == text("long"), || {
        format!("the duplicate {whose} answered {got:?}")
    })
}

async fn keeps_a_caller_s_answers_within_its_share_whatever_others_do<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let runs = Arc::new(AtomicUsize::new(0));
    store
        .once(
            key("quiet", "q1"),
            fingerprint(1),
            counted(&runs, text("mine")),
        )
        .await;
    for i in 0..200 {
        store
            .once(
                key("busy", &format!("b{i}")),
                fingerprint(1),
                counted(&runs, text("x")),
            )
            .await;
    }
    runs.store(0, Ordering::SeqCst);
    let again = store
        .once(
            key("quiet", "q1"),
            fingerprint(1),
            counted(&runs, text("again")),
        )
        .await;
    ensure(
        runs.load(Ordering::SeqCst) == 0 && again == text("mine"),
        || {
            format!(
                "a busy caller's load cost a quiet caller its answer: the retry answered {again:?}"
            )
        },
    )
}

async fn forgets_an_answer_once_its_time_to_live_has_passed<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let runs = Arc::new(AtomicUsize::new(0));
    store
        .once(
            key("ada", "c1"),
            fingerprint(1),
            counted(&runs, text("one")),
        )
        .await;
    let kept = answered("now_ms", store.now_ms().await)?;
    wait_for_store_clock(&*store, kept + millis(SHORT_TTL) + CLOCK_MARGIN_MS).await?;
    let again = store
        .once(
            key("ada", "c1"),
            fingerprint(1),
            counted(&runs, text("again")),
        )
        .await;
    ensure(again == text("again"), || {
        format!("past its time to live, the call was answered {again:?} without running")
    })
}

async fn makes_a_record_once<S: IdempotencyStore>(store: Arc<S>) -> Result<(), String> {
    let task = key("ada", "t1");
    let ttl = Duration::from_secs(60);
    let made = answered(
        "create_record",
        store.create_record(&task, "first".into(), ttl).await,
    )?;
    ensure(made, || "a new record was not made".to_owned())?;
    let again = answered(
        "create_record",
        store.create_record(&task, "second".into(), ttl).await,
    )?;
    ensure(!again, || {
        "a record was made twice under one key".to_owned()
    })?;
    let read = answered("read_record", store.read_record(&task).await)?;
    ensure(read.as_ref().is_some_and(|r| r.body == "first"), || {
        format!("the record reads {read:?}, not its first body")
    })
}

async fn reads_a_record_with_the_store_s_clock<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let task = key("ada", "t1");
    let missing = answered("read_record", store.read_record(&task).await)?;
    ensure(missing.is_none(), || {
        format!("a key with no record reads {missing:?}")
    })?;
    let ttl = Duration::from_secs(60);
    answered(
        "create_record",
        store.create_record(&task, "body".into(), ttl).await,
    )?;
    let before = answered("now_ms", store.now_ms().await)?;
    let read = answered("read_record", store.read_record(&task).await)?;
    let after = answered("now_ms", store.now_ms().await)?;
    let read = read.ok_or("a record just made is not found")?;
    ensure(read.body == "body", || {
        format!("the record reads {:?}", read.body)
    })?;
    ensure(before <= read.now && read.now <= after, || {
        format!(
            "a read says the store's time is {}, outside the {before}..={after} its clock read \
             around it",
            read.now
        )
    })
}

async fn replaces_a_record_only_at_its_version<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let task = key("ada", "t1");
    let ttl = Duration::from_secs(60);
    let replaced = answered(
        "replace_record",
        store.replace_record(&task, 1, "x".into()).await,
    )?;
    ensure(!replaced, || {
        "a record that does not exist was replaced".to_owned()
    })?;
    answered(
        "create_record",
        store.create_record(&task, "a".into(), ttl).await,
    )?;
    let version = (answered("read_record", store.read_record(&task).await)?)
        .ok_or("a record just made is not found")?
        .version;
    let replaced = answered(
        "replace_record",
        store.replace_record(&task, version, "b".into()).await,
    )?;
    ensure(replaced, || {
        "a replacement at the record's version was refused".to_owned()
    })?;
    let stale = answered(
        "replace_record",
        store.replace_record(&task, version, "c".into()).await,
    )?;
    ensure(!stale, || {
        "a replacement at a version already replaced was made".to_owned()
    })?;
    let read = answered("read_record", store.read_record(&task).await)?;
    ensure(
        read.as_ref()
            .is_some_and(|r| r.body == "b" && r.version == version + 1),
        || format!("after one replacement of version {version}, the record reads {read:?}"),
    )
}

async fn loses_no_write_when_replacements_race<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    const WRITERS: usize = 8;
    let task = key("ada", "t1");
    answered(
        "create_record",
        store
            .create_record(&task, "[]".into(), Duration::from_secs(60))
            .await,
    )?;
    let first = (answered("read_record", store.read_record(&task).await)?)
        .ok_or("a record just made is not found")?
        .version;
    let writers = (0..WRITERS).map(|writer| {
        let (store, task) = (store.clone(), task.clone());
        tokio::spawn(async move {
            // Read, change, write at the version read; again when another write came first.
            for _ in 0..1000 {
                let read = answered("read_record", store.read_record(&task).await)?
                    .ok_or("the record went missing")?;
                let mut list: Vec<usize> = serde_json::from_str(&read.body)
                    .map_err(|_| format!("the record reads {:?}", read.body))?;
                list.push(writer);
                let body = serde_json::to_string(&list).expect("a list of numbers");
                if answered(
                    "replace_record",
                    store.replace_record(&task, read.version, body).await,
                )? {
                    return Ok(());
                }
                tokio::task::yield_now().await;
            }
            Err::<(), String>(format!("writer {writer} never got a write in"))
        })
    });
    for writer in futures_util::future::join_all(writers).await {
        writer.map_err(|error| format!("a writer ended: {error}"))??;
    }
    let read = (answered("read_record", store.read_record(&task).await)?)
        .ok_or("the record went missing")?;
    let mut list: Vec<usize> = serde_json::from_str(&read.body).unwrap_or_default();
    list.sort_unstable();
    ensure(list == (0..WRITERS).collect::<Vec<_>>(), || {
        format!("{WRITERS} racing writers left {:?}", read.body)
    })?;
    ensure(read.version == first + WRITERS as u64, || {
        format!(
            "{WRITERS} replacements took version {first} to {}",
            read.version
        )
    })
}

async fn keeps_one_attachment_beside_a_record<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let task = key("ada", "t1");
    let attached = answered("attach", store.attach(&task, "x".into()).await)?;
    ensure(!attached, || {
        "something was attached to no record".to_owned()
    })?;
    answered(
        "create_record",
        store
            .create_record(&task, "a".into(), Duration::from_secs(60))
            .await,
    )?;
    let attached = answered("attach", store.attach(&task, "input".into()).await)?;
    ensure(attached, || {
        "nothing could be attached to a new record".to_owned()
    })?;
    let second = answered("attach", store.attach(&task, "other".into()).await)?;
    ensure(!second, || "a second attachment was kept".to_owned())?;
    let version = (answered("read_record", store.read_record(&task).await)?)
        .ok_or("the record went missing")?
        .version;
    answered(
        "replace_record",
        store.replace_record(&task, version, "b".into()).await,
    )?;
    let kept = answered("attachment", store.attachment(&task).await)?;
    ensure(kept.as_deref() == Some("input"), || {
        format!("after a replacement, the attachment is {kept:?}")
    })?;
    answered("detach", store.detach(&task).await)?;
    let gone = answered("attachment", store.attachment(&task).await)?;
    ensure(gone.is_none(), || {
        format!("after detach, the attachment is {gone:?}")
    })?;
    let again = answered("attach", store.attach(&task, "new".into()).await)?;
    ensure(again, || {
        "nothing could be attached once the first was detached".to_owned()
    })
}

async fn forgets_a_removed_record<S: IdempotencyStore>(store: Arc<S>) -> Result<(), String> {
    let task = key("ada", "t1");
    let ttl = Duration::from_secs(60);
    answered(
        "create_record",
        store.create_record(&task, "a".into(), ttl).await,
    )?;
    answered("attach", store.attach(&task, "input".into()).await)?;
    answered("remove_record", store.remove_record(&task).await)?;
    let read = answered("read_record", store.read_record(&task).await)?;
    ensure(read.is_none(), || {
        format!("a removed record reads {read:?}")
    })?;
    let attachment = answered("attachment", store.attachment(&task).await)?;
    ensure(attachment.is_none(), || {
        format!("a removed record's attachment is {attachment:?}")
    })?;
    let made = answered(
        "create_record",
        store.create_record(&task, "b".into(), ttl).await,
    )?;
    ensure(made, || {
        "a record could not be made again under a removed one's key".to_owned()
    })
}

async fn keeps_records_of_callers_and_users_apart<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let keys = [
        IdempotencyKey::new("ada", None, "t1"),
        IdempotencyKey::new("bob", None, "t1"),
        IdempotencyKey::new("ada", Some("eve".into()), "t1"),
        IdempotencyKey::new("ada", Some(String::new()), "t1"),
    ];
    let ttl = Duration::from_secs(60);
    for (i, task) in keys.iter().enumerate() {
        let made = answered(
            "create_record",
            store.create_record(task, format!("{i}"), ttl).await,
        )?;
        ensure(made, || format!("{task:?} found another key's record"))?;
    }
    for (i, task) in keys.iter().enumerate() {
        let read = answered("read_record", store.read_record(task).await)?;
        ensure(
            read.as_ref().is_some_and(|r| r.body == i.to_string()),
            || format!("{task:?} reads {read:?}"),
        )?;
    }
    Ok(())
}

async fn keeps_a_caller_s_records_within_its_share<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    // Two records a caller, and a fifth of the bytes.
    let ttl = Duration::from_secs(60);
    for id in ["t1", "t2"] {
        let made = answered(
            "create_record",
            store.create_record(&key("ada", id), "a".into(), ttl).await,
        )?;
        ensure(made, || {
            format!("a caller's record {id} within its share was refused")
        })?;
    }
    let third = store
        .create_record(&key("ada", "t3"), "a".into(), ttl)
        .await;
    ensure(third == Err(StoreError::CallerFull), || {
        format!("a caller's third record, past its share of two, was answered {third:?}")
    })?;
    let other = store
        .create_record(&key("bob", "t1"), "b".into(), ttl)
        .await;
    ensure(other == Ok(true), || {
        format!("another caller's record was answered {other:?}: its share is its own")
    })?;
    let large = "x".repeat(300_000);
    let over = store.create_record(&key("cy", "t1"), large, ttl).await;
    ensure(over == Err(StoreError::CallerFull), || {
        format!("a record past its caller's fifth of the bytes was answered {over:?}")
    })
}

async fn is_bounded_by_count_and_bytes<S: IdempotencyStore>(store: Arc<S>) -> Result<(), String> {
    // Ten records in all, two a caller: five callers fill it.
    let ttl = Duration::from_secs(60);
    for caller in 0..5 {
        for id in ["t1", "t2"] {
            let task = key(&format!("caller-{caller}"), id);
            let made = answered(
                "create_record",
                store.create_record(&task, "a".into(), ttl).await,
            )?;
            ensure(made, || {
                format!("record {} of 10 was refused", caller * 2 + 1)
            })?;
        }
    }
    let past = store
        .create_record(&key("caller-5", "t1"), "a".into(), ttl)
        .await;
    ensure(past == Err(StoreError::Full), || {
        format!("an eleventh record in a store of ten was answered {past:?}")
    })?;
    let kept = store
        .create_record(&key("caller-0", "t1"), "b".into(), ttl)
        .await;
    ensure(kept == Ok(false), || {
        format!("a record already kept, made again in a full store, was answered {kept:?}")
    })?;
    // Bytes: a mebibyte in all. A record may grow only into room there is.
    let task = key("caller-0", "t1");
    let read = (answered("read_record", store.read_record(&task).await)?)
        .ok_or("a kept record went missing")?;
    let huge = "y".repeat(2 * 1024 * 1024);
    let grown = store.replace_record(&task, read.version, huge).await;
    ensure(grown == Err(StoreError::Full), || {
        format!("a record grown past the store's bytes was answered {grown:?}")
    })?;
    let after = answered("read_record", store.read_record(&task).await)?;
    let unchanged = |r: &Versioned| r.body == read.body && r.version == read.version;
    ensure(after.as_ref().is_some_and(unchanged), || {
        format!("a refused replacement left the record {after:?}")
    })
}

async fn forgets_a_record_once_its_time_to_live_has_passed<S: IdempotencyStore>(
    store: Arc<S>,
) -> Result<(), String> {
    let (short, long) = (key("ada", "short"), key("bob", "long"));
    answered(
        "create_record",
        store
            .create_record(&long, "long".into(), Duration::from_secs(3600))
            .await,
    )?;
    answered(
        "create_record",
        store.create_record(&short, "short".into(), SHORT_TTL).await,
    )?;
    answered("attach", store.attach(&short, "input".into()).await)?;
    answered(
        "create_record",
        store
            .create_record(&key("ada", "t2"), "t2".into(), SHORT_TTL)
            .await,
    )?;
    let made = answered("now_ms", store.now_ms().await)?;
    let full = store
        .create_record(&key("ada", "t5"), "a".into(), SHORT_TTL)
        .await;
    ensure(full == Err(StoreError::CallerFull), || {
        format!("a caller's third record, past its share of two, was answered {full:?}")
    })?;
    wait_for_store_clock(&*store, made + millis(SHORT_TTL) + CLOCK_MARGIN_MS).await?;
    let read = answered("read_record", store.read_record(&short).await)?;
    ensure(read.is_none(), || {
        format!("past its time to live, a record reads {read:?}")
    })?;
    let attachment = answered("attachment", store.attachment(&short).await)?;
    ensure(attachment.is_none(), || {
        format!("past its record's time to live, the attachment is {attachment:?}")
    })?;
    let kept = answered("read_record", store.read_record(&long).await)?;
    ensure(kept.is_some_and(|r| r.body == "long"), || {
        "a record within its time to live was forgotten".to_owned()
    })?;
    // Its caller had its share of two taken; both expired, so both places are free again.
    for id in ["t3", "t4"] {
        let again = store
            .create_record(&key("ada", id), "a".into(), SHORT_TTL)
            .await;
        ensure(again == Ok(true), || {
            format!("once its records expired, a caller's new record was answered {again:?}")
        })?;
    }
    Ok(())
}
