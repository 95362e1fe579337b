//! The IDs the vectors are made of: sample archive numbers, IDs of every
//! shape the hash must agree on, and IDs that were never inserted.

/// Archive numbers as the sample records make them (crates/node/src/sample.rs).
pub(super) fn sample_id(domain: u64, i: u64) -> String {
    let category = ["WS", "KJ", "CW", "RS"][(i % 4) as usize];
    let retention = ["Y", "D30", "D10"][(i % 3) as usize];
    let fonds = domain * 100 + (i / 2000) % 100 + 1;
    let year = 2000 + (i / 4) % 25;
    format!("J{fonds:03}-{category}·{year}-{retention}-{i:05}")
}

/// IDs of every shape the hash must agree on: ASCII, CJK, emoji, combining
/// marks, and lengths on both sides of each 8- and 16-byte boundary.
pub(super) fn tricky_ids() -> Vec<String> {
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

pub(super) fn absent_ids(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match i % 4 {
            0 => format!("NOT-HERE-{i:05}"),
            1 => format!("档案/1999/{i:04}"),
            2 => format!("🚫-{i}"),
            _ => sample_id(7, i as u64),
        })
        .collect()
}
