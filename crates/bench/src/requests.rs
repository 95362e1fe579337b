//! How long a cross-archive request takes from the clerk's submission to
//! the certificate in hand, on loopback with the default release policy:
//! two domains in this process (each serving HTTP), the applicant's own
//! open marriage records held at B, the requests registered at A. Today
//! the same answer takes 4–6 working days by fax; the ratio printed is
//! against 4 working days of 8 office hours (computed, not measured).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use xarchive_node::cluster::client::Client;
use xarchive_node::cluster::{Coordinator, Hub};
use xarchive_node::wire::RequestStatus;

use crate::quantile;
use xarchive::local::{LocalCluster, Plan};

/// A valid second-generation identity number (the check digit holds); the
/// records are keyed by it, so the default policy releases them.
const APPLICANT: &str = "11010519491231002X";
/// Four working days of eight office hours, in milliseconds: the fastest
/// answer of today's procedure (computed).
const FOUR_WORKING_DAYS_MS: f64 = 4.0 * 8.0 * 3600.0 * 1000.0;

#[derive(clap::Args)]
pub struct RequestsBenchArgs {
    /// Requests measured, one after another.
    #[arg(long, default_value_t = 200)]
    samples: usize,
}

pub async fn run(args: RequestsBenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.samples > 0, "--samples must be at least 1");
    let dir = tempfile::tempdir()?;
    let hub = Hub::new();
    let cluster = LocalCluster::start(Plan {
        domains: 2,
        data: dir.path().to_owned(),
        port: 0,
        records: 0,
        tune: &|_| {},
        coordinator: &|_| hub.coordinator() as Arc<dyn Coordinator>,
    })
    .await?;
    let timeout = Duration::from_secs(10);
    let a = Client::new(cluster.nodes[0].address(), timeout)?;
    let b = Client::new(cluster.nodes[1].address(), timeout)?;
    for i in 0..args.samples {
        let record = json!({
            "title": "婚姻登记",
            "metadata": {"category": "marriage", "access": "open"},
            "content": "5ama5ae75LmL6K6w",
            "keys": {"id_card": APPLICANT},
        });
        b.put(&format!("M-{i}"), &record).await?;
    }
    cluster.converged(Duration::from_secs(30)).await?;

    let bar = ProgressBar::new(args.samples as u64).with_style(ProgressStyle::with_template(
        "{msg} {bar:40} {pos}/{len} requests",
    )?);
    bar.set_message("submission → certificate");
    let (mut answered, mut certified) = (Vec::new(), Vec::new());
    for i in 0..args.samples {
        let started = Instant::now();
        let request = a
            .submit_request(&json!({
                "applicant_id": APPLICANT,
                "applicant_name": "张三",
                "purpose": "贷款",
                "records": [format!("M-{i}")],
            }))
            .await?;
        let deadline = started + Duration::from_secs(30);
        loop {
            let view = a.request(&request.id).await?;
            match view.status {
                RequestStatus::Answered => break,
                RequestStatus::Refused | RequestStatus::NoRecords | RequestStatus::Certified => {
                    anyhow::bail!("request {} ended {:?}: {view:?}", request.id, view.status)
                }
                RequestStatus::Submitted | RequestStatus::Sent => {}
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "request {} not answered in 30 s",
                request.id
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        answered.push(started.elapsed().as_secs_f64() * 1e3);
        let done = a.issue_certificate(&request.id).await?;
        anyhow::ensure!(
            done.request.status == RequestStatus::Certified,
            "not certified: {done:?}"
        );
        certified.push(started.elapsed().as_secs_f64() * 1e3);
        bar.inc(1);
    }
    bar.finish_and_clear();
    cluster.stop().await?;
    answered.sort_by(f64::total_cmp);
    certified.sort_by(f64::total_cmp);
    println!(
        "{} requests at A for records held at B (loopback, default policy, polled every 2 ms):",
        args.samples
    );
    println!("| from submission to | median | p90 | p99 | max |");
    println!("|---|---|---|---|---|");
    for (what, xs) in [
        ("answered (signed copy verified)", &answered),
        ("certificate issued", &certified),
    ] {
        println!(
            "| {what} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
            quantile(xs, 0.5),
            quantile(xs, 0.9),
            quantile(xs, 0.99),
            xs.last().copied().unwrap_or(f64::NAN)
        );
    }
    let median = quantile(&certified, 0.5);
    println!(
        "today's 4 working days (computed: 4 × 8 office hours) / this median: {:.0}×",
        FOUR_WORKING_DAYS_MS / median
    );
    println!(
        "{}",
        json!({
            "samples": args.samples,
            "answered_ms": {"median": quantile(&answered, 0.5), "p90": quantile(&answered, 0.9)},
            "certified_ms": {"median": median, "p90": quantile(&certified, 0.9), "p99": quantile(&certified, 0.99)},
        })
    );
    Ok(ExitCode::SUCCESS)
}
