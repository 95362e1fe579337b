//! The light domains in ZooKeeper, in the very forms a domain writes:
//! their registrations (one session and ephemeral znode each) and their
//! lines in the positions ledger with their descriptions, published
//! together (or whole entries, as domains of earlier releases write
//! them, with `--whole-entries`).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use xarchive_node::cluster::{Described, Line, Member};
use xarchive_node::{FilterKind, Position};
use zookeeper_client as zk;

use super::{Ledger, LightDomain, Nation, LEDGER_GROUP};

impl Nation {
    fn whole(&self) -> bool {
        self.whole_entries.load(Ordering::Relaxed)
    }

    /// The ledger group of domain `index`.
    fn group(index: usize) -> String {
        format!("L{:02}", index / LEDGER_GROUP)
    }

    /// The znode of the ledger group of domain `index`: its whole entries,
    /// or its lines.
    fn ledger_path(&self, index: usize) -> String {
        if self.whole() {
            format!("{}/{}", self.folder("positions"), Self::group(index))
        } else {
            format!("{}/{}/positions", self.folder("ledger"), Self::group(index))
        }
    }

    /// `d`'s entry in its ledger group: its member, flattened, and
    /// `departed`; or its line, naming its description's first version.
    fn entry(&self, d: &LightDomain) -> anyhow::Result<serde_json::Value> {
        if !self.whole() {
            let member = self.member(d);
            let line = Line {
                position: Position {
                    epoch: member.epoch,
                    version: member.version,
                },
                described: 0,
            };
            return Ok(line.sealed(None).into());
        }
        let mut known = serde_json::to_value(self.member(d))?;
        known["departed"] = false.into();
        Ok(known)
    }

    /// `d`'s description, beside its lines.
    fn description(&self, d: &LightDomain) -> anyhow::Result<Vec<u8>> {
        let member = self.member(d);
        Ok(serde_json::to_vec(&Described {
            address: member.address,
            kind: member.kind,
            keys: member.keys,
            signing_key: member.signing_key,
            departed: false,
            retired: false,
        })?)
    }

    fn folder(&self, what: &str) -> String {
        format!("/xarchive/{}/{what}", self.cluster)
    }

    fn member(&self, d: &LightDomain) -> Member {
        let f = d.filter.lock();
        Member {
            address: format!("{}/d/{}", self.address.lock(), d.name),
            kind: FilterKind::Counting,
            epoch: f.bits.epoch(),
            version: f.bits.version(),
            keys: String::new(),
            signing_key: String::new(),
        }
    }

