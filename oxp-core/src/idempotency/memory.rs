//! [`InMemoryIdempotency`]: the default store, in this process's memory.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::future::{self, FutureExt};
use hashbrown::{HashTable, hash_table};

use super::*;
use crate::outcome::CallOutcome;

/// The default store: in memory, bounded by count, by bytes and in time. When full, the oldest
/// finished answer goes first; a run still in flight is never evicted (so a duplicate can never
/// run the tool again while the first run goes on). An answer larger than the whole byte budget
/// is not kept at all.
///
/// ```
/// use oxp_runtime::idempotency::InMemoryIdempotency;
///
/// let store = InMemoryIdempotency::new(10_000, std::time::Duration::from_secs(600))
///     .max_bytes(16 * 1024 * 1024);
/// assert_eq!(store.len(), 0);
/// ```
#[derive(Clone)]
pub struct InMemoryIdempotency {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Seeded at random per store: keys hold client-chosen call_ids, and the seed keeps
    /// where they land in the map unpredictable. (foldhash's quality hasher: cheaper than
    /// SipHash.)
    hasher: foldhash::quality::RandomState,
    capacity: usize,
    max_bytes: usize,
    ttl: Duration,
    /// One caller's share of the store: this many kept answers and records, and
    /// [`share_bytes`](Self::share_bytes) of their bytes.
    per_caller: usize,
    share_bytes: usize,
}

#[derive(Default)]
struct State {
    /// Every key with a run in flight or an answer kept, found by the key's hash.
    entries: HashTable<Entry>,
    /// Finished answers, oldest first (all live equally long, so this is also expiry order).
    /// A line whose answer a caller's own newer answers pushed out stays until it comes up.
    finished: VecDeque<Finished>,
    /// How many answers are kept (the lines of `finished` whose entry is still there).
    finished_count: usize,
    finished_bytes: usize,
    /// What each caller (the key before its `call_id`) has kept, by its key's owner bytes.
    tenants: std::collections::HashMap<Vec<u8>, Tenant>,
    /// How many callers keep more than their share: room they took while it was free, given
    /// back first when another caller needs it.
    over_share: usize,
    next_generation: u64,
    /// Tasks' records (see [`crate::tasks`]) by key, within the same count and byte budgets:
    /// kept until they expire, never evicted to make room (a task's id was given out).
    records: std::collections::HashMap<Vec<u8>, Record>,
    record_bytes: usize,
}

/// What one caller keeps: its answers, oldest first (all of them live: answers are only ever
/// forgotten at the front of their caller's line), and its count and bytes, records included.
#[derive(Default)]
struct Tenant {
    answers: VecDeque<(u64, u64)>,
    count: usize,
    bytes: usize,
    records: usize,
    record_bytes: usize,
}

impl Tenant {
    fn over(&self, inner: &Inner) -> bool {
        self.count > inner.per_caller || self.bytes > inner.share_bytes
    }
}

/// A record as this store keeps it.
struct Record {
    /// The length of its key's owner part (the key before the `call_id`).
    owner: usize,
    version: u64,
    body: String,
    /// Its size when made: it counts as at least this and [`RECORD_SLACK`] more, so that its
    /// later small writes (a status, an end) always fit.
    base: usize,
    /// When its time to live is up, by this process's monotonic clock.
    expires: Instant,
    /// What [`IdempotencyStore::attach`] keeps beside it, counted in its bytes.
    attachment: Option<String>,
}

/// A line of [`State::finished`]: which entry it is, by its hash and its generation, without its
/// key. Forgetting the oldest answer finds its entry by those, and reads no key bytes: a key
/// forgotten to make room was written thousands of calls ago, and every read of it would be a
/// miss in the CPU's caches. Generations are never reused, so a line whose entry has since gone
/// finds nothing.
struct Finished {
    expires: Instant,
    hash: u64,
    generation: u64,
}

/// One key's entry. Its key and, once the run ends, its answer share one allocation: the store
/// holds thousands of answers, and each costs one allocation to make and one free to forget.
struct Entry {
    /// The key's hash, taken once, on arrival (seeded: see [`Inner::hasher`]).
    hash: u64,
    /// Which run this entry is: finishing a run and forgetting an answer find the entry by it.
    generation: u64,
    fingerprint: Fingerprint,
    /// The key's bytes (see [`key_bytes`]), then the answer's JSON once it is [`Run::Done`].
    bytes: Vec<u8>,
    key_len: usize,
    /// The length of the key's owner part (the key before the `call_id`).
    owner_len: usize,
    run: Run,
}

enum Run {
    /// Running; what duplicates wait on, made by the first of them (most runs have none).
    Running(Option<Arc<Pending>>),
    /// Ended, its answer kept as its JSON after the key: the outcome itself is a tree of
    /// allocations, and each kept answer is read back only if its call is retried.
    Done,
}

impl Entry {
    fn key(&self) -> &[u8] {
        &self.bytes[..self.key_len]
    }

    fn owner(&self) -> &[u8] {
        &self.bytes[..self.owner_len]
    }

    /// The answer's JSON (empty while running).
    fn json(&self) -> &[u8] {
        &self.bytes[self.key_len..]
    }
}

