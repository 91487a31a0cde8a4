//! Integration tests of ofi-nostd across separate processes on real Linux devices (TAP,
//! veth pairs in network namespaces), driven by `cargo xtask test-hosted`.

#![forbid(unsafe_code)]

pub use hosted;
