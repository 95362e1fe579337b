//! The bodies of cross-archive requests (异地查档、跨馆出证): what a clerk
//! at the receiving archive submits, what travels between it and each
//! holding archive, what a reviewer there decides, and the signed copies
//! that come back.

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An identity number as a client sends it: its `Debug` shows nothing,
/// and a value of the wrong JSON type is refused without being quoted
/// (serde's own messages quote what they refuse).
#[derive(Clone, PartialEq, Eq, ToSchema)]
#[schema(value_type = String)]
pub struct IdentityNumber(pub String);

impl fmt::Debug for IdentityNumber {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("IdentityNumber(…)")
    }
}

impl<'de> Deserialize<'de> for IdentityNumber {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = IdentityNumber;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an identity number as a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IdentityNumber, E> {
                Ok(IdentityNumber(v.to_owned()))
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<IdentityNumber, E> {
                Err(E::custom("applicant_id must be a string"))
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<IdentityNumber, E> {
                Err(E::custom("applicant_id must be a string"))
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<IdentityNumber, E> {
                Err(E::custom("applicant_id must be a string"))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<IdentityNumber, E> {
                Err(E::custom("applicant_id must be a string"))
            }
        }
        d.deserialize_any(Text)
    }
}

/// `POST /v1/requests`: an applicant asks, at this (receiving) archive,
/// for copies of their records held elsewhere.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRequest {
    /// The applicant's identity number, checked by the clerk against the
    /// card; kept only as its keyed digest.
    pub applicant_id: IdentityNumber,
    pub applicant_name: String,
    /// What the copies are for (a bank, a court, a pension office).
    pub purpose: String,
    /// The records asked for, by archive number. Absent: the records a
    /// search by the applicant's identity number finds.
    #[serde(default)]
    pub records: Option<Vec<String>>,
}

/// Where a request stands at one holding archive. It only moves forward:
/// pending → in review → released, refused or none held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HoldingState {
    /// Not yet taken in by the holding archive.
    Pending,
    /// Taken in; its staff decide.
    InReview,
    /// Answered with sealed copies.
    Released,
    /// Refused by the holding archive, with its reason.
    Refused,
    /// The holding archive holds none of the records asked for (deleted
    /// since they were found there).
    NoneHeld,
}

impl HoldingState {
    /// Whether the holding archive has answered for good.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            HoldingState::Released | HoldingState::Refused | HoldingState::NoneHeld
        )
    }

    /// Whether a part in this state may take `next` (or stay): never
    /// backwards, and never from one answer to another.
    pub fn may_become(self, next: HoldingState) -> bool {
        self == next || (!self.is_final() && next > self)
    }

    /// As an answer's seal writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            HoldingState::Pending => "pending",
            HoldingState::InReview => "in_review",
            HoldingState::Released => "released",
            HoldingState::Refused => "refused",
            HoldingState::NoneHeld => "none_held",
        }
    }
}

/// A request as a whole, derived from its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequestStatus {
    /// Registered; no holding archive has taken it in yet.
    Submitted,
    /// Taken in by some holding archive, not answered by all.
    Sent,
    /// Every holding archive answered, at least one with a copy.
    Answered,
    /// Every holding archive answered, none with a copy, and one refused.
    Refused,
    /// No archive holds a record asked for: every archive that may hold
    /// one said so, or its copy of the filters rules it out (proven as a
    /// lookup's 404 is).
    NoRecords,
    /// Its certificate is issued.
    Certified,
}

impl RequestStatus {
    /// The status of a request whose parts stand at `states`.
    pub fn of(states: impl IntoIterator<Item = HoldingState>) -> RequestStatus {
        let states: Vec<HoldingState> = states.into_iter().collect();
        if states.iter().all(|s| s.is_final()) {
            if states.contains(&HoldingState::Released) {
                RequestStatus::Answered
            } else if states.contains(&HoldingState::Refused) {
                RequestStatus::Refused
            } else {
                RequestStatus::NoRecords
            }
        } else if states.iter().all(|s| *s == HoldingState::Pending) {
            RequestStatus::Submitted
        } else {
            RequestStatus::Sent
        }
    }

