//! The traits the filters share, so that code generic over the kind of
//! filter (tests, benchmarks, a holder of "some filter") is written once.
//!
//! Every filter keeps its inherent methods; these traits only forward to
//! them, so a type's own `insert` or `contains` (which take any
//! `AsRef<[u8]>`) is what a call on a concrete type resolves to.

use std::convert::Infallible;

use crate::atomic::AtomicCountingBloomFilter;
use crate::bloom::BloomFilter;
use crate::codec::DecodeError;
use crate::counting::CountingBloomFilter;
use crate::cuckoo::{CuckooFilter, Full};
use crate::NotPresent;

/// A membership filter: it answers "maybe present" or "certainly absent".
///
/// What every implementation promises:
///
/// - **No false negatives.** After a successful [`insert`](Self::insert) of
///   an ID, [`contains`](Self::contains) is true for it until it is removed
///   (for an [`ErasableFilter`]) or the filter is replaced. `false` always
///   means the ID is certainly not held.
/// - False positives happen, at about the rate the filter was sized for.
/// - A refused insert ([`InsertError`](Self::InsertError)) changes nothing.
/// - [`encode`](Self::encode) writes the filter's checksummed format of
///   docs/FORMAT.md, and [`decode`](Self::decode) reads it back with the
///   same answers; decoding hostile bytes returns an error, never panics.
///
/// The methods take `&[u8]` so that the trait can be used as
/// `dyn Filter`; the inherent methods of each filter take any
/// `impl AsRef<[u8]>`.
pub trait Filter {
    /// Why an insert may be refused: [`Full`] for the cuckoo filter,
    /// [`Infallible`] for the Bloom filters, which always accept.
    type InsertError: std::error::Error + Send + Sync + 'static;

    /// Adds `id` (once more, for a counting filter). On error nothing
    /// changed.
    fn insert(&mut self, id: &[u8]) -> Result<(), Self::InsertError>;

    /// False means `id` is certainly not in the filter.
    fn contains(&self, id: &[u8]) -> bool;

    /// IDs inserted minus IDs removed, as the filter counted them
    /// (informational: a plain Bloom filter counts every insert, repeated
    /// or not, and a decoded filter starts from the count in its bytes).
    fn items(&self) -> u64;

    /// Serializes in this filter's format (docs/FORMAT.md).
    fn encode(&self) -> Vec<u8>;

    /// Reads what [`encode`](Self::encode) wrote.
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError>
    where
        Self: Sized;
}

/// A filter that can also forget an ID: the counting filters and the
/// cuckoo filter.
///
/// Removing an ID that was inserted leaves every other inserted ID present
/// (no false negatives, as for [`Filter`]). Removing an ID that is
/// certainly absent is refused with [`NotPresent`] and changes nothing;
/// removing an ID that was never inserted but looks present cannot be
/// detected and may remove another ID, so the caller must know the ID is
/// held.
pub trait ErasableFilter: Filter {
    /// Removes one insert of `id`.
    fn remove(&mut self, id: &[u8]) -> Result<(), NotPresent>;
}

/// A filter whose copies are kept current: it carries the epoch and the
/// version that snapshots and deltas are checked against. The atomic
/// counting filter keeps neither.
pub trait Versioned {
    /// The epoch: copies of another epoch must take a snapshot.
    fn epoch(&self) -> u64;

    /// Starts a new epoch (for a filter with a change log, the log restarts).
    fn set_epoch(&mut self, epoch: u64);

    /// Raised by every change; copies compare it to their own.
    fn version(&self) -> u64;
}

impl Filter for CountingBloomFilter {
    type InsertError = Infallible;

    fn insert(&mut self, id: &[u8]) -> Result<(), Infallible> {
        CountingBloomFilter::insert(self, id);
        Ok(())
    }

    fn contains(&self, id: &[u8]) -> bool {
        CountingBloomFilter::contains(self, id)
    }

    fn items(&self) -> u64 {
        CountingBloomFilter::items(self)
    }

    fn encode(&self) -> Vec<u8> {
        CountingBloomFilter::encode(self)
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        CountingBloomFilter::decode(bytes)
    }
}

