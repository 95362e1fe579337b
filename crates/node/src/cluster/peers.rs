//! The peers a domain knows, kept in its data directory between runs, so
//! that a domain restarted while the coordinator has lost its data (a
//! ZooKeeper restarted empty) still asks the domains it knew, instead of
//! answering "not found" for their records until they register again.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use super::replicas::Remembered;
use crate::local::domain_name::DomainName;

/// The peers kept at `path`; none if there is no file or it cannot be
/// read (logged: the coordinator's view is then all there is).
pub(crate) fn load(path: &Path) -> BTreeMap<DomainName, Remembered> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(error = %e, path = %path.display(), "unreadable list of known peers ignored");
            BTreeMap::new()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "cannot read the list of known peers");
            BTreeMap::new()
        }
    }
}

/// Replaces the file at `path` whole (written aside, then renamed).
pub(crate) fn save(path: &Path, peers: &BTreeMap<DomainName, Remembered>) -> std::io::Result<()> {
    let aside = path.with_extension("json.new");
    let mut file = std::fs::File::create(&aside)?;
    file.write_all(&serde_json::to_vec_pretty(peers)?)?;
    file.sync_all()?;
    std::fs::rename(&aside, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::filter::FilterKind;

    #[test]
    fn the_peers_kept_read_back_and_a_damaged_file_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peers.json");
        assert!(load(&path).is_empty());
        let peers: BTreeMap<DomainName, Remembered> = [(
            "B".parse().unwrap(),
            Remembered {
                address: "http://198.18.0.2:7700".into(),
                kind: FilterKind::Cuckoo,
            },
        )]
        .into();
        save(&path, &peers).unwrap();
        assert_eq!(load(&path), peers);
        std::fs::write(&path, b"{not json").unwrap();
        assert!(load(&path).is_empty());
    }
}
