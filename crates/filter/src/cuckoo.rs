//! The cuckoo filter: buckets of 4 fingerprints, partial-key cuckoo
//! hashing, and a victim slot so that a full filter refuses new IDs instead
//! of dropping one it holds.

use crate::codec::{self, DecodeError, Writer};
use crate::delta::{ApplyError, ChangeLog, Delta, DeltaError, DEFAULT_LOG_CAPACITY};
use crate::geometry::{CuckooGeometry, GeometryError, BUCKET_SLOTS};
use crate::hash::{fast_range, murmur3_x64_128};
use crate::NotPresent;

/// Evictions tried before an insert parks the last evicted fingerprint in
/// the victim slot (the reference implementation's figure).
pub const MAX_KICKS: u32 = 500;
/// Bytes after the packed table so a bucket can always be read with one
/// unaligned 16-byte load.
const PADDING: usize = 16;
// BUCKET_SLOTS is 4.
#[allow(clippy::cast_possible_truncation)]
const SLOTS: u32 = BUCKET_SLOTS as u32;

/// The filter is full: its victim slot holds a fingerprint that found no
/// bucket. The insert was refused and nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cuckoo filter is full ({items} items); the insert was refused and nothing changed")]
pub struct Full {
    pub items: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Victim {
    bucket: u64,
    fingerprint: u16,
}

/// A cuckoo filter with fingerprints of 4..=16 bits packed without gaps.
/// Deterministic: eviction choices come from a seeded generator whose state
/// is part of the filter, so equal operation sequences give equal bytes.
#[derive(Clone, Debug)]
pub struct CuckooFilter {
    geometry: CuckooGeometry,
    table: Vec<u8>,
    victim: Option<Victim>,
    rng: u64,
    items: u64,
    epoch: u64,
    version: u64,
    log: ChangeLog,
    /// Bit 0 of each of the four lanes of a bucket, for the SWAR match.
    lanes_low: u64,
}

impl CuckooFilter {
    pub fn new(geometry: CuckooGeometry) -> Self {
        CuckooFilter {
            geometry,
            table: vec![0; table_bytes(&geometry) + PADDING],
            victim: None,
            rng: initial_rng(geometry.seed()),
            items: 0,
            epoch: 0,
            version: 0,
            log: ChangeLog::new(DEFAULT_LOG_CAPACITY, 0),
            lanes_low: lanes_low(geometry.fingerprint_bits()),
        }
    }

    pub fn with_capacity(items: u64, fpr: f64) -> Result<Self, GeometryError> {
        Ok(CuckooFilter::new(CuckooGeometry::for_capacity(items, fpr)?))
    }

    /// Keeps at most `capacity` slot changes for deltas.
    #[must_use]
    pub fn with_log_capacity(mut self, capacity: usize) -> Self {
        self.log = ChangeLog::new(capacity, self.version);
        self
    }

    pub fn geometry(&self) -> CuckooGeometry {
        self.geometry
    }

    fn bits(&self) -> u32 {
        u32::from(self.geometry.fingerprint_bits())
    }

    fn fingerprint_mask(&self) -> u64 {
        (1u64 << self.bits()) - 1
    }

    /// Home bucket and fingerprint (never 0, which marks an empty slot).
    #[inline(always)]
    // A fingerprint is below its mask plus one, at most 2^16 - 1: it fits a u16.
    #[allow(clippy::cast_possible_truncation)]
    fn locate(&self, id: &[u8]) -> (u64, u16) {
        let d = murmur3_x64_128(id, self.geometry.seed());
        let bucket = fast_range(d.h1, self.geometry.num_buckets());
        let fingerprint = fast_range(d.h2, self.fingerprint_mask()) + 1;
        (bucket, fingerprint as u16)
    }

    /// The other bucket of a fingerprint in bucket `i`: (H(fp) - i) mod n,
    /// an involution for any bucket count, so no power-of-two rounding.
    #[inline(always)]
    fn alternate(&self, i: u64, fingerprint: u16) -> u64 {
        let n = self.geometry.num_buckets();
        let h = fast_range(
            u64::from(fingerprint).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            n,
        );
        if h >= i {
            h - i
        } else {
            h + n - i
        }
    }

