//! Generates the libfabric bindings from the installed `<rdma/*.h>` (libfabric-dev),
//! so every struct layout, enum value and flag bit comes from the headers themselves.

use std::path::PathBuf;

/// The headers the bindings are generated from.
const WRAPPER: &str = "wrapper.h";

fn main() {
    println!("cargo::rerun-if-changed={WRAPPER}");
    println!("cargo::rerun-if-env-changed=BINDGEN_EXTRA_CLANG_ARGS");
    // fi_param_define, fi_param_get and fi_strerror live in the libfabric that loads us.
    println!("cargo::rustc-link-lib=dylib=fabric");

    // bindgen panics (with a long message) when libclang cannot be loaded; turn that
    // into one line, as for missing headers.
    let generated = std::panic::catch_unwind(|| {
        bindgen::Builder::default()
            .header(WRAPPER)
            .allowlist_type("fi_.*|fid.*")
            .allowlist_function(
                "fi_param_define|fi_param_get|fi_strerror|fi_version|fi_freeinfo|fi_dupinfo",
            )
            .allowlist_var("FI_.*")
            .derive_default(true)
            .wrap_unsafe_ops(true)
            .layout_tests(true)
            .generate_comments(false)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
            .generate()
    });
    let bindings = match generated {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            let missing = e.to_string().contains("file not found");
            if missing {
                println!(
                    "cargo::error=libfabric headers (<rdma/fabric.h>) not found: install libfabric-dev (apt-get install libfabric-dev)"
                );
            } else {
                println!("cargo::error=bindgen failed on the libfabric headers: {e}");
            }
            return;
        }
        Err(_) => {
            println!(
                "cargo::error=libclang not found (bindgen needs it): install libclang-dev (apt-get install libclang-dev)"
            );
            return;
        }
    };
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    if let Err(e) = bindings.write_to_file(out.join("bindings.rs")) {
        println!("cargo::error=cannot write the libfabric bindings: {e}");
    }
}
