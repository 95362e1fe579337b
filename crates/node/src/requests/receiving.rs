//! The receiving archive's side: a clerk's request registered only once
//! every archive that may hold a record was asked (else 503 naming them,
//! nothing registered: the identity number is not kept here, so an
//! archive could not be searched later); its parts delivered until each is
//! answered; an answer kept only if its holding archive sealed it whole
//! and every copy in it checks; each copy checked again whenever it is
//! shown, its failure written to the audit log once.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use xarchive_seal::statement::sha256;
use xarchive_seal::{Rejected, TrustList};

use super::holding::{copy_digest, metadata_digest};
use super::kept::{decode, Action, Kept, Outgoing, Part, Step};

use super::state::Trusted;
use super::{
    check_text, legacy, rfc3339, unbase64, RequestsError, DELIVERIES_AT_ONCE, MAX_RECORDS,
    RESEND_EVERY,
};
use crate::cluster::client::ClientError;
use crate::cluster::lookup::{Outcome, Strategy};
use crate::local::audit::Requester;
use crate::local::domain::DomainError;
use crate::local::id::ArchiveId;
use crate::local::record::now_us;
use crate::local::requests::Side;
use crate::node::Node;
use crate::wire::{
    Answer, Awaiting, Delivery, HoldingState, HoldingView, NewRequest, ReceivedCopy, RequestView,
    SearchRequest, SignedCopy,
};

/// Why a copy kept here does not check, in plain words.
fn problem_words(rejected: &Rejected) -> String {
    match rejected {
        Rejected::Changed(_) => {
            "it was changed after its holding archive sealed it · 复制件在馆藏档案馆盖章后被改动"
                .into()
        }
        Rejected::UnknownKey(_) => {
            "its seal's key is not in the trust list · 印章密钥不在信任列表中".into()
        }
        Rejected::KeyNotValid { why, .. } => {
            format!("its seal's key may not be trusted: {why} · 印章密钥已失效或被吊销")
        }
        Rejected::Mismatch(why) => format!("{why} · 复制件不属于本申请"),
        Rejected::Malformed(_) => "it is unreadable · 复制件无法读取".into(),
    }
}

/// What a kept copy holds, as its holding archive sealed it, if it checks
/// against `trust` for request `request_id` of `me`; else why not.
pub(super) fn check_copy(
    copy: &SignedCopy,
    trust: &TrustList,
    me: &str,
    request_id: &str,
    records: &[String],
) -> Result<xarchive_seal::VerifiedCopy, Rejected> {
    let sealed = unbase64(&copy.sealed).ok_or_else(|| Rejected::Malformed("not base64".into()))?;
    let verified = xarchive_seal::verify_copy(&sealed, trust)?;
    let c = &verified.statement;
    if c.receiving != me || c.request_id != request_id || !records.contains(&c.archive_number) {
        return Err(Rejected::Mismatch(format!(
            "it was sealed for {} of request {} of {}",
            c.archive_number, c.request_id, c.receiving
        )));
    }
    let content = copy
        .content
        .as_deref()
        .map(|c| unbase64(c).unwrap_or_default());
    if c.metadata_sha256 != metadata_digest(&copy.metadata)
        || c.content_sha256 != content.as_deref().map(sha256)
    {
        return Err(Rejected::Changed(verified.holding.name().to_owned()));
    }
    Ok(verified)
}

