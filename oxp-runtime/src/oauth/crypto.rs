//! `jsonwebtoken`'s cryptography from `ring`, which the `oauth` feature already links for TLS:
//! every algorithm a JWT names (HS256/384/512, RS256/384/512, PS256/384/512, ES256/384, EdDSA
//! with Ed25519), so one provider verifies an identity provider's access tokens and HS256
//! secrets alike. `jsonwebtoken`'s own providers are a second crypto library (`aws_lc_rs`, a C
//! build of its own) or RustCrypto's RSA (`rust_crypto`, RUSTSEC-2023-0071, no fixed version).
//!
//! The provider is the process's default once installed, so it also signs (an app that issues
//! JWTs with `jsonwebtoken` in the same process gets the same algorithms) and serves the JWK
//! helpers ring can: all but reading an RSA public key's DER, which ring does not parse.

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind, Result};
use jsonwebtoken::jwk::{EllipticCurve, ThumbprintHash};
use jsonwebtoken::signature::{self, Signer, Verifier};
use jsonwebtoken::{Algorithm, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::rand::SystemRandom;
use ring::signature::{
    self as sig, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair, RsaPublicKeyComponents,
    VerificationAlgorithm,
};
use ring::{digest, hmac};

/// Makes ring the process's `jsonwebtoken` provider, unless one is already in place: an app's
/// own, or `jsonwebtoken`'s `rust_crypto`/`aws_lc_rs` feature turned on elsewhere in the build
/// and used first, which verify the same algorithms.
pub(crate) fn install() {
    let _ = PROVIDER.install_default();
}

static PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: signer,
    verifier_factory: verifier,
    key_utils: KeyUtils {
        rsa_pub_components_from_private_key: rsa_components_of_private_key,
        rsa_pub_components_from_public_key: |_| {
            Err(ErrorKind::Provider(
                "ring does not read an RSA public key's DER: build the key from its n and e".into(),
            )
            .into())
        },
        ec_pub_components_from_private_key: ec_components_of_private_key,
        ed_pub_components_from_private_key: ed_component_of_private_key,
        compute_digest,
    },
};

