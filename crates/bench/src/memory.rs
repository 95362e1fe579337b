//! The seed paper's Table 3: memory for 100 000 to 1 000 000 IDs.
//!
//! At each size our filters are built for that many IDs at the domain's
//! target false-positive rate, filled, and measured through their own
//! accessors (and probed with absent IDs for their measured rate); then a
//! real `xarchive serve` holding a store of that many records is restarted
//! and its resident memory read from `/proc/<pid>/status`. One data
//! directory grows from size to size, so each step imports only the
//! difference.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::json;
use xarchive_filter::{BloomFilter, CountingBloomFilter, CuckooFilter};
use xarchive_node::{sample, ApiClient, FilterSettings};

use super::child::{ProcMemory, ServeChild};
use crate::svg::{Chart, Series};

/// The seed paper's Table 3: (IDs, MB). Its header calls the column
/// "传统查询方式 (MB)" (the traditional way) and its size column "GB",
/// while its text says the table gives the erasable Bloom filter's memory
/// for 100 000 to 1 000 000 IDs; we compare with the figures as given.
pub const PAPER_TABLE_3: [(u64, f64); 11] = [
    (100_000, 27.34),
    (150_000, 41.02),
    (200_000, 54.72),
    (300_000, 82.10),
    (400_000, 109.48),
    (500_000, 136.85),
    (600_000, 164.23),
    (700_000, 191.61),
    (800_000, 219.00),
    (900_000, 246.38),
    (1_000_000, 273.76),
];

/// The target: the counting filter for this many IDs…
const TARGET_IDS: u64 = 1_000_000;
/// …takes at most this share of the paper's figure.
const TARGET_SHARE: f64 = 1.0 / 50.0;

/// Our MB: 10^6 bytes. (Were the paper's MB 2^20 bytes, its figures would
/// be 5 % larger still, so this reading is the stricter one for us.)
const MB: f64 = 1e6;

/// The domain's name in the child process.
const DOMAIN: &str = "M";

#[derive(clap::Args)]
pub struct MemoryBenchArgs {
    /// Numbers of IDs, one row each (default: the paper's sizes).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "100000,150000,200000,300000,400000,500000,600000,700000,800000,900000,1000000"
    )]
    sizes: Vec<u64>,
    /// Target false-positive rate every filter is sized for (default: a
    /// domain's).
    #[arg(long)]
    fpr: Option<f64>,
    /// Absent IDs probed per filter and size for the measured rate (0 to
    /// skip).
    #[arg(long, default_value_t = 100_000)]
    probes: u64,
    /// Records per `_bulk` request while filling the domain's store.
    #[arg(long, default_value_t = 20_000)]
    chunk: u64,
    /// Measure the filters only, without starting a domain process.
    #[arg(long)]
    filters_only: bool,
    /// Where to write the figures as JSON.
    #[arg(long, default_value = "bench-memory.json")]
    json: PathBuf,
    /// Where to draw memory against IDs (SVG).
    #[arg(long, default_value = "bench-memory.svg")]
    plot: PathBuf,
}

/// One filter at one size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
struct Measured {
    bytes: u64,
    bits_per_id: f64,
    /// Share of the absent IDs it says may be present (`None`: not probed).
    // The name is the JSON report's column.
    #[allow(clippy::struct_field_names)]
    measured_fpr: Option<f64>,
}

impl Measured {
    fn new(bytes: usize, ids: u64, measured_fpr: Option<f64>) -> Self {
        let bytes = bytes as u64;
        Measured {
            bytes,
            bits_per_id: bytes as f64 * 8.0 / ids.max(1) as f64,
            measured_fpr,
        }
    }

    fn mb(&self) -> f64 {
        self.bytes as f64 / MB
    }
}

/// Every filter kind at one size.
#[derive(Clone, Debug, Serialize)]
struct FilterFigures {
    /// The domain's own filter: 4-bit counters.
    counting: Measured,
    /// What peers hold of it: one bit per counter.
    bit_view: Measured,
    cuckoo: Measured,
    /// A plain Bloom filter of the same size and rate.
    bloom: Measured,
    hashes: u32,
    cuckoo_fingerprint_bits: u8,
    /// IDs the cuckoo filter refused as full (none expected at capacity).
    cuckoo_refused: u64,
}

