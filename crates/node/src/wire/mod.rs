//! The HTTP API's wire forms, in one place: header names, the framing of
//! a delta with the IDs it changed, and the JSON bodies. The server writes
//! these types, and the peer client, the CLI and the tests read them, so
//! no side parses the other's JSON by hand.
//!
//! Epochs are written as decimal strings (`local::epoch` says why).
//!
//! Its files: `headers.rs` (header names and media types), `framing.rs`
//! (the delta with IDs, the relay page), `bodies.rs` (the JSON bodies).
//! Every item is re-exported here: `wire::X` is the one path to use.

mod bodies;
mod framing;
mod headers;
mod requests;

pub use bodies::*;
pub use framing::*;
pub use headers::*;
pub use requests::*;

pub use crate::local::audit::{AuditEntry, AuditHead, AuditIntegrity, Requester};
pub use crate::local::id_profile::IdProfile;
