//! The steps of requests in the audit log: each written once. A step is
//! kept in its request's entry (written in the transaction of the change
//! it records) until it is in the log: a kill or a full disk between the
//! two writes delays the log's entry, and never loses or doubles it
//! ([`Node::log_step_once`]). What a step is: `kept.rs`.

use super::kept::{decode, Incoming, Kept, Outgoing, Step};
use super::RequestsError;
use crate::local::audit::{AuditEntry, AuditError};
use crate::local::requests::Side;
use crate::node::Node;

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
        let action = step.action.as_str();
        let mut since = step.at_us;
        loop {
            let page = self.audit.since(since, PAGE)?;
            let logged = page.iter().any(|e| {
                e.request.as_deref() == Some(request)
                    && e.action.as_deref() == Some(action)
                    && e.requester.domain == step.who.domain
                    && e.records == step.records
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
            action: Some(action.to_owned()),
            request: Some(request.to_owned()),
            prev: String::new(),
            hash: String::new(),
        })?;
        Ok(())
    }

    /// Writes the steps the entry at `key` keeps to the audit log, then
    /// marks them logged. Blocks. A failure (a full disk) leaves them kept:
    /// the outbox's next pass writes them.
    pub(super) fn flush_steps<T: Kept>(&self, side: Side, key: &str) {
        if let Err(e) = self.try_flush_steps::<T>(side, key) {
            tracing::warn!(error = %e, "a request's step is not in the audit log yet; it is kept and written at the outbox's next pass");
        }
    }

    fn try_flush_steps<T: Kept>(&self, side: Side, key: &str) -> Result<(), RequestsError> {
        // Two flushes of one entry at once (a repeat delivery and the
        // outbox's pass) would each find the step missing and write it.
        let _one_at_a_time = self.requests.logging_steps.lock();
        let Some(bytes) = self.requests.book.get(side, key)? else {
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
        self.requests
            .book
            .change::<RequestsError>(side, key, |old| {
                let Some(old) = old else { return Ok(None) };
                let mut kept = decode::<T>(old)?;
                kept.unlogged().retain(|s| !steps.contains(s));
                kept.entry().map(Some)
            })?;
        Ok(())
    }

    /// Writes the steps of every entry still keeping some (the outbox's
    /// pass: those a full disk or a kill kept from the log). Blocks.
    pub(super) fn flush_all_steps(&self) -> Result<(), RequestsError> {
        self.flush_listed::<Outgoing>(Side::Outgoing)?;
        self.flush_listed::<Incoming>(Side::Incoming)
    }

    /// [`flush_all_steps`](Self::flush_all_steps) for one side: of the
    /// entries listed as waiting, only those that keep steps are flushed
    /// (read again under the lock); most wait for an answer, not the log.
    fn flush_listed<T: Kept>(&self, side: Side) -> Result<(), RequestsError> {
        for (key, bytes) in self.requests.book.unfinished(side)? {
            if !decode::<T>(&bytes)?.unlogged().is_empty() {
                self.flush_steps::<T>(side, &key);
            }
        }
        Ok(())
    }
}