/// A key as this store holds it: [`IdempotencyKey`]'s `Display` scheme (which Redis keys use, so
/// it stays as it is) in binary. The parts before the call_id are prefixed with their lengths
/// (and the user with whether there is one), so that no two keys are written alike. Room is left
/// after it for a typical answer, which is written there when the run ends.
fn key_bytes(key: &IdempotencyKey) -> Vec<u8> {
    /// Room for the JSON of most answers, so that keeping one seldom moves the key.
    const ANSWER_ROOM: usize = 256;
    let principal = key.principal.as_bytes();
    let user = key.user.as_deref().unwrap_or_default().as_bytes();
    let parts: [&[u8]; 6] = [
        &(principal.len() as u64).to_le_bytes(),
        principal,
        &[u8::from(key.user.is_some())],
        &(user.len() as u64).to_le_bytes(),
        user,
        key.call_id.as_bytes(),
    ];
    let len: usize = parts.iter().map(|part| part.len()).sum();
    let mut bytes = Vec::with_capacity(len + ANSWER_ROOM);
    for part in parts {
        bytes.extend_from_slice(part);
    }
    bytes
}

/// A run in flight, for the duplicates that wait on it: its outcome is set (and they are woken)
/// when it ends.
#[derive(Default)]
struct Pending {
    outcome: std::sync::OnceLock<CallOutcome>,
    ended: tokio::sync::Notify,
}

impl Pending {
    /// The run's outcome, once it ends.
    async fn outcome(self: Arc<Self>) -> CallOutcome {
        loop {
            let ended = self.ended.notified();
            let mut ended = std::pin::pin!(ended);
            // Registered before looking, so an end between the look and the wait still wakes.
            ended.as_mut().enable();
            if let Some(outcome) = self.outcome.get() {
                return outcome.clone();
            }
            ended.await;
        }
    }
}

impl fmt::Debug for InMemoryIdempotency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.lock();
        f.debug_struct("InMemoryIdempotency")
            .field("entries", &state.entries.len())
            .field("bytes", &state.finished_bytes)
            .field("capacity", &self.inner.capacity)
            .field("max_bytes", &self.inner.max_bytes)
            .finish()
    }
}

impl Default for InMemoryIdempotency {
    fn default() -> Self {
        InMemoryIdempotency::new(DEFAULT_CAPACITY, DEFAULT_TTL)
    }
}

