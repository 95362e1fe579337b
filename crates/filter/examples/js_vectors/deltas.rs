//! Deltas with the bytes applying them leads to, or the error the Rust
//! reader gives.

use serde_json::{json, Value};
use xarchive_filter::{
    BloomFilter, BloomGeometry, CountingBloomFilter, CuckooFilter, CuckooGeometry, Delta,
};

use super::common::{b64, envelope, error_kind, u64s};
use super::ids::sample_id;

/// What the Rust reader does with `delta` applied to `base`: the bytes it
/// ends at, or the kind of error.
pub(super) fn rust_apply(base: &[u8], delta: &[u8]) -> Value {
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

pub(super) fn delta_case(name: &str, base: &[u8], delta: &[u8]) -> Value {
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

pub(super) fn delta_vectors() -> Value {
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
    for id in &ids[..20] {
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
        &envelope(*b"XADL", &body),
    ));
    Value::Array(cases)
}
