//! How long asking other domains takes, from the calls lookups made
//! lately: a "not found" waits for a copy behind a write in flight only
//! as long as asking its domain would take (`settle.rs`).

use std::collections::VecDeque;
use std::time::Duration;

/// How many answers are remembered.
const KEPT: usize = 256;

/// The times of the last [`KEPT`] answered calls to other domains (a
/// probe or a record read), as a lookup measured them.
#[derive(Debug)]
pub struct CallTimes {
    recent: VecDeque<Duration>,
    /// Assumed while nothing was measured.
    unmeasured: Duration,
}

impl CallTimes {
    /// No call measured yet: asking is assumed to take `unmeasured`.
    pub fn new(unmeasured: Duration) -> Self {
        CallTimes {
            recent: VecDeque::with_capacity(KEPT),
            unmeasured,
        }
    }

    /// One call answered after `took`.
    pub fn record(&mut self, took: Duration) {
        if self.recent.len() == KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(took);
    }

    /// How long asking `k` domains at once takes: the slowest of `k`
    /// answers, whose expected place among the calls measured is the
    /// quantile k / (k + 1) (the median for one domain, the 97th
    /// percentile for thirty). Without a measure, the assumed time.
    // A rounded, non-negative index into `sorted`, clamped to its last below.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    pub fn slowest_of(&self, k: usize) -> Duration {
        if self.recent.is_empty() || k == 0 {
            return if k == 0 {
                Duration::ZERO
            } else {
                self.unmeasured
            };
        }
        let mut sorted: Vec<Duration> = self.recent.iter().copied().collect();
        sorted.sort_unstable();
        let q = k as f64 / (k as f64 + 1.0);
        let at = ((sorted.len() - 1) as f64 * q).round() as usize;
        sorted[at.min(sorted.len() - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn asking_one_takes_the_median_call_and_asking_many_the_slowest_expected() {
        let mut times = CallTimes::new(ms(100));
        assert_eq!(times.slowest_of(3), ms(100), "nothing measured yet");
        for n in 1..=100 {
            times.record(ms(n));
        }
        assert_eq!(times.slowest_of(1), ms(51));
        assert_eq!(times.slowest_of(30), ms(97));
        assert_eq!(times.slowest_of(0), Duration::ZERO);
    }

    #[test]
    fn only_the_latest_calls_count() {
        let mut times = CallTimes::new(ms(100));
        for _ in 0..KEPT {
            times.record(ms(500));
        }
        for _ in 0..KEPT {
            times.record(ms(2));
        }
        assert_eq!(times.slowest_of(30), ms(2));
    }

    proptest::proptest! {
        /// Asking more domains at once never takes less, and never more
        /// than the slowest call measured.
        #[test]
        fn asking_more_domains_never_takes_less(
            calls in proptest::collection::vec(0u64..10_000, 1..300),
            k in 1usize..100,
        ) {
            let mut times = CallTimes::new(ms(100));
            for c in &calls {
                times.record(Duration::from_micros(*c));
            }
            proptest::prop_assert!(times.slowest_of(k) <= times.slowest_of(k + 1));
            let slowest = calls.iter().rev().take(KEPT).max().copied().unwrap_or(0);
            proptest::prop_assert!(times.slowest_of(k) <= Duration::from_micros(slowest));
        }
    }
}
