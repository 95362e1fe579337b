//! Writes the cross-language vectors that `web/test/*.test.mjs` check the
//! JavaScript reader (`web/xarchive-filter.js`) against, byte for byte:
//! hash digests, probe positions, cuckoo locations, filter bytes with the
//! Rust answer for IDs in and out, deltas with the bytes they lead to, and
//! corrupt inputs with the error the Rust decoder gives.
//!
//! cargo run -p xarchive-filter --example js_vectors -- web/test/vectors.json
//!
//! Everything is deterministic; `tests/js_vectors.rs` fails when the
//! committed file differs from what this produces now.
//!
//! Numbers that may exceed 2^53 (hashes, epochs, versions, item counts) are
//! written as strings (hex for hashes, decimal otherwise), so that
//! `JSON.parse` cannot round them; bytes are base64 (standard, padded).

use serde_json::{json, Value};
use xarchive_filter::{
    murmur3_x64_128, BloomFilter, BloomGeometry, CountingBloomFilter, CuckooFilter, CuckooGeometry,
    DecodeError, Delta, MAX_BITS, MAX_BUCKETS,
};

#[allow(dead_code)]
fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "web/test/vectors.json".to_owned());
    let text = generate();
    if let Err(e) = std::fs::write(&path, &text) {
        eprintln!("error: cannot write {path}: {e}");
        std::process::exit(1);
    }
    println!("wrote {path} ({} bytes)", text.len());
}

/// The whole vectors file, as text.
pub fn generate() -> String {
    let doc = json!({
        "about": "Cross-language vectors for web/xarchive-filter.js, written by \
                  `cargo run -p xarchive-filter --example js_vectors -- web/test/vectors.json` \
                  (crates/filter/examples/js_vectors.rs); do not edit by hand. \
                  u64 values are strings, bytes are base64.",
        "crc32c": crc_vectors(),
        "murmur3": hash_vectors(),
        "bloom_positions": position_vectors(),
        "cuckoo_locations": location_vectors(),
        "bloom_filters": bloom_filters(),
        "cuckoo_filters": cuckoo_filters(),
        "deltas": delta_vectors(),
        "corrupt": corrupt_vectors(),
    });
    let mut out = String::new();
    write_value(&mut out, &doc, 0);
    out.push('\n');
    out
}

// ------------------------------------------------------------------ IDs

/// Archive numbers as the sample records make them (crates/node/src/sample.rs).
fn sample_id(domain: u64, i: u64) -> String {
    let category = ["WS", "KJ", "CW", "RS"][(i % 4) as usize];
    let retention = ["Y", "D30", "D10"][(i % 3) as usize];
    let fonds = domain * 100 + (i / 2000) % 100 + 1;
    let year = 2000 + (i / 4) % 25;
    format!("J{fonds:03}-{category}·{year}-{retention}-{i:05}")
}

/// IDs of every shape the hash must agree on: ASCII, CJK, emoji, combining
/// marks, and lengths on both sides of each 8- and 16-byte boundary.
fn tricky_ids() -> Vec<String> {
    let mut ids: Vec<String> = [
        "",
        "a",
        "foo",
        "The quick brown fox jumps over the lazy dog",
        "J001-WS·2023-Y-0001",
        "档案/2024/001",
        "档案/2024/002",
        "全宗J012·文书·2019·永久·00042",
        "📁-1",
        "🗂️档案-2024-🗄️",
        "👩‍👩‍👧‍👦",
        "é",
        "e\u{301}",
        "ＡＢＣ－００１",
        "ڤ-٣-۴",
        "Ω≈ç√∫",
        "a.b",
        ".",
        "..",
        "100% / 50% ? # & =",
        " leading and trailing spaces ",
        "\u{ffff}\u{10ffff}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for n in [
        1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40, 47, 48, 49, 255, 256,
    ] {
        ids.push("x".repeat(n));
    }
    for n in 1..=12 {
        ids.push("档".repeat(n));
    }
    for n in 1..=9 {
        ids.push("🗄".repeat(n));
    }
    for n in 0..6 {
        ids.push(format!("{}{}", "a".repeat(n), "档案🗂".repeat(3)));
    }
    for i in [0, 1, 42, 1999, 2000, 99_999] {
        ids.push(sample_id(0, i));
        ids.push(sample_id(2, i));
    }
    ids
}

