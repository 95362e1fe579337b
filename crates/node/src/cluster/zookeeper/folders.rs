//! Where the cluster's znodes are and who may touch them: the folders' paths
//! (under a chroot too), the ACLs of the cluster's own znodes and of the shared
//! parents, the check that the cluster's folders are sealed, and what is said
//! when a parent someone else made is locked.

use zookeeper_client as zk;

use super::{failed, ZooKeeperCoordinator};
use crate::cluster::coordinator::CoordError;

/// The ACL of the cluster's znodes: with `credentials`, readable and
/// writable only with them (ZooKeeper's digest scheme); else open.
pub(super) fn cluster_acl(credentials: Option<&(String, String)>) -> Vec<zk::Acl> {
    match credentials {
        // ZooKeeper's digest id: user:base64(sha1(user:password)).
        Some((user, password)) => {
            use base64::Engine;
            use sha1::Digest;
            let digest = sha1::Sha1::digest(format!("{user}:{password}").as_bytes());
            let id = format!(
                "{user}:{}",
                base64::engine::general_purpose::STANDARD.encode(digest)
            );
            vec![zk::Acl::new(
                zk::Permission::ALL,
                zk::AuthId::new("digest", &id),
            )]
        }
        None => zk::Acls::anyone_all().to_vec(),
    }
}

/// The ACL of the shared parents ([`ZooKeeperCoordinator::shared`]).
pub(super) fn shared_acl() -> Vec<zk::Acl> {
    vec![zk::Acl::new(
        zk::Permission::CREATE | zk::Permission::READ | zk::Permission::DELETE,
        zk::AuthId::anyone(),
    )]
}

/// Where creating `path` was refused for want of permission: its deepest
/// ancestor that exists (whose ACL a create checks), with that ACL as
/// text; `None` when `path` exists after all (ZooKeeper checks the
/// parent's ACL before whether the node is there).
pub(super) async fn locked_parent(client: &zk::Client, path: &str) -> Option<(String, String)> {
    if matches!(client.check_stat(path).await, Ok(Some(_))) {
        return None;
    }
    let mut parent = path;
    loop {
        parent = match parent.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &parent[..i],
        };
        if parent == "/" || matches!(client.check_stat(parent).await, Ok(Some(_))) {
            break;
        }
    }
    let acl = match client.get_acl(parent).await {
        Ok((acl, _)) => acl_text(&acl),
        Err(e) => format!("unreadable here ({e}: it gives this domain neither READ nor ADMIN)"),
    };
    Some((parent.to_owned(), acl))
}

/// An ACL as `zkCli.sh getAcl` prints it: `scheme:id:cdrwa`, one a line.
pub(super) fn acl_text(acl: &[zk::Acl]) -> String {
    let letters = |p: zk::Permission| {
        [
            (zk::Permission::CREATE, 'c'),
            (zk::Permission::DELETE, 'd'),
            (zk::Permission::READ, 'r'),
            (zk::Permission::WRITE, 'w'),
            (zk::Permission::ADMIN, 'a'),
        ]
        .into_iter()
        .filter(|(bit, _)| p.has(*bit))
        .map(|(_, c)| c)
        .collect::<String>()
    };
    let text: Vec<String> = acl
        .iter()
        .map(|a| format!("{}:{}:{}", a.scheme(), a.id(), letters(a.permission())))
        .collect();
    if text.is_empty() {
        "none".into()
    } else {
        text.join(", ")
    }
}

impl ZooKeeperCoordinator {
    pub fn folder(&self) -> String {
        format!("/xarchive/{}/domains", self.settings.cluster)
    }

    /// `path` as ZooKeeper names it: under the connect string's chroot.
    pub(super) fn full_path(&self, path: &str) -> String {
        match self.settings.connect.split_once('/') {
            Some((_, chroot)) if !chroot.trim_matches('/').is_empty() => {
                let path = if path == "/" { "" } else { path };
                format!("/{}{path}", chroot.trim_matches('/'))
            }
            _ => path.to_owned(),
        }
    }

    /// The positions ledger: a znode per group.
    pub(super) fn ledger_folder(&self) -> String {
        format!("/xarchive/{}/positions", self.settings.cluster)
    }

    /// This domain's group's znode in the ledger.
    pub(super) fn ledger_path(&self) -> String {
        format!("{}/{}", self.ledger_folder(), self.settings.group)
    }

    /// Where each domain anchors its audit log's head.
    pub(super) fn audit_folder(&self) -> String {
        format!("/xarchive/{}/audit", self.settings.cluster)
    }

    /// Where each domain's entry in the trust list is.
    pub(super) fn trust_folder(&self) -> String {
        format!("/xarchive/{}/seals", self.settings.cluster)
    }

    /// Refuses a cluster folder whose ACL is not the cluster's: with a
    /// cluster secret, one created open by someone else before the
    /// cluster's first start (or while a rotation had it deleted) would
    /// let anyone register there, read the members and delete them.
    pub(super) async fn check_acls(
        &self,
        client: &zk::Client,
        paths: &[String],
    ) -> Result<(), CoordError> {
        if self.settings.credentials.is_none() {
            return Ok(());
        }
        for path in paths {
            let (acl, _) = client.get_acl(path).await.map_err(failed)?;
            if acl != self.acl {
                return Err(CoordError::OpenFolder {
                    path: self.full_path(path),
                    acl: acl_text(&acl),
                });
            }
        }
        Ok(())
    }

    /// Options for the cluster's own znodes (its ACL).
    pub(super) fn options(&self, mode: zk::CreateMode) -> zk::CreateOptions<'_> {
        mode.with_acls(zk::Acls::new(&self.acl))
    }

    /// Options for shared parents (a chroot, `/xarchive`): anyone may
    /// create in them, since other clusters make their folders there too,
    /// but not change their ACL ([`ZooKeeperCoordinator::shared`]).
    pub(super) fn shared(&self, mode: zk::CreateMode) -> zk::CreateOptions<'_> {
        mode.with_acls(zk::Acls::new(&self.shared))
    }

    /// Creates the folder `path` (and its missing parents) with `options`.
    /// Refused for want of permission above the cluster's own folder, it
    /// names the parent and the ACL someone set on it: that is not about
    /// the cluster secret, and saying so would send the operator after the
    /// wrong thing.
    pub(super) async fn make_folder(
        &self,
        client: &zk::Client,
        path: &str,
        options: &zk::CreateOptions<'_>,
    ) -> Result<(), CoordError> {
        match client.mkdir(path, options).await {
            Ok(()) | Err(zk::Error::NodeExists) => Ok(()),
            Err(zk::Error::NoAuth) => {
                let Some((parent, acl)) = locked_parent(client, path).await else {
                    return Ok(());
                };
                let cluster = format!("/xarchive/{}", self.settings.cluster);
                let shown = self.full_path(&parent);
                if parent == cluster || parent.starts_with(&format!("{cluster}/")) {
                    // The cluster's own folder: made under another secret.
                    Err(CoordError::NoAuth)
                } else {
                    Err(CoordError::ParentLocked {
                        folder: self.full_path(path),
                        path: shown,
                        acl,
                    })
                }
            }
            Err(e) => Err(failed(e)),
        }
    }
}
