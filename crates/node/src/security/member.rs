//! How the cluster's members prove who they are, to each other and in
//! ZooKeeper, with keys derived from the cluster secret:
//!
//! - a **credential** each domain presents to its peers, naming it and
//!   valid for one ten-minute window (and the windows beside it, for
//!   clocks that differ): a token caught on the wire or by a fake peer
//!   names its domain and expires within half an hour, where the shared
//!   member token of before named nobody and never expired;
//! - a **seal** on what each domain writes about itself in ZooKeeper (its
//!   registration, its record under `known/`): a registration written by
//!   anyone without the secret, in a folder someone left open, is ignored;
//!   its lines in the positions ledger carry a shorter one (a
//!   truncated MAC, since every reader of a group reads every line).
//!
//! Anyone holding the secret can still speak for any member: the secret
//! is the cluster's trust root (docs/SECURITY.md says so).

use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// The label of the material a cluster's backups are authenticated with
/// (`local/backup.rs`, [`MemberKey::material`]).
pub const BACKUP_MAC: &str = "backup mac";

/// Seconds in one credential window.
pub const WINDOW_SECS: u64 = 600;

/// Bytes of the MAC kept in a line's seal: 96 bits, past guessing.
const LINE_SEAL_BYTES: usize = 12;

/// Credentials start with this, to tell them from client tokens.
const PREFIX: &str = "xam.";

/// The member key of one cluster.
#[derive(Clone)]
pub struct MemberKey {
    key: [u8; 32],
}

impl std::fmt::Debug for MemberKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemberKey(…)")
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl MemberKey {
    /// The key of `cluster`'s members, from its `secret`.
    pub fn derive(cluster: &str, secret: &str) -> MemberKey {
        let key = Sha256::digest(format!("xarchive member key\0{cluster}\0{secret}").as_bytes());
        MemberKey { key: key.into() }
    }

    fn mac(&self, parts: &[&[u8]]) -> HmacSha256 {
        // HMAC takes a key of any length: this cannot fail.
        let mut mac = HmacSha256::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!());
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    /// 32 bytes only the cluster's members can make, for `label`'s use:
    /// the trust list's anchor key is derived from them.
    pub fn material(&self, label: &str) -> [u8; 32] {
        self.mac(&[b"material", label.as_bytes()])
            .finalize()
            .into_bytes()
            .into()
    }

    /// The credential `name` presents now.
    pub fn credential(&self, name: &str) -> String {
        self.credential_at(name, now_secs())
    }

    fn credential_at(&self, name: &str, secs: u64) -> String {
        let window = secs / WINDOW_SECS;
        let tag = self.mac(&[b"credential", name.as_bytes(), &window.to_be_bytes()]);
        format!(
            "{PREFIX}{name}.{window}.{}",
            hex::encode(tag.finalize().into_bytes())
        )
    }

    /// The member a credential names, if it is one of this cluster's and
    /// of the current window or one beside it.
    pub fn check_credential(&self, token: &str) -> Option<String> {
        self.check_credential_at(token, now_secs())
    }

    fn check_credential_at(&self, token: &str, secs: u64) -> Option<String> {
        let rest = token.strip_prefix(PREFIX)?;
        let (rest, tag) = rest.rsplit_once('.')?;
        let (name, window) = rest.rsplit_once('.')?;
        let window: u64 = window.parse().ok()?;
        let now = secs / WINDOW_SECS;
        if window + 1 < now || window > now + 1 {
            return None;
        }
        let tag = hex::decode(tag).ok()?;
        self.mac(&[b"credential", name.as_bytes(), &window.to_be_bytes()])
            .verify_slice(&tag)
            .ok()?;
        Some(name.to_owned())
    }

    /// The seal of what `name` writes about itself (`bytes`).
    pub fn seal(&self, name: &str, bytes: &[u8]) -> String {
        hex::encode(
            self.mac(&[b"seal", name.as_bytes(), bytes])
                .finalize()
                .into_bytes(),
        )
    }

    /// Whether `proof` is `name`'s seal of `bytes`.
    pub fn check_seal(&self, name: &str, bytes: &[u8], proof: &str) -> bool {
        hex::decode(proof).is_ok_and(|tag| {
            self.mac(&[b"seal", name.as_bytes(), bytes])
                .verify_slice(&tag)
                .is_ok()
        })
    }

    /// The seal of a line `name` writes in the positions ledger (`bytes`),
    /// in URL-safe base64 (16 characters).
    pub fn seal_line(&self, name: &str, bytes: &[u8]) -> String {
        use base64::Engine;
        let tag = self
            .mac(&[b"line", name.as_bytes(), bytes])
            .finalize()
            .into_bytes();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&tag[..LINE_SEAL_BYTES])
    }

    /// Whether `seal` is `name`'s seal of the line `bytes`.
    pub fn check_line_seal(&self, name: &str, bytes: &[u8], seal: &str) -> bool {
        use base64::Engine;
        let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(seal);
        tag.is_ok_and(|tag| {
            tag.len() == LINE_SEAL_BYTES
                && self
                    .mac(&[b"line", name.as_bytes(), bytes])
                    .verify_truncated_left(&tag)
                    .is_ok()
        })
    }
}

/// Whether `token` has the form of a member credential (not a client
/// token): the auth layer asks the key only about those.
pub fn is_credential(token: &str) -> bool {
    token.starts_with(PREFIX)
}

/// What a domain's registration read from the coordinator must show to
/// be taken in as a member: the cluster's seal (with a cluster secret),
/// and an `https://` address when the cluster uses TLS, so that no member
/// credential or identity number is ever sent to a peer in clear.
#[derive(Clone, Debug, Default)]
pub struct Admission {
    pub key: Option<MemberKey>,
    pub https_only: bool,
}

