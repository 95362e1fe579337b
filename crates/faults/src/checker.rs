//! The rules a history must keep, checked after the run (or over any
//! hand-made history): no acknowledged record reported absent, no deleted
//! record found, nothing found that was never written, nothing found whose
//! every write was refused, nothing lost once every fault healed, writes
//! taken again soon after a full disk is freed, a cluster that converges
//! after each fault, and every acknowledged cross-archive request answered
//! exactly once (`requests.rs`).
//!
//! An answer of 503 or a transport error is not a violation (a domain may
//! say "I cannot tell now"); the report counts them.

use std::collections::HashMap;

use crate::history::{secs, FaultKind, History, Op, OpKind, Outcome};
use xarchive_node::wire::{CacheRoute, ErrorCode};

pub use crate::violation::{Violation, ViolationKind, FINAL};

/// How soon after a full disk is freed its domain must take writes again.
pub const RESUME_BOUND_US: u64 = 5_000_000;

/// The operations on one ID, by kind.
#[derive(Default)]
struct PerId<'a> {
    puts: Vec<&'a Op>,
    deletes: Vec<&'a Op>,
    reads: Vec<&'a Op>,
}

fn by_id(history: &History) -> HashMap<&str, PerId<'_>> {
    let mut ids: HashMap<&str, PerId<'_>> = HashMap::new();
    for op in &history.ops {
        let entry = ids.entry(op.id.as_str()).or_default();
        match op.kind {
            OpKind::Put => entry.puts.push(op),
            OpKind::Delete => entry.deletes.push(op),
            OpKind::Lookup | OpKind::Get => entry.reads.push(op),
            // By person, not by ID: see check_searches; requests: see
            // crate::requests.
            OpKind::Search | OpKind::Submit | OpKind::Request => {}
        }
    }
    ids
}

/// Whether `put` may have taken effect at or after `at_us`: it did not
/// end, definitely, before then.
fn may_land_after(put: &Op, at_us: u64) -> bool {
    !(put.outcome.is_definite() && put.end_us < at_us)
}

fn is_not_found(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Http { status: 404, .. })
}

/// What the checker allows beyond the strict rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// With the domains' cache on: how long after a delete was
    /// acknowledged a lookup may still be answered 200 from another
    /// domain's cached copy (`cache.max_lag_ms` plus slack for the watch's
    /// delivery and the sync), in microseconds. None: never.
    pub stale_window_us: Option<u64>,
}

impl Rules {
    /// The slack added to `cache.max_lag_ms`: the coordinator's watch
    /// delivery and the delta sync.
    pub const CACHE_SLACK_MS: u64 = 1_000;

    /// The rules for domains running the cache with `max_lag_ms`.
    pub fn with_cache(max_lag_ms: u64) -> Rules {
        Rules {
            stale_window_us: Some((max_lag_ms + Self::CACHE_SLACK_MS) * 1_000),
        }
    }
}

/// Lookups answered 200 after the ID's delete was acknowledged (a later
/// PUT could not explain them), split by the allowed window: how many
/// and the largest delay (from the delete's acknowledgement to the
/// lookup's start), within it and beyond it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StaleReads {
    pub within: usize,
    pub max_within_us: u64,
    /// Of those within, how many said `route.cache = hit`.
    pub within_cache_hits: usize,
    pub beyond: usize,
    pub max_beyond_us: u64,
}

/// Every violation in the history under the strict rules (no cache).
pub fn check_history(history: &History) -> Vec<Violation> {
    check_history_with(history, &Rules::default()).0
}

/// Every violation in the history: the live rules over the workload's
/// operations, the final ones over the final checks' operations, and the
/// convergence of each fault, sorted by time; and the stale reads seen.
pub fn check_history_with(history: &History, rules: &Rules) -> (Vec<Violation>, StaleReads) {
    let mut found = Vec::new();
    let mut stale = StaleReads::default();
    let ids = by_id(history);
    for (id, ops) in &ids {
        check_id(id, ops, rules, &mut stale, &mut found);
    }
    check_searches(history, &ids, &mut found);
    check_resumed(history, &mut found);
    crate::requests::check_requests(history, &mut found);
    for fault in &history.faults {
        if fault.converged_us.is_none() {
            found.push(Violation {
                kind: ViolationKind::NotConverged,
                id: fault.target.clone(),
                at_us: fault.healed_us,
                message: format!(
                    "fault #{} ({} {}, healed at {:.3} s): the cluster did not converge afterwards",
                    fault.n,
                    fault.kind,
                    fault.target,
                    secs(fault.healed_us)
                ),
            });
        }
    }
    found.sort_by(|a, b| (a.at_us, a.kind, &a.id).cmp(&(b.at_us, b.kind, &b.id)));
    (found, stale)
}

