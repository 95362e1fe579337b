//! Builds our filters and the Rust peers on the same keys in the same run
//! and prints a table, then one JSON line (the last line of output).
//!
//! cargo run --release -p xarchive-filter --example compare -- --items 1000000 --fpr 0.01

use std::hint::black_box;
use std::time::Instant;

use clap::Parser;
use fastbloom_rs::{Deletable, FilterBuilder, Membership};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Map, Value};
use xarchive_filter::{
    AtomicCountingBloomFilter, BloomFilter, BloomGeometry, CountingBloomFilter, CuckooFilter,
    ErasableFilter, Filter, NotPresent,
};

#[derive(Parser)]
struct Args {
    /// Keys inserted (and as many absent keys probed).
    #[arg(long, default_value_t = 1_000_000)]
    items: usize,
    /// Target false-positive rate.
    #[arg(long, default_value_t = 0.01)]
    fpr: f64,
    /// Repetitions; every figure is their median.
    #[arg(long, default_value_t = 5)]
    reps: usize,
}

/// One repetition's figures for one filter.
#[derive(Clone, Copy, Default)]
struct Sample {
    insert_ns: f64,
    hit_ns: f64,
    miss_ns: f64,
    remove_ns: Option<f64>,
    bits_per_item: f64,
    fpr: f64,
    insert_failures: usize,
}

/// The operations a filter under test offers, on string keys.
trait Subject {
    fn insert(&mut self, key: &str) -> bool;
    fn contains(&self, key: &str) -> bool;
    fn remove(&mut self, key: &str) -> Option<bool>;
    fn bits(&self) -> f64;
}

/// [`ErasableFilter::remove`] of a filter kind.
type Remove<F> = fn(&mut F, &[u8]) -> Result<(), NotPresent>;

/// Any of our filters, through the crate's [`Filter`] trait. `remove` is
/// set for the erasable ones; `bits` is the size of the cells (counters,
/// bits or fingerprint slots).
struct Ours<F> {
    filter: F,
    remove: Option<Remove<F>>,
    bits: f64,
}

impl<F: Filter> Ours<F> {
    fn plain(filter: F, bits: u64) -> Self {
        Ours {
            filter,
            remove: None,
            bits: bits as f64,
        }
    }
}

impl<F: ErasableFilter> Ours<F> {
    fn erasable(filter: F, bits: u64) -> Self {
        Ours {
            filter,
            remove: Some(<F as ErasableFilter>::remove),
            bits: bits as f64,
        }
    }
}

impl<F: Filter> Subject for Ours<F> {
    fn insert(&mut self, key: &str) -> bool {
        self.filter.insert(key.as_bytes()).is_ok()
    }
    fn contains(&self, key: &str) -> bool {
        self.filter.contains(key.as_bytes())
    }
    fn remove(&mut self, key: &str) -> Option<bool> {
        self.remove
            .map(|remove| remove(&mut self.filter, key.as_bytes()).is_ok())
    }
    fn bits(&self) -> f64 {
        self.bits
    }
}

struct FastBloom(fastbloom::BloomFilter);
impl Subject for FastBloom {
    fn insert(&mut self, key: &str) -> bool {
        self.0.insert(key);
        true
    }
    fn contains(&self, key: &str) -> bool {
        self.0.contains(key)
    }
    fn remove(&mut self, _: &str) -> Option<bool> {
        None
    }
    fn bits(&self) -> f64 {
        self.0.num_bits() as f64
    }
}

struct FastBloomRsCounting(fastbloom_rs::CountingBloomFilter, f64);
impl Subject for FastBloomRsCounting {
    fn insert(&mut self, key: &str) -> bool {
        self.0.add(key.as_bytes());
        true
    }
    fn contains(&self, key: &str) -> bool {
        self.0.contains(key.as_bytes())
    }
    fn remove(&mut self, key: &str) -> Option<bool> {
        self.0.remove(key.as_bytes());
        Some(true)
    }
    fn bits(&self) -> f64 {
        self.1
    }
}

struct BloomFilterCrate(bloomfilter::Bloom<str>);
impl Subject for BloomFilterCrate {
    fn insert(&mut self, key: &str) -> bool {
        self.0.set(key);
        true
    }
    fn contains(&self, key: &str) -> bool {
        self.0.check(key)
    }
    fn remove(&mut self, _: &str) -> Option<bool> {
        None
    }
    fn bits(&self) -> f64 {
        self.0.as_slice().len() as f64 * 8.0
    }
}

struct CuckooFilterCrate(cuckoofilter::CuckooFilter<std::collections::hash_map::DefaultHasher>);
impl Subject for CuckooFilterCrate {
    fn insert(&mut self, key: &str) -> bool {
        self.0.add(key).is_ok()
    }
    fn contains(&self, key: &str) -> bool {
        self.0.contains(key)
    }
    fn remove(&mut self, key: &str) -> Option<bool> {
        Some(self.0.delete(key))
    }
    fn bits(&self) -> f64 {
        self.0.memory_usage() as f64 * 8.0
    }
}

