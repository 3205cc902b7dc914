//! The keys of a JWKS that may verify an access token, as the `DecodingKey`s `jsonwebtoken`
//! verifies with.
//!
//! A key is kept only if it is a public signing key of a supported kind: `RSA` (2048 bits and
//! up, ring's floor), `EC` P-256/P-384, `OKP` Ed25519. Secret (`oct`) keys, encryption keys
//! (`use: enc`, `key_ops` without `verify`) and kinds ring does not verify (P-521, Ed448, an
//! unknown `kty`) are left out one by one, so one such key never spoils the others.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};

/// The algorithms a token may be signed with: asymmetric ones only, so a public key can never
/// be used as an HMAC secret, and never `none`.
pub(crate) const ALLOWED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The most keys kept from one set: a provider publishes a handful; more is a mistake or an
/// attempt to make every lookup slow.
pub(crate) const MAX_KEYS: usize = 64;

/// What a key is, which decides the algorithms it may check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Rsa,
    P256,
    P384,
    Ed25519,
}

/// One usable public key.
#[derive(Debug)]
pub(crate) struct Key {
    pub(crate) kid: Option<String>,
    /// The JWK's own `alg`, when it names one: the token's must then be the same.
    alg: Option<Algorithm>,
    kind: Kind,
    /// What `jsonwebtoken::decode` checks the signature with.
    pub(crate) decoding: DecodingKey,
}

impl Key {
    /// The key of one JWK entry, or why it is left out (for a debug log).
    pub(crate) fn from_jwk(value: &serde_json::Value) -> Result<Key, &'static str> {
        let jwk: Jwk = serde_json::from_value(value.clone()).map_err(|_| "not a JWK")?;
        let common = &jwk.common;
        match &common.public_key_use {
            None | Some(PublicKeyUse::Signature) => {}
            Some(_) => return Err("not a signing key (`use`)"),
        }
        if let Some(ops) = &common.key_operations
            && !ops.iter().any(|op| matches!(op, KeyOperations::Verify))
        {
            return Err("not a verifying key (`key_ops`)");
        }
        let alg = match &common.key_algorithm {
            None => None,
            Some(alg) => {
                Some(key_algorithm(alg).ok_or("an algorithm this server does not accept")?)
            }
        };
        let decode = |b64: &str| URL_SAFE_NO_PAD.decode(b64).map_err(|_| "bad base64url");
        let (kind, decoding) = match &jwk.algorithm {
            AlgorithmParameters::RSA(rsa) => {
                let n = decode(&rsa.n)?;
                let e = decode(&rsa.e)?;
                // Big-endian integers; a leading zero byte is allowed by some encoders, and
                // ring reads them without.
                let strip = |v: &[u8]| {
                    let first = v.iter().position(|b| *b != 0).unwrap_or(v.len());
                    v[first..].to_vec()
                };
                let n = strip(&n);
                // What ring verifies (2048 to 8192 bits): a key outside it is left out here,
                // not kept to fail each token later, so a set of one good key and one such key
                // still has one usable key.
                let bits = n.len() * 8 - n.first().map_or(8, |b| b.leading_zeros() as usize);
                if !(2048..=8192).contains(&bits) {
                    return Err("an RSA key of fewer than 2048 or more than 8192 bits");
                }
                let key = DecodingKey::from_rsa_raw_components(&n, &strip(&e));
                (Kind::Rsa, key)
            }
            AlgorithmParameters::EllipticCurve(ec) => {
                let (x, y) = (decode(&ec.x)?, decode(&ec.y)?);
                let (kind, size) = match ec.curve {
                    EllipticCurve::P256 => (Kind::P256, 32),
                    EllipticCurve::P384 => (Kind::P384, 48),
                    _ => return Err("an elliptic curve this server does not verify"),
                };
                if x.len() != size || y.len() != size {
                    return Err("coordinates of the wrong length");
                }
                let key =
                    DecodingKey::from_ec_components(&ec.x, &ec.y).map_err(|_| "bad base64url")?;
                (kind, key)
            }
            AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
                EllipticCurve::Ed25519 => {
                    if decode(&okp.x)?.len() != 32 {
                        return Err("an Ed25519 key of the wrong length");
                    }
                    let key =
                        DecodingKey::from_ed_components(&okp.x).map_err(|_| "bad base64url")?;
                    (Kind::Ed25519, key)
                }
                _ => return Err("an OKP curve this server does not verify"),
            },
            AlgorithmParameters::OctetKey(_) => return Err("a secret (`oct`) key"),
            _ => return Err("an unknown `kty`"),
        };
        let key = Key {
            kid: common.key_id.clone(),
            alg,
            kind,
            decoding,
        };
        if let Some(alg) = key.alg
            && !key.fits(alg)
        {
            return Err("its `alg` does not fit its kind");
        }
        Ok(key)
    }

    /// Whether a token signed with `alg` may be checked with this key: the algorithm is allowed,
    /// names the key's own kind, and is the key's declared `alg` if it has one.
    pub(crate) fn fits(&self, alg: Algorithm) -> bool {
        if self.alg.is_some_and(|own| own != alg) {
            return false;
        }
        matches!(
            (self.kind, alg),
            (
                Kind::Rsa,
                Algorithm::RS256
                    | Algorithm::RS384
                    | Algorithm::RS512
                    | Algorithm::PS256
                    | Algorithm::PS384
                    | Algorithm::PS512
            ) | (Kind::P256, Algorithm::ES256)
                | (Kind::P384, Algorithm::ES384)
                | (Kind::Ed25519, Algorithm::EdDSA)
        )
    }
}

