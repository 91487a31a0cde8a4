//! The send half of a peer: sequence numbers, credits, the RTT estimator and the
//! retransmission timer, and its FIFO of operations.

use super::*;

/// RFC 6298 round-trip estimator, in microseconds.
#[derive(Debug, Clone, Copy)]
pub(in crate::rdm) struct Rtt {
    /// Smoothed round-trip time.
    pub(in crate::rdm) srtt: u64,
    /// Round-trip time variation.
    pub(in crate::rdm) rttvar: u64,
    /// Current retransmission timeout.
    pub(in crate::rdm) rto: u64,
    /// A sample was taken (else `rto` is the initial one).
    pub(in crate::rdm) sampled: bool,
    /// The smallest sample seen (µs; `u64::MAX` before the first): no answer to a
    /// retransmission can come sooner.
    pub(in crate::rdm) min: u64,
}

impl Rtt {
    pub(in crate::rdm) fn new(cfg: &RdmConfig) -> Rtt {
        Rtt {
            srtt: 0,
            rttvar: 0,
            rto: cfg.rto_initial.total_micros(),
            sampled: false,
            min: u64::MAX,
        }
    }

    pub(in crate::rdm) fn sample(&mut self, r: u64, cfg: &RdmConfig) {
        // A packet the receiver held back (it was blocked for want of buffers) is
        // acknowledged late without any retransmission: its sample measures the
        // receiver's queue, not the path. Let one sample at most double the estimate.
        let cap = if self.sampled {
            (2 * self.srtt).max(cfg.rto_min.total_micros())
        } else {
            cfg.rto_initial
                .total_micros()
                .max(cfg.rto_min.total_micros())
        };
        self.min = self.min.min(r.max(1));
        let r = r.clamp(1, cap);
        if self.sampled {
            let d = self.srtt.abs_diff(r);
            self.rttvar = (3 * self.rttvar + d) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
        } else {
            self.srtt = r;
            self.rttvar = r / 2;
            self.sampled = true;
        }
        self.rto = (self.srtt + (4 * self.rttvar).max(1))
            .clamp(cfg.rto_min.total_micros(), cfg.rto_max.total_micros());
    }

    pub(in crate::rdm) fn backoff(&mut self, cfg: &RdmConfig) {
        self.rto = self
            .rto
            .saturating_mul(2)
            .min(cfg.rto_max.total_micros())
            .max(cfg.rto_min.total_micros());
    }
}

/// A series of retransmission timeouts not yet resolved by an acknowledgement: each
/// timeout resends only the oldest packet; the first acknowledgement that moves the
/// cumulative ack tells whether the packets were lost (then the rest goes again) or
/// only late (a spurious timeout: the backoff is undone), as F-RTO (RFC 5682) does.
#[derive(Debug, Clone, Copy)]
pub(in crate::rdm) struct RtoRecovery {
    /// When the first timeout of the series fired.
    pub(in crate::rdm) at: Instant,
    /// The RTO before it.
    pub(in crate::rdm) rto: u64,
    /// The consecutive-timeout count before it.
    pub(in crate::rdm) timeouts: u32,
    /// Nothing in flight was selectively acknowledged when it fired (no evidence of
    /// loss): only then are its timeouts limited and tested for being spurious.
    pub(in crate::rdm) silent: bool,
}