impl Admission {
    /// The seal of what `name` writes about itself, if the cluster seals.
    pub fn seal(&self, name: &str, bytes: &[u8]) -> Option<String> {
        self.key.as_ref().map(|key| key.seal(name, bytes))
    }

    /// The seal of a line `name` writes in the positions ledger, if the
    /// cluster seals.
    pub fn seal_line(&self, name: &str, bytes: &[u8]) -> Option<String> {
        self.key.as_ref().map(|key| key.seal_line(name, bytes))
    }

    /// Whether `seal` is `name`'s seal of the line `bytes` (anything holds
    /// in a cluster without a secret).
    pub fn line_seal_holds(&self, name: &str, bytes: &[u8], seal: &str) -> bool {
        self.key
            .as_ref()
            .is_none_or(|key| key.check_line_seal(name, bytes, seal))
    }

    /// Whether `proof` is `name`'s seal of `bytes` (anything holds in a
    /// cluster without a secret).
    pub fn seal_holds(&self, name: &str, bytes: &[u8], proof: &str) -> bool {
        self.key
            .as_ref()
            .is_none_or(|key| key.check_seal(name, bytes, proof))
    }

    /// Why `name`'s registration (`bytes`, as its writer sealed them, at
    /// `address`, with `proof`) is not taken in, if it is not.
    pub fn refuse(
        &self,
        name: &str,
        address: &str,
        bytes: &[u8],
        proof: &str,
    ) -> Option<&'static str> {
        if self
            .key
            .as_ref()
            .is_some_and(|key| !key.check_seal(name, bytes, proof))
        {
            return Some("it is not sealed with the cluster secret");
        }
        if self.https_only && !address.starts_with("https://") {
            return Some("its address is not https:// in a cluster that uses TLS");
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> MemberKey {
        MemberKey::derive("archives", "a secret of sixteen or more")
    }

    #[test]
    fn a_line_seal_holds_for_its_writer_and_line_only() {
        let k = key();
        let seal = k.seal_line("A", b"7.2a.0");
        assert_eq!(seal.len(), 16);
        assert!(k.check_line_seal("A", b"7.2a.0", &seal));
        assert!(!k.check_line_seal("B", b"7.2a.0", &seal), "another writer");
        assert!(!k.check_line_seal("A", b"7.2b.0", &seal), "another line");
        assert!(!k.check_line_seal("A", b"7.2a.0", &seal[..12]), "cut short");
        assert!(!k.check_line_seal("A", b"7.2a.0", &k.seal("A", b"7.2a.0")));
        let other = MemberKey::derive("archives", "another secret of sixteen");
        assert!(!other.check_line_seal("A", b"7.2a.0", &seal));
    }

    #[test]
    fn a_credential_names_its_member_for_its_window_and_the_ones_beside_it() {
        let k = key();
        let at = 1_000 * WINDOW_SECS + 17;
        let token = k.credential_at("A", at);
        assert!(is_credential(&token));
        for secs in [at - WINDOW_SECS, at, at + WINDOW_SECS] {
            assert_eq!(k.check_credential_at(&token, secs).as_deref(), Some("A"));
        }
        for secs in [at - 2 * WINDOW_SECS, at + 2 * WINDOW_SECS] {
            assert_eq!(k.check_credential_at(&token, secs), None, "expired");
        }
    }

    #[test]
    fn a_credential_of_another_cluster_or_renamed_is_refused() {
        let at = 5 * WINDOW_SECS;
        let other = MemberKey::derive("archives", "another secret, long enough");
        let token = other.credential_at("A", at);
        assert_eq!(key().check_credential_at(&token, at), None);
        let token = key().credential_at("A", at);
        let renamed = token.replacen("xam.A.", "xam.B.", 1);
        assert_eq!(key().check_credential_at(&renamed, at), None);
    }

    #[test]
    fn a_seal_holds_only_for_the_same_name_and_bytes() {
        let k = key();
        let proof = k.seal("A", b"{\"address\":\"https://a\"}");
        assert!(k.check_seal("A", b"{\"address\":\"https://a\"}", &proof));
        assert!(!k.check_seal("B", b"{\"address\":\"https://a\"}", &proof));
        assert!(!k.check_seal("A", b"{\"address\":\"http://a\"}", &proof));
        assert!(!k.check_seal("A", b"{\"address\":\"https://a\"}", "zz"));
    }

    #[test]
    fn a_registration_must_be_sealed_and_under_tls_https() {
        let admission = Admission {
            key: Some(key()),
            https_only: true,
        };
        let bytes = b"{}";
        let proof = key().seal("A", bytes);
        assert_eq!(admission.refuse("A", "https://a:7700", bytes, &proof), None);
        assert!(admission.refuse("A", "https://a:7700", bytes, "").is_some());
        assert!(admission
            .refuse("B", "https://a:7700", bytes, &proof)
            .is_some());
        assert!(admission
            .refuse("A", "http://a:7700", bytes, &proof)
            .is_some());
        // An open cluster takes in anyone (and says so in its log).
        assert_eq!(
            Admission::default().refuse("A", "http://a", bytes, ""),
            None
        );
    }

    proptest! {
        /// Whatever a caller sends, checking it never panics and never
        /// names a member unless it is a credential of this key.
        #[test]
        fn arbitrary_tokens_name_no_member(token in ".{0,120}") {
            prop_assert_eq!(key().check_credential(&token), None);
        }
    }
}
