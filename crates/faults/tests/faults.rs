//! The fault test, bounded for CI: two minutes of randomized kills,
//! pauses, ZooKeeper outages and kills of the leader of a three-server
//! ZooKeeper ensemble (on loopback, no cache) against six real domains in
//! two groups (two znodes of the positions ledger, a relay tree of two
//! levels), then the checker over the whole history. Longer runs:
//! `cargo run -p xarchive-faults`.

use std::time::Duration;

use xarchive_faults::run::run_as_test;

/// Fixed, so that a failure in CI replays with
/// `cargo run -p xarchive-faults -- --ensemble --domains 6 --groups 2 --duration 120s --seed 20261124`.
const SEED: u64 = 20_261_124;

#[test]
fn randomized_faults_never_lose_an_acknowledged_record() {
    run_as_test("faults", Duration::from_mins(2), SEED, "", |config| {
        config.with_ensemble().with_domains(6, 2)
    });
}
