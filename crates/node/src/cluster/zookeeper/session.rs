//! One ZooKeeper session once registered: what it does at each event (a
//! probe while disconnected, shutdown, a new own position, the publish
//! interval, watch events, the connection's state), one method each.

use std::ops::ControlFlow;

use futures::FutureExt;
use tokio::sync::watch;
use tokio::time::{sleep_until, timeout, Duration, Instant};
use tokio_util::sync::CancellationToken;
use zookeeper_client as zk;

use super::{
    End, Link, Registration, Unpublished, ZooKeeperCoordinator, GIVE_UP_AFTER, PROBE_EVERY,
};
use crate::cluster::coordinator::{CoordError, Known, Member, View};
use crate::local::domain::Position;

/// What a handler decides: go on, or end the session.
type Step = Result<ControlFlow<End>, CoordError>;

/// A registered session and what its loop keeps between events.
pub(super) struct Session<'a> {
    pub coordinator: &'a ZooKeeperCoordinator,
    pub client: zk::Client,
    pub name: &'a str,
    /// This domain's znode.
    pub own: String,
    /// The membership's folder, watched.
    pub folder: String,
    pub member: &'a mut Member,
    pub watcher: zk::PersistentWatcher,
    pub state: zk::StateWatcher,
    /// A new own position waits to be published.
    pub dirty: bool,
    pub last_publish: Instant,
    pub link: Link,
    /// The last read of watch events found more than one.
    pub gathering: bool,
    pub last_read: Option<Instant>,
}