impl InMemoryIdempotency {
    /// Keeps at most `capacity` answers, each for `ttl`, within [`DEFAULT_MAX_BYTES`].
    ///
    /// ```
    /// use oxp_runtime::idempotency::InMemoryIdempotency;
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// // Agents that retry for up to an hour: keep answers that long, at most 100,000 of them.
    /// let store = InMemoryIdempotency::new(100_000, std::time::Duration::from_secs(3600));
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry).idempotency(Some(store));
    /// ```
    pub fn new(capacity: u64, ttl: Duration) -> Self {
        InMemoryIdempotency::with(capacity, DEFAULT_MAX_BYTES, ttl, capacity / CALLERS_SHARING)
    }

    fn with(capacity: u64, max_bytes: u64, ttl: Duration, per_caller: u64) -> Self {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let per_caller = per_caller.max(1);
        InMemoryIdempotency {
            inner: Arc::new(Inner {
                state: Mutex::default(),
                hasher: foldhash::quality::RandomState::default(),
                capacity: size(capacity),
                max_bytes: size(max_bytes),
                ttl,
                per_caller: size(per_caller),
                share_bytes: size(share_of(max_bytes, per_caller, capacity)),
            }),
        }
    }

    /// At most `bytes` of answers (counted as their JSON) kept at once.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, idempotency::InMemoryIdempotency, tool, Registry};
    ///
    /// /// A long text.
    /// #[tool(toolkit = "Text", version = "1.0.0")]
    /// async fn long(bytes: usize) -> String { "a".repeat(bytes) }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let store = InMemoryIdempotency::default().max_bytes(1 << 20);
    /// let pipeline = Pipeline::new(Registry::builder().tool(long::TOOL).build().unwrap())
    ///     .idempotency(Some(store.clone()));
    /// for i in 0..4 {
    ///     let request = format!(r#"{{"tool_id": "Text.Long", "call_id": "t{i}", "input": {{"bytes": 400000}}}}"#);
    ///     pipeline.call(serde_json::from_str(&request).unwrap()).await;
    /// }
    /// assert!(store.bytes() <= 1 << 20, "the oldest answers made room");
    /// assert_eq!(store.len(), 2);
    /// # });
    /// ```
    #[must_use]
    pub fn max_bytes(self, bytes: u64) -> Self {
        let inner = &self.inner;
        InMemoryIdempotency::with(
            inner.capacity as u64,
            bytes,
            inner.ttl,
            inner.per_caller as u64,
        )
    }

    /// One caller's (a principal and user's) share of the store: how many task records it may
    /// have kept at once, and the same fraction of the byte budget for their bytes (default a
    /// tenth of each; `OXP_TASKS_PER_CALLER`), so that no caller fills the store for everyone:
    /// past it, that caller's new task is refused. Its `call_id` answers may use room no one
    /// else needs, but what it keeps past its share is what goes first when another caller
    /// within its share needs room: no caller's load pushes out another's answers.
    ///
    /// ```
    /// use oxp_runtime::idempotency::InMemoryIdempotency;
    /// # let registry = oxp_runtime::Registry::builder().build().unwrap();
    /// let store = InMemoryIdempotency::default().records_per_caller(50);
    /// let pipeline = oxp_runtime::call::Pipeline::new(registry).idempotency(Some(store));
    /// ```
    #[must_use]
    pub fn records_per_caller(self, count: u64) -> Self {
        let inner = &self.inner;
        InMemoryIdempotency::with(
            inner.capacity as u64,
            inner.max_bytes as u64,
            inner.ttl,
            count,
        )
    }

    /// How many entries it holds now, running and finished.
    ///
    /// ```
    /// use oxp_runtime::{call::Pipeline, idempotency::InMemoryIdempotency, tool, Registry};
    ///
    /// /// Ring a bell.
    /// #[tool(toolkit = "Bell", version = "1.0.0")]
    /// async fn ring() {}
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let store = InMemoryIdempotency::default();
    /// let pipeline = Pipeline::new(Registry::builder().tool(ring::TOOL).build().unwrap())
    ///     .idempotency(Some(store.clone()));
    /// let request = serde_json::from_str(r#"{"tool_id": "Bell.Ring", "call_id": "r1"}"#).unwrap();
    /// pipeline.call(request).await;
    /// assert_eq!(store.len(), 1, "one answer kept, under r1");
    /// # });
    /// ```
    pub fn len(&self) -> usize {
        let state = self.inner.lock();
        state.entries.len() + state.records.len()
    }

    /// Whether it holds nothing.
    ///
    /// ```
    /// assert!(oxp_runtime::idempotency::InMemoryIdempotency::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of the finished answers it holds, as their JSON.
    ///
    /// ```
    /// assert_eq!(oxp_runtime::idempotency::InMemoryIdempotency::default().bytes(), 0);
    /// ```
    pub fn bytes(&self) -> usize {
        let state = self.inner.lock();
        state.finished_bytes + state.record_bytes
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a run's outcome in its entry and hands it to the duplicates waiting on the run.
    fn finish(&self, hash: u64, generation: u64, outcome: &CallOutcome) {
        // A failure the tool calls retryable is not an answer to keep: the retry it asks for
        // must run the tool again; nor is "unavailable", which is no answer of the tool's. An
        // answer larger than the whole budget cannot be kept. Written before taking the lock,
        // which every call with a call_id needs.
        let keep =
            !outcome.is_retryable_failure() && !matches!(outcome, CallOutcome::Unavailable { .. });
        with_json_buffer(|json| {
            let kept = keep && write_json_within(json, outcome, self.max_bytes);
            self.record(hash, generation, outcome, kept.then_some(json.as_slice()));
            if json.capacity() > JSON_BUFFER_KEPT {
                *json = Vec::new();
            }
        });
    }

    /// Ends the run of entry (`hash`, `generation`) with `outcome`, kept as `json` if that is
    /// given, else forgotten; duplicates waiting on the run are handed the outcome either way.
    fn record(&self, hash: u64, generation: u64, outcome: &CallOutcome, json: Option<&[u8]>) {
        let mut state = self.lock();
        // Always found: a running entry is never forgotten.
        let Ok(mut found) = state
            .entries
            .find_entry(hash, |entry| entry.generation == generation)
        else {
            return;
        };
        let entry = found.get_mut();
        if let Run::Running(Some(pending)) = &entry.run {
            let _ = pending.outcome.set(outcome.clone());
            pending.ended.notify_waiters();
        }
        let Some(json) = json else {
            found.remove();
            return;
        };
        entry.bytes.reserve_exact(json.len());
        entry.bytes.extend_from_slice(json);
        entry.run = Run::Done;
        let owner = entry.owner().to_vec();
        state.finished_bytes += json.len();
        state.finished_count += 1;
        state.finished.push_back(Finished {
            expires: Instant::now() + self.ttl,
            hash,
            generation,
        });
        let inner = self;
        state.charge(inner, &owner, |tenant| {
            tenant.answers.push_back((hash, generation));
            tenant.count += 1;
            tenant.bytes += json.len();
        });
        while state.over_budget(self, 0, 0) {
            if !state.make_room(self, &owner, true) {
                break;
            }
        }
    }
}

impl State {
    /// Changes what the caller `owner` keeps by `change`, keeping the count of callers over
    /// their share; a caller that keeps nothing is forgotten.
    fn charge(&mut self, inner: &Inner, owner: &[u8], change: impl FnOnce(&mut Tenant)) {
        let tenant = match self.tenants.get_mut(owner) {
            Some(tenant) => tenant,
            None => self.tenants.entry(owner.to_vec()).or_default(),
        };
        let was_over = tenant.over(inner);
        change(tenant);
        let is_over = tenant.over(inner);
        let empty = tenant.count == 0 && tenant.records == 0;
        match (was_over, is_over) {
            (false, true) => self.over_share += 1,
            (true, false) => self.over_share -= 1,
            _ => {}
        }
        if empty {
            self.tenants.remove(owner);
        }
    }

    /// Whether the store, with `count` more entries and `bytes` more bytes, is past a budget.
    fn over_budget(&self, inner: &Inner, count: usize, bytes: usize) -> bool {
        self.finished_count + self.records.len() + count > inner.capacity
            || self.finished_bytes + self.record_bytes + bytes > inner.max_bytes
    }

