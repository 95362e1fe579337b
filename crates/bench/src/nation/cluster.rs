//! `xarchive-bench nation`'s cluster part: one full domain (a real `xarchive
//! serve` process) joins a real ZooKeeper where N − 1 light publishers
//! (light/) are registered, and is measured while it joins, while the
//! nation writes at a steady rate, while one archive imports a million
//! records, and while it answers lookups; ZooKeeper is measured by its
//! own `mntr` figures. Optional light watchers hold the membership watch
//! a full domain holds and list the members at each change, as its
//! coordinator does, to show ZooKeeper's load when every domain follows
//! the membership.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::task::AbortOnDropHandle;
use xarchive_node::cluster::pause_after;
use xarchive_node::wire::Strategy;
use xarchive_node::{ApiClient, Client, FilterSettings};
use zookeeper_client as zk;

use super::light::{light_id, Nation, MEASURED};
use super::NationBenchArgs;
use crate::child::ServeChild;
use crate::meter::Meter;
use crate::quantile;

/// What one N showed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterRow {
    pub domains: usize,
    pub ids: u64,
    /// Registering the light publishers: sessions opened, znodes written.
    pub register_seconds: f64,
    pub znodes: u64,
    pub zk_connections: u64,
    pub zk_watches: u64,
    /// The measured domain joining from nothing until its view converged.
    pub join_seconds: f64,
    pub join_bytes: u64,
    /// Its resident anonymous memory after joining, and at most.
    pub rss_anon_bytes: u64,
    pub hwm_bytes: u64,
    /// Steady sync at the write rate.
    pub write_rate: f64,
    pub writes_acknowledged: u64,
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    pub writes_never_sent: u64,
    pub cpu_share: f64,
    pub sync_bytes_per_second: f64,
    pub sync_requests_per_second: f64,
    pub zk_packets_in_per_second: f64,
    pub zk_packets_out_per_second: f64,
    pub watch_events_per_second: f64,
    pub watchers: usize,
    /// One archive importing.
    pub import_records: u64,
    pub import_seconds: f64,
    pub import_routed_after_seconds: f64,
    /// Bytes the measured domain was sent meanwhile.
    pub import_bytes_to_one_peer: u64,
    pub import_one_copy_bytes: u64,
    /// Bytes the importing archive sent (to its relay tree neighbours,
    /// and to any peer that pulled from it).
    pub import_bytes_sent: u64,
    /// The importing archive's relay tree neighbours.
    pub import_neighbours: usize,
    /// The relay tree's degree.
    pub relay_fanout: usize,
    /// Bytes a second the measured domain's relay sent its tree
    /// neighbours in the steady phase.
    pub relay_out_bytes_per_second: f64,
    /// Lookups through the measured domain.
    pub lookup_found_ms_p50: f64,
    pub lookup_absent_ms_p50: f64,
    pub lookup_absent_ms_p99: f64,
    pub calls_per_found: f64,
    pub calls_per_absent: f64,
    /// Bytes ZooKeeper sent the measured domain per lookup of an absent
    /// ID (through a counting link: its ledger reads, and its session's
    /// pings meanwhile).
    pub zk_bytes_per_absent: f64,
    /// Lookups of absent IDs while writes flow at the steady rate, with
    /// copies behind writes in flight.
    pub absent_in_writes_ms_p50: f64,
    pub absent_in_writes_ms_p99: f64,
    pub calls_per_absent_in_writes: f64,
    pub zk_bytes_per_absent_in_writes: f64,
    /// Relay pages the measured domain read a second: in the steady
    /// phase, and while its lookups of absent IDs went on with the writes.
    pub relay_pages_per_second_steady: f64,
    pub relay_pages_per_second_in_lookups: f64,
    /// The measured domain's CPU (share of a core) while those lookups
    /// went on with the writes.
    pub cpu_share_in_lookups: f64,
    /// A held ID answered 404, or an absent one found: must be 0.
    pub lookups_wrong: u64,
    /// Answered 503 (a domain that may hold it not reached, or the
    /// membership not confirmed): honest, but no answer.
    pub lookups_unanswered: u64,
    /// Light domains killed after those lookups (`--killed`), as crashes
    /// past their sessions leave them.
    pub killed: usize,
    /// Lookups of absent IDs then, answered 404 and 503 (a 503 naming a
    /// domain not killed counts as wrong).
    pub killed_absent_404: u64,
    pub killed_absent_503: u64,
}

