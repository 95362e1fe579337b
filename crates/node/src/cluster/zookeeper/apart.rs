//! The positions kept apart from the descriptions (`ledger/lines.rs`), as
//! a reader holds them between reads: each group's lines with the stamp
//! of its folder when they were read, and each domain's description with
//! its znode's version. A read asks ZooKeeper for the folders' stamps (no
//! positions), reads again only the groups whose stamp moved, and only
//! the descriptions newer than those held: what it costs grows with what
//! changed since the last read, not with the number of domains.
//!
//! Why a group whose stamp did not move is taken as held: every change of
//! a group's positions is made in a transaction that also creates and
//! deletes the folder's child `tick` (`lines_ops`), which moves the
//! folder's `pzxid` to that transaction's zxid; zxids only grow, so the
//! same stamp read after the `sync` that began this read means no change
//! since the lines held were read. Lines held are replaced only by lines
//! read at a later stamp, and each read composes its roster from the
//! groups as it found them (held or read again), never from what another
//! read left meanwhile. The stamp also holds the folder's creation (zxid
//! and time), and everything held is forgotten at each new session: a
//! ZooKeeper ensemble made anew counts zxids from zero again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;
use zookeeper_client as zk;

use crate::cluster::coordinator::{Known, Roster};
use crate::cluster::ledger::lines::{self, Described, Line, Lines};
use crate::local::domain_name::DomainName;

/// When a group folder last changed, as its stat says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    czxid: i64,
    ctime: i64,
    pzxid: i64,
}

impl Stamp {
    pub fn of(stat: &zk::Stat) -> Stamp {
        Stamp {
            czxid: stat.czxid,
            ctime: stat.ctime,
            pzxid: stat.pzxid,
        }
    }

    /// Whether lines read at `self` may replace lines read at `held`.
    fn later_than(&self, held: &Stamp) -> bool {
        (self.czxid, self.ctime) != (held.czxid, held.ctime) || self.pzxid >= held.pzxid
    }
}

/// One group's lines as read at a stamp, each admitted or not.
pub(super) struct Group {
    pub name: String,
    stamp: Stamp,
    /// Each line as written, and what it was admitted as (None: refused).
    lines: BTreeMap<String, (String, Option<Line>)>,
}

impl Group {
    /// The domains this group holds a line for, admitted or not.
    pub fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.lines.keys().cloned()
    }
}

/// One domain's description as read: its znode's version, and what it
/// was admitted as (None: missing, unreadable or refused).
struct Description {
    version: i32,
    described: Option<Described>,
}

#[derive(Default)]
pub(super) struct Apart(Mutex<State>);

/// What a roster was composed of: each group's stamp, and the version of
/// the description taken for each line, in order.
type Inputs = (Vec<(String, Stamp)>, Vec<Option<i32>>);

#[derive(Default)]
struct State {
    groups: HashMap<String, Arc<Group>>,
    described: HashMap<String, Arc<Description>>,
    /// The last roster composed, and what it was composed of.
    composed: Option<(Inputs, Arc<Roster>)>,
}

/// What one read found held and what it must read again.
pub(super) struct Plan {
    /// Groups whose stamp did not move: taken as held.
    pub held: Vec<Arc<Group>>,
    /// Groups to read again (new, or their stamp moved).
    pub reread: Vec<String>,
}

impl Apart {
    /// Everything held is forgotten (a new session: perhaps a new ensemble).
    pub fn forget(&self) {
        *self.0.lock() = State::default();
    }

    /// The groups held, whose folders' stamps a read asks for first.
    pub fn groups_held(&self) -> Vec<String> {
        let mut names: Vec<String> = self.0.lock().groups.keys().cloned().collect();
        names.sort();
        names
    }

