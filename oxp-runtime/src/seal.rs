//! Sealed request states: the answers a call that asks has so far, handed to the client (an
//! MCP client's `requestState`, an app's [`PendingInput`](crate::providers::PendingInput)) and
//! taken back on the next round. Nothing is kept on the server, so any replica holding the same
//! key continues any call.
//!
//! A state is `base64url(payload) "." base64url(tag)`: the payload is JSON (its expiry and the
//! answers), the tag an HMAC-SHA256 with the server's key over a domain label, the binding (the
//! tool as resolved, its input, the caller and the user) and the payload. The binding is not
//! stored: a state opened for another call fails its tag. States are authenticated, not
//! encrypted: the answers are the client's own.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::idempotency::Fingerprint;

/// The largest state read: a state carries the answers of earlier rounds, which a form or a
/// model's answer keeps small; anything larger is not one of ours.
pub(crate) const MAX_STATE_BYTES: usize = 256 * 1024;

/// How long a round's state is good for, by default: long enough for a person to answer.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(15 * 60);

/// The shortest key accepted.
pub(crate) const MIN_KEY_BYTES: usize = 32;

/// Separates these tags from any other use of the same key.
const DOMAIN: &[u8] = b"oxp request state v1\0";

type Hmac = hmac::Hmac<Sha256>;

/// The server's key for request states, and how long they live.
#[derive(Clone)]
pub(crate) struct Sealer {
    key: std::sync::Arc<[u8]>,
    ttl: Duration,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("ttl", &self.ttl).finish()
    }
}

/// Why a state was refused. The client gets one answer for every failure
/// ([`MESSAGE`](Self::MESSAGE)); which check failed is for the server's metrics.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BadState {
    /// Altered, made by another server, or for another call or caller.
    Invalid,
    /// Genuine, but past its life.
    Expired,
}

impl BadState {
    pub(crate) const MESSAGE: &'static str = "requestState failed its integrity check: it was \
        altered, has expired, or belongs to another call, caller or server";
}

/// What a state is bound to: the call (tool as resolved and input) and who makes it.
pub(crate) struct Binding<'a> {
    pub(crate) tool_id: &'a str,
    pub(crate) input: &'a Value,
    pub(crate) principal: &'a str,
    pub(crate) user: &'a str,
}

impl Binding<'_> {
    fn mac(&self, key: &[u8], payload: &[u8]) -> Hmac {
        let mut mac = <Hmac as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
        mac.update(DOMAIN);
        let call = Fingerprint::of(self.tool_id, self.input, &[]).to_hex();
        for part in [
            call.as_bytes(),
            self.principal.as_bytes(),
            self.user.as_bytes(),
        ] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.update(payload);
        mac
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Sealer {
    /// A sealer with `key` (at least [`MIN_KEY_BYTES`]), or with a random key of its own when
    /// none is given.
    pub(crate) fn new(key: Option<&[u8]>, ttl: Duration) -> Result<Self, String> {
        let key: Vec<u8> = match key {
            Some(key) if key.len() < MIN_KEY_BYTES => {
                return Err(format!(
                    "a state key needs at least {MIN_KEY_BYTES} bytes; this one has {}",
                    key.len()
                ));
            }
            Some(key) => key.to_vec(),
            None => {
                let mut key = vec![0u8; MIN_KEY_BYTES];
                getrandom::fill(&mut key).map_err(|e| e.to_string())?;
                key
            }
        };
        Ok(Sealer {
            key: key.into(),
            ttl,
        })
    }

    /// A sealed state carrying `answers`, bound to `binding`, good for the sealer's lifetime.
    pub(crate) fn seal(&self, answers: &BTreeMap<String, Value>, binding: &Binding<'_>) -> String {
        let expires =
            now_ms().saturating_add(u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX));
        let payload = serde_json::to_vec(&(expires, answers)).expect("JSON values serialize");
        let tag = binding.mac(&self.key, &payload).finalize().into_bytes();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// The answers `state` carries, if it is ours, bound to `binding`, and not expired.
    pub(crate) fn open(
        &self,
        state: &str,
        binding: &Binding<'_>,
    ) -> Result<BTreeMap<String, Value>, BadState> {
        use BadState::Invalid;
        if state.len() > MAX_STATE_BYTES {
            return Err(Invalid);
        }
        let (payload, tag) = state.split_once('.').ok_or(Invalid)?;
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| Invalid)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| Invalid)?;
        // Compared in constant time by the MAC itself.
        binding
            .mac(&self.key, &payload)
            .verify_slice(&tag)
            .map_err(|_| Invalid)?;
        let (expires, answers): (u64, BTreeMap<String, Value>) =
            serde_json::from_slice(&payload).map_err(|_| Invalid)?;
        if now_ms() > expires {
            return Err(BadState::Expired);
        }
        Ok(answers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding<'a>(input: &'a Value, principal: &'a str) -> Binding<'a> {
        Binding {
            tool_id: "Files.Delete@1.0.0",
            input,
            principal,
            user: "ada",
        }
    }

    #[test]
    fn a_state_opens_only_for_its_call_and_caller_unaltered_and_in_time() {
        let sealer = Sealer::new(Some(&[7; 32]), Duration::from_secs(60)).unwrap();
        let input = serde_json::json!({"path": "/srv"});
        let answers =
            BTreeMap::from([("delete".to_owned(), serde_json::json!({"action": "accept"}))]);
        let state = sealer.seal(&answers, &binding(&input, "key:1"));
        assert_eq!(sealer.open(&state, &binding(&input, "key:1")), Ok(answers));
        let other_input = serde_json::json!({"path": "/"});
        assert_eq!(
            sealer.open(&state, &binding(&other_input, "key:1")),
            Err(BadState::Invalid)
        );
        assert_eq!(
            sealer.open(&state, &binding(&input, "key:2")),
            Err(BadState::Invalid)
        );
        let mut altered = state.clone().into_bytes();
        altered[3] ^= 1;
        let altered = String::from_utf8(altered).unwrap_or_default();
        assert_eq!(
            sealer.open(&altered, &binding(&input, "key:1")),
            Err(BadState::Invalid)
        );
        let other_server = Sealer::new(Some(&[8; 32]), Duration::from_secs(60)).unwrap();
        assert_eq!(
            other_server.open(&state, &binding(&input, "key:1")),
            Err(BadState::Invalid)
        );
        let expired = Sealer::new(Some(&[7; 32]), Duration::ZERO).unwrap();
        let old = expired.seal(&BTreeMap::new(), &binding(&input, "key:1"));
        let later = now_ms() + 2;
        while now_ms() < later {
            std::hint::spin_loop();
        }
        assert_eq!(
            sealer.open(&old, &binding(&input, "key:1")),
            Err(BadState::Expired)
        );
        assert!(Sealer::new(Some(b"short"), DEFAULT_TTL).is_err());
    }
}
