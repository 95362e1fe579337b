//! One generic check, through the [`Filter`] and [`ErasableFilter`] traits,
//! run over every filter: no false negatives after inserts, none after
//! removes, and none after an encode/decode round trip.

use proptest::prelude::*;
use proptest::sample::Index;
use xarchive_filter::{
    AtomicCountingBloomFilter, BloomFilter, BloomGeometry, CountingBloomFilter, CuckooFilter,
    CuckooGeometry, ErasableFilter, Filter,
};

/// IDs of 0 to 24 arbitrary bytes; short ones repeat, so some IDs are
/// inserted more than once.
fn ids(max: usize) -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..max)
}

/// One 512-cell block: counters are shared by many IDs and saturate.
fn small_bloom() -> BloomGeometry {
    BloomGeometry::new(512, 6, 3).expect("valid geometry")
}

/// Few buckets, so that the victim slot and refused inserts are reached.
fn small_cuckoo() -> CuckooGeometry {
    CuckooGeometry::new(16, 8, 5).expect("valid geometry")
}

fn assert_all_present<F: Filter>(filter: &F, held: &[Vec<u8>], when: &str) {
    for id in held {
        assert!(filter.contains(id), "false negative {when} for {id:?}");
    }
}

/// Inserts every ID; returns the ones the filter accepted (a cuckoo filter
/// may refuse when full), after checking each is reported present, also
/// by a decoded copy.
fn insert_all<F: Filter>(filter: &mut F, ids: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut held = Vec::new();
    for id in ids {
        if filter.insert(id).is_ok() {
            held.push(id.clone());
        }
        assert_all_present(filter, &held, "after an insert");
    }
    let copy = F::decode(&filter.encode()).expect("a filter decodes what it encoded");
    assert_eq!(copy.items(), filter.items());
    assert_all_present(&copy, &held, "in a decoded copy");
    held
}

/// Inserts `ids`, then removes held IDs one at a time (`picks` choose
/// which), checking after each remove that every ID still held is present.
fn remove_some<F: ErasableFilter>(filter: &mut F, ids: &[Vec<u8>], picks: &[Index]) {
    let mut held = insert_all(filter, ids);
    for pick in picks {
        if held.is_empty() {
            break;
        }
        let id = held.swap_remove(pick.index(held.len()));
        filter
            .remove(&id)
            .expect("an inserted ID is never refused removal");
        assert_all_present(filter, &held, "after a remove");
    }
    assert_eq!(filter.items(), held.len() as u64);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_false_negatives(ids in ids(120)) {
        insert_all(&mut BloomFilter::new(small_bloom()), &ids);
        insert_all(&mut CountingBloomFilter::new(small_bloom()), &ids);
        insert_all(&mut AtomicCountingBloomFilter::new(small_bloom()), &ids);
        insert_all(&mut CuckooFilter::new(small_cuckoo()), &ids);
    }

    #[test]
    fn removing_keeps_the_others(ids in ids(120), picks in prop::collection::vec(any::<Index>(), 0..120)) {
        remove_some(&mut CountingBloomFilter::new(small_bloom()), &ids, &picks);
        remove_some(&mut AtomicCountingBloomFilter::new(small_bloom()), &ids, &picks);
        remove_some(&mut CuckooFilter::new(small_cuckoo()), &ids, &picks);
    }
}
