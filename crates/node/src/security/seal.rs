//! The domain's seal: the key it seals copies, answers and certificates
//! with, and every key it sealed with before, each with the times it was
//! valid, kept in `<data>/seal/` so that what was sealed before a rotation
//! still verifies. The key is made here (SM2 with SM3 unless
//! `seal.algorithm` says otherwise), or is the archive's own, issued by its
//! CA (`seal.key_file` with `seal.certificate_file`): the certificate then
//! travels in the trust list, for an outside verifier to check the chain.
//!
//! Rotating or revoking is done with the domain stopped
//! (`xarchive seal rotate|revoke --data DIR`), or, for a CA's key, by
//! configuring its successor: at its next start the domain seals with the
//! new key and publishes both.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use xarchive_seal::trust::format_time;
use xarchive_seal::{Algorithm, KeyId, KeyRecord, SecretKey};

use crate::local::private_file::{make_private_dir, write_private};

/// The seal's folder inside the data directory; in it, every key's public
/// record and the key in use made here (PKCS#8); the Ed25519 key of a
/// domain made before, taken in as its first key at the next start.
pub use crate::local::backup::{
    SEAL_ACTIVE_KEY_FILE as ACTIVE_KEY_FILE, SEAL_DIR, SEAL_KEYS_FILE as KEYS_FILE,
    SIGNING_KEY_FILE as LEGACY_KEY_FILE,
};

/// How far before its making a key is valid from: a clock stepped back a
/// little must not make the first things it seals fail.
const CLOCK_MARGIN_SECS: i64 = 300;

/// `[seal]`: which key the domain seals with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SealConfig {
    /// The algorithm of a key made here (the first one, and at each
    /// rotation): `sm2-sm3` (GM/T 0003, the algorithm of Chinese
    /// electronic seals) or `ed25519`.
    pub algorithm: Algorithm,
    /// The archive's own key from its CA, PKCS#8 PEM, instead of one made
    /// here.
    pub key_file: Option<PathBuf>,
    /// The X.509 certificate of `key_file`'s key, with its CA's chain
    /// (PEM), published in the trust list.
    pub certificate_file: Option<PathBuf>,
}

