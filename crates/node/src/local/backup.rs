//! An online backup of a domain, and its restore: one read transaction
//! each of the store, the audit log and the request book, written out
//! while writes go on, so that a running domain can be saved without being
//! stopped.
//!
//! redb gives every read transaction a fixed snapshot (writers copy pages
//! on write and never touch pages a live reader can reach), so the
//! records, the key index and the store's sequence in a backup are those
//! of one commit, whatever was written while it streamed. The filters are
//! not in it: a restored domain rebuilds them from its store when it
//! starts, so they hold exactly the restored IDs.
//!
//! The form (docs/FORMAT.md, "Backup"): a magic line, then frames, each a
//! little-endian `u32` length and a postcard-encoded [`Frame`]: a header,
//! the store's tables, the audit log's entries and the request book's, and
//! an end frame with
//! the counts, a SHA-256 of every byte before it and a MAC. A file without
//! its end frame, or whose checksum does not match, is not a backup: a
//! stream cut short (a full disk, a dropped connection) is never taken for
//! one.
//!
//! The checksum catches damage, not intent: anyone can change a title and
//! recompute a SHA-256. So the end frame also carries an HMAC-SHA-256,
//! under a key only the domain's cluster holds (derived from the cluster
//! secret), or, for a domain without one, under the domain's own backup
//! key (`seal/backup.key`, never in a backup). A restore checks it before
//! anything takes its name, and refuses a backup whose MAC does not check,
//! or that has none (one of before), unless told to take it unchecked.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use redb::{
    Durability, ReadableDatabase, ReadableMultimapTable, ReadableTable, ReadableTableMetadata,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::local::audit::{self, AuditLog};
use crate::local::private_file::{make_private_dir, write_private};
use crate::local::redb_file::{RedbFailure, Reopening};
use crate::local::requests::{self, RequestBook};
use crate::local::space::DiskFull;
use crate::local::store::{self, Store};

/// The Ed25519 key of a domain made before seals were kept in [`SEAL_DIR`]:
/// its 32 secret bytes (`security/seal.rs` takes it in at the next start).
pub const SIGNING_KEY_FILE: &str = "signing.key";
/// The seal's folder inside the data directory, and its files: every key's
/// public record, and the key in use made here (`security/seal.rs`).
pub const SEAL_DIR: &str = "seal";
pub const SEAL_KEYS_FILE: &str = "keys.json";
pub const SEAL_ACTIVE_KEY_FILE: &str = "active.pem";
const SEAL_FILES: [&str; 2] = [SEAL_KEYS_FILE, SEAL_ACTIVE_KEY_FILE];
/// A domain without a cluster secret: the key its backups' MACs are made
/// with, in [`SEAL_DIR`] (hex, 32 bytes). Never put in a backup: whoever
/// holds a backup must not hold what vouches for it.
pub const BACKUP_KEY_FILE: &str = "backup.key";

/// The first bytes of every backup.
pub const MAGIC: &[u8; 16] = b"xarchive backup\n";
/// The form written: 2 adds the request book, 3 the MAC. A restore reads
/// the forms before too (with `--accept-unauthenticated`: they have no
/// MAC), and refuses any other.
pub const FORMAT: u32 = 3;
const FORMATS_READ: std::ops::RangeInclusive<u32> = 1..=FORMAT;
/// The first form with a MAC.
const FORMAT_MAC: u32 = 3;
/// The longest frame read: a record of the largest content a domain may
/// be configured for, with room to spare. A longer length is corruption.
const MAX_FRAME: u32 = 1 << 30;
/// Entries written into a restored file per transaction.
const RESTORE_BATCH: usize = 10_000;

/// What a backup says of itself, before its contents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupHeader {
    pub format: u32,
    /// The domain it was taken of.
    pub domain: String,
    /// When its snapshot was taken (milliseconds since the Unix epoch).
    pub taken_at_ms: i64,
    /// The store's sequence (committed write transactions) in the snapshot.
    pub sequence: u64,
    pub records: u64,
    pub key_entries: u64,
    pub audit_entries: u64,
}

/// One unit of a backup.
#[derive(Debug, Serialize, Deserialize)]
enum Frame<'a> {
    Header(BackupHeader),
    /// A record: its ID and its stored bytes, as the store holds them.
    Record(&'a str, &'a [u8]),
    /// An entry of the key index: a key's digest and a record's ID.
    Key(&'a [u8], &'a str),
    /// A counter of the store (its sequence).
    Meta(&'a str, u64),
    /// An audit log entry: its time and its JSON, hash chain included.
    Audit(u64, &'a [u8]),
    End {
        records: u64,
        key_entries: u64,
        audit_entries: u64,
        /// SHA-256 of every byte before this frame (the magic included).
        sha256: [u8; 32],
    },
    /// An entry of the request book: its table, key and value (after
    /// `End` in this list, so that the frames before keep their tags).
    Request(&'a str, &'a str, &'a [u8]),
    /// The domain's Ed25519 key, in backups taken before [`SEAL_DIR`].
    SigningKey(&'a [u8]),
    /// A file of the seal's folder: its name and bytes.
    SealFile(&'a str, &'a [u8]),
    /// The end of a backup of form 3: `End`'s fields, which key made its
    /// MAC, and the MAC ([`MacKey::mac`]).
    EndMac {
        records: u64,
        key_entries: u64,
        audit_entries: u64,
        sha256: [u8; 32],
        key: KeyId,
        mac: [u8; 32],
    },
}

type HmacSha256 = Hmac<Sha256>;

/// Which key made a backup's MAC, as its end frame names it: what a
/// restore needs, said before the MAC is checked. Its `id` is a MAC of a
/// fixed text under the key, so keys can be told apart without showing
/// them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyId {
    /// Derived from the cluster secret, for this cluster.
    Cluster { cluster: String, id: [u8; 8] },
    /// The domain's own backup key ([`BACKUP_KEY_FILE`]): it had no
    /// cluster secret.
    Domain { id: [u8; 8] },
}

impl std::fmt::Display for KeyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyId::Cluster { cluster, id } => write!(
                f,
                "the secret of cluster {cluster:?} (key {})",
                hex::encode(id)
            ),
            KeyId::Domain { id } => write!(
                f,
                "its domain's own backup key, seal/{BACKUP_KEY_FILE} (key {})",
                hex::encode(id)
            ),
        }
    }
}

/// The key a backup's MAC is made or checked with.
#[derive(Clone)]
pub struct MacKey {
    key: [u8; 32],
    id: KeyId,
}

impl std::fmt::Debug for MacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MacKey({})", self.id)
    }
}

