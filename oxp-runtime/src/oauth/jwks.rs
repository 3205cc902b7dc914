//! One issuer's key set, cached: fetched once at a time, kept for what `Cache-Control` says
//! within bounds (and refreshed in the background once stale, a known key answering at once
//! meanwhile), refetched for an unknown `kid` within a budget, and kept when a refetch fails
//! (known keys keep working while the provider is down; unknown ones fail closed, and the
//! provider is asked again a few seconds later).
//!
//! The budget for unknown `kid`s, per issuer, is two slots of one fetch per interval each
//! (a few seconds by default). A `kid` seen for the first time may take the first slot; a `kid`
//! already refused unfetched (kept in a short list) may take the second. Random `kid`s, each
//! seen once, only ever spend the first slot, so a key the provider rotates in just after a
//! forger's fetch is fetched for the second of its tokens. Whatever a forger sends (repeated
//! `kid`s for the second slot, or enough new ones to push the rotated `kid` out of the list),
//! a rotation waits one interval at most: any fetch refreshes the whole set, and the first slot
//! is free again by then. The provider is asked at most twice an interval.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::fetch::Fetcher;
use super::keys::{Key, parse_set};
use super::{Refusal, Tuning};

/// How many `kid`s refused without a fetch are remembered, to tell a repeated `kid` (a key
/// rotated in, named by every token it signs) from a new one.
const MISSED_KIDS: usize = 32;
/// The longest `kid` remembered: real ones are short; a longer one is never "repeated".
const MAX_KID_BYTES: usize = 256;

/// What a lookup found.
pub(crate) enum Found {
    Key(Arc<Key>),
    /// No key has this `kid` (or, without one, the set has no single usable key), in a set
    /// fetched since the lookup began (`fetched`), or in the cached set when the budget allowed
    /// no fetch: only the first says the token's key does not exist.
    Unknown {
        fetched: bool,
    },
    /// No key could be had: the set was never fetched, or the refetch an unknown `kid` needed
    /// failed.
    Unavailable(String),
}

#[derive(Default)]
struct Cached {
    keys: Vec<Arc<Key>>,
    /// When the keys were fetched; `None` before the first fetch succeeds.
    fetched: Option<Instant>,
    /// How long the keys are fresh, from `fetched`.
    ttl: Duration,
    /// When a fetch for a `kid` seen for the first time was last made (the first slot).
    last_new_kid_fetch: Option<Instant>,
    /// When a fetch for a repeated `kid` was last made (the second slot).
    last_repeated_kid_fetch: Option<Instant>,
    /// `kid`s lately refused without a fetch, oldest first.
    missed: VecDeque<String>,
    /// Why the last fetch failed, until one succeeds.
    failure: Option<String>,
    /// After a failed fetch, no other before this: a provider that is down is not asked again
    /// by every request.
    retry_at: Option<Instant>,
    /// Bumped by every fetch, succeeded or not: a lookup that waited for another's fetch sees
    /// it was made, and does not make one more.
    generation: u64,
}

impl Cached {
    /// Whether a miss for `kid` may fetch now, taking the slot it may use.
    fn take_miss_slot(&mut self, kid: Option<&str>, now: Instant, interval: Duration) -> bool {
        let free = |at: Option<Instant>| at.is_none_or(|at| now.duration_since(at) >= interval);
        let repeated = kid.and_then(|kid| self.missed.iter().position(|m| m == kid));
        if free(self.last_new_kid_fetch) {
            self.last_new_kid_fetch = Some(now);
            return true;
        }
        if let Some(place) = repeated
            && free(self.last_repeated_kid_fetch)
        {
            self.last_repeated_kid_fetch = Some(now);
            self.missed.remove(place);
            return true;
        }
        if repeated.is_none()
            && let Some(kid) = kid.filter(|kid| kid.len() <= MAX_KID_BYTES)
        {
            if self.missed.len() == MISSED_KIDS {
                self.missed.pop_front();
            }
            self.missed.push_back(kid.to_owned());
        }
        false
    }
}

pub(crate) struct KeySet {
    pub(crate) url: String,
    cached: Mutex<Cached>,
    /// Held while fetching: one fetch at a time for this set.
    fetching: tokio::sync::Mutex<()>,
    /// Whether a background refresh of stale keys is under way (one at a time).
    refreshing: AtomicBool,
    /// How many fetches were made, for metrics.
    on_fetch: Arc<dyn Fn(bool) + Send + Sync>,
}

