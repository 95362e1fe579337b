//! A small secret written to the data directory (the signing key): whole
//! or not at all, readable by its owner alone, durable before its name
//! points to it. The domain's start and a backup's restore write it alike.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path`: first to a partial file of mode 0600, synced,
/// then renamed over `path`, and the directory synced.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut out = options.open(&partial)?;
        out.write_all(bytes)?;
        out.sync_all()?;
    }
    std::fs::rename(&partial, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
