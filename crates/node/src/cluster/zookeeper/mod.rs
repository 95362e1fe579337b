//! The ZooKeeper coordinator: an ephemeral znode per domain under
//! `/xarchive/<cluster>/domains`, a persistent watch on that folder's
//! children (who is a member: it fires when a domain joins or leaves,
//! never at a publication), and a new session (registered again) whenever
//! one is lost. Every domain also has an entry in its group's znode of the
//! positions ledger, `/xarchive/<cluster>/positions/<group>`
//! (`ledger.rs`): written at registration, at every publication and at a
//! clean departure, so that peers know of a domain that is down or
//! paused, and can tell whether their copy of it covers everything it
//! acknowledged. No domain learns of another's publications through
//! ZooKeeper: the changes and their positions travel along the relay
//! tree, and the ledger is read on demand (a "not found", a search, a
//! cached record, `/v1/cluster`), so ZooKeeper's events and reads do not
//! grow with domains × writes (docs/SCALING.md, "ZooKeeper"). What a
//! registered session does at each event is in `session.rs`; the folders,
//! their ACLs and the check that they are sealed in `folders.rs`; the
//! audit anchor in `anchor.rs`; the trust entries in `trust.rs`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::{sleep, timeout, Instant};
use zookeeper_client as zk;

use super::backoff::Backoff;
use super::coordinator::{refuse_to_join, CoordError, Coordinator, Known, Member, Roster, View};
use super::ledger::lines::{Described, Lines};
use super::ledger::{Entries, LedgerError};
use crate::local::audit::AuditHead;
use crate::local::domain::Position;
use crate::local::domain_name::DomainName;
use crate::security::member::Admission;
use tokio_util::sync::CancellationToken;
use xarchive_seal::ArchiveEntry;

/// How to reach ZooKeeper and how to behave there.
#[derive(Clone, Debug)]
pub struct ZkSettings {
    /// `host:port[,host:port…][/chroot]`.
    pub connect: String,
    /// The cluster's name: its folder is `/xarchive/<cluster>`.
    pub cluster: String,
    /// This domain's group in the positions ledger (its province).
    pub group: String,
    pub session_timeout: Duration,
    /// Least time between two publications of this domain's position.
    pub publish_interval: Duration,
    /// (user, password) for ZooKeeper's digest scheme: when set, the
    /// cluster's znodes are readable and writable only with them, so no
    /// outsider can list the members or register a fake one.
    pub credentials: Option<(String, String)>,
    /// What a registration must show to be taken in (the cluster's seal,
    /// an https:// address under TLS); also seals this domain's own.
    pub admission: Admission,
    /// Which layouts of the positions ledger this domain writes.
    pub ledger: LedgerWrites,
}

pub struct ZooKeeperCoordinator {
    settings: ZkSettings,
    /// The ACL of the cluster's znodes.
    acl: Vec<zk::Acl>,
    /// The ACL of the shared parents it creates (`/xarchive`, a chroot):
    /// anyone may create and delete children (other clusters' folders;
    /// only empty ones can be deleted, and a cluster's never is) and list
    /// them, but nobody may change the ACL (ADMIN): an outsider cannot
    /// lock a parent this domain made so that no new cluster starts.
    shared: Vec<zk::Acl>,
    /// The audit head last anchored here, for whom, and the version of
    /// its znode: the next anchoring is one compare-and-set, not a read
    /// first (another writer makes it fail, and it is read).
    anchored: Mutex<Option<(String, AuditHead, i32)>>,
    view: watch::Sender<View>,
    published: watch::Sender<Option<Position>>,
    /// The live session's client, for reads and writes outside the run
    /// loop: set only once the session found the cluster's folders sealed
    /// (`check_acls`), so nothing goes through it in a folder someone else
    /// made, the audit anchors above all.
    client: Mutex<Option<zk::Client>>,
    /// This domain's group's whole-entry znode as last written or read
    /// here, with its version (None: not there): a publication then costs
    /// one multi-op, not a read first (another writer's change makes it
    /// fail, and it is read).
    ledger: Mutex<Option<(Entries, Option<i32>)>>,
    /// The same for this domain's group's lines.
    lines: Mutex<Option<(Lines, Option<i32>)>>,
    /// The version of this domain's description znode (None: not known;
    /// Some(None): not there), and the description last written.
    #[allow(clippy::option_option)] // "not known" and "not there" differ
    described_version: Mutex<Option<Option<i32>>>,
    last_described: Mutex<Option<Described>>,
    /// Whether this session writes whole entries besides its line.
    writes_whole: AtomicBool,
    /// The ledger's whole entries as last admitted, so a read checks again
    /// only those written since.
    admitted: Admitted,
    /// This domain's trust entry, published before each registration.
    trust_entry: Mutex<Option<ArchiveEntry>>,
    /// Why it refuses to join now, if it does (a configuration to fix:
    /// a folder or a parent someone else made, other key types); cleared
    /// once registered.
    refusal: watch::Sender<Option<String>>,
    /// The lines and descriptions as last read.
    apart: Apart,
    /// The last roster of both layouts, with the two it was made of.
    merged: Mutex<Option<Merged>>,
}

