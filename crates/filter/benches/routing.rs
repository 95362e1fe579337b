//! Candidate domains for an ID: the bit-sliced index over 64 filters of 1M
//! IDs each, against asking the 64 filters one by one (hashing once, and
//! hashing per filter as separate services would). Prints the medians and
//! their ratio after criterion's own report.
//!
//! cargo bench -p xarchive-filter --bench routing

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion};
use xarchive_filter::{BloomFilter, BloomGeometry, SlicedIndex};

const DOMAINS: usize = 64;
const ITEMS: u64 = 1_000_000;

fn id(domain: usize, i: u64) -> String {
    format!(
        "J{:03}-WS·{}-Y-{i:07}",
        domain * 100 + (i % 100) as usize,
        2000 + i % 25
    )
}

fn setup() -> (Vec<BloomFilter>, SlicedIndex, Vec<String>) {
    let g = BloomGeometry::for_capacity(ITEMS, 0.01).expect("valid sizing");
    let mut index = SlicedIndex::new(g, DOMAINS);
    let mut filters = Vec::with_capacity(DOMAINS);
    let bar = indicatif::ProgressBar::new(DOMAINS as u64).with_message("building filters");
    for d in 0..DOMAINS {
        let mut f = BloomFilter::new(g);
        for i in 0..ITEMS {
            f.insert(id(d, i));
        }
        index.set(d, &f).expect("same geometry");
        filters.push(f);
        bar.inc(1);
    }
    bar.finish_and_clear();
    // Queries: IDs held by one domain each, spread over all of them.
    let queries = (0..4096u64)
        .map(|q| {
            id(
                usize::try_from(q % DOMAINS as u64).unwrap(),
                (q * 7919) % ITEMS,
            )
        })
        .collect();
    (filters, index, queries)
}

fn main() {
    let (filters, index, queries) = setup();
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("candidates_64x1M");
    let mut q = 0usize;
    let mut next = || {
        q = (q + 1) % queries.len();
        &queries[q]
    };
    group.bench_function(BenchmarkId::new("sliced_index", DOMAINS), |b| {
        let mut out = [0u64; 1];
        b.iter(|| {
            let probes = index.geometry().probes(next().as_bytes());
            index.candidates_into(&probes, &mut out);
            black_box(out[0])
        });
    });
    group.bench_function(
        BenchmarkId::new("separate_filters_one_hash", DOMAINS),
        |b| {
            b.iter(|| {
                let probes = index.geometry().probes(next().as_bytes());
                let mut set = 0u64;
                for (d, f) in filters.iter().enumerate() {
                    set |= u64::from(f.contains_probes(&probes)) << d;
                }
                black_box(set)
            });
        },
    );
    group.bench_function(
        BenchmarkId::new("separate_filters_hash_each", DOMAINS),
        |b| {
            b.iter(|| {
                let id = next();
                let mut set = 0u64;
                for (d, f) in filters.iter().enumerate() {
                    set |= u64::from(f.contains(id)) << d;
                }
                black_box(set)
            });
        },
    );
    group.finish();
    c.final_summary();
    report();
}

/// Reads criterion's median estimates back and prints the ratios.
fn report() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(|t| t.join("criterion/candidates_64x1M"))
        .expect("target dir");
    let median = |name: &str| -> Option<f64> {
        let path = dir
            .join(name)
            .join(DOMAINS.to_string())
            .join("new/estimates.json");
        let text = std::fs::read_to_string(path).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v["median"]["point_estimate"].as_f64()
    };
    let (Some(index), Some(one), Some(each)) = (
        median("sliced_index"),
        median("separate_filters_one_hash"),
        median("separate_filters_hash_each"),
    ) else {
        eprintln!("(no criterion estimates found under {})", dir.display());
        return;
    };
    println!("\nmedian candidate-set time, {DOMAINS} domains of {ITEMS} IDs:");
    println!("  sliced index                  {index:>9.1} ns");
    println!(
        "  64 filters, one hash          {one:>9.1} ns  ({:.1}× the index)",
        one / index
    );
    println!(
        "  64 filters, hashing each      {each:>9.1} ns  ({:.1}× the index)",
        each / index
    );
}
