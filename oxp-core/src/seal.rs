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
//!
//! # Rotating the key
//!
//! A state names the key that sealed it by the key's id, a few bytes of a MAC of a fixed label
//! under the key: public, derived from the key alone, so no setting names keys. A server seals
//! with one key (`OXP_STATE_KEY`) and opens with it and with every key still listed as previous
//! (`OXP_STATE_KEYS_PREVIOUS`, comma-separated), choosing by the id. A key changes without
//! breaking a call in flight in three steps, each rolled out to every replica before the next:
//!
//! 1. add the new key to `OXP_STATE_KEYS_PREVIOUS`: every replica opens what it will seal;
//! 2. make it `OXP_STATE_KEY`, the old one moving to `OXP_STATE_KEYS_PREVIOUS`: replicas seal
//!    with the new key and still open what the old one sealed;
//! 3. once states sealed with the old key have expired (`OXP_STATE_TTL_MS` after the last
//!    replica took step 2), drop it: a state it sealed is refused as sealed with another key.
//!
//! MCP session ids ([`Sealer::seal_value`]) are sealed with the same keys; one whose key was
//! dropped is answered as a session that ended, and its client initializes again.

use std::borrow::Cow;
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
#[doc(hidden)]
pub const DEFAULT_TTL: Duration = crate::idempotency::DEFAULT_TTL;

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
#[doc(hidden)]
pub struct Ledger {
    /// Names the call across its rounds: a round that presents a state runs under the
    /// `call_id` made of it ([`call_id`](Self::call_id)), so the idempotency store that replicas
    /// share keeps the call's end, and a replayed round gets that first answer instead of
    /// running the tool again.
    pub call: String,
    /// When the answers stop counting (milliseconds since the epoch): set when the first answer
    /// arrives, never moved later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<u64>,
    /// What the round that sealed this state asked: each key with its question's digest. Only
    /// a response to one of these counts.
    pub asked: BTreeMap<String, String>,
    /// The answers so far, each bound to the question it answered.
    pub answers: Vec<Answer>,
    /// What answering the questions asked needs of the client ([`Capability::name`]s): a
    /// round presented by a client without one is refused before anything runs, and does not
    /// use the call up.
    ///
    /// [`Capability::name`]: crate::ask::Capability::name
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
}

/// One answer, to one question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[doc(hidden)]
pub struct Answer {
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
    #[doc(hidden)]
    pub fn call_id(&self) -> String {
        format!("{ASK_CALL_ID_PREFIX}{}", self.call)
    }
}

/// The digest a question is known by: of what the client is shown (its method and params),
/// without the fields that are fresh each time it is sent (a URL ask's `elicitationId`).
pub(crate) fn question_digest(question: &Value) -> String {
    Fingerprint::of("oxp question", question, &[]).to_hex()
}

/// The server's keys for request states, and how long they live.
#[derive(Clone)]
#[doc(hidden)]
pub struct Sealer {
    /// The key that seals, then the keys that still open what they sealed (see the module's
    /// "Rotating the key"). Never empty.
    keys: std::sync::Arc<[Key]>,
    ttl: Duration,
}

/// One key, with its public name.
#[derive(Clone)]
struct Key {
    secret: Box<[u8]>,
    /// A MAC of a fixed label under the key: names the key in the states it seals, so that the
    /// key that opens a state is found without trying each, and a state sealed with a key this
    /// server does not hold (a replica configured differently, a key dropped) can be told from
    /// an altered one.
    id: String,
}

impl Key {
    fn new(secret: &[u8]) -> Key {
        let mut id = <Hmac as KeyInit>::new_from_slice(secret).expect("HMAC takes any key");
        id.update(KEY_ID_DOMAIN);
        Key {
            id: URL_SAFE_NO_PAD.encode(&id.finalize().into_bytes()[..9]),
            secret: secret.into(),
        }
    }
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("keys", &self.keys.len())
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// Why a state was refused: each says which check failed, none says more than the client
/// could tell on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub enum BadState {
    /// Not a state at all (not two base64url parts, not JSON, too large).
    Malformed,
    /// Sealed with a key this server does not hold: another server, a replica without the
    /// shared key, or a key dropped from the previous ones.
    OtherKey,
    /// Altered, or presented for another call or caller than it was sealed for.
    Mismatch,
    /// Genuine, but past its life.
    Expired,
}

