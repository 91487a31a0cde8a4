//! The engine's tunables (`RdmConfig`) and what it counts (`RdmStats`).

use super::*;

/// Tunables of the reliability engine. Times are microseconds of the caller's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmConfig {
    /// The sender's in-flight limit per peer, at most 1,024: packets outstanding, that
    /// is sent and neither acknowledged, selectively acknowledged nor deemed lost (RFC
    /// 6675's pipe). Above 64 only with peers that take SACK ranges (spec 5.6; others
    /// get 64). Size it to the bandwidth-delay product.
    pub window: u16,
    /// Sequence numbers a session may run ahead of its cumulative ack, both ways: the
    /// receive window announced in the handshake (the reorder index per peer) and how
    /// far this sender lets its packets run ahead of the peer's cumulative ack. 0: the
    /// same as `window`; otherwise at least `window`, at most 16,384. Larger than
    /// `window`, a lost packet that holds the cumulative ack back for two round trips
    /// no longer stops the sender (with reorder slots to hold what arrives meanwhile).
    /// The send window and reorder index take `max_peers` times the span (rounded up
    /// to a power of two) entries of the domain's storage.
    pub rx_window: u16,
    /// Peers per endpoint (the peer table's capacity).
    pub max_peers: usize,
    /// Out-of-order packets an endpoint can hold for all its peers (`max_pkt` bytes
    /// each). Full: further out-of-order packets are dropped unacknowledged.
    pub reorder_slots: usize,
    /// Segments of buffered unexpected eager messages (`unexp_seg` bytes each, or a
    /// packet's payload where that is smaller).
    pub unexp_slots: usize,
    /// Bytes per unexpected segment at most. A packet's payload larger than this
    /// spans several segments: on a link with 64 KiB datagrams (loopback) a small
    /// unexpected message would otherwise hold 64 KiB of the buffer.
    pub unexp_seg: usize,
    /// Unexpected messages (eager or rendezvous headers) an endpoint queues.
    pub unexp_msgs: usize,
    /// Messages that can be claimed (FI_PEEK | FI_CLAIM) at once.
    pub claimed_msgs: usize,
    /// Messages up to this many bytes go eagerly, larger ones by rendezvous.
    pub eager_threshold: usize,
    /// Retransmission timeout before the first RTT sample (and of the handshake).
    pub rto_initial: Duration,
    /// Lower bound of the retransmission timeout.
    pub rto_min: Duration,
    /// Upper bound of the retransmission timeout (and of its exponential backoff).
    pub rto_max: Duration,
    /// Consecutive retransmission timeouts without any packet from the peer after which
    /// the session fails (-FI_ETIMEDOUT for every pending operation).
    pub max_retries: u32,
    /// HELLOs sent without an answer before the handshake fails (-FI_EHOSTUNREACH).
    pub hello_retries: u32,
    /// Delayed-ack timer for ordinary in-order packets (spec 5.3: at most 1 ms). A
    /// sequenced packet leaving for the peer meanwhile carries the ack instead.
    pub ack_delay: Duration,
    /// How long an in-order packet with `ACK_REQ` waits for a reply to carry its ack
    /// (spec 5.3: at most 50 µs) before a standalone ACK goes. At most `ack_delay`; 0
    /// acknowledges in the same progress pass. A peer whose last hold expired unused
    /// is acknowledged at once until it gets a reply within the hold again.
    pub ack_hold: Duration,
    /// How long a new session offered by an already-connected peer waits for its first
    /// packet before it is forgotten (spec 4.5: replayed HELLOs).
    pub handshake_timeout: Duration,
    /// Announce CRC_RX: peers protect every packet with CRC32C, and so do we. Needed
    /// on links whose integrity nothing else protects end to end.
    pub crc: bool,
    /// Send several queued small messages to a peer that takes them as one BUNDLE
    /// packet (spec 6.4): one header, sequence number and link transmission for a
    /// burst. Nothing waits for a bundle to fill; a lone message goes alone.
    pub bundle: bool,
    /// Send acknowledgements without selective acks in their 16-byte short form (spec
    /// 5.2) to peers that take it: 8 bytes less on every small message that carries
    /// one.
    pub short_ack: bool,
}

