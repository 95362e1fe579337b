//! Cross-archive requests (异地查档、跨馆出证), both sides: a clerk at the
//! receiving archive registers a request; its outbox sends each holding
//! archive its part until that archive has answered; the holding archive
//! answers by its release policy or leaves the part to its reviewers, and
//! signs every copy it releases; the receiving archive keeps a copy only
//! once its signature checks against the key the holding archive
//! registered.
//!
//! Correctness: a part is delivered exactly once in effect. The receiving
//! archive keeps a request durably before the clerk's answer and sends
//! its parts again until each is final, whatever the network does; the
//! holding archive keeps what it took in durably, by receiving archive
//! and request ID, before it answers, and answers a repeat with what it
//! kept (the same copies, the same decision). The receiving archive
//! takes an answer in only where it moves the part forward
//! ([`HoldingState::may_become`]), so an old answer arriving late changes
//! nothing. The identity number never leaves the receiving archive: what
//! travels and what is kept is its keyed digest, as in the audit log.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::cluster::client::ClientError;
use crate::cluster::lookup::{Outcome, Strategy};
use crate::local::audit::{AuditEntry, AuditError, Requester};
use crate::local::domain::DomainError;
use crate::local::id::{ArchiveId, InvalidId};
use crate::local::keys::InvalidKey;
use crate::local::record::now_us;
use crate::local::requests::{BookError, Entry, Side};
use crate::node::{Node, SearchError};
use crate::security::signing::{self, SigningError, Unverified};
use crate::wire::{
    Answer, CertificateCheck, CopyBody, Decision, Delivery, HoldingState, HoldingView, NewRequest,
    ReceivedCopy, RequestStatus, RequestView, ReviewItem, SearchRequest, SignedCopy,
};

