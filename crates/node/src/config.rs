//! A domain's configuration: a TOML file, overridden by flags and
//! `XARCHIVE_*` environment variables at the command line.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cluster::cache::CacheConfig;
use crate::cluster::ClusterConfig;
use crate::local::domain_name::DomainName;
use crate::local::filter::FilterSettings;
use crate::local::id_profile::IdProfile;
use crate::local::keys::{KeyFormat, KeyType, KeyTypes, Visibility};
pub use crate::local::release::{ReleasePolicy, RemoteSearch};
use crate::security::auth::AuthConfig;
pub use crate::security::seal::SealConfig;
use crate::security::tls::TlsConfig;
use crate::wire::PageBudget;

/// Limits on what one request may ask.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest record content, in bytes (after base64 decoding).
    pub max_content_bytes: usize,
    /// Lines read from one `_bulk` request; the rest are not read.
    pub max_bulk_lines: usize,
    /// IDs in one `POST /v1/contains`.
    pub max_contains_ids: usize,
    /// Requests handled at once; more are refused at once with 503.
    pub max_concurrent_requests: usize,
    /// Longest time a request may take (bulk imports excepted).
    pub request_timeout_ms: u64,
    /// Largest request head (request line and headers), in bytes.
    pub max_header_bytes: usize,
    /// Bytes a write of records must leave free in the data directory's
    /// file system; a write that would not is refused (507) and changes
    /// nothing. What it keeps lets searches log, and the store reopen,
    /// when the disk fills.
    pub min_free_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_content_bytes: 8 * 1024 * 1024,
            max_bulk_lines: 100_000,
            max_contains_ids: 10_000,
            max_concurrent_requests: 1_024,
            request_timeout_ms: 30_000,
            max_header_bytes: 16 * 1024,
            min_free_bytes: 64 * 1024 * 1024,
        }
    }
}

/// What the page this domain serves at `/` may hold and ask in a browser
/// (`[page]`): the filters of as many domains as fit, smallest first, in
/// `filter_bytes` and `filter_requests` (web/budget.js chooses them); the
/// other domains it asks this one about. Told to the page in
/// `/v1/cluster`'s `page`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PageConfig {
    /// Bytes of filters a browser holds, in all (the bits of each filter
    /// as the page holds them: `filter_bytes` in `/v1/cluster`).
    pub filter_bytes: u64,
    /// Filter and delta requests a search may make to bring the filters
    /// held up to date: also the most domains whose filters are held (one
    /// request each; two for a filter rebuilt since, read whole). A
    /// refresh of the page (every 3 s) asks as many domains for their
    /// figures (`/v1/stats`).
    pub filter_requests: u32,
}

impl Default for PageConfig {
    fn default() -> Self {
        PageConfig {
            filter_bytes: 20 * 1024 * 1024,
            filter_requests: 24,
        }
    }
}

/// The largest integer a JavaScript number holds exactly (2^53 − 1): the
/// page reads `filter_bytes` as one.
const MAX_PAGE_FILTER_BYTES: u64 = (1 << 53) - 1;

impl PageConfig {
    /// Refuses what the page could not honour: a byte budget it cannot
    /// read exactly, or one of the two limits zero without the other (both
    /// zero: no filters in browsers, every search asked of this domain).
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.filter_bytes > MAX_PAGE_FILTER_BYTES {
            return Err(ConfigError::Invalid(format!(
                "page.filter_bytes {} is more than a browser can be told exactly (at most {MAX_PAGE_FILTER_BYTES})",
                self.filter_bytes
            )));
        }
        if (self.filter_bytes == 0) != (self.filter_requests == 0) {
            return Err(ConfigError::Invalid(format!(
                "page.filter_bytes ({}) and page.filter_requests ({}) must both be 0 \
                 (no filters held in browsers) or both positive",
                self.filter_bytes, self.filter_requests
            )));
        }
        Ok(())
    }

    /// As `/v1/cluster` tells the page.
    pub fn budget(&self) -> PageBudget {
        PageBudget {
            filter_bytes: self.filter_bytes,
            filter_requests: self.filter_requests,
        }
    }
}