impl RdmConfig {
    /// Defaults for a LAN or a simulator: 64-packet windows, 200 µs..100 ms RTO. A session
    /// fails after 30 consecutive timeouts with nothing from the peer (about 2 s: a busy
    /// peer descheduled on a loaded host is not dead), a handshake after 20 unanswered
    /// HELLOs (about 1.4 s: peers of one job do not all start at once).
    pub const DEFAULT: RdmConfig = RdmConfig {
        window: 64,
        rx_window: 0,
        max_peers: 64,
        reorder_slots: 512,
        unexp_slots: 512,
        unexp_seg: 8192,
        unexp_msgs: 1024,
        claimed_msgs: 64,
        eager_threshold: 8192,
        rto_initial: Duration::from_millis(1),
        rto_min: Duration::from_micros(200),
        rto_max: Duration::from_millis(100),
        max_retries: 30,
        hello_retries: 20,
        ack_delay: Duration::from_micros(100),
        ack_hold: Duration::from_micros(25),
        handshake_timeout: Duration::from_secs(1),
        crc: true,
        bundle: true,
        short_ack: true,
    };

    /// -FI_EINVAL unless the values are usable.
    pub fn validate(&self) -> Result<()> {
        if self.window == 0
            || self.window > 1024
            || (self.rx_window != 0 && self.rx_window < self.window)
            || self.rx_window > MAX_RX_WINDOW
            || self.max_peers == 0
            || self.max_peers > u16::MAX as usize - 1
            || self.reorder_slots >= NO_SLOT as usize
            || self.unexp_seg < 64
            || self.rto_min.total_micros() == 0
            || self.rto_min > self.rto_max
            || self.ack_hold > self.ack_delay
        {
            return Err(Errno::EINVAL);
        }
        Ok(())
    }
}

/// The largest [`RdmConfig::rx_window`].
pub const MAX_RX_WINDOW: u16 = 16384;

impl RdmConfig {
    /// The sequence span per peer: [`RdmConfig::rx_window`], or `window` where it is 0.
    #[inline(always)]
    pub const fn span(&self) -> u16 {
        if self.rx_window > self.window {
            self.rx_window
        } else {
            self.window
        }
    }
}

impl Default for RdmConfig {
    fn default() -> Self {
        RdmConfig::DEFAULT
    }
}

/// Session failures that failed no operation, not yet reported: fi_endpoint(3)'s
/// asynchronous endpoint errors (a peer that restarted or reset its session while
/// nothing was in flight to it), which the adapter writes to the endpoint's EQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpFault {
    /// The reason of the last one.
    pub err: crate::errno::Errno,
    /// How many since the last report.
    pub count: u32,
}

