//! `AtomicCountingBloomFilter::decode` (XACB) on arbitrary bytes, and on the
//! same bytes with the CRC trailer made valid. The atomic filter keeps no
//! epoch or version: it re-encodes to the input with those two fields
//! zeroed. Its counters must equal those `CountingBloomFilter` decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xarchive_filter::{AtomicCountingBloomFilter, CountingBloomFilter};
use xarchive_filter_fuzz::{
    as_is_and_resealed, assert_removal_confined, decode_bounded, patch_u64, seed_ids, HEADER_LEN,
    ID,
};

/// Body offsets of the epoch and version fields of XACB.
const EPOCH: usize = HEADER_LEN + 16;
const VERSION: usize = HEADER_LEN + 24;

fuzz_target!(|data: &[u8]| as_is_and_resealed(data, check));

fn check(data: &[u8]) {
    let Some(f) = decode_bounded(data, 1, AtomicCountingBloomFilter::decode) else {
        assert!(CountingBloomFilter::decode(data).is_err());
        return;
    };
    let plain = CountingBloomFilter::decode(data).expect("same format");
    let mut expect = data.to_vec();
    patch_u64(&mut expect, EPOCH, 0);
    patch_u64(&mut expect, VERSION, 0);
    assert_eq!(
        f.encode(),
        expect,
        "XACB must round-trip (epoch, version zeroed)"
    );
    assert_eq!(f.snapshot().counter_words(), plain.counter_words());
    assert_eq!(f.stuck_counters(), plain.stuck_counters());
    assert_eq!(f.items(), plain.items());

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

    let plain = CountingBloomFilter::decode(&f.encode()).expect("it encodes XACB");
    assert_eq!(f.contains(ID), plain.contains(ID));
    let count = f.count(ID);
    f.insert(ID);
    assert!(f.contains(ID));
    assert!(f.count(ID) >= count);
    f.remove(ID).expect("an ID just inserted can be removed");
    let _ = f.remove("some other ID");
    let _ = f.items();
}

fn counters(f: &AtomicCountingBloomFilter) -> Vec<u8> {
    let words = f.snapshot();
    (0..f.geometry().num_bits())
        .map(|c| words.counter(c))
        .collect()
}
