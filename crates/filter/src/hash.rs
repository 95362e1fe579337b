//! MurmurHash3 x64_128 and the probe positions derived from it.
//!
//! Written here rather than taken from a crate because every reader of the
//! formats (this crate, `web/xarchive-filter.js`, third-party readers) must
//! reproduce it bit for bit, with the reference's 32-bit seed and tail
//! handling; the existing crates differ in seed width or go through `io::Read`,
//! which costs more than the hash itself on short archive IDs.

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// The two 64-bit halves of a MurmurHash3 x64_128 digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Digest {
    pub h1: u64,
    pub h2: u64,
}

#[inline(always)]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[inline(always)]
fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

#[inline(always)]
fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

/// Little-endian value of up to 8 bytes (missing high bytes are zero).
#[inline(always)]
fn le_u64(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(buf)
}

/// MurmurHash3 x64_128 (Austin Appleby's reference `MurmurHash3_x64_128`).
#[inline]
pub fn murmur3_x64_128(data: &[u8], seed: u32) -> Digest {
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let (lo, hi) = block.split_at(8);
        h1 ^= mix_k1(le_u64(lo));
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(le_u64(hi));
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    if tail.len() > 8 {
        h2 ^= mix_k2(le_u64(&tail[8..]));
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(le_u64(&tail[..tail.len().min(8)]));
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    Digest { h1, h2 }
}

/// `floor(x * n / 2^64)`: maps a uniform 64-bit value onto `0..n` without a
/// division (Lemire's "fast range").
#[inline(always)]
pub(crate) fn fast_range(x: u64, n: u64) -> u64 {
    ((u128::from(x) * u128::from(n)) >> 64) as u64
}

/// Bits in one block of a blocked Bloom layout: all k probes of an ID fall in
/// one block, so a lookup touches one 64-byte cache line of a bit array.
pub const BLOCK_BITS: u64 = 512;

/// Where an ID's k probes fall: `block * 512 + ((start + i * step) mod 512)`
/// for `i in 0..k`. `step` is odd, hence invertible modulo 512, so the k
/// positions are distinct (k ≤ 512). Double hashing (Kirsch–Mitzenmacher)
/// inside the block; `h1` picks the block, `h2` the offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probes {
    pub block: u64,
    pub start: u32,
    pub step: u32,
}

impl Probes {
    #[inline(always)]
    pub fn new(digest: Digest, num_blocks: u64) -> Self {
        Probes {
            block: fast_range(digest.h1, num_blocks),
            start: ((digest.h2 >> 32) & (BLOCK_BITS - 1)) as u32,
            step: ((digest.h2 & (BLOCK_BITS - 1)) | 1) as u32,
        }
    }

    /// Offset of probe `i` inside the block.
    #[inline(always)]
    pub fn offset(&self, i: u32) -> u32 {
        self.start.wrapping_add(i.wrapping_mul(self.step)) & (BLOCK_BITS as u32 - 1)
    }

    /// Absolute position of probe `i`.
    #[inline(always)]
    pub fn position(&self, i: u32) -> u64 {
        self.block * BLOCK_BITS + u64::from(self.offset(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_vectors() {
        let d = murmur3_x64_128(b"foo", 0);
        assert_eq!((d.h1, d.h2), (0xe271_8657_01f5_4561, 0x7eaf_87e4_2bba_7d87));
        let d = murmur3_x64_128(b"The quick brown fox jumps over the lazy dog", 0x9747_B28C);
        assert_eq!((d.h1, d.h2), (0x738a_7f3b_d263_3121, 0xf945_7372_7ec0_16e5));
        let d = murmur3_x64_128(b"", 0);
        assert_eq!((d.h1, d.h2), (0, 0));
    }

    /// SMHasher's `VerificationTest`: hash keys {}, {0}, {0,1}, … {0..254}
    /// with seed 256 - len, concatenate the digests, hash that with seed 0;
    /// the first four bytes, little-endian, must be 0x6384BA69.
    #[test]
    fn smhasher_verification_value() {
        let key: Vec<u8> = (0..=255u8).collect();
        let mut digests = Vec::with_capacity(256 * 16);
        for len in 0..256usize {
            let d = murmur3_x64_128(&key[..len], 256 - len as u32);
            digests.extend_from_slice(&d.h1.to_le_bytes());
            digests.extend_from_slice(&d.h2.to_le_bytes());
        }
        let d = murmur3_x64_128(&digests, 0);
        assert_eq!(d.h1 as u32, 0x6384_BA69);
    }

    #[test]
    fn probes_are_distinct_and_inside_the_block() {
        for i in 0..1000u32 {
            let d = murmur3_x64_128(&i.to_le_bytes(), 7);
            let p = Probes::new(d, 1000);
            let mut seen = std::collections::HashSet::new();
            for j in 0..32 {
                let pos = p.position(j);
                assert_eq!(pos / BLOCK_BITS, p.block);
                assert!(seen.insert(pos));
            }
            assert!(p.block < 1000);
        }
    }
}
