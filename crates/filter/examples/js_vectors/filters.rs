//! Whole filters (plain Bloom, counting bit views, cuckoo) as bytes, with
//! the Rust answer for IDs in and out.

use serde_json::{json, Value};
use xarchive_filter::{
    BloomFilter, BloomGeometry, CountingBloomFilter, CuckooFilter, CuckooGeometry,
};

use super::common::{b64, queries, u64s};
use super::ids::{absent_ids, sample_id, tricky_ids};

pub(super) fn bloom_case(
    name: &str,
    geometry: BloomGeometry,
    epoch: u64,
    inserted: &[String],
    removed: &[String],
    absent: &[String],
) -> Value {
    let mut f = CountingBloomFilter::new(geometry);
    f.set_epoch(epoch);
    for id in inserted {
        f.insert(id);
    }
    for id in removed {
        f.remove(id).expect("removing an inserted ID");
    }
    let present: Vec<String> = inserted
        .iter()
        .filter(|id| !removed.contains(id))
        .cloned()
        .collect();
    // Removed IDs are asked too: the answer is whatever the bits say.
    let mut others: Vec<String> = removed.to_vec();
    others.extend_from_slice(absent);
    let view = f.bit_view();
    let xabl = view.encode();
    assert_eq!(BloomFilter::decode(&xabl).expect("round trip"), view);
    json!({
        "name": name,
        "num_bits": geometry.num_bits(),
        "k": geometry.k(),
        "seed": geometry.seed(),
        "epoch": u64s(view.epoch()),
        "version": u64s(view.version()),
        "items": u64s(view.items()),
        "ones": view.count_ones(),
        "xabl": b64(&xabl),
        "xacb": b64(&f.encode()),
        "queries": queries(&present, &others, |id| view.contains(id)),
    })
}

pub(super) fn bloom_filters() -> Value {
    let mut ids = tricky_ids();
    ids.extend((0..400).map(|i| sample_id(1, i)));
    ids.sort();
    ids.dedup();
    let removed: Vec<String> = ids.iter().step_by(5).cloned().collect();
    let absent = absent_ids(300);
    let small: Vec<String> = ids.iter().take(60).cloned().collect();
    json!([
        bloom_case(
            "sized for 1000 at 1%, some removed",
            BloomGeometry::for_capacity(1000, 0.01).expect("geometry"),
            3,
            &ids,
            &removed,
            &absent,
        ),
        bloom_case(
            "one block, crowded: many false positives",
            BloomGeometry::new(512, 3, 7).expect("geometry"),
            0,
            &small,
            &[],
            &absent,
        ),
        bloom_case(
            "k = 32, seed 2^32 - 1, epoch beyond 2^63",
            BloomGeometry::new(4096, 32, u32::MAX).expect("geometry"),
            (1 << 63) + 5,
            &small,
            &small[..10],
            &absent,
        ),
        bloom_case(
            "empty",
            BloomGeometry::new(1024, 4, 0).expect("geometry"),
            0,
            &[],
            &[],
            &absent[..20],
        ),
    ])
}

pub(super) fn cuckoo_case(
    name: &str,
    geometry: CuckooGeometry,
    epoch: u64,
    inserted: &[String],
    removed: &[String],
    absent: &[String],
) -> Value {
    let mut f = CuckooFilter::new(geometry);
    f.set_epoch(epoch);
    let mut present = Vec::new();
    for id in inserted {
        if f.insert(id).is_ok() {
            present.push(id.clone());
        }
    }
    for id in removed {
        if let Some(at) = present.iter().position(|p| p == id) {
            f.remove(id).expect("removing an inserted ID");
            present.remove(at);
        }
    }
    let refused: Vec<String> = inserted
        .iter()
        .filter(|id| !present.contains(id) && !removed.contains(id))
        .cloned()
        .collect();
    let mut others: Vec<String> = removed.to_vec();
    others.extend_from_slice(&refused);
    others.extend_from_slice(absent);
    let bytes = f.encode();
    assert_eq!(CuckooFilter::decode(&bytes).expect("round trip"), f);
    json!({
        "name": name,
        "num_buckets": geometry.num_buckets(),
        "fingerprint_bits": geometry.fingerprint_bits(),
        "seed": geometry.seed(),
        "epoch": u64s(f.epoch()),
        "version": u64s(f.version()),
        "items": u64s(f.items()),
        "full": f.is_full(),
        "xack": b64(&bytes),
        "queries": queries(&present, &others, |id| f.contains(id)),
    })
}

pub(super) fn cuckoo_filters() -> Value {
    let mut ids = tricky_ids();
    ids.extend((0..300).map(|i| sample_id(2, i)));
    ids.sort();
    ids.dedup();
    let removed: Vec<String> = ids.iter().step_by(4).cloned().collect();
    let absent = absent_ids(300);
    let g = CuckooGeometry::for_capacity(500, 0.01).expect("geometry");
    json!([
        cuckoo_case(
            "sized for 500 at 1%, some removed",
            g,
            1,
            &ids,
            &removed,
            &absent
        ),
        cuckoo_case(
            "4-bit fingerprints, odd bucket count: many false positives",
            CuckooGeometry::new(33, 4, 9).expect("geometry"),
            0,
            &ids[..100],
            &[],
            &absent,
        ),
        cuckoo_case(
            "full: the victim slot is taken",
            CuckooGeometry::new(3, 5, 0).expect("geometry"),
            7,
            &ids[..40],
            &[],
            &absent,
        ),
        cuckoo_case(
            "16-bit fingerprints, epoch beyond 2^63",
            CuckooGeometry::new(64, 16, u32::MAX).expect("geometry"),
            u64::MAX,
            &ids[..150],
            &ids[..30],
            &absent,
        ),
        cuckoo_case(
            "docs/FORMAT.md example",
            CuckooGeometry::new(2, 12, 7).expect("geometry"),
            0,
            &["A-1".to_owned(), "B-2".to_owned()],
            &[],
            &absent[..20],
        ),
    ])
}
