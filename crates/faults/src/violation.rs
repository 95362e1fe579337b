//! What the checker reports: a broken rule, with what shows it. Apart
//! from the rules themselves (`checker.rs`, `requests.rs`), so that each
//! rule's file names what it finds without importing the other.

use std::fmt;

/// The `worker` of the operations made by the final checks, after every
/// fault healed and the cluster converged.
pub const FINAL: usize = usize::MAX;

/// What rule was broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViolationKind {
    /// A lookup (or the owner's delete) answered 404 for an ID whose PUT
    /// was acknowledged before it started, with no DELETE of it started
    /// before it ended.
    AcknowledgedThen404,
    /// A lookup answered 200 for an ID whose DELETE was acknowledged
    /// before it started, with no PUT of it that could have landed later.
    DeletedThen200,
    /// A lookup answered 200 for an ID no PUT had been sent for.
    Phantom,
    /// A lookup named an owner other than the domain the ID was put at.
    WrongOwner,
    /// After every fault healed and the cluster converged, an acknowledged
    /// and never deleted ID was not found at its owner or by a lookup.
    LostRecord,
    /// `/v1/filter/verify` said a domain's filter and store disagree.
    FilterInconsistent,
    /// After the cluster converged, a domain's copy of another's filter,
    /// at the position that domain's filter is at, was not that filter
    /// bit for bit: a copy that claims more than it holds rules its
    /// origin out for the records it lacks.
    CopyDiffers,
    /// The cluster had not converged long after a fault healed.
    NotConverged,
    /// A search answered 200 without a record of that person whose PUT
    /// was acknowledged before it started, with no DELETE of it started
    /// before it ended.
    SearchMissed,
    /// A search answered 200 with a record whose DELETE was acknowledged
    /// before it started (searches read the stores, never a cache).
    SearchFoundDeleted,
    /// A lookup answered 200 for an ID whose every PUT was refused with an
    /// answer that promises nothing changed (507 for a full disk, 503
    /// `coordinator_unavailable`, …).
    RefusedThenFound,
    /// A PUT at a domain whose full disk had been freed was still refused
    /// for space 5 s (the checker's `RESUME_BOUND_US`) after the space
    /// returned.
    WritesNotResumed,
    /// After every fault healed, an acknowledged request was not at its
    /// receiving domain any more.
    RequestLost,
    /// After every fault healed, a part of a request was not answered, or
    /// was answered without being taken in by its holding domain or its
    /// answer taken in by the receiving domain (per their audit logs).
    RequestUnanswered,
    /// A part of a request was taken in by its holding domain more than
    /// once, or its answer by the receiving domain more than once.
    RequestAnsweredTwice,
    /// A request holds other records than were asked, sent a part to a
    /// domain that does not hold its records, or came back without a copy
    /// the release policy gives.
    RequestMisanswered,
    /// A part, or a request, ended `refused` though no holding domain's
    /// reviewer refused it (an archive that could not be asked, or a
    /// party on the wire, made it so).
    FalseRefusal,
    /// A copy kept no longer checks against its seal, or a certificate
    /// issued at the end does not check at another domain.
    CertificateFails,
}

impl ViolationKind {
    pub const ALL: [ViolationKind; 18] = [
        ViolationKind::AcknowledgedThen404,
        ViolationKind::DeletedThen200,
        ViolationKind::Phantom,
        ViolationKind::WrongOwner,
        ViolationKind::LostRecord,
        ViolationKind::FilterInconsistent,
        ViolationKind::CopyDiffers,
        ViolationKind::NotConverged,
        ViolationKind::SearchMissed,
        ViolationKind::SearchFoundDeleted,
        ViolationKind::RefusedThenFound,
        ViolationKind::WritesNotResumed,
        ViolationKind::RequestLost,
        ViolationKind::RequestUnanswered,
        ViolationKind::RequestAnsweredTwice,
        ViolationKind::RequestMisanswered,
        ViolationKind::FalseRefusal,
        ViolationKind::CertificateFails,
    ];
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ViolationKind::AcknowledgedThen404 => "acknowledged-then-404",
            ViolationKind::DeletedThen200 => "deleted-then-200",
            ViolationKind::Phantom => "found-never-written",
            ViolationKind::WrongOwner => "wrong-owner",
            ViolationKind::LostRecord => "lost-record",
            ViolationKind::FilterInconsistent => "filter-inconsistent",
            ViolationKind::CopyDiffers => "copy-differs",
            ViolationKind::NotConverged => "not-converged",
            ViolationKind::SearchMissed => "search-missed",
            ViolationKind::SearchFoundDeleted => "search-found-deleted",
            ViolationKind::RefusedThenFound => "refused-then-found",
            ViolationKind::WritesNotResumed => "writes-not-resumed",
            ViolationKind::RequestLost => "request-lost",
            ViolationKind::RequestUnanswered => "request-unanswered",
            ViolationKind::RequestAnsweredTwice => "request-answered-twice",
            ViolationKind::RequestMisanswered => "request-misanswered",
            ViolationKind::FalseRefusal => "false-refusal",
            ViolationKind::CertificateFails => "certificate-fails",
        })
    }
}

/// One broken rule, with what shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub kind: ViolationKind,
    /// The archive ID (or the domain, for filter and convergence checks).
    pub id: String,
    /// When the offending answer began, in microseconds of the run.
    pub at_us: u64,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.kind, self.message)
    }
}
