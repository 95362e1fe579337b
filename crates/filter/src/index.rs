//! Many Bloom filters of one geometry, stored bit-sliced so that the
//! filters that may hold an ID are found with k row reads, however many
//! filters there are.

use crate::bloom::{BloomFilter, GeometryMismatch};
use crate::delta::{ApplyError, Delta};
use crate::geometry::BloomGeometry;
use crate::hash::{Hashed, Probes, BLOCK_BITS};

/// Bloom filters of equal geometry, bit-sliced: for each bit position a row
/// of `row_bytes` bytes whose bit `s % 8` of byte `s / 8` says whether the
/// filter in slot `s` has that bit. A row of a block's 512 positions lies
/// together, so one query reads k rows within `512 × row_bytes` bytes.
///
/// Rows are whole bytes, not 64-bit words: an index of 70 filters takes
/// 72 slots, not 128. With filters in size classes 1.33–1.5 × apart, a
/// nation's filters fall into a dozen indexes; rounding each up to 64
/// slots cost 7 % of the routing state at 3 301 domains (docs/SCALING.md).
#[derive(Clone, Debug)]
pub struct SlicedIndex {
    geometry: BloomGeometry,
    row_bytes: usize,
    rows: Vec<u8>,
    /// (epoch, version) of the filter in each slot, as for [`BloomFilter`].
    positions: Vec<(u64, u64)>,
}

/// The slots a query may be in: a bit set over slot numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotSet(Vec<u64>);

impl SlotSet {
    pub fn contains(&self, slot: usize) -> bool {
        self.0
            .get(slot / 64)
            .is_some_and(|w| w >> (slot % 64) & 1 == 1)
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Slot numbers in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as usize;
                    w &= w - 1;
                    i * 64 + bit
                })
            })
        })
    }
}

/// The little-endian word of up to 8 bytes, zero above them.
#[inline(always)]
fn le_word(bytes: &[u8]) -> u64 {
    match <[u8; 8]>::try_from(bytes) {
        Ok(whole) => u64::from_le_bytes(whole),
        Err(_) => {
            let mut buf = [0u8; 8];
            buf[..bytes.len()].copy_from_slice(bytes);
            u64::from_le_bytes(buf)
        }
    }
}

impl BloomFilter {
    /// Whether each of `filters` may hold `id`: the same answers as
    /// [`contains`](Self::contains) on each, but every filter's block read
    /// is started before any is tested. Routing over thousands of copies
    /// that no cache holds then waits for their memory reads together
    /// rather than one after another (at 3 301 domains and 10^9 IDs, a
    /// routing step went from 12.0 to 8.0 µs; docs/SCALING.md). The ID is
    /// hashed once per run of equal seeds. (Here, beside the reads it
    /// shares with the index, so that `bloom.rs` needs nothing of this
    /// file.)
    pub fn contains_each(filters: &[&BloomFilter], id: impl AsRef<[u8]>) -> Vec<bool> {
        candidates_all(&[], filters, id).1
    }
}

/// What `indexes` and `filters` say of `id`: for each index the slots
/// whose filters may hold it (as [`SlicedIndex::candidates`]), for each
/// filter whether it may (as [`BloomFilter::contains`]).
///
/// Every memory read is started before any answer is computed: a routing
/// step over a nation's copies reads about k rows of each index and a
/// block of each filter held one by one, a few hundred cache lines that no
/// cache holds, and waits for them together rather than index after
/// index. The ID is hashed once per run of equal seeds.
pub fn candidates_all(
    indexes: &[&SlicedIndex],
    filters: &[&BloomFilter],
    id: impl AsRef<[u8]>,
) -> (Vec<SlotSet>, Vec<bool>) {
    let id = id.as_ref();
    let mut hashed = Hashed::default();
    let index_probes: Vec<Probes> = indexes
        .iter()
        .map(|ix| hashed.probes(ix.geometry.seed(), ix.geometry.num_blocks(), id))
        .collect();
    let filter_probes: Vec<Probes> = filters
        .iter()
        .map(|f| {
            let g = f.geometry();
            hashed.probes(g.seed(), g.num_blocks(), id)
        })
        .collect();
    // Independent loads, so the processor keeps many in flight; the XOR
    // only keeps them from being optimised away.
    let mut touched = 0u64;
    for (ix, p) in indexes.iter().zip(&index_probes) {
        touched ^= ix.touch(p);
    }
    for (f, p) in filters.iter().zip(&filter_probes) {
        touched ^= f.touch(p);
    }
    std::hint::black_box(touched);
    let sets = indexes
        .iter()
        .zip(&index_probes)
        .map(|(ix, p)| {
            let mut out = vec![0; ix.words()];
            ix.candidates_into(p, &mut out);
            SlotSet(out)
        })
        .collect();
    let maybe = filters
        .iter()
        .zip(&filter_probes)
        .map(|(f, p)| f.contains_probes(p))
        .collect();
    (sets, maybe)
}

