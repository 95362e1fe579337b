//! The wait between retries of anything that talks to another machine:
//! doubling up to a ceiling, spread at random over half to one and a half
//! times, so that thousands of domains that failed together (a ZooKeeper
//! restart, a peer back up) do not retry together. A few lines rather
//! than a crate's retry combinator: every loop here retries inside a
//! `select!` beside its shutdown and resets on success, which a wait to
//! ask for says plainly.

use std::time::Duration;

pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Waits from `first`, doubling, up to `max`.
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max,
            next: first,
        }
    }

    /// The wait before the next retry (jittered), doubling the one after.
    pub fn wait(&mut self) -> Duration {
        let wait = jittered(self.next);
        self.next = (self.next * 2).min(self.max);
        wait
    }

    /// After a success: the next failure waits the least again.
    pub fn reset(&mut self) {
        self.next = self.first;
    }

    /// The wait the next [`wait`](Self::wait) is spread around.
    pub fn current(&self) -> Duration {
        self.next
    }
}

/// `wait`, spread at random over [wait / 2, wait × 3 / 2).
fn jittered(wait: Duration) -> Duration {
    wait.mul_f64(rand::random_range(0.5..1.5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn waits_double_up_to_the_ceiling_within_the_jitter_and_start_over_after_a_reset(
            first_ms in 1u64..1_000,
            ceiling in 1u32..64,
            failures in 1usize..20,
        ) {
            let first = Duration::from_millis(first_ms);
            let max = first * ceiling;
            let mut backoff = Backoff::new(first, max);
            let mut around = first;
            for _ in 0..failures {
                let wait = backoff.wait();
                prop_assert!(wait >= around / 2 && wait < around * 3 / 2, "{wait:?} around {around:?}");
                around = (around * 2).min(max);
                prop_assert_eq!(backoff.current(), around);
            }
            backoff.reset();
            prop_assert_eq!(backoff.current(), first);
        }
    }
}
