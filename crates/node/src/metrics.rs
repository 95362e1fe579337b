//! Prometheus metrics. Counters are updated as work happens; the domain's
//! gauges (records, filter figures) and the cluster's (coordinator
//! connected, each peer's registration and replica lag) are read when
//! `/metrics` is scraped. `docs/OPERATIONS.md` lists them; the alerts and
//! the dashboard under `ops/` use them.

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::cluster::lookup::Lookup;
use crate::cluster::Cluster;
use crate::local::domain::DomainStats;
use crate::local::store::WriteOutcome;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LookupLabels {
    strategy: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PeerLabels {
    peer: String,
}

/// The process's own figures, under the names every Prometheus exporter
/// uses (`process_*`), read from `/proc/self` at every scrape.
/// prometheus-client has no process collector, and four figures do not
/// warrant the procfs crate.
#[derive(Debug)]
struct ProcessGauges;

/// Clock ticks per second of `/proc`'s CPU times (`USER_HZ`), 100 on Linux.
const TICKS_PER_SECOND: f64 = 100.0;

impl Collector for ProcessGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // Fields after the command name, which may hold spaces: (state) is
        // field 3, utime 14, stime 15, starttime 22, vsize 23, rss 24.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
        let boot = std::fs::read_to_string("/proc/stat")
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                l.strip_prefix("btime ")
                    .and_then(|t| t.trim().parse::<f64>().ok())
            });
        let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
        let page = 4096.0;
        if let Some(cpu) = field(14)
            .zip(field(15))
            .map(|(u, s)| (u + s) / TICKS_PER_SECOND)
        {
            let counter = ConstCounter::new(cpu);
            counter.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "User and system CPU time spent, in seconds",
                None,
                counter.metric_type(),
            )?)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size, in bytes",
                field(24).map(|pages| pages * page),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size, in bytes",
                field(23),
            ),
            (
                "process_open_fds",
                "Open file descriptors",
                Some(fds as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch, in seconds",
                field(22)
                    .zip(boot)
                    .map(|(ticks, boot)| boot + ticks / TICKS_PER_SECOND),
            ),
        ];
        for (name, help, value) in gauges {
            let Some(value) = value else { continue };
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

/// The cluster's gauges, read from it at every scrape.
struct ClusterGauges(Arc<Cluster>);

impl fmt::Debug for ClusterGauges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ClusterGauges").field(&self.0.me).finish()
    }
}

