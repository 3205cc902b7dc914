//! [`Fingerprint`]: what a call asked for, reduced to 32 bytes, so that a `call_id` names one
//! request. The bytes hashed are pinned: stores keep fingerprints across upgrades.

use std::fmt;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// What a call asked for, reduced to 32 bytes: the tool as resolved, its input, and which
/// requirement values came with it. Two calls with one `call_id` are the same request exactly
/// when their fingerprints are equal (SHA-256, so a different request cannot be made to match).
///
/// ```
/// use oxp_runtime::idempotency::Fingerprint;
/// use serde_json::json;
/// let a = Fingerprint::of("Calculator.Add@1.0.0", &json!({"a": 1, "b": 2}), &[]);
/// let same = Fingerprint::of("Calculator.Add@1.0.0", &json!({"b": 2, "a": 1}), &[]);
/// let other = Fingerprint::of("Calculator.Add@1.0.0", &json!({"a": 40, "b": 2}), &[]);
/// assert_eq!(a, same);
/// assert_ne!(a, other);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a call of `tool_id` with `input`, carrying the requirement values
    /// named in `present` (secret and authorization ids; their values are not part of it). Object
    /// keys are taken in sorted order, so the order a client wrote them in does not matter.
    ///
    /// ```
    /// use oxp_runtime::idempotency::Fingerprint;
    /// let input = serde_json::json!({});
    /// assert_ne!(Fingerprint::of("A.B@1.0.0", &input, &[]), Fingerprint::of("A.C@1.0.0", &input, &[]));
    /// ```
    pub fn of(tool_id: &str, input: &Value, present: &[&str]) -> Self {
        let mut hasher = Sha256::new();
        write_str(&mut hasher, tool_id);
        write_value(&mut hasher, input);
        let mut present = present.to_vec();
        present.sort_unstable();
        for id in present {
            write_str(&mut hasher, id);
        }
        Fingerprint(hasher.finalize().into())
    }

    /// Lowercase hex, as stores that keep text write it.
    ///
    /// ```
    /// let fingerprint = oxp_runtime::idempotency::Fingerprint::of("A.B@1.0.0", &serde_json::json!({}), &[]);
    /// assert_eq!(fingerprint.to_hex().len(), 64);
    /// ```
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = String::with_capacity(64);
        for byte in self.0 {
            hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
            hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
        hex
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", &self.to_hex()[..12])
    }
}

/// Length-prefixed, so that no two sequences of strings hash alike.
fn write_str(hasher: &mut Sha256, s: &str) {
    write_bytes(hasher, s.as_bytes());
}

fn write_bytes(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

/// A canonical walk: a tag per kind, numbers as JSON writes them, object keys sorted.
fn write_value(hasher: &mut Sha256, value: &Value) {
    match value {
        Value::Null => hasher.update([0]),
        Value::Bool(b) => hasher.update([1, u8::from(*b)]),
        Value::Number(n) => {
            hasher.update([2]);
            // As JSON writes it (the same text as its `Display`, without the formatting
            // machinery), on the stack: 32 bytes hold any u64, i64 or f64 (the longest float
            // is 24); a longer form (serde_json's arbitrary_precision) takes a String.
            let mut text = [0u8; 32];
            let mut rest = &mut text[..];
            match serde_json::to_writer(&mut rest, n) {
                Ok(()) => {
                    let len = 32 - rest.len();
                    write_bytes(hasher, &text[..len]);
                }
                Err(_) => write_str(hasher, &n.to_string()),
            }
        }
        Value::String(s) => {
            hasher.update([3]);
            write_str(hasher, s);
        }
        Value::Array(items) => {
            hasher.update([4]);
            hasher.update((items.len() as u64).to_le_bytes());
            items.iter().for_each(|item| write_value(hasher, item));
        }
        Value::Object(fields) => {
            hasher.update([5]);
            hasher.update((fields.len() as u64).to_le_bytes());
            write_fields(hasher, fields.iter());
        }
    }
}

/// An object's fields, by their keys' order. serde_json's map iterates in that order, unless
/// some crate in the build turns on its `preserve_order` (then the keys come as they were sent):
/// only then are they sorted here, which takes an allocation.
fn write_fields<'a, I>(hasher: &mut Sha256, fields: I)
where
    I: Iterator<Item = (&'a String, &'a Value)> + Clone,
{
    let write = |hasher: &mut Sha256, (key, value): (&String, &Value)| {
        write_str(hasher, key);
        write_value(hasher, value);
    };
    if fields.clone().map(|(key, _)| key).is_sorted() {
        fields.for_each(|field| write(hasher, field));
    } else {
        let mut sorted: Vec<_> = fields.collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        sorted.into_iter().for_each(|field| write(hasher, field));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map that keeps its keys as they came (serde_json's `preserve_order`, which any crate in
    /// a build may turn on) is hashed as the sorted map it equals.
    #[test]
    fn fields_in_any_order_hash_as_sorted() {
        let (a, b, c) = ("a".to_owned(), "b".to_owned(), "c".to_owned());
        let (one, two, three) = (Value::from(1), Value::from("two"), Value::from(3.5));
        let sorted = [(&a, &one), (&b, &two), (&c, &three)];
        let digest = |fields: &[(&String, &Value)]| {
            let mut hasher = Sha256::new();
            write_fields(&mut hasher, fields.iter().copied());
            hasher.finalize()
        };
        let digest_sorted = digest(&sorted);
        for order in [[2, 1, 0], [1, 0, 2], [0, 2, 1]] {
            let fields = order.map(|i| sorted[i]);
            assert_eq!(digest(&fields), digest_sorted, "order {order:?}");
        }
    }

    /// Fingerprints outlive a process (Redis keeps them for every replica, across upgrades):
    /// the bytes hashed for a request must never change, or a retry after an upgrade would be
    /// refused as a reused call_id. Pinned for every kind of value, numbers of each form among
    /// them.
    #[test]
    fn fingerprints_are_stable_across_versions() {
        let input = serde_json::json!({
            "b": [null, true, false, "text", "", {"z": 1, "a": -1}],
            "a": {"int": 42, "negative": -7, "big": u64::MAX, "min": i64::MIN,
                  "float": 1.5, "tiny": 1e-7, "huge": 1e300, "whole": 2.0, "zero": 0.0},
        });
        let cases = [
            (
                Fingerprint::of("T.T@1.0.0", &input, &[]),
                "fe1b4c62b2afaedb2b8d5542a0ae6f926a004a1e7bbc5858a0eab6239e7b681f",
            ),
            (
                Fingerprint::of("T.T@1.0.0", &input, &["token", "api_key"]),
                "e502ee8809da176c39527a4c9db13e10966a024471746af7d8b436d8fd3d5e6f",
            ),
            (
                Fingerprint::of(
                    "Calculator.Add@1.0.0",
                    &serde_json::json!({"a": 1, "b": 2}),
                    &[],
                ),
                "353f032b52243cf714c68c2e49e785c7a98d12aa92caf365df1179eb147afaca",
            ),
        ];
        for (fingerprint, pinned) in cases {
            assert_eq!(fingerprint.to_hex(), pinned);
        }
    }
}