impl MacKey {
    /// The key of `cluster`'s backups: `material` is derived from its
    /// secret (`security::member::BACKUP_MAC`).
    pub fn cluster(cluster: &str, material: [u8; 32]) -> MacKey {
        MacKey {
            id: KeyId::Cluster {
                cluster: cluster.to_owned(),
                id: key_id(&material),
            },
            key: material,
        }
    }

    /// A domain's own backup key ([`BACKUP_KEY_FILE`]).
    pub fn domain(key: [u8; 32]) -> MacKey {
        MacKey {
            id: KeyId::Domain { id: key_id(&key) },
            key,
        }
    }

    pub fn id(&self) -> &KeyId {
        &self.id
    }

    /// The MAC of a backup whose bytes before its end frame hash to
    /// `sha256`, and of the end frame's other fields: hashing the stream
    /// and MACing the hash authenticates every byte, as a signature over a
    /// digest does.
    fn mac(&self, sha256: &[u8; 32], counts: (u64, u64, u64)) -> Result<[u8; 32], BackupError> {
        Ok(self.macing(sha256, counts)?.finalize().into_bytes().into())
    }

    /// [`mac`](Self::mac) before its last step: checked with
    /// `verify_slice`, in constant time.
    fn macing(
        &self,
        sha256: &[u8; 32],
        counts: (u64, u64, u64),
    ) -> Result<HmacSha256, BackupError> {
        let mut mac = self.hmac();
        mac.update(b"xarchive backup mac\0");
        mac.update(sha256);
        let fields = postcard::to_stdvec(&(counts, &self.id))
            .map_err(|e| BackupError::Damaged(format!("its end cannot be encoded: {e}")))?;
        mac.update(&fields);
        Ok(mac)
    }

    fn hmac(&self) -> HmacSha256 {
        // HMAC takes a key of any length: this cannot fail.
        HmacSha256::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!())
    }
}

/// A key's public name: the first bytes of a MAC of a fixed text under it.
fn key_id(key: &[u8; 32]) -> [u8; 8] {
    let mut mac = HmacSha256::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(b"xarchive backup key id");
    let tag = mac.finalize().into_bytes();
    let mut id = [0u8; 8];
    id.copy_from_slice(&tag[..8]);
    id
}

/// What a restore checks a backup's MAC with.
pub enum BackupKey<'a> {
    /// The cluster secret: the key is derived for the cluster the backup
    /// names (the caller derives it: `security::member`, above this layer).
    Cluster(&'a dyn Fn(&str) -> Result<[u8; 32], BackupError>),
    /// A domain's own backup key ([`BACKUP_KEY_FILE`]).
    Domain([u8; 32]),
}

impl BackupKey<'_> {
    /// The key `wanted` names, made from what was given.
    fn resolve(&self, wanted: &KeyId) -> Result<MacKey, BackupError> {
        match (self, wanted) {
            (BackupKey::Cluster(derive), KeyId::Cluster { cluster, .. }) => {
                Ok(MacKey::cluster(cluster, derive(cluster)?))
            }
            (BackupKey::Domain(key), _) => Ok(MacKey::domain(*key)),
            (BackupKey::Cluster(_), KeyId::Domain { .. }) => Err(BackupError::OtherKey {
                theirs: wanted.to_string(),
                given: "a cluster secret".into(),
            }),
        }
    }
}

/// How a backup being read is checked, beyond being whole.
#[derive(Clone, Copy)]
pub struct Authenticity<'a> {
    /// What its MAC is checked with: given, a MAC that does not check
    /// under it is refused, whatever `required` says.
    pub key: Option<&'a BackupKey<'a>>,
    /// Refuse a backup whose MAC is not checked: one of before MACs, or
    /// one whose key was not given (saying which it needs). Off for
    /// `xarchive backup`, which holds no key, checking what it received,
    /// and for a restore told to (`--accept-unauthenticated`).
    pub required: bool,
}

impl Authenticity<'_> {
    /// Only that the backup is whole.
    pub const WHOLE: Authenticity<'static> = Authenticity {
        key: None,
        required: false,
    };
}

/// What a backup read whole says of itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub header: BackupHeader,
    /// The key that made its MAC (none: a backup of before form 3).
    pub key: Option<KeyId>,
    /// Its MAC was checked and holds.
    pub authentic: bool,
    /// The key to keep in the restored data directory: the domain's own
    /// backup key, when that is what the backup was checked with.
    domain_key: Option<[u8; 32]>,
}

/// What a backup is taken of: the domain's files.
pub struct Sources<'a> {
    pub store: &'a Store,
    pub audit: &'a AuditLog,
    pub book: &'a RequestBook,
    /// The seal's folder: its keys, so that a domain restored seals as
    /// before and what it sealed still checks.
    pub seal_dir: &'a Path,
}

/// Why a backup could not be taken, read or restored.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("backup: {0}")]
    Redb(Box<redb::Error>),
    #[error(transparent)]
    Reopening(#[from] Reopening),
    #[error(transparent)]
    DiskFull(#[from] DiskFull),
    /// Where the backup went failed (the client left, or its disk).
    #[error("cannot write the backup: {0}")]
    Write(#[source] std::io::Error),
    #[error("cannot read the backup: {0}")]
    Read(#[source] std::io::Error),
    #[error("not an xarchive backup (it does not begin as one)")]
    NotABackup,
    #[error("the backup is of form {0}; this xarchive reads forms 1 to {FORMAT}")]
    Format(u32),
    #[error(
        "the backup is incomplete: it ends before its end frame (a copy cut short is not a backup)"
    )]
    Truncated,
    #[error("the backup is damaged: {0}")]
    Damaged(String),
    #[error(
        "the backup is not authentic: its MAC does not check under {key}. It was changed \
         after it was taken (its SHA-256 can be recomputed by anyone; its MAC only by whoever \
         holds the key); nothing was restored"
    )]
    NotAuthentic { key: KeyId },
    #[error(
        "the backup was authenticated under another key: it names {theirs}, and the key given is \
         {given}. Give the cluster secret (or, for a domain without one, the backup key) of the \
         domain it was taken of; nothing was restored"
    )]
    OtherKey { theirs: String, given: String },
    #[error(
        "the backup is authenticated under {wanted}: give {how} to check it (or \
         --accept-unauthenticated to restore it unchecked); nothing was restored"
    )]
    NoKey { wanted: KeyId, how: &'static str },
    #[error(
        "the backup is of form {format}, from before backups carried a MAC: nothing shows that it \
         is as its domain wrote it. Restore it only if you know where it has been, with \
         --accept-unauthenticated; nothing was restored"
    )]
    Unauthenticated { format: u32 },
    #[error("the key to check the backup with: {0}")]
    Key(String),
    #[error("cannot restore into {path}: {reason}")]
    Target { path: PathBuf, reason: String },
    #[error("cannot restore into {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: Box<redb::DatabaseError>,
    },
}

