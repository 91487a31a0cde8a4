//! The ofi-nostd wire protocol v1 (placeholder; filled by the foundation issue).

#![no_std]
