//! How a command ends: the documented exit codes (README: 0 success,
//! 1 error, 2 bad usage, 3 not found, 4 unavailable), and how a failure is
//! told: one message with its cause and a hint where one helps, on
//! standard error, and with `--output json` also as the one JSON document
//! on standard output, `{"error": {"code", "message", "hint"}}`. The one
//! place that decides them, so that no error of any other kind can end in
//! "not found" (3), the one answer the system promises never to give
//! wrongly; a closed standard output ends a command quietly with 0
//! ([`crate::output`]).

use std::process::ExitCode;

use xarchive_node::security::auth::Role;
use xarchive_node::wire::ErrorCode;
use xarchive_node::{code_text, ClientError};

use crate::output;

/// Exit code of a command that failed for any reason not named below.
pub const EXIT_ERROR: u8 = 1;
/// Exit code of a request the server refused as malformed, or of a
/// command line that cannot be used as given.
pub const EXIT_USAGE: u8 = 2;
/// Exit code when the server said what was asked for is not there.
pub const EXIT_NOT_FOUND: u8 = 3;
/// Exit code when a lookup or search could not reach every domain that
/// might hold the record (or could not confirm the cluster's membership).
pub const EXIT_UNAVAILABLE: u8 = 4;

/// A command line that cannot be used as given (a value missing or
/// empty that clap cannot see is): exit 2, as clap's own.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// The server answered that what was asked for is not there (a record
/// read or deleted by its ID): exit 3.
#[derive(Debug, thiserror::Error)]
#[error("not found: {0}")]
pub struct NotFound(pub String);

/// How a failed command is told, and its exit code.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Failure {
    /// Stable, for scripts: the server's error code when the server
    /// refused, else `usage`, `unreachable`, `invalid_answer`, `not_found`
    /// or `error`.
    pub code: String,
    pub message: String,
    pub hint: Option<&'static str>,
    #[serde(skip)]
    pub exit: u8,
}

impl Failure {
    fn new(code: &str, message: String, hint: Option<&'static str>, exit: u8) -> Failure {
        Failure {
            code: code.to_owned(),
            message,
            hint,
            exit,
        }
    }
}

/// What to say of `e`, and the exit code.
pub fn explain(e: &anyhow::Error) -> Failure {
    if let Some(usage) = e.chain().find_map(|c| c.downcast_ref::<Usage>()) {
        return Failure::new("usage", usage.to_string(), None, EXIT_USAGE);
    }
    if let Some(absent) = e.chain().find_map(|c| c.downcast_ref::<NotFound>()) {
        return Failure::new("not_found", absent.to_string(), None, EXIT_NOT_FOUND);
    }
    let Some(client) = e.chain().find_map(|c| c.downcast_ref::<ClientError>()) else {
        return Failure::new("error", said_once(e), None, EXIT_ERROR);
    };
    match client {
        ClientError::Api {
            url,
            status,
            code,
            message,
        } => {
            let said = format!("{url}: {status} {}: {message}", code_text(*code));
            let (hint, exit) = match (*status, *code) {
                (_, Some(ErrorCode::RouteNotFound)) => (
                    Some("the server has no such route: --server is a domain's base address, such as http://127.0.0.1:7700"),
                    EXIT_ERROR,
                ),
                (401, _) => (
                    Some("give a token with --token or XARCHIVE_TOKEN (`xarchive token create` makes one)"),
                    EXIT_ERROR,
                ),
                (403, _) => (Some(roles_hint()), EXIT_ERROR),
                // What the domain says is not there, of a request, a
                // review or a certificate: as sure as a record's absence.
                (
                    404,
                    Some(
                        ErrorCode::NotFound
                        | ErrorCode::RequestNotFound
                        | ErrorCode::ReviewNotFound
                        | ErrorCode::CertificateNotFound,
                    ),
                ) => {
                    (None, EXIT_NOT_FOUND)
                }
                (409, Some(ErrorCode::NotAnswered)) => (
                    Some("a certificate is issued once every holding archive has answered and one released a copy: `xarchive request show ID` says where it stands"),
                    EXIT_ERROR,
                ),
                (422, Some(ErrorCode::CertificateInvalid)) => (
                    Some("do not rely on this certificate: the copy kept under its code no longer matches its holding archive's signature"),
                    EXIT_ERROR,
                ),
                (400 | 413, _) => (None, EXIT_USAGE),
                (503, _) => (None, EXIT_UNAVAILABLE),
                _ => (None, EXIT_ERROR),
            };
            Failure::new(code_text(*code), said, hint, exit)
        }
        ClientError::Transport { url, source } => {
            if speaks_plain_http(source) {
                return Failure::new(
                    "unreachable",
                    format!("cannot reach {url}: the server answered in plain HTTP, not TLS"),
                    Some("the domain there serves http://, not https://: say --server http://…"),
                    EXIT_ERROR,
                );
            }
            Failure::new(
                "unreachable",
                format!("cannot reach {url}: {}", innermost(source)),
                Some("is a domain running there? `xarchive up` listens on 127.0.0.1:7700 to 7702; say where with --server or XARCHIVE_SERVER"),
                EXIT_ERROR,
            )
        }
        ClientError::Address(..) => Failure::new("usage", client.to_string(), None, EXIT_USAGE),
        ClientError::Decode { .. } => {
            Failure::new("invalid_answer", client.to_string(), None, EXIT_ERROR)
        }
    }
}

