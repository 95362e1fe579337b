//! The rule over cross-archive requests, part of the checker: every
//! request whose submit was acknowledged ends answered exactly once, and
//! none is lost. What it reads is the history: the submits (each named by
//! the `purpose` it sent), the final reads of acknowledged requests, the
//! requests each receiving domain listed once every fault had healed, and
//! the request steps in every domain's audit log read after those.
//!
//! For each request the receiving domain still has (every acknowledged
//! one must; one whose submit got no answer may), each part must be final
//! (released or refused), taken in once by its holding domain (exactly one
//! `request_released`, `request_refused` or `request_referred_to_review`
//! entry from that receiving domain in the holding domain's log) and its
//! answer taken in once by the receiving domain (exactly one
//! `copies_received` or `refusal_received` from that holding domain in
//! the receiving domain's log). The workload's records are the
//! applicant's own open marriage records, which the default release
//! policy releases without review: so a part must have a copy of each of
//! its records that no delete may have removed, and must be sent to the
//! domain the records were put at. A request registered though its
//! submit was refused with a promise that nothing changed (503
//! `unavailable`, 507) breaks the rule too.
//!
//! And what the citizen carries away: no part, and no request, ends
//! `refused` unless a holding domain's reviewer refused it
//! (`review_refused` in its log; the workload's records are released by
//! the policy, so never); no copy is shown as no longer checking; and the
//! certificate the final checks issue for each answered request checks
//! at another domain, by its code and by its payload.

use std::collections::{BTreeSet, HashMap};

use crate::history::{secs, History, Op, OpKind, Outcome, PartSeen, RequestSeen};
use crate::violation::{Violation, ViolationKind, FINAL};
use xarchive_node::wire::{HoldingState, RequestStatus};

/// The holding domain's audit actions for taking a part in (one of them,
/// once, whatever its answer).
pub const TAKE_INS: [&str; 4] = [
    "request_released",
    "request_none_held",
    "request_refused",
    "request_referred_to_review",
];

/// The receiving domain's audit actions for taking a final answer in.
pub const RECEIPTS: [&str; 3] = ["copies_received", "refusal_received", "none_held_received"];

/// The holding domain's audit action for a reviewer's refusal: the one
/// thing that may make a part `refused`.
pub const REFUSALS: [&str; 1] = ["review_refused"];

/// How the requests of a run went, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Submits sent by the workload.
    pub submitted: usize,
    /// Answered 201.
    pub acknowledged: usize,
    /// Answered 503 (a holding domain could not be asked; nothing was
    /// registered).
    pub refused_503: usize,
    /// Refused otherwise with a promise that nothing changed (400, 507).
    pub refused_other: usize,
    /// No answer, or one that leaves the effect unknown.
    pub unknown: usize,
    /// Of those, how many the final checks found registered.
    pub unknown_registered: usize,
    /// Acknowledged requests read back (200) at their receiving domain.
    pub read_back: usize,
    /// Requests the receiving domains listed at the end.
    pub listed: usize,
    /// Of those, how many had every part answered (released or refused;
    /// a certified request was answered first).
    pub answered: usize,
    /// Parts released, refused, answered as none held, and not answered,
    /// over every listed request.
    pub parts_released: usize,
    pub parts_refused: usize,
    pub parts_none_held: usize,
    pub parts_open: usize,
    /// Certificates the final checks issued, and of those how many
    /// checked at another domain.
    pub certified: usize,
    pub certificates_checked: usize,
}

/// Counts the history's requests.
pub fn request_counts(history: &History) -> RequestCounts {
    let mut c = RequestCounts::default();
    let listed: BTreeSet<&str> = history
        .requests
        .iter()
        .map(|r| r.purpose.as_str())
        .collect();
    for op in history.ops.iter().filter(|o| o.kind == OpKind::Submit) {
        c.submitted += 1;
        match &op.outcome {
            Outcome::Ok { .. } => c.acknowledged += 1,
            Outcome::Http { status: 503, .. } if op.was_refused() => c.refused_503 += 1,
            _ if op.was_refused() => c.refused_other += 1,
            _ => {
                c.unknown += 1;
                if listed.contains(op.id.as_str()) {
                    c.unknown_registered += 1;
                }
            }
        }
    }
    c.read_back = history
        .ops
        .iter()
        .filter(|o| o.kind == OpKind::Request && o.worker == FINAL && o.outcome.is_ok())
        .count();
    c.listed = history.requests.len();
    for r in &history.requests {
        if matches!(
            r.status,
            RequestStatus::Answered
                | RequestStatus::Refused
                | RequestStatus::NoRecords
                | RequestStatus::Certified
        ) {
            c.answered += 1;
        }
        c.parts_open += r.awaiting as usize;
        for part in &r.parts {
            match part.state {
                HoldingState::Released => c.parts_released += 1,
                HoldingState::Refused => c.parts_refused += 1,
                HoldingState::NoneHeld => c.parts_none_held += 1,
                HoldingState::Pending | HoldingState::InReview => c.parts_open += 1,
            }
        }
        if let Some(certificate) = &r.certificate {
            c.certified += 1;
            if certificate.problem.is_none() {
                c.certificates_checked += 1;
            }
        }
    }
    c
}

