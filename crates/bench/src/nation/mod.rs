//! `xarchive-bench nation`: one domain among N of realistic,
//! very different sizes. Two parts: `routing` (here), what a full domain
//! holds to route lookups and what one routing step costs; `cluster`
//! (cluster.rs), a real domain process joining a real ZooKeeper among
//! N − 1 light publishers (light/), measured while joining, syncing,
//! following an import and looking up.
//!
//! In the routing part the domains' filters are real (the filter crate's Bloom filters and
//! bit-sliced index, as a domain's replicas hold them), filled with
//! synthetic IDs; nothing else of a domain runs here (no ZooKeeper, no
//! HTTP, no sync). Three layouts of the copies are compared:
//! - `common`, the rule before: a filter is sized for the larger of
//!   `expected_items` and 1.5 × its records, so the domains at or under
//!   `expected_items` share one geometry, bit-sliced in one index, and the
//!   larger ones are held one by one;
//! - `own`: each filter sized for exactly its own records, all held one
//!   by one (the least memory at the target rate, and the routing step of
//!   replicas that hold copies of other geometries one by one);
//! - `classes`, what domains do now: each sized for its size class (the
//!   least of 2^m and 3 · 2^(m−1) above its records, `capacity_for`) at
//!   the rate its capacity is given (`FilterSettings::rate_for`: in
//!   proportion to it, at most `--fpr`); each class of at least
//!   `MIN_SLICED` filters bit-sliced in an index of its own, the others
//!   held one by one.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_distr::Distribution;
use serde::Serialize;
use serde_json::json;
use xarchive_filter::{candidates_all, BloomFilter, BloomGeometry, SlicedIndex};

use xarchive_node::cluster::MIN_SLICED;
use xarchive_node::{capacity_for, FilterSettings};

use crate::quantile;
use crate::svg::{Chart, Series};

pub(crate) mod cluster;
pub(crate) mod light;

/// The archive levels at N = 3 301 (national comprehensive archives at the
/// end of 2022): how many, and their share of all IDs (three quarters at
/// county level, as in 2015's holdings of 586 million).
const LEVELS: [(&str, usize, f64); 4] = [
    ("central", 1, 0.02),
    ("province", 31, 0.10),
    ("city", 333, 0.13),
    ("county", 2_936, 0.75),
];
const NATION: usize = 3_301;
/// Spread of sizes within a level (σ of the log).
const SIGMA: f64 = 0.8;

