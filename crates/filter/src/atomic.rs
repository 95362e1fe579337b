//! A counting Bloom filter shared by many threads without a lock.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::codec::{le_words, DecodeError};
use crate::counting::{
    decode_header, nibble, stuck_nibbles, CountingBloomFilter, BLOCK_WORDS, COUNTER_MAX,
};
use crate::geometry::{BloomGeometry, GeometryError};
use crate::NotPresent;

/// The counting Bloom filter of [`CountingBloomFilter`] (same geometry,
/// layout and format) on atomic words, with `&self` methods.
///
/// Each counter update is one compare-and-swap on its word, so increments
/// and decrements from any number of threads are never lost, and a counter
/// that reaches 15 stays there. It keeps no flip log: it is for counting
/// from many threads, not for feeding copies.
#[derive(Debug)]
pub struct AtomicCountingBloomFilter {
    geometry: BloomGeometry,
    words: Vec<AtomicU64>,
    /// The item count, spread over cache lines by block so that threads do
    /// not all write one line (a shared counter halved the 2-thread speed).
    items: [Stripe; STRIPES],
    stuck: AtomicU64,
}

const STRIPES: usize = 64;

/// A counter alone on its (pair of) cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(AtomicU64);

impl AtomicCountingBloomFilter {
    pub fn new(geometry: BloomGeometry) -> Self {
        AtomicCountingBloomFilter {
            geometry,
            words: (0..geometry.num_bits() / 16)
                .map(|_| AtomicU64::new(0))
                .collect(),
            items: std::array::from_fn(|_| Stripe::default()),
            stuck: AtomicU64::new(0),
        }
    }

    // A block is below the filter's block count, whose words are in memory:
    // it fits a usize.
    #[allow(clippy::cast_possible_truncation)]
    fn stripe(&self, block: u64) -> &AtomicU64 {
        &self.items[block as usize % STRIPES].0
    }

    pub fn with_capacity(items: u64, fpr: f64) -> Result<Self, GeometryError> {
        Ok(AtomicCountingBloomFilter::new(BloomGeometry::for_capacity(
            items, fpr,
        )?))
    }

    pub fn geometry(&self) -> BloomGeometry {
        self.geometry
    }

    // A block is below the filter's block count, whose words are in memory:
    // its first word's index fits a usize.
    #[allow(clippy::cast_possible_truncation)]
    fn block(&self, block: u64) -> &[AtomicU64] {
        let start = block as usize * BLOCK_WORDS;
        &self.words[start..start + BLOCK_WORDS]
    }