impl ClusterRow {
    /// Counts a lookup's answer against the status it should have had.
    fn count<T>(&mut self, answer: Result<(u16, T), xarchive_node::ClientError>, right: u16) {
        match answer {
            Ok((status, _)) if status == right => {}
            Ok((200 | 404, _)) => self.lookups_wrong += 1,
            _ => self.lookups_unanswered += 1,
        }
    }
}

/// ZooKeeper's `mntr` figures (four-letter word; it must be allowed by
/// `4lw.commands.whitelist`, as scripts/zookeeper.sh does).
pub(crate) async fn mntr(connect: &str) -> anyhow::Result<HashMap<String, String>> {
    let host = connect
        .split('/')
        .next()
        .and_then(|h| h.split(',').next())
        .unwrap_or_default();
    let mut stream = tokio::net::TcpStream::connect(host)
        .await
        .with_context(|| format!("cannot reach ZooKeeper at {host}"))?;
    stream.write_all(b"mntr").await?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await?;
    if text.contains("not in the whitelist") || text.contains("not executed") {
        bail!("ZooKeeper refuses `mntr`: add `4lw.commands.whitelist=mntr` to its zoo.cfg (scripts/zookeeper.sh does)");
    }
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect())
}

// A counter ZooKeeper reports: whole and non-negative (a failed parse or a
// stray sign gives 0, as `as` saturates).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub(crate) fn figure(m: &HashMap<String, String>, name: &str) -> u64 {
    m.get(name)
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// CPU time of a process so far (user + system), from `/proc/<pid>/stat`.
pub(crate) fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("unreadable stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after ")".
    let (user, system) = (ticks(11), ticks(12));
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    Ok((user.context("no utime")? + system.context("no stime")?) / hz)
}

/// Sessions that follow the membership as a full domain's coordinator
/// does (a persistent watch on the folder's children, its listing read
/// again at each event: joins and departures, never publications),
/// counting events.
struct Watchers {
    events: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watchers {
    async fn start(connect: &str, folder: &str, count: usize) -> anyhow::Result<Watchers> {
        let events = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..count {
            let client = zk::Client::connector()
                .with_session_timeout(Duration::from_secs(6))
                .connect(connect)
                .await?;
            let mut watcher = client.watch(folder, zk::AddWatchMode::Persistent).await?;
            let events = events.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let event = watcher.changed().await;
                    if event.event_type == zk::EventType::Session {
                        if event.session_state.is_terminated() {
                            break;
                        }
                        continue;
                    }
                    events.fetch_add(1, Ordering::Relaxed);
                    let _ = client.list_children(&event.path).await;
                }
            }));
        }
        Ok(Watchers { events, tasks })
    }
}

impl Drop for Watchers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn bar(len: u64, message: String) -> anyhow::Result<ProgressBar> {
    let bar = ProgressBar::new(len).with_style(
        ProgressStyle::with_template("{msg:>34} [{bar:30}] {percent}% {elapsed} (eta {eta})")?
            .progress_chars("=> "),
    );
    bar.set_message(message);
    Ok(bar)
}