/// A roster of both layouts: (whole entries, lines, the two merged).
type Merged = (Arc<Roster>, Arc<Roster>, Arc<Roster>);

/// How often a disconnected session checks whether ZooKeeper accepts
/// connections again, and how long it then waits for the client library
/// to reconnect before opening a new session itself.
const PROBE_EVERY: Duration = Duration::from_millis(200);
const GIVE_UP_AFTER: Duration = Duration::from_millis(600);

/// The longest wait between two attempts to open a session (before its
/// jitter). Writes are refused until a session is back, so it stays short
/// (an attempt costs one refused TCP connect while ZooKeeper is down):
/// writes resume within 1.5 × this of ZooKeeper's return.
const MAX_RETRY: Duration = Duration::from_millis(500);

/// How often a domain refused by the cluster (other key types or another
/// ID profile) tries to join again.
const REFUSED_RETRY: Duration = Duration::from_secs(10);

mod admitted;
mod anchor;
mod apart;
mod folders;
mod ledger_znodes;
mod session;
mod trust;

use admitted::Admitted;
use apart::Apart;
use folders::locked_parent;
use ledger_znodes::Holders;
pub use ledger_znodes::LedgerWrites;
use session::Session;

/// The session's connection, as the run loop knows it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Link {
    Up,
    /// Disconnected; since when ZooKeeper accepts connections again, if
    /// it does (the session may then be given up for a new one).
    Down {
        answering_since: Option<Instant>,
    },
}

/// Why a session ended.
enum End {
    Shutdown,
    Lost,
}

/// What [`ZooKeeperCoordinator::read_ledger_with`] read.
struct LedgerRead {
    /// Every domain known by exactly one entry or line
    /// (`apart::merged`).
    roster: Arc<Roster>,
    /// The names registered now (if asked for).
    registered: Vec<String>,
    /// The names each group holds a whole entry for, and a line for.
    whole_groups: Holders,
    line_groups: Holders,
}

/// The members now, as [`ZooKeeperCoordinator::read_members`] read them,
/// and the ledger read with them.
struct Members {
    members: BTreeMap<DomainName, Member>,
    ledger: LedgerRead,
}

/// A znode's name as a domain's name; a name no domain could have (put
/// there by hand, or by something else) is left out, and said so.
pub(super) fn named(name: &str) -> Option<DomainName> {
    match DomainName::parse(name) {
        Ok(name) => Some(name),
        Err(e) => {
            tracing::warn!(error = %e, "a znode in the cluster's folders is ignored");
            None
        }
    }
}

/// What a publication does with this domain's registration, in the
/// transaction that writes its ledger entry.
#[derive(Clone, Copy)]
enum Registration<'a> {
    /// Creates it (ephemeral), with these contents.
    Create(&'a [u8]),
    /// Only checks that it is there (the transaction fails if the session
    /// lost it): the registration is not rewritten at each publication,
    /// so that nobody watching the membership is woken by one.
    Check,
    /// Neither: a departure, which deletes it afterwards.
    Untouched,
}

/// Why a publication did not happen.
enum Unpublished {
    /// This domain's registration is gone: it registers again.
    Unregistered,
    /// A registration to be created is there already.
    AlreadyRegistered,
    /// The session is over: a new one starts.
    SessionLost(zk::Error),
    /// Anything else: tried again at the next publication.
    Failed(CoordError),
}

impl From<zk::Error> for Unpublished {
    fn from(e: zk::Error) -> Self {
        match e {
            e @ (zk::Error::SessionExpired | zk::Error::ClientClosed) => {
                Unpublished::SessionLost(e)
            }
            e => Unpublished::Failed(failed(e)),
        }
    }
}