impl Default for SealConfig {
    fn default() -> Self {
        SealConfig {
            algorithm: Algorithm::Sm2Sm3,
            key_file: None,
            certificate_file: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SealKeyError {
    #[error("cannot read or write {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is damaged: {why} (restore the data directory's seal/ from a backup)")]
    Damaged { path: PathBuf, why: String },
    #[error("{0}")]
    Key(#[from] xarchive_seal::KeyError),
    #[error("seal.certificate_file {path}: {why}")]
    Certificate { path: PathBuf, why: String },
    #[error("seal.certificate_file is set without seal.key_file: the certificate is of the archive's own key")]
    CertificateWithoutKey,
    #[error("the key {0} was revoked: configure or make another")]
    Revoked(KeyId),
    #[error("no key {0} here")]
    NoSuchKey(KeyId),
    #[error("this domain seals with seal.key_file: rotate by configuring its successor (key and certificate) and restarting")]
    Configured,
}

/// What `keys.json` holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct KeysFile {
    keys: Vec<KeyRecord>,
}

/// The seal's keys, as the domain holds them.
pub struct Keyring {
    records: Vec<KeyRecord>,
    active: SecretKey,
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

fn read_file(path: &Path) -> Result<Option<Vec<u8>>, SealKeyError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SealKeyError::File {
            path: path.to_owned(),
            source,
        }),
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), SealKeyError> {
    write_private(path, bytes).map_err(|source| SealKeyError::File {
        path: path.to_owned(),
        source,
    })
}

/// The seal's folder in `data`, made (readable by its owner alone) if
/// missing.
fn folder(data: &Path) -> Result<PathBuf, SealKeyError> {
    let dir = data.join(SEAL_DIR);
    make_private_dir(&dir).map_err(|source| SealKeyError::File {
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

/// The key configured in `seal.key_file`, with the record its
/// certificate (if any) bounds.
fn configured(config: &SealConfig) -> Result<Option<(SecretKey, KeyRecord)>, SealKeyError> {
    let Some(key_file) = &config.key_file else {
        if config.certificate_file.is_some() {
            return Err(SealKeyError::CertificateWithoutKey);
        }
        return Ok(None);
    };
    let pem = read_file(key_file)?.ok_or_else(|| SealKeyError::File {
        path: key_file.clone(),
        source: std::io::ErrorKind::NotFound.into(),
    })?;
    let key = SecretKey::from_pkcs8_pem(&String::from_utf8_lossy(&pem))?;
    let mut record = KeyRecord::new(
        &key.public(),
        now() - time::Duration::seconds(CLOCK_MARGIN_SECS),
    );
    if let Some(path) = &config.certificate_file {
        let bad = |why: String| SealKeyError::Certificate {
            path: path.clone(),
            why,
        };
        let chain = read_file(path)?.ok_or_else(|| bad("no such file".into()))?;
        let (not_before, not_after) = leaf_validity(&chain, &key, bad)?;
        let now = now().unix_timestamp();
        if now < not_before || now >= not_after {
            return Err(SealKeyError::Certificate {
                path: path.clone(),
                why: format!(
                    "it is valid from {} to {}, not now",
                    format_time(not_before),
                    format_time(not_after)
                ),
            });
        }
        record.not_after = Some(format_time(not_after));
        record.certificate = Some(String::from_utf8_lossy(&chain).into_owned());
    }
    Ok(Some((key, record)))
}

/// The validity of the first certificate of a PEM `chain`, which must
/// certify `key`.
fn leaf_validity(
    chain: &[u8],
    key: &SecretKey,
    bad: impl Fn(String) -> SealKeyError,
) -> Result<(i64, i64), SealKeyError> {
    let pem = x509_parser::pem::Pem::iter_from_buffer(chain)
        .next()
        .ok_or_else(|| bad("no PEM certificate in it".into()))?
        .map_err(|e| bad(format!("not PEM: {e}")))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| bad(format!("not an X.509 certificate: {e}")))?;
    if cert.public_key().raw != key.public().to_spki_der().as_slice() {
        return Err(bad("it certifies another key than seal.key_file's".into()));
    }
    let validity = cert.validity();
    Ok((
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    ))
}

impl Keyring {
    /// The seal of the domain whose data directory is `data`: its keys
    /// read, the legacy key taken in, the configured key taken in (the
    /// one before retired), or a first key made.
    pub fn open(data: &Path, config: &SealConfig) -> Result<Keyring, SealKeyError> {
        let dir = folder(data)?;
        let keys_path = dir.join(KEYS_FILE);
        let mut records = match read_file(&keys_path)? {
            Some(bytes) => {
                serde_json::from_slice::<KeysFile>(&bytes)
                    .map_err(|e| SealKeyError::Damaged {
                        path: keys_path.clone(),
                        why: e.to_string(),
                    })?
                    .keys
            }
            None => Vec::new(),
        };
        let made_here = read_file(&dir.join(ACTIVE_KEY_FILE))?
            .map(|pem| SecretKey::from_pkcs8_pem(&String::from_utf8_lossy(&pem)))
            .transpose()?;
        let legacy = read_file(&data.join(LEGACY_KEY_FILE))?;
        let before = records.clone();
        let mut took_legacy = false;
        let active = if let Some((key, record)) = configured(config)? {
            take_in(&mut records, record)?;
            key
        } else if let Some(key) = made_here {
            take_in(
                &mut records,
                KeyRecord::new(
                    &key.public(),
                    now() - time::Duration::seconds(CLOCK_MARGIN_SECS),
                ),
            )?;
            key
        } else if let Some(seed) = legacy {
            let seed: [u8; 32] = seed.try_into().map_err(|_| SealKeyError::Damaged {
                path: data.join(LEGACY_KEY_FILE),
                why: "not 32 bytes".into(),
            })?;
            let key = SecretKey::ed25519_from_seed(&seed);
            // It sealed before keys were given times: valid from the start.
            take_in(
                &mut records,
                KeyRecord::new(&key.public(), OffsetDateTime::UNIX_EPOCH),
            )?;
            write(&dir.join(ACTIVE_KEY_FILE), key.to_pkcs8_pem().as_bytes())?;
            took_legacy = true;
            key
        } else {
            let key = SecretKey::generate(config.algorithm);
            take_in(
                &mut records,
                KeyRecord::new(
                    &key.public(),
                    now() - time::Duration::seconds(CLOCK_MARGIN_SECS),
                ),
            )?;
            write(&dir.join(ACTIVE_KEY_FILE), key.to_pkcs8_pem().as_bytes())?;
            key
        };
        let keyring = Keyring { records, active };
        if keyring.records != before {
            keyring.save(data)?;
        }
        if took_legacy {
            // Taken in and saved: the seal's folder is where it is kept now.
            let _ = std::fs::remove_file(data.join(LEGACY_KEY_FILE));
        }
        Ok(keyring)
    }

    fn save(&self, data: &Path) -> Result<(), SealKeyError> {
        let file = KeysFile {
            keys: self.records.clone(),
        };
        // Records of strings always encode.
        let bytes = serde_json::to_vec_pretty(&file).unwrap_or_default();
        write(&folder(data)?.join(KEYS_FILE), &bytes)
    }

    /// Makes a new key of `algorithm` the one sealing from now on, the one
    /// before valid for what it sealed until now. The domain must be
    /// stopped (its next start publishes both).
    pub fn rotate(
        data: &Path,
        config: &SealConfig,
        algorithm: Algorithm,
    ) -> Result<KeyRecord, SealKeyError> {
        if config.key_file.is_some() {
            return Err(SealKeyError::Configured);
        }
        Keyring::open(data, config)?.replace_active(data, algorithm)
    }

    /// A new key of `algorithm` made and put in use, saved.
    fn replace_active(
        &mut self,
        data: &Path,
        algorithm: Algorithm,
    ) -> Result<KeyRecord, SealKeyError> {
        let key = SecretKey::generate(algorithm);
        let record = KeyRecord::new(&key.public(), now());
        take_in(&mut self.records, record.clone())?;
        write(
            &folder(data)?.join(ACTIVE_KEY_FILE),
            key.to_pkcs8_pem().as_bytes(),
        )?;
        self.active = key;
        self.save(data)?;
        Ok(record)
    }

    /// Revokes key `id`: nothing it sealed verifies from now on, whenever
    /// dated (a key stolen). Revoking the key in use made here makes a
    /// new one; the archive's own (`seal.key_file`) is replaced by
    /// configuring another.
    pub fn revoke(data: &Path, config: &SealConfig, id: KeyId) -> Result<(), SealKeyError> {
        let mut keyring = Keyring::open(data, config)?;
        let in_use = keyring.active.public().id() == id;
        if in_use && config.key_file.is_some() {
            return Err(SealKeyError::Configured);
        }
        let record = keyring
            .records
            .iter_mut()
            .find(|r| r.id == id)
            .ok_or(SealKeyError::NoSuchKey(id))?;
        let at = format_time(now().unix_timestamp());
        record.revoked = Some(at.clone());
        record.not_after.get_or_insert(at);
        if in_use {
            keyring.replace_active(data, keyring.active.algorithm())?;
        } else {
            keyring.save(data)?;
        }
        Ok(())
    }

    /// The key sealing now.
    pub fn active(&self) -> &SecretKey {
        &self.active
    }

    /// Every key, oldest first, as the trust list publishes them.
    pub fn records(&self) -> &[KeyRecord] {
        &self.records
    }

    /// Seals `payload` with the active key.
    pub fn seal(&self, payload: Vec<u8>) -> Vec<u8> {
        xarchive_seal::seal(&self.active, payload)
    }
}

/// Puts `record` in `records` as the key sealing from now on: the one
/// sealing until now retired (valid until then), a key known already
/// left as it is (unless revoked: then refused).
fn take_in(records: &mut Vec<KeyRecord>, record: KeyRecord) -> Result<(), SealKeyError> {
    if let Some(known) = records.iter().find(|r| r.id == record.id) {
        if known.revoked.is_some() {
            return Err(SealKeyError::Revoked(record.id));
        }
        return Ok(());
    }
    let retired_at = format_time(now().unix_timestamp());
    for old in records.iter_mut().filter(|r| r.is_active()) {
        old.not_after = Some(retired_at.clone());
    }
    records.push(record);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> SealConfig {
        SealConfig::default()
    }

    #[test]
    fn a_new_domain_seals_with_sm2_kept_across_restarts_readable_by_its_owner_alone() {
        let dir = tempfile::tempdir().unwrap();
        let first = Keyring::open(dir.path(), &config()).unwrap();
        assert_eq!(first.active().algorithm(), Algorithm::Sm2Sm3);
        let again = Keyring::open(dir.path(), &config()).unwrap();
        assert_eq!(again.active().public(), first.active().public());
        assert_eq!(again.records().len(), 1);
        use std::os::unix::fs::PermissionsExt;
        for file in [ACTIVE_KEY_FILE, KEYS_FILE] {
            let mode = std::fs::metadata(dir.path().join(SEAL_DIR).join(file))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{file}");
        }
    }

    #[test]
    fn a_legacy_ed25519_key_is_taken_in_and_keeps_sealing_until_rotated() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LEGACY_KEY_FILE), [7u8; 32]).unwrap();
        let keyring = Keyring::open(dir.path(), &config()).unwrap();
        assert_eq!(keyring.active().algorithm(), Algorithm::Ed25519);
        let legacy = SecretKey::ed25519_from_seed(&[7; 32]).public();
        assert_eq!(keyring.active().public(), legacy);
        assert!(!dir.path().join(LEGACY_KEY_FILE).exists());
        // Something it sealed long ago still verifies under its record.
        assert_eq!(keyring.records()[0].valid_at(1), Ok(()));

        let new = Keyring::rotate(dir.path(), &config(), Algorithm::Sm2Sm3).unwrap();
        let keyring = Keyring::open(dir.path(), &config()).unwrap();
        assert_eq!(keyring.active().public().id(), new.id);
        let old = &keyring.records()[0];
        assert!(old.not_after.is_some() && old.revoked.is_none());
        assert_eq!(old.valid_at(1), Ok(()), "what it sealed before stays valid");
    }

    #[test]
    fn a_revoked_key_verifies_nothing_and_the_domain_seals_with_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let first = Keyring::open(dir.path(), &config()).unwrap();
        let id = first.active().public().id();
        Keyring::revoke(dir.path(), &config(), id).unwrap();
        let keyring = Keyring::open(dir.path(), &config()).unwrap();
        assert_ne!(keyring.active().public().id(), id);
        let revoked = keyring.records().iter().find(|r| r.id == id).unwrap();
        assert!(revoked.valid_at(now().unix_timestamp() - 100).is_err());
        assert!(matches!(
            Keyring::revoke(dir.path(), &config(), KeyId([0; 8])),
            Err(SealKeyError::NoSuchKey(_))
        ));
    }

