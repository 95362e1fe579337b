//! Membership: who the domains are, where to reach them, and where their
//! filters stand. Two implementations: in-process (one machine, the
//! embedded default) and ZooKeeper.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::local::audit::AuditHead;
use crate::local::domain::Position;
use crate::local::domain_name::DomainName;
use crate::local::filter::FilterKind;
use tokio_util::sync::CancellationToken;
use xarchive_seal::ArchiveEntry;

/// What a domain announces about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Base URL of its HTTP API.
    pub address: String,
    pub kind: FilterKind,
    /// A decimal string in the znode's JSON (it exceeds 2^53), read from a
    /// number too (as written before).
    #[serde(with = "crate::local::epoch::u64_string")]
    pub epoch: u64,
    pub version: u64,
    /// The fingerprint of the key types it declares (`KeyTypes::fingerprint`;
    /// empty from a domain older than keys).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub keys: String,
    /// Written by domains of before the trust list (the hex of their
    /// Ed25519 key): read so that their entries still check against
    /// their seals; empty from now on (keys are in the trust list,
    /// [`Coordinator::publish_trust_entry`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signing_key: String,
}

impl Member {
    pub fn position(&self) -> Position {
        Position {
            epoch: self.epoch,
            version: self.version,
        }
    }
}

/// How one domain stands after a change of the view.
#[derive(Clone, Debug, PartialEq)]
pub enum MemberChange {
    /// It is a member, with what it publishes now (new, or changed).
    Present(DomainName, Member),
    /// It is not a member now.
    Gone(DomainName),
}

impl MemberChange {
    pub fn name(&self) -> &DomainName {
        match self {
            MemberChange::Present(name, _) | MemberChange::Gone(name) => name,
        }
    }
}

/// The domains as the coordinator last reported them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View {
    /// Read freely; changed only through [`put`](Self::put),
    /// [`remove`](Self::remove) and [`replace_members`](Self::replace_members),
    /// which keep the revisions that let a follower take in only what
    /// changed.
    pub members: BTreeMap<DomainName, Member>,
    /// Bumped at every change of `members`.
    revision: u64,
    /// Each name's last change (a member put or removed), by revision:
    /// with 3 301 members, a follower that rescanned the whole view at
    /// each of a nation's thousand publications a second spent most of a
    /// core on it (docs/SCALING.md).
    changes: BTreeMap<u64, DomainName>,
    revision_of: BTreeMap<DomainName, u64>,
    /// Whether changes are being followed right now (for ZooKeeper: the
    /// session is connected). While false the view may be behind, and
    /// writes are refused.
    pub connected: bool,
}

impl View {
    /// A connected view of these members.
    pub fn of(members: BTreeMap<DomainName, Member>) -> Self {
        let mut view = View {
            connected: true,
            ..View::default()
        };
        view.replace_members(members);
        view
    }

    /// The revision of the last change of `members`.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// How every domain but `me` put or removed after `revision`, or
    /// named in `also`, stands now: each once, in name order. A follower
    /// takes in only these, not the whole view (with 3 301 members and a
    /// thousand publications a second, rescanning it cost most of a core).
    pub fn changes_since(
        &self,
        revision: u64,
        me: &str,
        also: impl IntoIterator<Item = DomainName>,
    ) -> Vec<MemberChange> {
        let mut names: BTreeSet<&DomainName> = self
            .changes
            .range(revision.saturating_add(1)..)
            .map(|(_, name)| name)
            .collect();
        let also: Vec<DomainName> = also.into_iter().collect();
        names.extend(also.iter());
        names
            .into_iter()
            .filter(|name| *name != me)
            .map(|name| match self.members.get(name) {
                Some(member) => MemberChange::Present(name.clone(), member.clone()),
                None => MemberChange::Gone(name.clone()),
            })
            .collect()
    }

    fn touch(&mut self, name: &DomainName) {
        self.revision += 1;
        if let Some(old) = self.revision_of.insert(name.clone(), self.revision) {
            self.changes.remove(&old);
        }
        self.changes.insert(self.revision, name.clone());
    }

    /// Sets a member (a change only if it differs).
    pub fn put(&mut self, name: &DomainName, member: Member) {
        if self.members.get(name) != Some(&member) {
            self.members.insert(name.clone(), member);
            self.touch(name);
        }
    }

    pub fn remove(&mut self, name: &DomainName) {
        if self.members.remove(name).is_some() {
            self.touch(name);
        }
    }

    /// Makes `members` the whole membership, touching only what differs.
    pub fn replace_members(&mut self, members: BTreeMap<DomainName, Member>) {
        let gone: Vec<DomainName> = self
            .members
            .keys()
            .filter(|n| !members.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.remove(&name);
        }
        for (name, member) in members {
            self.put(&name, member);
        }
    }