    pub fn insert(&self, id: impl AsRef<[u8]>) {
        let probes = self.geometry.probes(id.as_ref());
        let block = self.block(probes.block);
        for off in probes.offsets(self.geometry.k()) {
            let (word, shift) = nibble(off);
            let updated = block[word].fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                let c = (w >> shift) & 0xf;
                (c < u64::from(COUNTER_MAX)).then(|| w + (1 << shift))
            });
            if let Ok(old) = updated {
                if (old >> shift) & 0xf == u64::from(COUNTER_MAX) - 1 {
                    self.stuck.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.stripe(probes.block).fetch_add(1, Ordering::Relaxed);
    }

    /// Un-counts `id`; refuses when a counter of `id` is zero. As with
    /// [`CountingBloomFilter::remove`], the caller must know `id` is present.
    pub fn remove(&self, id: impl AsRef<[u8]>) -> Result<(), NotPresent> {
        let probes = self.geometry.probes(id.as_ref());
        let block = self.block(probes.block);
        let k = self.geometry.k();
        if !probes.fold_offsets(k, true, |all, off| all & (counter(block, off) != 0)) {
            return Err(NotPresent);
        }
        for off in probes.offsets(k) {
            let (word, shift) = nibble(off);
            // A zero here means a remove without its insert raced us; the
            // counter stays at zero rather than wrapping into its neighbour.
            let _ = block[word].fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                let c = (w >> shift) & 0xf;
                (c != 0 && c != u64::from(COUNTER_MAX)).then(|| w - (1 << shift))
            });
        }
        self.stripe(probes.block).fetch_sub(1, Ordering::Relaxed);
        Ok(())
    }

    #[inline]
    pub fn contains(&self, id: impl AsRef<[u8]>) -> bool {
        let probes = self.geometry.probes(id.as_ref());
        let block = self.block(probes.block);
        probes.fold_offsets(self.geometry.k(), true, |all, off| {
            all & (counter(block, off) != 0)
        })
    }

    // A counter is four bits (`counter` masks it), so it fits a u8.
    #[allow(clippy::cast_possible_truncation)]
    pub fn count(&self, id: impl AsRef<[u8]>) -> u8 {
        let probes = self.geometry.probes(id.as_ref());
        let block = self.block(probes.block);
        probes
            .offsets(self.geometry.k())
            .map(|off| counter(block, off) as u8)
            .min()
            .unwrap_or(0)
    }

    /// IDs inserted minus IDs removed (stripes are read one at a time).
    pub fn items(&self) -> u64 {
        self.items
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }

    pub fn stuck_counters(&self) -> u64 {
        self.stuck.load(Ordering::Relaxed)
    }

    /// A copy as a [`CountingBloomFilter`]. Words are read one at a time:
    /// while other threads write, the copy is not a single instant's state.
    pub fn snapshot(&self) -> CountingBloomFilter {
        let words = self
            .words
            .iter()
            .map(|w| w.load(Ordering::Acquire))
            .collect();
        CountingBloomFilter::from_words(self.geometry, words, 0, 0, self.items())
    }

    /// Serializes in the `XACB` format (see [`snapshot`](Self::snapshot)).
    pub fn encode(&self) -> Vec<u8> {
        self.snapshot().encode()
    }

    /// Reads the `XACB` format; the epoch and version are checked and
    /// dropped. The counter words are made once, straight from the input.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let (h, counters) = decode_header(bytes)?;
        let words = le_words(counters).map(AtomicU64::new).collect();
        Ok(AtomicCountingBloomFilter::from_parts(
            h.geometry, words, h.items,
        ))
    }

    fn from_parts(geometry: BloomGeometry, words: Vec<AtomicU64>, items: u64) -> Self {
        let stuck = words
            .iter()
            .map(|w| u64::from(stuck_nibbles(w.load(Ordering::Relaxed))))
            .sum();
        let stripes: [Stripe; STRIPES] = std::array::from_fn(|_| Stripe::default());
        stripes[0].0.store(items, Ordering::Relaxed);
        AtomicCountingBloomFilter {
            geometry,
            words,
            items: stripes,
            stuck: AtomicU64::new(stuck),
        }
    }
}

#[inline(always)]
fn counter(block: &[AtomicU64], off: u32) -> u64 {
    let (word, shift) = nibble(off);
    (block[word].load(Ordering::Acquire) >> shift) & 0xf
}

impl From<CountingBloomFilter> for AtomicCountingBloomFilter {
    fn from(f: CountingBloomFilter) -> Self {
        let words: Vec<AtomicU64> = f
            .counter_words()
            .iter()
            .map(|&w| AtomicU64::new(w))
            .collect();
        AtomicCountingBloomFilter::from_parts(f.geometry(), words, f.items())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{unhex, FUZZ_FIND_512_COUNTERS};

    /// Fuzz find (`decode_atomic`): decoding went through a
    /// `CountingBloomFilter` (with its 2 MiB flip log) and then copied its
    /// counters, holding them twice. Now the atomic words are made once from
    /// the input; the fuzz target's counting allocator checks the bound,
    /// this checks the result.
    #[test]
    fn decode_regression_single_copy() {
        let bytes = unhex(FUZZ_FIND_512_COUNTERS);
        let f = AtomicCountingBloomFilter::decode(&bytes).unwrap();
        let plain = CountingBloomFilter::decode(&bytes).unwrap();
        assert_eq!(f.snapshot().counter_words(), plain.counter_words());
        assert_eq!(f.items(), plain.items());
        assert_eq!(f.stuck_counters(), plain.stuck_counters());
        assert_eq!(f.geometry(), plain.geometry());
        f.insert("J001-WS·2023-Y-0001");
        assert!(f.contains("J001-WS·2023-Y-0001"));
        f.remove("J001-WS·2023-Y-0001").unwrap();
        assert_eq!(f.snapshot().counter_words(), plain.counter_words());
    }
}
