//! The atomic counting filter under real threads, checked against the
//! sequential filter given the same operations.

use std::sync::Barrier;

use xarchive_filter::{AtomicCountingBloomFilter, BloomGeometry, CountingBloomFilter};

const THREADS: usize = 4;

fn id(t: usize, i: usize) -> String {
    format!("T{t}-档案/2024/{i:05}")
}

/// Each thread inserts its IDs, removes every third, and probes the rest
/// while the others write. Without saturation, increments and decrements
/// commute, so the result must equal the sequential filter counter for
/// counter, and no thread may ever see one of its held IDs absent.
#[test]
fn threads_agree_with_the_sequential_model() {
    let geometry = BloomGeometry::for_capacity(40_000, 0.01).unwrap();
    for round in 0..5 {
        let shared = AtomicCountingBloomFilter::new(geometry);
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (shared, start) = (&shared, &start);
                s.spawn(move || {
                    start.wait();
                    let n = 5_000 + round * 100;
                    for i in 0..n {
                        shared.insert(id(t, i));
                        if i % 3 == 0 {
                            shared.remove(id(t, i)).expect("just inserted");
                        }
                        // Everything this thread holds is still there.
                        let probe = (i * 7919) % (i + 1);
                        if probe % 3 != 0 {
                            assert!(shared.contains(id(t, probe)), "false negative");
                        }
                    }
                });
            }
        });
        let mut sequential = CountingBloomFilter::new(geometry);
        for t in 0..THREADS {
            for i in 0..5_000 + round * 100 {
                if i % 3 != 0 {
                    sequential.insert(id(t, i));
                }
            }
        }
        assert_eq!(
            sequential.stuck_counters(),
            0,
            "the model assumes no saturation"
        );
        assert!(
            shared.snapshot().same_contents(&sequential),
            "round {round}"
        );
    }
}

/// Many threads hammering one ID past saturation: whatever the
/// interleaving, an ID still inserted more often than removed is present.
#[test]
fn saturation_under_contention_keeps_the_id() {
    let shared = AtomicCountingBloomFilter::new(BloomGeometry::new(512, 6, 0).unwrap());
    let start = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let (shared, start) = (&shared, &start);
            s.spawn(move || {
                start.wait();
                for _ in 0..1_000 {
                    shared.insert("J001-WS·2023-Y-0001");
                    shared.insert("J001-WS·2023-Y-0001");
                    shared.remove("J001-WS·2023-Y-0001").unwrap();
                    assert!(shared.contains("J001-WS·2023-Y-0001"));
                }
            });
        }
    });
    assert!(shared.stuck_counters() > 0);
    assert_eq!(shared.count("J001-WS·2023-Y-0001"), 15);
}
