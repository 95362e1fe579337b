//! One read of the positions for every "not found" waiting on it: a
//! domain answering a hundred absent lookups at once asks the coordinator
//! once or twice, not a hundred times. A cached record needs less: a read
//! begun recently enough ([`Confirmations::recent`]), renewed ahead of
//! time so that cache hits do not queue behind it.
//!
//! A lookup may only use a read that started after it did (a read begun
//! earlier may predate a write acknowledged before the lookup began, and
//! miss it). Each caller takes an arrival number; a read records the
//! arrivals counted when it started, and covers every caller numbered up
//! to that. Reads run one at a time: a caller that arrives during a read
//! waits for it to end, and then either a read that covers it has ended
//! meanwhile, or it starts one, which covers everyone waiting by then.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::coordinator::{CoordError, Roster};

/// What a read of the positions gave, shared.
type Read = Result<Arc<Roster>, CoordError>;

#[derive(Default)]
pub struct Confirmations {
    arrivals: AtomicU64,
    /// Held while a read is made.
    lane: tokio::sync::Mutex<()>,
    /// The last read: the arrivals it covers, and what it gave.
    last: parking_lot::Mutex<Option<(u64, Read)>>,
    /// The last read that succeeded, and when it began.
    last_good: parking_lot::Mutex<Option<(Instant, Arc<Roster>)>>,
    /// A read is being made ahead of time for [`recent`](Self::recent).
    renewing: AtomicBool,
}

impl Confirmations {
    /// The positions as read by `read`, started after this call began (by
    /// this caller or another).
    pub async fn confirm<F, Fut>(&self, read: F) -> Read
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Read>,
    {
        let ticket = self.arrivals.fetch_add(1, Ordering::SeqCst) + 1;
        let _lane = self.lane.lock().await;
        if let Some((covers, result)) = &*self.last.lock() {
            if *covers >= ticket {
                return result.clone();
            }
        }
        let covers = self.arrivals.load(Ordering::SeqCst);
        let began = Instant::now();
        let result = read().await;
        *self.last.lock() = Some((covers, result.clone()));
        if let Ok(roster) = &result {
            *self.last_good.lock() = Some((began, roster.clone()));
        }
        result
    }

    /// The positions as read by a read begun less than `max_age` ago: the
    /// last one if it did, else a new one ([`confirm`](Self::confirm)).
    /// Once the last one is half that age, one caller starts the next in
    /// the background and returns at once, so that under steady traffic
    /// no caller waits for a read (with a hundred cache hits a second
    /// queued behind one, they would every `max_age`).
    pub async fn recent<F, Fut>(self: &Arc<Self>, max_age: Duration, read: F) -> Read
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Read> + Send + 'static,
    {
        let last = self.last_good.lock().clone();
        if let Some((began, roster)) = last {
            let age = began.elapsed();
            if age < max_age {
                if age >= max_age / 2 && !self.renewing.swap(true, Ordering::SeqCst) {
                    let this = self.clone();
                    tokio::spawn(async move {
                        // A failure leaves the last good read, which
                        // callers take until it is `max_age` old.
                        let _ = this.confirm(read).await;
                        this.renewing.store(false, Ordering::SeqCst);
                    });
                }
                return Ok(roster);
            }
        }
        self.confirm(read).await
    }