impl KeySet {
    pub(crate) fn new(url: String, on_fetch: Arc<dyn Fn(bool) + Send + Sync>) -> Self {
        KeySet {
            url,
            cached: Mutex::new(Cached::default()),
            fetching: tokio::sync::Mutex::new(()),
            refreshing: AtomicBool::new(false),
            on_fetch,
        }
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, Cached> {
        self.cached.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fetches now (start-up), reporting the failure.
    pub(crate) async fn load(&self, fetcher: &Fetcher, tuning: &Tuning) -> Result<(), String> {
        let generation = self.cached().generation;
        self.refresh(fetcher, tuning, generation).await;
        match &self.cached().failure {
            Some(failure) => Err(failure.clone()),
            None => Ok(()),
        }
    }

    /// The key for a token's `kid` (or, without one, the set's only usable key). With
    /// `may_fetch` false (a client held back for forged tokens), only the keys at hand answer.
    pub(crate) async fn find(
        self: &Arc<Self>,
        kid: Option<&str>,
        fetcher: &Fetcher,
        tuning: &Tuning,
        may_fetch: bool,
    ) -> Found {
        let (found, stale, waiting, generation) = {
            let cached = self.cached();
            let now = Instant::now();
            let stale = cached
                .fetched
                .is_none_or(|at| now.duration_since(at) >= cached.ttl);
            let waiting = cached.retry_at.is_some_and(|at| now < at);
            (pick(&cached.keys, kid), stale, waiting, cached.generation)
        };
        if let Some(key) = found {
            // A known key answers now, stale or not: no request waits on the provider for a key
            // it has; a stale set is refreshed beside it.
            if stale && !waiting {
                self.refresh_in_background(fetcher, tuning, generation);
            }
            return Found::Key(key);
        }
        if !may_fetch {
            return Found::Unknown { fetched: false };
        }
        // An unknown kid refetches: a stale set at once, a fresh one within the budget.
        let fetch = !waiting
            && (stale
                || self
                    .cached()
                    .take_miss_slot(kid, Instant::now(), tuning.refetch_interval));
        if fetch {
            self.refresh(fetcher, tuning, generation).await;
        } else {
            // A fetch under way (another token's miss) may bring this key, as when a provider
            // has just rotated: wait for it rather than refuse a genuine token.
            drop(self.fetching.lock().await);
        }
        let cached = self.cached();
        match (pick(&cached.keys, kid), &cached.failure) {
            (Some(key), _) => Found::Key(key),
            (None, Some(failure)) => Found::Unavailable(failure.clone()),
            (None, None) => Found::Unknown {
                fetched: cached.generation != generation,
            },
        }
    }

    /// Refreshes the set in a task of its own, unless one already is.
    fn refresh_in_background(self: &Arc<Self>, fetcher: &Fetcher, tuning: &Tuning, seen: u64) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (set, fetcher, tuning) = (self.clone(), fetcher.clone(), tuning.clone());
        tokio::spawn(async move {
            set.refresh(&fetcher, &tuning, seen).await;
            set.refreshing.store(false, Ordering::Release);
        });
    }

    /// Fetches the set, unless another fetch ended since `seen` (this caller waited for it).
    async fn refresh(&self, fetcher: &Fetcher, tuning: &Tuning, seen: u64) {
        let _one_at_a_time = self.fetching.lock().await;
        if self.cached().generation != seen {
            return;
        }
        let result = fetcher.get_json(&self.url).await.and_then(|fetched| {
            let (keys, skipped) = parse_set(&fetched.json)?;
            if keys.is_empty() {
                return Err(format!(
                    "the key set at {} has no usable signing key ({skipped} left out)",
                    self.url
                ));
            }
            Ok((keys, fetched.max_age))
        });
        (self.on_fetch)(result.is_ok());
        let mut cached = self.cached();
        cached.generation += 1;
        let now = Instant::now();
        match result {
            Ok((keys, max_age)) => {
                cached.keys = keys.into_iter().map(Arc::new).collect();
                cached.fetched = Some(now);
                cached.ttl = max_age
                    .unwrap_or(tuning.default_ttl)
                    .clamp(tuning.min_ttl, tuning.max_ttl);
                cached.failure = None;
                cached.retry_at = None;
                cached.missed.clear();
            }
            Err(why) => {
                tracing::warn!(url = %self.url, error = %why, "the identity provider's key set could not be fetched");
                cached.failure = Some(why);
                // Known keys stay usable meanwhile; the provider is asked again soon, so a
                // provider that comes back is used again within seconds.
                cached.retry_at = Some(now + tuning.failure_retry());
            }
        }
    }
}

/// The key a `kid` names; without a `kid`, the only key of the set (several would be a guess).
fn pick(keys: &[Arc<Key>], kid: Option<&str>) -> Option<Arc<Key>> {
    match kid {
        Some(kid) => keys.iter().find(|k| k.kid.as_deref() == Some(kid)).cloned(),
        None if keys.len() == 1 => Some(keys[0].clone()),
        None => None,
    }
}

impl Found {
    pub(crate) fn into_key(self) -> Result<Arc<Key>, Refusal> {
        match self {
            Found::Key(key) => Ok(key),
            Found::Unknown { fetched: true } => Err(Refusal::forged(
                "The token is signed with a key the identity provider does not publish.",
            )),
            // Not counted against the client: the key may be one just rotated in, which a
            // later token of it will fetch.
            Found::Unknown { fetched: false } => Err(Refusal::invalid(
                "The token is signed with a key this server does not know yet; try again shortly.",
            )),
            Found::Unavailable(why) => Err(Refusal::Unavailable(why)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Lookups that wait while another fetches do not fetch again once it is done: with no
    /// interval between refetches, a hundred misses at once make one fetch.
    #[tokio::test]
    async fn one_fetch_at_a_time_and_waiters_use_its_result() {
        static FETCHES: AtomicUsize = AtomicUsize::new(0);
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(|| async {
                FETCHES.fetch_add(1, Ordering::SeqCst);
                r#"{"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k",
                    "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let tuning = crate::oauth::OAuth::new("https://h")
            .key_refetch_interval(Duration::ZERO)
            .tuning;
        let fetcher = Fetcher::new(Duration::from_secs(5), 1 << 16, &[]);
        let set = Arc::new(KeySet::new(url, Arc::new(|_| {})));
        // Polled together on one task: the first lookup is waiting on the network when the
        // others start, so each of them finds the fetch under way and waits for it.
        let lookups = (0..100).map(|_| set.find(Some("unknown"), &fetcher, &tuning, true));
        let found = futures_util::future::join_all(lookups).await;
        assert!(found.iter().all(|f| matches!(f, Found::Unknown { .. })));
        assert_eq!(FETCHES.load(Ordering::SeqCst), 1);
        assert!(matches!(
            set.find(Some("k"), &fetcher, &tuning, true).await,
            Found::Key(_)
        ));
    }

    /// Tokens of a key the provider has just published, arriving while the first one's fetch
    /// is under way, wait for that fetch and find the key, though the interval between refetches
    /// allows no fetch of their own.
    #[tokio::test]
    async fn misses_during_a_fetch_wait_for_it() {
        static FETCHES: AtomicUsize = AtomicUsize::new(0);
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(|| async {
                // The set at start-up has the old key; every later one the new key too.
                let new = FETCHES.fetch_add(1, Ordering::SeqCst) > 0;
                let key = |kid: &str| {
                    serde_json::json!({"kty": "OKP", "crv": "Ed25519", "kid": kid,
                        "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"})
                };
                let keys = if new {
                    vec![key("old"), key("new")]
                } else {
                    vec![key("old")]
                };
                serde_json::json!({ "keys": keys }).to_string()
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let tuning = crate::oauth::OAuth::new("https://h")
            .key_refetch_interval(Duration::from_secs(3600))
            .tuning;
        let fetcher = Fetcher::new(Duration::from_secs(5), 1 << 16, &[]);
        let set = Arc::new(KeySet::new(url, Arc::new(|_| {})));
        set.load(&fetcher, &tuning).await.unwrap();
        // Polled together on one task: the first lookup starts the fetch and waits on the
        // network; each later one finds it under way, its own fetch not allowed.
        let lookups = (0..10).map(|_| set.find(Some("new"), &fetcher, &tuning, true));
        let found = futures_util::future::join_all(lookups).await;
        assert!(
            found.iter().all(|f| matches!(f, Found::Key(_))),
            "a miss during the fetch was refused"
        );
        assert_eq!(FETCHES.load(Ordering::SeqCst), 2);
    }

    /// A known key of a stale set answers at once while the refresh waits on the provider,
    /// and the refresh happens, once.
    #[tokio::test]
    async fn a_stale_set_answers_known_keys_at_once_and_refreshes_beside_them() {
        static FETCHES: AtomicUsize = AtomicUsize::new(0);
        static RELEASE: tokio::sync::Notify = tokio::sync::Notify::const_new();
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(|| async {
                // The first fetch is answered at once; later ones wait for the test.
                if FETCHES.fetch_add(1, Ordering::SeqCst) > 0 {
                    RELEASE.notified().await;
                }
                r#"{"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k",
                    "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let mut tuning = crate::oauth::OAuth::new("https://h").tuning;
        // Stale as soon as fetched.
        tuning.min_ttl = Duration::ZERO;
        tuning.default_ttl = Duration::ZERO;
        let fetcher = Fetcher::new(Duration::from_secs(30), 1 << 16, &[]);
        let set = Arc::new(KeySet::new(url, Arc::new(|_| {})));
        set.load(&fetcher, &tuning).await.unwrap();
        for _ in 0..10 {
            // Bounded only so that a lookup held up by the refresh fails rather than hangs.
            let found = tokio::time::timeout(
                Duration::from_secs(10),
                set.find(Some("k"), &fetcher, &tuning, true),
            )
            .await
            .expect("a known key is not held up by the refresh");
            assert!(matches!(found, Found::Key(_)));
        }
        // One refresh was started, and it is the one held at the provider.
        while FETCHES.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(FETCHES.load(Ordering::SeqCst), 2);
        RELEASE.notify_one();
    }
}
