//! The history of a run: every client operation and every fault, with
//! start and end times from one monotonic clock, and what the final checks
//! saw of the cross-archive requests (each receiving domain's requests,
//! each domain's audit steps), kept in memory for the checker and appended
//! as NDJSON to a file for whoever studies a failure.

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};
use xarchive_node::wire::{CacheRoute, ErrorCode, HoldingState, RequestStatus, RequestView};

use crate::Error;

/// What a client asked for.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// `PUT /v1/archives/{id}` at the domain named by the ID's prefix.
    Put,
    /// `DELETE /v1/archives/{id}` at the same domain.
    Delete,
    /// `GET /v1/lookup/{id}` at any domain.
    Lookup,
    /// `GET /v1/archives/{id}` at the owner (final checks).
    Get,
    /// `POST /v1/search` at any domain for a person's `id_card`; the op's
    /// `id` is the key's value (a synthetic person's).
    Search,
    /// `POST /v1/requests` at a receiving domain for the op's `records`,
    /// held at other domains; the op's `id` is the workload's name for the
    /// request, sent as its `purpose` (so that the final checks can tell
    /// which submit a request they find came from).
    Submit,
    /// `GET /v1/requests/{id}` at the receiving domain (final checks); the
    /// op's `id` is the request's ID.
    Request,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Put => "put",
            OpKind::Delete => "delete",
            OpKind::Lookup => "lookup",
            OpKind::Get => "get",
            OpKind::Search => "search",
            OpKind::Submit => "submit",
            OpKind::Request => "request",
        })
    }
}

/// How an operation ended.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    /// A success status (200, 201, 204); `owner` is the domain a lookup
    /// named, `cache` its `route.cache` (`hit` when a cached copy answered),
    /// `found` the IDs a search returned, `request` the ID a submitted
    /// request was given.
    Ok {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache: Option<CacheRoute>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        found: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request: Option<String>,
    },
    /// Any other HTTP answer, with the JSON error's `code`.
    Http {
        status: u16,
        code: Option<ErrorCode>,
    },
    /// No HTTP answer (refused, reset, timed out): the effect is unknown.
    Transport { error: String },
}

impl Outcome {
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok { .. })
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            Outcome::Ok { status, .. } | Outcome::Http { status, .. } => Some(*status),
            Outcome::Transport { .. } => None,
        }
    }

    /// Whether the answer tells what happened (the write landed, or it was
    /// refused and changed nothing): false when the effect is unknown.
    pub fn is_definite(&self) -> bool {
        match self {
            Outcome::Ok { .. } => true,
            // A 5xx other than the documented refusals may have been cut
            // short after the write landed.
            Outcome::Http { status, code } => {
                *status < 500
                    || matches!(
                        code,
                        Some(
                            ErrorCode::CoordinatorUnavailable
                                | ErrorCode::Overloaded
                                | ErrorCode::Unavailable
                                | ErrorCode::InsufficientStorage
                                | ErrorCode::StoreUnavailable
                        )
                    )
            }
            Outcome::Transport { .. } => false,
        }
    }

    /// A short class for tables: `ok`, `404 not_found`, `transport`, ...
    pub fn class(&self) -> String {
        match self {
            Outcome::Ok { status, .. } => format!("ok {status}"),
            Outcome::Http { status, code } => {
                format!("{status} {}", code.map_or("-", ErrorCode::as_str))
            }
            Outcome::Transport { .. } => "transport error".to_owned(),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok {
                status,
                owner,
                cache,
                found,
                request,
            } => {
                write!(f, "{status}")?;
                if let Some(found) = found {
                    write!(f, " (found {})", found.join(","))?;
                }
                if let Some(request) = request {
                    write!(f, " (request {request})")?;
                }
                if let Some(owner) = owner {
                    write!(f, " (owner {owner})")?;
                }
                match cache {
                    Some(cache) => write!(f, " [cache {cache}]"),
                    None => Ok(()),
                }
            }
            Outcome::Http { status, code } => {
                write!(
                    f,
                    "{status} {}",
                    code.map_or("(no code)", ErrorCode::as_str)
                )
            }
            Outcome::Transport { error } => write!(f, "transport error: {error}"),
        }
    }
}

