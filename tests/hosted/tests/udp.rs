//! `ofi-pingpong` server and client as two processes over kernel UDP sockets on
//! 127.0.0.1 (the server on an ephemeral port): RDM msg, RDM tagged and DGRAM, every size
//! with the data check. No privilege needed: these run everywhere.

use hosted_tests::{
    DGRAM, DGRAM_ITERS, DGRAM_MAX_UDP, RDM_ITERS, RDM_MSG, RDM_TAGGED, Side, assert_clean,
    dgram_checked, dgram_sizes, pair, rdm_sizes, serial,
};

const LOCK_DIR: &str = env!("CARGO_TARGET_TMPDIR");

fn udp(args: &[&str]) -> (hosted_tests::Outcome, hosted_tests::Outcome) {
    let side = Side::default();
    pair(&side, &side, "127.0.0.1", "0", args)
}

#[test]
fn udp_rdm_msg_every_size_checked() {
    let _g = serial(LOCK_DIR);
    let (s, c) = udp(RDM_MSG);
    assert_clean(&s, &c, &rdm_sizes(), RDM_ITERS);
}

#[test]
fn udp_rdm_tagged_every_size_checked() {
    let _g = serial(LOCK_DIR);
    let (s, c) = udp(RDM_TAGGED);
    assert_clean(&s, &c, &rdm_sizes(), RDM_ITERS);
}

#[test]
fn udp_dgram_every_size_checked() {
    let _g = serial(LOCK_DIR);
    dgram_checked(|| udp(DGRAM), &dgram_sizes(DGRAM_MAX_UDP), DGRAM_ITERS);
}