fn absent_ids(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match i % 4 {
            0 => format!("NOT-HERE-{i:05}"),
            1 => format!("档案/1999/{i:04}"),
            2 => format!("🚫-{i}"),
            _ => sample_id(7, i as u64),
        })
        .collect()
}

// ------------------------------------------------------------------ helpers

fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn u64s(v: u64) -> Value {
    Value::String(v.to_string())
}

fn error_kind(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Truncated { .. } => "truncated",
        DecodeError::Magic { .. } => "magic",
        DecodeError::Version(_) => "version",
        DecodeError::Checksum { .. } => "checksum",
        DecodeError::Geometry(_) => "geometry",
        DecodeError::Length { .. } => "length",
        DecodeError::Invalid(_) => "invalid",
    }
}

/// Rewrites the CRC32C trailer so that only the change under test is wrong.
fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
    let end = bytes.len() - 4;
    let crc = crc32c::crc32c(&bytes[..end]);
    bytes[end..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// An envelope of `magic` around `body`, with a correct CRC.
fn envelope(magic: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut bytes = magic.to_vec();
    bytes.extend_from_slice(&[1, 0, 0, 0]);
    bytes.extend_from_slice(body);
    bytes.extend_from_slice(&[0; 4]);
    reseal(bytes)
}

fn queries(present: &[String], absent: &[String], answer: impl Fn(&str) -> bool) -> Value {
    let mut out = Vec::new();
    for id in present {
        assert!(answer(id), "a present ID must be found: {id}");
        out.push(json!([id, true]));
    }
    for id in absent {
        out.push(json!([id, answer(id)]));
    }
    Value::Array(out)
}

// ------------------------------------------------------------------ hashing

fn crc_vectors() -> Value {
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
        .map(|b| json!({ "hex": hex(b), "crc": crc32c::crc32c(b) }))
        .collect()
}

fn hash_vectors() -> Value {
    let mut out = Vec::new();
    let digest = |bytes: &[u8], seed: u32, id: Option<&str>| {
        let d = murmur3_x64_128(bytes, seed);
        let mut v = json!({
            "hex": hex(bytes),
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
        out.push(digest(&all[..len], 256 - len as u32, None));
    }
    out.push(digest(&all[128..], 0, None));
    Value::Array(out)
}

fn position_vectors() -> Value {
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
fn location_vectors() -> Value {
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

fn read_bits(table: &[u8], at: u64, bits: u8) -> u64 {
    (0..u64::from(bits)).fold(0, |acc, b| {
        let bit = at + b;
        acc | (u64::from(table[(bit / 8) as usize] >> (bit % 8) & 1) << b)
    })
}

// ------------------------------------------------------------------ filters

fn bloom_case(
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

fn bloom_filters() -> Value {
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

fn cuckoo_case(
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

fn cuckoo_filters() -> Value {
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

// ------------------------------------------------------------------ deltas

/// What the Rust reader does with `delta` applied to `base`: the bytes it
/// ends at, or the kind of error.
fn rust_apply(base: &[u8], delta: &[u8]) -> Value {
    let delta = match Delta::decode(delta) {
        Ok(d) => d,
        Err(e) => return json!({ "decode_error": error_kind(&e) }),
    };
    let applied = if base[..4] == *b"XACK" {
        let mut f = CuckooFilter::decode(base).expect("base decodes");
        f.apply(&delta).map(|()| f.encode())
    } else {
        let mut f = BloomFilter::decode(base).expect("base decodes");
        f.apply(&delta).map(|()| f.encode())
    };
    match applied {
        Ok(bytes) => json!({ "result": b64(&bytes) }),
        Err(e) => {
            let kind = match e {
                xarchive_filter::ApplyError::Epoch { .. } => "epoch",
                xarchive_filter::ApplyError::Version { .. } => "version",
                xarchive_filter::ApplyError::Geometry { .. } => "geometry",
                xarchive_filter::ApplyError::Cell { .. } => "cell",
            };
            json!({ "apply_error": kind })
        }
    }
}

fn delta_case(name: &str, base: &[u8], delta: &[u8]) -> Value {
    let d = Delta::decode(delta).ok();
    let mut v = json!({
        "name": name,
        "base": b64(base),
        "delta": b64(delta),
    });
    if let Some(d) = d {
        v["fields"] = json!({
            "num_cells": d.num_cells,
            "cell_bits": d.cell_bits,
            "epoch": u64s(d.epoch),
            "from_version": u64s(d.from_version),
            "to_version": u64s(d.to_version),
            "items": u64s(d.items),
            "changes": d.changes.iter().map(|c| json!([c.cell, c.value])).collect::<Vec<_>>(),
        });
    }
    if let Value::Object(outcome) = rust_apply(base, delta) {
        for (k, val) in outcome {
            v[k] = val;
        }
    }
    v
}

fn delta_vectors() -> Value {
    let ids: Vec<String> = (0..120).map(|i| sample_id(0, i)).collect();
    let mut cases = Vec::new();

    // Counting domain: bit-view copies at versions v0 < v1 < v2.
    let mut f = CountingBloomFilter::new(BloomGeometry::new(2048, 5, 0).expect("geometry"));
    f.set_epoch(4);
    for id in &ids[..60] {
        f.insert(id);
    }
    let (v0, at_v0) = (f.version(), f.bit_view().encode());
    for id in &ids[60..90] {
        f.insert(id);
    }
    for id in ids[..20].iter() {
        f.remove(id).expect("inserted");
    }
    f.insert("档案/2024/001");
    let (v1, at_v1) = (f.version(), f.bit_view().encode());
    for id in &ids[90..] {
        f.insert(id);
    }
    f.insert("🗂️-emoji-record");
    f.remove(&ids[70]).expect("inserted");
    let at_v2 = f.bit_view().encode();
    let d0 = f.flips_since(v0).expect("held").encode();
    let d1 = f.flips_since(v1).expect("held").encode();
    let empty = f.flips_since(f.version()).expect("held").encode();
    cases.push(delta_case("bit view: v0 to v2", &at_v0, &d0));
    cases.push(delta_case("bit view: v1 to v2", &at_v1, &d1));
    cases.push(delta_case(
        "bit view: a copy at v1 takes the delta from v0",
        &at_v1,
        &d0,
    ));
    cases.push(delta_case(
        "bit view: the same delta twice is harmless",
        &at_v2,
        &d0,
    ));
    cases.push(delta_case("bit view: no change since v2", &at_v2, &empty));
    // A copy at v0 cannot take the changes from v1 on.
    cases.push(delta_case(
        "refused: the copy is older than the delta",
        &at_v0,
        &d1,
    ));

    // The same geometry in another epoch (a rebuilt filter).
    let mut rebuilt = CountingBloomFilter::new(BloomGeometry::new(2048, 5, 0).expect("geometry"));
    rebuilt.set_epoch(5);
    rebuilt.insert("J001-WS·2023-Y-0001");
    let other_epoch = rebuilt.flips_since(0).expect("held").encode();
    let mut at_zero = BloomFilter::new(BloomGeometry::new(2048, 5, 0).expect("geometry"));
    at_zero.set_epoch(4);
    cases.push(delta_case(
        "refused: delta of another epoch",
        &at_zero.encode(),
        &other_epoch,
    ));
    let other_shape = BloomFilter::new(BloomGeometry::new(1024, 5, 0).expect("geometry"));
    let mut shaped = other_shape.clone();
    shaped.set_epoch(5);
    cases.push(delta_case(
        "refused: delta of another geometry",
        &shaped.encode(),
        &other_epoch,
    ));

    // Cuckoo domain.
    let mut c = CuckooFilter::new(CuckooGeometry::new(40, 12, 3).expect("geometry"));
    c.set_epoch(2);
    for id in &ids[..50] {
        c.insert(id).expect("room");
    }
    let (c0, cat0) = (c.version(), c.encode());
    for id in &ids[50..80] {
        c.insert(id).expect("room");
    }
    for id in &ids[..25] {
        c.remove(id).expect("inserted");
    }
    c.insert("档案/2024/001").expect("room");
    let cd = c.changes_since(c0).expect("held").encode();
    cases.push(delta_case("cuckoo: slots from v0 on", &cat0, &cd));
    let fields_width = CuckooFilter::new(CuckooGeometry::new(40, 11, 3).expect("geometry"));
    cases.push(delta_case(
        "refused: cuckoo delta of another fingerprint width",
        &fields_width.encode(),
        &cd,
    ));
    cases.push(delta_case(
        "refused: a cuckoo delta on a Bloom filter",
        &at_v0,
        &cd,
    ));

    // Hand-made: non-minimal varints are accepted (80 00 is 0).
    let mut body = Vec::new();
    body.extend_from_slice(&2048u64.to_le_bytes());
    body.push(1);
    body.extend_from_slice(&[0; 7]);
    body.extend_from_slice(&4u64.to_le_bytes()); // epoch
    body.extend_from_slice(&v0.to_le_bytes()); // from
    body.extend_from_slice(&(v0 + 1).to_le_bytes()); // to
    body.extend_from_slice(&61u64.to_le_bytes()); // items
    body.extend_from_slice(&2u64.to_le_bytes()); // count
    body.extend_from_slice(&[0x81, 0x80, 0x00]); // cell 0 := 1, three bytes
    body.extend_from_slice(&[0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]); // +1: cell 1 := 0, ten bytes
    cases.push(delta_case(
        "hand-made: non-minimal varints, ten bytes long",
        &at_v0,
        &envelope(b"XADL", &body),
    ));
    Value::Array(cases)
}

// ------------------------------------------------------------------ corrupt

fn corrupt_vectors() -> Value {
    let mut out = Vec::new();
    let mut check = |decoder: &str, name: &str, bytes: Vec<u8>| {
        let result = match decoder {
            "bloom" => BloomFilter::decode(&bytes).map(|_| ()),
            "counting" => CountingBloomFilter::decode(&bytes).map(|_| ()),
            "cuckoo" => CuckooFilter::decode(&bytes).map(|_| ()),
            "delta" => Delta::decode(&bytes).map(|_| ()),
            _ => unreachable!("decoder {decoder}"),
        };
        let error = result.expect_err(name);
        out.push(json!({
            "decoder": decoder,
            "name": name,
            "bytes": b64(&bytes),
            "error": error_kind(&error),
        }));
    };

    // A valid file of each kind, to damage.
    let mut counting = CountingBloomFilter::new(BloomGeometry::new(1024, 4, 1).expect("geometry"));
    for i in 0..30 {
        counting.insert(sample_id(0, i));
    }
    let xabl = counting.bit_view().encode();
    let xacb = counting.encode();
    // 4 · 5 · 5 = 100 bits: the last table byte has 4 padding bits.
    let mut cuckoo = CuckooFilter::new(CuckooGeometry::new(5, 5, 1).expect("geometry"));
    for i in 0..12 {
        cuckoo.insert(sample_id(0, i)).expect("room");
    }
    let xack = cuckoo.encode();
    let before = counting.version();
    counting.insert("档案/2024/001");
    counting.remove(sample_id(0, 3)).expect("inserted");
    let xadl = counting.flips_since(before).expect("held").encode();

    let set = |bytes: &[u8], at: usize, value: &[u8]| {
        let mut b = bytes.to_vec();
        b[at..at + value.len()].copy_from_slice(value);
        reseal(b)
    };

    for (decoder, valid) in [
        ("bloom", &xabl),
        ("counting", &xacb),
        ("cuckoo", &xack),
        ("delta", &xadl),
    ] {
        check(decoder, "empty", Vec::new());
        check(decoder, "11 bytes", valid[..11].to_vec());
        check(decoder, "cut short", valid[..valid.len() - 1].to_vec());
        check(
            decoder,
            "cut short, CRC fixed",
            reseal(valid[..valid.len() - 1].to_vec()),
        );
        check(decoder, "wrong magic", set(valid, 0, b"XAZZ"));
        check(
            decoder,
            "magic of another kind",
            set(valid, 0, if decoder == "delta" { b"XABL" } else { b"XADL" }),
        );
        check(decoder, "format version 2", set(valid, 4, &[2]));
        check(decoder, "format version 0", set(valid, 4, &[0]));
        check(decoder, "reserved header byte", set(valid, 6, &[1]));
        let mut flipped = valid.to_vec();
        let at = flipped.len() / 2;
        flipped[at] ^= 0x10;
        check(decoder, "one bit flipped in the body", flipped);
        let mut crc = valid.to_vec();
        let last = crc.len() - 1;
        crc[last] ^= 0x80;
        check(decoder, "CRC damaged", crc);
        let mut longer = valid[..valid.len() - 4].to_vec();
        longer.extend_from_slice(&[0, 0, 0, 0, 0]);
        check(decoder, "one byte too many, CRC fixed", reseal(longer));
        check(
            decoder,
            "header only",
            envelope(&valid[..4].try_into().expect("magic"), &[]),
        );
    }

    for (decoder, valid) in [("bloom", &xabl), ("counting", &xacb)] {
        check(decoder, "num_bits 0", set(valid, 8, &0u64.to_le_bytes()));
        check(
            decoder,
            "num_bits not a multiple of 512",
            set(valid, 8, &1000u64.to_le_bytes()),
        );
        check(
            decoder,
            "num_bits 2^38 + 512",
            set(valid, 8, &(MAX_BITS + 512).to_le_bytes()),
        );
        check(
            decoder,
            "num_bits 2^64 - 512",
            set(valid, 8, &(u64::MAX - 511).to_le_bytes()),
        );
        check(
            decoder,
            "num_bits 512 (payload too long)",
            set(valid, 8, &512u64.to_le_bytes()),
        );
        check(
            decoder,
            "num_bits 2048 (payload too short)",
            set(valid, 8, &2048u64.to_le_bytes()),
        );
        check(decoder, "k 0", set(valid, 16, &0u32.to_le_bytes()));
        check(decoder, "k 33", set(valid, 16, &33u32.to_le_bytes()));
        check(
            decoder,
            "body of 39 bytes",
            envelope(&valid[..4].try_into().expect("magic"), &valid[8..47]),
        );
    }

    let x = &xack;
    check("cuckoo", "0 buckets", set(x, 8, &0u64.to_le_bytes()));
    check(
        "cuckoo",
        "2^34 + 1 buckets",
        set(x, 8, &(MAX_BUCKETS + 1).to_le_bytes()),
    );
    check(
        "cuckoo",
        "6 buckets (table length differs)",
        set(x, 8, &6u64.to_le_bytes()),
    );
    check("cuckoo", "3-bit fingerprints", set(x, 16, &[3]));
    check("cuckoo", "17-bit fingerprints", set(x, 16, &[17]));
    check(
        "cuckoo",
        "8-bit fingerprints (table length differs)",
        set(x, 16, &[8]),
    );
    check("cuckoo", "has_victim 2", set(x, 17, &[2]));
    check(
        "cuckoo",
        "no victim but a victim fingerprint",
        set(x, 18, &[1, 0]),
    );
    check("cuckoo", "no victim but a victim bucket", set(x, 40, &[1]));
    check("cuckoo", "victim with fingerprint 0", set(x, 17, &[1]));
    let victim = set(&set(x, 17, &[1]), 18, &[32, 0]);
    check("cuckoo", "victim fingerprint 2^f", victim);
    let victim = set(&set(&set(x, 17, &[1]), 18, &[5, 0]), 40, &[5]);
    check("cuckoo", "victim bucket beyond the table", victim);
    check(
        "cuckoo",
        "generator state 0",
        set(x, 48, &0u64.to_le_bytes()),
    );
    let pad = x.len() - 5;
    check("cuckoo", "padding bits set", set(x, pad, &[x[pad] | 0x80]));
    check("cuckoo", "body of 47 bytes", envelope(b"XACK", &x[8..55]));

    let d = &xadl;
    check("delta", "reserved byte in the body", set(d, 20, &[1]));
    check("delta", "num_cells 0", set(d, 8, &0u64.to_le_bytes()));
    check(
        "delta",
        "num_cells 2^38 + 1",
        set(d, 8, &(MAX_BITS + 1).to_le_bytes()),
    );
    check("delta", "cell_bits 0", set(d, 16, &[0]));
    check("delta", "cell_bits 17", set(d, 16, &[17]));
    let mut swapped = d.to_vec();
    swapped[32..40].copy_from_slice(&d[40..48]);
    swapped[40..48].copy_from_slice(&d[32..40]);
    check("delta", "from_version after to_version", reseal(swapped));
    check(
        "delta",
        "count beyond the bytes left",
        set(d, 56, &1000u64.to_le_bytes()),
    );
    check(
        "delta",
        "count 2^64 - 1",
        set(d, 56, &u64::MAX.to_le_bytes()),
    );
    check("delta", "body of 55 bytes", envelope(b"XADL", &d[8..63]));
    let header = |count: u64, cells: u64, bits: u8| {
        let mut body = Vec::new();
        body.extend_from_slice(&cells.to_le_bytes());
        body.push(bits);
        body.extend_from_slice(&[0; 7]);
        for v in [0u64, 1, 2, 0] {
            body.extend_from_slice(&v.to_le_bytes());
        }
        body.extend_from_slice(&count.to_le_bytes());
        body
    };
    let with = |count: u64, changes: &[u8]| {
        let mut body = header(count, 1024, 1);
        body.extend_from_slice(changes);
        envelope(b"XADL", &body)
    };
    check("delta", "varint runs past the end", with(1, &[0x80]));
    check(
        "delta",
        "varint of 11 bytes",
        with(
            1,
            &[0x80; 10].iter().chain(&[0]).copied().collect::<Vec<_>>(),
        ),
    );
    let mut over = vec![0xff; 9];
    over.push(0x02);
    check("delta", "varint above 2^64 - 1", with(1, &over));
    check("delta", "a cell twice (gap 0)", with(2, &[0x03, 0x01]));
    check("delta", "cell 1024 of 1024", with(1, &[0x81, 0x10]));
    let mut far = vec![0xff; 9];
    far.push(0x01);
    check("delta", "first cell near 2^63", with(1, &far));
    check(
        "delta",
        "a gap far beyond the filter",
        with(
            2,
            &[
                0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
        ),
    );
    check(
        "delta",
        "a byte after the last change",
        with(1, &[0x03, 0x00]),
    );
    check("delta", "fewer changes than count", with(3, &[0x03, 0x05]));
    check("delta", "last varint cut", with(2, &[0x03, 0x85]));
    Value::Array(out)
}

// ------------------------------------------------------------------ output

/// JSON with sorted keys (whatever map serde_json keeps): an object whose
/// values are all scalars or arrays of scalars on one line, other objects
/// one key per line, arrays of objects or arrays one element per line.
fn write_value(out: &mut String, v: &Value, indent: usize) {
    let pad = |n: usize| "  ".repeat(n);
    let nested = |v: &Value| match v {
        Value::Object(_) => true,
        Value::Array(items) => items.iter().any(|i| i.is_object() || i.is_array()),
        _ => false,
    };
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let flat = !map.values().any(nested);
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if flat {
                    out.push_str(if i == 0 { "" } else { ", " });
                } else {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&pad(indent + 1));
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push_str(": ");
                write_value(out, &map[*k], indent + 1);
            }
            if !flat {
                out.push('\n');
                out.push_str(&pad(indent));
            }
            out.push('}');
        }
        Value::Array(items) if nested(v) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&pad(indent + 1));
                write_value(out, item, indent + 1);
            }
            out.push('\n');
            out.push_str(&pad(indent));
            out.push(']');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "" } else { ", " });
                write_value(out, item, indent + 1);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}