impl Unpublished {
    fn from_ledger(e: LedgerError) -> Self {
        match e {
            LedgerError::ZooKeeper(e) => e.into(),
            other => Unpublished::Failed(ledger_failed(other)),
        }
    }
}

fn ledger_failed(e: LedgerError) -> CoordError {
    match e {
        LedgerError::ZooKeeper(e) => failed(e),
        other => CoordError::Ledger(other.to_string()),
    }
}

/// A multi-read answered an operation with another kind of result.
fn unexpected(wanted: &str) -> zk::Error {
    zk::Error::UnexpectedError(format!(
        "ZooKeeper answered a read with something other than {wanted}"
    ))
}

fn failed(e: zk::Error) -> CoordError {
    match e {
        zk::Error::NoAuth => CoordError::NoAuth,
        zk::Error::ConnectionLoss | zk::Error::ClientClosed => CoordError::Disconnected,
        other => CoordError::ZooKeeper(other),
    }
}

impl ZooKeeperCoordinator {
    pub fn new(settings: ZkSettings) -> Arc<Self> {
        let acl = folders::cluster_acl(settings.credentials.as_ref());
        let shared = folders::shared_acl();
        Arc::new(ZooKeeperCoordinator {
            settings,
            acl,
            shared,
            anchored: Mutex::new(None),
            view: watch::channel(View::default()).0,
            published: watch::channel(None).0,
            client: Mutex::new(None),
            ledger: Mutex::new(None),
            lines: Mutex::new(None),
            described_version: Mutex::new(None),
            last_described: Mutex::new(None),
            writes_whole: AtomicBool::new(true),
            admitted: Admitted::default(),
            trust_entry: Mutex::new(None),
            refusal: watch::channel(None).0,
            apart: Apart::default(),
            merged: Mutex::new(None),
        })
    }

    /// Connects; a chroot in the connect string is created first if it
    /// does not exist (ZooKeeper cannot create paths under a missing one).
    async fn connect(&self) -> Result<zk::Client, CoordError> {
        let s = &self.settings;
        let connector = || {
            let c = zk::Client::connector().with_session_timeout(s.session_timeout);
            match &s.credentials {
                Some((user, password)) => {
                    c.with_auth("digest", format!("{user}:{password}").as_bytes())
                }
                None => c,
            }
        };
        let Some((hosts, chroot)) = s.connect.split_once('/') else {
            return connector().connect(&s.connect).await.map_err(failed);
        };
        let chroot = format!("/{}", chroot.trim_end_matches('/'));
        let client = connector().connect(hosts).await.map_err(failed)?;
        if chroot != "/" {
            match client
                .mkdir(&chroot, &self.shared(zk::CreateMode::Persistent))
                .await
            {
                Ok(()) | Err(zk::Error::NodeExists) => {}
                Err(zk::Error::NoAuth) => {
                    if let Some((path, acl)) = locked_parent(&client, &chroot).await {
                        return Err(CoordError::ParentLocked {
                            folder: chroot.clone(),
                            path,
                            acl,
                        });
                    }
                }
                Err(e) => return Err(failed(e)),
            }
        }
        client
            .chroot(chroot.as_str())
            .map_err(|_| CoordError::Chroot(chroot.clone()))
    }

    /// Whether some ZooKeeper server of the connect string accepts a TCP
    /// connection now.
    async fn reachable(&self) -> bool {
        let hosts = self.settings.connect.split('/').next().unwrap_or_default();
        for host in hosts.split(',').filter(|h| !h.is_empty()) {
            let connect = tokio::net::TcpStream::connect(host);
            if matches!(timeout(PROBE_EVERY, connect).await, Ok(Ok(_))) {
                return true;
            }
        }
        false
    }

    /// Why this domain refuses to join now, if it does (what the run
    /// loop logs as "not joining the cluster"), as it changes.
    pub fn refusal(&self) -> watch::Receiver<Option<String>> {
        self.refusal.subscribe()
    }

    /// `known` as `name`'s entry in the ledger, sealed.
    fn entry(&self, name: &str, known: &Known) -> Result<serde_json::Value, CoordError> {
        let bytes = self.sealed(name, known)?;
        serde_json::from_slice(&bytes).map_err(|_| CoordError::Register(name.to_owned()))
    }

