//! Cross-archive requests over HTTP: the clerk's routes at the receiving
//! archive (`/v1/requests`), the reviewer's at the holding archive
//! (`/v1/reviews`), and the route a receiving archive delivers to
//! (`/v1/peer/requests`). What they do is `exchange.rs`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

use super::blocking;
use super::error::ApiError;
use super::extract::json_body;
use crate::exchange::ExchangeError;
use crate::local::audit::AuditError;
use crate::local::requests::BookError;
use crate::node::Node;
use crate::security::auth::Principal;
use crate::wire::{
    Answer, CertificateCheck, Decision, Delivery, ErrorBody, ErrorCode, NewRequest, RequestList,
    RequestView, Requester, ReviewQueue,
};

impl From<ExchangeError> for ApiError {
    fn from(e: ExchangeError) -> Self {
        let bad = |code, e: &dyn std::fmt::Display| {
            ApiError::new(StatusCode::BAD_REQUEST, code, e.to_string())
        };
        match e {
            e @ ExchangeError::Invalid(_) => bad(ErrorCode::InvalidRequest, &e),
            ExchangeError::Id(e) => ApiError::invalid_id(e),
            e @ ExchangeError::Key(_) => bad(ErrorCode::InvalidKey, &e),
            e @ ExchangeError::NoRequest(_) => ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::RequestNotFound,
                e.to_string(),
            ),
            e @ ExchangeError::NoReview(_) => ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::ReviewNotFound,
                e.to_string(),
            ),
            e @ ExchangeError::Decided(_) => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::AlreadyDecided,
                e.to_string(),
            ),
            e @ ExchangeError::NotAnswered(_) => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::NotAnswered, e.to_string())
            }
            e @ ExchangeError::NoCertificate(_) => ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::CertificateNotFound,
                e.to_string(),
            ),
            e @ ExchangeError::CertificateInvalid { .. } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::CertificateInvalid,
                e.to_string(),
            ),
            e @ ExchangeError::Unavailable(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Unavailable,
                e.to_string(),
            ),
            ExchangeError::Book(BookError::DiskFull(full))
            | ExchangeError::Audit(AuditError::DiskFull(full)) => full.into(),
            ExchangeError::Book(BookError::Reopening(r))
            | ExchangeError::Audit(AuditError::Reopening(r)) => r.into(),
            ExchangeError::Domain(e) => e.into(),
            ExchangeError::Search(e) => e.into(),
            e => ApiError::internal(e),
        }
    }
}

/// Who did a step, for the audit log.
fn requester(node: &Node, who: Option<Extension<Principal>>) -> Requester {
    let (token, role) = match who.map(|w| w.0) {
        Some(Principal::Client { name, role, .. }) => (name, role.as_str().to_owned()),
        Some(Principal::Member(name)) => (name, "member".to_owned()),
        Some(Principal::Anonymous) | None => ("anonymous".to_owned(), "none".to_owned()),
    };
    Requester {
        token,
        role,
        domain: node.cluster.me.clone(),
    }
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
    let requests = blocking(&node, |node| Ok(node.requests()?)).await?;
    Ok(Json(RequestList { requests }))
}

/// `GET /v1/requests/{id}`.
#[utoipa::path(
    get,
    path = "/v1/requests/{id}",
    tag = "requests",
    params(("id" = String, Path, description = "The request's ID")),
    responses(
        (status = 200, description = "The request, with the verified copies received", body = RequestView),
        (status = 404, description = "`request_not_found`", body = ErrorBody),
    )
)]
pub async fn get(
    State(node): State<Arc<Node>>,
    Path(id): Path<String>,
) -> Result<Json<RequestView>, ApiError> {
    Ok(Json(
        blocking(&node, move |node| Ok(node.request(&id)?)).await?,
    ))
}

/// `POST /v1/requests/{id}/certificate`: the clerk issues the certificate
/// of an answered request, to print for the applicant.
#[utoipa::path(
    post,
    path = "/v1/requests/{id}/certificate",
    tag = "requests",
    params(("id" = String, Path, description = "The request's ID")),
    responses(
        (status = 200, description = "Issued (asked again: the same certificate); each copy carries its verification code", body = RequestView),
        (status = 404, description = "`request_not_found`", body = ErrorBody),
        (status = 409, description = "`not_answered`: some holding archive has not answered, or none sent a copy", body = ErrorBody),
    )
)]
pub async fn certify(
    State(node): State<Arc<Node>>,
    who: Option<Extension<Principal>>,
    Path(id): Path<String>,
) -> Result<Json<RequestView>, ApiError> {
    let clerk = requester(&node, who);
    Ok(Json(
        blocking(&node, move |node| Ok(node.issue_certificate(&id, clerk)?)).await?,
    ))
}

/// `GET /v1/certificates/{code}`: anyone checks a certificate's
/// verification code, at the archive that issued it or the one that
/// signed its copy.
#[utoipa::path(
    get,
    path = "/v1/certificates/{code}",
    tag = "requests",
    params(("code" = String, Path, description = "The verification code, as printed (case and dashes do not matter)")),
    responses(
        (status = 200, description = "The copy is as its holding archive signed it", body = CertificateCheck),
        (status = 400, description = "`invalid_request`: not a verification code", body = ErrorBody),
        (status = 404, description = "`certificate_not_found`: neither issued nor released here", body = ErrorBody),
        (status = 422, description = "`certificate_invalid`: the copy kept under the code no longer matches its signature", body = ErrorBody),
    )
)]
pub async fn check_certificate(
    State(node): State<Arc<Node>>,
    Path(code): Path<String>,
) -> Result<Json<CertificateCheck>, ApiError> {
    Ok(Json(
        blocking(&node, move |node| Ok(node.check_certificate(&code)?)).await?,
    ))
}

/// `POST /v1/peer/requests`: a receiving archive delivers a part of a
/// request (members only).
#[utoipa::path(
    post,
    path = "/v1/peer/requests",
    tag = "requests",
    request_body = Delivery,
    responses(
        (status = 200, description = "What this archive decided (the same at every delivery of the part)", body = Answer),
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
    let reviews = blocking(&node, |node| Ok(node.review_queue()?)).await?;
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
