//! A domain put together: its store and filter, its place in a cluster,
//! its tokens and its metrics. Handlers share one `Arc<Node>`.

use std::sync::Arc;
use std::time::Instant;

use xarchive_filter::{Delta, GeometryError};

use crate::cluster::cache::{Cache, CacheError};
use crate::cluster::client::ClientError;
use crate::cluster::lookup::{Lookup, Outcome, Started, Strategy};
use crate::cluster::relay::OwnFilters;
use crate::cluster::CoordError;
use crate::cluster::{AuditAnchor, Cluster, Coordinator, Hub};
use crate::config::NodeConfig;
use crate::local::audit::{AuditEntry, AuditError, AuditIntegrity, AuditLog, Requester};
use crate::local::backup::{self, BackupError, BackupHeader};
use crate::local::domain::{DeltaRefusal, Domain, DomainError, FilterView};
use crate::local::id::ArchiveId;
use crate::local::id_profile::cluster_fingerprint;
use crate::local::keys::{InvalidKey, KeyTypes, KeyTypesError, Keying, Visibility};
use crate::local::record::Record;
use crate::local::requests::{BookError, RequestBook};
use crate::local::space::DiskSpace;
use crate::metrics::Metrics;
use crate::requests::state::{Requests, TrustCache, TRUST_LIST_FILE};
use crate::security::auth::{AuthError, Authority, Principal};
use crate::security::member::Admission;
use crate::security::seal::{Keyring, SealKeyError};
use crate::security::tls::TlsError;
use crate::wire::{ClusterView, DomainView, RelayPart, SearchBody, SearchRequest};
use tokio_util::sync::CancellationToken;

