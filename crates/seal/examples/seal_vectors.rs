//! Writes the cross-language vectors that `web/test/seal.test.mjs` checks
//! the page's verifier (`web/seal.js`) against: SM3 digests, SM2
//! signatures (and the same with a byte changed), a signed trust list, and
//! certificate payloads this crate sealed, each with the verdict the Rust
//! verifier gives (valid, changed, a key the list does not hold, a revoked
//! key, cut short).
//!
//! `cargo run -p xarchive-seal --example seal_vectors -- web/test/seal-vectors.json`
//!
//! Everything is deterministic (fixed keys and times; SM2 signs with RFC
//! 6979 nonces); `tests/seal_vectors.rs` fails when the committed file
//! differs from what this produces now.

use serde_json::{json, Value};
use time::OffsetDateTime;
use xarchive_seal::certificate::{seal_sheets, Payload};
use xarchive_seal::statement::{sha256, CertificateStatement, CopyStatement, NotProvided};
use xarchive_seal::trust::{anchor_key, fingerprint, format_time, ArchiveEntry, KeyRecord, FORMAT};
use xarchive_seal::{seal, verify_certificate, SecretKey, SignedTrustList, TrustList};

#[allow(dead_code)]
fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "web/test/seal-vectors.json".to_owned());
    let text = generate();
    if let Err(e) = std::fs::write(&path, &text) {
        eprintln!("error: cannot write {path}: {e}");
        std::process::exit(1);
    }
    println!("wrote {path} ({} bytes)", text.len());
}

fn sm2(seed: u8) -> SecretKey {
    SecretKey::sm2_from_scalar(&[seed; 32]).expect("a scalar below the order")
}

fn at(secs: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(secs).expect("a time")
}

fn record(key: &SecretKey) -> KeyRecord {
    KeyRecord::new(&key.public(), at(1_700_000_000))
}

fn entry(domain: &str, name: &str, keys: Vec<KeyRecord>) -> ArchiveEntry {
    ArchiveEntry {
        domain: domain.into(),
        display_name: name.into(),
        address: String::new(),
        url: format!("https://{}.example.cn/", domain.to_lowercase()),
        keys,
    }
}

fn copy(holding: &SecretKey, from: &str, to: &str, n: usize) -> Vec<u8> {
    seal(
        holding,
        CopyStatement {
            holding: from.into(),
            receiving: to.into(),
            request_id: "0123456789abcdef0123456789abcdef".into(),
            archive_number: format!("J201-HY·2007-Y-{n:05}"),
            title: "婚姻登记".into(),
            title_sha256: None,
            record_date: Some("2007-05-01".into()),
            released: 1_800_000_000,
            content_sha256: Some(sha256(format!("scan {n}").as_bytes())),
            metadata_sha256: sha256(b"{}"),
        }
        .encode(),
    )
}

fn head(issuer: &str) -> CertificateStatement {
    CertificateStatement {
        issuer: issuer.into(),
        code: format!("{issuer}.0123-4567-89AB-CDEF-0123"),
        request_id: "0123456789abcdef0123456789abcdef".into(),
        issued: 1_800_000_100,
        applicant_name: "张三".into(),
        applicant_digest: "ab".repeat(16),
        purpose: "贷款".into(),
        searched_by: Some("id_card".into()),
        copies: Vec::new(),
        not_provided: Vec::new(),
        sheet: 1,
        sheets: 1,
    }
}

/// A case: the payload and the verdict of the Rust verifier.
fn case(name: &str, payload: String, trust: &TrustList) -> Value {
    match verify_certificate(&payload, trust) {
        Ok(v) => json!({
            "name": name, "payload": payload, "valid": true,
            "code": v.statement.code, "applicant_name": v.statement.applicant_name,
            "issuer": v.issuer.domain, "copies": v.copies.len(),
        }),
        Err(e) => json!({
            "name": name, "payload": payload, "valid": false,
            "reason": match e.code() {
                "certificate_malformed" => "malformed",
                "certificate_key_unknown" => "unknown_key",
                "certificate_key_not_valid" => "key_not_valid",
                _ if matches!(e, xarchive_seal::Rejected::Mismatch(_)) => "mismatch",
                _ => "changed",
            },
        }),
    }
}

