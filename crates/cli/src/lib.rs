//! What the `xarchive` binary shares with `xarchive-bench`
//! (crates/bench), which must not be built into the shipped binary yet
//! runs domains, logs and fails as it does: several domains in one
//! process, the log's set-up, how a command is run and its failure told,
//! and the check that every flag has help.

pub mod failure;
pub mod help;
pub mod local;
pub mod logging;

/// Exit code when a record does not exist.
pub const EXIT_NOT_FOUND: u8 = 3;
/// Exit code when a lookup could not reach every domain that might hold
/// the record.
pub const EXIT_UNAVAILABLE: u8 = 4;
