//! Who can be ruled out: the domains a "not found" or a search must still
//! ask, because the copies held here do not cover what the coordinator
//! says they last published. The rule that makes "not found" safe, shared
//! by lookups (`settle.rs`) and searches by key (`search.rs`). Pure
//! rules: what they are applied to is read by the driver (`lookup.rs`).

use std::collections::HashMap;
use std::time::Duration;

use super::coordinator::{PeerAddress, Roster};
use super::replicas::{covers, PeerInfo};
use crate::local::domain::Position;
use crate::local::domain_name::DomainName;

/// How many copies behind a write in flight a "not found" does not wait
/// for: their domains are asked at once (each settled by its answer or
/// its copy, whichever comes first). A handful of calls costs less than
/// a wait; thirty do not, and are waited for ([`ask_now`]).
pub(crate) const ASK_AT_ONCE: usize = 4;

/// The longest a "not found" waits for copies behind a write in flight
/// before asking their domains: two relay reads.
pub(crate) const LONGEST_WAIT: Duration = super::relay::PULL_INTERVAL.saturating_mul(2);

/// The other domains whose copies held here cannot rule an ID out, with
/// their addresses, given the positions just read from the coordinator:
/// - a domain with an entry in the positions ledger (registered now or
///   not: left cleanly, or down, paused or cut off past its session),
///   unless the copy covers the position the entry holds: that is the last
///   one it published, since it publishes into its entry in the
///   transaction that publishes into its registration (`zookeeper.rs`
///   `publish`; the in-process hub keeps both together too), and a write
///   is acknowledged only once its position is published, so the entry's
///   position bounds every write it ever acknowledged. Why this cannot
///   give a false "not found": a copy covering it holds every such write;
///   a domain that comes back writes its entry (at its new position)
///   before it acknowledges another write (`register`), and a lookup
///   reads the ledger after `sync`, so a write acknowledged before the
///   lookup began is within the position read;
/// - a domain retired by `cluster forget`: never (the operator retired
///   its records with it; it could not be registered then);
/// - a domain known only here (the coordinator lost its data): always.
///
/// A copy is consulted before this (its "maybe" makes a candidate); this
/// is the rule for trusting its "no". `peers` were read together with the
/// candidates, so a copy updated since cannot pass as covering.
pub(crate) fn not_ruled_out(roster: &Roster, peers: &[PeerInfo], me: &str) -> Vec<PeerAddress> {
    not_ruled_out_by(roster, peers, me, |p| p.position)
}

/// [`not_ruled_out`] by the copies whose positions `copy` picks: a peer's
/// filter or its key filter.
pub(super) fn not_ruled_out_by(
    roster: &Roster,
    peers: &[PeerInfo],
    me: &str,
    copy: impl Fn(&PeerInfo) -> Option<Position>,
) -> Vec<PeerAddress> {
    // One pass over the roster and one over the copies, by name, with no
    // list of everyone built on the way: at N = 3 301 every "not found"
    // runs this, and a search of `peers` for each domain (N²) was most of
    // its 37 ms (docs/SCALING.md).
    let by_name: HashMap<&str, &PeerInfo> = peers.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut asked: Vec<PeerAddress> = roster
        .known
        .iter()
        .filter(|(name, known)| *name != me && !known.retired)
        .filter(|(name, known)| {
            !by_name
                .get(name.as_str())
                .is_some_and(|p| covers(copy(p), Some(known.member.position())))
        })
        .map(|(name, known)| PeerAddress::new(name, &known.member.address))
        .collect();
    asked.extend(
        peers
            .iter()
            .filter(|p| p.name != me && !roster.known.contains_key(&p.name))
            .map(|p| PeerAddress::new(&p.name, &p.address)),
    );
    asked.sort();
    asked
}

