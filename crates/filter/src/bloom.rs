//! The plain (blocked) Bloom filter: the bit view that peers and browsers
//! hold of a domain's counting filter.

use crate::codec::{self, le_words, BloomHeader, DecodeError};
use crate::delta::{ApplyError, Delta};
use crate::geometry::{BloomGeometry, GeometryError};
use crate::hash::{block, block_mut, Probes, BLOCK_BITS};

/// u64 words in one 512-bit block.
const BLOCK_WORDS: usize = (BLOCK_BITS / 64) as usize;

/// A Bloom filter whose k probes for an ID all fall in one 512-bit block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BloomFilter {
    geometry: BloomGeometry,
    words: Vec<u64>,
    epoch: u64,
    version: u64,
    items: u64,
}

/// Two filters of different geometry cannot be combined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("geometries differ: {left:?} and {right:?}")]
pub struct GeometryMismatch {
    pub left: BloomGeometry,
    pub right: BloomGeometry,
}

impl BloomFilter {
    pub fn new(geometry: BloomGeometry) -> Self {
        BloomFilter {
            geometry,
            words: vec![0; (geometry.num_bits() / 64) as usize],
            epoch: 0,
            version: 0,
            items: 0,
        }
    }

    /// Sized for `items` at false-positive rate `fpr`.
    pub fn with_capacity(items: u64, fpr: f64) -> Result<Self, GeometryError> {
        Ok(BloomFilter::new(BloomGeometry::for_capacity(items, fpr)?))
    }

    pub(crate) fn from_parts(
        geometry: BloomGeometry,
        words: Vec<u64>,
        epoch: u64,
        version: u64,
        items: u64,
    ) -> Self {
        debug_assert_eq!(words.len() as u64 * 64, geometry.num_bits());
        BloomFilter {
            geometry,
            words,
            epoch,
            version,
            items,
        }
    }

    pub fn geometry(&self) -> BloomGeometry {
        self.geometry
    }

    /// Sets `id`'s bits. Returns whether any bit was newly set (false means
    /// the filter already answered "maybe" for `id`).
    pub fn insert(&mut self, id: impl AsRef<[u8]>) -> bool {
        let probes = self.geometry.probes(id.as_ref());
        let k = self.geometry.k();
        let block = block_mut::<BLOCK_WORDS>(&mut self.words, probes.block);
        let changed = probes.fold_offsets(k, false, |changed, off| {
            let (word, bit) = ((off / 64) as usize, 1u64 << (off % 64));
            let was_clear = block[word] & bit == 0;
            block[word] |= bit;
            changed | was_clear
        });
        // Saturating: both come from decoded bytes and may be anything.
        self.items = self.items.saturating_add(1);
        self.version = self.version.saturating_add(1);
        changed
    }

    /// False means `id` was certainly never inserted.
    #[inline]
    pub fn contains(&self, id: impl AsRef<[u8]>) -> bool {
        self.contains_probes(&self.geometry.probes(id.as_ref()))
    }

    /// Starts the read of `probes`' block (see [`contains_each`]).
    ///
    /// [`contains_each`]: Self::contains_each
    #[inline]
    pub(crate) fn touch(&self, probes: &Probes) -> u64 {
        block::<BLOCK_WORDS>(&self.words, probes.block)[0]
    }

    /// [`contains`](Self::contains) for probes already computed with this
    /// filter's geometry (one hash serves many filters of equal geometry).
    #[inline]
    // `&`, not `&&`: every probe is read without a branch, the block being
    // one cache line already loaded.
    #[allow(clippy::needless_bitwise_bool)]
    pub fn contains_probes(&self, probes: &Probes) -> bool {
        let block = block::<BLOCK_WORDS>(&self.words, probes.block);
        probes.fold_offsets(self.geometry.k(), true, |all, off| {
            all & (block[(off / 64) as usize] >> (off % 64) & 1 == 1)
        })
    }

    /// Bit `pos` (panics if `pos` is outside the filter).
    pub fn bit(&self, pos: u64) -> bool {
        self.words[(pos / 64) as usize] >> (pos % 64) & 1 == 1
    }

    /// Adds every ID of `other` (same geometry) to this filter.
    pub fn union(&mut self, other: &BloomFilter) -> Result<(), GeometryMismatch> {
        if self.geometry != other.geometry {
            return Err(GeometryMismatch {
                left: self.geometry,
                right: other.geometry,
            });
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
        self.items = self.items.saturating_add(other.items);
        self.version = self.version.saturating_add(1);
        Ok(())
    }

    /// Brings this filter from a version in `delta.from_version..=to_version`
    /// to `delta.to_version`. On error nothing changes.
    pub fn apply(&mut self, delta: &Delta) -> Result<(), ApplyError> {
        delta.check(self.epoch, self.version, self.geometry.num_bits(), 1)?;
        for c in &delta.changes {
            let (word, bit) = ((c.cell / 64) as usize, 1u64 << (c.cell % 64));
            if c.value == 1 {
                self.words[word] |= bit;
            } else {
                self.words[word] &= !bit;
            }
        }
        self.version = delta.to_version;
        self.items = delta.items;
        Ok(())
    }

    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Share of bits set.
    pub fn fill_ratio(&self) -> f64 {
        self.count_ones() as f64 / self.geometry.num_bits() as f64
    }

    /// False-positive rate implied by the bits actually set: the mean over
    /// blocks of (block fill)^k.
    pub fn estimated_fpr(&self) -> f64 {
        self.geometry.rate_from_fills(
            self.words
                .chunks_exact(BLOCK_WORDS)
                .map(|b| b.iter().map(|w| w.count_ones()).sum()),
        )
    }

    /// The bits as little-endian u64 words (bit i is bit i % 64 of word i / 64).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn set_version(&mut self, version: u64) {
        self.version = version;
    }

    /// IDs inserted, as far as the writer knows (informational).
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Serializes in the `XABL` format of docs/FORMAT.md.
    pub fn encode(&self) -> Vec<u8> {
        BloomHeader {
            geometry: self.geometry,
            epoch: self.epoch,
            version: self.version,
            items: self.items,
        }
        .encode(codec::BLOOM, &self.words)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let (h, payload) = BloomHeader::decode(bytes, codec::BLOOM, 8)?;
        Ok(BloomFilter::from_parts(
            h.geometry,
            le_words(payload).collect(),
            h.epoch,
            h.version,
            h.items,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::unhex;

    /// Fuzz find (`decode_bloom`): `items` is taken from the bytes as it is
    /// (here `0xffff_fffe_0000_0000`); after an insert, the union of the filter with a copy
    /// of itself overflowed `items += other.items`. The artifact, with its
    /// CRC trailer recomputed as the target does.
    #[test]
    fn decode_regression_items_overflow() {
        let bytes = unhex(
            "5841424c01000000000200000000000002000000000000030000000700000000
           000000000000000000000000feffffffffffff7f000000000000000000000000
           000000000000000000000000000000000000000000000000000000fb00000000
           00000000000000000000000000000000abd8b0ec",
        );
        let mut f = BloomFilter::decode(&bytes).unwrap();
        assert_eq!(f.items(), 0xffff_fffe_0000_0000);
        assert_eq!(f.encode(), bytes);
        let mut other = f.clone();
        f.insert("J001-WS·2023-Y-0001");
        other.union(&f).unwrap();
        assert_eq!(other.items(), u64::MAX, "the count saturates");
        assert!(other.contains("J001-WS·2023-Y-0001"));

        // The version, equally decoded, saturates too.
        f.set_version(u64::MAX);
        f.insert("another ID");
        assert_eq!(f.version(), u64::MAX);
    }
}