/// Waits until the measured domain's view holds every domain, each copy
/// current.
async fn converged(client: &ApiClient, domains: usize, child: &ServeChild) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_mins(30);
    loop {
        if let Ok(view) = client.cluster().await {
            if view.converged(domains) {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("the measured domain did not converge within 30 minutes");
        }
        // Fails once the process is gone (its /proc entry with it).
        child.memory()?;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Light tree neighbours reading a relay as a domain reads it, until
/// dropped; their pages are counted, not taken in.
struct RelayReaders {
    tasks: Vec<AbortOnDropHandle<()>>,
    /// Bytes of entries read.
    read: Arc<AtomicU64>,
}

impl RelayReaders {
    /// One reader per name in `askers` of the relay at `base`.
    fn start(base: &str, askers: &[String]) -> anyhow::Result<RelayReaders> {
        let read = Arc::new(AtomicU64::new(0));
        let mut readers = RelayReaders {
            tasks: Vec::new(),
            read: read.clone(),
        };
        for asker in askers {
            let client = Client::new(base, Duration::from_mins(1))?;
            let (asker, read) = (asker.clone(), read.clone());
            readers
                .tasks
                .push(AbortOnDropHandle::new(tokio::spawn(async move {
                    let (mut relay, mut from) = (0, 0);
                    loop {
                        let mut waited = false;
                        if let Ok(page) = client.relay(relay, from, &asker).await {
                            (relay, from, waited) = (page.relay, page.next, page.waited);
                            let bytes: usize = page.entries.iter().map(|e| e.body.len()).sum();
                            read.fetch_add(bytes as u64, Ordering::Relaxed);
                        }
                        tokio::time::sleep(pause_after(waited)).await;
                    }
                })));
        }
        Ok(readers)
    }

    fn bytes(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }
}

/// Light tree neighbours pulling a light domain's changes from it as a
/// domain pulls its neighbours' (a delta, or a snapshot when refused, of
/// each filter, as soon as its position moves), until dropped.
struct Pullers {
    tasks: Vec<AbortOnDropHandle<()>>,
    /// The position each holds.
    held: Vec<Arc<parking_lot::Mutex<(u64, u64)>>>,
    /// Bytes of bodies they received.
    received: Arc<AtomicU64>,
}

impl Pullers {
    fn start(base: &str, count: usize, nation: Arc<Nation>, d: usize) -> anyhow::Result<Pullers> {
        let mut pullers = Pullers {
            tasks: Vec::new(),
            held: Vec::new(),
            received: Arc::new(AtomicU64::new(0)),
        };
        for _ in 0..count {
            let client = Client::new(base, Duration::from_mins(1))?;
            let held = Arc::new(parking_lot::Mutex::new(nation.position(d)));
            let (nation, at, received) = (nation.clone(), held.clone(), pullers.received.clone());
            pullers.held.push(held);
            pullers
                .tasks
                .push(AbortOnDropHandle::new(tokio::spawn(async move {
                    loop {
                        let (epoch, version) = *at.lock();
                        if nation.position(d) != (epoch, version) {
                            if let Ok((now, bytes)) = pull(&client, epoch, version).await {
                                *at.lock() = now;
                                received.fetch_add(bytes, Ordering::Relaxed);
                            }
                        }
                        // A domain gathers the watch events of 10 ms.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                })));
        }
        Ok(pullers)
    }

    fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Whether every puller holds `position`.
    fn hold(&self, position: (u64, u64)) -> bool {
        self.held.iter().all(|h| *h.lock() == position)
    }
}

/// One pull of both filters from `(epoch, version)`, as a domain's sync
/// task makes it; returns the position reached and the bytes of the
/// bodies received (as the light server counts them).
async fn pull(client: &Client, epoch: u64, version: u64) -> anyhow::Result<((u64, u64), u64)> {
    use xarchive_node::cluster::client::DeltaAnswer;
    let (at, mut bytes) = match client.delta(epoch, version).await? {
        // The body: the delta framed with no changed IDs.
        DeltaAnswer::Delta { delta, .. } => {
            ((delta.epoch, delta.to_version), 4 + delta.encode().len())
        }
        DeltaAnswer::SnapshotRequired => {
            let fetched = client.filter().await?;
            let at = (fetched.position.epoch, fetched.position.version);
            (at, fetched.bytes.len())
        }
    };
    bytes += if at.0 == epoch {
        match client.key_delta(epoch, version).await? {
            DeltaAnswer::Delta { delta, .. } => delta.encode().len(),
            DeltaAnswer::SnapshotRequired => 0,
        }
    } else {
        client
            .whole(xarchive_node::wire::RelayPart::Keys, None)
            .await?
            .filter
            .bytes
            .len()
    };
    Ok((at, bytes as u64))
}

/// Picks domains in proportion to their sizes.
struct Weighted(Vec<u64>);

impl Weighted {
    fn new(sizes: &[u64]) -> Self {
        let mut sum = 0;
        Weighted(
            sizes
                .iter()
                .map(|s| {
                    sum += s.max(&1);
                    sum
                })
                .collect(),
        )
    }

    fn pick(&self, rng: &mut impl Rng) -> usize {
        let at = rng.random_range(0..*self.0.last().unwrap_or(&1));
        self.0.partition_point(|&s| s <= at)
    }
}

/// The cluster part at one N: `sizes` are the light domains' (the
/// measured one holds nothing of its own).
pub async fn measure(
    args: &NationBenchArgs,
    zk_connect: &str,
    sizes: &[u64],
) -> anyhow::Result<ClusterRow> {
    let n = sizes.len() + 1;
    let ids: u64 = sizes.iter().sum();
    let cluster = format!("bench-nation-{}-{n}", std::process::id());
    let mut row = ClusterRow {
        domains: n,
        ids,
        watchers: args.watchers,
        ..ClusterRow::default()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);

    let filling = bar(ids, format!("{n} domains: filling light filters"))?;
    // Every filter sized as the domains of such a nation size theirs
    // (`filter.cluster_ids`: this cluster's IDs unless given).
    let filters = FilterSettings {
        fpr: args.fpr,
        cluster_ids: args.cluster_ids.unwrap_or(ids),
        ..FilterSettings::default()
    };
    let nation = Nation::new(sizes, filters.clone(), cluster.clone(), &|k| filling.inc(k))?;
    nation
        .whole_entries
        .store(args.whole_entries, Ordering::Relaxed);
    row.relay_fanout = nation.fanout;
    filling.finish_and_clear();
    let _server = nation.serve().await?;
    let registering = bar(sizes.len() as u64, format!("{n} domains: registering"))?;
    row.register_seconds = nation
        .register(zk_connect, 64, &|| registering.inc(1))
        .await?
        .as_secs_f64();
    registering.finish_and_clear();
    println!(
        "{n} domains: {} light publishers registered in {:.1} s",
        sizes.len(),
        row.register_seconds
    );
    let watchers = Watchers::start(
        zk_connect,
        &format!("/xarchive/{cluster}/domains"),
        args.watchers,
    )
    .await?;

    // Joining from nothing.
    let dir = tempfile::tempdir()?;
    let joining =
        ProgressBar::new_spinner().with_message(format!("{n} domains: measured domain joining"));
    joining.enable_steady_tick(Duration::from_millis(200));
    let before = nation.sent.bytes();
    let started = Instant::now();
    // Its ZooKeeper session goes through a counting link: what a "not
    // found" costs ZooKeeper in bytes is measured, not computed.
    let zk_meter = Meter::to(zk_connect).await?;
    let config = dir.path().join("measured.toml");
    std::fs::write(
        &config,
        format!("[filter]\ncluster_ids = {}\n", filters.cluster_ids),
    )?;
    let child = ServeChild::start(
        MEASURED,
        &dir.path().join("data"),
        &[
            "--config".into(),
            config.display().to_string(),
            "--zk".into(),
            zk_meter.address.clone(),
            "--cluster".into(),
            cluster.clone(),
            "--fpr".into(),
            args.fpr.to_string(),
        ],
        &dir.path().join("measured.log"),
    )
    .await?;
    let client = ApiClient::new(&child.url, Duration::from_mins(1))?;
    converged(&client, n, &child).await?;
    row.join_seconds = started.elapsed().as_secs_f64();
    row.join_bytes = nation.sent.bytes() - before;
    joining.finish_and_clear();
    println!(
        "{n} domains: joined in {:.1} s, {:.1} MB fetched",
        row.join_seconds,
        row.join_bytes as f64 / 1e6
    );
    // Its light tree neighbours read its relay, as domains would.
    let neighbours_reading = RelayReaders::start(&child.url, &nation.neighbours(MEASURED))?;
    let memory = child.memory()?;
    row.rss_anon_bytes = memory.rss_anon.unwrap_or(memory.rss);
    row.hwm_bytes = memory.hwm;
    let m = mntr(zk_connect).await?;
    row.znodes = figure(&m, "zk_znode_count");
    row.zk_connections = figure(&m, "zk_num_alive_connections");
    row.zk_watches = figure(&m, "zk_watch_count");

    // Steady sync.
    let weighted = Weighted::new(sizes);
    nation.lags.lock().clear();
    let (bytes0, requests0, pages0) = (
        nation.sent.bytes(),
        nation.sent.requests.load(Ordering::Relaxed),
        nation.sent.relay_pages.load(Ordering::Relaxed),
    );
    let cpu0 = cpu_seconds(child.pid())?;
    let relayed0 = neighbours_reading.bytes();
    let zk0 = mntr(zk_connect).await?;
    let events0 = watchers.events.load(Ordering::Relaxed);
    let window = Duration::from_secs(args.steady_seconds);
    let steady = bar(
        args.steady_seconds * args.write_rate,
        format!("{n} domains: {} writes/s", args.write_rate),
    )?;
    let started = Instant::now();
    let (sent_writes, acknowledged, ()) = write_while(
        &nation,
        &weighted,
        args.write_rate,
        &mut rng,
        Some(&steady),
        tokio::time::sleep(window),
    )
    .await?;
    row.writes_acknowledged += acknowledged;
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(child.pid())? - cpu0;
    let zk1 = mntr(zk_connect).await?;
    let events = watchers.events.load(Ordering::Relaxed) - events0;
    let (bytes, requests) = (
        nation.sent.bytes() - bytes0,
        nation.sent.requests.load(Ordering::Relaxed) - requests0,
    );
    steady.finish_and_clear();
    // Let the last writes reach the measured domain before counting.
    let settle = Instant::now();
    while nation.lags.lock().len() < usize::try_from(sent_writes)?
        && settle.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut lags = nation.lags.lock().clone();
    lags.sort_by(f64::total_cmp);
    row.write_rate = sent_writes as f64 / elapsed;
    row.writes_never_sent = sent_writes.saturating_sub(lags.len() as u64);
    row.lag_p50_ms = quantile(&lags, 0.5) * 1e3;
    row.lag_p99_ms = quantile(&lags, 0.99) * 1e3;
    row.lag_max_ms = lags.last().copied().unwrap_or(f64::NAN) * 1e3;
    row.cpu_share = cpu / elapsed;
    row.relay_out_bytes_per_second = (neighbours_reading.bytes() - relayed0) as f64 / elapsed;
    row.sync_bytes_per_second = bytes as f64 / elapsed;
    row.sync_requests_per_second = requests as f64 / elapsed;
    row.relay_pages_per_second_steady =
        (nation.sent.relay_pages.load(Ordering::Relaxed) - pages0) as f64 / elapsed;
    let per_second =
        |name: &str| (figure(&zk1, name).saturating_sub(figure(&zk0, name))) as f64 / elapsed;
    row.zk_packets_in_per_second = per_second("zk_packets_received");
    row.zk_packets_out_per_second = per_second("zk_packets_sent");
    row.watch_events_per_second = events as f64 / elapsed;
    println!(
        "{n} domains: {} writes in {elapsed:.0} s, lag p99 {:.0} ms, {:.1} % of a core",
        row.writes_acknowledged,
        row.lag_p99_ms,
        row.cpu_share * 100.0
    );

    // One archive imports.
    if args.import > 0 {
        // The archive of median size among those with the most relay
        // tree neighbours (fanout + 1): the most an importer sends to.
        // (Names put the levels in order, so these are the larger
        // archives; a county archive of median size is a leaf here.)
        let most = nation.fanout + 1;
        let mut by_size: Vec<usize> = (0..sizes.len())
            .filter(|&d| nation.neighbours(nation.name(d)).len() == most)
            .collect();
        if by_size.is_empty() {
            by_size = (0..sizes.len()).collect();
        }
        by_size.sort_by_key(|&d| sizes[d]);
        let d = by_size.get(by_size.len() / 2).copied().unwrap_or(0);
        let from = nation.position(d);
        let first_new = nation.held(d);
        // Its tree neighbours pull the change from it (the measured
        // domain, if one of them, does so itself).
        let neighbours = nation.neighbours(nation.name(d));
        row.import_neighbours = neighbours.len();
        let pulling = neighbours.iter().filter(|n| *n != MEASURED).count();
        let base = format!("{}/p/{}", nation.address(), nation.name(d));
        let pullers = Pullers::start(&base, pulling, nation.clone(), d)?;
        let importing = bar(args.import, format!("{n} domains: one archive importing"))?;
        let bytes0 = nation.sent.bytes();
        let sent0 = nation.sent_by(d);
        let started = Instant::now();
        let batch = 10_000.min(args.import);
        let mut done = 0;
        while done < args.import {
            let count = batch.min(args.import - done);
            nation.write(d, count).await?;
            done += count;
            importing.inc(count);
        }
        row.import_seconds = started.elapsed().as_secs_f64();
        let acked = Instant::now();
        // Until the measured domain was sent the whole import (the lags
        // recorded meanwhile are the importer's and, while the steady
        // writes go on, other domains').
        while !nation.sent_all(d) && acked.elapsed() < Duration::from_mins(2) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        row.import_routed_after_seconds = acked.elapsed().as_secs_f64();
        while !pullers.hold(nation.position(d)) && acked.elapsed() < Duration::from_mins(2) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        row.import_bytes_sent = nation.sent_by(d) - sent0;
        let pulled = pullers.received();
        drop(pullers);
        importing.finish_and_clear();
        row.import_records = args.import;
        // (The light servers count what the pullers were sent too.)
        row.import_bytes_to_one_peer = (nation.sent.bytes() - bytes0).saturating_sub(pulled);
        row.import_one_copy_bytes = nation.one_copy(d, from) as u64;
        // The measured domain routes the new IDs.
        for i in 0..20 {
            let id = light_id(d, first_new + i * (args.import / 20));
            match client.lookup(&id, Strategy::Routed).await {
                Ok((200, _)) => {}
                other => bail!("the measured domain does not find imported {id}: {other:?}"),
            }
        }
    }

    // Lookups through the measured domain.
    let held: Vec<String> = (0..args.cluster_lookups)
        .map(|_| {
            let d = weighted.pick(&mut rng);
            light_id(d, rng.random_range(0..nation.held(d).max(1)))
        })
        .collect();
    let absent: Vec<String> = (0..args.cluster_lookups)
        .map(|i| format!("absent-{}-{i}", rng.random::<u64>()))
        .collect();
    let found = lookups(&client, &nation, &zk_meter, &held, 200, &mut row).await;
    (row.lookup_found_ms_p50, row.calls_per_found) = (found.p50_ms, found.calls);
    let absent = lookups(&client, &nation, &zk_meter, &absent, 404, &mut row).await;
    (row.lookup_absent_ms_p50, row.lookup_absent_ms_p99) = (absent.p50_ms, absent.p99_ms);
    (row.calls_per_absent, row.zk_bytes_per_absent) = (absent.calls, absent.zk_bytes);
    // As many again while writes flow: the copies behind a publication in
    // flight cannot rule their domains out, and are asked (the probes).
    let absent: Vec<String> = (0..args.cluster_lookups)
        .map(|i| format!("absent-{}-{i}", rng.random::<u64>()))
        .collect();
    let mut writer_rng = rand::rngs::StdRng::seed_from_u64(rng.random());
    let pages0 = nation.sent.relay_pages.load(Ordering::Relaxed);
    let cpu0 = cpu_seconds(child.pid())?;
    let (_, _, looked) = write_while(
        &nation,
        &weighted,
        args.write_rate,
        &mut writer_rng,
        None,
        lookups(&client, &nation, &zk_meter, &absent, 404, &mut row),
    )
    .await?;
    (row.absent_in_writes_ms_p50, row.absent_in_writes_ms_p99) = (looked.p50_ms, looked.p99_ms);
    (
        row.calls_per_absent_in_writes,
        row.zk_bytes_per_absent_in_writes,
    ) = (looked.calls, looked.zk_bytes);
    row.relay_pages_per_second_in_lookups =
        (nation.sent.relay_pages.load(Ordering::Relaxed) - pages0) as f64 / looked.seconds;
    row.cpu_share_in_lookups = (cpu_seconds(child.pid())? - cpu0) / looked.seconds;
    println!(
        "{n} domains: absent IDs {:.1} / {:.1} ms (p50 / p99), {:.2} calls, {:.0} ZooKeeper bytes each; while {} writes/s flow {:.1} / {:.1} ms, {:.2} calls, {:.0} bytes; relay pages {:.0}/s (steady: {:.0}/s), {:.1} % of a core",
        row.lookup_absent_ms_p50,
        row.lookup_absent_ms_p99,
        row.calls_per_absent,
        row.zk_bytes_per_absent,
        args.write_rate,
        row.absent_in_writes_ms_p50,
        row.absent_in_writes_ms_p99,
        row.calls_per_absent_in_writes,
        row.zk_bytes_per_absent_in_writes,
        row.relay_pages_per_second_in_lookups,
        row.relay_pages_per_second_steady,
        row.cpu_share_in_lookups * 100.0,
    );

    if args.killed > 0.0 {
        with_some_killed(args, &client, &nation, &mut rng, &mut row).await?;
    }

    drop(neighbours_reading);
    child.stop().await?;
    drop(watchers);
    nation.close();
    Ok(row)
}

/// Kills `--killed` of the light domains (at least one) as crashes past
/// their sessions leave them (registration gone, ledger entry left,
/// nothing answered), waits until the measured domain no longer counts
/// them registered, then looks up absent IDs: each is 404 unless a
/// killed domain's copy may hold it, then 503 naming it (a dead domain
/// is ruled out by a copy covering its last publication).
async fn with_some_killed(
    args: &NationBenchArgs,
    client: &ApiClient,
    nation: &Nation,
    rng: &mut impl Rng,
    row: &mut ClusterRow,
) -> anyhow::Result<()> {
    let lights = nation.len();
    // A rounded, non-negative count, clamped to the lights at once.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let count = ((lights as f64 * args.killed).round() as usize).clamp(1, lights);
    let killed = rand::seq::index::sample(rng, lights, count);
    for d in killed.iter() {
        nation.kill(d).await?;
    }
    let names: Vec<String> = killed.iter().map(|d| nation.name(d).to_owned()).collect();
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let view = client.cluster().await?;
        if names.iter().all(|n| view.get(n).is_some_and(|p| !p.up)) {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the measured domain still counts a killed domain registered after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    row.killed = count;
    for i in 0..args.cluster_lookups {
        let id = format!("absent-{}-{i}", rng.random::<u64>());
        match client.lookup(&id, Strategy::Routed).await {
            Ok((404, _)) => row.killed_absent_404 += 1,
            Ok((503, body)) if body.unavailable.iter().all(|n| names.contains(n)) => {
                row.killed_absent_503 += 1;
            }
            Ok((200 | 503, _)) => row.lookups_wrong += 1,
            _ => row.lookups_unanswered += 1,
        }
    }
    println!(
        "{} domains: {count} killed, {} of {} absent IDs answered 404, {} 503 naming a killed one",
        lights + 1,
        row.killed_absent_404,
        args.cluster_lookups,
        row.killed_absent_503
    );
    Ok(())
}

/// Writes `rate` records a second over the nation, each at a domain drawn
/// in proportion to its size and published as a domain publishes it, until
/// `meanwhile` is done; returns the writes sent, those acknowledged, and
/// what `meanwhile` gave.
async fn write_while<T>(
    nation: &Arc<Nation>,
    weighted: &Weighted,
    rate: u64,
    rng: &mut impl Rng,
    bar: Option<&ProgressBar>,
    meanwhile: impl std::future::Future<Output = T>,
) -> anyhow::Result<(u64, u64, T)> {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut writes = tokio::task::JoinSet::new();
    let (mut sent, mut acknowledged) = (0u64, 0u64);
    tokio::pin!(meanwhile);
    let outcome = loop {
        tokio::select! {
            outcome = &mut meanwhile => break outcome,
            _ = tick.tick() => {}
        }
        let d = weighted.pick(rng);
        let nation = nation.clone();
        writes.spawn(async move { nation.write(d, 1).await });
        sent += 1;
        if let Some(bar) = bar {
            bar.inc(1);
        }
        while let Some(done) = writes.try_join_next() {
            done??;
            acknowledged += 1;
        }
    };
    while let Some(done) = writes.join_next().await {
        done??;
        acknowledged += 1;
    }
    Ok((sent, acknowledged, outcome))
}

/// What [`lookups`] measured.
struct Looked {
    p50_ms: f64,
    p99_ms: f64,
    /// Calls to light domains per lookup.
    calls: f64,
    /// Bytes ZooKeeper sent the measured domain per lookup.
    zk_bytes: f64,
    seconds: f64,
}

/// Looks `ids` up through the measured domain one after the other, each
/// expected to answer `right`.
async fn lookups(
    client: &ApiClient,
    nation: &Nation,
    zk_meter: &Meter,
    ids: &[String],
    right: u16,
    row: &mut ClusterRow,
) -> Looked {
    let (calls, zk_bytes, began) = (nation.sent.lookup_calls(), zk_meter.down(), Instant::now());
    let mut ms = Vec::with_capacity(ids.len());
    for id in ids {
        let started = Instant::now();
        let answer = client.lookup(id, Strategy::Routed).await;
        ms.push(started.elapsed().as_secs_f64() * 1e3);
        row.count(answer, right);
    }
    ms.sort_by(f64::total_cmp);
    let count = ids.len().max(1) as f64;
    Looked {
        p50_ms: quantile(&ms, 0.5),
        p99_ms: quantile(&ms, 0.99),
        calls: (nation.sent.lookup_calls() - calls) as f64 / count,
        zk_bytes: (zk_meter.down() - zk_bytes) as f64 / count,
        seconds: began.elapsed().as_secs_f64(),
    }
}

/// The rows, as two tables: the measured domain, and ZooKeeper and lookups.
pub fn print(rows: &[ClusterRow]) {
    println!("\nThe measured domain among N (real ZooKeeper, N − 1 light publishers)\n");
    println!(
        "{:>7} {:>13} {:>8} {:>9} {:>9} {:>10} {:>9} {:>9} {:>7} {:>10} {:>9} {:>9} {:>7} {:>10}",
        "domains",
        "IDs",
        "join s",
        "join MB",
        "RSS MB",
        "writes/s",
        "lag p50",
        "lag p99",
        "CPU %",
        "sync KB/s",
        "import s",
        "import ×",
        "sent ×",
        "miss ms"
    );
    for r in rows {
        println!(
            "{:>7} {:>13} {:>8.1} {:>9.1} {:>9.1} {:>10.0} {:>9.1} {:>9.1} {:>7.1} {:>10.1} {:>9.2} {:>9.2} {:>7.1} {:>10.1}",
            r.domains,
            r.ids,
            r.join_seconds,
            r.join_bytes as f64 / 1e6,
            r.rss_anon_bytes as f64 / 1e6,
            r.write_rate,
            r.lag_p50_ms,
            r.lag_p99_ms,
            r.cpu_share * 100.0,
            r.sync_bytes_per_second / 1e3,
            r.import_routed_after_seconds,
            r.import_bytes_to_one_peer as f64 / r.import_one_copy_bytes.max(1) as f64,
            r.import_bytes_sent as f64 / r.import_one_copy_bytes.max(1) as f64,
            r.lookup_absent_ms_p50,
        );
    }
    println!("\nZooKeeper and lookups\n");
    println!(
        "{:>7} {:>8} {:>8} {:>8} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>14} {:>15} {:>7} {:>9} {:>7} {:>9}",
        "domains",
        "znodes",
        "conns",
        "watches",
        "pkts in/s",
        "pkts out/s",
        "watchers",
        "events/s",
        "calls/hit",
        "calls/miss",
        "miss ms, writes",
        "calls/miss, wr.",
        "wrong",
        "no answer",
        "killed",
        "then 404"
    );
    for r in rows {
        let then = r.killed_absent_404 + r.killed_absent_503;
        println!(
            "{:>7} {:>8} {:>8} {:>8} {:>10.0} {:>10.0} {:>9} {:>9.0} {:>10.2} {:>10.2} {:>14.1} {:>15.2} {:>7} {:>9} {:>7} {:>8.1}%",
            r.domains,
            r.znodes,
            r.zk_connections,
            r.zk_watches,
            r.zk_packets_in_per_second,
            r.zk_packets_out_per_second,
            r.watchers,
            r.watch_events_per_second,
            r.calls_per_found,
            r.calls_per_absent,
            r.absent_in_writes_ms_p50,
            r.calls_per_absent_in_writes,
            r.lookups_wrong,
            r.lookups_unanswered,
            r.killed,
            100.0 * r.killed_absent_404 as f64 / then.max(1) as f64,
        );
    }
}
