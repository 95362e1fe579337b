//! The positions ledger in ZooKeeper (`cluster/ledger/`): both layouts
//! read as one roster after a `sync`, in one round trip when no group
//! changed (`apart.rs` holds what was read); this domain's line (and,
//! while domains of earlier releases may run, its whole entry) written in
//! the transaction that publishes; its entry taken out of groups it left.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use zookeeper_client as zk;

use super::apart::{merged, Stamp};
use super::{
    admit, failed, ledger_failed, unexpected, LedgerRead, Registered, Registration, Unpublished,
    ZooKeeperCoordinator,
};
use crate::cluster::coordinator::{CoordError, Known, Roster};
use crate::cluster::ledger::lines::{self, Described, Line, Lines};
use crate::cluster::ledger::{self, Entries, LedgerError};

/// Descriptions read in one multi-read: a description is about 300
/// bytes, and ZooKeeper's answers stay far under its 1 MiB limit.
const DESCRIPTIONS_AT_ONCE: usize = 500;

/// Which layouts of the ledger a domain writes (`cluster.ledger`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LedgerWrites {
    /// Both while another domain has a whole entry when this one
    /// registers (a cluster of earlier releases being upgraded), else
    /// its line alone.
    #[default]
    Auto,
    /// Its line and its whole entry: while a domain of an earlier release
    /// may run, since those read whole entries only.
    Both,
    /// Its line alone, its whole entry taken out when it registers: once
    /// no domain of an earlier release will run again.
    Apart,
}

impl Registered for Described {
    fn address(&self) -> &str {
        &self.address
    }
}

/// The domains a layout's groups hold entries for, by group.
pub(super) type Holders = BTreeMap<String, BTreeSet<String>>;

impl ZooKeeperCoordinator {
    /// The layout of lines: a folder per group.
    pub(super) fn lines_folder(&self) -> String {
        format!("/xarchive/{}/ledger", self.settings.cluster)
    }

    fn lines_group(&self, group: &str) -> String {
        format!("{}/{group}", self.lines_folder())
    }

    fn lines_path(&self, group: &str) -> String {
        format!("{}/{group}/positions", self.lines_folder())
    }

    fn tick_path(&self, group: &str) -> String {
        format!("{}/{group}/tick", self.lines_folder())
    }

    /// Where each domain's description is.
    pub(super) fn descriptions_folder(&self) -> String {
        format!("/xarchive/{}/members", self.settings.cluster)
    }

    fn description_path(&self, name: &str) -> String {
        format!("{}/{name}", self.descriptions_folder())
    }

    /// Every group's positions, read after a `sync` (so that every
    /// publication completed before this call is in what it reads), and
    /// with `registered` the names registered now, listed with them.
    /// First round trip, pipelined (ZooKeeper answers a session's requests
    /// in order, its reads after a pending `sync` once that is done): the
    /// sync, and one multi-read of the listings of both layouts and the
    /// stamps of the groups held. A second only for the groups whose stamp
    /// moved (with the whole-entry layout's groups, if any), a third only
    /// for descriptions newer than those held. So a "not found" costs two
    /// requests while no group changed, whatever the number of domains.
    pub(super) async fn read_ledger_with(
        &self,
        client: &zk::Client,
        registered: bool,
    ) -> Result<LedgerRead, CoordError> {
        let lines_folder = self.lines_folder();
        let whole_folder = self.ledger_folder();
        let held = self.apart.groups_held();
        let sync = client.sync(&lines_folder);
        let mut first = client.new_multi_reader();
        first.add_get_children(&lines_folder).map_err(failed)?;
        first.add_get_children(&whole_folder).map_err(failed)?;
        if registered {
            first.add_get_children(&self.folder()).map_err(failed)?;
        }
        for group in &held {
            first
                .add_get_data(&self.lines_group(group))
                .map_err(failed)?;
        }
        let first = first.commit();
        match sync.await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(e) => return Err(failed(e)),
        }
        let mut first = first.await.map_err(failed)?.into_iter();
        let listed = listing(first.next())?;
        let whole_listed = listing(first.next())?;
        let names = if registered {
            listing(first.next())?
        } else {
            Vec::new()
        };
        let mut stamps = HashMap::new();
        for (group, read) in held.into_iter().zip(first) {
            match read {
                zk::MultiReadResult::Data { stat, .. } => {
                    stamps.insert(group, Stamp::of(&stat));
                }
                zk::MultiReadResult::Error {
                    err: zk::Error::NoNode,
                } => {}
                zk::MultiReadResult::Error { err } => return Err(failed(err)),
                _ => return Err(failed(unexpected("a znode's contents"))),
            }
        }
        self.apart.keep_only(&listed);
        let plan = self.apart.plan(&listed, &stamps);

