//! The few HTTP calls the test makes, each turned into an [`Outcome`]
//! (success, status with the JSON error `code`, or transport error)
//! without trusting anything in the body.

use std::time::Duration;

use reqwest::blocking::{Client, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;
use xarchive_node::wire::{ErrorBody, LookupBody};

use crate::history::Outcome;
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

/// The record body every PUT sends.
fn record(id: &str) -> Value {
    serde_json::json!({
        "title": format!("fault test record {id}"),
        "metadata": {"test": "xarchive-faults"},
    })
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

/// `GET {base}/v1/archives/{id}` (the domain's own record).
pub fn get(client: &Client, base: &str, id: &str) -> Outcome {
    outcome(
        client.get(format!("{base}/v1/archives/{id}")).send(),
        write_body,
    )
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

/// What the test reads from a body: the owner (a lookup's success), the
/// error code, the lookup's `route.cache`.
#[derive(Default)]
struct Read {
    owner: Option<String>,
    code: Option<String>,
    cache: Option<String>,
}

/// A lookup's body, any status: `wire::LookupBody`.
fn lookup_body(body: &str) -> Read {
    match serde_json::from_str::<LookupBody>(body) {
        Ok(b) => Read {
            owner: b.owner,
            code: b.code,
            cache: b.route.cache,
        },
        Err(_) => Read::default(),
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
    let Read { owner, code, cache } = read(&body);
    if (200..300).contains(&status) {
        Outcome::Ok {
            status,
            owner,
            cache,
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
