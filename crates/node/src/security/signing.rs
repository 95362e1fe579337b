//! The domain's signing key: Ed25519, kept in the data directory, its
//! public half published with the domain's registration (sealed with the
//! cluster secret, so a peer can trust it). A holding archive signs every
//! copy it releases; the receiving archive checks the signature before it
//! keeps the copy, and anyone can check it again later.

use std::path::{Path, PathBuf};

use base64::Engine;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};

use crate::local::private_file::write_private;
use crate::wire::{CopyBody, SignedCopy};

pub use crate::local::backup::SIGNING_KEY_FILE;

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("cannot read or write the signing key {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the signing key {0} is not 32 bytes: restore it from a backup, or remove it to make a new one (copies signed with the old one then no longer verify)")]
    Malformed(PathBuf),
    #[error("cannot encode the copy: {0}")]
    Encode(#[source] serde_json::Error),
}

/// Why a copy is not what its holding archive signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    #[error("the holding archive {0} publishes no signing key")]
    NoKey(String),
    #[error("the holding archive's published key is malformed")]
    BadKey,
    #[error("the copy's signature is malformed")]
    BadSignature,
    #[error("the copy's signature does not match its bytes")]
    Forged,
    #[error("the signed bytes are not a copy")]
    NotACopy,
    #[error("the copy is of {found}, not of what was asked ({wanted})")]
    Elsewhere { wanted: String, found: String },
}

pub struct Signer {
    key: SigningKey,
}

impl Signer {
    /// The key in `dir`, made (and written durably, readable by the owner
    /// alone) if there is none.
    pub fn open(dir: &Path) -> Result<Signer, SigningError> {
        let path = dir.join(SIGNING_KEY_FILE);
        let file = |source| SigningError::File {
            path: path.clone(),
            source,
        };
        match std::fs::read(&path) {
            Ok(bytes) => {
                let bytes: [u8; 32] = bytes
                    .try_into()
                    .map_err(|_| SigningError::Malformed(path.clone()))?;
                Ok(Signer {
                    key: SigningKey::from_bytes(&bytes),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let bytes: [u8; 32] = rand::random();
                write_private(&path, &bytes).map_err(file)?;
                Ok(Signer {
                    key: SigningKey::from_bytes(&bytes),
                })
            }
            Err(e) => Err(file(e)),
        }
    }

    /// The secret key's bytes, for a backup (a domain restored with its
    /// key vouches for the copies it released before).
    pub(crate) fn secret_bytes(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// The public key as published (hex).
    pub fn public_hex(&self) -> String {
        hex::encode(self.key.verifying_key().as_bytes())
    }

    pub fn sign(&self, copy: &CopyBody) -> Result<SignedCopy, SigningError> {
        let bytes = serde_json::to_vec(copy).map_err(SigningError::Encode)?;
        let signature = self.key.sign(&bytes);
        Ok(SignedCopy {
            payload: base64::engine::general_purpose::STANDARD.encode(&bytes),
            signature: hex::encode(signature.to_bytes()),
        })
    }
}

/// The copy `signed` holds, if `public_hex` (the holding archive's
/// published key) signed exactly its bytes.
pub fn verify(public_hex: &str, signed: &SignedCopy) -> Result<CopyBody, Unverified> {
    let key: [u8; 32] = hex::decode(public_hex)
        .ok()
        .and_then(|k| k.try_into().ok())
        .ok_or(Unverified::BadKey)?;
    let key = VerifyingKey::from_bytes(&key).map_err(|_| Unverified::BadKey)?;
    let signature: [u8; 64] = hex::decode(&signed.signature)
        .ok()
        .and_then(|s| s.try_into().ok())
        .ok_or(Unverified::BadSignature)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&signed.payload)
        .map_err(|_| Unverified::Forged)?;
    key.verify_strict(&bytes, &Signature::from_bytes(&signature))
        .map_err(|_| Unverified::Forged)?;
    serde_json::from_slice(&bytes).map_err(|_| Unverified::NotACopy)
}

/// Hex digits in a verification code: 80 bits, too many to guess one.
const CODE_DIGITS: usize = 20;

/// The verification code printed on a certificate for `signed`: the first
/// 80 bits of the SHA-256 of its signature, in groups of four hex digits.
/// Both archives derive it from the copy alone, so either can be asked;
/// and since the signature covers every byte of the copy, the copy kept
/// under a code that no longer verifies was changed after it was signed.
pub fn verification_code(signed: &SignedCopy) -> String {
    use sha2::Digest;
    let digest = hex::encode_upper(sha2::Sha256::digest(signed.signature.as_bytes()));
    group(&digest[..CODE_DIGITS])
}

/// `code` as [`verification_code`] writes it, whatever its case and
/// separators (a person types it from paper); `None` if it cannot be one.
pub fn normalise_code(code: &str) -> Option<String> {
    let digits: String = code
        .chars()
        .filter(|c| !matches!(c, '-' | ' '))
        .map(|c| c.to_ascii_uppercase())
        .collect();
    (digits.len() == CODE_DIGITS && digits.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| group(&digits))
}

fn group(digits: &str) -> String {
    digits
        .as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c))
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn copy() -> CopyBody {
        CopyBody {
            holding: "guiyang".into(),
            archive_number: "A-2001-17".into(),
            request_id: "r1".into(),
            date: "2026-11-26".into(),
            title: "婚姻登记".into(),
            metadata: serde_json::Map::new(),
            content: Some("aGVsbG8=".into()),
        }
    }

