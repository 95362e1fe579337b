//! What the request book keeps of a request, on each side: the receiving
//! archive's [`Outgoing`] with a [`Part`] per holding archive, and the
//! holding archive's [`Incoming`], each with the [`Step`]s it still has to
//! write to the audit log (`steps.rs` writes them). JSON in the book
//! (`local/requests.rs`); fields added since are read with their defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::legacy;
use super::RequestsError;
use crate::local::audit::Requester;
use crate::local::record::now_us;
use crate::local::requests::BookWrite;
use crate::wire::{Answer, Delivery, HoldingState, RequestStatus, SignedCopy};

pub(super) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, RequestsError> {
    serde_json::to_vec(value).map_err(RequestsError::Encode)
}

pub(super) fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, RequestsError> {
    serde_json::from_slice(bytes).map_err(RequestsError::Corrupt)
}

/// What a step did, as the audit log names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Receiving: a clerk registered the request.
    RequestSubmitted,
    /// Holding: taken in and released by the policy.
    RequestReleased,
    /// Holding: taken in, none of its records held.
    RequestNoneHeld,
    /// Holding: taken in and left to the reviewers.
    RequestReferredToReview,
    /// Holding, before seals: taken in and answered "none held" as a
    /// refusal (kept so that entries of then are read).
    RequestRefused,
    /// Holding: a reviewer released the records.
    ReviewApproved,
    /// Holding: a reviewer refused, with a reason.
    ReviewRefused,
    /// Receiving: the holding archive's copies taken in.
    CopiesReceived,
    /// Receiving: the holding archive's refusal taken in.
    RefusalReceived,
    /// Receiving: the holding archive holds none of the records.
    NoneHeldReceived,
    /// Receiving: the holding archive left the part to its reviewers.
    InReviewThere,
    /// Receiving: a kept copy no longer checks against its seal.
    CopyFailedCheck,
    /// Receiving: the certificate issued.
    CertificateIssued,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::RequestSubmitted => "request_submitted",
            Action::RequestReleased => "request_released",
            Action::RequestNoneHeld => "request_none_held",
            Action::RequestReferredToReview => "request_referred_to_review",
            Action::RequestRefused => "request_refused",
            Action::ReviewApproved => "review_approved",
            Action::ReviewRefused => "review_refused",
            Action::CopiesReceived => "copies_received",
            Action::RefusalReceived => "refusal_received",
            Action::NoneHeldReceived => "none_held_received",
            Action::InReviewThere => "in_review_there",
            Action::CopyFailedCheck => "copy_failed_check",
            Action::CertificateIssued => "certificate_issued",
        }
    }
}

/// A step of a request for this domain's audit log, kept in its entry
/// until it is written there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Step {
    pub at_us: u64,
    pub who: Requester,
    pub action: Action,
    pub records: Vec<String>,
}

impl Step {
    pub fn now(who: Requester, action: Action, records: Vec<String>) -> Step {
        Step {
            at_us: now_us(),
            who,
            action,
            records,
        }
    }
}

/// An entry of the request book with steps to log.
pub(super) trait Kept: Serialize + serde::de::DeserializeOwned {
    fn request_id(&self) -> &str;
    fn applicant_digest(&self) -> &str;
    fn unlogged(&mut self) -> &mut Vec<Step>;
    fn entry(&self) -> Result<BookWrite, RequestsError>;
}

/// A request as the receiving archive keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Outgoing {
    pub id: String,
    pub submitted_us: u64,
    pub clerk: String,
    pub applicant_digest: String,
    pub applicant_name: String,
    pub purpose: String,
    /// The key type a search found the records by; none when named.
    #[serde(default)]
    pub searched_by: Option<String>,
    pub not_found: Vec<String>,
    pub parts: BTreeMap<String, Part>,
    /// When the clerk issued the certificate.
    #[serde(default)]
    pub certified_us: Option<u64>,
    #[serde(default)]
    pub certificate: Option<KeptCertificate>,
    /// The copies found not to check (by the SHA-256 of what they hold),
    /// each logged once.
    #[serde(default)]
    pub flagged: Vec<String>,
    #[serde(default)]
    pub unlogged: Vec<Step>,
}