impl BadState {
    /// What failed, as the end of a sentence whose subject is the state.
    #[doc(hidden)]
    pub fn reason(self) -> &'static str {
        match self {
            BadState::Malformed => "is not a state this server made",
            BadState::OtherKey => {
                "was sealed with another key: every replica needs the same state key \
                 (OXP_STATE_KEY), and a server without one makes a new key at each start; a \
                 key being rotated out opens states only while it is listed in \
                 OXP_STATE_KEYS_PREVIOUS"
            }
            BadState::Mismatch => "belongs to another call or caller, or was altered",
            BadState::Expired => "has expired: call the tool again to ask anew",
        }
    }

    /// The metrics' `reason` labels ([`reason_index`](Self::reason_index) is each state's).
    #[doc(hidden)]
    pub const REASONS: [&'static str; 3] = ["invalid", "other_key", "expired"];

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
#[doc(hidden)]
pub struct TooLarge(pub usize);

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

/// What a state is bound to: the call (tool as resolved and input) and who makes it. Built
/// only by [`call`](Self::call) and [`prompt`](Self::prompt), so that every front binds alike.
#[doc(hidden)]
pub struct Binding<'a> {
    tool_id: Cow<'a, str>,
    input: &'a Value,
    principal: &'a str,
    user: &'a str,
}

impl<'a> Binding<'a> {
    /// A call's: the tool its name resolved to (`""` for none: the call then fails on its
    /// own), its input, the caller's principal and the user it runs for (`""` for none).
    pub fn call(
        tool_id: &'a str,
        input: &'a Value,
        principal: Option<&'a str>,
        user: Option<&'a str>,
    ) -> Self {
        Binding {
            tool_id: Cow::Borrowed(tool_id),
            input,
            principal: principal.unwrap_or_default(),
            user: user.unwrap_or_default(),
        }
    }

    /// A prompt's, bound as a call's is: to what is rendered (the prompt, under a name no
    /// tool id can have, and its arguments) and to who asks; a prompt runs for no user.
    pub fn prompt(name: &str, arguments: &'a Value, principal: Option<&'a str>) -> Self {
        Binding {
            tool_id: Cow::Owned(format!("prompt:{name}")),
            input: arguments,
            principal: principal.unwrap_or_default(),
            user: "",
        }
    }
}

