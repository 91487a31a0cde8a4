//! The send half of a peer: sequence numbers, credits, the RTT estimator and the
//! retransmission timer, and its FIFO of operations.

use wire::seq::{seq_le, seq_lt};

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
    /// The SACK scoreboard: what selective acks told us, kept so that no
    /// acknowledgement walks the whole window.
    pub(in crate::rdm) sb: Scoreboard,
}

/// What the sender knows from selective acks (RFC 6675's scoreboard, in counts and
/// marks): how many packets in flight are selectively acknowledged, the three highest
/// of them (a packet below the third has three above it: deemed lost), how far loss
/// marking has got, and where the lowest packet queued for retransmission may be.
#[derive(Debug, Clone, Copy)]
pub(in crate::rdm) struct Scoreboard {
    /// Window entries live and selectively acknowledged.
    pub(in crate::rdm) sacked: u32,
    /// The three highest sequence numbers selectively acknowledged, highest first
    /// (only those within `snd_una .. next_seq` mean anything).
    pub(in crate::rdm) hi: [u32; 3],
    /// Every packet before this one with three selectively acknowledged above it was
    /// looked at for fast retransmit (only within `snd_una ..= next_seq`).
    pub(in crate::rdm) lost_upto: u32,
    /// No packet before this one is queued for retransmission (a hint: only within
    /// `snd_una ..= next_seq`).
    pub(in crate::rdm) rtx_from: u32,
    /// When the first packet resent and not acknowledged since is a round trip old
    /// (fast retransmit then looks at it again); never when there is none.
    pub(in crate::rdm) rescan_at: Instant,
}

impl Scoreboard {
    /// Nothing known: a session whose next packet is `isn`.
    pub(in crate::rdm) const fn new(isn: u32) -> Scoreboard {
        let below = isn.wrapping_sub(1);
        Scoreboard {
            sacked: 0,
            hi: [below; 3],
            lost_upto: isn,
            rtx_from: isn,
            rescan_at: NEVER,
        }
    }

    /// Packet `s` was selectively acknowledged (news).
    #[inline]
    pub(in crate::rdm) fn sacked(&mut self, s: u32) {
        self.sacked += 1;
        let h = &mut self.hi;
        if seq_lt(h[0], s) {
            *h = [s, h[0], h[1]];
        } else if seq_lt(h[1], s) && s != h[0] {
            *h = [h[0], s, h[1]];
        } else if seq_lt(h[2], s) && s != h[0] && s != h[1] {
            h[2] = s;
        }
    }

    /// A selectively acknowledged packet was cumulatively acknowledged: once none is
    /// left, what is known of the highest ones is stale.
    #[inline]
    pub(in crate::rdm) fn retired(&mut self, cum: u32) {
        self.sacked = self.sacked.saturating_sub(1);
        if self.sacked == 0 {
            self.hi = [cum.wrapping_sub(1); 3];
        }
    }

    /// Packet `s` was queued for retransmission.
    #[inline]
    pub(in crate::rdm) fn marked(&mut self, s: u32, una: u32) {
        if !seq_le(una, self.rtx_from) || seq_lt(s, self.rtx_from) {
            self.rtx_from = s;
        }
    }

    /// Where to look for packets queued for retransmission: `rtx_from` if it lies in
    /// `una ..= next`, else `una`.
    #[inline]
    pub(in crate::rdm) fn rtx_start(&self, una: u32, next: u32) -> u32 {
        if seq_le(una, self.rtx_from) && seq_le(self.rtx_from, next) {
            self.rtx_from
        } else {
            una
        }
    }

    /// Fast retransmit's limit: every packet before the third highest selectively
    /// acknowledged one in `una .. next` has three above it. `una` when fewer than three
    /// are.
    #[inline]
    pub(in crate::rdm) fn lost_below(&self, una: u32, next: u32) -> u32 {
        let l = self.hi[2];
        if seq_le(una, l) && seq_lt(l, next) && seq_lt(l, self.hi[1]) {
            l
        } else {
            una
        }
    }
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
        sb: Scoreboard::new(0),
    };
}

impl SendHalf {
    /// Packets in flight (sent, not cumulatively acked).
    #[inline]
    pub(in crate::rdm) fn in_flight(&self) -> u32 {
        self.next_seq.wrapping_sub(self.snd_una)
    }

    /// Packets outstanding (RFC 6675's pipe): in flight, less those selectively
    /// acknowledged and those deemed lost and not yet sent again.
    #[inline]
    pub(in crate::rdm) fn pipe(&self) -> u32 {
        self.in_flight()
            .saturating_sub(self.sb.sacked)
            .saturating_sub(self.rtx_pending)
    }

    /// Whether a window of `wnd` packets lets one more out: fewer than `wnd` in
    /// flight (the common case, decided without more), or with SACK ranges fewer than
    /// `wnd` outstanding. The span (`snd_limit`) is checked apart.
    #[inline(always)]
    pub(in crate::rdm) fn window_open(&self, wnd: u32) -> bool {
        self.in_flight() < wnd || (cfg!(feature = "sack") && self.pipe() < wnd)
    }

    /// Whether one more packet fills a window of `wnd` packets.
    #[inline(always)]
    pub(in crate::rdm) fn window_fills(&self, wnd: u32) -> bool {
        self.in_flight() + 1 >= wnd && (!cfg!(feature = "sack") || self.pipe() + 1 >= wnd)
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
        self.sb = Scoreboard::new(isn);
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