    /// The 4 × f bits of bucket `i`.
    #[inline(always)]
    // A bucket is at most 64 bits wide: after the shift, the mask keeps only
    // bits of the low word.
    #[allow(clippy::cast_possible_truncation)]
    fn bucket(&self, i: u64) -> u64 {
        let width = SLOTS * self.bits();
        let bit = i * u64::from(width);
        let (byte, shift) = ((bit / 8) as usize, (bit % 8) as u32);
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        if width + 7 <= 64 {
            (u64::from_le_bytes(le(&self.table[byte..byte + 8])) >> shift) & mask
        } else {
            ((u128::from_le_bytes(le(&self.table[byte..byte + 16])) >> shift) as u64) & mask
        }
    }

    // Masked to a fingerprint's width, at most 16 bits.
    #[allow(clippy::cast_possible_truncation)]
    fn slot(&self, i: u64, j: u32) -> u16 {
        ((self.bucket(i) >> (j * self.bits())) & self.fingerprint_mask()) as u16
    }

    // A fingerprint is at most 16 bits, and so is its mask.
    #[allow(clippy::cast_possible_truncation)]
    fn write_slot(&mut self, i: u64, j: u32, fingerprint: u16) {
        let cell = i * BUCKET_SLOTS + u64::from(j);
        let bit = cell * u64::from(self.bits());
        let (byte, shift) = ((bit / 8) as usize, (bit % 8) as u32);
        let mask = (self.fingerprint_mask() as u32) << shift;
        let mut raw = u32::from_le_bytes(le(&self.table[byte..byte + 4]));
        raw = (raw & !mask) | (u32::from(fingerprint) << shift);
        self.table[byte..byte + 4].copy_from_slice(&raw.to_le_bytes());
        self.log.record(self.version, cell, fingerprint);
    }

    /// Whether any lane of `bucket` equals `fingerprint` (exact: the SWAR
    /// zero-lane test only errs in lanes above a true match).
    #[inline(always)]
    fn holds(&self, bucket: u64, fingerprint: u16) -> bool {
        let high = self.lanes_low << (self.bits() - 1);
        let x = bucket ^ (self.lanes_low * u64::from(fingerprint));
        x.wrapping_sub(self.lanes_low) & !x & high != 0
    }

    fn find_slot(&self, i: u64, fingerprint: u16) -> Option<u32> {
        (0..SLOTS).find(|&j| self.slot(i, j) == fingerprint)
    }