const NAMES: [&str; 8] = [
    "xarchive-counting",
    "xarchive-bloom",
    "xarchive-cuckoo",
    "xarchive-counting-atomic",
    "fastbloom",
    "fastbloom-rs-counting",
    "bloomfilter",
    "cuckoofilter",
];

fn build(name: &str, n: usize, p: f64) -> Box<dyn Subject> {
    match name {
        "xarchive-counting" => {
            let f = CountingBloomFilter::with_capacity(n as u64, p).expect("valid sizing");
            let bits = f.geometry().num_bits() * 4;
            Box::new(Ours::erasable(f, bits))
        }
        "xarchive-bloom" => {
            let f = BloomFilter::with_capacity(n as u64, p).expect("valid sizing");
            let bits = f.geometry().num_bits();
            Box::new(Ours::plain(f, bits))
        }
        "xarchive-cuckoo" => {
            let f = CuckooFilter::with_capacity(n as u64, p).expect("valid sizing");
            let g = f.geometry();
            Box::new(Ours::erasable(
                f,
                g.num_slots() * u64::from(g.fingerprint_bits()),
            ))
        }
        "xarchive-counting-atomic" => {
            let f = AtomicCountingBloomFilter::with_capacity(n as u64, p).expect("valid sizing");
            let bits = f.geometry().num_bits() * 4;
            Box::new(Ours::erasable(f, bits))
        }
        "fastbloom" => Box::new(FastBloom(
            fastbloom::BloomFilter::with_false_pos(p).expected_items(n),
        )),
        "fastbloom-rs-counting" => {
            let mut builder = FilterBuilder::new(n as u64, p);
            builder.enable_repeat_insert(true);
            let filter = builder.build_counting_bloom_filter();
            let bits = filter.config().size as f64 * 4.0;
            Box::new(FastBloomRsCounting(filter, bits))
        }
        "bloomfilter" => Box::new(BloomFilterCrate(
            bloomfilter::Bloom::new_for_fp_rate(n, p).expect("valid sizing"),
        )),
        "cuckoofilter" => Box::new(CuckooFilterCrate(
            cuckoofilter::CuckooFilter::with_capacity(n),
        )),
        other => unreachable!("unknown filter {other}"),
    }
}

/// Realistic archive numbers: fonds, series, year, retention, item.
fn keys(n: usize, salt: &str) -> Vec<String> {
    (0..n)
        .map(|i| {
            format!(
                "J{:03}-{salt}·{}-Y-{:06}",
                i % 977,
                1990 + (i / 977) % 35,
                i
            )
        })
        .collect()
}

fn per_op(start: Instant, ops: usize) -> f64 {
    start.elapsed().as_nanos() as f64 / ops as f64
}

fn measure(name: &str, present: &[String], absent: &[String], p: f64) -> Sample {
    let n = present.len();
    let mut f = build(name, n, p);
    let t = Instant::now();
    let mut failures = 0;
    for k in present {
        failures += usize::from(!f.insert(black_box(k)));
    }
    let insert_ns = per_op(t, n);

    let t = Instant::now();
    let hits = present.iter().filter(|k| f.contains(black_box(k))).count();
    let hit_ns = per_op(t, n);
    assert!(
        hits + failures >= n,
        "{name}: false negatives ({hits} of {n} found, {failures} refused)"
    );

    let t = Instant::now();
    let false_positives = absent.iter().filter(|k| f.contains(black_box(k))).count();
    let miss_ns = per_op(t, absent.len());

    let bits_per_item = f.bits() / n as f64;
    let t = Instant::now();
    let mut removable = true;
    for k in present {
        removable &= f.remove(black_box(k)).is_some();
    }
    let remove_ns = removable.then(|| per_op(t, n));
    Sample {
        insert_ns,
        hit_ns,
        miss_ns,
        remove_ns,
        bits_per_item,
        fpr: false_positives as f64 / absent.len() as f64,
        insert_failures: failures,
    }
}

/// Operations per second of `threads` threads sharing one atomic counting
/// filter, each on its own half of the keys: three rounds of inserting its
/// keys interleaved one-for-one with lookups, then removing them.
fn concurrent_throughput(threads: usize, keys: &[String], p: f64) -> f64 {
    let filter = AtomicCountingBloomFilter::new(
        BloomGeometry::for_capacity(keys.len() as u64, p).expect("valid sizing"),
    );
    let half = keys.len() / 2;
    const ROUNDS: usize = 3;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let filter = &filter;
            let mine = &keys[(t % 2) * half..(t % 2 + 1) * half];
            s.spawn(move || {
                let mut found = 0usize;
                for _ in 0..ROUNDS {
                    for pair in mine.chunks_exact(2) {
                        filter.insert(&pair[0]);
                        found += usize::from(filter.contains(&pair[1]));
                    }
                    for k in mine.iter().step_by(2) {
                        found += usize::from(filter.remove(k).is_ok());
                    }
                }
                black_box(found);
            });
        }
    });
    (threads * half * ROUNDS * 3 / 2) as f64 / start.elapsed().as_secs_f64()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        f64::midpoint(xs[m - 1], xs[m])
    }
}