/// `[archive]`: the archive as people know it, printed on certificates,
/// shown on the page and by the command line (the domain's name stays
/// its identifier).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArchiveConfig {
    /// Its name (黔西南州档案馆); the domain's name when empty.
    pub display_name: String,
    /// Its postal address.
    pub address: String,
    /// Where people reach its page (a certificate names it as the place
    /// to check it); the advertised address when empty.
    pub url: String,
    /// Its seal as a PNG, printed on its certificates.
    pub seal_image: Option<PathBuf>,
    /// A font with Chinese characters for certificates; one is found
    /// among the system's when unset (Noto CJK, WenQuanYi, …).
    pub font: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// The domain's name, unique in its cluster.
    pub name: DomainName,
    /// Where the HTTP API listens.
    pub listen: SocketAddr,
    /// The data directory (the store and the filter snapshot).
    pub data: PathBuf,
    pub filter: FilterSettings,
    pub limits: Limits,
    pub cluster: ClusterConfig,
    pub cache: CacheConfig,
    pub auth: AuthConfig,
    pub tls: TlsConfig,
    /// The key types records may carry besides their archive number
    /// (`[[keys]]`), the same at every domain of a cluster.
    pub keys: Vec<KeyType>,
    /// How an archive number a person typed is read before a lookup
    /// (`[ids]`), the same at every domain of a cluster.
    pub ids: IdProfile,
    /// What the page may hold in a browser (`[page]`).
    pub page: PageConfig,
    /// Cross-archive requests: which records this domain releases to
    /// another archive's request without review (`[requests]`).
    pub requests: ReleasePolicy,
    /// The archive as people know it (`[archive]`).
    pub archive: ArchiveConfig,
    /// The key it seals copies, answers and certificates with (`[seal]`).
    pub seal: SealConfig,
}

/// The key types a domain declares unless its configuration says
/// otherwise: the two by which people most often ask for their records.
pub fn default_key_types() -> Vec<KeyType> {
    vec![
        KeyType {
            name: "id_card".into(),
            visibility: Visibility::Private,
            format: KeyFormat::IdCard,
        },
        KeyType {
            name: "name_birth".into(),
            visibility: Visibility::Private,
            format: KeyFormat::NameBirth,
        },
    ]
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            name: DomainName::parse("local").expect("\"local\" is a domain name"),
            listen: SocketAddr::from(([127, 0, 0, 1], 7700)),
            data: PathBuf::from("xarchive-data/local"),
            filter: FilterSettings::default(),
            limits: Limits::default(),
            cluster: ClusterConfig::default(),
            cache: CacheConfig::default(),
            auth: AuthConfig::default(),
            tls: TlsConfig::default(),
            keys: default_key_types(),
            ids: IdProfile::default(),
            page: PageConfig::default(),
            requests: ReleasePolicy::default(),
            archive: ArchiveConfig::default(),
            seal: SealConfig::default(),
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("invalid configuration: keys: {0}")]
    Keys(#[from] crate::local::keys::KeyTypesError),
}

