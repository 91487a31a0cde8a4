//! Every received frame the stack dropped, by layer and reason, in one list: what
//! `ofi-pingpong -v` prints and the provider logs when a domain closes.
//!
//! The counters live where the drop happens (the data plane's own counters, gathered
//! as [`LinkDrops`], the net layer's [`NetStats`], the domain's [`DomainStats`], each
//! RDM endpoint's [`RdmStats`]); this module only names them, so that a drop counted anywhere is shown everywhere and a reader
//! does not need to know which struct owns which layer.

use std::fmt;

use ofi_nostd::domain::DomainStats;
use ofi_nostd::net::{DropReason, NetStats};
use ofi_nostd::rdm::RdmStats;

/// The layer that dropped a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// The data plane, before the stack saw the frame ([`LinkDrops`]).
    Link,
    /// Link, ARP, IPv4 and UDP checks ([`NetStats`]).
    Net,
    /// Wire-protocol parsing and endpoint dispatch ([`DomainStats`]).
    Wire,
    /// Sessions, windows, handshakes and authentication ([`RdmStats`]).
    Rdm,
}

impl Layer {
    /// A short name for output.
    pub const fn name(self) -> &'static str {
        match self {
            Layer::Link => "link",
            Layer::Net => "net",
            Layer::Wire => "wire",
            Layer::Rdm => "rdm",
        }
    }
}

/// What a data plane dropped on receive before the stack saw a frame, from the link's
/// own counters (dp-kernel's `Stats`, DPDK's link and port counters). Links that
/// count nothing of the kind report zeros.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkDrops {
    /// Datagrams or frames longer than a receive slot (the kernel cut them).
    pub truncated: u64,
    /// Frames that were not for the stack (AF_PACKET: our own outgoing frames, on
    /// kernels without `PACKET_IGNORE_OUTGOING`).
    pub not_ours: u64,
    /// Received frames freed unseen (DPDK: multi-segment frames).
    pub unseen: u64,
    /// Frames the device dropped for want of receive descriptors (DPDK `imissed`).
    pub missed: u64,
    /// Frames the device dropped for want of buffers (DPDK `rx_nombuf`).
    pub no_buffer: u64,
    /// Erroneous frames the device dropped (DPDK `ierrors`).
    pub errors: u64,
}

impl LinkDrops {
    /// The drops a kernel data plane counted.
    pub fn from_kernel(s: &dp_kernel::Stats) -> Self {
        LinkDrops {
            truncated: s.rx_truncated,
            not_ours: s.rx_filtered,
            ..LinkDrops::default()
        }
    }
}

/// The drops of two planes (the queues of one domain) together.
impl std::ops::Add for LinkDrops {
    type Output = LinkDrops;

    fn add(self, o: LinkDrops) -> LinkDrops {
        LinkDrops {
            truncated: self.truncated + o.truncated,
            not_ours: self.not_ours + o.not_ours,
            unseen: self.unseen + o.unseen,
            missed: self.missed + o.missed,
            no_buffer: self.no_buffer + o.no_buffer,
            errors: self.errors + o.errors,
        }
    }
}

/// One nonzero drop counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropCount {
    /// Where it was counted.
    pub layer: Layer,
    /// Why (the counter's name).
    pub reason: &'static str,
    /// How many frames.
    pub count: u64,
}

/// The drop counters of a domain and its RDM endpoints, nonzero ones only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DropReport {
    drops: Vec<DropCount>,
}

impl DropReport {
    /// The drops of a domain's data plane, net layer and wire dispatch.
    pub fn new(link: &LinkDrops, net: &NetStats, dom: &DomainStats) -> Self {
        let mut r = DropReport::default();
        let l = [
            ("truncated", link.truncated),
            ("not_ours", link.not_ours),
            ("unseen", link.unseen),
            ("missed", link.missed),
            ("no_buffer", link.no_buffer),
            ("errors", link.errors),
        ];
        for (name, n) in l {
            r.push(Layer::Link, name, n);
        }
        for reason in DropReason::ALL {
            r.push(Layer::Net, reason.name(), net.dropped(reason));
        }
        let wire = [
            ("truncated", dom.rx_truncated),
            ("bad_magic", dom.rx_bad_magic),
            ("bad_version", dom.rx_bad_version),
            ("unknown_type", dom.rx_unknown_type),
            ("bad_length", dom.rx_bad_length),
            ("bad_checksum", dom.rx_bad_checksum),
            ("bad_flags", dom.rx_bad_flags),
            ("bad_field", dom.rx_bad_field),
            ("no_endpoint", dom.rx_no_endpoint),
            ("wrong_type", dom.rx_wrong_type),
            ("unbound", dom.rx_unbound),
        ];
        for (name, n) in wire {
            r.push(Layer::Wire, name, n);
        }
        r
    }

