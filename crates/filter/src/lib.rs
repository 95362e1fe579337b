//! Erasable membership filters that never answer a false "no".
//!
//! - [`CountingBloomFilter`]: 4-bit counters that stick at 15 instead of
//!   wrapping or being decremented after an overflow; a bit view
//!   ([`BloomFilter`]) for others to hold, and a flip log so that copies
//!   are kept current by [`Delta`]s rather than whole snapshots.
//! - [`AtomicCountingBloomFilter`]: the same on atomic words for many threads.
//! - [`CuckooFilter`]: fingerprints in buckets of 4, with a victim slot so a
//!   full filter refuses an insert instead of dropping an ID it holds.
//! - [`BloomFilter`]: the plain (blocked) Bloom filter.
//!
//! All four implement [`Filter`] (insert, contains, items, encode, decode,
//! with no false negatives); the three that can forget an ID implement
//! [`ErasableFilter`], and the three that carry an epoch and version for
//! copies implement [`Versioned`].
//!
//! Every filter hashes IDs with MurmurHash3 `x64_128` and has a versioned,
//! CRC32C-checked binary form documented byte by byte in docs/FORMAT.md;
//! decoding hostile bytes returns an error, never panics.
//!
//! ```
//! use xarchive_filter::CountingBloomFilter;
//!
//! let mut filter = CountingBloomFilter::with_capacity(10_000, 0.01).unwrap();
//! filter.insert("J001-WS·2023-Y-0001");
//! let copy_version = filter.version();
//! let mut copy = filter.bit_view();
//!
//! filter.insert("档案/2024/001");
//! filter.remove("J001-WS·2023-Y-0001").unwrap();
//! copy.apply(&filter.flips_since(copy_version).unwrap()).unwrap();
//! assert_eq!(copy, filter.bit_view());
//! assert!(copy.contains("档案/2024/001"));
//! ```

// The hashing and probing helpers are forced inline: each is a few
// instructions on the path of every insert and lookup, and
// benches/routing.rs is where that is measured.
#![allow(clippy::inline_always)]

mod atomic;
mod bloom;
mod codec;
mod counting;
mod cuckoo;
mod delta;
mod geometry;
mod hash;
mod index;
mod traits;

pub use atomic::AtomicCountingBloomFilter;
pub use bloom::{BloomFilter, GeometryMismatch};
pub use codec::{DecodeError, FORMAT_VERSION};
pub use counting::{CountingBloomFilter, COUNTER_MAX};
pub use cuckoo::{CuckooFilter, Full, MAX_KICKS};
pub use delta::{ApplyError, CellChange, Delta, DeltaError, DEFAULT_LOG_CAPACITY};
pub use geometry::{
    BloomGeometry, CuckooGeometry, GeometryError, BUCKET_SLOTS, CUCKOO_LOAD, FINGERPRINT_BITS,
    MAX_BITS, MAX_BUCKETS, MAX_K,
};
pub use hash::{murmur3_x64_128, Digest, Offsets, Probes, BLOCK_BITS};
pub use index::{candidates_all, SlicedIndex, SlotSet};
/// The filters' shared interface. [`Filter`] promises no false negatives:
/// after a successful insert an ID is reported present until it is
/// removed; `contains` returning false means certainly absent.
/// [`ErasableFilter`] adds `remove`, which keeps every other inserted ID
/// present. [`Versioned`] is the epoch and version that copies follow.
pub use traits::{ErasableFilter, Filter, Versioned};

/// A remove was refused because the filter certainly does not hold the ID.
/// Nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the filter does not hold this ID; nothing was removed")]
pub struct NotPresent;
