//! The keys an archive seals with: SM2 with SM3 (GM/T 0003 and GM/T 0004,
//! what Chinese electronic seals are built on, GB/T 38540-2020), the
//! default for a new key, and Ed25519, kept so that what was sealed with it
//! before still verifies. A public key travels as its DER
//! SubjectPublicKeyInfo (what OpenSSL and an X.509 certificate carry), and
//! is named by a [`KeyId`] taken from those bytes.

use std::fmt;

use ed25519_dalek::pkcs8::{DecodePrivateKey as _, EncodePrivateKey as _};
use ed25519_dalek::Signer as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sm2::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _, EncodePrivateKey as _};
use sm2::pkcs8::{EncodePublicKey as _, LineEnding};
use zeroize::Zeroizing;

/// The signer's distinguishing identifier in every SM2 signature: the
/// default of GM/T 0009-2012. OpenSSL 3 uses an empty one unless told
/// (`-sigopt distid:1234567812345678`, docs/SECURITY.md).
pub const SM2_DIST_ID: &str = "1234567812345678";

/// The DER of an Ed25519 SubjectPublicKeyInfo before its 32 key bytes
/// (RFC 8410: algorithm 1.3.101.112, no parameters).
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// A signature algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Algorithm {
    /// SM2 with SM3, the signer identified by [`SM2_DIST_ID`].
    #[serde(rename = "sm2-sm3")]
    Sm2Sm3,
    #[serde(rename = "ed25519")]
    Ed25519,
}

impl Algorithm {
    /// Its identifier in a COSE header: EdDSA's registered one, and for
    /// SM2 with SM3, which COSE has not registered, one from the range
    /// RFC 9052 leaves for private use (docs/FORMAT.md).
    pub fn cose(self) -> i64 {
        match self {
            Algorithm::Sm2Sm3 => -65_600,
            Algorithm::Ed25519 => -8,
        }
    }

