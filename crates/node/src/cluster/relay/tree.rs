//! The relay tree: the members in name order laid out as a heap of degree
//! `relay_fanout`; each domain follows only its neighbours in it.

/// The neighbours of `me` in the relay tree: `names` (every member, in
/// name order, `me` among them) laid out as a heap of degree `fanout`,
/// its parent and its children. None when relaying is off or `me` is not
/// among them.
pub fn neighbours<'a>(
    names: impl Iterator<Item = &'a str>,
    me: &str,
    fanout: usize,
) -> Vec<&'a str> {
    if fanout == 0 {
        return Vec::new();
    }
    let names: Vec<&str> = names.collect();
    let Some(i) = names.iter().position(|n| *n == me) else {
        return Vec::new();
    };
    let parent = (i > 0).then(|| (i - 1) / fanout);
    let children = (i * fanout + 1)..((i + 1) * fanout + 1).min(names.len());
    parent
        .into_iter()
        .chain(children)
        .map(|j| names[j])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Every member's neighbours name it back, and the tree links
        /// every member to the first: a change from anywhere reaches all.
        #[test]
        fn the_relay_tree_is_one_tree_whose_edges_go_both_ways(
            n in 1usize..200,
            fanout in 1usize..20,
        ) {
            let names: Vec<String> = (0..n).map(|i| format!("d{i:04}")).collect();
            let of = |me: &str| neighbours(names.iter().map(String::as_str), me, fanout);
            let mut edges = 0;
            for me in &names {
                let around = of(me);
                proptest::prop_assert!(around.len() <= fanout + 1);
                for other in &around {
                    proptest::prop_assert!(of(other).contains(&me.as_str()));
                }
                edges += around.len();
            }
            // A tree of n members has n - 1 edges, each counted from both ends.
            proptest::prop_assert_eq!(edges, 2 * (n - 1));
            let mut reached = vec![names[0].as_str()];
            let mut i = 0;
            while i < reached.len() {
                for other in of(reached[i]) {
                    if !reached.contains(&other) {
                        reached.push(other);
                    }
                }
                i += 1;
            }
            proptest::prop_assert_eq!(reached.len(), n);
        }
    }
}
