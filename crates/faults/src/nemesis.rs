//! The nemesis: faults chosen by a seeded RNG, one at a time or two
//! overlapping, each healed after a random while, followed by a wait for
//! the cluster to converge (timed, for the report).
//!
//! The faults: kill -9 of a domain and a restart on the same data and
//! port; SIGSTOP of a domain for longer than the session timeout, then
//! SIGCONT; a domain's disk filled, then freed; ZooKeeper killed and
//! started again on its data; ZooKeeper
//! restarted empty (every session and znode gone) — with an ensemble,
//! all three servers at once; the ensemble's leader killed and started
//! again; with network namespaces, the link of a domain or of a
//! ZooKeeper server cut, later restored, and partitions of exactly one
//! pair (domain|domain, domain|ZooKeeper, domain|clients) by blackhole
//! routes, later removed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::cluster::{poll, wait_converged, Cluster, ZK_NODE};
use crate::history::{Fault, FaultKind, Recorder};
use crate::http;
use crate::netns::{Network, CLIENTS};
use crate::Error;

/// What the nemesis does, and for how long.
#[derive(Clone, Debug)]
pub struct NemesisConfig {
    pub seed: u64,
    /// No new fault starts after this (the last one is healed).
    pub deadline: Instant,
    /// The kinds to choose from.
    pub kinds: Vec<FaultKind>,
    /// How often a second fault overlaps the first.
    pub overlap: f64,
    /// How long to wait for convergence after a heal before calling it a
    /// violation.
    pub converge_patience: Duration,
    /// The session timeout the domains were given: pauses last longer.
    pub session_timeout: Duration,
}

/// What a fault is done to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Domain(usize),
    /// The ZooKeeper service (every server of an ensemble, or its leader).
    ZooKeeper,
    /// One ZooKeeper server's network node (`zk`, or `zk1`.. of an
    /// ensemble): a cut link.
    ZkNode(usize),
    /// Two domains (the lower index first), cut from each other.
    Pair(usize, usize),
    /// A domain cut from every ZooKeeper server.
    DomainZk(usize),
    /// A domain cut from the clients.
    DomainClients(usize),
}

/// A fault of a round: when it starts after the round's start, and how
/// long it holds.
#[derive(Clone, Copy, Debug)]
struct Planned {
    kind: FaultKind,
    target: Target,
    start: Duration,
    hold: Duration,
}

fn ms(rng: &mut StdRng, from: u64, to: u64) -> Duration {
    Duration::from_millis(rng.random_range(from..=to))
}

/// Every target a fault of `kind` can have.
fn targets(kind: FaultKind, domains: usize, zk_nodes: usize) -> Vec<Target> {
    let each = |f: fn(usize) -> Target| (0..domains).map(f).collect::<Vec<_>>();
    match kind {
        FaultKind::KillDomain | FaultKind::PauseDomain | FaultKind::FillDisk => {
            each(Target::Domain)
        }
        FaultKind::KillZooKeeper | FaultKind::FreshZooKeeper | FaultKind::KillLeader => {
            vec![Target::ZooKeeper]
        }
        FaultKind::CutLink => {
            let mut all = each(Target::Domain);
            all.extend((0..zk_nodes).map(Target::ZkNode));
            all
        }
        FaultKind::PartitionDomains => (0..domains)
            .flat_map(|a| (a + 1..domains).map(move |b| Target::Pair(a, b)))
            .collect(),
        FaultKind::PartitionZooKeeper => each(Target::DomainZk),
        FaultKind::PartitionClients => each(Target::DomainClients),
    }
}

// Each fault's hold is its own setting; two happen to be equal.
#[allow(clippy::match_same_arms)]
fn plan_one(
    rng: &mut StdRng,
    kinds: &[FaultKind],
    (domains, zk_nodes): (usize, usize),
    taken: &[Target],
    session: Duration,
) -> Option<Planned> {
    let free = |kind: FaultKind| -> Vec<Target> {
        targets(kind, domains, zk_nodes)
            .into_iter()
            .filter(|t| !taken.contains(t))
            .collect()
    };
    let allowed: Vec<FaultKind> = kinds
        .iter()
        .copied()
        .filter(|k| !free(*k).is_empty())
        .collect();
    if allowed.is_empty() {
        return None;
    }
    let kind = allowed[rng.random_range(0..allowed.len())];
    let free = free(kind);
    let target = free[rng.random_range(0..free.len())];
    let session_ms = u64::try_from(session.as_millis()).unwrap_or(u64::MAX);
    let hold = match kind {
        FaultKind::KillDomain => ms(rng, 500, 5_000),
        FaultKind::PauseDomain => ms(rng, session_ms + 1_000, session_ms + 3_000),
        FaultKind::KillZooKeeper => ms(rng, 1_000, 6_000),
        FaultKind::FreshZooKeeper => Duration::ZERO,
        FaultKind::KillLeader => ms(rng, 1_000, 8_000),
        FaultKind::FillDisk => ms(rng, 1_000, 6_000),
        FaultKind::CutLink
        | FaultKind::PartitionDomains
        | FaultKind::PartitionZooKeeper
        | FaultKind::PartitionClients => ms(rng, 2_000, 8_000),
    };
    Some(Planned {
        kind,
        target,
        start: Duration::ZERO,
        hold,
    })
}

