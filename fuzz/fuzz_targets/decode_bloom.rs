//! `BloomFilter::decode` (XABL) on arbitrary bytes, and on the same bytes
//! with the CRC trailer made valid. A decoded filter must re-encode to the
//! exact input bytes and survive every operation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xarchive_filter::{BloomFilter, CellChange, Delta};
use xarchive_filter_fuzz::{as_is_and_resealed, decode_bounded, ID};

fuzz_target!(|data: &[u8]| as_is_and_resealed(data, check));

fn check(data: &[u8]) {
    let Some(mut f) = decode_bounded(data, 1, BloomFilter::decode) else {
        return;
    };
    assert_eq!(f.encode(), data, "XABL must round-trip byte for byte");

    let g = f.geometry();
    let _ = f.contains(ID);
    let _ = (f.count_ones(), f.fill_ratio(), f.estimated_fpr());
    let before = f.clone();
    f.insert(ID);
    assert!(f.contains(ID));
    let mut other = before.clone();
    other.union(&f).expect("same geometry");
    assert!(other.contains(ID));

    // A delta that sets the ID's bits brings the old copy up to date.
    let p = g.probes(ID.as_bytes());
    let mut changes: Vec<CellChange> = (0..g.k())
        .map(|i| CellChange {
            cell: p.position(i),
            value: 1,
        })
        .collect();
    changes.sort();
    changes.dedup();
    let delta = Delta {
        epoch: before.epoch(),
        from_version: before.version(),
        to_version: f.version(),
        num_cells: g.num_bits(),
        cell_bits: 1,
        items: f.items(),
        changes,
    };
    let delta = Delta::decode(&delta.encode()).expect("an encoded delta decodes");
    let mut copy = before.clone();
    copy.apply(&delta).expect("the delta fits the copy");
    assert_eq!(copy, f);
}
