//! The in-process coordinator: every domain of one process shares a hub.
//! Publication is immediate and the view always current.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::coordinator::{
    anchor_moves_forward, refuse_to_join, AuditAnchor, CoordError, Coordinator, Known, Member,
    Roster, View,
};
use crate::local::audit::AuditHead;
use crate::local::domain::Position;
use crate::local::domain_name::DomainName;
use tokio_util::sync::CancellationToken;
use xarchive_seal::ArchiveEntry;

/// The shared membership of one process.
pub struct Hub {
    /// The registered domains, and every domain's last position.
    members: Mutex<(BTreeMap<DomainName, Member>, Roster)>,
    view: watch::Sender<View>,
    /// Each domain's audit head, as last anchored.
    anchors: Mutex<BTreeMap<String, AuditHead>>,
    /// Each domain's entry in the trust list.
    trust: Mutex<BTreeMap<String, ArchiveEntry>>,
}

impl Hub {
    pub fn new() -> Arc<Hub> {
        Arc::new(Hub {
            members: Mutex::default(),
            view: watch::channel(View::of(BTreeMap::new())).0,
            anchors: Mutex::new(BTreeMap::new()),
            trust: Mutex::new(BTreeMap::new()),
        })
    }

    /// A coordinator for one domain of this hub.
    pub fn coordinator(self: &Arc<Self>) -> Arc<InProcessCoordinator> {
        Arc::new(InProcessCoordinator {
            hub: self.clone(),
            published: watch::channel(None).0,
        })
    }

    fn update<T>(&self, f: impl FnOnce(&mut BTreeMap<DomainName, Member>, &mut Roster) -> T) -> T {
        let mut guard = self.members.lock();
        let (members, roster) = &mut *guard;
        let out = f(members, roster);
        let members = members.clone();
        self.view.send_modify(|v| v.replace_members(members));
        out
    }
}

pub struct InProcessCoordinator {
    hub: Arc<Hub>,
    published: watch::Sender<Option<Position>>,
}

impl Coordinator for InProcessCoordinator {
    fn run(
        self: Arc<Self>,
        name: DomainName,
        mut member: Member,
        mut positions: watch::Receiver<Position>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        async move {
            let members = self.hub.members.lock().0.clone();
            if let Err(e) = refuse_to_join(&members, &name, &member.keys) {
                // One process, one configuration: this is a test or a
                // mistake in code, never fixed by waiting.
                tracing::error!(error = %e, "not joining the cluster");
                return;
            }
            loop {
                let position = *positions.borrow_and_update();
                member.epoch = position.epoch;
                member.version = position.version;
                self.hub.update(|members, r| {
                    let known = Known {
                        member: member.clone(),
                        departed: false,
                        retired: false,
                    };
                    r.known.insert(name.clone(), known);
                    members.insert(name.clone(), member.clone());
                });
                self.published.send_replace(Some(position));
                tokio::select! {
                    changed = positions.changed() => if changed.is_err() { break },
                    () = shutdown.cancelled() => break,
                }
            }
            // Everything it acknowledged was published before it left.
            self.hub.update(|members, r| {
                if let Some(member) = members.remove(&name) {
                    let known = Known {
                        member,
                        departed: true,
                        retired: false,
                    };
                    r.known.insert(name.clone(), known);
                }
            });
        }
        .boxed()
    }

    fn view(&self) -> watch::Receiver<View> {
        self.hub.view.subscribe()
    }

    fn published(&self) -> watch::Receiver<Option<Position>> {
        self.published.subscribe()
    }

    fn read_current(&self) -> BoxFuture<'_, Result<Arc<Roster>, CoordError>> {
        let roster = Arc::new(self.hub.members.lock().1.clone());
        async move { Ok(roster) }.boxed()
    }

    fn describe(&self) -> String {
        "in-process".into()
    }

    fn forget<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CoordError>> {
        let result = self.hub.update(|members, r| {
            if members.contains_key(name) {
                return Err(CoordError::StillRegistered(name.to_owned()));
            }
            let known = r
                .known
                .get_mut(name)
                .ok_or_else(|| CoordError::UnknownDomain(name.to_owned()))?;
            known.retired = true;
            Ok(())
        });
        async move { result }.boxed()
    }

    fn set_trust_entry(&self, entry: ArchiveEntry) {
        self.hub.trust.lock().insert(entry.domain.clone(), entry);
    }

    fn trust_entries(&self) -> BoxFuture<'_, Result<Vec<ArchiveEntry>, CoordError>> {
        let entries = self.hub.trust.lock().values().cloned().collect();
        async move { Ok(entries) }.boxed()
    }
}

impl AuditAnchor for InProcessCoordinator {
    fn anchor_audit<'a>(
        &'a self,
        name: &'a str,
        head: &'a AuditHead,
    ) -> BoxFuture<'a, Result<(), CoordError>> {
        let mut anchors = self.hub.anchors.lock();
        let result = anchor_moves_forward(anchors.get(name), head).map(|()| {
            anchors.insert(name.to_owned(), head.clone());
        });
        async move { result }.boxed()
    }

    fn audit_anchor<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<AuditHead>, CoordError>> {
        let anchor = self.hub.anchors.lock().get(name).cloned();
        async move { Ok(anchor) }.boxed()
    }
}