fn key_algorithm(alg: &KeyAlgorithm) -> Option<Algorithm> {
    Some(match alg {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

/// The usable keys of a JWKS document, and how many entries were left out.
pub(crate) fn parse_set(document: &serde_json::Value) -> Result<(Vec<Key>, usize), String> {
    let entries = document
        .get("keys")
        .and_then(serde_json::Value::as_array)
        .ok_or("the key set has no `keys` array")?;
    let mut keys = Vec::new();
    let mut skipped = 0;
    for entry in entries {
        if keys.len() == MAX_KEYS {
            skipped += 1;
            continue;
        }
        match Key::from_jwk(entry) {
            Ok(key) => keys.push(key),
            Err(why) => {
                skipped += 1;
                let kid = entry.get("kid").and_then(serde_json::Value::as_str);
                tracing::debug!(kid, why, "a key of the set is left out");
            }
        }
    }
    Ok((keys, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unusable_entries_are_left_out_one_by_one() {
        let p256 = json!({"kty": "EC", "crv": "P-256", "kid": "ec",
            "x": URL_SAFE_NO_PAD.encode([1u8; 32]), "y": URL_SAFE_NO_PAD.encode([2u8; 32])});
        let set = json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB", "kid": "enc"},
            {"kty": "RSA", "key_ops": ["encrypt"], "n": "AQAB", "e": "AQAB", "kid": "ops"},
            {"kty": "OKP", "crv": "Ed448", "x": "AAAA", "kid": "448"},
            {"kty": "EC", "crv": "P-521", "x": "AAAA", "y": "AAAA", "kid": "521"},
            {"kty": "XYZ", "kid": "unknown"},
            {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "tiny"},
            {"kty": "EC", "crv": "P-256", "alg": "RS256", "x": URL_SAFE_NO_PAD.encode([1u8; 32]),
             "y": URL_SAFE_NO_PAD.encode([2u8; 32]), "kid": "mismatch"},
            p256,
        ]});
        let (keys, skipped) = parse_set(&set).unwrap();
        assert_eq!(skipped, 8);
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid.as_deref(), Some("ec"));
        assert!(keys[0].fits(Algorithm::ES256));
        assert!(!keys[0].fits(Algorithm::ES384));
        assert!(!keys[0].fits(Algorithm::HS256));
        assert!(!keys[0].fits(Algorithm::RS256));
    }
}
