//! Cross-archive requests (异地查档、跨馆出证), both sides: a clerk at the
//! receiving archive registers a request (`receiving.rs`); its outbox
//! sends each holding archive its part until that archive has answered;
//! the holding archive answers by its release policy or leaves the part to
//! its reviewers (`holding.rs`), and seals every answer and every copy it
//! releases; the receiving archive keeps an answer only once its seal and
//! every copy's check against the trust list (`trust.rs`), checks the
//! copies again whenever they are shown or certified, and issues the
//! certificate, which anyone checks online at any archive or offline from
//! its QR code (`certificate.rs`). Each step goes to the audit log once
//! (`steps.rs`); what the book keeps is in `kept.rs`.
//!
//! Correctness: a part is delivered exactly once in effect. The receiving
//! archive keeps a request durably before the clerk's answer and sends
//! its parts again until each is final, whatever the network does; the
//! holding archive keeps what it took in durably, by receiving archive
//! and request ID, before it answers, and answers a repeat with what it
//! kept (the same copies, the same decision). The receiving archive
//! takes an answer in only where it moves the part forward
//! ([`HoldingState::may_become`](crate::wire::HoldingState::may_become)),
//! so an old answer arriving late changes nothing. A part is `refused`
//! only by an answer its holding archive sealed, so neither an archive
//! that cannot be asked nor a party on the wire turns a request into a
//! refusal. The identity number never leaves the receiving archive: what
//! travels and what is kept is its keyed digest, as in the audit log.

mod certificate;
mod holding;
mod kept;
mod legacy;
mod receiving;
pub(crate) mod state;
mod steps;
#[cfg(test)]
mod tests;
mod trust;

use std::time::Duration;

use crate::cluster::client::ClientError;
use crate::local::audit::AuditError;
use crate::local::domain::DomainError;
use crate::local::id::InvalidId;
use crate::local::keys::InvalidKey;
use crate::local::requests::BookError;
use crate::node::SearchError;
use crate::wire::{HoldingState, RequestStatus};

pub use kept::Action;

/// Records one request may ask for.
pub const MAX_RECORDS: usize = 100;
/// Longest applicant name and purpose, in bytes.
pub const MAX_TEXT_BYTES: usize = 1024;
/// How often parts not yet answered are asked about again.
const RESEND_EVERY: Duration = Duration::from_secs(1);
/// Parts the outbox delivers at once.
const DELIVERIES_AT_ONCE: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum RequestsError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Id(#[from] InvalidId),
    #[error(transparent)]
    Key(#[from] InvalidKey),
    #[error("no request {0:?} here")]
    NoRequest(String),
    #[error("no request {0:?} waits for review here")]
    NoReview(String),
    #[error("the request was decided already: it is {0:?}")]
    Decided(HoldingState),
    #[error("a certificate is issued once every holding archive has answered (with copies, or that it holds none); the request is {0:?}")]
    NotAnswered(RequestStatus),
    #[error("no certificate is issued for request {0:?} yet")]
    NotCertified(String),
    #[error("the copy of {record} from {holding} does not check ({why}): no certificate is issued while it is kept; the event is in the audit log")]
    CopyInvalid {
        holding: String,
        record: String,
        why: String,
    },
    #[error("no certificate with the code {0} was issued here")]
    NoCertificate(String),
    #[error("no archive called {0} is in this cluster's trust list: check the code as printed, or the certificate is from another cluster")]
    UnknownIssuer(String),
    #[error("the archive that issued it, {0}, cannot be asked now: check again later, or check the certificate's QR code offline")]
    IssuerUnreachable(String),
    #[error("the certificate {code} does not check: {why}")]
    CertificateInvalid { code: String, why: String },
    #[error("{0}")]
    Rejected(#[from] xarchive_seal::Rejected),
    #[error("{0} could not be asked; nothing was registered: try again once it is back")]
    Unavailable(String),
    #[error(
        "the trust list cannot be read: the coordinator is unreachable and none was saved here"
    )]
    TrustUnavailable,
    #[error("the certificate's PDF cannot be made: {0}")]
    Pdf(String),
    #[error("request book: {0}")]
    Book(#[from] BookError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error(transparent)]
    Search(#[from] SearchError),
    #[error("the archive {0} answered the check: {1}")]
    Peer(String, #[source] ClientError),
    #[error("a stored request is unreadable: {0}")]
    Corrupt(#[source] serde_json::Error),
    #[error("cannot encode the request: {0}")]
    Encode(#[source] serde_json::Error),
}

/// Starts the request flow: this archive's keys handed to the
/// coordinator (published before it registers), and the outbox, which
/// ends when `stop` is cancelled. Called before the cluster starts.
pub fn start(node: &std::sync::Arc<crate::node::Node>, stop: &tokio_util::sync::CancellationToken) {
    node.cluster
        .coordinator
        .set_trust_entry(node.own_trust_entry());
    tokio::spawn(node.clone().run_outbox(stop.clone()));
}

fn rfc3339(us: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(us) * 1000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

fn secs(us: u64) -> i64 {
    i64::try_from(us / 1_000_000).unwrap_or(i64::MAX)
}

/// `value` is some text, within [`MAX_TEXT_BYTES`] (`required`: not
/// only blanks either).
fn check_text(what: &str, value: &str, required: bool) -> Result<(), RequestsError> {
    if (required && value.trim().is_empty()) || value.len() > MAX_TEXT_BYTES {
        let least = u8::from(required);
        return Err(RequestsError::Invalid(format!(
            "{what} must be {least} to {MAX_TEXT_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Whether `id` can be a request ID (as made here: 32 hex digits).
fn is_request_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unbase64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}
