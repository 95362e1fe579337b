//! Searches by key (every record about a person, in every domain) and the
//! log of them.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

use super::error::ApiError;
use super::extract::{json_body, Params};
use crate::node::Node;
use crate::security::auth::{Principal, Refusal};
use crate::wire::{
    AuditIntegrity, AuditPage, ErrorBody, ErrorCode, KeyTypesBody, Requester, SearchBody,
    SearchRequest,
};

/// `GET /v1/keys`: the key types records may carry (the page's search
/// form lists them).
#[utoipa::path(
    get,
    path = "/v1/keys",
    tag = "lookup",
    responses((status = 200, description = "The declared key types", body = KeyTypesBody))
)]
pub async fn key_types(State(node): State<Arc<Node>>) -> Json<KeyTypesBody> {
    Json(KeyTypesBody {
        key_types: node.key_types().iter().cloned().collect(),
        id_profile: node.config.ids.clone(),
    })
}

/// `POST /v1/search` with `{"key_type": "...", "value": "..."}`.
#[utoipa::path(
    post,
    path = "/v1/search",
    tag = "lookup",
    request_body = SearchRequest,
    responses(
        (status = 200, description = "Every record with the key, from every domain that could hold one (possibly none)", body = SearchBody),
        (status = 400, description = "`invalid_json`, `invalid_request` (not a search), `invalid_key` (an undeclared key type, or a value its format refuses; the value is never echoed)", body = ErrorBody),
        (status = 503, description = "`unavailable` (some domains could not be reached) or `not_ready` (the membership is not confirmed): the records found, and who did not answer", body = SearchBody),
        (status = 507, description = "`insufficient_storage`: the search's audit entry could not be written for want of disk space, so nothing is returned", body = ErrorBody),
    )
)]
pub async fn search(
    State(node): State<Arc<Node>>,
    who: Option<Extension<Principal>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: SearchRequest = json_body(
        body,
        "a search is {\"key_type\": \"...\", \"value\": \"...\"}",
    )?;
    let who = who.map_or(Principal::Anonymous, |w| w.0);
    let requester = requester(&node, &who, request.requester.clone())?;
    if let Err(refusal) = spend_search(&node, &who) {
        return Ok(super::challenge(refusal));
    }
    let mut found = node
        .search(&request, requester)
        .await
        .map_err(ApiError::from)?;
    let problem = if found.unreachable.is_empty() {
        found.unconfirmed.as_ref().map(|reason| {
            (
                ErrorCode::NotReady,
                format!(
                    "{} records found in every domain known here, but this domain cannot \
                     confirm the cluster's membership ({reason}), so a domain it does not \
                     know of may hold more",
                    found.records.len()
                ),
            )
        })
    } else {
        Some((
            ErrorCode::Unavailable,
            format!(
                "{} records found; these domains could not be reached and may hold more: {}",
                found.records.len(),
                found.unreachable.join(", ")
            ),
        ))
    };
    Ok(match problem {
        None => Json(found).into_response(),
        Some((code, message)) => {
            found.code = Some(code);
            found.message = Some(message);
            (StatusCode::SERVICE_UNAVAILABLE, Json(found)).into_response()
        }
    })
}

/// Spends one search of `who`'s allowance, and counts it. Searches have a
/// rate of their own: per token at the domain it was presented to (its
/// home, when bound to one: then every search it makes in the cluster is
/// counted, and limited, there), per member for those passed on. A
/// clerk's request is a search for the applicant (`requests.rs`).
pub(super) fn spend_search(node: &Node, who: &Principal) -> Result<(), Refusal> {
    match who {
        Principal::Client { name, role, .. } => {
            node.auth.spend_search(name)?;
            node.metrics.count_search(name, role.as_str());
        }
        Principal::Member(member) => node.auth.spend(&format!("member {member}"))?,
        Principal::Anonymous => node.metrics.count_search("anonymous", "none"),
    }
    Ok(())
}

