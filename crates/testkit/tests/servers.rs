//! The real servers the harness starts: they serve, stop by pid, come back
//! on the same port, and (ZooKeeper) keep or lose sessions as documented.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use xarchive_testkit::{RedisServer, ZooKeeperServer};

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn accepts(port: u16) -> bool {
    TcpStream::connect_timeout(&addr(port), Duration::from_secs(1)).is_ok()
}

fn assert_closed(port: u16) {
    match TcpStream::connect_timeout(&addr(port), Duration::from_secs(1)) {
        Ok(_) => panic!("port {port} still accepts connections"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "port {port}: {e}"),
    }
}

fn assert_zk_serves(zk: &ZooKeeperServer) {
    assert!(zk.is_running(), "ZooKeeper is not running");
    assert!(accepts(zk.port()), "ZooKeeper does not accept TCP");
    let bound = format!("binding to port /127.0.0.1:{}", zk.port());
    assert!(
        zk.log().contains(&bound),
        "log lacks {bound:?}:\n{}",
        zk.log()
    );
}

#[test]
fn zookeeper_serves_stops_and_keeps_or_loses_sessions() {
    let t = Instant::now();
    let mut zk = ZooKeeperServer::start();
    let port = zk.port();
    assert_eq!(zk.connect_string(), format!("127.0.0.1:{port}"));
    assert!(zk.pid() > 0);
    assert_zk_serves(&zk);

    // A 3 s session is granted as asked (within min/max).
    let session = zk.open_session(3000).expect("a session");
    assert_eq!(session.timeout_ms, 3000);
    assert!(zk.resume_session(&session).unwrap());
    eprintln!(
        "zookeeper: started and granted a session in {:?}",
        t.elapsed()
    );

    zk.stop();
    assert!(!zk.is_running());
    assert_closed(port);

    // Short outage: same port, same data, the session is still known.
    zk.start_again();
    assert_eq!(zk.port(), port);
    assert_zk_serves(&zk);
    assert!(
        zk.resume_session(&session).unwrap(),
        "the session did not survive start_again"
    );

    // Fresh: same port, empty data, the session is gone.
    let old_data = zk.data_dir().to_owned();
    zk.restart_fresh();
    assert_eq!(zk.port(), port);
    assert_ne!(zk.data_dir(), old_data);
    assert!(!old_data.exists());
    assert_zk_serves(&zk);
    assert!(
        !zk.resume_session(&session).unwrap(),
        "the session survived restart_fresh"
    );
    assert!(zk.open_session(3000).is_ok());

    // Drop kills it.
    drop(zk);
    assert_closed(port);
    eprintln!("zookeeper: whole test {:?}", t.elapsed());
}

#[test]
fn two_zookeepers_do_not_collide() {
    let a = std::thread::spawn(ZooKeeperServer::start);
    let b = std::thread::spawn(ZooKeeperServer::start);
    let mut a = a.join().unwrap();
    let b = b.join().unwrap();
    assert_ne!(a.port(), b.port());
    assert_ne!(a.pid(), b.pid());
    assert_ne!(a.data_dir(), b.data_dir());
    let sa = a.open_session(3000).unwrap();
    let sb = b.open_session(3000).unwrap();

    a.stop();
    assert_closed(a.port());
    assert_zk_serves(&b);
    assert!(b.resume_session(&sb).unwrap());
    // A session belongs to its own server only.
    assert!(!b.resume_session(&sa).unwrap());
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr(port), Duration::from_secs(1)) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut reply = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

#[test]
fn redis_serves_stops_and_starts_again() {
    let t = Instant::now();
    let mut redis = RedisServer::start();
    let port = redis.port();
    assert_eq!(redis.url(), format!("redis://127.0.0.1:{port}/0"));
    assert!(redis.is_running());
    assert!(redis.pid() > 0);
    assert!(ping(port));
    assert!(redis.ping());
    eprintln!("redis: started in {:?}", t.elapsed());

    redis.stop();
    assert!(!redis.is_running());
    assert_closed(port);
    assert!(!redis.ping());

    redis.start_again();
    assert_eq!(redis.port(), port);
    assert!(ping(port));
    assert!(redis.log().contains("Ready to accept connections"));

    drop(redis);
    assert_closed(port);
}

#[test]
fn killed_servers_can_start_again() {
    let mut redis = RedisServer::start();
    redis.kill();
    assert!(!redis.is_running());
    assert_closed(redis.port());
    redis.start_again();
    assert!(redis.ping());

    let mut zk = ZooKeeperServer::start();
    let session = zk.open_session(3000).unwrap();
    zk.kill();
    assert!(!zk.is_running());
    assert_closed(zk.port());
    zk.start_again();
    assert!(zk.resume_session(&session).unwrap());
}
