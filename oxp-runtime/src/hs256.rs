//! HS256 for `jsonwebtoken` when the `oauth` feature is off: the one algorithm such a server
//! accepts, from RustCrypto's `hmac` and `sha2` (already there for the idempotency
//! fingerprint), one crate more. `jsonwebtoken`'s `rust_crypto` feature would be the lighter
//! code but the heavier build: it brings every algorithm's crates whatever is used (RustCrypto's
//! RSA with RUSTSEC-2023-0071, P-256, P-384, ed25519-dalek, rand, and second versions of hmac and
//! sha2), some 25 crates. With `oauth`, ring is linked already, and its provider
//! (`oauth/crypto.rs`) verifies HS256 as every other algorithm. Parsing, claims and their
//! validation stay `jsonwebtoken`'s either way.
//! Here rather than in `server`: the process has one provider, which the server's HS256 check and
//! the `oauth` module both need, and the server names no other front.

/// Makes the process's `jsonwebtoken` provider one that verifies HS256, unless one is already
/// in place (an app's own, or `jsonwebtoken`'s `rust_crypto` or `aws_lc_rs` feature enabled
/// elsewhere, which verify HS256 alike).
pub(crate) fn install() {
    #[cfg(feature = "oauth")]
    crate::oauth::crypto::install();
    #[cfg(not(feature = "oauth"))]
    let _ = hmac_sha256::PROVIDER.install_default();
}

#[cfg(not(feature = "oauth"))]
mod hmac_sha256 {
    use hmac::{Hmac, KeyInit, Mac};
    use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
    use jsonwebtoken::errors::{ErrorKind, Result};
    use jsonwebtoken::signature::{self, Signer, Verifier};
    use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};
    use sha2::Sha256;

    struct Hs256(Hmac<Sha256>);

    impl Hs256 {
        fn new(algorithm: &Algorithm, key: &[u8]) -> Result<Self> {
            if *algorithm != Algorithm::HS256 {
                return Err(ErrorKind::InvalidAlgorithm.into());
            }
            Hmac::new_from_slice(key)
                .map(Hs256)
                .map_err(|_| ErrorKind::InvalidKeyFormat.into())
        }
    }

    impl Signer<Vec<u8>> for Hs256 {
        fn try_sign(&self, message: &[u8]) -> std::result::Result<Vec<u8>, signature::Error> {
            let mut mac = self.0.clone();
            mac.update(message);
            Ok(mac.finalize().into_bytes().to_vec())
        }
    }

    impl JwtSigner for Hs256 {
        fn algorithm(&self) -> Algorithm {
            Algorithm::HS256
        }
    }

    impl Verifier<Vec<u8>> for Hs256 {
        fn verify(
            &self,
            message: &[u8],
            tag: &Vec<u8>,
        ) -> std::result::Result<(), signature::Error> {
            let mut mac = self.0.clone();
            mac.update(message);
            // Constant-time: the comparison does not tell an attacker how much of a forged tag
            // was right.
            mac.verify_slice(tag).map_err(signature::Error::from_source)
        }
    }

    impl JwtVerifier for Hs256 {
        fn algorithm(&self) -> Algorithm {
            Algorithm::HS256
        }
    }

    fn signer(algorithm: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
        Ok(Box::new(Hs256::new(algorithm, key.as_bytes())?))
    }

    fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
        Ok(Box::new(Hs256::new(algorithm, key.try_get_as_bytes()?)?))
    }

    pub(super) static PROVIDER: CryptoProvider = CryptoProvider {
        signer_factory: signer,
        verifier_factory: verifier,
        // The server reads no JWKs.
        key_utils: KeyUtils::new_unimplemented(),
    };

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn signs_and_verifies_hs256_and_nothing_else() {
            let tag = Hs256::new(&Algorithm::HS256, b"secret")
                .unwrap()
                .try_sign(b"header.claims")
                .unwrap();
            // RFC 4231-style check against an independent computation of the same MAC.
            let mut mac = Hmac::<Sha256>::new_from_slice(b"secret").unwrap();
            mac.update(b"header.claims");
            assert_eq!(tag, mac.finalize().into_bytes().to_vec());
            let verifier = Hs256::new(&Algorithm::HS256, b"secret").unwrap();
            assert!(verifier.verify(b"header.claims", &tag).is_ok());
            assert!(verifier.verify(b"header.claimz", &tag).is_err());
            for other in [
                Algorithm::HS384,
                Algorithm::RS256,
                Algorithm::ES256,
                Algorithm::EdDSA,
            ] {
                assert!(Hs256::new(&other, b"secret").is_err(), "{other:?}");
            }
        }
    }
}
