//! Sealed request states: what a call that asks has established so far (the questions the
//! server asked, the answers it got), handed to the client (an MCP client's `requestState`, an
//! app's [`PendingInput`](crate::providers::PendingInput)) and taken back on the next round.
//! Nothing is kept on the server between rounds, so any replica holding the same key continues
//! any call.
//!
//! A state is `base64url(payload) "." base64url(tag)`: the payload is JSON (the key's id, its
//! expiry and the [`Ledger`]), the tag an HMAC-SHA256 with the server's key over a domain label,
//! the binding (the tool as resolved, its input, the caller and the user) and the payload. The
//! binding is not stored: a state opened for another call fails its tag. States are
//! authenticated, not encrypted: the answers are the client's own.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use crate::idempotency::Fingerprint;

/// The largest state sealed or read: a state carries the answers of earlier rounds, which a
/// form or a model's answer keeps small; anything larger is not one of ours.
pub(crate) const MAX_STATE_BYTES: usize = 256 * 1024;

/// How long a round's state is good for, by default: long enough for a person to answer, and
/// no longer than the idempotency store remembers a finished call (so that a call's last
/// round cannot be replayed after its record is gone; see [`Ledger::call`]).
pub(crate) const DEFAULT_TTL: Duration = crate::idempotency::DEFAULT_TTL;

/// How the `call_id`s of calls that ask begin: kept for them, so that no client's own `call_id`
/// reads or takes the record of one.
pub(crate) const ASK_CALL_ID_PREFIX: &str = "oxp-ask-";

/// The shortest key accepted.
pub(crate) const MIN_KEY_BYTES: usize = 32;

/// Separates these tags from any other use of the same key.
const DOMAIN: &[u8] = b"oxp request state v2\0";
/// Separates the key's public id from its tags.
const KEY_ID_DOMAIN: &[u8] = b"oxp request state key id\0";

type Hmac = hmac::Hmac<Sha256>;

/// What a call's rounds have established, carried from one round to the next inside the
/// sealed state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Ledger {
    /// Names the call across its rounds: a round that presents a state runs under the
    /// `call_id` made of it ([`call_id`](Self::call_id)), so the idempotency store that replicas
    /// share keeps the call's end, and a replayed round gets that first answer instead of
    /// running the tool again.
    pub(crate) call: String,
    /// When the answers stop counting (milliseconds since the epoch): set when the first answer
    /// arrives, never moved later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deadline: Option<u64>,
    /// What the round that sealed this state asked: each key with its question's digest. Only
    /// a response to one of these counts.
    pub(crate) asked: BTreeMap<String, String>,
    /// The answers so far, each bound to the question it answered.
    pub(crate) answers: Vec<Answer>,
    /// What answering the questions asked needs of the client ([`Capability::name`]s): a
    /// round presented by a client without one is refused before anything runs, and does not
    /// use the call up.
    ///
    /// [`Capability::name`]: crate::ask::Capability::name
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) needs: Vec<String>,
}

/// One answer, to one question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Answer {
    /// The ask's key.
    pub(crate) key: String,
    /// The digest of the question as it was sent ([`question_digest`]).
    pub(crate) question: String,
    /// What the client answered.
    pub(crate) value: Value,
}

impl Ledger {
    /// The ledger of a call's first round to ask.
    pub(crate) fn first() -> Self {
        Ledger {
            call: crate::random::uuid_v4().simple().to_string(),
            ..Ledger::default()
        }
    }

    /// The `call_id` the rounds after the first run under.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub(crate) fn call_id(&self) -> String {
        format!("{ASK_CALL_ID_PREFIX}{}", self.call)
    }
}

/// The digest a question is known by: of what the client is shown (its method and params),
/// without the fields that are fresh each time it is sent (a URL ask's `elicitationId`).
pub(crate) fn question_digest(question: &Value) -> String {
    Fingerprint::of("oxp question", question, &[]).to_hex()
}

/// The server's key for request states, and how long they live.
#[derive(Clone)]
pub(crate) struct Sealer {
    key: std::sync::Arc<[u8]>,
    /// A public name for the key (a MAC of a fixed label), so that a state sealed with another
    /// key (a replica configured differently) can be told from an altered one.
    key_id: String,
    ttl: Duration,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("ttl", &self.ttl).finish()
    }
}

/// Why a state was refused: each says which check failed, none says more than the client
/// could tell on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadState {
    /// Not a state at all (not two base64url parts, not JSON, too large).
    Malformed,
    /// Sealed with another key: another server, or a replica without the shared key.
    OtherKey,
    /// Altered, or presented for another call or caller than it was sealed for.
    Mismatch,
    /// Genuine, but past its life.
    Expired,
}

