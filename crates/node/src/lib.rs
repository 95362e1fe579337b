//! One xarchive domain: a durable record store (redb), the erasable filter
//! kept in step with it, and the HTTP API that serves both.
//!
//! - [`store`]: records on disk, committed durably before acknowledging.
//! - [`domain`]: the store and filter together (the filter changes only
//!   when the store does).
//! - [`api`]: axum handlers; errors are JSON with a stable `code`.
//! - [`server`], [`shutdown`]: serving until Ctrl-C or SIGTERM.

pub mod api;
pub mod auth;
pub mod cache;
pub mod client;
pub mod cluster;
pub mod config;
pub mod domain;
pub mod filters;
pub mod id;
pub mod metrics;
pub mod node;
pub mod record;
pub mod sample;
pub mod server;
pub mod shutdown;
pub mod store;
pub mod tls;
pub mod wire;

pub use config::{Limits, NodeConfig};
pub use domain::{Domain, DomainError, Position};
pub use filters::{FilterKind, FilterSettings};
pub use id::ArchiveId;
pub use node::Node;
pub use record::Record;
