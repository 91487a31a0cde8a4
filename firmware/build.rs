//! Links the bare-metal image with `firmware.ld` (QEMU virt RAM) and defmt's `defmt.x`.
//! Host builds of the crate need neither: the binary is a stub there.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=firmware.ld");
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("none") {
        return;
    }
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo:rustc-link-search={}", dir.display());
    println!("cargo:rustc-link-arg-bins=-Tfirmware.ld");
    println!("cargo:rustc-link-arg-bins=-Tdefmt.x");
}
