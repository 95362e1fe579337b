//! CSV cells a spreadsheet would run as a formula (CSV injection, in
//! OWASP's list), written so that it shows them as text, and read back as
//! they were: what `export` writes and `import` reads are the same records.
//!
//! The rule is OWASP's: a cell that begins with `=`, `+`, `-`, `@`, a tab
//! or a carriage return gets a leading apostrophe, which Excel, WPS and
//! LibreOffice take as "this is text". Two additions make it exact and a
//! little wider:
//!
//! - a cell that already begins with an apostrophe gets one more, so that
//!   the apostrophe added is always told from one that was there: reading
//!   takes off one leading apostrophe only where writing put one (before
//!   a trigger or another apostrophe), and `restored(neutralised(s)) == s`
//!   for every `s` (the property test below);
//! - the full-width forms `＝ ＋ － ＠` that Chinese input methods type:
//!   whether a spreadsheet runs them depends on the program and its
//!   version, which cannot all be checked, and guarding them costs one
//!   character that import takes off again.
//!
//! A file that did not come from `export` and holds `'=…` is read as
//! `=…`: the leading apostrophe is a spreadsheet's text marker there too,
//! never the text itself (a spreadsheet saving `'=1+1` typed in a cell
//! writes `=1+1`).

use std::borrow::Cow;

/// The first characters that make a spreadsheet read a cell as a formula.
const TRIGGERS: [char; 10] = [
    '=', '+', '-', '@', '\t', '\r', '\u{FF1D}', '\u{FF0B}', '\u{FF0D}', '\u{FF20}',
];

/// The text marker a spreadsheet does not show.
const MARKER: char = '\'';

/// Whether a cell beginning with `rest` needs the marker.
fn guarded(rest: &str) -> bool {
    rest.starts_with(TRIGGERS) || rest.starts_with(MARKER)
}

/// `cell` as a CSV export writes it: a spreadsheet shows it as text.
pub fn neutralised(cell: &str) -> Cow<'_, str> {
    if guarded(cell) {
        Cow::Owned(format!("{MARKER}{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// `cell` as it was before [`neutralised`]: one marker taken off where
/// writing put one.
pub fn restored(cell: &str) -> &str {
    match cell.strip_prefix(MARKER) {
        Some(rest) if guarded(rest) => rest,
        _ => cell,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cells_a_spreadsheet_would_run_are_written_as_text() {
        for (cell, written) in [
            ("=1+1", "'=1+1"),
            ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
            ("+1+1", "'+1+1"),
            ("-2", "'-2"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            (
                "=HYPERLINK(\"http://x\",\"点此\")",
                "'=HYPERLINK(\"http://x\",\"点此\")",
            ),
            ("＝1+1", "'＝1+1"),
            ("'quoted'", "''quoted'"),
            ("关于档案工作的通知", "关于档案工作的通知"),
            (" =1", " =1"),
            ("", ""),
        ] {
            assert_eq!(neutralised(cell), written, "{cell:?}");
            assert_eq!(restored(written), cell, "{written:?}");
        }
    }

    #[test]
    fn an_apostrophe_before_ordinary_text_is_the_text_itself() {
        assert_eq!(restored("'quoted'"), "'quoted'");
        assert_eq!(restored("'"), "'");
        assert_eq!(restored("'=x"), "=x");
    }

    proptest! {
        /// Exact both ways, and nothing written starts as a formula.
        #[test]
        fn what_is_neutralised_is_restored_exactly(
            head in prop::sample::select(vec!["", "=", "+", "-", "@", "\t", "\r", "'", "''", "＝", "＠", "－", "＋", " "]),
            rest in "\\PC{0,12}",
        ) {
            let cell = format!("{head}{rest}");
            let written = neutralised(&cell);
            prop_assert!(!written.starts_with(TRIGGERS));
            prop_assert_eq!(restored(&written), cell.as_str());
        }
    }
}
