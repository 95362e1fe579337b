//! The local domain: what one archive holds and how it answers for itself,
//! with no knowledge of other domains.
//!
//! - [`id`], [`record`]: archive IDs and records, validated at the edge;
//! - [`store`]: records on disk (redb), durable before a write returns;
//! - [`filter`]: the domain's erasable filter and its change feed;
//! - [`domain`]: store and filter together (the filter changes only when
//!   the store does), positions and deltas for peers;
//! - [`epoch`]: how epochs are written in JSON;
//! - [`sample`]: realistic sample records.

pub mod domain;
pub(crate) mod epoch;
pub(crate) mod filter;
pub mod id;
pub mod record;
pub mod sample;
pub mod store;
