//! The few HTTP calls the test makes, each turned into an [`Outcome`]
//! (success, status with the JSON error `code`, or transport error)
//! without trusting anything in the body.

use std::time::Duration;

use reqwest::blocking::{Client, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;
use xarchive_node::wire::{
    AuditPage, CacheRoute, ErrorBody, ErrorCode, LookupBody, RequestView, SearchBody, EPOCH_HEADER,
    VERSION_HEADER,
};

use crate::history::{Outcome, StepSeen};
use crate::Error;

/// How long a client waits for an answer: longer than a lookup waits for
/// an unreachable peer (3 s), shorter than a paused domain stays paused,
/// so that clients stuck on a paused domain get back to work.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A blocking client for the domains' plain HTTP (no proxy, short connect
/// timeout).
pub fn client(timeout: Duration) -> Result<Client, Error> {
    // When the workspace is built together, reqwest carries rustls without
    // a provider (xarchive-node's feature) and refuses to build a client
    // until one is installed. Installing twice is refused, harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(2))
        .timeout(timeout)
        .pool_max_idle_per_host(4)
        .build()?)
}

/// The record body every PUT sends: it carries the `id_card` of the
/// person the ID is about ([`person_of`]), and is an open marriage record
/// (`category`, `access`), so that the default release policy
/// (`[requests]`) hands a copy to that person's request without review.
fn record(id: &str) -> Value {
    serde_json::json!({
        "title": format!("fault test record {id}"),
        "metadata": {"test": "xarchive-faults", "category": "marriage", "access": "open"},
        "keys": {"id_card": person_of(id)},
    })
}

/// How many people the records are about: few, so that each has records
/// in every domain and searches find many.
pub const PEOPLE: u64 = 40;

/// The identity number of the person record `id` is about (a stable
/// hash of the ID picks one of [`PEOPLE`]).
pub fn person_of(id: &str) -> String {
    // FNV-1a: stable across runs and builds, unlike std's hasher.
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    person(hash % PEOPLE)
}