/// What an RDM endpoint counted: traffic, recovery, and every packet it refused, by
/// reason. Nothing here is ever a reason to panic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RdmStats {
    /// Packets handed to the link (retransmissions included).
    pub tx_packets: u64,
    /// Of those, single-packet messages sent by the short path a post takes when such a
    /// message is all its peer has to send (see `docs/architecture.md`).
    pub tx_express: u64,
    /// Of the packets, BUNDLEs (first transmissions; spec 6.4).
    pub tx_bundles: u64,
    /// Messages sent in BUNDLEs (first transmissions).
    pub tx_bundled_msgs: u64,
    /// Retransmissions after a timeout.
    pub tx_timeout_retransmits: u64,
    /// Fast retransmissions on selective-ack gaps.
    pub tx_fast_retransmits: u64,
    /// Retransmission timer expirations.
    pub rto_expirations: u64,
    /// Packets the link refused with an error (counted as sent and lost).
    pub tx_errors: u64,
    /// ACK packets sent (standalone acknowledgements).
    pub acks_sent: u64,
    /// Acknowledgements piggybacked on outgoing sequenced packets (flag `ACK`) instead
    /// of a packet of their own.
    pub acks_piggybacked: u64,
    /// Piggybacked acknowledgements received (processed like ACK packets).
    pub rx_acks_piggybacked: u64,
    /// Of those, the ones that came on a message and were held until the next transmit
    /// half (see `docs/architecture.md`).
    pub rx_acks_held: u64,
    /// Session packets received (after parsing).
    pub rx_packets: u64,
    /// Sequenced packets already received (dropped, re-acked).
    pub rx_duplicates: u64,
    /// Sequenced packets beyond the receive window.
    pub rx_out_of_window: u64,
    /// New sequenced packets that reached an endpoint while it closed (not acked: the
    /// sender learns the endpoint is gone rather than that the data was delivered).
    pub rx_closing: u64,
    /// Out-of-order packets held for reordering.
    pub rx_held: u64,
    /// Out-of-order packets dropped because no reorder slot was free.
    pub rx_reorder_full: u64,
    /// Packets refused for want of receive resources (back-pressure; the sender retries).
    pub rx_refused: u64,
    /// Packets for a session this endpoint does not have.
    pub rx_unknown_session: u64,
    /// Packets from a peer whose handshake is not finished yet.
    pub rx_early: u64,
    /// Packets whose ids, offsets or lengths contradict the session state.
    pub rx_protocol_errors: u64,
    /// ACKs older than one already processed, or acknowledging unsent packets.
    pub rx_bad_acks: u64,
    /// Packets without CRC from a peer that was asked to send it.
    pub rx_missing_crc: u64,
    /// Packets that have no place in a session (a DGRAM datagram sent to an RDM
    /// endpoint).
    pub rx_unsupported: u64,
    /// RMA and atomic request packets this build does not serve (without the `rma` or
    /// `atomic` feature), answered UNSUPPORTED.
    pub rx_unserved: u64,
    /// Handshakes refused or dropped for a missing or wrong authentication proof.
    pub auth_failures: u64,
    /// Retransmission timeouts found spurious: an acknowledgement showed that packets
    /// sent once before the timeout arrived (or came sooner after the retransmission
    /// than any round trip), so they were late, not lost; the backoff was undone.
    pub spurious_timeouts: u64,
    /// Handshake packets that were malformed for their state (wrong session, version).
    pub rx_bad_handshake: u64,
    /// HELLOs echoing a cookie we did not make for them (forged, or for another
    /// initiator or HELLO): dropped.
    pub rx_bad_cookie: u64,
    /// Packets of a keyed session without a valid per-packet MAC (spec 4.10: forged,
    /// altered, or from a peer without the key): dropped before they changed anything.
    pub rx_bad_mac: u64,
    /// HELLOs echoing an expired cookie (answered with a fresh RETRY).
    pub rx_stale_cookie: u64,
    /// RETRYs sent: HELLOs from addresses without a session answered with a cookie,
    /// no state kept (spec 4.2).
    pub retries_sent: u64,
    /// RETRYs received and answered by repeating our HELLO with the cookie.
    pub retries_received: u64,
    /// HELLOs of older initiators (no COOKIE capability) refused with
    /// REJECT(NO_RESOURCES) because half the peer table was in use.
    pub legacy_hellos_refused: u64,
    /// HELLOs sent (retries included).
    pub hellos_sent: u64,
    /// Sessions established (as initiator or responder).
    pub sessions: u64,
    /// REJECTs sent.
    pub rejects_sent: u64,
    /// RESETs sent.
    pub resets_sent: u64,
    /// RESETs and REJECTs accepted.
    pub resets_received: u64,
    /// CLOSEs sent (one per session of a closing endpoint; retransmissions not counted).
    pub closes_sent: u64,
    /// CLOSEs processed (the peer's endpoint closed: its session then ends).
    pub closes_received: u64,
    /// Sessions that failed (timeout, reset, reject, handshake timeout); not those the
    /// peer closed in order (`closes_received`).
    pub peer_failures: u64,
    /// ... of which: retransmission timeouts without an answer (-FI_ETIMEDOUT).
    pub fail_retransmit: u64,
    /// ... of which: unanswered credit or liveness probes (-FI_ETIMEDOUT).
    pub fail_probe: u64,
    /// Idle established sessions forgotten to make room in a full peer table.
    pub sessions_evicted: u64,
    /// REJECT(NO_RESOURCES) answers to our HELLO that we answered by asking again later
    /// (the peer's table was full).
    pub hello_busy: u64,
    /// Sends that went again on a new session after the peer answered
    /// RESET(UNKNOWN_SESSION) to a session it had forgotten (nothing of them was
    /// acknowledged, so nothing of them was delivered).
    pub tx_replayed: u64,
    /// Unexpected messages queued.
    pub unexpected: u64,
    /// Messages delivered to the application.
    pub rx_msgs: u64,
    /// BUNDLE packets processed (counted once per attempt that took a message).
    pub rx_bundles: u64,
    /// Messages taken from BUNDLE packets (delivered or queued unexpected).
    pub rx_bundled_msgs: u64,
    /// Messages whose sends completed.
    pub tx_msgs: u64,
    /// SACK packets sent (acknowledgements with ranges beyond the bitmap, spec 5.6).
    pub sacks_sent: u64,
    /// SACK packets received.
    pub rx_sacks: u64,
    /// Acknowledgements sent at once because a held packet opened a new hole (other
    /// held packets are acknowledged every few, spec 5.6).
    pub acks_on_hole: u64,
}