impl Binding<'_> {
    fn mac(&self, key: &[u8], payload: &[u8]) -> Hmac {
        let mut mac = <Hmac as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
        mac.update(DOMAIN);
        let call = Fingerprint::of(&self.tool_id, self.input, &[]).to_hex();
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
use crate::time::{millis, now_ms};

impl Sealer {
    /// A sealer with `key` (at least [`MIN_KEY_BYTES`]), or with a random key of its own when
    /// none is given.
    #[doc(hidden)]
    pub fn new(key: Option<&[u8]>, ttl: Duration) -> Result<Self, String> {
        let key = match key {
            Some(key) if key.len() < MIN_KEY_BYTES => {
                return Err(format!(
                    "a state key needs at least {MIN_KEY_BYTES} bytes; this one has {}",
                    key.len()
                ));
            }
            Some(key) => Key::new(key),
            None => {
                let mut key = [0u8; MIN_KEY_BYTES];
                getrandom::fill(&mut key).map_err(|e| e.to_string())?;
                Key::new(&key)
            }
        };
        Ok(Sealer {
            keys: [key].into(),
            ttl,
        })
    }

    /// The same sealer, also opening what each of `previous` sealed (each at least
    /// [`MIN_KEY_BYTES`]; `Err` names the first that is not by its place, from 1, and never
    /// shows it), in place of any given before. It still seals with its own key; a previous key
    /// equal to it, or to another, adds nothing.
    #[doc(hidden)] // MCP's `OXP_STATE_KEYS_PREVIOUS`
    pub fn with_previous_keys<'k>(
        self,
        previous: impl IntoIterator<Item = &'k [u8]>,
    ) -> Result<Self, String> {
        let mut keys = Vec::new();
        keys.push(self.current().clone());
        for (at, key) in previous.into_iter().enumerate() {
            if key.len() < MIN_KEY_BYTES {
                return Err(format!(
                    "previous state key {} needs at least {MIN_KEY_BYTES} bytes; it has {}",
                    at + 1,
                    key.len()
                ));
            }
            let key = Key::new(key);
            if keys.iter().all(|known| known.id != key.id) {
                keys.push(key);
            }
        }
        Ok(Sealer {
            keys: keys.into(),
            ttl: self.ttl,
        })
    }

    /// The key that seals.
    fn current(&self) -> &Key {
        &self.keys[0]
    }

    /// The same key, with states that live `ttl`.
    #[doc(hidden)]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long a state lives.
    #[doc(hidden)]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A sealed state carrying `ledger`, bound to `binding`. It lives the sealer's lifetime
    /// from now while no answer is in it; from the first answer on, until the ledger's
    /// deadline, which this sets when it is not yet.
    #[doc(hidden)]
    pub fn seal(&self, mut ledger: Ledger, binding: &Binding<'_>) -> Result<String, TooLarge> {
        let from_now = now_ms().saturating_add(millis(self.ttl));
        let exp = if ledger.answers.is_empty() {
            from_now
        } else {
            *ledger.deadline.get_or_insert(from_now)
        };
        let key = self.current();
        let payload = Payload {
            kid: key.id.clone(),
            exp,
            ledger,
        };
        let payload = serde_json::to_vec(&payload).expect("JSON values serialize");
        let tag = binding.mac(&key.secret, &payload).finalize().into_bytes();
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

    /// [`open`](Self::open), with a refused state counted in `metrics` by its reason: how
    /// every front takes a state back.
    #[doc(hidden)]
    pub fn open_counted(
        &self,
        state: &str,
        binding: &Binding<'_>,
        metrics: Option<&crate::metrics::Metrics>,
    ) -> Result<Ledger, BadState> {
        self.open(state, binding).inspect_err(|bad| {
            if let Some(metrics) = metrics {
                metrics.refused_state(*bad);
            }
        })
    }

    /// The ledger `state` carries, if it is ours, bound to `binding`, and not expired.
    #[doc(hidden)]
    pub fn open(&self, state: &str, binding: &Binding<'_>) -> Result<Ledger, BadState> {
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
        let key = (self.keys.iter())
            .find(|key| key.id == kid)
            .ok_or(BadState::OtherKey)?;
        // Compared in constant time by the MAC itself.
        binding
            .mac(&key.secret, &payload)
            .verify_slice(&tag)
            .map_err(|_| Mismatch)?;
        let Payload { exp, ledger, .. } = serde_json::from_slice(&payload).map_err(|_| Mismatch)?;
        if now_ms() > exp {
            return Err(BadState::Expired);
        }
        Ok(ledger)
    }
}

// MCP's session ids are their one use
impl Sealer {
    /// `value` sealed under this key for `domain` (what it is, so that one kind of token is
    /// never taken for another), with no expiry and bound to nothing else: for what a client
    /// keeps and sends back unchanged, such as an MCP session id.
    #[doc(hidden)]
    pub fn seal_value(&self, domain: &[u8], value: &impl Serialize) -> String {
        let payload = serde_json::to_vec(value).expect("JSON values serialize");
        let tag = tag(&self.current().secret, domain, &payload)
            .finalize()
            .into_bytes();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// What [`seal_value`](Self::seal_value) sealed for `domain`, if `token` is such a seal
    /// under one of this sealer's keys. Such a token names no key: it is tried under each, the
    /// sealing key first, so that the ids clients already hold stay as they are; a few keys at
    /// most are held, and nothing is told apart here (any refusal is "no such session").
    #[doc(hidden)]
    pub fn open_value<T: serde::de::DeserializeOwned>(
        &self,
        domain: &[u8],
        token: &str,
    ) -> Option<T> {
        if token.len() > MAX_STATE_BYTES {
            return None;
        }
        let (payload, tag_bytes) = token.split_once('.')?;
        let payload = URL_SAFE_NO_PAD.decode(payload).ok()?;
        let tag_bytes = URL_SAFE_NO_PAD.decode(tag_bytes).ok()?;
        (self.keys.iter())
            .any(|key| {
                tag(&key.secret, domain, &payload)
                    .verify_slice(&tag_bytes)
                    .is_ok()
            })
            .then(|| serde_json::from_slice(&payload).ok())?
    }
}

/// The tag of a [`Sealer::seal_value`] seal.
#[doc(hidden)]
pub fn tag(key: &[u8], domain: &[u8], payload: &[u8]) -> Hmac {
    let mut mac = <Hmac as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(&(domain.len() as u64).to_be_bytes());
    mac.update(domain);
    mac.update(payload);
    mac
}

#[derive(Deserialize)]
struct KeyIdOnly {
    kid: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding<'a>(input: &'a Value, principal: &'a str) -> Binding<'a> {
        Binding::call("Files.Delete@1.0.0", input, Some(principal), Some("ada"))
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

    const OLD: [u8; 32] = [1; 32];
    const NEW: [u8; 32] = [2; 32];

    /// A replica at each step of a rotation from `OLD` to `NEW`: (a) the new key listed as
    /// previous, (b) the new key sealing and the old one previous, (c) the old one dropped.
    fn steps() -> [Sealer; 3] {
        let ttl = Duration::from_secs(60);
        let sealer = |key: &[u8], previous: &[&[u8]]| {
            Sealer::new(Some(key), ttl)
                .unwrap()
                .with_previous_keys(previous.iter().copied())
                .unwrap()
        };
        [
            sealer(&OLD, &[&NEW]),
            sealer(&NEW, &[&OLD]),
            sealer(&NEW, &[]),
        ]
    }

    #[test]
    fn adjacent_steps_of_a_rotation_open_each_other_s_states() {
        let [a, b, c] = steps();
        let input = serde_json::json!({"path": "/srv"});
        let at = binding(&input, "key:1");
        let before = Sealer::new(Some(&OLD), DEFAULT_TTL).unwrap();
        let from_before = before.seal(answered(), &at).unwrap();
        let from_a = a.seal(answered(), &at).unwrap();
        let from_b = b.seal(answered(), &at).unwrap();
        let from_c = c.seal(answered(), &at).unwrap();
        for (state, opens) in [
            (&from_before, [true, true, false]),
            (&from_a, [true, true, false]),
            (&from_b, [true, true, true]),
            (&from_c, [true, true, true]),
        ] {
            for (sealer, opens) in [&a, &b, &c].into_iter().zip(opens) {
                let opened = sealer.open(state, &at);
                if opens {
                    assert_eq!(opened.unwrap().answers, answered().answers);
                } else {
                    assert_eq!(opened, Err(BadState::OtherKey), "the old key was dropped");
                }
            }
        }
        // A state names the key that sealed it: (a) seals with the old key, (b) with the new.
        let kid = |state: &str| {
            let payload = URL_SAFE_NO_PAD
                .decode(state.split('.').next().unwrap())
                .unwrap();
            serde_json::from_slice::<KeyIdOnly>(&payload).unwrap().kid
        };
        assert_eq!(kid(&from_a), kid(&from_before));
        assert_ne!(kid(&from_b), kid(&from_a));
        assert_eq!(kid(&from_b), kid(&from_c));
    }

    #[test]
    fn a_key_no_longer_held_is_refused_saying_how_to_keep_it() {
        let [_, b, c] = steps();
        let input = serde_json::json!({});
        let state = Sealer::new(Some(&[3; 32]), DEFAULT_TTL)
            .unwrap()
            .seal(answered(), &binding(&input, "p"))
            .unwrap();
        for sealer in [&b, &c] {
            assert_eq!(
                sealer.open(&state, &binding(&input, "p")),
                Err(BadState::OtherKey)
            );
        }
        let reason = BadState::OtherKey.reason();
        assert!(
            reason.starts_with("was sealed with another key"),
            "{reason}"
        );
        assert!(
            reason.contains("OXP_STATE_KEY") && reason.contains("OXP_STATE_KEYS_PREVIOUS"),
            "{reason}"
        );
    }

    /// A state altered to name another key this server holds is refused as altered: the tag
    /// is checked under the key the state names, and no key's tag fits another's.
    #[test]
    fn a_state_altered_under_a_previous_key_is_refused() {
        let [a, b, _] = steps();
        let input = serde_json::json!({"path": "/srv"});
        let at = binding(&input, "key:1");
        let state = a.seal(answered(), &at).unwrap();
        let (payload, tag) = state.split_once('.').unwrap();
        let payload = URL_SAFE_NO_PAD.decode(payload).unwrap();
        let mut json: Value = serde_json::from_slice(&payload).unwrap();
        let new_kid = {
            let other = b.seal(answered(), &at).unwrap();
            let payload = URL_SAFE_NO_PAD
                .decode(other.split('.').next().unwrap())
                .unwrap();
            serde_json::from_slice::<KeyIdOnly>(&payload).unwrap().kid
        };
        json["kid"] = Value::String(new_kid);
        let renamed = format!(
            "{}.{tag}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json).unwrap())
        );
        assert_eq!(b.open(&renamed, &at), Err(BadState::Mismatch));
        json = serde_json::from_slice(&payload).unwrap();
        json["answers"][0]["value"]["action"] = Value::String("decline".into());
        let altered = format!(
            "{}.{tag}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json).unwrap())
        );
        assert_eq!(b.open(&altered, &at), Err(BadState::Mismatch));
        assert_eq!(
            b.open(&state, &binding(&input, "key:2")),
            Err(BadState::Mismatch)
        );
    }

    #[test]
    fn sealed_values_open_under_any_key_held_and_no_other() {
        let [a, b, c] = steps();
        let token = a.seal_value(b"session", &"declared");
        assert_eq!(
            b.open_value::<String>(b"session", &token).as_deref(),
            Some("declared")
        );
        assert_eq!(c.open_value::<String>(b"session", &token), None, "dropped");
        assert_eq!(
            b.open_value::<String>(b"other", &token),
            None,
            "another domain"
        );
        let from_c = c.seal_value(b"session", &"declared");
        assert!(a.open_value::<String>(b"session", &from_c).is_some());
    }

    #[test]
    fn a_short_previous_key_is_refused_by_its_place_and_never_shown() {
        let error = Sealer::new(Some(&NEW), DEFAULT_TTL)
            .unwrap()
            .with_previous_keys([&OLD[..], b"too short a key"])
            .unwrap_err();
        assert!(error.contains("previous state key 2"), "{error}");
        assert!(!error.contains("too short"), "{error}");
    }

    /// Every front takes a state back through `open_counted`: a refusal is counted once, by
    /// its reason, and a state opened is not counted.
    #[test]
    fn a_refused_state_is_counted_by_its_reason() {
        let sealer = Sealer::new(Some(&[7; 32]), Duration::from_secs(60)).unwrap();
        let registry = crate::registry::Registry::builder().build().unwrap();
        let metrics = crate::metrics::Metrics::new(&registry);
        let input = serde_json::json!({"path": "/srv"});
        let state = sealer.seal(answered(), &binding(&input, "p")).unwrap();
        let open = |state: &str, principal: &str| {
            sealer.open_counted(state, &binding(&input, principal), Some(&metrics))
        };
        assert!(open(&state, "p").is_ok());
        assert_eq!(open(&state, "q"), Err(BadState::Mismatch));
        assert_eq!(open("not a state", "p"), Err(BadState::Malformed));
        assert_eq!(
            sealer.open_counted(&state, &binding(&input, "q"), None),
            Err(BadState::Mismatch)
        );
        let refused = |bad: BadState| metrics.table().refused_states[bad.reason_index()].sum();
        assert_eq!(
            refused(BadState::Mismatch),
            2,
            "invalid: the mismatch and the malformed"
        );
        assert_eq!(refused(BadState::Expired), 0);
    }
}
