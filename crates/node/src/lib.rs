//! One xarchive domain, in layers whose imports point only downward
//! (ARCHITECTURE.md draws them; `tests/architecture.rs` keeps them so):
//!
//! - [`server`]: serving a [`Node`] over HTTP(S) until shutdown;
//! - `http`: the router, handlers, authentication middleware and the
//!   page; the only place where errors become HTTP responses (the peer
//!   routes' answers are lent to the benchmarks as `peer_answers`, with
//!   the `testsuite` feature);
//! - [`node`], [`config`], [`metrics`]: a domain put together: its local
//!   part, its place in the cluster, its tokens and its counters;
//!   [`ApiClient`]: the public API's client, for the CLI, the benchmarks
//!   and the tests;
//!   [`requests`]: cross-archive requests between archives, sealed and
//!   certified;
//! - [`cluster`]: membership (coordinators), replicas of peers' filters,
//!   sync, routed lookups, the peer client and the cache of remote records;
//! - [`security`]: tokens, roles, rate limits, TLS;
//! - [`wire`]: the HTTP API's header names and bodies, shared by the
//!   server, the peer client, the CLI and the tests;
//! - `local`: the domain on its own: IDs, records, the store, the filter
//!   (crate-private; what the CLI and tests need is re-exported here);
//! - [`shutdown`]: the stop signal every background task follows.

mod api_client;
pub mod cluster;
pub mod config;
mod http;
pub(crate) mod local;
pub mod metrics;
pub mod node;
pub mod requests;
pub mod security;
pub mod server;
pub mod shutdown;
pub mod wire;

pub use api_client::ApiClient;
pub use cluster::client::{code_text, Client, ClientError};
pub use config::{Limits, NodeConfig, PageConfig};
pub use http::router;
/// The answers of the routes peers call, built as the router builds them,
/// for a stand-in that must answer as a domain does (the light domains of
/// xarchive-bench's `nation` benchmark); not in the package.
#[cfg(feature = "testsuite")]
pub mod peer_answers {
    pub use crate::http::archives::record_not_found;
    pub use crate::http::replication::{
        delta_response, filter_response, snapshot_required, with_key_id,
    };
}
pub use local::backup::{self, BackupError, BackupHeader};
pub use local::domain::{capacity_for, Domain, DomainError, DomainStats, Position, VerifyReport};
pub use local::domain_name::{DomainName, InvalidDomainName};
pub use local::filter::{FilterKind, FilterSettings};
pub use local::id::ArchiveId;
pub use local::keys::{id_card_number, KeyFormat, KeyHasher, KeyType, KeyTypes, Visibility};
pub use local::record::{Record, RecordInput};
pub use local::sample;
pub use local::store::{in_use, Write};
pub use node::Node;
