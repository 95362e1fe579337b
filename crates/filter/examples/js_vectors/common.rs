//! Helpers every section uses: bytes as base64, decode errors by
//! name, CRC resealing, and the Rust answers to queries.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};
use xarchive_filter::DecodeError;

/// Bytes as standard, padded base64.
pub(super) fn b64(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

pub(super) fn u64s(v: u64) -> Value {
    Value::String(v.to_string())
}

pub(super) fn error_kind(e: &DecodeError) -> &'static str {
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
pub(super) fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
    let end = bytes.len() - 4;
    let crc = crc32c::crc32c(&bytes[..end]);
    bytes[end..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// An envelope of `magic` around `body`, with a correct CRC.
pub(super) fn envelope(magic: [u8; 4], body: &[u8]) -> Vec<u8> {
    let mut bytes = magic.to_vec();
    bytes.extend_from_slice(&[1, 0, 0, 0]);
    bytes.extend_from_slice(body);
    bytes.extend_from_slice(&[0; 4]);
    reseal(bytes)
}

pub(super) fn queries(
    present: &[String],
    absent: &[String],
    answer: impl Fn(&str) -> bool,
) -> Value {
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