    /// `name`'s ledger entry read back, if its seal holds ([`admit`]).
    fn admit_entry(&self, folder: &str, name: &str, entry: &serde_json::Value) -> Option<Known> {
        let bytes = serde_json::to_vec(entry).ok()?;
        admit::<Known>(&self.settings.admission, folder, name, &bytes)
    }

    /// Whether this session writes whole entries besides its line.
    fn writes_whole(&self) -> bool {
        self.writes_whole.load(Ordering::SeqCst)
    }

    /// Leaves cleanly: the last position is recorded first, then the
    /// registration goes. A reader that finds the registration gone finds
    /// the departure (or, if recording it failed, a domain that vanished:
    /// asked, not ruled out).
    async fn depart(&self, client: &zk::Client, name: &str, own: &str, member: &Member) {
        let known = Known {
            member: member.clone(),
            departed: true,
            retired: false,
        };
        let recorded = self
            .publish(client, name, own, &known, Registration::Untouched)
            .await;
        if recorded.is_err() {
            tracing::warn!("cannot record the last position before leaving");
        }
        let _ = client.delete(own, None).await;
    }

    /// What `name` writes about itself: `value` as JSON, with the
    /// cluster's seal beside it when the cluster has a secret.
    fn sealed<T: serde::Serialize>(&self, name: &str, value: &T) -> Result<Vec<u8>, CoordError> {
        let unencodable = |_| CoordError::Register(name.to_owned());
        let bytes = serde_json::to_vec(value).map_err(unencodable)?;
        let Some(proof) = self.settings.admission.seal(name, &bytes) else {
            return Ok(bytes);
        };
        let mut json = serde_json::to_value(value).map_err(unencodable)?;
        if let serde_json::Value::Object(fields) = &mut json {
            fields.insert("proof".into(), proof.into());
        }
        serde_json::to_vec(&json).map_err(unencodable)
    }

    /// Every domain's position, read after a `sync` (so that every
    /// publication completed before this call is in what it reads), in a
    /// round trip or two whatever the number of domains
    /// ([`read_ledger_with`](Self::read_ledger_with)).
    async fn read_ledger(&self, client: &zk::Client) -> Result<Arc<Roster>, CoordError> {
        Ok(self.read_ledger_with(client, false).await?.roster)
    }

    /// The members now, in a few requests whatever their number: the
    /// names registered, each with what its ledger entry or line says of
    /// it. A domain writes its registration and its line in the same
    /// transactions (`publish`), so the two say the same; only a name
    /// without either here (written by a release before the ledger, or
    /// unreadable) is read from its registration. After a ZooKeeper leader
    /// change every domain reads the membership again at once: N reads
    /// each would be N² in all.
    async fn read_members(&self, client: &zk::Client) -> Result<Members, CoordError> {
        let ledger = self.read_ledger_with(client, true).await?;
        let mut members = BTreeMap::new();
        let mut unrecorded = Vec::new();
        for name in ledger.registered.iter().filter_map(|n| named(n)) {
            match ledger.roster.known.get(&name) {
                Some(known) => {
                    members.insert(name, known.member.clone());
                }
                None => unrecorded.push(name),
            }
        }
        if !unrecorded.is_empty() {
            let folder = self.folder();
            let mut reader = client.new_multi_reader();
            for name in &unrecorded {
                reader
                    .add_get_data(&format!("{folder}/{name}"))
                    .map_err(failed)?;
            }
            for (name, read) in unrecorded
                .into_iter()
                .zip(reader.commit().await.map_err(failed)?)
            {
                match read {
                    zk::MultiReadResult::Data { data, .. } => {
                        if let Some(member) =
                            admit::<Member>(&self.settings.admission, &folder, &name, &data)
                        {
                            members.insert(name, member);
                        }
                    }
                    zk::MultiReadResult::Error {
                        err: zk::Error::NoNode,
                    } => {}
                    zk::MultiReadResult::Error { err } => return Err(failed(err)),
                    _ => return Err(failed(unexpected("a znode's contents"))),
                }
            }
        }
        Ok(Members { members, ledger })
    }