        // Second round trip: each group whose stamp moved (its folder's
        // stat and its positions, read together), and the whole entries.
        let mut changed_reader = client.new_multi_reader();
        for group in &plan.reread {
            changed_reader
                .add_get_data(&self.lines_group(group))
                .map_err(failed)?;
            changed_reader
                .add_get_data(&self.lines_path(group))
                .map_err(failed)?;
        }
        let changed = changed_reader.commit();
        let mut whole_reader = client.new_multi_reader();
        for group in &whole_listed {
            whole_reader
                .add_get_data(&format!("{whole_folder}/{group}"))
                .map_err(failed)?;
        }
        let whole = whole_reader.commit();
        let changed = changed.await.map_err(failed)?;
        let whole = whole.await.map_err(failed)?;
        let mut groups = plan.held;
        let admission = &self.settings.admission;
        let admit_line = |name: &str, text: &str, seal: &str| {
            admission.line_seal_holds(name, text.as_bytes(), seal)
        };
        for (group, pair) in plan.reread.iter().zip(changed.chunks(2)) {
            let stat = match &pair[0] {
                zk::MultiReadResult::Data { stat, .. } => stat,
                zk::MultiReadResult::Error {
                    err: zk::Error::NoNode,
                } => continue,
                zk::MultiReadResult::Error { err } => return Err(failed(err.clone())),
                _ => return Err(failed(unexpected("a znode's contents"))),
            };
            let data: &[u8] = match pair.get(1) {
                Some(zk::MultiReadResult::Data { data, .. }) => data,
                Some(zk::MultiReadResult::Error {
                    err: zk::Error::NoNode,
                }) => b"",
                Some(zk::MultiReadResult::Error { err }) => return Err(failed(err.clone())),
                _ => return Err(failed(unexpected("a znode's contents"))),
            };
            groups.push(
                self.apart
                    .take_group(group, Stamp::of(stat), data, admit_line),
            );
        }

        // Third, only for descriptions newer than those held.
        let wanted = self.apart.to_describe(&groups);
        let folder = self.descriptions_folder();
        let mut reads = Vec::new();
        for chunk in wanted.chunks(DESCRIPTIONS_AT_ONCE) {
            let mut reader = client.new_multi_reader();
            for name in chunk {
                reader
                    .add_get_data(&self.description_path(name))
                    .map_err(failed)?;
            }
            reads.push(reader.commit());
        }
        let mut chunks = wanted.chunks(DESCRIPTIONS_AT_ONCE);
        for read in reads {
            let chunk = chunks.next().unwrap_or_default();
            for (name, result) in chunk.iter().zip(read.await.map_err(failed)?) {
                let taken = match result {
                    zk::MultiReadResult::Data { data, stat } => Some((
                        stat.version,
                        admit::<Described>(admission, &folder, name, &data),
                    )),
                    zk::MultiReadResult::Error {
                        err: zk::Error::NoNode,
                    } => None,
                    zk::MultiReadResult::Error { err } => return Err(failed(err)),
                    _ => return Err(failed(unexpected("a znode's contents"))),
                };
                self.apart.take_description(name, taken);
            }
        }
        let apart = self.apart.roster(&groups);
        let line_groups: Holders = groups
            .iter()
            .map(|g| (g.name.clone(), g.names().collect()))
            .collect();