crate::local::redb_file::from_redb_errors!(BackupError);

impl RedbFailure for BackupError {
    fn redb(&self) -> Option<&redb::Error> {
        match self {
            BackupError::Redb(e) => Some(e),
            _ => None,
        }
    }
}

/// Frames written with their lengths, the checksum kept as they go.
struct Framer<W: Write> {
    out: W,
    sha: Sha256,
    records: u64,
    key_entries: u64,
    audit_entries: u64,
}

impl<W: Write> Framer<W> {
    fn new(mut out: W) -> Result<Self, BackupError> {
        out.write_all(MAGIC).map_err(BackupError::Write)?;
        let mut sha = Sha256::new();
        sha.update(MAGIC);
        Ok(Framer {
            out,
            sha,
            records: 0,
            key_entries: 0,
            audit_entries: 0,
        })
    }

    fn frame(&mut self, frame: &Frame<'_>) -> Result<(), BackupError> {
        let bytes = postcard::to_stdvec(frame)
            .map_err(|e| BackupError::Damaged(format!("a frame cannot be encoded: {e}")))?;
        let len = u32::try_from(bytes.len())
            .ok()
            .filter(|len| *len <= MAX_FRAME)
            .ok_or_else(|| BackupError::Damaged("a record is too large for a frame".into()))?;
        let len = len.to_le_bytes();
        self.sha.update(len);
        self.sha.update(&bytes);
        self.out.write_all(&len).map_err(BackupError::Write)?;
        self.out.write_all(&bytes).map_err(BackupError::Write)?;
        match frame {
            Frame::Record(..) => self.records += 1,
            Frame::Key(..) => self.key_entries += 1,
            Frame::Audit(..) => self.audit_entries += 1,
            _ => {}
        }
        Ok(())
    }

    fn finish(mut self, key: &MacKey) -> Result<W, BackupError> {
        let sha256: [u8; 32] = self.sha.clone().finalize().into();
        let counts = (self.records, self.key_entries, self.audit_entries);
        let end = Frame::EndMac {
            records: self.records,
            key_entries: self.key_entries,
            audit_entries: self.audit_entries,
            sha256,
            key: key.id.clone(),
            mac: key.mac(&sha256, counts)?,
        };
        self.frame(&end)?;
        self.out.flush().map_err(BackupError::Write)?;
        Ok(self.out)
    }
}