/// What we send to a peer: sequence and credit state, the RTT estimator and
/// retransmission timer, the FIFO of its send operations, and what is queued for it.
#[derive(Debug, Clone, Copy)]
pub(in crate::rdm) struct SendHalf {
    /// Next sequence number to send.
    pub(in crate::rdm) next_seq: u32,
    /// Oldest sequence number not cumulatively acknowledged.
    pub(in crate::rdm) snd_una: u32,
    /// First sequence number the peer's credits do not cover.
    pub(in crate::rdm) snd_limit: u32,
    /// Timestamp of the newest acknowledgement processed (older ones are stale).
    pub(in crate::rdm) last_ack_ts: u32,
    /// The RFC 6298 estimator.
    pub(in crate::rdm) rtt: Rtt,
    /// The retransmission timer.
    pub(in crate::rdm) rto_at: Option<Instant>,
    /// Consecutive timeouts with nothing heard from the peer.
    pub(in crate::rdm) timeouts: u32,
    /// Message id of the next message to the peer.
    pub(in crate::rdm) next_msg_id: u32,
    /// Oldest of the peer's operations (slot index, NIL: none).
    pub(in crate::rdm) op_head: u32,
    /// Newest of the peer's operations.
    pub(in crate::rdm) op_tail: u32,
    /// The next operation with something new to send.
    pub(in crate::rdm) cursor: u32,
    /// Rendezvous sends with granted data to send.
    pub(in crate::rdm) rndv_ready: u32,
    /// CTS packets to send.
    pub(in crate::rdm) cts_pending: u32,
    /// RMA answers (`RmaResp`) with something still to send to this peer.
    pub(in crate::rdm) resp_pending: u32,
    /// The credit probe timer (the peer granted nothing).
    pub(in crate::rdm) probe_at: Option<Instant>,
    /// Window entries queued for retransmission.
    pub(in crate::rdm) rtx_pending: u32,
    /// Liveness probe timer while we wait for the peer's data and send nothing.
    pub(in crate::rdm) live_at: Option<Instant>,
    /// Send a KEEPALIVE with ACK_REQ (liveness probe).
    pub(in crate::rdm) ka_probe: bool,
    /// An acknowledgement of ours that arrived on a message and waits, with its arrival
    /// time, for the next transmit half (`Rdm::take_held_ack`): a ping-pong's reply
    /// leaves before the completions it releases are written.
    pub(in crate::rdm) ack_held: Option<(wire::packet::AckRepr, Instant)>,
    /// Timeouts waiting for the acknowledgement that says whether they were spurious.
    pub(in crate::rdm) rto_recovery: Option<RtoRecovery>,
    /// One past the highest sequence number selectively acknowledged this session:
    /// nothing above it can be fast-retransmitted, so the walk starts there (with a
    /// 1,024-packet window most of what is in flight is above it).
    pub(in crate::rdm) sack_top: u32,
}

impl SendHalf {
    /// Nothing yet: what a fresh peer slot holds.
    pub(in crate::rdm) const EMPTY: SendHalf = SendHalf {
        next_seq: 0,
        snd_una: 0,
        snd_limit: 0,
        last_ack_ts: 0,
        rtt: Rtt {
            srtt: 0,
            rttvar: 0,
            rto: 0,
            sampled: false,
            min: u64::MAX,
        },
        rto_at: None,
        timeouts: 0,
        next_msg_id: 0,
        op_head: NIL,
        op_tail: NIL,
        cursor: NIL,
        rndv_ready: 0,
        cts_pending: 0,
        resp_pending: 0,
        probe_at: None,
        rtx_pending: 0,
        live_at: None,
        ka_probe: false,
        ack_held: None,
        rto_recovery: None,
        sack_top: 0,
    };
}

impl SendHalf {
    /// Packets in flight (sent, not cumulatively acked).
    #[inline]
    pub(in crate::rdm) fn in_flight(&self) -> u32 {
        self.next_seq.wrapping_sub(self.snd_una)
    }

    /// A new session whose first sequence number is `isn`, with `credits` packets
    /// granted: the queued operations start over from the head.
    pub(in crate::rdm) fn start(&mut self, isn: u32, credits: u32) {
        self.next_seq = isn;
        self.snd_una = isn;
        self.snd_limit = isn.wrapping_add(credits);
        self.last_ack_ts = 0;
        self.rto_at = None;
        self.timeouts = 0;
        self.next_msg_id = 0;
        self.probe_at = None;
        self.rtx_pending = 0;
        self.live_at = None;
        self.ka_probe = false;
        self.rto_recovery = None;
        self.sack_top = isn;
        self.cursor = self.op_head;
    }

    /// Arms the retransmission timer one RTO after `now`, unless it runs already.
    #[inline]
    pub(in crate::rdm) fn arm_rto(&mut self, now: Instant) {
        if self.rto_at.is_none() {
            self.rto_at = Some(now + Duration::from_micros(self.rtt.rto));
        }
    }

    /// A packet queued for retransmission left or no longer needs to.
    #[inline]
    pub(in crate::rdm) fn rtx_done(&mut self) {
        self.rtx_pending = self.rtx_pending.saturating_sub(1);
    }

    /// The session ended: no timer, nothing to send again or answer; the queued
    /// operations start over from the head, with a fresh estimator `rtt`.
    pub(in crate::rdm) fn stop(&mut self, rtt: Rtt) {
        self.rto_at = None;
        self.probe_at = None;
        self.rtx_pending = 0;
        self.rndv_ready = 0;
        self.cts_pending = 0;
        self.resp_pending = 0;
        self.ka_probe = false;
        self.live_at = None;
        self.timeouts = 0;
        self.rto_recovery = None;
        self.cursor = self.op_head;
        self.rtt = rtt;
    }
}
