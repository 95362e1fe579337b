//! The ledger entries already admitted, by their exact bytes. Every "not
//! found" reads every group's znode: 3 301 sealed entries at N = 3 301,
//! and decoding and checking the seal of each again at every read, then
//! building the roster anew, was much of that lookup's time
//! (docs/SCALING.md). Whether an entry is
//! admitted, and as what, depends only on its name, its bytes and the
//! cluster's admission settings, which do not change while the domain
//! runs: so entries whose bytes are those of the last read are taken as
//! they were, and only the entries written since are decoded and checked.
//! When no group changed, the roster of the last read is shared as it is.
//! Keyed by the bytes, never by a znode's version or zxid: a ZooKeeper
//! ensemble made anew counts those from zero again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::value::RawValue;

use crate::cluster::coordinator::{Known, Roster};
use crate::cluster::ledger;

/// Each group's znode as last read, with its entries as admitted, and the
/// roster they made: under one lock, so that the roster is always the one
/// the groups held make (two reads at once must not mix).
#[derive(Default)]
pub(super) struct Admitted(Mutex<State>);

#[derive(Default)]
struct State {
    groups: HashMap<String, Group>,
    roster: Option<Arc<Roster>>,
}

/// What a whole read of the ledger gave.
pub(super) struct Ledger {
    pub roster: Arc<Roster>,
    /// Each group's entries, admitted or not.
    pub groups: Vec<(String, Arc<[Entry]>)>,
}

struct Group {
    bytes: Vec<u8>,
    entries: Arc<[Entry]>,
}

/// One entry of a group's znode: its domain's name, its bytes, and what it
/// was admitted as (None: refused, and logged once).
pub(super) struct Entry {
    pub name: String,
    bytes: Box<[u8]>,
    pub known: Option<Known>,
}

impl Admitted {
    /// The roster of every group's znode bytes in `read`, entries admitted
    /// as `State::group` does; the last read's roster itself if no group
    /// changed. Groups not in `read` are forgotten.
    pub fn read(
        &self,
        read: Vec<(String, Vec<u8>)>,
        admit: impl Fn(&str, &[u8]) -> Option<Known>,
    ) -> Ledger {
        let mut state = self.0.lock();
        let mut changed = false;
        let groups: Vec<(String, Arc<[Entry]>)> = read
            .iter()
            .map(|(group, data)| {
                let (entries, new) = state.group(group, data, &admit);
                changed |= new;
                (group.clone(), entries)
            })
            .collect();
        let held = state.groups.len();
        state
            .groups
            .retain(|group, _| read.iter().any(|(g, _)| g == group));
        changed |= state.groups.len() != held;
        let roster = match &state.roster {
            Some(roster) if !changed => roster.clone(),
            _ => {
                let roster = Arc::new(roster(&groups));
                state.roster = Some(roster.clone());
                roster
            }
        };
        Ledger { roster, groups }
    }
}

impl State {
    /// The entries of `group`'s znode bytes `data`, each admitted with
    /// `admit(name, entry bytes)` unless it had the same bytes at the
    /// group's last read (the whole group is taken as it was if none
    /// changed), and whether the bytes changed since. Unreadable bytes are
    /// no entries (`ledger::decode_as`).
    fn group(
        &mut self,
        group: &str,
        data: &[u8],
        admit: impl Fn(&str, &[u8]) -> Option<Known>,
    ) -> (Arc<[Entry]>, bool) {
        let last = self.groups.get(group);
        if let Some(last) = last.filter(|last| last.bytes == data) {
            return (last.entries.clone(), false);
        }
        let raw = ledger::decode_as::<&RawValue>(group, data);
        let before: HashMap<&str, &Entry> = last
            .iter()
            .flat_map(|last| last.entries.iter())
            .map(|entry| (entry.name.as_str(), entry))
            .collect();
        let entries: Arc<[Entry]> = raw
            .into_iter()
            .map(|(name, raw)| {
                let bytes = raw.get().as_bytes();
                let known = match before.get(name.as_str()) {
                    Some(entry) if *entry.bytes == *bytes => entry.known.clone(),
                    _ => admit(&name, bytes),
                };
                Entry {
                    name,
                    bytes: bytes.into(),
                    known,
                }
            })
            .collect();
        drop(before);
        self.groups.insert(
            group.to_owned(),
            Group {
                bytes: data.to_vec(),
                entries: entries.clone(),
            },
        );
        (entries, true)
    }
}

