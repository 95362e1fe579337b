//! The positions ledger: each domain's last published position, by group
//! of domains (a province, by default the whole cluster), which a "not
//! found" reads instead of every domain's registration and record (with
//! 3 301 domains that was 6 602 reads and 406 ms, docs/SCALING.md).
//!
//! Two layouts. This file's, whole entries: one persistent znode per
//! group, `/xarchive/<c>/positions/<group>`, holding each of its domains'
//! whole entry (address, filter kind, key types, position, seal), the
//! only one domains of earlier releases read and write; and the one
//! `lines.rs` describes, the positions kept apart from the descriptions
//! in small lines, whose reading grows with what changed. Which one a
//! domain writes is `cluster.ledger` (docs/OPERATIONS.md, "Upgrading the
//! ledger"); it reads both, and a domain with a whole entry is known by
//! it alone (`zookeeper/apart.rs`).
//!
//! Each entry or line is written by its own domain only (sealed with the
//! cluster secret, as a registration is), by compare-and-set on the
//! znode's version, so a domain rewrites its neighbours' entries exactly
//! as it read them; `cluster forget` writes the one exception, a
//! retirement.

pub mod lines;

use std::collections::BTreeMap;

use serde_json::Value;
use zookeeper_client as zk;

/// A group znode's contents: its domains' entries, by name, each the
/// sealed JSON of a [`Known`](super::Known) as its writer produced it.
pub type Entries = BTreeMap<String, Value>;

/// Largest ledger znode written: ZooKeeper refuses a znode over 1 MiB
/// (`jute.maxbuffer`); an entry is about 250 bytes, so a group holds
/// about 3 600 domains. A nation sets `cluster.group` to its provinces.
pub const MAX_GROUP_BYTES: usize = 900 * 1024;

/// Why the ledger could not be written.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("ZooKeeper: {0}")]
    ZooKeeper(#[from] zk::Error),
    #[error(
        "the ledger of group {group} would hold {bytes} bytes, over ZooKeeper's limit: \
         split the cluster into more groups (cluster.group)"
    )]
    GroupTooLarge { group: String, bytes: usize },
    #[error("the ledger of group {0} keeps changing under this write")]
    Contended(String),
    #[error("cannot encode a ledger: {0}")]
    Unencodable(#[source] serde_json::Error),
}

/// The entries of a ledger znode's bytes; unreadable bytes count as no
/// entries (they are logged), so one corrupt write cannot stop every
/// "not found" — it makes its domains unknown, which is asked, not ruled
/// out.
pub fn decode(group: &str, data: &[u8]) -> Entries {
    decode_as(group, data)
}

/// [`decode`], each entry read as a `T` (`&RawValue`: its bytes as
/// written, unparsed).
pub fn decode_as<'a, T: serde::Deserialize<'a>>(
    group: &str,
    data: &'a [u8],
) -> BTreeMap<String, T> {
    if data.is_empty() {
        return BTreeMap::new();
    }
    serde_json::from_slice(data).unwrap_or_else(|e| {
        tracing::warn!(group, error = %e, "unreadable ledger znode: its domains count as unknown");
        BTreeMap::new()
    })
}

/// The bytes of `entries`, refused when over [`MAX_GROUP_BYTES`].
pub fn encode(group: &str, entries: &Entries) -> Result<Vec<u8>, LedgerError> {
    let bytes = serde_json::to_vec(entries).map_err(LedgerError::Unencodable)?;
    if bytes.len() > MAX_GROUP_BYTES {
        return Err(LedgerError::GroupTooLarge {
            group: group.to_owned(),
            bytes: bytes.len(),
        });
    }
    Ok(bytes)
}

/// How many times a compare-and-set is tried against other writers.
pub const ATTEMPTS: usize = 32;

/// Whether `group` is a usable group name: it names a znode.
pub fn valid_group(group: &str) -> bool {
    (1..=32).contains(&group.len())
        && group
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A ledger znode anyone with the cluster's ZooKeeper rights could
        /// have written: any bytes hold some entries or none, never a panic.
        #[test]
        fn any_bytes_read_as_a_ledger_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
            text in "\\PC{0,64}",
        ) {
            let _ = decode("11", &bytes);
            let _ = decode("11", text.as_bytes());
        }
    }

    #[test]
    fn a_ledger_round_trips_its_entries_exactly() {
        let mut entries = Entries::new();
        entries.insert("A".into(), serde_json::json!({"epoch": "7", "proof": "ab"}));
        entries.insert(
            "B".into(),
            serde_json::json!({"epoch": "9", "departed": true}),
        );
        let bytes = encode("11", &entries).unwrap();
        assert_eq!(decode("11", &bytes), entries);
    }

    #[test]
    fn unreadable_ledger_bytes_hold_no_entries() {
        assert!(decode("11", b"{not json").is_empty());
        assert!(decode("11", b"").is_empty());
    }

    #[test]
    fn a_ledger_over_zookeepers_limit_is_refused() {
        let mut entries = Entries::new();
        for i in 0..5_000 {
            entries.insert(format!("domain-{i:05}"), Value::String("x".repeat(200)));
        }
        assert!(matches!(
            encode("11", &entries),
            Err(LedgerError::GroupTooLarge { .. })
        ));
    }

    #[test]
    fn a_group_name_must_name_a_znode() {
        assert!(valid_group("11") && valid_group("east-1"));
        for bad in ["", "a/b", "..", "x".repeat(33).as_str(), "省"] {
            assert!(!valid_group(bad), "{bad:?}");
        }
    }
}
