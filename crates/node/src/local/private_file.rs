//! A small secret written to the data directory (the signing key): whole
//! or not at all, readable by its owner alone, durable before its name
//! points to it; and the folders such files go in, their owner's alone.
//! The domain's start and a backup's restore write them alike.

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

/// Makes `dir` and its missing parents, readable by their owner alone
/// (0700) when made here; a folder that exists keeps its mode.
pub fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}