    /// Makes the last good read look `by` older, as time passing would.
    #[cfg(test)]
    fn age(&self, by: Duration) {
        if let Some((began, _)) = self.last_good.lock().as_mut() {
            *began -= by;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A read that counts itself and says which read it was (in the
    /// roster's size), after yielding so that others can arrive.
    async fn counted(reads: &AtomicUsize) -> Read {
        let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let known = (0..n)
            .map(|i| {
                let member = crate::cluster::Member {
                    address: String::new(),
                    kind: crate::local::filter::FilterKind::Counting,
                    epoch: 0,
                    version: i as u64,
                    keys: String::new(),
                    signing_key: String::new(),
                };
                let known = crate::cluster::Known {
                    member,
                    departed: false,
                    retired: false,
                };
                (
                    crate::local::domain_name::DomainName::from(format!("d{i}").as_str()),
                    known,
                )
            })
            .collect();
        Ok(Arc::new(Roster { known }))
    }

    #[tokio::test]
    async fn concurrent_lookups_share_reads_that_began_after_they_did() {
        let shared = Arc::new(Confirmations::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..100 {
            let (shared, reads) = (shared.clone(), reads.clone());
            tasks.push(tokio::spawn(async move {
                // The reads begun before this caller arrived.
                let begun = reads.load(Ordering::SeqCst);
                let roster = shared.confirm(|| counted(&reads)).await.unwrap();
                (begun, roster.known.len())
            }));
        }
        for task in tasks {
            let (begun, read) = task.await.unwrap();
            assert!(
                read > begun,
                "served read {read}, though {begun} had begun before"
            );
        }
        let made = reads.load(Ordering::SeqCst);
        assert!(made <= 3, "{made} reads for 100 concurrent lookups");
    }

    #[tokio::test]
    async fn a_caller_after_a_read_gets_a_new_one() {
        let shared = Confirmations::default();
        let reads = AtomicUsize::new(0);
        shared.confirm(|| counted(&reads)).await.unwrap();
        let second = shared.confirm(|| counted(&reads)).await.unwrap();
        assert_eq!(second.known.len(), 2);
    }

    /// A read for [`Confirmations::recent`]: [`counted`] on a shared count.
    fn counted_by(reads: &Arc<AtomicUsize>) -> impl FnOnce() -> BoxedRead {
        let reads = reads.clone();
        move || Box::pin(async move { counted(&reads).await })
    }

    type BoxedRead = std::pin::Pin<Box<dyn Future<Output = Read> + Send>>;

    #[tokio::test]
    async fn a_recent_read_is_shared_until_it_is_older_than_asked_then_read_again() {
        let shared = Arc::new(Confirmations::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let hour = Duration::from_hours(1);
        shared.recent(hour, counted_by(&reads)).await.unwrap();
        let again = shared.recent(hour, counted_by(&reads)).await.unwrap();
        assert_eq!(again.known.len(), 1, "the read begun within the hour");
        let fresh = shared
            .recent(Duration::ZERO, counted_by(&reads))
            .await
            .unwrap();
        assert_eq!(fresh.known.len(), 2, "no read is younger than zero");
        let failed = shared
            .confirm(|| async { Err(CoordError::NoSession) })
            .await;
        assert!(failed.is_err());
        let after = shared.recent(hour, counted_by(&reads)).await.unwrap();
        assert_eq!(
            after.known.len(),
            2,
            "a failed read leaves the last good one"
        );
    }

    #[tokio::test]
    async fn a_read_past_half_its_age_is_renewed_behind_the_callers_who_take_the_last_one() {
        let shared = Arc::new(Confirmations::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let hour = Duration::from_hours(1);
        shared.recent(hour, counted_by(&reads)).await.unwrap();
        shared.age(Duration::from_secs(2000));
        // Half an hour old: taken as it is, and one new read started.
        for _ in 0..10 {
            let taken = shared.recent(hour, counted_by(&reads)).await.unwrap();
            assert_eq!(taken.known.len(), 1);
        }
        while shared.renewing.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            reads.load(Ordering::SeqCst),
            2,
            "the first read and one renewal"
        );
        let now = shared.recent(hour, counted_by(&reads)).await.unwrap();
        assert_eq!(now.known.len(), 2, "the renewed read is taken");
    }

    #[tokio::test]
    async fn a_failed_read_fails_those_it_covers_and_not_later_callers() {
        let shared = Confirmations::default();
        let failed = shared.confirm(|| async { Err(CoordError::NoSession) });
        assert!(matches!(failed.await, Err(CoordError::NoSession)));
        let reads = AtomicUsize::new(0);
        assert!(shared.confirm(|| counted(&reads)).await.is_ok());
    }
}