impl ErasableFilter for CountingBloomFilter {
    fn remove(&mut self, id: &[u8]) -> Result<(), NotPresent> {
        CountingBloomFilter::remove(self, id)
    }
}

impl Versioned for CountingBloomFilter {
    fn epoch(&self) -> u64 {
        CountingBloomFilter::epoch(self)
    }

    fn set_epoch(&mut self, epoch: u64) {
        CountingBloomFilter::set_epoch(self, epoch);
    }

    fn version(&self) -> u64 {
        CountingBloomFilter::version(self)
    }
}

impl Filter for CuckooFilter {
    type InsertError = Full;

    fn insert(&mut self, id: &[u8]) -> Result<(), Full> {
        CuckooFilter::insert(self, id)
    }

    fn contains(&self, id: &[u8]) -> bool {
        CuckooFilter::contains(self, id)
    }

    fn items(&self) -> u64 {
        CuckooFilter::items(self)
    }

    fn encode(&self) -> Vec<u8> {
        CuckooFilter::encode(self)
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        CuckooFilter::decode(bytes)
    }
}

impl ErasableFilter for CuckooFilter {
    fn remove(&mut self, id: &[u8]) -> Result<(), NotPresent> {
        CuckooFilter::remove(self, id)
    }
}

impl Versioned for CuckooFilter {
    fn epoch(&self) -> u64 {
        CuckooFilter::epoch(self)
    }

    fn set_epoch(&mut self, epoch: u64) {
        CuckooFilter::set_epoch(self, epoch);
    }

    fn version(&self) -> u64 {
        CuckooFilter::version(self)
    }
}

impl Filter for BloomFilter {
    type InsertError = Infallible;

    fn insert(&mut self, id: &[u8]) -> Result<(), Infallible> {
        BloomFilter::insert(self, id);
        Ok(())
    }

    fn contains(&self, id: &[u8]) -> bool {
        BloomFilter::contains(self, id)
    }

    fn items(&self) -> u64 {
        BloomFilter::items(self)
    }

    fn encode(&self) -> Vec<u8> {
        BloomFilter::encode(self)
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        BloomFilter::decode(bytes)
    }
}

impl Versioned for BloomFilter {
    fn epoch(&self) -> u64 {
        BloomFilter::epoch(self)
    }

    fn set_epoch(&mut self, epoch: u64) {
        BloomFilter::set_epoch(self, epoch);
    }

    fn version(&self) -> u64 {
        BloomFilter::version(self)
    }
}

/// Through the trait the atomic filter is used as a single-owner filter;
/// its inherent `&self` methods remain for sharing between threads.
impl Filter for AtomicCountingBloomFilter {
    type InsertError = Infallible;

    fn insert(&mut self, id: &[u8]) -> Result<(), Infallible> {
        AtomicCountingBloomFilter::insert(self, id);
        Ok(())
    }

    fn contains(&self, id: &[u8]) -> bool {
        AtomicCountingBloomFilter::contains(self, id)
    }

    fn items(&self) -> u64 {
        AtomicCountingBloomFilter::items(self)
    }

    fn encode(&self) -> Vec<u8> {
        AtomicCountingBloomFilter::encode(self)
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        AtomicCountingBloomFilter::decode(bytes)
    }
}

impl ErasableFilter for AtomicCountingBloomFilter {
    fn remove(&mut self, id: &[u8]) -> Result<(), NotPresent> {
        AtomicCountingBloomFilter::remove(self, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The traits stay usable as trait objects.
    #[test]
    fn dyn_compatible() {
        let mut filters: Vec<Box<dyn ErasableFilter<InsertError = Infallible>>> = vec![
            Box::new(CountingBloomFilter::with_capacity(100, 0.01).unwrap()),
            Box::new(AtomicCountingBloomFilter::with_capacity(100, 0.01).unwrap()),
        ];
        for f in &mut filters {
            f.insert(b"J001-WS-2023-Y-0001").unwrap();
            assert!(f.contains(b"J001-WS-2023-Y-0001"));
            assert_eq!(f.items(), 1);
            f.remove(b"J001-WS-2023-Y-0001").unwrap();
            assert_eq!(f.items(), 0);
        }
    }
}
