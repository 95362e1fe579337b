//! Who may do what: API tokens with roles for clients, a cluster secret
//! for member domains, and a rate limit per token.
//!
//! Tokens are random (32 bytes, `xa_` + base64url) and kept only as
//! SHA-256 digests in the configuration; a high-entropy secret needs no
//! slow hash. Members present a credential derived from the cluster
//! secret that names them and expires (`member.rs`), so the secret itself
//! never crosses the network.
//!
//! Searches by key have a rate of their own per token, far below the
//! general one (a person at a counter, not a script), counted at the
//! token's home domain: a token with a home searches only there, so that
//! one domain sees, and limits, all its searches in the cluster.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::PathBuf;

use axum::http::{HeaderValue, Method};
use base64::Engine;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;

use crate::local::keys::KeyHasher;
use crate::security::member::{is_credential, MemberKey};

use crate::local::audit::Requester;
use crate::local::role::Acting;
pub use crate::local::role::{Role, UnknownRole};

/// Whether a client token of `role` may do what `need` requires (every
/// role reads; each other permission belongs to one role).
fn grants(role: Role, need: Need) -> bool {
    match need {
        Need::Open | Need::Read | Need::MemberOrRead | Need::Metrics => true,
        Need::Write => role == Role::Write,
        Need::MemberOrSearch => role == Role::Search,
        Need::Audit => role == Role::Audit,
        Need::Backup => role == Role::Backup,
        Need::Clerk => role == Role::Clerk,
        Need::Reviewer => role == Role::Reviewer,
        Need::Member => false,
    }
}

/// A client token as configured: its name, role and digest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    pub name: String,
    pub role: Role,
    /// Lowercase hex SHA-256 of the token.
    pub sha256: String,
    /// The domain the token belongs to: it may search by key only there
    /// (and that domain passes its searches on), so that its searches in
    /// the whole cluster are counted, and limited, in one place. Unset:
    /// it may search at any domain, limited at each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    pub tokens: Vec<TokenEntry>,
    /// A file holding the secret every member of the cluster shares: it
    /// authenticates calls between domains and their ZooKeeper znodes.
    pub cluster_secret_file: Option<PathBuf>,
    /// Let `/metrics` be scraped without a token.
    pub open_metrics: bool,
    /// Requests per second allowed per token (and per address when no
    /// token is required), with bursts up to `rate_burst`.
    pub rate_per_second: u32,
    pub rate_burst: u32,
    /// Searches by key allowed per token per minute, with bursts up to
    /// `search_burst`: what a person at a counter needs, not what a script
    /// trying every identity number of a birth date would.
    pub search_rate_per_minute: u32,
    pub search_burst: u32,
    /// Requests one token may have in flight at a domain at once: the
    /// domain's own limit (`limits.max_concurrent_requests`) is shared by
    /// everyone, and one token holding it all would refuse the others.
    pub max_in_flight_per_token: usize,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            tokens: Vec::new(),
            cluster_secret_file: None,
            open_metrics: false,
            rate_per_second: 1_000,
            rate_burst: 2_000,
            search_rate_per_minute: 60,
            search_burst: 30,
            max_in_flight_per_token: 32,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read the cluster secret {path}: {source}")]
    SecretFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the cluster secret in {0} is shorter than 16 characters")]
    WeakSecret(PathBuf),
    #[error("token {0:?}: sha256 must be 64 lowercase hex digits")]
    Digest(String),
    #[error("rate limits (and auth.max_in_flight_per_token) must be positive")]
    Rate,
}

/// Why a request is refused before any handler sees it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No credentials, or unknown ones (HTTP 401).
    #[error("{0}")]
    Unauthorized(&'static str),
    /// Known credentials without the permission (HTTP 403).
    #[error("{0}")]
    Forbidden(&'static str),
    /// Over the token's rate (HTTP 429), with when to try again.
    #[error("too many requests; retry in {} ms", retry_after.as_millis().max(1))]
    RateLimited { retry_after: std::time::Duration },
    /// A token of another archive asking for more than a read (HTTP 403).
    #[error(
        "token {token} belongs to archive {home}: its role acts only there (here it may only read)"
    )]
    NotHome { token: String, home: String },
    /// The token's requests in flight at their limit (HTTP 429).
    #[error("this token has {limit} requests in flight here already; retry once one has finished")]
    InFlight { limit: usize },
}

