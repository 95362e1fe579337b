//! The positions kept apart from the domains' descriptions: what a "not
//! found" reads from ZooKeeper grows with what changed, not with the
//! number of domains (docs/SCALING.md, "What a not found reads").
//!
//! ```text
//! /xarchive/<c>/ledger/<group>            a folder: every change of the group creates and
//!                                         deletes its child `tick` in the same transaction,
//!                                         so the folder's stat (read without any positions)
//!                                         says whether the group changed since a read
//! /xarchive/<c>/ledger/<group>/positions  {"<name>": "<epoch>.<version>.<described>[.<seal>]"}
//! /xarchive/<c>/members/<name>            the domain's description, sealed: address, filter
//!                                         kind, key types, departed, retired
//! ```
//!
//! A line is about 50 bytes sealed (35 without a cluster secret), a
//! whole entry of the other layout about 250 (150): a changed group
//! costs a reader a fifth of the bytes, and an unchanged one nothing but
//! its folder's stat. A line names the version of the description it
//! goes with (`described`), so a description is read again only when it
//! changed (a registration, a departure, a retirement).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{LedgerError, MAX_GROUP_BYTES};
use crate::cluster::coordinator::{Known, Member};
use crate::local::domain::Position;
use crate::local::filter::FilterKind;

/// A group's positions znode: each domain's line as its writer wrote it
/// (sealed), by name.
pub type Lines = BTreeMap<String, String>;

/// One domain's line: its last published position, and the version of
/// its description znode written with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line {
    pub position: Position,
    pub described: i32,
}

impl Line {
    /// The line as written, before its seal: what the seal covers.
    pub fn text(&self) -> String {
        format!(
            "{:x}.{:x}.{}",
            self.position.epoch, self.position.version, self.described
        )
    }

    /// The line `text` holds, and its seal (empty without one); None if
    /// it is not a line.
    pub fn parse(text: &str) -> Option<(Line, &str)> {
        let mut parts = text.splitn(4, '.');
        let epoch = u64::from_str_radix(parts.next()?, 16).ok()?;
        let version = u64::from_str_radix(parts.next()?, 16).ok()?;
        let described = parts.next()?.parse::<i32>().ok()?;
        let seal = parts.next().unwrap_or("");
        let line = Line {
            position: Position { epoch, version },
            described,
        };
        // Only the form `sealed` writes: one way to write each line.
        (line.sealed((!seal.is_empty()).then_some(seal)) == text).then_some((line, seal))
    }

    /// The line with its seal, as written in the znode.
    pub fn sealed(&self, seal: Option<&str>) -> String {
        match seal {
            Some(seal) => format!("{}.{seal}", self.text()),
            None => self.text(),
        }
    }
}

/// What a domain says of itself beside its position, in its own znode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Described {
    pub address: String,
    pub kind: FilterKind,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub keys: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signing_key: String,
    pub departed: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
}

impl Described {
    /// What `known` says of its domain, but its position.
    pub fn of(known: &Known) -> Described {
        let m = &known.member;
        Described {
            address: m.address.clone(),
            kind: m.kind,
            keys: m.keys.clone(),
            signing_key: m.signing_key.clone(),
            departed: known.departed,
            retired: known.retired,
        }
    }

    /// The domain known at `position`.
    pub fn at(&self, position: Position) -> Known {
        Known {
            member: Member {
                address: self.address.clone(),
                kind: self.kind,
                epoch: position.epoch,
                version: position.version,
                keys: self.keys.clone(),
                signing_key: self.signing_key.clone(),
            },
            departed: self.departed,
            retired: self.retired,
        }
    }
}

/// The lines of a positions znode's bytes; unreadable bytes are no lines
/// (logged): their domains count as unknown, asked and never ruled out.
pub fn decode(group: &str, data: &[u8]) -> Lines {
    super::decode_as(group, data)
}

/// The bytes of `lines`, refused when over [`MAX_GROUP_BYTES`].
pub fn encode(group: &str, lines: &Lines) -> Result<Vec<u8>, LedgerError> {
    let bytes = serde_json::to_vec(lines).map_err(LedgerError::Unencodable)?;
    if bytes.len() > MAX_GROUP_BYTES {
        return Err(LedgerError::GroupTooLarge {
            group: group.to_owned(),
            bytes: bytes.len(),
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(epoch: u64, version: u64, described: i32) -> Line {
        Line {
            position: Position { epoch, version },
            described,
        }
    }

    #[test]
    fn a_line_reads_back_with_its_seal_and_nothing_else_reads_as_one() {
        let l = line(15506711840260162855, 1234, 3);
        assert_eq!(l.text(), "d732e842b90d0527.4d2.3");
        let sealed = l.sealed(Some("00ff"));
        assert_eq!(Line::parse(&sealed), Some((l, "00ff")));
        assert_eq!(Line::parse(&l.sealed(None)), Some((l, "")));
        for bad in [
            "",
            "d7.4d2",
            "x.4d2.3",
            "d7.4d2.three",
            "d7.4d2.3.",
            "D7.4d2.3",
            "07.4d2.3",
        ] {
            assert_eq!(Line::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_description_at_a_position_is_the_domain_known_there() {
        let known = Described {
            address: "http://a".into(),
            kind: FilterKind::Counting,
            keys: "f1".into(),
            signing_key: String::new(),
            departed: true,
            retired: false,
        }
        .at(Position {
            epoch: 7,
            version: 9,
        });
        assert_eq!(
            known.member.position(),
            Position {
                epoch: 7,
                version: 9
            }
        );
        assert!(known.departed);
        assert_eq!(Described::of(&known).address, "http://a");
    }

    #[test]
    fn a_group_s_lines_are_under_a_quarter_of_its_whole_entries() {
        let (mut lines, mut whole) = (Lines::new(), super::super::Entries::new());
        for i in 0..100 {
            let name = format!("110{i:03}");
            let l = line(u64::MAX - i, 1 << 20, 2);
            lines.insert(name.clone(), l.sealed(Some(&"Ab_9".repeat(4))));
            // A whole entry as a domain seals it: its description, its
            // position and a seal of 64 hex digits.
            let known = Described {
                address: format!("http://10.110.{i}.1:7700"),
                kind: FilterKind::Counting,
                keys: "0123456789abcdef".into(),
                signing_key: String::new(),
                departed: false,
                retired: false,
            }
            .at(l.position);
            let mut entry = serde_json::to_value(&known).unwrap();
            entry["proof"] = "ab".repeat(32).into();
            whole.insert(name, entry);
        }
        let bytes = encode("11", &lines).unwrap();
        assert_eq!(decode("11", &bytes), lines);
        let whole = super::super::encode("11", &whole).unwrap();
        assert!(
            bytes.len() * 4 < whole.len(),
            "lines {} bytes, whole entries {}",
            bytes.len(),
            whole.len()
        );
    }

    proptest::proptest! {
        #[test]
        fn any_line_reads_back_as_written(
            epoch: u64, version: u64, described in 0i32..i32::MAX, seal in "[0-9A-Za-z_-]{0,16}",
        ) {
            let l = line(epoch, version, described);
            let seal = (!seal.is_empty()).then_some(seal.as_str());
            let written = l.sealed(seal);
            proptest::prop_assert_eq!(Line::parse(&written), Some((l, seal.unwrap_or(""))));
        }

        #[test]
        fn any_text_reads_as_a_line_or_none_without_panic(text in "\\PC{0,64}") {
            let _ = Line::parse(&text);
        }
    }
}
