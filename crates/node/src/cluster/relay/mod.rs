//! Passing changes on, so that no domain sends a change to every other.
//!
//! The members in name order are laid out as a tree of degree
//! [`ClusterConfig::relay_fanout`](super::ClusterConfig). A domain keeps
//! its own changes, once published, and every change its copies take in
//! (by relay, or pulled from an origin) in its relay, in order, for a
//! while. Each domain reads its tree neighbours' relays in pages, takes in
//! what brings a copy forward, and keeps that in its own relay for its
//! other neighbours. A change so crosses each edge of the tree once: its
//! origin sends it to at most fanout + 1 neighbours, not to N − 1 peers,
//! and a follower gets a page of many origins' changes per call instead
//! of a call per change (docs/SCALING.md).
//!
//! Why it cannot cause a false "not found": a copy's position is that of
//! what it holds, whoever sent it. A delta is applied only to a copy
//! inside its span and in its epoch (docs/FORMAT.md §6), a whole filter
//! only when it is ahead of the copy or of the epoch its origin
//! publishes; a copy behind its origin's published position is asked
//! about, not trusted, as before. The relay only brings copies forward
//! sooner and cheaper; what it misses (a neighbour down, a page dropped,
//! trees that differ while membership changes) the per-peer sync pulls
//! from the origin itself once the copy has been behind for
//! [`ClusterConfig::relay_grace_ms`](super::ClusterConfig).
//!
//! Its files: `ring.rs` (the changes kept and the pages read from them),
//! `tree.rs` (who neighbours whom), `own.rs` (this domain's own changes
//! put in), `follow.rs` (reading the neighbours' relays and offering what
//! they bring to the one door of every change to a copy, `copy_change.rs`).

mod follow;
mod own;
mod ring;
mod tree;

pub use follow::pause_after;
pub(crate) use follow::{Followers, PULL_INTERVAL, WOKEN_SPACING};
pub(crate) use own::{own, OwnFilters};
pub use ring::Relay;
pub(crate) use ring::{pulled, Pulled};
pub use tree::neighbours;