/// The identity number of person `p` (of [`PEOPLE`]).
pub fn person(p: u64) -> String {
    xarchive_node::sample::person_keys(p)["id_card"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `PUT {base}/v1/archives/{id}`.
pub fn put(client: &Client, base: &str, id: &str) -> Outcome {
    outcome(
        client
            .put(format!("{base}/v1/archives/{id}"))
            .json(&record(id))
            .send(),
        write_body,
    )
}

/// `DELETE {base}/v1/archives/{id}`.
pub fn delete(client: &Client, base: &str, id: &str) -> Outcome {
    outcome(
        client.delete(format!("{base}/v1/archives/{id}")).send(),
        write_body,
    )
}

/// `GET {base}/v1/lookup/{id}`; a success names the owner and whether
/// the cache answered (`route.cache`).
pub fn lookup(client: &Client, base: &str, id: &str) -> Outcome {
    outcome(
        client.get(format!("{base}/v1/lookup/{id}")).send(),
        lookup_body,
    )
}

/// `POST {base}/v1/search` for the person whose identity number is
/// `value`; a success lists the IDs found.
pub fn search(client: &Client, base: &str, value: &str) -> Outcome {
    outcome(
        client
            .post(format!("{base}/v1/search"))
            .json(&serde_json::json!({"key_type": "id_card", "value": value}))
            .send(),
        search_body,
    )
}

/// `GET {base}/v1/archives/{id}` (the domain's own record).
pub fn get(client: &Client, base: &str, id: &str) -> Outcome {
    outcome(
        client.get(format!("{base}/v1/archives/{id}")).send(),
        write_body,
    )
}

/// `POST {base}/v1/requests`: the person whose records `records` are
/// (their identity number as `applicant_id`) asks for copies of them;
/// `name` is sent as the `purpose`. A success carries the request's ID.
pub fn submit(client: &Client, base: &str, name: &str, records: &[String]) -> Outcome {
    let applicant = records.first().map(|id| person_of(id)).unwrap_or_default();
    outcome(
        client
            .post(format!("{base}/v1/requests"))
            .json(&serde_json::json!({
                "applicant_id": applicant,
                "applicant_name": "fault test applicant",
                "purpose": name,
                "records": records,
            }))
            .send(),
        request_body,
    )
}

/// `GET {base}/v1/requests/{id}`.
pub fn request(client: &Client, base: &str, id: &str) -> Outcome {
    outcome(
        client.get(format!("{base}/v1/requests/{id}")).send(),
        request_body,
    )
}

/// `GET {base}/v1/audit` page by page: every entry of domain `domain`'s
/// audit log that is a step of a cross-archive request (it has an
/// `action` and a `request`).
pub fn audit_steps(client: &Client, base: &str, domain: &str) -> Result<Vec<StepSeen>, String> {
    let mut steps = Vec::new();
    let mut since = "0".to_owned();
    loop {
        let page: AuditPage = get_typed(client, base, &format!("/v1/audit?since={since}"))?;
        for entry in page.entries {
            if let (Some(action), Some(request)) = (entry.action, entry.request) {
                steps.push(StepSeen {
                    domain: domain.to_owned(),
                    action,
                    request,
                    by: entry.requester.domain,
                    at_us: entry.at_us,
                });
            }
        }
        match page.next {
            Some(next) => since = next,
            None => return Ok(steps),
        }
    }
}

/// `GET {base}{path}` read as `T` (one of the node's wire types), or why
/// not.
pub fn get_typed<T: DeserializeOwned>(
    client: &Client,
    base: &str,
    path: &str,
) -> Result<T, String> {
    let response = client
        .get(format!("{base}{path}"))
        .send()
        .map_err(|e| format!("GET {path}: {e}"))?;
    let status = response.status();
    let body = response
        .text()
        .map_err(|e| format!("GET {path}: reading the body: {e}"))?;
    if !status.is_success() {
        return Err(format!("GET {path}: {status}: {body}"));
    }
    serde_json::from_str(&body)
        .map_err(|e| format!("GET {path}: not the expected body ({e}): {body}"))
}

/// `GET {base}{path}` for a filter as the peer routes send it (`/v1/filter`,
/// `/v1/copies/{name}`): its position from the headers and its bytes.
pub fn filter_at(client: &Client, base: &str, path: &str) -> Result<((u64, u64), Vec<u8>), String> {
    let response = client
        .get(format!("{base}{path}"))
        .send()
        .map_err(|e| format!("GET {path}: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("GET {path}: {status}"));
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("GET {path}: no {name} header"))
    };
    let position = (header(EPOCH_HEADER)?, header(VERSION_HEADER)?);
    let bytes = response
        .bytes()
        .map_err(|e| format!("GET {path}: reading the body: {e}"))?;
    Ok((position, bytes.to_vec()))
}

/// `POST {base}{path}` with the JSON `body`, read as `T`, or why not.
pub fn post_typed<T: DeserializeOwned>(
    client: &Client,
    base: &str,
    path: &str,
    body: &serde_json::Value,
) -> Result<T, String> {
    let response = client
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .map_err(|e| format!("POST {path}: {e}"))?;
    let status = response.status();
    let text = response
        .text()
        .map_err(|e| format!("POST {path}: reading the body: {e}"))?;
    if !status.is_success() {
        return Err(format!("POST {path}: {status}: {text}"));
    }
    serde_json::from_str(&text)
        .map_err(|e| format!("POST {path}: not the expected body ({e}): {text}"))
}

/// What the test reads from a body: the owner (a lookup's success), the
/// error code, the lookup's `route.cache`, a search's IDs, a request's ID.
#[derive(Default)]
struct Read {
    owner: Option<String>,
    code: Option<ErrorCode>,
    cache: Option<CacheRoute>,
    found: Option<Vec<String>>,
    request: Option<String>,
}

/// A lookup's body, any status: `wire::LookupBody`.
fn lookup_body(body: &str) -> Read {
    match serde_json::from_str::<LookupBody>(body) {
        Ok(b) => Read {
            owner: b.owner,
            code: b.code,
            cache: b.route.cache,
            ..Read::default()
        },
        Err(_) => Read::default(),
    }
}

/// A search's body, any status: `wire::SearchBody`.
fn search_body(body: &str) -> Read {
    match serde_json::from_str::<SearchBody>(body) {
        Ok(b) => Read {
            code: b.code,
            found: Some(b.records.into_iter().map(|r| r.id.to_string()).collect()),
            ..Read::default()
        },
        Err(_) => write_body(body),
    }
}

/// A request's body, any status: `wire::RequestView`, or an error.
fn request_body(body: &str) -> Read {
    match serde_json::from_str::<RequestView>(body) {
        Ok(view) => Read {
            request: Some(view.id),
            ..Read::default()
        },
        Err(_) => write_body(body),
    }
}

/// A write's or a read's body: only errors are read (`wire::ErrorBody`).
fn write_body(body: &str) -> Read {
    Read {
        code: serde_json::from_str::<ErrorBody>(body).ok().map(|e| e.code),
        ..Read::default()
    }
}

fn outcome(sent: reqwest::Result<Response>, read: fn(&str) -> Read) -> Outcome {
    let response = match sent {
        Ok(r) => r,
        Err(e) => return transport(&e),
    };
    let status = response.status().as_u16();
    let body = match response.text() {
        Ok(b) => b,
        // The status came but the body was cut: the effect is as unknown
        // as with no answer at all.
        Err(e) => return transport(&e),
    };
    let Read {
        owner,
        code,
        cache,
        found,
        request,
    } = read(&body);
    if (200..300).contains(&status) {
        Outcome::Ok {
            status,
            owner,
            cache,
            found,
            request,
        }
    } else {
        Outcome::Http { status, code }
    }
}

fn transport(e: &reqwest::Error) -> Outcome {
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else {
        "request"
    };
    // The innermost cause says most (connection refused, reset, ...).
    let mut cause: &dyn std::error::Error = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    Outcome::Transport {
        error: format!("{kind}: {cause}"),
    }
}