/// Of `asked` (domains the copies could not rule out), those whose copy
/// held here is of the epoch the ledger says they published, only behind
/// its version, with the position to wait for: a write in flight, which
/// the relay brings within a read or two. Once the copy covers it, it
/// rules its domain out, or makes it a candidate, with no call. A domain
/// with no copy, or whose copy is of another epoch (it needs a whole new
/// copy), is not waited for.
pub(crate) fn catching_up(
    roster: &Roster,
    peers: &[PeerInfo],
    asked: &[PeerAddress],
) -> Vec<(DomainName, Position)> {
    let held: HashMap<&str, Position> = peers
        .iter()
        .filter_map(|p| Some((p.name.as_str(), p.position?)))
        .collect();
    asked
        .iter()
        .filter_map(|PeerAddress { name, .. }| {
            let published = roster.known.get(name)?.member.position();
            let copy = held.get(name.as_str())?;
            (copy.epoch == published.epoch && copy.version < published.version)
                .then(|| (name.clone(), published))
        })
        .collect()
}

/// Whether a "not found" asks now the domains whose copies it waits for
/// (behind a write in flight, [`catching_up`]): at once when there were
/// no more than [`ASK_AT_ONCE`] at first; else once it has waited as long
/// as asking those still behind would take (`asking`: the slowest of that
/// many calls, as measured), and never longer than [`LONGEST_WAIT`].
/// Either way each stays settled by its copy if that comes first, so
/// asking or waiting changes what it costs, never what it answers.
pub(crate) fn ask_now(behind_at_first: usize, waited: Duration, asking: Duration) -> bool {
    behind_at_first <= ASK_AT_ONCE || waited >= asking.min(LONGEST_WAIT)
}

