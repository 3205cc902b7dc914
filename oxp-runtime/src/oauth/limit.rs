//! A limit per client on forged tokens, checked before a token is even parsed: a client that
//! keeps sending tokens no trusted issuer made (bad signatures, random `kid`s) gets a `429`
//! instead of making the server verify each one. Genuine tokens cost nothing, even when they
//! fail a claim, so a busy host behind one address (a platform's egress relaying its users'
//! tokens, expired ones among them) is never slowed by its own traffic.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Forged tokens a client may send at once before it is held back, by default.
pub(crate) const BURST: u32 = 30;
/// Forged tokens per second a client may keep sending after its burst, by default.
pub(crate) const PER_SECOND: u32 = 1;
/// The most clients tracked: beyond it, those whose allowance is full again are forgotten,
/// and if none is, a new client is not tracked (the limit fails open for it rather than the
/// table growing without bound).
const MAX_CLIENTS: usize = 10_000;

/// Each client's allowance of forged tokens (a token bucket).
pub(crate) struct FailureLimit {
    burst: f64,
    per_second: f64,
    clients: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl FailureLimit {
    /// `burst` forged tokens at once, then `per_second`; a burst of 0 is no limit.
    pub(crate) fn new(burst: u32, per_second: u32) -> Self {
        FailureLimit {
            burst: f64::from(burst),
            per_second: f64::from(per_second),
            clients: Mutex::default(),
        }
    }

    /// How long `client` must wait before its next token is looked at, if it must.
    pub(crate) fn held_back(&self, client: IpAddr) -> Option<Duration> {
        if self.burst == 0.0 {
            return None;
        }
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let (allowance, at) = clients.get(&key(client))?;
        let now = self.refill(*allowance, *at);
        (now < 1.0).then(|| {
            if self.per_second > 0.0 {
                Duration::from_secs_f64((1.0 - now) / self.per_second)
            } else {
                Duration::from_secs(3600)
            }
        })
    }

    /// Counts a forged token of `client`.
    pub(crate) fn refused(&self, client: IpAddr) {
        if self.burst == 0.0 {
            return;
        }
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let client = key(client);
        if !clients.contains_key(&client) && clients.len() >= MAX_CLIENTS {
            clients.retain(|_, (allowance, at)| self.refill(*allowance, *at) < self.burst);
            if clients.len() >= MAX_CLIENTS {
                return;
            }
        }
        let (allowance, at) = clients
            .entry(client)
            .or_insert((self.burst, Instant::now()));
        *allowance = (self.refill(*allowance, *at) - 1.0).max(0.0);
        *at = Instant::now();
    }

    /// What the allowance `allowance` left at `at` has grown to by now.
    fn refill(&self, allowance: f64, at: Instant) -> f64 {
        (allowance + at.elapsed().as_secs_f64() * self.per_second).min(self.burst)
    }
}

/// A client by its address; an IPv6 client by its /64, which one host usually has whole.
fn key(client: IpAddr) -> IpAddr {
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
}