    /// Forgets one answer to make room for `owner`: its own oldest if it keeps more than its
    /// share, else the oldest of a caller that does; with `anyone` (room for an answer, not a
    /// record), the oldest of all when every caller keeps within its share. `false` if
    /// nothing could go.
    fn make_room(&mut self, inner: &Inner, owner: &[u8], anyone: bool) -> bool {
        let own = self
            .tenants
            .get(owner)
            .filter(|tenant| tenant.over(inner) && !tenant.answers.is_empty())
            .map(|_| owner.to_vec());
        let victim = own.or_else(|| {
            (self.over_share > 0)
                .then(|| {
                    (self.tenants.iter())
                        .find(|(_, tenant)| tenant.over(inner) && !tenant.answers.is_empty())
                        .map(|(owner, _)| owner.clone())
                })
                .flatten()
        });
        if let Some(victim) = victim {
            let line = self.tenants.get(&victim).and_then(|t| t.answers.front());
            let &(hash, generation) = line.expect("a victim keeps an answer");
            self.forget(inner, hash, generation);
            return true;
        }
        if anyone && self.finished_count > 0 {
            self.pop_oldest(inner);
            return true;
        }
        false
    }

    /// Forgets the kept answer of entry (`hash`, `generation`), if it is still there. Its line
    /// in `finished` stays, and finds nothing when it comes up.
    fn forget(&mut self, inner: &Inner, hash: u64, generation: u64) {
        let Ok(found) = self
            .entries
            .find_entry(hash, |entry| entry.generation == generation)
        else {
            return;
        };
        // A line is written when its run's answer is kept, and a generation names one run.
        debug_assert!(matches!(found.get().run, Run::Done));
        let (entry, _) = found.remove();
        let len = entry.json().len();
        self.finished_bytes -= len;
        self.finished_count -= 1;
        self.charge(inner, entry.owner(), |tenant| {
            // Answers go in the order they came, in their caller's line as in the store's.
            let first = tenant.answers.pop_front();
            debug_assert_eq!(first, Some((hash, generation)));
            tenant.count -= 1;
            tenant.bytes -= len;
        });
    }

    /// Forgets the oldest finished answer (a line whose entry has since gone is skipped).
    fn pop_oldest(&mut self, inner: &Inner) {
        if let Some(Finished {
            hash, generation, ..
        }) = self.finished.pop_front()
        {
            self.forget(inner, hash, generation);
        }
    }

    fn expire(&mut self, inner: &Inner, now: Instant) {
        while self
            .finished
            .front()
            .is_some_and(|line| line.expires <= now)
        {
            self.pop_oldest(inner);
        }
    }
}

thread_local! {
    /// Where an answer is written before it is copied after its key: one buffer per thread,
    /// reused, rather than an allocation per call (the write takes no lock and never awaits).
    static JSON: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `write` with this thread's buffer for answers, or with a new one where that buffer is
/// not to be had: a run dropped while its thread exits (its thread-locals already gone), or a
/// run ended from within another's end (a waker that polls in place). Neither may panic.
fn with_json_buffer<R>(write: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let mut write = Some(write);
    let mut in_buffer = |json: &mut Vec<u8>| write.take().map(|write| write(json));
    let done = JSON
        .try_with(|buffer| {
            let mut json = buffer.try_borrow_mut().ok()?;
            in_buffer(&mut json)
        })
        .ok()
        .flatten();
    match done {
        Some(done) => done,
        None => in_buffer(&mut Vec::new()).expect("`write` ran in no buffer yet"),
    }
}

/// A buffer grown larger than this is let go once its answer is copied: one huge answer must not
/// pin its size in every thread that ever wrote one.
const JSON_BUFFER_KEPT: usize = 64 * 1024;

/// Writes `outcome`'s JSON into `json` (emptied first) and says whether it fits in `max` bytes
/// (writing stops there: an answer too large to keep is never copied whole).
fn write_json_within(json: &mut Vec<u8>, outcome: &CallOutcome, max: usize) -> bool {
    struct Within<'a> {
        json: &'a mut Vec<u8>,
        max: usize,
    }
    impl std::io::Write for Within<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.json.len() + buf.len() > self.max {
                return Err(std::io::ErrorKind::FileTooLarge.into());
            }
            self.json.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    json.clear();
    serde_json::to_writer(Within { json, max }, outcome).is_ok()
}

/// A kept answer, read back for a retry. It was written by [`write_json_within`] from an
/// outcome, so it reads; were it not to, the retry is told to try again rather than given a
/// wrong answer.
fn from_json(json: &[u8]) -> CallOutcome {
    serde_json::from_slice(json).unwrap_or_else(|error| {
        tracing::error!(
            target: "oxp_runtime::idempotency::memory",
            %error, "a kept answer did not read back",
        );
        CallOutcome::unavailable("the kept answer to this call_id could not be read")
    })
}

/// The first call with a key: drives the run and records its outcome.
struct Leader {
    run: Option<BoxFuture<'static, CallOutcome>>,
    store: Arc<Inner>,
    /// Its entry's hash and generation, which find the entry without the key.
    hash: u64,
    generation: u64,
}

impl Future for Leader {
    type Output = (CallOutcome, Reuse);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let run = this.run.as_mut().expect("polled after it ended");
        let outcome = std::task::ready!(run.poll_unpin(cx));
        this.run = None;
        this.store.finish(this.hash, this.generation, &outcome);
        Poll::Ready((outcome, Reuse::Fresh))
    }
}

impl Drop for Leader {
    /// Dropped mid-run: the run goes on without its caller (a runtime is there to take it
    /// wherever a call is polled; without one, it ends here, answered as unavailable).
    fn drop(&mut self) {
        let Some(run) = self.run.take() else {
            return;
        };
        let (store, hash, generation) = (self.store.clone(), self.hash, self.generation);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let outcome = run.await;
                    store.finish(hash, generation, &outcome);
                });
            }
            Err(_) => {
                drop(run);
                let outcome = CallOutcome::unavailable("the call was dropped outside a runtime");
                store.finish(hash, generation, &outcome);
            }
        }
    }
}

