//! The light domains' HTTP server: under `/d/<name>`, the routes a peer
//! calls, answered with a domain's own headers and error bodies
//! (`xarchive_node::peer_answers`), every body's bytes counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::HttpBody;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use tokio_util::task::AbortOnDropHandle;
use xarchive_filter::Delta;
use xarchive_node::peer_answers::{
    delta_response, filter_response, record_not_found, snapshot_required, with_key_id,
};
use xarchive_node::wire::Contains;
use xarchive_node::{ArchiveId, FilterKind, Position, Record};

use super::{delta_since, LightDomain, Nation, MEASURED};

impl Nation {
    /// Serves every light domain on a loopback port until the handle
    /// returned is dropped.
    pub async fn serve(self: &Arc<Self>) -> anyhow::Result<AbortOnDropHandle<()>> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = format!("http://{}", listener.local_addr()?);
        *self.address.lock() = address.clone();
        let app = Router::new()
            .route("/d/{name}/v1/filter", get(snapshot))
            .route("/d/{name}/v1/filter/delta", get(delta))
            .route("/d/{name}/v1/filter/keys", get(key_snapshot))
            .route("/d/{name}/v1/filter/keys/delta", get(key_delta))
            .route("/d/{name}/v1/relay", get(relay))
            .route("/d/{name}/v1/archives/{id}", get(record))
            .route("/d/{name}/v1/contains/{id}", get(contains))
            // The light tree neighbours' pulls (`cluster.rs` `Pullers`):
            // the same answers, not counted as sent to the measured domain.
            .route("/p/{name}/v1/filter", get(light_snapshot))
            .route("/p/{name}/v1/filter/delta", get(light_delta))
            .route("/p/{name}/v1/filter/keys", get(key_snapshot))
            .route("/p/{name}/v1/filter/keys/delta", get(key_delta))
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                refuse_dead,
            ))
            .with_state(self.clone());
        Ok(AbortOnDropHandle::new(tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the light domains' server stopped");
            }
        })))
    }
}

type Shared = State<Arc<Nation>>;

/// A light domain killed ([`Nation::kill`]) answers nothing: every route
/// under its name is a bare 503, which a domain's peer client counts as
/// a domain it could not ask (a 404 would say "not held here").
async fn refuse_dead(
    State(nation): Shared,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = request.uri().path();
    let name = path
        .strip_prefix("/d/")
        .or_else(|| path.strip_prefix("/p/"))
        .and_then(|rest| rest.split('/').next());
    if name.is_some_and(|name| nation.is_dead(name)) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    next.run(request).await
}

/// Counts `len` bytes served by `domain` in `counter` too.
fn served(domain: &LightDomain, len: usize, counter: &AtomicU64) {
    counter.fetch_add(len as u64, Ordering::Relaxed);
    domain.sent.fetch_add(len as u64, Ordering::Relaxed);
}

/// `response` as served by `domain`, its body's bytes counted in
/// `counter` (every body here is whole in memory: its size is exact).
fn counted(domain: &LightDomain, response: Response, counter: &AtomicU64) -> Response {
    let len = HttpBody::size_hint(response.body()).lower();
    served(domain, usize::try_from(len).unwrap_or(usize::MAX), counter);
    response
}

/// A light domain's filter bytes as a domain serves them, counted in
/// `counter`.
fn whole(
    domain: &LightDomain,
    bytes: Vec<u8>,
    position: Position,
    counter: &AtomicU64,
) -> Response {
    counted(
        domain,
        filter_response(bytes, FilterKind::Counting, position),
        counter,
    )
}

/// A light domain's delta as a domain serves it (framed with no changed
/// IDs when `framed`: a light domain never replaces or deletes), counted
/// in `counter`.
fn changes(domain: &LightDomain, delta: &Delta, framed: bool, counter: &AtomicU64) -> Response {
    counted(
        domain,
        delta_response(delta, framed.then_some(&[][..])),
        counter,
    )
}

/// The 404 of a route under `/d/<name>` that names no light domain (not
/// an answer a domain gives: there is one domain per server).
fn unknown() -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({"code": "unknown_domain", "message": "no such light domain"})),
    )
        .into_response()
}

async fn snapshot(State(nation): Shared, Path(name): Path<String>) -> Response {
    snapshot_to(&nation, &name, Asker::Measured)
}

async fn light_snapshot(State(nation): Shared, Path(name): Path<String>) -> Response {
    snapshot_to(&nation, &name, Asker::Light)
}

/// Who asks for a light domain's filter: what the measured domain is
/// sent is what its lag and its bytes count.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asker {
    Measured,
    Light,
}

fn snapshot_to(nation: &Nation, name: &str, asker: Asker) -> Response {
    let Some(domain) = nation.asked(name) else {
        return unknown();
    };
    let (body, epoch, version) = {
        let f = domain.filter.lock();
        (f.bits.encode(), f.bits.epoch(), f.bits.version())
    };
    if asker == Asker::Measured {
        nation.sent_up_to(domain, epoch, version);
    }
    whole(
        domain,
        body,
        Position { epoch, version },
        &nation.sent.snapshots,
    )
}

#[derive(Deserialize)]
struct Since {
    epoch: u64,
    since: u64,
}

/// The 409 of a delta the light domain cannot give, at (`epoch`,
/// `version`).
fn no_delta(epoch: u64, version: u64, since: u64) -> Response {
    snapshot_required(
        Position { epoch, version },
        format!("the changes since version {since} are not held here"),
    )
}

