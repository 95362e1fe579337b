//! The clients: threads that put new records at the domain named by each
//! ID's prefix, delete some acknowledged ones there, look up
//! acknowledged, deleted and never-written IDs at random domains, search
//! people by the identity number the records carry, and submit
//! cross-archive requests for a person's acknowledged records (the first
//! held at another domain than the one asked), without waiting for
//! anything to be ready: every answer goes into the history.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::blocking::Client;
use xarchive_node::wire::{Certificate, CertificateCheck, RequestList, RequestStatus};

use crate::history::{CertificateSeen, Op, OpKind, Outcome, Recorder, RequestSeen};
use crate::http;
use crate::Error;

/// IDs the clients pick from: acknowledged and not yet chosen for a
/// delete; and those whose delete was acknowledged.
#[derive(Debug, Default)]
pub struct Pool {
    inner: Mutex<PoolInner>,
}

#[derive(Debug, Default)]
struct PoolInner {
    /// (ID, index of the owning domain).
    acked: Vec<(String, usize)>,
    deleted: Vec<(String, usize)>,
    /// With the cache: the last [`HOT`] IDs acknowledged (deleted ones
    /// stay until pushed out), looked up again and again at other
    /// domains so that their copies are cached.
    hot: VecDeque<(String, usize)>,
    /// With the cache: the last [`HOT`] IDs whose delete was acknowledged,
    /// looked up again and again (a cached copy must go).
    recently_deleted: VecDeque<(String, usize)>,
    /// The IDs of the requests acknowledged (201), with the index of the
    /// receiving domain.
    requests: Vec<(String, usize)>,
}

/// How many hot and recently deleted IDs the cache workload keeps.
const HOT: usize = 24;

fn push_bounded(list: &mut VecDeque<(String, usize)>, item: (String, usize)) {
    if list.len() >= HOT {
        list.pop_front();
    }
    list.push_back(item);
}

/// How often an acknowledged ID joins the hot set (pushing out the
/// oldest): rarely, so that each stays hot for a few seconds, long
/// enough to be admitted to the caches and served from them.
const HOT_JOIN: f64 = 0.05;

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pick(list: &[(String, usize)], rng: &mut StdRng) -> Option<(String, usize)> {
        (!list.is_empty()).then(|| list[rng.random_range(0..list.len())].clone())
    }

    /// How many IDs are acknowledged and not chosen for a delete.
    pub fn acknowledged(&self) -> usize {
        self.lock().acked.len()
    }

    /// The IDs acknowledged with no delete ever attempted, with the index
    /// of the owning domain.
    pub fn acknowledged_ids(&self) -> Vec<(String, usize)> {
        self.lock().acked.clone()
    }

    /// What a request submitted at domain `d` asks for: an acknowledged
    /// record held at another domain, and up to [`REQUEST_RECORDS`] − 1
    /// more of the same person's (held anywhere, `d` included), found
    /// among [`REQUEST_PICKS`] random picks. None while no acknowledged
    /// record is held elsewhere.
    fn records_for_request(&self, d: usize, rng: &mut StdRng) -> Option<Vec<String>> {
        let pool = self.lock();
        let (first, _) = (0..REQUEST_PICKS)
            .filter_map(|_| Pool::pick(&pool.acked, rng))
            .find(|(_, owner)| *owner != d)?;
        let person = http::person_of(&first);
        let wanted = rng.random_range(1..=REQUEST_RECORDS);
        let mut records = vec![first];
        for _ in 0..REQUEST_PICKS {
            if records.len() >= wanted {
                break;
            }
            if let Some((id, _)) = Pool::pick(&pool.acked, rng) {
                if http::person_of(&id) == person && !records.contains(&id) {
                    records.push(id);
                }
            }
        }
        Some(records)
    }
}

/// The most records one request of the workload asks for.
const REQUEST_RECORDS: usize = 3;
/// How many random picks of the pool a request's records are sought in
/// (one person's records are about one in [`http::PEOPLE`]).
const REQUEST_PICKS: usize = 60;

