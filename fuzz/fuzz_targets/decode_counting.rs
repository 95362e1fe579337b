//! `CountingBloomFilter::decode` (XACB) on arbitrary bytes, and on the same
//! bytes with the CRC trailer made valid. A decoded filter must re-encode to
//! the exact input bytes and survive every operation; its flip log must
//! bring a copy of its bit view up to date.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xarchive_filter::{CountingBloomFilter, COUNTER_MAX};
use xarchive_filter_fuzz::{
    as_is_and_resealed, assert_removal_confined, decode_bounded, seed_ids, ID,
};

fuzz_target!(|data: &[u8]| as_is_and_resealed(data, check));

fn check(data: &[u8]) {
    let Some(mut f) = decode_bounded(data, 1, CountingBloomFilter::decode) else {
        return;
    };
    assert_eq!(f.encode(), data, "XACB must round-trip byte for byte");

    let _ = (
        f.contains(ID),
        f.count(ID),
        f.stuck_counters(),
        f.fill_ratio(),
    );
    let v0 = f.version();
    let copy = f.bit_view();
    assert_eq!(copy.count_ones() == 0, f.fill_ratio() == 0.0);

    let g = f.geometry();
    for id in seed_ids(8) {
        if !f.contains(&id) {
            continue;
        }
        let before = counters(&f);
        f.remove(&id).expect("all its counters are non-zero");
        let after = counters(&f);
        assert_removal_confined(g, &id, &before, &after);
    }

    let count = f.count(ID);
    f.insert(ID);
    assert!(f.contains(ID));
    assert_eq!(f.count(ID), (count + 1).min(COUNTER_MAX));
    f.remove(ID).expect("an ID just inserted can be removed");
    assert!(f.count(ID) >= count, "sticky counters only ever rise");
    f.insert(ID);

    let delta = f
        .flips_since(v0)
        .expect("the log starts at the decoded version");
    let mut copy = copy;
    copy.apply(&delta)
        .expect("the delta fits the bit view it came from");
    // At the last version the filter no longer advances (versions
    // saturate), so its log cannot tell later changes apart.
    if v0 != u64::MAX {
        assert_eq!(copy, f.bit_view());
    }
    let _ = f.remove("some other ID");
    let v = f.version();
    f.touch();
    assert!(f.version() >= v);
}

fn counters(f: &CountingBloomFilter) -> Vec<u8> {
    (0..f.geometry().num_bits()).map(|c| f.counter(c)).collect()
}
