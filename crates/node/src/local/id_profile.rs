//! The cluster's ID profile: how an archive number a person typed is read
//! before a lookup, so that " J201-CW.2010-Y-00042" (a leading space, an
//! ASCII dot for "·", full-width digits) finds J201-CW·2010-Y-00042 at
//! every domain, in the CLI and in the page alike (web/util.js holds the
//! same rules; web/test/id-profile-vectors.json is read by both tests).
//!
//! Stored IDs are never rewritten: a lookup tries the normalised form,
//! then the form as typed, so an ID stored with an ASCII dot before the
//! profile existed is still found by typing it as it was stored; and
//! "did you mean" compares normalised forms, so typing it with a "·"
//! suggests it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization;

/// The look-alikes of "·" (U+00B7, DA/T 22's separator of 门类 and 年度)
/// that people type for it: the ASCII full stop, the katakana middle dot
/// and its half-width form, the bullet, the hyphenation point, the
/// bullet operator, the dot operator, and "·" itself. (NFKC has already
/// made the Greek ano teleia "·", and the full-width and small full stops
/// ".".)
pub const LOOKALIKES: [char; 8] = [
    '.', '\u{00B7}', '\u{30FB}', '\u{FF65}', '\u{2022}', '\u{2027}', '\u{2219}', '\u{22C5}',
];

/// `[ids]` in the configuration, the same at every domain of a cluster
/// (it is part of the fingerprint a domain must share to join).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct IdProfile {
    /// What the look-alikes of "·" become: one character, or empty to
    /// leave them as typed (what is typed is still trimmed and
    /// NFKC-normalised).
    pub separator: String,
}

impl Default for IdProfile {
    fn default() -> Self {
        IdProfile {
            separator: "\u{00B7}".into(),
        }
    }
}

/// A separator that cannot be one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ids.separator {0:?} must be empty or one visible character that NFKC leaves as it is (such as \"·\")"
)]
pub struct BadSeparator(pub String);

/// Whitespace a pasted number carries at either end: Unicode's
/// `White_Space` and the byte-order mark (what JavaScript's `\s` and
/// U+0085 cover, so the page trims the same).
fn blank(c: char) -> bool {
    c.is_whitespace() || c == '\u{FEFF}'
}