/// How long the final checks wait for every part of every request to be
/// answered, once the cluster converged and the records were read back.
pub const REQUESTS_PATIENCE: Duration = Duration::from_mins(1);

/// What the clients share.
pub struct Workload<'a> {
    pub names: &'a [String],
    pub urls: &'a [String],
    pub rec: &'a Recorder,
    pub pool: &'a Pool,
    pub stop: &'a AtomicBool,
    pub seed: u64,
    /// The domains cache other domains' records: look up hot and recently
    /// deleted IDs at domains other than their owner, again and again
    /// (a copy is admitted after 2 lookups within a minute), and delete
    /// hot IDs often.
    pub cache: bool,
}

impl Workload<'_> {
    /// One client's loop, until `stop`. `w` numbers the client (IDs carry
    /// it, so they are unique per writer).
    pub fn client(&self, w: usize) -> Result<(), Error> {
        let client = http::client(http::REQUEST_TIMEOUT)?;
        let mut rng = StdRng::seed_from_u64(
            self.seed
                .wrapping_add(0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(w as u64 + 1)),
        );
        let mut written = 0u64;
        let mut never = 0u64;
        let mut requested = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            let roll = rng.random_range(0..100);
            if roll < 35 {
                let d = rng.random_range(0..self.names.len());
                let id = format!("{}-w{w}-{written:06}", self.names[d]);
                written += 1;
                if self.call(&client, w, OpKind::Put, &id, d).is_ok() {
                    let mut pool = self.pool.lock();
                    pool.acked.push((id.clone(), d));
                    if self.cache && (pool.hot.len() < HOT || rng.random_bool(HOT_JOIN)) {
                        push_bounded(&mut pool.hot, (id, d));
                    }
                }
            } else if roll < 45 {
                let chosen = {
                    let mut pool = self.pool.lock();
                    // With the cache, half the deletes are of hot IDs
                    // (likely cached at the other domains).
                    let hot = if self.cache && rng.random_bool(0.5) {
                        Pool::pick(pool.hot.make_contiguous(), &mut rng)
                            .and_then(|h| pool.acked.iter().position(|a| *a == h))
                    } else {
                        None
                    };
                    let at = hot.or_else(|| {
                        (!pool.acked.is_empty()).then(|| rng.random_range(0..pool.acked.len()))
                    });
                    at.map(|at| pool.acked.swap_remove(at))
                };
                if let Some((id, d)) = chosen {
                    if self.call(&client, w, OpKind::Delete, &id, d).is_ok() {
                        let mut pool = self.pool.lock();
                        pool.deleted.push((id.clone(), d));
                        if self.cache {
                            push_bounded(&mut pool.recently_deleted, (id, d));
                        }
                    }
                }
            } else if roll < 47 {
                let d = rng.random_range(0..self.names.len());
                if let Some(records) = self.pool.records_for_request(d, &mut rng) {
                    let name = format!("request-w{w}-{requested:06}");
                    requested += 1;
                    self.submit(&client, w, &name, d, records);
                }
            } else if rng.random_range(0..10) == 0 {
                let person = http::person(rng.random_range(0..http::PEOPLE));
                let d = rng.random_range(0..self.names.len());
                self.call(&client, w, OpKind::Search, &person, d);
            } else {
                let which = rng.random_range(0..100);
                let (picked, elsewhere) = {
                    let mut pool = self.pool.lock();
                    if self.cache && which < 35 {
                        (Pool::pick(pool.hot.make_contiguous(), &mut rng), true)
                    } else if self.cache && which < 55 {
                        (
                            Pool::pick(pool.recently_deleted.make_contiguous(), &mut rng),
                            true,
                        )
                    } else if which < 80 {
                        (Pool::pick(&pool.acked, &mut rng), false)
                    } else if which < 90 {
                        (Pool::pick(&pool.deleted, &mut rng), false)
                    } else {
                        (None, false)
                    }
                };
                let n = self.names.len();
                let (id, d) = match picked {
                    // At a domain other than the owner: only there is a
                    // copy cached.
                    Some((id, owner)) if elsewhere && n > 1 => {
                        (id, (owner + rng.random_range(1..n)) % n)
                    }
                    Some((id, _)) => (id, rng.random_range(0..n)),
                    None => {
                        never += 1;
                        (format!("never-w{w}-{never:06}"), rng.random_range(0..n))
                    }
                };
                self.call(&client, w, OpKind::Lookup, &id, d);
            }
            std::thread::sleep(Duration::from_millis(rng.random_range(0..10)));
        }
        Ok(())
    }

    /// Sends one operation to domain `d` and records it.
    fn call(&self, client: &Client, w: usize, kind: OpKind, id: &str, d: usize) -> Outcome {
        self.send(client, w, kind, id, Vec::new(), d)
    }

    /// Submits request `name` for `records` at domain `d` and records it.
    fn submit(&self, client: &Client, w: usize, name: &str, d: usize, records: Vec<String>) {
        let outcome = self.send(client, w, OpKind::Submit, name, records, d);
        if let Outcome::Ok {
            request: Some(id), ..
        } = outcome
        {
            self.pool.lock().requests.push((id, d));
        }
    }

    /// Sends one operation, with a submit's `records`, to domain `d` and
    /// records it.
    fn send(
        &self,
        client: &Client,
        w: usize,
        kind: OpKind,
        id: &str,
        records: Vec<String>,
        d: usize,
    ) -> Outcome {
        let url = &self.urls[d];
        let start_us = self.rec.now_us();
        let outcome = match kind {
            OpKind::Put => http::put(client, url, id),
            OpKind::Delete => http::delete(client, url, id),
            OpKind::Lookup => http::lookup(client, url, id),
            OpKind::Get => http::get(client, url, id),
            OpKind::Search => http::search(client, url, id),
            OpKind::Submit => http::submit(client, url, id, &records),
            OpKind::Request => http::request(client, url, id),
        };
        let end_us = self.rec.now_us();
        self.rec.op(Op {
            worker: w,
            kind,
            id: id.to_owned(),
            domain: self.names[d].clone(),
            start_us,
            end_us,
            outcome: outcome.clone(),
            records,
        });
        outcome
    }

    /// The final reads, once every fault healed and the cluster
    /// converged: each acknowledged ID with no delete ever attempted is
    /// read at its owner and looked up at every domain, and every person
    /// is searched at every domain (a transport error is tried again, up
    /// to three times). `threads` share the work.
    pub fn final_reads(&self, ids: &[(String, usize)], threads: usize) -> Result<(), Error> {
        let client = http::client(http::REQUEST_TIMEOUT)?;
        for p in 0..http::PEOPLE {
            for d in 0..self.names.len() {
                self.final_call(&client, OpKind::Search, &http::person(p), d);
            }
        }
        let chunk = ids.len().div_ceil(threads.max(1)).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = ids
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || -> Result<(), Error> {
                        let client = http::client(http::REQUEST_TIMEOUT)?;
                        for (id, owner) in part {
                            self.final_call(&client, OpKind::Get, id, *owner);
                            for d in 0..self.names.len() {
                                self.final_call(&client, OpKind::Lookup, id, d);
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|p| {
                    Error::Panicked("final check", crate::panic_message(p.as_ref()))
                })??;
            }
            Ok(())
        })
    }

    fn final_call(&self, client: &Client, kind: OpKind, id: &str, d: usize) {
        for _ in 0..3 {
            if !matches!(
                self.call(client, crate::checker::FINAL, kind, id, d),
                Outcome::Transport { .. }
            ) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The final checks of the requests, after the records were read
    /// back: waits (up to `patience`) until every part of every request
    /// every domain lists is answered; reads each acknowledged request
    /// back at its receiving domain (`GET /v1/requests/{id}`, recorded as
    /// an operation); then records every request each domain lists and,
    /// after those, every request step in each domain's audit log (a
    /// receiving domain logs an answer just after keeping it, so the logs
    /// are read last).
    pub fn final_requests(&self, patience: Duration) -> Result<FinalRequests, Error> {
        let client = http::client(http::REQUEST_TIMEOUT)?;
        let answered = crate::cluster::poll(patience, || {
            let mut open = Vec::new();
            for (name, url) in self.names.iter().zip(self.urls) {
                let list: RequestList = http::get_typed(&client, url, "/v1/requests")
                    .map_err(|e| format!("{name}: {e}"))?;
                for view in list.requests.iter().filter(|v| v.awaiting.archives > 0) {
                    open.push(format!(
                        "{} at {name}: {} archives ({} in review)",
                        view.id, view.awaiting.archives, view.awaiting.in_review
                    ));
                }
            }
            match open.first() {
                None => Ok(()),
                Some(first) => Err(format!(
                    "{} requests not answered, e.g. {first}",
                    open.len()
                )),
            }
        });
        let acked = self.pool.lock().requests.clone();
        for (id, d) in &acked {
            self.final_call(&client, OpKind::Request, id, *d);
        }
        let mut unread = Vec::new();
        for (d, (name, url)) in self.names.iter().zip(self.urls).enumerate() {
            match again(|| http::get_typed::<RequestList>(&client, url, "/v1/requests")) {
                Ok(list) => {
                    for view in &list.requests {
                        let mut seen = RequestSeen::of(name, view, self.rec);
                        if view.status == RequestStatus::Answered {
                            // Checked at the next domain: any archive
                            // checks any certificate of the cluster.
                            let other = &self.urls[(d + 1) % self.urls.len()];
                            seen.certificate = Some(certify(&client, url, other, &view.id));
                        }
                        self.rec.request(seen);
                    }
                }
                Err(e) => unread.push(format!("{name}: the list of requests: {e}")),
            }
        }
        for (name, url) in self.names.iter().zip(self.urls) {
            match again(|| http::audit_steps(&client, url, name)) {
                Ok(steps) => {
                    for step in steps {
                        self.rec.step(step);
                    }
                }
                Err(e) => unread.push(format!("{name}: the audit log: {e}")),
            }
        }
        Ok(FinalRequests { answered, unread })
    }
}

/// What the final checks of the requests did.
#[derive(Clone, Debug)]
pub struct FinalRequests {
    /// When every part of every request was answered, or what was not
    /// within the patience.
    pub answered: Result<Instant, String>,
    /// What could not be read (a domain's list of requests or its audit
    /// log), after three tries.
    pub unread: Vec<String>,
}

/// `read`, tried up to three times, 200 ms apart, until it succeeds.
/// Issues the certificate of answered request `id` at `receiving`, then
/// checks it at `other` by its code and by its first sheet's payload.
fn certify(client: &Client, receiving: &str, other: &str, id: &str) -> CertificateSeen {
    let path = format!("/v1/requests/{id}/certificate");
    let issued = match again(|| {
        http::post_typed::<Certificate>(client, receiving, &path, &serde_json::json!({}))
    }) {
        Ok(issued) => issued,
        Err(e) => {
            return CertificateSeen {
                code: String::new(),
                problem: Some(format!("not issued: {e}")),
            }
        }
    };
    let by_code = again(|| {
        http::get_typed::<CertificateCheck>(
            client,
            other,
            &format!("/v1/certificates/{}", issued.code),
        )
    });
    let payload = issued
        .sheets
        .first()
        .map(|s| s.payload.clone())
        .unwrap_or_default();
    let by_payload = again(|| {
        http::post_typed::<CertificateCheck>(
            client,
            other,
            "/v1/certificates/verify",
            &serde_json::json!({ "payload": payload }),
        )
    });
    let problem = match (by_code, by_payload) {
        (Ok(a), Ok(b)) if a.request_id == id && b.request_id == id => None,
        (Ok(_), Ok(_)) => Some("checked as another request's".to_owned()),
        (Err(e), _) => Some(format!("by its code at another domain: {e}")),
        (_, Err(e)) => Some(format!("by its payload at another domain: {e}")),
    };
    CertificateSeen {
        code: issued.code,
        problem,
    }
}

fn again<T>(mut read: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let mut last = read();
    for _ in 0..2 {
        if last.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        last = read();
    }
    last
}