#[derive(clap::Args)]
pub struct NationBenchArgs {
    /// Numbers of domains, one row each.
    #[arg(long, value_delimiter = ',', default_value = "100,300,1000,3301")]
    domains: Vec<usize>,
    /// IDs over all domains at N = 3 301 (a smaller N holds the same
    /// share per domain).
    #[arg(long, default_value_t = 1_000_000_000)]
    ids: u64,
    /// Target false-positive rate of every filter (at most, in `classes`).
    #[arg(long, default_value_t = 0.01)]
    fpr: f64,
    /// The domains' `filter.cluster_ids`, for `classes` and the cluster
    /// part: a filter for c IDs is sized for a rate of 1.4 c / this (at most
    /// `--fpr`); 0 sizes every one for `--fpr`. By default the nation's
    /// IDs (`--ids`; in the cluster part, the IDs of the N measured).
    #[arg(long)]
    cluster_ids: Option<u64>,
    /// The `expected_items` of the `common` layout (a domain's default).
    #[arg(long, default_value_t = 1_000_000)]
    expected_items: u64,
    /// Layouts to build (`common` takes long at N = 3 301: each of its
    /// copies is bit-sliced into an index the size of 3 301 of them).
    #[arg(long, value_delimiter = ',', default_value = "common,own,classes")]
    layouts: Vec<Layout>,
    /// Lookups timed per layout, half of present IDs, half of absent ones.
    #[arg(long, default_value_t = 200_000)]
    lookups: usize,
    /// The seed of the archives' sizes and of the lookups: a run replays.
    #[arg(long, default_value_t = 12)]
    seed: u64,
    /// Where to write the figures as JSON.
    #[arg(long, default_value = "bench-nation.json")]
    json: PathBuf,
    /// Where to draw routing memory and time against N (SVG; `-memory`,
    /// `-time`, `-join` and `-sync` are added to the name).
    #[arg(long, default_value = "bench-nation.svg")]
    plot: PathBuf,
    /// Parts to run: `routing` (no servers) and `cluster` (needs
    /// ZooKeeper: `--zk`, or run under scripts/zookeeper.sh).
    #[arg(long, value_delimiter = ',', default_value = "routing,cluster")]
    parts: Vec<Part>,
    /// ZooKeeper for the cluster part: host:port[,host:port…][/chroot].
    #[arg(long, env = "XARCHIVE_ZK")]
    zk: Option<String>,
    /// Record writes per second over the whole nation, in the cluster
    /// part's steady phase (each at a domain drawn in proportion to its
    /// size, each published as a domain publishes it).
    #[arg(long, default_value_t = 1_000)]
    write_rate: u64,
    /// How long the steady phase writes.
    #[arg(long, default_value_t = 60)]
    steady_seconds: u64,
    /// Records one county archive imports (0: no import phase).
    #[arg(long, default_value_t = 1_000_000)]
    import: u64,
    /// Light watchers: sessions that follow the membership as a full
    /// domain does (a watch on its children, a listing per change), to
    /// load ZooKeeper as N full domains would.
    #[arg(long, default_value_t = 0)]
    watchers: usize,
    /// Lookups through the measured domain, of held IDs and of absent ones.
    #[arg(long, default_value_t = 500)]
    cluster_lookups: usize,
    /// The share of the light domains killed after those lookups (at
    /// least one), before as many lookups of absent IDs again (0: none).
    /// The routing part draws as many at random, again and again, and
    /// counts the absent IDs none of whose vain candidates is among them.
    #[arg(long, default_value_t = 0.01)]
    killed: f64,
    /// The light publishers write whole entries in the positions ledger,
    /// as domains of earlier releases do (to measure such a build, which
    /// reads nothing else), instead of lines and descriptions.
    #[arg(long)]
    whole_entries: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Routing,
    Cluster,
}

/// The ID of item `i` of domain `d`: 12 bytes, as the filters see bytes.
fn id(d: u32, i: u64) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[..4].copy_from_slice(&d.to_le_bytes());
    out[4..].copy_from_slice(&i.to_le_bytes());
    out
}

/// Sizes of `n` domains holding about `total` IDs: each level's count
/// scaled to `n` (at least one), its share split with lognormal spread.
// Counts and sizes from shares: rounded, at least one, far below 2^53.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn nation(n: usize, total: u64, rng: &mut impl Rng) -> anyhow::Result<Vec<u64>> {
    let mut counts: Vec<usize> = LEVELS
        .iter()
        .map(|(_, c, _)| ((c * n) as f64 / NATION as f64).round().max(1.0) as usize)
        .collect();
    let others: usize = counts[..3].iter().sum();
    counts[3] = n.saturating_sub(others).max(1);
    let spread = rand_distr::LogNormal::new(0.0, SIGMA)?;
    let mut sizes = Vec::with_capacity(n);
    for ((_, _, share), count) in LEVELS.iter().zip(counts) {
        let weights: Vec<f64> = (0..count).map(|_| spread.sample(rng)).collect();
        let sum: f64 = weights.iter().sum();
        sizes.extend(
            weights
                .iter()
                .map(|w| ((share * total as f64 * w / sum) as u64).max(1)),
        );
    }
    Ok(sizes)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Layout {
    Common,
    Own,
    Classes,
}

const LAYOUTS: [Layout; 3] = [Layout::Common, Layout::Own, Layout::Classes];