    pub fn from_cose(id: i64) -> Option<Algorithm> {
        [Algorithm::Sm2Sm3, Algorithm::Ed25519]
            .into_iter()
            .find(|a| a.cose() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Sm2Sm3 => "sm2-sm3",
            Algorithm::Ed25519 => "ed25519",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Algorithm {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, KeyError> {
        match s {
            "sm2-sm3" | "sm2" => Ok(Algorithm::Sm2Sm3),
            "ed25519" => Ok(Algorithm::Ed25519),
            other => Err(KeyError::Algorithm(other.to_owned())),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("unknown signature algorithm {0:?} (sm2-sm3 or ed25519)")]
    Algorithm(String),
    #[error("not a public key of SM2 or Ed25519 (a DER SubjectPublicKeyInfo)")]
    PublicKey,
    #[error("not a private key of SM2 or Ed25519 in PKCS#8 PEM (\"-----BEGIN PRIVATE KEY-----\")")]
    PrivateKey,
    #[error("a key ID is 16 hex digits")]
    KeyId,
}

/// A key's name: the first 8 bytes of the SHA-256 of its
/// SubjectPublicKeyInfo, so that anyone holding the key derives it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId(pub [u8; 8]);

impl KeyId {
    pub fn of_spki(spki_der: &[u8]) -> KeyId {
        let digest = Sha256::digest(spki_der);
        let mut id = [0; 8];
        id.copy_from_slice(&digest[..8]);
        KeyId(id)
    }

    pub fn from_slice(bytes: &[u8]) -> Option<KeyId> {
        bytes.try_into().ok().map(KeyId)
    }

    pub fn parse(hex: &str) -> Result<KeyId, KeyError> {
        hex::decode(hex)
            .ok()
            .and_then(|b| KeyId::from_slice(&b))
            .ok_or(KeyError::KeyId)
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

impl Serialize for KeyId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for KeyId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        KeyId::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Why a signature does not check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the signature does not match the signed bytes under this key")]
pub struct BadSignature;

/// A public key that checks seals.
#[derive(Clone)]
pub enum PublicKey {
    Sm2(sm2::dsa::VerifyingKey),
    Ed25519(ed25519_dalek::VerifyingKey),
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({} {})", self.algorithm(), self.id())
    }
}

/// Two keys are one when their SubjectPublicKeyInfo is.
impl PartialEq for PublicKey {
    fn eq(&self, other: &PublicKey) -> bool {
        self.to_spki_der() == other.to_spki_der()
    }
}

impl Eq for PublicKey {}

impl PublicKey {
    /// From a DER SubjectPublicKeyInfo: an SM2 key (id-ecPublicKey on the
    /// SM2 curve, as OpenSSL writes one) or an Ed25519 key.
    pub fn from_spki_der(der: &[u8]) -> Result<PublicKey, KeyError> {
        if let Some(raw) = der.strip_prefix(&ED25519_SPKI_PREFIX[..]) {
            let raw: [u8; 32] = raw.try_into().map_err(|_| KeyError::PublicKey)?;
            return ed25519_dalek::VerifyingKey::from_bytes(&raw)
                .map(PublicKey::Ed25519)
                .map_err(|_| KeyError::PublicKey);
        }
        let key = sm2::PublicKey::from_public_key_der(der).map_err(|_| KeyError::PublicKey)?;
        sm2::dsa::VerifyingKey::new(SM2_DIST_ID, key)
            .map(PublicKey::Sm2)
            .map_err(|_| KeyError::PublicKey)
    }

    pub fn to_spki_der(&self) -> Vec<u8> {
        match self {
            PublicKey::Ed25519(key) => {
                let mut der = ED25519_SPKI_PREFIX.to_vec();
                der.extend_from_slice(key.as_bytes());
                der
            }
            // Encoding a point already on the curve cannot fail.
            PublicKey::Sm2(key) => sm2::PublicKey::from(key)
                .to_public_key_der()
                .map(|d| d.as_bytes().to_vec())
                .unwrap_or_default(),
        }
    }

    /// As `openssl pkey -pubin` reads it.
    pub fn to_pem(&self) -> String {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(self.to_spki_der());
        let mut pem = String::from("-----BEGIN PUBLIC KEY-----\n");
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END PUBLIC KEY-----\n");
        pem
    }

    pub fn algorithm(&self) -> Algorithm {
        match self {
            PublicKey::Sm2(_) => Algorithm::Sm2Sm3,
            PublicKey::Ed25519(_) => Algorithm::Ed25519,
        }
    }

    pub fn id(&self) -> KeyId {
        KeyId::of_spki(&self.to_spki_der())
    }

    /// Whether `signature` (SM2: r‖s, 64 bytes; Ed25519: 64 bytes) is
    /// this key's over exactly `message`.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), BadSignature> {
        match self {
            PublicKey::Sm2(key) => {
                use sm2::dsa::signature::Verifier as _;
                let signature =
                    sm2::dsa::Signature::from_slice(signature).map_err(|_| BadSignature)?;
                key.verify(message, &signature).map_err(|_| BadSignature)
            }
            PublicKey::Ed25519(key) => {
                let signature: [u8; 64] = signature.try_into().map_err(|_| BadSignature)?;
                key.verify_strict(message, &ed25519_dalek::Signature::from_bytes(&signature))
                    .map_err(|_| BadSignature)
            }
        }
    }
}

/// A private key that seals.
#[derive(Clone)]
pub enum SecretKey {
    Sm2(sm2::dsa::SigningKey),
    Ed25519(ed25519_dalek::SigningKey),
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey({} {})", self.algorithm(), self.public().id())
    }
}

impl SecretKey {
    /// A new key of `algorithm`, from the operating system's randomness.
    pub fn generate(algorithm: Algorithm) -> SecretKey {
        match algorithm {
            Algorithm::Ed25519 => {
                let seed = Zeroizing::new(rand::random::<[u8; 32]>());
                SecretKey::Ed25519(ed25519_dalek::SigningKey::from_bytes(&seed))
            }
            // A random scalar is below the order but for a chance of about
            // 2^-32 per draw: drawn again then.
            Algorithm::Sm2Sm3 => loop {
                let bytes = Zeroizing::new(rand::random::<[u8; 32]>());
                if let Some(key) = SecretKey::sm2_from_scalar(&bytes[..]) {
                    return key;
                }
            },
        }
    }

    /// The SM2 key whose scalar is `bytes` (big-endian), if it is one.
    pub fn sm2_from_scalar(bytes: &[u8]) -> Option<SecretKey> {
        sm2::dsa::SigningKey::from_slice(SM2_DIST_ID, bytes)
            .ok()
            .map(SecretKey::Sm2)
    }

    /// An Ed25519 key from its 32 secret bytes (the seal key of a domain
    /// made before SM2, kept as `signing.key`).
    pub fn ed25519_from_seed(seed: &[u8; 32]) -> SecretKey {
        SecretKey::Ed25519(ed25519_dalek::SigningKey::from_bytes(seed))
    }

    /// From PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as OpenSSL writes
    /// an SM2 or Ed25519 key (`openssl genpkey -algorithm SM2`).
    pub fn from_pkcs8_pem(pem: &str) -> Result<SecretKey, KeyError> {
        if let Ok(key) = sm2::SecretKey::from_pkcs8_pem(pem) {
            return sm2::dsa::SigningKey::new(SM2_DIST_ID, &key)
                .map(SecretKey::Sm2)
                .map_err(|_| KeyError::PrivateKey);
        }
        ed25519_dalek::SigningKey::from_pkcs8_pem(pem)
            .map(SecretKey::Ed25519)
            .map_err(|_| KeyError::PrivateKey)
    }

    /// As PKCS#8 PEM, for the key's file (and for OpenSSL).
    pub fn to_pkcs8_pem(&self) -> Zeroizing<String> {
        // Encoding a valid key cannot fail.
        let pem = match self {
            SecretKey::Sm2(key) => sm2::SecretKey::from(key.as_nonzero_scalar())
                .to_pkcs8_pem(LineEnding::LF)
                .map(|p| p.to_string())
                .unwrap_or_default(),
            SecretKey::Ed25519(key) => key
                .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
                .map(|p| p.to_string())
                .unwrap_or_default(),
        };
        Zeroizing::new(pem)
    }

    pub fn algorithm(&self) -> Algorithm {
        match self {
            SecretKey::Sm2(_) => Algorithm::Sm2Sm3,
            SecretKey::Ed25519(_) => Algorithm::Ed25519,
        }
    }

    pub fn public(&self) -> PublicKey {
        match self {
            SecretKey::Sm2(key) => PublicKey::Sm2(key.verifying_key().clone()),
            SecretKey::Ed25519(key) => PublicKey::Ed25519(key.verifying_key()),
        }
    }

    /// The signature over `message` (64 bytes: SM2's r‖s, or Ed25519's).
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        match self {
            SecretKey::Sm2(key) => {
                use sm2::dsa::signature::Signer as _;
                let signature: sm2::dsa::Signature = key.sign(message);
                signature.to_bytes().to_vec()
            }
            SecretKey::Ed25519(key) => key.sign(message).to_bytes().to_vec(),
        }
    }
}

/// An SM2 signature (r‖s) in the DER form OpenSSL reads
/// (`openssl pkeyutl -verify -sigfile`); other signatures as they are.
pub fn signature_der(algorithm: Algorithm, signature: &[u8]) -> Option<Vec<u8>> {
    match algorithm {
        Algorithm::Sm2Sm3 => sm2::dsa::Signature::from_slice(signature)
            .ok()
            .map(|s| s.to_der().to_vec()),
        Algorithm::Ed25519 => Some(signature.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_key_of_either_algorithm_verifies_its_own_signatures_and_no_other_s() {
        for algorithm in [Algorithm::Sm2Sm3, Algorithm::Ed25519] {
            let key = SecretKey::generate(algorithm);
            let other = SecretKey::generate(algorithm);
            let signature = key.sign(b"sealed");
            assert_eq!(signature.len(), 64);
            assert_eq!(key.public().verify(b"sealed", &signature), Ok(()));
            assert_eq!(
                key.public().verify(b"sealeD", &signature),
                Err(BadSignature)
            );
            assert_eq!(
                other.public().verify(b"sealed", &signature),
                Err(BadSignature)
            );
            assert_eq!(
                key.public().verify(b"sealed", &signature[..63]),
                Err(BadSignature)
            );
        }
    }

    #[test]
    fn keys_travel_as_spki_and_pkcs8_and_keep_their_ids() {
        for algorithm in [Algorithm::Sm2Sm3, Algorithm::Ed25519] {
            let key = SecretKey::generate(algorithm);
            let public = key.public();
            let der = public.to_spki_der();
            let read = PublicKey::from_spki_der(&der).unwrap();
            assert_eq!(read, public);
            assert_eq!(read.id(), public.id());
            assert_eq!(read.algorithm(), algorithm);
            let pem = key.to_pkcs8_pem();
            let back = SecretKey::from_pkcs8_pem(&pem).unwrap();
            assert_eq!(back.public(), public);
            assert_eq!(KeyId::parse(&public.id().to_string()), Ok(public.id()));
        }
        assert_eq!(
            PublicKey::from_spki_der(b"nonsense"),
            Err(KeyError::PublicKey)
        );
        assert_eq!(
            SecretKey::from_pkcs8_pem("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n")
                .err(),
            Some(KeyError::PrivateKey)
        );
    }

    #[test]
    fn algorithms_are_named_and_numbered_both_ways() {
        for algorithm in [Algorithm::Sm2Sm3, Algorithm::Ed25519] {
            assert_eq!(Algorithm::from_cose(algorithm.cose()), Some(algorithm));
            assert_eq!(algorithm.name().parse::<Algorithm>(), Ok(algorithm));
        }
        assert!("rsa".parse::<Algorithm>().is_err());
    }

    proptest! {
        #[test]
        fn an_sm2_signature_over_any_message_fails_once_any_byte_of_it_changes(
            message in proptest::collection::vec(any::<u8>(), 0..256),
            at in 0usize..64,
            flip in 1u8..=255,
        ) {
            let key = SecretKey::generate(Algorithm::Sm2Sm3);
            let mut signature = key.sign(&message);
            prop_assert_eq!(key.public().verify(&message, &signature), Ok(()));
            signature[at] ^= flip;
            prop_assert_eq!(key.public().verify(&message, &signature), Err(BadSignature));
        }
    }
}
