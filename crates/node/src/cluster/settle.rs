//! The lookup's protocol, with no I/O: after the candidates said no and
//! the positions ledger was read, which domains a "not found" must still
//! settle, what to call and when to wait ([`Settle`], stepped by answers
//! and copies as raft-rs's `RawNode` is by messages), and what the lookup
//! concludes ([`conclude`]). The driver (`lookup.rs`) makes the calls and
//! the waits it asks for and feeds back what came of them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::coordinator::{PeerAddress, Roster};
use super::relay::WOKEN_SPACING;
use super::replicas::{covers, PeerInfo};
use super::ruled_out::{ask_now, catching_up, not_ruled_out, LONGEST_WAIT};
use super::trace::Trace;
use crate::local::domain::Position;
use crate::local::domain_name::DomainName;
use crate::local::record::Record;

/// How a lookup ended. `Found`, the common end, is as large as a record:
/// boxing it would cost every lookup an allocation to make the rare ends
/// smaller.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    Found {
        record: Record,
        owner: DomainName,
    },
    NotFound,
    /// Not found where asked, and these domains could not answer.
    Unavailable {
        domains: Vec<DomainName>,
    },
    /// Not found in any domain known, but the membership could not be
    /// confirmed (just started, or the coordinator is unreachable).
    NotReady {
        reason: String,
    },
}

/// How far an answer that found nothing is from a certain "not found":
/// of an ID's forms tried, the least certain answer is given.
pub fn doubt(outcome: &Outcome) -> u8 {
    match outcome {
        Outcome::Found { .. } | Outcome::NotFound => 0,
        Outcome::NotReady { .. } => 1,
        Outcome::Unavailable { .. } => 2,
    }
}

/// What the lookup concludes from what it found and its trace: "not
/// found" only when nobody failed to answer (every domain not ruled out
/// answered "no" or was covered by its copy, [`Settle`]), the membership
/// was confirmed, and the lookup's own search did not fail.
pub fn conclude(found: Option<(Record, DomainName)>, trace: &Trace) -> Outcome {
    match (found, &trace.unconfirmed) {
        (Some((record, owner)), _) => Outcome::Found { record, owner },
        (None, _) if !trace.unreachable.is_empty() || trace.failed.is_some() => {
            Outcome::Unavailable {
                domains: trace.unreachable_names(),
            }
        }
        (None, Some(reason)) => Outcome::NotReady {
            reason: reason.clone(),
        },
        (None, None) => Outcome::NotFound,
    }
}

/// A peer's answer to one call.
#[derive(Clone, Debug)]
pub enum Reply<T> {
    Got(T),
    Unreachable(String),
}

/// A call the driver is to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// Ask whether its live filter may hold the ID.
    Probe { name: DomainName, address: String },
    /// Read the record; `after_probe` when a probe's "maybe" led to it
    /// (else its copy's).
    Fetch {
        name: DomainName,
        address: String,
        after_probe: bool,
    },
}

/// What came of a call.
#[derive(Clone, Debug)]
pub enum Event {
    Probed(DomainName, Reply<bool>),
    /// Whether the domain held the record.
    Fetched(DomainName, Reply<bool>, bool),
}

/// What the driver does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Ready {
    /// Make these calls, then wait for an answer, a copy that moved, or
    /// until `until` (since the settling began), whichever comes first.
    Wait {
        calls: Vec<Call>,
        until: Option<Duration>,
    },
    /// Every domain is settled: found at this one, or nowhere.
    Done { found: Option<DomainName> },
}

/// A domain a "not found" must still settle.
#[derive(Debug)]
struct Open {
    address: String,
    /// What the ledger read says it last published: its copy here settles
    /// it once it covers this.
    published: Option<Position>,
    /// Asked already (a probe in flight or answered).
    asked: bool,
    /// Why its probe failed, while its copy may still come to settle it.
    failed: Option<String>,
}

