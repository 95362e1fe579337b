//! The command-line tests, as one test binary (one link, one harness):
//! each module is what was a test binary of its own, `common` the harness
//! they share. Run one module with a filter, e.g. `cargo test -p xarchive
//! --test cli -- import_export::`.

mod common;

mod authority;
mod backup;
mod catalogue_files;
mod cli;
mod cluster_zk;
mod domain;
mod import_export;
mod lookup_typed;
mod output;
mod requests;
mod security;
mod trust;
mod up;