impl Session<'_> {
    /// Until the session is lost or shutdown comes.
    pub async fn run(
        mut self,
        positions: &mut watch::Receiver<Position>,
        shutdown: &CancellationToken,
    ) -> Result<End, CoordError> {
        let mut probe = tokio::time::interval(PROBE_EVERY);
        loop {
            let publish_at = self.last_publish + self.coordinator.settings.publish_interval;
            let step = tokio::select! {
                _ = probe.tick(), if self.link != Link::Up => Ok(self.on_probe().await),
                () = shutdown.cancelled() => Ok(self.on_shutdown().await),
                changed = positions.changed() => Ok(self.on_position(changed.is_ok())),
                () = sleep_until(publish_at), if self.dirty => {
                    let position = *positions.borrow_and_update();
                    self.on_publish_due(position).await
                }
                event = self.watcher.changed() => Ok(self.on_watch_event(event).await),
                state = self.state.changed() => Ok(self.on_state(state).await),
            };
            if let ControlFlow::Break(end) = step? {
                return Ok(end);
            }
        }
    }

    /// While disconnected: the client library waits longer and longer
    /// between reconnection attempts (up to the session timeout), and
    /// writes are refused meanwhile. Once ZooKeeper has accepted
    /// connections for a moment while this session is still disconnected,
    /// a new session is opened instead (registering again is safe; see
    /// `register`).
    async fn on_probe(&mut self) -> ControlFlow<End> {
        if !self.coordinator.reachable().await {
            self.link = Link::Down {
                answering_since: None,
            };
            return ControlFlow::Continue(());
        }
        let since = match self.link {
            Link::Down {
                answering_since: Some(since),
            } => since,
            _ => Instant::now(),
        };
        self.link = Link::Down {
            answering_since: Some(since),
        };
        if since.elapsed() >= GIVE_UP_AFTER {
            tracing::info!(
                "ZooKeeper is back; opening a new session instead of waiting for this one"
            );
            return ControlFlow::Break(End::Lost);
        }
        ControlFlow::Continue(())
    }

    /// Leaves cleanly, if ZooKeeper answers within two seconds.
    async fn on_shutdown(&mut self) -> ControlFlow<End> {
        let departing = self
            .coordinator
            .depart(&self.client, self.name, &self.own, self.member);
        let _ = timeout(Duration::from_secs(2), departing).await;
        ControlFlow::Break(End::Shutdown)
    }

    /// A write moved the own position: published at the next interval.
    fn on_position(&mut self, domain_running: bool) -> ControlFlow<End> {
        if !domain_running {
            return ControlFlow::Break(End::Shutdown);
        }
        self.dirty = true;
        ControlFlow::Continue(())
    }

    /// Publishes the own position; the writes up to it are acknowledged
    /// once this succeeds (`published`).
    async fn on_publish_due(&mut self, position: Position) -> Step {
        let coordinator = self.coordinator;
        (self.member.epoch, self.member.version) = (position.epoch, position.version);
        self.last_publish = Instant::now();
        let known = Known {
            member: self.member.clone(),
            departed: false,
            retired: false,
        };
        let published = coordinator
            .publish(
                &self.client,
                self.name,
                &self.own,
                &known,
                Registration::Check,
            )
            .await;
        match published {
            Ok(()) => {}
            Err(Unpublished::Unregistered | Unpublished::AlreadyRegistered) => {
                let data = coordinator.sealed(self.name, self.member)?;
                coordinator
                    .register(&self.client, self.name, &self.own, self.member, &data)
                    .await?;
            }
            Err(Unpublished::SessionLost(e)) => {
                tracing::warn!(error = %e, "ZooKeeper session lost while publishing");
                return Ok(ControlFlow::Break(End::Lost));
            }
            Err(Unpublished::Failed(e)) => {
                tracing::warn!(error = %e, "cannot publish the filter position; will retry");
                return Ok(ControlFlow::Continue(()));
            }
        }
        self.dirty = false;
        coordinator.published.send_replace(Some(position));
        Ok(ControlFlow::Continue(()))
    }

    /// Members changed (a domain registered or left): takes in all the
    /// events that came. While they come faster than they are read (the
    /// last read, just now, found more than one: domains coming back
    /// after an outage), first lets those of one publish interval gather:
    /// one read of the membership instead of ten. An event after a quiet
    /// spell is read at once.
    async fn on_watch_event(&mut self, event: zk::WatchedEvent) -> ControlFlow<End> {
        let coordinator = self.coordinator;
        let interval = coordinator.settings.publish_interval;
        // The watcher also reports the session; after a terminal state it
        // must not be polled again (it would panic).
        if event.event_type == zk::EventType::Session {
            return ended(&event);
        }
        let mut events = vec![event];
        let busy = self
            .last_read
            .is_some_and(|at: Instant| at.elapsed() < 2 * interval);
        if self.gathering && busy {
            tokio::time::sleep(interval).await;
        }
        while let Some(event) = self.watcher.changed().now_or_never() {
            if event.event_type == zk::EventType::Session {
                if ended(&event).is_break() {
                    return ControlFlow::Break(End::Lost);
                }
                break;
            }
            events.push(event);
        }
        self.gathering = events.len() > 1;
        self.last_read = Some(Instant::now());
        if let Err(e) = coordinator.on_events(&self.client, &events).await {
            // The view may have missed a change: read it all again, or
            // start over in a new session.
            coordinator.view.send_modify(View::lose);
            tracing::warn!(error = %e, "cannot read a member's znode; reading the membership again");
            if coordinator.reread(&self.client).await.is_err() {
                return ControlFlow::Break(End::Lost);
            }
        }
        ControlFlow::Continue(())
    }

    /// The connection's state changed.
    async fn on_state(&mut self, state: zk::SessionState) -> ControlFlow<End> {
        match state {
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                // The persistent watch is not set again on the new
                // connection by zookeeper-client 0.11 (its resend_watches
                // sends persistent watches only when its `index` grows,
                // and it never does), and the server may drop events
                // across a reconnection (ZOOKEEPER-4698): set the watch
                // again ourselves, then read everything. Without both,
                // the view would freeze while looking connected. If
                // either fails, a new session starts from scratch.
                tracing::info!("ZooKeeper connection restored");
                self.link = Link::Up;
                match self
                    .client
                    .watch(&self.folder, zk::AddWatchMode::Persistent)
                    .await
                {
                    Ok(again) => self.watcher = again,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot watch the membership again");
                        return ControlFlow::Break(End::Lost);
                    }
                }
                if let Err(e) = self.coordinator.reread(&self.client).await {
                    tracing::warn!(error = %e, "cannot reread the membership");
                    return ControlFlow::Break(End::Lost);
                }
            }
            zk::SessionState::Disconnected => {
                // The state follower has marked the view lost.
                tracing::warn!("ZooKeeper connection lost; serving from the replicas held");
                self.link = Link::Down {
                    answering_since: None,
                };
            }
            other => {
                tracing::warn!(state = ?other, "ZooKeeper session ended");
                return ControlFlow::Break(End::Lost);
            }
        }
        ControlFlow::Continue(())
    }
}

/// A session event from the watcher: the end of the session if its state
/// is terminal.
fn ended(event: &zk::WatchedEvent) -> ControlFlow<End> {
    if event.session_state.is_terminated() {
        tracing::warn!(state = ?event.session_state, "ZooKeeper session ended");
        return ControlFlow::Break(End::Lost);
    }
    ControlFlow::Continue(())
}