/// Settles each domain the copies read with the candidates could not rule
/// out ([`not_ruled_out`]), not asked yet, by whichever comes first:
/// - its answer: a probe of its live filter, then, on "maybe", a read of
///   the record; its live filter holds every write it acknowledged before
///   this lookup began (the filter changes with the store, under the
///   writer lock, before a write is acknowledged);
/// - its copy here, once that covers the position the roster (a ledger
///   read begun after this lookup began) gives for it, read together with
///   the copies' candidates for the ID ([`Settle::copies`]): such a copy
///   holds every write the domain acknowledged before this lookup began
///   (`not_ruled_out`), so its "no" rules the domain out and its "maybe"
///   has the record read from it.
///
/// The domains behind a write in flight ([`catching_up`]: copies of the
/// published epoch only behind its version, which the relay brings) are
/// asked at once if they are a handful, else waited for, with the relay
/// asked to read now, as long as asking them would take ([`ask_now`]);
/// the others are asked at once. A domain neither answering nor covered
/// by its copy within [`LONGEST_WAIT`] is unreachable: the lookup answers
/// 503, never "not found". So nothing acknowledged before the lookup
/// began is missed, whichever way each domain is settled.
#[derive(Debug)]
pub struct Settle {
    open: BTreeMap<DomainName, Open>,
    /// The domains whose record was read (or is being read): never twice.
    fetched: BTreeSet<DomainName>,
    behind_at_first: usize,
    woken: bool,
    in_flight: usize,
    found: Option<DomainName>,
    /// The domains asked at once, not waited for: probed at the first
    /// [`Settle::ready`].
    at_first: Vec<PeerAddress>,
    /// Calls decided, not yet handed to the driver.
    calls: Vec<Call>,
}

impl Settle {
    /// After the candidates (`asked`) said no: the domains `roster` and
    /// `peers` (the copies' positions read with the candidates) cannot
    /// rule out, less those asked already.
    pub fn new(roster: &Roster, peers: &[PeerInfo], me: &str, asked: BTreeSet<DomainName>) -> Self {
        let mut stale = not_ruled_out(roster, peers, me);
        stale.retain(|p| !asked.contains(&p.name));
        let behind = catching_up(roster, peers, &stale);
        let waiting: BTreeSet<&str> = behind.iter().map(|(name, _)| name.as_str()).collect();
        let open: BTreeMap<DomainName, Open> = stale
            .into_iter()
            .map(|PeerAddress { name, address }| {
                let published = roster
                    .known
                    .get(&name)
                    .filter(|known| !known.retired)
                    .map(|known| known.member.position());
                let asked = !waiting.contains(name.as_str());
                let open = Open {
                    address,
                    published,
                    asked,
                    failed: None,
                };
                (name, open)
            })
            .collect();
        let behind_at_first = waiting.len();
        let mut settle = Settle {
            open,
            fetched: asked,
            behind_at_first,
            woken: !ask_now(behind_at_first, Duration::ZERO, LONGEST_WAIT),
            in_flight: 0,
            found: None,
            at_first: Vec::new(),
            calls: Vec::new(),
        };
        let at_once: Vec<PeerAddress> = settle
            .open
            .iter()
            .filter(|(_, o)| o.asked)
            .map(|(n, o)| PeerAddress::new(n, &o.address))
            .collect();
        settle.at_first = at_once;
        settle
    }

    /// Whether there is anything to settle at all.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Whether copies are waited for: the driver wakes the relay
    /// followers to read now.
    pub fn woken(&self) -> bool {
        self.woken
    }

    /// The domains whose copies can settle them: the driver reads these
    /// copies' positions for [`Settle::copies`].
    pub fn watched(&self) -> impl Iterator<Item = &DomainName> {
        self.open
            .iter()
            .filter(|(_, o)| o.published.is_some())
            .map(|(name, _)| name)
    }

    /// Whether any of `positions` (of [`Settle::watched`]'s copies)
    /// covers what its domain published: then the driver reads the
    /// candidates under the same lock.
    pub fn any_covered(&self, positions: &[(DomainName, Option<Position>)]) -> bool {
        positions.iter().any(|(name, at)| self.covered(name, *at))
    }