/// One round: a fault, sometimes two overlapping (on different targets).
fn plan_round(
    rng: &mut StdRng,
    config: &NemesisConfig,
    domains: usize,
    zk_nodes: usize,
) -> Vec<Planned> {
    let mut plan = Vec::new();
    let count = if rng.random_bool(config.overlap.clamp(0.0, 1.0)) {
        2
    } else {
        1
    };
    for i in 0..count {
        let taken: Vec<Target> = plan.iter().map(|p: &Planned| p.target).collect();
        if let Some(mut p) = plan_one(
            rng,
            &config.kinds,
            (domains, zk_nodes),
            &taken,
            config.session_timeout,
        ) {
            if i > 0 {
                p.start = ms(rng, 0, 2_000);
            }
            plan.push(p);
        }
    }
    plan
}

/// The target's name in the history (for a node, the network's label
/// for it; a partition names both sides: `A|B`, `A|zk`, `A|clients`).
fn name(cluster: &Cluster, target: Target) -> String {
    match target {
        Target::Domain(i) => cluster.names[i].clone(),
        // Every server of an ensemble.
        Target::ZooKeeper if cluster.zk_labels.len() > 1 => format!("{ZK_NODE}*"),
        Target::ZooKeeper => ZK_NODE.to_owned(),
        Target::ZkNode(j) => cluster.zk_labels[j].clone(),
        Target::Pair(a, b) => format!("{}|{}", cluster.names[a], cluster.names[b]),
        Target::DomainZk(i) => format!("{}|{ZK_NODE}", cluster.names[i]),
        Target::DomainClients(i) => format!("{}|{CLIENTS}", cluster.names[i]),
    }
}

/// The two sides of a partition, as the network's labels.
fn sides(cluster: &Cluster, target: Target) -> Option<(Vec<&str>, Vec<&str>)> {
    let names = &cluster.names;
    match target {
        Target::Pair(a, b) => Some((vec![names[a].as_str()], vec![names[b].as_str()])),
        Target::DomainZk(i) => Some((
            vec![names[i].as_str()],
            cluster.zk_labels.iter().map(String::as_str).collect(),
        )),
        Target::DomainClients(i) => Some((vec![names[i].as_str()], vec![CLIENTS])),
        _ => None,
    }
}

fn signal(cluster: &Cluster, domain: usize, sig: Signal) -> Result<(), Error> {
    let pid = cluster.domains[domain].pid();
    let raw = i32::try_from(pid).unwrap_or(0);
    if raw <= 0 {
        // Not running: nothing to signal (the nemesis never pauses a
        // killed domain, so this is a bug here, not in the system).
        return Err(Error::Signal {
            signal: sig.as_str(),
            pid,
            source: nix::errno::Errno::ESRCH,
        });
    }
    kill(Pid::from_raw(raw), sig).map_err(|source| Error::Signal {
        signal: sig.as_str(),
        pid,
        source,
    })
}

fn network(cluster: &Cluster) -> Result<&Network, Error> {
    cluster.network.as_ref().ok_or_else(|| Error::Net {
        command: "cut a link".into(),
        message: "this run has no network namespaces (--netns)".into(),
    })
}

fn split(cluster: &Cluster, target: Target, on: bool) -> Result<(), Error> {
    let net = network(cluster)?;
    let (a, b) = sides(cluster, target).ok_or_else(|| Error::Net {
        command: "partition".into(),
        message: format!("{target:?} is not a pair"),
    })?;
    if on {
        net.split(&a, &b)
    } else {
        net.heal_split(&a, &b)
    }
}