/// The domain process with a store of one size.
#[derive(Clone, Debug, Serialize)]
struct ProcessFigures {
    records: u64,
    /// After a restart on the filled data directory, once ready.
    memory: ProcMemory,
    /// Just after the import, before that restart (import buffers, the
    /// store's cache and the filter's flip log included).
    memory_after_import: ProcMemory,
    /// The store's file, as `/v1/stats` reports it.
    store_bytes: u64,
    /// The domain's filter memory as its `/v1/stats` reports it. The domain
    /// sizes its filter by its own rule, for the larger of
    /// `expected_items` and 1.5 × the records it opened with, so this can
    /// be up to 1.5 × the counting filter of the row.
    domain_filter_bytes: u64,
}

/// One row of the table.
#[derive(Clone, Debug, Serialize)]
struct Row {
    ids: u64,
    paper_mb: Option<f64>,
    filters: FilterFigures,
    process: Option<ProcessFigures>,
    /// The paper's MB over our counting filter's MB.
    paper_over_counting: Option<f64>,
}

impl Row {
    fn new(ids: u64, filters: FilterFigures) -> Self {
        let paper_mb = paper_mb(ids);
        Row {
            ids,
            paper_mb,
            paper_over_counting: paper_mb.map(|p| p / filters.counting.mb()),
            filters,
            process: None,
        }
    }
}

/// The target, where the sizes include [`TARGET_IDS`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
struct Target {
    ids: u64,
    limit_mb: f64,
    counting_mb: f64,
    met: bool,
}

fn paper_mb(ids: u64) -> Option<f64> {
    PAPER_TABLE_3
        .iter()
        .find(|(n, _)| *n == ids)
        .map(|(_, mb)| *mb)
}

fn target(rows: &[Row]) -> Option<Target> {
    let row = rows.iter().find(|r| r.ids == TARGET_IDS)?;
    let limit_mb = row.paper_mb? * TARGET_SHARE;
    let counting_mb = row.filters.counting.mb();
    Some(Target {
        ids: TARGET_IDS,
        limit_mb,
        counting_mb,
        met: counting_mb <= limit_mb,
    })
}

/// Share of `absent` that `contains` says may be present.
fn rate(absent: &[String], contains: impl Fn(&str) -> bool) -> Option<f64> {
    if absent.is_empty() {
        return None;
    }
    let hits = absent.iter().filter(|id| contains(id)).count();
    Some(hits as f64 / absent.len() as f64)
}

/// Builds each kind for `present.len()` IDs at `fpr`, inserts them, and
/// measures it.
fn measure_filters(
    present: &[String],
    absent: &[String],
    fpr: f64,
) -> anyhow::Result<FilterFigures> {
    let n = present.len() as u64;
    // No change log: a bench filter has no copies to bring up to date, and
    // the log is not what is measured.
    let mut counting = CountingBloomFilter::with_capacity(n, fpr)
        .with_context(|| format!("a counting filter for {n} IDs at {fpr}"))?
        .with_log_capacity(0);
    let mut cuckoo = CuckooFilter::with_capacity(n, fpr)
        .with_context(|| format!("a cuckoo filter for {n} IDs at {fpr}"))?
        .with_log_capacity(0);
    let mut bloom = BloomFilter::with_capacity(n, fpr)
        .with_context(|| format!("a Bloom filter for {n} IDs at {fpr}"))?;
    let mut cuckoo_refused = 0;
    for id in present {
        counting.insert(id);
        bloom.insert(id);
        cuckoo_refused += u64::from(cuckoo.insert(id).is_err());
    }
    let bit_view = counting.bit_view();
    Ok(FilterFigures {
        counting: Measured::new(
            std::mem::size_of_val(counting.counter_words()),
            n,
            rate(absent, |id| counting.contains(id)),
        ),
        bit_view: Measured::new(
            std::mem::size_of_val(bit_view.words()),
            n,
            rate(absent, |id| bit_view.contains(id)),
        ),
        cuckoo: Measured::new(
            cuckoo.table_len(),
            n,
            rate(absent, |id| cuckoo.contains(id)),
        ),
        bloom: Measured::new(
            std::mem::size_of_val(bloom.words()),
            n,
            rate(absent, |id| bloom.contains(id)),
        ),
        hashes: counting.geometry().k(),
        cuckoo_fingerprint_bits: cuckoo.geometry().fingerprint_bits(),
        cuckoo_refused,
    })
}