impl SlicedIndex {
    /// Starts the reads of `probes`' rows (see [`candidates_all`]): a
    /// byte of each cache line a row spans (a row is not aligned to one,
    /// so even a short row may span two; its last byte reads the second).
    #[inline]
    fn touch(&self, probes: &Probes) -> u64 {
        let base = probes.block * BLOCK_BITS;
        probes.fold_offsets(self.geometry.k(), 0u64, |acc, off| {
            let row = self.row(base + u64::from(off));
            let last = row[row.len() - 1];
            row.iter()
                .step_by(64)
                .fold(acc ^ u64::from(last), |acc, &b| acc ^ u64::from(b))
        })
    }

    /// An index for up to `slots` filters (rounded up to a multiple of 8),
    /// all empty.
    // The rows' byte count: exact where usize is 64 bits, as on every target
    // the workspace is built for.
    #[allow(clippy::cast_possible_truncation)]
    pub fn new(geometry: BloomGeometry, slots: usize) -> Self {
        let row_bytes = slots.div_ceil(8).max(1);
        SlicedIndex {
            geometry,
            row_bytes,
            rows: vec![0; geometry.num_bits() as usize * row_bytes],
            positions: vec![(0, 0); row_bytes * 8],
        }
    }

    /// Memory of the rows.
    pub fn bytes(&self) -> u64 {
        self.rows.len() as u64
    }

    pub fn geometry(&self) -> BloomGeometry {
        self.geometry
    }

    /// Makes room for at least `slots` filters, every filter kept in its
    /// slot: each row's words are copied over whole, not the filters bit
    /// by bit.
    // The rows' byte count: exact where usize is 64 bits, as on every target
    // the workspace is built for.
    #[allow(clippy::cast_possible_truncation)]
    pub fn grow(&mut self, slots: usize) {
        let row_bytes = slots.div_ceil(8).max(1);
        if row_bytes <= self.row_bytes {
            return;
        }
        let mut rows = vec![0; self.geometry.num_bits() as usize * row_bytes];
        for (new, old) in rows
            .chunks_exact_mut(row_bytes)
            .zip(self.rows.chunks_exact(self.row_bytes))
        {
            new[..self.row_bytes].copy_from_slice(old);
        }
        self.rows = rows;
        self.row_bytes = row_bytes;
        self.positions.resize(row_bytes * 8, (0, 0));
    }

    /// Slots the index has room for.
    pub fn slots(&self) -> usize {
        self.row_bytes * 8
    }

    /// Words of a [`candidates_into`](Self::candidates_into) buffer.
    pub fn words(&self) -> usize {
        self.row_bytes.div_ceil(8)
    }

    // `pos` is below the filter's bits, each with a row in memory: it fits a usize.
    #[allow(clippy::cast_possible_truncation)]
    fn row(&self, pos: u64) -> &[u8] {
        let start = pos as usize * self.row_bytes;
        &self.rows[start..start + self.row_bytes]
    }

    fn check(&self, filter: BloomGeometry) -> Result<(), GeometryMismatch> {
        if filter != self.geometry {
            return Err(GeometryMismatch {
                left: self.geometry,
                right: filter,
            });
        }
        Ok(())
    }

    /// Puts `filter` in `slot` (panics if `slot` is out of range).
    pub fn set(&mut self, slot: usize, filter: &BloomFilter) -> Result<(), GeometryMismatch> {
        self.check(filter.geometry())?;
        let (byte, bit) = (slot / 8, 1u8 << (slot % 8));
        for (pos, row) in self.rows.chunks_exact_mut(self.row_bytes).enumerate() {
            if filter.words()[pos / 64] >> (pos % 64) & 1 == 1 {
                row[byte] |= bit;
            } else {
                row[byte] &= !bit;
            }
        }
        self.positions[slot] = (filter.epoch(), filter.version());
        Ok(())
    }

    /// Empties `slot`.
    pub fn clear(&mut self, slot: usize) {
        let (byte, bit) = (slot / 8, 1u8 << (slot % 8));
        for row in self.rows.chunks_exact_mut(self.row_bytes) {
            row[byte] &= !bit;
        }
        self.positions[slot] = (0, 0);
    }

