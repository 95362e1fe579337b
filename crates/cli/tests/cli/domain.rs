//! One domain as a real process: crashes, bad input, concurrent writers,
//! graceful shutdown.

use crate::common::{bin, http};

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use xarchive_node::wire::{ErrorBody, ErrorCode, Strategy};
use xarchive_node::ApiClient;
use xarchive_node::VerifyReport;
use xarchive_testkit::{digest, tempdir, Acknowledged, DomainProcess, Spawn};

fn client(d: &DomainProcess) -> ApiClient {
    ApiClient::new(&d.url, Duration::from_mins(1)).unwrap()
}

fn id(i: usize) -> String {
    format!("J{:03}-WS·{}-Y-{i:06}", i % 977, 1990 + (i / 977) % 35)
}

/// Every ID in the store, read a page at a time.
async fn all_ids(url: &str) -> HashSet<String> {
    let client = ApiClient::new(url, Duration::from_mins(1)).unwrap();
    let mut ids = HashSet::new();
    let mut after: Option<String> = None;
    loop {
        let page = client.list(after.as_deref(), 10_000).await.unwrap();
        ids.extend(page.ids);
        match page.next {
            Some(next) => after = Some(next),
            None => return ids,
        }
    }
}

async fn verify(url: &str) -> VerifyReport {
    let client = ApiClient::new(url, Duration::from_mins(1)).unwrap();
    client.verify().await.unwrap()
}