impl BadState {
    /// What failed, as the end of a sentence whose subject is the state.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            BadState::Malformed => "is not a state this server made",
            BadState::OtherKey => {
                "was sealed with another key: every replica needs the same state key \
                 (OXP_STATE_KEY), and a server without one makes a new key at each start"
            }
            BadState::Mismatch => "belongs to another call or caller, or was altered",
            BadState::Expired => "has expired: call the tool again to ask anew",
        }
    }

    /// The metrics' `reason` labels ([`reason_index`](Self::reason_index) is each state's).
    pub(crate) const REASONS: [&'static str; 3] = ["invalid", "other_key", "expired"];

    pub(crate) fn reason_index(self) -> usize {
        match self {
            BadState::Malformed | BadState::Mismatch => 0,
            BadState::OtherKey => 1,
            BadState::Expired => 2,
        }
    }
}

/// A state that would be larger than [`MAX_STATE_BYTES`]: refused when sealed, since the next
/// round would refuse it anyway.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TooLarge(pub(crate) usize);

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the answers so far make a request state of {} bytes; the limit is {MAX_STATE_BYTES}: \
             ask for less at a time",
            self.0
        )
    }
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

/// The sealed payload.
#[derive(Serialize, Deserialize)]
struct Payload {
    kid: String,
    exp: u64,
    #[serde(flatten)]
    ledger: Ledger,
}

/// A state's expiry is judged on the time replicas share.
use crate::clock::now_ms;

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
        let mut id = <Hmac as KeyInit>::new_from_slice(&key).expect("HMAC takes any key");
        id.update(KEY_ID_DOMAIN);
        let key_id = URL_SAFE_NO_PAD.encode(&id.finalize().into_bytes()[..9]);
        Ok(Sealer {
            key: key.into(),
            key_id,
            ttl,
        })
    }

    /// The same key, with states that live `ttl`.
    pub(crate) fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long a state lives.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A sealed state carrying `ledger`, bound to `binding`. It lives the sealer's lifetime
    /// from now while no answer is in it; from the first answer on, until the ledger's
    /// deadline, which this sets when it is not yet.
    pub(crate) fn seal(
        &self,
        mut ledger: Ledger,
        binding: &Binding<'_>,
    ) -> Result<String, TooLarge> {
        let from_now =
            now_ms().saturating_add(u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX));
        let exp = if ledger.answers.is_empty() {
            from_now
        } else {
            *ledger.deadline.get_or_insert(from_now)
        };
        let payload = Payload {
            kid: self.key_id.clone(),
            exp,
            ledger,
        };
        let payload = serde_json::to_vec(&payload).expect("JSON values serialize");
        let tag = binding.mac(&self.key, &payload).finalize().into_bytes();
        let state = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(tag)
        );
        if state.len() > MAX_STATE_BYTES {
            return Err(TooLarge(state.len()));
        }
        Ok(state)
    }

    /// The ledger `state` carries, if it is ours, bound to `binding`, and not expired.
    pub(crate) fn open(&self, state: &str, binding: &Binding<'_>) -> Result<Ledger, BadState> {
        use BadState::{Malformed, Mismatch};
        if state.len() > MAX_STATE_BYTES {
            return Err(Malformed);
        }
        let (payload, tag) = state.split_once('.').ok_or(Malformed)?;
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| Malformed)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| Malformed)?;
        // Read before the tag is checked only to name the key: a client learns nothing it
        // could not read from any state it was given.
        let kid = serde_json::from_slice::<KeyIdOnly>(&payload)
            .map_err(|_| Malformed)?
            .kid;
        if kid != self.key_id {
            return Err(BadState::OtherKey);
        }
        // Compared in constant time by the MAC itself.
        binding
            .mac(&self.key, &payload)
            .verify_slice(&tag)
            .map_err(|_| Mismatch)?;
        let Payload { exp, ledger, .. } = serde_json::from_slice(&payload).map_err(|_| Mismatch)?;
        if now_ms() > exp {
            return Err(BadState::Expired);
        }
        Ok(ledger)
    }
}