fn main() {
    let args = Args::parse();
    let reps = args.reps.max(5);
    let present = keys(args.items, "WS");
    let absent = keys(args.items, "ZZ");
    let bar = ProgressBar::new((reps * (NAMES.len() + 2)) as u64).with_style(
        ProgressStyle::with_template("{msg:>26} [{bar:40}] {pos}/{len} {elapsed}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); NAMES.len()];
    let mut speedups = Vec::new();
    // Repetitions interleave the filters so that drift in the machine's
    // speed touches all of them alike.
    for _ in 0..reps {
        for (i, name) in NAMES.iter().enumerate() {
            bar.set_message(*name);
            samples[i].push(measure(name, &present, &absent, args.fpr));
            bar.inc(1);
        }
        bar.set_message("atomic, 1 and 2 threads");
        let one = concurrent_throughput(1, &present, args.fpr);
        bar.inc(1);
        let two = concurrent_throughput(2, &present, args.fpr);
        bar.inc(1);
        speedups.push(two / one);
    }
    bar.finish_and_clear();

    let med = |i: usize, f: fn(&Sample) -> f64| median(samples[i].iter().map(f).collect());
    let idx = |name: &str| NAMES.iter().position(|n| *n == name).expect("known name");
    let fast = idx("fastbloom");
    let fast_rs = idx("fastbloom-rs-counting");

    println!(
        "{} items, target false-positive rate {}, median of {reps} runs (ns per operation)\n",
        args.items, args.fpr
    );
    println!(
        "{:<26} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "filter",
        "insert",
        "hit",
        "miss",
        "remove",
        "bits/item",
        "fpr %",
        "hit/fastb",
        "miss/fastb"
    );
    let mut filters = Map::new();
    for (i, name) in NAMES.iter().enumerate() {
        let insert = med(i, |s| s.insert_ns);
        let hit = med(i, |s| s.hit_ns);
        let miss = med(i, |s| s.miss_ns);
        let remove = samples[i][0]
            .remove_ns
            .map(|_| med(i, |s| s.remove_ns.unwrap_or(f64::NAN)));
        let bits = med(i, |s| s.bits_per_item);
        let fpr = med(i, |s| s.fpr);
        let failures = samples[i]
            .iter()
            .map(|s| s.insert_failures)
            .max()
            .unwrap_or(0);
        println!(
            "{:<26} {:>9.1} {:>9.1} {:>9.1} {:>9} {:>9.2} {:>9.3} {:>10.2} {:>10.2}{}",
            name,
            insert,
            hit,
            miss,
            remove.map_or("—".to_string(), |r| format!("{r:.1}")),
            bits,
            fpr * 100.0,
            hit / med(fast, |s| s.hit_ns),
            miss / med(fast, |s| s.miss_ns),
            if failures > 0 {
                format!("  ({failures} inserts refused)")
            } else {
                String::new()
            }
        );
        filters.insert(
            name.to_string(),
            json!({
                "insert_ns": insert,
                "contains_hit_ns": hit,
                "contains_miss_ns": miss,
                "remove_ns": remove,
                "bits_per_item": bits,
                "fpr": fpr,
            }),
        );
    }
    let speedup = median(speedups);
    println!("\nconcurrent counting filter, 2 threads over 1 (mixed insert/lookup): {speedup:.2}×");

    let counting = idx("xarchive-counting");
    let ratio = |a: usize, b: usize, f: fn(&Sample) -> f64| med(a, f) / med(b, f);
    println!(
        "xarchive-counting over fastbloom-rs-counting: insert {:.2}, hit {:.2}, miss {:.2}, remove {:.2}",
        ratio(counting, fast_rs, |s| s.insert_ns),
        ratio(counting, fast_rs, |s| s.hit_ns),
        ratio(counting, fast_rs, |s| s.miss_ns),
        ratio(counting, fast_rs, |s| s.remove_ns.unwrap_or(f64::NAN)),
    );
    let cuckoo = idx("xarchive-cuckoo");
    let peer = idx("cuckoofilter");
    println!(
        "xarchive-cuckoo over cuckoofilter: insert {:.2}, hit {:.2}, miss {:.2}\n",
        ratio(cuckoo, peer, |s| s.insert_ns),
        ratio(cuckoo, peer, |s| s.hit_ns),
        ratio(cuckoo, peer, |s| s.miss_ns),
    );
    let out = json!({
        "items": args.items,
        "fpr_target": args.fpr,
        "filters": Value::Object(filters),
        "concurrent_speedup_2t": speedup,
    });
    println!("{out}");
}