    /// What the clerk tells the applicant, in both languages.
    pub fn words(self) -> Words {
        let (zh, en) = match self {
            RequestStatus::Submitted => (
                "申请已登记，正在发往保存档案的档案馆。",
                "Your request is registered and on its way to the archives holding the records.",
            ),
            RequestStatus::Sent => (
                "保存档案的档案馆正在办理您的申请。",
                "The archives holding the records are dealing with your request.",
            ),
            RequestStatus::Answered => (
                "保存档案的档案馆已答复，可以出具查询证明。",
                "The archives holding the records have answered: the certificate can be issued.",
            ),
            RequestStatus::Refused => (
                "保存档案的档案馆拒绝提供，理由见各馆答复。",
                "The archives holding the records refused; each gave its reason.",
            ),
            RequestStatus::NoRecords => (
                "经查询，各档案馆均未保存您所申请的档案记录。",
                "No archive holds a record of what you asked for.",
            ),
            RequestStatus::Certified => ("查询证明已出具。", "The certificate has been issued."),
        };
        Words {
            zh: zh.to_owned(),
            en: en.to_owned(),
        }
    }
}

/// A sentence for a person, in Chinese and English.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Words {
    pub zh: String,
    pub en: String,
}

/// The record as a holding archive signed it before seals (format 1):
/// read only to check copies kept since then.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CopyBody {
    pub holding: String,
    pub archive_number: String,
    pub request_id: String,
    pub date: String,
    pub title: String,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// A copy as it travels and is kept: its seal (the holding archive's
/// statement of every field a certificate prints, and the digests of the
/// record's metadata and content) with the metadata and content
/// themselves.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SignedCopy {
    /// Base64 of the sealed statement: a `COSE_Sign1` over the copy's CBOR
    /// statement (docs/FORMAT.md, "Seals").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sealed: String,
    /// The record's metadata: its JSON is what the statement's
    /// `metadata_sha256` covers.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    #[schema(value_type = Object)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Base64 (standard alphabet, padded) of the record's content, if it
    /// has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Format 1 (before seals): base64 of a [`CopyBody`]'s JSON …
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub payload: String,
    /// … and the hex of its holding archive's Ed25519 signature.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

/// A holding archive's part of a request as the clerk sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HoldingView {
    /// The holding archive's domain code.
    pub domain: String,
    /// Its name as people know it (the trust list's), or its code.
    pub name: String,
    pub records: Vec<String>,
    pub state: HoldingState,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<ReceivedCopy>,
    /// Records asked for that it does not hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Why it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A copy as the clerk and the certificate show it, checked again against
/// its holding archive's seal each time it is shown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReceivedCopy {
    pub holding: String,
    pub archive_number: String,
    /// As sealed (a long title is cut, ending in "…").
    pub title: String,
    /// The record's own date, as its catalogue gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_date: Option<String>,
    /// The day it was released (YYYY-MM-DD, UTC).
    pub released: String,
    /// Hex SHA-256 of its content, to compare a digital copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_sha256: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Base64 of the content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Whether it checks against its holding archive's seal now.
    pub valid: bool,
    /// Why it does not, in plain words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// An archive as people know it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ArchiveName {
    pub domain: String,
    /// Its name (黔西南州档案馆), or its code when it configured none.
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Where its page is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
}

/// What a certificate says was not provided, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NotProvidedView {
    /// The archive asked; none for records no archive holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holding: Option<ArchiveName>,
    pub records: Vec<String>,
    /// `refused`, `not_held` or `held_nowhere`.
    pub why: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A certificate's issue, as a request shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CertificateSummary {
    /// Its verification code: `ISSUER.XXXX-XXXX-XXXX-XXXX-XXXX`.
    pub code: String,
    /// RFC 3339.
    pub issued_at: String,
    /// Sheets (pages), each with its QR code.
    pub sheets: u32,
}

