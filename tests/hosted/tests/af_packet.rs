//! `ofi-pingpong` server and client as two processes, each in a network namespace of its
//! own on an AF_PACKET socket bound to its end of a veth pair that `cargo xtask
//! test-hosted` creates (root): RDM msg, RDM tagged and DGRAM over every size with the
//! data check. Without the devices (see `hosted_tests::ENV_VETH`) each test prints one
//! line and passes.

use hosted_tests::{
    DGRAM, DGRAM_ITERS, DGRAM_MAX_ETH, ENV_NETNS, ENV_VETH, ENV_VETH_IPS, ETH_SERVER_PORT, Outcome,
    RDM_ITERS, RDM_MSG, RDM_TAGGED, Side, assert_clean, dgram_checked, dgram_sizes, env_pair, pair,
    rdm_sizes, serial,
};

const LOCK_DIR: &str = env!("CARGO_TARGET_TMPDIR");

/// Runs `args` with the server in the first namespace and the client in the second;
/// `None` when they are absent.
fn veth(test: &str, args: &[&str]) -> Option<(Outcome, Outcome)> {
    let (na, nb) = env_pair(test, ENV_NETNS)?;
    let (va, vb) = env_pair(test, ENV_VETH)?;
    let (ia, ib) = env_pair(test, ENV_VETH_IPS)?;
    let _g = serial(LOCK_DIR);
    let s = Side::new(&["--dataplane", "af_packet", "--iface", &va, "--ip", &ia]).in_netns(&na);
    let c = Side::new(&["--dataplane", "af_packet", "--iface", &vb, "--ip", &ib]).in_netns(&nb);
    let server_ip = ia.split('/').next().unwrap_or_default();
    Some(pair(&s, &c, server_ip, ETH_SERVER_PORT, args))
}

#[test]
fn af_packet_rdm_msg_every_size_checked() {
    if let Some((s, c)) = veth("af_packet_rdm_msg_every_size_checked", RDM_MSG) {
        assert_clean(&s, &c, &rdm_sizes(), RDM_ITERS);
    }
}

#[test]
fn af_packet_rdm_tagged_every_size_checked() {
    if let Some((s, c)) = veth("af_packet_rdm_tagged_every_size_checked", RDM_TAGGED) {
        assert_clean(&s, &c, &rdm_sizes(), RDM_ITERS);
    }
}

#[test]
fn af_packet_dgram_every_size_checked() {
    let test = "af_packet_dgram_every_size_checked";
    if env_pair(test, ENV_VETH).is_none() {
        return;
    }
    let run = || veth(test, DGRAM).expect("the devices");
    dgram_checked(run, &dgram_sizes(DGRAM_MAX_ETH), DGRAM_ITERS);
}
