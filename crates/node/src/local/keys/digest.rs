//! What stands in for a key's value in filters, the store index and the
//! audit log: digests under keys derived from the cluster secret, never the
//! clear value (except a public key in a filter, as the page tests it).

use std::collections::BTreeMap;
use std::fmt;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::types::{KeyType, KeyTypes, Visibility, SEP};

/// Derivation key used when a domain has no cluster secret. It is public
/// (it is in this source), so digests made with it hide nothing from someone
/// who can guess values.
const PUBLIC_DERIVATION_KEY: &[u8] = b"xarchive public derivation key v1 (not secret)";
const FILTER_KEY_LABEL: &[u8] = b"xarchive private key filter v1";
const AUDIT_KEY_LABEL: &[u8] = b"xarchive audit v1";

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA-256 of `message` under `key`.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC hashes or pads keys of any length; this cannot fail.
    let Ok(mut mac) = HmacSha256::new_from_slice(key) else {
        unreachable!("HMAC accepts keys of any length")
    };
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// The bytes every digest of a key is made from: `k␟{type}␟{value}`.
fn key_bytes(key_type: &str, normalised: &str) -> Vec<u8> {
    format!("k{SEP}{key_type}{SEP}{normalised}").into_bytes()
}

/// What goes into a filter or the store index for one key: never the clear
/// value.
#[derive(Clone)]
pub struct KeyHasher {
    filter_key: [u8; 32],
    audit_key: [u8; 32],
    has_secret: bool,
}

impl KeyHasher {
    /// `cluster_secret`: the cluster's shared secret, or None on a domain
    /// without one. Without a secret a fixed, publicly known derivation key
    /// (`"xarchive public derivation key v1 (not secret)"`) is used: private
    /// keys are then protected only by access control, since anyone holding
    /// the filter can test guessed values against it.
    pub fn new(cluster_secret: Option<&str>) -> Self {
        let secret = cluster_secret.map_or(PUBLIC_DERIVATION_KEY, str::as_bytes);
        KeyHasher {
            filter_key: hmac_sha256(secret, FILTER_KEY_LABEL),
            audit_key: hmac_sha256(secret, AUDIT_KEY_LABEL),
            has_secret: cluster_secret.is_some(),
        }
    }

    /// The element a filter holds for a key. For a public type, the bytes
    /// `"k\x1f{type}\x1f{value}"`, so the browser page can test public keys
    /// with the plain filter hashing. For a private type, HMAC-SHA-256 over
    /// the same bytes under
    /// `filter_key = HMAC-SHA-256(secret, "xarchive private key filter v1")`,
    /// 32 bytes.
    pub fn filter_element(&self, key_type: &KeyType, normalised: &str) -> Vec<u8> {
        let bytes = key_bytes(&key_type.name, normalised);
        match key_type.visibility {
            Visibility::Public => bytes,
            Visibility::Private => hmac_sha256(&self.filter_key, &bytes).to_vec(),
        }
    }

    /// Names the filter key without revealing it (the first 16 hex
    /// characters of HMAC-SHA-256 under it of a fixed label): two domains
    /// build key filters the other can read only if these are equal.
    pub fn filter_key_id(&self) -> String {
        hex::encode(&hmac_sha256(&self.filter_key, b"xarchive key filter id")[..8])
    }

    /// The store index's key for (type, value): SHA-256 over
    /// `"k\x1f{type}\x1f{value}"`, 32 bytes. Independent of the secret so
    /// that rotating the secret does not rewrite the store.
    pub fn index_digest(key_type: &str, normalised: &str) -> [u8; 32] {
        Sha256::digest(key_bytes(key_type, normalised)).into()
    }

    /// For the audit log: HMAC-SHA-256 over `"k\x1f{type}\x1f{value}"` under
    /// `audit_key = HMAC-SHA-256(secret, "xarchive audit v1")`, the first 32
    /// hex characters.
    pub fn audit_digest(&self, key_type: &str, normalised: &str) -> String {
        let mac = hmac_sha256(&self.audit_key, &key_bytes(key_type, normalised));
        hex::encode(&mac[..16])
    }
}

/// The declared key types and the hashing of their values: what the
/// domain's key filter is built with.
#[derive(Clone, Debug)]
pub struct Keying {
    pub types: KeyTypes,
    pub hasher: KeyHasher,
}

impl Keying {
    /// The filter elements of a record's keys (normalised); keys of a type
    /// not declared here are left out, as no search can name them.
    pub fn elements<'a>(
        &'a self,
        keys: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = Vec<u8>> + 'a {
        keys.iter()
            .filter_map(|(name, value)| self.element(name, value))
    }

    /// The filter element of one key, if its type is declared.
    pub fn element(&self, key_type: &str, value: &str) -> Option<Vec<u8>> {
        let key_type = self.types.get(key_type)?;
        Some(self.hasher.filter_element(key_type, value))
    }
}

/// By hand, so the derived keys are never printed.
impl fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyHasher")
            .field("has_secret", &self.has_secret)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::keys::test_support::{id_type, name_type};

    #[test]
    fn filter_element_of_a_private_key_depends_on_the_secret() {
        let a = KeyHasher::new(Some("secret a"));
        let a2 = KeyHasher::new(Some("secret a"));
        let b = KeyHasher::new(Some("secret b"));
        let none = KeyHasher::new(None);
        let v = "11010519491231002X";
        let ea = a.filter_element(&id_type(), v);
        assert_eq!(ea.len(), 32);
        assert_eq!(ea, a2.filter_element(&id_type(), v));
        assert_ne!(ea, b.filter_element(&id_type(), v));
        assert_ne!(ea, none.filter_element(&id_type(), v));
        assert_ne!(ea, a.filter_element(&id_type(), "440524198001010013"));
    }

    #[test]
    fn filter_element_of_a_public_key_is_the_documented_bytes() {
        let h = KeyHasher::new(Some("secret"));
        assert_eq!(
            h.filter_element(&name_type(), "张三|1990-03-07"),
            "k\x1fname_birth\x1f张三|1990-03-07".as_bytes()
        );
    }

    #[test]
    fn index_digest_is_sha256_of_the_key_bytes() {
        let d = KeyHasher::index_digest("id_card", "11010519491231002X");
        let expected: [u8; 32] = Sha256::digest(b"k\x1fid_card\x1f11010519491231002X").into();
        assert_eq!(d, expected);
        assert_ne!(d, KeyHasher::index_digest("id_card", "440524198001010013"));
    }

    #[test]
    fn audit_digest_is_32_hex_characters_under_the_secret() {
        let a = KeyHasher::new(Some("secret a"));
        let b = KeyHasher::new(Some("secret b"));
        let da = a.audit_digest("id_card", "11010519491231002X");
        assert_eq!(da.len(), 32);
        assert!(da.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(da, a.audit_digest("id_card", "11010519491231002X"));
        assert_ne!(da, b.audit_digest("id_card", "11010519491231002X"));
    }

    #[test]
    fn debug_of_a_key_hasher_shows_no_keys() {
        let h = KeyHasher::new(Some("secret"));
        let shown = format!("{h:?}");
        assert_eq!(shown, "KeyHasher { has_secret: true, .. }");
    }
}
