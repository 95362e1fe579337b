//! The summary a run prints: its faults (writes refused during each,
//! convergence after each), operations by outcome, the final state (the
//! requests' fate among it), and the violations by kind with the first
//! few examples.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use crate::checker::ViolationKind;
use crate::history::{secs, Fault, FaultKind, History, OpKind, Outcome};
use crate::run::RunReport;
use xarchive_node::wire::CacheRoute;

/// How many faults the per-fault table lists (all kinds are summed below
/// it regardless).
const FAULT_ROWS: usize = 40;
/// How many examples of each kind of violation are printed.
const EXAMPLES: usize = 5;

/// Writes (PUT and DELETE) started while a fault was on: how many, how
/// many refused (503, or 507 for a full disk), how many with no answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Writes {
    pub total: usize,
    pub refused: usize,
    pub transport: usize,
}

impl Writes {
    fn add(&mut self, other: Writes) {
        self.total += other.total;
        self.refused += other.refused;
        self.transport += other.transport;
    }

    fn refused_percent(&self) -> String {
        if self.total == 0 {
            "-".to_owned()
        } else {
            format!("{:.0} %", 100.0 * self.refused as f64 / self.total as f64)
        }
    }
}

/// The writes started during `fault` (from its start to its heal).
pub fn writes_during(history: &History, fault: &Fault) -> Writes {
    let mut w = Writes::default();
    for op in &history.ops {
        if !matches!(op.kind, OpKind::Put | OpKind::Delete)
            || op.start_us < fault.start_us
            || op.start_us > fault.healed_us
        {
            continue;
        }
        w.total += 1;
        match op.outcome {
            Outcome::Http {
                status: 503 | 507, ..
            } => w.refused += 1,
            Outcome::Transport { .. } => w.transport += 1,
            _ => {}
        }
    }
    w
}

/// Seconds from the system being whole again (or, in histories without
/// that moment, from the heal) to convergence, if it converged.
pub fn convergence(fault: &Fault) -> Option<f64> {
    let from = fault.whole_us.unwrap_or(fault.healed_us);
    fault.converged_us.map(|c| secs(c.saturating_sub(from)))
}

/// Seconds from the fault's heal to the system being whole again: the
/// round's later heals, an ensemble's election, a domain's start.
pub fn to_whole(fault: &Fault) -> Option<f64> {
    fault
        .whole_us
        .map(|w| secs(w.saturating_sub(fault.healed_us)))
}

/// Seconds from a full disk's freeing to its domain's first write taken
/// afterwards (none if no write was sent to it since).
pub fn resumed_after(history: &History, fault: &Fault) -> Option<f64> {
    history
        .ops
        .iter()
        .filter(|op| {
            op.kind == OpKind::Put
                && op.domain == fault.target
                && op.start_us >= fault.healed_us
                && op.outcome.is_ok()
        })
        .map(|op| op.end_us - fault.healed_us)
        .min()
        .map(secs)
}