    /// Of the groups `listed` now, with the stamps read now (after the
    /// read's `sync`), those held at the same stamp and those to read.
    pub fn plan(&self, listed: &[String], stamps: &HashMap<String, Stamp>) -> Plan {
        let state = self.0.lock();
        let mut plan = Plan {
            held: Vec::new(),
            reread: Vec::new(),
        };
        for group in listed {
            match (state.groups.get(group), stamps.get(group)) {
                (Some(held), Some(stamp)) if held.stamp == *stamp => plan.held.push(held.clone()),
                _ => plan.reread.push(group.clone()),
            }
        }
        plan
    }

    /// Takes in a group read at `stamp` with its positions' bytes `data`,
    /// each line admitted by `admit(name, line text, seal)` unless held
    /// with the same text.
    pub fn take_group(
        &self,
        group: &str,
        stamp: Stamp,
        data: &[u8],
        admit: impl Fn(&str, &str, &str) -> bool,
    ) -> Arc<Group> {
        let read: Lines = lines::decode(group, data);
        let held = self.0.lock().groups.get(group).cloned();
        let lines = read
            .into_iter()
            .map(|(name, text)| {
                let admitted = match held.as_ref().and_then(|h| h.lines.get(&name)) {
                    Some((same, admitted)) if *same == text => *admitted,
                    _ => Line::parse(&text)
                        .filter(|(line, seal)| admit(&name, &line.text(), seal))
                        .map(|(line, _)| line),
                };
                if admitted.is_none() {
                    tracing::warn!(group, domain = %name, "ignoring its line in the positions ledger: unreadable, or not sealed with the cluster secret");
                }
                (name, (text, admitted))
            })
            .collect();
        let fresh = Arc::new(Group {
            name: group.to_owned(),
            stamp,
            lines,
        });
        let mut state = self.0.lock();
        let later = state
            .groups
            .get(group)
            .is_none_or(|held| stamp.later_than(&held.stamp));
        if later {
            state.groups.insert(group.to_owned(), fresh.clone());
        }
        fresh
    }

    /// Forgets the groups not `listed` (their folders are gone).
    pub fn keep_only(&self, listed: &[String]) {
        self.0
            .lock()
            .groups
            .retain(|group, _| listed.iter().any(|g| g == group));
    }

    /// The domains of `groups` whose line names a description newer than
    /// the one held (or none is held): to read.
    pub fn to_describe(&self, groups: &[Arc<Group>]) -> Vec<String> {
        let state = self.0.lock();
        let mut names: BTreeSet<String> = BTreeSet::new();
        for group in groups {
            for (name, (_, line)) in &group.lines {
                let Some(line) = line else { continue };
                if state
                    .described
                    .get(name)
                    .is_none_or(|d| d.version < line.described)
                {
                    names.insert(name.clone());
                }
            }
        }
        names.into_iter().collect()
    }

    /// Takes in `name`'s description as read: its version and admitted
    /// form, or None when its znode is missing.
    pub fn take_description(&self, name: &str, read: Option<(i32, Option<Described>)>) {
        let (version, described) = read.unwrap_or((-1, None));
        let mut state = self.0.lock();
        let later = state
            .described
            .get(name)
            .is_none_or(|held| version >= held.version);
        if later {
            let description = Arc::new(Description { version, described });
            state.described.insert(name.to_owned(), description);
        }
    }