/// One completed client operation. Times are microseconds since the
/// run's start.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Op {
    /// The client thread (`usize::MAX` for the final checks).
    pub worker: usize,
    pub kind: OpKind,
    pub id: String,
    /// The domain asked.
    pub domain: String,
    pub start_us: u64,
    pub end_us: u64,
    pub outcome: Outcome,
    /// A submit's records (archive IDs), the applicant's own; empty for
    /// every other kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<String>,
}

impl Op {
    /// Whether it was refused with an answer that promises nothing
    /// changed.
    pub fn was_refused(&self) -> bool {
        self.outcome.is_definite() && self.outcome.status().is_some_and(|s| s >= 400)
    }
}

/// An operation of worker 1, for the checkers' tests' hand-made histories.
#[cfg(test)]
pub(crate) fn op(
    kind: OpKind,
    id: &str,
    domain: &str,
    start: u64,
    end: u64,
    outcome: Outcome,
) -> Op {
    Op {
        worker: 1,
        kind,
        id: id.into(),
        domain: domain.into(),
        start_us: start,
        end_us: end,
        outcome,
        records: Vec::new(),
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.id)?;
        if !self.records.is_empty() {
            write!(f, " for {}", self.records.join(","))?;
        }
        write!(
            f,
            " at {} [{:.3} s .. {:.3} s] -> {}",
            self.domain,
            secs(self.start_us),
            secs(self.end_us),
            self.outcome
        )
    }
}

/// Microseconds as seconds, for messages.
pub fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// What the nemesis did.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// SIGKILL of a domain, restarted later on the same data and port.
    KillDomain,
    /// SIGSTOP of a domain for longer than the session timeout, then SIGCONT.
    PauseDomain,
    /// SIGKILL of ZooKeeper, started again later on the same data.
    KillZooKeeper,
    /// ZooKeeper restarted with an empty data dir: every session is gone.
    FreshZooKeeper,
    /// The link between the bridge and a domain's or ZooKeeper's network
    /// namespace set down, later up (runs with network namespaces only).
    CutLink,
    /// Two domains cut from each other only (blackhole routes in both
    /// namespaces): both still reach ZooKeeper and the clients.
    PartitionDomains,
    /// A domain cut from every ZooKeeper server only: it still reaches
    /// the other domains and the clients.
    PartitionZooKeeper,
    /// A domain cut from the clients only (the root namespace's address
    /// on the bridge): it still reaches the other domains and ZooKeeper.
    PartitionClients,
    /// The ensemble's current leader (by `srvr`) killed with SIGKILL,
    /// started again later on its data (ensemble runs only).
    KillLeader,
    /// A domain's data directory (a file system of its own) filled to the
    /// last byte by a ballast file, later removed.
    FillDisk,
}

impl FaultKind {
    /// The faults of processes (any run).
    pub const PROCESS: [FaultKind; 5] = [
        FaultKind::KillDomain,
        FaultKind::PauseDomain,
        FaultKind::KillZooKeeper,
        FaultKind::FreshZooKeeper,
        FaultKind::FillDisk,
    ];

    /// The faults of the network (runs with namespaces only).
    pub const NETWORK: [FaultKind; 4] = [
        FaultKind::CutLink,
        FaultKind::PartitionDomains,
        FaultKind::PartitionZooKeeper,
        FaultKind::PartitionClients,
    ];

    /// Every kind, for tables.
    pub const ALL: [FaultKind; 10] = [
        FaultKind::KillDomain,
        FaultKind::PauseDomain,
        FaultKind::KillZooKeeper,
        FaultKind::FreshZooKeeper,
        FaultKind::FillDisk,
        FaultKind::KillLeader,
        FaultKind::CutLink,
        FaultKind::PartitionDomains,
        FaultKind::PartitionZooKeeper,
        FaultKind::PartitionClients,
    ];

    /// Whether it is done to the ZooKeeper service as a whole (else to a
    /// domain, a network node, or a pair).
    pub fn on_zookeeper(self) -> bool {
        matches!(
            self,
            FaultKind::KillZooKeeper | FaultKind::FreshZooKeeper | FaultKind::KillLeader
        )
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultKind::KillDomain => "kill -9 domain",
            FaultKind::PauseDomain => "SIGSTOP domain",
            FaultKind::KillZooKeeper => "kill -9 ZooKeeper",
            FaultKind::FreshZooKeeper => "ZooKeeper fresh",
            FaultKind::CutLink => "link cut",
            FaultKind::PartitionDomains => "split domain|domain",
            FaultKind::PartitionZooKeeper => "split domain|zk",
            FaultKind::PartitionClients => "split domain|clients",
            FaultKind::KillLeader => "kill -9 zk leader",
            FaultKind::FillDisk => "disk full",
        })
    }
}