    fn covered(&self, name: &str, at: Option<Position>) -> bool {
        self.open
            .get(name)
            .is_some_and(|o| o.published.is_some() && covers(at, o.published))
    }

    /// The copies' positions and the candidates for the ID, read together:
    /// a copy that covers what its domain published settles it, by its
    /// "no", or by the record read on its "maybe".
    pub fn copies(
        &mut self,
        positions: &[(DomainName, Option<Position>)],
        candidates: &[DomainName],
    ) {
        if self.found.is_some() {
            return;
        }
        for (name, at) in positions {
            if !self.covered(name, *at) {
                continue;
            }
            let Some(open) = self.open.remove(name) else {
                continue;
            };
            if candidates.contains(name) && self.fetched.insert(name.clone()) {
                self.fetch(name.clone(), open.address, false);
            }
        }
    }

    /// What came of a call.
    pub fn step(&mut self, event: Event, trace: &mut Trace) {
        self.in_flight = self.in_flight.saturating_sub(1);
        match event {
            Event::Probed(name, answer) => {
                let Some(open) = self.open.get_mut(&name) else {
                    return; // settled by its copy meanwhile
                };
                match answer {
                    Reply::Got(false) => {
                        self.open.remove(&name);
                    }
                    Reply::Got(true) => {
                        let address = open.address.clone();
                        self.open.remove(&name);
                        if self.fetched.insert(name.clone()) {
                            self.fetch(name, address, true);
                        }
                    }
                    // A probe that failed waits for its copy until the
                    // longest wait.
                    Reply::Unreachable(e) if open.published.is_some() => open.failed = Some(e),
                    Reply::Unreachable(e) => {
                        self.open.remove(&name);
                        trace.unreachable(name, e);
                    }
                }
            }
            Event::Fetched(name, answer, after_probe) => match answer {
                Reply::Got(true) => self.found = Some(name),
                // A probe's "maybe" is not a replica's false positive.
                Reply::Got(false) if !after_probe => trace.false_positive_hops += 1,
                Reply::Got(false) => {}
                Reply::Unreachable(e) => trace.unreachable(name, e),
            },
        }
    }

    /// The calls to make and how long to wait, `waited` into the settling;
    /// `asking(n)` is how long asking `n` domains takes, as measured.
    pub fn ready(
        &mut self,
        waited: Duration,
        asking: impl Fn(usize) -> Duration,
        trace: &mut Trace,
    ) -> Ready {
        if self.found.is_some() {
            return Ready::Done {
                found: self.found.clone(),
            };
        }
        let at_first = std::mem::take(&mut self.at_first);
        self.probe_each(at_first, trace);
        // Those still waited for are asked once it is time.
        let still: Vec<PeerAddress> = self
            .open
            .iter()
            .filter(|(_, o)| !o.asked)
            .map(|(n, o)| PeerAddress::new(n, &o.address))
            .collect();
        let mut until = None;
        if !still.is_empty() {
            let mut asking = asking(still.len());
            if self.woken {
                asking += WOKEN_SPACING;
            }
            if ask_now(self.behind_at_first, waited, asking) {
                for PeerAddress { name, .. } in &still {
                    if let Some(o) = self.open.get_mut(name) {
                        o.asked = true;
                    }
                }
                self.probe_each(still, trace);
            } else {
                until = Some(asking.min(LONGEST_WAIT));
            }
        }
        // A probe that failed waits for its copy until the longest wait;
        // then its domain is unreachable.
        if self.open.values().any(|o| o.failed.is_some()) {
            if waited >= LONGEST_WAIT {
                let failed: Vec<DomainName> = self
                    .open
                    .iter()
                    .filter(|(_, o)| o.failed.is_some())
                    .map(|(n, _)| n.clone())
                    .collect();
                for name in failed {
                    if let Some(Open {
                        failed: Some(e), ..
                    }) = self.open.remove(&name)
                    {
                        trace.unreachable(name, e);
                    }
                }
            } else {
                until = Some(until.map_or(LONGEST_WAIT, |at: Duration| at.min(LONGEST_WAIT)));
            }
        }
        let calls = std::mem::take(&mut self.calls);
        for call in &calls {
            if let Call::Fetch { name, .. } = call {
                trace.remote_calls += 1;
                trace.asked.push(name.clone());
            }
        }
        if self.open.is_empty() && self.in_flight == 0 {
            return Ready::Done { found: None };
        }
        Ready::Wait { calls, until }
    }

