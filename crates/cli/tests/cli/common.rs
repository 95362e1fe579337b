//! The small harness the command-line tests share: the binary under test,
//! run against a domain, and what it said.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The `xarchive` binary Cargo built for these tests.
pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_xarchive"))
}

/// A plain HTTP client. The TLS provider is installed first: a client
/// built without one panics, and no test may count on another having
/// installed it in the same process.
pub fn http() -> reqwest::Client {
    xarchive_node::security::tls::install_crypto();
    reqwest::Client::new()
}

/// Runs `xarchive args` against `server`, with `token` and `stdin` if
/// given (no standard input otherwise).
pub fn run(args: &[&str], server: &str, token: Option<&str>, stdin: Option<&[u8]>) -> Output {
    let mut command = Command::new(bin());
    command
        .args(args)
        .env("XARCHIVE_SERVER", server)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(token) = token {
        command.env("XARCHIVE_TOKEN", token);
    }
    let mut child = command.spawn().expect("the binary runs");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().expect("a piped stdin");
        pipe.write_all(bytes).expect("stdin written");
    }
    child.wait_with_output().expect("the binary ends")
}

/// Runs `xarchive args` against `server`.
pub fn xarchive(args: &[&str], server: &str) -> Output {
    run(args, server, None, None)
}

/// What the command printed, standard output then standard error.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `xarchive token create` of `role` named `name` (bound to `domain`, if
/// given), appended to `config`; returns the token.
pub fn create_token(config: &Path, role: &str, name: &str, domain: Option<&str>) -> String {
    let mut command = Command::new(bin());
    command.args(["token", "create", "--role", role, "--name", name]);
    if let Some(domain) = domain {
        command.args(["--domain", domain]);
    }
    let out = command.arg("--config").arg(config).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