impl Collector for ClusterGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let connected = ConstGauge::new(i64::from(self.0.writable().is_ok()));
        connected.encode(encoder.encode_descriptor(
            "coordinator_connected",
            "1 while the coordinator (ZooKeeper) session is connected; 0 while writes are refused.",
            None,
            connected.metric_type(),
        )?)?;
        // Copied out of the lock before anything is written.
        let peers = self.0.replicas.read().health();
        let mut up = encoder.encode_descriptor(
            "peer_up",
            "1 while the peer is registered with the coordinator, by peer.",
            None,
            MetricType::Gauge,
        )?;
        for peer in &peers {
            let labels = PeerLabels {
                peer: peer.name.to_string(),
            };
            ConstGauge::new(i64::from(peer.registered)).encode(up.encode_family(&labels)?)?;
        }
        let mut lag = encoder.encode_descriptor(
            "replica_lag_seconds",
            "How long this domain's copy of the peer's filter has been behind what the peer \
             published (0 while current), by peer.",
            None,
            MetricType::Gauge,
        )?;
        for peer in &peers {
            let Some(behind) = peer.lag else { continue };
            let labels = PeerLabels {
                peer: peer.name.to_string(),
            };
            ConstGauge::new(behind.as_secs_f64()).encode(lag.encode_family(&labels)?)?;
        }
        let mut grace = encoder.encode_descriptor(
            "replica_grace_pulls",
            "Pulls of the copy of the peer's filters from the peer itself, because the copy had \
             stayed behind for relay_grace_ms (the relay tree did not bring it), by peer.",
            None,
            MetricType::Counter,
        )?;
        for peer in &peers {
            let labels = PeerLabels {
                peer: peer.name.to_string(),
            };
            ConstCounter::new(peer.grace_pulls).encode(grace.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

pub struct Metrics {
    registry: Registry,
    /// Series under the names every exporter uses, without the prefix.
    process: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
    writes: Family<OutcomeLabels, Counter>,
    lookups: Family<LookupLabels, Counter>,
    lookup_remote_calls: Counter,
    lookup_broadcasts: Counter,
    records: Gauge,
    store_bytes: Gauge,
    filter_items: Gauge,
    filter_version: Gauge,
    filter_fill: Gauge<f64, AtomicU64>,
    filter_fpr: Gauge<f64, AtomicU64>,
    filter_stuck: Gauge,
    data_free_bytes: Gauge,
    data_writable: Gauge,
    writes_refused_for_space: Counter,
    audit_log_intact: Gauge,
    searches: Family<TokenLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    token: String,
    role: &'static str,
}

fn latency_histogram() -> Histogram {
    // 50 µs to ~1.6 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("xarchive");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("http_requests", "HTTP requests answered", requests.clone());
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to answer, by route",
            latency.clone(),
        );
        let writes = Family::<OutcomeLabels, Counter>::default();
        registry.register("writes", "Record writes, by outcome", writes.clone());
        let lookups = Family::<LookupLabels, Counter>::default();
        registry.register(
            "lookups",
            "Lookups, by strategy and outcome",
            lookups.clone(),
        );
        let lookup_remote_calls = Counter::default();
        registry.register(
            "lookup_remote_calls",
            "Calls to other domains made by lookups",
            lookup_remote_calls.clone(),
        );
        let lookup_broadcasts = Counter::default();
        registry.register(
            "lookup_broadcasts",
            "Routed lookups that fell back to the broadcast probe",
            lookup_broadcasts.clone(),
        );
        let records = Gauge::default();
        registry.register("records", "Records in the store", records.clone());
        let store_bytes = Gauge::default();
        registry.register("store_bytes", "Size of the store file", store_bytes.clone());
        let filter_items = Gauge::default();
        registry.register("filter_items", "IDs in the filter", filter_items.clone());
        let filter_version = Gauge::default();
        registry.register("filter_version", "Filter version", filter_version.clone());
        let filter_fill = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "filter_fill_ratio",
            "Counters above zero (or cuckoo slots taken)",
            filter_fill.clone(),
        );
        let filter_fpr = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "filter_estimated_false_positive_rate",
            "False-positive rate implied by the filter's fill",
            filter_fpr.clone(),
        );
        let filter_stuck = Gauge::default();
        registry.register(
            "filter_stuck_counters",
            "Counters saturated at 15",
            filter_stuck.clone(),
        );
        let data_free_bytes = Gauge::default();
        registry.register(
            "data_free_bytes",
            "Bytes free in the data directory's file system",
            data_free_bytes.clone(),
        );
        let data_writable = Gauge::default();
        registry.register(
            "data_writable",
            "1 while the data directory has room for writes beyond the reserve (limits.min_free_bytes); 0 while they are refused (507)",
            data_writable.clone(),
        );
        let writes_refused_for_space = Counter::default();
        registry.register(
            "writes_refused_for_space",
            "Writes refused because the data directory's disk was full (507 insufficient_storage); nothing was changed",
            writes_refused_for_space.clone(),
        );
        let audit_log_intact = Gauge::default();
        registry.register(
            "audit_log_intact",
            "1 while the log of searches by private key is whole (its hash chain) and holds the head anchored in the coordinator; 0 once it was found edited, cut short, rolled back or replaced",
            audit_log_intact.clone(),
        );
        let searches = Family::<TokenLabels, Counter>::default();
        registry.register(
            "searches",
            "Searches by key made at this domain, and requests registered here (each searches for the applicant), by the name and role of the token that made them (never the key); the alert XarchiveSearchBurst watches them",
            searches.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register(
            "build_info",
            "1, labelled with the version of xarchive this domain runs",
            build,
        );
        let mut process = Registry::default();
        process.register_collector(Box::new(ProcessGauges));
        Metrics {
            registry,
            process,
            requests,
            latency,
            writes,
            lookups,
            lookup_remote_calls,
            lookup_broadcasts,
            records,
            store_bytes,
            filter_items,
            filter_version,
            filter_fill,
            filter_fpr,
            filter_stuck,
            data_free_bytes,
            data_writable,
            writes_refused_for_space,
            audit_log_intact,
            searches,
        }
    }

    /// A search by key made here with `token` (its name) of `role`; a
    /// request registered by a clerk is one.
    pub fn count_search(&self, token: &str, role: &'static str) {
        self.searches
            .get_or_create(&TokenLabels {
                token: token.to_owned(),
                role,
            })
            .inc();
    }

    /// The metrics of a domain in `cluster` whose filter was sized for a
    /// false-positive rate of `fpr_target`: these, the cache's counters,
    /// the target, and the cluster's gauges.
    pub(crate) fn for_domain(cluster: &Arc<Cluster>, fpr_target: f64) -> Self {
        let mut metrics = Self::new();
        let registry = metrics.registry_mut();
        cluster.cache.counters.register(registry);
        registry.register(
            "filter_target_false_positive_rate",
            "The false-positive rate the filter was sized for (the fpr setting)",
            ConstGauge::new(fpr_target),
        );
        registry.register_collector(Box::new(ClusterGauges(cluster.clone())));
        metrics
    }

    /// The registry, for other parts (cluster, cache) to add their metrics.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    pub fn observe_request(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_owned(),
                method: method.to_owned(),
                status,
            })
            .inc();
        self.latency
            .get_or_create(&RouteLabels {
                route: route.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    pub fn count_write(&self, outcome: WriteOutcome) {
        let outcome = match outcome {
            WriteOutcome::Created => "created",
            WriteOutcome::Replaced => "replaced",
            WriteOutcome::Deleted => "deleted",
            WriteOutcome::NotFound => "not_found",
        };
        self.writes.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    pub fn observe_lookup(&self, lookup: &Lookup) {
        use crate::cluster::lookup::{Outcome, Strategy};
        let strategy = match lookup.trace.strategy {
            Strategy::Routed => "routed",
            Strategy::Broadcast => "broadcast",
        };
        let outcome = match lookup.outcome {
            Outcome::Found { .. } => "found",
            Outcome::NotFound => "not_found",
            Outcome::Unavailable { .. } => "unavailable",
            Outcome::NotReady { .. } => "not_ready",
        };
        self.lookups
            .get_or_create(&LookupLabels { strategy, outcome })
            .inc();
        self.lookup_remote_calls
            .inc_by(lookup.trace.remote_calls as u64);
        if lookup.trace.broadcast && lookup.trace.strategy == Strategy::Routed {
            self.lookup_broadcasts.inc();
        }
    }

    /// The text exposition, with the domain's gauges set from `stats` and
    /// whether the audit log was last found intact.
    pub fn render(&self, stats: &DomainStats, audit_intact: bool) -> String {
        self.audit_log_intact.set(i64::from(audit_intact));
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.records.set(gauge(stats.records));
        self.store_bytes.set(gauge(stats.store_bytes));
        self.filter_items.set(gauge(stats.filter.items));
        self.filter_version.set(gauge(stats.filter.version));
        self.filter_fill.set(stats.filter.fill_ratio);
        self.filter_fpr.set(stats.filter.estimated_fpr);
        self.filter_stuck
            .set(gauge(stats.filter.stuck_counters.unwrap_or(0)));
        self.data_free_bytes.set(gauge(stats.space.free_bytes));
        self.data_writable.set(i64::from(stats.space.writable));
        // The domain counts refusals; the counter follows it.
        let refused = stats.space.writes_refused;
        let counted = self.writes_refused_for_space.get();
        self.writes_refused_for_space
            .inc_by(refused.saturating_sub(counted));
        let mut out = String::new();
        let mut process = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        let _ = encode(&mut process, &self.process);
        // One exposition: the first one's end marker goes.
        if let Some(body) = out.strip_suffix("# EOF\n") {
            out.truncate(body.len());
        }
        out.push_str(&process);
        out
    }
}