impl IdProfile {
    /// Checks the separator.
    pub fn check(&self) -> Result<(), BadSeparator> {
        let mut chars = self.separator.chars();
        let ok = match (chars.next(), chars.next()) {
            (None, _) => true,
            (Some(c), None) => {
                !blank(c)
                    && !c.is_control()
                    && self.separator.nfkc().collect::<String>() == self.separator
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(BadSeparator(self.separator.clone()))
        }
    }

    /// What `typed` reads as: NFKC, the look-alikes of "·" made the
    /// separator, whitespace at either end taken off; done twice, so that
    /// reading a normalised form again leaves it as it is.
    pub fn normalise(&self, typed: &str) -> String {
        let once = self.step(typed);
        self.step(&once)
    }

    fn step(&self, text: &str) -> String {
        let separator = self.separator.chars().next();
        let mapped: String = text
            .nfkc()
            .map(|c| match separator {
                Some(s) if LOOKALIKES.contains(&c) => s,
                _ => c,
            })
            .collect();
        mapped.trim_matches(blank).to_owned()
    }

    /// The forms a lookup tries, in order: the normalised one, then the
    /// one typed if it differs (an ID stored before the profile).
    pub fn forms(&self, typed: &str) -> Vec<String> {
        let normalised = self.normalise(typed);
        if normalised == typed {
            vec![normalised]
        } else {
            vec![normalised, typed.to_owned()]
        }
    }

    /// A short digest of the profile, for the fingerprint domains compare.
    pub fn fingerprint(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(b"xarchive id profile v1\n");
        hasher.update(self.separator.as_bytes());
        let mut hex = hex::encode(hasher.finalize());
        hex.truncate(16);
        hex
    }
}

/// What domains compare before one joins a cluster: the key types'
/// fingerprint, with the ID profile's folded in unless it is the default
/// (so that domains of releases before the profile, which declare none
/// and read IDs as the default does but for the normalising, still agree).
pub fn cluster_fingerprint(key_types: &str, profile: &IdProfile) -> String {
    if *profile == IdProfile::default() || key_types.is_empty() {
        return key_types.to_owned();
    }
    let mut hasher = Sha256::new();
    hasher.update(key_types.as_bytes());
    hasher.update(b"\n");
    hasher.update(profile.fingerprint().as_bytes());
    let mut hex = hex::encode(hasher.finalize());
    hex.truncate(16);
    hex
}

/// IDs read for one "did you mean": a few hundred from each of a few
/// starting points, a few thousand at most, so that a lookup that finds
/// nothing stays cheap whatever the store holds.
pub const PER_PROBE: usize = 256;
pub const MAX_PROBES: usize = 6;
/// The characters every suggestion shares with what was typed, at its
/// start: the range of the store's ID table that is read.
pub const PREFIX_CHARS: usize = 2;
/// Suggestions given at most.
pub const MAX_SUGGESTIONS: usize = 5;

/// Where in the ID table (in order) to read for IDs near `query` (a
/// normalised form): the query itself (and the IDs just before it), then
/// the query cut at each of its separators, longest first, so that a slip
/// in a later part is found among the IDs that share the parts before it.
/// All of them start with the query's first [`PREFIX_CHARS`] characters,
/// returned as the bound of the range.
pub fn probes(query: &str) -> (String, Vec<String>) {
    let prefix: String = query.chars().take(PREFIX_CHARS).collect();
    let mut probes = vec![query.to_owned()];
    let cuts = query
        .char_indices()
        .filter(|(_, c)| !c.is_alphanumeric())
        .map(|(at, _)| at)
        .filter(|at| *at >= prefix.len())
        .rev();
    for at in cuts {
        if probes.len() >= MAX_PROBES {
            break;
        }
        probes.push(query[..at].to_owned());
    }
    (prefix, probes)
}

/// The most edits a suggestion may be from what was typed: one for a
/// short number, up to three for a long one.
fn max_distance(chars: usize) -> usize {
    (chars / 6).clamp(1, 3)
}

/// Of `candidates` (stored IDs), those nearest to `query` (normalised)
/// once read by `profile`, nearest first, at most [`MAX_SUGGESTIONS`].
/// An ID whose normalised form is the query itself (stored before the
/// profile, with a look-alike) comes first.
pub fn nearest(profile: &IdProfile, query: &str, candidates: &[String]) -> Vec<String> {
    let wanted: Vec<char> = query.chars().collect();
    let limit = max_distance(wanted.len());
    let mut scored: Vec<(usize, &String)> = candidates
        .iter()
        .filter_map(|id| {
            let read: Vec<char> = profile.normalise(id).chars().collect();
            if read.len().abs_diff(wanted.len()) > limit {
                return None;
            }
            let distance = strsim::generic_levenshtein(&read, &wanted);
            (distance <= limit && id != query).then_some((distance, id))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, id)| id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Read by both this test and web/test/util.test.mjs: the page and
    /// the domains read every typed form alike.
    const VECTORS: &str = include_str!("../../../../web/test/id-profile-vectors.json");

    #[derive(Deserialize)]
    struct Vector {
        typed: String,
        normalised: String,
    }

    #[test]
    fn every_shared_vector_reads_as_the_page_reads_it() {
        let vectors: Vec<Vector> = serde_json::from_str(VECTORS).unwrap();
        assert!(vectors.len() >= 10);
        let profile = IdProfile::default();
        for v in vectors {
            assert_eq!(profile.normalise(&v.typed), v.normalised, "{:?}", v.typed);
        }
    }

    #[test]
    fn a_lookup_tries_the_normalised_form_then_the_typed_one() {
        let profile = IdProfile::default();
        assert_eq!(
            profile.forms(" J201-CW.2010-Y-00042"),
            ["J201-CW·2010-Y-00042", " J201-CW.2010-Y-00042"]
        );
        assert_eq!(
            profile.forms("J201-CW·2010-Y-00042"),
            ["J201-CW·2010-Y-00042"]
        );
        let plain = IdProfile {
            separator: String::new(),
        };
        assert_eq!(plain.forms("J201-CW.2010"), ["J201-CW.2010"]);
        assert_eq!(plain.normalise("　Ｊ２０１ "), "J201");
    }

    #[test]
    fn a_separator_must_be_one_visible_character_nfkc_leaves_alone() {
        for good in ["", "·", "-", "/"] {
            assert!(IdProfile {
                separator: good.into()
            }
            .check()
            .is_ok());
        }
        for bad in [" ", "··", "\u{0387}", "Ｊ", "\n"] {
            assert!(IdProfile {
                separator: bad.into()
            }
            .check()
            .is_err());
        }
    }

    #[test]
    fn the_default_profile_leaves_the_fingerprint_as_the_key_types_make_it() {
        assert_eq!(cluster_fingerprint("abc", &IdProfile::default()), "abc");
        let other = IdProfile {
            separator: "-".into(),
        };
        let folded = cluster_fingerprint("abc", &other);
        assert_eq!(folded.len(), 16);
        assert_ne!(folded, "abc");
        assert_ne!(folded, cluster_fingerprint("abd", &other));
    }

    #[test]
    fn suggestions_are_the_nearest_stored_ids_and_never_the_query_itself() {
        let profile = IdProfile::default();
        let stored: Vec<String> = [
            "J201-CW·2010-Y-00042",
            "J201-CW·2010-Y-00043",
            "J201-CW·2011-Y-00042",
            "J201-CW.2010-Y-00044",
            "J999-XX·1999-D10-00001",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            nearest(&profile, "J201-CW·2010-Y-00045", &stored),
            [
                "J201-CW.2010-Y-00044",
                "J201-CW·2010-Y-00042",
                "J201-CW·2010-Y-00043",
                "J201-CW·2011-Y-00042"
            ]
        );
        // Stored with an ASCII dot before the profile: typed with "·", it
        // is the first suggestion (its normalised form is the query).
        assert_eq!(
            nearest(&profile, "J201-CW·2010-Y-00044", &stored)[0],
            "J201-CW.2010-Y-00044"
        );
        assert!(nearest(&profile, "完全不同", &stored).is_empty());
        let (prefix, probes) = probes("J201-CW·2010-Y-00045");
        assert_eq!(prefix, "J2");
        assert_eq!(
            probes,
            [
                "J201-CW·2010-Y-00045",
                "J201-CW·2010-Y",
                "J201-CW·2010",
                "J201-CW",
                "J201"
            ]
        );
    }

    /// The spellings of one archive number people type: its parts joined
    /// by "-" and, between 门类 and 年度, any look-alike of "·"; digits
    /// and letters in their full-width forms or not; spaces (ordinary,
    /// ideographic, no-break) and a byte-order mark around it.
    fn spelling() -> impl Strategy<Value = (String, String)> {
        let part = "[A-Z][0-9]{3}";
        (
            part,
            "[A-Z]{2}",
            1950u32..2030,
            prop::sample::select(vec!["Y", "D30", "D10"]),
            0u32..100_000,
        )
            .prop_flat_map(|(fonds, category, year, term, item)| {
                let canonical = format!("{fonds}-{category}·{year}-{term}-{item:05}");
                (
                    Just(canonical),
                    prop::sample::select(LOOKALIKES.to_vec()),
                    prop::bool::ANY,
                    prop::sample::select(vec!["", " ", "\u{3000}", "\u{00A0}", "\u{FEFF}", "\t"]),
                    prop::sample::select(vec!["", " ", "\u{3000}", "\n"]),
                )
            })
            .prop_map(|(canonical, dot, wide, before, after)| {
                let mut typed = canonical.replace('·', &dot.to_string());
                if wide {
                    typed = typed
                        .chars()
                        .map(|c| match c {
                            '0'..='9' | 'A'..='Z' | '-' => {
                                char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c)
                            }
                            _ => c,
                        })
                        .collect();
                }
                (canonical, format!("{before}{typed}{after}"))
            })
    }

    proptest! {
        #[test]
        fn every_accepted_spelling_of_an_archive_number_reads_as_one_form(
            (canonical, typed) in spelling()
        ) {
            let profile = IdProfile::default();
            prop_assert_eq!(profile.normalise(&typed), canonical);
        }

        #[test]
        fn reading_a_normalised_form_again_leaves_it_as_it_is(typed in "\\PC{0,40}") {
            let profile = IdProfile::default();
            let once = profile.normalise(&typed);
            prop_assert_eq!(profile.normalise(&once), once);
        }
    }
}
