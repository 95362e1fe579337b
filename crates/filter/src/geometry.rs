//! Sizing: from (expected items n, target false-positive rate p) to a
//! geometry, and the false-positive rate a geometry is expected to give.

use crate::hash::{murmur3_x64_128, Probes, BLOCK_BITS};

/// Largest bit (or counter) array a geometry may describe: 2^38 positions,
/// 32 GiB of bits or 128 GiB of 4-bit counters. Decoders check this before
/// anything else, so a hostile header cannot ask for more.
pub const MAX_BITS: u64 = 1 << 38;
/// Most probes per ID.
pub const MAX_K: u32 = 32;
/// Most cuckoo buckets: 2^34 buckets of 4 slots.
pub const MAX_BUCKETS: u64 = 1 << 34;
/// Slots per cuckoo bucket.
pub const BUCKET_SLOTS: u64 = 4;
/// Fingerprint widths a cuckoo filter accepts.
pub const FINGERPRINT_BITS: std::ops::RangeInclusive<u8> = 4..=16;
/// Share of cuckoo slots [`CuckooGeometry::for_capacity`] plans to fill: high
/// enough for ≤ 11 bits per item at p = 1 %, low enough that inserts near
/// capacity seldom need long eviction chains.
pub const CUCKOO_LOAD: f64 = 0.93;

/// Why a geometry cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GeometryError {
    #[error("false-positive rate must be in (0, 0.5], got {0}")]
    FalsePositiveRate(f64),
    #[error("bit count {0} is not a positive multiple of {BLOCK_BITS}")]
    BitCount(u64),
    #[error("{what} {value} exceeds the limit of {limit}")]
    TooLarge {
        what: &'static str,
        value: u64,
        limit: u64,
    },
    #[error("hash count k = {0} is outside 1..={MAX_K}")]
    HashCount(u32),
    #[error("bucket count must be at least 1")]
    NoBuckets,
    #[error("fingerprint width {0} bits is outside 4..=16")]
    FingerprintBits(u8),
}

/// Shape of a (blocked) Bloom filter or counting Bloom filter: `num_bits`
/// positions in blocks of 512, `k` probes per ID, hash seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BloomGeometry {
    num_bits: u64,
    k: u32,
    seed: u32,
}

impl BloomGeometry {
    pub fn new(num_bits: u64, k: u32, seed: u32) -> Result<Self, GeometryError> {
        if num_bits == 0 || !num_bits.is_multiple_of(BLOCK_BITS) {
            return Err(GeometryError::BitCount(num_bits));
        }
        if num_bits > MAX_BITS {
            return Err(GeometryError::TooLarge {
                what: "bit count",
                value: num_bits,
                limit: MAX_BITS,
            });
        }
        if !(1..=MAX_K).contains(&k) {
            return Err(GeometryError::HashCount(k));
        }
        Ok(BloomGeometry { num_bits, k, seed })
    }

    /// The smallest geometry whose [`theoretical_fpr`](Self::theoretical_fpr)
    /// at `items` is at most `fpr`, with the k that minimises it. Seed 0.
    // A positive block count, rounded up and clamped to `max_blocks` at once.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    pub fn for_capacity(items: u64, fpr: f64) -> Result<Self, GeometryError> {
        check_rate(fpr)?;
        let items = items.max(1);
        let best_at = |blocks: u64| best_k(items, blocks);
        // Upper bound: twice the unblocked optimum, doubled until it suffices.
        let max_blocks = MAX_BITS / BLOCK_BITS;
        let unblocked = (items as f64) * (-fpr.ln()) / (2f64.ln().powi(2));
        let mut hi = ((2.0 * unblocked / BLOCK_BITS as f64).ceil() as u64).clamp(1, max_blocks);
        while best_at(hi).1 > fpr {
            if hi == max_blocks {
                return Err(GeometryError::TooLarge {
                    what: "bit count needed",
                    value: u64::MAX,
                    limit: MAX_BITS,
                });
            }
            hi = hi.saturating_mul(2).min(max_blocks);
        }
        let mut lo = 1;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if best_at(mid).1 <= fpr {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        BloomGeometry::new(hi * BLOCK_BITS, best_at(hi).0, 0)
    }

    #[must_use]
    pub fn with_seed(self, seed: u32) -> Self {
        BloomGeometry { seed, ..self }
    }