impl Record {
    /// The bytes it counts for against the budget.
    fn counted(&self) -> usize {
        counted(self.body.len(), self.base) + self.attachment.as_ref().map_or(0, String::len)
    }
}

/// What a record of `len` bytes made at `base` counts for: its size, and never less than its
/// size when made with its reserve.
fn counted(len: usize, base: usize) -> usize {
    len.max(base + RECORD_SLACK)
}

impl State {
    /// Forgets the records whose time is up.
    fn expire_records(&mut self, inner: &Inner, now: Instant) {
        if !self.records.values().any(|r| r.expires <= now) {
            return;
        }
        let gone: Vec<Vec<u8>> = (self.records.iter())
            .filter(|(_, r)| r.expires <= now)
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            self.drop_record(inner, &key);
        }
    }

    /// Forgets the record under `key`, if any.
    fn drop_record(&mut self, inner: &Inner, key: &[u8]) {
        if let Some(record) = self.records.remove(key) {
            let counted = record.counted();
            self.record_bytes -= counted;
            self.charge(inner, &key[..record.owner], |tenant| {
                tenant.records -= 1;
                tenant.record_bytes -= counted;
                tenant.bytes -= counted;
            });
        }
    }

    /// Makes room for `bytes` more of `owner`'s records (`count` of them new): within its
    /// share of the store, by forgetting its own answers or those of callers past their share,
    /// never anyone else's (records are kept for their time to live and never evicted).
    fn room_for_record(
        &mut self,
        inner: &Inner,
        owner: &[u8],
        count: usize,
        bytes: usize,
    ) -> Result<(), StoreError> {
        let (records, record_bytes) = (self.tenants.get(owner))
            .map_or((0, 0), |tenant| (tenant.records, tenant.record_bytes));
        if records + count > inner.per_caller || record_bytes + bytes > inner.share_bytes {
            return Err(StoreError::CallerFull);
        }
        while self.over_budget(inner, count, bytes) {
            if !self.make_room(inner, owner, false) {
                return Err(StoreError::Full);
            }
        }
        Ok(())
    }
}

