//! Cross-archive requests over HTTP: the clerk's routes at the receiving
//! archive (`/v1/requests`, the certificate and its PDF), the reviewer's
//! at the holding archive (`/v1/reviews`), the route a receiving archive
//! delivers to (`/v1/peer/requests`), and anyone's: a certificate checked
//! by its code or its payload, and the trust list. What they do is
//! `requests/`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

use super::blocking;
use super::error::ApiError;
use super::extract::json_body;
use crate::local::audit::AuditError;
use crate::local::requests::BookError;
use crate::node::Node;
use crate::requests::RequestsError;
use crate::security::auth::Principal;
use crate::wire::{
    Answer, Certificate, CertificateCheck, Decision, Delivery, ErrorBody, ErrorCode, NewRequest,
    RequestList, RequestView, Requester, ReviewQueue, TrustListBody, VerifyRequest,
};

impl From<RequestsError> for ApiError {
    // A peer's failure and the others are different causes that share a status
    // today; each keeps its own arm.
    #[allow(clippy::match_same_arms)]
    fn from(e: RequestsError) -> Self {
        let status =
            |status, code, e: &dyn std::fmt::Display| ApiError::new(status, code, e.to_string());
        match e {
            e @ RequestsError::Invalid(_) => {
                status(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, &e)
            }
            RequestsError::Id(e) => ApiError::invalid_id(e),
            e @ RequestsError::Key(_) => status(StatusCode::BAD_REQUEST, ErrorCode::InvalidKey, &e),
            e @ RequestsError::NoRequest(_) => {
                status(StatusCode::NOT_FOUND, ErrorCode::RequestNotFound, &e)
            }
            e @ RequestsError::NoReview(_) => {
                status(StatusCode::NOT_FOUND, ErrorCode::ReviewNotFound, &e)
            }
            e @ RequestsError::Decided(_) => {
                status(StatusCode::CONFLICT, ErrorCode::AlreadyDecided, &e)
            }
            e @ RequestsError::NotAnswered(_) => {
                status(StatusCode::CONFLICT, ErrorCode::NotAnswered, &e)
            }
            e @ (RequestsError::NoCertificate(_)
            | RequestsError::NotCertified(_)
            | RequestsError::UnknownIssuer(_)) => {
                status(StatusCode::NOT_FOUND, ErrorCode::CertificateNotFound, &e)
            }
            e @ RequestsError::CopyInvalid { .. } => {
                status(StatusCode::CONFLICT, ErrorCode::CopyInvalid, &e)
            }
            e @ RequestsError::CertificateInvalid { .. } => status(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::CertificateInvalid,
                &e,
            ),
            RequestsError::Rejected(rejected) => {
                let code = match rejected {
                    xarchive_seal::Rejected::Malformed(_) => ErrorCode::CertificateMalformed,
                    xarchive_seal::Rejected::UnknownKey(_) => ErrorCode::CertificateKeyUnknown,
                    xarchive_seal::Rejected::KeyNotValid { .. } => {
                        ErrorCode::CertificateKeyNotValid
                    }
                    xarchive_seal::Rejected::Changed(_) | xarchive_seal::Rejected::Mismatch(_) => {
                        ErrorCode::CertificateInvalid
                    }
                };
                status(StatusCode::UNPROCESSABLE_ENTITY, code, &rejected)
            }
            e @ (RequestsError::Unavailable(_)
            | RequestsError::IssuerUnreachable(_)
            | RequestsError::TrustUnavailable) => {
                status(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable, &e)
            }
            e @ RequestsError::Pdf(_) => status(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::PdfUnavailable,
                &e,
            ),
            // The issuing archive's own answer, passed on as it said it.
            RequestsError::Peer(
                _,
                crate::ClientError::Api {
                    status: s,
                    code,
                    message,
                    ..
                },
            ) => {
                let code = code.unwrap_or(ErrorCode::Unavailable);
                let s = StatusCode::from_u16(s).unwrap_or(StatusCode::BAD_GATEWAY);
                ApiError::new(s, code, message)
            }
            e @ RequestsError::Peer(..) => {
                status(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable, &e)
            }
            RequestsError::Book(BookError::DiskFull(full))
            | RequestsError::Audit(AuditError::DiskFull(full)) => full.into(),
            RequestsError::Book(BookError::Reopening(r))
            | RequestsError::Audit(AuditError::Reopening(r)) => r.into(),
            RequestsError::Domain(e) => e.into(),
            RequestsError::Search(e) => e.into(),
            e => ApiError::internal(e),
        }
    }
}