/// Grows one domain's store through the rows' sizes (ascending),
/// restarting the domain at each size to read its memory.
async fn measure_process(args: &MemoryBenchArgs, fpr: f64, rows: &mut [Row]) -> anyhow::Result<()> {
    let dir = tempfile::tempdir().context("cannot create a temporary data directory")?;
    let data = dir.path().join(DOMAIN);
    let log = dir.path().join(format!("{DOMAIN}.log"));
    let total = rows.last().map_or(0, |r| r.ids);
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("{msg:>34} [{bar:30}] {pos}/{len} records {elapsed}")?
            .progress_chars("=> "),
    );
    let mut held = 0u64;
    for row in rows.iter_mut() {
        let n = row.ids;
        let settings = [
            "--expected-items".to_owned(),
            n.to_string(),
            "--fpr".to_owned(),
            fpr.to_string(),
        ];
        bar.set_message(format!("starting a domain for {n}"));
        let domain = ServeChild::start(DOMAIN, &data, &settings, &log).await?;
        let client = ApiClient::new(&domain.url, Duration::from_mins(5))?;
        while held < n {
            let end = (held + args.chunk).min(n);
            bar.set_message(format!("importing up to {n}"));
            let body: String = (held..end).map(|i| sample::ndjson_line(0, i)).collect();
            let report = client
                .bulk(body.into_bytes())
                .await
                .with_context(|| format!("importing records {held}..{end}"))?;
            anyhow::ensure!(
                report.summary.failed == 0
                    && report.summary.created == usize::try_from(end - held)?,
                "importing records {held}..{end}: {} created, {} failed",
                report.summary.created,
                report.summary.failed
            );
            held = end;
            bar.set_position(held);
        }
        let memory_after_import = domain.memory()?;
        // SIGTERM: the domain saves its filter snapshot, which the restart
        // loads (settings and store unchanged) instead of rebuilding.
        domain.stop().await?;
        bar.set_message(format!("restarting with {n}"));
        let domain = ServeChild::start(DOMAIN, &data, &settings, &log).await?;
        // Start-up tasks (the first publication to the coordinator, the
        // first sync round) run right after readiness; let them.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let memory = domain.memory()?;
        let stats = ApiClient::new(&domain.url, Duration::from_secs(30))?
            .stats()
            .await
            .context("asking the restarted domain for its stats")?
            .domain;
        anyhow::ensure!(
            stats.records == n,
            "the restarted domain (pid {}) holds {} records, not {n}",
            domain.pid(),
            stats.records
        );
        domain.stop().await?;
        row.process = Some(ProcessFigures {
            records: stats.records,
            memory,
            memory_after_import,
            store_bytes: stats.store_bytes,
            domain_filter_bytes: stats.filter.bytes,
        });
    }
    bar.finish_and_clear();
    Ok(())
}

pub async fn run(mut args: MemoryBenchArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let fpr = args.fpr.unwrap_or(FilterSettings::default().fpr);
    anyhow::ensure!(
        fpr > 0.0 && fpr < 1.0,
        "--fpr must be between 0 and 1 (exclusive)"
    );
    anyhow::ensure!(args.chunk > 0, "--chunk must be positive");
    args.sizes.sort_unstable();
    args.sizes.dedup();
    let (Some(&smallest), Some(&largest)) = (args.sizes.first(), args.sizes.last()) else {
        anyhow::bail!("--sizes is empty");
    };
    anyhow::ensure!(smallest > 0, "--sizes must be positive");

    // The first `n` of these are the IDs at size `n`; the absent ones are
    // another domain's (a different fonds), so none is ever inserted.
    let present: Vec<String> = (0..largest).map(|i| sample::id(0, i)).collect();
    let absent: Vec<String> = (0..args.probes).map(|i| sample::id(1, i)).collect();
    let bar = ProgressBar::new(args.sizes.len() as u64).with_style(
        ProgressStyle::with_template("{msg:>34} [{bar:30}] {pos}/{len} sizes {elapsed}")?
            .progress_chars("=> "),
    );
    let mut rows = Vec::new();
    for &n in &args.sizes {
        bar.set_message(format!("filters for {n} IDs"));
        let slice = usize::try_from(n)
            .ok()
            .and_then(|n| present.get(..n))
            .context("size out of range")?;
        rows.push(Row::new(n, measure_filters(slice, &absent, fpr)?));
        bar.inc(1);
    }
    bar.finish_and_clear();
    if !args.filters_only {
        // On Ctrl-C or SIGTERM the measurement is dropped, and with it the
        // child domain, which is killed rather than left running.
        tokio::select! {
            done = measure_process(&args, fpr, &mut rows) => done?,
            () = xarchive_node::shutdown::signal() => anyhow::bail!("interrupted"),
        }
    }
    report(&args, fpr, &rows, started.elapsed())?;
    Ok(ExitCode::SUCCESS)
}

