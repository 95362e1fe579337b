//! The committed cross-language vectors (`web/test/vectors.json`, checked
//! by the JavaScript reader's tests) must be exactly what the generator
//! (`examples/js_vectors.rs`) writes from this crate now: a change to the
//! hashing or the formats cannot leave the JavaScript side testing against
//! stale bytes.

#[allow(dead_code)]
#[path = "../examples/js_vectors.rs"]
mod generator;

#[test]
fn committed_vectors_match_the_generator() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../web/test/vectors.json");
    let committed = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {path}: {e}; generate it with the command below"));
    let fresh = generator::generate();
    if committed != fresh {
        let line = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || "the lengths differ".to_owned(),
                |i| format!("first difference at line {}", i + 1),
            );
        panic!(
            "web/test/vectors.json is out of date ({line}); regenerate it with\n  \
             cargo run -p xarchive-filter --example js_vectors -- web/test/vectors.json\n\
             and run `node --test web/test/` to check the JavaScript reader against it"
        );
    }
}
