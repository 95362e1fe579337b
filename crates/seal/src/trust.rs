//! The trust list: every archive of a cluster, by its real name and
//! address, with the public keys it seals with and when each was valid, so
//! that a key can be rotated (or revoked) and what was sealed before still
//! verifies. The cluster signs it with its anchor key, derived from the
//! cluster secret (the cluster's one trust root, docs/SECURITY.md), so
//! that a saved copy is checked offline: an archive or a bank keeps the
//! anchor's fingerprint, published by the cluster's operators, and any
//! list signed under it.
//!
//! The file is JSON: the list's exact bytes in base64 beside the anchor's
//! public key and the signature over those bytes (no canonical JSON needed).

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::key::{Algorithm, KeyId, PublicKey, SecretKey};

pub const FORMAT: &str = "xarchive trust list/1";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    #[error("not a trust list: {0}")]
    Malformed(String),
    #[error("the trust list's signature does not match its contents: it was changed")]
    Forged,
    #[error(
        "the trust list is signed by the anchor {found}, not by the one expected ({expected})"
    )]
    OtherAnchor { found: String, expected: String },
    #[error("the key {0} in the trust list is not the public key it names")]
    KeyMismatch(KeyId),
}

/// Why a key may not be trusted for something sealed at a given time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyNotValid {
    #[error("it was revoked on {0}")]
    Revoked(String),
    #[error("it was valid only from {0}")]
    NotYet(String),
    #[error("it was valid only until {0} (rotated out, or its certificate expired)")]
    Expired(String),
}

/// One key an archive seals, or sealed, with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    pub id: KeyId,
    pub algorithm: Algorithm,
    /// Base64 of its DER SubjectPublicKeyInfo.
    pub public_key: String,
    /// From when it seals (RFC 3339).
    pub not_before: String,
    /// Until when (RFC 3339): set when it is rotated out, or by its X.509
    /// certificate's end. Seals dated before still verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<String>,
    /// When it was revoked (RFC 3339): nothing it sealed verifies any
    /// more, whenever dated (a stolen key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<String>,
    /// The archive's X.509 certificate for it from its CA, with the CA's
    /// chain, in PEM: what an outside verifier checks the key with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

/// Seconds since the Unix epoch of an RFC 3339 time.
pub fn parse_time(text: &str) -> Option<i64> {
    OffsetDateTime::parse(text, &Rfc3339)
        .ok()
        .map(OffsetDateTime::unix_timestamp)
}

/// An RFC 3339 time (UTC) from seconds since the Unix epoch.
pub fn format_time(secs: i64) -> String {
    OffsetDateTime::from_unix_timestamp(secs)
        .map(rfc3339)
        .unwrap_or_default()
}

impl KeyRecord {
    /// `key`, sealing from `not_before`.
    pub fn new(key: &PublicKey, not_before: OffsetDateTime) -> KeyRecord {
        KeyRecord {
            id: key.id(),
            algorithm: key.algorithm(),
            public_key: B64.encode(key.to_spki_der()),
            not_before: rfc3339(not_before),
            not_after: None,
            revoked: None,
            certificate: None,
        }
    }

    /// The key itself, checked to be the one its ID names.
    pub fn public(&self) -> Result<PublicKey, TrustError> {
        let der = B64
            .decode(&self.public_key)
            .map_err(|_| TrustError::KeyMismatch(self.id))?;
        let key = PublicKey::from_spki_der(&der).map_err(|_| TrustError::KeyMismatch(self.id))?;
        if key.id() != self.id || key.algorithm() != self.algorithm {
            return Err(TrustError::KeyMismatch(self.id));
        }
        Ok(key)
    }

    /// Whether something sealed at `at` (seconds since the Unix epoch) may
    /// be trusted under this key.
    pub fn valid_at(&self, at: i64) -> Result<(), KeyNotValid> {
        if let Some(revoked) = &self.revoked {
            return Err(KeyNotValid::Revoked(revoked.clone()));
        }
        if parse_time(&self.not_before).is_none_or(|from| at < from) {
            return Err(KeyNotValid::NotYet(self.not_before.clone()));
        }
        match &self.not_after {
            Some(until) if parse_time(until).is_none_or(|until| at >= until) => {
                Err(KeyNotValid::Expired(until.clone()))
            }
            _ => Ok(()),
        }
    }

    /// Whether it may seal now (neither revoked nor rotated out).
    pub fn is_active(&self) -> bool {
        self.revoked.is_none() && self.not_after.is_none()
    }
}