/// Who did a step, for the audit log.
fn requester(node: &Node, who: Option<Extension<Principal>>) -> Requester {
    who.map_or(Principal::Anonymous, |w| w.0)
        .requester(&node.cluster.me)
}

/// `POST /v1/requests`: a clerk registers an applicant's request.
#[utoipa::path(
    post,
    path = "/v1/requests",
    tag = "requests",
    request_body = NewRequest,
    responses(
        (status = 201, description = "Registered (durably) and on its way to each holding archive", body = RequestView),
        (status = 400, description = "`invalid_json`, `invalid_request`, `invalid_id` or `invalid_key` (the identity number is never echoed)", body = ErrorBody),
        (status = 429, description = "`rate_limited`: the clerk's allowance of searches (`auth.search_rate_per_minute`) is spent; nothing was registered", body = ErrorBody),
        (status = 503, description = "`unavailable`: an archive that may hold a record could not be asked; nothing was registered", body = ErrorBody),
        (status = 507, description = "`insufficient_storage`: nothing was registered", body = ErrorBody),
    )
)]
pub async fn submit(
    State(node): State<Arc<Node>>,
    who: Option<Extension<Principal>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let new: NewRequest = json_body(
        body,
        "a request is {\"applicant_id\": \"...\", \"applicant_name\": \"...\", \
         \"purpose\": \"...\", \"records\": [\"...\"]} (records may be left out)",
    )?;
    // A request searches the cluster for the applicant: it is counted,
    // and limited, as the clerk's search (SECURITY.md, "The clerk").
    let principal = who.as_ref().map_or(Principal::Anonymous, |w| w.0.clone());
    if let Err(refusal) = super::search::spend_search(&node, &principal) {
        return Ok(super::challenge(refusal));
    }
    let clerk = requester(&node, who);
    let view = node.submit_request(new, clerk).await?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// `GET /v1/requests`: every request registered here, newest first.
#[utoipa::path(
    get,
    path = "/v1/requests",
    tag = "requests",
    responses((status = 200, description = "The requests with their status at each holding archive", body = RequestList))
)]
pub async fn list(State(node): State<Arc<Node>>) -> Result<Json<RequestList>, ApiError> {
    let requests = node.requests().await?;
    Ok(Json(RequestList { requests }))
}

/// `GET /v1/requests/{id}`.
#[utoipa::path(
    get,
    path = "/v1/requests/{id}",
    tag = "requests",
    params(("id" = String, Path, description = "The request's ID")),
    responses(
        (status = 200, description = "The request, each copy checked again against its holding archive's seal", body = RequestView),
        (status = 404, description = "`request_not_found`", body = ErrorBody),
    )
)]
pub async fn get(
    State(node): State<Arc<Node>>,
    Path(id): Path<String>,
) -> Result<Json<RequestView>, ApiError> {
    Ok(Json(node.request(&id).await?))
}

/// `POST /v1/requests/{id}/certificate`: the clerk issues the certificate
/// of an answered request, to print for the applicant.
#[utoipa::path(
    post,
    path = "/v1/requests/{id}/certificate",
    tag = "requests",
    params(("id" = String, Path, description = "The request's ID")),
    responses(
        (status = 200, description = "Issued (asked again: the same certificate): its code and sheets, each with its payload and QR code", body = Certificate),
        (status = 404, description = "`request_not_found`", body = ErrorBody),
        (status = 409, description = "`not_answered`: some holding archive has not answered; `copy_invalid`: a copy kept no longer checks against its seal", body = ErrorBody),
    )
)]
pub async fn certify(
    State(node): State<Arc<Node>>,
    who: Option<Extension<Principal>>,
    Path(id): Path<String>,
) -> Result<Json<Certificate>, ApiError> {
    let clerk = requester(&node, who);
    Ok(Json(node.issue_certificate(&id, clerk).await?))
}