    /// Marks the view as no longer following changes.
    pub fn lose(&mut self) {
        self.connected = false;
    }
}

/// Where every domain's filter stands, read from the coordinator itself at
/// one moment (the positions ledger, `ledger.rs`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Roster {
    /// Every domain that has registered in this cluster, registered now
    /// or not (down, paused, cut off, or left), with the last position it
    /// published: a copy at that position holds every write it
    /// acknowledged.
    pub known: BTreeMap<DomainName, Known>,
}

impl Roster {
    /// The domains not retired, by name.
    pub fn active(&self) -> impl Iterator<Item = (&DomainName, &Known)> {
        self.known.iter().filter(|(_, k)| !k.retired)
    }
}

/// Another domain and the address it is asked at: who a lookup, a search
/// or a relay follower calls.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PeerAddress {
    pub name: DomainName,
    pub address: String,
}

impl PeerAddress {
    pub fn new(name: &DomainName, address: impl Into<String>) -> Self {
        PeerAddress {
            name: name.clone(),
            address: address.into(),
        }
    }
}

/// A domain as it last recorded itself in the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Known {
    #[serde(flatten)]
    pub member: Member,
    /// It left cleanly (`member` then holds its final position).
    pub departed: bool,
    /// Retired for good by `xarchive cluster forget`: no longer asked nor
    /// counted, until it registers again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
}

/// What went wrong with the coordinator, by cause; ZooKeeper's own error
/// is kept as the source.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CoordError {
    /// No session now (starting, or a new one being opened).
    #[error("the coordinator cannot be reached: no session")]
    NoSession,
    /// The session's connection is lost for now.
    #[error("the coordinator cannot be reached: the connection is lost")]
    Disconnected,
    #[error("the coordinator did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// A write's position was not confirmed published in time.
    #[error("not published within {} ms", .0.as_millis())]
    NotPublished(Duration),
    #[error("the coordinator stopped")]
    Stopped,
    #[error(
        "ZooKeeper refused access to the cluster's znodes: this domain's cluster secret is not the cluster's"
    )]
    NoAuth,
    #[error("invalid chroot {0:?} in the ZooKeeper connect string")]
    Chroot(String),
    #[error("cannot register {0}: it keeps being replaced")]
    Register(String),
    #[error(
        "refusing to join: domain {other} reads keys or archive numbers otherwise than this \
         domain (its [[keys]] and [ids] have fingerprint {theirs}, this domain's {mine}); every \
         domain of a cluster must declare the same [[keys]] and the same [ids] separator"
    )]
    ReadingDiffers {
        other: String,
        theirs: String,
        mine: String,
    },
    #[error(
        "refusing to join: the cluster's folder {path} is not protected by the cluster's ACL \
         (it has {acl}): someone may have created it to receive the members' registrations and \
         searches. Check who did, delete it (as a ZooKeeper superuser, or with the cluster's \
         credentials) and start again"
    )]
    OpenFolder { path: String, acl: String },
    #[error(
        "cannot create the cluster's folder {folder}: ZooKeeper lets this domain create nothing in \
         {path}, whose ACL is {acl}. Someone set that ACL; it is not about the cluster secret. \
         xarchive needs CREATE there for anyone (it makes such a parent world:anyone:crd); a \
         ZooKeeper superuser, or whoever set it, restores it with `setAcl {path} \
         world:anyone:crd` in zkCli.sh, and the domain tries again every 10 s"
    )]
    ParentLocked {
        folder: String,
        path: String,
        acl: String,
    },
    #[error(
        "the audit log's head anchored in the coordinator ({anchored} entries) is not a point \
         of this domain's log ({mine} entries): the log was cut short, rolled back or replaced"
    )]
    AnchorDisagrees { anchored: u64, mine: u64 },
    #[error("ZooKeeper: {0}")]
    ZooKeeper(#[source] zookeeper_client::Error),
    #[error("no domain named {0} has recorded itself in this cluster")]
    UnknownDomain(String),
    #[error(
        "domain {0} is registered now: stop it (or let its session expire) before forgetting it"
    )]
    StillRegistered(String),
    #[error("the positions ledger: {0}")]
    Ledger(String),
    #[error("the audit head cannot be encoded: {0}")]
    Encode(String),
}

/// Whether `new` may replace the anchor `old`: it goes forward or stays
/// (the same head, written again at the next tick of the cadence), never
/// back nor sideways (equal lengths must be the same head). The audit
/// log's own chain proves that `new` extends `old` when the domain checks
/// itself against `old` (`AuditLog::verify`); this refuses the plain
/// cases of a rolled-back log re-anchoring itself.
pub(crate) fn anchor_moves_forward(
    old: Option<&AuditHead>,
    new: &AuditHead,
) -> Result<(), CoordError> {
    match old {
        Some(old)
            if old.entries > new.entries
                || (old.entries == new.entries && old.hash != new.hash) =>
        {
            Err(CoordError::AnchorDisagrees {
                anchored: old.entries,
                mine: new.entries,
            })
        }
        _ => Ok(()),
    }
}

