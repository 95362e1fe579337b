//! The ZooKeeper coordinator against a real server, many domains in one
//! process: what following the membership costs ZooKeeper as the number
//! of domains grows, counted in requests on the wire.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use xarchive_node::cluster::{Coordinator, Member, View, ZkSettings, ZooKeeperCoordinator};
use xarchive_node::security::member::{Admission, MemberKey};
use xarchive_node::{FilterKind, Position};
use xarchive_testkit::{LoopbackLink, ZooKeeperServer};

fn settings(connect: String, cluster: &str) -> ZkSettings {
    ZkSettings {
        connect,
        cluster: cluster.into(),
        group: "00".into(),
        // Long enough that no ping falls inside what a test counts.
        session_timeout: Duration::from_secs(60),
        publish_interval: Duration::from_millis(20),
        credentials: None,
        admission: Admission {
            key: Some(MemberKey::derive(cluster, "secret")),
            https_only: false,
        },
    }
}

/// A member at an address nobody answers: only its registration counts.
fn member(i: usize) -> Member {
    Member {
        address: format!("http://127.0.0.1:{}", 1 + i),
        kind: FilterKind::Counting,
        epoch: 7,
        version: i as u64,
        keys: String::new(),
        signing_key: String::new(),
    }
}

/// Runs `coordinator` as domain `name` until `stop`.
fn run(
    coordinator: Arc<ZooKeeperCoordinator>,
    name: String,
    i: usize,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let (positions, receiver) = watch::channel(Position {
        epoch: 7,
        version: i as u64,
    });
    let stop = stop.clone();
    tokio::spawn(async move {
        coordinator.run(name, member(i), receiver, stop).await;
        drop(positions);
    })
}

/// Waits until `view` follows ZooKeeper with `members` members.
async fn until_following(view: &mut watch::Receiver<View>, members: usize) {
    view.wait_for(|v| v.connected && v.members.len() == members)
        .await
        .expect("the coordinator runs");
}

/// Requests sent to ZooKeeper by one domain joining a cluster of `others`,
/// then by the same domain reconnecting after its connection was cut.
async fn joining_and_reconnecting(
    zk: &ZooKeeperServer,
    cluster: &str,
    others: usize,
) -> (u64, u64) {
    let stop = CancellationToken::new();
    for i in 0..others {
        let others = ZooKeeperCoordinator::new(settings(zk.connect_string(), cluster));
        let mut view = others.view();
        run(others, format!("D{i:03}"), i, &stop);
        until_following(&mut view, i + 1).await;
    }
    let link = LoopbackLink::to(&zk.connect_string()).expect("a link to ZooKeeper");
    let joiner = ZooKeeperCoordinator::new(settings(link.address().to_owned(), cluster));
    let mut view = joiner.view();
    run(joiner, "joiner".into(), others, &stop);
    until_following(&mut view, others + 1).await;
    let joined = link.frames_sent();

    link.cut();
    view.wait_for(|v| !v.connected).await.expect("runs");
    link.heal();
    let before = link.frames_sent();
    until_following(&mut view, others + 1).await;
    let reconnected = link.frames_sent() - before;
    stop.cancel();
    (joined, reconnected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_and_reconnecting_read_the_membership_in_a_few_requests_whatever_the_number_of_domains(
) {
    let zk = ZooKeeperServer::start();
    let (join_3, reconnect_3) = joining_and_reconnecting(&zk, "three", 3).await;
    let (join_40, reconnect_40) = joining_and_reconnecting(&zk, "forty", 40).await;
    eprintln!("requests to join: {join_3} among 3, {join_40} among 40; to reconnect: {reconnect_3} and {reconnect_40}");
    // Reading each member's znode, as before the ledger held them, cost
    // two requests per member to join and one to reconnect: measured so,
    // 20 and 94 to join, 9 and 48 to reconnect. The slack is for a
    // reconnection that takes the path of a new session.
    assert!(
        join_40 <= join_3 + 2,
        "join: {join_3} among 3, {join_40} among 40"
    );
    assert!(
        reconnect_40 <= reconnect_3.max(join_3) + 2,
        "reconnect: {reconnect_3} among 3, {reconnect_40} among 40"
    );
    assert!(join_40 < 40 && reconnect_40 < 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_moved_to_another_group_is_known_by_its_entry_there_alone() {
    let zk = ZooKeeperServer::start();
    let stop = CancellationToken::new();
    let reader = ZooKeeperCoordinator::new(settings(zk.connect_string(), "moves"));
    let mut view = reader.view();
    run(reader.clone(), "reader".into(), 0, &stop);
    until_following(&mut view, 1).await;

    let in_group = |group: &str| ZkSettings {
        group: group.into(),
        ..settings(zk.connect_string(), "moves")
    };
    let first = CancellationToken::new();
    let moving = run(
        ZooKeeperCoordinator::new(in_group("11")),
        "mover".into(),
        5,
        &first,
    );
    until_following(&mut view, 2).await;
    first.cancel();
    moving.await.expect("it leaves");
    view.wait_for(|v| v.members.len() == 1).await.expect("runs");

    // The same domain, now in group 22 (its province changed), a version on.
    run(
        ZooKeeperCoordinator::new(in_group("22")),
        "mover".into(),
        6,
        &stop,
    );
    until_following(&mut view, 2).await;
    let roster = reader.read_current().await.expect("the ledger is read");
    let mover = roster.known.get("mover").expect("known by its new entry");
    assert_eq!(mover.member.version, 6);
    assert!(!mover.departed);

    let client = zookeeper_client::Client::connect(&zk.connect_string())
        .await
        .expect("connects");
    let (old, _) = client
        .get_data("/xarchive/moves/positions/11")
        .await
        .expect("the old group's znode stays");
    let old: serde_json::Value = serde_json::from_slice(&old).expect("JSON");
    assert!(
        !old.to_string().contains("mover"),
        "the old group still holds it: {old}"
    );
    stop.cancel();
}
