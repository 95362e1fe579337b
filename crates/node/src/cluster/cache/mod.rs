//! Records of other domains, cached so that hot lookups need no remote
//! call: in-process (bounded by bytes, the default) or in Redis.
//!
//! Keys are `xarchive:<cluster>:<domain>:<g>:<owner>:<g_owner>:<id>`,
//! where `g` is this domain's cache generation (new at every start, and
//! after an eviction that could not be carried out, so that nothing
//! cached before then is read again) and `g_owner` the owner's (new when
//! its replica is replaced by a snapshot, whose changed IDs are unknown).
//! Values are the store's compact, versioned record encoding.

mod memory;
mod redis;

pub use crate::wire::CacheStats;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;
use serde::{Deserialize, Serialize};
use xarchive_filter::AtomicCountingBloomFilter;

pub use self::memory::MemoryCache;
pub use self::redis::RedisCache;

/// Why the cache could not answer. Lookups then go remote.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CacheError {
    #[error("unknown cache {0:?} (memory, none or redis://host:port/db)")]
    UnknownUrl(String),
    #[error("Redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    #[error("no answer within {} ms", .0.as_millis())]
    Timeout(Duration),
}

/// A store of encoded records by key, with a time to live.
pub trait RecordCache: Send + Sync + 'static {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, CacheError>>;
    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), CacheError>>;
    fn evict<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Result<(), CacheError>>;
    fn describe(&self) -> String;
}

/// How a domain caches other domains' records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// `memory` (default), `none`, or `redis://host:port/db`.
    pub url: String,
    pub ttl_ms: u64,
    /// Bound of the in-process cache.
    pub max_bytes: u64,
    /// Lookups of an ID within the admission window before its record is
    /// cached (1 caches on first sight; 2, the default, keeps one-off
    /// scans from flushing the hot set).
    pub admission_min_hits: u8,
    pub admission_window_ms: u64,
    /// How long a cache call may take before it counts as failed.
    pub timeout_ms: u64,
    /// A cached copy of domain X's record is served only while this
    /// domain's copy of X's filter covers what the coordinator said X had
    /// published in a read begun less than this ago (one such read, 3
    /// ZooKeeper requests, serves every lookup meanwhile): else a delete
    /// or replace at X may not have reached this domain (a partition
    /// between the two), so the lookup goes to X instead.
    pub max_lag_ms: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            url: "memory".into(),
            ttl_ms: 5 * 60 * 1000,
            max_bytes: 64 * 1024 * 1024,
            admission_min_hits: 2,
            admission_window_ms: 60_000,
            timeout_ms: 250,
            max_lag_ms: 1_000,
        }
    }
}

/// What the cache holds for a lookup.
#[derive(Debug, PartialEq)]
pub enum Cached {
    Fresh(Vec<u8>),
    /// A copy is there, but its owner may have changed it since (see
    /// [`CacheConfig::max_lag_ms`]).
    Stale,
    Absent,
}

/// Counters for `/v1/stats` and `/metrics` (registered there by the node).
#[derive(Debug, Default, Clone)]
pub struct CacheCounters {
    pub hits: Counter,
    pub misses: Counter,
    pub admissions: Counter,
    pub evictions: Counter,
    pub errors: Counter,
    pub stale: Counter,
}

impl CacheCounters {
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "cache_hits",
            "Lookups answered from the cache",
            self.hits.clone(),
        );
        registry.register(
            "cache_misses",
            "Cache reads that found nothing",
            self.misses.clone(),
        );
        registry.register(
            "cache_admissions",
            "Records put in the cache",
            self.admissions.clone(),
        );
        registry.register(
            "cache_evictions",
            "Cached records dropped because their owner changed them",
            self.evictions.clone(),
        );
        registry.register(
            "cache_stale_refusals",
            "Cached records not served because the owner's filter copy lagged too long",
            self.stale.clone(),
        );
        registry.register(
            "cache_errors",
            "Cache calls that failed or timed out",
            self.errors.clone(),
        );
    }
}

/// Lookups seen per ID in the current window: a counting Bloom filter,
/// replaced when the window ends (its `count` is the sketch).
struct HitSketch {
    min_hits: u8,
    window: Duration,
    current: RwLock<(Instant, Arc<AtomicCountingBloomFilter>)>,
}

impl HitSketch {
    fn sketch() -> Arc<AtomicCountingBloomFilter> {
        Arc::new(
            AtomicCountingBloomFilter::with_capacity(100_000, 0.01)
                .expect("100 000 IDs at 1 % is a valid sizing"),
        )
    }

