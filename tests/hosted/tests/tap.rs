//! `ofi-pingpong` server and client as two processes, each on a TAP device of its own,
//! the two TAP devices joined by a Linux bridge that `cargo xtask test-hosted` creates
//! (root): RDM msg, RDM tagged and DGRAM over every size with the data check, then RDM
//! msg and tagged again with 5% of the frames each process sends and receives lost.
//! Without the devices (see `hosted_tests::ENV_TAP`) each test prints one line and passes.

use hosted_tests::{
    DGRAM, DGRAM_ITERS, DGRAM_MAX_ETH, ENV_TAP, ENV_TAP_IPS, ETH_SERVER_PORT, Outcome, RDM_ITERS,
    RDM_MSG, RDM_TAGGED, Side, assert_clean, dgram_checked, dgram_sizes, env_pair, pair, rdm_sizes,
    serial, with_loss,
};

const LOCK_DIR: &str = env!("CARGO_TARGET_TMPDIR");

/// Runs `args` with the server on the first TAP and the client on the second, each side
/// with its own extra options; `None` when the devices are absent.
fn tap(test: &str, args: &[&str], server: &[&str], client: &[&str]) -> Option<(Outcome, Outcome)> {
    let (ta, tb) = env_pair(test, ENV_TAP)?;
    let (ia, ib) = env_pair(test, ENV_TAP_IPS)?;
    let _g = serial(LOCK_DIR);
    let s = Side::new(&["--dataplane", "tap", "--iface", &ta, "--ip", &ia]).with(server);
    let c = Side::new(&["--dataplane", "tap", "--iface", &tb, "--ip", &ib]).with(client);
    let server_ip = ia.split('/').next().unwrap_or_default();
    Some(pair(&s, &c, server_ip, ETH_SERVER_PORT, args))
}

#[test]
fn tap_rdm_msg_every_size_checked() {
    if let Some((s, c)) = tap("tap_rdm_msg_every_size_checked", RDM_MSG, &[], &[]) {
        assert_clean(&s, &c, &rdm_sizes(), RDM_ITERS);
    }
}

#[test]
fn tap_rdm_tagged_every_size_checked() {
    if let Some((s, c)) = tap("tap_rdm_tagged_every_size_checked", RDM_TAGGED, &[], &[]) {
        assert_clean(&s, &c, &rdm_sizes(), RDM_ITERS);
    }
}

#[test]
fn tap_dgram_every_size_checked() {
    let test = "tap_dgram_every_size_checked";
    if env_pair(test, ENV_TAP).is_none() {
        return;
    }
    let run = || tap(test, DGRAM, &[], &[]).expect("the devices");
    dgram_checked(run, &dgram_sizes(DGRAM_MAX_ETH), DGRAM_ITERS);
}

#[test]
fn tap_rdm_msg_every_size_checked_with_5_percent_loss() {
    let args = with_loss(RDM_MSG, "0.05");
    let test = "tap_rdm_msg_every_size_checked_with_5_percent_loss";
    if let Some((s, c)) = tap(test, &args, &["--seed", "31"], &["--seed", "32"]) {
        assert_clean(&s, &c, &rdm_sizes(), RDM_ITERS);
    }
}

#[test]
fn tap_rdm_tagged_every_size_checked_with_5_percent_loss() {
    let args = with_loss(RDM_TAGGED, "0.05");
    let test = "tap_rdm_tagged_every_size_checked_with_5_percent_loss";
    if let Some((s, c)) = tap(test, &args, &["--seed", "33"], &["--seed", "34"]) {
        assert_clean(&s, &c, &rdm_sizes(), RDM_ITERS);
    }
}
