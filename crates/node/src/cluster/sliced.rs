//! Copies of peers' filters that share one geometry, bit-sliced in one
//! index: one routing step reads k rows of it however many copies it
//! holds. Domains size their filters for their own records, in power-of-two
//! classes, so the copies of a large cluster fall into a few geometries
//! (docs/SCALING.md).

use xarchive_filter::{
    ApplyError, BloomFilter, BloomGeometry, Delta, GeometryMismatch, SlicedIndex,
};

/// Slots are added in words of 64 (a row is a word per 64).
pub const SLOT_STEP: usize = 64;

/// Fewest copies of one geometry worth an index: a row is a 64-bit word
/// however few of its slots are taken, so fewer copies would take more
/// memory bit-sliced than held one by one.
pub const MIN_SLICED: usize = 64;

pub struct Sliced {
    index: SlicedIndex,
    owners: Vec<Option<String>>,
}

impl Sliced {
    /// An index for at least `copies` copies of `geometry`.
    pub fn new(geometry: BloomGeometry, copies: usize) -> Self {
        let slots = copies.div_ceil(SLOT_STEP).max(1) * SLOT_STEP;
        Sliced {
            index: SlicedIndex::new(geometry, slots),
            owners: vec![None; slots],
        }
    }

    /// Puts `name`'s copy in `slot` (its slot already) or a free one;
    /// returns the slot.
    pub fn put(
        &mut self,
        name: &str,
        filter: &BloomFilter,
        slot: Option<usize>,
    ) -> Result<usize, GeometryMismatch> {
        let slot = match slot {
            Some(slot) => slot,
            None => self.free_slot(),
        };
        self.index.set(slot, filter)?;
        self.owners[slot] = Some(name.to_owned());
        Ok(slot)
    }

    pub fn clear(&mut self, slot: usize) {
        self.index.clear(slot);
        self.owners[slot] = None;
    }

    pub fn apply(&mut self, slot: usize, delta: &Delta) -> Result<(), ApplyError> {
        self.index.apply(slot, delta)
    }

    /// Adds to `out` the peers whose copies here may hold `id`.
    pub fn candidates(&self, id: &str, out: &mut Vec<String>) {
        out.extend(
            self.index
                .candidates(id)
                .iter()
                .filter_map(|slot| self.owners.get(slot).cloned().flatten()),
        );
    }

    fn free_slot(&mut self) -> usize {
        if let Some(slot) = self.owners.iter().position(Option::is_none) {
            return slot;
        }
        // Full: a quarter more room (at least a word), rows copied whole.
        // Growing by one word and moving each copy over bit by bit made a
        // domain joining 3 301 others spend most of its time here: every
        // 64 copies installed, all copies held were rewritten.
        let full = self.owners.len();
        let slots = (full + (full / 4).max(SLOT_STEP)).div_ceil(SLOT_STEP) * SLOT_STEP;
        self.index.grow(slots);
        self.owners.resize(self.index.slots(), None);
        full
    }
}