/// One fault, from its start to its heal, when ZooKeeper and the domains
/// were whole again after the round's last heal, and when the cluster had
/// converged (none if it did not within the nemesis's patience).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Fault {
    pub n: usize,
    pub kind: FaultKind,
    /// A domain's name, or `zk`.
    pub target: String,
    pub start_us: u64,
    pub healed_us: u64,
    /// Every fault of the round healed, every ZooKeeper server serving
    /// (`srvr`: leader, follower or standalone) and every domain answering
    /// `/healthz`: where the 5 s convergence target starts. None in
    /// histories written before it was recorded.
    #[serde(default)]
    pub whole_us: Option<u64>,
    pub converged_us: Option<u64>,
}

/// A request as its receiving domain listed it in the final checks
/// (`GET /v1/requests`), once every fault had healed and its parts had had
/// time to be answered.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RequestSeen {
    /// The receiving domain.
    pub domain: String,
    /// The request's ID.
    pub id: String,
    /// Its `purpose`: the `id` of the submit op it came from.
    pub purpose: String,
    pub status: RequestStatus,
    /// The parts answered for good (a receiving domain names no other).
    pub parts: Vec<PartSeen>,
    /// Holding domains that had not answered for good, counted.
    #[serde(default)]
    pub awaiting: u32,
    /// Records no domain was found to hold when it was submitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_found: Vec<String>,
    /// When the receiving domain registered it (its `submitted_at`, on
    /// this history's clock): its records were looked up before then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_us: Option<u64>,
    /// Its certificate, issued at the end by the final checks (for an
    /// answered request), and how its checks went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<CertificateSeen>,
}

/// A certificate the final checks issued, and checked at another domain
/// by its code and by its payload.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CertificateSeen {
    pub code: String,
    /// Why issuing or checking it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// One holding domain's part of a [`RequestSeen`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartSeen {
    pub holding: String,
    pub state: HoldingState,
    pub records: Vec<String>,
    /// The archive numbers of the verified copies received.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<String>,
    /// Records the holding domain said it does not hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The copies (archive numbers) the receiving domain showed as no
    /// longer checking against their seals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<String>,
}

impl RequestSeen {
    /// What the checker needs of `view`, listed at `domain`, its
    /// `submitted_at` put on the clock of `rec`.
    pub fn of(domain: &str, view: &RequestView, rec: &Recorder) -> RequestSeen {
        RequestSeen {
            domain: domain.to_owned(),
            id: view.id.clone(),
            purpose: view.purpose.clone(),
            status: view.status,
            awaiting: view.awaiting.archives,
            parts: view
                .holdings
                .iter()
                .map(|h| PartSeen {
                    holding: h.domain.clone(),
                    state: h.state,
                    records: h.records.clone(),
                    copies: h.copies.iter().map(|c| c.archive_number.clone()).collect(),
                    missing: h.missing.clone(),
                    invalid: h
                        .copies
                        .iter()
                        .filter(|c| !c.valid)
                        .map(|c| c.archive_number.clone())
                        .collect(),
                })
                .collect(),
            not_found: view.not_found.clone(),
            registered_us: humantime::parse_rfc3339(&view.submitted_at)
                .ok()
                .map(|at| rec.us_at(at)),
            certificate: None,
        }
    }
}

/// A step of a cross-archive request in a domain's audit log (an entry
/// with an `action`), as the final checks read it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepSeen {
    /// The domain whose log holds it.
    pub domain: String,
    /// `request_submitted`, `request_released`, `copies_received`, …
    pub action: String,
    /// The request's ID.
    pub request: String,
    /// The domain of the entry's requester: for a holding domain's
    /// take-in, the receiving domain; for a receiving domain's receipt,
    /// the holding one.
    pub by: String,
    /// The entry's time at that domain (microseconds since the Unix
    /// epoch, its own clock: not the run's).
    pub at_us: u64,
}

/// A run's history, as the checker reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    pub ops: Vec<Op>,
    pub faults: Vec<Fault>,
    /// Every request the receiving domains listed in the final checks.
    pub requests: Vec<RequestSeen>,
    /// Every request step in the domains' audit logs, read after those.
    pub steps: Vec<StepSeen>,
}

