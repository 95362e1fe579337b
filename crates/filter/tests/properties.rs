//! Property tests: no false negatives, deltas reproduce the live bit view,
//! encodings round-trip, copies stay byte-identical.

use std::collections::HashMap;

use proptest::prelude::*;
use xarchive_filter::{
    candidates_all, BloomFilter, BloomGeometry, CountingBloomFilter, CuckooFilter, CuckooGeometry,
    Delta, DeltaError, SlicedIndex, COUNTER_MAX,
};

/// An operation on a small pool of IDs: `true` inserts, `false` removes
/// (only IDs the model holds are removed; other removes are left out).
fn ops(pool: usize, len: usize) -> impl Strategy<Value = Vec<(usize, bool)>> {
    prop::collection::vec((0..pool, prop::bool::weighted(0.6)), 0..len)
}

fn id(i: usize) -> String {
    format!("J{:03}-WS·2023-Y-{i:04}", i % 7)
}

/// What a counting filter must hold: a multiset of IDs.
#[derive(Default)]
struct Model(HashMap<usize, u32>);

impl Model {
    /// Applies one op to `filter` and the model, then checks that nothing
    /// the model holds is reported absent or under-counted.
    fn step(&mut self, filter: &mut CountingBloomFilter, (i, insert): (usize, bool)) {
        let held = self.0.entry(i).or_default();
        if insert {
            filter.insert(id(i));
            *held += 1;
        } else if *held > 0 {
            filter.remove(id(i)).expect("a held ID can be removed");
            *held -= 1;
        }
        for (&j, &n) in &self.0 {
            if n > 0 {
                assert!(filter.contains(id(j)), "false negative for {}", id(j));
                assert!(
                    u32::from(filter.count(id(j))) >= n.min(u32::from(COUNTER_MAX)),
                    "count below multiplicity"
                );
            }
        }
    }

