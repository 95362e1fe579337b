//! Many Bloom filters of one geometry, stored bit-sliced so that the
//! filters that may hold an ID are found with k row reads, however many
//! filters there are.

use crate::bloom::{BloomFilter, GeometryMismatch};
use crate::delta::{ApplyError, Delta};
use crate::geometry::BloomGeometry;
use crate::hash::{Probes, BLOCK_BITS};

/// Bloom filters of equal geometry, bit-sliced: for each bit position a row
/// of `row_words` u64 whose bit `s` says whether the filter in slot `s`
/// has that bit. A row of a block's 512 positions lies together, so one
/// query reads k rows within `512 × row_words × 8` bytes.
#[derive(Clone, Debug)]
pub struct SlicedIndex {
    geometry: BloomGeometry,
    row_words: usize,
    rows: Vec<u64>,
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

impl SlicedIndex {
    /// An index for up to `slots` filters (rounded up to a multiple of 64),
    /// all empty.
    pub fn new(geometry: BloomGeometry, slots: usize) -> Self {
        let row_words = slots.div_ceil(64).max(1);
        SlicedIndex {
            geometry,
            row_words,
            rows: vec![0; geometry.num_bits() as usize * row_words],
            positions: vec![(0, 0); row_words * 64],
        }
    }

    pub fn geometry(&self) -> BloomGeometry {
        self.geometry
    }

    /// Makes room for at least `slots` filters, every filter kept in its
    /// slot: each row's words are copied over whole, not the filters bit
    /// by bit.
    pub fn grow(&mut self, slots: usize) {
        let row_words = slots.div_ceil(64).max(1);
        if row_words <= self.row_words {
            return;
        }
        let mut rows = vec![0; self.geometry.num_bits() as usize * row_words];
        for (new, old) in rows
            .chunks_exact_mut(row_words)
            .zip(self.rows.chunks_exact(self.row_words))
        {
            new[..self.row_words].copy_from_slice(old);
        }
        self.rows = rows;
        self.row_words = row_words;
        self.positions.resize(row_words * 64, (0, 0));
    }

    /// Slots the index has room for.
    pub fn slots(&self) -> usize {
        self.row_words * 64
    }

    fn row(&self, pos: u64) -> &[u64] {
        let start = pos as usize * self.row_words;
        &self.rows[start..start + self.row_words]
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
        let (word, bit) = (slot / 64, 1u64 << (slot % 64));
        for (pos, row) in self.rows.chunks_exact_mut(self.row_words).enumerate() {
            if filter.words()[pos / 64] >> (pos % 64) & 1 == 1 {
                row[word] |= bit;
            } else {
                row[word] &= !bit;
            }
        }
        self.positions[slot] = (filter.epoch(), filter.version());
        Ok(())
    }

    /// Empties `slot`.
    pub fn clear(&mut self, slot: usize) {
        let (word, bit) = (slot / 64, 1u64 << (slot % 64));
        for row in self.rows.chunks_exact_mut(self.row_words) {
            row[word] &= !bit;
        }
        self.positions[slot] = (0, 0);
    }

    /// (epoch, version) of the filter in `slot`.
    pub fn position(&self, slot: usize) -> (u64, u64) {
        self.positions[slot]
    }

    /// Brings the filter in `slot` forward by `delta`, as
    /// [`BloomFilter::apply`] would; on error nothing changes.
    pub fn apply(&mut self, slot: usize, delta: &Delta) -> Result<(), ApplyError> {
        let (epoch, version) = self.positions[slot];
        delta.check(epoch, version, self.geometry.num_bits(), 1)?;
        let (word, bit) = (slot / 64, 1u64 << (slot % 64));
        for c in &delta.changes {
            let at = c.cell as usize * self.row_words + word;
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
        let mut out = vec![0; self.row_words];
        self.candidates_into(&self.geometry.probes(id.as_ref()), &mut out);
        SlotSet(out)
    }

    /// [`candidates`](Self::candidates) into a caller's buffer of
    /// `slots() / 64` words, for probes computed with this geometry.
    #[inline]
    pub fn candidates_into(&self, probes: &Probes, out: &mut [u64]) {
        out.fill(u64::MAX);
        let base = probes.block * BLOCK_BITS;
        probes.fold_offsets(self.geometry.k(), (), |(), off| {
            for (o, r) in out.iter_mut().zip(self.row(base + u64::from(off))) {
                *o &= r;
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
        let (word, bit) = (slot / 64, 1u64 << (slot % 64));
        let mut words = vec![0u64; (self.geometry.num_bits() / 64) as usize];
        for (pos, row) in self.rows.chunks_exact(self.row_words).enumerate() {
            if row[word] & bit != 0 {
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