    fn try_put(&mut self, i: u64, fingerprint: u16) -> bool {
        match self.find_slot(i, 0) {
            Some(j) => {
                self.write_slot(i, j, fingerprint);
                true
            }
            None => false,
        }
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: small, seeded, and part of the serialized state.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Puts `fingerprint` in bucket `i` or its alternate, evicting others
    /// as needed; the fingerprint finally left without a bucket goes to the
    /// victim slot, which must be empty.
    fn place(&mut self, i: u64, fingerprint: u16) {
        let other = self.alternate(i, fingerprint);
        if self.try_put(i, fingerprint) || self.try_put(other, fingerprint) {
            return;
        }
        let (mut i, mut fingerprint) = if self.next_random() & 1 == 0 {
            (i, fingerprint)
        } else {
            (other, fingerprint)
        };
        for _ in 0..MAX_KICKS {
            let j = (self.next_random() % BUCKET_SLOTS) as u32;
            let evicted = self.slot(i, j);
            self.write_slot(i, j, fingerprint);
            fingerprint = evicted;
            i = self.alternate(i, fingerprint);
            if self.try_put(i, fingerprint) {
                return;
            }
        }
        self.victim = Some(Victim {
            bucket: i,
            fingerprint,
        });
        // A delta cannot carry the victim slot: copies must take a snapshot.
        self.log.reset(self.version);
    }

    /// Adds `id`. When the filter is full (its victim slot is taken) the
    /// insert is refused and nothing changes; otherwise `id` is stored,
    /// possibly leaving another fingerprint in the victim slot, where it is
    /// still found.
    pub fn insert(&mut self, id: impl AsRef<[u8]>) -> Result<(), Full> {
        if self.victim.is_some() {
            return Err(Full { items: self.items });
        }
        let (i, fingerprint) = self.locate(id.as_ref());
        // Saturating: the version is decoded, the count may come from a delta.
        self.version = self.version.saturating_add(1);
        self.items = self.items.saturating_add(1);
        self.place(i, fingerprint);
        Ok(())
    }

    /// Raises the version without changing a cell, for a change that the
    /// holder's users care about but the filter cannot see (a record
    /// replaced under the same ID): copies learn of it by the version.
    pub fn touch(&mut self) {
        self.version = self.version.saturating_add(1);
    }

    /// Removes one copy of `id`'s fingerprint; refuses, changing nothing,
    /// when neither bucket nor the victim slot holds it. Removing an ID that
    /// was never inserted can remove another ID's fingerprint: the caller
    /// must know `id` is present.
    pub fn remove(&mut self, id: impl AsRef<[u8]>) -> Result<(), NotPresent> {
        let (i1, fingerprint) = self.locate(id.as_ref());
        let i2 = self.alternate(i1, fingerprint);
        let found = [i1, i2]
            .into_iter()
            .find_map(|i| self.find_slot(i, fingerprint).map(|j| (i, j)));
        match (found, self.victim) {
            (Some((i, j)), victim) => {
                self.version = self.version.saturating_add(1);
                self.items = self.items.saturating_sub(1);
                self.write_slot(i, j, 0);
                if let Some(v) = victim {
                    self.victim = None;
                    self.log.reset(self.version);
                    self.place(v.bucket, v.fingerprint);
                }
                Ok(())
            }
            (None, Some(v))
                if v.fingerprint == fingerprint && (v.bucket == i1 || v.bucket == i2) =>
            {
                self.version = self.version.saturating_add(1);
                self.items = self.items.saturating_sub(1);
                self.victim = None;
                self.log.reset(self.version);
                Ok(())
            }
            _ => Err(NotPresent),
        }
    }

    /// False means `id` is certainly not in the filter.
    #[inline]
    pub fn contains(&self, id: impl AsRef<[u8]>) -> bool {
        let (i1, fingerprint) = self.locate(id.as_ref());
        if self.holds(self.bucket(i1), fingerprint) {
            return true;
        }
        let i2 = self.alternate(i1, fingerprint);
        self.holds(self.bucket(i2), fingerprint)
            || self
                .victim
                .is_some_and(|v| v.fingerprint == fingerprint && (v.bucket == i1 || v.bucket == i2))
    }

    /// Copies of `id`'s fingerprint in its buckets and the victim slot: an
    /// upper bound on how many times it is held.
    // A bucket has four slots: the count fits a u32.
    #[allow(clippy::cast_possible_truncation)]
    pub fn count(&self, id: impl AsRef<[u8]>) -> u32 {
        let (i1, fingerprint) = self.locate(id.as_ref());
        let i2 = self.alternate(i1, fingerprint);
        let in_bucket = |i| {
            (0..SLOTS)
                .filter(|&j| self.slot(i, j) == fingerprint)
                .count() as u32
        };
        let buckets = if i1 == i2 {
            in_bucket(i1)
        } else {
            in_bucket(i1) + in_bucket(i2)
        };
        let victim = self
            .victim
            .is_some_and(|v| v.fingerprint == fingerprint && (v.bucket == i1 || v.bucket == i2));
        buckets + u32::from(victim)
    }

    /// Whether the victim slot is taken (the next insert will be refused).
    pub fn is_full(&self) -> bool {
        self.victim.is_some()
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    /// Share of slots holding a fingerprint.
    pub fn load_factor(&self) -> f64 {
        self.items as f64 / self.geometry.num_slots() as f64
    }

    /// Bytes the table occupies in memory: the packed fingerprints and the
    /// padding that lets a bucket be read with one load (the change log
    /// is not counted).
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A new epoch: copies of an older epoch must take a snapshot.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.log.reset(self.version);
    }

    pub fn oldest_delta_version(&self) -> u64 {
        self.log.oldest()
    }

    /// The slot changes that bring a copy at version `since` to this
    /// filter's version (cells are slots, values fingerprints).
    pub fn changes_since(&self, since: u64) -> Result<Delta, DeltaError> {
        Ok(Delta {
            epoch: self.epoch,
            from_version: since,
            to_version: self.version,
            num_cells: self.geometry.num_slots(),
            cell_bits: self.geometry.fingerprint_bits(),
            items: self.items,
            changes: self.log.since(since, self.version)?,
        })
    }

    /// Brings a copy forward by a delta from [`changes_since`]; on error
    /// nothing changes.
    ///
    /// [`changes_since`]: Self::changes_since
    pub fn apply(&mut self, delta: &Delta) -> Result<(), ApplyError> {
        delta.check(
            self.epoch,
            self.version,
            self.geometry.num_slots(),
            self.geometry.fingerprint_bits(),
        )?;
        self.version = delta.to_version;
        for c in &delta.changes {
            let (i, j) = (c.cell / BUCKET_SLOTS, (c.cell % BUCKET_SLOTS) as u32);
            self.write_slot(i, j, c.value);
        }
        self.items = delta.items;
        Ok(())
    }

    /// Serializes in the `XACK` format of docs/FORMAT.md.
    pub fn encode(&self) -> Vec<u8> {
        let payload = &self.table[..self.table.len() - PADDING];
        let victim = self.victim.unwrap_or(Victim {
            bucket: 0,
            fingerprint: 0,
        });
        let mut w = Writer::new(codec::CUCKOO, 48 + payload.len());
        w.u64(self.geometry.num_buckets())
            .u8(self.geometry.fingerprint_bits())
            .u8(u8::from(self.victim.is_some()))
            .u16(victim.fingerprint)
            .u32(self.geometry.seed())
            .u64(self.epoch)
            .u64(self.version)
            .u64(victim.bucket)
            .u64(self.rng)
            .bytes(payload);
        w.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = codec::open(bytes, codec::CUCKOO)?;
        let num_buckets = r.u64()?;
        let bits = r.u8()?;
        let has_victim = r.u8()?;
        let victim_fingerprint = r.u16()?;
        let seed = r.u32()?;
        let geometry = CuckooGeometry::new(num_buckets, bits, seed)?;
        let epoch = r.u64()?;
        let version = r.u64()?;
        let victim_bucket = r.u64()?;
        let rng = r.u64()?;
        let payload = r.payload(table_bytes(&geometry) as u64)?;
        let victim = match has_victim {
            0 if victim_fingerprint == 0 && victim_bucket == 0 => None,
            1 if victim_fingerprint != 0
                && u64::from(victim_fingerprint) < (1 << bits)
                && victim_bucket < num_buckets =>
            {
                Some(Victim {
                    bucket: victim_bucket,
                    fingerprint: victim_fingerprint,
                })
            }
            _ => return Err(DecodeError::Invalid("victim slot fields are inconsistent")),
        };
        if rng == 0 {
            return Err(DecodeError::Invalid("generator state must be non-zero"));
        }
        let used_bits = geometry.num_slots() * u64::from(bits);
        if used_bits % 8 != 0 {
            let last = payload[payload.len() - 1];
            if last >> (used_bits % 8) != 0 {
                return Err(DecodeError::Invalid(
                    "padding bits after the last slot must be zero",
                ));
            }
        }
        let mut table = Vec::with_capacity(payload.len() + PADDING);
        table.extend_from_slice(payload);
        table.resize(payload.len() + PADDING, 0);
        let mut filter = CuckooFilter {
            geometry,
            table,
            victim,
            rng,
            items: 0,
            epoch,
            version,
            log: ChangeLog::new(DEFAULT_LOG_CAPACITY, version),
            lanes_low: lanes_low(bits),
        };
        let held = (0..num_buckets)
            .map(|i| (0..SLOTS).filter(|&j| filter.slot(i, j) != 0).count() as u64)
            .sum::<u64>();
        filter.items = held + u64::from(victim.is_some());
        Ok(filter)
    }
}

/// Two filters are equal when their serialized forms are: same geometry,
/// slots, victim and generator state (logs aside).
impl PartialEq for CuckooFilter {
    fn eq(&self, other: &Self) -> bool {
        self.geometry == other.geometry
            && self.table == other.table
            && self.victim == other.victim
            && self.rng == other.rng
            && self.items == other.items
            && self.epoch == other.epoch
            && self.version == other.version
    }
}

// A table's byte count: exact where usize is 64 bits, as on every target
// the workspace is built for.
#[allow(clippy::cast_possible_truncation)]
fn table_bytes(g: &CuckooGeometry) -> usize {
    (g.num_slots() * u64::from(g.fingerprint_bits())).div_ceil(8) as usize
}

fn lanes_low(bits: u8) -> u64 {
    (0..SLOTS).fold(0, |acc, j| acc | 1u64 << (j * u32::from(bits)))
}

fn initial_rng(seed: u32) -> u64 {
    // SplitMix64 of the seed: any seed, including 0, gives a non-zero state.
    let mut z = u64::from(seed).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}

fn le<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::unhex;