impl IdempotencyStore for InMemoryIdempotency {
    fn create_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        body: String,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let bytes = key_bytes(key);
        let inner = &*self.inner;
        let mut state = inner.lock();
        let now = Instant::now();
        state.expire_records(inner, now);
        // One kept already is found whatever room is left (a replayed round finds its task).
        let owner = bytes.len() - key.call_id.len();
        let size = counted(body.len(), body.len());
        let created = if state.records.contains_key(&bytes) {
            Ok(false)
        } else {
            state
                .room_for_record(inner, &bytes[..owner], 1, size)
                .map(|()| {
                    state.record_bytes += size;
                    state.charge(inner, &bytes[..owner], |tenant| {
                        tenant.records += 1;
                        tenant.record_bytes += size;
                        tenant.bytes += size;
                    });
                    let record = Record {
                        owner,
                        base: body.len(),
                        version: 1,
                        body,
                        expires: now + ttl,
                        attachment: None,
                    };
                    state.records.insert(bytes, record);
                    true
                })
        };
        future::ready(created).boxed()
    }

    fn read_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<Versioned>, StoreError>> {
        let now = Instant::now();
        let state = self.inner.lock();
        let found = (state.records.get(key_bytes(key).as_slice()))
            .filter(|record| record.expires > now)
            .map(|record| Versioned {
                version: record.version,
                body: record.body.clone(),
                now: crate::time::now_ms(),
            });
        future::ready(Ok(found)).boxed()
    }

    fn replace_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        version: u64,
        body: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let now = Instant::now();
        let bytes = key_bytes(key);
        let inner = &*self.inner;
        let mut guard = inner.lock();
        let state = &mut *guard;
        let (owner, old, new) = match state.records.get(bytes.as_slice()) {
            Some(record) if record.version == version && record.expires > now => (
                record.owner,
                record.counted(),
                counted(body.len(), record.base) + record.counted()
                    - counted(record.body.len(), record.base),
            ),
            _ => return future::ready(Ok(false)).boxed(),
        };
        // A record that grows past its reserve (a task's result, answers) makes room as a new
        // one does, within its caller's share; within its reserve, it always fits.
        if new > old {
            if let Err(error) = state.room_for_record(inner, &bytes[..owner], 0, new - old) {
                // Past its caller's share or the store's: the same answer, no room.
                let _ = error;
                return future::ready(Err(StoreError::Full)).boxed();
            }
        }
        state.record_bytes = state.record_bytes + new - old;
        state.charge(inner, &bytes[..owner], |tenant| {
            tenant.record_bytes = tenant.record_bytes + new - old;
            tenant.bytes = tenant.bytes + new - old;
        });
        let record = state
            .records
            .get_mut(bytes.as_slice())
            .expect("found above");
        record.body = body;
        record.version += 1;
        future::ready(Ok(true)).boxed()
    }

    fn remove_record<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let inner = &*self.inner;
        inner.lock().drop_record(inner, key_bytes(key).as_slice());
        future::ready(Ok(())).boxed()
    }

    fn attach<'a>(
        &'a self,
        key: &'a IdempotencyKey,
        blob: String,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let now = Instant::now();
        let bytes = key_bytes(key);
        let inner = &*self.inner;
        let mut guard = inner.lock();
        let state = &mut *guard;
        let owner = match state.records.get(bytes.as_slice()) {
            Some(record) if record.expires > now && record.attachment.is_none() => record.owner,
            _ => return future::ready(Ok(false)).boxed(),
        };
        if let Err(error) = state.room_for_record(inner, &bytes[..owner], 0, blob.len()) {
            return future::ready(Err(error)).boxed();
        }
        let size = blob.len();
        state.record_bytes += size;
        state.charge(inner, &bytes[..owner], |tenant| {
            tenant.record_bytes += size;
            tenant.bytes += size;
        });
        let record = state
            .records
            .get_mut(bytes.as_slice())
            .expect("found above");
        record.attachment = Some(blob);
        future::ready(Ok(true)).boxed()
    }

    fn attachment<'a>(
        &'a self,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        let now = Instant::now();
        let state = self.inner.lock();
        let found = (state.records.get(key_bytes(key).as_slice()))
            .filter(|record| record.expires > now)
            .and_then(|record| record.attachment.clone());
        future::ready(Ok(found)).boxed()
    }

    fn detach<'a>(&'a self, key: &'a IdempotencyKey) -> BoxFuture<'a, Result<(), StoreError>> {
        let bytes = key_bytes(key);
        let inner = &*self.inner;
        let mut guard = inner.lock();
        let state = &mut *guard;
        let Some(record) = state.records.get_mut(bytes.as_slice()) else {
            return future::ready(Ok(())).boxed();
        };
        let (owner, size) = match record.attachment.take() {
            Some(blob) => (record.owner, blob.len()),
            None => return future::ready(Ok(())).boxed(),
        };
        state.record_bytes -= size;
        state.charge(inner, &bytes[..owner], |tenant| {
            tenant.record_bytes -= size;
            tenant.bytes -= size;
        });
        future::ready(Ok(())).boxed()
    }

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

    fn size(&self) -> Option<StoreSize> {
        Some(StoreSize {
            entries: self.len() as u64,
            bytes: self.bytes() as u64,
        })
    }

    fn once_reporting<'a>(
        &'a self,
        key: IdempotencyKey,
        fingerprint: Fingerprint,
        run: BoxFuture<'static, CallOutcome>,
    ) -> BoxFuture<'a, (CallOutcome, Reuse)> {
        // Written and hashed before taking the lock, which every call with a call_id needs.
        let bytes = key_bytes(&key);
        let hash = self.inner.hasher.hash_one(bytes.as_slice());
        let inner = &*self.inner;
        let mut state = inner.lock();
        state.expire(inner, Instant::now());
        let generation = state.next_generation;
        // One lookup whether the key is new or known.
        let same_key = |entry: &Entry| entry.hash == hash && entry.key() == bytes.as_slice();
        match state.entries.entry(hash, same_key, |entry| entry.hash) {
            hash_table::Entry::Occupied(mut known) => {
                let entry = known.get_mut();
                if entry.fingerprint != fingerprint {
                    return future::ready((reused_call_id(), Reuse::Conflict)).boxed();
                }
                return match &mut entry.run {
                    // Read back outside the lock: an answer may be megabytes.
                    Run::Done => {
                        let json = entry.json().to_vec();
                        drop(state);
                        future::ready((from_json(&json), Reuse::Replayed)).boxed()
                    }
                    Run::Running(pending) => pending
                        .get_or_insert_with(Arc::default)
                        .clone()
                        .outcome()
                        .map(|o| (o, Reuse::Waited))
                        .boxed(),
                };
            }
            // The first call with this key drives its run itself; were it dropped mid-run (its
            // client hung up), the run goes on in a task of its own, so it still ends and is
            // recorded, and a retry gets its answer.
            hash_table::Entry::Vacant(new) => {
                new.insert(Entry {
                    hash,
                    generation,
                    fingerprint,
                    owner_len: bytes.len() - key.call_id.len(),
                    key_len: bytes.len(),
                    bytes,
                    run: Run::Running(None),
                });
            }
        }
        state.next_generation += 1;
        drop(state);
        Box::pin(Leader {
            run: Some(run),
            store: self.inner.clone(),
            hash,
            generation,
        })
    }
}

#[cfg(test)]
mod tests {
    /// A record already kept is found (`Ok(false)`) even when the store has no room for
    /// another: a replayed round finds its task instead of an error.
    #[test]
    fn a_kept_record_is_found_in_a_full_store() {
        let store = InMemoryIdempotency::new(1, Duration::from_secs(60));
        let later = Duration::from_secs(60);
        let (mine, other) = (
            IdempotencyKey::new("a", None, "t1"),
            IdempotencyKey::new("b", None, "t2"),
        );
        let create = |key| {
            futures_util::FutureExt::now_or_never(store.create_record(key, "{}".into(), later))
        };
        assert_eq!(create(&mine), Some(Ok(true)));
        assert_eq!(create(&other), Some(Err(StoreError::Full)));
        assert_eq!(create(&mine), Some(Ok(false)));
    }

    use super::*;
    use crate::protocol::{CallResult, CallToolResponse};
    use serde_json::Value;

    /// Asks `store` for `call_id` as `caller`; `true` if the run was needed (it ran).
    async fn ask_as(store: &InMemoryIdempotency, caller: &str, call_id: &str, text: &str) -> bool {
        let key = IdempotencyKey::new(caller, None, call_id);
        let (_, reuse) = store
            .once_reporting(key, fingerprint(0), future::ready(answer(text)).boxed())
            .await;
        reuse == Reuse::Fresh
    }

