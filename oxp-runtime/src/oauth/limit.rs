//! A limit per client on forged tokens: a client that keeps sending tokens no trusted issuer
//! made (bad signatures, random `kid`s) is held back with a `429` for the tokens that would cost
//! the most or tell the least — those that do not parse, those naming a key the server does not
//! have (which could make it fetch the key set), opaque ones it would have to introspect — while
//! a token signed by a key the server has is still verified, whoever sent it. Many users share
//! an address (NAT, a proxy, a host's relay): one of them sending forgeries must not lock the
//! others out. Genuine tokens cost nothing, even when they fail a claim.
//!
//! The table of clients is bounded. Past its size, clients it has no room for share one
//! allowance (the limit fails closed for them rather than not at all), and the table is swept
//! of clients whose allowance is full again at most once a second, when a forgery is counted:
//! never a scan per request.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Forged tokens a client may send at once before it is held back, by default.
pub(crate) const BURST: u32 = 30;
/// Forged tokens per second a client may keep sending after its burst, by default.
pub(crate) const PER_SECOND: u32 = 1;
/// The most clients tracked one by one.
const MAX_CLIENTS: usize = 10_000;
/// The least time between two sweeps of the table.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Each client's allowance of forged tokens (a token bucket).
pub(crate) struct FailureLimit {
    burst: f64,
    per_second: f64,
    max_clients: usize,
    table: Mutex<Table>,
}

/// An allowance and when it was last counted.
type Bucket = (f64, Instant);

struct Table {
    clients: HashMap<IpAddr, Bucket>,
    /// The allowance every client the table has no room for shares.
    overflow: Option<Bucket>,
    last_sweep: Option<Instant>,
}

impl FailureLimit {
    /// `burst` forged tokens at once, then `per_second`; a burst of 0 is no limit.
    pub(crate) fn new(burst: u32, per_second: u32) -> Self {
        FailureLimit::with_room(burst, per_second, MAX_CLIENTS)
    }

    fn with_room(burst: u32, per_second: u32, max_clients: usize) -> Self {
        FailureLimit {
            burst: f64::from(burst),
            per_second: f64::from(per_second),
            max_clients,
            table: Mutex::new(Table {
                clients: HashMap::new(),
                overflow: None,
                last_sweep: None,
            }),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long `client` must wait before its next held-back token is looked at, if it must.
    pub(crate) fn held_back(&self, client: IpAddr) -> Option<Duration> {
        self.held_back_at(client, Instant::now())
    }

    fn held_back_at(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        if self.burst == 0.0 {
            return None;
        }
        let table = self.table();
        let bucket = match table.clients.get(&key(client)) {
            Some(bucket) => *bucket,
            None if table.clients.len() >= self.max_clients => table.overflow?,
            None => return None,
        };
        let left = self.refill(bucket, now);
        (left < 1.0).then(|| {
            if self.per_second > 0.0 {
                Duration::from_secs_f64((1.0 - left) / self.per_second)
            } else {
                Duration::from_secs(3600)
            }
        })
    }

    /// Counts a forged token of `client`.
    pub(crate) fn refused(&self, client: IpAddr) {
        self.refused_at(client, Instant::now());
    }

    fn refused_at(&self, client: IpAddr, now: Instant) {
        if self.burst == 0.0 {
            return;
        }
        let mut table = self.table();
        let client = key(client);
        if !table.clients.contains_key(&client)
            && table.clients.len() >= self.max_clients
            && table
                .last_sweep
                .is_none_or(|at| now.duration_since(at) >= SWEEP_EVERY)
        {
            table.last_sweep = Some(now);
            table
                .clients
                .retain(|_, bucket| self.refill(*bucket, now) < self.burst);
        }
        let room = table.clients.len() < self.max_clients;
        let bucket = if room || table.clients.contains_key(&client) {
            table.clients.entry(client).or_insert((self.burst, now))
        } else {
            table.overflow.get_or_insert((self.burst, now))
        };
        *bucket = ((self.refill(*bucket, now) - 1.0).max(0.0), now);
    }

    /// What the allowance of `bucket` has grown to by `now`.
    fn refill(&self, (allowance, at): Bucket, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(at).as_secs_f64();
        (allowance + elapsed * self.per_second).min(self.burst)
    }
}

/// A client by its address; an IPv6 client by its /64, which one host usually has whole.
pub(super) fn key(client: IpAddr) -> IpAddr {
    match client {
        IpAddr::V4(_) => client,
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[4..].fill(0);
            IpAddr::V6(segments.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_held_back_after_its_burst_of_refusals_and_others_are_not() {
        let limit = FailureLimit::new(BURST, PER_SECOND);
        let bad: IpAddr = "203.0.113.7".parse().unwrap();
        let other: IpAddr = "203.0.113.8".parse().unwrap();
        for _ in 0..BURST {
            assert_eq!(limit.held_back(bad), None);
            limit.refused(bad);
        }
        let wait = limit.held_back(bad).expect("held back after its burst");
        assert!(wait <= Duration::from_secs(1), "{wait:?}");
        assert_eq!(limit.held_back(other), None);
        // One /64 is one client.
        let v6a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let v6b: IpAddr = "2001:db8:1:2::ffff".parse().unwrap();
        for _ in 0..BURST {
            limit.refused(v6a);
        }
        assert!(limit.held_back(v6b).is_some());
        // Off: never held back.
        let off = FailureLimit::new(0, 0);
        for _ in 0..100 {
            off.refused(bad);
        }
        assert_eq!(off.held_back(bad), None);
    }

    /// A full table holds back the clients it has no room for together (it does not let them
    /// through), and a sweep, once its interval has passed, makes room again by forgetting
    /// clients whose allowance has grown back whole.
    #[test]
    fn a_full_table_fails_closed_and_is_swept_off_the_request_path() {
        let limit = FailureLimit::with_room(2, 1, 3);
        let start = Instant::now();
        let client = |i: u8| IpAddr::from([198, 51, 100, i]);
        for i in 0..3 {
            limit.refused_at(client(i), start);
        }
        // Two clients the table has no room for share one allowance of two.
        limit.refused_at(client(10), start);
        assert_eq!(limit.held_back_at(client(11), start), None);
        limit.refused_at(client(11), start);
        assert!(
            limit.held_back_at(client(12), start).is_some(),
            "an untracked client is held back once the shared allowance is spent"
        );
        assert_eq!(limit.table().clients.len(), 3);
        // Within the sweep interval nothing is swept, however many forgeries are counted.
        limit.refused_at(client(13), start + Duration::from_millis(500));
        assert_eq!(limit.table().clients.len(), 3);
        // Later, the tracked clients' allowances have grown back whole: the first new client's
        // forgery sweeps them out and takes a place of its own.
        let later = start + Duration::from_secs(5);
        limit.refused_at(client(20), later);
        assert_eq!(limit.table().clients.len(), 1);
        assert_eq!(limit.held_back_at(client(20), later), None);
        assert_eq!(limit.held_back_at(client(12), later), None);
    }
}