/// The whole vectors file, as text.
pub fn generate() -> String {
    let (a, b, c) = (sm2(1), SecretKey::ed25519_from_seed(&[2; 32]), sm2(3));
    let mut revoked = record(&c);
    revoked.revoked = Some(format_time(1_750_000_000));
    revoked.not_after = revoked.revoked.clone();
    let list = TrustList {
        format: FORMAT.into(),
        cluster: "guizhou".into(),
        issued_at: format_time(1_800_000_200),
        secured: true,
        archives: vec![
            entry("A", "兴义市档案馆", vec![record(&a)]),
            entry("B", "黔西南州档案馆", vec![record(&b)]),
            entry("C", "贵州省档案馆", vec![revoked]),
        ],
    };
    let anchor = anchor_key("guizhou", Some(b"material only members hold"));
    let signed = SignedTrustList::sign(&list, &anchor);

    let sheet = |issuer: &str, key: &SecretKey, copies: Vec<Vec<u8>>| {
        let not_provided = vec![NotProvided {
            holding: Some("B".into()),
            records: vec!["J201-RS·1990-C-00007".into()],
            why: "refused".into(),
            reason: Some("涉及第三人隐私".into()),
        }];
        seal_sheets(&head(issuer), copies, not_provided, key)
            .expect("fits")
            .remove(0)
            .payload
    };
    let valid = sheet("A", &a, vec![copy(&b, "B", "A", 1), copy(&a, "A", "A", 2)]);
    let mut sealed = Payload::parse(&valid).expect("a payload").sealed;
    let name_at = sealed
        .windows("张三".len())
        .position(|w| w == "张三".as_bytes())
        .expect("the name");
    sealed[name_at..name_at + "李四".len()].copy_from_slice("李四".as_bytes());
    let changed = Payload::text(&sealed);
    let stranger = sm2(9);
    let unknown = sheet("A", &stranger, vec![copy(&b, "B", "A", 1)]);
    let by_revoked = sheet("C", &c, Vec::new());
    let stray = sheet("A", &a, vec![copy(&b, "B", "C", 3)]);
    let cut = valid[..valid.len() * 2 / 3].to_owned();

    let message = "兹证明 the copy".as_bytes();
    let signature = a.sign(message);
    let mut flipped = signature.clone();
    flipped[10] ^= 1;
    // The uncompressed point ends an SM2 key's SubjectPublicKeyInfo.
    let point = |k: &SecretKey| {
        let spki = k.public().to_spki_der();
        hex::encode(&spki[spki.len() - 65..])
    };
    let doc = json!({
        "about": "Cross-language vectors for web/seal.js, written by \
                  `cargo run -p xarchive-seal --example seal_vectors -- web/test/seal-vectors.json` \
                  (crates/seal/examples/seal_vectors.rs); do not edit by hand. Bytes are hex.",
        "sm3": [
            {"message": hex::encode(b"abc"), "digest": hex::encode(sm3_digest(b"abc"))},
            {"message": hex::encode(b"abcd".repeat(16)), "digest": hex::encode(sm3_digest(&b"abcd".repeat(16)))},
            {"message": hex::encode("婚姻登记".as_bytes()), "digest": hex::encode(sm3_digest("婚姻登记".as_bytes()))},
        ],
        "sm2": [
            {"point": point(&a), "message": hex::encode(message), "signature": hex::encode(&signature), "valid": true},
            {"point": point(&a), "message": hex::encode(message), "signature": hex::encode(&flipped), "valid": false},
            {"point": point(&c), "message": hex::encode(message), "signature": hex::encode(&signature), "valid": false},
        ],
        "trust_list": signed,
        "anchor": fingerprint(&anchor.public()),
        "certificates": [
            case("valid", valid, &list),
            case("the applicant's name changed", changed, &list),
            case("sealed by a key the list does not hold", unknown, &list),
            case("sealed by a revoked key", by_revoked, &list),
            case("a copy sealed for another certificate", stray, &list),
            case("cut short", cut, &list),
        ],
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("JSON");
    text.push('\n');
    text
}

/// SM3, as the SM2 crate computes it.
pub fn sm3_digest(bytes: &[u8]) -> [u8; 32] {
    use sm3::Digest;
    sm3::Sm3::digest(bytes).into()
}