/// `GET /v1/requests/{id}/certificate`: the certificate issued.
#[utoipa::path(
    get,
    path = "/v1/requests/{id}/certificate",
    tag = "requests",
    params(("id" = String, Path, description = "The request's ID")),
    responses(
        (status = 200, description = "The certificate as issued", body = Certificate),
        (status = 404, description = "`request_not_found`, or `certificate_not_found` before it is issued", body = ErrorBody),
    )
)]
pub async fn certificate(
    State(node): State<Arc<Node>>,
    Path(id): Path<String>,
) -> Result<Json<Certificate>, ApiError> {
    Ok(Json(node.certificate(&id).await?))
}

/// `GET /v1/requests/{id}/certificate.pdf`: the certificate as a PDF.
#[utoipa::path(
    get,
    path = "/v1/requests/{id}/certificate.pdf",
    tag = "requests",
    params(("id" = String, Path, description = "The request's ID")),
    responses(
        (status = 200, description = "The certificate's PDF: one A4 page per sheet, each with its QR code", content_type = "application/pdf"),
        (status = 404, description = "`request_not_found` or `certificate_not_found`", body = ErrorBody),
        (status = 503, description = "`pdf_unavailable`: no font with Chinese characters (or the seal image) could be read", body = ErrorBody),
    )
)]
pub async fn certificate_pdf(
    State(node): State<Arc<Node>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let pdf = node.certificate_pdf(&id).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/pdf".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"certificate-{id}.pdf\""),
            ),
        ],
        pdf,
    )
        .into_response())
}

/// `GET /v1/certificates/{code}`: anyone checks a certificate by its
/// verification code, at any archive of the cluster (the one that issued
/// it is asked).
#[utoipa::path(
    get,
    path = "/v1/certificates/{code}",
    tag = "requests",
    params(("code" = String, Path, description = "The verification code, as printed: ARCHIVE.XXXX-XXXX-XXXX-XXXX-XXXX (case and dashes of the hex part do not matter)")),
    responses(
        (status = 200, description = "The certificate is as issued: what it says, to compare with the paper", body = CertificateCheck),
        (status = 400, description = "`invalid_request`: not a verification code", body = ErrorBody),
        (status = 404, description = "`certificate_not_found`: its archive issued none under this code, or no archive of the cluster has the code's name", body = ErrorBody),
        (status = 422, description = "`certificate_invalid`: what is kept under the code no longer matches its seals", body = ErrorBody),
        (status = 503, description = "`unavailable`: the archive that issued it cannot be asked now", body = ErrorBody),
    )
)]
pub async fn check_certificate(
    State(node): State<Arc<Node>>,
    Path(code): Path<String>,
) -> Result<Json<CertificateCheck>, ApiError> {
    Ok(Json(node.check_certificate(&code).await?))
}

