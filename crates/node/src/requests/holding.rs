//! The holding archive's side: a part taken in once (by receiving archive
//! and request ID) and answered by the release policy, or left to this
//! archive's reviewers; every copy released sealed with what a certificate
//! prints and the digests of the rest; every answer sealed whole, afresh
//! at each delivery, so that the receiving archive keeps nothing a party
//! on the wire made or changed.

use std::sync::Arc;

use serde_json::Value;
use xarchive_seal::statement::{sealed_title, sha256, AnswerStatement, CopyStatement};

use super::kept::{decode, in_review, refused, Action, Incoming, Kept, Step};

use super::{
    base64, check_text, is_request_id, rfc3339, secs, unbase64, RequestsError, MAX_RECORDS,
};
use crate::local::audit::Requester;
use crate::local::domain::DomainError;
use crate::local::id::ArchiveId;
use crate::local::record::{now_us, Record};
use crate::local::requests::Side;
use crate::node::Node;
use crate::wire::{Answer, Decision, Delivery, HoldingState, ReviewItem, ReviewRecord, SignedCopy};

/// The metadata fields a record's own date is read from, in this order:
/// the catalogue's usual names for when a record was made.
const DATE_FIELDS: [&str; 7] = [
    "record_date",
    "date",
    "形成日期",
    "形成时间",
    "日期",
    "year",
    "年度",
];