async fn delta(
    State(nation): Shared,
    Path(name): Path<String>,
    Query(q): Query<Since>,
) -> Response {
    delta_to(&nation, &name, &q, Asker::Measured)
}

async fn light_delta(
    State(nation): Shared,
    Path(name): Path<String>,
    Query(q): Query<Since>,
) -> Response {
    delta_to(&nation, &name, &q, Asker::Light)
}

fn delta_to(nation: &Nation, name: &str, q: &Since, asker: Asker) -> Response {
    let Some(domain) = nation.asked(name) else {
        return unknown();
    };
    let (delta, epoch, version) = {
        let f = domain.filter.lock();
        let at = (f.bits.epoch(), f.bits.version());
        match delta_since(&f, q.since).filter(|_| q.epoch == at.0) {
            Some(d) => (d, at.0, at.1),
            None => return no_delta(at.0, at.1, q.since),
        }
    };
    if asker == Asker::Measured {
        nation.sent_up_to(domain, epoch, version);
    }
    changes(domain, &delta, true, &nation.sent.deltas)
}

async fn key_snapshot(State(nation): Shared, Path(name): Path<String>) -> Response {
    let Some(domain) = nation.asked(&name) else {
        return unknown();
    };
    let (epoch, version) = nation.position(domain.index);
    let body = nation.key_filter(epoch, version).encode();
    let mut response = whole(
        domain,
        body,
        Position { epoch, version },
        &nation.sent.key_filters,
    );
    with_key_id(&mut response, &nation.key_id);
    response
}

async fn key_delta(
    State(nation): Shared,
    Path(name): Path<String>,
    Query(q): Query<Since>,
) -> Response {
    let Some(domain) = nation.asked(&name) else {
        return unknown();
    };
    let (epoch, version) = nation.position(domain.index);
    if q.epoch != epoch || q.since > version {
        return no_delta(epoch, version, q.since);
    }
    let delta = nation.key_delta(epoch, q.since, version);
    let mut response = changes(domain, &delta, false, &nation.sent.key_filters);
    with_key_id(&mut response, &nation.key_id);
    response
}

#[derive(Deserialize)]
struct RelayQuery {
    #[serde(default)]
    relay: u64,
    #[serde(default)]
    from: u64,
    asker: String,
}

/// A light domain's relay, read as a domain's is; what the measured
/// domain is sent counts towards the lag of the writes in it.
async fn relay(
    State(nation): Shared,
    Path(name): Path<String>,
    Query(q): Query<RelayQuery>,
) -> Response {
    let Some(domain) = nation.asked(&name) else {
        return unknown();
    };
    let read = domain.relay.read(q.relay, q.from, &q.asker).await;
    if q.asker == MEASURED {
        nation.sent.relay_pages.fetch_add(1, Ordering::Relaxed);
        for entry in &read.entries {
            if let Some(&origin) = nation.by_name.get(&entry.header.origin) {
                let origin = &nation.domains[origin];
                nation.sent_up_to(origin, entry.header.epoch, entry.header.version);
            }
        }
    }
    let Ok((headers, body)) = read.encode() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let counter = if q.asker == MEASURED {
        &nation.sent.relays
    } else {
        &nation.sent.relayed_to_lights
    };
    served(domain, body.len(), counter);
    (headers, body).into_response()
}

/// Whether light domain `d` holds `id` (by the naming rule).
fn holds(nation: &Nation, d: &LightDomain, id: &str) -> bool {
    let Some(rest) = id.strip_prefix(&format!("n{}-", d.index)) else {
        return false;
    };
    rest.parse::<u64>()
        .is_ok_and(|i| i < nation.held(d.index) && rest == i.to_string())
}

async fn record(State(nation): Shared, Path((name, id)): Path<(String, String)>) -> Response {
    let Some(domain) = nation.asked(&name) else {
        return unknown();
    };
    nation.sent.record_reads.fetch_add(1, Ordering::Relaxed);
    let parsed = ArchiveId::parse(&id);
    match parsed {
        Ok(archive_id) if holds(&nation, domain, &id) => {
            let now = time::OffsetDateTime::now_utc();
            let record = Record {
                id: archive_id,
                title: format!("record {id}"),
                metadata: serde_json::Map::default(),
                content: None,
                created_at: now,
                updated_at: now,
                domain: name,
                keys: std::collections::BTreeMap::default(),
                keys_withheld: Vec::new(),
                catalogue_only: false,
            };
            let Ok(body) = serde_json::to_vec(&record) else {
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            };
            nation
                .sent
                .records
                .fetch_add(body.len() as u64, Ordering::Relaxed);
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        _ => record_not_found(&id),
    }
}

async fn contains(State(nation): Shared, Path((name, id)): Path<(String, String)>) -> Response {
    let Some(domain) = nation.asked(&name) else {
        return unknown();
    };
    nation.sent.probes.fetch_add(1, Ordering::Relaxed);
    let maybe = domain.filter.lock().bits.contains(id.as_bytes());
    Json(Contains {
        id,
        domain: name,
        maybe,
    })
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_light_domain_holds_exactly_its_named_ids() {
        let nation =
            Nation::new(&[3, 5], super::super::test_filters(), "t".into(), &|_| {}).unwrap();
        let d = &nation.domains[1];
        assert!(holds(&nation, d, "n1-0"));
        assert!(holds(&nation, d, "n1-4"));
        assert!(!holds(&nation, d, "n1-5"));
        assert!(!holds(&nation, d, "n1-04"), "only the canonical form");
        assert!(!holds(&nation, d, "n0-1"));
        assert!(!holds(&nation, d, "n11-1"));
    }
}