    fn sketch_now(&self) -> Arc<AtomicCountingBloomFilter> {
        let current = self.current.read();
        if current.0.elapsed() < self.window {
            return current.1.clone();
        }
        drop(current);
        let mut current = self.current.write();
        if current.0.elapsed() >= self.window {
            *current = (Instant::now(), Self::sketch());
        }
        current.1.clone()
    }

    /// Counts one lookup of `id`.
    fn record(&self, id: &str) {
        if self.min_hits > 1 {
            self.sketch_now().insert(id);
        }
    }

    /// Whether `id` has been looked up often enough to be cached.
    fn admitted(&self, id: &str) -> bool {
        self.min_hits <= 1 || self.sketch_now().count(id) >= self.min_hits
    }
}

/// A domain's cache of other domains' records.
pub struct Cache {
    backend: Option<Arc<dyn RecordCache>>,
    prefix: String,
    /// This domain's generation: a new one invalidates everything cached.
    generation: AtomicU64,
    /// Per owner: a new one invalidates what is cached from that owner.
    owners: Mutex<HashMap<String, u64>>,
    /// Per owner: raised at every eviction, so that a fetch that began
    /// before one does not cache what it read.
    changes: Mutex<HashMap<String, u64>>,
    admission: HitSketch,
    ttl: Duration,
    timeout: Duration,
    max_lag: Duration,
    pub counters: CacheCounters,
    last_warning: Mutex<Option<Instant>>,
    /// After a failure the backend is left alone until then, so that a
    /// dead Redis costs lookups nothing (they go remote at once).
    resting_until: Mutex<Option<Instant>>,
}

/// How long the backend is left alone after a failure.
const REST: Duration = Duration::from_secs(1);

/// The eviction counts per owner when a fetch began: it may fill the
/// cache only if its owner's count has not moved since.
#[derive(Clone, Debug, Default)]
pub struct FillTicket(HashMap<String, u64>);

impl Cache {
    pub fn new(config: &CacheConfig, cluster: &str, domain: &str) -> Result<Cache, CacheError> {
        let backend: Option<Arc<dyn RecordCache>> = match config.url.as_str() {
            "none" => None,
            "memory" => Some(Arc::new(MemoryCache::new(
                config.max_bytes,
                Duration::from_millis(config.ttl_ms),
            ))),
            url if url.starts_with("redis://") || url.starts_with("rediss://") => Some(Arc::new(
                RedisCache::new(url, Duration::from_millis(config.timeout_ms))?,
            )),
            other => return Err(CacheError::UnknownUrl(other.to_owned())),
        };
        Ok(Cache {
            backend,
            prefix: format!("xarchive:{cluster}:{domain}"),
            generation: AtomicU64::new(u64::from(rand::random::<u32>())),
            owners: Mutex::new(HashMap::new()),
            changes: Mutex::new(HashMap::new()),
            admission: HitSketch {
                min_hits: config.admission_min_hits,
                window: Duration::from_millis(config.admission_window_ms),
                current: RwLock::new((Instant::now(), HitSketch::sketch())),
            },
            ttl: Duration::from_millis(config.ttl_ms),
            timeout: Duration::from_millis(config.timeout_ms),
            max_lag: Duration::from_millis(config.max_lag_ms),
            counters: CacheCounters::default(),
            last_warning: Mutex::new(None),
            resting_until: Mutex::new(None),
        })
    }

    pub fn enabled(&self) -> bool {
        self.backend.is_some()
    }

    /// How old the coordinator's word on an owner's position may be for
    /// its cached records to be served ([`CacheConfig::max_lag_ms`]).
    pub fn max_lag(&self) -> Duration {
        self.max_lag
    }

    fn key(&self, owner: &str, id: &str) -> String {
        let owner_generation = self.owners.lock().get(owner).copied().unwrap_or(0);
        format!(
            "{}:{}:{owner}:{owner_generation}:{id}",
            self.prefix,
            self.generation.load(Ordering::Relaxed)
        )
    }

    /// The backend, unless it is resting after a failure.
    fn usable(&self) -> Option<&Arc<dyn RecordCache>> {
        let backend = self.backend.as_ref()?;
        let resting = self
            .resting_until
            .lock()
            .is_some_and(|t| Instant::now() < t);
        (!resting).then_some(backend)
    }

