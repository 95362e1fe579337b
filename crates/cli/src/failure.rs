//! How a failed command is told to its user: one message with its cause,
//! a hint where one helps, and the documented exit code (README: 1 error,
//! 2 bad usage, 3 not found, 4 unavailable). The one place that decides
//! them, so that no error of any other kind can end in "not found" (3),
//! the one answer the system promises never to give wrongly.

use std::process::ExitCode;

use xarchive_node::ClientError;

use crate::{EXIT_NOT_FOUND, EXIT_UNAVAILABLE};

/// Exit code of a request the server refused as malformed, or of a
/// command line it cannot use.
const EXIT_USAGE: u8 = 2;

/// A command line that cannot be used as given (a value missing or
/// empty that clap cannot see is): exit 2, as clap's own.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// What to say of `e`, and the exit code.
pub fn explain(e: &anyhow::Error) -> (String, Option<&'static str>, u8) {
    if let Some(usage) = e.chain().find_map(|c| c.downcast_ref::<Usage>()) {
        return (usage.to_string(), None, EXIT_USAGE);
    }
    let Some(client) = e.chain().find_map(|c| c.downcast_ref::<ClientError>()) else {
        return (said_once(e), None, 1);
    };
    match client {
        ClientError::Api {
            url,
            status,
            code,
            message,
        } => {
            let said = format!("{url}: {status} {code}: {message}");
            match (*status, code.as_str()) {
                (_, "route_not_found") => (
                    said,
                    Some("the server has no such route: --server is a domain's base address, such as http://127.0.0.1:7700"),
                    1,
                ),
                (401, _) => (
                    said,
                    Some("give a token with --token or XARCHIVE_TOKEN (`xarchive token create` makes one)"),
                    1,
                ),
                (403, _) => (said, Some("this token's role does not allow it (roles: read, write, search, audit, backup; clerk for requests and certificates, reviewer for reviews)"), 1),
                // What the domain says is not there, of a request, a
                // review or a certificate: as sure as a record's absence.
                (404, "request_not_found" | "review_not_found" | "certificate_not_found") => {
                    (said, None, EXIT_NOT_FOUND)
                }
                (409, "not_answered") => (
                    said,
                    Some("a certificate is issued once every holding archive has answered and one released a copy: `xarchive request show ID` says where it stands"),
                    1,
                ),
                (422, "certificate_invalid") => (
                    said,
                    Some("do not rely on this certificate: the copy kept under its code no longer matches its holding archive's signature"),
                    1,
                ),
                (400 | 413, _) => (said, None, EXIT_USAGE),
                (503, _) => (said, None, EXIT_UNAVAILABLE),
                _ => (said, None, 1),
            }
        }
        ClientError::Transport { url, source } => (
            format!("cannot reach {url}: {}", innermost(source)),
            Some("is a domain running there? `xarchive up` listens on 127.0.0.1:7700 to 7702; say where with --server or XARCHIVE_SERVER"),
            1,
        ),
        ClientError::Address(..) => (client.to_string(), None, EXIT_USAGE),
        ClientError::Decode { .. } => (client.to_string(), None, 1),
    }
}

/// `e` and its causes, each said once: an error whose message already
/// quotes its cause (thiserror's `{0}` beside `#[from]`) is not followed
/// by the cause again.
fn said_once(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// The innermost cause of `e` ("Connection refused (os error 111)"),
/// which says more than the layers above it, each naming the URL again.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Prints `e` as [`explain`] says, and gives the exit code.
pub fn report(e: &anyhow::Error) -> ExitCode {
    let (message, hint, code) = explain(e);
    eprintln!("error: {message}");
    if let Some(hint) = hint {
        eprintln!("hint: {hint}");
    }
    ExitCode::from(code)
}

/// Runs a command to its end on a new multi-threaded runtime, and tells
/// how it failed if it did: the `main` of both binaries.
pub fn run(command: impl std::future::Future<Output = anyhow::Result<ExitCode>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(command) {
        Ok(code) => code,
        Err(e) => report(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the record cache: {0}")]
    struct Outer(#[from] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("unknown cache \"memcached://x\"")]
    struct Inner;

    #[test]
    fn an_error_quoting_its_cause_is_said_once() {
        let e = anyhow::Error::from(Outer(Inner)).context("cannot open domain A");
        let (said, _, code) = explain(&e);
        assert_eq!(
            said,
            "cannot open domain A: the record cache: unknown cache \"memcached://x\""
        );
        assert_eq!(code, 1);
    }
}