    fn run(&mut self, filter: &mut CountingBloomFilter, ops: &[(usize, bool)]) {
        for &op in ops {
            self.step(filter, op);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Asking many filters of different sizes at once answers as asking
    /// each, whether neighbours share a seed (one hash serves them) or not.
    #[test]
    fn asking_many_filters_at_once_answers_as_asking_each(
        held in prop::collection::vec(prop::collection::vec(0usize..300, 0..60), 1..12),
        asked in prop::collection::vec(0usize..300, 1..40),
    ) {
        let filters: Vec<BloomFilter> = held
            .iter()
            .enumerate()
            .map(|(i, ids)| {
                // Sizes of every kind (block counts not powers of two too),
                // seeds in runs: 0, 0, 1, 1, 2, 2, 0, …
                let capacity = (16 << (i % 4)) + 24 * (i as u64 % 3);
                let geometry = BloomGeometry::for_capacity(capacity, 0.05)
                    .unwrap()
                    .with_seed(u32::try_from(i / 2 % 3).unwrap());
                let mut f = BloomFilter::new(geometry);
                for &n in ids {
                    f.insert(id(n));
                }
                f
            })
            .collect();
        let refs: Vec<&BloomFilter> = filters.iter().collect();
        for &n in &asked {
            let each: Vec<bool> = filters.iter().map(|f| f.contains(id(n))).collect();
            prop_assert_eq!(BloomFilter::contains_each(&refs, id(n)), each);
        }
        for (f, ids) in filters.iter().zip(&held) {
            for &n in ids {
                prop_assert!(BloomFilter::contains_each(&[f], id(n))[0]);
            }
        }
    }

    /// Asking bit-sliced indexes and filters together answers as asking
    /// each index and each filter alone, whatever their geometries and
    /// seeds.
    #[test]
    fn asking_indexes_and_filters_together_answers_as_asking_each(
        widths in prop::collection::vec(1usize..80, 0..5),
        held in prop::collection::vec(0usize..300, 0..40),
        singles in 0usize..6,
        asked in prop::collection::vec(0usize..400, 1..30),
    ) {
        let geometry = |i: usize| {
            BloomGeometry::for_capacity(20 + 30 * (i as u64 % 4), 0.05)
                .unwrap()
                .with_seed(u32::try_from(i / 2 % 3).unwrap())
        };
        let filled = |g: BloomGeometry, salt: usize| {
            let mut f = BloomFilter::new(g);
            for &n in held.iter().skip(salt % 7).step_by(1 + salt % 3) {
                f.insert(id(n + salt));
            }
            f
        };
        let mut indexes = Vec::new();
        for (i, &width) in widths.iter().enumerate() {
            let mut index = SlicedIndex::new(geometry(i), width);
            for slot in 0..width {
                index.set(slot, &filled(geometry(i), i * 100 + slot)).unwrap();
            }
            indexes.push(index);
        }
        let filters: Vec<BloomFilter> = (0..singles).map(|j| filled(geometry(j + 1), 7_000 + j)).collect();
        let index_refs: Vec<&SlicedIndex> = indexes.iter().collect();
        let filter_refs: Vec<&BloomFilter> = filters.iter().collect();
        for &n in &asked {
            let (sets, maybe) = candidates_all(&index_refs, &filter_refs, id(n));
            for (index, set) in indexes.iter().zip(&sets) {
                prop_assert_eq!(set, &index.candidates(id(n)));
            }
            let each: Vec<bool> = filters.iter().map(|f| f.contains(id(n))).collect();
            prop_assert_eq!(maybe, each);
        }
    }

    /// One 512-counter block and 40 IDs: every counter is shared by many
    /// IDs and many saturate, the worst case for erasure.
    #[test]
    fn counting_never_gives_a_false_no(ops in ops(40, 400)) {
        let mut f = CountingBloomFilter::new(BloomGeometry::new(512, 6, 3).unwrap());
        Model::default().run(&mut f, &ops);
    }

    /// A filter that saw inserts and removes matches one rebuilt from the
    /// IDs it holds in the end, however many of its counters stuck at the
    /// top; and a counter that lost a count does not.
    #[test]
    fn a_filter_matches_its_rebuild_whatever_stuck_on_the_way(ops in ops(40, 400)) {
        let g = BloomGeometry::new(512, 6, 3).unwrap();
        let mut live = CountingBloomFilter::new(g);
        let mut model = Model::default();
        model.run(&mut live, &ops);
        let mut rebuilt = CountingBloomFilter::new(g);
        for (&i, &n) in &model.0 {
            for _ in 0..n {
                rebuilt.insert(id(i));
            }
        }
        prop_assert!(live.matches_rebuild(&rebuilt));
        if let Some((&i, _)) = model.0.iter().find(|(_, &n)| n > 0) {
            let counted = |f: &CountingBloomFilter| f.count(id(i));
            if counted(&live) < COUNTER_MAX {
                let mut lost = rebuilt.clone();
                lost.insert(id(i));
                prop_assert!(!live.matches_rebuild(&lost));
            }
        }
    }

    #[test]
    fn flips_bring_a_copy_to_the_live_bit_view(
        before in ops(60, 200),
        after in ops(60, 200),
        log in 1usize..64,
    ) {
        let mut f = CountingBloomFilter::new(BloomGeometry::new(1024, 5, 1).unwrap())
            .with_log_capacity(log);
        let mut model = Model::default();
        model.run(&mut f, &before);
        let mut copy = f.bit_view();
        for chunk in after.chunks(7) {
            model.run(&mut f, chunk);
            match f.flips_since(copy.version()) {
                Ok(delta) => {
                    let delta = Delta::decode(&delta.encode()).unwrap();
                    copy.apply(&delta).unwrap();
                }
                Err(DeltaError::SnapshotRequired { .. }) => copy = f.bit_view(),
                Err(e) => panic!("{e}"),
            }
            prop_assert_eq!(&copy, &f.bit_view());
        }
    }

    #[test]
    fn counting_round_trips(ops in ops(100, 300), epoch in any::<u64>()) {
        let mut f = CountingBloomFilter::with_capacity(100, 0.01).unwrap();
        Model::default().run(&mut f, &ops);
        f.set_epoch(epoch);
        let back = CountingBloomFilter::decode(&f.encode()).unwrap();
        prop_assert!(back.same_contents(&f));
        prop_assert_eq!(back.version(), f.version());
        prop_assert_eq!(back.epoch(), epoch);
        prop_assert_eq!(back.stuck_counters(), f.stuck_counters());
        prop_assert_eq!(back.encode(), f.encode());
        let bits = f.bit_view();
        prop_assert_eq!(BloomFilter::decode(&bits.encode()).unwrap(), bits);
    }

    #[test]
    fn cuckoo_never_drops_and_copies_stay_identical(
        ops in ops(120, 400),
        buckets in 4u64..40,
        bits in 4u8..=16,
        seed in any::<u32>(),
    ) {
        let g = CuckooGeometry::new(buckets, bits, seed).unwrap();
        let (mut a, mut b) = (CuckooFilter::new(g), CuckooFilter::new(g));
        let mut model: HashMap<usize, u32> = HashMap::new();
        for &(i, insert) in &ops {
            let held = model.entry(i).or_default();
            if insert {
                let before = a.encode();
                match (a.insert(id(i)), b.insert(id(i))) {
                    (Ok(()), Ok(())) => *held += 1,
                    (Err(_), Err(_)) => prop_assert_eq!(a.encode(), before),
                    _ => panic!("copies disagree"),
                }
            } else if *held > 0 {
                a.remove(id(i)).unwrap();
                b.remove(id(i)).unwrap();
                *held -= 1;
            }
            for (&j, &n) in &model {
                if n > 0 {
                    prop_assert!(a.contains(id(j)), "cuckoo dropped {}", id(j));
                    prop_assert!(a.count(id(j)) >= n);
                }
            }
        }
        prop_assert_eq!(a.encode(), b.encode());
        let back = CuckooFilter::decode(&a.encode()).unwrap();
        prop_assert_eq!(&back, &a);
    }

    #[test]
    fn cuckoo_changes_bring_a_copy_up_to_date(
        before in ops(60, 100),
        after in ops(60, 100),
    ) {
        let mut f = CuckooFilter::new(CuckooGeometry::new(64, 12, 5).unwrap());
        let mut held: HashMap<usize, u32> = HashMap::new();
        let mut step = |f: &mut CuckooFilter, (i, insert): (usize, bool)| {
            let n = held.entry(i).or_default();
            if insert {
                if f.insert(id(i)).is_ok() {
                    *n += 1;
                }
            } else if *n > 0 {
                f.remove(id(i)).unwrap();
                *n -= 1;
            }
        };
        for &op in &before {
            step(&mut f, op);
        }
        let mut copy = CuckooFilter::decode(&f.encode()).unwrap();
        // A victim resets the log even if a later remove takes it back.
        let mut was_full = copy.is_full();
        for &op in &after {
            step(&mut f, op);
            was_full |= f.is_full();
        }
        match f.changes_since(copy.version()) {
            Ok(delta) => {
                copy.apply(&Delta::decode(&delta.encode()).unwrap()).unwrap();
                // The generator state is not part of a delta; the table is.
                prop_assert_eq!(strip_rng(&copy.encode()), strip_rng(&f.encode()));
            }
            Err(DeltaError::SnapshotRequired { .. }) => prop_assert!(was_full),
            Err(e) => panic!("{e}"),
        }
    }
}

/// A cuckoo encoding with the generator state (bytes 48..56) and the CRC
/// zeroed, for comparing tables.
fn strip_rng(bytes: &[u8]) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v[48..56].fill(0);
    let n = v.len();
    v[n - 4..].fill(0);
    v
}

#[test]
fn saturated_id_survives_its_neighbours_removals() {
    // 20 inserts and 20 removes of one ID, with other IDs on the same block.
    let mut f = CountingBloomFilter::new(BloomGeometry::new(512, 6, 0).unwrap());
    for _ in 0..20 {
        f.insert("A");
    }
    for i in 0..30 {
        f.insert(id(i));
    }
    for _ in 0..20 {
        f.remove("A").unwrap();
    }
    for i in 0..30 {
        assert!(f.contains(id(i)));
    }
    assert!(f.stuck_counters() > 0);
}

/// Measured false-positive rate on 1M absent keys, at most 1.15 × the
/// model's, for each target rate.
#[test]
fn measured_rate_matches_the_model() {
    let items = 100_000u64;
    let absent = 1_000_000u64;
    let rate_on_absent = |contains: &dyn Fn(String) -> bool| {
        let hits = (0..absent)
            .filter(|i| contains(format!("absent-{i}")))
            .count();
        hits as f64 / absent as f64
    };
    for p in [0.1, 0.01, 0.001] {
        let mut f = CountingBloomFilter::with_capacity(items, p).unwrap();
        for i in 0..items {
            f.insert(format!("present-{i}"));
        }
        let theory = f.geometry().theoretical_fpr(items);
        assert!(theory <= p);
        let bits = f.bit_view();
        let measured = rate_on_absent(&|id| bits.contains(id));
        assert!(
            measured <= 1.15 * theory,
            "p = {p}: measured {measured} vs theoretical {theory}"
        );

        let mut c = CuckooFilter::with_capacity(items, p).unwrap();
        for i in 0..items {
            c.insert(format!("present-{i}")).unwrap();
        }
        let theory = c.geometry().theoretical_fpr(items);
        let measured = rate_on_absent(&|id| c.contains(id));
        assert!(
            measured <= 1.15 * theory,
            "cuckoo p = {p}: measured {measured} vs theoretical {theory}"
        );
    }
}

/// The case proptest found: one ID inserted until its fingerprint takes
/// the victim slot, then removed once, which takes the victim back. The
/// filter is no longer full, yet the copy from before must take a
/// snapshot: a delta cannot carry what the victim moved.
#[test]
fn a_victim_that_has_gone_still_requires_a_snapshot() {
    let mut f = CuckooFilter::new(CuckooGeometry::new(64, 12, 5).unwrap());
    let copy = f.version();
    let mut inserted = 0;
    while !f.is_full() {
        f.insert(id(23)).unwrap();
        inserted += 1;
        assert!(inserted <= 64 * 4, "the filter never filled");
    }
    f.remove(id(23)).unwrap();
    assert!(!f.is_full());
    assert!(matches!(
        f.changes_since(copy),
        Err(DeltaError::SnapshotRequired { .. })
    ));
}
