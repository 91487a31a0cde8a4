//! With the `dpdk` feature: locates DPDK with `pkg-config libdpdk`, generates the
//! bindings of `csrc/shim.h` with bindgen (the whole `--cflags` list, `-include
//! rte_config.h` included, goes to clang), compiles the C shim of DPDK's static inline
//! functions with those flags, and links the shared DPDK libraries pkg-config names.
//!
//! Without the feature it does nothing: the crate is then an empty shell and needs no
//! DPDK (see the crate docs).

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(feature = "dpdk")]
    dpdk::build();
}

#[cfg(feature = "dpdk")]
mod dpdk {
    use std::path::PathBuf;
    use std::process::Command;

    /// The pkg-config module of DPDK.
    const MODULE: &str = "libdpdk";
    /// The header bindgen reads and the shim it declares.
    const HEADER: &str = "csrc/shim.h";
    const SHIM: &str = "csrc/shim.c";

    /// Functions bound directly (exported by the shared libraries) plus the shim.
    const FUNCTIONS: &[&str] = &[
        "shim_.*",
        "rte_eal_init",
        "rte_eal_cleanup",
        "rte_strerror",
        "rte_lcore_count",
        "rte_socket_id",
        "rte_thread_register",
        "rte_thread_unregister",
        "rte_pktmbuf_pool_create",
        "rte_pktmbuf_free_bulk",
        "rte_mempool_free",
        "rte_mempool_avail_count",
        "rte_mempool_in_use_count",
        "rte_dev_probe",
        "rte_dev_remove",
        "rte_eth_dev_count_avail",
        "rte_eth_dev_get_port_by_name",
        "rte_eth_dev_get_name_by_port",
        "rte_eth_dev_info_get",
        "rte_eth_dev_configure",
        "rte_eth_dev_adjust_nb_rx_tx_desc",
        "rte_eth_rx_queue_setup",
        "rte_eth_tx_queue_setup",
        "rte_eth_dev_start",
        "rte_eth_dev_stop",
        "rte_eth_dev_close",
        "rte_eth_dev_socket_id",
        "rte_eth_dev_get_mtu",
        "rte_eth_dev_set_mtu",
        "rte_eth_macaddr_get",
        "rte_eth_promiscuous_enable",
        "rte_eth_stats_get",
        "rte_eth_stats_reset",
        "rte_eth_tx_done_cleanup",
    ];

    /// Types used beyond the functions' signatures.
    const TYPES: &[&str] = &[
        "rte_eth_conf",
        "rte_eth_dev_info",
        "rte_eth_stats",
        "rte_ether_addr",
    ];

    fn pkg_config(arg: &str) -> Result<Vec<String>, String> {
        let out = Command::new("pkg-config")
            .args([arg, MODULE])
            .output()
            .map_err(|e| {
                format!(
                    "cannot run pkg-config ({e}): install pkg-config (apt-get install pkg-config)"
                )
            })?;
        if !out.status.success() {
            return Err(format!(
                "pkg-config {arg} {MODULE} failed ({}): install DPDK 22.11 (apt-get install libdpdk-dev)",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect())
    }

    pub fn build() {
        if let Err(e) = try_build() {
            println!("cargo::error={e}");
        }
    }

    fn try_build() -> Result<(), String> {
        println!("cargo::rerun-if-changed={HEADER}");
        println!("cargo::rerun-if-changed={SHIM}");
        println!("cargo::rerun-if-env-changed=PKG_CONFIG_PATH");
        println!("cargo::rerun-if-env-changed=BINDGEN_EXTRA_CLANG_ARGS");

        let version = pkg_config("--modversion")?.join(" ");
        if !version.starts_with("22.11") {
            println!(
                "cargo::warning=DPDK {version} found; dp-dpdk is written and tested against 22.11"
            );
        }
        let cflags = pkg_config("--cflags")?;
        let libs = pkg_config("--libs")?;

        // The C shim, compiled with DPDK's own flags.
        let mut cc = cc::Build::new();
        cc.file(SHIM).include("csrc").warnings(true);
        for f in &cflags {
            cc.flag(f);
        }
        cc.try_compile("dp_dpdk_shim")
            .map_err(|e| format!("compiling {SHIM} failed: {e}"))?;

        // Shared libraries, as pkg-config names them (the linker's --as-needed keeps
        // only those we use; the PMDs are plugins EAL loads from its driver directory).
        for l in &libs {
            if let Some(dir) = l.strip_prefix("-L") {
                println!("cargo::rustc-link-search=native={dir}");
            } else if let Some(name) = l.strip_prefix("-l") {
                println!("cargo::rustc-link-lib=dylib={name}");
            }
        }

        let mut builder = bindgen::Builder::default()
            .header(HEADER)
            .clang_args(&cflags)
            .clang_arg("-Icsrc")
            .allowlist_type(TYPES.join("|"))
            .allowlist_var("RTE_ETH_.*|RTE_MBUF_DEFAULT_.*|RTE_PKTMBUF_HEADROOM|RTE_MAX_LCORE")
            .derive_default(true)
            .wrap_unsafe_ops(true)
            .layout_tests(false)
            .generate_comments(false)
            .prepend_enum_name(false)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
        builder = builder.allowlist_function(FUNCTIONS.join("|"));
        // bindgen panics when libclang cannot be loaded; make that one line.
        let generated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()))
            .map_err(|_| "libclang not found (bindgen needs it): install libclang-dev (apt-get install libclang-dev)".to_owned())?
            .map_err(|e| format!("bindgen failed on {HEADER}: {e}"))?;
        let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("cargo sets OUT_DIR")?);
        generated
            .write_to_file(out.join("bindings.rs"))
            .map_err(|e| format!("cannot write the DPDK bindings: {e}"))
    }
}
