//! `xarchive backup` and `xarchive restore`: an online backup of a running
//! domain, saved only once it is whole, and its restore into the empty
//! data directory of a stopped domain, once its MAC shows it is as its
//! domain wrote it (the cluster secret, or the domain's own backup key).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use xarchive_node::backup::{self, Authenticity, BackupError, BackupHeader, BackupKey, Verified};
use xarchive_node::security::auth::{AuthConfig, Authority};
use xarchive_node::security::member::BACKUP_MAC;

use super::ServerArgs;

#[derive(clap::Args)]
pub struct BackupArgs {
    /// The file to write: replaced only by a whole, checked backup (it is
    /// written beside it under a temporary name first).
    #[arg(long)]
    to: PathBuf,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct RestoreArgs {
    /// The backup file (from `xarchive backup`).
    from: PathBuf,
    /// The stopped domain's data directory: empty, or not yet made.
    #[arg(long, required_unless_present = "check")]
    data: Option<PathBuf>,
    /// Only check that the file is a whole, undamaged backup, and with a
    /// key given that its MAC checks; write nothing.
    #[arg(long)]
    check: bool,
    /// The cluster secret the backup was taken under (its domain's
    /// `--cluster-secret-file`): its MAC is checked with a key derived
    /// from it.
    #[arg(long, value_name = "FILE")]
    cluster_secret_file: Option<PathBuf>,
    /// A domain's configuration file: its `auth.cluster_secret_file`, or,
    /// without one, the `seal/backup.key` of its data directory if there
    /// is one.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// A copy of the backup key of the domain the backup was taken of, for
    /// a domain without a cluster secret: its data directory's
    /// `seal/backup.key`.
    #[arg(long, value_name = "FILE", conflicts_with = "cluster_secret_file")]
    backup_key_file: Option<PathBuf>,
    /// Restore even a backup whose MAC is not checked: one taken before
    /// backups carried one, or one whose key is not given. Only that it is
    /// whole is checked then; a MAC that does not check under a key given
    /// is refused all the same.
    #[arg(long)]
    accept_unauthenticated: bool,
}

/// What a restore checks a backup's MAC with, from its arguments.
enum Given {
    /// The cluster secret's file.
    Secret(PathBuf),
    /// A domain's own backup key.
    Domain([u8; 32]),
    None,
}

impl RestoreArgs {
    /// The key named by `--cluster-secret-file`, `--backup-key-file` or
    /// `--config` (in that order).
    fn given(&self) -> anyhow::Result<Given> {
        if let Some(path) = &self.cluster_secret_file {
            return Ok(Given::Secret(path.clone()));
        }
        if let Some(path) = &self.backup_key_file {
            let key = backup::read_key_file(path)
                .with_context(|| format!("--backup-key-file {}", path.display()))?;
            return Ok(Given::Domain(key));
        }
        let Some(config) = &self.config else {
            return Ok(Given::None);
        };
        let text = std::fs::read_to_string(config)
            .with_context(|| format!("cannot read {}", config.display()))?;
        let config = xarchive_node::NodeConfig::from_toml(&text)
            .with_context(|| format!("{}", config.display()))?;
        if let Some(path) = config.auth.cluster_secret_file {
            return Ok(Given::Secret(path));
        }
        let own = config
            .data
            .join(backup::SEAL_DIR)
            .join(backup::BACKUP_KEY_FILE);
        if own.exists() {
            let key = backup::read_key_file(&own).with_context(|| format!("{}", own.display()))?;
            return Ok(Given::Domain(key));
        }
        Ok(Given::None)
    }
}

/// The backup's MAC key for `cluster`, from the cluster secret in `path`
/// (read as `serve` reads it).
fn derived(path: &Path, cluster: &str) -> Result<[u8; 32], BackupError> {
    let config = AuthConfig {
        cluster_secret_file: Some(path.to_owned()),
        ..AuthConfig::default()
    };
    let authority =
        Authority::new(&config, cluster).map_err(|e| BackupError::Key(e.to_string()))?;
    authority
        .member_key()
        .map(|member| member.material(BACKUP_MAC))
        .ok_or_else(|| BackupError::Key(format!("{} holds no secret", path.display())))
}

/// What a backup or a restore did, for `--output json`.
#[derive(serde::Serialize)]
struct Done<'a> {
    file: &'a Path,
    domain: &'a str,
    taken_at_ms: i64,
    sequence: u64,
    records: u64,
    key_entries: u64,
    audit_entries: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Path>,
    /// The key the backup's MAC names (none: a backup of before MACs).
    #[serde(skip_serializing_if = "Option::is_none")]
    authenticated_by: Option<String>,
    /// Whether its MAC was checked and holds (a restore's).
    #[serde(skip_serializing_if = "Option::is_none")]
    authentic: Option<bool>,
}

fn done<'a>(file: &'a Path, header: &'a BackupHeader) -> Done<'a> {
    Done {
        file,
        domain: &header.domain,
        taken_at_ms: header.taken_at_ms,
        sequence: header.sequence,
        records: header.records,
        key_entries: header.key_entries,
        audit_entries: header.audit_entries,
        bytes: None,
        data: None,
        authenticated_by: None,
        authentic: None,
    }
}

fn taken_at(header: &BackupHeader) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(header.taken_at_ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{} ms", header.taken_at_ms))
}

/// Whether `e` is the disk refusing a write for want of space.
fn no_space(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::ENOSPC) || e.kind() == std::io::ErrorKind::StorageFull
}