    /// (epoch, version) of the filter in `slot`.
    pub fn position(&self, slot: usize) -> (u64, u64) {
        self.positions[slot]
    }

    /// Brings the filter in `slot` forward by `delta`, as
    /// [`BloomFilter::apply`] would; on error nothing changes.
    // A delta's cells are below the filter's bits (`check` above), and each has
    // a row in memory: the index fits a usize.
    #[allow(clippy::cast_possible_truncation)]
    pub fn apply(&mut self, slot: usize, delta: &Delta) -> Result<(), ApplyError> {
        let (epoch, version) = self.positions[slot];
        delta.check(epoch, version, self.geometry.num_bits(), 1)?;
        let (byte, bit) = (slot / 8, 1u8 << (slot % 8));
        for c in &delta.changes {
            let at = c.cell as usize * self.row_bytes + byte;
            if c.value == 1 {
                self.rows[at] |= bit;
            } else {
                self.rows[at] &= !bit;
            }
        }
        self.positions[slot] = (epoch, delta.to_version);
        Ok(())
    }

    /// The slots whose filters may hold `id`.
    pub fn candidates(&self, id: impl AsRef<[u8]>) -> SlotSet {
        let mut out = vec![0; self.words()];
        self.candidates_into(&self.geometry.probes(id.as_ref()), &mut out);
        SlotSet(out)
    }

    /// [`candidates`](Self::candidates) into a caller's buffer of
    /// [`words`](Self::words) words (slot `s` is bit `s % 64` of word
    /// `s / 64`), for probes computed with this geometry.
    #[inline]
    pub fn candidates_into(&self, probes: &Probes, out: &mut [u64]) {
        out.fill(u64::MAX);
        let base = probes.block * BLOCK_BITS;
        probes.fold_offsets(self.geometry.k(), (), |(), off| {
            // Byte `b` of a row is byte `b % 8` of word `b / 8`, little
            // endian: slot `s` lands on bit `s % 64` of word `s / 64`. The
            // last word's missing bytes read as zero: no slot there.
            let row = self.row(base + u64::from(off));
            let whole = row.chunks_exact(8);
            let tail = whole.remainder();
            let words = whole.len();
            for (o, r) in out.iter_mut().zip(whole) {
                *o &= le_word(r);
            }
            if !tail.is_empty() {
                if let Some(o) = out.get_mut(words) {
                    *o &= le_word(tail);
                }
            }
        });
    }

    /// Whether the filter in `slot` may hold `id`.
    pub fn contains(&self, slot: usize, id: impl AsRef<[u8]>) -> bool {
        self.candidates(id).contains(slot)
    }