    /// Reads every member into the view, marking it connected if the
    /// session still is. The state is read inside the view's lock, which
    /// the state follower (see `session`) takes too: a disconnection
    /// cannot be overwritten by a read that finished just before it.
    async fn reread(&self, client: &zk::Client) -> Result<(), CoordError> {
        // The server this session reached may be behind the leader (after
        // a partition heals): read_members catches it up first (a sync).
        let members = self.read_members(client).await?.members;
        self.view.send_modify(|v| {
            v.replace_members(members);
            if following(client.state()) {
                v.connected = true;
            } else {
                v.lose();
            }
        });
        Ok(())
    }

    /// Takes in watch events: the watch on the membership's folder fires
    /// only when a domain registers or its registration goes (never at a
    /// publication), and the members are then read again with their
    /// ledger entries, in three requests whatever their number. An error
    /// means the view may have missed a change.
    async fn on_events(
        &self,
        client: &zk::Client,
        events: &[zk::WatchedEvent],
    ) -> Result<(), CoordError> {
        let folder = self.folder();
        let membership = events.iter().any(|e| {
            e.path == folder
                && matches!(
                    e.event_type,
                    zk::EventType::NodeChildrenChanged
                        | zk::EventType::NodeCreated
                        | zk::EventType::NodeDeleted
                )
        });
        if membership {
            self.reread(client).await?;
        }
        Ok(())
    }

    /// Brings the view's members to the positions a ledger read found: the
    /// view is not told of each publication (the relay brings the changes
    /// themselves), so the sync loop learns here of a copy the relay left
    /// behind, and pulls it after its grace as it did at a watch event.
    fn take_positions(&self, roster: &Roster) {
        self.view.send_if_modified(|view| {
            let mut changed = false;
            for (name, known) in roster.active() {
                let Some(member) = view.members.get(name) else {
                    continue;
                };
                let ahead = known.member.position().replaces(member.position());
                if !known.departed && ahead && known.member.address == member.address {
                    view.put(name, known.member.clone());
                    changed = true;
                }
            }
            changed
        });
    }

    /// Creates this domain's ephemeral znode, replacing one left by an
    /// earlier session of the same domain, and records it as registered
    /// (not departed) in the same transaction. That must be done before
    /// any new write is acknowledged: a departure recorded earlier would
    /// let peers rule this domain out, after a later crash, for writes
    /// made since.
    async fn register(
        &self,
        client: &zk::Client,
        name: &str,
        own: &str,
        member: &Member,
        data: &[u8],
    ) -> Result<(), CoordError> {
        let known = Known {
            member: member.clone(),
            departed: false,
            retired: false,
        };
        for _ in 0..3 {
            match self
                .publish(client, name, own, &known, Registration::Create(data))
                .await
            {
                Ok(()) => return Ok(()),
                Err(Unpublished::AlreadyRegistered) => {
                    tracing::warn!(
                        path = own,
                        "replacing a registration left by an earlier session"
                    );
                    match client.delete(own, None).await {
                        Ok(()) | Err(zk::Error::NoNode) => {}
                        Err(e) => return Err(failed(e)),
                    }
                }
                Err(Unpublished::SessionLost(e)) => return Err(failed(e)),
                Err(Unpublished::Failed(e)) => return Err(e),
                Err(Unpublished::Unregistered) => {}
            }
        }
        Err(CoordError::Register(own.to_owned()))
    }

