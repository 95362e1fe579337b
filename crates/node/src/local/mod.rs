//! The local domain: what one archive holds and how it answers for itself,
//! with no knowledge of other domains.
//!
//! - [`id`], [`record`]: archive IDs and records, validated at the edge;
//! - [`domain_name`]: a domain's name, checked where it comes in;
//! - [`id_profile`]: how an archive number a person typed is read (`[ids]`);
//! - [`store`]: records on disk (redb), durable before a write returns;
//! - [`redb_file`]: a redb file reopened after an I/O error (a full disk);
//! - [`space`]: the data directory's free space and the reserve writes keep;
//! - [`filter`]: the domain's erasable filter and its change feed;
//! - [`domain`]: store and filter together (the filter changes only when
//!   the store does), positions and deltas for peers;
//! - [`epoch`]: how epochs are written in JSON;
//! - [`keys`]: declared key types, normalisation of key values, digests;
//! - [`audit`]: the append-only log of searches by private key;
//! - [`backup`]: an online backup of the store and the audit log, and its restore;
//! - [`sample`]: realistic sample records;
//! - [`requests`]: the durable book of cross-archive requests;
//! - [`release`]: which requested records go out without review;
//! - [`role`]: the roles of client tokens, and what a requester acted as.

pub(crate) mod audit;
pub mod backup;
pub mod domain;
pub mod domain_name;
pub(crate) mod epoch;
pub(crate) mod filter;
pub mod id;
pub mod id_profile;
pub(crate) mod keys;
pub(crate) mod private_file;
pub mod record;
pub mod redb_file;
pub mod release;
pub mod requests;
pub mod role;
pub mod sample;
pub mod space;
pub mod store;