    pub fn num_bits(&self) -> u64 {
        self.num_bits
    }

    pub fn num_blocks(&self) -> u64 {
        self.num_bits / BLOCK_BITS
    }

    pub fn k(&self) -> u32 {
        self.k
    }

    pub fn seed(&self) -> u32 {
        self.seed
    }

    /// Where `id`'s probes fall.
    #[inline(always)]
    pub fn probes(&self, id: &[u8]) -> Probes {
        Probes::new(murmur3_x64_128(id, self.seed), self.num_blocks())
    }

    /// Expected false-positive rate after `items` distinct insertions.
    pub fn theoretical_fpr(&self, items: u64) -> f64 {
        blocked_fpr(items, self.num_blocks(), self.k)
    }

    /// The false-positive rate implied by the bits set in each block (in
    /// block order): the mean over blocks of (block fill)^k.
    // k is 1 to MAX_K (32), checked when the geometry is made.
    #[allow(clippy::cast_possible_wrap)]
    pub(crate) fn rate_from_fills(&self, ones_per_block: impl Iterator<Item = u32>) -> f64 {
        let k = self.k as i32;
        let sum: f64 = ones_per_block
            .map(|ones| (f64::from(ones) / BLOCK_BITS as f64).powi(k))
            .sum();
        sum / self.num_blocks() as f64
    }
}

fn check_rate(fpr: f64) -> Result<(), GeometryError> {
    if fpr.is_nan() || fpr <= 0.0 || fpr > 0.5 {
        return Err(GeometryError::FalsePositiveRate(fpr));
    }
    Ok(())
}

fn best_k(items: u64, blocks: u64) -> (u32, f64) {
    (1..=MAX_K)
        .map(|k| (k, blocked_fpr(items, blocks, k)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((1, 1.0))
}

/// False-positive rate of a blocked Bloom filter: the number of IDs in a
/// block is Poisson with mean λ = items / blocks; a block holding j IDs has
/// each bit set with probability 1 - (1 - 1/512)^(k·j) (each ID sets k
/// independently drawn bits), and a query hits when its k bits are all set.
// k is 1 to MAX_K (32); `last` is positive and, λ being at most 4 × 512
// here, below 3 000.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]
fn blocked_fpr(items: u64, blocks: u64, k: u32) -> f64 {
    let lambda = items as f64 / blocks as f64;
    let keep = (1.0 - 1.0 / BLOCK_BITS as f64).powi(k as i32);
    if lambda > 4.0 * BLOCK_BITS as f64 {
        // Blocks this crowded are all but full; the spread no longer matters.
        return (1.0 - keep.powf(lambda)).powi(k as i32);
    }
    let last = (lambda + 20.0 * lambda.sqrt() + 50.0).ceil() as u64;
    let mut log_p = -lambda; // ln P(j = 0)
    let mut total = 0.0;
    for j in 0..=last {
        if j > 0 {
            log_p += (lambda / j as f64).ln();
        }
        if log_p > -745.0 {
            let fill = 1.0 - keep.powf(j as f64);
            total += log_p.exp() * fill.powi(k as i32);
        }
    }
    total.min(1.0)
}

/// Shape of a cuckoo filter: buckets of 4 slots, fingerprint width, seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CuckooGeometry {
    num_buckets: u64,
    fingerprint_bits: u8,
    seed: u32,
}

impl CuckooGeometry {
    pub fn new(num_buckets: u64, fingerprint_bits: u8, seed: u32) -> Result<Self, GeometryError> {
        if num_buckets == 0 {
            return Err(GeometryError::NoBuckets);
        }
        if num_buckets > MAX_BUCKETS {
            return Err(GeometryError::TooLarge {
                what: "bucket count",
                value: num_buckets,
                limit: MAX_BUCKETS,
            });
        }
        if !FINGERPRINT_BITS.contains(&fingerprint_bits) {
            return Err(GeometryError::FingerprintBits(fingerprint_bits));
        }
        Ok(CuckooGeometry {
            num_buckets,
            fingerprint_bits,
            seed,
        })
    }

    /// Buckets for `items` at [`CUCKOO_LOAD`], and the narrowest fingerprint
    /// whose rate at that load is at most `fpr` (clamped to 4..=16 bits).
    // A positive count of buckets, rounded up; far below 2^53 for any capacity
    // a u64 can name.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    pub fn for_capacity(items: u64, fpr: f64) -> Result<Self, GeometryError> {
        check_rate(fpr)?;
        let buckets = ((items.max(1) as f64) / (BUCKET_SLOTS as f64 * CUCKOO_LOAD)).ceil() as u64;
        let bits = FINGERPRINT_BITS
            .clone()
            .find(|&f| cuckoo_fpr(f, CUCKOO_LOAD) <= fpr)
            .unwrap_or(*FINGERPRINT_BITS.end());
        CuckooGeometry::new(buckets, bits, 0)
    }

    /// The same bucket count with a caller-chosen fingerprint width.
    pub fn with_fingerprint_bits(self, bits: u8) -> Result<Self, GeometryError> {
        CuckooGeometry::new(self.num_buckets, bits, self.seed)
    }

    #[must_use]
    pub fn with_seed(self, seed: u32) -> Self {
        CuckooGeometry { seed, ..self }
    }

    pub fn num_buckets(&self) -> u64 {
        self.num_buckets
    }

    pub fn num_slots(&self) -> u64 {
        self.num_buckets * BUCKET_SLOTS
    }

    pub fn fingerprint_bits(&self) -> u8 {
        self.fingerprint_bits
    }

    pub fn seed(&self) -> u32 {
        self.seed
    }

    /// Expected false-positive rate holding `items` fingerprints.
    pub fn theoretical_fpr(&self, items: u64) -> f64 {
        let load = (items as f64 / self.num_slots() as f64).min(1.0);
        cuckoo_fpr(self.fingerprint_bits, load)
    }
}

