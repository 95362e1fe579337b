//! Deltas: the cells (Bloom bits or cuckoo slots) that changed between two
//! versions of a filter, so that a holder of version V is brought to version
//! W by setting them — Summary Cache's "send the flips, not the filter".

use crate::codec::{self, DecodeError, Reader, Writer};
use crate::geometry::MAX_BITS;

/// Flip-log entries kept by default: 16 bytes each, 1 MiB in all.
pub const DEFAULT_LOG_CAPACITY: usize = 1 << 16;

/// A cell's value after the change: 0 or 1 for a Bloom bit view, the
/// fingerprint (0 = empty) for a cuckoo slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CellChange {
    pub cell: u64,
    pub value: u16,
}

/// The net change of a filter over versions (`from_version`, `to_version`]:
/// each changed cell once, with its value at `to_version`, sorted by cell.
/// Setting these cells on a copy at any version in `from..=to` yields `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delta {
    pub epoch: u64,
    pub from_version: u64,
    pub to_version: u64,
    /// Cells in the filter (bits, or cuckoo slots): a geometry check.
    pub num_cells: u64,
    /// Width of a cell value: 1 for bits, the fingerprint width for cuckoo.
    pub cell_bits: u8,
    /// Items the filter held at `to_version`.
    pub items: u64,
    pub changes: Vec<CellChange>,
}

/// Why a filter cannot produce a delta.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeltaError {
    #[error(
        "changes after version {since} are no longer held (the log starts after version {oldest}); take a snapshot"
    )]
    SnapshotRequired { since: u64, oldest: u64 },
    #[error("version {since} is ahead of the filter (at version {current})")]
    FutureVersion { since: u64, current: u64 },
}

/// Why a delta cannot be applied. Nothing is changed when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("delta is of epoch {delta}, the filter of epoch {filter}")]
    Epoch { delta: u64, filter: u64 },
    #[error("delta covers versions ({from}, {to}] but the filter is at version {at}")]
    Version { from: u64, to: u64, at: u64 },
    #[error(
        "delta describes {delta_cells} cells of {delta_bits} bits, the filter {cells} of {bits}"
    )]
    Geometry {
        delta_cells: u64,
        delta_bits: u8,
        cells: u64,
        bits: u8,
    },
    #[error("delta sets cell {cell} to {value}, outside the filter")]
    Cell { cell: u64, value: u16 },
}

impl Delta {
    /// Checks that this delta can be applied to a filter with the given
    /// shape and position, before anything is changed.
    pub(crate) fn check(
        &self,
        epoch: u64,
        version: u64,
        num_cells: u64,
        cell_bits: u8,
    ) -> Result<(), ApplyError> {
        if self.num_cells != num_cells || self.cell_bits != cell_bits {
            return Err(ApplyError::Geometry {
                delta_cells: self.num_cells,
                delta_bits: self.cell_bits,
                cells: num_cells,
                bits: cell_bits,
            });
        }
        if self.epoch != epoch {
            return Err(ApplyError::Epoch {
                delta: self.epoch,
                filter: epoch,
            });
        }
        if !(self.from_version..=self.to_version).contains(&version) {
            return Err(ApplyError::Version {
                from: self.from_version,
                to: self.to_version,
                at: version,
            });
        }
        let max_value = (1u32 << cell_bits) - 1;
        if let Some(c) = self
            .changes
            .iter()
            .find(|c| c.cell >= num_cells || u32::from(c.value) > max_value)
        {
            return Err(ApplyError::Cell {
                cell: c.cell,
                value: c.value,
            });
        }
        Ok(())
    }

    /// Serializes in the `XADL` format of docs/FORMAT.md. Changes out of
    /// order are sorted first (the format requires increasing cells).
    pub fn encode(&self) -> Vec<u8> {
        let sorted;
        let mut changes = &self.changes;
        if !changes.windows(2).all(|w| w[0].cell < w[1].cell) {
            let mut copy = changes.clone();
            copy.sort_by_key(|c| c.cell);
            copy.dedup_by_key(|c| c.cell);
            sorted = copy;
            changes = &sorted;
        }
        let mut w = Writer::new(codec::DELTA, 56 + changes.len() * 3);
        w.u64(self.num_cells)
            .u8(self.cell_bits)
            .bytes(&[0; 7])
            .u64(self.epoch)
            .u64(self.from_version)
            .u64(self.to_version)
            .u64(self.items)
            .u64(changes.len() as u64);
        let mut previous = 0;
        for c in changes {
            let gap = c.cell - previous;
            w.varint((gap << self.cell_bits) | u64::from(c.value));
            previous = c.cell;
        }
        w.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = codec::open(bytes, codec::DELTA)?;
        let num_cells = r.u64()?;
        let cell_bits = r.u8()?;
        r.zeros(7)?;
        let epoch = r.u64()?;
        let from_version = r.u64()?;
        let to_version = r.u64()?;
        let items = r.u64()?;
        let count = r.u64()?;
        if num_cells == 0 || num_cells > MAX_BITS {
            return Err(DecodeError::Invalid("cell count is 0 or beyond the limit"));
        }
        if !(1..=16).contains(&cell_bits) {
            return Err(DecodeError::Invalid("cell width must be 1..=16 bits"));
        }
        if from_version > to_version {
            return Err(DecodeError::Invalid("from_version is after to_version"));
        }
        // Each change takes at least one byte: this bounds the allocation.
        if count > r.remaining() as u64 {
            return Err(DecodeError::Truncated {
                needed: count,
                available: r.remaining() as u64,
            });
        }
        let changes = decode_changes(&mut r, count, num_cells, cell_bits)?;
        r.end()?;
        Ok(Delta {
            epoch,
            from_version,
            to_version,
            num_cells,
            cell_bits,
            items,
            changes,
        })
    }
}

