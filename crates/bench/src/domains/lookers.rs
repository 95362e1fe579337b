//! `xarchive-bench domains --lookers K`: clients looking IDs up while the
//! writes go on, as a reading room does: each asks one leaf domain of the
//! relay tree (the farthest from most writers), in turn for an ID nobody
//! holds and for one acknowledged a moment before somewhere else. What a
//! "not found" costs while copies are behind writes in flight is the
//! figure (docs/SCALING.md, "Real full domains"); a held ID answered 404
//! is a false "not found" and fails the run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;
use xarchive_node::wire::Strategy;
use xarchive_node::ApiClient;

use crate::quantile;

/// The IDs acknowledged so far, for the lookups of held IDs.
#[derive(Clone, Default)]
pub struct Acknowledged(Arc<Mutex<Vec<String>>>);

impl Acknowledged {
    pub fn add(&self, id: String) {
        self.0.lock().push(id);
    }

    fn pick(&self, rng: &mut impl Rng) -> Option<String> {
        let ids = self.0.lock();
        (!ids.is_empty()).then(|| ids[rng.random_range(0..ids.len())].clone())
    }
}

/// What one kind of lookup gave: each answer's time and remote calls.
#[derive(Default)]
pub struct Answers {
    ms: Vec<f64>,
    calls: Vec<f64>,
    pub found: u64,
    pub not_found: u64,
    pub unavailable: u64,
    pub failed: u64,
}

impl Answers {
    fn add(&mut self, ms: f64, answer: Result<(u16, xarchive_node::wire::LookupBody), String>) {
        match answer {
            Ok((status, body)) => {
                self.ms.push(ms);
                self.calls.push(body.route.remote_calls as f64);
                match status {
                    200 => self.found += 1,
                    404 => self.not_found += 1,
                    _ => self.unavailable += 1,
                }
            }
            Err(_) => self.failed += 1,
        }
    }

    fn merge(&mut self, other: Answers) {
        self.ms.extend(other.ms);
        self.calls.extend(other.calls);
        self.found += other.found;
        self.not_found += other.not_found;
        self.unavailable += other.unavailable;
        self.failed += other.failed;
    }

    /// p50, p99 and max in ms, and the mean remote calls, of the answers.
    pub fn figures(&self) -> (f64, f64, f64, f64) {
        let mut ms = self.ms.clone();
        ms.sort_by(f64::total_cmp);
        let calls = self.calls.iter().sum::<f64>() / self.calls.len().max(1) as f64;
        (
            quantile(&ms, 0.5),
            quantile(&ms, 0.99),
            quantile(&ms, 1.0),
            calls,
        )
    }

    pub fn json(&self) -> serde_json::Value {
        let (p50, p99, max, calls) = self.figures();
        serde_json::json!({
            "answered": self.ms.len(), "p50_ms": p50, "p99_ms": p99, "max_ms": max,
            "remote_calls_per_lookup": calls, "found": self.found, "not_found": self.not_found,
            "unavailable": self.unavailable, "failed": self.failed,
        })
    }
}

/// The absent and held lookups of every looker.
#[derive(Default)]
pub struct Looked {
    pub absent: Answers,
    pub held: Answers,
}

/// Starts `count` lookers, the k-th asking `urls[k % urls.len()]`, until
/// `stop`; their answers come back from the handle.
pub fn start(
    count: usize,
    urls: &[String],
    acknowledged: &Acknowledged,
    stop: &CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<Looked>> {
    let mut lookers = tokio::task::JoinSet::new();
    for k in 0..count {
        let client = ApiClient::new(&urls[k % urls.len()], Duration::from_secs(10))?;
        let (acknowledged, stop) = (acknowledged.clone(), stop.clone());
        lookers.spawn(look(client, acknowledged, stop));
    }
    Ok(tokio::spawn(async move {
        let mut all = Looked::default();
        while let Some(Ok(looked)) = lookers.join_next().await {
            all.absent.merge(looked.absent);
            all.held.merge(looked.held);
        }
        all
    }))
}

/// One looker: an absent ID, then a held one, one after the other.
async fn look(client: ApiClient, acknowledged: Acknowledged, stop: CancellationToken) -> Looked {
    let mut rng = rand::rngs::StdRng::from_os_rng();
    let mut looked = Looked::default();
    while !stop.is_cancelled() {
        let absent = format!("absent-{:016x}", rng.random::<u64>());
        let started = Instant::now();
        let answer = client.lookup(&absent, Strategy::Routed).await;
        looked
            .absent
            .add(elapsed_ms(started), answer.map_err(|e| e.to_string()));
        let Some(held) = acknowledged.pick(&mut rng) else {
            continue;
        };
        let started = Instant::now();
        let answer = client.lookup(&held, Strategy::Routed).await;
        looked
            .held
            .add(elapsed_ms(started), answer.map_err(|e| e.to_string()));
    }
    looked
}

fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}
