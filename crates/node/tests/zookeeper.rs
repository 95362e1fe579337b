//! The ZooKeeper coordinator against a real server, many domains in one
//! process: what following the membership costs ZooKeeper as the number
//! of domains grows, counted in requests on the wire; what reading the
//! positions costs in bytes, as groups change; and the two layouts of the
//! positions ledger side by side.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use xarchive_node::cluster::{
    Coordinator, Known, LedgerWrites, Member, View, ZkSettings, ZooKeeperCoordinator,
};
use xarchive_node::security::member::{Admission, MemberKey};
use xarchive_node::{FilterKind, Position};
use xarchive_testkit::{LoopbackLink, ZooKeeperServer};

fn settings(connect: String, cluster: &str) -> ZkSettings {
    ZkSettings {
        connect,
        cluster: cluster.into(),
        group: "00".into(),
        // Long enough that no ping falls inside what a test counts.
        session_timeout: Duration::from_mins(1),
        publish_interval: Duration::from_millis(20),
        credentials: None,
        admission: Admission {
            key: Some(MemberKey::derive(cluster, "secret")),
            https_only: false,
        },
        ledger: LedgerWrites::Auto,
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
        coordinator
            .run(name.parse().unwrap(), member(i), receiver, stop)
            .await;
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
        .get_data("/xarchive/moves/ledger/11/positions")
        .await
        .expect("the old group's znode stays");
    let old: serde_json::Value = serde_json::from_slice(&old).expect("JSON");
    assert!(
        !old.to_string().contains("mover"),
        "the old group still holds it: {old}"
    );
    stop.cancel();
}

/// Runs a coordinator as domain `name` at version `version` of epoch 7
/// until `stop`; its position moves as the returned sender says.
fn running(
    settings: ZkSettings,
    name: &str,
    version: u64,
    stop: &CancellationToken,
) -> (Arc<ZooKeeperCoordinator>, watch::Sender<Position>) {
    let coordinator = ZooKeeperCoordinator::new(settings);
    let (positions, receiver) = watch::channel(Position { epoch: 7, version });
    let member = Member {
        version,
        ..member(usize::try_from(version).unwrap())
    };
    let (c, name, stop) = (coordinator.clone(), name.to_owned(), stop.clone());
    tokio::spawn(async move { c.run(name.parse().unwrap(), member, receiver, stop).await });
    (coordinator, positions)
}

/// A read of the positions begun after `coordinator` published
/// `version`: the roster then says it (publications are followed at
/// once, but a read must never find less than what was published before
/// it began, whatever it held from reads before).
async fn published_at(coordinator: &ZooKeeperCoordinator, version: u64) {
    let mut published = coordinator.published();
    published
        .wait_for(|p| p.is_some_and(|p| p.version >= version))
        .await
        .expect("publishes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_the_positions_costs_the_bytes_of_the_groups_that_changed_and_misses_no_change() {
    let zk = ZooKeeperServer::start();
    let stop = CancellationToken::new();
    let cluster = "bytes";
    let in_group = |group: &str, connect: String| ZkSettings {
        group: group.into(),
        ..settings(connect, cluster)
    };
    // Forty domains in two groups.
    let mut writers = Vec::new();
    for i in 0..40 {
        let group = format!("{}", 11 + i % 2);
        writers.push(running(
            in_group(&group, zk.connect_string()),
            &format!("D{i:03}"),
            1,
            &stop,
        ));
    }
    let link = LoopbackLink::to(&zk.connect_string()).expect("a link to ZooKeeper");
    let (reader, _position) = running(
        in_group("11", link.address().to_owned()),
        "reader",
        1,
        &stop,
    );
    let mut view = reader.view();
    until_following(&mut view, 41).await;
    let measure = |link: &LoopbackLink| (link.bytes_answered(), link.frames_sent());
    let first = reader.read_current().await.expect("read");
    assert_eq!(first.known.len(), 41);
    // (The reader's own reading of the membership after it registered may
    // still be under way: let it end.)
    published_at(&reader, 1).await;
    reader.read_current().await.expect("read");
    let (b0, f0) = measure(&link);
    let again = reader.read_current().await.expect("read");
    let (b1, f1) = measure(&link);
    assert_eq!(again, first);
    let (unchanged_bytes, unchanged_requests) = (b1 - b0, f1 - f0);
    assert!(
        unchanged_requests == 2 && unchanged_bytes < all_lines(&zk, cluster).await / 2,
        "unchanged: {unchanged_requests} requests, {unchanged_bytes} bytes"
    );
    // One group moves: D005 (group 12) publishes version 2.
    let (d5, position) = &writers[5];
    position.send_replace(Position {
        epoch: 7,
        version: 2,
    });
    published_at(d5, 2).await;
    let (b2, f2) = measure(&link);
    let moved = reader.read_current().await.expect("read");
    let (b3, f3) = measure(&link);
    let (changed_bytes, changed_requests) = (b3 - b2, f3 - f2);
    assert_eq!(moved.known["D005"].member.version, 2, "the change is read");
    let (group, all) = lines_bytes(&zk, cluster, "12").await;
    eprintln!(
        "reading the positions of 41 domains in 2 groups: {unchanged_bytes} bytes and {unchanged_requests} requests unchanged, \
         {changed_bytes} bytes and {changed_requests} requests with one group changed; that group's lines are {group} bytes, \
         all groups' {all}",
    );
    // What changed is read, and only that: one more request, with the
    // group's lines, the two stats of its folder and of its lines (68
    // bytes each), and the headers.
    assert_eq!(changed_requests, 3);
    assert!(
        changed_bytes <= unchanged_bytes + group + 256,
        "one group changed: {changed_bytes} bytes, unchanged {unchanged_bytes}, the group's \
         lines {group}, all {all}",
    );
    stop.cancel();
}

/// The bytes of every group's lines in cluster `cluster`.
async fn all_lines(zk: &ZooKeeperServer, cluster: &str) -> u64 {
    lines_bytes(zk, cluster, "").await.1
}

/// The bytes of `group`'s lines, and of every group's, in cluster `cluster`.
async fn lines_bytes(zk: &ZooKeeperServer, cluster: &str, group: &str) -> (u64, u64) {
    let client = zookeeper_client::Client::connect(&zk.connect_string())
        .await
        .expect("connects");
    let folder = format!("/xarchive/{cluster}/ledger");
    let (mut one, mut all) = (0, 0);
    for g in client.list_children(&folder).await.expect("groups") {
        let (data, _) = client
            .get_data(&format!("{folder}/{g}/positions"))
            .await
            .expect("lines");
        all += data.len() as u64;
        if g == group {
            one = data.len() as u64;
        }
    }
    (one, all)
}

/// A domain of an earlier release, as it writes itself into the ledger: a
/// whole entry at `version`, sealed, in group 00's znode.
async fn write_whole_entry(zk: &ZooKeeperServer, cluster: &str, name: &str, version: u64) {
    let client = zookeeper_client::Client::connect(&zk.connect_string())
        .await
        .expect("connects");
    let known = Known {
        member: Member {
            version,
            ..member(usize::try_from(version).unwrap())
        },
        departed: false,
        retired: false,
    };
    let bytes = serde_json::to_vec(&known).expect("JSON");
    let mut entry: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
    entry["proof"] = MemberKey::derive(cluster, "secret")
        .seal(name, &bytes)
        .into();
    let path = format!("/xarchive/{cluster}/positions/00");
    let open =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    for folder in [
        "/xarchive".to_owned(),
        format!("/xarchive/{cluster}"),
        format!("/xarchive/{cluster}/positions"),
    ] {
        let _ = client.create(&folder, b"", &open).await;
    }
    let entries = serde_json::json!({ name: entry });
    client
        .create(&path, &serde_json::to_vec(&entries).expect("JSON"), &open)
        .await
        .expect("the whole entry is written");
}

/// The names group 00's whole-entry znode and lines hold.
async fn holders(zk: &ZooKeeperServer, cluster: &str) -> (Vec<String>, Vec<String>) {
    let client = zookeeper_client::Client::connect(&zk.connect_string())
        .await
        .expect("connects");
    let names = |data: Vec<u8>| -> Vec<String> {
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&data).unwrap_or_default();
        map.keys().cloned().collect()
    };
    let whole = match client
        .get_data(&format!("/xarchive/{cluster}/positions/00"))
        .await
    {
        Ok((data, _)) => names(data),
        Err(_) => Vec::new(),
    };
    let (lines, _) = client
        .get_data(&format!("/xarchive/{cluster}/ledger/00/positions"))
        .await
        .expect("the group's lines");
    (whole, names(lines))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_of_an_earlier_release_is_known_by_its_whole_entry_and_knows_this_release_by_its_own(
) {
    let zk = ZooKeeperServer::start();
    let cluster = "mixed";
    // A domain of an earlier release left its whole entry at version 5 (it
    // is down now; only that entry bounds what it acknowledged).
    write_whole_entry(&zk, cluster, "old", 5).await;
    let stop = CancellationToken::new();
    let (new, _new_position) = running(settings(zk.connect_string(), cluster), "new", 3, &stop);
    published_at(&new, 3).await;
    let mut view = new.view();
    view.wait_for(|v| v.connected).await.expect("runs");
    // `auto` found another domain's whole entry: it writes both layouts,
    // so that domains of the earlier release know it.
    assert_eq!(
        holders(&zk, cluster).await,
        (
            vec!["new".to_owned(), "old".to_owned()],
            vec!["new".to_owned()]
        )
    );
    let roster = new.read_current().await.expect("read");
    assert_eq!(
        roster.known["old"].member.version, 5,
        "known by its whole entry"
    );
    assert_eq!(roster.known["new"].member.version, 3);

    // Once no domain of an earlier release will run again: `apart` takes
    // its whole entry out when it registers, and writes its line alone.
    stop.cancel();
    view.wait_for(|v| !v.connected).await.expect("stopped");
    let again = CancellationToken::new();
    let apart = ZkSettings {
        ledger: LedgerWrites::Apart,
        ..settings(zk.connect_string(), cluster)
    };
    let (new, position) = running(apart, "new", 4, &again);
    published_at(&new, 4).await;
    let mut view = new.view();
    view.wait_for(|v| v.connected).await.expect("runs");
    assert_eq!(
        holders(&zk, cluster).await,
        (vec!["old".to_owned()], vec!["new".to_owned()])
    );
    position.send_replace(Position {
        epoch: 7,
        version: 6,
    });
    published_at(&new, 6).await;
    let roster = new.read_current().await.expect("read");
    assert_eq!(roster.known["new"].member.version, 6, "known by its line");
    assert_eq!(roster.known["old"].member.version, 5);
    again.cancel();
}