    #[test]
    fn full_filter_refuses_and_keeps_everything() {
        let mut f = CuckooFilter::new(CuckooGeometry::new(4, 8, 1).unwrap());
        let mut held = Vec::new();
        let mut refused = None;
        for i in 0..100 {
            let id = format!("ID-{i}");
            match f.insert(&id) {
                Ok(()) => held.push(id),
                Err(e) => {
                    refused = Some((id, e));
                    break;
                }
            }
        }
        let (id, _) = refused.expect("16 slots cannot hold 100 items");
        assert!(f.is_full());
        let before = f.encode();
        assert!(f.insert(&id).is_err());
        assert_eq!(f.encode(), before, "a refused insert changes nothing");
        for id in &held {
            assert!(f.contains(id), "{id} was dropped");
        }
        // Removing one frees room: the victim goes back into a bucket.
        f.remove(&held[0]).unwrap();
        assert!(!f.is_full());
        for id in &held[1..] {
            assert!(f.contains(id));
        }
    }

    #[test]
    fn table_len_is_the_packed_slots_and_padding() {
        // 100 buckets × 4 slots × 12 bits = 600 bytes.
        let f = CuckooFilter::new(CuckooGeometry::new(100, 12, 0).unwrap());
        assert_eq!(f.table_len(), 600 + PADDING);
    }