/// Writes a backup of `store` and `audit` (the domain `domain`) to `out`,
/// its MAC made with `key`:
/// both snapshots are taken before the first byte is written, so the
/// backup is of one moment, whatever is written while it streams. The
/// header is flushed at once (a caller streaming it learns early that it
/// began). Holds the files' read locks until done: a reopening of either
/// after an I/O error waits for the backup to end.
pub fn take(
    domain: &str,
    from: Sources<'_>,
    key: &MacKey,
    now_ms: i64,
    out: impl Write,
) -> Result<BackupHeader, BackupError> {
    let Sources {
        store,
        audit,
        book,
        seal_dir,
    } = from;
    let mut seal_files = Vec::new();
    for name in SEAL_FILES {
        match std::fs::read(seal_dir.join(name)) {
            Ok(bytes) => seal_files.push((name, bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BackupError::Read(e)),
        }
    }
    store.file().scan(|db| {
        let txn = db.begin_read()?;
        audit.file().scan(|audit_db| {
            let audit_txn = audit_db.begin_read()?;
            book.file().scan(|book_db| {
                let book_txn = book_db.begin_read()?;
                let records = txn.open_table(store::RECORDS)?;
                let keys = txn.open_multimap_table(store::KEYS)?;
                let meta = txn.open_table(store::META)?;
                let entries = audit_txn.open_table(audit::ENTRIES)?;
                let header = BackupHeader {
                    format: FORMAT,
                    domain: domain.to_owned(),
                    taken_at_ms: now_ms,
                    sequence: meta.get(store::SEQUENCE)?.map_or(0, |v| v.value()),
                    records: records.len()?,
                    key_entries: keys.len()?,
                    audit_entries: entries.len()?,
                };
                let mut framer = Framer::new(out)?;
                framer.frame(&Frame::Header(header.clone()))?;
                framer.out.flush().map_err(BackupError::Write)?;
                for entry in meta.iter()? {
                    let (name, value) = entry?;
                    framer.frame(&Frame::Meta(name.value(), value.value()))?;
                }
                for entry in records.iter()? {
                    let (id, value) = entry?;
                    framer.frame(&Frame::Record(id.value(), value.value()))?;
                }
                for entry in keys.iter()? {
                    let (digest, ids) = entry?;
                    for id in ids {
                        framer.frame(&Frame::Key(digest.value(), id?.value()))?;
                    }
                }
                for entry in entries.iter()? {
                    let (at, json) = entry?;
                    framer.frame(&Frame::Audit(at.value(), json.value()))?;
                }
                for name in requests::TABLES {
                    for entry in book_txn.open_table(requests::table(name))?.iter()? {
                        let (key, value) = entry?;
                        framer.frame(&Frame::Request(name, key.value(), value.value()))?;
                    }
                }
                for (name, bytes) in &seal_files {
                    framer.frame(&Frame::SealFile(name, bytes))?;
                }
                framer.finish(key)?;
                Ok(header)
            })
        })
    })
}

/// One entry read from a backup.
pub enum BackupEntry<'a> {
    Record(&'a str, &'a [u8]),
    Key(&'a [u8], &'a str),
    Meta(&'a str, u64),
    Audit(u64, &'a [u8]),
    /// An entry of the request book's table (one of `requests::TABLES`).
    Request(&'a str, &'a str, &'a [u8]),
    SigningKey(&'a [u8]),
    SealFile(&'a str, &'a [u8]),
}

/// Reads a whole backup, giving `each` every entry in order, and checks
/// that it is complete: its header first, its end frame last with the
/// counts of what came before and the checksum of every byte, nothing
/// after; and, as `check` asks, its MAC. `each` may have been given
/// entries of a backup that then turns out damaged or not authentic: act
/// on them only once this returns `Ok`.
// Short names for a frame's parts, each used within a few lines of where
// it is read.
#[allow(clippy::many_single_char_names)]
pub fn read(
    input: impl Read,
    check: &Authenticity<'_>,
    mut each: impl FnMut(BackupEntry<'_>) -> Result<(), BackupError>,
) -> Result<Verified, BackupError> {
    let mut input = BufReader::with_capacity(1 << 16, input);
    let mut magic = [0u8; 16];
    read_exact(&mut input, &mut magic)?;
    if &magic != MAGIC {
        return Err(BackupError::NotABackup);
    }
    let mut sha = Sha256::new();
    sha.update(magic);
    let mut buf = Vec::new();
    let mut header: Option<BackupHeader> = None;
    let (mut records, mut key_entries, mut audit_entries) = (0u64, 0u64, 0u64);
    loop {
        let mut len = [0u8; 4];
        read_exact(&mut input, &mut len)?;
        let n = u32::from_le_bytes(len);
        if n > MAX_FRAME {
            return Err(BackupError::Damaged(format!(
                "a frame claims {n} bytes: the file is corrupt"
            )));
        }
        // Read as it comes, not into n zeroed bytes first: a damaged
        // length would otherwise cost up to MAX_FRAME of memory before
        // the file is found short.
        buf.clear();
        (&mut input)
            .take(u64::from(n))
            .read_to_end(&mut buf)
            .map_err(BackupError::Read)?;
        if buf.len() < n as usize {
            return Err(BackupError::Truncated);
        }
        let frame: Frame<'_> = postcard::from_bytes(&buf)
            .map_err(|e| BackupError::Damaged(format!("a frame cannot be read: {e}")))?;
        let seen = sha.clone().finalize();
        sha.update(len);
        sha.update(&buf);
        match (&header, frame) {
            (None, Frame::Header(h)) => {
                if !FORMATS_READ.contains(&h.format) {
                    return Err(BackupError::Format(h.format));
                }
                header = Some(h);
                continue;
            }
            (None, _) => return Err(BackupError::NotABackup),
            (Some(_), Frame::Header(_)) => {
                return Err(BackupError::Damaged("a second header".into()))
            }
            (Some(_), Frame::Record(id, value)) => {
                records += 1;
                each(BackupEntry::Record(id, value))?;
            }
            (Some(_), Frame::Key(digest, id)) => {
                key_entries += 1;
                each(BackupEntry::Key(digest, id))?;
            }
            (Some(_), Frame::Meta(name, value)) => each(BackupEntry::Meta(name, value))?,
            (Some(_), Frame::Audit(at, json)) => {
                audit_entries += 1;
                each(BackupEntry::Audit(at, json))?;
            }
            (Some(_), Frame::Request(table, key, value)) => {
                if !requests::TABLES.contains(&table) {
                    return Err(BackupError::Damaged(format!(
                        "a request entry of an unknown table {table:?}"
                    )));
                }
                each(BackupEntry::Request(table, key, value))?;
            }
            (Some(_), Frame::SigningKey(key)) => each(BackupEntry::SigningKey(key))?,
            (Some(_), Frame::SealFile(name, bytes)) => each(BackupEntry::SealFile(name, bytes))?,
            (
                Some(h),
                Frame::End {
                    records: r,
                    key_entries: k,
                    audit_entries: a,
                    sha256,
                },
            ) => {
                let end = Ending {
                    counts: (r, k, a),
                    sha256,
                    mac: None,
                };
                let counted = (records, key_entries, audit_entries);
                let verified = end.check(h, counted, &seen, check)?;
                return nothing_after(&mut input).map(|()| verified);
            }
            (
                Some(h),
                Frame::EndMac {
                    records: r,
                    key_entries: k,
                    audit_entries: a,
                    sha256,
                    key,
                    mac,
                },
            ) => {
                let end = Ending {
                    counts: (r, k, a),
                    sha256,
                    mac: Some((key, mac)),
                };
                let counted = (records, key_entries, audit_entries);
                let verified = end.check(h, counted, &seen, check)?;
                return nothing_after(&mut input).map(|()| verified);
            }
        }
    }
}

/// A backup's end frame, of either form.
struct Ending {
    counts: (u64, u64, u64),
    sha256: [u8; 32],
    /// Form 3's: which key, and its MAC.
    mac: Option<(KeyId, [u8; 32])>,
}

impl Ending {
    /// Whether the backup `header` begins, of which `counted` frames and
    /// bytes hashing to `seen` came before this end, is whole, and, as
    /// `check` asks, authentic.
    fn check(
        self,
        header: &BackupHeader,
        counted: (u64, u64, u64),
        seen: &[u8],
        check: &Authenticity<'_>,
    ) -> Result<Verified, BackupError> {
        if self.sha256[..] != seen[..] {
            return Err(BackupError::Damaged(
                "its checksum does not match its contents".into(),
            ));
        }
        let h = header;
        if counted != self.counts || counted != (h.records, h.key_entries, h.audit_entries) {
            let (records, key_entries, audit_entries) = counted;
            return Err(BackupError::Damaged(format!(
                "it holds {records} records, {key_entries} key entries and \
                 {audit_entries} audit entries, but says {} , {} and {}",
                h.records, h.key_entries, h.audit_entries
            )));
        }
        let mut verified = Verified {
            header: header.clone(),
            key: None,
            authentic: false,
            domain_key: None,
        };
        let Some((key, mac)) = self.mac else {
            // A backup of before MACs, or one made to look like it: only
            // its form says which, and anyone can write that.
            if h.format >= FORMAT_MAC {
                return Err(BackupError::Damaged(format!(
                    "a backup of form {} ends without its MAC",
                    h.format
                )));
            }
            return if check.required {
                Err(BackupError::Unauthenticated { format: h.format })
            } else {
                Ok(verified)
            };
        };
        if h.format < FORMAT_MAC {
            return Err(BackupError::Damaged(format!(
                "a backup of form {} ends with a MAC, which that form has not",
                h.format
            )));
        }
        verified.key = Some(key.clone());
        let given = match check.key {
            Some(given) => given.resolve(&key)?,
            None if !check.required => return Ok(verified),
            None => {
                let how = match key {
                    KeyId::Cluster { .. } => {
                        "the cluster's secret (--cluster-secret-file, or --config naming it)"
                    }
                    KeyId::Domain { .. } => {
                        "a copy of that domain's seal/backup.key (--backup-key-file)"
                    }
                };
                return Err(BackupError::NoKey { wanted: key, how });
            }
        };
        if given.id != key {
            return Err(BackupError::OtherKey {
                theirs: key.to_string(),
                given: given.id.to_string(),
            });
        }
        if given
            .macing(&self.sha256, self.counts)?
            .verify_slice(&mac)
            .is_err()
        {
            return Err(BackupError::NotAuthentic { key });
        }
        verified.authentic = true;
        if let KeyId::Domain { .. } = key {
            verified.domain_key = Some(given.key);
        }
        Ok(verified)
    }
}

/// Refuses bytes after a backup's end frame.
fn nothing_after(input: &mut impl BufRead) -> Result<(), BackupError> {
    if !input.fill_buf().map_err(BackupError::Read)?.is_empty() {
        return Err(BackupError::Damaged("bytes follow its end frame".into()));
    }
    Ok(())
}

fn read_exact(input: &mut impl Read, buf: &mut [u8]) -> Result<(), BackupError> {
    input.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => BackupError::Truncated,
        _ => BackupError::Read(e),
    })
}

/// Checks the backup at `path` whole, and as `check` asks authentic,
/// writing nothing.
pub fn verify(path: &Path, check: &Authenticity<'_>) -> Result<Verified, BackupError> {
    let file = std::fs::File::open(path).map_err(BackupError::Read)?;
    read(file, check, |_| Ok(()))
}

/// The domain's own backup key in `data`'s [`SEAL_DIR`], made (32 random
/// bytes, its owner's only) if there is none: the key of a domain without
/// a cluster secret. Keep a copy apart from the backups: a restore needs
/// it, and a data directory lost takes it along.
pub fn domain_key(data: &Path) -> Result<[u8; 32], BackupError> {
    let path = data.join(SEAL_DIR).join(BACKUP_KEY_FILE);
    match read_key_file(&path) {
        Err(BackupError::Read(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
        read => return read,
    }
    let io = |source| BackupError::Io {
        path: path.clone(),
        source,
    };
    make_private_dir(&data.join(SEAL_DIR)).map_err(io)?;
    let key: [u8; 32] = rand::random();
    let mut options = std::fs::OpenOptions::new();
    // Never over a key another backup made meanwhile: that one is read.
    options.write(true).create_new(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(format!("{}\n", hex::encode(key)).as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(io)?;
            tracing::info!(
                path = %path.display(),
                "made this domain's backup key (it has no cluster secret): keep a copy apart from \
                 the backups, a restore needs it"
            );
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_key_file(&path),
        Err(e) => Err(io(e)),
    }
}

/// A backup key file: 32 bytes in hex (64 digits), nothing else but
/// white space.
pub fn read_key_file(path: &Path) -> Result<[u8; 32], BackupError> {
    let text = std::fs::read_to_string(path).map_err(BackupError::Read)?;
    let mut key = [0u8; 32];
    hex::decode_to_slice(text.trim(), &mut key).map_err(|_| {
        BackupError::Key(format!(
            "{} is not a backup key (64 hexadecimal digits)",
            path.display()
        ))
    })?;
    Ok(key)
}

/// The file names a restore writes into the data directory, and their
/// names while being written.
const RESTORING: &str = ".restoring";

/// Restores the backup at `backup` into `dir`, a data directory that must
/// be empty (or not exist): the store, the audit log and the request book
/// are written under
/// temporary names and take their own names only once the whole backup
/// has been read and checked (whole, and as `check` asks authentic), so a
/// damaged, incomplete or crafted backup leaves `dir` empty. The domain
/// rebuilds its filters when it next starts. A domain's own backup key
/// the backup was checked with is kept in `dir`, so that its later
/// backups are made with it too.
pub fn restore(
    backup: &Path,
    dir: &Path,
    check: &Authenticity<'_>,
) -> Result<Verified, BackupError> {
    let target = |reason: String| BackupError::Target {
        path: dir.to_owned(),
        reason,
    };
    let io = |source| BackupError::Io {
        path: dir.to_owned(),
        source,
    };
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(io)?;
        // A file system's own folder may stay (a fresh ext4 has one).
        if let Some(entry) = entries.find(|e| {
            e.as_ref().map_or(true, |e| {
                e.file_name() != std::ffi::OsStr::new("lost+found")
            })
        }) {
            let name = entry.map_err(io)?.file_name();
            return Err(target(format!(
                "it is not empty (it holds {}): restore only into the empty data directory of a \
                 stopped domain",
                name.to_string_lossy()
            )));
        }
    }
    make_private_dir(dir).map_err(io)?;
    let input = std::fs::File::open(backup).map_err(BackupError::Read)?;
    let names = [
        store::STORE_FILE,
        audit::AUDIT_FILE,
        requests::REQUESTS_FILE,
    ];
    let paths = names.map(|name| dir.join(format!("{name}{RESTORING}")));
    let (verified, keys) = match write_files(input, &paths, check) {
        Ok(written) => written,
        Err(e) => {
            for path in &paths {
                let _ = std::fs::remove_file(path);
            }
            return Err(e);
        }
    };
    for (from, name) in paths.iter().zip(names) {
        std::fs::rename(from, dir.join(name)).map_err(io)?;
    }
    if let Some(key) = keys.signing_key {
        write_private(&dir.join(SIGNING_KEY_FILE), &key).map_err(io)?;
    }
    if !keys.seal_files.is_empty() {
        let seal = dir.join(SEAL_DIR);
        make_private_dir(&seal).map_err(io)?;
        for (name, bytes) in keys.seal_files {
            write_private(&seal.join(name), &bytes).map_err(io)?;
        }
    }
    if let Some(key) = verified.domain_key {
        let seal = dir.join(SEAL_DIR);
        make_private_dir(&seal).map_err(io)?;
        let hex = format!("{}\n", hex::encode(key));
        write_private(&seal.join(BACKUP_KEY_FILE), hex.as_bytes()).map_err(io)?;
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io)?;
    Ok(verified)
}

/// The seal's keys a backup holds, written after its files.
#[derive(Default)]
struct Keys {
    /// A backup taken before the seal's folder: the Ed25519 key.
    signing_key: Option<Vec<u8>>,
    /// The seal's files, by name (one of [`SEAL_FILES`]).
    seal_files: Vec<(&'static str, Vec<u8>)>,
}

/// The store's, the audit log's and the request book's files (at `paths`,
/// in that order) written from `input`, each committed durably at the end;
/// and the seal's keys the backup holds.
fn write_files(
    input: impl Read,
    paths: &[PathBuf; 3],
    check: &Authenticity<'_>,
) -> Result<(Verified, Keys), BackupError> {
    let create = |path: &Path| {
        let db = redb::Database::create(path).map_err(|source| BackupError::Create {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
        // Personal data: its owner's only, as the domain keeps its own.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(
            |source| BackupError::Io {
                path: path.to_owned(),
                source,
            },
        )?;
        Ok::<_, BackupError>(db)
    };
    let store_db = create(&paths[0])?;
    let audit_db = create(&paths[1])?;
    let book_db = create(&paths[2])?;
    let mut store_txn = Some(begin(&store_db)?);
    let mut audit_txn = Some(begin(&audit_db)?);
    let mut book_txn = Some(begin(&book_db)?);
    let mut pending = 0usize;
    let mut keys = Keys::default();
    let verified = read(input, check, |entry| {
        match entry {
            BackupEntry::SigningKey(key) => {
                if key.len() != 32 {
                    return Err(BackupError::Damaged(
                        "its signing key is not 32 bytes".into(),
                    ));
                }
                keys.signing_key = Some(key.to_vec());
                return Ok(());
            }
            BackupEntry::SealFile(name, bytes) => {
                // Only the seal's own files: a name is never a path.
                let name = SEAL_FILES
                    .into_iter()
                    .find(|known| *known == name)
                    .ok_or_else(|| {
                        BackupError::Damaged(format!("it holds an unknown seal file {name:?}"))
                    })?;
                keys.seal_files.push((name, bytes.to_vec()));
                return Ok(());
            }
            _ => {}
        }
        let (db, txn) = match entry {
            BackupEntry::Audit(..) => (&audit_db, &mut audit_txn),
            BackupEntry::Request(..) => (&book_db, &mut book_txn),
            _ => (&store_db, &mut store_txn),
        };
        let Some(open) = txn.as_ref() else {
            return Err(BackupError::Damaged("an entry after the end".into()));
        };
        match entry {
            BackupEntry::Record(id, value) => {
                open.open_table(store::RECORDS)?.insert(id, value)?;
            }
            BackupEntry::Key(digest, id) => {
                open.open_multimap_table(store::KEYS)?.insert(digest, id)?;
            }
            BackupEntry::Meta(name, value) => {
                open.open_table(store::META)?.insert(name, value)?;
            }
            BackupEntry::Audit(at, json) => {
                open.open_table(audit::ENTRIES)?.insert(at, json)?;
            }
            BackupEntry::Request(table, key, value) => {
                open.open_table(requests::table(table))?
                    .insert(key, value)?;
            }
            // Kept aside above.
            BackupEntry::SigningKey(_) | BackupEntry::SealFile(..) => {}
        }
        pending += 1;
        if pending >= RESTORE_BATCH {
            pending = 0;
            // Not durable yet: the last commit below makes it all so.
            if let Some(done) = txn.take() {
                done.commit()?;
            }
            *txn = Some(begin(db)?);
        }
        Ok(())
    })?;
    // Every table exists, even one the backup had no entry for; the last
    // commit of each file is durable, and with it the ones before.
    if let Some(mut txn) = store_txn {
        txn.set_durability(Durability::Immediate)
            .map_err(redb::Error::from)?;
        txn.open_table(store::RECORDS)?;
        txn.open_multimap_table(store::KEYS)?;
        txn.open_table(store::META)?;
        txn.commit()?;
    }
    if let Some(mut txn) = audit_txn {
        txn.set_durability(Durability::Immediate)
            .map_err(redb::Error::from)?;
        txn.open_table(audit::ENTRIES)?;
        txn.commit()?;
    }
    if let Some(mut txn) = book_txn {
        txn.set_durability(Durability::Immediate)
            .map_err(redb::Error::from)?;
        for name in requests::TABLES {
            txn.open_table(requests::table(name))?;
        }
        txn.commit()?;
    }
    Ok((verified, keys))
}

/// A write transaction that is not made durable on its own.
fn begin(db: &redb::Database) -> Result<redb::WriteTransaction, BackupError> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::None)
        .map_err(redb::Error::from)?;
    Ok(txn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use crate::local::audit::{AuditEntry, Requester};
    use crate::local::id::ArchiveId;
    use crate::local::record::RecordBody;
    use crate::local::requests::{BookError, BookWrite, Side};
    use crate::local::space::DiskSpace;
    use crate::local::store::Write as StoreWrite;

    fn space(dir: &Path) -> Arc<DiskSpace> {
        Arc::new(DiskSpace::new(dir, 0))
    }

    proptest::proptest! {
        /// A backup file as an operator may hand it over (truncated,
        /// damaged, another file): refused or read, never a panic.
        #[test]
        fn any_bytes_after_the_magic_are_refused_or_read_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
        ) {
            let mut file = MAGIC.to_vec();
            file.extend(bytes);
            let _ = read(std::io::Cursor::new(file.clone()), &Authenticity::WHOLE, |_| Ok(()));
            let given = given();
            let _ = read(std::io::Cursor::new(file), &checked(&given), |_| Ok(()));
        }
    }

    /// The material of cluster "c"'s backup key, as its secret derives it.
    const MATERIAL: [u8; 32] = [7; 32];

    fn key() -> MacKey {
        MacKey::cluster("c", MATERIAL)
    }

    /// What a restore given cluster "c"'s secret checks with.
    fn given() -> BackupKey<'static> {
        BackupKey::Cluster(&|_cluster| Ok(MATERIAL))
    }

    fn checked<'a>(key: &'a BackupKey<'a>) -> Authenticity<'a> {
        Authenticity {
            key: Some(key),
            required: true,
        }
    }

    /// `bytes` made over as someone without the key would: each record's
    /// value through `change`, the counts and the SHA-256 recomputed, the
    /// MAC copied; `as_before` also makes it a backup of form 2, whose end
    /// has no MAC.
    fn reframe(
        bytes: &[u8],
        change: impl Fn(&[u8]) -> Option<Vec<u8>>,
        as_before: bool,
    ) -> Vec<u8> {
        let mut framer = Framer::new(Vec::new()).unwrap();
        let mut at = MAGIC.len();
        while at < bytes.len() {
            let n = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let frame: Frame<'_> = postcard::from_bytes(&bytes[at + 4..at + 4 + n]).unwrap();
            at += 4 + n;
            let changed;
            let frame = match frame {
                Frame::Header(mut header) if as_before => {
                    header.format = 2;
                    Frame::Header(header)
                }
                Frame::Record(id, value) => match change(value) {
                    Some(value) => {
                        changed = value;
                        Frame::Record(id, &changed)
                    }
                    None => Frame::Record(id, value),
                },
                Frame::EndMac { key, mac, .. } => {
                    let sha256 = framer.sha.clone().finalize().into();
                    let (records, key_entries, audit_entries) =
                        (framer.records, framer.key_entries, framer.audit_entries);
                    if as_before {
                        Frame::End {
                            records,
                            key_entries,
                            audit_entries,
                            sha256,
                        }
                    } else {
                        Frame::EndMac {
                            records,
                            key_entries,
                            audit_entries,
                            sha256,
                            key,
                            mac,
                        }
                    }
                }
                other => other,
            };
            framer.frame(&frame).unwrap();
        }
        framer.out
    }

    /// A stored record's value with its title changed.
    fn retitled(value: &[u8], from: &str, to: &str) -> Option<Vec<u8>> {
        let mut record = crate::local::record::StoredRecord::decode(value).unwrap();
        if record.title != from {
            return None;
        }
        record.title = to.into();
        Some(record.encode().unwrap())
    }

    fn body(title: &str, keys: &[(&str, &str)]) -> RecordBody {
        RecordBody {
            title: title.into(),
            metadata: serde_json::Map::new(),
            content: Some(title.as_bytes().to_vec()),
            keys: keys
                .iter()
                .map(|(t, v)| (t.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    /// A store of `n` records, every third keyed, an audit log of two and
    /// a request book of one request.
    fn domain_files(dir: &Path, n: usize) -> (Store, AuditLog, RequestBook) {
        let store = Store::open(dir, space(dir)).unwrap();
        let writes: Vec<StoreWrite> = (0..n)
            .map(|i| {
                let keys: &[(&str, &str)] = if i % 3 == 0 {
                    &[("id_card", "11010519491231002X")]
                } else {
                    &[]
                };
                StoreWrite::Put(
                    ArchiveId::parse(&format!("J-{i:05}")).unwrap(),
                    body(&format!("t{i}"), keys),
                )
            })
            .collect();
        store.apply(&writes, 1).unwrap();
        let audit = AuditLog::open(dir, space(dir)).unwrap();
        for i in 0..2 {
            audit
                .append(AuditEntry {
                    at_us: 1_000 + i,
                    requester: Requester::default(),
                    key_type: "id_card".into(),
                    value_digest: "d".into(),
                    records: vec![format!("J-{i:05}")],
                    action: None,
                    request: None,
                    prev: String::new(),
                    hash: String::new(),
                })
                .unwrap();
        }
        let book = RequestBook::open(dir, space(dir)).unwrap();
        book.change::<BookError>(Side::Outgoing, "r1", |_| {
            Ok(Some(BookWrite {
                bytes: b"request".to_vec(),
                codes: vec!["C0DE".into()],
                unfinished: true,
            }))
        })
        .unwrap();
        std::fs::create_dir_all(seal_dir()).unwrap();
        std::fs::write(seal_dir().join(SEAL_KEYS_FILE), KEYS).unwrap();
        std::fs::write(seal_dir().join(SEAL_ACTIVE_KEY_FILE), KEY).unwrap();
        (store, audit, book)
    }

    const KEYS: &[u8] = b"{\"keys\": []}";
    const KEY: &[u8] = b"-----BEGIN PRIVATE KEY-----";

    /// The seal's folder the backups of these tests carry.
    fn seal_dir() -> &'static Path {
        static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
        DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
    }

    fn sources<'a>(store: &'a Store, audit: &'a AuditLog, book: &'a RequestBook) -> Sources<'a> {
        Sources {
            store,
            audit,
            book,
            seal_dir: seal_dir(),
        }
    }

    fn backup_of((store, audit, book): &(Store, AuditLog, RequestBook)) -> Vec<u8> {
        let mut out = Vec::new();
        take("A", sources(store, audit, book), &key(), 7, &mut out).unwrap();
        out
    }

    #[test]
    fn a_restored_backup_holds_the_same_records_keys_sequence_and_audit_chain() {
        let dir = tempfile::tempdir().unwrap();
        let files = domain_files(&dir.path().join("a"), 25_000);
        let bytes = backup_of(&files);
        let (store, audit, _) = files;
        let file = dir.path().join("a.backup");
        std::fs::write(&file, &bytes).unwrap();
        let given = given();
        let restored = restore(&file, &dir.path().join("b"), &checked(&given)).unwrap();
        assert!(restored.authentic);
        let header = restored.header;
        assert_eq!(
            (header.records, header.audit_entries, header.sequence),
            (25_000, 2, 1)
        );

        let b = dir.path().join("b");
        let restored = Store::open(&b, space(&b)).unwrap();
        assert_eq!(restored.len().unwrap(), 25_000);
        assert_eq!(restored.sequence().unwrap(), store.sequence().unwrap());
        let id = ArchiveId::parse("J-00003").unwrap();
        assert_eq!(restored.get(&id).unwrap(), store.get(&id).unwrap());
        assert_eq!(
            restored
                .with_key("id_card", "11010519491231002X")
                .unwrap()
                .len(),
            store
                .with_key("id_card", "11010519491231002X")
                .unwrap()
                .len()
        );
        let log = AuditLog::open(&b, space(&b)).unwrap();
        let found = log.verify(None).unwrap();
        assert!(found.intact, "{:?}", found.problems);
        assert_eq!(found.head, audit.head());
        let book = RequestBook::open(&b, space(&b)).unwrap();
        assert_eq!(
            book.by_code(Side::Outgoing, "C0DE").unwrap(),
            Some(("r1".to_owned(), b"request".to_vec()))
        );
        assert_eq!(book.unfinished(Side::Outgoing).unwrap().len(), 1);
        let seal = b.join(SEAL_DIR);
        assert_eq!(std::fs::read(seal.join(SEAL_KEYS_FILE)).unwrap(), KEYS);
        assert_eq!(std::fs::read(seal.join(SEAL_ACTIVE_KEY_FILE)).unwrap(), KEY);
    }

    #[test]
    fn a_backup_cut_short_or_changed_anywhere_is_refused_and_restores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = backup_of(&domain_files(&dir.path().join("a"), 50));
        let file = dir.path().join("bad.backup");
        for cut in [0, 10, 16, 40, bytes.len() / 2, bytes.len() - 1] {
            std::fs::write(&file, &bytes[..cut]).unwrap();
            let target = dir.path().join(format!("cut-{cut}"));
            let e = restore(&file, &target, &checked(&given())).unwrap_err();
            assert!(
                matches!(e, BackupError::Truncated | BackupError::NotABackup),
                "cut at {cut}: {e}"
            );
            assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        }
        let mut changed = bytes.clone();
        let at = changed.len() / 2;
        changed[at] ^= 1;
        std::fs::write(&file, &changed).unwrap();
        assert!(verify(&file, &Authenticity::WHOLE).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        std::fs::write(&file, &longer).unwrap();
        assert!(matches!(
            verify(&file, &Authenticity::WHOLE),
            Err(BackupError::Damaged(_))
        ));
    }

    #[test]
    fn a_backup_of_a_form_before_macs_is_refused_unless_taken_unchecked_then_restored_with_an_empty_request_book(
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut framer = Framer::new(Vec::new()).unwrap();
        let header = BackupHeader {
            format: 1,
            domain: "A".into(),
            taken_at_ms: 7,
            sequence: 0,
            records: 0,
            key_entries: 0,
            audit_entries: 0,
        };
        framer.frame(&Frame::Header(header.clone())).unwrap();
        let sha256 = framer.sha.clone().finalize().into();
        let end = Frame::End {
            records: 0,
            key_entries: 0,
            audit_entries: 0,
            sha256,
        };
        framer.frame(&end).unwrap();
        let file = dir.path().join("old.backup");
        std::fs::write(&file, &framer.out).unwrap();
        let b = dir.path().join("b");
        let given = given();
        assert!(matches!(
            restore(&file, &b, &checked(&given)),
            Err(BackupError::Unauthenticated { format: 1 })
        ));
        assert_eq!(std::fs::read_dir(&b).unwrap().count(), 0);
        let unchecked = Authenticity {
            key: Some(&given),
            required: false,
        };
        let restored = restore(&file, &b, &unchecked).unwrap();
        assert_eq!((restored.header, restored.key), (header, None));
        let book = RequestBook::open(&b, space(&b)).unwrap();
        assert!(book.all(Side::Outgoing).unwrap().is_empty());
    }

    #[test]
    fn a_backup_whose_title_was_changed_and_checksum_recomputed_is_refused_and_restores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = backup_of(&domain_files(&dir.path().join("a"), 10));
        let crafted = reframe(&bytes, |v| retitled(v, "t3", "forged"), false);
        let file = dir.path().join("crafted.backup");
        std::fs::write(&file, &crafted).unwrap();
        // Whole, as far as anyone without the key can tell.
        assert!(verify(&file, &Authenticity::WHOLE).is_ok());
        let target = dir.path().join("b");
        let given = given();
        let e = restore(&file, &target, &checked(&given)).unwrap_err();
        assert!(matches!(e, BackupError::NotAuthentic { .. }), "{e}");
        assert!(e.to_string().contains("not authentic"), "{e}");
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        // Even told to take what it cannot check, a MAC that fails is a no.
        let unchecked = Authenticity {
            key: Some(&given),
            required: false,
        };
        assert!(matches!(
            restore(&file, &target, &unchecked),
            Err(BackupError::NotAuthentic { .. })
        ));
        // Made over as a backup of before MACs, it is refused as having none.
        let downgraded = reframe(&bytes, |v| retitled(v, "t3", "forged"), true);
        std::fs::write(&file, &downgraded).unwrap();
        assert!(matches!(
            restore(&file, &target, &checked(&given)),
            Err(BackupError::Unauthenticated { format: 2 })
        ));
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        // The genuine one restores.
        std::fs::write(&file, &bytes).unwrap();
        assert!(restore(&file, &target, &checked(&given)).unwrap().authentic);
    }

    #[test]
    fn a_backup_made_under_another_clusters_secret_or_checked_without_a_key_is_refused_naming_the_key(
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (store, audit, book) = domain_files(&dir.path().join("a"), 3);
        let mut bytes = Vec::new();
        let theirs = MacKey::cluster("c", [8; 32]);
        take("A", sources(&store, &audit, &book), &theirs, 7, &mut bytes).unwrap();
        let file = dir.path().join("theirs.backup");
        std::fs::write(&file, &bytes).unwrap();
        let given = given();
        let e = verify(&file, &checked(&given)).unwrap_err();
        assert!(matches!(e, BackupError::OtherKey { .. }), "{e}");
        assert!(e.to_string().contains("another key"), "{e}");
        // A domain's own key for a cluster's backup, and no key at all.
        let domain = BackupKey::Domain(MATERIAL);
        assert!(matches!(
            verify(&file, &checked(&domain)),
            Err(BackupError::OtherKey { .. })
        ));
        let none = Authenticity {
            key: None,
            required: true,
        };
        let e = verify(&file, &none).unwrap_err();
        assert!(
            matches!(&e, BackupError::NoKey { wanted: KeyId::Cluster { cluster, .. }, .. } if cluster == "c"),
            "{e}"
        );
        assert!(e.to_string().contains("--cluster-secret-file"), "{e}");
    }

    #[test]
    fn a_domain_without_a_cluster_secret_keeps_one_backup_key_and_its_restore_keeps_it_too() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let files = domain_files(&a, 3);
        let own = domain_key(&a).unwrap();
        assert_eq!(domain_key(&a).unwrap(), own);
        let path = a.join(SEAL_DIR).join(BACKUP_KEY_FILE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let mut bytes = Vec::new();
        let (store, audit, book) = &files;
        let key = MacKey::domain(own);
        take("A", sources(store, audit, book), &key, 7, &mut bytes).unwrap();
        let file = dir.path().join("a.backup");
        std::fs::write(&file, &bytes).unwrap();
        // Not under a cluster's secret, nor another domain's key.
        let given = given();
        assert!(matches!(
            verify(&file, &checked(&given)),
            Err(BackupError::OtherKey { .. })
        ));
        let other = BackupKey::Domain([9; 32]);
        assert!(matches!(
            verify(&file, &checked(&other)),
            Err(BackupError::OtherKey { .. })
        ));
        let copy = BackupKey::Domain(read_key_file(&path).unwrap());
        let b = dir.path().join("b");
        assert!(restore(&file, &b, &checked(&copy)).unwrap().authentic);
        assert_eq!(domain_key(&b).unwrap(), own);
    }

    #[test]
    fn a_restore_refuses_a_directory_that_holds_anything() {
        let dir = tempfile::tempdir().unwrap();
        let files = domain_files(&dir.path().join("a"), 3);
        let file = dir.path().join("a.backup");
        std::fs::write(&file, backup_of(&files)).unwrap();
        let e = restore(&file, &dir.path().join("a"), &checked(&given())).unwrap_err();
        assert!(e.to_string().contains("not empty"), "{e}");
    }

    #[test]
    fn writes_made_while_a_backup_streams_are_not_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let (store, audit, book) = domain_files(&dir.path().join("a"), 10);
        /// Writes a record into the store at the backup's first byte.
        struct WritesMeanwhile<'a>(&'a Store, bool);
        impl std::io::Write for WritesMeanwhile<'_> {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if !self.1 {
                    self.1 = true;
                    let id = ArchiveId::parse("J-late").unwrap();
                    self.0
                        .apply(&[StoreWrite::Put(id, body("late", &[]))], 2)
                        .unwrap();
                }
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let header = take(
            "A",
            sources(&store, &audit, &book),
            &key(),
            7,
            WritesMeanwhile(&store, false),
        )
        .unwrap();
        assert_eq!((header.records, header.sequence), (10, 1));
        assert_eq!(store.len().unwrap(), 11);
    }
}