/// A request as `GET /v1/requests/{id}` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RequestView {
    pub id: String,
    /// When it was registered (RFC 3339).
    pub submitted_at: String,
    /// The clerk's token name.
    pub clerk: String,
    pub status: RequestStatus,
    /// What the clerk tells the applicant.
    pub words: Words,
    /// When the certificate was issued (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certified_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<CertificateSummary>,
    pub applicant_name: String,
    pub purpose: String,
    /// The key type the records were found by (the applicant's identity
    /// number); absent when the clerk named the records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub searched_by: Option<String>,
    /// The holding archives that have answered for good (released,
    /// refused, or holding none), each with its answer. An archive that
    /// has not is only counted in `awaiting`: neither it nor the records
    /// it holds are named before its own answer says so (SECURITY.md,
    /// "The clerk").
    pub holdings: Vec<HoldingView>,
    pub awaiting: Awaiting,
    /// Records asked for that no archive holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_found: Vec<String>,
}

/// The holding archives a request still waits for, counted, not named.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Awaiting {
    /// How many have not answered for good.
    pub archives: u32,
    /// Of those, how many said their reviewers decide.
    pub in_review: u32,
    /// Since when the first of those that cannot be reached now could
    /// not be (RFC 3339): the applicant waits longer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable_since: Option<String>,
}

/// `GET /v1/requests`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RequestList {
    pub requests: Vec<RequestView>,
}

/// One sheet of a certificate: its payload as its QR code holds it, and
/// the QR code drawn (SVG), for the page's print sheet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CertificateSheet {
    /// `XA1:` and base45 (docs/FORMAT.md, "Certificates").
    pub payload: String,
    pub qr_svg: String,
}

/// `POST` and `GET /v1/requests/{id}/certificate`: the certificate issued.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Certificate {
    pub code: String,
    pub issued_at: String,
    pub issuer: ArchiveName,
    pub request: RequestView,
    pub sheets: Vec<CertificateSheet>,
}

/// A copy on a certificate, checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckedCopy {
    pub holding: ArchiveName,
    pub archive_number: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_date: Option<String>,
    /// The day it was released (YYYY-MM-DD).
    pub released: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_sha256: Option<String>,
}

/// `GET /v1/certificates/{code}` and `POST /v1/certificates/verify`: a
/// certificate checked, with what it says, to compare with the paper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CertificateCheck {
    pub code: String,
    /// The archive that issued it.
    pub issuer: ArchiveName,
    pub request_id: String,
    /// RFC 3339.
    pub issued_at: String,
    pub applicant_name: String,
    pub purpose: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub searched_by: Option<String>,
    pub copies: Vec<CheckedCopy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_provided: Vec<NotProvidedView>,
    /// The sheets checked (all of the certificate's, online; the one
    /// whose payload was given, offline) and how many it has.
    pub sheets_checked: u32,
    pub sheets: u32,
    /// The archive that answered this check.
    pub checked_by: String,
}

/// `POST /v1/certificates/verify`: a certificate's payload, as its QR code
/// holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    pub payload: String,
}

/// `GET /v1/trust-list`: every archive of the cluster and its keys,
/// signed by the cluster's anchor (docs/FORMAT.md, "Trust list").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TrustListBody {
    /// Base64 of the list's JSON.
    pub payload: String,
    /// Base64 of the anchor's SubjectPublicKeyInfo.
    pub anchor: String,
    /// Base64 of the anchor's signature over the payload's bytes.
    pub signature: String,
}

impl From<xarchive_seal::SignedTrustList> for TrustListBody {
    fn from(s: xarchive_seal::SignedTrustList) -> Self {
        TrustListBody {
            payload: s.payload,
            anchor: s.anchor,
            signature: s.signature,
        }
    }
}

impl From<TrustListBody> for xarchive_seal::SignedTrustList {
    fn from(b: TrustListBody) -> Self {
        xarchive_seal::SignedTrustList {
            payload: b.payload,
            anchor: b.anchor,
            signature: b.signature,
        }
    }
}

/// What the receiving archive sends a holding archive
/// (`POST /v1/peer/requests`): sent again until answered, and taken in
/// once (by receiving archive and request ID).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Delivery {
    pub request_id: String,
    pub receiving: String,
    /// The keyed digest of the applicant's identity number (as the audit
    /// log writes it): the number itself never leaves the receiving
    /// archive.
    pub applicant_digest: String,
    pub applicant_name: String,
    pub purpose: String,
    pub records: Vec<String>,
}

