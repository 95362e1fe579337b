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
/// pending → in review → released or refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HoldingState {
    /// Not yet taken in by the holding archive.
    Pending,
    /// Taken in; its staff decide.
    InReview,
    /// Answered with signed copies.
    Released,
    /// Answered with a reason, and no copies.
    Refused,
}

impl HoldingState {
    /// Whether the holding archive has answered for good.
    pub fn is_final(self) -> bool {
        matches!(self, HoldingState::Released | HoldingState::Refused)
    }

    /// Whether a part in this state may take `next` (or stay): never
    /// backwards, and never from one answer to the other.
    pub fn may_become(self, next: HoldingState) -> bool {
        self == next || (!self.is_final() && next > self)
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
    /// Every holding archive answered, with at least one copy.
    Answered,
    /// Every holding archive answered, none with a copy.
    Refused,
    /// Answered, and the certificate issued to the applicant.
    Certified,
}

impl RequestStatus {
    /// The status of a request whose parts stand at `states`.
    pub fn of(states: impl IntoIterator<Item = HoldingState>) -> RequestStatus {
        let states: Vec<HoldingState> = states.into_iter().collect();
        if states.is_empty() {
            return RequestStatus::Refused;
        }
        if states.iter().all(|s| s.is_final()) {
            if states.contains(&HoldingState::Released) {
                RequestStatus::Answered
            } else {
                RequestStatus::Refused
            }
        } else if states.iter().all(|s| *s == HoldingState::Pending) {
            RequestStatus::Submitted
        } else {
            RequestStatus::Sent
        }
    }
}

/// The record as the holding archive signs it for one request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CopyBody {
    /// The holding archive (domain).
    pub holding: String,
    /// The record's archive number.
    pub archive_number: String,
    pub request_id: String,
    /// The day it was released (YYYY-MM-DD, UTC).
    pub date: String,
    pub title: String,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Base64 (standard alphabet, padded), if the record has content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// A copy as it travels: the exact bytes signed (so that no re-encoding
/// can make a genuine copy fail, or a changed one pass) and the holding
/// archive's Ed25519 signature over them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SignedCopy {
    /// Base64 of the JSON of a [`CopyBody`].
    pub payload: String,
    /// Hex of the 64-byte signature.
    pub signature: String,
}

/// One holding archive's part of a request, as the clerk sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HoldingView {
    pub domain: String,
    pub records: Vec<String>,
    pub state: HoldingState,
    /// The copies, verified against the holding archive's key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<ReceivedCopy>,
    /// Records asked for that it does not hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Why it was refused, or is in review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A copy as the clerk and the certificate show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReceivedCopy {
    /// The code that checks it, at either archive
    /// (`GET /v1/certificates/{code}`).
    pub code: String,
    #[serde(flatten)]
    pub copy: CopyBody,
}

/// `GET /v1/certificates/{code}`: a certified copy, checked again against
/// its holding archive's signature. Enough to compare with the paper; not
/// the record's metadata or content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CertificateCheck {
    pub code: String,
    /// The archive that signed the copy.
    pub holding: String,
    /// The archive that issued the certificate.
    pub receiving: String,
    pub archive_number: String,
    pub request_id: String,
    /// The day the holding archive released it (YYYY-MM-DD, UTC).
    pub date: String,
    pub title: String,
    /// Hex SHA-256 of the record's content, to compare a digital copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_sha256: Option<String>,
    /// The archive that checked it now.
    pub checked_by: String,
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
    /// When the certificate was issued (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certified_at: Option<String>,
    pub applicant_name: String,
    pub purpose: String,
    pub holdings: Vec<HoldingView>,
    /// Records asked for that no archive holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_found: Vec<String>,
}

/// `GET /v1/requests`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RequestList {
    pub requests: Vec<RequestView>,
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
/// it is asked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Answer {
    pub state: HoldingState,
    #[serde(default)]
    pub copies: Vec<SignedCopy>,
    #[serde(default)]
    pub missing: Vec<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A request waiting for a reviewer at the holding archive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReviewItem {
    pub receiving: String,
    pub request_id: String,
    pub received_at: String,
    pub applicant_name: String,
    pub purpose: String,
    pub records: Vec<String>,
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
    fn a_request_is_answered_once_every_part_is_and_one_has_copies() {
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
    }

    #[test]
    fn an_identity_number_of_the_wrong_type_is_refused_without_being_quoted() {
        let e = serde_json::from_str::<IdentityNumber>("110105194912310021").unwrap_err();
        assert!(!e.to_string().contains("1101051949"), "{e}");
        let ok: IdentityNumber = serde_json::from_str("\"11010519491231002X\"").unwrap();
        assert!(!format!("{ok:?}").contains("1101"));
    }
}
