//! The archive numbers an import has met, and on which line: a file gives
//! each record once, so a number met again is a rejected line naming the
//! first (importing the file again is another import, and replaces).
//!
//! Kept as 128-bit keyed digests rather than the numbers themselves, some
//! 40 bytes a line however long the numbers (std's SipHash-1-3 under two
//! independent random keys: no crate needed for a digest that only has to
//! tell numbers of one import apart). Two different numbers taken for
//! one would need a 128-bit collision: for n numbers, about n²/2¹²⁹
//! (10⁻²³ at n = 10⁸), and the keys are drawn anew by every import, so no
//! file can be made to collide.

use std::collections::hash_map::{Entry, HashMap, RandomState};
use std::hash::BuildHasher;

pub struct SeenIds {
    keys: (RandomState, RandomState),
    lines: HashMap<u128, u64>,
}

impl SeenIds {
    pub fn new() -> SeenIds {
        SeenIds {
            keys: (RandomState::new(), RandomState::new()),
            lines: HashMap::new(),
        }
    }

    /// Notes that `id` is on `line`; the line it was first met on, if it
    /// was met before.
    pub fn first_line(&mut self, id: &str, line: u64) -> Option<u64> {
        let digest =
            u128::from(self.keys.0.hash_one(id)) << 64 | u128::from(self.keys.1.hash_one(id));
        match self.lines.entry(digest) {
            Entry::Occupied(first) => Some(*first.get()),
            Entry::Vacant(slot) => {
                slot.insert(line);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_met_again_names_the_line_it_was_first_met_on() {
        let mut seen = SeenIds::new();
        assert_eq!(seen.first_line("J001-WS·2023-Y-0001", 2), None);
        assert_eq!(seen.first_line("J001-WS·2023-Y-0002", 3), None);
        assert_eq!(seen.first_line("J001-WS·2023-Y-0001", 9), Some(2));
        assert_eq!(seen.first_line("J001-WS·2023-Y-0001", 12), Some(2));
        assert_eq!(seen.first_line("J001-WS.2023-Y-0001", 13), None);
    }
}
