//! Is a filter shape designed to compress (Mitzenmacher, "Compressed Bloom
//! Filters", 2002) worth having as the transfer form of a domain's bit
//! view? For a domain of `--items` IDs, every k from 1 to the usual
//! optimum gets the smallest blocked geometry that meets `--fpr`; each is
//! filled, encoded as published (`XABL`), compressed as the HTTP layer
//! does (zstd level 3, and gzip level 6 for comparison), and probed with
//! as many absent IDs for its real false-positive rate. The last two rows
//! are what is shipped today: the domain sized for its own count, and
//! sized for the default million as `xarchive up` does.
//!
//! `cargo run --release -p xarchive-filter --example compressed_bloom -- --items 10000`

use std::io::Write;

use clap::Parser;
use xarchive_filter::{BloomFilter, BloomGeometry};

#[derive(Parser)]
struct Args {
    /// IDs the domain holds.
    #[arg(long, default_value_t = 10_000)]
    items: u64,
    /// The false-positive rate every shape must meet.
    #[arg(long, default_value_t = 0.01)]
    fpr: f64,
    /// What the domain is sized for today (`filter.expected_items`).
    #[arg(long, default_value_t = 1_000_000)]
    global_capacity: u64,
}

/// 512-bit blocks.
const BLOCK: u64 = 512;

/// The smallest geometry with `k` probes whose theoretical rate at
/// `items` meets `fpr`, if one exists within 64 × the optimum's size.
fn smallest_with_k(items: u64, fpr: f64, k: u32, optimum_bits: u64) -> Option<BloomGeometry> {
    let fits = |blocks: u64| {
        BloomGeometry::new(blocks * BLOCK, k, 0).is_ok_and(|g| g.theoretical_fpr(items) <= fpr)
    };
    let mut hi = optimum_bits / BLOCK * 64;
    if !fits(hi) {
        return None;
    }
    let mut lo = 1;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    BloomGeometry::new(hi * BLOCK, k, 0).ok()
}

struct Row {
    shape: String,
    k: u32,
    bits: u64,
    raw: usize,
    zstd: usize,
    gzip: usize,
    /// What an ideal coder of independent bits would need: m·H(fill)/8.
    entropy: f64,
    fpr: f64,
}

fn measure(shape: String, geometry: BloomGeometry, items: u64) -> std::io::Result<Row> {
    let mut filter = BloomFilter::new(geometry);
    for i in 0..items {
        filter.insert(format!("110101{i:012}"));
    }
    let encoded = filter.encode();
    let fill = filter.fill_ratio();
    let h = |p: f64| {
        if p <= 0.0 || p >= 1.0 {
            0.0
        } else {
            -p * p.log2() - (1.0 - p) * (1.0 - p).log2()
        }
    };
    let entropy = geometry.num_bits() as f64 * h(fill) / 8.0;
    let zstd = zstd::bulk::compress(&encoded, 3)?.len();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    gz.write_all(&encoded)?;
    let gzip = gz.finish()?.len();
    let probes = 200_000u64;
    let false_positives = (0..probes)
        .filter(|i| filter.contains(format!("absent-{i:012}")))
        .count();
    Ok(Row {
        shape,
        k: geometry.k(),
        bits: geometry.num_bits(),
        raw: encoded.len(),
        zstd,
        gzip,
        entropy,
        fpr: false_positives as f64 / probes as f64,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let optimum = BloomGeometry::for_capacity(args.items, args.fpr)?;
    let mut rows = Vec::new();
    for k in 1..=optimum.k() {
        if let Some(g) = smallest_with_k(args.items, args.fpr, k, optimum.num_bits()) {
            let shape = if k == optimum.k() {
                "sized for its count (today's k)".to_owned()
            } else {
                format!("compressed Bloom, k = {k}")
            };
            rows.push(measure(shape, g, args.items)?);
        }
    }
    let global = BloomGeometry::for_capacity(args.global_capacity, args.fpr)?;
    rows.push(measure(
        format!("sized for {} (today's default)", args.global_capacity),
        global,
        args.items,
    )?);

    println!(
        "{} IDs, target false-positive rate {}; bytes of the published bit view",
        args.items, args.fpr
    );
    println!(
        "{:<36} {:>3} {:>11} {:>10} {:>10} {:>10} {:>10} {:>9} {:>12}",
        "shape", "k", "bits", "raw B", "zstd B", "gzip B", "entropy B", "fpr", "zstd/today"
    );
    let base = rows
        .iter()
        .find(|r| r.k == optimum.k() && r.bits == optimum.num_bits())
        .map_or(1, |r| r.zstd);
    for r in &rows {
        println!(
            "{:<36} {:>3} {:>11} {:>10} {:>10} {:>10} {:>10.0} {:>8.3}% {:>11.2}×",
            r.shape,
            r.k,
            r.bits,
            r.raw,
            r.zstd,
            r.gzip,
            r.entropy,
            r.fpr * 100.0,
            r.zstd as f64 / base as f64
        );
    }
    Ok(())
}