/// Starts the fault. `victim` is the ensemble member a leader kill is
/// done to (found before the fault is recorded).
fn start(cluster: &mut Cluster, p: &Planned, victim: Option<usize>) -> Result<(), Error> {
    match (p.kind, p.target) {
        (FaultKind::KillDomain, Target::Domain(i)) => cluster.domains[i].kill9(),
        (FaultKind::PauseDomain, Target::Domain(i)) => signal(cluster, i, Signal::SIGSTOP)?,
        (FaultKind::FillDisk, Target::Domain(i)) => cluster.disks[i].fill(),
        (FaultKind::KillZooKeeper, _) => cluster.zk.kill(),
        (FaultKind::FreshZooKeeper, _) => cluster.zk.restart_fresh()?,
        (FaultKind::KillLeader, _) => {
            if let (Some(ensemble), Some(j)) = (cluster.zk.ensemble(), victim) {
                ensemble.kill(j);
            }
        }
        (FaultKind::CutLink, target) => network(cluster)?.cut(&name(cluster, target))?,
        (
            FaultKind::PartitionDomains
            | FaultKind::PartitionZooKeeper
            | FaultKind::PartitionClients,
            target,
        ) => split(cluster, target, true)?,
        _ => {}
    }
    Ok(())
}

fn heal(cluster: &mut Cluster, p: &Planned, victim: Option<usize>) -> Result<(), Error> {
    match (p.kind, p.target) {
        // Same data dir, same port: the testkit's restart keeps `listen`.
        (FaultKind::KillDomain, Target::Domain(i)) => cluster.domains[i].restart(),
        (FaultKind::PauseDomain, Target::Domain(i)) => signal(cluster, i, Signal::SIGCONT)?,
        (FaultKind::FillDisk, Target::Domain(i)) => cluster.disks[i].free(),
        (FaultKind::KillZooKeeper, _) => cluster.zk.start_again()?,
        (FaultKind::KillLeader, _) => {
            if let (Some(ensemble), Some(j)) = (cluster.zk.ensemble(), victim) {
                ensemble.start_again(j)?;
            }
        }
        (FaultKind::CutLink, target) => network(cluster)?.heal(&name(cluster, target))?,
        (
            FaultKind::PartitionDomains
            | FaultKind::PartitionZooKeeper
            | FaultKind::PartitionClients,
            target,
        ) => split(cluster, target, false)?,
        _ => {}
    }
    Ok(())
}

/// The ensemble member `srvr` calls the leader, waiting up to 10 s for
/// one (after an overlapping fault there may be an election going on);
/// none if there is no ensemble or still no leader.
fn find_leader(cluster: &mut Cluster) -> Option<usize> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let ensemble = cluster.zk.ensemble()?;
    loop {
        if let Some(j) = ensemble.leader() {
            return Some(j);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sleeps until `at`, or returns early (false) when `stop` is set.
fn sleep_until(at: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(Duration::from_millis(50)));
    }
}