/// Who is calling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    Client {
        name: String,
        role: Role,
        /// The archive (domain) it belongs to, if bound to one: its role
        /// acts only there.
        home: Option<String>,
    },
    /// Another domain of the cluster, by the name its credential proves.
    Member(String),
    /// No credentials (only where none are required).
    Anonymous,
}

impl Principal {
    /// The caller as the audit log names it, at domain `here`: a token by
    /// its name and role, another archive by its name, nobody known as
    /// `anonymous`.
    pub fn requester(&self, here: &str) -> Requester {
        match self {
            Principal::Client { name, role, .. } => Requester {
                token: name.clone(),
                role: Acting::Client(*role),
                domain: here.to_owned(),
            },
            Principal::Member(member) => Requester::archive(member),
            Principal::Anonymous => Requester {
                token: "anonymous".to_owned(),
                role: Acting::Nobody,
                domain: here.to_owned(),
            },
        }
    }

    /// Whether the caller is of another archive than `me`: a member
    /// domain other than this one, or a token bound to another domain.
    /// The holding archive's release policy governs what such a caller
    /// reads of the records held here (`local/release.rs`). A token bound
    /// to none is the operator's own, at every domain that lists it.
    pub fn is_elsewhere(&self, me: &str) -> bool {
        match self {
            Principal::Member(name) => name != me,
            Principal::Client { home, .. } => home.as_deref().is_some_and(|h| h != me),
            Principal::Anonymous => false,
        }
    }
}

/// What a route requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Open,
    Read,
    Write,
    /// What peers call: filters, deltas, membership checks, record fetches.
    MemberOrRead,
    /// Searches by key: peers ask each other, clients need `search`.
    MemberOrSearch,
    /// The log of searches.
    Audit,
    /// The domain's backup: every record with its keys, and the log.
    Backup,
    /// The key filter, the relay, requests from other archives: members
    /// only, whatever a client's role.
    Member,
    /// Registering and following cross-archive requests.
    Clerk,
    /// Deciding requests from other archives.
    Reviewer,
    Metrics,
}

/// What a route's methods need, declared beside the route in the
/// router's table (`http/mod.rs`): reads (GET, HEAD) one thing, the
/// methods that change or ask with a body (PUT, POST, DELETE) another; a
/// CORS preflight (OPTIONS) nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    pub read: Need,
    pub write: Need,
}

impl Needs {
    /// The same whatever the method.
    pub const fn any(need: Need) -> Self {
        Needs {
            read: need,
            write: need,
        }
    }

    /// `read` to read; a read token for any other method, which the
    /// route does not take (answered 405 once let in).
    pub const fn read(read: Need) -> Self {
        Needs {
            read,
            write: Need::Read,
        }
    }

    /// A read token to read, `write` for the methods with a body.
    pub const fn write(write: Need) -> Self {
        Needs {
            read: Need::Read,
            write,
        }
    }

    pub fn of(&self, method: &Method) -> Need {
        match *method {
            Method::OPTIONS => Need::Open,
            Method::GET | Method::HEAD => self.read,
            _ => self.write,
        }
    }
}

/// What a path no route matches needs: a read token, so that routes
/// cannot be probed anonymously.
pub const UNROUTED: Needs = Needs::any(Need::Read);