    /// The roster of `groups` (as this read found them) with the
    /// descriptions held: a domain whose description is missing or older
    /// than its line says is left out (unknown: asked, never ruled out),
    /// and so is one with a line in two groups (it moved; which is its
    /// last is not known here). The same `Arc` as the last roster when
    /// composed of the same lines and descriptions.
    pub fn roster(&self, groups: &[Arc<Group>]) -> Arc<Roster> {
        let mut state = self.0.lock();
        let mut known: BTreeMap<DomainName, Known> = BTreeMap::new();
        let mut twice: BTreeSet<DomainName> = BTreeSet::new();
        let mut inputs: Inputs = (Vec::new(), Vec::new());
        let mut sorted: Vec<&Arc<Group>> = groups.iter().collect();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        for group in sorted {
            inputs.0.push((group.name.clone(), group.stamp));
            for (name, (_, line)) in &group.lines {
                // A line under a name no domain could have is left out,
                // as an unadmitted one is.
                let (Some(line), Ok(name)) = (line, DomainName::parse(name)) else {
                    continue;
                };
                let description = state.described.get(name.as_str());
                inputs.1.push(description.map(|d| d.version));
                let Some(described) = description
                    .filter(|d| d.version >= line.described)
                    .and_then(|d| d.described.as_ref())
                else {
                    continue;
                };
                if known
                    .insert(name.clone(), described.at(line.position))
                    .is_some()
                {
                    twice.insert(name);
                }
            }
        }
        for name in &twice {
            known.remove(name);
        }
        if let Some((last, roster)) = &state.composed {
            if *last == inputs {
                return roster.clone();
            }
        }
        let roster = Arc::new(Roster { known });
        state.composed = Some((inputs, roster.clone()));
        roster
    }
}