/// The filter's answers for `ids`, in batches.
async fn contains_all(url: &str, ids: &[String]) -> Vec<(String, bool)> {
    let client = ApiClient::new(url, Duration::from_mins(1)).unwrap();
    let mut out = Vec::new();
    for batch in ids.chunks(10_000) {
        let reply = client.contains_many(batch).await.unwrap();
        out.extend(reply.results.into_iter().map(|r| (r.id, r.maybe)));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_during_a_bulk_import_loses_no_acknowledged_record() {
    let dir = tempdir().unwrap();
    let mut domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let c = client(&domain);
    let pid = domain.pid();
    let acknowledged = Arc::new(Acknowledged::default());
    // The importer: 200k records in requests of 2 000 lines.
    let importer = {
        let acknowledged = acknowledged.clone();
        tokio::spawn(async move {
            for chunk in 0..100 {
                let ids: Vec<String> = (chunk * 2000..(chunk + 1) * 2000).map(id).collect();
                let body: String = ids
                    .iter()
                    .map(|i| {
                        json!({"id": i, "title": "t", "metadata": {"n": 1}}).to_string() + "\n"
                    })
                    .collect();
                match c.bulk(body).await {
                    Ok(report) => {
                        assert_eq!(report.summary.failed, 0);
                        acknowledged.extend(ids);
                    }
                    Err(_) => return,
                }
            }
        })
    };
    // Kill when a good part, but not all, has been acknowledged.
    while acknowledged.len() < 60_000 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    importer.await.unwrap();
    let acked = acknowledged.all();
    assert!(
        acked.len() >= 60_000 && acked.len() < 200_000,
        "{} acknowledged",
        acked.len()
    );

    domain.restart();
    let stored = all_ids(&domain.url).await;
    let missing = acked.iter().filter(|i| !stored.contains(*i)).count();
    assert_eq!(missing, 0, "acknowledged records lost");
    let report = verify(&domain.url).await;
    assert!(report.consistent, "{report:?}");
    assert_eq!(usize::try_from(report.store_records).unwrap(), stored.len());
    let answers = contains_all(&domain.url, &acked).await;
    assert!(
        answers.iter().all(|(_, maybe)| *maybe),
        "an acknowledged ID is reported absent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_leave_store_and_filter_byte_identical() {
    let dir = tempdir().unwrap();
    let data = dir.path().join("A");
    let domain = Spawn::new(bin(), "A", &data)
        .args(["--max-content-bytes", "1000"])
        .start();
    let c = client(&domain);
    c.put("kept", &json!({"title": "t"})).await.unwrap();
    let http = http();
    let state = || async {
        let store = digest(&std::fs::read(data.join("records.redb")).unwrap());
        // A client of its own: the server closes a connection whose body it
        // refused unread (413), and a pooled one could be that connection.
        let filter = self::http()
            .get(format!("{}/v1/filter", domain.url))
            .send()
            .await
            .unwrap();
        let version = filter.headers()["x-xarchive-version"]
            .to_str()
            .unwrap()
            .to_owned();
        (store, digest(&filter.bytes().await.unwrap()), version)
    };
    let before = state().await;
    let url = |path: &str| format!("{}{path}", domain.url);
    let cases = vec![
        (
            http.put(url("/v1/archives/a")).body("{oops"),
            400,
            "invalid_json",
        ),
        (
            http.put(url("/v1/archives/a")).body(r#"{"title":1}"#),
            400,
            "invalid_record",
        ),
        (
            http.put(url("/v1/archives/a")).body(format!(
                r#"{{"title":"t","content":"{}"}}"#,
                "QUJD".repeat(400)
            )),
            413,
            "content_too_large",
        ),
        (
            http.put(url("/v1/archives/a")).body(vec![b'x'; 1 << 20]),
            413,
            "body_too_large",
        ),
        (
            http.put(url(&format!("/v1/archives/{}", "x".repeat(300))))
                .body(r#"{"title":"t"}"#),
            400,
            "invalid_id",
        ),
        (
            http.put(url("/v1/archives/a%00b")).body(r#"{"title":"t"}"#),
            400,
            "invalid_id",
        ),
        (
            http.delete(url("/v1/archives/never-there")),
            404,
            "not_found",
        ),
        (
            http.get(url("/v1/filter/delta?epoch=1&since=oops")),
            400,
            "invalid_parameter",
        ),
        (
            http.post(url("/v1/contains")).body("[1,2,3]"),
            400,
            "invalid_record",
        ),
        (http.get(url("/v1/unknown")), 404, "route_not_found"),
    ];
    for (request, status, code) in cases {
        let reply = request.send().await.unwrap();
        let got_status = reply.status().as_u16();
        let body: ErrorBody = reply.json().await.unwrap();
        assert_eq!((got_status, body.code.as_str()), (status, code), "{body:?}");
        assert_eq!(state().await, before, "{code} changed the state");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_leave_the_filter_equal_to_the_store() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A"))
        .args(["--expected-items", "1000"])
        .start();
    let false_nos = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for w in 0..8usize {
        let c = client(&domain);
        let false_nos = false_nos.clone();
        writers.push(tokio::spawn(async move {
            for step in 0..150usize {
                // Shared IDs: everyone puts and deletes the same 40.
                let shared = format!("shared-{}", (w * 7 + step * 13) % 40);
                if (w + step) % 3 == 0 {
                    c.delete(&shared).await.unwrap();
                } else {
                    c.put(&shared, &json!({"title": format!("{w}/{step}")}))
                        .await
                        .unwrap();
                }
                // An ID of this writer alone: once its put is acknowledged
                // it must be reported present until this writer deletes it.
                let own = format!("own-{w}-{}", step % 5);
                c.put(&own, &json!({"title": "mine"})).await.unwrap();
                if !c.contains(&own).await.unwrap() {
                    false_nos.fetch_add(1, Ordering::Relaxed);
                }
                if step % 2 == 0 {
                    c.delete(&own).await.unwrap();
                }
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!(
        false_nos.load(Ordering::Relaxed),
        0,
        "an acknowledged record was reported absent"
    );
    let report = verify(&domain.url).await;
    assert!(report.consistent, "{report:?}");
    let stored: Vec<String> = all_ids(&domain.url).await.into_iter().collect();
    assert!(!stored.is_empty());
    assert!(contains_all(&domain.url, &stored)
        .await
        .iter()
        .all(|(_, m)| *m));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_requests_finish_and_saves_the_filter() {
    let dir = tempdir().unwrap();
    let data = dir.path().join("A");
    let mut domain = Spawn::new(bin(), "A", &data).start();
    let c = client(&domain);
    let body: String = (0..30_000)
        .map(|i| json!({"id": id(i), "title": "t"}).to_string() + "\n")
        .collect();
    let import = tokio::spawn(async move { c.bulk(body).await });
    // Terminated once the import is being handled (its first batch is
    // stored), not before the domain has taken it.
    let watcher = client(&domain);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while watcher.stats().await.map_or(0, |s| s.domain.records) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the import never began"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let status = tokio::task::block_in_place(|| domain.terminate());
    assert!(status.success(), "exit status {status}");
    let report = import
        .await
        .unwrap()
        .expect("the in-flight import finished");
    assert_eq!(report.summary.created, 30_000);
    assert!(data.join("filter.snapshot").exists());
    domain.restart();
    assert!(domain.log().contains("loaded the saved filter snapshot"));
    assert_eq!(verify(&domain.url).await.store_records, 30_000);
}

/// A record carrying `bytes` of content (base64 of zeros).
fn scan(bytes: usize) -> serde_json::Value {
    json!({"title": "扫描件", "content": "A".repeat(bytes / 3 * 4)})
}

/// Waits (at most a minute) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..6000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: not within a minute");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_with_507_changing_nothing_and_writes_resume_when_space_returns_without_a_restart(
) {
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;
    let disk = xarchive_testkit::Tmpfs::mount(64 << 20);
    let mut domain = Spawn::new(bin(), "A", &disk.path().join("A"))
        .env("XARCHIVE_MIN_FREE_BYTES", "1048576")
        .start();
    let acknowledged = Arc::new(Acknowledged::default());
    let refused = Arc::new(Acknowledged::default());
    let reads = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for writer in 0..2 {
        let (c, acknowledged, refused, stop) = (
            client(&domain),
            acknowledged.clone(),
            refused.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let id = format!("W{writer}-{n:05}");
                match c.put(&id, &scan(100_000)).await {
                    Ok(_) => acknowledged.extend([id]),
                    Err(e) if e.code() == Some(ErrorCode::InsufficientStorage) => {
                        assert!(e.to_string().contains("nothing was changed"), "{e}");
                        refused.extend([id]);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(e) => panic!("a write failed otherwise than for space: {e}"),
                }
            }
        }));
    }
    // Reads and lookups of acknowledged records go on throughout.
    {
        let (c, acknowledged, reads, stop) = (
            client(&domain),
            acknowledged.clone(),
            reads.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let Some(id) = acknowledged.pick(n * 7919) else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let record = c.get(&id).await.unwrap();
                assert!(record.is_some(), "acknowledged {id} not readable");
                let (status, _) = c.lookup(&id, Strategy::Routed).await.unwrap();
                assert_eq!(status, 200, "acknowledged {id} not found by a lookup");
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let c = client(&domain);
    let mut resumed_ms = Vec::new();
    for cycle in 0..3 {
        until("first writes", || acknowledged.len() > 5 * (cycle + 1)).await;
        // Filled by something else to within the reserve: writes are
        // refused, while a search by identity number still answers (its
        // audit entry takes the reserve that writes of records leave).
        disk.fill_leaving(256 << 10);
        let refused_before = refused.len();
        until("a write refused for space", || {
            refused.len() > refused_before + 2
        })
        .await;
        assert!(!c.stats().await.unwrap().domain.space.writable);
        let search = xarchive_node::wire::SearchRequest {
            key_type: "id_card".into(),
            value: "11010519491231002X".into(),
            local: false,
            requester: None,
        };
        assert_eq!(c.search(&search).await.unwrap().0, 200);
        disk.fill();
        let reads_before = reads.load(Ordering::Relaxed);
        until("reads while the disk is full", || {
            reads.load(Ordering::Relaxed) > reads_before + 5
        })
        .await;
        disk.free();
        let freed = Instant::now();
        let acknowledged_before = acknowledged.len();
        until("writes resumed", || {
            acknowledged.len() > acknowledged_before
        })
        .await;
        resumed_ms.push(freed.elapsed().as_millis());
        assert!(c.stats().await.unwrap().domain.space.writable);
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    println!(
        "writes resumed {resumed_ms:?} ms after the space returned; {} acknowledged, {} refused",
        acknowledged.len(),
        refused.len()
    );
    // Nothing acknowledged lost, nothing refused visible, filter in step,
    // before and after a kill -9.
    for round in ["running", "after kill -9"] {
        let c = client(&domain);
        for id in acknowledged.all() {
            assert!(c.get(&id).await.unwrap().is_some(), "{round}: lost {id}");
        }
        for id in refused.all() {
            assert!(
                c.get(&id).await.unwrap().is_none(),
                "{round}: refused {id} is stored"
            );
        }
        assert!(verify(&domain.url).await.consistent, "{round}");
        domain.restart();
    }
}