    /// One caller's load never costs another its kept answers: a busy caller may fill room no
    /// one else uses, but what it keeps past its share goes first when another needs room.
    #[tokio::test]
    async fn a_busy_caller_never_pushes_out_another_callers_answers() {
        // A hundred answers in all; a caller's share is ten of them.
        let store = InMemoryIdempotency::new(100, DEFAULT_TTL);
        assert!(ask_as(&store, "quiet", "q1", "mine").await);
        for i in 0..500 {
            assert!(ask_as(&store, "busy", &format!("b{i}"), "x").await);
        }
        assert_eq!(store.len(), 100, "the busy caller used the free room");
        assert!(
            !ask_as(&store, "quiet", "q1", "again").await,
            "the quiet caller's retry ran its tool a second time"
        );
        assert!(ask_as(&store, "quiet", "q2", "mine").await);
        for i in 500..800 {
            assert!(ask_as(&store, "busy", &format!("b{i}"), "x").await);
        }
        assert!(!ask_as(&store, "quiet", "q1", "again").await);
        assert!(!ask_as(&store, "quiet", "q2", "again").await);
        assert!(
            !ask_as(&store, "busy", "b799", "again").await,
            "its newest is kept"
        );
    }

    /// Records are kept within their caller's share of bytes and count, and make room only
    /// from their caller's own answers or what another keeps past its share.
    #[tokio::test]
    async fn a_caller_s_records_stay_within_its_share_of_the_bytes() {
        let ttl = Duration::from_secs(60);
        // A share is a tenth: 100 KiB of a MiB.
        let store = InMemoryIdempotency::new(100, DEFAULT_TTL).max_bytes(1 << 20);
        let big = "x".repeat(32 * 1024);
        let create = |caller: &str, id: &str| {
            let key = IdempotencyKey::new(caller, None, id);
            let store = store.clone();
            let body = big.clone();
            async move { store.create_record(&key, body, ttl).await }
        };
        assert!(ask_as(&store, "quiet", "q1", "mine").await);
        let mut made = 0;
        let refused = loop {
            match create("busy", &format!("t{made}")).await {
                Ok(true) => made += 1,
                other => break other,
            }
        };
        assert_eq!(refused, Err(StoreError::CallerFull), "after {made}");
        assert_eq!(made, 2, "two records of 36 KiB counted fit in 102 KiB");
        assert_eq!(
            create("quiet", "t0").await,
            Ok(true),
            "another caller's share is its own"
        );
        assert!(!ask_as(&store, "quiet", "q1", "again").await);
        // What a record's growth needs comes from its caller's share too.
        let key = IdempotencyKey::new("busy", None, "t0");
        let found = store.read_record(&key).await.unwrap().unwrap();
        let grown = "y".repeat(80 * 1024);
        assert_eq!(
            store.replace_record(&key, found.version, grown).await,
            Err(StoreError::Full)
        );
    }

    fn answer(text: &str) -> CallOutcome {
        CallOutcome::Completed(CallToolResponse {
            call_id: "c".into(),
            duration: None,
            result: CallResult::Success {
                value: Some(Value::String(text.into())),
            },
        })
    }

    fn key(call_id: &str) -> IdempotencyKey {
        IdempotencyKey::new("anonymous", None, call_id)
    }

    fn fingerprint(n: i64) -> Fingerprint {
        Fingerprint::of("T.T@1.0.0", &serde_json::json!({ "n": n }), &[])
    }

    /// Asks `store` for `call_id` with request `n`, whose run would answer `text`.
    async fn ask(store: &InMemoryIdempotency, call_id: &str, n: i64, text: &str) -> CallOutcome {
        let run = future::ready(answer(text)).boxed();
        store.once(key(call_id), fingerprint(n), run).await
    }

    #[tokio::test]
    async fn a_store_over_its_capacity_forgets_the_oldest_answers() {
        let store = InMemoryIdempotency::new(3, DEFAULT_TTL);
        for i in 0..10 {
            assert_eq!(ask(&store, &i.to_string(), i, "x").await, answer("x"));
        }
        assert_eq!(store.len(), 3, "{store:?}");
        // The newest is kept: a retry is answered without running.
        let kept = store
            .once(key("9"), fingerprint(9), future::pending().boxed())
            .await;
        assert_eq!(kept, answer("x"));
    }

    #[tokio::test]
    async fn a_replayed_answer_is_the_first_answer_exactly() {
        let store = InMemoryIdempotency::default();
        let first = CallOutcome::Completed(CallToolResponse {
            call_id: "c".into(),
            duration: Some(0.1 + 0.2),
            result: CallResult::Success {
                value: Some(serde_json::json!({
                    "max": u64::MAX, "min": i64::MIN, "third": 1.0 / 3.0, "tiny": 5e-324,
                    "text": "line\nbreak \u{1F980} \"quoted\"", "none": null, "list": [true, {}],
                })),
            },
        });
        let run = future::ready(first.clone()).boxed();
        assert_eq!(store.once(key("exact"), fingerprint(1), run).await, first);
        let replayed = store
            .once(key("exact"), fingerprint(1), future::pending().boxed())
            .await;
        assert_eq!(replayed, first);
    }

    #[tokio::test]
    async fn a_store_over_its_bytes_forgets_the_oldest_answers() {
        let big = "y".repeat(1000);
        let store = InMemoryIdempotency::new(1_000, DEFAULT_TTL).max_bytes(5_000);
        for i in 0..20 {
            ask(&store, &i.to_string(), i, &big).await;
            assert!(store.bytes() <= 5_000, "{store:?}");
        }
        assert!((3..=4).contains(&store.len()), "{store:?}");
        // An answer over the whole budget is not kept: the next call runs again.
        let huge = "z".repeat(10_000);
        ask(&store, "huge", 1, &huge).await;
        let again = ask(&store, "huge", 1, "ran").await;
        assert_eq!(again, answer("ran"));
    }

