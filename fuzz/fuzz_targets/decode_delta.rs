//! `Delta::decode` (XADL) on arbitrary bytes, and on the same bytes with the
//! CRC trailer made valid. Varints may be non-minimal, so a decoded delta
//! need not re-encode to its input, but its encoding must decode to an equal
//! delta. Then it is applied to a Bloom filter, or a cuckoo filter, of its
//! shape, which must survive further operations.
#![no_main]

use std::mem::size_of;

use libfuzzer_sys::fuzz_target;
use xarchive_filter::{
    BloomFilter, BloomGeometry, CellChange, CuckooFilter, CuckooGeometry, Delta, BLOCK_BITS,
};
use xarchive_filter_fuzz::{as_is_and_resealed, decode_bounded, patch_u64, HEADER_LEN, ID};

/// Largest filter built to apply a delta to (cells).
const MAX_CELLS: u64 = 1 << 16;

fuzz_target!(|data: &[u8]| as_is_and_resealed(data, check));

fn check(data: &[u8]) {
    // A change takes one byte or more and 16 in memory.
    let Some(d) = decode_bounded(data, size_of::<CellChange>(), Delta::decode) else {
        return;
    };
    let encoded = d.encode();
    assert_eq!(Delta::decode(&encoded).as_ref(), Ok(&d));
    assert!(
        encoded.len() <= data.len(),
        "the encoder writes minimal varints"
    );
    assert!(d.changes.windows(2).all(|w| w[0].cell < w[1].cell));
    assert!(d.changes.iter().all(|c| c.cell < d.num_cells));
    assert!(d
        .changes
        .iter()
        .all(|c| u32::from(c.value) < 1 << d.cell_bits));

    if d.cell_bits == 1 && d.num_cells % BLOCK_BITS == 0 && d.num_cells <= MAX_CELLS {
        apply_to_bloom(&d);
    }
    if d.num_cells % 4 == 0 && (4..=16).contains(&d.cell_bits) && d.num_cells <= MAX_CELLS {
        apply_to_cuckoo(&d);
    }
}

fn apply_to_bloom(d: &Delta) {
    let g = BloomGeometry::new(d.num_cells, 3, 0).expect("checked shape");
    let mut f = BloomFilter::new(g);
    f.insert(ID);
    f.set_epoch(d.epoch);
    f.set_version(d.from_version);
    let before = f.clone();
    f.apply(d).expect("epoch, version and shape match");
    assert_eq!(f.version(), d.to_version);
    assert_eq!(f.items(), d.items);
    for c in &d.changes {
        assert_eq!(u16::from(f.bit(c.cell)), c.value);
    }
    // Applying it again (the holder is at to_version, in range) is a no-op.
    let once = f.clone();
    f.apply(d).expect("to_version is in range");
    assert_eq!(f, once);
    // A holder of another epoch is refused and left alone.
    let mut stale = before.clone();
    stale.set_epoch(d.epoch.wrapping_add(1));
    let kept = stale.clone();
    assert!(stale.apply(d).is_err());
    assert_eq!(stale, kept);

    let _ = f.contains(ID);
    f.insert(ID);
    assert!(f.contains(ID));
    let _ = f.union(&before);
}

fn apply_to_cuckoo(d: &Delta) {
    let g = CuckooGeometry::new(d.num_cells / 4, d.cell_bits, 0).expect("checked shape");
    let mut f = CuckooFilter::new(g);
    let _ = f.insert(ID);
    // Put the filter at the delta's epoch and from_version.
    let mut bytes = f.encode();
    patch_u64(&mut bytes, HEADER_LEN + 16, d.epoch);
    patch_u64(&mut bytes, HEADER_LEN + 24, d.from_version);
    let mut f = CuckooFilter::decode(&bytes).expect("a patched encoding decodes");
    f.apply(d).expect("epoch, version and shape match");
    assert_eq!(f.version(), d.to_version);
    assert_eq!(f.items(), d.items);

    let _ = (f.contains(ID), f.count(ID), f.load_factor());
    let _ = f.remove(ID);
    if f.insert(ID).is_ok() {
        assert!(f.contains(ID));
        f.remove(ID).expect("an ID just inserted can be removed");
    }
    let _ = f.remove("some other ID");
    let _ = f.changes_since(d.to_version);
}
