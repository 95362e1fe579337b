//! The in-process coordinator: every domain of one process shares a hub.
//! Publication is immediate and the view always current.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::coordinator::{
    anchor_moves_forward, refuse_to_join, CoordError, Coordinator, Known, Member, Roster, View,
};
use crate::local::audit::AuditHead;
use crate::local::domain::Position;
use tokio_util::sync::CancellationToken;

/// The shared membership of one process.
pub struct Hub {
    roster: Mutex<Roster>,
    view: watch::Sender<View>,
    /// Each domain's audit head, as last anchored.
    anchors: Mutex<BTreeMap<String, AuditHead>>,
}

impl Hub {
    pub fn new() -> Arc<Hub> {
        Arc::new(Hub {
            roster: Mutex::new(Roster::default()),
            view: watch::channel(View::of(BTreeMap::new())).0,
            anchors: Mutex::new(BTreeMap::new()),
        })
    }

    /// A coordinator for one domain of this hub.
    pub fn coordinator(self: &Arc<Self>) -> Arc<InProcessCoordinator> {
        Arc::new(InProcessCoordinator {
            hub: self.clone(),
            published: watch::channel(None).0,
        })
    }

    fn update(&self, f: impl FnOnce(&mut Roster)) {
        let mut roster = self.roster.lock();
        f(&mut roster);
        let members = roster.members.clone();
        self.view.send_modify(|v| v.replace_members(members));
    }
}

pub struct InProcessCoordinator {
    hub: Arc<Hub>,
    published: watch::Sender<Option<Position>>,
}

impl Coordinator for InProcessCoordinator {
    fn run(
        self: Arc<Self>,
        name: String,
        mut member: Member,
        mut positions: watch::Receiver<Position>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        async move {
            let members = self.hub.roster.lock().members.clone();
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
                self.hub.update(|r| {
                    let known = Known {
                        member: member.clone(),
                        departed: false,
                    };
                    r.known.insert(name.clone(), known);
                    r.members.insert(name.clone(), member.clone());
                });
                self.published.send_replace(Some(position));
                tokio::select! {
                    changed = positions.changed() => if changed.is_err() { break },
                    _ = shutdown.cancelled() => break,
                }
            }
            // Everything it acknowledged was published before it left.
            self.hub.update(|r| {
                if let Some(member) = r.members.remove(&name) {
                    let known = Known {
                        member,
                        departed: true,
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

    fn read_current(&self) -> BoxFuture<'_, Result<Roster, CoordError>> {
        let roster = self.hub.roster.lock().clone();
        async move { Ok(roster) }.boxed()
    }

    fn describe(&self) -> String {
        "in-process".into()
    }

    fn anchor_audit<'a>(
        &'a self,
        name: &'a str,
        head: &'a AuditHead,
    ) -> BoxFuture<'a, Result<(), CoordError>> {
        let mut anchors = self.hub.anchors.lock();
        let result = anchor_moves_forward(anchors.get(name), head).map(|forward| {
            if forward {
                anchors.insert(name.to_owned(), head.clone());
            }
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