    /// The filter in `slot`, taken out as a [`BloomFilter`] (its item
    /// count is not kept by the index and reads 0).
    pub fn filter(&self, slot: usize) -> BloomFilter {
        let (byte, bit) = (slot / 8, 1u8 << (slot % 8));
        let mut words = vec![0u64; (self.geometry.num_bits() / 64) as usize];
        for (pos, row) in self.rows.chunks_exact(self.row_bytes).enumerate() {
            if row[byte] & bit != 0 {
                words[pos / 64] |= 1 << (pos % 64);
            }
        }
        let (epoch, version) = self.positions[slot];
        BloomFilter::from_parts(self.geometry, words, epoch, version, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CountingBloomFilter;

    #[test]
    fn candidates_are_exactly_the_filters_that_answer_maybe() {
        let g = BloomGeometry::for_capacity(500, 0.01).unwrap();
        let mut index = SlicedIndex::new(g, 70);
        let mut filters = Vec::new();
        for s in 0..70 {
            let mut f = BloomFilter::new(g);
            for i in 0..300 {
                f.insert(format!("{s}/{i}"));
            }
            index.set(s, &f).unwrap();
            filters.push(f);
        }
        for q in 0..2000 {
            let id = format!("{}/{}", q % 80, q / 7);
            let got: Vec<usize> = index.candidates(&id).iter().collect();
            let want: Vec<usize> = (0..70).filter(|&s| filters[s].contains(&id)).collect();
            assert_eq!(got, want, "{id}");
        }
        assert_eq!(index.filter(3).words(), filters[3].words());
        index.clear(3);
        assert!(!index.contains(3, "3/1"));
    }

    proptest::proptest! {
        #[test]
        fn a_grown_index_answers_as_before_and_takes_more(
            before in 1usize..130,
            after in 1usize..300,
            seed in 0u32..1000,
        ) {
            let g = BloomGeometry::for_capacity(200, 0.01).unwrap();
            let mut index = SlicedIndex::new(g, before);
            let slots = index.slots();
            let filter = |s: usize| {
                let mut f = BloomFilter::new(g);
                for i in 0..100 {
                    f.insert(format!("{seed}/{s}/{i}"));
                }
                f.set_version(s as u64);
                f
            };
            for s in 0..slots {
                index.set(s, &filter(s)).unwrap();
            }
            let asked: Vec<String> = (0..200).map(|q| format!("{seed}/{}/{}", q % (slots + 3), q)).collect();
            let answers: Vec<Vec<usize>> = asked.iter().map(|id| index.candidates(id).iter().collect()).collect();
            index.grow(after);
            proptest::prop_assert!(index.slots() >= after.max(slots));
            for (id, want) in asked.iter().zip(&answers) {
                let got: Vec<usize> = index.candidates(id).iter().collect();
                proptest::prop_assert_eq!(&got, want);
            }
            for s in 0..slots {
                proptest::prop_assert_eq!(index.position(s), (0, s as u64));
            }
            // New slots are empty, and take filters.
            let last = index.slots() - 1;
            if last >= slots {
                proptest::prop_assert!(asked.iter().all(|id| !index.contains(last, id)));
            }
            index.set(last, &filter(last)).unwrap();
            let (held, put) = (index.filter(last), filter(last));
            proptest::prop_assert_eq!(held.words(), put.words());
        }
    }

    proptest::proptest! {
        #[test]
        fn an_index_of_any_width_answers_as_its_filters_would(
            slots in 1usize..200,
            seed in 0u32..1000,
            cleared in 0usize..200,
        ) {
            let g = BloomGeometry::for_capacity(64, 0.05).unwrap();
            let mut index = SlicedIndex::new(g, slots);
            proptest::prop_assert!(index.slots() >= slots && index.slots() < slots + 8);
            proptest::prop_assert_eq!(index.bytes(), g.num_bits() * index.slots() as u64 / 8);
            let mut filters: Vec<BloomFilter> = (0..index.slots())
                .map(|s| {
                    let mut f = BloomFilter::new(g);
                    for i in 0..(s % 50) {
                        f.insert(format!("{seed}/{s}/{i}"));
                    }
                    f
                })
                .collect();
            for (s, f) in filters.iter().enumerate() {
                index.set(s, f).unwrap();
            }
            let cleared = cleared % index.slots();
            index.clear(cleared);
            filters[cleared] = BloomFilter::new(g);
            let mut out = vec![0u64; index.words()];
            for q in 0..300 {
                let id = format!("{seed}/{}/{}", q % (index.slots() + 5), q % 60);
                let want: Vec<usize> = (0..index.slots()).filter(|&s| filters[s].contains(&id)).collect();
                let got: Vec<usize> = index.candidates(&id).iter().collect();
                proptest::prop_assert_eq!(&got, &want, "{}", id);
                // The buffer form sets no bit past the last slot.
                index.candidates_into(&g.probes(id.as_bytes()), &mut out);
                let bits: usize = out.iter().map(|w| w.count_ones() as usize).sum();
                proptest::prop_assert_eq!(bits, want.len());
            }
            let s = slots - 1;
            let (held, put) = (index.filter(s), &filters[s]);
            proptest::prop_assert_eq!(held.words(), put.words());
        }
    }

    #[test]
    fn deltas_apply_like_they_do_to_a_filter() {
        let mut live = CountingBloomFilter::with_capacity(100, 0.01).unwrap();
        live.insert("a");
        let mut index = SlicedIndex::new(live.geometry(), 2);
        index.set(1, &live.bit_view()).unwrap();
        let since = live.version();
        live.insert("b");
        live.remove("a").unwrap();
        index.apply(1, &live.flips_since(since).unwrap()).unwrap();
        assert_eq!(index.filter(1).words(), live.bit_view().words());
        assert_eq!(index.position(1), (live.epoch(), live.version()));
        // Re-applying is harmless; a slot behind the delta's start refuses it.
        assert!(index.apply(1, &live.flips_since(since).unwrap()).is_ok());
        assert!(index.apply(0, &live.flips_since(since).unwrap()).is_err());
        let other = BloomFilter::with_capacity(1000, 0.01).unwrap();
        assert!(index.set(0, &other).is_err());
    }
}