/// Runs rounds of faults until the deadline (or `stop`), healing every
/// fault it started. `say` gets a line per fault for progress.
pub fn run(
    cluster: &mut Cluster,
    rec: &Recorder,
    config: &NemesisConfig,
    stop: &AtomicBool,
    say: &dyn Fn(&str),
) -> Result<(), Error> {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let client = http::client(Duration::from_secs(2))?;
    let mut n = 0usize;
    loop {
        let quiet = ms(&mut rng, 1_000, 4_000);
        if !sleep_until(Instant::now() + quiet, stop) || Instant::now() >= config.deadline {
            return Ok(());
        }
        let plan = plan_round(
            &mut rng,
            config,
            cluster.domains.len(),
            cluster.zk_labels.len(),
        );
        let mut victims: Vec<Option<usize>> = vec![None; plan.len()];
        // (when, fault index, start or heal), in order; a start before a
        // heal at the same moment.
        let mut steps: Vec<(Duration, usize, bool)> = Vec::new();
        for (i, p) in plan.iter().enumerate() {
            steps.push((p.start, i, true));
            steps.push((p.start + p.hold, i, false));
        }
        steps.sort_by_key(|&(at, i, is_start)| (at, !is_start, i));
        let round = Instant::now();
        let mut faults: Vec<Fault> = Vec::new();
        for (at, i, is_start) in steps {
            // Heals happen even when stopping: never leave a fault behind.
            std::thread::sleep((round + at).saturating_duration_since(Instant::now()));
            let p = &plan[i];
            let mut target = name(cluster, p.target);
            if is_start && p.kind == FaultKind::KillLeader {
                victims[i] = find_leader(cluster);
                target = match victims[i] {
                    Some(j) => cluster.zk_labels[j].clone(),
                    None => format!("{ZK_NODE}?"),
                };
                if victims[i].is_none() {
                    rec.note("no ZooKeeper leader found: the leader kill does nothing");
                }
            }
            if is_start {
                let start_us = rec.now_us();
                rec.fault_started(n + i, p.kind, &target, start_us);
                say(&format!(
                    "fault #{} at {:.1} s: {} {} for {:.1} s",
                    n + i,
                    start_us as f64 / 1e6,
                    p.kind,
                    target,
                    p.hold.as_secs_f64()
                ));
                faults.push(Fault {
                    n: n + i,
                    kind: p.kind,
                    target,
                    start_us,
                    healed_us: start_us,
                    whole_us: None,
                    converged_us: None,
                });
                start(cluster, p, victims[i])?;
            } else {
                heal(cluster, p, victims[i])?;
                let healed_us = rec.now_us();
                if let Some(f) = faults.iter_mut().find(|f| f.n == n + i) {
                    f.healed_us = healed_us;
                }
                rec.note(&format!("fault #{} healed", n + i));
            }
        }
        n += plan.len();
        let since_start =
            |at: Instant| u64::try_from(at.saturating_duration_since(rec.instant(0)).as_micros());
        // Convergence is timed from the moment the system is whole again
        // (every fault healed, ZooKeeper serving, every domain alive), not
        // from each heal: a restarted ensemble first elects a leader, a
        // restarted domain first opens its store, and a fault healed early
        // in a round waits for the round's other faults.
        let whole = poll(config.converge_patience, || cluster.whole_now(&client));
        if let Err(why) = &whole {
            say(&format!(
                "NOT WHOLE within {} s of the heal: {why}",
                config.converge_patience.as_secs()
            ));
        }
        let whole_us = whole.ok().map(|at| since_start(at).unwrap_or(u64::MAX));
        let converged = wait_converged(&client, &cluster.urls, config.converge_patience);
        let converged_us = match &converged {
            Ok(at) => Some(since_start(*at).unwrap_or(u64::MAX)),
            Err(why) => {
                say(&format!(
                    "NOT CONVERGED within {} s: {why}",
                    config.converge_patience.as_secs()
                ));
                None
            }
        };
        for mut f in faults {
            f.whole_us = whole_us;
            f.converged_us = converged_us;
            rec.fault(f);
        }
        if converged.is_err() {
            // Nothing more can be learnt from a cluster that is stuck.
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> NemesisConfig {
        NemesisConfig {
            seed: 7,
            deadline: Instant::now(),
            kinds: FaultKind::PROCESS.to_vec(),
            overlap: 0.5,
            converge_patience: Duration::from_mins(1),
            session_timeout: Duration::from_secs(3),
        }
    }

    #[test]
    fn the_same_seed_plans_the_same_faults() {
        let plans = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..50)
                .map(|_| format!("{:?}", plan_round(&mut rng, &config(), 3, 1)))
                .collect::<Vec<_>>()
        };
        assert_eq!(plans(7), plans(7));
        assert_ne!(plans(7), plans(8));
    }

    #[test]
    fn overlapping_faults_have_different_targets_and_pauses_outlast_the_session() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut overlapped = 0;
        for _ in 0..500 {
            let plan = plan_round(&mut rng, &config(), 3, 1);
            assert!(!plan.is_empty());
            if plan.len() == 2 {
                overlapped += 1;
                assert_ne!(plan[0].target, plan[1].target, "{plan:?}");
            }
            for p in &plan {
                assert_eq!(p.kind.on_zookeeper(), p.target == Target::ZooKeeper);
                if p.kind == FaultKind::PauseDomain {
                    assert!(p.hold > Duration::from_secs(3), "{p:?}");
                }
            }
        }
        assert!(overlapped > 100, "{overlapped}");
    }

    #[test]
    fn cut_links_fall_on_domains_and_zookeeper() {
        let mut config = config();
        config.kinds = vec![FaultKind::CutLink];
        let mut rng = StdRng::seed_from_u64(3);
        let mut zk = 0;
        for _ in 0..300 {
            let plan = plan_round(&mut rng, &config, 3, 1);
            if plan.len() == 2 {
                assert_ne!(plan[0].target, plan[1].target, "{plan:?}");
            }
            zk += plan
                .iter()
                .filter(|p| p.target == Target::ZkNode(0))
                .count();
        }
        assert!(zk > 30, "{zk}");
    }

    #[test]
    fn partitions_fall_on_every_pair_and_every_domain() {
        let mut config = config();
        config.kinds = FaultKind::NETWORK.to_vec();
        config.kinds.push(FaultKind::KillLeader);
        let mut rng = StdRng::seed_from_u64(4);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1_000 {
            for p in plan_round(&mut rng, &config, 3, 3) {
                seen.insert(format!("{:?} {:?}", p.kind, p.target));
                assert_eq!(p.kind.on_zookeeper(), p.target == Target::ZooKeeper);
            }
        }
        for want in [
            "PartitionDomains Pair(0, 1)",
            "PartitionDomains Pair(0, 2)",
            "PartitionDomains Pair(1, 2)",
            "PartitionZooKeeper DomainZk(2)",
            "PartitionClients DomainClients(0)",
            "CutLink ZkNode(2)",
            "KillLeader ZooKeeper",
        ] {
            assert!(seen.contains(want), "{want} never planned: {seen:?}");
        }
    }
}