/// One holding archive's part of an [`Outgoing`] request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Part {
    pub records: Vec<String>,
    pub state: HoldingState,
    /// As sealed, each checked before it was kept (and whenever used).
    pub copies: Vec<SignedCopy>,
    /// For copies of format 1 only: the holding archive's Ed25519 key
    /// (hex) that checked them.
    #[serde(default)]
    pub signing_key: String,
    pub missing: Vec<String>,
    pub reason: Option<String>,
    /// Since when the outbox could not reach the holding archive, while
    /// it cannot (microseconds since the Unix epoch).
    #[serde(default)]
    pub unreachable_since_us: Option<u64>,
}

/// A certificate as its issuer keeps it: its code and each sheet's
/// payload, exactly as issued (asked again, the same certificate).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct KeptCertificate {
    pub code: String,
    pub issued_us: u64,
    pub sheets: Vec<String>,
}

/// A request taken in from a receiving archive.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Incoming {
    pub delivery: Delivery,
    pub received_us: u64,
    /// As decided (its seal is made afresh at each delivery).
    pub answer: Answer,
    #[serde(default)]
    pub unlogged: Vec<Step>,
}

impl Kept for Incoming {
    fn request_id(&self) -> &str {
        &self.delivery.request_id
    }

    fn applicant_digest(&self) -> &str {
        &self.delivery.applicant_digest
    }

    fn unlogged(&mut self) -> &mut Vec<Step> {
        &mut self.unlogged
    }

    /// As the book keeps it: found by the codes of copies of format 1
    /// released (which either archive checks), and listed as waiting while
    /// in review or with steps to log.
    fn entry(&self) -> Result<BookWrite, RequestsError> {
        Ok(BookWrite {
            bytes: encode(self)?,
            codes: legacy::codes(&self.answer.copies),
            unfinished: self.answer.state == HoldingState::InReview || !self.unlogged.is_empty(),
        })
    }
}

impl Kept for Outgoing {
    fn request_id(&self) -> &str {
        &self.id
    }

    fn applicant_digest(&self) -> &str {
        &self.applicant_digest
    }

    fn unlogged(&mut self) -> &mut Vec<Step> {
        &mut self.unlogged
    }

    /// As the book keeps it: listed as waiting while a part is not final
    /// or a step is to be logged; once certified, found by the
    /// certificate's code (and by its copies' codes, for a certificate
    /// issued with copies of format 1).
    fn entry(&self) -> Result<BookWrite, RequestsError> {
        let mut codes = Vec::new();
        if let Some(certificate) = &self.certificate {
            codes.push(certificate.code.clone());
        } else if self.certified_us.is_some() {
            for part in self.parts.values() {
                codes.extend(legacy::codes(&part.copies));
            }
        }
        Ok(BookWrite {
            bytes: encode(self)?,
            codes,
            unfinished: self.parts.values().any(|p| !p.state.is_final())
                || !self.unlogged.is_empty(),
        })
    }
}

impl Outgoing {
    pub fn status(&self) -> RequestStatus {
        match self.certified_us {
            Some(_) => RequestStatus::Certified,
            None => RequestStatus::of(self.parts.values().map(|p| p.state)),
        }
    }

    /// Every record asked for from some holding archive.
    pub fn records(&self) -> Vec<String> {
        self.parts
            .values()
            .flat_map(|p| p.records.iter().cloned())
            .collect()
    }
}

impl Part {
    pub fn pending(records: Vec<String>) -> Part {
        Part {
            records,
            state: HoldingState::Pending,
            copies: Vec::new(),
            signing_key: String::new(),
            missing: Vec::new(),
            reason: None,
            unreachable_since_us: None,
        }
    }
}

/// The answer a holding archive keeps for a part it cannot answer by
/// itself: its reviewers decide.
pub(super) fn in_review(reason: String) -> Answer {
    Answer {
        state: HoldingState::InReview,
        copies: Vec::new(),
        missing: Vec::new(),
        reason: Some(reason),
        sealed: String::new(),
    }
}

/// A part refused by a reviewer.
pub(super) fn refused(reason: String) -> Answer {
    Answer {
        state: HoldingState::Refused,
        copies: Vec::new(),
        missing: Vec::new(),
        reason: Some(reason),
        sealed: String::new(),
    }
}