/// Why `me`, declaring the key types and ID profile of fingerprint `mine`
/// (`id_profile::cluster_fingerprint`), must not join `members`: one of
/// them declares others (a search would then miss the records it indexes
/// under a type this domain does not know, or normalises otherwise, and a
/// lookup would read a typed archive number otherwise). Domains older than
/// keys declare none and pass.
pub(crate) fn refuse_to_join(
    members: &BTreeMap<DomainName, Member>,
    me: &str,
    mine: &str,
) -> Result<(), CoordError> {
    match members.iter().find(|(name, m)| {
        name.as_str() != me && !m.keys.is_empty() && !mine.is_empty() && m.keys != mine
    }) {
        Some((other, m)) => Err(CoordError::ReadingDiffers {
            other: other.to_string(),
            theirs: m.keys.clone(),
            mine: mine.to_owned(),
        }),
        None => Ok(()),
    }
}

/// Keeps each domain's audit head outside its disk, so that a log later
/// cut short, rolled back or replaced is caught. Every coordinator is one
/// (the anchor lives in the folder the cluster sealed); the node holds it
/// through this trait alone, and calls it on a fixed cadence.
pub trait AuditAnchor: Send + Sync + 'static {
    /// Records `head` as where `name`'s audit log has reached, outside
    /// that domain's disk, so that a log later cut short, rolled back or
    /// replaced is caught; refused ([`CoordError::AnchorDisagrees`]) when
    /// the head recorded is not behind it or the same
    /// ([`anchor_moves_forward`]). Written at every call, even unchanged,
    /// in as many bytes: the caller calls it on a fixed cadence, so that
    /// what an outsider sees of it does not follow the searches.
    fn anchor_audit<'a>(
        &'a self,
        name: &'a str,
        head: &'a AuditHead,
    ) -> BoxFuture<'a, Result<(), CoordError>>;

    /// The audit head last anchored for `name`, if any.
    fn audit_anchor<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<AuditHead>, CoordError>>;
}