/// A new random client token.
pub fn generate_token() -> String {
    let bytes: [u8; 32] = rand::random();
    format!(
        "xa_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// Lowercase hex SHA-256 of `s`.
pub fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Client tokens by digest: name, role, home domain.
type Tokens = HashMap<String, (String, Role, Option<String>)>;

/// The configured tokens by digest, each digest checked.
fn token_table(entries: &[TokenEntry]) -> Result<Tokens, AuthError> {
    let mut tokens = HashMap::new();
    for t in entries {
        let ok = t.sha256.len() == 64
            && t.sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !ok {
            return Err(AuthError::Digest(t.name.clone()));
        }
        tokens.insert(t.sha256.clone(), (t.name.clone(), t.role, t.domain.clone()));
    }
    Ok(tokens)
}

pub struct Authority {
    /// Whether anything is required at all (tokens or a secret set). Once
    /// on, it stays on: a reload that leaves no token must not open the
    /// domain to anyone.
    enabled: AtomicBool,
    /// Replaced whole by [`reload_tokens`](Self::reload_tokens).
    tokens: RwLock<Tokens>,
    member_key: Option<MemberKey>,
    zookeeper: Option<(String, String)>,
    open_metrics: bool,
    limiter: DefaultKeyedRateLimiter<String>,
    searches: DefaultKeyedRateLimiter<String>,
    /// Requests in flight by token name, and how many one may have.
    in_flight: parking_lot::Mutex<HashMap<String, usize>>,
    max_in_flight: usize,
    /// Keyed digests of key values, under keys derived from the secret.
    key_hasher: KeyHasher,
}

impl Authority {
    pub fn new(config: &AuthConfig, cluster: &str) -> Result<Self, AuthError> {
        let tokens = token_table(&config.tokens)?;
        let secret = match &config.cluster_secret_file {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| AuthError::SecretFile {
                        path: path.clone(),
                        source,
                    })?;
                let secret = text.trim().to_owned();
                if secret.len() < 16 {
                    return Err(AuthError::WeakSecret(path.clone()));
                }
                Some(secret)
            }
            None => None,
        };
        let member_key = secret.as_ref().map(|s| MemberKey::derive(cluster, s));
        let zookeeper = secret.as_ref().map(|s| {
            (
                "xarchive".to_owned(),
                sha256_hex(&format!("xarchive zookeeper\0{cluster}\0{s}")),
            )
        });
        let quota =
            Quota::per_second(NonZeroU32::new(config.rate_per_second).ok_or(AuthError::Rate)?)
                .allow_burst(NonZeroU32::new(config.rate_burst).ok_or(AuthError::Rate)?);
        let search_quota = Quota::per_minute(
            NonZeroU32::new(config.search_rate_per_minute).ok_or(AuthError::Rate)?,
        )
        .allow_burst(NonZeroU32::new(config.search_burst).ok_or(AuthError::Rate)?);
        if config.max_in_flight_per_token == 0 {
            return Err(AuthError::Rate);
        }
        Ok(Authority {
            key_hasher: KeyHasher::new(secret.as_deref()),
            enabled: AtomicBool::new(!tokens.is_empty() || secret.is_some()),
            tokens: RwLock::new(tokens),
            member_key,
            zookeeper,
            open_metrics: config.open_metrics,
            limiter: RateLimiter::keyed(quota),
            searches: RateLimiter::keyed(search_quota),
            in_flight: parking_lot::Mutex::new(HashMap::new()),
            max_in_flight: config.max_in_flight_per_token,
        })
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Takes `entries` as the client tokens from now on (a revoked token
    /// is refused from its next request); the old ones stay if any entry
    /// is malformed. Returns how many there are.
    pub fn reload_tokens(&self, entries: &[TokenEntry]) -> Result<usize, AuthError> {
        let tokens = token_table(entries)?;
        let count = tokens.len();
        if count > 0 {
            self.enabled.store(true, Ordering::Release);
        }
        *self.tokens.write() = tokens;
        Ok(count)
    }

    /// What this domain presents to its peers.
    /// Digests of key values keyed by the cluster secret.
    pub fn key_hasher(&self) -> &KeyHasher {
        &self.key_hasher
    }

    /// The key of the cluster's members (with a cluster secret).
    pub fn member_key(&self) -> Option<&MemberKey> {
        self.member_key.as_ref()
    }

    /// (user, password) for ZooKeeper's digest scheme, from the secret.
    pub fn zookeeper_credentials(&self) -> Option<(String, String)> {
        self.zookeeper.clone()
    }

    /// The caller named by an `Authorization: Bearer …` header.
    pub fn identify(&self, header: Option<&HeaderValue>) -> Result<Principal, Refusal> {
        let Some(header) = header else {
            return Ok(Principal::Anonymous);
        };
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(Refusal::Unauthorized(
                "the Authorization header must be `Bearer <token>`",
            ))?;
        if is_credential(token) {
            return self
                .member_key
                .as_ref()
                .and_then(|key| key.check_credential(token))
                .map(Principal::Member)
                .ok_or(Refusal::Unauthorized(
                    "the member credential is not this cluster's, or has expired",
                ));
        }
        let digest = sha256_hex(token);
        if let Some((name, role, home)) = self.tokens.read().get(&digest) {
            return Ok(Principal::Client {
                name: name.clone(),
                role: *role,
                home: home.clone(),
            });
        }
        Err(Refusal::Unauthorized(
            "the token is not known to this cluster",
        ))
    }

    /// Whether `who` may do at domain `here` what `need` requires. A
    /// token bound to another domain only reads here: whatever its role
    /// grants beyond reading (writes, searches, the log, backups,
    /// requests, reviews) it does at its home alone, so that one archive
    /// sees, limits and answers for everything its people do.
    pub fn allow(&self, who: &Principal, need: Need, here: &str) -> Result<(), Refusal> {
        if !self.enabled() || need == Need::Open || (need == Need::Metrics && self.open_metrics) {
            return Ok(());
        }
        if let Principal::Client {
            name,
            home: Some(home),
            ..
        } = who
        {
            let reads = matches!(need, Need::Read | Need::MemberOrRead | Need::Metrics);
            if home != here && !reads {
                return Err(Refusal::NotHome {
                    token: name.clone(),
                    home: home.clone(),
                });
            }
        }
        match (who, need) {
            (Principal::Anonymous, _) => Err(Refusal::Unauthorized("a token is required")),
            (Principal::Member(_), Need::MemberOrRead | Need::MemberOrSearch | Need::Member) => {
                Ok(())
            }
            (Principal::Member(_), _) => Err(Refusal::Forbidden(
                "cluster members may only read filters and records, and search",
            )),
            (Principal::Client { role, .. }, need) if grants(*role, need) => Ok(()),
            (Principal::Client { .. }, Need::Write) => {
                Err(Refusal::Forbidden("this token may read but not write"))
            }
            (Principal::Client { .. }, Need::MemberOrSearch) => Err(Refusal::Forbidden(
                "searching by key needs a token with the search role",
            )),
            (Principal::Client { .. }, Need::Member) => Err(Refusal::Forbidden(
                "the key filter and the relay are served only to the cluster's members",
            )),
            (Principal::Client { .. }, Need::Backup) => Err(Refusal::Forbidden(
                "a backup holds every record's keys: it needs a token with the backup role",
            )),
            (Principal::Client { .. }, Need::Clerk) => Err(Refusal::Forbidden(
                "cross-archive requests are registered by a token with the clerk role",
            )),
            (Principal::Client { .. }, Need::Reviewer) => Err(Refusal::Forbidden(
                "requests from other archives are decided by a token with the reviewer role",
            )),
            (Principal::Client { .. }, _) => Err(Refusal::Forbidden(
                "reading the search log needs a token with the audit role",
            )),
        }
    }

    /// Spends one request of `key`'s allowance, or says when to retry.
    pub fn spend(&self, key: &str) -> Result<(), Refusal> {
        spend(&self.limiter, key)
    }

    /// Spends one search of `token`'s allowance of searches by key.
    pub fn spend_search(&self, token: &str) -> Result<(), Refusal> {
        spend(&self.searches, token)
    }

    /// Counts a request of `token` in flight until the guard is dropped,
    /// or refuses it if the token has its limit in flight already.
    pub fn enter(&self, token: &str) -> Result<InFlight<'_>, Refusal> {
        let mut in_flight = self.in_flight.lock();
        let count = in_flight.entry(token.to_owned()).or_insert(0);
        if *count >= self.max_in_flight {
            return Err(Refusal::InFlight {
                limit: self.max_in_flight,
            });
        }
        *count += 1;
        Ok(InFlight {
            authority: self,
            token: token.to_owned(),
        })
    }
}

/// A request of a token in flight (see [`Authority::enter`]).
pub struct InFlight<'a> {
    authority: &'a Authority,
    token: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut in_flight = self.authority.in_flight.lock();
        if let Some(count) = in_flight.get_mut(&self.token) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.token);
            }
        }
    }
}