    fn probe_each(&mut self, peers: Vec<PeerAddress>, trace: &mut Trace) {
        trace.broadcast |= !peers.is_empty();
        trace.remote_calls += peers.len();
        for PeerAddress { name, address } in peers {
            trace.probed.push(name.clone());
            self.in_flight += 1;
            self.calls.push(Call::Probe { name, address });
        }
    }

    fn fetch(&mut self, name: DomainName, address: String, after_probe: bool) {
        self.in_flight += 1;
        self.calls.push(Call::Fetch {
            name,
            address,
            after_probe,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ruled_out::{
        self,
        tests::{copy, drawn},
    };
    use crate::wire::Strategy;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(version: u64) -> Position {
        Position { epoch: 7, version }
    }

    /// A ledger of these (name, version published, retired).
    fn roster(entries: &[(&str, u64, bool)]) -> Roster {
        let entries: Vec<_> = entries.iter().map(|&(n, v, r)| (n, v, false, r)).collect();
        ruled_out::tests::roster(&entries)
    }

    fn probe(name: &str) -> Call {
        Call::Probe {
            name: name.into(),
            address: format!("http://{name}"),
        }
    }

    fn no_wait(_: usize) -> Duration {
        Duration::ZERO
    }

    #[test]
    fn not_found_needs_a_confirmed_membership_and_every_domain_answering() {
        let unconfirmed = Trace {
            unconfirmed: Some("no ZooKeeper session".into()),
            ..Trace::default()
        };
        assert!(matches!(
            conclude(None, &unconfirmed),
            Outcome::NotReady { .. }
        ));
        let mut unreachable = unconfirmed.clone();
        unreachable.unreachable("C".into(), "timed out".into());
        assert!(
            matches!(conclude(None, &unreachable), Outcome::Unavailable { domains } if domains == ["C"])
        );
        assert!(matches!(
            conclude(None, &Trace::default()),
            Outcome::NotFound
        ));
        let failed = Trace {
            failed: Some(crate::cluster::trace::TaskFailure::Panicked),
            ..Trace::default()
        };
        assert!(matches!(
            conclude(None, &failed),
            Outcome::Unavailable { .. }
        ));
    }

    #[test]
    fn a_domain_with_no_copy_is_probed_at_once_and_its_no_settles_it() {
        let roster = roster(&[("B", 5, false)]);
        let mut settle = Settle::new(&roster, &[], "A", BTreeSet::new());
        let mut trace = Trace::new(Strategy::Routed);
        assert_eq!(
            settle.ready(ms(0), no_wait, &mut trace),
            Ready::Wait {
                calls: vec![probe("B")],
                until: None
            }
        );
        settle.step(Event::Probed("B".into(), Reply::Got(false)), &mut trace);
        assert_eq!(
            settle.ready(ms(1), no_wait, &mut trace),
            Ready::Done { found: None }
        );
        assert_eq!(trace.probed, ["B"]);
        assert!(trace.broadcast);
    }

    #[test]
    fn the_candidates_asked_already_are_not_settled_again() {
        let roster = roster(&[("B", 5, false)]);
        let asked = BTreeSet::from(["B".into()]);
        let settle = Settle::new(&roster, &[], "A", asked);
        assert!(settle.is_empty());
    }

    #[test]
    fn many_copies_behind_a_write_are_waited_for_and_settled_by_their_copies() {
        let names = ["B", "C", "D", "E", "F"];
        let entries: Vec<(&str, u64, bool)> = names.iter().map(|&n| (n, 5, false)).collect();
        let peers: Vec<PeerInfo> = names.iter().map(|n| copy(n, Some(3))).collect();
        let mut settle = Settle::new(&roster(&entries), &peers, "A", BTreeSet::new());
        assert!(
            settle.woken(),
            "more than a handful behind: the relay is woken"
        );
        let mut trace = Trace::new(Strategy::Routed);
        let Ready::Wait { calls, until } = settle.ready(ms(0), |_| ms(40), &mut trace) else {
            panic!("waits");
        };
        assert!(calls.is_empty());
        assert_eq!(until, Some(ms(40) + WOKEN_SPACING));
        // Four copies catch up; one is a candidate, so its record is read.
        let positions: Vec<(DomainName, Option<Position>)> = names[..4]
            .iter()
            .map(|n| (DomainName::from(*n), Some(at(5))))
            .collect();
        assert!(settle.any_covered(&positions));
        settle.copies(&positions, &["C".into()]);
        let Ready::Wait { calls, .. } = settle.ready(ms(10), |_| ms(40), &mut trace) else {
            panic!("waits");
        };
        assert_eq!(
            calls,
            [Call::Fetch {
                name: "C".into(),
                address: "http://C".into(),
                after_probe: false
            }]
        );
        settle.step(
            Event::Fetched("C".into(), Reply::Got(false), false),
            &mut trace,
        );
        assert_eq!(trace.false_positive_hops, 1);
        // The last is asked once the wait is as long as asking takes.
        let Ready::Wait { calls, .. } = settle.ready(ms(45), |_| ms(40), &mut trace) else {
            panic!("waits");
        };
        assert_eq!(calls, [probe("F")]);
        settle.step(Event::Probed("F".into(), Reply::Got(true)), &mut trace);
        let Ready::Wait { calls, .. } = settle.ready(ms(50), |_| ms(40), &mut trace) else {
            panic!("waits");
        };
        assert!(matches!(
            &calls[..],
            [Call::Fetch {
                after_probe: true,
                ..
            }]
        ));
        settle.step(
            Event::Fetched("F".into(), Reply::Got(true), true),
            &mut trace,
        );
        assert_eq!(
            settle.ready(ms(60), |_| ms(40), &mut trace),
            Ready::Done {
                found: Some("F".into())
            }
        );
    }

    #[test]
    fn a_failed_probe_waits_for_the_copy_until_the_longest_wait_then_is_unreachable() {
        let roster = roster(&[("B", 5, false)]);
        let mut settle = Settle::new(&roster, &[copy("B", Some(1))], "A", BTreeSet::new());
        let mut trace = Trace::new(Strategy::Routed);
        settle.ready(ms(0), no_wait, &mut trace);
        settle.step(
            Event::Probed("B".into(), Reply::Unreachable("refused".into())),
            &mut trace,
        );
        assert_eq!(
            settle.ready(ms(1), no_wait, &mut trace),
            Ready::Wait {
                calls: Vec::new(),
                until: Some(LONGEST_WAIT)
            }
        );
        assert_eq!(
            settle.ready(LONGEST_WAIT, no_wait, &mut trace),
            Ready::Done { found: None }
        );
        assert_eq!(trace.unreachable_names(), ["B"]);
        assert!(matches!(
            conclude(None, &trace),
            Outcome::Unavailable { .. }
        ));
    }

    proptest::proptest! {
        /// Whatever the ledger, the copies, the answers and the waits, the
        /// lookup never concludes "not found" while a domain the copies
        /// could not rule out neither answered "no" nor was covered by its
        /// copy at the position read.
        #[test]
        fn never_not_found_while_a_domain_is_unsettled(
            entries in proptest::collection::vec((1u8..9, 0u64..5, proptest::bool::weighted(0.1)), 0..9),
            copies in proptest::collection::vec((1u8..10, proptest::option::of(0u64..5)), 0..9),
            asked in proptest::collection::btree_set(1u8..10, 0..3),
            script in proptest::collection::vec((0u8..3, 0usize..16, 0u8..255), 0..64),
            finish in 0u8..3,
        ) {
            let entries = entries.into_iter().map(|(n, v, r)| (n, v, false, r)).collect();
            let (roster, peers) = drawn(entries, copies);
            let asked: BTreeSet<DomainName> = asked
                .into_iter()
                .map(|n| DomainName::from(format!("d{n}").as_str()))
                .collect();
            let must: Vec<DomainName> = not_ruled_out(&roster, &peers, "d0")
                .into_iter()
                .map(|p| p.name)
                .filter(|n| !asked.contains(n))
                .collect();
            let published = |name: &str| {
                roster.known.get(name).filter(|k| !k.retired).map(|k| k.member.position())
            };

            let mut settle = Settle::new(&roster, &peers, "d0", asked);
            let mut trace = Trace::new(Strategy::Routed);
            let mut pending: Vec<Call> = Vec::new();
            let mut said_no: BTreeSet<DomainName> = BTreeSet::new();
            let mut covered: BTreeSet<DomainName> = BTreeSet::new();
            let mut waited = Duration::ZERO;
            let answer_of = |call: Call, how: u8, said_no: &mut BTreeSet<DomainName>| {
                let answer = match how % 3 {
                    0 => Reply::Got(false),
                    1 => Reply::Got(true),
                    _ => Reply::Unreachable("down".into()),
                };
                let (Call::Probe { name, .. } | Call::Fetch { name, .. }) = &call;
                if matches!(answer, Reply::Got(false)) {
                    said_no.insert(name.clone());
                }
                match call {
                    Call::Probe { name, .. } => Event::Probed(name, answer),
                    Call::Fetch { name, after_probe, .. } => Event::Fetched(name, answer, after_probe),
                }
            };
            let script = script.into_iter().map(Some).chain(std::iter::repeat_n(None, 200));
            let mut done = None;
            for step in script {
                match settle.ready(waited, |n| ms(n as u64 * 7), &mut trace) {
                    Ready::Done { found } => {
                        done = Some(found);
                        break;
                    }
                    Ready::Wait { calls, .. } => pending.extend(calls),
                }
                match step {
                    Some((0, i, how)) if !pending.is_empty() => {
                        let call = pending.remove(i % pending.len());
                        settle.step(answer_of(call, how, &mut said_no), &mut trace);
                    }
                    Some((1, i, how)) if !must.is_empty() => {
                        let name = &must[i % must.len()];
                        let position = Some(at(u64::from(how % 6)));
                        let candidate = how & 0x40 != 0;
                        let positions = vec![(name.clone(), position)];
                        let candidates = if candidate { vec![name.clone()] } else { Vec::new() };
                        let is_open = settle.watched().any(|n| n == name);
                        if is_open && published(name).is_some() && covers(position, published(name)) && !candidate {
                            covered.insert(name.clone());
                        }
                        if settle.any_covered(&positions) {
                            settle.copies(&positions, &candidates);
                        }
                    }
                    Some((_, _, how)) => waited += ms(u64::from(how)),
                    // Past the script: time runs out, and every call is
                    // answered as `finish` says.
                    None => {
                        waited = waited.max(LONGEST_WAIT);
                        if let Some(call) = pending.pop() {
                            settle.step(answer_of(call, finish, &mut said_no), &mut trace);
                        }
                    }
                }
            }
            let found = done.expect("the settling ends once every call is answered and time is out");
            if found.is_none() && matches!(conclude(None, &trace), Outcome::NotFound) {
                for name in &must {
                    proptest::prop_assert!(
                        said_no.contains(name) || covered.contains(name),
                        "{name} concluded absent, neither answering no nor covered"
                    );
                }
            }
        }
    }
}