/// How a signature of one algorithm is checked with one key.
enum Check {
    Hmac(hmac::Key),
    /// An RSA key given by its modulus and exponent (a JWK's `n` and `e`).
    RsaComponents {
        parameters: &'static sig::RsaParameters,
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// A public key in the form `algorithm` reads: an RSA key's PKCS#1 DER, an uncompressed
    /// EC point, an Ed25519 key's 32 bytes.
    Public {
        algorithm: &'static dyn VerificationAlgorithm,
        key: Vec<u8>,
    },
}

struct RingVerifier {
    algorithm: Algorithm,
    check: Check,
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, message: &[u8], tag: &Vec<u8>) -> std::result::Result<(), signature::Error> {
        let checked = match &self.check {
            // Constant-time: the comparison does not tell a forger how much of a tag was right.
            Check::Hmac(key) => hmac::verify(key, message, tag),
            Check::RsaComponents { parameters, n, e } => {
                RsaPublicKeyComponents { n, e }.verify(parameters, message, tag)
            }
            Check::Public { algorithm, key } => {
                sig::UnparsedPublicKey::new(*algorithm, key).verify(message, tag)
            }
        };
        // ring says no more than that it failed.
        checked.map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    // A key of another family never checks a token: an RSA public key is no HMAC secret.
    if key.family() != algorithm.family() {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    let rsa = |parameters: &'static sig::RsaParameters| match key.kind() {
        DecodingKeyKind::RsaModulusExponent { n, e } => Check::RsaComponents {
            parameters,
            n: n.clone(),
            e: e.clone(),
        },
        DecodingKeyKind::SecretOrDer(der) => Check::Public {
            algorithm: parameters,
            key: der.clone(),
        },
    };
    let public = |algorithm: &'static dyn VerificationAlgorithm| -> Result<Check> {
        Ok(Check::Public {
            algorithm,
            key: key.try_get_as_bytes()?.to_vec(),
        })
    };
    let secret = |algorithm| -> Result<Check> {
        Ok(Check::Hmac(hmac::Key::new(
            algorithm,
            key.try_get_as_bytes()?,
        )))
    };
    let check = match algorithm {
        Algorithm::HS256 => secret(hmac::HMAC_SHA256)?,
        Algorithm::HS384 => secret(hmac::HMAC_SHA384)?,
        Algorithm::HS512 => secret(hmac::HMAC_SHA512)?,
        Algorithm::RS256 => rsa(&sig::RSA_PKCS1_2048_8192_SHA256),
        Algorithm::RS384 => rsa(&sig::RSA_PKCS1_2048_8192_SHA384),
        Algorithm::RS512 => rsa(&sig::RSA_PKCS1_2048_8192_SHA512),
        Algorithm::PS256 => rsa(&sig::RSA_PSS_2048_8192_SHA256),
        Algorithm::PS384 => rsa(&sig::RSA_PSS_2048_8192_SHA384),
        Algorithm::PS512 => rsa(&sig::RSA_PSS_2048_8192_SHA512),
        Algorithm::ES256 => public(&sig::ECDSA_P256_SHA256_FIXED)?,
        Algorithm::ES384 => public(&sig::ECDSA_P384_SHA384_FIXED)?,
        Algorithm::EdDSA => public(&sig::ED25519)?,
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    Ok(Box::new(RingVerifier {
        algorithm: *algorithm,
        check,
    }))
}

/// A private key, ready to sign.
enum Signing {
    Hmac(hmac::Key),
    Rsa(&'static dyn sig::RsaEncoding, RsaKeyPair),
    Ecdsa(EcdsaKeyPair),
    Ed25519(Ed25519KeyPair),
}

struct RingSigner {
    algorithm: Algorithm,
    signing: Signing,
}

impl Signer<Vec<u8>> for RingSigner {
    fn try_sign(&self, message: &[u8]) -> std::result::Result<Vec<u8>, signature::Error> {
        let random = SystemRandom::new();
        Ok(match &self.signing {
            Signing::Hmac(key) => hmac::sign(key, message).as_ref().to_vec(),
            Signing::Rsa(padding, pair) => {
                let mut signed = vec![0; pair.public().modulus_len()];
                pair.sign(*padding, &random, message, &mut signed)
                    .map_err(|_| signature::Error::new())?;
                signed
            }
            Signing::Ecdsa(pair) => pair
                .sign(&random, message)
                .map_err(|_| signature::Error::new())?
                .as_ref()
                .to_vec(),
            Signing::Ed25519(pair) => pair.sign(message).as_ref().to_vec(),
        })
    }
}

impl JwtSigner for RingSigner {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

fn signer(algorithm: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    if key.family() != algorithm.family() {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    let der = key.as_bytes();
    let rsa = |padding: &'static dyn sig::RsaEncoding| -> Result<Signing> {
        Ok(Signing::Rsa(padding, rsa_pair(der)?))
    };
    let ecdsa = |algorithm| -> Result<Signing> {
        EcdsaKeyPair::from_pkcs8(algorithm, der, &SystemRandom::new())
            .map(Signing::Ecdsa)
            .map_err(|_| ErrorKind::InvalidEcdsaKey.into())
    };
    let signing = match algorithm {
        Algorithm::HS256 => Signing::Hmac(hmac::Key::new(hmac::HMAC_SHA256, der)),
        Algorithm::HS384 => Signing::Hmac(hmac::Key::new(hmac::HMAC_SHA384, der)),
        Algorithm::HS512 => Signing::Hmac(hmac::Key::new(hmac::HMAC_SHA512, der)),
        Algorithm::RS256 => rsa(&sig::RSA_PKCS1_SHA256)?,
        Algorithm::RS384 => rsa(&sig::RSA_PKCS1_SHA384)?,
        Algorithm::RS512 => rsa(&sig::RSA_PKCS1_SHA512)?,
        Algorithm::PS256 => rsa(&sig::RSA_PSS_SHA256)?,
        Algorithm::PS384 => rsa(&sig::RSA_PSS_SHA384)?,
        Algorithm::PS512 => rsa(&sig::RSA_PSS_SHA512)?,
        Algorithm::ES256 => ecdsa(&sig::ECDSA_P256_SHA256_FIXED_SIGNING)?,
        Algorithm::ES384 => ecdsa(&sig::ECDSA_P384_SHA384_FIXED_SIGNING)?,
        Algorithm::EdDSA => Signing::Ed25519(ed25519_pair(der)?),
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    Ok(Box::new(RingSigner {
        algorithm: *algorithm,
        signing,
    }))
}

/// An RSA private key from its PKCS#1 DER (what `EncodingKey::from_rsa_pem` reads out of
/// `RSA PRIVATE KEY`) or its PKCS#8 DER.
fn rsa_pair(der: &[u8]) -> Result<RsaKeyPair> {
    RsaKeyPair::from_der(der)
        .or_else(|_| RsaKeyPair::from_pkcs8(der))
        .map_err(|rejected| ErrorKind::InvalidRsaKey(rejected.to_string()).into())
}

/// An Ed25519 private key from PKCS#8, with or without its public key (v2 or v1, as OpenSSL
/// writes it).
fn ed25519_pair(der: &[u8]) -> Result<Ed25519KeyPair> {
    Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).map_err(|_| ErrorKind::InvalidEddsaKey.into())
}

fn rsa_components_of_private_key(der: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    let components = RsaPublicKeyComponents::<Vec<u8>>::from(rsa_pair(der)?.public());
    Ok((components.n, components.e))
}

fn ec_components_of_private_key(
    der: &[u8],
    algorithm: Algorithm,
) -> Result<(EllipticCurve, Vec<u8>, Vec<u8>)> {
    let (signing, curve, size) = match algorithm {
        Algorithm::ES256 => (
            &sig::ECDSA_P256_SHA256_FIXED_SIGNING,
            EllipticCurve::P256,
            32,
        ),
        Algorithm::ES384 => (
            &sig::ECDSA_P384_SHA384_FIXED_SIGNING,
            EllipticCurve::P384,
            48,
        ),
        _ => return Err(ErrorKind::InvalidEcdsaKey.into()),
    };
    let pair = EcdsaKeyPair::from_pkcs8(signing, der, &SystemRandom::new())
        .map_err(|_| Error::from(ErrorKind::InvalidEcdsaKey))?;
    // The uncompressed point: 0x04 ‖ x ‖ y.
    let point = pair.public_key().as_ref();
    match point.split_first() {
        Some((4, xy)) if xy.len() == 2 * size => {
            let (x, y) = xy.split_at(size);
            Ok((curve, x.to_vec(), y.to_vec()))
        }
        _ => Err(ErrorKind::InvalidEcdsaKey.into()),
    }
}

fn ed_component_of_private_key(der: &[u8], curve: &EllipticCurve) -> Result<Vec<u8>> {
    match curve {
        EllipticCurve::Ed25519 => Ok(ed25519_pair(der)?.public_key().as_ref().to_vec()),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    }
}

fn compute_digest(data: &[u8], hash: ThumbprintHash) -> Result<Vec<u8>> {
    let algorithm = match hash {
        ThumbprintHash::SHA256 => &digest::SHA256,
        ThumbprintHash::SHA384 => &digest::SHA384,
        ThumbprintHash::SHA512 => &digest::SHA512,
        _ => return Err(ErrorKind::Provider("a digest ring does not compute".into()).into()),
    };
    Ok(digest::digest(algorithm, data).as_ref().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Signs with `algorithm` and checks with `public`, through the provider's factories: the
    /// signature verifies, and not over another message or with another algorithm.
    fn round_trip(algorithm: Algorithm, private: &EncodingKey, public: &DecodingKey) {
        let signed = signer(&algorithm, private)
            .unwrap()
            .try_sign(b"header.claims")
            .unwrap();
        let verifying = verifier(&algorithm, public).unwrap();
        assert!(
            verifying.verify(b"header.claims", &signed).is_ok(),
            "{algorithm:?}"
        );
        assert!(
            verifying.verify(b"header.claimz", &signed).is_err(),
            "{algorithm:?}"
        );
        assert_eq!(JwtVerifier::algorithm(&*verifying), algorithm);
    }

    fn b64(bytes: &[u8]) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    #[test]
    fn every_algorithm_signs_and_verifies() {
        let random = SystemRandom::new();
        for algorithm in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
            round_trip(
                algorithm,
                &EncodingKey::from_secret(b"a shared secret"),
                &DecodingKey::from_secret(b"a shared secret"),
            );
        }
        let p256 =
            sig::EcdsaKeyPair::generate_pkcs8(&sig::ECDSA_P256_SHA256_FIXED_SIGNING, &random)
                .unwrap();
        let p384 =
            sig::EcdsaKeyPair::generate_pkcs8(&sig::ECDSA_P384_SHA384_FIXED_SIGNING, &random)
                .unwrap();
        for (algorithm, pkcs8) in [(Algorithm::ES256, &p256), (Algorithm::ES384, &p384)] {
            let (_, x, y) = ec_components_of_private_key(pkcs8.as_ref(), algorithm).unwrap();
            round_trip(
                algorithm,
                &EncodingKey::from_ec_der(pkcs8.as_ref()),
                &DecodingKey::from_ec_components(&b64(&x), &b64(&y)).unwrap(),
            );
        }
        let ed = Ed25519KeyPair::generate_pkcs8(&random).unwrap();
        let x = ed_component_of_private_key(ed.as_ref(), &EllipticCurve::Ed25519).unwrap();
        round_trip(
            Algorithm::EdDSA,
            &EncodingKey::from_ed_der(ed.as_ref()),
            &DecodingKey::from_ed_components(&b64(&x)).unwrap(),
        );
        // ring makes no RSA keys: one made for this test (`openssl genpkey`), PKCS#8 in PEM.
        let pem = include_str!("test_rsa_2048.pem");
        let body: String = pem
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect();
        let rsa = {
            use base64::Engine;
            &base64::engine::general_purpose::STANDARD
                .decode(body)
                .unwrap()
        };
        let (n, e) = rsa_components_of_private_key(rsa).unwrap();
        for algorithm in [
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ] {
            round_trip(
                algorithm,
                &EncodingKey::from_rsa_der(rsa),
                &DecodingKey::from_rsa_raw_components(&n, &e),
            );
        }
    }

    #[test]
    fn a_key_of_another_family_is_refused() {
        let secret = DecodingKey::from_secret(b"secret");
        for algorithm in [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA] {
            assert!(verifier(&algorithm, &secret).is_err(), "{algorithm:?}");
        }
        let rsa = DecodingKey::from_rsa_raw_components(&[1; 256], &[1, 0, 1]);
        assert!(verifier(&Algorithm::HS256, &rsa).is_err());
    }

    #[test]
    fn thumbprints_are_digests() {
        assert_eq!(
            compute_digest(b"abc", ThumbprintHash::SHA256).unwrap()[..4],
            [0xba, 0x78, 0x16, 0xbf]
        );
    }
}