fn spend(limiter: &DefaultKeyedRateLimiter<String>, key: &str) -> Result<(), Refusal> {
    if limiter.len() > 100_000 {
        limiter.retain_recent();
    }
    limiter
        .check_key(&key.to_owned())
        .map_err(|not_until| Refusal::RateLimited {
            retry_after: not_until.wait_time_from(DefaultClock::default().now()),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority(secret: bool) -> (Authority, String, String, tempfile::TempDir) {
        let (read, write) = (generate_token(), generate_token());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "a very long shared secret\n").unwrap();
        let config = AuthConfig {
            tokens: vec![
                TokenEntry {
                    name: "clerk".into(),
                    role: Role::Read,
                    sha256: sha256_hex(&read),
                    domain: None,
                },
                TokenEntry {
                    name: "archivist".into(),
                    role: Role::Write,
                    sha256: sha256_hex(&write),
                    domain: None,
                },
            ],
            cluster_secret_file: secret.then_some(path),
            ..AuthConfig::default()
        };
        (Authority::new(&config, "c").unwrap(), read, write, dir)
    }

    fn bearer(t: &str) -> HeaderValue {
        HeaderValue::from_str(&format!("Bearer {t}")).unwrap()
    }

    #[test]
    fn roles_members_and_strangers() {
        let (a, read, write, dir) = authority(true);
        let reader = a.identify(Some(&bearer(&read))).unwrap();
        let writer = a.identify(Some(&bearer(&write))).unwrap();
        let credential = a.member_key().unwrap().credential("B");
        let member = a.identify(Some(&bearer(&credential))).unwrap();
        assert_eq!(member, Principal::Member("B".into()));
        assert!(a.allow(&reader, Need::Read, "A").is_ok());
        assert!(matches!(
            a.allow(&reader, Need::Write, "A").unwrap_err(),
            Refusal::Forbidden(_)
        ));
        assert!(a.allow(&writer, Need::Write, "A").is_ok());
        assert!(a.allow(&member, Need::MemberOrRead, "A").is_ok());
        assert!(matches!(
            a.allow(&member, Need::Write, "A").unwrap_err(),
            Refusal::Forbidden(_)
        ));
        assert!(matches!(
            a.allow(&Principal::Anonymous, Need::Read, "A").unwrap_err(),
            Refusal::Unauthorized(_)
        ));
        assert!(a.allow(&Principal::Anonymous, Need::Open, "A").is_ok());
        assert!(matches!(
            a.identify(Some(&bearer("xa_nope"))).unwrap_err(),
            Refusal::Unauthorized(_)
        ));
        assert!(matches!(
            a.identify(Some(&HeaderValue::from_static("Basic x")))
                .unwrap_err(),
            Refusal::Unauthorized(_)
        ));
        // The same secret in another cluster gives other credentials.
        let in_d = AuthConfig {
            cluster_secret_file: Some(dir.path().join("secret")),
            ..AuthConfig::default()
        };
        let d = Authority::new(&in_d, "d").unwrap();
        assert!(matches!(
            d.identify(Some(&bearer(&credential))).unwrap_err(),
            Refusal::Unauthorized(_)
        ));
        // Nothing configured: nothing required.
        assert!(!Authority::new(&AuthConfig::default(), "c")
            .unwrap()
            .enabled());
    }

    #[test]
    fn a_preflight_needs_nothing_and_a_read_and_a_write_what_the_route_declares() {
        let needs = Needs {
            read: Need::MemberOrRead,
            write: Need::Write,
        };
        assert_eq!(needs.of(&Method::OPTIONS), Need::Open);
        assert_eq!(needs.of(&Method::GET), Need::MemberOrRead);
        assert_eq!(needs.of(&Method::HEAD), Need::MemberOrRead);
        for method in [Method::PUT, Method::POST, Method::DELETE, Method::PATCH] {
            assert_eq!(needs.of(&method), Need::Write);
        }
        assert_eq!(Needs::read(Need::Audit).of(&Method::POST), Need::Read);
        assert_eq!(UNROUTED.of(&Method::GET), Need::Read);
    }

    #[test]
    fn only_the_search_role_and_members_search_and_only_the_audit_role_reads_the_log() {
        let a = Authority::new(&AuthConfig::default(), "c").unwrap();
        a.enabled.store(true, Ordering::Release);
        let client = |role| Principal::Client {
            name: "t".into(),
            role,
            home: None,
        };
        for role in Role::ALL {
            assert!(a.allow(&client(role), Need::Read, "A").is_ok());
            assert_eq!(
                a.allow(&client(role), Need::MemberOrSearch, "A").is_ok(),
                role == Role::Search
            );
            assert_eq!(
                a.allow(&client(role), Need::Audit, "A").is_ok(),
                role == Role::Audit
            );
            assert_eq!(
                a.allow(&client(role), Need::Write, "A").is_ok(),
                role == Role::Write
            );
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
        let member = Principal::Member("B".into());
        assert!(a.allow(&member, Need::MemberOrSearch, "A").is_ok());
        assert!(a.allow(&member, Need::Audit, "A").is_err());
        assert!("admin".parse::<Role>().is_err());
    }

    #[test]
    fn a_token_bound_to_an_archive_uses_its_role_only_there_and_elsewhere_only_reads() {
        let a = Authority::new(&AuthConfig::default(), "c").unwrap();
        a.enabled.store(true, Ordering::Release);
        let bound = |role| Principal::Client {
            name: "t".into(),
            role,
            home: Some("A".into()),
        };
        let unbound = |role| Principal::Client {
            name: "t".into(),
            role,
            home: None,
        };
        let beyond_reading = [
            (Role::Write, Need::Write),
            (Role::Search, Need::MemberOrSearch),
            (Role::Audit, Need::Audit),
            (Role::Backup, Need::Backup),
            (Role::Clerk, Need::Clerk),
            (Role::Reviewer, Need::Reviewer),
        ];
        for (role, need) in beyond_reading {
            assert!(a.allow(&bound(role), need, "A").is_ok(), "{role:?} at home");
            assert!(
                matches!(
                    a.allow(&bound(role), need, "C"),
                    Err(Refusal::NotHome { ref home, .. }) if home == "A"
                ),
                "{role:?} elsewhere"
            );
            assert!(
                a.allow(&unbound(role), need, "C").is_ok(),
                "{role:?} unbound"
            );
        }
        for role in Role::ALL {
            for need in [Need::Read, Need::MemberOrRead, Need::Metrics] {
                assert!(a.allow(&bound(role), need, "C").is_ok(), "{role:?} reads");
            }
            assert!(bound(role).is_elsewhere("C") && !bound(role).is_elsewhere("A"));
            assert!(!unbound(role).is_elsewhere("C"));
        }
        assert!(Principal::Member("B".into()).is_elsewhere("A"));
        assert!(!Principal::Anonymous.is_elsewhere("A"));
    }

    #[test]
    fn a_token_has_at_most_its_limit_of_requests_in_flight_and_others_are_not_held_up() {
        let config = AuthConfig {
            max_in_flight_per_token: 2,
            ..AuthConfig::default()
        };
        let a = Authority::new(&config, "c").unwrap();
        let first = a.enter("busy").unwrap();
        let second = a.enter("busy").unwrap();
        assert!(matches!(
            a.enter("busy"),
            Err(Refusal::InFlight { limit: 2 })
        ));
        assert!(a.enter("other").is_ok());
        drop(first);
        let third = a.enter("busy").unwrap();
        drop((second, third));
        assert!(a.in_flight.lock().is_empty());
        let zero = AuthConfig {
            max_in_flight_per_token: 0,
            ..AuthConfig::default()
        };
        assert!(matches!(Authority::new(&zero, "c"), Err(AuthError::Rate)));
    }

    #[test]
    fn the_rate_limit_answers_429_with_a_retry_time() {
        let config = AuthConfig {
            rate_per_second: 1,
            rate_burst: 2,
            ..AuthConfig::default()
        };
        let a = Authority::new(&config, "c").unwrap();
        assert!(a.spend("k").is_ok() && a.spend("k").is_ok());
        let e = a.spend("k").unwrap_err();
        assert!(matches!(e, Refusal::RateLimited { retry_after } if !retry_after.is_zero()));
        assert!(a.spend("other").is_ok());
    }

    #[test]
    fn searches_have_a_far_smaller_rate_of_their_own_per_token() {
        let config = AuthConfig {
            search_rate_per_minute: 1,
            search_burst: 2,
            ..AuthConfig::default()
        };
        let a = Authority::new(&config, "c").unwrap();
        assert!(a.spend_search("clerk").is_ok() && a.spend_search("clerk").is_ok());
        assert!(matches!(
            a.spend_search("clerk").unwrap_err(),
            Refusal::RateLimited { retry_after } if retry_after.as_secs() >= 20
        ));
        // Other requests of the same token are not held up by it.
        assert!(a.spend("clerk").is_ok());
        assert!(a.spend_search("counter-2").is_ok());
    }
}
