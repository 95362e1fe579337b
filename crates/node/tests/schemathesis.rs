//! The API's contract checked by a tool nobody here wrote: Schemathesis, an
//! OpenAPI fuzzer from PyPI (the version scripts/install-deps.sh pins,
//! installed in its own virtual environment), generates requests from
//! `/v1/openapi.json` and runs all its checks against a real domain served
//! over TCP: no server error, every answer as documented, every request the
//! document allows taken and every one it forbids refused. Once per role,
//! with a token of that role, so that every handler is reached past its
//! role check. Any failure it reports fails the test. Its settings
//! (tests/schemathesis/schemathesis.toml) name the few answers a request
//! the document allows may still get for a rule no JSON Schema can state
//! (an identity number's check digit), operation by operation.

use std::path::PathBuf;
use std::sync::Arc;

use xarchive_node::security::auth::{sha256_hex, Role, TokenEntry};
use xarchive_node::shutdown::CancellationToken;
use xarchive_node::{Node, NodeConfig};

/// Where scripts/install-deps.sh puts Schemathesis's `st`.
fn schemathesis() -> PathBuf {
    let venv = std::env::var_os("SCHEMATHESIS_VENV").map_or_else(
        || PathBuf::from("/opt/xarchive-test/schemathesis"),
        PathBuf::from,
    );
    let st = venv.join("bin/st");
    assert!(
        st.exists(),
        "{} is missing: scripts/install-deps.sh installs Schemathesis (the README's test command runs it)",
        st.display()
    );
    st
}

fn token_of(role: Role) -> String {
    format!("xa_schemathesis_{}", role.as_str())
}

/// A domain with a token of every role, served on a free loopback port.
async fn serve(dir: &std::path::Path) -> (Arc<Node>, String, CancellationToken) {
    let mut config = NodeConfig {
        name: "A".parse().unwrap(),
        data: dir.join("A"),
        ..NodeConfig::default()
    };
    config.filter.expected_items = 1_000;
    config.auth.tokens = Role::ALL
        .iter()
        .map(|&role| TokenEntry {
            name: role.as_str().to_owned(),
            role,
            sha256: sha256_hex(&token_of(role)),
            domain: None,
        })
        .collect();
    // The fuzzer asks far faster than people: the limits stay documented
    // (429), but are not what every answer is.
    config.auth.rate_per_second = 100_000;
    config.auth.rate_burst = 100_000;
    config.auth.search_rate_per_minute = 100_000;
    config.auth.search_burst = 100_000;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    let node = Node::open(config, &address).expect("node");
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(xarchive_node::server::serve(
        node.clone(),
        listener,
        async move { stopped.cancelled().await },
    ));
    (node, address, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_failure_with_a_token_of_any_role() {
    let st = schemathesis();
    let dir = tempfile::tempdir().expect("temp dir");
    let (_node, address, stop) = serve(dir.path()).await;
    // Its settings (what a rule no schema can state may still refuse)
    // and hooks, beside this file.
    let support = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/schemathesis");
    let mut failed = Vec::new();
    for role in Role::ALL {
        let output = tokio::process::Command::new(&st)
            .arg("--config-file")
            .arg(support.join("schemathesis.toml"))
            .arg("run")
            .arg(format!("{address}/v1/openapi.json"))
            .args(["--checks", "all"])
            .args(["--max-examples", "50"])
            // One worker: Hypothesis describing its strategies from
            // several threads at once has failed inside Schemathesis.
            .args(["--workers", "1"])
            .args(["--seed", "44"])
            .args(["--request-timeout", "30"])
            .arg("--no-color")
            .args(["--generation-database", "none"])
            .arg("-H")
            .arg(format!("Authorization: Bearer {}", token_of(role)))
            // hooks.py: how an NDJSON body is sent.
            .env("SCHEMATHESIS_HOOKS", "hooks")
            .env("PYTHONPATH", &support)
            .current_dir(dir.path())
            .output()
            .await
            .expect("Schemathesis runs");
        let said = String::from_utf8_lossy(&output.stdout);
        let summary: Vec<&str> = said
            .lines()
            .filter(|l| l.contains(" generated,"))
            .map(str::trim)
            .collect();
        eprintln!("role {}: {}", role.as_str(), summary.join(" | "));
        if !output.status.success() {
            failed.push(format!(
                "with a {} token, Schemathesis failed ({}):\n{said}\n{}",
                role.as_str(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    stop.cancel();
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