impl Layout {
    /// The geometry of a filter of `records` IDs in this layout.
    fn geometry(self, records: u64, args: &NationBenchArgs) -> anyhow::Result<BloomGeometry> {
        let settings = FilterSettings {
            fpr: args.fpr,
            cluster_ids: args.cluster_ids.unwrap_or(args.ids),
            ..FilterSettings::default()
        };
        let (capacity, rate) = match self {
            Layout::Common => (args.expected_items.max(records + records / 2), args.fpr),
            Layout::Own => (records.max(1), args.fpr),
            Layout::Classes => {
                let capacity = capacity_for(&settings, records, 0);
                (capacity, settings.rate_for(capacity))
            }
        };
        Ok(BloomGeometry::for_capacity(capacity, rate)?)
    }
}

/// The copies a domain holds, laid out one way: bit-sliced indexes (with
/// the domain in each slot) and filters held one by one.
struct Routing {
    indexes: Vec<(SlicedIndex, Vec<u32>)>,
    single: Vec<(u32, BloomFilter)>,
}

impl Routing {
    /// As replicas route: every index and every copy held one by one asked
    /// together (`candidates_all`).
    fn candidates(&self, id: &[u8], out: &mut Vec<u32>) {
        out.clear();
        let indexes: Vec<&SlicedIndex> = self.indexes.iter().map(|(index, _)| index).collect();
        let filters: Vec<&BloomFilter> = self.single.iter().map(|(_, f)| f).collect();
        let (sets, maybe) = candidates_all(&indexes, &filters, id);
        for ((_, owners), set) in self.indexes.iter().zip(&sets) {
            out.extend(set.iter().map(|slot| owners[slot]));
        }
        out.extend(
            self.single
                .iter()
                .zip(maybe)
                .filter(|(_, maybe)| *maybe)
                .map(|((d, _), _)| *d),
        );
    }

    fn bytes(&self) -> u64 {
        let sliced: u64 = self.indexes.iter().map(|(index, _)| index.bytes()).sum();
        let single: u64 = self
            .single
            .iter()
            .map(|(_, f)| f.words().len() as u64 * 8)
            .sum();
        sliced + single
    }
}

/// Builds the copies of every domain's filter in `layout`.
fn build(
    layout: Layout,
    sizes: &[u64],
    args: &NationBenchArgs,
    bar: &ProgressBar,
) -> anyhow::Result<Routing> {
    let mut by_geometry = std::collections::BTreeMap::<(u64, u32), Vec<u32>>::new();
    let mut geometries = Vec::with_capacity(sizes.len());
    for (d, &records) in sizes.iter().enumerate() {
        let g = layout.geometry(records, args)?;
        geometries.push(g);
        by_geometry
            .entry((g.num_bits(), g.k()))
            .or_default()
            .push(u32::try_from(d)?);
    }
    let fill = |d: u32| {
        let mut f = BloomFilter::new(geometries[d as usize]);
        for i in 0..sizes[d as usize] {
            f.insert(id(d, i));
        }
        bar.inc(sizes[d as usize]);
        f
    };
    // Today's replicas slice every copy of the common geometry.
    let common = BloomGeometry::for_capacity(args.expected_items, args.fpr)?;
    let sliced = |members: &[u32]| match layout {
        Layout::Common => geometries[members[0] as usize] == common,
        Layout::Own => false,
        Layout::Classes => members.len() >= MIN_SLICED,
    };
    let mut routing = Routing {
        indexes: Vec::new(),
        single: Vec::new(),
    };
    for members in by_geometry.values() {
        if sliced(members) {
            let mut index = SlicedIndex::new(geometries[members[0] as usize], members.len());
            for (slot, &d) in members.iter().enumerate() {
                index.set(slot, &fill(d))?;
            }
            routing.indexes.push((index, members.clone()));
        } else {
            routing.single.extend(members.iter().map(|&d| (d, fill(d))));
        }
    }
    Ok(routing)
}