/// How soon the audit log's check against its anchor is tried again
/// while the coordinator does not answer (reads only: invisible outside).
const ANCHOR_CHECK_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// Why a domain could not be opened, by the part that failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error("the filter's size: {0}")]
    Geometry(#[from] GeometryError),
    #[error("tokens or cluster secret: {0}")]
    Auth(#[from] AuthError),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("the record cache: {0}")]
    Cache(#[from] CacheError),
    #[error("the client for peers: {0}")]
    Peers(#[from] ClientError),
    #[error("the declared key types: {0}")]
    Keys(#[from] KeyTypesError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Requests(#[from] BookError),
    #[error("the seal's keys: {0}")]
    Seal(#[from] SealKeyError),
}

/// Why a search could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(transparent)]
    Key(#[from] InvalidKey),
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error("the search could not be put on record: {0}")]
    Audit(#[from] AuditError),
}

pub struct Node {
    pub(crate) config: NodeConfig,
    pub(crate) domain: Domain,
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) auth: Authority,
    pub(crate) metrics: Metrics,
    pub(crate) audit: AuditLog,
    /// Cross-archive requests, both sides (`requests/`).
    pub(crate) requests: Requests,
    /// Where the audit log's head is kept outside this disk: the
    /// coordinator, seen only as an anchor.
    audit_anchor: Arc<dyn AuditAnchor>,
    /// The audit log was checked against its anchor (once the coordinator
    /// answered): only then is its head anchored.
    anchor_checked: tokio::sync::Mutex<bool>,
}

impl Node {
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// The local part: store and filter.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// Its place among the other domains.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    pub fn auth(&self) -> &Authority {
        &self.auth
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The URL peers and clients reach it at.
    pub fn address(&self) -> &str {
        &self.cluster.address
    }

    /// A domain on its own (an in-process coordinator of one), reachable
    /// at `address`.
    pub fn open(config: NodeConfig, address: &str) -> Result<Arc<Node>, NodeError> {
        let coordinator = Hub::new().coordinator();
        Self::open_in(config, coordinator, address)
    }

    /// The coordinator the configuration asks for (ZooKeeper or a new
    /// in-process hub), with the cluster secret's credentials.
    pub fn coordinator_for(config: &NodeConfig) -> Result<Arc<dyn Coordinator>, NodeError> {
        let auth = Authority::new(&config.auth, &config.cluster.name)?;
        let admission = Admission {
            key: auth.member_key().cloned(),
            https_only: config.tls.serves_tls() || config.tls.ca.is_some(),
        };
        Ok(crate::cluster::coordinator_for(
            &config.cluster,
            auth.zookeeper_credentials(),
            admission,
        ))
    }

    /// A domain joining the cluster that `coordinator` coordinates.
    pub fn open_in(
        config: NodeConfig,
        coordinator: Arc<dyn Coordinator>,
        address: &str,
    ) -> Result<Arc<Node>, NodeError> {
        let key_types = KeyTypes::new(config.keys.clone())?;
        let audit_anchor: Arc<dyn AuditAnchor> = coordinator.clone();
        let auth = Authority::new(&config.auth, &config.cluster.name)?;
        let trust = config.tls.trust()?;
        let cache = Cache::new(&config.cache, &config.cluster.name, &config.name)?;
        let cluster = Cluster::new(
            &config.name,
            address,
            coordinator,
            &auth.key_hasher().filter_key_id(),
            config.cluster.clone(),
            Arc::new(cache),
            auth.member_key().cloned(),
            trust,
            Some(config.data.join("peers.json")),
        )?;
        let keying = Keying {
            types: key_types,
            hasher: auth.key_hasher().clone(),
        };
        let space = Arc::new(DiskSpace::new(&config.data, config.limits.min_free_bytes));
        let domain = Domain::open(
            &config.name,
            &config.data,
            config.filter.clone(),
            keying,
            space.clone(),
        )?;
        let audit = AuditLog::open(&config.data, space.clone())?;
        let book = RequestBook::open(&config.data, space)?;
        let seal = Keyring::open(&config.data, &config.seal)?;
        let trust = TrustCache::new(
            &config.cluster.name,
            auth.member_key().map(|k| k.material("trust list anchor")),
            config.data.join(TRUST_LIST_FILE),
        );
        let cluster = Arc::new(cluster);
        let metrics = Metrics::for_domain(&cluster, domain.settings().fpr);
        Ok(Arc::new(Node {
            config,
            domain,
            cluster,
            auth,
            metrics,
            audit,
            requests: Requests::new(book, seal, trust),
            audit_anchor,
            anchor_checked: tokio::sync::Mutex::new(false),
        }))
    }

    /// The key types records may carry here.
    pub fn key_types(&self) -> &KeyTypes {
        &self.domain.keying().types
    }

    /// Starts the background work (registration, replica sync, the audit
    /// log's anchoring), which ends when `stop` is cancelled.
    pub fn start(self: &Arc<Self>, stop: &CancellationToken) {
        crate::requests::start(self, stop);
        self.cluster.start(
            self.domain.settings().kind,
            // What a member must share to join: the key types and the ID
            // profile (local/id_profile.rs says why the default adds nothing).
            cluster_fingerprint(&self.key_types().fingerprint(), &self.config.ids),
            self.clone(),
            self.domain.subscribe(),
            stop,
        );
        tokio::spawn(self.clone().anchor_audit_log(stop.clone()));
    }

    /// Checks the audit log's chain and, if the coordinator answers, that
    /// the log still holds the head anchored there for this domain.
    pub async fn verify_audit(self: &Arc<Self>) -> Result<AuditIntegrity, AuditError> {
        let anchor = self.audit_anchor.audit_anchor(&self.cluster.me).await;
        let node = self.clone();
        let anchored = anchor.as_ref().ok().cloned().flatten();
        let mut found = tokio::task::spawn_blocking(move || node.audit.verify(anchored.as_ref()))
            .await
            .map_err(|e| AuditError::Task(e.to_string()))??;
        if let Err(e) = anchor {
            found.unanchored = Some(format!("the anchor could not be read: {e}"));
        }
        Ok(found)
    }

    /// Checks the audit log against its anchor once the coordinator
    /// answers, then anchors its head there at every tick of a fixed
    /// cadence (`cluster.audit_anchor_ms`): an operator who cuts the log
    /// short, rolls it back or replaces it is caught at the next start or
    /// check, since the anchor is outside the domain's disk (and moves
    /// only forward).
    ///
    /// Why a fixed cadence, written whether the head moved or not. The
    /// anchor's znode is in the cluster's sealed folder: without the
    /// secret nobody reads it. But ZooKeeper answers `exists` on any path
    /// to anyone, with the znode's stat: its version (writes so far), the
    /// time of the last write and its size. Written only when the head
    /// moved, as before, the version counted this domain's audited
    /// searches, and a search made at another domain that reached this one
    /// (its key filter may hold the person) bumped it within two seconds:
    /// whoever polled `exists` learned that this domain holds the person
    /// just searched for. Now a timer started at the check writes at each
    /// tick, the head changed or not, always `ANCHOR_BYTES` long
    /// (`cluster/zookeeper/anchor.rs`): the version grows by one a tick, the
    /// time is the tick's and the size never changes, so the stat is a
    /// function of the time since the domain started and of ZooKeeper's
    /// outages (which the outsider sees anyway), not of the searches. A
    /// search changes only what the znode holds, which only members read.
    /// What the anchor is for is kept: each tick writes the head as it is
    /// then, so entries made since the last tick are the most an operator
    /// could cut off unseen (one cadence: 5 s by default, 2 s before), and
    /// a head behind or beside the anchor is refused as before
    /// (`anchor_moves_forward`). What it costs: one ZooKeeper write per
    /// domain per cadence (660 a second at 3 301 domains and 5 s).
    async fn anchor_audit_log(self: Arc<Self>, stop: CancellationToken) {
        while !self.check_audit_anchor().await {
            tokio::select! {
                () = tokio::time::sleep(ANCHOR_CHECK_RETRY) => {}
                () = stop.cancelled() => return,
            }
        }
        let every = std::time::Duration::from_millis(self.config.cluster.audit_anchor_ms.max(1));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        // A tick missed (a slow write) moves the later ones, never doubles one.
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {
                    self.anchor_tick().await;
                }
                () = stop.cancelled() => return,
            }
        }
    }

    /// Whether the audit log has been checked against its anchor, checking
    /// it now if not (reads only); an anchor read when the log is not
    /// intact is said loudly.
    async fn check_audit_anchor(self: &Arc<Self>) -> bool {
        let mut checked = self.anchor_checked.lock().await;
        if *checked {
            return true;
        }
        // The anchor first: while the coordinator does not answer (or the
        // cluster's folder is refused), the whole log is not read for
        // nothing at each try.
        let anchor = match self.audit_anchor.audit_anchor(&self.cluster.me).await {
            Ok(anchor) => anchor,
            Err(e) => {
                tracing::debug!(error = %e, "the audit anchor cannot be read yet");
                return false;
            }
        };
        let node = self.clone();
        match tokio::task::spawn_blocking(move || node.audit.verify(anchor.as_ref())).await {
            Ok(Ok(found)) => {
                *checked = true;
                if !found.intact {
                    tracing::error!(problems = ?found.problems, "the audit log is not what was anchored");
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot check the audit log"),
            Err(e) => tracing::warn!(error = %e, "cannot check the audit log"),
        }
        *checked
    }

    /// One tick of the anchoring: the head written as it is now, moved or
    /// not, once the log was checked and while it is intact. Whether it
    /// was written.
    async fn anchor_tick(self: &Arc<Self>) -> bool {
        if !self.check_audit_anchor().await || !self.audit.integrity().intact {
            return false;
        }
        let head = self.audit.head();
        match self
            .audit_anchor
            .anchor_audit(&self.cluster.me, &head)
            .await
        {
            Ok(()) => true,
            Err(e @ CoordError::AnchorDisagrees { .. }) => {
                tracing::error!(error = %e, "the audit log is not what was anchored");
                self.audit.found_wanting(e.to_string());
                false
            }
            Err(e) => {
                tracing::debug!(error = %e, "audit head not anchored at this tick");
                false
            }
        }
    }

    /// One tick of the audit anchor's cadence, now: a test drives the
    /// cadence with it, so that it compares ticks, not times. Whether the
    /// head was written.
    #[cfg(feature = "testsuite")]
    pub async fn anchor_audit_now(self: &Arc<Self>) -> bool {
        self.anchor_tick().await
    }

    /// The forms the cluster's ID profile (`[ids]`) reads from what was
    /// typed: the normalised one, then the one typed (an ID stored before
    /// the profile); never none.
    pub fn id_forms(&self, typed: &ArchiveId) -> Vec<ArchiveId> {
        let forms: Vec<ArchiveId> = self
            .config
            .ids
            .forms(typed.as_str())
            .iter()
            .filter_map(|form| ArchiveId::parse(form).ok())
            .collect();
        if forms.is_empty() {
            vec![typed.clone()]
        } else {
            forms
        }
    }

    /// Finds what was typed here or in any other domain, by each of its
    /// forms ([`Node::id_forms`]) in turn: this domain's store for each,
    /// then the other domains, their copies read once for all forms (see
    /// [`Cluster::find_any`]). Lookups and the request flow alike.
    pub async fn lookup(
        self: &Arc<Self>,
        typed: &ArchiveId,
        strategy: Strategy,
    ) -> Result<Lookup, DomainError> {
        let forms = self.id_forms(typed);
        let mut started = Started::new(strategy);
        for id in &forms {
            if !self.domain.contains(id.as_str()) {
                continue;
            }
            let (node, key) = (self.clone(), id.clone());
            let record = tokio::task::spawn_blocking(move || node.domain.get(&key))
                .await
                .map_err(DomainError::from)??;
            if let Some(record) = record {
                started.trace.local = true;
                let owner = self.cluster.me.clone();
                let trace = started.trace.clone();
                return Ok(started.finish(Outcome::Found { record, owner }, trace));
            }
        }
        let mut found = self.cluster.find_any(&forms, started).await;
        // The owner withheld the private keys already (`Domain::get`); a
        // copy cached before that rule, or sent by a domain running an
        // older version, is held to it here too.
        if let Outcome::Found { record, .. } = &mut found.outcome {
            record.withhold_private_keys(self.key_types());
        }
        Ok(found)
    }

    /// `record` as `who` may read it: whole for this archive's own
    /// readers, and for another archive's (a member domain looking it up,
    /// a token bound elsewhere) what the release policy gives out by
    /// itself, else its catalogue entry. A record held elsewhere came
    /// through its holding archive, which applied its own policy.
    pub fn as_read_by(&self, who: &Principal, record: Record) -> Record {
        if record.domain == self.cluster.me && who.is_elsewhere(&self.cluster.me) {
            self.config.requests.for_remote_read(record)
        } else {
            record
        }
    }

    /// Whether `typed` reads as a value of a private key type (an identity
    /// number typed where an archive number goes): then it is neither
    /// echoed nor used to suggest anything.
    pub fn reads_as_private_key(&self, typed: &str) -> bool {
        self.key_types()
            .iter()
            .filter(|t| t.visibility == Visibility::Private)
            .any(|t| self.key_types().normalise(&t.name, typed).is_ok())
    }

    /// Every record whose key is `request.value` (normalised first): this
    /// domain's, and unless `request.local`, every other domain's. The
    /// answer names the domains that could not be asked.
    pub async fn search(
        self: &Arc<Self>,
        request: &SearchRequest,
        requester: Requester,
    ) -> Result<SearchBody, SearchError> {
        let started = Instant::now();
        let value = self
            .key_types()
            .normalise(&request.key_type, &request.value)?;
        let keying = self.domain.keying();
        // normalise() accepted it, so the type is declared.
        let key_type = keying
            .types
            .get(&request.key_type)
            .ok_or_else(|| InvalidKey::UnknownType(request.key_type.clone()))?;
        let private = key_type.visibility == Visibility::Private;
        let element = keying.hasher.filter_element(key_type, &value);
        let request = SearchRequest {
            value,
            requester: Some(requester),
            ..request.clone()
        };
        let (node, mine) = (self.clone(), request.clone());
        let mut records = tokio::task::spawn_blocking(move || {
            let mut records = node.domain.search(&mine.key_type, &mine.value)?;
            let requester = mine.requester.clone().unwrap_or_default();
            // The holding archive's policy decides what another archive's
            // search gets (SECURITY.md, "Cross-archive requests").
            if requester.domain != node.cluster.me {
                let policy = &node.config.requests;
                records = records
                    .into_iter()
                    .map(|r| policy.for_remote_search(r))
                    .collect();
            }
            if private {
                node.audit.append(AuditEntry {
                    at_us: crate::local::record::now_us(),
                    value_digest: node
                        .auth
                        .key_hasher()
                        .audit_digest(&mine.key_type, &mine.value),
                    requester: mine.requester.unwrap_or_default(),
                    key_type: mine.key_type,
                    records: records.iter().map(|r| r.id.to_string()).collect(),
                    action: None,
                    request: None,
                    prev: String::new(),
                    hash: String::new(),
                })?;
            }
            Ok::<_, SearchError>(records)
        })
        .await
        .map_err(DomainError::from)??;
        let mut body = SearchBody {
            key_type: request.key_type.clone(),
            asked: vec![self.cluster.me.to_string()],
            ..SearchBody::default()
        };
        if !request.local {
            let others = self.cluster.search_others(&request, &element).await;
            records.extend(others.records);
            body.remote_calls = others.asked.len();
            body.asked.extend(others.asked);
            body.unreachable = others.unreachable;
            body.errors = others.errors;
            body.unconfirmed = others.unconfirmed;
        }
        records.sort_by(|a, b| (&a.domain, &a.id).cmp(&(&b.domain, &b.id)));
        body.records = records;
        body.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(body)
    }

    /// Writes an online backup of this domain to `out`: its store and its
    /// audit log, each as of one moment, while writes go on (see
    /// `local/backup.rs`), authenticated with [`backup_key`](Self::backup_key).
    /// Blocks: run it on the blocking pool.
    pub fn backup(&self, out: impl std::io::Write) -> Result<BackupHeader, BackupError> {
        let key = self.backup_key()?;
        backup::take(
            self.domain.name(),
            backup::Sources {
                store: self.domain.store(),
                audit: &self.audit,
                book: &self.requests.book,
                seal_dir: &self.config.data.join(crate::security::seal::SEAL_DIR),
            },
            &key,
            crate::local::record::now_ms(),
            out,
        )
    }

    /// The key this domain's backups are authenticated with: derived from
    /// the cluster secret (any member's restore checks it), or without one
    /// the domain's own (`seal/backup.key`, made at the first backup).
    pub fn backup_key(&self) -> Result<backup::MacKey, BackupError> {
        Ok(match self.auth.member_key() {
            Some(member) => backup::MacKey::cluster(
                &self.config.cluster.name,
                member.material(crate::security::member::BACKUP_MAC),
            ),
            None => backup::MacKey::domain(backup::domain_key(&self.config.data)?),
        })
    }

    /// Every domain this one knows, itself first, and what the page may
    /// hold in a browser (`/v1/cluster`).
    pub async fn cluster_view(&self) -> ClusterView {
        let me = self.domain.position();
        let mut view = self
            .cluster
            .view(DomainView {
                name: self.cluster.me.to_string(),
                address: self.cluster.address.clone(),
                is_self: true,
                up: true,
                reachable: true,
                probe_ms: None,
                probe_error: None,
                kind: self.domain.settings().kind,
                filter_bytes: Some(self.domain.filter_view_bytes()),
                epoch: Some(me.epoch),
                version: Some(me.version),
                replica_epoch: None,
                replica_version: None,
                lag: None,
                current: None,
                keys_current: None,
                last_sync_ms_ago: None,
                last_error: None,
                behind_ms: None,
                grace_pulls: None,
                first_copy_from: None,
            })
            .await;
        view.page = Some(self.config.page.budget());
        view
    }
}

/// What the relay sends of this domain's own filters: what its routes
/// serve peers (src/http/replication.rs).
impl OwnFilters for Node {
    fn changes(
        &self,
        part: RelayPart,
        epoch: u64,
        since: u64,
    ) -> Result<(Delta, Vec<ArchiveId>), DeltaRefusal> {
        match part {
            RelayPart::Filter => self.domain.delta(epoch, since),
            RelayPart::Keys => Ok((self.domain.key_delta(epoch, since)?, Vec::new())),
        }
    }

    fn view(&self, part: RelayPart) -> FilterView {
        match part {
            RelayPart::Filter => self.domain.filter_view(),
            RelayPart::Keys => self.domain.key_filter_view(),
        }
    }

    fn key_id(&self) -> String {
        self.domain.keying().hasher.filter_key_id()
    }
}