/// Joins a domain to its cluster.
///
/// A write is acknowledged only once the position that includes it has
/// been published ([`Coordinator::published`]), and a lookup that found
/// nothing reads the members' positions from the coordinator itself
/// ([`Coordinator::read_current`]): together these mean that a replica
/// whose position equals the one read is known to include every write
/// acknowledged before the lookup began, so it can answer "not here".
pub trait Coordinator: AuditAnchor + Send + Sync + 'static {
    /// Registers `name` as `member`, republishes as `positions` moves
    /// (throttled), follows the membership into [`view`](Self::view),
    /// registers again after losing its session, and deregisters when
    /// `shutdown` fires. Runs until then.
    fn run(
        self: Arc<Self>,
        name: DomainName,
        member: Member,
        positions: watch::Receiver<Position>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, ()>;

    /// The membership as last known.
    fn view(&self) -> watch::Receiver<View>;

    /// This domain's own position last recorded in the coordinator
    /// (published), which writes wait for before they are acknowledged.
    fn published(&self) -> watch::Receiver<Option<Position>>;

    /// Every domain's last published position read from the coordinator,
    /// reflecting every publication completed before this call, in a
    /// number of requests that does not grow with the domains (ZooKeeper:
    /// a `sync` and one multi-read of the groups' stamps, then only the
    /// groups that changed). An error means the positions cannot be
    /// confirmed now. Shared: the same `Arc` as the last read's while
    /// nothing changed.
    fn read_current(&self) -> BoxFuture<'_, Result<Arc<Roster>, CoordError>>;

    /// A line for logs and `/v1/cluster`.
    fn describe(&self) -> String;

    /// Retires `name` for good: lookups and searches no longer ask it nor
    /// wait for it. Refused while it is registered
    /// ([`CoordError::StillRegistered`]): a running domain would hold
    /// records nobody asked for. It takes part again if it registers.
    fn forget<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CoordError>>;

    /// Sets this domain's entry in the cluster's trust list (its real
    /// name, address and seal keys), published sealed with the cluster
    /// secret as its registration is, before each registration: a peer
    /// that finds the domain registered finds its keys. Called before
    /// [`run`](Self::run). Kept after it leaves: what it sealed still
    /// checks.
    fn set_trust_entry(&self, entry: ArchiveEntry);

    /// Every domain's trust entry whose seal holds.
    fn trust_entries(&self) -> BoxFuture<'_, Result<Vec<ArchiveEntry>, CoordError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audit_anchor_moves_only_forward() {
        let head = |entries, hash: &str| AuditHead {
            entries,
            hash: hash.into(),
        };
        assert!(anchor_moves_forward(None, &head(0, "g")).is_ok());
        assert!(anchor_moves_forward(Some(&head(2, "b")), &head(3, "c")).is_ok());
        // The same head again: written again, at the cadence's next tick.
        assert!(anchor_moves_forward(Some(&head(3, "c")), &head(3, "c")).is_ok());
        // Back (a log cut short or rolled back), or sideways (replaced).
        for refused in [head(2, "b"), head(3, "x")] {
            assert!(matches!(
                anchor_moves_forward(Some(&head(3, "c")), &refused),
                Err(CoordError::AnchorDisagrees { anchored: 3, .. })
            ));
        }
    }

    fn member(keys: &str) -> Member {
        Member {
            address: "http://x".into(),
            kind: FilterKind::Counting,
            epoch: 1,
            version: 1,
            keys: keys.into(),
            signing_key: String::new(),
        }
    }

    #[test]
    fn a_domain_refuses_to_join_members_declaring_other_key_types() {
        let members: BTreeMap<DomainName, Member> =
            [("A".into(), member("f1")), ("OLD".into(), member(""))].into();
        assert!(refuse_to_join(&members, "B", "f1").is_ok());
        let refused = refuse_to_join(&members, "B", "f2").unwrap_err();
        assert!(
            matches!(&refused, CoordError::ReadingDiffers { other, .. } if other == "A"),
            "{refused}"
        );
        // Its own earlier registration and domains older than keys do not count.
        let only_self_and_old: BTreeMap<DomainName, Member> =
            [("B".into(), member("f0")), ("OLD".into(), member(""))].into();
        assert!(refuse_to_join(&only_self_and_old, "B", "f2").is_ok());
    }

    /// What a follower holds after taking in the names changed since
    /// `seen`, as the replica sync does.
    fn take_in(view: &View, follower: &mut BTreeMap<DomainName, Member>, seen: &mut u64) {
        for change in view.changes_since(*seen, "", []) {
            match change {
                MemberChange::Present(name, m) => follower.insert(name, m),
                MemberChange::Gone(name) => follower.remove(&name),
            };
        }
        *seen = view.revision();
    }

    #[test]
    fn changes_leave_out_this_domain_and_add_the_names_asked_for_each_once() {
        let mut view = View::of([("A".into(), at(1)), ("B".into(), at(1))].into());
        let seen = view.revision();
        view.put(&"A".into(), at(2));
        view.remove(&"B".into());
        view.put(&"ME".into(), at(1));
        assert_eq!(
            view.changes_since(seen, "ME", ["A".into(), "Z".into()]),
            vec![
                MemberChange::Present("A".into(), at(2)),
                MemberChange::Gone("B".into()),
                MemberChange::Gone("Z".into()),
            ]
        );
        assert!(view.changes_since(view.revision(), "ME", []).is_empty());
    }

    #[derive(Clone, Debug)]
    enum Change {
        Put(u8, u64),
        Remove(u8),
        Replace(Vec<(u8, u64)>),
    }

    fn change() -> impl proptest::strategy::Strategy<Value = Change> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0u8..6, 0u64..3).prop_map(|(n, v)| Change::Put(n, v)),
            2 => (0u8..6).prop_map(Change::Remove),
            1 => proptest::collection::vec((0u8..6, 0u64..3), 0..6).prop_map(Change::Replace),
        ]
    }

    fn at(version: u64) -> Member {
        Member {
            version,
            ..member("")
        }
    }

    proptest::proptest! {
        #[test]
        fn a_follower_taking_in_only_what_changed_holds_what_the_view_holds(
            steps in proptest::collection::vec((change(), proptest::bool::ANY), 1..60)
        ) {
            let mut view = View::default();
            let mut follower = BTreeMap::new();
            let mut seen = 0;
            for (change, look) in steps {
                let before = view.revision();
                let unchanged = view.members.clone();
                match change {
                    Change::Put(n, v) => view.put(&DomainName::from(format!("d{n}").as_str()), at(v)),
                    Change::Remove(n) => view.remove(&DomainName::from(format!("d{n}").as_str())),
                    Change::Replace(all) => view.replace_members(
                        all.into_iter().map(|(n, v)| (DomainName::from(format!("d{n}").as_str()), at(v))).collect(),
                    ),
                }
                // A revision is spent only on a real change.
                proptest::prop_assert_eq!(view.revision() == before, view.members == unchanged);
                if look {
                    take_in(&view, &mut follower, &mut seen);
                    proptest::prop_assert_eq!(&follower, &view.members);
                }
            }
            take_in(&view, &mut follower, &mut seen);
            proptest::prop_assert_eq!(&follower, &view.members);
        }
    }
}
