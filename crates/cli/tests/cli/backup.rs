//! `xarchive backup` and `xarchive restore` against real domains: a backup
//! taken while writes go on restores to a domain whose records, key index,
//! audit log and filter verify; a full disk leaves no backup behind; only
//! the backup role may take one; a backup changed by hand (its SHA-256
//! recomputed) or made under another cluster's secret is refused.

use crate::common::{bin, create_token, run, text, xarchive};

use std::path::PathBuf;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use xarchive_node::wire::SearchBody;
use xarchive_node::{id_card_number, ApiClient, Record};
use xarchive_testkit::{tempdir, wait_until, Acknowledged, Spawn, Tmpfs};

/// The identity number of the `i`-th keyed record.
fn person(i: usize) -> String {
    id_card_number(
        110105,
        1950 + i32::try_from(i % 50).unwrap(),
        1 + u8::try_from(i % 12).unwrap(),
        1,
        u16::try_from(i % 999).unwrap(),
    )
}

/// `count` records as NDJSON, every tenth with an identity number, each
/// with `content_bytes` of content.
fn records(count: usize, content_bytes: usize) -> Vec<u8> {
    use base64::Engine;
    let content = base64::engine::general_purpose::STANDARD.encode(vec![b'x'; content_bytes]);
    let mut out = Vec::new();
    for i in 0..count {
        let mut record = serde_json::json!({
            "id": format!("J001-WS·2023-Y-{i:05}"),
            "title": format!("第{i}号"),
            "metadata": {"year": 2023, "n": i},
            "content": content,
        });
        if i % 10 == 0 {
            record["keys"] = serde_json::json!({"id_card": person(i)});
        }
        serde_json::to_writer(&mut out, &record).unwrap();
        out.push(b'\n');
    }
    out
}

