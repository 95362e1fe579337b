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
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::cluster::client::ClientError;
use crate::cluster::lookup::{Outcome, Strategy};
use crate::local::audit::{AuditEntry, AuditError, Requester};
use crate::local::domain::DomainError;
use crate::local::id::{ArchiveId, InvalidId};
use crate::local::keys::InvalidKey;
use crate::local::record::now_us;
use crate::local::requests::{BookError, Side};
use crate::node::{Node, SearchError};
use crate::security::signing::{self, SigningError, Unverified};
use crate::wire::{
    Answer, CopyBody, Decision, Delivery, HoldingState, HoldingView, NewRequest, RequestStatus,
    RequestView, ReviewItem, SearchRequest, SignedCopy,
};

/// Records one request may ask for.
pub const MAX_RECORDS: usize = 100;
/// Longest applicant name and purpose, in bytes.
const MAX_TEXT_BYTES: usize = 1024;
/// How often parts not yet answered are asked about again.
const RESEND_EVERY: Duration = Duration::from_secs(1);

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
}

/// One holding archive's part of an [`Outgoing`] request.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Part {
    records: Vec<String>,
    state: HoldingState,
    /// As signed, each checked before it was kept.
    copies: Vec<SignedCopy>,
    missing: Vec<String>,
    reason: Option<String>,
}

/// A request taken in from a receiving archive.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Incoming {
    delivery: Delivery,
    received_us: u64,
    answer: Answer,
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

impl Outgoing {
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
                    decode::<CopyBody>(&bytes)
                })
                .collect::<Result<_, _>>()?;
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
            status: RequestStatus::of(self.parts.values().map(|p| p.state)),
            applicant_name: self.applicant_name.clone(),
            purpose: self.purpose.clone(),
            holdings,
            not_found: self.not_found.clone(),
        })
    }
}

