//! Files the command line writes that may hold personal data (exports,
//! the rejected lines of an import, backups): readable and writable by
//! their owner alone, 0600, whatever the umask, and put in place whole.
//!
//! Written beside the destination under a temporary name (created 0600 by
//! `tempfile`, then set to exactly 0600: a umask can only take bits away,
//! and a umask such as 0277 would leave the owner unable to write), then
//! renamed over it. Renaming, rather than truncating a file already
//! there, matters: whoever had the old file open (or could read it, at
//! 0644) never sees the new contents, which live in a new inode.

use std::fs::{File, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The mode of every file that may hold personal data.
pub const OWNER_ONLY: u32 = 0o600;

/// Makes `file` owner-only, whatever mode it was created with.
pub fn owner_only(file: &File) -> std::io::Result<()> {
    file.set_permissions(Permissions::from_mode(OWNER_ONLY))
}

/// A file being written for `path`, owner-only; in place only once
/// [`PrivateFile::persist`] is called (dropped before: removed).
pub struct PrivateFile {
    temp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl PrivateFile {
    pub fn create(path: &Path) -> anyhow::Result<PrivateFile> {
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let name = path
            .file_name()
            .with_context(|| format!("{} names no file", path.display()))?
            .to_string_lossy()
            .into_owned();
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".partial")
            .tempfile_in(&folder)
            .with_context(|| format!("cannot create {}", path.display()))?;
        owner_only(temp.as_file()).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(PrivateFile {
            temp,
            path: path.to_owned(),
        })
    }

    pub fn file(&self) -> &File {
        self.temp.as_file()
    }

    /// Where the file goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's contents made durable, and put in place of `path`.
    pub fn persist(self) -> anyhow::Result<()> {
        let path = self.path;
        self.temp
            .as_file()
            .sync_all()
            .with_context(|| format!("cannot write {}", path.display()))?;
        self.temp
            .persist(&path)
            .map_err(|e| e.error)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_private_file_replaces_a_readable_one_with_an_owner_only_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("export.csv");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        let old = File::open(&path).unwrap();

        let file = PrivateFile::create(&path).unwrap();
        file.file().write_all(b"new").unwrap();
        // Not there before it is whole.
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        file.persist().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, OWNER_ONLY);
        // Whoever held the old file open does not see the new contents.
        let mut was = String::new();
        std::io::Read::read_to_string(&mut &old, &mut was).unwrap();
        assert_eq!(was, "old");
    }

    #[test]
    fn a_private_file_dropped_before_it_is_whole_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rejects.csv");
        drop(PrivateFile::create(&path).unwrap());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