// `cell_bits` is 1 to 16 (checked by the caller, `decode`), so the masked
// value fits a u16.
#[allow(clippy::cast_possible_truncation)]
fn decode_changes(
    r: &mut Reader<'_>,
    count: u64,
    num_cells: u64,
    cell_bits: u8,
) -> Result<Vec<CellChange>, DecodeError> {
    let mut changes = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut previous: Option<u64> = None;
    let mask = (1u64 << cell_bits) - 1;
    for _ in 0..count {
        let v = r.varint()?;
        let gap = v >> cell_bits;
        let cell = match previous {
            None => gap,
            Some(_) if gap == 0 => {
                return Err(DecodeError::Invalid("cells not strictly increasing"))
            }
            Some(p) => p
                .checked_add(gap)
                .ok_or(DecodeError::Invalid("cell index overflows"))?,
        };
        if cell >= num_cells {
            return Err(DecodeError::Invalid("cell index beyond the filter"));
        }
        changes.push(CellChange {
            cell,
            value: (v & mask) as u16,
        });
        previous = Some(cell);
    }
    Ok(changes)
}

/// A bounded, version-stamped log of cell changes: a ring of a power of
/// two entries that overwrites its oldest when full.
///
/// Writers *stage* an entry in the slot after the newest and then advance
/// by 0 or 1, so the hot loops of the filters log a flip without a branch
/// on whether a counter crossed zero. That slot is therefore never counted
/// as held: the ring holds at most `len - 1` entries.
#[derive(Clone, Debug)]
pub(crate) struct ChangeLog {
    /// (version, cell << 16 | value), written in order at `tail & mask`.
    /// Empty until the first write: a decoded filter that is only read
    /// never allocates it, so decoding costs no more than its input.
    ring: Vec<(u64, u64)>,
    mask: u64,
    /// Entries ever written; the next goes to `tail & mask`.
    tail: u64,
    /// Entries before this index were discarded by a reset.
    start: u64,
    /// The version of the last reset: nothing before it is known.
    reset_version: u64,
}

impl ChangeLog {
    /// Holds at least `capacity` entries (rounded up to a power of two,
    /// minus the staging slot).
    pub fn new(capacity: usize, version: u64) -> Self {
        let len = (capacity as u64 + 1).next_power_of_two().max(2);
        ChangeLog {
            ring: Vec::new(),
            mask: len - 1,
            tail: 0,
            start: 0,
            reset_version: version,
        }
    }

    /// Index of the oldest entry held.
    fn first(&self) -> u64 {
        self.start.max(self.tail.saturating_sub(self.mask))
    }

    /// Writes an entry in the staging slot `tail + ahead`; it counts once
    /// [`advance`](Self::advance) moves past it.
    #[inline(always)]
    // Masked to the ring's length, which is in memory: it fits a usize.
    #[allow(clippy::cast_possible_truncation)]
    pub fn stage(&mut self, ahead: u64, version: u64, cell: u64, value: u16) {
        let at = ((self.tail + ahead) & self.mask) as usize;
        let entry = (version, (cell << 16) | u64::from(value));
        // The bounds check indexing would make anyway; it fails only once.
        match self.ring.get_mut(at) {
            Some(slot) => *slot = entry,
            None => self.stage_first(at, entry),
        }
    }

    /// Whether the ring has been allocated (by a first write).
    #[cfg(test)]
    pub fn is_allocated(&self) -> bool {
        !self.ring.is_empty()
    }

    /// Allocates the ring on the first write.
    #[cold]
    #[inline(never)]
    // The mask is the ring's length less one, a length in memory.
    #[allow(clippy::cast_possible_truncation)]
    fn stage_first(&mut self, at: usize, entry: (u64, u64)) {
        self.ring = vec![(0, 0); self.mask as usize + 1];
        self.ring[at] = entry;
    }