fn check_id(
    id: &str,
    ops: &PerId<'_>,
    rules: &Rules,
    stale: &mut StaleReads,
    found: &mut Vec<Violation>,
) {
    let live_puts = || ops.puts.iter().filter(|p| p.worker != FINAL);
    let acked_put =
        |before_us: u64| live_puts().find(|p| p.outcome.is_ok() && p.end_us < before_us);
    let delete_started_before = |us: u64, except: Option<&Op>| {
        ops.deletes
            .iter()
            .any(|d| d.start_us < us && Some(*d) != except)
    };

    // The owner's delete found nothing: the acknowledged record was lost.
    for d in &ops.deletes {
        if !is_not_found(&d.outcome) {
            continue;
        }
        if let Some(p) = acked_put(d.start_us) {
            if !delete_started_before(d.end_us, Some(d)) {
                found.push(Violation {
                    kind: ViolationKind::AcknowledgedThen404,
                    id: id.to_owned(),
                    at_us: d.start_us,
                    message: format!("{d}; but acknowledged: {p}"),
                });
            }
        }
    }

    for r in &ops.reads {
        if r.worker == FINAL {
            check_final(id, r, ops, found);
            continue;
        }
        match &r.outcome {
            Outcome::Http { status: 404, .. } => {
                if let Some(p) = acked_put(r.start_us) {
                    if !delete_started_before(r.end_us, None) {
                        found.push(Violation {
                            kind: ViolationKind::AcknowledgedThen404,
                            id: id.to_owned(),
                            at_us: r.start_us,
                            message: format!("{r}; but acknowledged: {p}"),
                        });
                    }
                }
            }
            Outcome::Ok { owner, cache, .. } => {
                let sent_before: Vec<&Op> = live_puts()
                    .filter(|p| p.start_us < r.end_us)
                    .copied()
                    .collect();
                if !sent_before.is_empty() && sent_before.iter().all(|p| p.was_refused()) {
                    found.push(Violation {
                        kind: ViolationKind::RefusedThenFound,
                        id: id.to_owned(),
                        at_us: r.start_us,
                        message: format!(
                            "{r}; but every PUT of it was refused: {}",
                            sent_before[0]
                        ),
                    });
                    continue;
                }
                let sent = live_puts().find(|p| p.start_us < r.end_us);
                let Some(sent) = sent else {
                    found.push(Violation {
                        kind: ViolationKind::Phantom,
                        id: id.to_owned(),
                        at_us: r.start_us,
                        message: format!("{r}; but no PUT of it had been sent"),
                    });
                    continue;
                };
                if let Some(owner) = owner {
                    if *owner != sent.domain {
                        found.push(Violation {
                            kind: ViolationKind::WrongOwner,
                            id: id.to_owned(),
                            at_us: r.start_us,
                            message: format!("{r}; but it was put at {}", sent.domain),
                        });
                    }
                }
                // The latest such delete: the shortest delay, the one a
                // cached copy is measured from.
                let deleted = ops
                    .deletes
                    .iter()
                    .filter(|d| {
                        d.outcome.is_ok()
                            && d.end_us < r.start_us
                            && !live_puts()
                                .any(|p| p.start_us < r.end_us && may_land_after(p, d.start_us))
                    })
                    .max_by_key(|d| d.end_us);
                if let Some(d) = deleted {
                    let delay = r.start_us - d.end_us;
                    if rules.stale_window_us.is_some_and(|w| delay < w) {
                        stale.within += 1;
                        stale.max_within_us = stale.max_within_us.max(delay);
                        if *cache == Some(CacheRoute::Hit) {
                            stale.within_cache_hits += 1;
                        }
                    } else {
                        stale.beyond += 1;
                        stale.max_beyond_us = stale.max_beyond_us.max(delay);
                        found.push(Violation {
                            kind: ViolationKind::DeletedThen200,
                            id: id.to_owned(),
                            at_us: r.start_us,
                            message: format!(
                                "{r}; but deleted: {d} ({:.3} s before the lookup started{})",
                                secs(delay),
                                match rules.stale_window_us {
                                    Some(w) => format!(", allowed {:.3} s", secs(w)),
                                    None => String::new(),
                                }
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
}

/// Every search that answered 200 must hold each record of its person
/// acknowledged before it started and not deleted (no delete started)
/// before it ended, and no record whose delete was acknowledged before it
/// started (unless a PUT may have landed since), nor any never sent.
fn check_searches(history: &History, ids: &HashMap<&str, PerId<'_>>, found: &mut Vec<Violation>) {
    let mut by_person: HashMap<String, Vec<(&str, &PerId<'_>)>> = HashMap::new();
    for (id, ops) in ids {
        if !ops.puts.is_empty() {
            by_person
                .entry(crate::http::person_of(id))
                .or_default()
                .push((id, ops));
        }
    }
    for s in history.ops.iter().filter(|o| o.kind == OpKind::Search) {
        let Outcome::Ok {
            found: Some(returned),
            ..
        } = &s.outcome
        else {
            continue;
        };
        let returned: std::collections::HashSet<&str> =
            returned.iter().map(String::as_str).collect();
        for (id, ops) in by_person.get(&s.id).map(Vec::as_slice).unwrap_or_default() {
            let live_puts = || ops.puts.iter().filter(|p| p.worker != FINAL);
            let acked = live_puts().find(|p| p.outcome.is_ok() && p.end_us < s.start_us);
            let delete_started = ops.deletes.iter().any(|d| d.start_us < s.end_us);
            if let (Some(p), false) = (acked, delete_started) {
                if !returned.contains(id) {
                    found.push(Violation {
                        kind: ViolationKind::SearchMissed,
                        id: (*id).to_owned(),
                        at_us: s.start_us,
                        message: format!("{s}; but {id} of that person was acknowledged: {p}"),
                    });
                }
            }
            let deleted = ops.deletes.iter().find(|d| {
                d.outcome.is_ok()
                    && d.end_us < s.start_us
                    && !live_puts().any(|p| p.start_us < s.end_us && may_land_after(p, d.start_us))
            });
            if let (Some(d), true) = (deleted, returned.contains(id)) {
                found.push(Violation {
                    kind: ViolationKind::SearchFoundDeleted,
                    id: (*id).to_owned(),
                    at_us: s.start_us,
                    message: format!("{s}; but {id} was deleted: {d}"),
                });
            }
        }
        for id in &returned {
            let sent = ids
                .get(id)
                .is_some_and(|ops| ops.puts.iter().any(|p| p.start_us < s.end_us));
            if !sent {
                found.push(Violation {
                    kind: ViolationKind::Phantom,
                    id: (*id).to_owned(),
                    at_us: s.start_us,
                    message: format!("{s}; but no PUT of {id} had been sent"),
                });
            }
        }
    }
}

/// After a full disk was freed, its domain takes writes again within
/// [`RESUME_BOUND_US`]: a PUT there that starts later than that and is
/// refused for space breaks the rule (its disk is far larger than what
/// the workload writes, so only the fault fills it).
fn check_resumed(history: &History, found: &mut Vec<Violation>) {
    for fault in history
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::FillDisk)
    {
        let late = history.ops.iter().find(|op| {
            op.kind == OpKind::Put
                && op.domain == fault.target
                && op.start_us > fault.healed_us + RESUME_BOUND_US
                && matches!(&op.outcome, Outcome::Http { code: Some(code), .. } if *code == ErrorCode::InsufficientStorage)
                && !history.faults.iter().any(|f| {
                    f.kind == FaultKind::FillDisk
                        && f.target == fault.target
                        && f.start_us > fault.healed_us
                        && f.start_us < op.end_us
                })
        });
        if let Some(op) = late {
            found.push(Violation {
                kind: ViolationKind::WritesNotResumed,
                id: fault.target.clone(),
                at_us: op.start_us,
                message: format!(
                    "fault #{} ({} {}, freed at {:.3} s): {op}",
                    fault.n,
                    fault.kind,
                    fault.target,
                    secs(fault.healed_us)
                ),
            });
        }
    }
}

/// A final read of an ID: one acknowledged and never deleted must be found.
fn check_final(id: &str, r: &Op, ops: &PerId<'_>, found: &mut Vec<Violation>) {
    let acked = ops
        .puts
        .iter()
        .find(|p| p.worker != FINAL && p.outcome.is_ok());
    let Some(acked) = acked else {
        return;
    };
    if !ops.deletes.is_empty() {
        return;
    }
    if !r.outcome.is_ok() {
        found.push(Violation {
            kind: ViolationKind::LostRecord,
            id: id.to_owned(),
            at_us: r.start_us,
            message: format!("after healing: {r}; but acknowledged: {acked}"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{op, Fault};
    use crate::FaultKind;

    fn ok(status: u16) -> Outcome {
        Outcome::Ok {
            status,
            owner: None,
            cache: None,
            found: None,
            request: None,
        }
    }

    fn found(owner: &str) -> Outcome {
        Outcome::Ok {
            status: 200,
            owner: Some(owner.into()),
            cache: None,
            found: None,
            request: None,
        }
    }

    fn not_found() -> Outcome {
        Outcome::Http {
            status: 404,
            code: Some(ErrorCode::NotFound),
        }
    }

    fn kinds(h: &History) -> Vec<ViolationKind> {
        check_history(h).into_iter().map(|v| v.kind).collect()
    }

    fn history(ops: Vec<Op>) -> History {
        History {
            ops,
            ..History::default()
        }
    }

    #[test]
    fn a_404_after_an_acknowledged_put_is_a_violation() {
        let h = history(vec![
            op(OpKind::Put, "A-1", "A", 0, 10, ok(201)),
            op(OpKind::Lookup, "A-1", "B", 20, 30, not_found()),
        ]);
        assert_eq!(kinds(&h), vec![ViolationKind::AcknowledgedThen404]);
        let v = &check_history(&h)[0];
        assert_eq!(v.id, "A-1");
        assert!(v.message.contains("lookup A-1 at B"), "{}", v.message);
    }

    #[test]
    fn a_404_concurrent_with_the_put_or_a_delete_is_allowed() {
        let h = history(vec![
            // The lookup started before the PUT was acknowledged.
            op(OpKind::Put, "A-1", "A", 0, 10, ok(201)),
            op(OpKind::Lookup, "A-1", "B", 5, 30, not_found()),
            // A DELETE (whose outcome is unknown) started before the lookup ended.
            op(OpKind::Put, "A-2", "A", 0, 10, ok(201)),
            op(
                OpKind::Delete,
                "A-2",
                "A",
                25,
                40,
                Outcome::Transport {
                    error: "reset".into(),
                },
            ),
            op(OpKind::Lookup, "A-2", "C", 20, 30, not_found()),
            // The PUT was refused: nothing to find.
            op(
                OpKind::Put,
                "A-3",
                "A",
                0,
                10,
                Outcome::Http {
                    status: 503,
                    code: Some(ErrorCode::CoordinatorUnavailable),
                },
            ),
            op(OpKind::Lookup, "A-3", "C", 20, 30, not_found()),
            // 503 and transport errors on lookups are not violations.
            op(
                OpKind::Lookup,
                "A-1",
                "C",
                40,
                50,
                Outcome::Http {
                    status: 503,
                    code: Some(ErrorCode::Unavailable),
                },
            ),
            op(
                OpKind::Lookup,
                "A-1",
                "C",
                40,
                50,
                Outcome::Transport {
                    error: "refused".into(),
                },
            ),
        ]);
        assert_eq!(kinds(&h), vec![]);
    }

    #[test]
    fn the_owner_answering_404_to_a_delete_is_a_lost_acknowledgement() {
        let h = history(vec![
            op(OpKind::Put, "B-1", "B", 0, 10, ok(201)),
            op(OpKind::Delete, "B-1", "B", 20, 30, not_found()),
        ]);
        assert_eq!(kinds(&h), vec![ViolationKind::AcknowledgedThen404]);
    }

    #[test]
    fn a_200_after_an_acknowledged_delete_is_a_violation() {
        let h = history(vec![
            op(OpKind::Put, "A-1", "A", 0, 10, ok(201)),
            op(OpKind::Delete, "A-1", "A", 20, 30, ok(204)),
            op(OpKind::Lookup, "A-1", "B", 25, 35, found("A")),
            op(OpKind::Lookup, "A-1", "C", 40, 50, found("A")),
        ]);
        // The first lookup overlaps the delete: allowed.
        let v = check_history(&h);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].kind, ViolationKind::DeletedThen200);
        assert_eq!(v[0].at_us, 40);
    }

    #[test]
    fn with_the_cache_a_200_shortly_after_a_delete_is_allowed() {
        let h = history(vec![
            op(OpKind::Put, "A-1", "A", 0, 10, ok(201)),
            op(OpKind::Delete, "A-1", "A", 20, 1_000_000, ok(204)),
            // 1.5 s after the delete's acknowledgement: within 1 s + 1 s.
            op(OpKind::Lookup, "A-1", "B", 2_500_000, 2_500_100, found("A")),
            // 2.5 s after: beyond.
            op(OpKind::Lookup, "A-1", "C", 3_500_000, 3_500_100, found("A")),
        ]);
        let (v, stale) = check_history_with(&h, &Rules::with_cache(1_000));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].kind, ViolationKind::DeletedThen200);
        assert_eq!(v[0].at_us, 3_500_000);
        assert_eq!(
            (
                stale.within,
                stale.max_within_us,
                stale.beyond,
                stale.max_beyond_us
            ),
            (1, 1_500_000, 1, 2_500_000)
        );
        // Without the cache both are violations.
        assert_eq!(check_history(&h).len(), 2);
    }

    #[test]
    fn a_put_that_may_land_after_the_delete_excuses_a_200() {
        let h = history(vec![
            op(OpKind::Put, "A-1", "A", 0, 10, ok(201)),
            op(OpKind::Delete, "A-1", "A", 20, 30, ok(204)),
            op(
                OpKind::Put,
                "A-1",
                "A",
                22,
                60,
                Outcome::Transport {
                    error: "timeout".into(),
                },
            ),
            op(OpKind::Lookup, "A-1", "C", 40, 50, found("A")),
        ]);
        assert_eq!(kinds(&h), vec![]);
    }

    #[test]
    fn found_never_written_and_wrong_owner_are_violations() {
        let h = history(vec![
            op(OpKind::Lookup, "never-1", "A", 0, 10, found("B")),
            op(OpKind::Put, "C-1", "C", 0, 10, ok(201)),
            op(OpKind::Lookup, "C-1", "A", 20, 30, found("B")),
        ]);
        assert_eq!(
            kinds(&h),
            vec![ViolationKind::Phantom, ViolationKind::WrongOwner]
        );
    }

    #[test]
    fn final_reads_must_find_every_acknowledged_undeleted_record() {
        let fin = |id: &str, outcome: Outcome| {
            let mut o = op(OpKind::Lookup, id, "B", 1000, 1010, outcome);
            o.worker = FINAL;
            o
        };
        let h = history(vec![
            op(OpKind::Put, "A-1", "A", 0, 10, ok(201)),
            op(OpKind::Put, "A-2", "A", 0, 10, ok(201)),
            op(OpKind::Put, "A-3", "A", 0, 10, ok(201)),
            op(
                OpKind::Delete,
                "A-3",
                "A",
                20,
                30,
                Outcome::Transport {
                    error: "reset".into(),
                },
            ),
            fin("A-1", found("A")),
            fin(
                "A-2",
                Outcome::Http {
                    status: 503,
                    code: Some(ErrorCode::Unavailable),
                },
            ),
            // A-3's fate is unknown: not checked.
            fin("A-3", not_found()),
        ]);
        let v = check_history(&h);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(
            (v[0].kind, v[0].id.as_str()),
            (ViolationKind::LostRecord, "A-2")
        );
    }

    fn searched(ids: &[&str]) -> Outcome {
        Outcome::Ok {
            status: 200,
            owner: None,
            cache: None,
            found: Some(ids.iter().map(|id| id.to_string()).collect()),
            request: None,
        }
    }

    #[test]
    fn a_search_must_return_every_acknowledged_record_of_its_person_and_no_deleted_one() {
        // Two records of one person (found by trying IDs), one of another.
        let person = crate::http::person_of("A-1");
        let same = (2..200)
            .map(|i| format!("B-{i}"))
            .find(|id| crate::http::person_of(id) == person)
            .unwrap();
        let other = (2..200)
            .map(|i| format!("C-{i}"))
            .find(|id| crate::http::person_of(id) != person)
            .unwrap();
        let puts = || {
            vec![
                op(OpKind::Put, "A-1", "A", 0, 10, ok(201)),
                op(OpKind::Put, &same, "B", 0, 10, ok(201)),
                op(OpKind::Put, &other, "C", 0, 10, ok(201)),
            ]
        };
        let search = |start, outcome| op(OpKind::Search, &person, "C", start, start + 10, outcome);

        let mut ops = puts();
        ops.push(search(20, searched(&["A-1", &same])));
        assert!(kinds(&history(ops)).is_empty());

        let mut ops = puts();
        ops.push(search(20, searched(&["A-1"])));
        assert_eq!(kinds(&history(ops)), [ViolationKind::SearchMissed]);

        // A delete started before the search ended excuses a miss; one
        // acknowledged before it started forbids the record.
        let mut ops = puts();
        ops.push(op(OpKind::Delete, &same, "B", 25, 40, ok(204)));
        ops.push(search(20, searched(&["A-1"])));
        ops.push(search(50, searched(&["A-1", &same])));
        assert_eq!(kinds(&history(ops)), [ViolationKind::SearchFoundDeleted]);

        // A 503 with what was found is not a violation; a record never
        // sent is.
        let mut ops = puts();
        ops.push(search(
            20,
            Outcome::Http {
                status: 503,
                code: Some(ErrorCode::Unavailable),
            },
        ));
        ops.push(search(30, searched(&["A-1", &same, "Z-9"])));
        assert_eq!(kinds(&history(ops)), [ViolationKind::Phantom]);
    }

    #[test]
    fn a_fault_without_convergence_is_reported() {
        let h = History {
            faults: vec![Fault {
                n: 3,
                kind: FaultKind::KillDomain,
                target: "B".into(),
                start_us: 0,
                healed_us: 10,
                whole_us: None,
                converged_us: None,
            }],
            ..History::default()
        };
        assert_eq!(kinds(&h), vec![ViolationKind::NotConverged]);
    }

    fn full() -> Outcome {
        Outcome::Http {
            status: 507,
            code: Some(ErrorCode::InsufficientStorage),
        }
    }

    #[test]
    fn a_record_found_whose_every_put_was_refused_for_space_is_a_violation() {
        let refused = vec![
            op(OpKind::Put, "A-1", "A", 0, 10, full()),
            op(OpKind::Lookup, "A-1", "B", 20, 30, found("A")),
        ];
        assert_eq!(kinds(&history(refused)), [ViolationKind::RefusedThenFound]);
        // A later PUT that was taken explains it.
        let retried = vec![
            op(OpKind::Put, "A-1", "A", 0, 10, full()),
            op(OpKind::Put, "A-1", "A", 11, 15, ok(201)),
            op(OpKind::Lookup, "A-1", "B", 20, 30, found("A")),
        ];
        assert!(kinds(&history(retried)).is_empty());
        // So does one whose outcome is unknown (a 500 may have landed).
        let unknown = vec![
            op(
                OpKind::Put,
                "A-1",
                "A",
                0,
                10,
                Outcome::Http {
                    status: 500,
                    code: Some(ErrorCode::Internal),
                },
            ),
            op(OpKind::Lookup, "A-1", "B", 20, 30, found("A")),
        ];
        assert!(kinds(&history(unknown)).is_empty());
    }

    #[test]
    fn writes_still_refused_for_space_long_after_the_disk_was_freed_are_a_violation() {
        let fill = |start_us, healed_us| Fault {
            n: 0,
            kind: FaultKind::FillDisk,
            target: "A".into(),
            start_us,
            healed_us,
            whole_us: Some(healed_us),
            converged_us: Some(healed_us),
        };
        let freed = 1_000_000;
        let put =
            |id: &str, start: u64, outcome| op(OpKind::Put, id, "A", start, start + 10, outcome);
        let soon = freed + RESUME_BOUND_US / 2;
        let late = freed + RESUME_BOUND_US + 1;
        let h = |ops, faults| History {
            ops,
            faults,
            ..History::default()
        };
        // Refused while full and just after: allowed.
        assert!(kinds(&h(
            vec![put("A-1", 10, full()), put("A-2", soon, full())],
            vec![fill(0, freed)]
        ))
        .is_empty());
        // Refused long after: not resumed.
        assert_eq!(
            kinds(&h(vec![put("A-3", late, full())], vec![fill(0, freed)])),
            [ViolationKind::WritesNotResumed]
        );
        // Unless the disk was filled again meanwhile.
        assert!(kinds(&h(
            vec![put("A-3", late, full())],
            vec![fill(0, freed), fill(late - 5, late + 100)]
        ))
        .is_empty());
        // Another domain's refusals say nothing of this one's disk.
        let elsewhere = op(OpKind::Put, "B-1", "B", late, late + 10, full());
        assert!(kinds(&h(vec![elsewhere], vec![fill(0, freed)])).is_empty());
    }
}