/// `copy` as the clerk sees it, checked now.
fn received(
    copy: &SignedCopy,
    part: &Part,
    trust: &TrustList,
    me: &str,
    request_id: &str,
) -> ReceivedCopy {
    if legacy::is_legacy(copy) {
        return match legacy::verify(&part.signing_key, copy) {
            Ok(body) => ReceivedCopy {
                holding: body.holding,
                archive_number: body.archive_number,
                title: body.title,
                record_date: None,
                released: body.date,
                content_sha256: body
                    .content
                    .as_deref()
                    .and_then(unbase64)
                    .map(|c| hex::encode(sha256(&c))),
                metadata: body.metadata,
                content: body.content,
                valid: true,
                problem: None,
            },
            Err(why) => unreadable(copy, why),
        };
    }
    match check_copy(copy, trust, me, request_id, &part.records) {
        Ok(verified) => {
            let c = verified.statement;
            ReceivedCopy {
                holding: c.holding,
                archive_number: c.archive_number,
                title: c.title,
                record_date: c.record_date,
                released: xarchive_seal::trust::format_time(c.released)
                    .get(..10)
                    .unwrap_or_default()
                    .to_owned(),
                content_sha256: c.content_sha256.map(hex::encode),
                metadata: copy.metadata.clone(),
                content: copy.content.clone(),
                valid: true,
                problem: None,
            }
        }
        Err(rejected) => unreadable(copy, problem_words(&rejected)),
    }
}

/// A copy that does not check: shown for what it claims, marked.
fn unreadable(copy: &SignedCopy, problem: String) -> ReceivedCopy {
    let claimed = unbase64(&copy.sealed)
        .and_then(|bytes| xarchive_seal::Opened::parse(&bytes).ok())
        .and_then(|o| xarchive_seal::statement::CopyStatement::decode(&o.payload).ok());
    ReceivedCopy {
        holding: claimed
            .as_ref()
            .map(|c| c.holding.clone())
            .unwrap_or_default(),
        archive_number: claimed
            .as_ref()
            .map(|c| c.archive_number.clone())
            .unwrap_or_default(),
        title: claimed.map(|c| c.title).unwrap_or_default(),
        record_date: None,
        released: String::new(),
        content_sha256: None,
        metadata: copy.metadata.clone(),
        content: None,
        valid: false,
        problem: Some(problem),
    }
}