fn median(mut xs: Vec<f64>) -> Option<(f64, f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    Some((xs[0], xs[xs.len() / 2], xs[xs.len() - 1]))
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.history;
        let live = h
            .ops
            .iter()
            .filter(|o| o.worker != crate::checker::FINAL)
            .count();
        writeln!(f, "==== xarchive fault test ====")?;
        writeln!(
            f,
            "seed = {}   faults for {:.0} s   run took {:.0} s   {} faults   {} operations (+{} final reads)",
            self.seed,
            self.duration.as_secs_f64(),
            self.elapsed.as_secs_f64(),
            h.faults.len(),
            live,
            h.ops.len() - live
        )?;
        writeln!(
            f,
            "mode: {}, ZooKeeper {}, cache {}",
            if self.netns {
                "network namespaces"
            } else {
                "loopback"
            },
            if self.ensemble {
                "ensemble of 3"
            } else {
                "single server"
            },
            match self.rules.stale_window_us {
                Some(w) => format!(
                    "memory (a 200 after a delete allowed for {:.1} s: max_lag_ms + {} ms)",
                    secs(w),
                    crate::checker::Rules::CACHE_SLACK_MS
                ),
                None => "none".to_owned(),
            }
        )?;
        writeln!(f, "history: {}", self.history_path.display())?;

        writeln!(f, "\nFaults")?;
        writeln!(
            f,
            "  {:>3}  {:<20} {:<9} {:>8} {:>7} {:>7} {:>12} {:>9} {:>7} {:>10}",
            "#",
            "kind",
            "target",
            "start s",
            "held s",
            "writes",
            "503",
            "no answer",
            "whole s",
            "converge s"
        )?;
        for fault in h.faults.iter().take(FAULT_ROWS) {
            let w = writes_during(h, fault);
            writeln!(
                f,
                "  {:>3}  {:<20} {:<9} {:>8.1} {:>7.1} {:>7} {:>12} {:>9} {:>7} {:>10}",
                fault.n,
                fault.kind.to_string(),
                fault.target,
                secs(fault.start_us),
                secs(fault.healed_us.saturating_sub(fault.start_us)),
                w.total,
                format!("{} ({})", w.refused, w.refused_percent()),
                w.transport,
                to_whole(fault).map_or_else(|| "-".to_owned(), |c| format!("{c:.2}")),
                convergence(fault).map_or_else(|| "NEVER".to_owned(), |c| format!("{c:.2}")),
            )?;
        }
        if h.faults.len() > FAULT_ROWS {
            writeln!(f, "  ... {} more", h.faults.len() - FAULT_ROWS)?;
        }

        writeln!(f, "\nFaults by kind")?;
        writeln!(
            f,
            "  {:<20} {:>5} {:>7} {:>12} {:>9} {:>12}   converge s after whole (min / median / max)",
            "kind", "count", "writes", "503 refused", "no answer", "whole s max"
        )?;
        for kind in FaultKind::ALL {
            let of_kind: Vec<&Fault> = h.faults.iter().filter(|x| x.kind == kind).collect();
            if of_kind.is_empty() {
                continue;
            }
            let mut w = Writes::default();
            for fault in &of_kind {
                w.add(writes_during(h, fault));
            }
            let conv = median(of_kind.iter().filter_map(|x| convergence(x)).collect());
            let whole = median(of_kind.iter().filter_map(|x| to_whole(x)).collect());
            let never = of_kind.iter().filter(|x| x.converged_us.is_none()).count();
            let mut conv_text = conv.map_or_else(
                || "-".to_owned(),
                |(lo, mid, hi)| format!("{lo:.2} / {mid:.2} / {hi:.2}"),
            );
            if never > 0 {
                let _ = write!(conv_text, "   ({never} NEVER)");
            }
            writeln!(
                f,
                "  {:<20} {:>5} {:>7} {:>12} {:>9} {:>12}   {}",
                kind.to_string(),
                of_kind.len(),
                w.total,
                format!("{} ({})", w.refused, w.refused_percent()),
                w.transport,
                whole.map_or_else(|| "-".to_owned(), |(_, _, hi)| format!("{hi:.2}")),
                conv_text
            )?;
        }

        writeln!(f, "\nOperations by outcome (during the faults)")?;
        let mut by: BTreeMap<(OpKind, String), usize> = BTreeMap::new();
        for op in h.ops.iter().filter(|o| o.worker != crate::checker::FINAL) {
            *by.entry((op.kind, op.outcome.class())).or_default() += 1;
        }
        for ((kind, class), n) in &by {
            writeln!(f, "  {:<7} {:<32} {:>8}", kind.to_string(), class, n)?;
        }
        let lookups = |p: &dyn Fn(&Outcome) -> bool| {
            h.ops
                .iter()
                .filter(|o| o.worker != crate::checker::FINAL && o.kind == OpKind::Lookup)
                .filter(|o| p(&o.outcome))
                .count()
        };
        writeln!(
            f,
            "  lookups without an answer (allowed, not violations): {} answered 503, {} transport errors",
            lookups(&|o| o.status() == Some(503)),
            lookups(&|o| matches!(o, Outcome::Transport { .. }))
        )?;
        let hits =
            lookups(&|o| matches!(o, Outcome::Ok { cache: Some(c), .. } if *c == CacheRoute::Hit));
        writeln!(
            f,
            "  lookups answered from the cache (route.cache = hit): {hits}"
        )?;
        let st = &self.stale;
        writeln!(
            f,
            "  200 after an acknowledged delete: {} within the allowed window (largest delay {:.3} s, {} cache hits), {} beyond it (largest delay {:.3} s)",
            st.within,
            secs(st.max_within_us),
            st.within_cache_hits,
            st.beyond,
            secs(st.max_beyond_us)
        )?;

        let resumed = median(
            h.faults
                .iter()
                .filter(|x| x.kind == FaultKind::FillDisk)
                .filter_map(|x| resumed_after(h, x))
                .collect(),
        );
        if let Some((lo, mid, hi)) = resumed {
            writeln!(
                f,
                "  a full disk freed: its domain's first write taken {lo:.3} / {mid:.3} / {hi:.3} s after (min / median / max)"
            )?;
        }

        writeln!(f, "\nFinal state")?;
        match &self.final_convergence {
            Ok(d) => writeln!(
                f,
                "  converged {:.2} s after the faults ended",
                d.as_secs_f64()
            )?,
            Err(why) => writeln!(f, "  NOT converged: {why}")?,
        }
        writeln!(
            f,
            "  {} acknowledged, never deleted records read at their owner and looked up at every domain",
            self.final_ids
        )?;
        let r = &self.requests;
        writeln!(
            f,
            "  requests submitted: {} ({} acknowledged 201, {} refused 503, {} refused otherwise, {} without an answer: {} of those registered after all)",
            r.submitted, r.acknowledged, r.refused_503, r.refused_other, r.unknown, r.unknown_registered
        )?;
        writeln!(
            f,
            "  requests listed at the end: {} ({} answered: {} parts released, {} refused, {} not answered); {} of the {} acknowledged read back",
            r.listed, r.answered, r.parts_released, r.parts_refused, r.parts_open, r.read_back, r.acknowledged
        )?;
        match &self.requests_answered {
            Ok(d) => writeln!(
                f,
                "  every part of every request answered {:.2} s after the records were read back",
                d.as_secs_f64()
            )?,
            Err(why) => writeln!(f, "  requests NOT all answered: {why}")?,
        }
        for v in &self.verified {
            match &v.answer {
                Ok(r) => writeln!(
                    f,
                    "  {} /v1/filter/verify: consistent {}, {} records, {} filter items, {} missing",
                    v.domain, r.consistent, r.store_records, r.filter_items, r.missing
                )?,
                Err(e) => writeln!(f, "  {} /v1/filter/verify failed: {e}", v.domain)?,
            }
        }

        writeln!(f, "\nViolations: {}", self.violations.len())?;
        for kind in ViolationKind::ALL {
            writeln!(f, "  {:<22} {:>6}", kind.to_string(), self.count(kind))?;
        }
        for kind in ViolationKind::ALL {
            let examples: Vec<_> = self
                .violations
                .iter()
                .filter(|v| v.kind == kind)
                .take(EXAMPLES)
                .collect();
            if examples.is_empty() {
                continue;
            }
            writeln!(f, "\n  first {kind} examples:")?;
            for v in examples {
                writeln!(f, "    {}", v.message)?;
                if let Some(fault) = h
                    .faults
                    .iter()
                    .filter(|x| x.start_us <= v.at_us)
                    .max_by_key(|x| x.start_us)
                {
                    writeln!(
                        f,
                        "      latest fault before it: #{} {} {} from {:.3} s, healed {:.3} s",
                        fault.n,
                        fault.kind,
                        fault.target,
                        secs(fault.start_us),
                        secs(fault.healed_us)
                    )?;
                }
            }
        }
        writeln!(
            f,
            "\n{}",
            if self.passed() {
                "PASSED: no violations"
            } else {
                "FAILED: violations found"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Op;
    use xarchive_node::wire::ErrorCode;

    #[test]
    fn writes_during_a_fault_count_refusals_and_unknowns() {
        let op = |start, outcome| Op {
            worker: 1,
            kind: OpKind::Put,
            id: "A-1".into(),
            domain: "A".into(),
            start_us: start,
            end_us: start + 1,
            outcome,
            records: Vec::new(),
        };
        let h = History {
            ops: vec![
                op(
                    5,
                    Outcome::Ok {
                        status: 201,
                        owner: None,
                        cache: None,
                        found: None,
                        request: None,
                    },
                ),
                op(
                    15,
                    Outcome::Http {
                        status: 503,
                        code: Some(ErrorCode::CoordinatorUnavailable),
                    },
                ),
                op(
                    16,
                    Outcome::Transport {
                        error: "reset".into(),
                    },
                ),
                op(
                    17,
                    Outcome::Ok {
                        status: 201,
                        owner: None,
                        cache: None,
                        found: None,
                        request: None,
                    },
                ),
                op(
                    40,
                    Outcome::Ok {
                        status: 201,
                        owner: None,
                        cache: None,
                        found: None,
                        request: None,
                    },
                ),
            ],
            ..History::default()
        };
        let fault = Fault {
            n: 0,
            kind: FaultKind::KillZooKeeper,
            target: "zk".into(),
            start_us: 10,
            healed_us: 30,
            whole_us: Some(530),
            converged_us: Some(1_030),
        };
        let w = writes_during(&h, &fault);
        assert_eq!(
            w,
            Writes {
                total: 3,
                refused: 1,
                transport: 1
            }
        );
        assert_eq!(w.refused_percent(), "33 %");
        assert_eq!(to_whole(&fault), Some(0.0005));
        assert_eq!(convergence(&fault), Some(0.0005));
        let before_whole_was_recorded = Fault {
            whole_us: None,
            ..fault
        };
        assert_eq!(convergence(&before_whole_was_recorded), Some(0.001));
    }
}