/// What the rule reads of the history, by key.
struct Index<'a> {
    /// Submits by the name they sent as the purpose.
    submits: HashMap<&'a str, &'a Op>,
    /// The final reads of each request ID.
    reads: HashMap<&'a str, Vec<&'a Op>>,
    /// The requests listed at the end, by purpose.
    listed: HashMap<&'a str, Vec<&'a RequestSeen>>,
    /// Take-ins logged: (holding, receiving, request) → how many.
    take_ins: HashMap<(&'a str, &'a str, &'a str), usize>,
    /// Answers logged as received: (receiving, holding, request) → how many.
    receipts: HashMap<(&'a str, &'a str, &'a str), usize>,
    /// Refusals logged by reviewers: (holding, receiving, request).
    refusals: HashMap<(&'a str, &'a str, &'a str), usize>,
    /// The workload's PUTs and DELETEs of each record.
    puts: HashMap<&'a str, Vec<&'a Op>>,
    deletes: HashMap<&'a str, Vec<&'a Op>>,
}

impl<'a> Index<'a> {
    fn of(history: &'a History) -> Index<'a> {
        let mut ix = Index {
            submits: HashMap::new(),
            reads: HashMap::new(),
            listed: HashMap::new(),
            take_ins: HashMap::new(),
            receipts: HashMap::new(),
            refusals: HashMap::new(),
            puts: HashMap::new(),
            deletes: HashMap::new(),
        };
        for op in &history.ops {
            match op.kind {
                OpKind::Submit if op.worker != FINAL => {
                    ix.submits.insert(op.id.as_str(), op);
                }
                OpKind::Request if op.worker == FINAL => {
                    ix.reads.entry(op.id.as_str()).or_default().push(op);
                }
                OpKind::Put if op.worker != FINAL => {
                    ix.puts.entry(op.id.as_str()).or_default().push(op);
                }
                OpKind::Delete => ix.deletes.entry(op.id.as_str()).or_default().push(op),
                _ => {}
            }
        }
        for r in &history.requests {
            ix.listed.entry(r.purpose.as_str()).or_default().push(r);
        }
        for s in &history.steps {
            let key = (s.domain.as_str(), s.by.as_str(), s.request.as_str());
            if TAKE_INS.contains(&s.action.as_str()) {
                *ix.take_ins.entry(key).or_default() += 1;
            } else if RECEIPTS.contains(&s.action.as_str()) {
                *ix.receipts.entry(key).or_default() += 1;
            } else if REFUSALS.contains(&s.action.as_str()) {
                *ix.refusals.entry(key).or_default() += 1;
            }
        }
        ix
    }

    /// The PUT of `record` acknowledged before `us`, if any.
    fn acked_before(&self, record: &str, us: u64) -> Option<&'a Op> {
        self.puts
            .get(record)?
            .iter()
            .find(|p| p.outcome.is_ok() && p.end_us < us)
            .copied()
    }

    /// Whether a DELETE of `record` may have removed it (one not refused
    /// with a promise that nothing changed), at any time.
    fn may_be_deleted(&self, record: &str) -> bool {
        self.deletes
            .get(record)
            .is_some_and(|ds| ds.iter().any(|d| !d.was_refused()))
    }

    /// Whether a DELETE of `record` started before `us`.
    fn delete_started_before(&self, record: &str, us: u64) -> bool {
        self.deletes
            .get(record)
            .is_some_and(|ds| ds.iter().any(|d| d.start_us < us))
    }
}

/// Every violation of the rule in the history (see the module's doc).
pub fn check_requests(history: &History, found: &mut Vec<Violation>) {
    let ix = Index::of(history);
    let mut push = |kind, id: &str, at_us, message: String| {
        found.push(Violation {
            kind,
            id: id.to_owned(),
            at_us,
            message,
        });
    };
    let mut submits: Vec<&Op> = ix.submits.values().copied().collect();
    submits.sort_by_key(|s| (s.start_us, s.id.as_str()));
    for s in submits {
        let listed: Vec<&RequestSeen> = ix
            .listed
            .get(s.id.as_str())
            .map(|l| l.iter().copied().filter(|r| r.domain == s.domain).collect())
            .unwrap_or_default();
        if listed.len() > 1 {
            let ids: Vec<&str> = listed.iter().map(|r| r.id.as_str()).collect();
            push(
                ViolationKind::Phantom,
                &s.id,
                s.start_us,
                format!(
                    "{s}; but {} requests came of it: {}",
                    ids.len(),
                    ids.join(", ")
                ),
            );
        }
        match &s.outcome {
            Outcome::Ok { request, .. } => {
                let read = request
                    .as_deref()
                    .and_then(|id| ix.reads.get(id))
                    .and_then(|reads| {
                        reads
                            .iter()
                            .filter(|r| r.domain == s.domain)
                            .max_by_key(|r| r.end_us)
                    });
                if let Some(read) = read.filter(|r| !r.outcome.is_ok()) {
                    push(
                        ViolationKind::RequestLost,
                        &s.id,
                        read.start_us,
                        format!("after healing: {read}; but acknowledged: {s}"),
                    );
                    continue;
                }
                if listed.is_empty() {
                    let read = read.map_or_else(|| "not read back".to_owned(), ToString::to_string);
                    push(
                        ViolationKind::RequestLost,
                        &s.id,
                        s.start_us,
                        format!(
                            "after healing, {} did not list it ({read}); but acknowledged: {s}",
                            s.domain
                        ),
                    );
                    continue;
                }
            }
            _ if s.was_refused() => {
                if let Some(r) = listed.first() {
                    push(
                        ViolationKind::RefusedThenFound,
                        &s.id,
                        s.start_us,
                        format!(
                            "{s}; but {} registered it as request {} ({:?})",
                            r.domain, r.id, r.status
                        ),
                    );
                }
                continue;
            }
            // No answer: it may or may not be registered.
            _ => {}
        }
        if let Some(r) = listed.first() {
            check_request(s, r, &ix, &mut push);
        }
    }
    for r in &history.requests {
        let from = ix.submits.get(r.purpose.as_str());
        if from.is_none_or(|s| s.domain != r.domain) {
            push(
                ViolationKind::Phantom,
                &r.id,
                0,
                format!(
                    "request {} ({:?}) listed at {}: no submit there sent its purpose",
                    r.id, r.purpose, r.domain
                ),
            );
        }
    }
}

/// The rule for one request `r` the receiving domain listed, submitted by
/// `s`.
fn check_request(
    s: &Op,
    r: &RequestSeen,
    ix: &Index<'_>,
    push: &mut impl FnMut(ViolationKind, &str, u64, String),
) {
    let (at, name) = (s.start_us, s.id.as_str());
    let listed: BTreeSet<&str> = r
        .parts
        .iter()
        .flat_map(|p| p.records.iter())
        .chain(&r.not_found)
        .map(String::as_str)
        .collect();
    let asked: BTreeSet<&str> = s.records.iter().map(String::as_str).collect();
    // A part not answered for good is not named (nor its records).
    if r.awaiting > 0 {
        push(
            ViolationKind::RequestUnanswered,
            name,
            at,
            format!(
                "{s}; after healing, request {} still waits for {} holding domains",
                r.id, r.awaiting
            ),
        );
    } else if listed != asked {
        push(
            ViolationKind::RequestMisanswered,
            name,
            at,
            format!("{s}; but request {} holds {listed:?}", r.id),
        );
    }
    // The records were looked up before the receiving domain registered
    // the request, which may be after its clerk gave up waiting (a submit
    // sent while a link was cut is read once it heals): a delete started
    // by then may be why one was found nowhere.
    let looked_up_by = r.registered_us.map_or(s.end_us, |at| at.max(s.end_us));
    let registered = r.registered_us.map_or_else(
        || "at an unknown time".to_owned(),
        |us| format!("at {:.3} s", secs(us)),
    );
    for record in &r.not_found {
        if let Some(p) = ix.acked_before(record, s.start_us) {
            if !ix.delete_started_before(record, looked_up_by) {
                push(
                    ViolationKind::AcknowledgedThen404,
                    name,
                    at,
                    format!(
                        "{s}; request {} (registered {registered}) found no domain holding \
                         {record}; but acknowledged: {p}",
                        r.id
                    ),
                );
            }
        }
    }
    let refused_parts = r.parts.iter().any(|p| p.state == HoldingState::Refused);
    if r.status == RequestStatus::Refused && !refused_parts {
        push(
            ViolationKind::FalseRefusal,
            name,
            at,
            format!(
                "{s}; request {} is refused, but no holding domain refused it",
                r.id
            ),
        );
    }
    if let Some(problem) = r.certificate.as_ref().and_then(|c| c.problem.as_ref()) {
        push(
            ViolationKind::CertificateFails,
            name,
            at,
            format!("{s}; the certificate of request {}: {problem}", r.id),
        );
    }
    for part in &r.parts {
        check_part(s, r, part, ix, push);
    }
}

/// The rule for one part of request `r`.
fn check_part(
    s: &Op,
    r: &RequestSeen,
    part: &PartSeen,
    ix: &Index<'_>,
    push: &mut impl FnMut(ViolationKind, &str, u64, String),
) {
    let (at, name) = (s.start_us, s.id.as_str());
    let (holding, receiving) = (part.holding.as_str(), r.domain.as_str());
    let what = format!("request {} from {receiving} at {holding}", r.id);
    if part.state == HoldingState::Refused
        && !ix
            .refusals
            .contains_key(&(holding, receiving, r.id.as_str()))
    {
        push(
            ViolationKind::FalseRefusal,
            name,
            at,
            format!("{s}; {what} is refused, but {holding}'s log has no reviewer refusing it"),
        );
    }
    if !part.invalid.is_empty() {
        push(
            ViolationKind::CertificateFails,
            name,
            at,
            format!(
                "{s}; {what}: {receiving} shows the copies of {} as no longer checking",
                part.invalid.join(", ")
            ),
        );
    }
    for record in &part.records {
        let elsewhere = ix
            .puts
            .get(record.as_str())
            .and_then(|ps| ps.iter().find(|p| p.domain != holding));
        if let Some(p) = elsewhere {
            push(
                ViolationKind::RequestMisanswered,
                name,
                at,
                format!(
                    "{s}; {what}: {record} was sent there, but put at {}: {p}",
                    p.domain
                ),
            );
        }
    }
    if !part.state.is_final() {
        push(
            ViolationKind::RequestUnanswered,
            name,
            at,
            format!("{s}; after healing, {what} is still {:?}", part.state),
        );
        return;
    }
    let taken_in = ix
        .take_ins
        .get(&(holding, receiving, r.id.as_str()))
        .copied()
        .unwrap_or(0);
    let received = ix
        .receipts
        .get(&(receiving, holding, r.id.as_str()))
        .copied()
        .unwrap_or(0);
    let logged = format!(
        "{:?}; {holding}'s audit log takes it in {taken_in} times, {receiving}'s receives the answer {received} times",
        part.state
    );
    if taken_in > 1 || received > 1 {
        push(
            ViolationKind::RequestAnsweredTwice,
            name,
            at,
            format!("{s}; {what} is {logged}"),
        );
    }
    if taken_in == 0 || received == 0 {
        push(
            ViolationKind::RequestUnanswered,
            name,
            at,
            format!("{s}; {what} is {logged}"),
        );
    }
    // The default policy releases the applicant's own open marriage
    // records: each one acknowledged that no delete may have removed
    // comes back as a copy.
    let withheld: Vec<&str> = part
        .records
        .iter()
        .filter(|rec| ix.acked_before(rec, s.start_us).is_some())
        .filter(|rec| !ix.may_be_deleted(rec))
        .filter(|rec| !part.copies.contains(rec))
        .map(String::as_str)
        .collect();
    if !withheld.is_empty() {
        push(
            ViolationKind::RequestMisanswered,
            name,
            at,
            format!(
                "{s}; {what} is {:?} without a copy of {} (acknowledged, never deleted, released by the policy)",
                part.state,
                withheld.join(", ")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::check_history;
    use crate::history::{op, CertificateSeen, StepSeen};
    use xarchive_node::wire::ErrorCode;

    fn ok(status: u16, request: Option<&str>) -> Outcome {
        Outcome::Ok {
            status,
            owner: None,
            cache: None,
            found: None,
            request: request.map(str::to_owned),
        }
    }

    fn unavailable() -> Outcome {
        Outcome::Http {
            status: 503,
            code: Some(ErrorCode::Unavailable),
        }
    }

    fn reset() -> Outcome {
        Outcome::Transport {
            error: "request: connection reset".into(),
        }
    }

    /// `request-1` submitted at A for B's `B-1` (acknowledged as `r1`).
    fn submit(outcome: Outcome) -> Op {
        let mut s = op(OpKind::Submit, "request-1", "A", 20, 30, outcome);
        s.records = vec!["B-1".into()];
        s
    }

    fn read_back(outcome: Outcome) -> Op {
        let mut r = op(OpKind::Request, "r1", "A", 1_000, 1_010, outcome);
        r.worker = FINAL;
        r
    }

    fn listed(state: HoldingState) -> RequestSeen {
        let released = state == HoldingState::Released;
        RequestSeen {
            domain: "A".into(),
            id: "r1".into(),
            purpose: "request-1".into(),
            status: RequestStatus::of([state]),
            awaiting: u32::from(!state.is_final()),
            // A part not answered for good is only counted.
            parts: [PartSeen {
                holding: "B".into(),
                state,
                records: vec!["B-1".into()],
                copies: if released {
                    vec!["B-1".into()]
                } else {
                    Vec::new()
                },
                missing: Vec::new(),
                invalid: Vec::new(),
            }]
            .into_iter()
            .filter(|p| p.state.is_final())
            .collect(),
            not_found: Vec::new(),
            registered_us: None,
            certificate: None,
        }
    }

    fn step(domain: &str, action: &str, by: &str) -> StepSeen {
        StepSeen {
            domain: domain.into(),
            action: action.into(),
            request: "r1".into(),
            by: by.into(),
            at_us: 0,
        }
    }

    /// B's record put and acknowledged, a request for it acknowledged at
    /// A and read back, listed as `state`, with these audit steps.
    fn run(state: HoldingState, steps: Vec<StepSeen>) -> History {
        History {
            ops: vec![
                op(OpKind::Put, "B-1", "B", 0, 10, ok(201, None)),
                submit(ok(201, Some("r1"))),
                read_back(ok(200, Some("r1"))),
            ],
            faults: Vec::new(),
            requests: vec![listed(state)],
            steps,
        }
    }

    fn answered_once() -> Vec<StepSeen> {
        vec![
            step("A", "request_submitted", "A"),
            step("B", "request_released", "A"),
            step("A", "copies_received", "B"),
        ]
    }

    fn kinds(h: &History) -> Vec<ViolationKind> {
        check_history(h).into_iter().map(|v| v.kind).collect()
    }

    #[test]
    fn a_request_released_and_logged_once_at_each_end_keeps_the_rule() {
        let h = run(HoldingState::Released, answered_once());
        assert_eq!(kinds(&h), []);
        let c = request_counts(&h);
        assert_eq!(
            (
                c.submitted,
                c.acknowledged,
                c.read_back,
                c.answered,
                c.parts_released
            ),
            (1, 1, 1, 1, 1)
        );
    }

    #[test]
    fn a_request_answered_twice_breaks_the_rule() {
        // Taken in twice by the holding domain.
        let mut steps = answered_once();
        steps.push(step("B", "request_released", "A"));
        let v = check_history(&run(HoldingState::Released, steps));
        assert_eq!(
            v.iter().map(|v| v.kind).collect::<Vec<_>>(),
            [ViolationKind::RequestAnsweredTwice]
        );
        assert!(
            v[0].message.contains("takes it in 2 times"),
            "{}",
            v[0].message
        );
        // Its answer taken in twice by the receiving domain.
        let mut steps = answered_once();
        steps.push(step("A", "refusal_received", "B"));
        assert_eq!(
            kinds(&run(HoldingState::Released, steps)),
            [ViolationKind::RequestAnsweredTwice]
        );
        // Another receiving domain's request of the same ID, or the
        // receiving domain's own steps, are not a second take-in.
        let mut steps = answered_once();
        steps.push(step("B", "request_released", "C"));
        steps.push(step("A", "in_review_there", "B"));
        assert_eq!(kinds(&run(HoldingState::Released, steps)), []);
    }

    #[test]
    fn an_acknowledged_request_gone_after_healing_is_lost() {
        let mut h = run(HoldingState::Released, answered_once());
        h.ops[2] = read_back(Outcome::Http {
            status: 404,
            code: Some(ErrorCode::RequestNotFound),
        });
        h.requests.clear();
        assert_eq!(kinds(&h), [ViolationKind::RequestLost]);
        // Read back, or not read back at all, but not in the list.
        let mut h = run(HoldingState::Released, answered_once());
        h.requests.clear();
        assert_eq!(kinds(&h), [ViolationKind::RequestLost]);
        h.ops.pop();
        assert_eq!(kinds(&h), [ViolationKind::RequestLost]);
    }

    #[test]
    fn a_part_never_answered_or_answered_unlogged_breaks_the_rule() {
        let pending = run(
            HoldingState::Pending,
            vec![step("A", "request_submitted", "A")],
        );
        assert_eq!(kinds(&pending), [ViolationKind::RequestUnanswered]);
        assert_eq!(request_counts(&pending).parts_open, 1);
        let review = run(HoldingState::InReview, answered_once());
        assert_eq!(kinds(&review), [ViolationKind::RequestUnanswered]);
        // Final at the receiving domain, with no take-in in the holding
        // domain's log.
        let unlogged = run(
            HoldingState::Released,
            vec![step("A", "copies_received", "B")],
        );
        assert_eq!(kinds(&unlogged), [ViolationKind::RequestUnanswered]);
    }

    #[test]
    fn a_refusal_of_a_record_the_policy_releases_breaks_the_rule_unless_it_may_be_deleted() {
        let refused = |deletes: Vec<Op>| {
            let mut h = run(
                HoldingState::Refused,
                vec![
                    step("B", "request_referred_to_review", "A"),
                    step("B", "review_refused", "A"),
                    step("A", "refusal_received", "B"),
                ],
            );
            h.ops.extend(deletes);
            h
        };
        assert_eq!(
            kinds(&refused(Vec::new())),
            [ViolationKind::RequestMisanswered]
        );
        // A delete with no answer may have removed the record.
        let gone = op(OpKind::Delete, "B-1", "B", 25, 40, reset());
        assert_eq!(kinds(&refused(vec![gone])), []);
        // One refused with a promise that nothing changed did not.
        let kept = op(OpKind::Delete, "B-1", "B", 25, 40, unavailable());
        assert_eq!(
            kinds(&refused(vec![kept])),
            [ViolationKind::RequestMisanswered]
        );
    }

    #[test]
    fn a_part_sent_to_a_domain_that_does_not_hold_its_record_breaks_the_rule() {
        let mut h = run(HoldingState::Released, Vec::new());
        h.requests[0].parts[0].holding = "C".into();
        h.steps = vec![
            step("C", "request_released", "A"),
            step("A", "copies_received", "C"),
        ];
        assert_eq!(kinds(&h), [ViolationKind::RequestMisanswered]);
    }

    #[test]
    fn an_acknowledged_record_a_request_found_nowhere_is_a_false_not_found() {
        let mut h = run(HoldingState::Released, Vec::new());
        h.requests[0].parts.clear();
        h.requests[0].status = RequestStatus::NoRecords;
        h.requests[0].not_found = vec!["B-1".into()];
        assert_eq!(kinds(&h), [ViolationKind::AcknowledgedThen404]);
    }

    /// The partitions test's seed 20261139 once: the clerk's submit sent
    /// while the receiving domain's link was cut timed out, and the
    /// domain read it once the link healed, after a delete of one of its
    /// records had begun.
    #[test]
    fn a_record_deleted_before_a_timed_out_submit_was_registered_may_be_found_nowhere() {
        let history = |registered_us| History {
            ops: vec![
                op(OpKind::Put, "B-1", "B", 0, 10, ok(201, None)),
                submit(reset()),
                op(OpKind::Delete, "B-1", "B", 40, 45, ok(204, None)),
            ],
            faults: Vec::new(),
            requests: vec![RequestSeen {
                status: RequestStatus::NoRecords,
                parts: Vec::new(),
                awaiting: 0,
                not_found: vec!["B-1".into()],
                registered_us,
                ..listed(HoldingState::Released)
            }],
            steps: vec![step("A", "request_submitted", "A")],
        };
        // The clerk gave up at 30; registered at 50, after the delete began.
        assert_eq!(kinds(&history(Some(50))), []);
        // Registered at 35, before the delete: the record was there.
        assert_eq!(
            kinds(&history(Some(35))),
            [ViolationKind::AcknowledgedThen404]
        );
        // When it was registered is not known: the clerk's wait bounds it.
        assert_eq!(kinds(&history(None)), [ViolationKind::AcknowledgedThen404]);
    }

    #[test]
    fn a_refused_submit_must_register_nothing_and_one_without_an_answer_may() {
        let h = |outcome: Outcome, requests: Vec<RequestSeen>, steps| History {
            ops: vec![
                op(OpKind::Put, "B-1", "B", 0, 10, ok(201, None)),
                submit(outcome),
            ],
            faults: Vec::new(),
            requests,
            steps,
        };
        // Refused: nothing registered, nothing to check.
        let refused = h(unavailable(), Vec::new(), Vec::new());
        assert_eq!(kinds(&refused), []);
        assert_eq!(request_counts(&refused).refused_503, 1);
        // Refused, yet registered.
        let registered = h(
            unavailable(),
            vec![listed(HoldingState::Released)],
            answered_once(),
        );
        assert_eq!(kinds(&registered), [ViolationKind::RefusedThenFound]);
        // No answer: absent is fine; present, it keeps the same rule.
        assert_eq!(kinds(&h(reset(), Vec::new(), Vec::new())), []);
        let answered = h(
            reset(),
            vec![listed(HoldingState::Released)],
            answered_once(),
        );
        assert_eq!(kinds(&answered), []);
        let c = request_counts(&answered);
        assert_eq!((c.unknown, c.unknown_registered), (1, 1));
        let twice = {
            let mut steps = answered_once();
            steps.push(step("A", "copies_received", "B"));
            h(reset(), vec![listed(HoldingState::Released)], steps)
        };
        assert_eq!(kinds(&twice), [ViolationKind::RequestAnsweredTwice]);
    }

    #[test]
    fn a_request_no_submit_sent_is_a_phantom() {
        let mut h = run(HoldingState::Released, answered_once());
        h.requests[0].purpose = "request-9".into();
        // The acknowledged one is then missing from the list, too.
        assert_eq!(
            kinds(&h),
            [ViolationKind::Phantom, ViolationKind::RequestLost]
        );
        assert_eq!(check_history(&h)[0].id, "r1");
    }

    #[test]
    fn a_refusal_no_reviewer_of_the_holding_domain_made_is_a_false_refusal() {
        // Refused, but B's log has no reviewer refusing it: the receiving
        // domain made it so (an archive it could not ask, a forged answer).
        let h = run(
            HoldingState::Refused,
            vec![
                step("B", "request_referred_to_review", "A"),
                step("A", "refusal_received", "B"),
            ],
        );
        assert!(
            kinds(&h).contains(&ViolationKind::FalseRefusal),
            "{:?}",
            kinds(&h)
        );
        // A request called refused with no part refused.
        let mut h = run(HoldingState::Released, answered_once());
        h.requests[0].status = RequestStatus::Refused;
        assert_eq!(kinds(&h), [ViolationKind::FalseRefusal]);
        let mut h = run(HoldingState::Released, answered_once());
        h.requests[0].parts.clear();
        h.requests[0].status = RequestStatus::Refused;
        assert!(kinds(&h).contains(&ViolationKind::FalseRefusal));
    }

    #[test]
    fn a_copy_that_no_longer_checks_or_a_certificate_failing_at_another_domain_breaks_the_rule() {
        let mut h = run(HoldingState::Released, answered_once());
        h.requests[0].parts[0].invalid = vec!["B-1".into()];
        assert_eq!(kinds(&h), [ViolationKind::CertificateFails]);
        let mut h = run(HoldingState::Released, answered_once());
        h.requests[0].certificate = Some(CertificateSeen {
            code: "A.0000-0000-0000-0000-0000".into(),
            problem: None,
        });
        assert_eq!(kinds(&h), []);
        assert_eq!(
            (
                request_counts(&h).certified,
                request_counts(&h).certificates_checked
            ),
            (1, 1)
        );
        h.requests[0].certificate = Some(CertificateSeen {
            code: "A.0000-0000-0000-0000-0000".into(),
            problem: Some("422 certificate_invalid at C".into()),
        });
        assert_eq!(kinds(&h), [ViolationKind::CertificateFails]);
    }
}