/// One layout at one N, measured.
#[derive(Clone, Debug, Serialize)]
struct Row {
    domains: usize,
    ids: u64,
    layout: Layout,
    /// Bit-sliced indexes, and the filters held one by one.
    indexes: usize,
    held_one_by_one: usize,
    routing_bytes: u64,
    build_seconds: f64,
    /// Median over batches of the mean time of one routing step.
    route_ns_present: f64,
    route_ns_absent: f64,
    /// Candidate domains per lookup: of an ID held by one domain (that
    /// one and false positives), and of an absent ID (false positives).
    candidates_present: f64,
    candidates_absent: f64,
    /// With `--killed` of the domains down, drawn at random: the share of
    /// absent IDs still answered 404 (none of their vain candidates is
    /// down), the median and the 5th percentile over the draws, and the
    /// share of draws in which it is at least 99 %. Computed from the
    /// measured candidate sets, not measured with killed domains (the
    /// cluster part does that, for one draw).
    killed_404_p50: f64,
    killed_404_p5: f64,
    killed_draws_at_least_99: f64,
}

/// Draws of killed domains per row.
const KILLED_DRAWS: usize = 2_000;

/// The vain candidates of each absent ID that has any.
fn vain_sets(routing: &Routing, absent: &[[u8; 12]]) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    absent
        .iter()
        .filter_map(|id| {
            routing.candidates(id, &mut out);
            (!out.is_empty()).then(|| out.clone())
        })
        .collect()
}

/// For each of `draws` random choices of `killed` of `domains` domains,
/// the share of `lookups` absent IDs none of whose vain candidates (the
/// sets given, for the IDs that have any) is among the killed: those a
/// cluster still answers 404. Sorted, lowest first.
fn answered_404_with_killed(
    sets: &[Vec<u32>],
    lookups: usize,
    domains: usize,
    killed: usize,
    draws: usize,
    rng: &mut impl Rng,
) -> Vec<f64> {
    let mut down = vec![false; domains];
    let mut shares: Vec<f64> = (0..draws)
        .map(|_| {
            down.fill(false);
            for d in rand::seq::index::sample(rng, domains, killed.min(domains)).iter() {
                down[d] = true;
            }
            let unavailable = sets
                .iter()
                .filter(|set| set.iter().any(|&d| down[d as usize]))
                .count();
            1.0 - unavailable as f64 / lookups.max(1) as f64
        })
        .collect();
    shares.sort_by(f64::total_cmp);
    shares
}

/// Times routing steps in batches; returns (median ns per step, mean
/// candidates per step).
fn time_routing(routing: &Routing, ids: &[[u8; 12]]) -> (f64, f64) {
    let mut out = Vec::new();
    let (mut batches, mut candidates) = (Vec::new(), 0usize);
    for batch in ids.chunks(5_000) {
        let started = Instant::now();
        for id in batch {
            routing.candidates(id, &mut out);
            candidates += out.len();
        }
        batches.push(started.elapsed().as_nanos() as f64 / batch.len() as f64);
    }
    batches.sort_by(f64::total_cmp);
    (
        quantile(&batches, 0.5),
        candidates as f64 / ids.len().max(1) as f64,
    )
}