    /// One session: connect, register, follow, publish, until the session
    /// is lost or shutdown comes.
    async fn session(
        &self,
        name: &str,
        member: &mut Member,
        positions: &mut watch::Receiver<Position>,
        shutdown: &CancellationToken,
    ) -> Result<End, CoordError> {
        let s = &self.settings;
        let client = timeout(s.session_timeout * 2, self.connect())
            .await
            .map_err(|_| CoordError::Timeout(s.session_timeout * 2))??;
        let folder = self.folder();
        self.make_folder(
            &client,
            "/xarchive",
            &self.shared(zk::CreateMode::Persistent),
        )
        .await?;
        let folders = [
            folder.clone(),
            self.ledger_folder(),
            self.lines_folder(),
            self.descriptions_folder(),
            self.audit_folder(),
            self.trust_folder(),
        ];
        for path in &folders {
            self.make_folder(&client, path, &self.options(zk::CreateMode::Persistent))
                .await?;
        }
        let cluster = format!("/xarchive/{}", s.cluster);
        self.check_acls(&client, &[&[cluster][..], &folders[..]].concat())
            .await?;
        // Only now: reads and writes outside this loop (the audit anchor,
        // the ledger, the trust list) go through a session that found the
        // folders sealed. A folder someone else made is neither read (a
        // planted anchor would raise a false alarm) nor written (the real
        // anchor would be theirs to delete).
        *self.client.lock() = Some(client.clone());
        let group_folder = format!("{}/{}", self.lines_folder(), s.group);
        self.make_folder(
            &client,
            &group_folder,
            &self.options(zk::CreateMode::Persistent),
        )
        .await?;
        // Perhaps another ensemble: nothing read or written before counts.
        self.apart.forget();
        *self.ledger.lock() = None;
        *self.lines.lock() = None;
        *self.described_version.lock() = None;
        let own = format!("{folder}/{name}");
        let position = *positions.borrow_and_update();
        (member.epoch, member.version) = (position.epoch, position.version);
        let watcher = client
            .watch(&folder, zk::AddWatchMode::Persistent)
            .await
            .map_err(failed)?;
        let state = client.state_watcher();
        // The loop below may wait on ZooKeeper (a read, a publish) while
        // the connection drops. The view must say so at once: writes are
        // refused while it does not follow (none could be published), and
        // a read of the membership must fail fast rather than wait.
        let _follower = {
            let view = self.view.clone();
            let mut state = client.state_watcher();
            tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
                loop {
                    let now = state.changed().await;
                    if !following(now) {
                        view.send_modify(View::lose);
                    }
                    // A terminal state must not be polled again.
                    if now.is_terminated() {
                        break;
                    }
                }
            }))
        };
        // Not into a cluster whose members read keys or archive numbers
        // otherwise (`refuse_to_join`). (Two
        // domains registering at the same moment may both pass: the check
        // is for a misconfigured newcomer, not a consensus.)
        let Members { members, ledger } = self.read_members(&client).await?;
        refuse_to_join(&members, name, &member.keys)?;
        let whole = match s.ledger {
            LedgerWrites::Both => true,
            LedgerWrites::Apart => false,
            LedgerWrites::Auto => ledger.whole_groups.values().flatten().any(|n| n != name),
        };
        self.writes_whole.store(whole, Ordering::SeqCst);
        self.leave_other_groups(&client, name, &ledger).await?;
        self.put_trust_entry(&client, name).await?;
        self.register(&client, name, &own, member, &self.sealed(name, member)?)
            .await?;
        if !whole {
            self.leave_the_whole_layout(&client, name, &ledger).await?;
        }
        self.published.send_replace(Some(position));
        self.refusal.send_replace(None);
        self.reread(&client).await?;
        tracing::info!(domain = name, session = ?client.session_id(), "registered in ZooKeeper at {}", self.full_path(&own));

        Session {
            coordinator: self,
            client,
            name,
            own,
            folder,
            member,
            watcher,
            state,
            dirty: false,
            last_publish: Instant::now(),
            link: Link::Up,
            gathering: false,
            last_read: None,
        }
        .run(positions, shutdown)
        .await
    }
}

/// Whether a session in this state follows changes.
fn following(state: zk::SessionState) -> bool {
    matches!(
        state,
        zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
    )
}

/// What a domain writes about itself in ZooKeeper.
trait Registered: serde::Serialize + serde::de::DeserializeOwned {
    fn address(&self) -> &str;
}

impl Registered for Member {
    fn address(&self) -> &str {
        &self.address
    }
}

impl Registered for Known {
    fn address(&self) -> &str {
        &self.member.address
    }
}

/// The seal beside what a domain wrote about itself.
#[derive(serde::Deserialize)]
struct Proof {
    #[serde(default)]
    proof: String,
}

/// What `name`'s znode in `folder` says, if it is readable and `admission`
/// takes it in (sealed with the cluster secret, https:// under TLS); what
/// is not is left out, and logged: a registration anyone could have
/// written in a folder someone left open must not make a domain send its
/// credential, or a person's identity number, to whoever wrote it.
fn admit<T: Registered>(admission: &Admission, folder: &str, name: &str, data: &[u8]) -> Option<T> {
    let value = match serde_json::from_slice::<T>(data) {
        Ok(value) => value,
        Err(e) => {
            tracing::warn!(domain = %name, error = %e, "unreadable znode in {folder}");
            return None;
        }
    };
    let proof = serde_json::from_slice::<Proof>(data).map_or_else(|_| String::new(), |p| p.proof);
    // The seal covers the value as its writer serialised it, which the
    // same types serialise identically here.
    let bytes = serde_json::to_vec(&value).ok()?;
    match admission.refuse(name, value.address(), &bytes, &proof) {
        None => Some(value),
        Some(why) => {
            tracing::warn!(domain = %name, address = value.address(), "ignoring its znode in {folder}: {why}");
            None
        }
    }
}

