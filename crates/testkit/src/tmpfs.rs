//! A size-limited file system (tmpfs) mounted for one test: a disk that
//! really fills, for the tests of what a domain does then. Mounting needs
//! root, as the fault test's namespaces do; without it the test fails
//! with that said, never skips.

use std::io::Write;
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use tempfile::TempDir;

const BALLAST: &str = "ballast";

/// A tmpfs of a fixed size, unmounted when dropped.
pub struct Tmpfs {
    path: PathBuf,
    /// The fresh directory it is mounted on, if it made one.
    _dir: Option<TempDir>,
}

impl Tmpfs {
    /// Mounts a tmpfs of `bytes` (rounded up to pages) on a fresh
    /// directory.
    // `_dir` is there only to be removed with the mount: set here, never read.
    #[allow(clippy::used_underscore_binding)]
    pub fn mount(bytes: u64) -> Tmpfs {
        let dir = tempfile::tempdir().expect("cannot create a directory to mount on");
        let mut tmpfs = Tmpfs::mount_at(dir.path(), bytes)
            .unwrap_or_else(|e| panic!("{e}: the disk-full tests run as root"));
        tmpfs._dir = Some(dir);
        tmpfs
    }

    /// Mounts a tmpfs of `bytes` on `path` (created if missing); the
    /// error says where and why not.
    pub fn mount_at(path: &Path, bytes: u64) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let options = format!("size={bytes},mode=0700");
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(options.as_str()),
        )
        .map_err(|e| {
            format!(
                "cannot mount a {bytes}-byte tmpfs on {}: {e}",
                path.display()
            )
        })?;
        Ok(Tmpfs {
            path: path.to_owned(),
            _dir: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn ballast(&self) -> PathBuf {
        self.path().join(BALLAST)
    }

    /// Fills the file system with a ballast file until only about `bytes`
    /// stay free.
    pub fn fill_leaving(&self, bytes: u64) {
        self.fill();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(self.ballast())
            .expect("cannot open the ballast file");
        let len = file.metadata().expect("the ballast file's size").len();
        file.set_len(len.saturating_sub(bytes))
            .expect("cannot shorten the ballast file");
    }

    /// Fills the file system with a ballast file until nothing more fits
    /// (what an import's scans or a forgotten backup do to a disk).
    pub fn fill(&self) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.ballast())
            .expect("cannot create the ballast file");
        let mut chunk = 1 << 20;
        let zeros = vec![0u8; chunk];
        while chunk >= 4096 {
            match file.write_all(&zeros[..chunk]) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(28) => chunk /= 2,
                Err(e) => panic!("cannot write the ballast file: {e}"),
            }
        }
    }

    /// Removes the ballast: the space returns.
    pub fn free(&self) {
        match std::fs::remove_file(self.ballast()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("cannot remove the ballast file: {e}"),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Detached, so that a process still holding a file there (a domain
        // being killed) cannot keep it mounted.
        let _ = umount2(&self.path, MntFlags::MNT_DETACH);
    }
}