impl NodeConfig {
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let config: NodeConfig = toml::from_str(text)?;
        config.check()?;
        Ok(config)
    }

    /// The declared key types, checked.
    pub fn key_types(&self) -> Result<KeyTypes, ConfigError> {
        Ok(KeyTypes::new(self.keys.clone())?)
    }

    /// Checks what serde cannot: names and limits that make sense.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.limits.max_content_bytes == 0
            || self.limits.max_bulk_lines == 0
            || self.limits.max_concurrent_requests == 0
            || self.limits.request_timeout_ms == 0
            || self.limits.max_header_bytes < 8 * 1024
        {
            return Err(ConfigError::Invalid(
                "limits must be positive (max_header_bytes at least 8192)".into(),
            ));
        }
        if let Some(zk) = &self.cluster.zk {
            if zk.trim().is_empty() || zk.contains(char::is_whitespace) {
                return Err(ConfigError::Invalid(format!(
                    "cluster.zk {zk:?} must be host:port[,host:port…][/chroot]"
                )));
            }
        }
        if self.cluster.audit_anchor_ms == 0 {
            return Err(ConfigError::Invalid(
                "cluster.audit_anchor_ms must be positive".into(),
            ));
        }
        if !crate::cluster::valid_group(&self.cluster.group) {
            return Err(ConfigError::Invalid(format!(
                "cluster.group {:?} must be 1..=32 of A-Z a-z 0-9 - _ (a province's two-digit code, say)",
                self.cluster.group
            )));
        }
        self.key_types()?;
        self.ids
            .check()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        if !(self.filter.fpr > 0.0 && self.filter.fpr <= 0.5) {
            return Err(ConfigError::Invalid(format!(
                "filter.fpr must be in (0, 0.5], got {}",
                self.filter.fpr
            )));
        }
        self.page.check()?;
        if self.archive.display_name.len() > 256 || self.archive.address.len() > 1024 {
            return Err(ConfigError::Invalid(
                "archive.display_name (256 bytes at most) or archive.address (1024) is too long"
                    .into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_partial_file_and_refuses_unknown_keys() {
        let c = NodeConfig::from_toml(
            "name = \"A\"\nlisten = \"127.0.0.1:9000\"\n[filter]\nkind = \"cuckoo\"\n",
        )
        .unwrap();
        assert_eq!(c.name, "A");
        assert_eq!(c.filter.kind, crate::local::filter::FilterKind::Cuckoo);
        assert_eq!(c.limits, Limits::default());
        assert!(NodeConfig::from_toml("nmae = \"A\"").is_err());
        assert!(NodeConfig::from_toml("name = \"a b\"").is_err());
    }

    #[test]
    fn the_page_budget_is_read_and_a_budget_the_page_could_not_honour_is_refused_saying_why() {
        let c =
            NodeConfig::from_toml("[page]\nfilter_bytes = 6000\nfilter_requests = 2\n").unwrap();
        assert_eq!(
            c.page.budget(),
            PageBudget {
                filter_bytes: 6000,
                filter_requests: 2
            }
        );
        let none = NodeConfig::from_toml("[page]\nfilter_bytes = 0\nfilter_requests = 0\n");
        assert_eq!(none.unwrap().page.filter_bytes, 0, "no filters in browsers");

        let refused = |text: &str| match NodeConfig::from_toml(text) {
            Ok(c) => panic!("{text:?} was taken: {:?}", c.page),
            Err(e) => e.to_string(),
        };
        let half = refused("[page]\nfilter_bytes = 0\n");
        assert!(
            half.contains("page.filter_bytes (0)") && half.contains("both"),
            "{half}"
        );
        let half = refused("[page]\nfilter_requests = 0\n");
        assert!(half.contains("page.filter_requests (0)"), "{half}");
        let huge = refused("[page]\nfilter_bytes = 9007199254740992\n");
        assert!(
            huge.contains("page.filter_bytes 9007199254740992"),
            "{huge}"
        );
        assert!(refused("[page]\nfilter_requests = -1\n").contains("filter_requests"));
        assert!(refused("[page]\nfilter_requests = 4294967296\n").contains("filter_requests"));
        assert!(refused("[page]\nfilter_bytes = \"20 MB\"\n").contains("filter_bytes"));
        assert!(refused("[page]\nbytes = 1\n").contains("bytes"));
    }

    /// The Debian package's config file shows every setting commented out
    /// (`#key = value`) with its real default, or an example where there
    /// is no default: uncommented, it names every key there is and reads
    /// as the defaults but for the examples.
    #[test]
    fn the_packaged_config_file_shows_every_setting_with_its_default() {
        let shipped = include_str!("../../../packaging/debian/domain.toml");
        assert_eq!(
            NodeConfig::from_toml(shipped).unwrap(),
            NodeConfig::default()
        );

        let uncommented = shipped
            .lines()
            .map(|line| match line.strip_prefix('#') {
                Some(rest) if rest.starts_with(|c: char| c.is_ascii_lowercase() || c == '[') => {
                    rest
                }
                _ => line,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let file: toml::Table = uncommented.parse().unwrap();
        let defaults = toml::Table::try_from(NodeConfig::default()).unwrap();
        for (key, value) in &defaults {
            match value {
                toml::Value::Table(section) => {
                    // The benchmarks' settings, in test builds only.
                    for inner in section.keys().filter(|k| *k != "wan_delay_ms") {
                        assert!(
                            file[key].as_table().unwrap().contains_key(inner),
                            "{key}.{inner} is not in the packaged config file"
                        );
                    }
                }
                _ => assert!(
                    file.contains_key(key),
                    "{key} is not in the packaged config file"
                ),
            }
        }

        let mut every = NodeConfig::from_toml(&uncommented).unwrap();
        assert!(every.cluster.zk.take().is_some());
        assert!(every.cluster.advertise.take().is_some());
        assert!(every.auth.cluster_secret_file.take().is_some());
        assert_eq!(std::mem::take(&mut every.auth.tokens).len(), 1);
        assert!(every.tls.cert.take().is_some());
        assert!(every.tls.key.take().is_some());
        assert!(every.tls.ca.take().is_some());
        assert!(every.archive.seal_image.take().is_some());
        assert!(every.archive.font.take().is_some());
        assert!(every.seal.key_file.take().is_some());
        assert!(every.seal.certificate_file.take().is_some());
        assert_eq!(every, NodeConfig::default());
    }
}