/// Records one request may ask for.
pub const MAX_RECORDS: usize = 100;
/// Longest applicant name and purpose, in bytes.
const MAX_TEXT_BYTES: usize = 1024;
/// How often parts not yet answered are asked about again.
const RESEND_EVERY: Duration = Duration::from_secs(1);
/// Parts the outbox delivers at once.
const DELIVERIES_AT_ONCE: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
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
    #[error("a certificate is issued once every holding archive has answered with a copy; the request is {0:?}")]
    NotAnswered(RequestStatus),
    #[error("no certificate with the code {0} was issued or released here")]
    NoCertificate(String),
    #[error("the copy kept under the code {code} fails its check ({why}): it was changed after it was signed")]
    CertificateInvalid { code: String, why: Unverified },
    #[error(
        "the archive {0} that holds a record could not be asked; nothing was registered, try again"
    )]
    Unavailable(String),
    #[error("request book: {0}")]
    Book(#[from] BookError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error(transparent)]
    Search(#[from] SearchError),
    #[error("signing: {0}")]
    Signing(#[from] SigningError),
    #[error("a stored request is unreadable: {0}")]
    Corrupt(#[source] serde_json::Error),
    #[error("cannot encode the request: {0}")]
    Encode(#[source] serde_json::Error),
}

/// A step of a request for this domain's audit log, kept in the request's
/// entry (written in the transaction of the change it records) until it
/// is in the log: a kill or a full disk between the two writes delays the
/// log's entry, and never loses or doubles it ([`Node::log_step_once`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Step {
    at_us: u64,
    who: Requester,
    action: String,
    records: Vec<String>,
}

impl Step {
    fn now(who: Requester, action: &str, records: Vec<String>) -> Step {
        Step {
            at_us: now_us(),
            who,
            action: action.to_owned(),
            records,
        }
    }
}

/// An entry of the request book with steps to log.
trait Kept: Serialize + serde::de::DeserializeOwned {
    fn request_id(&self) -> &str;
    fn applicant_digest(&self) -> &str;
    fn unlogged(&mut self) -> &mut Vec<Step>;
    fn entry(&self) -> Result<Entry, ExchangeError>;
}

/// A request as the receiving archive keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Outgoing {
    id: String,
    submitted_us: u64,
    clerk: String,
    applicant_digest: String,
    applicant_name: String,
    purpose: String,
    not_found: Vec<String>,
    parts: BTreeMap<String, Part>,
    /// When the clerk issued the certificate.
    #[serde(default)]
    certified_us: Option<u64>,
    #[serde(default)]
    unlogged: Vec<Step>,
}

/// One holding archive's part of an [`Outgoing`] request.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Part {
    records: Vec<String>,
    state: HoldingState,
    /// As signed, each checked before it was kept.
    copies: Vec<SignedCopy>,
    /// The holding archive's key that checked them (hex).
    #[serde(default)]
    signing_key: String,
    missing: Vec<String>,
    reason: Option<String>,
}

/// A request taken in from a receiving archive.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Incoming {
    delivery: Delivery,
    received_us: u64,
    answer: Answer,
    #[serde(default)]
    unlogged: Vec<Step>,
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ExchangeError> {
    serde_json::to_vec(value).map_err(ExchangeError::Encode)
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ExchangeError> {
    serde_json::from_slice(bytes).map_err(ExchangeError::Corrupt)
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

/// `value` is some text, within [`MAX_TEXT_BYTES`] (`required`: not
/// only blanks either).
fn check_text(what: &str, value: &str, required: bool) -> Result<(), ExchangeError> {
    if (required && value.trim().is_empty()) || value.len() > MAX_TEXT_BYTES {
        let least = if required { 1 } else { 0 };
        return Err(ExchangeError::Invalid(format!(
            "{what} must be {least} to {MAX_TEXT_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Another archive, as the audit log names it for a step it caused.
fn by_archive(domain: &str) -> Requester {
    Requester {
        token: String::new(),
        role: "member".into(),
        domain: domain.to_owned(),
    }
}

/// A part left to this archive's reviewers, and why.
fn in_review(reason: String) -> Answer {
    Answer {
        state: HoldingState::InReview,
        copies: Vec::new(),
        missing: Vec::new(),
        reason: Some(reason),
    }
}

/// A part refused by a reviewer.
fn refused(reason: String) -> Answer {
    Answer {
        state: HoldingState::Refused,
        copies: Vec::new(),
        missing: Vec::new(),
        reason: Some(reason),
    }
}

/// Whether `id` can be a request ID (as made here: 32 hex digits).
fn is_request_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
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

    /// As the book keeps it: found by the codes of the copies released,
    /// and listed as waiting while in review or with steps to log.
    fn entry(&self) -> Result<Entry, ExchangeError> {
        Ok(Entry {
            bytes: encode(self)?,
            codes: self
                .answer
                .copies
                .iter()
                .map(signing::verification_code)
                .collect(),
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
    /// or a step is to be logged, and, once its certificate is issued,
    /// found by its copies' codes.
    fn entry(&self) -> Result<Entry, ExchangeError> {
        let codes = match self.certified_us {
            Some(_) => self
                .parts
                .values()
                .flat_map(|p| p.copies.iter().map(signing::verification_code))
                .collect(),
            None => Vec::new(),
        };
        Ok(Entry {
            bytes: encode(self)?,
            codes,
            unfinished: self.parts.values().any(|p| !p.state.is_final())
                || !self.unlogged.is_empty(),
        })
    }
}

impl Outgoing {
    fn status(&self) -> RequestStatus {
        match self.certified_us {
            Some(_) => RequestStatus::Certified,
            None => RequestStatus::of(self.parts.values().map(|p| p.state)),
        }
    }

    /// Every record asked for from some holding archive.
    fn records(&self) -> Vec<String> {
        self.parts
            .values()
            .flat_map(|p| p.records.iter().cloned())
            .collect()
    }

    fn view(&self) -> Result<RequestView, ExchangeError> {
        let mut holdings = Vec::new();
        for (domain, part) in &self.parts {
            // Each copy was checked before it was kept; decoding it again
            // cannot fail but for a damaged file.
            let copies = part
                .copies
                .iter()
                .map(|c| {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(&c.payload)
                        .unwrap_or_default();
                    Ok(ReceivedCopy {
                        code: signing::verification_code(c),
                        copy: decode::<CopyBody>(&bytes)?,
                    })
                })
                .collect::<Result<_, ExchangeError>>()?;
            holdings.push(HoldingView {
                domain: domain.clone(),
                records: part.records.clone(),
                state: part.state,
                copies,
                missing: part.missing.clone(),
                reason: part.reason.clone(),
            });
        }
        Ok(RequestView {
            id: self.id.clone(),
            submitted_at: rfc3339(self.submitted_us),
            clerk: self.clerk.clone(),
            status: self.status(),
            certified_at: self.certified_us.map(rfc3339),
            applicant_name: self.applicant_name.clone(),
            purpose: self.purpose.clone(),
            holdings,
            not_found: self.not_found.clone(),
        })
    }
}

impl Node {
    /// A step of `request` in this domain's audit log (who, which records,
    /// the applicant as the keyed digest), unless it is there already: an
    /// entry of the same request, action and domain since the step was
    /// taken is the one a kill kept from being marked logged.
    fn log_step_once(
        &self,
        request: &str,
        applicant_digest: &str,
        step: &Step,
    ) -> Result<(), AuditError> {
        const PAGE: usize = 1000;
        let mut since = step.at_us;
        loop {
            let page = self.audit.since(since, PAGE)?;
            let logged = page.iter().any(|e| {
                e.request.as_deref() == Some(request)
                    && e.action.as_deref() == Some(step.action.as_str())
                    && e.requester.domain == step.who.domain
            });
            if logged {
                return Ok(());
            }
            match page.last() {
                Some(last) if page.len() == PAGE => since = last.at_us + 1,
                _ => break,
            }
        }
        self.audit.append(AuditEntry {
            at_us: step.at_us,
            requester: step.who.clone(),
            key_type: self.config.requests.key_type.clone(),
            value_digest: applicant_digest.to_owned(),
            records: step.records.clone(),
            action: Some(step.action.clone()),
            request: Some(request.to_owned()),
            prev: String::new(),
            hash: String::new(),
        })?;
        Ok(())
    }

    /// Writes the steps the entry at `key` keeps to the audit log, then
    /// marks them logged. Blocks. A failure (a full disk) leaves them kept:
    /// the outbox's next pass writes them.
    fn flush_steps<T: Kept>(&self, side: Side, key: &str) {
        if let Err(e) = self.try_flush_steps::<T>(side, key) {
            tracing::warn!(error = %e, "a request's step is not in the audit log yet; it is kept and written at the outbox's next pass");
        }
    }

    fn try_flush_steps<T: Kept>(&self, side: Side, key: &str) -> Result<(), ExchangeError> {
        // Two flushes of one entry at once (a repeat delivery and the
        // outbox's pass) would each find the step missing and write it.
        let _one_at_a_time = self.logging_steps.lock();
        let Some(bytes) = self.requests.get(side, key)? else {
            return Ok(());
        };
        let mut kept = decode::<T>(&bytes)?;
        let steps = kept.unlogged().clone();
        if steps.is_empty() {
            return Ok(());
        }
        for step in &steps {
            self.log_step_once(kept.request_id(), kept.applicant_digest(), step)?;
        }
        self.requests.change::<ExchangeError>(side, key, |old| {
            let Some(old) = old else { return Ok(None) };
            let mut kept = decode::<T>(old)?;
            kept.unlogged().retain(|s| !steps.contains(s));
            kept.entry().map(Some)
        })?;
        Ok(())
    }

    /// Writes the steps of every entry still keeping some (the outbox's
    /// pass: those a full disk or a kill kept from the log). Blocks.
    fn flush_all_steps(&self) -> Result<(), ExchangeError> {
        self.flush_listed::<Outgoing>(Side::Outgoing)?;
        self.flush_listed::<Incoming>(Side::Incoming)
    }

    /// [`flush_all_steps`](Self::flush_all_steps) for one side: of the
    /// entries listed as waiting, only those that keep steps are flushed
    /// (read again under the lock); most wait for an answer, not the log.
    fn flush_listed<T: Kept>(&self, side: Side) -> Result<(), ExchangeError> {
        for (key, bytes) in self.requests.unfinished(side)? {
            if !decode::<T>(&bytes)?.unlogged().is_empty() {
                self.flush_steps::<T>(side, &key);
            }
        }
        Ok(())
    }

    /// Registers a clerk's request: finds which archives hold the records
    /// (by their IDs, or by a search for the applicant's identity number),
    /// keeps it durably and wakes the outbox.
    pub async fn submit_request(
        self: &Arc<Self>,
        new: NewRequest,
        clerk: Requester,
    ) -> Result<RequestView, ExchangeError> {
        check_text("applicant_name", &new.applicant_name, true)?;
        check_text("purpose", &new.purpose, true)?;
        let key_type = self.config.requests.key_type.clone();
        let normalised = self.key_types().normalise(&key_type, &new.applicant_id.0)?;
        let applicant_digest = self.auth.key_hasher().audit_digest(&key_type, &normalised);
        let mut held: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut not_found = Vec::new();
        match new.records {
            Some(ids) => {
                if ids.is_empty() || ids.len() > MAX_RECORDS {
                    return Err(ExchangeError::Invalid(format!(
                        "records must name 1 to {MAX_RECORDS} archive numbers"
                    )));
                }
                for id in ids {
                    let id = ArchiveId::parse(&id)?;
                    match self.lookup(&id, Strategy::Routed).await?.outcome {
                        Outcome::Found { owner, .. } => {
                            held.entry(owner).or_default().push(id.to_string())
                        }
                        Outcome::NotFound => not_found.push(id.to_string()),
                        Outcome::Unavailable { domains } => {
                            return Err(ExchangeError::Unavailable(domains.join(", ")))
                        }
                        Outcome::NotReady { reason } => {
                            return Err(ExchangeError::Unavailable(reason))
                        }
                    }
                }
            }
            None => {
                let search = SearchRequest {
                    key_type: key_type.clone(),
                    value: normalised,
                    local: false,
                    requester: None,
                };
                let found = self.search(&search, clerk.clone()).await?;
                // A search that could not ask everyone who may hold a
                // record would register a request missing its parts.
                if found.code.is_some() {
                    let why = found
                        .message
                        .unwrap_or_else(|| found.unreachable.join(", "));
                    return Err(ExchangeError::Unavailable(why));
                }
                for record in found.records.into_iter().take(MAX_RECORDS) {
                    held.entry(record.domain)
                        .or_default()
                        .push(record.id.to_string());
                }
            }
        }
        let id = format!("{:032x}", rand::random::<u128>());
        let request = Outgoing {
            id: id.clone(),
            submitted_us: now_us(),
            clerk: clerk.token.clone(),
            applicant_digest,
            applicant_name: new.applicant_name,
            purpose: new.purpose,
            not_found,
            certified_us: None,
            unlogged: Vec::new(),
            parts: held
                .into_iter()
                .map(|(domain, records)| {
                    let part = Part {
                        records,
                        state: HoldingState::Pending,
                        copies: Vec::new(),
                        signing_key: String::new(),
                        missing: Vec::new(),
                        reason: None,
                    };
                    (domain, part)
                })
                .collect(),
        };
        let mut kept = request.clone();
        kept.unlogged
            .push(Step::now(clerk, "request_submitted", kept.records()));
        let node = self.clone();
        tokio::task::spawn_blocking(move || {
            node.requests
                .change::<ExchangeError>(Side::Outgoing, &kept.id, |_| kept.entry().map(Some))?;
            node.flush_steps::<Outgoing>(Side::Outgoing, &kept.id);
            Ok::<_, ExchangeError>(())
        })
        .await
        .map_err(DomainError::from)??;
        self.outbox.notify_one();
        request.view()
    }

    /// A request registered here.
    pub fn request(&self, id: &str) -> Result<RequestView, ExchangeError> {
        let bytes = self
            .requests
            .get(Side::Outgoing, id)?
            .ok_or_else(|| ExchangeError::NoRequest(id.to_owned()))?;
        decode::<Outgoing>(&bytes)?.view()
    }

    /// Every request registered here, newest first.
    pub fn requests(&self) -> Result<Vec<RequestView>, ExchangeError> {
        let mut all = self
            .requests
            .all(Side::Outgoing)?
            .into_iter()
            .map(|(_, bytes)| decode::<Outgoing>(&bytes))
            .collect::<Result<Vec<_>, _>>()?;
        all.sort_by_key(|r| std::cmp::Reverse(r.submitted_us));
        all.iter().map(Outgoing::view).collect()
    }

    /// Issues the certificate of an answered request: from now on each of
    /// its copies' codes finds it here. Issued once; asked again, the same
    /// certificate.
    pub fn issue_certificate(
        &self,
        id: &str,
        clerk: Requester,
    ) -> Result<RequestView, ExchangeError> {
        let kept = self
            .requests
            .change::<ExchangeError>(Side::Outgoing, id, |old| {
                let old = old.ok_or_else(|| ExchangeError::NoRequest(id.to_owned()))?;
                let mut request = decode::<Outgoing>(old)?;
                match request.status() {
                    RequestStatus::Certified => return Ok(None),
                    RequestStatus::Answered => {}
                    status => return Err(ExchangeError::NotAnswered(status)),
                }
                request.certified_us = Some(now_us());
                let records = request.records();
                request
                    .unlogged
                    .push(Step::now(clerk, "certificate_issued", records));
                request.entry().map(Some)
            })?
            .ok_or_else(|| ExchangeError::NoRequest(id.to_owned()))?;
        self.flush_steps::<Outgoing>(Side::Outgoing, id);
        decode::<Outgoing>(&kept)?.view()
    }

    /// Checks a certificate's code: finds the copy it was issued for (as
    /// the receiving archive) or released with (as the holding archive),
    /// and checks the copy's signature again.
    pub fn check_certificate(&self, code: &str) -> Result<CertificateCheck, ExchangeError> {
        let code = signing::normalise_code(code).ok_or_else(|| {
            ExchangeError::Invalid(
                "a verification code is 20 hex digits, as printed: XXXX-XXXX-XXXX-XXXX-XXXX".into(),
            )
        })?;
        let me = self.cluster.me.as_str();
        let invalid = |why| ExchangeError::CertificateInvalid {
            code: code.clone(),
            why,
        };
        // The copies kept under the code, the key that signed them, and the
        // receiving archive. A copy whose signature was changed no longer
        // has the code.
        let (copies, key, receiving) =
            if let Some((_, bytes)) = self.requests.by_code(Side::Outgoing, &code)? {
                let part = decode::<Outgoing>(&bytes)?
                    .parts
                    .into_values()
                    .find(|p| {
                        p.copies
                            .iter()
                            .any(|c| signing::verification_code(c) == code)
                    })
                    .ok_or_else(|| invalid(Unverified::Forged))?;
                (part.copies, part.signing_key, me.to_owned())
            } else if let Some((_, bytes)) = self.requests.by_code(Side::Incoming, &code)? {
                let kept = decode::<Incoming>(&bytes)?;
                (
                    kept.answer.copies,
                    self.signer.public_hex(),
                    kept.delivery.receiving,
                )
            } else {
                return Err(ExchangeError::NoCertificate(code));
            };
        let copy = copies
            .iter()
            .find(|c| signing::verification_code(c) == code)
            .ok_or_else(|| invalid(Unverified::Forged))?;
        let body = signing::verify(&key, copy).map_err(invalid)?;
        let content_sha256 = match body.content.as_deref() {
            Some(c) => {
                use sha2::Digest;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(c)
                    .map_err(|_| invalid(Unverified::NotACopy))?;
                Some(hex::encode(sha2::Sha256::digest(bytes)))
            }
            None => None,
        };
        Ok(CertificateCheck {
            code,
            holding: body.holding,
            receiving,
            archive_number: body.archive_number,
            request_id: body.request_id,
            date: body.date,
            title: body.title,
            content_sha256,
            checked_by: me.to_owned(),
        })
    }

    /// Signed copies of those of `records` held here, the others named
    /// missing; refused when none is held (an answer is "released" only
    /// with a copy: `RequestStatus::of`).
    fn release(&self, request_id: &str, records: &[String]) -> Result<Answer, ExchangeError> {
        let date = time::OffsetDateTime::now_utc().date().to_string();
        let mut copies = Vec::new();
        let mut missing = Vec::new();
        for id in records {
            let record = ArchiveId::parse(id)
                .ok()
                .and_then(|id| self.domain.get(&id).transpose())
                .transpose()?;
            let Some(record) = record else {
                missing.push(id.clone());
                continue;
            };
            let body = CopyBody {
                holding: self.domain.name().to_owned(),
                archive_number: id.clone(),
                request_id: request_id.to_owned(),
                date: date.clone(),
                title: record.title,
                metadata: record.metadata,
                content: record
                    .content
                    .map(|c| base64::engine::general_purpose::STANDARD.encode(c)),
            };
            copies.push(self.signer.sign(&body)?);
        }
        if copies.is_empty() {
            return Ok(Answer {
                state: HoldingState::Refused,
                copies,
                missing,
                reason: Some("none of the records asked for is held here".into()),
            });
        }
        Ok(Answer {
            state: HoldingState::Released,
            copies,
            missing,
            reason: None,
        })
    }

    /// The release policy's answer to `delivery`: signed copies if it
    /// releases every record held here, else a place in the review queue.
    fn policy_answer(&self, delivery: &Delivery) -> Result<Answer, ExchangeError> {
        let policy = &self.config.requests;
        let hasher = self.auth.key_hasher();
        let mut reasons = Vec::new();
        for id in &delivery.records {
            let Ok(id) = ArchiveId::parse(id) else {
                continue;
            };
            if let Some(record) = self.domain.get_with_keys(&id)? {
                reasons.extend(policy.review_reason(&record, &delivery.applicant_digest, hasher));
            }
        }
        if reasons.is_empty() {
            self.release(&delivery.request_id, &delivery.records)
        } else {
            Ok(in_review(reasons.join("; ")))
        }
    }

    /// What this (holding) domain decides for a part delivered by
    /// `receiving`: the answer kept for it if it came before, else the
    /// release policy's (signed copies, or a place in the review queue).
    pub fn take_in(&self, receiving: &str, delivery: Delivery) -> Result<Answer, ExchangeError> {
        if !is_request_id(&delivery.request_id) || delivery.receiving != receiving {
            return Err(ExchangeError::Invalid(
                "a delivery names its request by 32 hex digits and comes from its receiving archive"
                    .into(),
            ));
        }
        if delivery.records.is_empty() || delivery.records.len() > MAX_RECORDS {
            return Err(ExchangeError::Invalid(format!(
                "a delivery names 1 to {MAX_RECORDS} records"
            )));
        }
        let key = format!("{receiving}/{}", delivery.request_id);
        // Decided under the book's lock: a repeat that arrives meanwhile
        // finds this part taken in, and is answered what was kept.
        let (kept, _) =
            self.requests
                .get_or_insert::<ExchangeError>(Side::Incoming, &key, || {
                    let answer = self.policy_answer(&delivery)?;
                    let action = match answer.state {
                        HoldingState::Released => "request_released",
                        HoldingState::Refused => "request_refused",
                        _ => "request_referred_to_review",
                    };
                    let step = Step::now(by_archive(receiving), action, delivery.records.clone());
                    Incoming {
                        answer,
                        delivery: delivery.clone(),
                        received_us: now_us(),
                        unlogged: vec![step],
                    }
                    .entry()
                })?;
        let kept = decode::<Incoming>(&kept)?;
        // Taken in now, or before with its step not yet logged.
        if !kept.unlogged.is_empty() {
            self.flush_steps::<Incoming>(Side::Incoming, &key);
        }
        Ok(kept.answer)
    }

    /// The parts other archives sent here that wait for a reviewer, oldest
    /// first.
    pub fn review_queue(&self) -> Result<Vec<ReviewItem>, ExchangeError> {
        let mut queue = Vec::new();
        for (_, bytes) in self.requests.unfinished(Side::Incoming)? {
            let kept = decode::<Incoming>(&bytes)?;
            if kept.answer.state != HoldingState::InReview {
                continue;
            }
            queue.push((
                kept.received_us,
                ReviewItem {
                    receiving: kept.delivery.receiving,
                    request_id: kept.delivery.request_id,
                    received_at: rfc3339(kept.received_us),
                    applicant_name: kept.delivery.applicant_name,
                    purpose: kept.delivery.purpose,
                    records: kept.delivery.records,
                    reason: kept.answer.reason.unwrap_or_default(),
                },
            ));
        }
        queue.sort_by_key(|(at, _)| *at);
        Ok(queue.into_iter().map(|(_, item)| item).collect())
    }

    /// A reviewer's decision on a part waiting here: signed copies, or a
    /// refusal with its reason. The receiving archive takes it at its next
    /// delivery.
    pub fn decide(
        &self,
        receiving: &str,
        request_id: &str,
        decision: Decision,
        reviewer: Requester,
    ) -> Result<Answer, ExchangeError> {
        if !decision.approve && decision.reason.trim().is_empty() {
            return Err(ExchangeError::Invalid(
                "a refusal needs a reason for the applicant".into(),
            ));
        }
        check_text("reason", &decision.reason, false)?;
        let key = format!("{receiving}/{request_id}");
        let action = if decision.approve {
            "review_approved"
        } else {
            "review_refused"
        };
        // Decided under the book's lock: two reviewers deciding at once
        // cannot both succeed.
        let kept = self
            .requests
            .change::<ExchangeError>(Side::Incoming, &key, |old| {
                let old = old.ok_or_else(|| ExchangeError::NoReview(key.clone()))?;
                let mut kept = decode::<Incoming>(old)?;
                if kept.answer.state != HoldingState::InReview {
                    return Err(ExchangeError::Decided(kept.answer.state));
                }
                kept.answer = if decision.approve {
                    self.release(request_id, &kept.delivery.records)?
                } else {
                    refused(decision.reason.clone())
                };
                let records = kept.delivery.records.clone();
                kept.unlogged.push(Step::now(reviewer, action, records));
                kept.entry().map(Some)
            })?
            // The change wrote, or failed with its reason.
            .ok_or_else(|| ExchangeError::NoReview(key.clone()))?;
        self.flush_steps::<Incoming>(Side::Incoming, &key);
        Ok(decode::<Incoming>(&kept)?.answer)
    }

    /// Sends every part not yet answered to its holding archive and keeps
    /// what comes back, until `stop`.
    pub async fn run_outbox(self: Arc<Self>, stop: CancellationToken) {
        // The first pass reads every request, so that one whose part is
        // not final is sent even if the book never listed it as waiting
        // (kept by a version before the list).
        let mut every = true;
        loop {
            if let Err(e) = self.send_unanswered(every).await {
                tracing::warn!(error = %e, "the outbox of requests could not be read");
            }
            every = false;
            tokio::select! {
                _ = self.outbox.notified() => {}
                _ = tokio::time::sleep(RESEND_EVERY) => {}
                _ = stop.cancelled() => break,
            }
        }
    }

    /// Sends each part not final (of the requests listed as waiting, or
    /// of `every` request), [`DELIVERIES_AT_ONCE`] at a time: a holding
    /// archive that does not answer holds up only its own parts.
    async fn send_unanswered(self: &Arc<Self>, every: bool) -> Result<(), ExchangeError> {
        let node = self.clone();
        let requests = tokio::task::spawn_blocking(move || {
            node.flush_all_steps()?;
            let requests = if every {
                node.requests.all(Side::Outgoing)
            } else {
                node.requests.unfinished(Side::Outgoing)
            };
            Ok::<_, ExchangeError>(requests?)
        })
        .await
        .map_err(DomainError::from)??;
        let mut parts = Vec::new();
        for (_, bytes) in requests {
            let request = decode::<Outgoing>(&bytes)?;
            for (holding, part) in &request.parts {
                if part.state.is_final() {
                    continue;
                }
                let delivery = Delivery {
                    request_id: request.id.clone(),
                    receiving: self.cluster.me.clone(),
                    applicant_digest: request.applicant_digest.clone(),
                    applicant_name: request.applicant_name.clone(),
                    purpose: request.purpose.clone(),
                    records: part.records.clone(),
                };
                parts.push((holding.clone(), delivery));
            }
        }
        futures::stream::iter(parts)
            .for_each_concurrent(DELIVERIES_AT_ONCE, |(holding, delivery)| async move {
                if let Err(e) = self.deliver(&holding, &delivery).await {
                    tracing::debug!(holding, request = %delivery.request_id, error = %e, "request part not delivered yet");
                }
            })
            .await;
        Ok(())
    }

    /// Delivers one part, checks the answer and keeps it if it moves the
    /// part forward.
    async fn deliver(
        self: &Arc<Self>,
        holding: &str,
        delivery: &Delivery,
    ) -> Result<(), Undelivered> {
        let member = self
            .cluster
            .coordinator
            .view()
            .borrow()
            .members
            .get(holding)
            .cloned()
            .ok_or_else(|| Undelivered::NotRegistered(holding.to_owned()))?;
        let answer = if holding == self.cluster.me {
            let (node, delivery) = (self.clone(), delivery.clone());
            let me = self.cluster.me.clone();
            tokio::task::spawn_blocking(move || node.take_in(&me, delivery))
                .await
                .map_err(DomainError::from)
                .map_err(ExchangeError::from)??
        } else {
            let client = self.cluster.peer_client(&member.address)?;
            client.deliver_request(delivery).await?
        };
        check_answer(holding, &member.signing_key, delivery, &answer)
            .map_err(Undelivered::Unverified)?;
        let node = self.clone();
        let (holding, request_id) = (holding.to_owned(), delivery.request_id.clone());
        let key = member.signing_key;
        tokio::task::spawn_blocking(move || node.take_answer(&holding, &key, &request_id, answer))
            .await
            .map_err(DomainError::from)
            .map_err(ExchangeError::from)??;
        Ok(())
    }

    /// Keeps a checked answer if it moves the part forward.
    fn take_answer(
        &self,
        holding: &str,
        signing_key: &str,
        request_id: &str,
        answer: Answer,
    ) -> Result<(), ExchangeError> {
        let action = match answer.state {
            HoldingState::Released => "copies_received",
            HoldingState::Refused => "refusal_received",
            HoldingState::InReview => "in_review_there",
            HoldingState::Pending => "pending",
        };
        let mut moved = false;
        self.requests
            .change::<ExchangeError>(Side::Outgoing, request_id, |old| {
                let Some(old) = old else { return Ok(None) };
                let mut request = decode::<Outgoing>(old)?;
                let Some(part) = request.parts.get_mut(holding) else {
                    return Ok(None);
                };
                if part.state == answer.state || !part.state.may_become(answer.state) {
                    return Ok(None);
                }
                part.state = answer.state;
                part.copies = answer.copies.clone();
                part.signing_key = signing_key.to_owned();
                part.missing = answer.missing.clone();
                part.reason = answer.reason.clone();
                let step = Step::now(by_archive(holding), action, part.records.clone());
                request.unlogged.push(step);
                moved = true;
                request.entry().map(Some)
            })?;
        if moved {
            self.flush_steps::<Outgoing>(Side::Outgoing, request_id);
        }
        Ok(())
    }
}

/// Whether every copy in `answer` is what `holding`, whose published key
/// is `key`, signed for `delivery`: a copy changed on the way, signed by
/// another archive, or of another request or record is refused.
fn check_answer(
    holding: &str,
    key: &str,
    delivery: &Delivery,
    answer: &Answer,
) -> Result<(), Unverified> {
    for copy in &answer.copies {
        let body = signing::verify(key, copy).map_err(|e| match e {
            Unverified::BadKey if key.is_empty() => Unverified::NoKey(holding.to_owned()),
            e => e,
        })?;
        if body.holding != holding
            || body.request_id != delivery.request_id
            || !delivery.records.contains(&body.archive_number)
        {
            return Err(Unverified::Elsewhere {
                wanted: format!("{holding}, request {}", delivery.request_id),
                found: format!(
                    "{}, request {}, record {}",
                    body.holding, body.request_id, body.archive_number
                ),
            });
        }
    }
    Ok(())
}

/// Why a part was not delivered this time (tried again).
#[derive(Debug, thiserror::Error)]
enum Undelivered {
    #[error("{0} is not registered now")]
    NotRegistered(String),
    #[error(transparent)]
    Peer(#[from] ClientError),
    #[error("the answer was refused: {0}")]
    Unverified(Unverified),
    #[error(transparent)]
    Here(#[from] ExchangeError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NodeConfig;
    use crate::local::record::RecordBody;
    use crate::local::store::Write;

    fn clerk() -> Requester {
        by_archive("A")
    }

    /// Domain A as both archives of a request for record R-1 (not released
    /// by the policy, so a reviewer approves it), the answer taken in but
    /// no certificate issued yet: the request's ID and the copy's code.
    fn answered(node: &Node) -> (String, String) {
        let id = ArchiveId::parse("R-1").unwrap();
        let body = RecordBody {
            title: "婚姻登记".into(),
            metadata: Default::default(),
            content: Some(b"content".to_vec()),
            keys: Default::default(),
        };
        node.domain.apply(&[Write::Put(id, body)]).unwrap();
        let request_id = "00ff".to_owned();
        let delivery = Delivery {
            request_id: request_id.clone(),
            receiving: "A".into(),
            applicant_digest: "digest".into(),
            applicant_name: "张三".into(),
            purpose: "贷款".into(),
            records: vec!["R-1".into()],
        };
        let outgoing = Outgoing {
            id: request_id.clone(),
            submitted_us: now_us(),
            clerk: "clerk".into(),
            applicant_digest: "digest".into(),
            applicant_name: "张三".into(),
            purpose: "贷款".into(),
            not_found: Vec::new(),
            certified_us: None,
            unlogged: Vec::new(),
            parts: BTreeMap::from([(
                "A".to_owned(),
                Part {
                    records: vec!["R-1".into()],
                    state: HoldingState::Pending,
                    copies: Vec::new(),
                    signing_key: String::new(),
                    missing: Vec::new(),
                    reason: None,
                },
            )]),
        };
        node.requests
            .change::<ExchangeError>(Side::Outgoing, &request_id, |_| outgoing.entry().map(Some))
            .unwrap();
        assert_eq!(
            node.take_in("A", delivery).unwrap().state,
            HoldingState::InReview
        );
        assert!(matches!(
            node.issue_certificate(&request_id, clerk()),
            Err(ExchangeError::NotAnswered(RequestStatus::Submitted))
        ));
        let approve = Decision {
            approve: true,
            reason: String::new(),
        };
        let answer = node.decide("A", &request_id, approve, clerk()).unwrap();
        let code = signing::verification_code(&answer.copies[0]);
        let key = node.signer.public_hex();
        node.take_answer("A", &key, &request_id, answer).unwrap();
        (request_id, code)
    }

    /// Changes one byte of the first copy's payload kept on `side`.
    fn tamper(node: &Node, side: Side, key: &str) {
        fn flip(copy: &mut SignedCopy) {
            let engine = base64::engine::general_purpose::STANDARD;
            let mut bytes = engine.decode(&copy.payload).unwrap();
            let last = bytes.len() - 3;
            bytes[last] ^= 1;
            copy.payload = engine.encode(bytes);
        }
        node.requests
            .change::<ExchangeError>(side, key, |old| {
                let old = old.unwrap();
                let bytes = match side {
                    Side::Outgoing => {
                        let mut kept = decode::<Outgoing>(old)?;
                        flip(&mut kept.parts.get_mut("A").unwrap().copies[0]);
                        encode(&kept)?
                    }
                    Side::Incoming => {
                        let mut kept = decode::<Incoming>(old)?;
                        flip(&mut kept.answer.copies[0]);
                        encode(&kept)?
                    }
                };
                Ok(Some(bytes.into()))
            })
            .unwrap();
    }

    fn node(dir: &std::path::Path) -> Arc<Node> {
        let config = NodeConfig {
            name: "A".into(),
            data: dir.join("A"),
            ..NodeConfig::default()
        };
        Node::open(config, "http://127.0.0.1:1").unwrap()
    }

    #[test]
    fn a_certificate_s_code_checks_at_both_archives_until_its_copy_is_changed() {
        let dir = tempfile::tempdir().unwrap();
        let node = node(dir.path());
        let (request_id, code) = answered(&node);
        // Released, not yet issued: the holding archive's book finds it.
        let check = node.check_certificate(&code.to_lowercase()).unwrap();
        assert_eq!(
            (check.archive_number.as_str(), check.request_id.as_str()),
            ("R-1", request_id.as_str())
        );
        {
            use sha2::Digest;
            let sha = hex::encode(sha2::Sha256::digest(b"content"));
            assert_eq!(check.content_sha256.as_deref(), Some(sha.as_str()));
        }
        tamper(&node, Side::Incoming, &format!("A/{request_id}"));
        let e = node.check_certificate(&code).unwrap_err();
        assert!(matches!(e, ExchangeError::CertificateInvalid { .. }), "{e}");
        // Issued: the receiving archive's book finds it, until its copy
        // is changed too.
        let view = node.issue_certificate(&request_id, clerk()).unwrap();
        assert_eq!(view.status, RequestStatus::Certified);
        assert_eq!(view.holdings[0].copies[0].code, code);
        assert_eq!(node.check_certificate(&code).unwrap().receiving, "A");
        tamper(&node, Side::Outgoing, &request_id);
        let e = node.check_certificate(&code).unwrap_err();
        assert!(matches!(e, ExchangeError::CertificateInvalid { .. }), "{e}");
    }

    #[test]
    fn an_answer_is_taken_only_with_copies_its_holding_archive_signed_for_what_was_asked() {
        let dir = tempfile::tempdir().unwrap();
        let node = node(dir.path());
        let id = ArchiveId::parse("R-1").unwrap();
        let body = RecordBody {
            title: "婚姻登记".into(),
            metadata: Default::default(),
            content: None,
            keys: Default::default(),
        };
        node.domain.apply(&[Write::Put(id, body)]).unwrap();
        let answer = node.release("00ff", &["R-1".to_owned()]).unwrap();
        let key = node.signer.public_hex();
        let delivery = |request_id: &str, record: &str| Delivery {
            request_id: request_id.into(),
            receiving: "B".into(),
            applicant_digest: "digest".into(),
            applicant_name: "张三".into(),
            purpose: "贷款".into(),
            records: vec![record.into()],
        };
        let asked = delivery("00ff", "R-1");
        assert_eq!(check_answer("A", &key, &asked, &answer), Ok(()));
        let mut changed = answer.clone();
        let engine = base64::engine::general_purpose::STANDARD;
        let mut bytes = engine.decode(&changed.copies[0].payload).unwrap();
        bytes[10] ^= 1;
        changed.copies[0].payload = engine.encode(bytes);
        assert_eq!(
            check_answer("A", &key, &asked, &changed),
            Err(Unverified::Forged)
        );
        assert_eq!(
            check_answer("A", "", &asked, &answer),
            Err(Unverified::NoKey("A".into()))
        );
        for (holding, wrong) in [
            ("C", delivery("00ff", "R-1")),
            ("A", delivery("0aaa", "R-1")),
            ("A", delivery("00ff", "R-2")),
        ] {
            let e = check_answer(holding, &key, &wrong, &answer).unwrap_err();
            assert!(matches!(e, Unverified::Elsewhere { .. }), "{e}");
        }
    }

    /// The entries of `action` for `request` in `node`'s audit log.
    fn logged(node: &Node, request: &str, action: &str) -> usize {
        node.audit
            .since(0, 10_000)
            .unwrap()
            .into_iter()
            .filter(|e| e.request.as_deref() == Some(request))
            .filter(|e| e.action.as_deref() == Some(action))
            .count()
    }

    #[test]
    fn a_step_kept_from_the_log_by_a_kill_is_logged_once_whichever_write_the_kill_came_between() {
        let dir = tempfile::tempdir().unwrap();
        let node = node(dir.path());
        let (request_id, _) = answered(&node);
        let key = format!("A/{request_id}");
        assert_eq!(logged(&node, &request_id, "review_approved"), 1);
        // Killed after the book's write, before the log's: the step is
        // kept, and written once, however often it is flushed.
        let step = Step::now(by_archive("A"), "review_noted", vec!["R-1".into()]);
        let keep = |step: Step| {
            node.requests
                .change::<ExchangeError>(Side::Incoming, &key, |old| {
                    let mut kept = decode::<Incoming>(old.unwrap())?;
                    kept.unlogged.push(step);
                    kept.entry().map(Some)
                })
                .unwrap();
        };
        keep(step.clone());
        assert_eq!(node.requests.unfinished(Side::Incoming).unwrap().len(), 1);
        node.flush_all_steps().unwrap();
        node.flush_all_steps().unwrap();
        assert_eq!(logged(&node, &request_id, "review_noted"), 1);
        assert!(node.requests.unfinished(Side::Incoming).unwrap().is_empty());
        // Killed after the log's write, before the step was marked: the
        // entry in the log is found, and not written again.
        keep(step);
        node.flush_all_steps().unwrap();
        assert_eq!(logged(&node, &request_id, "review_noted"), 1);
        assert!(node.requests.unfinished(Side::Incoming).unwrap().is_empty());
    }

    #[test]
    fn a_certificate_is_issued_once_and_only_for_an_answered_request() {
        let dir = tempfile::tempdir().unwrap();
        let node = node(dir.path());
        let (request_id, code) = answered(&node);
        let first = node.issue_certificate(&request_id, clerk()).unwrap();
        let again = node.issue_certificate(&request_id, clerk()).unwrap();
        assert_eq!(first, again);
        assert_eq!(again.holdings[0].copies[0].code, code);
        assert_eq!(logged(&node, &request_id, "certificate_issued"), 1);
        assert!(matches!(
            node.issue_certificate("0abc", clerk()),
            Err(ExchangeError::NoRequest(_))
        ));
        assert!(matches!(
            node.check_certificate("0000-0000-0000-0000-0000"),
            Err(ExchangeError::NoCertificate(_))
        ));
        assert!(matches!(
            node.check_certificate("not a code"),
            Err(ExchangeError::Invalid(_))
        ));
    }
}