    /// Writes every light domain's entry or line into the positions ledger
    /// (in groups of about a hundred, as provinces would be) and its
    /// description, then opens a session per light domain (`parallel` at a
    /// time) and registers its ephemeral znode, as a domain does.
    /// Returns how long it took.
    pub async fn register(
        self: &Arc<Self>,
        zk_connect: &str,
        parallel: usize,
        progress: &(dyn Fn() + Sync),
    ) -> anyhow::Result<Duration> {
        let root = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(6))
            .connect(zk_connect)
            .await
            .context("cannot reach ZooKeeper")?;
        let mut folders = vec![
            "/xarchive".to_owned(),
            format!("/xarchive/{}", self.cluster),
            self.folder("domains"),
        ];
        if self.whole() {
            folders.push(self.folder("positions"));
        } else {
            folders.push(self.folder("ledger"));
            folders.push(self.folder("members"));
            for group in (0..self.domains.len()).step_by(LEDGER_GROUP) {
                folders.push(format!("{}/{}", self.folder("ledger"), Self::group(group)));
            }
        }
        for path in folders {
            match root
                .create(
                    &path,
                    b"",
                    &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
                )
                .await
            {
                Ok(_) | Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(e).with_context(|| format!("cannot create {path}")),
            }
        }
        let started = Instant::now();
        if !self.whole() {
            let descriptions: Vec<anyhow::Result<()>> = futures::stream::iter(&self.domains)
                .map(|d| {
                    let root = &root;
                    async move {
                        let path = format!("{}/{}", self.folder("members"), d.name);
                        let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                        let data = self.description(d)?;
                        match root.create(&path, &data, &open).await {
                            Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                            Err(e) => Err(e).with_context(|| format!("cannot write {path}")),
                        }
                    }
                })
                .buffer_unordered(parallel)
                .collect()
                .await;
            descriptions.into_iter().collect::<anyhow::Result<()>>()?;
        }
        let mut groups: BTreeMap<usize, Ledger> = BTreeMap::new();
        for d in &self.domains {
            groups
                .entry(d.index / LEDGER_GROUP)
                .or_default()
                .insert(d.name.clone(), self.entry(d)?);
        }
        for (group, entries) in groups {
            let path = self.ledger_path(group * LEDGER_GROUP);
            let data = serde_json::to_vec(&entries)?;
            let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
            let version = match root.create(&path, &data, &open).await {
                Ok((stat, _)) => stat.version,
                Err(zk::Error::NodeExists) => root.set_data(&path, &data, None).await?.version,
                Err(e) => return Err(e).with_context(|| format!("cannot write {path}")),
            };
            *self.ledgers[group].lock().await = Some((entries, version));
        }
        let results: Vec<anyhow::Result<()>> = futures::stream::iter(&self.domains)
            .map(|d| async move {
                let client = zk::Client::connector()
                    .with_session_timeout(Duration::from_secs(6))
                    .connect(zk_connect)
                    .await
                    .with_context(|| format!("{}: cannot open a ZooKeeper session", d.name))?;
                let member = self.member(d);
                client
                    .create(
                        &self.path(d),
                        &serde_json::to_vec(&member)?,
                        &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
                    )
                    .await
                    .with_context(|| format!("{}: cannot register", d.name))?;
                *d.session.lock() = Some(client);
                progress();
                Ok(())
            })
            .buffer_unordered(parallel)
            .collect()
            .await;
        results.into_iter().collect::<anyhow::Result<()>>()?;
        Ok(started.elapsed())
    }

    fn path(&self, d: &LightDomain) -> String {
        format!("{}/{}", self.folder("domains"), d.name)
    }

    pub(super) async fn publish(&self, domain: &LightDomain) -> anyhow::Result<()> {
        let client = domain
            .session
            .lock()
            .clone()
            .context("a light domain wrote before registering")?;
        let member = self.member(domain);
        let path = self.ledger_path(domain.index);
        let entry = self.entry(domain)?;
        // As a domain publishes: its ledger entry by compare-and-set on the
        // znode's version, in one transaction with a check that its
        // registration is still there (not rewritten: nobody is woken by a
        // publication).
        let mut ledger = self.ledgers[domain.index / LEDGER_GROUP].lock().await;
        let mut written = false;
        for _ in 0..32 {
            let (mut entries, version) = match ledger.take() {
                Some(held) => held,
                None => {
                    let (data, stat) = client.get_data(&path).await?;
                    (serde_json::from_slice(&data)?, stat.version)
                }
            };
            entries.insert(domain.name.clone(), entry.clone());
            let mut writer = client.new_multi_writer();
            writer.add_check_version(&self.path(domain), -1)?;
            writer.add_set_data(&path, &serde_json::to_vec(&entries)?, Some(version))?;
            if !self.whole() {
                // Readers see the group changed by its folder's stat.
                let tick = path.replace("/positions", "/tick");
                let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                writer.add_create(&tick, b"", &open)?;
                writer.add_delete(&tick, None)?;
            }
            match writer.commit().await {
                Ok(_) => {
                    *ledger = Some((entries, version + 1));
                    written = true;
                    break;
                }
                Err(zk::MultiWriteError::OperationFailed {
                    index: 1,
                    source: zk::Error::BadVersion,
                }) => continue,
                Err(e) => {
                    return Err(zk::Error::from(e))
                        .with_context(|| format!("{}: cannot publish", domain.name))
                }
            }
        }
        anyhow::ensure!(
            written,
            "{}: the ledger of its group kept changing",
            domain.name
        );
        drop(ledger);
        let acked = Instant::now();
        let mut f = domain.filter.lock();
        if let Some(entry) = f.unsent.iter_mut().find(|(v, _)| *v == member.version) {
            entry.1 = Some(acked);
        }
        Ok(())
    }

    /// Kills light domain `d` as a crash past its session would: its
    /// registration goes, its ledger entry stays with the last position
    /// it published, and its routes answer nothing from now on.
    pub async fn kill(&self, d: usize) -> anyhow::Result<()> {
        let domain = &self.domains[d];
        domain.dead.store(true, Ordering::SeqCst);
        let session = domain.session.lock().take();
        if let Some(client) = session {
            match client.delete(&self.path(domain), None).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(e).with_context(|| format!("{}: cannot kill", domain.name)),
            }
        }
        Ok(())
    }

    /// Drops every session (their znodes vanish with them).
    pub fn close(&self) {
        for d in &self.domains {
            d.session.lock().take();
        }
    }
}