    /// Adds the drops of one RDM endpoint's engine (counters of several endpoints add up).
    pub fn add_rdm(&mut self, s: &RdmStats) {
        let rdm = [
            ("duplicate", s.rx_duplicates),
            ("out_of_window", s.rx_out_of_window),
            ("closing", s.rx_closing),
            ("reorder_full", s.rx_reorder_full),
            ("refused", s.rx_refused),
            ("unknown_session", s.rx_unknown_session),
            ("early", s.rx_early),
            ("protocol_error", s.rx_protocol_errors),
            ("bad_ack", s.rx_bad_acks),
            ("missing_crc", s.rx_missing_crc),
            ("unsupported", s.rx_unsupported),
            ("auth", s.auth_failures),
            ("bad_mac", s.rx_bad_mac),
            ("bad_handshake", s.rx_bad_handshake),
        ];
        for (name, n) in rdm {
            self.push(Layer::Rdm, name, n);
        }
    }

    fn push(&mut self, layer: Layer, reason: &'static str, count: u64) {
        if count == 0 {
            return;
        }
        match self
            .drops
            .iter_mut()
            .find(|d| d.layer == layer && d.reason == reason)
        {
            Some(d) => d.count += count,
            None => self.drops.push(DropCount {
                layer,
                reason,
                count,
            }),
        }
    }

    /// The nonzero counters, link layer first.
    pub fn drops(&self) -> &[DropCount] {
        &self.drops
    }

    /// Frames dropped for `reason` at `layer` (0 if none).
    pub fn count(&self, layer: Layer, reason: &str) -> u64 {
        self.drops
            .iter()
            .find(|d| d.layer == layer && d.reason == reason)
            .map_or(0, |d| d.count)
    }

    /// Frames dropped anywhere.
    pub fn total(&self) -> u64 {
        self.drops.iter().map(|d| d.count).sum()
    }
}

impl fmt::Display for DropReport {
    /// `dropped 3 (net.bad_checksum 1, wire.bad_magic 2)`, or `dropped 0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dropped {}", self.total())?;
        for (i, d) in self.drops.iter().enumerate() {
            let sep = if i == 0 { " (" } else { ", " };
            write!(f, "{sep}{}.{} {}", d.layer.name(), d.reason, d.count)?;
        }
        if !self.drops.is_empty() {
            f.write_str(")")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_every_nonzero_counter_and_sums_endpoints() {
        let dom = DomainStats {
            rx_bad_magic: 2,
            rx_unbound: 1,
            ..Default::default()
        };
        let mut kernel = dp_kernel::Stats::default();
        kernel.rx_truncated = 5;
        kernel.rx_errors = 9;
        let link = LinkDrops::from_kernel(&kernel);
        let mut r = DropReport::new(&link, &NetStats::default(), &dom);
        assert_eq!(r.total(), 8, "receive errors are calls, not frames");
        let rdm = RdmStats {
            rx_duplicates: 4,
            ..Default::default()
        };
        r.add_rdm(&rdm);
        r.add_rdm(&rdm);
        assert_eq!(r.count(Layer::Rdm, "duplicate"), 8);
        assert_eq!(r.count(Layer::Wire, "bad_magic"), 2);
        assert_eq!(r.count(Layer::Net, "bad_checksum"), 0);
        assert_eq!(
            r.to_string(),
            "dropped 16 (link.truncated 5, wire.bad_magic 2, wire.unbound 1, rdm.duplicate 8)"
        );
        assert_eq!(DropReport::default().to_string(), "dropped 0");
    }
}