    #[inline(always)]
    pub fn advance(&mut self, by: u64) {
        self.tail += by;
    }

    #[inline]
    pub fn record(&mut self, version: u64, cell: u64, value: u16) {
        self.stage(0, version, cell, value);
        self.advance(1);
    }

    /// Forgets everything: deltas can start at `version` and no earlier.
    pub fn reset(&mut self, version: u64) {
        self.start = self.tail;
        self.reset_version = version;
    }

    /// The oldest version a delta can start from: entries dropped from the
    /// ring are no newer than the oldest one held.
    // Masked to the ring's length, which is in memory: it fits a usize.
    #[allow(clippy::cast_possible_truncation)]
    pub fn oldest(&self) -> u64 {
        let first = self.first();
        if first > self.start {
            self.reset_version
                .max(self.ring[(first & self.mask) as usize].0)
        } else {
            self.reset_version
        }
    }

    // Masked to the ring's length, which is in memory: it fits a usize.
    #[allow(clippy::cast_possible_truncation)]
    fn entry(&self, i: u64) -> (u64, u64) {
        self.ring[(i & self.mask) as usize]
    }

    /// Net changes over (`since`, `current`], one per cell, sorted by cell.
    // An entry packs the cell above 16 bits and its value in the low 16:
    // the cast takes the value back.
    #[allow(clippy::cast_possible_truncation)]
    pub fn since(&self, since: u64, current: u64) -> Result<Vec<CellChange>, DeltaError> {
        if since > current {
            return Err(DeltaError::FutureVersion { since, current });
        }
        let oldest = self.oldest();
        if since < oldest {
            return Err(DeltaError::SnapshotRequired { since, oldest });
        }
        // First entry newer than `since` (versions rise with the index).
        let (mut lo, mut hi) = (self.first(), self.tail);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid).0 <= since {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // Newest first, then a stable sort by cell: the first of each cell
        // is its latest value.
        let mut changes: Vec<CellChange> = (lo..self.tail)
            .rev()
            .map(|i| {
                let packed = self.entry(i).1;
                CellChange {
                    cell: packed >> 16,
                    value: packed as u16,
                }
            })
            .collect();
        changes.sort_by_key(|c| c.cell);
        changes.dedup_by_key(|c| c.cell);
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_keeps_the_latest_value_per_cell() {
        let mut log = ChangeLog::new(10, 0);
        log.record(1, 5, 1);
        log.record(2, 3, 1);
        log.record(3, 5, 0);
        let got = log.since(0, 3).unwrap();
        assert_eq!(
            got,
            vec![
                CellChange { cell: 3, value: 1 },
                CellChange { cell: 5, value: 0 }
            ]
        );
        assert_eq!(
            log.since(2, 3).unwrap(),
            vec![CellChange { cell: 5, value: 0 }]
        );
        assert!(log.since(3, 3).unwrap().is_empty());
        assert_eq!(
            log.since(4, 3),
            Err(DeltaError::FutureVersion {
                since: 4,
                current: 3
            })
        );
    }

    #[test]
    fn overflowing_the_log_asks_for_a_snapshot() {
        let mut log = ChangeLog::new(2, 0);
        for v in 1..=4 {
            log.record(v, v, 1);
        }
        assert_eq!(
            log.since(1, 4),
            Err(DeltaError::SnapshotRequired {
                since: 1,
                oldest: 2
            })
        );
        assert_eq!(log.since(2, 4).unwrap().len(), 2);
    }

    #[test]
    fn delta_round_trips_and_rejects_disorder() {
        let d = Delta {
            epoch: 7,
            from_version: 3,
            to_version: 9,
            num_cells: 1024,
            cell_bits: 1,
            items: 12,
            changes: vec![
                CellChange { cell: 0, value: 1 },
                CellChange { cell: 1, value: 0 },
                CellChange {
                    cell: 1000,
                    value: 1,
                },
            ],
        };
        let bytes = d.encode();
        assert_eq!(Delta::decode(&bytes).unwrap(), d);

        let mut repeated = d.clone();
        repeated.changes[1].cell = 0;
        let decoded = Delta::decode(&repeated.encode()).unwrap();
        assert_eq!(decoded.changes.len(), 2, "encode sorts and dedups");

        // Hand-made bytes with a repeated cell are refused.
        let mut w = Writer::new(codec::DELTA, 0);
        w.u64(1024)
            .u8(1)
            .bytes(&[0; 7])
            .u64(7)
            .u64(3)
            .u64(9)
            .u64(0)
            .u64(2);
        w.varint(1).varint(1);
        assert!(matches!(
            Delta::decode(&w.finish()),
            Err(DecodeError::Invalid(_))
        ));
    }
}