/// A record's own date, as its catalogue gives it.
fn record_date(record: &Record) -> Option<String> {
    DATE_FIELDS
        .iter()
        .find_map(|f| match record.metadata.get(*f)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
}

/// The SHA-256 of a copy's sealed bytes (or, for a copy of format 1, of
/// its signed JSON): what an answer's seal names it by.
pub(super) fn copy_digest(copy: &SignedCopy) -> [u8; 32] {
    let bytes = if copy.sealed.is_empty() {
        &copy.payload
    } else {
        &copy.sealed
    };
    sha256(&unbase64(bytes).unwrap_or_default())
}

/// The SHA-256 of metadata as it travels (its JSON).
pub(super) fn metadata_digest(metadata: &serde_json::Map<String, Value>) -> [u8; 32] {
    sha256(&serde_json::to_vec(metadata).unwrap_or_default())
}

impl Node {
    /// Sealed copies of those of `delivery`'s records held here, the
    /// others named missing: released with a copy, or none held.
    fn release(&self, delivery: &Delivery) -> Result<Answer, RequestsError> {
        let released = secs(now_us());
        let mut copies = Vec::new();
        let mut missing = Vec::new();
        for id in &delivery.records {
            let record = ArchiveId::parse(id)
                .ok()
                .and_then(|id| self.domain.get(&id).transpose())
                .transpose()?;
            let Some(record) = record else {
                missing.push(id.clone());
                continue;
            };
            let (title, title_sha256) = sealed_title(&record.title);
            let statement = CopyStatement {
                holding: self.cluster.me.to_string(),
                receiving: delivery.receiving.clone(),
                request_id: delivery.request_id.clone(),
                archive_number: id.clone(),
                title,
                title_sha256,
                record_date: record_date(&record),
                released,
                content_sha256: record.content.as_deref().map(sha256),
                metadata_sha256: metadata_digest(&record.metadata),
            };
            copies.push(SignedCopy {
                sealed: base64(&self.requests.seal.seal(statement.encode())),
                content: record.content.as_deref().map(base64),
                metadata: record.metadata,
                ..SignedCopy::default()
            });
        }
        let state = if copies.is_empty() {
            HoldingState::NoneHeld
        } else {
            HoldingState::Released
        };
        Ok(Answer {
            state,
            copies,
            missing,
            reason: None,
            sealed: String::new(),
        })
    }

    /// The release policy's answer to `delivery`: sealed copies if it
    /// releases every record held here, else a place in the review queue.
    fn policy_answer(&self, delivery: &Delivery) -> Result<Answer, RequestsError> {
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
            self.release(delivery)
        } else {
            Ok(in_review(reasons.join("; ")))
        }
    }

    /// `answer` to `delivery` sealed whole by this archive: the request,
    /// the receiving archive, the state, the reason, the records asked
    /// for, those missing, and each copy by its digest.
    fn seal_answer(&self, delivery: &Delivery, mut answer: Answer) -> Answer {
        let statement = AnswerStatement {
            holding: self.cluster.me.to_string(),
            receiving: delivery.receiving.clone(),
            request_id: delivery.request_id.clone(),
            state: answer.state.as_str().to_owned(),
            reason: answer.reason.clone(),
            records: delivery.records.clone(),
            missing: answer.missing.clone(),
            copies: answer.copies.iter().map(copy_digest).collect(),
            at: secs(now_us()),
        };
        answer.sealed = base64(&self.requests.seal.seal(statement.encode()));
        answer
    }

    /// What this (holding) domain answers a part delivered by
    /// `receiving`: the answer kept for it if it came before, else the
    /// release policy's (sealed copies, or a place in the review queue);
    /// sealed.
    pub fn take_in(&self, receiving: &str, delivery: Delivery) -> Result<Answer, RequestsError> {
        if !is_request_id(&delivery.request_id) || delivery.receiving != receiving {
            return Err(RequestsError::Invalid(
                "a delivery names its request by 32 hex digits and comes from its receiving archive"
                    .into(),
            ));
        }
        if delivery.records.is_empty() || delivery.records.len() > MAX_RECORDS {
            return Err(RequestsError::Invalid(format!(
                "a delivery names 1 to {MAX_RECORDS} records"
            )));
        }
        check_text("applicant_name", &delivery.applicant_name, true)?;
        check_text("purpose", &delivery.purpose, true)?;
        let key = format!("{receiving}/{}", delivery.request_id);
        // Decided under the book's lock: a repeat that arrives meanwhile
        // finds this part taken in, and is answered what was kept.
        let (kept, _) =
            self.requests
                .book
                .get_or_insert::<RequestsError>(Side::Incoming, &key, || {
                    let answer = self.policy_answer(&delivery)?;
                    let action = match answer.state {
                        HoldingState::Released => Action::RequestReleased,
                        HoldingState::NoneHeld => Action::RequestNoneHeld,
                        _ => Action::RequestReferredToReview,
                    };
                    let step = Step::now(
                        Requester::archive(receiving),
                        action,
                        delivery.records.clone(),
                    );
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
        Ok(self.seal_answer(&kept.delivery, kept.answer))
    }

    /// The parts other archives sent here that wait for a reviewer, oldest
    /// first, each record with its title and whether the applicant is
    /// among its persons, each receiving archive by its name.
    pub async fn review_queue(self: &Arc<Self>) -> Result<Vec<ReviewItem>, RequestsError> {
        let _ = self.trust_list(false).await;
        let node = self.clone();
        tokio::task::spawn_blocking(move || node.review_queue_now())
            .await
            .map_err(DomainError::from)?
    }

    fn review_queue_now(&self) -> Result<Vec<ReviewItem>, RequestsError> {
        let policy = &self.config.requests;
        let hasher = self.auth.key_hasher();
        let mut queue = Vec::new();
        for (_, bytes) in self.requests.book.unfinished(Side::Incoming)? {
            let kept = decode::<Incoming>(&bytes)?;
            if kept.answer.state != HoldingState::InReview {
                continue;
            }
            let mut records = Vec::new();
            for id in &kept.delivery.records {
                let record = match ArchiveId::parse(id) {
                    Ok(id) => self.domain.get_with_keys(&id)?,
                    Err(_) => None,
                };
                records.push(ReviewRecord {
                    id: id.clone(),
                    applicant_named: record.as_ref().is_some_and(|r| {
                        policy.names_applicant(r, &kept.delivery.applicant_digest, hasher)
                    }),
                    title: record.map(|r| r.title),
                });
            }
            queue.push((
                kept.received_us,
                ReviewItem {
                    receiving_name: self.archive_name(&kept.delivery.receiving).name,
                    receiving: kept.delivery.receiving,
                    request_id: kept.delivery.request_id,
                    received_at: rfc3339(kept.received_us),
                    applicant_name: kept.delivery.applicant_name,
                    purpose: kept.delivery.purpose,
                    records,
                    reason: kept.answer.reason.unwrap_or_default(),
                },
            ));
        }
        queue.sort_by_key(|(at, _)| *at);
        Ok(queue.into_iter().map(|(_, item)| item).collect())
    }

    /// A reviewer's decision on a part waiting here: sealed copies (or
    /// none held, if they were deleted meanwhile), or a refusal with its
    /// reason. The receiving archive takes it at its next delivery.
    pub fn decide(
        &self,
        receiving: &str,
        request_id: &str,
        decision: Decision,
        reviewer: Requester,
    ) -> Result<Answer, RequestsError> {
        if !decision.approve && decision.reason.trim().is_empty() {
            return Err(RequestsError::Invalid(
                "a refusal needs a reason for the applicant".into(),
            ));
        }
        check_text("reason", &decision.reason, false)?;
        let key = format!("{receiving}/{request_id}");
        let action = if decision.approve {
            Action::ReviewApproved
        } else {
            Action::ReviewRefused
        };
        // Decided under the book's lock: two reviewers deciding at once
        // cannot both succeed.
        let kept = self
            .requests
            .book
            .change::<RequestsError>(Side::Incoming, &key, |old| {
                let old = old.ok_or_else(|| RequestsError::NoReview(key.clone()))?;
                let mut kept = decode::<Incoming>(old)?;
                if kept.answer.state != HoldingState::InReview {
                    return Err(RequestsError::Decided(kept.answer.state));
                }
                kept.answer = if decision.approve {
                    self.release(&kept.delivery)?
                } else {
                    refused(decision.reason.clone())
                };
                let records = kept.delivery.records.clone();
                kept.unlogged.push(Step::now(reviewer, action, records));
                kept.entry().map(Some)
            })?
            // The change wrote, or failed with its reason.
            .ok_or_else(|| RequestsError::NoReview(key.clone()))?;
        self.flush_steps::<Incoming>(Side::Incoming, &key);
        let kept = decode::<Incoming>(&kept)?;
        Ok(self.seal_answer(&kept.delivery, kept.answer))
    }
}
