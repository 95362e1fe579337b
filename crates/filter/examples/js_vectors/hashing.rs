//! Hashing vectors: CRC32C, MurmurHash3 digests, Bloom probe positions and
//! cuckoo bucket/fingerprint locations.

use serde_json::{json, Value};
use xarchive_filter::{
    murmur3_x64_128, BloomGeometry, CuckooFilter, CuckooGeometry, MAX_BITS, MAX_BUCKETS,
};

use super::ids::tricky_ids;

pub(super) fn crc_vectors() -> Value {
    let inputs: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"123456789".to_vec(),
        b"XABL".to_vec(),
        "档案".as_bytes().to_vec(),
        (0..=255).collect(),
        vec![0xff; 37],
    ];
    inputs
        .iter()
        .map(|b| json!({ "hex": hex::encode(b), "crc": crc32c::crc32c(b) }))
        .collect()
}

pub(super) fn hash_vectors() -> Value {
    let mut out = Vec::new();
    let digest = |bytes: &[u8], seed: u32, id: Option<&str>| {
        let d = murmur3_x64_128(bytes, seed);
        let mut v = json!({
            "hex": hex::encode(bytes),
            "seed": seed,
            "h1": format!("{:016x}", d.h1),
            "h2": format!("{:016x}", d.h2),
        });
        if let Some(id) = id {
            v["id"] = json!(id);
        }
        v
    };
    for id in tricky_ids() {
        for seed in [0, 1, 42, 0x9747_b28c, u32::MAX] {
            out.push(digest(id.as_bytes(), seed, Some(&id)));
        }
    }
    // Raw bytes that are not UTF-8, for readers that hash bytes directly:
    // SMHasher's verification keys {}, {0}, {0,1}, ... with seed 256 - len.
    let all: Vec<u8> = (0..=255).collect();
    for len in 0..=40 {
        out.push(digest(&all[..len], 256 - u32::try_from(len).unwrap(), None));
    }
    out.push(digest(&all[128..], 0, None));
    Value::Array(out)
}

pub(super) fn position_vectors() -> Value {
    let geometries = [
        (512, 3, 7),
        (99_328, 6, 0),
        (99_328, 10, 42),
        (9_895_936, 6, 0),
        (1 << 20, 32, u32::MAX),
        (MAX_BITS, 14, 0x9747_b28c),
        (MAX_BITS - 512, 32, 1),
    ];
    let mut out = Vec::new();
    for (bits, k, seed) in geometries {
        let g = BloomGeometry::new(bits, k, seed).expect("valid geometry");
        for id in tricky_ids().iter().step_by(3) {
            let p = g.probes(id.as_bytes());
            let positions: Vec<u64> = (0..k).map(|i| p.position(i)).collect();
            out.push(json!({
                "num_bits": bits, "k": k, "seed": seed, "id": id, "positions": positions,
            }));
        }
    }
    Value::Array(out)
}

/// Bucket, fingerprint and alternate bucket, from a filter holding one ID:
/// its single non-empty slot tells where the Rust filter put it.
pub(super) fn location_vectors() -> Value {
    let geometries = [
        (1, 4, 0),
        (2, 12, 7),
        (3, 5, 0),
        (1000, 8, 42),
        (2689, 10, 0),
        (MAX_BUCKETS, 16, u32::MAX),
        (MAX_BUCKETS - 1, 13, 0x9747_b28c),
    ];
    let mut out = Vec::new();
    for (buckets, bits, seed) in geometries {
        let g = CuckooGeometry::new(buckets, bits, seed).expect("valid geometry");
        for id in tricky_ids().iter().step_by(3) {
            let d = murmur3_x64_128(id.as_bytes(), seed);
            let bucket = ((u128::from(d.h1) * u128::from(buckets)) >> 64) as u64;
            let fp = ((u128::from(d.h2) * u128::from((1u64 << bits) - 1)) >> 64) as u64 + 1;
            let h = ((u128::from(fp.wrapping_mul(0x9e37_79b9_7f4a_7c15)) * u128::from(buckets))
                >> 64) as u64;
            let alternate = (h + buckets - bucket) % buckets;
            if buckets <= 4096 {
                // Cross-check against the filter itself: the ID lands in
                // slot 0 of its home bucket.
                let mut f = CuckooFilter::new(g);
                f.insert(id).expect("an empty filter takes an ID");
                let bytes = f.encode();
                let table = &bytes[56..bytes.len() - 4];
                let slot0 = read_bits(table, bucket * 4 * u64::from(bits), bits);
                assert_eq!(slot0, fp, "fingerprint of {id:?}");
            }
            out.push(json!({
                "num_buckets": buckets, "fingerprint_bits": bits, "seed": seed, "id": id,
                "bucket": bucket, "fingerprint": fp, "alternate": alternate,
            }));
        }
    }
    Value::Array(out)
}

pub(super) fn read_bits(table: &[u8], at: u64, bits: u8) -> u64 {
    (0..u64::from(bits)).fold(0, |acc, b| {
        let bit = at + b;
        acc | (u64::from(table[(bit / 8) as usize] >> (bit % 8) & 1) << b)
    })
}
