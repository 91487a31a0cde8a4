//! Says what a build without the `dpdk` feature leaves out (`cargo test --workspace`
//! builds this crate without DPDK; `cargo xtask test-dpdk` runs the real tests).

#[cfg(not(feature = "dpdk"))]
#[test]
fn dpdk_tests_need_the_dpdk_feature() {
    const { assert!(!dp_dpdk::ENABLED) };
    println!(
        "dp-dpdk: built without the `dpdk` feature: the DPDK tests (net_ring, net_memif, \
         net_af_packet) are skipped; `cargo xtask test-dpdk` runs them"
    );
}

#[cfg(feature = "dpdk")]
#[test]
fn built_against_dpdk() {
    const { assert!(dp_dpdk::ENABLED) };
}
