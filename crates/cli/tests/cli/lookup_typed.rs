//! `xarchive lookup` with archive numbers as people type them, against a
//! real domain: an ASCII dot and spaces find the record, and a number
//! held nowhere names the nearest ones this domain holds.

use crate::common::{bin, text, xarchive};

use xarchive_node::wire::LookupBody;
use xarchive_testkit::{tempdir, Spawn};

#[test]
fn a_number_typed_with_a_dot_and_spaces_is_found_and_a_slip_is_answered_with_the_nearest_numbers() {
    let dir = tempdir().unwrap();
    let a = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    for id in ["J201-CW·2010-Y-00042", "J201-CW·2010-Y-00050"] {
        let out = xarchive(&["put", id, "--title", "会议纪要"], &a.url);
        assert!(out.status.success(), "{}", text(&out));
    }

    let out = xarchive(&["lookup", " J201-CW.2010-Y-00042 ", "--json"], &a.url);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let answer: LookupBody = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer.record.map(|r| r.id.into_string()).as_deref(),
        Some("J201-CW·2010-Y-00042")
    );

    let out = xarchive(&["lookup", "J201-CW.2010-Y-00043"], &a.url);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("did you mean: J201-CW·2010-Y-00042, J201-CW·2010-Y-00050"),
        "{}",
        text(&out)
    );
    let out = xarchive(&["lookup", "J201-CW·2010-Y-00043", "--json"], &a.url);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let answer: LookupBody = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer.suggestions,
        ["J201-CW·2010-Y-00042", "J201-CW·2010-Y-00050"]
    );
}