/// Why an answer was not kept (it is asked for again).
#[derive(Debug, thiserror::Error)]
pub(super) enum Unaccepted {
    #[error("it is not sealed by its holding archive")]
    Unsealed,
    #[error("{0}")]
    Rejected(#[from] Rejected),
    #[error("its seal says otherwise: {0}")]
    Differs(&'static str),
    #[error("{0}")]
    Malformed(&'static str),
}

/// Whether `answer` is what `holding` sealed for `delivery`: the seal
/// checks against the trust list and covers exactly this answer, the
/// answer makes sense (released with a copy, refused with a reason, none
/// held without one), and every copy checks and was made for this request.
pub(super) fn check_answer(
    holding: &str,
    trust: &TrustList,
    delivery: &Delivery,
    answer: &Answer,
) -> Result<(), Unaccepted> {
    if answer.sealed.is_empty() {
        return Err(Unaccepted::Unsealed);
    }
    let sealed = unbase64(&answer.sealed).ok_or(Unaccepted::Malformed("its seal is not base64"))?;
    let statement = xarchive_seal::verify_answer(&sealed, trust)?;
    if statement.holding != holding {
        return Err(Unaccepted::Differs("another archive sealed it"));
    }
    if statement.receiving != delivery.receiving || statement.request_id != delivery.request_id {
        return Err(Unaccepted::Differs("it is of another request"));
    }
    if statement.records != delivery.records {
        return Err(Unaccepted::Differs("it answers for other records"));
    }
    if statement.state != answer.state.as_str()
        || statement.reason != answer.reason
        || statement.missing != answer.missing
    {
        return Err(Unaccepted::Differs(
            "its state, reason or missing records were changed",
        ));
    }
    let digests: Vec<[u8; 32]> = answer.copies.iter().map(copy_digest).collect();
    if statement.copies != digests {
        return Err(Unaccepted::Differs(
            "its copies were changed, added or taken away",
        ));
    }
    let has_reason = answer
        .reason
        .as_deref()
        .is_some_and(|r| !r.trim().is_empty());
    let sensible = match answer.state {
        HoldingState::Released => !answer.copies.is_empty(),
        HoldingState::Refused => answer.copies.is_empty() && has_reason,
        HoldingState::NoneHeld => answer.copies.is_empty() && answer.missing == delivery.records,
        HoldingState::InReview => answer.copies.is_empty(),
        HoldingState::Pending => false,
    };
    if !sensible {
        return Err(Unaccepted::Malformed(
            "its state does not fit it (released without a copy, refused without a reason, …)",
        ));
    }
    for copy in &answer.copies {
        check_copy(
            copy,
            trust,
            &delivery.receiving,
            &delivery.request_id,
            &delivery.records,
        )?;
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
    #[error("the answer was not kept: {0}")]
    Unaccepted(Unaccepted),
    #[error(transparent)]
    Here(#[from] RequestsError),
}

impl Node {
    /// Registers a clerk's request: finds which archives hold the records
    /// (by their IDs, or by a search for the applicant's identity number),
    /// keeps it durably and wakes the outbox. Refused, registering
    /// nothing, when an archive that may hold a record cannot be asked.
    pub async fn submit_request(
        self: &Arc<Self>,
        new: NewRequest,
        clerk: Requester,
    ) -> Result<RequestView, RequestsError> {
        check_text("applicant_name", &new.applicant_name, true)?;
        check_text("purpose", &new.purpose, true)?;
        let key_type = self.config.requests.key_type.clone();
        let normalised = self.key_types().normalise(&key_type, &new.applicant_id.0)?;
        let applicant_digest = self.auth.key_hasher().audit_digest(&key_type, &normalised);
        let mut held: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut not_found = Vec::new();
        let searched_by = match new.records {
            Some(ids) => {
                if ids.is_empty() || ids.len() > MAX_RECORDS {
                    return Err(RequestsError::Invalid(format!(
                        "records must name 1 to {MAX_RECORDS} archive numbers"
                    )));
                }
                for id in ids {
                    // An identity number typed where an archive number goes
                    // is neither kept nor echoed.
                    if self.reads_as_private_key(&id) {
                        return Err(RequestsError::Invalid(
                            "a record asked for reads as an identity number, which is neither kept \
                             nor shown: give the applicant's number as applicant_id, and leave \
                             records out to find their records by it"
                                .into(),
                        ));
                    }
                    let id = ArchiveId::parse(&id)?;
                    match self.lookup(&id, Strategy::Routed).await?.outcome {
                        // The form it is held by (`Node::lookup` tries
                        // the ID's typed forms): the holder reads it so.
                        Outcome::Found { owner, record } => {
                            held.entry(owner.into_string())
                                .or_default()
                                .push(record.id.to_string());
                        }
                        Outcome::NotFound => not_found.push(id.to_string()),
                        Outcome::Unavailable { domains } => {
                            return Err(self.unavailable(&domains).await)
                        }
                        Outcome::NotReady { reason } => {
                            return Err(RequestsError::Unavailable(reason))
                        }
                    }
                }
                None
            }
            None => {
                let search = SearchRequest {
                    key_type: key_type.clone(),
                    value: normalised,
                    local: false,
                    requester: None,
                };
                let found = self.search(&search, clerk.clone()).await?;
                // An archive that may hold a record and was not asked would
                // leave the request without its part, and a "no records"
                // unproven.
                if !found.unreachable.is_empty() {
                    return Err(self.unavailable(&found.unreachable).await);
                }
                if let Some(why) = found.unconfirmed {
                    return Err(RequestsError::Unavailable(why));
                }
                for record in found.records.into_iter().take(MAX_RECORDS) {
                    held.entry(record.domain)
                        .or_default()
                        .push(record.id.to_string());
                }
                Some(key_type.clone())
            }
        };
        let id = format!("{:032x}", rand::random::<u128>());
        let mut request = Outgoing {
            id: id.clone(),
            submitted_us: now_us(),
            clerk: clerk.token.clone(),
            applicant_digest,
            applicant_name: new.applicant_name,
            purpose: new.purpose,
            searched_by,
            not_found,
            certified_us: None,
            certificate: None,
            flagged: Vec::new(),
            unlogged: Vec::new(),
            parts: held
                .into_iter()
                .map(|(domain, records)| (domain, Part::pending(records)))
                .collect(),
        };
        let records = request.records();
        request
            .unlogged
            .push(Step::now(clerk, Action::RequestSubmitted, records));
        let node = self.clone();
        let kept = request.clone();
        tokio::task::spawn_blocking(move || {
            node.requests
                .book
                .change::<RequestsError>(Side::Outgoing, &kept.id, |_| kept.entry().map(Some))?;
            node.flush_steps::<Outgoing>(Side::Outgoing, &kept.id);
            Ok::<_, RequestsError>(())
        })
        .await
        .map_err(DomainError::from)??;
        self.requests.outbox.notify_one();
        let trust = self.trust_list(false).await.ok();
        Ok(self.view(&request, trust.as_deref()))
    }

    /// The submission refused because `domains` could not be asked, named
    /// as people know them (the trust list read first if it can be).
    async fn unavailable(&self, domains: &[impl AsRef<str>]) -> RequestsError {
        let _ = self.trust_list(false).await;
        RequestsError::Unavailable(self.names(domains))
    }

    /// `domains` as people know them, for a message.
    pub(super) fn names(&self, domains: &[impl AsRef<str>]) -> String {
        domains
            .iter()
            .map(|d| {
                let d = d.as_ref();
                let name = self.archive_name(d);
                if name.name == d {
                    d.to_owned()
                } else {
                    format!("{} ({d})", name.name)
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `request` as the clerk sees it: every copy checked against the
    /// trust list (none read yet: each marked unchecked).
    pub(super) fn view(&self, request: &Outgoing, trust: Option<&Trusted>) -> RequestView {
        let empty = TrustList::new("", false, Vec::new());
        let list = trust.map_or(&empty, |t| &t.list);
        let me = self.cluster.me.as_str();
        // A holding archive is named, with its records, once it has
        // answered for good: until then the clerk learns only that the
        // request waits (SECURITY.md, "The clerk").
        let (answered, waiting): (Vec<_>, Vec<_>) =
            request.parts.iter().partition(|(_, p)| p.state.is_final());
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let awaiting = Awaiting {
            archives: count(waiting.len()),
            in_review: count(
                waiting
                    .iter()
                    .filter(|(_, p)| p.state == HoldingState::InReview)
                    .count(),
            ),
            unreachable_since: waiting
                .iter()
                .filter_map(|(_, p)| p.unreachable_since_us)
                .min()
                .map(rfc3339),
        };
        let holdings = answered
            .into_iter()
            .map(|(domain, part)| HoldingView {
                name: self.archive_name(domain).name,
                domain: domain.clone(),
                records: part.records.clone(),
                state: part.state,
                copies: part
                    .copies
                    .iter()
                    .map(|c| received(c, part, list, me, &request.id))
                    .collect(),
                missing: part.missing.clone(),
                reason: part.reason.clone(),
            })
            .collect();
        let status = request.status();
        RequestView {
            id: request.id.clone(),
            submitted_at: rfc3339(request.submitted_us),
            clerk: request.clerk.clone(),
            status,
            words: status.words(),
            certified_at: request.certified_us.map(rfc3339),
            certificate: request
                .certificate
                .as_ref()
                .map(|c| crate::wire::CertificateSummary {
                    code: c.code.clone(),
                    issued_at: rfc3339(c.issued_us),
                    sheets: u32::try_from(c.sheets.len()).unwrap_or(u32::MAX),
                }),
            applicant_name: request.applicant_name.clone(),
            purpose: request.purpose.clone(),
            searched_by: request.searched_by.clone(),
            holdings,
            awaiting,
            not_found: request.not_found.clone(),
        }
    }

    /// Writes to the audit log, once each, the copies of `view` found not
    /// to check: flagged in the request's entry with the step, in one
    /// write. Blocks.
    pub(super) fn flag_failed_copies(&self, id: &str, view: &RequestView) {
        let failed: Vec<(String, String)> = view
            .holdings
            .iter()
            .flat_map(|h| &h.copies)
            .filter(|c| !c.valid)
            .map(|c| {
                let what = format!("{}/{}", c.holding, c.archive_number);
                (
                    hex::encode(sha256(format!("{what}\0{:?}", c.problem).as_bytes())),
                    what,
                )
            })
            .collect();
        if failed.is_empty() {
            return;
        }
        let me = self.cluster.me.clone();
        let flagged = self
            .requests
            .book
            .change::<RequestsError>(Side::Outgoing, id, |old| {
                let Some(old) = old else { return Ok(None) };
                let mut request = decode::<Outgoing>(old)?;
                let new: Vec<&(String, String)> = failed
                    .iter()
                    .filter(|(digest, _)| !request.flagged.contains(digest))
                    .collect();
                if new.is_empty() {
                    return Ok(None);
                }
                for (digest, what) in new {
                    request.flagged.push(digest.clone());
                    let step = Step::now(
                        Requester::archive(&me),
                        Action::CopyFailedCheck,
                        vec![what.clone()],
                    );
                    request.unlogged.push(step);
                }
                request.entry().map(Some)
            });
        match flagged {
            Ok(_) => self.flush_steps::<Outgoing>(Side::Outgoing, id),
            Err(e) => {
                tracing::warn!(error = %e, "a copy that does not check could not be put on record");
            }
        }
    }

    /// A request registered here, its copies checked now.
    pub async fn request(self: &Arc<Self>, id: &str) -> Result<RequestView, RequestsError> {
        let trust = self.trust_list(false).await.ok();
        let (node, id) = (self.clone(), id.to_owned());
        tokio::task::spawn_blocking(move || {
            let bytes = node
                .requests
                .book
                .get(Side::Outgoing, &id)?
                .ok_or_else(|| RequestsError::NoRequest(id.clone()))?;
            let view = node.view(&decode::<Outgoing>(&bytes)?, trust.as_deref());
            node.flag_failed_copies(&id, &view);
            Ok(view)
        })
        .await
        .map_err(DomainError::from)?
    }

    /// Every request registered here, newest first, their copies checked
    /// now.
    pub async fn requests(self: &Arc<Self>) -> Result<Vec<RequestView>, RequestsError> {
        let trust = self.trust_list(false).await.ok();
        let node = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut all = node
                .requests
                .book
                .all(Side::Outgoing)?
                .into_iter()
                .map(|(_, bytes)| decode::<Outgoing>(&bytes))
                .collect::<Result<Vec<_>, _>>()?;
            all.sort_by_key(|r| std::cmp::Reverse(r.submitted_us));
            Ok(all
                .iter()
                .map(|r| {
                    let view = node.view(r, trust.as_deref());
                    node.flag_failed_copies(&r.id, &view);
                    view
                })
                .collect())
        })
        .await
        .map_err(DomainError::from)?
    }

    /// Sends every part not yet answered to its holding archive and keeps
    /// what comes back, until `stop`.
    pub(super) async fn run_outbox(self: Arc<Self>, stop: CancellationToken) {
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
                () = self.requests.outbox.notified() => {}
                () = tokio::time::sleep(RESEND_EVERY) => {}
                () = stop.cancelled() => break,
            }
        }
    }

    /// Sends each part not final (of the requests listed as waiting, or
    /// of `every` request), [`DELIVERIES_AT_ONCE`] at a time: a holding
    /// archive that does not answer holds up only its own parts.
    async fn send_unanswered(self: &Arc<Self>, every: bool) -> Result<(), RequestsError> {
        let node = self.clone();
        let requests = tokio::task::spawn_blocking(move || {
            node.flush_all_steps()?;
            let requests = if every {
                node.requests.book.all(Side::Outgoing)
            } else {
                node.requests.book.unfinished(Side::Outgoing)
            };
            Ok::<_, RequestsError>(requests?)
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
                    receiving: self.cluster.me.to_string(),
                    applicant_digest: request.applicant_digest.clone(),
                    applicant_name: request.applicant_name.clone(),
                    purpose: request.purpose.clone(),
                    records: part.records.clone(),
                };
                parts.push((holding.clone(), delivery, part.unreachable_since_us));
            }
        }
        futures::stream::iter(parts)
            .for_each_concurrent(DELIVERIES_AT_ONCE, |(holding, delivery, since)| async move {
                match self.deliver(&holding, &delivery).await {
                    Ok(()) => {}
                    Err(e) => {
                        tracing::debug!(holding, request = %delivery.request_id, error = %e, "request part not delivered yet");
                        if since.is_none() && matches!(e, Undelivered::NotRegistered(_) | Undelivered::Peer(_)) {
                            self.mark_unreachable(&holding, &delivery.request_id).await;
                        }
                    }
                }
            })
            .await;
        Ok(())
    }

    /// Notes, once, since when `holding` cannot be reached for a part.
    async fn mark_unreachable(self: &Arc<Self>, holding: &str, request_id: &str) {
        let (node, holding, id) = (self.clone(), holding.to_owned(), request_id.to_owned());
        let marked = tokio::task::spawn_blocking(move || {
            node.requests
                .book
                .change::<RequestsError>(Side::Outgoing, &id, |old| {
                    let Some(old) = old else { return Ok(None) };
                    let mut request = decode::<Outgoing>(old)?;
                    match request.parts.get_mut(&holding) {
                        Some(part)
                            if part.unreachable_since_us.is_none() && !part.state.is_final() =>
                        {
                            part.unreachable_since_us = Some(now_us());
                        }
                        _ => return Ok(None),
                    }
                    request.entry().map(Some)
                })
        })
        .await;
        if let Ok(Err(e)) = marked {
            tracing::debug!(error = %e, "the time a holding archive became unreachable is not kept");
        }
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
                .map_err(RequestsError::from)??
        } else {
            let client = self.cluster.peer_client(&member.address)?;
            client.deliver_request(delivery).await?
        };
        let mut trust = self.trust_list(false).await?;
        let mut checked = check_answer(holding, &trust.list, delivery, &answer);
        if matches!(checked, Err(Unaccepted::Rejected(Rejected::UnknownKey(_)))) {
            // A key rotated since the list was read.
            trust = self.trust_list(true).await?;
            checked = check_answer(holding, &trust.list, delivery, &answer);
        }
        if let Err(why) = checked {
            tracing::warn!(holding, request = %delivery.request_id, error = %why, "an answer was not kept; the part is asked for again");
            return Err(Undelivered::Unaccepted(why));
        }
        let node = self.clone();
        let (holding, request_id) = (holding.to_owned(), delivery.request_id.clone());
        tokio::task::spawn_blocking(move || node.take_answer(&holding, &request_id, answer))
            .await
            .map_err(DomainError::from)
            .map_err(RequestsError::from)??;
        Ok(())
    }

    /// Keeps a checked answer if it moves the part forward.
    pub(super) fn take_answer(
        &self,
        holding: &str,
        request_id: &str,
        answer: Answer,
    ) -> Result<(), RequestsError> {
        let action = match answer.state {
            HoldingState::Released => Action::CopiesReceived,
            HoldingState::Refused => Action::RefusalReceived,
            HoldingState::NoneHeld => Action::NoneHeldReceived,
            HoldingState::InReview | HoldingState::Pending => Action::InReviewThere,
        };
        let mut moved = false;
        self.requests
            .book
            .change::<RequestsError>(Side::Outgoing, request_id, |old| {
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
                part.signing_key = String::new();
                part.missing = answer.missing.clone();
                part.reason = answer.reason.clone();
                part.unreachable_since_us = None;
                let step = Step::now(Requester::archive(holding), action, part.records.clone());
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
