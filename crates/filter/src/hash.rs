//! MurmurHash3 `x64_128` and the probe positions derived from it.
//!
//! Written here rather than taken from a crate because every reader of the
//! formats (this crate, `web/xarchive-filter.js`, third-party readers) must
//! reproduce it bit for bit, with the reference's 32-bit seed and tail
//! handling; the existing crates differ in seed width or go through `io::Read`,
//! which costs more than the hash itself on short archive IDs.

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// The two 64-bit halves of a MurmurHash3 `x64_128` digest.
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

/// The zero-padded tail of `data` (its last `t` bytes, 1 ≤ t ≤ 15) as two
/// little-endian words. Inputs of 16 bytes or more read the tail with
/// overlapping 8-byte loads and shift the surplus out, avoiding a
/// variable-length copy on the hot path.
#[inline(always)]
fn tail_words(data: &[u8], t: usize) -> (u64, u64) {
    let len = data.len();
    if len < 16 {
        let tail = &data[len - t..];
        let k2 = if t > 8 { le_u64(&tail[8..]) } else { 0 };
        return (le_u64(&tail[..t.min(8)]), k2);
    }
    let last = u64::from_le_bytes(last8(data, len));
    if t > 8 {
        let k1 = u64::from_le_bytes(last8(data, len - t + 8));
        (k1, last >> (8 * (16 - t)))
    } else {
        (last >> (8 * (8 - t)), 0)
    }
}

/// The 8 bytes of `data` ending at `end` (end ≥ 8).
#[inline(always)]
fn last8(data: &[u8], end: usize) -> [u8; 8] {
    let mut out = [0u8; 8];
    out.copy_from_slice(&data[end - 8..end]);
    out
}

/// MurmurHash3 `x64_128` (Austin Appleby's reference `MurmurHash3_x64_128`).
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
    if !tail.is_empty() {
        let (k1, k2) = tail_words(data, tail.len());
        if tail.len() > 8 {
            h2 ^= mix_k2(k2);
        }
        h1 ^= mix_k1(k1);
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

/// Probes of one ID for filters of many geometries, the ID hashed once per
/// run of equal seeds: a geometry's probes are [`Probes::new`] of the
/// digest under its seed and its block count, so filters of one seed
/// (every domain's: 0) share the digest whatever their sizes.
#[derive(Default)]
pub(crate) struct Hashed {
    last: Option<(u32, Digest)>,
}

impl Hashed {
    #[inline]
    pub(crate) fn probes(&mut self, seed: u32, num_blocks: u64, id: &[u8]) -> Probes {
        let digest = match self.last {
            Some((s, digest)) if s == seed => digest,
            _ => murmur3_x64_128(id, seed),
        };
        self.last = Some((seed, digest));
        Probes::new(digest, num_blocks)
    }
}

/// Bits in one block of a blocked Bloom layout: all k probes of an ID fall in
/// one block, so a lookup touches one 64-byte cache line of a bit array.
pub const BLOCK_BITS: u64 = 512;

/// Block number `block` of `words`, where a block is `N` words: as an
/// array, so that indexing inside it needs no further bounds check.
#[inline(always)]
// A block is below the filter's block count, whose words are in memory:
// its first word's index fits a usize.
#[allow(clippy::cast_possible_truncation)]
pub(crate) fn block<const N: usize>(words: &[u64], block: u64) -> &[u64; N] {
    let start = block as usize * N;
    words[start..start + N]
        .try_into()
        .expect("a slice of N words is an array of N words")
}

#[inline(always)]
// A block is below the filter's block count, whose words are in memory:
// its first word's index fits a usize.
#[allow(clippy::cast_possible_truncation)]
pub(crate) fn block_mut<const N: usize>(words: &mut [u64], block: u64) -> &mut [u64; N] {
    let start = block as usize * N;
    (&mut words[start..start + N])
        .try_into()
        .expect("a slice of N words is an array of N words")
}

/// Offsets taken from one 64-bit word: seven 9-bit fields.
pub const OFFSETS_PER_WORD: u32 = 7;

/// Where an ID's k probes fall: all in block `fast_range(h1, blocks)`, at
/// offsets that are consecutive 9-bit fields of the words
/// `w_j = h2 + j · rotl(h1, 32)` (mod 2^64): probe i is field `i mod 7` of
/// word `i / 7`, so up to 7 probes read `h2` alone.
///
/// Why fields and not the textbook `a + i·b mod 512`: inside a 512-bit
/// block, double hashing leaves only 2^17 distinct probe patterns, many of
/// them shifted copies sharing k − 1 bits, which measured 15 % more false
/// positives than the model (6 % when done in 64-bit space); independent
/// fields match it (see docs/FORMAT.md). Double hashing survives where the
/// space is large: deriving further words when k > 7.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probes {
    pub block: u64,
    /// `w_0` = h2.
    pub word: u64,
    /// `rotl(h1, 32)`: its high half is h1's low half, independent of the
    /// block choice, which the high bits of h1 make.
    pub step: u64,
}

