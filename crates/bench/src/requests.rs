//! How long a cross-archive request takes from the clerk's submission to
//! the certificate in hand, on loopback with the default release policy:
//! two domains in this process (each serving HTTP), the applicant's own
//! open marriage records held at B, the requests registered at A; run once
//! with each seal algorithm (SM2 with SM3, the default; Ed25519), side by
//! side. Then what a person holding the certificate does: its PDF (its
//! size, its QR code's version) and an offline check with the command line
//! (`xarchive certificate verify`, a process of its own each time, the
//! binary beside this one). Today the same answer takes 4–6 working days
//! by fax; the ratio printed is against 4 working days of 8 office hours
//! (computed, not measured).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use xarchive_node::cluster::{Coordinator, Hub};
use xarchive_node::wire::RequestStatus;
use xarchive_node::ApiClient;
use xarchive_seal::Algorithm;

use crate::child::xarchive_beside;
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
    /// Requests measured per algorithm, one after another.
    #[arg(long, default_value_t = 200)]
    samples: usize,
    /// Offline checks of one certificate by the command line.
    #[arg(long, default_value_t = 50)]
    verifications: usize,
}

/// What one algorithm's run measured, in milliseconds.
struct Timings {
    algorithm: Algorithm,
    answered: Vec<f64>,
    certified: Vec<f64>,
    /// The last certificate's PDF, its first sheet's QR version, and the
    /// trust list it checks against (JSON).
    pdf: Vec<u8>,
    qr_version: i16,
    trust_list: Vec<u8>,
}

/// Two domains sealing with `algorithm`; `samples` requests from
/// submission to certificate.
async fn run_one(algorithm: Algorithm, samples: usize) -> anyhow::Result<Timings> {
    let dir = tempfile::tempdir()?;
    let hub = Hub::new();
    let cluster = LocalCluster::start(Plan {
        domains: 2,
        data: dir.path().to_owned(),
        port: 0,
        records: 0,
        tune: &|config| config.seal.algorithm = algorithm,
        coordinator: &|_| hub.coordinator() as Arc<dyn Coordinator>,
    })
    .await?;
    let timeout = Duration::from_secs(10);
    let a = ApiClient::new(cluster.nodes[0].address(), timeout)?;
    let b = ApiClient::new(cluster.nodes[1].address(), timeout)?;
    for i in 0..samples {
        let record = json!({
            "title": "婚姻登记",
            "metadata": {"category": "marriage", "access": "open", "形成日期": "2007-05-01"},
            "content": "5ama5ae75LmL6K6w",
            "keys": {"id_card": APPLICANT},
        });
        b.put(&format!("M-{i}"), &record).await?;
    }
    cluster.converged(Duration::from_secs(30)).await?;

    let bar = ProgressBar::new(samples as u64).with_style(ProgressStyle::with_template(
        "{msg} {bar:40} {pos}/{len} requests",
    )?);
    bar.set_message(format!("{algorithm}: submission → certificate"));
    let (mut answered, mut certified) = (Vec::new(), Vec::new());
    let mut last = None;
    for i in 0..samples {
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
        last = Some(done);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let last = last.ok_or_else(|| anyhow::anyhow!("no request was made"))?;
    let pdf = a.certificate_pdf(&last.request.id).await?.to_vec();
    let Some(qrcode::Version::Normal(qr_version)) =
        xarchive_seal::certificate::qr(&last.sheets[0].payload).map(|q| q.version())
    else {
        anyhow::bail!("the certificate's QR code is not of a normal version")
    };
    let trust_list = serde_json::to_vec(&a.trust_list().await?)?;
    cluster.stop().await?;
    answered.sort_by(f64::total_cmp);
    certified.sort_by(f64::total_cmp);
    Ok(Timings {
        algorithm,
        answered,
        certified,
        pdf,
        qr_version,
        trust_list,
    })
}

pub async fn run(args: RequestsBenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.samples > 0, "--samples must be at least 1");
    anyhow::ensure!(args.verifications > 0, "--verifications must be at least 1");
    let runs = [
        run_one(Algorithm::Sm2Sm3, args.samples).await?,
        run_one(Algorithm::Ed25519, args.samples).await?,
    ];
    println!(
        "{} requests at A for records held at B (loopback, default policy, polled every 2 ms), per seal algorithm:",
        args.samples
    );
    println!("| seal | from submission to | median | p90 | p99 | max |");
    println!("|---|---|---|---|---|---|");
    for t in &runs {
        for (what, xs) in [
            ("answered (sealed answer and copy checked)", &t.answered),
            ("certificate issued (sealed, QR made)", &t.certified),
        ] {
            println!(
                "| {} | {what} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
                t.algorithm,
                quantile(xs, 0.5),
                quantile(xs, 0.9),
                quantile(xs, 0.99),
                xs.last().copied().unwrap_or(f64::NAN)
            );
        }
    }
    let sm2 = quantile(&runs[0].certified, 0.5);
    let ed25519 = quantile(&runs[1].certified, 0.5);
    println!(
        "SM2 / Ed25519, median to the certificate: {:.2}×",
        sm2 / ed25519
    );
    println!(
        "today's 4 working days (computed: 4 × 8 office hours) / the SM2 median: {:.0}×",
        FOUR_WORKING_DAYS_MS / sm2
    );

    // The certificate in the applicant's hands: its PDF, checked offline.
    let dir = tempfile::tempdir()?;
    let pdf = dir.path().join("certificate.pdf");
    std::fs::write(&pdf, &runs[0].pdf)?;
    let trust = dir.path().join("trust.json");
    std::fs::write(&trust, &runs[0].trust_list)?;
    let offline = offline_checks(&pdf, &trust, args.verifications)?;
    println!(
        "the certificate's PDF: {} bytes; its QR code: version {} at error correction M",
        runs[0].pdf.len(),
        runs[0].qr_version
    );
    println!(
        "`xarchive certificate verify` of the PDF against a saved trust list ({} bytes), no server, {} runs (each a process): median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        runs[0].trust_list.len(),
        offline.len(),
        quantile(&offline, 0.5),
        quantile(&offline, 0.9),
        offline.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "{}",
        json!({
            "samples": args.samples,
            "sm2_certified_ms": {"median": sm2, "p90": quantile(&runs[0].certified, 0.9), "p99": quantile(&runs[0].certified, 0.99)},
            "ed25519_certified_ms": {"median": ed25519, "p90": quantile(&runs[1].certified, 0.9)},
            "pdf_bytes": runs[0].pdf.len(),
            "qr_version": runs[0].qr_version,
            "offline_verify_ms": {"median": quantile(&offline, 0.5), "p90": quantile(&offline, 0.9)},
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// The wall time of `runs` offline checks of `pdf` against `trust` by the
/// `xarchive` binary beside this one, each a process of its own (what a
/// bank's clerk waits for), sorted.
fn offline_checks(
    pdf: &std::path::Path,
    trust: &std::path::Path,
    runs: usize,
) -> anyhow::Result<Vec<f64>> {
    let xarchive = xarchive_beside(&std::env::current_exe()?)?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let out = std::process::Command::new(&xarchive)
            .args(["certificate", "verify"])
            .arg(pdf)
            .arg("--trust-list")
            .arg(trust)
            .output()?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(
            out.status.success(),
            "the offline check failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}