    #[test]
    fn a_configured_key_is_taken_in_and_a_certificate_of_another_key_refused() {
        let dir = tempfile::tempdir().unwrap();
        let made = Keyring::open(dir.path(), &config()).unwrap();
        let theirs = SecretKey::generate(Algorithm::Sm2Sm3);
        let key_file = dir.path().join("archive.pem");
        std::fs::write(&key_file, theirs.to_pkcs8_pem().as_bytes()).unwrap();
        let configured = SealConfig {
            key_file: Some(key_file),
            ..config()
        };
        let keyring = Keyring::open(dir.path(), &configured).unwrap();
        assert_eq!(keyring.active().public(), theirs.public());
        assert_eq!(keyring.records().len(), 2);
        assert!(
            keyring.records()[0].not_after.is_some(),
            "the made key is retired"
        );
        assert_eq!(keyring.records()[0].id, made.active().public().id());
        assert!(matches!(
            Keyring::rotate(dir.path(), &configured, Algorithm::Sm2Sm3),
            Err(SealKeyError::Configured)
        ));
        let bad_cert = dir.path().join("cert.pem");
        std::fs::write(&bad_cert, "not a certificate").unwrap();
        let with_cert = SealConfig {
            certificate_file: Some(bad_cert),
            ..configured
        };
        assert!(matches!(
            Keyring::open(dir.path(), &with_cert),
            Err(SealKeyError::Certificate { .. })
        ));
        assert!(matches!(
            Keyring::open(
                dir.path(),
                &SealConfig {
                    certificate_file: Some(dir.path().join("x")),
                    ..config()
                }
            ),
            Err(SealKeyError::CertificateWithoutKey)
        ));
    }

    #[test]
    fn a_damaged_keys_file_is_refused_saying_where() {
        let dir = tempfile::tempdir().unwrap();
        Keyring::open(dir.path(), &config()).unwrap();
        std::fs::write(dir.path().join(SEAL_DIR).join(KEYS_FILE), b"{").unwrap();
        let e = Keyring::open(dir.path(), &config()).err().unwrap();
        assert!(e.to_string().contains(KEYS_FILE), "{e}");
    }
}
