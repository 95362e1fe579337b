//! Writes the cross-language vectors that `web/test/*.test.mjs` check the
//! JavaScript reader (`web/xarchive-filter.js`) against, byte for byte:
//! hash digests, probe positions, cuckoo locations, filter bytes with the
//! Rust answer for IDs in and out, deltas with the bytes they lead to, and
//! corrupt inputs with the error the Rust decoder gives.
//!
//! `cargo run -p xarchive-filter --example js_vectors -- web/test/vectors.json`
//!
//! Everything is deterministic; `tests/js_vectors.rs` fails when the
//! committed file differs from what this produces now.
//!
//! Numbers that may exceed 2^53 (hashes, epochs, versions, item counts) are
//! written as strings (hex for hashes, decimal otherwise), so that
//! `JSON.parse` cannot round them; bytes are base64 (standard, padded).

//!
//! The sections are modules in `examples/js_vectors/`, named by `#[path]`
//! so that `tests/js_vectors.rs` can include this file as a module too.

#[path = "js_vectors/common.rs"]
mod common;
#[path = "js_vectors/corrupt.rs"]
mod corrupt;
#[path = "js_vectors/deltas.rs"]
mod deltas;
#[path = "js_vectors/filters.rs"]
mod filters;
#[path = "js_vectors/hashing.rs"]
mod hashing;
#[path = "js_vectors/ids.rs"]
mod ids;
#[path = "js_vectors/output.rs"]
mod output;

use serde_json::json;

use corrupt::corrupt_vectors;
use deltas::delta_vectors;
use filters::{bloom_filters, cuckoo_filters};
use hashing::{crc_vectors, hash_vectors, location_vectors, position_vectors};
use output::write_value;

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