/// One archive of the cluster as people know it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveEntry {
    /// Its domain code (an identifier).
    pub domain: String,
    /// Its name, as printed (黔西南州档案馆).
    pub display_name: String,
    /// Its postal address.
    #[serde(default)]
    pub address: String,
    /// Where its page is: a certificate it issued is checked there.
    #[serde(default)]
    pub url: String,
    pub keys: Vec<KeyRecord>,
}

impl ArchiveEntry {
    /// The name a person reads: the display name, or the domain code when
    /// none is configured.
    pub fn name(&self) -> &str {
        if self.display_name.trim().is_empty() {
            &self.domain
        } else {
            &self.display_name
        }
    }
}

/// Every archive of a cluster and its keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustList {
    pub format: String,
    pub cluster: String,
    /// When this list was made (RFC 3339).
    pub issued_at: String,
    /// False when the cluster has no secret: its anchor is then derived
    /// from public facts, and anyone can make a list that checks.
    pub secured: bool,
    pub archives: Vec<ArchiveEntry>,
}

impl TrustList {
    pub fn new(cluster: &str, secured: bool, mut archives: Vec<ArchiveEntry>) -> TrustList {
        archives.sort_by(|a, b| a.domain.cmp(&b.domain));
        TrustList {
            format: FORMAT.into(),
            cluster: cluster.to_owned(),
            issued_at: rfc3339(OffsetDateTime::now_utc()),
            secured,
            archives,
        }
    }

    pub fn archive(&self, domain: &str) -> Option<&ArchiveEntry> {
        self.archives.iter().find(|a| a.domain == domain)
    }

    /// The archive holding key `id`, and the key.
    pub fn key(&self, id: KeyId) -> Option<(&ArchiveEntry, &KeyRecord)> {
        self.archives
            .iter()
            .find_map(|a| a.keys.iter().find(|k| k.id == id).map(|k| (a, k)))
    }
}

/// A trust list as it is published and saved: its bytes, the anchor that
/// signed them and the signature.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedTrustList {
    /// Base64 of the list's JSON.
    pub payload: String,
    /// Base64 of the anchor's DER SubjectPublicKeyInfo.
    pub anchor: String,
    /// Base64 of the anchor's signature over the payload's bytes.
    pub signature: String,
}