impl History {
    /// Reads back a history written by a [`Recorder`] (its operations,
    /// healed faults, and the requests and steps of the final checks;
    /// notes and fault starts are skipped), to check it again. `Err` names the first line that is not one.
    pub fn load(path: &Path) -> Result<History, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::History {
            path: path.to_owned(),
            source,
        })?;
        let mut history = History::default();
        for (n, line) in text.lines().enumerate() {
            let bad = |e: serde_json::Error| Error::History {
                path: path.to_owned(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("line {}: {e}", n + 1),
                ),
            };
            let value: serde_json::Value = serde_json::from_str(line).map_err(bad)?;
            match value.get("type").and_then(serde_json::Value::as_str) {
                Some("op") => history
                    .ops
                    .push(serde_json::from_value(value).map_err(bad)?),
                Some("fault") => history
                    .faults
                    .push(serde_json::from_value(value).map_err(bad)?),
                Some("request") => history
                    .requests
                    .push(serde_json::from_value(value).map_err(bad)?),
                Some("step") => history
                    .steps
                    .push(serde_json::from_value(value).map_err(bad)?),
                _ => {}
            }
        }
        Ok(history)
    }
}

/// A line of the NDJSON file.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line<'a> {
    Op(&'a Op),
    FaultStarted {
        n: usize,
        kind: FaultKind,
        target: &'a str,
        at_us: u64,
    },
    Fault(&'a Fault),
    Request(&'a RequestSeen),
    Step(&'a StepSeen),
    Note {
        at_us: u64,
        text: &'a str,
    },
}

struct Inner {
    history: History,
    file: Option<File>,
    write_error: Option<std::io::Error>,
}

/// Records a history from many threads at once. Each line is written to
/// the file as it happens, so a run that dies leaves what it had.
pub struct Recorder {
    clock: Instant,
    /// The wall clock when `clock` was read: a time a domain wrote (the
    /// same machine's clock) is put on this history's clock by it.
    wall: SystemTime,
    path: Option<PathBuf>,
    inner: Mutex<Inner>,
}

impl Recorder {
    /// A recorder whose clock starts now; with `path`, also writing NDJSON
    /// there (the file is created or truncated).
    pub fn new(path: Option<&Path>) -> Result<Recorder, Error> {
        let file = match path {
            Some(p) => Some(File::create(p).map_err(|source| Error::History {
                path: p.to_owned(),
                source,
            })?),
            None => None,
        };
        Ok(Recorder {
            clock: Instant::now(),
            wall: SystemTime::now(),
            path: path.map(Path::to_owned),
            inner: Mutex::new(Inner {
                history: History::default(),
                file,
                write_error: None,
            }),
        })
    }

    /// Microseconds since the recorder was made.
    pub fn now_us(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Microseconds from the recorder's start to the wall-clock time
    /// `at` (0 for a time before it).
    pub fn us_at(&self, at: SystemTime) -> u64 {
        at.duration_since(self.wall)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    /// The instant `us` stands for.
    pub fn instant(&self, us: u64) -> Instant {
        self.clock + std::time::Duration::from_micros(us)
    }

    /// The NDJSON file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A thread that panicked holding the lock failed the run already.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write(inner: &mut Inner, line: &Line<'_>) {
        let Some(file) = inner.file.as_mut() else {
            return;
        };
        let written = serde_json::to_vec(line)
            .map_err(std::io::Error::from)
            .and_then(|mut text| {
                text.push(b'\n');
                file.write_all(&text)
            });
        if let Err(e) = written {
            inner.write_error.get_or_insert(e);
        }
    }

    pub fn op(&self, op: Op) {
        let mut inner = self.lock();
        Self::write(&mut inner, &Line::Op(&op));
        inner.history.ops.push(op);
    }

    pub fn fault_started(&self, n: usize, kind: FaultKind, target: &str, at_us: u64) {
        let mut inner = self.lock();
        Self::write(
            &mut inner,
            &Line::FaultStarted {
                n,
                kind,
                target,
                at_us,
            },
        );
    }

    /// A fault once healed and (perhaps) converged.
    pub fn fault(&self, fault: Fault) {
        let mut inner = self.lock();
        Self::write(&mut inner, &Line::Fault(&fault));
        inner.history.faults.push(fault);
    }

    /// A request as the final checks found it at its receiving domain.
    pub fn request(&self, seen: RequestSeen) {
        let mut inner = self.lock();
        Self::write(&mut inner, &Line::Request(&seen));
        inner.history.requests.push(seen);
    }

    /// A request's step as the final checks read it in an audit log.
    pub fn step(&self, step: StepSeen) {
        let mut inner = self.lock();
        Self::write(&mut inner, &Line::Step(&step));
        inner.history.steps.push(step);
    }

    /// A line of free text in the file (what the run did when).
    pub fn note(&self, text: &str) {
        let at_us = self.now_us();
        let mut inner = self.lock();
        Self::write(&mut inner, &Line::Note { at_us, text });
    }

    /// How many operations so far.
    pub fn len(&self) -> usize {
        self.lock().history.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the history so far.
    pub fn history(&self) -> History {
        self.lock().history.clone()
    }

    /// The first error writing the file, if any (the in-memory history is
    /// complete regardless).
    pub fn finish(&self) -> Result<(), Error> {
        let mut inner = self.lock();
        if let Some(file) = inner.file.as_mut() {
            if let Err(e) = file.flush() {
                inner.write_error.get_or_insert(e);
            }
        }
        match (inner.write_error.take(), &self.path) {
            (Some(source), Some(path)) => Err(Error::History {
                path: path.clone(),
                source,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_fault_request_and_step_is_one_json_line_and_reads_back_the_same() {
        let dir = xarchive_testkit::tempdir().unwrap();
        let path = dir.path().join("history.ndjson");
        let rec = Recorder::new(Some(&path)).unwrap();
        rec.op(Op {
            worker: 1,
            kind: OpKind::Lookup,
            id: "A-w1-000001".into(),
            domain: "B".into(),
            start_us: 10,
            end_us: 20,
            outcome: Outcome::Http {
                status: 404,
                code: Some(ErrorCode::NotFound),
            },
            records: Vec::new(),
        });
        rec.fault_started(0, FaultKind::PauseDomain, "C", 5);
        rec.fault(Fault {
            n: 0,
            kind: FaultKind::PauseDomain,
            target: "C".into(),
            start_us: 5,
            healed_us: 50,
            whole_us: None,
            converged_us: None,
        });
        rec.request(RequestSeen {
            domain: "A".into(),
            id: "00ff".into(),
            purpose: "request-w1-000000".into(),
            status: RequestStatus::Answered,
            awaiting: 0,
            parts: vec![PartSeen {
                holding: "B".into(),
                state: HoldingState::Released,
                records: vec!["B-w1-000001".into()],
                copies: vec!["B-w1-000001".into()],
                missing: Vec::new(),
                invalid: Vec::new(),
            }],
            not_found: Vec::new(),
            registered_us: Some(40),
            certificate: None,
        });
        rec.step(StepSeen {
            domain: "B".into(),
            action: "request_released".into(),
            request: "00ff".into(),
            by: "A".into(),
            at_us: 1,
        });
        rec.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0]["type"], "op");
        assert_eq!(lines[0]["outcome"]["result"], "http");
        assert_eq!(lines[0]["outcome"]["code"], "not_found");
        assert_eq!(lines[1]["type"], "fault_started");
        assert_eq!(lines[2]["kind"], "pause_domain");
        assert_eq!(lines[3]["type"], "request");
        assert_eq!(lines[3]["parts"][0]["state"], "released");
        assert_eq!(lines[4]["type"], "step");
        let op: Op = serde_json::from_value(lines[0].clone()).unwrap();
        assert_eq!(op.end_us, 20);
        assert_eq!(rec.history().ops.len(), 1);
        assert_eq!(rec.history().faults.len(), 1);
        assert_eq!(rec.history().requests.len(), 1);
        assert_eq!(rec.history().steps.len(), 1);
        assert_eq!(History::load(&path).unwrap(), rec.history());
    }

    #[test]
    fn a_time_a_domain_wrote_is_put_on_the_history_clock() {
        let rec = Recorder::new(None).unwrap();
        let later = rec.wall + std::time::Duration::from_millis(1_500);
        assert_eq!(rec.us_at(later), 1_500_000);
        assert_eq!(rec.us_at(std::time::UNIX_EPOCH), 0, "before the start");
    }
}