    #[test]
    fn a_copy_verifies_under_its_signers_key_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let signer = Signer::open(dir.path()).unwrap();
        let signed = signer.sign(&copy()).unwrap();
        assert_eq!(verify(&signer.public_hex(), &signed).unwrap(), copy());
        let stranger = Signer::open(other.path()).unwrap();
        assert_eq!(
            verify(&stranger.public_hex(), &signed),
            Err(Unverified::Forged)
        );
    }

    #[test]
    fn the_key_is_kept_across_restarts_and_readable_by_its_owner_alone() {
        let dir = tempfile::tempdir().unwrap();
        let first = Signer::open(dir.path()).unwrap().public_hex();
        assert_eq!(Signer::open(dir.path()).unwrap().public_hex(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(SIGNING_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0);
        }
        std::fs::write(dir.path().join(SIGNING_KEY_FILE), b"short").unwrap();
        assert!(matches!(
            Signer::open(dir.path()),
            Err(SigningError::Malformed(_))
        ));
    }

    #[test]
    fn a_code_is_read_back_whatever_its_case_and_separators_and_nothing_else_is_a_code() {
        let dir = tempfile::tempdir().unwrap();
        let signed = Signer::open(dir.path()).unwrap().sign(&copy()).unwrap();
        let code = verification_code(&signed);
        assert_eq!(code.len(), 24);
        assert_eq!(normalise_code(&code).as_deref(), Some(code.as_str()));
        let typed = code.replace('-', " ").to_lowercase();
        assert_eq!(normalise_code(&typed).as_deref(), Some(code.as_str()));
        assert_eq!(normalise_code(&code[..20]), None);
        assert_eq!(normalise_code("../../etc/passwd"), None);
        assert_eq!(normalise_code("ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ"), None);
    }

    proptest! {
        #[test]
        fn a_copy_with_any_byte_changed_fails_the_check(at in 0usize..4096, flip in 1u8..=255) {
            let dir = tempfile::tempdir().unwrap();
            let signer = Signer::open(dir.path()).unwrap();
            let mut signed = signer.sign(&copy()).unwrap();
            let mut bytes = base64::engine::general_purpose::STANDARD.decode(&signed.payload).unwrap();
            let at = at % bytes.len();
            bytes[at] ^= flip;
            signed.payload = base64::engine::general_purpose::STANDARD.encode(&bytes);
            prop_assert_eq!(verify(&signer.public_hex(), &signed), Err(Unverified::Forged));
        }
    }
}