/// Every other domain in the roster or held as a copy, with its address,
/// but those retired: the seed paper's broadcast asks them all.
pub(super) fn everyone(roster: &Roster, peers: &[PeerInfo], me: &str) -> Vec<PeerAddress> {
    let mut all: std::collections::BTreeMap<DomainName, String> = peers
        .iter()
        .map(|p| (p.name.clone(), p.address.clone()))
        .collect();
    for (name, known) in &roster.known {
        all.insert(name.clone(), known.member.address.clone());
    }
    all.remove(me);
    all.retain(|name, _| !roster.known.get(name).is_some_and(|k| k.retired));
    all.into_iter()
        .map(|(name, address)| PeerAddress { name, address })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cluster::coordinator::Known;
    use crate::cluster::coordinator::Member;
    use crate::local::filter::FilterKind;

    fn member(name: &str, version: u64) -> Member {
        Member {
            address: format!("http://{name}"),
            kind: FilterKind::Counting,
            epoch: 7,
            version,
            keys: String::new(),
            signing_key: String::new(),
        }
    }

    /// `name`'s copy here, of epoch 7 at `version` (None: no copy yet).
    pub(in crate::cluster) fn copy(name: &str, version: Option<u64>) -> PeerInfo {
        PeerInfo {
            name: name.into(),
            address: format!("http://{name}"),
            position: version.map(|version| Position { epoch: 7, version }),
            key_position: None,
        }
    }

    /// A ledger of these (name, position published, departed, retired).
    pub(in crate::cluster) fn roster(entries: &[(&str, u64, bool, bool)]) -> Roster {
        let known = entries
            .iter()
            .map(|&(name, version, departed, retired)| {
                let known = Known {
                    member: member(name, version),
                    departed,
                    retired,
                };
                (DomainName::from(name), known)
            })
            .collect();
        Roster { known }
    }

    /// A cluster a property test drew: a ledger of (number, version
    /// published, departed, retired) and copies of (number, version), the
    /// domains named `d{number}`, one copy each at the most.
    pub(in crate::cluster) fn drawn(
        entries: Vec<(u8, u64, bool, bool)>,
        copies: Vec<(u8, Option<u64>)>,
    ) -> (Roster, Vec<PeerInfo>) {
        let entries: Vec<(String, u64, bool, bool)> = entries
            .into_iter()
            .map(|(n, v, departed, retired)| (format!("d{n}"), v, departed, retired))
            .collect();
        let borrowed: Vec<(&str, u64, bool, bool)> = entries
            .iter()
            .map(|(n, v, d, r)| (n.as_str(), *v, *d, *r))
            .collect();
        let mut peers: Vec<PeerInfo> = copies
            .into_iter()
            .map(|(n, v)| copy(&format!("d{n}"), v))
            .collect();
        peers.sort_by(|a, b| a.name.cmp(&b.name));
        peers.dedup_by(|a, b| a.name == b.name);
        (roster(&borrowed), peers)
    }

    #[test]
    fn only_a_copy_of_the_published_epoch_behind_its_version_is_waited_for() {
        let roster = registered(&[
            ("behind", 5),
            ("current", 5),
            ("no-copy", 5),
            ("other-epoch", 5),
        ]);
        let mut other_epoch = copy("other-epoch", Some(9));
        other_epoch.position = Some(Position {
            epoch: 8,
            version: 9,
        });
        let peers = [
            copy("behind", Some(3)),
            copy("current", Some(5)),
            other_epoch,
            copy("unknown", Some(1)),
        ];
        let asked: Vec<PeerAddress> = ["behind", "no-copy", "other-epoch", "unknown"]
            .iter()
            .map(|n| PeerAddress::new(&DomainName::from(*n), format!("http://{n}")))
            .collect();
        assert_eq!(
            catching_up(&roster, &peers, &asked),
            vec![(
                DomainName::from("behind"),
                Position {
                    epoch: 7,
                    version: 5
                }
            )]
        );
    }

    #[test]
    fn a_handful_behind_is_asked_at_once_and_more_once_the_wait_is_as_long_as_asking() {
        let ms = Duration::from_millis;
        assert!(ask_now(ASK_AT_ONCE, ms(0), ms(40)), "a handful: at once");
        assert!(!ask_now(30, ms(0), ms(40)), "thirty: waited for");
        assert!(!ask_now(30, ms(39), ms(40)));
        assert!(ask_now(30, ms(40), ms(40)), "as long as asking takes");
        assert!(
            ask_now(30, LONGEST_WAIT, ms(10_000)),
            "never longer than two relay reads"
        );
    }

    fn registered(entries: &[(&str, u64)]) -> Roster {
        let all: Vec<_> = entries.iter().map(|&(n, v)| (n, v, false, false)).collect();
        roster(&all)
    }

    fn names(out: Vec<PeerAddress>) -> Vec<String> {
        out.into_iter().map(|p| p.name.into_string()).collect()
    }

    #[test]
    fn a_member_is_ruled_out_only_by_a_copy_covering_what_it_published() {
        let roster = registered(&[("B", 10), ("C", 10), ("D", 10), ("E", 10)]);
        let peers = [
            copy("B", Some(10)),
            copy("C", Some(12)),
            copy("D", Some(9)),
            copy("E", None),
        ];
        assert_eq!(names(not_ruled_out(&roster, &peers, "A")), ["D", "E"]);
    }

    #[test]
    fn a_search_trusts_only_key_filter_copies_that_cover_what_was_published() {
        let roster = registered(&[("B", 10), ("C", 10)]);
        let b = PeerInfo {
            key_position: Some(Position {
                epoch: 7,
                version: 10,
            }),
            ..copy("B", Some(10))
        };
        // C's filter copy is current, its key filter copy is not.
        let peers = [b, copy("C", Some(10))];
        assert!(not_ruled_out(&roster, &peers, "A").is_empty());
        let by_keys = not_ruled_out_by(&roster, &peers, "A", |p| p.key_position);
        assert_eq!(names(by_keys), ["C"]);
    }

    #[test]
    fn a_member_without_any_copy_here_is_asked() {
        // Just started: no copies yet, every member must be asked.
        let roster = registered(&[("A", 1), ("B", 10), ("C", 3)]);
        assert_eq!(names(not_ruled_out(&roster, &[], "A")), ["B", "C"]);
    }

    #[test]
    fn a_clean_departure_is_ruled_out_by_a_copy_covering_its_last_position() {
        let roster = roster(&[
            ("B", 10, true, false),
            ("C", 10, true, false),
            ("D", 10, true, false),
        ]);
        // D left while this domain held no copy of it: it may hold anything.
        let peers = [copy("B", Some(10)), copy("C", Some(9))];
        assert_eq!(names(not_ruled_out(&roster, &peers, "A")), ["C", "D"]);
    }

    #[test]
    fn a_domain_that_vanished_without_leaving_is_ruled_out_by_a_copy_covering_its_last_publication()
    {
        // Killed, paused or cut off past its session: its ledger entry
        // holds the last position it published (B: 10, D: 12), which
        // bounds what it acknowledged. B's copy covers it; D's is behind;
        // C was never copied here at all (this domain has just started).
        let roster = registered(&[("B", 10), ("C", 4), ("D", 12)]);
        let peers = [copy("B", Some(10)), copy("D", Some(11))];
        assert_eq!(names(not_ruled_out(&roster, &peers, "A")), ["C", "D"]);
    }

    #[test]
    fn a_retired_domain_is_neither_asked_nor_counted() {
        // C was forgotten with its copy here behind: still not asked.
        let roster = roster(&[("B", 10, false, false), ("C", 10, true, true)]);
        let peers = [copy("B", Some(9)), copy("C", Some(3))];
        assert_eq!(names(not_ruled_out(&roster, &peers, "A")), ["B"]);
        assert_eq!(names(everyone(&roster, &peers, "A")), ["B"]);
    }

    #[test]
    fn a_domain_known_only_here_is_always_asked() {
        // The coordinator lost its data and B has not registered again.
        let peers = [copy("B", Some(10))];
        assert_eq!(names(not_ruled_out(&Roster::default(), &peers, "A")), ["B"]);
    }

    #[test]
    fn this_domain_is_never_asked() {
        let roster = registered(&[("A", 10)]);
        assert!(not_ruled_out(&roster, &[copy("A", None)], "A").is_empty());
    }

    proptest::proptest! {
        /// Once asking is due it stays due as the wait goes on, and no
        /// wait outlasts the longest.
        #[test]
        fn once_asking_is_due_it_stays_due(
            behind in 0usize..100,
            waited in 0u64..500,
            later in 0u64..500,
            asking in 0u64..10_000,
        ) {
            let ms = Duration::from_millis;
            if ask_now(behind, ms(waited), ms(asking)) {
                proptest::prop_assert!(ask_now(behind, ms(waited + later), ms(asking)));
            }
            proptest::prop_assert!(ask_now(behind, LONGEST_WAIT, ms(asking)));
        }

        /// Whatever the roster and the copies, the domains asked are
        /// everyone else not retired, less those whose copy covers what the
        /// roster says they published.
        #[test]
        fn those_asked_are_everyone_but_the_domains_a_copy_rules_out(
            entries in proptest::collection::vec((0u8..12, 0u64..4, proptest::bool::ANY, proptest::bool::ANY), 0..12),
            copies in proptest::collection::vec((0u8..12, proptest::option::of(0u64..4)), 0..12),
        ) {
            let (roster, peers) = drawn(entries, copies);
            let expected: Vec<PeerAddress> = everyone(&roster, &peers, "d0")
                .into_iter()
                .filter(|PeerAddress { name, .. }| {
                    let copy = peers.iter().find(|p| p.name == *name);
                    !roster.known.get(name).is_some_and(|known| {
                        copy.is_some_and(|c| covers(c.position, Some(known.member.position())))
                    })
                })
                .collect();
            proptest::prop_assert_eq!(not_ruled_out(&roster, &peers, "d0"), expected);
        }
    }
}