/// The roles a token may have, said where a role refused is told.
fn roles_hint() -> &'static str {
    static HINT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HINT.get_or_init(|| {
        let roles: Vec<String> = Role::ALL
            .iter()
            .map(|r| format!("{} ({})", r.as_str(), r.about()))
            .collect();
        format!(
            "this token's role does not allow it; roles: {}",
            roles.join("; ")
        )
    })
}

/// Whether a TLS handshake failed because the server answered in plain
/// HTTP (rustls reads its first bytes as a record of an unknown type).
fn speaks_plain_http(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if text.contains("InvalidContentType") || text.contains("invalid content type") {
            return true;
        }
        cause = c.source();
    }
    false
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

/// Tells `failure` on standard error and, with `--output json`, as the
/// command's JSON document; gives its exit code.
pub fn tell(failure: &Failure) -> ExitCode {
    crate::errln!("error: {}", failure.message);
    if let Some(hint) = failure.hint {
        crate::errln!("hint: {hint}");
    }
    if output::json() {
        // A reader that went away (a closed pipe) changes nothing here.
        let _ = output::print_json(&serde_json::json!({ "error": failure }));
    }
    ExitCode::from(failure.exit)
}

/// Prints `e` as [`explain`] says, and gives the exit code; an error
/// that is standard output's reader going away ends the command as a
/// success, quietly.
pub fn report(e: &anyhow::Error) -> ExitCode {
    if output::closed_pipe(e) {
        return ExitCode::SUCCESS;
    }
    tell(&explain(e))
}

/// A command line clap refused: told as clap tells it (exit 2), and with
/// `json` also as the JSON document; help and version are printed as
/// asked.
pub fn refused_usage(e: &clap::Error, json: bool) -> ExitCode {
    if !e.use_stderr() {
        let _ = e.print();
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(EXIT_USAGE));
    }
    if json {
        output::set(output::Output::Json);
        let text = e.render().to_string();
        let message = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .to_owned();
        let _ = output::print_json(&serde_json::json!({ "error": Failure::new(
            "usage",
            message,
            None,
            EXIT_USAGE
        ) }));
    }
    let _ = e.print();
    ExitCode::from(EXIT_USAGE)
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
            crate::errln!("error: cannot start the async runtime: {e}");
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
        let failure = explain(&e);
        assert_eq!(
            failure.message,
            "cannot open domain A: the record cache: unknown cache \"memcached://x\""
        );
        assert_eq!((failure.code.as_str(), failure.exit), ("error", 1));
    }
}
