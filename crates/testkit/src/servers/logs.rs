//! The servers' log files: opened for appending by each start, read from
//! the offset where the latest start began, and quoted by their tail.

use std::fs::{self, File, OpenOptions};
use std::path::Path;

/// How much of a log a failure message quotes.
const LOG_TAIL_LINES: usize = 40;

/// Bytes of `path` from `offset` on (a log appended to by each start).
pub(super) fn read_from(path: &Path, offset: u64) -> String {
    let bytes = fs::read(path).unwrap_or_default();
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

pub(super) fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

/// The last lines of `text`, for a failure message.
pub(super) fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines[from..].join("\n")
}

pub(super) fn open_log(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open the server log {}: {e}", path.display()))
}