#[cfg_attr(not(feature = "mcp"), allow(dead_code))] // MCP's session ids are their one use
impl Sealer {
    /// `value` sealed under this key for `domain` (what it is, so that one kind of token is
    /// never taken for another), with no expiry and bound to nothing else: for what a client
    /// keeps and sends back unchanged, such as an MCP session id.
    pub(crate) fn seal_value(&self, domain: &[u8], value: &impl Serialize) -> String {
        let payload = serde_json::to_vec(value).expect("JSON values serialize");
        let tag = self.tag(domain, &payload).finalize().into_bytes();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// What [`seal_value`](Self::seal_value) sealed for `domain`, if `token` is such a seal
    /// under this key.
    pub(crate) fn open_value<T: serde::de::DeserializeOwned>(
        &self,
        domain: &[u8],
        token: &str,
    ) -> Option<T> {
        if token.len() > MAX_STATE_BYTES {
            return None;
        }
        let (payload, tag) = token.split_once('.')?;
        let payload = URL_SAFE_NO_PAD.decode(payload).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        self.tag(domain, &payload).verify_slice(&tag).ok()?;
        serde_json::from_slice(&payload).ok()
    }

    fn tag(&self, domain: &[u8], payload: &[u8]) -> Hmac {
        let mut mac = <Hmac as KeyInit>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(&(domain.len() as u64).to_be_bytes());
        mac.update(domain);
        mac.update(payload);
        mac
    }
}

#[derive(Deserialize)]
struct KeyIdOnly {
    kid: String,
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

    fn answered() -> Ledger {
        Ledger {
            answers: vec![Answer {
                key: "delete".into(),
                question: question_digest(&serde_json::json!({"message": "Delete /srv?"})),
                value: serde_json::json!({"action": "accept"}),
            }],
            ..Ledger::first()
        }
    }

    #[test]
    fn a_state_opens_only_for_its_call_and_caller_unaltered_and_in_time() {
        let sealer = Sealer::new(Some(&[7; 32]), Duration::from_secs(60)).unwrap();
        let input = serde_json::json!({"path": "/srv"});
        let ledger = answered();
        let state = sealer
            .seal(ledger.clone(), &binding(&input, "key:1"))
            .unwrap();
        let opened = sealer.open(&state, &binding(&input, "key:1")).unwrap();
        assert_eq!(opened.answers, ledger.answers);
        assert!(
            opened.deadline.is_some(),
            "the first answer fixes the deadline"
        );
        let other_input = serde_json::json!({"path": "/"});
        assert_eq!(
            sealer.open(&state, &binding(&other_input, "key:1")),
            Err(BadState::Mismatch)
        );
        assert_eq!(
            sealer.open(&state, &binding(&input, "key:2")),
            Err(BadState::Mismatch)
        );
        let (payload, tag) = state.split_once('.').unwrap();
        let mut tag = URL_SAFE_NO_PAD.decode(tag).unwrap();
        tag[0] ^= 1;
        let altered = format!("{payload}.{}", URL_SAFE_NO_PAD.encode(tag));
        assert_eq!(
            sealer.open(&altered, &binding(&input, "key:1")),
            Err(BadState::Mismatch)
        );
        assert_eq!(
            sealer.open("not a state", &binding(&input, "key:1")),
            Err(BadState::Malformed)
        );
        let other_server = Sealer::new(Some(&[8; 32]), Duration::from_secs(60)).unwrap();
        assert_eq!(
            other_server.open(&state, &binding(&input, "key:1")),
            Err(BadState::OtherKey)
        );
        let expired = sealer.clone().with_ttl(Duration::ZERO);
        let old = expired.seal(answered(), &binding(&input, "key:1")).unwrap();
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

    /// Re-sealing a state that has answers keeps its deadline: the TTL counts from the first
    /// answer, and no later round moves it.
    #[test]
    fn the_deadline_is_fixed_by_the_first_answer() {
        let sealer = Sealer::new(Some(&[7; 32]), Duration::from_secs(60)).unwrap();
        let input = serde_json::json!({});
        let mut ledger = answered();
        ledger.deadline = Some(now_ms() - 1);
        let state = sealer.seal(ledger, &binding(&input, "p")).unwrap();
        assert_eq!(
            sealer.open(&state, &binding(&input, "p")),
            Err(BadState::Expired)
        );
    }

    #[test]
    fn a_state_too_large_to_return_is_refused_when_sealed() {
        let sealer = Sealer::new(Some(&[7; 32]), Duration::from_secs(60)).unwrap();
        let mut ledger = answered();
        ledger.answers[0].value = Value::String("x".repeat(200_000));
        let sealed = sealer.seal(ledger, &binding(&Value::Null, "p"));
        assert!(
            matches!(sealed, Err(TooLarge(n)) if n > MAX_STATE_BYTES),
            "{sealed:?}"
        );
    }
}