impl Coordinator for ZooKeeperCoordinator {
    fn run(
        self: Arc<Self>,
        name: DomainName,
        mut member: Member,
        mut positions: watch::Receiver<Position>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        async move {
            // Jittered: after a ZooKeeper restart or leader change,
            // thousands of domains then do not reconnect, register and
            // read the membership in step.
            let mut backoff = Backoff::new(Duration::from_millis(100), MAX_RETRY);
            loop {
                // A panic in the client library must not end membership
                // for good: it counts as a lost session.
                let session = std::panic::AssertUnwindSafe(self.session(
                    &name,
                    &mut member,
                    &mut positions,
                    &shutdown,
                ))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| {
                    tracing::error!("ZooKeeper session task panicked; starting a new session");
                    Ok(End::Lost)
                });
                match session {
                    Ok(End::Shutdown) => break,
                    Ok(End::Lost) => {
                        backoff.reset();
                        // Not at once: every domain lost its session at the
                        // same moment as this one.
                        tokio::select! {
                            () = sleep(backoff.wait()) => {}
                            () = shutdown.cancelled() => break,
                        }
                    }
                    Err(
                        e @ (CoordError::ReadingDiffers { .. }
                        | CoordError::OpenFolder { .. }
                        | CoordError::ParentLocked { .. }),
                    ) => {
                        // A configuration to fix, not an outage: said
                        // loudly, tried again now and then.
                        tracing::error!(error = %e, retry_s = REFUSED_RETRY.as_secs(), "not joining the cluster");
                        self.refusal.send_replace(Some(e.to_string()));
                        tokio::select! {
                            () = sleep(REFUSED_RETRY) => {}
                            () = shutdown.cancelled() => break,
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, retry_ms = u64::try_from(backoff.current().as_millis()).unwrap_or(u64::MAX), "ZooKeeper unavailable");
                        tokio::select! {
                            () = sleep(backoff.wait()) => {}
                            () = shutdown.cancelled() => break,
                        }
                    }
                }
                *self.client.lock() = None;
                self.view.send_modify(View::lose);
                if shutdown.is_cancelled() {
                    break;
                }
            }
            *self.client.lock() = None;
            self.view.send_modify(View::lose);
        }
        .boxed()
    }

    fn view(&self) -> watch::Receiver<View> {
        self.view.subscribe()
    }

    fn published(&self) -> watch::Receiver<Option<Position>> {
        self.published.subscribe()
    }

    fn read_current(&self) -> BoxFuture<'_, Result<Arc<Roster>, CoordError>> {
        let client = self.client.lock().clone();
        let limit = self.settings.session_timeout.min(Duration::from_secs(2));
        async move {
            let client = client.ok_or(CoordError::NoSession)?;
            if !self.view.borrow().connected {
                return Err(CoordError::Disconnected);
            }
            let roster = timeout(limit, self.read_ledger(&client))
                .await
                .map_err(|_| CoordError::Timeout(limit))??;
            self.take_positions(&roster);
            Ok(roster)
        }
        .boxed()
    }

    fn describe(&self) -> String {
        format!(
            "zookeeper {} (cluster {}, group {})",
            self.settings.connect, self.settings.cluster, self.settings.group
        )
    }

    fn forget<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CoordError>> {
        let client = self.client.lock().clone();
        async move {
            // From the CLI, no session runs: one is opened for this.
            let client = match client {
                Some(client) => client,
                None => {
                    let limit = self.settings.session_timeout * 2;
                    timeout(limit, self.connect())
                        .await
                        .map_err(|_| CoordError::Timeout(limit))??
                }
            };
            self.retire(&client, name).await
        }
        .boxed()
    }

    fn set_trust_entry(&self, entry: ArchiveEntry) {
        *self.trust_entry.lock() = Some(entry);
    }

    fn trust_entries(&self) -> BoxFuture<'_, Result<Vec<ArchiveEntry>, CoordError>> {
        self.read_trust_entries()
    }
}
