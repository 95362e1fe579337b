//! Writes valid encodings of small filters and deltas into
//! fuzz/corpus/<target>/ as seeds for the fuzz targets:
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --example build_corpus [DIR]
//!
//! DIR defaults to fuzz/corpus. Files are named seed-NNN and overwritten.

use std::fs;
use std::path::{Path, PathBuf};

use xarchive_filter::{
    AtomicCountingBloomFilter, BloomFilter, BloomGeometry, CountingBloomFilter, CuckooFilter,
    CuckooGeometry, Delta,
};
use xarchive_filter_fuzz::{seed_ids as ids, ID};

fn write(dir: &Path, target: &str, seeds: &[Vec<u8>]) {
    let dir = dir.join(target);
    fs::create_dir_all(&dir).expect("create corpus dir");
    for (i, bytes) in seeds.iter().enumerate() {
        fs::write(dir.join(format!("seed-{i:03}")), bytes).expect("write seed");
    }
    println!("{}: {} seeds", dir.display(), seeds.len());
}

fn bloom_geometries() -> Vec<BloomGeometry> {
    [
        (512, 1, 0),
        (512, 3, 7),
        (1024, 7, 1),
        (1536, 8, 42),
        (2048, 32, 9),
    ]
    .into_iter()
    .map(|(bits, k, seed)| BloomGeometry::new(bits, k, seed).expect("valid geometry"))
    .collect()
}

fn main() {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"));

    let mut bloom = Vec::new();
    let mut counting = Vec::new();
    let mut atomic = Vec::new();
    let mut delta = Vec::new();
    for (n, g) in bloom_geometries().into_iter().enumerate() {
        let mut b = BloomFilter::new(g);
        bloom.push(b.encode());
        for id in ids(5 * n + 1) {
            b.insert(id);
        }
        b.set_epoch(n as u64);
        bloom.push(b.encode());

        let mut c = CountingBloomFilter::new(g);
        counting.push(c.encode());
        for id in ids(4 * n + 2) {
            c.insert(id);
        }
        let v = c.version();
        for _ in 0..16 {
            c.insert(ID); // sticky counters
        }
        c.remove(ids(1).next().unwrap()).expect("inserted");
        counting.push(c.encode());
        delta.push(c.flips_since(v).expect("log holds it").encode());
        delta.push(c.flips_since(c.version()).expect("empty delta").encode());

        let a = AtomicCountingBloomFilter::new(g);
        atomic.push(a.encode());
        for id in ids(3 * n + 1) {
            a.insert(id);
        }
        atomic.push(a.encode());
    }
    atomic.push(counting[1].clone()); // non-zero epoch and version

    let mut cuckoo = Vec::new();
    for (buckets, bits, seed) in [
        (1, 4, 0),
        (2, 12, 7),
        (3, 5, 1),
        (5, 8, 2),
        (7, 16, 3),
        (4, 13, 4),
    ] {
        let g = CuckooGeometry::new(buckets, bits, seed).expect("valid geometry");
        let mut f = CuckooFilter::new(g);
        cuckoo.push(f.encode());
        let v = f.version();
        for id in ids(buckets as usize * 2) {
            let _ = f.insert(id);
        }
        cuckoo.push(f.encode());
        delta.push(f.changes_since(v).expect("log holds it").encode());
        // Fill it until the victim slot is taken.
        for id in ids(200) {
            if f.insert(format!("{id}/full")).is_err() {
                break;
            }
        }
        cuckoo.push(f.encode());
    }

    write(&dir, "decode_bloom", &bloom);
    write(&dir, "decode_counting", &counting);
    write(&dir, "decode_atomic", &atomic);
    write(&dir, "decode_cuckoo", &cuckoo);
    write(&dir, "decode_delta", &delta);
    // Each decoder also sees the others' magics.
    let _ = Delta::decode(&bloom[0]).expect_err("magic differs");
}
