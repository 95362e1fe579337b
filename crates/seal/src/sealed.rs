//! A sealed statement: a `COSE_Sign1` (RFC 9052) over CBOR bytes, its key
//! named in the protected header. The same envelope seals a holding
//! archive's copy, its answer and a receiving archive's certificate, so one
//! check serves them all; each statement begins with its kind, so that one
//! kind can never be taken for another.

use coset::{CborSerializable, CoseSign1, CoseSign1Builder, HeaderBuilder};

use crate::key::{Algorithm, KeyId, PublicKey, SecretKey};

/// Why sealed bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("not a sealed statement (a COSE_Sign1 with an algorithm and a key ID): {0}")]
    Malformed(String),
    #[error("sealed with {found}, but the key {key} is {expected}")]
    Algorithm {
        key: KeyId,
        found: String,
        expected: Algorithm,
    },
    #[error("the seal does not match the sealed bytes under the key {0}")]
    Forged(KeyId),
}

/// Seals `payload` with `key`: the `COSE_Sign1`'s bytes.
pub fn seal(key: &SecretKey, payload: Vec<u8>) -> Vec<u8> {
    let public = key.public();
    let algorithm = match public.algorithm() {
        Algorithm::Ed25519 => {
            coset::RegisteredLabelWithPrivate::Assigned(coset::iana::Algorithm::EdDSA)
        }
        Algorithm::Sm2Sm3 => {
            coset::RegisteredLabelWithPrivate::PrivateUse(Algorithm::Sm2Sm3.cose())
        }
    };
    let protected = HeaderBuilder::new()
        .algorithm_label(algorithm)
        .key_id(public.id().0.to_vec());
    let sign1 = CoseSign1Builder::new()
        .protected(protected.build())
        .payload(payload)
        .create_signature(b"", |tbs| key.sign(tbs))
        .build();
    // A COSE_Sign1 of owned parts always encodes.
    sign1.to_vec().unwrap_or_default()
}

/// Sealed bytes taken apart, not yet checked.
#[derive(Clone, Debug)]
pub struct Opened {
    pub key: KeyId,
    algorithm: i64,
    pub payload: Vec<u8>,
    sign1: CoseSign1,
}

impl Opened {
    pub fn parse(bytes: &[u8]) -> Result<Opened, SealError> {
        let sign1 =
            CoseSign1::from_slice(bytes).map_err(|e| SealError::Malformed(e.to_string()))?;
        let header = &sign1.protected.header;
        let algorithm = match &header.alg {
            Some(coset::RegisteredLabelWithPrivate::PrivateUse(id)) => *id,
            Some(coset::RegisteredLabelWithPrivate::Assigned(a)) => coset::iana::EnumI64::to_i64(a),
            _ => return Err(SealError::Malformed("no algorithm".into())),
        };
        let key = KeyId::from_slice(&header.key_id)
            .ok_or_else(|| SealError::Malformed("no key ID of 8 bytes".into()))?;
        let payload = sign1
            .payload
            .clone()
            .ok_or_else(|| SealError::Malformed("no payload".into()))?;
        Ok(Opened {
            key,
            algorithm,
            payload,
            sign1,
        })
    }

    /// The algorithm the header names, if it is one known here.
    pub fn algorithm(&self) -> Option<Algorithm> {
        Algorithm::from_cose(self.algorithm)
    }

    /// Checks the seal with `key` (the one its header names).
    pub fn verify(&self, key: &PublicKey) -> Result<(), SealError> {
        if self.algorithm() != Some(key.algorithm()) {
            return Err(SealError::Algorithm {
                key: self.key,
                found: self.algorithm().map_or_else(
                    || format!("algorithm {}", self.algorithm),
                    |a| a.to_string(),
                ),
                expected: key.algorithm(),
            });
        }
        self.sign1
            .verify_signature(b"", |signature, tbs| key.verify(tbs, signature))
            .map_err(|_| SealError::Forged(self.key))
    }

    /// The signature's bytes (SM2: r‖s; for OpenSSL, `key::signature_der`).
    pub fn signature(&self) -> &[u8] {
        &self.sign1.signature
    }

    /// The bytes the signature is over (COSE's `Sig_structure`), for a
    /// verifier of its own (`openssl pkeyutl -verify -rawin`).
    pub fn signed_bytes(&self) -> Vec<u8> {
        self.sign1.tbs_data(b"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_opens_and_verifies_under_its_key_and_fails_once_changed() {
        for algorithm in [Algorithm::Sm2Sm3, Algorithm::Ed25519] {
            let key = SecretKey::generate(algorithm);
            let bytes = seal(&key, b"statement".to_vec());
            let opened = Opened::parse(&bytes).unwrap();
            assert_eq!(opened.key, key.public().id());
            assert_eq!(opened.algorithm(), Some(algorithm));
            assert_eq!(opened.payload, b"statement");
            opened.verify(&key.public()).unwrap();
            let other = SecretKey::generate(algorithm).public();
            assert!(matches!(opened.verify(&other), Err(SealError::Forged(_))));
            // Any byte changed: unreadable, or no longer verifying.
            for at in 0..bytes.len() {
                let mut changed = bytes.clone();
                changed[at] ^= 0x01;
                if let Ok(opened) = Opened::parse(&changed) {
                    if opened.payload == b"statement" && opened.key == key.public().id() {
                        assert!(opened.verify(&key.public()).is_err(), "byte {at} changed");
                    }
                }
            }
        }
        let sm2 = SecretKey::generate(Algorithm::Sm2Sm3);
        let ed = SecretKey::generate(Algorithm::Ed25519);
        let opened = Opened::parse(&seal(&sm2, b"x".to_vec())).unwrap();
        assert!(matches!(
            opened.verify(&ed.public()),
            Err(SealError::Algorithm { .. })
        ));
        assert!(matches!(
            Opened::parse(b"\x84"),
            Err(SealError::Malformed(_))
        ));
    }
}