    /// Logs a cache failure at most every 10 s, counts it, and rests the
    /// backend a moment.
    fn failed(&self, what: &str, e: &CacheError) {
        self.counters.errors.inc();
        *self.resting_until.lock() = Some(Instant::now() + REST);
        let mut last = self.last_warning.lock();
        if last.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
            *last = Some(Instant::now());
            tracing::warn!(error = %e, "cache {what} failed; lookups go to the owning domains meanwhile");
        }
    }

    async fn bounded<T>(&self, f: BoxFuture<'_, Result<T, CacheError>>) -> Result<T, CacheError> {
        tokio::time::timeout(self.timeout, f)
            .await
            .map_err(|_| CacheError::Timeout(self.timeout))?
    }

    /// The cached copy of `owner`'s record `id`, served only if `current`
    /// (awaited only when a copy is there) confirms that `owner`'s filter
    /// copy here held everything `owner` had published `max_lag_ms` ago
    /// ([`max_lag`](Self::max_lag); `Cluster::copy_confirmed`).
    pub async fn get(
        &self,
        owner: &str,
        id: &str,
        current: impl std::future::Future<Output = bool>,
    ) -> Cached {
        if self.backend.is_none() {
            return Cached::Absent;
        }
        let Some(backend) = self.usable() else {
            self.counters.misses.inc();
            return Cached::Absent;
        };
        let key = self.key(owner, id);
        match self.bounded(backend.get(&key)).await {
            Ok(Some(v)) => {
                if current.await {
                    self.counters.hits.inc();
                    Cached::Fresh(v)
                } else {
                    self.counters.stale.inc();
                    Cached::Stale
                }
            }
            Ok(None) => {
                self.counters.misses.inc();
                Cached::Absent
            }
            Err(e) => {
                self.counters.misses.inc();
                self.failed("read", &e);
                Cached::Absent
            }
        }
    }

    /// Taken before fetching; see [`fill`](Self::fill).
    pub fn ticket(&self) -> FillTicket {
        FillTicket(self.changes.lock().clone())
    }

    /// Counts a lookup of `id` for admission.
    pub fn seen(&self, id: &str) {
        if self.enabled() {
            self.admission.record(id);
        }
    }

    /// Caches `owner`'s record `id`, fetched under `ticket`, if `id` was
    /// looked up often enough and no eviction from `owner` came in since
    /// the fetch began (the copy may predate it).
    pub async fn fill(&self, owner: &str, id: &str, value: Vec<u8>, ticket: &FillTicket) {
        let Some(backend) = self.usable() else { return };
        let now = self.changes.lock().get(owner).copied().unwrap_or(0);
        if ticket.0.get(owner).copied().unwrap_or(0) != now || !self.admission.admitted(id) {
            return;
        }
        let key = self.key(owner, id);
        match self.bounded(backend.put(&key, value, self.ttl)).await {
            Ok(()) => {
                self.counters.admissions.inc();
            }
            Err(e) => self.failed("write", &e),
        }
    }

    /// `owner` replaced or deleted these records: drop cached copies.
    pub async fn evict(&self, owner: &str, ids: &[String]) {
        if self.backend.is_none() {
            return;
        }
        *self.changes.lock().entry(owner.to_owned()).or_default() += 1;
        if ids.is_empty() {
            return;
        }
        let Some(backend) = self.usable() else {
            // Cannot evict now: nothing cached so far will be read again.
            self.generation.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let keys: Vec<String> = ids.iter().map(|id| self.key(owner, id)).collect();
        match self.bounded(backend.evict(&keys)).await {
            Ok(()) => {
                self.counters.evictions.inc_by(keys.len() as u64);
            }
            Err(e) => {
                // The stale copies may survive in the backend: stop reading
                // anything cached so far.
                self.generation.fetch_add(1, Ordering::Relaxed);
                self.failed("eviction", &e);
            }
        }
    }

    /// `owner`'s replica was replaced wholesale: forget what is cached
    /// from it.
    pub fn evict_owner(&self, owner: &str) {
        *self.changes.lock().entry(owner.to_owned()).or_default() += 1;
        *self.owners.lock().entry(owner.to_owned()).or_default() += 1;
    }

    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        CacheStats {
            backend: self
                .backend
                .as_ref()
                .map_or("none".into(), |b| b.describe()),
            hits: c.hits.get(),
            misses: c.misses.get(),
            admissions: c.admissions.get(),
            evictions: c.evictions.get(),
            errors: c.errors.get(),
            stale_refusals: c.stale.get(),
        }
    }
}