impl Node {
    /// One step of a request, in this domain's audit log: who, which
    /// request, which records, with the applicant as the keyed digest.
    fn log_step(
        &self,
        who: Requester,
        action: &str,
        request: &str,
        applicant_digest: &str,
        records: Vec<String>,
    ) -> Result<(), AuditError> {
        self.audit.append(AuditEntry {
            at_us: now_us(),
            requester: who,
            key_type: self.config.requests.key_type.clone(),
            value_digest: applicant_digest.to_owned(),
            records,
            action: Some(action.to_owned()),
            request: Some(request.to_owned()),
            prev: String::new(),
            hash: String::new(),
        })?;
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
            parts: held
                .into_iter()
                .map(|(domain, records)| {
                    let part = Part {
                        records,
                        state: HoldingState::Pending,
                        copies: Vec::new(),
                        missing: Vec::new(),
                        reason: None,
                    };
                    (domain, part)
                })
                .collect(),
        };
        let node = self.clone();
        let kept = request.clone();
        tokio::task::spawn_blocking(move || {
            node.requests
                .change::<ExchangeError>(Side::Outgoing, &kept.id, |_| encode(&kept).map(Some))?;
            let records = kept
                .parts
                .values()
                .flat_map(|p| p.records.clone())
                .collect();
            node.log_step(
                clerk,
                "request_submitted",
                &kept.id,
                &kept.applicant_digest,
                records,
            )?;
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
        let (kept, fresh) =
            self.requests
                .get_or_insert::<ExchangeError>(Side::Incoming, &key, || {
                    encode(&Incoming {
                        answer: self.policy_answer(&delivery)?,
                        delivery: delivery.clone(),
                        received_us: now_us(),
                    })
                })?;
        let kept = decode::<Incoming>(&kept)?;
        if fresh {
            let action = match kept.answer.state {
                HoldingState::Released => "request_released",
                HoldingState::Refused => "request_refused",
                _ => "request_referred_to_review",
            };
            let d = &kept.delivery;
            self.log_step(
                by_archive(receiving),
                action,
                &d.request_id,
                &d.applicant_digest,
                d.records.clone(),
            )?;
        }
        Ok(kept.answer)
    }

    /// The parts other archives sent here that wait for a reviewer.
    pub fn review_queue(&self) -> Result<Vec<ReviewItem>, ExchangeError> {
        let mut queue = Vec::new();
        for (_, bytes) in self.requests.all(Side::Incoming)? {
            let kept = decode::<Incoming>(&bytes)?;
            if kept.answer.state != HoldingState::InReview {
                continue;
            }
            queue.push(ReviewItem {
                receiving: kept.delivery.receiving,
                request_id: kept.delivery.request_id,
                received_at: rfc3339(kept.received_us),
                applicant_name: kept.delivery.applicant_name,
                purpose: kept.delivery.purpose,
                records: kept.delivery.records,
                reason: kept.answer.reason.unwrap_or_default(),
            });
        }
        Ok(queue)
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
        let mut decided = None;
        // Decided under the book's lock: two reviewers deciding at once
        // cannot both succeed.
        self.requests
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
                let bytes = encode(&kept)?;
                decided = Some(kept);
                Ok(Some(bytes))
            })?;
        // The change wrote, or failed with its reason.
        let Some(kept) = decided else {
            return Err(ExchangeError::NoReview(key));
        };
        let action = if decision.approve {
            "review_approved"
        } else {
            "review_refused"
        };
        let d = kept.delivery;
        self.log_step(reviewer, action, request_id, &d.applicant_digest, d.records)?;
        Ok(kept.answer)
    }

    /// Sends every part not yet answered to its holding archive and keeps
    /// what comes back, until `stop`.
    pub async fn run_outbox(self: Arc<Self>, stop: CancellationToken) {
        loop {
            if let Err(e) = self.send_unanswered().await {
                tracing::warn!(error = %e, "the outbox of requests could not be read");
            }
            tokio::select! {
                _ = self.outbox.notified() => {}
                _ = tokio::time::sleep(RESEND_EVERY) => {}
                _ = stop.cancelled() => break,
            }
        }
    }

    async fn send_unanswered(self: &Arc<Self>) -> Result<(), ExchangeError> {
        let node = self.clone();
        let all = tokio::task::spawn_blocking(move || node.requests.all(Side::Outgoing))
            .await
            .map_err(DomainError::from)??;
        for (_, bytes) in all {
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
                match self.deliver(holding, &delivery).await {
                    Ok(()) => {}
                    Err(e) => {
                        tracing::debug!(holding, request = %request.id, error = %e, "request part not delivered yet")
                    }
                }
            }
        }
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
        for copy in &answer.copies {
            let body = signing::verify(&member.signing_key, copy).map_err(|e| match e {
                Unverified::BadKey if member.signing_key.is_empty() => {
                    Undelivered::Unverified(Unverified::NoKey(holding.to_owned()))
                }
                e => Undelivered::Unverified(e),
            })?;
            if body.holding != holding
                || body.request_id != delivery.request_id
                || !delivery.records.contains(&body.archive_number)
            {
                return Err(Undelivered::Unverified(Unverified::Elsewhere {
                    wanted: format!("{holding}, request {}", delivery.request_id),
                    found: format!("{}, request {}", body.holding, body.request_id),
                }));
            }
        }
        let node = self.clone();
        let (holding, request_id) = (holding.to_owned(), delivery.request_id.clone());
        tokio::task::spawn_blocking(move || node.take_answer(&holding, &request_id, answer))
            .await
            .map_err(DomainError::from)
            .map_err(ExchangeError::from)??;
        Ok(())
    }

    /// Keeps a checked answer if it moves the part forward.
    fn take_answer(
        &self,
        holding: &str,
        request_id: &str,
        answer: Answer,
    ) -> Result<(), ExchangeError> {
        let mut moved = None;
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
                part.missing = answer.missing.clone();
                part.reason = answer.reason.clone();
                moved = Some((request.applicant_digest.clone(), part.records.clone()));
                encode(&request).map(Some)
            })?;
        if let Some((digest, records)) = moved {
            let action = match answer.state {
                HoldingState::Released => "copies_received",
                HoldingState::Refused => "refusal_received",
                HoldingState::InReview => "in_review_there",
                HoldingState::Pending => "pending",
            };
            self.log_step(by_archive(holding), action, request_id, &digest, records)?;
        }
        Ok(())
    }
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