impl Probes {
    #[inline(always)]
    pub fn new(digest: Digest, num_blocks: u64) -> Self {
        Probes {
            block: fast_range(digest.h1, num_blocks),
            word: digest.h2,
            step: digest.h1.rotate_left(32),
        }
    }

    /// Offset of probe `i` inside the block.
    #[inline(always)]
    pub fn offset(&self, i: u32) -> u32 {
        let word = self
            .word
            .wrapping_add(u64::from(i / OFFSETS_PER_WORD).wrapping_mul(self.step));
        ((word >> (9 * (i % OFFSETS_PER_WORD))) & (BLOCK_BITS - 1)) as u32
    }

    /// The offsets of probes `0..k`, in order.
    #[inline(always)]
    pub fn offsets(&self, k: u32) -> Offsets {
        Offsets {
            word: self.word,
            bits: self.word,
            step: self.step,
            field: 0,
            left: k,
        }
    }

    /// Folds `f` over the offsets of probes `0..k`, in order: the hot-path
    /// form of [`offsets`](Self::offsets), a plain loop over each word's
    /// fields that the compiler keeps in registers.
    #[inline(always)]
    pub fn fold_offsets<A>(&self, k: u32, init: A, mut f: impl FnMut(A, u32) -> A) -> A {
        let mut acc = init;
        let mut word = self.word;
        let mut left = k;
        loop {
            let fields = left.min(OFFSETS_PER_WORD);
            let mut bits = word;
            for _ in 0..fields {
                acc = f(acc, (bits & (BLOCK_BITS - 1)) as u32);
                bits >>= 9;
            }
            left -= fields;
            if left == 0 {
                return acc;
            }
            word = word.wrapping_add(self.step);
        }
    }

    /// Absolute position of probe `i`.
    #[inline(always)]
    pub fn position(&self, i: u32) -> u64 {
        self.block * BLOCK_BITS + u64::from(self.offset(i))
    }
}

/// Iterator over a probe set's offsets (see [`Probes::offsets`]).
#[derive(Clone, Debug)]
pub struct Offsets {
    /// The current word `w_j`, and what is left of it after the fields read.
    word: u64,
    bits: u64,
    step: u64,
    field: u32,
    left: u32,
}

impl Iterator for Offsets {
    type Item = u32;

    #[inline(always)]
    fn next(&mut self) -> Option<u32> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        if self.field == OFFSETS_PER_WORD {
            self.word = self.word.wrapping_add(self.step);
            self.bits = self.word;
            self.field = 0;
        }
        let off = (self.bits & (BLOCK_BITS - 1)) as u32;
        self.bits >>= 9;
        self.field += 1;
        Some(off)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Offsets {}

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
            let d = murmur3_x64_128(&key[..len], 256 - u32::try_from(len).unwrap());
            digests.extend_from_slice(&d.h1.to_le_bytes());
            digests.extend_from_slice(&d.h2.to_le_bytes());
        }
        let d = murmur3_x64_128(&digests, 0);
        assert_eq!(d.h1 & 0xffff_ffff, 0x6384_BA69);
    }

    /// The overlapping-load tail equals the plain zero-padded tail.
    #[test]
    fn tail_loads_agree_with_the_plain_reading() {
        let data: Vec<u8> = (1..=64u8).collect();
        for len in 0..=64 {
            let t = len % 16;
            if t == 0 {
                continue;
            }
            let tail = &data[len - t..len];
            let plain_k1 = le_u64(&tail[..t.min(8)]);
            let plain_k2 = if t > 8 { le_u64(&tail[8..]) } else { 0 };
            assert_eq!(
                tail_words(&data[..len], t),
                (plain_k1, plain_k2),
                "len {len}"
            );
        }
    }

    #[test]
    fn probes_stay_in_their_block_and_offsets_agree() {
        for i in 0..1000u32 {
            let d = murmur3_x64_128(&i.to_le_bytes(), 7);
            let p = Probes::new(d, 1000);
            assert!(p.block < 1000);
            let listed: Vec<u32> = p.offsets(32).collect();
            let folded = p.fold_offsets(32, Vec::new(), |mut v, off| {
                v.push(off);
                v
            });
            assert_eq!(folded, listed);
            for (j, off) in listed.iter().enumerate() {
                let j = u32::try_from(j).unwrap();
                assert_eq!(*off, p.offset(j));
                assert_eq!(p.position(j) / BLOCK_BITS, p.block);
            }
        }
        // The first seven offsets are h2's 9-bit fields, low first.
        let p = Probes::new(
            Digest {
                h1: 0,
                h2: 0o123_456_701_234_567_012_345,
            },
            1,
        );
        assert_eq!(p.offsets(3).collect::<Vec<_>>(), vec![0o345, 0o012, 0o567]);
    }
}