    /// Fuzz find (`decode_cuckoo`): decoding these 62 bytes (one bucket of
    /// 4-bit slots) allocated the 2 MiB change-log ring up front; it is now
    /// allocated by the first change.
    #[test]
    fn decode_regression_log_allocation() {
        let bytes = unhex(
            "5841434b01000000010000000000000004000000000000000000000000000000
           00000000000000000000000000000000afcd1d7b39a820e20000303b620c",
        );
        let mut f = CuckooFilter::decode(&bytes).unwrap();
        assert!(!f.log.is_allocated());
        assert_eq!(f.encode(), bytes);
        let copy = f.clone();
        f.insert("J001-WS·2023-Y-0001").unwrap();
        assert!(f.log.is_allocated());
        let mut copy = copy;
        copy.apply(&f.changes_since(0).unwrap()).unwrap();
        assert!(copy.contains("J001-WS·2023-Y-0001"));
    }

    /// Fuzz find (`decode_delta`): a delta may set `items` to anything (here
    /// 0) while the filter still holds fingerprints; removing one then
    /// underflowed `items -= 1`. The delta artifact, CRC recomputed.
    #[test]
    fn decode_regression_delta_items_underflow() {
        let bytes = unhex(
            "5841444c010000001cfb00000000000010000000000000000000000000000000
           00000000000000000e00004e0000000000000000000000000e00000000000000
           828e01aff81382e10499e80eac921293d910f5a41381ca06e2a205e58f04cee3
           06b6e704cbcc04899f063dbab618",
        );
        let delta = Delta::decode(&bytes).unwrap();
        assert_eq!((delta.items, delta.cell_bits), (0, 16));
        let g = CuckooGeometry::new(delta.num_cells / BUCKET_SLOTS, delta.cell_bits, 0).unwrap();
        let mut f = CuckooFilter::new(g);
        f.insert("J001-WS·2023-Y-0001").unwrap();
        f.epoch = delta.epoch;
        f.version = delta.from_version;
        f.apply(&delta).unwrap();
        assert_eq!(f.items(), 0);
        f.remove("J001-WS·2023-Y-0001").unwrap();
        assert_eq!(f.items(), 0, "the count saturates at zero");
        f.version = u64::MAX;
        f.insert("another ID").unwrap();
        assert_eq!(f.version(), u64::MAX, "and the version at the top");
    }

    /// Fuzz find (`decode_cuckoo`): a filter decoded at version `u64::MAX`
    /// overflowed in `touch`. The artifact, CRC recomputed.
    #[test]
    fn decode_regression_touch_version() {
        let bytes = unhex(
            "5841434b01000000070000000000000010000000030000000000000000000000
           ffffffffffffffff0000000000000000ed8f01d8e4145874434b010000000100
           000000000000068864afad8231bb00f098ff2f3929ef543cd4b3ec0ab5000000
           75d201a56251e507ceb1b6334b26898fca8bf313",
        );
        let mut f = CuckooFilter::decode(&bytes).unwrap();
        assert_eq!(f.version(), u64::MAX);
        f.touch();
        assert_eq!(f.version(), u64::MAX);
    }

    #[test]
    fn every_width_round_trips() {
        for bits in 4..=16u8 {
            let mut f = CuckooFilter::new(CuckooGeometry::new(33, bits, 9).unwrap());
            for i in 0..100 {
                let _ = f.insert(format!("{i}"));
            }
            let back = CuckooFilter::decode(&f.encode()).unwrap();
            assert_eq!(back, f, "width {bits}");
        }
    }
}