/// Who the search is for: the caller's token at this domain, or, for a
/// search passed on by a member domain, the client it names, which must
/// be one of that member's own (on a domain without tokens or a secret,
/// any caller may name one). A token bound to another domain does not
/// get this far (`Authority::allow`).
fn requester(
    node: &Node,
    who: &Principal,
    named: Option<Requester>,
) -> Result<Requester, ApiError> {
    let forbidden =
        |message: String| ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message);
    match (who, named) {
        // A member answers for the clients it authenticated, no others:
        // its credential names it, and the requester must be its own.
        (Principal::Member(member), Some(named)) if named.domain == *member => Ok(named),
        (Principal::Member(member), Some(named)) => Err(forbidden(format!(
            "member {member} passed on a search naming a requester of domain {}: a member \
             passes on only its own clients' searches",
            named.domain
        ))),
        // Where nothing is required (no tokens, no secret), nobody can
        // be told from a member: the log holds what callers say.
        (Principal::Anonymous, Some(named)) if !node.auth.enabled() => Ok(named),
        (_, Some(_)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
            "only member domains name the requester of a search",
        )),
        // The caller itself; a member's own search (not a client's passed
        // on) is logged as the member its credential names, and answered
        // as to another archive.
        (who, None) => Ok(who.requester(node.domain.name())),
    }
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Entries from this time on: RFC 3339 (`2026-11-25T08:00:00Z`) or
    /// microseconds since the Unix epoch (what `next` gives); default all.
    since: Option<String>,
    /// At most this many entries (default and limit 1000).
    limit: Option<usize>,
}

/// Most entries in one page.
const AUDIT_PAGE: usize = 1000;

/// `GET /v1/audit?since=...&limit=N`: the searches by private key that
/// reached this domain, for a token with the `audit` role.
#[utoipa::path(
    get,
    path = "/v1/audit",
    tag = "lookup",
    params(AuditParams),
    responses(
        (status = 200, description = "The entries, oldest first, and where the next page starts", body = AuditPage),
        (status = 400, description = "`invalid_parameter` (`since` is neither RFC 3339 nor microseconds)", body = ErrorBody),
    )
)]
pub async fn audit(
    State(node): State<Arc<Node>>,
    Params(params): Params<AuditParams>,
) -> Result<Response, ApiError> {
    let since_us = match params.since.as_deref() {
        None => 0,
        Some(text) => parse_since(text).ok_or_else(|| {
            ApiError::invalid_parameter(format!(
                "since {text:?} is neither an RFC 3339 time nor microseconds since the epoch"
            ))
        })?,
    };
    let limit = params.limit.unwrap_or(AUDIT_PAGE).clamp(1, AUDIT_PAGE);
    let page = super::blocking(&node, move |node| {
        // One more than asked tells whether there is a next page.
        let mut entries = node
            .audit
            .since(since_us, limit + 1)
            .map_err(ApiError::internal)?;
        let next = (entries.len() > limit)
            .then(|| entries.pop().map(|e| e.at_us.to_string()))
            .flatten();
        Ok(AuditPage {
            domain: node.domain.name().to_owned(),
            entries,
            next,
        })
    })
    .await?;
    Ok(Json(page).into_response())
}

/// `GET /v1/audit/verify`: whether the log of searches is whole (its hash
/// chain) and still holds the head last anchored in the coordinator.
#[utoipa::path(
    get,
    path = "/v1/audit/verify",
    tag = "lookup",
    responses(
        (status = 200, description = "What the check found: `intact`, the head, the anchor, the problems", body = AuditIntegrity),
    )
)]
pub async fn audit_verify(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let found = node.verify_audit().await.map_err(ApiError::internal)?;
    Ok(Json(found).into_response())
}

fn parse_since(text: &str) -> Option<u64> {
    if let Ok(us) = text.parse::<u64>() {
        return Some(us);
    }
    let at =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    // A time before the epoch is before every entry: from the first.
    Some(u64::try_from(at.unix_timestamp_nanos() / 1_000).unwrap_or(0))
}
