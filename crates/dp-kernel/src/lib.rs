//! Linux kernel data planes for ofi-nostd.
//!
//! Each implements the link traits of [`wire`]: UDP sockets with `recvmmsg`/`sendmmsg`
//! batches (the default: no root, nothing to configure), TAP devices through
//! `/dev/net/tun`, and AF_PACKET on a named interface. They arrive with the hosted issue.

#![forbid(unsafe_code)]
