//! The receive half of a peer: in-order delivery, held packets, the message being
//! assembled, and the acknowledgement we owe.

use super::*;

/// What we receive from a peer: the next sequence number expected, held packets,
/// the eager message being assembled, and the acknowledgement we owe.
#[derive(Debug, Clone, Copy)]
pub(in crate::rdm) struct RecvHalf {
    /// Next sequence number expected.
    pub(in crate::rdm) rcv_nxt: u32,
    /// Out-of-order packets held in the reorder pool.
    pub(in crate::rdm) held: u32,
    /// Message id of the next message expected.
    pub(in crate::rdm) rx_msg_id: u32,
    /// The in-order eager message with more segments to come.
    pub(in crate::rdm) asm: Option<Asm>,
    /// An acknowledgement is due now.
    pub(in crate::rdm) ack_now: bool,
    /// The delayed-ack timer.
    pub(in crate::rdm) ack_at: Option<Instant>,
    /// In-order packets taken since the last acknowledgement.
    pub(in crate::rdm) since_ack: u32,
    /// `rcv_nxt` as our last acknowledgement (standalone or piggybacked) announced it:
    /// with `adv_credits`, where the peer's grant ends.
    pub(in crate::rdm) adv_cum: u32,
    /// The armed `ack_at` is an `ACK_REQ` hold (waiting for a reply to carry the ack).
    pub(in crate::rdm) holding: bool,
    /// Holding pays off with this peer: it replied within the hold last time (or we
    /// have not seen otherwise). Cleared when a hold expires unused, set again when we
    /// send to the peer soon after acknowledging an `ACK_REQ` at once (as TCP's
    /// delayed-ack "pingpong" mode).
    pub(in crate::rdm) hold_ok: bool,
    /// When we last acknowledged an `ACK_REQ` at once because holding did not pay off.
    pub(in crate::rdm) req_acked_at: Option<Instant>,
    /// The newest timestamp from the peer (echoed in acks).
    pub(in crate::rdm) ts_recent: u32,
    /// The in-order packet is refused for want of receive resources.
    pub(in crate::rdm) blocked: bool,
    /// The credits our last acknowledgement granted.
    pub(in crate::rdm) adv_credits: u32,
    /// Answer the peer's KEEPALIVE with ACK_REQ.
    pub(in crate::rdm) ka_reply: bool,
    /// Rendezvous receives of this session still waiting for DATA.
    pub(in crate::rdm) inbound: u32,
    /// The RMA write of this peer whose segments are arriving (one at a time: the
    /// sender finishes a write's segments before the next operation's), and the first
    /// failure among them.
    pub(in crate::rdm) wr_op: Option<(u32, u16)>,
}

impl RecvHalf {
    /// Nothing yet: what a fresh peer slot holds.
    pub(in crate::rdm) const EMPTY: RecvHalf = RecvHalf {
        rcv_nxt: 0,
        held: 0,
        rx_msg_id: 0,
        asm: None,
        ack_now: false,
        ack_at: None,
        since_ack: 0,
        adv_cum: 0,
        holding: false,
        hold_ok: true,
        req_acked_at: None,
        ts_recent: 0,
        blocked: false,
        adv_credits: 0,
        ka_reply: false,
        inbound: 0,
        wr_op: None,
    };
}

impl RecvHalf {
    /// Whether the peer is owed an acknowledgement (due now or on a timer).
    pub(in crate::rdm) fn owes_ack(&self) -> bool {
        self.ack_now || self.ack_at.is_some() || self.since_ack > 0
    }

    /// A new session whose first sequence number from the peer is `isn`, with
    /// `credits` granted in our handshake.
    pub(in crate::rdm) fn start(&mut self, isn: u32, credits: u32) {
        self.rx_msg_id = 0;
        self.rcv_nxt = isn;
        self.asm = None;
        self.ack_now = false;
        self.ack_at = None;
        self.since_ack = 0;
        self.adv_cum = isn;
        self.holding = false;
        self.hold_ok = true;
        self.req_acked_at = None;
        self.blocked = false;
        self.adv_credits = credits;
        self.inbound = 0;
    }

    /// An acknowledgement of everything before `cum`, granting `credits`, left: none is
    /// owed any more.
    #[inline]
    pub(in crate::rdm) fn acked(&mut self, cum: u32, credits: u32) {
        self.ack_now = false;
        self.ack_at = None;
        self.holding = false;
        self.since_ack = 0;
        self.adv_credits = credits;
        self.adv_cum = cum;
    }

    /// The session ended: nothing is held, assembled, arriving or owed.
    pub(in crate::rdm) fn stop(&mut self) {
        self.asm = None;
        self.held = 0;
        self.blocked = false;
        self.ack_at = None;
        self.ack_now = false;
        self.wr_op = None;
        self.ka_reply = false;
        self.inbound = 0;
    }
}