pub async fn run(args: NationBenchArgs) -> anyhow::Result<ExitCode> {
    let zk = match (&args.zk, args.parts.contains(&Part::Cluster)) {
        (None, true) => anyhow::bail!(
            "the cluster part needs a ZooKeeper: give --zk (or XARCHIVE_ZK), run under \
             scripts/zookeeper.sh, or leave it out with --parts routing"
        ),
        (zk, _) => zk.clone(),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let plans: Vec<(usize, Vec<u64>)> = args
        .domains
        .iter()
        .map(|&n| {
            // A share of the IDs: whole, non-negative, far below 2^53.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let total = (args.ids as f64 * n as f64 / NATION as f64) as u64;
            Ok((n, nation(n, total, &mut rng)?))
        })
        .collect::<anyhow::Result<_>>()?;
    let rows = if args.parts.contains(&Part::Routing) {
        routing(&args, &plans, &mut rng)?
    } else {
        Vec::new()
    };
    let mut cluster_rows = Vec::new();
    if let Some(zk) = zk {
        for (_, sizes) in &plans {
            // The measured domain takes the place of the last county.
            let light = &sizes[..sizes.len().saturating_sub(1)];
            cluster_rows.push(cluster::measure(&args, &zk, light).await?);
        }
    }
    report(&args, &rows, &cluster_rows)?;
    Ok(ExitCode::SUCCESS)
}

/// The routing part: every layout at every N.
fn routing(
    args: &NationBenchArgs,
    plans: &[(usize, Vec<u64>)],
    rng: &mut impl Rng,
) -> anyhow::Result<Vec<Row>> {
    let inserts: u64 = plans
        .iter()
        .map(|(_, s)| s.iter().sum::<u64>())
        .sum::<u64>()
        * 3;
    let bar = ProgressBar::new(inserts).with_style(
        ProgressStyle::with_template("{msg:>28} [{bar:30}] {percent}% {elapsed} (eta {eta})")?
            .progress_chars("=> "),
    );
    let mut rows = Vec::new();
    for (n, sizes) in plans {
        let total: u64 = sizes.iter().sum();
        // Present IDs drawn in proportion to the domains' sizes.
        let mut starts = Vec::with_capacity(sizes.len());
        let mut sum = 0;
        for s in sizes {
            starts.push(sum);
            sum += s;
        }
        let half = args.lookups / 2;
        let present: Vec<[u8; 12]> = (0..half)
            .map(|_| {
                let at = rng.random_range(0..total);
                let d = starts.partition_point(|&s| s <= at) - 1;
                id(u32::try_from(d).expect("a domain's index"), at - starts[d])
            })
            .collect();
        let absent: Vec<[u8; 12]> = (0..half).map(|_| id(u32::MAX, rng.random())).collect();
        for &layout in &args.layouts {
            bar.set_message(format!("{n} domains, {layout:?}"));
            let started = Instant::now();
            let routing = build(layout, sizes, args, &bar)?;
            let build_seconds = started.elapsed().as_secs_f64();
            let (route_ns_present, candidates_present) = time_routing(&routing, &present);
            let (route_ns_absent, candidates_absent) = time_routing(&routing, &absent);
            // A rounded, non-negative count of domains.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let killed = if args.killed > 0.0 {
                ((*n as f64 * args.killed).round() as usize).max(1)
            } else {
                0
            };
            let shares = answered_404_with_killed(
                &vain_sets(&routing, &absent),
                absent.len(),
                *n,
                killed,
                KILLED_DRAWS,
                rng,
            );
            rows.push(Row {
                domains: *n,
                ids: total,
                layout,
                indexes: routing.indexes.len(),
                held_one_by_one: routing.single.len(),
                routing_bytes: routing.bytes(),
                build_seconds,
                route_ns_present,
                route_ns_absent,
                candidates_present,
                candidates_absent,
                killed_404_p50: quantile(&shares, 0.5),
                killed_404_p5: quantile(&shares, 0.05),
                killed_draws_at_least_99: shares.iter().filter(|&&s| s >= 0.99).count() as f64
                    / shares.len() as f64,
            });
        }
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn report(
    args: &NationBenchArgs,
    rows: &[Row],
    cluster_rows: &[cluster::ClusterRow],
) -> anyhow::Result<()> {
    if !rows.is_empty() {
        print_routing(args, rows);
    }
    if !cluster_rows.is_empty() {
        cluster::print(cluster_rows);
    }
    let report = json!({
        "fpr": args.fpr,
        "cluster_ids": args.cluster_ids.unwrap_or(args.ids),
        "expected_items": args.expected_items,
        "ids_at_3301": args.ids,
        "lookups": args.lookups,
        "seed": args.seed,
        "levels": LEVELS.iter().map(|(name, count, share)| json!({"level": name, "at_3301": count, "share": share})).collect::<Vec<_>>(),
        "rows": rows,
        "cluster": {
            "write_rate": args.write_rate,
            "steady_seconds": args.steady_seconds,
            "import": args.import,
            "watchers": args.watchers,
            "rows": cluster_rows,
        },
    });
    std::fs::write(&args.json, serde_json::to_string_pretty(&report)?)?;
    // `bench-nation.svg` gives `bench-nation-memory.svg`, `-time.svg`…
    let stem = args.plot.with_extension("");
    let name = stem
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("bench-nation");
    let beside = |what: &str| stem.with_file_name(format!("{name}-{what}.svg"));
    let chart = |title: &str, y_label: &str, series: Vec<Series>| Chart {
        title: title.into(),
        x_label: "domains".into(),
        y_label: y_label.into(),
        series,
    };
    let mut written = Vec::new();
    if !rows.is_empty() {
        let colours = ["#d62728", "#1f77b4", "#2ca02c"];
        let by_layout = |value: &dyn Fn(&Row) -> f64| {
            LAYOUTS
                .iter()
                .zip(colours)
                .map(|(layout, colour)| Series {
                    name: format!("{layout:?}").to_lowercase(),
                    colour,
                    dashed: false,
                    points: rows
                        .iter()
                        .filter(|r| r.layout == *layout)
                        .map(|r| (r.domains as f64, value(r)))
                        .collect(),
                })
                .collect()
        };
        let memory = chart(
            "Routing state of one domain against N",
            "MB",
            by_layout(&|r| r.routing_bytes as f64 / 1e6),
        );
        let time = chart(
            "One routing step (an ID held somewhere) against N",
            "ns",
            by_layout(&|r| r.route_ns_present),
        );
        written.push((beside("memory"), memory));
        written.push((beside("time"), time));
    }
    if !cluster_rows.is_empty() {
        let series = |name: &str, colour, value: &dyn Fn(&cluster::ClusterRow) -> f64| Series {
            name: name.into(),
            colour,
            dashed: false,
            points: cluster_rows
                .iter()
                .map(|r| (r.domains as f64, value(r)))
                .collect(),
        };
        let join = chart(
            "Joining from nothing against N",
            "seconds / 10 MB",
            vec![
                series("seconds", "#1f77b4", &|r| r.join_seconds),
                series("10 MB fetched", "#d62728", &|r| r.join_bytes as f64 / 1e7),
            ],
        );
        let sync = chart(
            &format!("Steady sync at {} writes/s against N", args.write_rate),
            "% of a core / ms",
            vec![
                series("CPU, % of a core", "#1f77b4", &|r| r.cpu_share * 100.0),
                series("lag p99, ms", "#d62728", &|r| r.lag_p99_ms),
            ],
        );
        written.push((beside("join"), join));
        written.push((beside("sync"), sync));
    }
    for (path, chart) in &written {
        std::fs::write(path, chart.render())?;
    }
    let names: Vec<String> = written
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    println!(
        "\nfigures in {}, charts in {}",
        args.json.display(),
        names.join(", ")
    );
    Ok(())
}

fn print_routing(args: &NationBenchArgs, rows: &[Row]) {
    println!(
        "\nRouting state and step of one full domain, filters at {} % false positives \
         (`classes`: at most, for a cluster of {} IDs), `common` sized for {} items\n",
        args.fpr * 100.0,
        args.cluster_ids.unwrap_or(args.ids),
        args.expected_items
    );
    println!(
        "{:>7} {:>14} {:<8} {:>7} {:>7} {:>11} {:>8} {:>10} {:>10} {:>9} {:>9} {:>15} {:>7} {:>13}",
        "domains",
        "IDs",
        "layout",
        "indexes",
        "single",
        "routing MB",
        "build s",
        "route ns",
        "absent ns",
        "cand.",
        "cand. abs",
        "killed: 404 p50",
        "p5",
        "draws ≥ 99 %"
    );
    for r in rows {
        println!(
            "{:>7} {:>14} {:<8} {:>7} {:>7} {:>11.1} {:>8.1} {:>10.0} {:>10.0} {:>9.2} {:>9.2} {:>14.2}% {:>6.2}% {:>12.1}%",
            r.domains,
            r.ids,
            format!("{:?}", r.layout).to_lowercase(),
            r.indexes,
            r.held_one_by_one,
            r.routing_bytes as f64 / 1e6,
            r.build_seconds,
            r.route_ns_present,
            r.route_ns_absent,
            r.candidates_present,
            r.candidates_absent,
            100.0 * r.killed_404_p50,
            100.0 * r.killed_404_p5,
            100.0 * r.killed_draws_at_least_99
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_id_is_404_unless_one_of_its_vain_candidates_is_killed() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        // Ten lookups: two have vain candidates, domain 0 and domains 1 and 2.
        let sets = vec![vec![0], vec![1, 2]];
        // Every domain killed: both of them are 503.
        assert_eq!(
            answered_404_with_killed(&sets, 10, 3, 3, 5, &mut rng),
            vec![0.8; 5]
        );
        // None killed: all are 404.
        assert_eq!(
            answered_404_with_killed(&sets, 10, 3, 0, 5, &mut rng),
            vec![1.0; 5]
        );
        // One of three killed: each lookup with candidates is 503 exactly
        // when one of its own is the one, so every draw gives 0.9.
        assert_eq!(
            answered_404_with_killed(&sets, 10, 3, 1, 50, &mut rng),
            vec![0.9; 50]
        );
        // One of four: domain 3 is in no set, so some draws leave all 404.
        let shares = answered_404_with_killed(&sets, 10, 4, 1, 200, &mut rng);
        assert_eq!(shares.first(), Some(&0.9));
        assert_eq!(shares.last(), Some(&1.0));
        assert!(shares.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn a_nation_has_its_levels_in_their_shares_of_the_ids() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let sizes = nation(NATION, 1_000_000_000, &mut rng).unwrap();
        assert_eq!(sizes.len(), NATION);
        let total: u64 = sizes.iter().sum();
        assert!((999_000_000..=1_000_000_000).contains(&total), "{total}");
        let county: u64 = sizes[NATION - 2_936..].iter().sum();
        assert!((county as f64 / total as f64 - 0.75).abs() < 0.001);
        assert_eq!(sizes[0], 20_000_000, "the central archive holds its 2 %");
        // Scaled down, every level keeps at least one archive.
        let small = nation(10, 1_000, &mut rng).unwrap();
        assert_eq!(small.len(), 10);
        assert!(small.iter().all(|&s| s >= 1));
    }

    #[test]
    fn every_layout_routes_an_id_to_the_domain_holding_it() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let sizes = nation(200, 200_000, &mut rng).unwrap();
        let args = NationBenchArgs {
            domains: vec![200],
            ids: 0,
            fpr: 0.01,
            cluster_ids: Some(200_000),
            expected_items: 5_000,
            layouts: LAYOUTS.to_vec(),
            lookups: 0,
            seed: 0,
            json: PathBuf::new(),
            plot: PathBuf::new(),
            parts: vec![Part::Routing],
            zk: None,
            write_rate: 0,
            steady_seconds: 0,
            import: 0,
            watchers: 0,
            cluster_lookups: 0,
            killed: 0.0,
            whole_entries: false,
        };
        let bar = ProgressBar::hidden();
        let mut out = Vec::new();
        for layout in LAYOUTS {
            let routing = build(layout, &sizes, &args, &bar).unwrap();
            for (d, &n) in sizes.iter().enumerate() {
                let d = u32::try_from(d).unwrap();
                routing.candidates(&id(d, n - 1), &mut out);
                assert!(out.contains(&d), "{layout:?}: domain {d}");
            }
        }
    }
}