/// A holding archive's answer to a [`Delivery`]: the same however often
/// it is asked, and sealed by it whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Answer {
    pub state: HoldingState,
    #[serde(default)]
    pub copies: Vec<SignedCopy>,
    #[serde(default)]
    pub missing: Vec<String>,
    #[serde(default)]
    pub reason: Option<String>,
    /// Base64 of the holding archive's seal over the answer: a `COSE_Sign1`
    /// of its statement (the request, the receiving archive, the state,
    /// the reason, the records, the missing and each copy's digest).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sealed: String,
}

/// A record of a request waiting for review, as the holding archive's
/// reviewer sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReviewRecord {
    pub id: String,
    /// Its title here; absent when it is no longer held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Whether the applicant's identity number is one of the record's
    /// keys (the applicant is among its persons).
    pub applicant_named: bool,
}

/// A request waiting for a reviewer at the holding archive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReviewItem {
    pub receiving: String,
    /// The receiving archive's name.
    pub receiving_name: String,
    pub request_id: String,
    pub received_at: String,
    pub applicant_name: String,
    pub purpose: String,
    pub records: Vec<ReviewRecord>,
    /// Why the release policy did not answer it by itself.
    pub reason: String,
}

/// `GET /v1/reviews`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReviewQueue {
    pub reviews: Vec<ReviewItem>,
}

/// `POST /v1/reviews/{receiving}/{request}`: a reviewer's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    pub approve: bool,
    /// Required to refuse; noted with an approval.
    #[serde(default)]
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn state() -> impl Strategy<Value = HoldingState> {
        prop_oneof![
            Just(HoldingState::Pending),
            Just(HoldingState::InReview),
            Just(HoldingState::Released),
            Just(HoldingState::Refused),
            Just(HoldingState::NoneHeld),
        ]
    }

    proptest! {
        #[test]
        fn a_part_never_moves_back_nor_from_one_answer_to_the_other(
            path in proptest::collection::vec(state(), 0..12)
        ) {
            let mut now = HoldingState::Pending;
            for next in path {
                if now.may_become(next) {
                    prop_assert!(next >= now);
                    if now.is_final() { prop_assert_eq!(next, now); }
                    now = next;
                }
            }
        }
    }

    #[test]
    fn a_request_is_answered_once_every_part_is_and_one_has_copies_and_refused_only_by_a_refusal() {
        use HoldingState::*;
        assert_eq!(
            RequestStatus::of([Pending, Pending]),
            RequestStatus::Submitted
        );
        assert_eq!(RequestStatus::of([InReview, Pending]), RequestStatus::Sent);
        assert_eq!(RequestStatus::of([Released, InReview]), RequestStatus::Sent);
        assert_eq!(
            RequestStatus::of([Released, Refused]),
            RequestStatus::Answered
        );
        assert_eq!(
            RequestStatus::of([Refused, Refused]),
            RequestStatus::Refused
        );
        assert_eq!(
            RequestStatus::of([Refused, NoneHeld]),
            RequestStatus::Refused
        );
        assert_eq!(RequestStatus::of([NoneHeld]), RequestStatus::NoRecords);
        assert_eq!(RequestStatus::of([]), RequestStatus::NoRecords);
        // A refusal is a holding archive's word only.
        for states in [
            vec![],
            vec![NoneHeld],
            vec![Pending],
            vec![InReview, NoneHeld],
        ] {
            assert_ne!(RequestStatus::of(states), RequestStatus::Refused);
        }
    }

    #[test]
    fn an_identity_number_of_the_wrong_type_is_refused_without_being_quoted() {
        let e = serde_json::from_str::<IdentityNumber>("110105194912310021").unwrap_err();
        assert!(!e.to_string().contains("1101051949"), "{e}");
        let ok: IdentityNumber = serde_json::from_str("\"11010519491231002X\"").unwrap();
        assert!(!format!("{ok:?}").contains("1101"));
    }
}