fn import(server: &str, count: usize, content_bytes: usize) {
    let out = run(
        &["import", "-"],
        server,
        None,
        Some(&records(count, content_bytes)),
    );
    assert!(out.status.success(), "{}", text(&out));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// What `backup --output json` and `restore --output json` print.
#[derive(serde::Deserialize, Debug)]
struct Done {
    domain: String,
    sequence: u64,
    records: u64,
    audit_entries: u64,
}

fn done(out: &Output) -> Done {
    assert!(out.status.success(), "{}", text(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

#[test]
fn a_backup_taken_while_writes_continue_restores_to_a_domain_whose_records_and_filter_verify() {
    let dir = tempdir().unwrap();
    let a = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    import(&a.url, 5_000, 512);
    // A search by a private key, so that the audit log holds an entry.
    let key = format!("id_card={}", person(30));
    let out = xarchive(&["search", "--key", &key, "--json"], &a.url);
    assert!(out.status.success(), "{}", text(&out));

    // A writer that keeps writing until told to stop.
    let acked = Arc::new(Acknowledged::default());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop, url) = (acked.clone(), stop.clone(), a.url.clone());
        std::thread::spawn(move || {
            runtime().block_on(async {
                let client = ApiClient::new(&url, Duration::from_secs(30)).unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let id = format!("W-{n:06}");
                    let body = serde_json::json!({"title": format!("written meanwhile {n}")});
                    client
                        .put(&id, &body)
                        .await
                        .expect("a write during the backup");
                    acked.extend([id]);
                    n += 1;
                }
            });
        })
    };
    wait_until("writes to go on", 60, || acked.len() >= 20);
    let before = acked.all();
    let file = dir.path().join("A.backup");
    let backup = done(&xarchive(
        &["backup", "--to", file.to_str().unwrap(), "--output", "json"],
        &a.url,
    ));
    let during = acked.len();
    wait_until("writes to go on after the backup", 60, || {
        acked.len() >= during + 20
    });
    stop.store(true, Ordering::Release);
    writer.join().expect("the writer ends");

    assert_eq!(backup.domain, "A");
    assert_eq!(backup.audit_entries, 1);
    // Every record acknowledged before the backup began is in it; none
    // written after it ended is (one write may have been on its way).
    let held = usize::try_from(backup.records).unwrap();
    assert!(
        (5_000 + before.len()..=5_000 + during + 1).contains(&held),
        "{held} records, {} written before, {during} by its end",
        before.len()
    );

    // Restored into the empty data directory of a domain that is stopped,
    // with a copy of the domain's own backup key (it has no cluster secret).
    let restored = dir.path().join("A-restored");
    let backup_key = dir.path().join("A").join("seal").join("backup.key");
    let out = run(
        &[
            "restore",
            file.to_str().unwrap(),
            "--data",
            restored.to_str().unwrap(),
            "--backup-key-file",
            backup_key.to_str().unwrap(),
            "--output",
            "json",
        ],
        &a.url,
        None,
        None,
    );
    let again = done(&out);
    assert_eq!(
        (again.records, again.sequence),
        (backup.records, backup.sequence)
    );
    let b = Spawn::new(bin(), "A", &restored).start();

    runtime().block_on(async {
        let (at_a, at_b) = (
            ApiClient::new(&a.url, Duration::from_secs(30)).unwrap(),
            ApiClient::new(&b.url, Duration::from_secs(30)).unwrap(),
        );
        let report = at_b.verify().await.unwrap();
        assert!(report.consistent, "{report:?}");
        assert_eq!(report.store_records, backup.records);
        assert_eq!(report.filter_items, backup.records);
        for id in before.iter().chain(
            [
                "J001-WS·2023-Y-00000".to_owned(),
                "J001-WS·2023-Y-04999".to_owned(),
            ]
            .iter(),
        ) {
            let original: Record = at_a.get(id).await.unwrap().expect("at A");
            let copy: Record = at_b
                .get(id)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{id} restored"));
            assert_eq!(
                (&copy.title, &copy.metadata, &copy.content, copy.created_at),
                (
                    &original.title,
                    &original.metadata,
                    &original.content,
                    original.created_at
                ),
                "{id}"
            );
        }
        assert!(at_b.contains("J001-WS·2023-Y-01234").await.unwrap());
    });

    // The key index came back with the records, and the search log whole.
    let out = xarchive(&["search", "--key", &key, "--json"], &b.url);
    assert!(out.status.success(), "{}", text(&out));
    let found: SearchBody = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<String> = found.records.iter().map(|r| r.id.to_string()).collect();
    assert_eq!(ids, ["J001-WS·2023-Y-00030"]);
    let out = xarchive(&["audit", "verify"], &b.url);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_full_disk_while_writing_a_backup_says_so_and_leaves_no_backup_behind() {
    let dir = tempdir().unwrap();
    let a = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    import(&a.url, 2_000, 2_048);
    let disk = Tmpfs::mount(512 * 1024);
    let file = disk.path().join("A.backup");
    let out = xarchive(&["backup", "--to", file.to_str().unwrap()], &a.url);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("no space left on the disk holding") && said.contains("was not written"),
        "{said}"
    );
    let left: Vec<PathBuf> = std::fs::read_dir(disk.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // The domain is none the worse, and a disk with room takes it.
    let roomy = dir.path().join("A.backup");
    let backup = done(&xarchive(
        &[
            "backup",
            "--to",
            roomy.to_str().unwrap(),
            "--output",
            "json",
        ],
        &a.url,
    ));
    assert_eq!(backup.records, 2_000);
}

#[test]
fn a_backup_needs_the_backup_role_and_a_restore_a_whole_backup_and_an_empty_directory() {
    let dir = tempdir().unwrap();
    let config = dir.path().join("domain.toml");
    std::fs::write(&config, "").unwrap();
    let token = |role: &str| create_token(&config, role, role, None);
    let (write, audit, backup) = (token("write"), token("audit"), token("backup"));
    let a = Spawn::new(bin(), "A", &dir.path().join("A"))
        .arg("--config")
        .arg(config.to_str().unwrap())
        .start();
    let out = run(
        &["import", "-"],
        &a.url,
        Some(&write),
        Some(&records(10, 8)),
    );
    assert!(out.status.success(), "{}", text(&out));

    let file = dir.path().join("A.backup");
    for refused in [&write, &audit] {
        let out = run(
            &["backup", "--to", file.to_str().unwrap()],
            &a.url,
            Some(refused),
            None,
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("backup role"), "{}", text(&out));
        assert!(!file.exists());
    }
    let out = run(
        &["backup", "--to", file.to_str().unwrap()],
        &a.url,
        Some(&backup),
        None,
    );
    assert!(out.status.success(), "{}", text(&out));

    // A restore refuses a directory in use, and a backup cut short.
    let out = xarchive(
        &[
            "restore",
            file.to_str().unwrap(),
            "--data",
            dir.path().join("A").to_str().unwrap(),
        ],
        &a.url,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("not empty"), "{}", text(&out));
    let bytes = std::fs::read(&file).unwrap();
    let cut = dir.path().join("cut.backup");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let target = dir.path().join("B");
    let out = xarchive(
        &[
            "restore",
            cut.to_str().unwrap(),
            "--data",
            target.to_str().unwrap(),
        ],
        &a.url,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("incomplete"), "{}", text(&out));
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    let out = xarchive(&["restore", file.to_str().unwrap(), "--check"], &a.url);
    assert!(out.status.success(), "{}", text(&out));
}

/// `bytes` (a backup) with `from` replaced by `to` (as many bytes) and its
/// SHA-256 recomputed, as anyone can: the end frame's checksum follows a
/// tag and three counts (postcard varints) in the last frame.
fn changed_by_hand(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    use sha2::Digest;
    assert_eq!(from.len(), to.len());
    let (from, to) = (from.as_bytes(), to.as_bytes());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("the text is in the backup");
    let mut out = bytes.to_vec();
    out[at..at + to.len()].copy_from_slice(to);
    // The frames: after the 16 bytes of the magic, each a u32 length.
    let mut frame = 16;
    let last = loop {
        let len = u32::from_le_bytes(out[frame..frame + 4].try_into().unwrap()) as usize;
        if frame + 4 + len == out.len() {
            break frame;
        }
        frame += 4 + len;
    };
    let mut sha_at = last + 4 + 1;
    for _ in 0..3 {
        while out[sha_at] & 0x80 != 0 {
            sha_at += 1;
        }
        sha_at += 1;
    }
    let sha = sha2::Sha256::digest(&out[..last]);
    out[sha_at..sha_at + 32].copy_from_slice(&sha);
    out
}

#[test]
fn a_backup_changed_by_hand_or_made_under_another_clusters_secret_is_refused_and_a_genuine_one_restores(
) {
    let dir = tempdir().unwrap();
    let secret = dir.path().join("cluster.secret");
    std::fs::write(&secret, "the secret of this cluster, long enough").unwrap();
    let other = dir.path().join("other.secret");
    std::fs::write(&other, "the secret of another cluster, as long").unwrap();
    let config = dir.path().join("A.toml");
    std::fs::write(
        &config,
        format!(
            "[auth]\ncluster_secret_file = {:?}\n",
            secret.to_str().unwrap()
        ),
    )
    .unwrap();
    let token = |role: &str| create_token(&config, role, role, None);
    let (write, backup) = (token("write"), token("backup"));
    let a = Spawn::new(bin(), "A", &dir.path().join("A"))
        .args(["--config", config.to_str().unwrap()])
        .start();
    let out = run(
        &["import", "-"],
        &a.url,
        Some(&write),
        Some(&records(10, 8)),
    );
    assert!(out.status.success(), "{}", text(&out));
    let file = dir.path().join("A.backup");
    let out = run(
        &["backup", "--to", file.to_str().unwrap()],
        &a.url,
        Some(&backup),
        None,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("its MAC is under the secret of cluster"),
        "{}",
        text(&out)
    );
    let restore = |from: &PathBuf, data: &PathBuf, key: &[&str]| {
        let mut args = vec![
            "restore",
            from.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
        ];
        args.extend(key);
        xarchive(&args, &a.url)
    };

    // A title changed, the SHA-256 recomputed: whole, but not authentic.
    let crafted = dir.path().join("crafted.backup");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&crafted, changed_by_hand(&bytes, "第3号", "伪3号")).unwrap();
    let out = xarchive(&["restore", crafted.to_str().unwrap(), "--check"], &a.url);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("NOT checked"), "{}", text(&out));
    let target = dir.path().join("B");
    let with_secret = ["--cluster-secret-file", secret.to_str().unwrap()];
    let out = restore(&crafted, &target, &with_secret);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("not authentic"), "{}", text(&out));
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    // Unchecked on request, a MAC that fails is refused all the same.
    let mut unchecked = with_secret.to_vec();
    unchecked.push("--accept-unauthenticated");
    let out = restore(&crafted, &target, &unchecked);
    assert!(text(&out).contains("not authentic"), "{}", text(&out));
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);

    // The genuine one, under another cluster's secret, or with no key.
    let out = restore(
        &file,
        &target,
        &["--cluster-secret-file", other.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("another key"), "{}", text(&out));
    let out = restore(&file, &target, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("--cluster-secret-file"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);

    // With the domain's configuration (its secret), it restores, and the
    // domain started there serves the title as it was.
    let out = restore(&file, &target, &["--config", config.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("its MAC checks"), "{}", text(&out));
    let b = Spawn::new(bin(), "A", &target)
        .args(["--config", config.to_str().unwrap()])
        .start();
    runtime().block_on(async {
        let client =
            ApiClient::with_options(&b.url, Duration::from_secs(30), Some(&write), None).unwrap();
        let record: Record = client
            .get("J001-WS·2023-Y-00003")
            .await
            .unwrap()
            .expect("restored");
        assert_eq!(record.title, "第3号");
    });
}
