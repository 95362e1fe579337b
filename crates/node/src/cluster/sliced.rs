//! Copies of peers' filters that share one geometry, bit-sliced in one
//! index: one routing step reads k rows of it however many copies it
//! holds. Domains size their filters for their own records, in size
//! classes 1.33–1.5 × apart (`size_class`), so the copies of a large
//! cluster fall into a dozen geometries (docs/SCALING.md).

use crate::local::domain_name::DomainName;
use xarchive_filter::{
    ApplyError, BloomFilter, BloomGeometry, Delta, GeometryMismatch, SlicedIndex, SlotSet,
};

/// Slots are added in bytes of 8 (a row is a byte per 8).
pub const SLOT_STEP: usize = 8;

/// Fewest copies of one geometry worth an index. A routing step reads k
/// rows of an index (k is 7 to 19 at the rates domains size for) and one
/// block of each copy held one by one, so from about k copies on the index
/// costs fewer memory reads; its rows round the copies up to 8, so it
/// costs at most 7 copies' worth of memory more. At 3 301 domains and
/// 10^9 IDs, 16 rather than 64 took the copies held one by one from 142 to
/// about 30 (docs/SCALING.md).
pub const MIN_SLICED: usize = 16;

pub struct Sliced {
    index: SlicedIndex,
    owners: Vec<Option<DomainName>>,
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
        name: &DomainName,
        filter: &BloomFilter,
        slot: Option<usize>,
    ) -> Result<usize, GeometryMismatch> {
        let slot = match slot {
            Some(slot) => slot,
            None => self.free_slot(),
        };
        self.index.set(slot, filter)?;
        self.owners[slot] = Some(name.clone());
        Ok(slot)
    }

    pub fn clear(&mut self, slot: usize) {
        self.index.clear(slot);
        self.owners[slot] = None;
    }

    pub fn apply(&mut self, slot: usize, delta: &Delta) -> Result<(), ApplyError> {
        self.index.apply(slot, delta)
    }

    /// The index, to be asked with others (`candidates_all`).
    pub fn index(&self) -> &SlicedIndex {
        &self.index
    }

    /// Adds to `out` the peers in `slots` (what the index answered).
    pub fn owners(&self, slots: &SlotSet, out: &mut Vec<DomainName>) {
        out.extend(
            slots
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