/// `1234567` as `1 234 567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn or_dash(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "—".to_owned(), f)
}

fn report(args: &MemoryBenchArgs, fpr: f64, rows: &[Row], elapsed: Duration) -> anyhow::Result<()> {
    println!(
        "\nFilters sized for each number of IDs at a target false-positive rate of {} %; MB = 10^6 bytes.",
        fpr * 100.0
    );
    if !args.filters_only {
        println!("RSS and HWM: VmRSS and VmHWM of an `xarchive serve` restarted on a store of that many records, once ready;");
        println!("import RSS: its VmRSS just after importing them, before that restart (the store's page cache included).");
    }
    println!(
        "\n{:>9} {:>9} {:>11} {:>11} {:>9} {:>9} {:>7} {:>7} {:>10} {:>14}",
        "IDs",
        "paper MB",
        "counting MB",
        "bit view MB",
        "cuckoo MB",
        "Bloom MB",
        "RSS MB",
        "HWM MB",
        "import RSS",
        "paper/counting"
    );
    for r in rows {
        let f = &r.filters;
        let process = r.process.as_ref();
        println!(
            "{:>9} {:>9} {:>11.3} {:>11.3} {:>9.3} {:>9.3} {:>7} {:>7} {:>10} {:>14}",
            grouped(r.ids),
            or_dash(r.paper_mb, |p| format!("{p:.2}")),
            f.counting.mb(),
            f.bit_view.mb(),
            f.cuckoo.mb(),
            f.bloom.mb(),
            or_dash(process.map(|p| p.memory.rss as f64 / MB), |m| format!(
                "{m:.1}"
            )),
            or_dash(process.map(|p| p.memory.hwm as f64 / MB), |m| format!(
                "{m:.1}"
            )),
            or_dash(
                process.map(|p| p.memory_after_import.rss as f64 / MB),
                |m| format!("{m:.1}")
            ),
            or_dash(r.paper_over_counting, |x| format!("{x:.1}")),
        );
    }
    if args.probes > 0 {
        println!(
            "\nbits per ID, and the measured false-positive rate over {} absent IDs:",
            grouped(args.probes)
        );
        println!(
            "{:>9} {:>17} {:>17} {:>17} {:>17}",
            "IDs", "counting", "bit view", "cuckoo", "Bloom"
        );
        let cell = |m: &Measured| {
            format!(
                "{:>5.2} {:>9}",
                m.bits_per_id,
                or_dash(m.measured_fpr, |p| format!("{:.3} %", p * 100.0))
            )
        };
        for r in rows {
            let f = &r.filters;
            println!(
                "{:>9} {:>17} {:>17} {:>17} {:>17}",
                grouped(r.ids),
                cell(&f.counting),
                cell(&f.bit_view),
                cell(&f.cuckoo),
                cell(&f.bloom)
            );
        }
    }
    for r in rows.iter().filter(|r| r.filters.cuckoo_refused > 0) {
        println!(
            "note: the cuckoo filter for {} IDs refused {} of them as full",
            grouped(r.ids),
            r.filters.cuckoo_refused
        );
    }
    let target = target(rows);
    println!();
    match target {
        Some(t) => println!(
            "target: counting filter for {} IDs ≤ 1/50 of the paper's {:.2} MB = {:.2} MB: {:.3} MB ({:.1} × smaller), {}",
            grouped(t.ids),
            t.limit_mb / TARGET_SHARE,
            t.limit_mb,
            t.counting_mb,
            t.limit_mb / TARGET_SHARE / t.counting_mb,
            if t.met { "met" } else { "NOT met" }
        ),
        None => println!(
            "target not checked: {} IDs is not among --sizes",
            grouped(TARGET_IDS)
        ),
    }

    let report = json!({
        "fpr_target": fpr,
        "probes": args.probes,
        "mb_bytes": MB,
        "seconds": elapsed.as_secs_f64(),
        "rows": rows,
        "target": target,
        "paper_table_3": PAPER_TABLE_3.iter().map(|p| json!({"ids": p.0, "mb": p.1})).collect::<Vec<_>>(),
    });
    std::fs::write(&args.json, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("cannot write {}", args.json.display()))?;

    let thousands = |r: &Row| r.ids as f64 / 1e3;
    let line = |name: &str, colour: &'static str, get: &dyn Fn(&Row) -> Option<f64>| Series {
        name: name.to_owned(),
        colour,
        dashed: false,
        points: rows
            .iter()
            .filter_map(|r| get(r).map(|y| (thousands(r), y)))
            .collect(),
    };
    let mut series = vec![
        Series {
            dashed: true,
            ..line("paper (Table 3)", "#d62728", &|r| r.paper_mb)
        },
        line("counting filter", "#1f77b4", &|r| {
            Some(r.filters.counting.mb())
        }),
        line("bit view (= Bloom)", "#2ca02c", &|r| {
            Some(r.filters.bit_view.mb())
        }),
        line("cuckoo filter", "#9467bd", &|r| Some(r.filters.cuckoo.mb())),
        line("process RSS", "#ff7f0e", &|r| {
            r.process.as_ref().map(|p| p.memory.rss as f64 / MB)
        }),
    ];
    series.retain(|s| !s.points.is_empty());
    let chart = Chart {
        title: format!(
            "Memory against IDs: the paper's Table 3 and ours (target rate {} %)",
            fpr * 100.0
        ),
        x_label: "thousands of IDs".into(),
        y_label: "MB (10^6 bytes)".into(),
        series,
    };
    std::fs::write(&args.plot, chart.render())
        .with_context(|| format!("cannot write {}", args.plot.display()))?;
    println!(
        "\nfigures in {}, chart in {} ({:.1} s)",
        args.json.display(),
        args.plot.display(),
        elapsed.as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(domain: usize, n: u64) -> Vec<String> {
        (0..n).map(|i| sample::id(domain, i)).collect()
    }

    #[test]
    fn rows_compare_with_the_paper_where_it_has_a_figure() {
        let absent = ids(1, 2_000);
        let small = measure_filters(&ids(0, 1_000), &absent, 0.01).unwrap();
        let row = Row::new(1_000, small.clone());
        assert_eq!((row.paper_mb, row.paper_over_counting), (None, None));

        let f = measure_filters(&ids(0, 100_000), &absent, 0.01).unwrap();
        let row = Row::new(100_000, f.clone());
        assert_eq!(row.paper_mb, Some(27.34));
        let ratio = row.paper_over_counting.unwrap();
        assert!((ratio - 27.34e6 / f.counting.bytes as f64).abs() < 1e-9);
        // Four bits a counter: the counters are four times the bit view,
        // which is a plain Bloom filter of the same geometry.
        assert_eq!(f.counting.bytes, 4 * f.bit_view.bytes);
        assert_eq!(f.bit_view.bytes, f.bloom.bytes);
        assert_eq!(f.cuckoo_refused, 0);
        for m in [f.counting, f.bit_view, f.cuckoo, f.bloom] {
            assert!(m.bytes > 0);
            assert!(m.bits_per_id > 1.0 && m.bits_per_id < 50.0, "{m:?}");
            assert!(m.measured_fpr.unwrap() < 0.05, "{m:?}");
        }
        // Bigger for more IDs.
        assert!(f.counting.bytes > 50 * small.counting.bytes);
        assert!(f.cuckoo.bytes > 50 * small.cuckoo.bytes);
        // No probes, no rate.
        let unprobed = measure_filters(&ids(0, 10), &[], 0.01).unwrap();
        assert_eq!(unprobed.counting.measured_fpr, None);
    }

    #[test]
    fn the_target_is_a_fiftieth_of_the_paper_at_a_million() {
        let one = |bytes: u64| FilterFigures {
            counting: Measured {
                bytes,
                bits_per_id: 0.0,
                measured_fpr: None,
            },
            bit_view: Measured::new(1, 1, None),
            cuckoo: Measured::new(1, 1, None),
            bloom: Measured::new(1, 1, None),
            hashes: 7,
            cuckoo_fingerprint_bits: 12,
            cuckoo_refused: 0,
        };
        assert_eq!(target(&[Row::new(100_000, one(1))]), None);
        let t = target(&[Row::new(1_000_000, one(5_475_200))]).unwrap();
        assert!((t.limit_mb - 5.4752).abs() < 1e-9 && t.met);
        assert!(!target(&[Row::new(1_000_000, one(5_475_300))]).unwrap().met);
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(grouped(7), "7");
        assert_eq!(grouped(100_000), "100 000");
        assert_eq!(grouped(1_000_000), "1 000 000");
    }
}
