//! Corrupt inputs for every decoder, with the kind of error the Rust
//! decoder gives.

use serde_json::{json, Value};
use xarchive_filter::{
    BloomFilter, BloomGeometry, CountingBloomFilter, CuckooFilter, CuckooGeometry, Delta, MAX_BITS,
    MAX_BUCKETS,
};

use super::common::{b64, envelope, error_kind, reseal};
use super::ids::sample_id;

pub(super) fn corrupt_vectors() -> Value {
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
        let mut flipped = valid.clone();
        let at = flipped.len() / 2;
        flipped[at] ^= 0x10;
        check(decoder, "one bit flipped in the body", flipped);
        let mut crc = valid.clone();
        let last = crc.len() - 1;
        crc[last] ^= 0x80;
        check(decoder, "CRC damaged", crc);
        let mut longer = valid[..valid.len() - 4].to_vec();
        longer.extend_from_slice(&[0, 0, 0, 0, 0]);
        check(decoder, "one byte too many, CRC fixed", reseal(longer));
        check(
            decoder,
            "header only",
            envelope(valid[..4].try_into().expect("magic"), &[]),
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
            envelope(valid[..4].try_into().expect("magic"), &valid[8..47]),
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
    check("cuckoo", "body of 47 bytes", envelope(*b"XACK", &x[8..55]));

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
    let mut swapped = d.clone();
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
    check("delta", "body of 55 bytes", envelope(*b"XADL", &d[8..63]));
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
        envelope(*b"XADL", &body)
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