/// `POST /v1/certificates/verify`: anyone checks a certificate's payload
/// (as its QR code holds it) against the trust list, as offline.
#[utoipa::path(
    post,
    path = "/v1/certificates/verify",
    tag = "requests",
    request_body = VerifyRequest,
    responses(
        (status = 200, description = "The sheet checks: what it says", body = CertificateCheck),
        (status = 400, description = "`invalid_json`", body = ErrorBody),
        (status = 422, description = "`certificate_invalid` (changed), `certificate_key_unknown` (a key the trust list lacks), `certificate_key_not_valid` (revoked, or not valid when it sealed), `certificate_malformed` (cut short, not a payload)", body = ErrorBody),
    )
)]
pub async fn verify_certificate(
    State(node): State<Arc<Node>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CertificateCheck>, ApiError> {
    let request: VerifyRequest = json_body(body, "a check is {\"payload\": \"XA1:...\"}")?;
    Ok(Json(node.verify_payload(&request.payload).await?))
}

/// `GET /v1/trust-list`: every archive of the cluster with its keys,
/// signed by the cluster's anchor: saved, it checks certificates offline.
#[utoipa::path(
    get,
    path = "/v1/trust-list",
    tag = "requests",
    responses(
        (status = 200, description = "The trust list, signed", body = TrustListBody),
        (status = 503, description = "`unavailable`: the coordinator cannot be read and none was saved", body = ErrorBody),
    )
)]
pub async fn trust_list(State(node): State<Arc<Node>>) -> Result<Json<TrustListBody>, ApiError> {
    Ok(Json(node.signed_trust_list().await?))
}

/// `POST /v1/peer/requests`: a receiving archive delivers a part of a
/// request (members only).
#[utoipa::path(
    post,
    path = "/v1/peer/requests",
    tag = "requests",
    request_body = Delivery,
    responses(
        (status = 200, description = "What this archive decided (the same at every delivery of the part), sealed", body = Answer),
        (status = 400, description = "`invalid_json` or `invalid_request`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller is not the receiving archive it names", body = ErrorBody),
    )
)]
pub async fn deliver(
    State(node): State<Arc<Node>>,
    who: Option<Extension<Principal>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Answer>, ApiError> {
    let delivery: Delivery = json_body(
        body,
        "a delivery is {\"request_id\", \"receiving\", \"applicant_digest\", \
         \"applicant_name\", \"purpose\", \"records\"}",
    )?;
    // A member's credential names it; without a cluster secret nobody is
    // authenticated and the body's word is taken.
    let from = match who.map(|w| w.0) {
        Some(Principal::Member(name)) => name,
        _ if !node.auth.enabled() => delivery.receiving.clone(),
        _ => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                "only a member of the cluster delivers requests",
            ))
        }
    };
    Ok(Json(
        blocking(&node, move |node| Ok(node.take_in(&from, delivery)?)).await?,
    ))
}

/// `GET /v1/reviews`: the requests from other archives that wait for a
/// reviewer here.
#[utoipa::path(
    get,
    path = "/v1/reviews",
    tag = "requests",
    responses((status = 200, description = "The review queue, oldest first", body = ReviewQueue))
)]
pub async fn reviews(State(node): State<Arc<Node>>) -> Result<Json<ReviewQueue>, ApiError> {
    let reviews = node.review_queue().await?;
    Ok(Json(ReviewQueue { reviews }))
}

/// `POST /v1/reviews/{receiving}/{request}`: a reviewer approves (the
/// copies are signed and sent at the receiving archive's next delivery)
/// or refuses with a reason.
#[utoipa::path(
    post,
    path = "/v1/reviews/{receiving}/{request}",
    tag = "requests",
    params(
        ("receiving" = String, Path, description = "The receiving archive"),
        ("request" = String, Path, description = "The request's ID"),
    ),
    request_body = Decision,
    responses(
        (status = 200, description = "Decided", body = Answer),
        (status = 400, description = "`invalid_json` or `invalid_request` (a refusal without a reason)", body = ErrorBody),
        (status = 404, description = "`review_not_found`", body = ErrorBody),
        (status = 409, description = "`already_decided`", body = ErrorBody),
    )
)]
pub async fn decide(
    State(node): State<Arc<Node>>,
    who: Option<Extension<Principal>>,
    Path((receiving, request)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Answer>, ApiError> {
    let decision: Decision = json_body(
        body,
        "a decision is {\"approve\": true or false, \"reason\": \"...\"}",
    )?;
    let reviewer = requester(&node, who);
    Ok(Json(
        blocking(&node, move |node| {
            Ok(node.decide(&receiving, &request, decision, reviewer)?)
        })
        .await?,
    ))
}