pub async fn backup(args: BackupArgs) -> anyhow::Result<ExitCode> {
    let to = args.to.clone();
    let folder = match to.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = to
        .file_name()
        .with_context(|| format!("--to {} names no file", to.display()))?
        .to_string_lossy()
        .into_owned();
    // Owner-only (0600, whatever the umask: it holds every identity
    // number of the domain), and removed on every way out but the last
    // rename: nothing half-written is ever left under the backup's name.
    let partial = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        .tempfile_in(&folder)
        .with_context(|| format!("cannot create a file in {}", folder.display()))?;
    super::private_file::owner_only(partial.as_file())
        .with_context(|| format!("cannot create a file in {}", folder.display()))?;
    let started = Instant::now();
    let mut response = args.server.client()?.backup().await?;
    let wait = Duration::from_secs(args.server.timeout);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, partial.as_file());
    let mut bytes = 0u64;
    let full = |e: std::io::Error, bytes: u64| -> anyhow::Error {
        if no_space(&e) {
            anyhow::anyhow!(
                "no space left on the disk holding {}: the backup was not written ({} bytes \
                 had been received; the partial copy was removed and {} was left as it was)",
                folder.display(),
                bytes,
                to.display()
            )
        } else {
            anyhow::Error::new(e)
                .context(format!("cannot write the backup in {}", folder.display()))
        }
    };
    loop {
        let piece = tokio::time::timeout(wait, response.chunk())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "the domain sent nothing for {} s: the backup was not written",
                    wait.as_secs()
                )
            })?
            .context("the backup broke off before its end: it was not written")?;
        let Some(piece) = piece else { break };
        out.write_all(&piece).map_err(|e| full(e, bytes))?;
        bytes += piece.len() as u64;
    }
    out.flush().map_err(|e| full(e, bytes))?;
    drop(out);
    partial.as_file().sync_all().map_err(|e| full(e, bytes))?;
    // Whole; its MAC is the restore's to check (this client holds no key).
    let received = backup::verify(partial.path(), &Authenticity::WHOLE)
        .context("the backup received is not whole; it was not written")?;
    let header = received.header;
    let key = received.key.map(|k| k.to_string());
    partial
        .persist(&to)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot name the backup {}", to.display()))?;
    std::fs::File::open(&folder)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot make {} durable", folder.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    if super::json(false) {
        super::print_json(&Done {
            bytes: Some(bytes),
            authenticated_by: key,
            ..done(&to, &header)
        })?;
    } else {
        xarchive::outln!(
            "backup of domain {} as of {} (store sequence {}): {} records, {} key entries, \
             {} audit entries; {} bytes in {seconds:.1} s, written to {}; {}",
            header.domain,
            taken_at(&header),
            header.sequence,
            header.records,
            header.key_entries,
            header.audit_entries,
            bytes,
            to.display(),
            match &key {
                Some(key) => format!("its MAC is under {key}, which a restore needs"),
                None => "it carries no MAC (the domain runs an older version)".into(),
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn restore(args: RestoreArgs) -> anyhow::Result<ExitCode> {
    // The restored store and audit log hold every identity number: their
    // owner's only (0600), as `serve` makes them, even in a data
    // directory made beforehand with a looser mode.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let given = args.given()?;
    if let Given::Secret(path) = &given {
        // A file that cannot be read is said now, not after the backup.
        derived(path, "").with_context(|| format!("the cluster secret {}", path.display()))?;
    }
    let from = args.from.clone();
    let data = args.data.clone().filter(|_| !args.check);
    let (check, accept) = (args.check, args.accept_unauthenticated);
    let verified = tokio::task::spawn_blocking(move || {
        let secret = |cluster: &str| match &given {
            Given::Secret(path) => derived(path, cluster),
            _ => Err(BackupError::Key("no cluster secret given".into())),
        };
        let key = match &given {
            Given::Secret(_) => Some(BackupKey::Cluster(&secret)),
            Given::Domain(key) => Some(BackupKey::Domain(*key)),
            Given::None => None,
        };
        let authenticity = Authenticity {
            key: key.as_ref(),
            // Not with --accept-unauthenticated, nor for `--check` without
            // a key (it says whether the file is whole).
            required: !(accept || (check && key.is_none())),
        };
        match &data {
            Some(data) => backup::restore(&from, data, &authenticity),
            None => backup::verify(&from, &authenticity),
        }
    })
    .await?
    .with_context(|| format!("{}", args.from.display()))?;
    let Verified {
        header,
        key,
        authentic,
        ..
    } = &verified;
    let data = args.data.as_deref().filter(|_| !args.check);
    if super::json(false) {
        super::print_json(&Done {
            data,
            authenticated_by: key.as_ref().map(|k| k.to_string()),
            authentic: Some(*authentic),
            ..done(&args.from, header)
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let what = format!(
        "backup of domain {} as of {} (store sequence {}): {} records, {} key entries, {} audit entries",
        header.domain,
        taken_at(header),
        header.sequence,
        header.records,
        header.key_entries,
        header.audit_entries
    );
    let how = match (key, authentic) {
        (Some(key), true) => format!("its MAC checks under {key}"),
        (Some(key), false) => format!("its MAC, under {key}, was NOT checked: no key was given"),
        (None, _) => {
            "it carries no MAC (taken before backups did): it was NOT authenticated".into()
        }
    };
    match data {
        Some(data) => xarchive::outln!(
            "restored the {what} into {}; {how}. Start the domain there (it rebuilds its \
             filters from the store), then check it with /v1/filter/verify",
            data.display()
        ),
        None => xarchive::outln!("{} is a whole {what}; {how}", args.from.display()),
    }
    Ok(ExitCode::SUCCESS)
}
