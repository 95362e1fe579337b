//! The data directory's free space, and the rule that keeps a full disk
//! from turning into failed commits: a write is admitted only while it
//! leaves the reserve free, and after the disk was found full only once
//! more space is free than then.
//!
//! The reserve is what lets a domain whose disk fills keep answering:
//! searches still append their audit entries, the peers file and the
//! filter snapshot are still written, and redb can reopen its files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Why a write was refused for space: what the API answers 507 with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the domain's disk is full ({free_bytes} bytes free in its data directory, \
     {reserve_bytes} kept in reserve); nothing was changed"
)]
pub struct DiskFull {
    pub free_bytes: u64,
    pub reserve_bytes: u64,
}

/// What `/v1/stats` and `/metrics` say of the data directory's space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SpaceStats {
    /// Bytes free to this process in the data directory's file system.
    pub free_bytes: u64,
    /// Bytes a write must leave free (`limits.min_free_bytes`).
    pub reserve_bytes: u64,
    /// Whether a small write would be admitted now.
    pub writable: bool,
    /// Writes refused for space since the domain started.
    pub writes_refused: u64,
}

pub struct DiskSpace {
    dir: PathBuf,
    reserve: u64,
    /// The free bytes when a commit last failed for space, until a write
    /// is admitted again: retrying before any space returned would only
    /// fail the same way (and cost a reopen of the store).
    full_at: Mutex<Option<u64>>,
    refused: AtomicU64,
}

impl DiskSpace {
    pub fn new(dir: &Path, reserve: u64) -> DiskSpace {
        DiskSpace {
            dir: dir.to_owned(),
            reserve,
            full_at: Mutex::new(None),
            refused: AtomicU64::new(0),
        }
    }

    /// Bytes free to this (unprivileged-equivalent) process; `u64::MAX`
    /// when the file system cannot say, so that a write is then tried and
    /// a real "no space" is what refuses it.
    pub fn free_bytes(&self) -> u64 {
        match nix::sys::statvfs::statvfs(&self.dir) {
            Ok(s) => s.blocks_available().saturating_mul(s.fragment_size()),
            Err(_) => u64::MAX,
        }
    }

    /// Admits a write of about `need` bytes, or says why not (counted).
    pub fn admit(&self, need: u64) -> Result<(), DiskFull> {
        let free = self.free_bytes();
        let mut full_at = self.full_at.lock();
        let room = free >= self.reserve.saturating_add(need);
        let space_returned = full_at.is_none_or(|then| free > then);
        if room && space_returned {
            *full_at = None;
            return Ok(());
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        Err(DiskFull {
            free_bytes: free,
            reserve_bytes: self.reserve,
        })
    }

    /// A commit failed for space: refuse writes until more is free.
    pub fn found_full(&self) -> DiskFull {
        let free = self.free_bytes();
        *self.full_at.lock() = Some(free);
        self.refused.fetch_add(1, Ordering::Relaxed);
        DiskFull {
            free_bytes: free,
            reserve_bytes: self.reserve,
        }
    }

    pub fn stats(&self) -> SpaceStats {
        let free = self.free_bytes();
        let space_returned = self.full_at.lock().is_none_or(|then| free > then);
        SpaceStats {
            free_bytes: free,
            reserve_bytes: self.reserve,
            writable: space_returned && free > self.reserve,
            writes_refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

/// Whether `e` says the file system has no room (ENOSPC, or a quota).
pub fn is_no_space(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(e.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_would_eat_into_the_reserve_is_refused_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let free = DiskSpace::new(dir.path(), 0).free_bytes();
        let space = DiskSpace::new(dir.path(), free / 2);
        assert!(space.admit(1).is_ok());
        let refused = space.admit(free).unwrap_err();
        assert_eq!(refused.reserve_bytes, free / 2);
        assert_eq!(space.stats().writes_refused, 1);
        assert!(refused.to_string().contains("nothing was changed"));
    }

    #[test]
    fn after_the_disk_was_found_full_writes_wait_for_space_to_return() {
        let dir = tempfile::tempdir().unwrap();
        let space = DiskSpace::new(dir.path(), 0);
        space.found_full();
        assert!(space.full_at.lock().is_some());
        // No more space is free than when the commit failed.
        *space.full_at.lock() = Some(u64::MAX);
        assert!(space.admit(1).is_err());
        assert!(!space.stats().writable);
        // Space returned: the last failure's level is forgotten.
        *space.full_at.lock() = Some(0);
        assert!(space.admit(1).is_ok());
        assert!(space.full_at.lock().is_none());
        assert_eq!(
            space.stats().writes_refused,
            2,
            "the failed commit and the refusal"
        );
    }

    #[test]
    fn no_space_and_quota_errors_are_told_from_other_io_errors() {
        use std::io::{Error, ErrorKind};
        assert!(is_no_space(&Error::from_raw_os_error(28)));
        assert!(is_no_space(&Error::from_raw_os_error(122)));
        assert!(!is_no_space(&Error::from(ErrorKind::Other)));
        assert!(!is_no_space(&Error::from_raw_os_error(5)));
    }
}