/// A query compares its (non-zero) fingerprint with the 2 × 4 slots of its
/// buckets, each occupied with probability `load`.
fn cuckoo_fpr(bits: u8, load: f64) -> f64 {
    let values = ((1u64 << bits) - 1) as f64;
    1.0 - (1.0 - 1.0 / values).powf(2.0 * BUCKET_SLOTS as f64 * load)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizing_meets_the_target_at_ten_bits_per_item_for_one_percent() {
        let g = BloomGeometry::for_capacity(1_000_000, 0.01).unwrap();
        assert!(g.theoretical_fpr(1_000_000) <= 0.01);
        let bits_per_item = g.num_bits() as f64 / 1e6;
        assert!(bits_per_item <= 10.0, "{bits_per_item}");
        // One block fewer would miss the target: the search is tight.
        let smaller = BloomGeometry::new(g.num_bits() - BLOCK_BITS, g.k(), 0).unwrap();
        assert!(best_k(1_000_000, smaller.num_blocks()).1 > 0.01);
    }

    #[test]
    fn sizing_rejects_bad_rates_and_huge_sizes() {
        for p in [0.0, -1.0, 0.9, f64::NAN] {
            assert!(BloomGeometry::for_capacity(10, p).is_err());
            assert!(CuckooGeometry::for_capacity(10, p).is_err());
        }
        assert!(matches!(
            BloomGeometry::for_capacity(u64::MAX / 4, 1e-9),
            Err(GeometryError::TooLarge { .. })
        ));
        assert!(BloomGeometry::new(100, 3, 0).is_err());
        assert!(BloomGeometry::new(512, 0, 0).is_err());
        assert!(CuckooGeometry::new(0, 8, 0).is_err());
        assert!(CuckooGeometry::new(10, 3, 0).is_err());
        assert!(CuckooGeometry::new(10, 17, 0).is_err());
    }

    #[test]
    fn cuckoo_sizing_stays_under_eleven_bits_per_item_at_one_percent() {
        let g = CuckooGeometry::for_capacity(1_000_000, 0.01).unwrap();
        assert_eq!(g.fingerprint_bits(), 10);
        let bits = (g.num_slots() * u64::from(g.fingerprint_bits())) as f64 / 1e6;
        assert!(bits <= 11.0, "{bits}");
        assert!(g.theoretical_fpr(1_000_000) <= 0.01);
    }

    #[test]
    fn rate_falls_as_bits_rise() {
        let mut last = 1.0;
        for blocks in [100, 200, 400, 800] {
            let r = blocked_fpr(10_000, blocks, 6);
            assert!(r < last);
            last = r;
        }
    }
}