/// The roster of both layouts: a domain with an entry in the whole-entry
/// layout (`whole_names`, admitted or not) is known by that alone, for
/// domains of earlier releases write only that one and this release,
/// where it writes whole entries, writes both in one transaction, and
/// where it does not, has taken its own out before it acknowledges a
/// write (`ZooKeeperCoordinator::leave_the_whole_layout`); any other
/// domain by its line.
pub(super) fn merged(whole: &Roster, whole_names: &BTreeSet<String>, apart: &Roster) -> Roster {
    let mut known = whole.known.clone();
    for (name, k) in &apart.known {
        if !whole_names.contains(name.as_str()) {
            known.insert(name.clone(), k.clone());
        }
    }
    Roster { known }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::coordinator::Member;
    use crate::local::domain::Position;
    use crate::local::filter::FilterKind;

    fn stamp(pzxid: i64) -> Stamp {
        Stamp {
            czxid: 1,
            ctime: 1000,
            pzxid,
        }
    }

    fn described(address: &str) -> Described {
        Described {
            address: address.into(),
            kind: FilterKind::Counting,
            keys: String::new(),
            signing_key: String::new(),
            departed: false,
            retired: false,
        }
    }

    fn positions(lines: &[(&str, u64, i32)]) -> Vec<u8> {
        let lines: Lines = lines
            .iter()
            .map(|&(name, version, d)| {
                let line = Line {
                    position: Position { epoch: 7, version },
                    described: d,
                };
                (name.to_owned(), line.sealed(None))
            })
            .collect();
        lines::encode("g", &lines).unwrap()
    }

    fn anything(_: &str, _: &str, _: &str) -> bool {
        true
    }

    #[test]
    fn a_group_is_read_again_only_when_its_stamp_moved() {
        let apart = Apart::default();
        let listed = vec!["g".to_owned(), "h".to_owned()];
        let first = apart.plan(&listed, &HashMap::new());
        assert_eq!(first.reread, listed, "nothing held yet");
        apart.take_group("g", stamp(5), &positions(&[("a", 1, 0)]), anything);
        apart.take_group("h", stamp(6), &positions(&[("b", 1, 0)]), anything);
        let stamps: HashMap<String, Stamp> =
            [("g".into(), stamp(5)), ("h".into(), stamp(9))].into();
        let plan = apart.plan(&listed, &stamps);
        assert_eq!(plan.reread, ["h"]);
        assert_eq!(plan.held.len(), 1);
        assert_eq!(plan.held[0].name, "g");
    }

    #[test]
    fn lines_read_at_an_earlier_stamp_never_replace_later_ones() {
        let apart = Apart::default();
        apart.take_group("g", stamp(9), &positions(&[("a", 9, 0)]), anything);
        let late = apart.take_group("g", stamp(5), &positions(&[("a", 5, 0)]), anything);
        assert_eq!(
            late.lines["a"].1.unwrap().position.version,
            5,
            "this read's own"
        );
        let plan = apart.plan(&["g".to_owned()], &[("g".into(), stamp(9))].into());
        assert_eq!(plan.held[0].lines["a"].1.unwrap().position.version, 9);
        // A folder made anew counts again from its own creation.
        let anew = Stamp {
            czxid: 2,
            ctime: 2000,
            pzxid: 3,
        };
        apart.take_group("g", anew, &positions(&[("a", 1, 0)]), anything);
        let plan = apart.plan(&["g".to_owned()], &[("g".into(), anew)].into());
        assert_eq!(plan.held.len(), 1);
    }

    #[test]
    fn a_domain_is_known_by_its_line_and_a_description_as_new_as_the_line_says() {
        let apart = Apart::default();
        let g = apart.take_group(
            "g",
            stamp(5),
            &positions(&[("a", 3, 1), ("b", 4, 2), ("c", 5, 0)]),
            anything,
        );
        let groups = vec![g];
        assert_eq!(apart.to_describe(&groups), ["a", "b", "c"]);
        apart.take_description("a", Some((1, Some(described("http://a")))));
        apart.take_description("b", Some((1, Some(described("http://b-old")))));
        apart.take_description("c", None);
        assert_eq!(
            apart.to_describe(&groups),
            ["b", "c"],
            "b's line names version 2; c's description is looked for again"
        );
        let roster = apart.roster(&groups);
        let names: Vec<&str> = roster.known.keys().map(|n| n.as_str()).collect();
        assert_eq!(
            names,
            ["a"],
            "b's description is older than its line, c has none"
        );
        assert_eq!(roster.known["a"].member.version, 3);
        assert!(
            Arc::ptr_eq(&roster, &apart.roster(&groups)),
            "the same inputs"
        );
        apart.take_description("b", Some((2, Some(described("http://b")))));
        let roster = apart.roster(&groups);
        assert_eq!(roster.known["b"].member.address, "http://b");
    }

    #[test]
    fn a_refused_line_or_a_line_in_two_groups_leaves_its_domain_unknown() {
        let apart = Apart::default();
        let only_a = |name: &str, _: &str, _: &str| name == "a";
        let g = apart.take_group(
            "g",
            stamp(5),
            &positions(&[("a", 3, 0), ("b", 4, 0)]),
            only_a,
        );
        let h = apart.take_group("h", stamp(6), &positions(&[("a", 9, 0)]), anything);
        for name in ["a", "b"] {
            apart.take_description(name, Some((0, Some(described(name)))));
        }
        assert!(apart
            .roster(std::slice::from_ref(&g))
            .known
            .contains_key("a"));
        assert!(
            !apart
                .roster(std::slice::from_ref(&g))
                .known
                .contains_key("b"),
            "refused"
        );
        assert!(
            apart.roster(&[g, h]).known.is_empty(),
            "a moved: in neither"
        );
    }

    fn member(address: &str, version: u64) -> Known {
        Known {
            member: Member {
                address: address.into(),
                kind: FilterKind::Counting,
                epoch: 7,
                version,
                keys: String::new(),
                signing_key: String::new(),
            },
            departed: false,
            retired: false,
        }
    }

    #[test]
    fn a_domain_with_a_whole_entry_is_known_by_it_alone() {
        let whole = Roster {
            known: [("old".into(), member("http://old", 5))].into(),
        };
        let apart = Roster {
            known: [
                ("old".into(), member("http://old", 9)),
                ("new".into(), member("http://new", 3)),
                ("refused".into(), member("http://r", 3)),
            ]
            .into(),
        };
        let names: BTreeSet<String> = ["old".to_owned(), "refused".to_owned()].into();
        let merged = merged(&whole, &names, &apart);
        assert_eq!(merged.known["old"].member.version, 5);
        assert_eq!(merged.known["new"].member.version, 3);
        assert!(
            !merged.known.contains_key("refused"),
            "a whole entry refused is not made up for by a line"
        );
    }
}
