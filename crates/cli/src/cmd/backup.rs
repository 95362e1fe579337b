//! `xarchive backup` and `xarchive restore`: an online backup of a running
//! domain, saved only once it is whole, and its restore into the empty
//! data directory of a stopped domain.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use xarchive_node::backup::{self, BackupHeader};

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
    /// Only check that the file is a whole, undamaged backup; write nothing.
    #[arg(long)]
    check: bool,
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
    let header = backup::verify(partial.path())
        .context("the backup received is not whole; it was not written")?;
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
            ..done(&to, &header)
        })?;
    } else {
        xarchive::outln!(
            "backup of domain {} as of {} (store sequence {}): {} records, {} key entries, \
             {} audit entries; {} bytes in {seconds:.1} s, written to {}",
            header.domain,
            taken_at(&header),
            header.sequence,
            header.records,
            header.key_entries,
            header.audit_entries,
            bytes,
            to.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn restore(args: RestoreArgs) -> anyhow::Result<ExitCode> {
    // The restored store and audit log hold every identity number: their
    // owner's only (0600), as `serve` makes them, even in a data
    // directory made beforehand with a looser mode.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let from = args.from.clone();
    let data = args.data.clone();
    let header = tokio::task::spawn_blocking(move || match (&data, args.check) {
        (Some(data), false) => backup::restore(&from, data),
        _ => backup::verify(&from),
    })
    .await?
    .with_context(|| format!("{}", args.from.display()))?;
    let data = args.data.as_deref().filter(|_| !args.check);
    if super::json(false) {
        super::print_json(&Done {
            data,
            ..done(&args.from, &header)
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let what = format!(
        "backup of domain {} as of {} (store sequence {}): {} records, {} key entries, {} audit entries",
        header.domain,
        taken_at(&header),
        header.sequence,
        header.records,
        header.key_entries,
        header.audit_entries
    );
    match data {
        Some(data) => xarchive::outln!(
            "restored the {what} into {}; start the domain there (it rebuilds its filters \
             from the store), then check it with /v1/filter/verify",
            data.display()
        ),
        None => xarchive::outln!("{} is a whole {what}", args.from.display()),
    }
    Ok(ExitCode::SUCCESS)
}
