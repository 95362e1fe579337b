//! The request flow's own state, which the domain's `Node` holds:
//! the book of requests, the seal, the trust list as last read, what wakes
//! the outbox. Apart from the flow's work (the other files), which acts
//! through the node, so that the node holding this imports nothing that
//! imports it back.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use xarchive_seal::trust::anchor_key;
use xarchive_seal::{SecretKey, SignedTrustList, TrustList};

use crate::local::requests::RequestBook;
use crate::security::seal::Keyring;

/// The trust list as last read, inside the data directory.
pub const TRUST_LIST_FILE: &str = "trust-list.json";
/// How long a trust list read is used before it is read again.
pub(super) const MAX_AGE: Duration = Duration::from_mins(1);

/// The request flow's own state: the book of requests, the seal, the
/// trust list as last read, and what wakes the outbox. Its tasks (the
/// outbox, the publication of this archive's keys) are started by
/// [`start`].
pub struct Requests {
    pub(crate) book: RequestBook,
    pub(crate) seal: Keyring,
    pub(crate) trust: TrustCache,
    /// Wakes the outbox when a request is registered.
    pub(super) outbox: tokio::sync::Notify,
    /// One writer of steps to the audit log at a time, so that looking
    /// for a step in the log and writing it are one act (`steps.rs`).
    pub(super) logging_steps: parking_lot::Mutex<()>,
    /// The font certificates are drawn with, found once.
    pub(super) font: OnceLock<Result<xarchive_seal::pdf::CertificateFont, String>>,
}

impl Requests {
    pub fn new(book: RequestBook, seal: Keyring, trust: TrustCache) -> Requests {
        Requests {
            book,
            seal,
            trust,
            outbox: tokio::sync::Notify::new(),
            logging_steps: parking_lot::Mutex::new(()),
            font: OnceLock::new(),
        }
    }
}

/// A trust list read and signed.
pub(crate) struct Trusted {
    pub list: TrustList,
    pub signed: SignedTrustList,
    pub read_at: Instant,
}

/// The trust list as last read, and where it is saved.
pub struct TrustCache {
    current: Mutex<Option<Arc<Trusted>>>,
    /// One read at a time: the checks waiting share it.
    pub(super) reading: tokio::sync::Mutex<()>,
    pub(super) file: PathBuf,
    pub(super) anchor: SecretKey,
    pub(super) secured: bool,
}

impl TrustCache {
    /// The cache of `cluster`'s list, saved in `file`; `secret` the
    /// material only members hold (none without a cluster secret). A list
    /// saved before is taken if its anchor signed it.
    pub fn new(cluster: &str, secret: Option<[u8; 32]>, file: PathBuf) -> TrustCache {
        let anchor = anchor_key(cluster, secret.as_ref().map(|s| &s[..]));
        let saved = std::fs::read(&file)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<SignedTrustList>(&bytes).ok())
            .filter(|signed| signed.anchor().ok() == Some(anchor.public()))
            .and_then(|signed| {
                let list = signed.open(None).ok()?;
                Some(Arc::new(Trusted {
                    list,
                    signed,
                    // Old: read again at the first use.
                    read_at: Instant::now()
                        .checked_sub(MAX_AGE)
                        .unwrap_or_else(Instant::now),
                }))
            });
        TrustCache {
            current: Mutex::new(saved),
            reading: tokio::sync::Mutex::new(()),
            file,
            anchor,
            secured: secret.is_some(),
        }
    }

    /// The list last read, however old.
    pub(crate) fn last(&self) -> Option<Arc<Trusted>> {
        self.current.lock().clone()
    }

    /// Keeps `trusted` as the list last read.
    pub(super) fn keep(&self, trusted: Trusted) -> Arc<Trusted> {
        let trusted = Arc::new(trusted);
        *self.current.lock() = Some(trusted.clone());
        trusted
    }
}