/// The domains admitted in `groups`, each with its entry. A domain moved to
/// another group has an entry in each until it registers in the new one
/// (`leave_other_groups`): which is its last is not known here, so neither
/// is taken, and it is asked (as a domain known only here) meanwhile.
fn roster(groups: &[(String, Arc<[Entry]>)]) -> Roster {
    let mut known = BTreeMap::new();
    let mut twice = BTreeSet::new();
    for entry in groups.iter().flat_map(|(_, entries)| entries.iter()) {
        let (Some(admitted), Some(name)) = (&entry.known, super::named(&entry.name)) else {
            continue;
        };
        if known.insert(name.clone(), admitted.clone()).is_some() {
            twice.insert(name);
        }
    }
    for name in &twice {
        known.remove(name);
    }
    Roster { known }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::cluster::coordinator::Member;
    use crate::local::filter::FilterKind;

    fn known(address: &str) -> Known {
        Known {
            member: Member {
                address: address.to_owned(),
                kind: FilterKind::Counting,
                epoch: 1,
                version: 1,
                keys: String::new(),
                signing_key: String::new(),
            },
            departed: false,
            retired: false,
        }
    }

    fn ledger(entries: &[(&str, &str)]) -> String {
        let entries: Vec<String> = entries
            .iter()
            .map(|(name, address)| {
                format!(
                    "\"{name}\":{}",
                    serde_json::to_string(&known(address)).unwrap()
                )
            })
            .collect();
        format!("{{{}}}", entries.join(","))
    }

    fn sorted(entries: Arc<[Entry]>) -> Vec<(String, Option<Known>)> {
        let mut v: Vec<_> = entries
            .iter()
            .map(|e| (e.name.clone(), e.known.clone()))
            .collect();
        v.sort_by(|x, y| x.0.cmp(&y.0));
        v
    }

    #[test]
    fn an_entry_is_checked_again_only_when_its_bytes_changed() {
        let admitted = Admitted::default();
        let checks = Cell::new(0);
        let admit = |_: &str, bytes: &[u8]| {
            checks.set(checks.get() + 1);
            serde_json::from_slice::<Known>(bytes).ok()
        };
        let first = ledger(&[("a", "http://a"), ("b", "http://b")]);
        let read = sorted(admitted.0.lock().group("g", first.as_bytes(), admit).0);
        assert_eq!(checks.get(), 2);
        assert_eq!(read[1], ("b".into(), Some(known("http://b"))));
        let again = sorted(admitted.0.lock().group("g", first.as_bytes(), admit).0);
        assert_eq!(checks.get(), 2, "an unchanged group is not checked again");
        assert_eq!(read, again);
        let changed = ledger(&[("b", "http://b2"), ("a", "http://a")]);
        let read = sorted(admitted.0.lock().group("g", changed.as_bytes(), admit).0);
        assert_eq!(checks.get(), 3, "only the changed entry is checked");
        assert_eq!(read[0], ("a".into(), Some(known("http://a"))));
        assert_eq!(read[1], ("b".into(), Some(known("http://b2"))));
        admitted.0.lock().group("h", changed.as_bytes(), admit);
        assert_eq!(checks.get(), 5, "another group's entries are its own");
    }

    #[test]
    fn a_refused_entry_stays_out_and_unreadable_bytes_are_no_entries() {
        let admitted = Admitted::default();
        let only_a = |name: &str, bytes: &[u8]| {
            (name == "a").then(|| serde_json::from_slice::<Known>(bytes).ok())?
        };
        let both = ledger(&[("a", "http://a"), ("b", "http://b")]);
        let read = sorted(admitted.0.lock().group("g", both.as_bytes(), only_a).0);
        assert_eq!(
            read,
            vec![("a".into(), Some(known("http://a"))), ("b".into(), None)]
        );
        assert!(admitted
            .0
            .lock()
            .group("g", b"{not json", only_a)
            .0
            .is_empty());
        assert!(admitted.0.lock().group("g", b"", only_a).0.is_empty());
        admitted.read(Vec::new(), only_a);
        assert!(
            admitted.0.lock().groups.is_empty(),
            "groups gone are forgotten"
        );
    }

    #[test]
    fn an_unchanged_ledger_gives_the_same_roster_and_a_domain_in_two_groups_is_in_neither() {
        let admitted = Admitted::default();
        let admit = |_: &str, bytes: &[u8]| serde_json::from_slice::<Known>(bytes).ok();
        let g = ledger(&[("a", "http://a"), ("m", "http://m")]);
        let h = ledger(&[("b", "http://b"), ("m", "http://m2")]);
        let read = || {
            vec![
                ("g".into(), g.clone().into_bytes()),
                ("h".into(), h.clone().into_bytes()),
            ]
        };
        let first = admitted.read(read(), admit);
        let names: Vec<&str> = first.roster.known.keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["a", "b"], "m moved between groups: in neither");
        assert_eq!(first.groups.len(), 2);
        let again = admitted.read(read(), admit);
        assert!(Arc::ptr_eq(&first.roster, &again.roster));
        let fewer = admitted.read(vec![("g".into(), g.clone().into_bytes())], admit);
        assert!(
            !Arc::ptr_eq(&first.roster, &fewer.roster),
            "a group gone changes the roster"
        );
        let names: Vec<&str> = fewer.roster.known.keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["a", "m"]);
    }
}