/// A key's fingerprint, as operators publish the anchor's: the SHA-256 of
/// its SubjectPublicKeyInfo, in groups of four hex digits.
pub fn fingerprint(key: &PublicKey) -> String {
    let hex = hex::encode_upper(Sha256::digest(key.to_spki_der()));
    hex.as_bytes()
        .chunks(4)
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `typed` as [`fingerprint`] writes it, whatever its case and spacing.
fn normalise_fingerprint(typed: &str) -> String {
    typed
        .chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

impl SignedTrustList {
    pub fn sign(list: &TrustList, anchor: &SecretKey) -> SignedTrustList {
        // A list of strings and numbers always encodes.
        let bytes = serde_json::to_vec(list).unwrap_or_default();
        SignedTrustList {
            signature: B64.encode(anchor.sign(&bytes)),
            anchor: B64.encode(anchor.public().to_spki_der()),
            payload: B64.encode(bytes),
        }
    }

    pub fn anchor(&self) -> Result<PublicKey, TrustError> {
        let der = B64
            .decode(&self.anchor)
            .map_err(|_| TrustError::Malformed("its anchor is not base64".into()))?;
        PublicKey::from_spki_der(&der)
            .map_err(|_| TrustError::Malformed("its anchor is not a public key".into()))
    }

    /// The list, if its anchor signed it (and, given `expected`, if the
    /// anchor is the one with that fingerprint); every key in it checked
    /// to be the one its ID names.
    pub fn open(&self, expected: Option<&str>) -> Result<TrustList, TrustError> {
        let anchor = self.anchor()?;
        if let Some(expected) = expected {
            let found = fingerprint(&anchor);
            if normalise_fingerprint(&found) != normalise_fingerprint(expected) {
                return Err(TrustError::OtherAnchor {
                    found,
                    expected: expected.to_owned(),
                });
            }
        }
        let bytes = B64
            .decode(&self.payload)
            .map_err(|_| TrustError::Malformed("its payload is not base64".into()))?;
        let signature = B64
            .decode(&self.signature)
            .map_err(|_| TrustError::Malformed("its signature is not base64".into()))?;
        anchor
            .verify(&bytes, &signature)
            .map_err(|_| TrustError::Forged)?;
        let list: TrustList =
            serde_json::from_slice(&bytes).map_err(|e| TrustError::Malformed(e.to_string()))?;
        if list.format != FORMAT {
            return Err(TrustError::Malformed(format!(
                "of form {:?}, not {FORMAT:?}",
                list.format
            )));
        }
        for archive in &list.archives {
            for key in &archive.keys {
                key.public()?;
            }
        }
        Ok(list)
    }
}

/// The anchor key of `cluster`: derived from the cluster's secret material
/// (a key only members hold), or, for a cluster without a secret, from
/// its name alone (then anyone can derive it: [`TrustList::secured`] says
/// so).
pub fn anchor_key(cluster: &str, secret: Option<&[u8]>) -> SecretKey {
    let mut counter = 0u32;
    loop {
        let mut hash = Sha256::new();
        hash.update(b"xarchive trust anchor v1\0");
        hash.update(cluster.as_bytes());
        hash.update([0]);
        hash.update(secret.unwrap_or(b""));
        hash.update(counter.to_be_bytes());
        let scalar = zeroize::Zeroizing::new(<[u8; 32]>::from(hash.finalize()));
        // Below the curve's order but for a chance of about 2^-32.
        if let Some(key) = SecretKey::sm2_from_scalar(&scalar[..]) {
            return key;
        }
        counter += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(key: &PublicKey) -> TrustList {
        TrustList::new(
            "c",
            true,
            vec![ArchiveEntry {
                domain: "B".into(),
                display_name: "黔西南州档案馆".into(),
                address: "贵州省兴义市".into(),
                url: "https://b.example/".into(),
                keys: vec![KeyRecord::new(key, OffsetDateTime::UNIX_EPOCH)],
            }],
        )
    }

    #[test]
    fn a_signed_list_opens_under_its_anchor_and_fails_once_changed() {
        let anchor = anchor_key("c", Some(b"secret"));
        let seal = SecretKey::generate(Algorithm::Sm2Sm3).public();
        let signed = SignedTrustList::sign(&list(&seal), &anchor);
        let opened = signed.open(None).unwrap();
        assert_eq!(
            opened.key(seal.id()).unwrap().0.display_name,
            "黔西南州档案馆"
        );
        let print = fingerprint(&anchor.public());
        assert!(signed
            .open(Some(&print.to_lowercase().replace(' ', "")))
            .is_ok());
        let other = fingerprint(&anchor_key("c", Some(b"other")).public());
        assert!(matches!(
            signed.open(Some(&other)),
            Err(TrustError::OtherAnchor { .. })
        ));

        // The payload changed: the signature fails.
        let mut json: serde_json::Value =
            serde_json::from_slice(&B64.decode(&signed.payload).unwrap()).unwrap();
        json["archives"][0]["display_name"] = "伪造档案馆".into();
        let mut changed = signed.clone();
        changed.payload = B64.encode(serde_json::to_vec(&json).unwrap());
        assert_eq!(changed.open(None), Err(TrustError::Forged));
        // Re-signed by someone else's anchor: caught by the fingerprint.
        let forger = anchor_key("c", Some(b"guess"));
        let resigned = SignedTrustList::sign(&list(&seal), &forger);
        assert!(resigned.open(None).is_ok());
        assert!(resigned.open(Some(&print)).is_err());
        assert!(matches!(
            SignedTrustList {
                payload: "%%".into(),
                ..signed
            }
            .open(None),
            Err(TrustError::Malformed(_))
        ));
    }

    #[test]
    fn a_key_is_valid_between_its_times_and_never_once_revoked() {
        let key = SecretKey::generate(Algorithm::Sm2Sm3).public();
        let mut record = KeyRecord::new(&key, OffsetDateTime::from_unix_timestamp(100).unwrap());
        assert!(matches!(record.valid_at(99), Err(KeyNotValid::NotYet(_))));
        assert_eq!(record.valid_at(100), Ok(()));
        assert_eq!(record.valid_at(i64::MAX / 2), Ok(()));
        record.not_after = Some(format_time(200));
        assert_eq!(record.valid_at(199), Ok(()));
        assert!(matches!(record.valid_at(200), Err(KeyNotValid::Expired(_))));
        record.revoked = Some(format_time(300));
        assert!(matches!(record.valid_at(150), Err(KeyNotValid::Revoked(_))));
    }

    #[test]
    fn the_anchor_is_the_same_for_the_same_secret_and_differs_otherwise() {
        let a = anchor_key("c", Some(b"s")).public();
        assert_eq!(a, anchor_key("c", Some(b"s")).public());
        assert_ne!(a, anchor_key("c", Some(b"t")).public());
        assert_ne!(a, anchor_key("d", Some(b"s")).public());
        assert_ne!(a, anchor_key("c", None).public());
    }
}