        let mut data = Vec::with_capacity(whole_listed.len());
        for (group, read) in whole_listed.into_iter().zip(whole) {
            match read {
                zk::MultiReadResult::Data { data: bytes, .. } => data.push((group, bytes)),
                zk::MultiReadResult::Error {
                    err: zk::Error::NoNode,
                } => continue,
                zk::MultiReadResult::Error { err } => return Err(failed(err)),
                _ => return Err(failed(unexpected("a znode's contents"))),
            }
        }
        let whole = self.admitted.read(data, |name, bytes| {
            admit::<Known>(admission, &whole_folder, name, bytes)
        });
        let whole_groups: Holders = whole
            .groups
            .iter()
            .map(|(group, entries)| {
                let names = entries.iter().map(|e| e.name.clone()).collect();
                (group.clone(), names)
            })
            .collect();
        let roster = self.merge(&whole.roster, &whole_groups, apart);
        Ok(LedgerRead {
            roster,
            registered: names,
            whole_groups,
            line_groups,
        })
    }

    /// The roster of both layouts ([`merged`]): `apart` itself when no
    /// whole entry is left, the last merge's `Arc` for the same two.
    fn merge(&self, whole: &Arc<Roster>, holders: &Holders, apart: Arc<Roster>) -> Arc<Roster> {
        let names: BTreeSet<String> = holders.values().flatten().cloned().collect();
        if names.is_empty() {
            return apart;
        }
        let mut last = self.merged.lock();
        if let Some((w, a, m)) = &*last {
            if Arc::ptr_eq(w, whole) && Arc::ptr_eq(a, &apart) {
                return m.clone();
            }
        }
        let roster = Arc::new(merged(whole, &names, &apart));
        *last = Some((whole.clone(), apart, roster.clone()));
        roster
    }

    /// Publishes `known` (this domain at its position now) in its group:
    /// its line, and its whole entry while it writes both layouts, in one
    /// transaction with its registration created (`Create`), checked to
    /// still be there (`Check`: the session that holds it may have lost
    /// it), or left alone (a departure, which deletes it after). The line
    /// then always holds the last position published while registered,
    /// which bounds every write this domain acknowledged (a write is
    /// acknowledged only once published), so a domain that crashed, was
    /// paused past its session or is cut off can be ruled out by a copy
    /// covering that position (`ruled_out::not_ruled_out`) instead of being
    /// asked, and answering 503, for every absent ID while it is down.
    ///
    /// Its description is written too when it changed (at registration,
    /// departure); the group folder's `tick` is created and deleted, so
    /// that readers see the group changed (`apart.rs`). Each znode is
    /// written by compare-and-set on the version last seen here: when
    /// another domain of the group wrote it since, the transaction fails
    /// as a whole and is made again on what it holds now.
    pub(super) async fn publish(
        &self,
        client: &zk::Client,
        name: &str,
        own: &str,
        known: &Known,
        registration: Registration<'_>,
    ) -> Result<(), Unpublished> {
        let group = self.settings.group.clone();
        let described = Described::of(known);
        let whole_entry = if self.writes_whole() {
            Some(self.entry(name, known).map_err(Unpublished::Failed)?)
        } else {
            None
        };
        let describe = matches!(registration, Registration::Create(_))
            || self.last_described.lock().as_ref() != Some(&described);
        let description = if describe {
            Some(self.sealed(name, &described).map_err(Unpublished::Failed)?)
        } else {
            None
        };
        let path = self.lines_path(&group);
        for _ in 0..ledger::ATTEMPTS {
            let known_version = *self.described_version.lock();
            let version = match known_version {
                Some(version) => version,
                None => match client.get_data(&self.description_path(name)).await {
                    Ok((_, stat)) => Some(stat.version),
                    Err(zk::Error::NoNode) => None,
                    Err(e) => return Err(e.into()),
                },
            };
            let line = Line {
                position: known.member.position(),
                described: match (&description, version) {
                    (Some(_), Some(v)) => v + 1,
                    (Some(_), None) => 0,
                    (None, Some(v)) => v,
                    (None, None) => {
                        // Described before, yet gone: describe again.
                        *self.last_described.lock() = None;
                        return Err(Unpublished::Failed(CoordError::Ledger(format!(
                            "the description of {name} is gone; it is written again"
                        ))));
                    }
                },
            };
            let seal = self
                .settings
                .admission
                .seal_line(name, line.text().as_bytes());
            let cached = self.lines.lock().take();
            let (mut held, at) = match cached {
                Some(held) => held,
                None => match client.get_data(&path).await {
                    Ok((data, stat)) => (lines::decode(&group, &data), Some(stat.version)),
                    Err(zk::Error::NoNode) => (Lines::new(), None),
                    Err(e) => return Err(e.into()),
                },
            };
            held.insert(name.to_owned(), line.sealed(seal.as_deref()));
            let bytes = lines::encode(&group, &held).map_err(Unpublished::from_ledger)?;
            let whole = match &whole_entry {
                Some(entry) => {
                    let cached = self.ledger.lock().take();
                    let (mut entries, at) = match cached {
                        Some(held) => held,
                        None => self.read_whole(client).await?,
                    };
                    entries.insert(name.to_owned(), entry.clone());
                    let bytes =
                        ledger::encode(&group, &entries).map_err(Unpublished::from_ledger)?;
                    Some((entries, at, bytes))
                }
                None => None,
            };

            let mut writer = client.new_multi_writer();
            let mut roles = Vec::new();
            match registration {
                Registration::Create(data) => {
                    writer.add_create(own, data, &self.options(zk::CreateMode::Ephemeral))?;
                    roles.push(Role::Registration);
                }
                Registration::Check => {
                    writer.add_check_version(own, -1)?;
                    roles.push(Role::Registration);
                }
                Registration::Untouched => {}
            }
            let persistent = self.options(zk::CreateMode::Persistent);
            if let Some(data) = &description {
                let at = self.description_path(name);
                match version {
                    Some(v) => writer.add_set_data(&at, data, Some(v))?,
                    None => writer.add_create(&at, data, &persistent)?,
                }
                roles.push(Role::Description);
            }
            match at {
                Some(v) => writer.add_set_data(&path, &bytes, Some(v))?,
                None => writer.add_create(&path, &bytes, &persistent)?,
            }
            roles.push(Role::Lines);
            writer.add_create(&self.tick_path(&group), b"", &persistent)?;
            writer.add_delete(&self.tick_path(&group), None)?;
            roles.extend([Role::Lines, Role::Lines]);
            if let Some((_, at, bytes)) = &whole {
                match at {
                    Some(v) => writer.add_set_data(&self.ledger_path(), bytes, Some(*v))?,
                    None => writer.add_create(&self.ledger_path(), bytes, &persistent)?,
                }
                roles.push(Role::Whole);
            }
            match writer.commit().await {
                Ok(_) => {
                    *self.lines.lock() = Some((held, Some(at.map_or(0, |v| v + 1))));
                    if description.is_some() {
                        *self.described_version.lock() = Some(Some(line.described));
                        *self.last_described.lock() = Some(described);
                    } else {
                        *self.described_version.lock() = Some(version);
                    }
                    if let Some((entries, at, _)) = whole {
                        *self.ledger.lock() = Some((entries, Some(at.map_or(0, |v| v + 1))));
                    }
                    return Ok(());
                }
                Err(zk::MultiWriteError::OperationFailed { index, source }) => {
                    match (roles.get(index), source) {
                        // The registration is gone (its session expired,
                        // or it was deleted by hand): register again.
                        (Some(Role::Registration), zk::Error::NoNode) => {
                            return Err(Unpublished::Unregistered)
                        }
                        // One is there already, left by an earlier session.
                        (Some(Role::Registration), zk::Error::NodeExists) => {
                            return Err(Unpublished::AlreadyRegistered)
                        }
                        // Another writer came first: read again, try again.
                        (Some(Role::Description), _) => *self.described_version.lock() = None,
                        (Some(Role::Lines), zk::Error::NoNode) => {
                            self.make_folder(
                                client,
                                &self.lines_group(&group),
                                &self.options(zk::CreateMode::Persistent),
                            )
                            .await
                            .map_err(Unpublished::Failed)?;
                        }
                        (Some(Role::Lines | Role::Whole), _) => {}
                        (_, e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(zk::Error::from(e).into()),
            }
        }
        Err(Unpublished::from_ledger(LedgerError::Contended(group)))
    }

    /// This domain's group's whole entries and the znode's version (None:
    /// not there).
    async fn read_whole(&self, client: &zk::Client) -> Result<(Entries, Option<i32>), Unpublished> {
        match client.get_data(&self.ledger_path()).await {
            Ok((data, stat)) => Ok((
                ledger::decode(&self.settings.group, &data),
                Some(stat.version),
            )),
            Err(zk::Error::NoNode) => Ok((Entries::new(), None)),
            Err(e) => Err(e.into()),
        }
    }

    /// Takes `name`'s entry or line out of every group but its own that
    /// holds one, in either layout (`groups` from
    /// [`read_ledger_with`](Self::read_ledger_with)): it moved
    /// (`cluster.group` changed). Done before registering, which writes its
    /// line in its own group at a position no older.
    pub(super) async fn leave_other_groups(
        &self,
        client: &zk::Client,
        name: &str,
        read: &LedgerRead,
    ) -> Result<(), CoordError> {
        let mine = &self.settings.group;
        let holding = |groups: &Holders| -> Vec<String> {
            groups
                .iter()
                .filter(|(group, names)| *group != mine && names.contains(name))
                .map(|(group, _)| group.clone())
                .collect()
        };
        for group in holding(&read.whole_groups) {
            self.leave_whole(client, name, &group).await?;
            tracing::info!(
                group,
                "took this domain's entry out of its former group's ledger"
            );
        }
        for group in holding(&read.line_groups) {
            self.update_lines(client, &group, |held| held.remove(name).is_some())
                .await
                .map_err(ledger_failed)?;
            tracing::info!(
                group,
                "took this domain's line out of its former group's ledger"
            );
        }
        Ok(())
    }

    /// Takes `name`'s whole entry out of `group`; a group left without
    /// entries goes.
    async fn leave_whole(
        &self,
        client: &zk::Client,
        name: &str,
        group: &str,
    ) -> Result<(), CoordError> {
        let path = format!("{}/{group}", self.ledger_folder());
        for _ in 0..ledger::ATTEMPTS {
            let (data, stat) = match client.get_data(&path).await {
                Ok(read) => read,
                Err(zk::Error::NoNode) => return Ok(()),
                Err(e) => return Err(failed(e)),
            };
            let mut entries = ledger::decode(group, &data);
            if entries.remove(name).is_none() {
                return Ok(());
            }
            let written = if entries.is_empty() {
                client.delete(&path, Some(stat.version)).await
            } else {
                let bytes = ledger::encode(group, &entries).map_err(ledger_failed)?;
                client
                    .set_data(&path, &bytes, Some(stat.version))
                    .await
                    .map(drop)
            };
            match written {
                Ok(()) => return Ok(()),
                Err(zk::Error::BadVersion | zk::Error::NoNode) => continue,
                Err(e) => return Err(failed(e)),
            }
        }
        Err(ledger_failed(LedgerError::Contended(group.to_owned())))
    }

    /// Takes this domain's whole entries out of every group of that layout
    /// (it writes its line alone): done once it is registered with its
    /// line, before it acknowledges any write, so that no whole entry of
    /// it is left behind what it publishes (readers take a whole entry
    /// over a line, `apart::merged`). Meanwhile the whole entry holds the
    /// last position published before, which bounds what was acknowledged.
    pub(super) async fn leave_the_whole_layout(
        &self,
        client: &zk::Client,
        name: &str,
        read: &LedgerRead,
    ) -> Result<(), CoordError> {
        for (group, names) in &read.whole_groups {
            if names.contains(name) {
                self.leave_whole(client, name, group).await?;
                tracing::info!(
                    group,
                    "took this domain's whole entry out of the ledger: it writes its line alone"
                );
            }
        }
        *self.ledger.lock() = None;
        Ok(())
    }

    /// Applies `change` to the lines of `group` by compare-and-set, with
    /// the tick that tells readers the group changed. `change` returns
    /// false to write nothing.
    async fn update_lines(
        &self,
        client: &zk::Client,
        group: &str,
        mut change: impl FnMut(&mut Lines) -> bool,
    ) -> Result<(), LedgerError> {
        let path = self.lines_path(group);
        for _ in 0..ledger::ATTEMPTS {
            let (mut held, at) = match client.get_data(&path).await {
                Ok((data, stat)) => (lines::decode(group, &data), stat.version),
                Err(zk::Error::NoNode) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            if !change(&mut held) {
                return Ok(());
            }
            let bytes = lines::encode(group, &held)?;
            let mut writer = client.new_multi_writer();
            writer.add_set_data(&path, &bytes, Some(at))?;
            writer.add_create(
                &self.tick_path(group),
                b"",
                &self.options(zk::CreateMode::Persistent),
            )?;
            writer.add_delete(&self.tick_path(group), None)?;
            match writer.commit().await {
                Ok(_) => return Ok(()),
                Err(zk::MultiWriteError::OperationFailed {
                    index: 0,
                    source: zk::Error::BadVersion | zk::Error::NoNode,
                }) => continue,
                Err(e) => return Err(zk::Error::from(e).into()),
            }
        }
        Err(LedgerError::Contended(group.to_owned()))
    }

    /// The groups holding `name`'s whole entry and its line.
    async fn groups_of(
        &self,
        client: &zk::Client,
        name: &str,
    ) -> Result<(Option<String>, Option<String>), CoordError> {
        let read = self.read_ledger_with(client, false).await?;
        let find = |groups: &Holders| {
            groups
                .iter()
                .find(|(_, names)| names.contains(name))
                .map(|(group, _)| group.clone())
        };
        Ok((find(&read.whole_groups), find(&read.line_groups)))
    }

    /// Retires `name` for good, in whichever layouts hold it: its whole
    /// entry, and its description with its line naming the new
    /// description. Creating and deleting its registration in the same
    /// transaction proves it is not registered at the moment the
    /// retirement is written: a running domain is never retired.
    pub(super) async fn retire(&self, client: &zk::Client, name: &str) -> Result<(), CoordError> {
        let (whole_group, line_group) = self.groups_of(client, name).await?;
        if whole_group.is_none() && line_group.is_none() {
            return Err(CoordError::UnknownDomain(name.to_owned()));
        }
        let registration = format!("{}/{name}", self.folder());
        let persistent = self.options(zk::CreateMode::Persistent);
        for _ in 0..ledger::ATTEMPTS {
            let mut writer = client.new_multi_writer();
            writer
                .add_create(&registration, b"", &self.options(zk::CreateMode::Ephemeral))
                .map_err(failed)?;
            writer.add_delete(&registration, None).map_err(failed)?;
            let mut roles = vec![Role::Registration, Role::Registration];
            if let Some(group) = &whole_group {
                let path = format!("{}/{group}", self.ledger_folder());
                let (data, stat) = client.get_data(&path).await.map_err(failed)?;
                let mut entries = ledger::decode(group, &data);
                let known = entries
                    .get(name)
                    .and_then(|entry| self.admit_entry(&path, name, entry))
                    .ok_or_else(|| CoordError::UnknownDomain(name.to_owned()))?;
                let retired = Known {
                    retired: true,
                    ..known
                };
                entries.insert(name.to_owned(), self.entry(name, &retired)?);
                let bytes = ledger::encode(group, &entries).map_err(ledger_failed)?;
                writer
                    .add_set_data(&path, &bytes, Some(stat.version))
                    .map_err(failed)?;
                roles.push(Role::Whole);
            }
            if let Some(group) = &line_group {
                let path = self.lines_path(group);
                let (data, stat) = client.get_data(&path).await.map_err(failed)?;
                let mut held = lines::decode(group, &data);
                let line = held
                    .get(name)
                    .and_then(|text| Line::parse(text))
                    .map(|(line, _)| line)
                    .ok_or_else(|| CoordError::UnknownDomain(name.to_owned()))?;
                let described_at = self.description_path(name);
                let (description, described_stat) =
                    client.get_data(&described_at).await.map_err(failed)?;
                let folder = self.descriptions_folder();
                let described =
                    admit::<Described>(&self.settings.admission, &folder, name, &description)
                        .ok_or_else(|| CoordError::UnknownDomain(name.to_owned()))?;
                let retired = Described {
                    retired: true,
                    ..described
                };
                let line = Line {
                    described: described_stat.version + 1,
                    ..line
                };
                let seal = self
                    .settings
                    .admission
                    .seal_line(name, line.text().as_bytes());
                held.insert(name.to_owned(), line.sealed(seal.as_deref()));
                let bytes = lines::encode(group, &held).map_err(ledger_failed)?;
                writer
                    .add_set_data(
                        &described_at,
                        &self.sealed(name, &retired)?,
                        Some(described_stat.version),
                    )
                    .map_err(failed)?;
                writer
                    .add_set_data(&path, &bytes, Some(stat.version))
                    .map_err(failed)?;
                writer
                    .add_create(&self.tick_path(group), b"", &persistent)
                    .map_err(failed)?;
                writer
                    .add_delete(&self.tick_path(group), None)
                    .map_err(failed)?;
                roles.extend([Role::Description, Role::Lines, Role::Lines, Role::Lines]);
            }
            match writer.commit().await {
                Ok(_) => return Ok(()),
                Err(zk::MultiWriteError::OperationFailed {
                    index: 0,
                    source: zk::Error::NodeExists,
                }) => return Err(CoordError::StillRegistered(name.to_owned())),
                Err(zk::MultiWriteError::OperationFailed {
                    index,
                    source: zk::Error::BadVersion,
                }) if roles.get(index).is_some_and(|r| *r != Role::Registration) => continue,
                Err(e) => return Err(failed(e.into())),
            }
        }
        let group = line_group.or(whole_group).unwrap_or_default();
        Err(ledger_failed(LedgerError::Contended(group)))
    }
}

/// What each operation of a publication's transaction writes, to tell
/// which one failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Registration,
    Description,
    Lines,
    Whole,
}

/// The names a multi-read's listing gave, none when the folder is not
/// there.
fn listing(listed: Option<zk::MultiReadResult>) -> Result<Vec<String>, CoordError> {
    match listed {
        Some(zk::MultiReadResult::Children { children }) => Ok(children),
        Some(zk::MultiReadResult::Error {
            err: zk::Error::NoNode,
        }) => Ok(Vec::new()),
        Some(zk::MultiReadResult::Error { err }) => Err(failed(err)),
        _ => Err(failed(unexpected("a listing"))),
    }
}
