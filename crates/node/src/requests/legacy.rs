//! Copies of format 1, kept from before seals: a holding archive's Ed25519
//! signature over the copy's JSON, each with a verification code of its
//! own that either archive checks. Read only, so that requests answered
//! and certified before still show and check; nothing new is made in it.

use ed25519_dalek::{Signature, VerifyingKey};
use sha2::Digest;

use super::unbase64;
use crate::wire::{CopyBody, SignedCopy};

/// Hex digits of a format-1 verification code.
const CODE_DIGITS: usize = 20;

/// Whether `copy` is of format 1.
pub(super) fn is_legacy(copy: &SignedCopy) -> bool {
    copy.sealed.is_empty() && !copy.payload.is_empty()
}

/// The copy `signed` holds, if the Ed25519 key `public_hex` signed
/// exactly its bytes; else why not, in plain words.
pub(super) fn verify(public_hex: &str, signed: &SignedCopy) -> Result<CopyBody, String> {
    let key: [u8; 32] = hex::decode(public_hex)
        .ok()
        .and_then(|k| k.try_into().ok())
        .ok_or("the holding archive's key is not known here")?;
    let key =
        VerifyingKey::from_bytes(&key).map_err(|_| "the holding archive's key is malformed")?;
    let signature: [u8; 64] = hex::decode(&signed.signature)
        .ok()
        .and_then(|s| s.try_into().ok())
        .ok_or("its signature is malformed")?;
    let bytes = unbase64(&signed.payload).ok_or("it was changed after it was signed")?;
    key.verify_strict(&bytes, &Signature::from_bytes(&signature))
        .map_err(|_| "it was changed after it was signed")?;
    Ok(serde_json::from_slice(&bytes).map_err(|_| "the signed bytes are not a copy")?)
}

/// A format-1 copy's verification code: the first 80 bits of the SHA-256
/// of its signature, in groups of four hex digits.
pub(super) fn code(signed: &SignedCopy) -> String {
    let digest = hex::encode_upper(sha2::Sha256::digest(signed.signature.as_bytes()));
    group(&digest[..CODE_DIGITS])
}

/// The codes of the format-1 copies among `copies`.
pub(super) fn codes(copies: &[SignedCopy]) -> Vec<String> {
    copies.iter().filter(|c| is_legacy(c)).map(code).collect()
}

/// `typed` as a format-1 code, if it can be one.
pub(super) fn normalise_code(typed: &str) -> Option<String> {
    let digits: String = typed
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
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use base64::Engine;
    use ed25519_dalek::Signer as _;

    /// A copy as a domain of before signed it.
    pub(crate) fn signed(key: &ed25519_dalek::SigningKey) -> SignedCopy {
        let body = CopyBody {
            holding: "B".into(),
            archive_number: "M-1".into(),
            request_id: "00ff".into(),
            date: "2026-11-26".into(),
            title: "婚姻登记".into(),
            metadata: serde_json::Map::new(),
            content: None,
        };
        let bytes = serde_json::to_vec(&body).unwrap();
        SignedCopy {
            payload: base64::engine::general_purpose::STANDARD.encode(&bytes),
            signature: hex::encode(key.sign(&bytes).to_bytes()),
            ..SignedCopy::default()
        }
    }

    #[test]
    fn a_copy_of_format_1_still_checks_under_its_key_and_its_code_reads_back() {
        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let copy = signed(&key);
        let public = hex::encode(key.verifying_key().as_bytes());
        assert!(is_legacy(&copy));
        assert_eq!(verify(&public, &copy).unwrap().title, "婚姻登记");
        let mut changed = copy.clone();
        changed.payload = changed.payload.replace('A', "B");
        assert!(verify(&public, &changed).is_err());
        let other = hex::encode(
            ed25519_dalek::SigningKey::from_bytes(&[8; 32])
                .verifying_key()
                .as_bytes(),
        );
        assert!(verify(&other, &copy).is_err());
        let code = code(&copy);
        assert_eq!(normalise_code(&code.to_lowercase()), Some(code.clone()));
        assert_eq!(codes(&[copy]), vec![code]);
        assert_eq!(normalise_code("A.7F3C-8E21-0A9D-44C1-D2E5"), None);
    }
}
