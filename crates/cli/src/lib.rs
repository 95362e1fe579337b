//! What the `xarchive` binary shares with `xarchive-bench`
//! (crates/bench), which must not be built into the shipped binary yet
//! runs domains, logs and fails as it does: several domains in one
//! process, the log's set-up, how a command is run and its failure told,
//! what it prints (and a closed pipe), and the check that every flag has help.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod failure;
pub mod help;
pub mod local;
pub mod logging;
pub mod output;