    #[tokio::test]
    async fn a_running_entry_is_never_evicted() {
        let store = InMemoryIdempotency::new(1, DEFAULT_TTL);
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let run = async move {
            let _ = wait.await;
            answer("long")
        };
        let first = tokio::spawn({
            let store = store.clone();
            async move { store.once(key("long"), fingerprint(0), run.boxed()).await }
        });
        tokio::task::yield_now().await;
        // Far more finished answers than the capacity while "long" runs.
        for i in 1..20 {
            ask(&store, &i.to_string(), i, "x").await;
        }
        // A duplicate waits for the first run instead of starting its own.
        let duplicate = ask(&store, "long", 0, "ran twice");
        release.send(()).unwrap();
        assert_eq!(duplicate.await, answer("long"));
        assert_eq!(first.await.unwrap(), answer("long"));
    }

    #[tokio::test]
    async fn the_same_call_id_with_another_request_is_refused() {
        let store = InMemoryIdempotency::default();
        ask(&store, "c", 1, "one").await;
        let other = ask(&store, "c", 2, "two").await;
        assert_eq!(other, reused_call_id());
        // Another user's same call_id is another key.
        let mine = IdempotencyKey::new("anonymous", Some("bob".into()), "c");
        let bobs = store
            .once(mine, fingerprint(2), future::ready(answer("bob's")).boxed())
            .await;
        assert_eq!(bobs, answer("bob's"));
    }

    #[tokio::test]
    async fn keys_are_one_only_when_all_their_parts_are() {
        let store = InMemoryIdempotency::default();
        // Parts that would run together if written one after another.
        let keys = [
            ("ab", None, "c"),
            ("a", None, "bc"),
            ("a", Some("b"), "c"),
            ("a", Some(""), "bc"),
            ("", Some("a"), "bc"),
            ("", None, "abc"),
        ];
        for (i, (principal, user, call_id)) in keys.into_iter().enumerate() {
            let key = IdempotencyKey::new(principal, user.map(str::to_owned), call_id);
            let text = i.to_string();
            let got = store
                .once(
                    key,
                    fingerprint(i as i64),
                    future::ready(answer(&text)).boxed(),
                )
                .await;
            assert_eq!(got, answer(&text), "{principal:?} {user:?} {call_id:?}");
        }
        // Each key again, written anew: the answer kept under it, not another's.
        for (i, (principal, user, call_id)) in keys.into_iter().enumerate() {
            let key = IdempotencyKey::new(principal, user.map(str::to_owned), call_id);
            let got = store
                .once(
                    key,
                    fingerprint(i as i64),
                    future::ready(answer("rerun")).boxed(),
                )
                .await;
            assert_eq!(
                got,
                answer(&i.to_string()),
                "{principal:?} {user:?} {call_id:?}"
            );
        }
        assert_eq!(store.len(), keys.len());
    }

    /// An answer is written after its key in the entry's one buffer, through a buffer per
    /// thread that a huge answer must not leave behind it: keys and answers of every size, in an
    /// order where a small answer follows a huge one, each read back exactly and counted as
    /// its JSON alone.
    #[tokio::test]
    async fn answers_of_every_size_are_kept_after_their_keys() {
        let store = InMemoryIdempotency::default();
        let long_id = "k".repeat(300);
        let cases = [
            ("a", 10),
            (long_id.as_str(), 300),
            ("b", 100_000),
            ("c", 5),
            (long_id.as_str(), 70_000),
        ];
        let mut expected_bytes = 0;
        for (i, (call_id, size)) in cases.iter().enumerate() {
            let call_id = format!("{call_id}{i}");
            let text = "t".repeat(*size);
            assert_eq!(ask(&store, &call_id, 1, &text).await, answer(&text));
            expected_bytes += serde_json::to_vec(&answer(&text)).unwrap().len();
        }
        assert_eq!(store.bytes(), expected_bytes);
        // The last answer was large: this thread's buffer let it go once it was copied.
        let kept = JSON.with_borrow(Vec::capacity);
        assert!(kept <= JSON_BUFFER_KEPT, "{kept} bytes still held");
        for (i, (call_id, size)) in cases.iter().enumerate() {
            let call_id = format!("{call_id}{i}");
            let replayed = ask(&store, &call_id, 1, "ran again").await;
            assert_eq!(replayed, answer(&"t".repeat(*size)), "{call_id}");
        }
    }

    #[test]
    fn an_answer_has_a_buffer_even_while_this_threads_is_taken() {
        with_json_buffer(|outer| {
            outer.clear();
            outer.push(1);
            let inner = with_json_buffer(|inner| {
                inner.push(2);
                inner.clone()
            });
            assert_eq!(inner, [2], "a buffer of its own, not the one in use");
            assert_eq!(outer, &[1]);
        });
    }

    #[tokio::test]
    async fn answers_expire_after_the_ttl() {
        let store = InMemoryIdempotency::new(10, Duration::from_millis(30));
        ask(&store, "c", 1, "one").await;
        tokio::time::sleep(Duration::from_millis(60)).await;
        let again = ask(&store, "c", 1, "again").await;
        assert_eq!(again, answer("again"));
    }
}
