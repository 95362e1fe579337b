//! The committed cross-language vectors (`web/test/seal-vectors.json`,
//! checked by the page's verifier's tests) must be exactly what the
//! generator (`examples/seal_vectors.rs`) writes from this crate now: a change
//! to a statement's form or a seal cannot leave the JavaScript side testing
//! against stale bytes.

#[allow(dead_code)]
#[path = "../examples/seal_vectors.rs"]
mod generator;

#[test]
fn committed_vectors_match_the_generator() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../web/test/seal-vectors.json"
    );
    let committed = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {path}: {e}; generate it with the command below"));
    assert!(
        committed == generator::generate(),
        "web/test/seal-vectors.json is out of date; regenerate it with\n  \
         cargo run -p xarchive-seal --example seal_vectors -- web/test/seal-vectors.json\n\
         and run `node --test web/test/` to check the page's verifier against it"
    );
}

#[test]
fn the_sm3_the_vectors_are_made_with_gives_the_standard_s_examples() {
    // GB/T 32905-2016, Appendix A.
    assert_eq!(
        hex::encode(generator::sm3_digest(b"abc")),
        "66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0"
    );
    assert_eq!(
        hex::encode(generator::sm3_digest(&b"abcd".repeat(16))),
        "debe9ff92275b8a138604889c18e5a4d6fdb70e5387e5765293dcba39c0c5732"
    );
}
