//! What a lookup did, in the lookup's own terms: who was asked, probed,
//! what the cache did, which domains could not answer and why. It becomes
//! the wire's `Route` once, at the HTTP edge ([`Trace::into_route`]), so
//! the lookup's working state is not a wire type and a failure of its own
//! is a typed reason, never text among the domains' names.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::local::domain_name::DomainName;
use crate::wire::{CacheRoute, Route, Strategy};

/// Why a lookup's shared remote search gave no answer of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskFailure {
    #[error("the lookup task panicked")]
    Panicked,
    #[error("the lookup task was cancelled")]
    Cancelled,
}

/// The trace of one lookup; field by field what `Route` tells a client.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub strategy: Strategy,
    /// Answered from this domain's own store.
    pub local: bool,
    /// Domains whose copies said "maybe".
    pub candidates: Vec<DomainName>,
    /// Domains asked for the record.
    pub asked: Vec<DomainName>,
    /// Domains asked for the record by their copies' "maybe" that did not
    /// hold it.
    pub false_positive_hops: usize,
    /// Whether live filters were probed.
    pub broadcast: bool,
    /// Domains whose live filters were probed.
    pub probed: Vec<DomainName>,
    /// Domains that could not answer, and why each.
    pub unreachable: BTreeMap<DomainName, String>,
    pub remote_calls: usize,
    pub cache: Option<CacheRoute>,
    /// Answered by another lookup of the same ID in flight at the time.
    pub coalesced: bool,
    /// Why the membership could not be confirmed.
    pub unconfirmed: Option<String>,
    /// The shared search this lookup waited on failed.
    pub failed: Option<TaskFailure>,
    pub elapsed: Duration,
}

impl Trace {
    pub fn new(strategy: Strategy) -> Self {
        Trace {
            strategy,
            ..Trace::default()
        }
    }

    /// `name` could not answer, for `why`.
    pub fn unreachable(&mut self, name: DomainName, why: String) {
        self.unreachable.insert(name, why);
    }

    /// The domains that could not answer, sorted.
    pub fn unreachable_names(&self) -> Vec<DomainName> {
        self.unreachable.keys().cloned().collect()
    }

    /// The wire's form, for the client.
    pub fn into_route(self) -> Route {
        let names = |names: Vec<DomainName>| names.into_iter().map(String::from).collect();
        let mut errors: BTreeMap<String, String> = self
            .unreachable
            .into_iter()
            .map(|(name, why)| (name.into_string(), why))
            .collect();
        let unreachable = errors.keys().cloned().collect();
        if let Some(failed) = self.failed {
            errors.insert("(lookup task)".into(), failed.to_string());
        }
        Route {
            strategy: self.strategy,
            local: self.local,
            candidates: names(self.candidates),
            asked: names(self.asked),
            false_positive_hops: self.false_positive_hops,
            broadcast: self.broadcast,
            probed: names(self.probed),
            unreachable,
            errors,
            remote_calls: self.remote_calls,
            cache: self.cache,
            coalesced: self.coalesced,
            unconfirmed: self.unconfirmed,
            elapsed_ms: self.elapsed.as_secs_f64() * 1e3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_task_is_told_apart_from_the_domains_that_could_not_answer() {
        let mut trace = Trace::new(Strategy::Routed);
        trace.unreachable("C".parse().unwrap(), "timed out".into());
        trace.failed = Some(TaskFailure::Panicked);
        let route = trace.into_route();
        assert_eq!(route.unreachable, ["C"]);
        assert_eq!(route.errors.len(), 2);
    }
}
