//! A peer's session: ids, initial sequence numbers, nonces, what the peer announced,
//! the handshake, and a new session the peer offered.

use super::*;

/// What the peer told us in its handshake.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::rdm) struct Params {
    /// Largest packet the peer takes.
    pub(in crate::rdm) max_pkt: u16,
    /// The peer's receive window in packets.
    pub(in crate::rdm) window: u16,
    /// The peer's capability bits (`wire::packet::caps`).
    pub(in crate::rdm) caps: u64,
}

/// A new session offered by an already-connected peer (spec 4.2/4.5): it replaces the
/// current one only when its first packet proves the peer took our HELLO_ACK.
#[derive(Debug, Clone, Copy)]
pub(in crate::rdm) struct Cand {
    /// The session id the peer puts on packets to us.
    pub(in crate::rdm) rx_session: u32,
    /// The session id we put on packets to the peer.
    pub(in crate::rdm) tx_session: u32,
    /// Our initial sequence number.
    pub(in crate::rdm) local_isn: u32,
    /// The peer's initial sequence number.
    pub(in crate::rdm) remote_isn: u32,
    /// What the peer announced.
    pub(in crate::rdm) params: Params,
    /// The credits the peer's HELLO granted.
    pub(in crate::rdm) credits: u32,
    /// Our handshake nonce (what the peer's proof covers).
    pub(in crate::rdm) our_nonce: u64,
    /// The peer's handshake nonce.
    pub(in crate::rdm) their_nonce: u64,
    /// When the candidate is forgotten unless its first packet arrived.
    pub(in crate::rdm) expires: Instant,
    /// Our HELLO_ACK for it is still to be sent.
    pub(in crate::rdm) send_ack: bool,
}

/// The session with a peer: its ids, initial sequence numbers and nonces, what the
/// peer announced, the handshake's progress, and how the session ends.
#[derive(Debug, Clone, Copy)]
pub(in crate::rdm) struct Session {
    /// Distinguishes sessions in references held by operations and messages.
    pub(in crate::rdm) epoch: u32,
    /// The session id the peer puts on packets to us.
    pub(in crate::rdm) rx_session: u32,
    /// The session id we put on packets to the peer.
    pub(in crate::rdm) tx_session: u32,
    /// Our initial sequence number.
    pub(in crate::rdm) local_isn: u32,
    /// The peer's initial sequence number.
    pub(in crate::rdm) remote_isn: u32,
    /// Our handshake nonce (what the peer's proof covers).
    pub(in crate::rdm) our_nonce: u64,
    /// The peer's handshake nonce.
    pub(in crate::rdm) their_nonce: u64,
    /// What the peer announced.
    pub(in crate::rdm) params: Params,
    /// The credits our handshake granted.
    pub(in crate::rdm) init_credits: u32,
    /// We answered a HELLO: (re)send HELLO_ACK for the current session.
    pub(in crate::rdm) send_hello_ack: bool,
    /// A new session the peer offered, waiting for its first packet.
    pub(in crate::rdm) cand: Option<Cand>,
    /// When the next HELLO is due.
    pub(in crate::rdm) hello_at: Instant,
    /// HELLOs sent without an answer.
    pub(in crate::rdm) hello_tries: u32,
    /// The current HELLO retry interval (µs, backed off).
    pub(in crate::rdm) hello_rto: u64,
    /// The receive session of the peer's last failed session (0: none): a late packet
    /// of it is answered RESET(RETRY_EXHAUSTED), not UNKNOWN_SESSION, so the peer does
    /// not re-send what we may have delivered.
    pub(in crate::rdm) failed_rx_session: u32,
    /// Our transmit session of that failed session (what the RESET names).
    pub(in crate::rdm) failed_tx_session: u32,
    /// The peer refused our HELLO for lack of room (REJECT(NO_RESOURCES)): we ask again
    /// until this instant, by when an idle session of its should have made room.
    pub(in crate::rdm) busy_until: Option<Instant>,
    /// Our endpoint is closing: send CLOSE (spec 4.7) after the sends queued before
    /// `fi_close`, and nothing after it.
    pub(in crate::rdm) close_pending: bool,
    /// The sequence number our CLOSE went out with: once the peer's cumulative ack
    /// passes it, the peer has every acknowledgement we owed and the linger can end.
    pub(in crate::rdm) close_seq: Option<u32>,
    /// The peer's CLOSE was processed: fail the session once its ACK has left.
    pub(in crate::rdm) closed_by_peer: bool,
    /// The responder's cookie from its RETRY, echoed in our next HELLOs.
    pub(in crate::rdm) cookie: Option<[u8; wire::packet::COOKIE_LEN]>,
    /// The peer proved it receives at its address (it echoed our cookie, answered our
    /// HELLO, or sent a packet of the session): only then does it get a CLOSE. A
    /// session an older initiator's HELLO opened is unconfirmed until its first packet.
    pub(in crate::rdm) confirmed: bool,
    /// Under a key, a REJECT(AUTH_FAILED) came for this handshake that our key could
    /// not verify (spec 4.10: a peer with another key, or a forgery): the handshake
    /// goes on, and fails with -FI_EKEYREJECTED if it times out.
    pub(in crate::rdm) key_refused: bool,
}

impl Session {
    /// Nothing yet: what a fresh peer slot holds.
    pub(in crate::rdm) const EMPTY: Session = Session {
        epoch: 0,
        rx_session: 0,
        tx_session: 0,
        local_isn: 0,
        remote_isn: 0,
        our_nonce: 0,
        their_nonce: 0,
        params: Params {
            max_pkt: 0,
            window: 0,
            caps: 0,
        },
        init_credits: 0,
        send_hello_ack: false,
        cand: None,
        hello_at: Instant::ZERO,
        hello_tries: 0,
        hello_rto: 0,
        failed_rx_session: 0,
        failed_tx_session: 0,
        busy_until: None,
        close_pending: false,
        close_seq: None,
        closed_by_peer: false,
        cookie: None,
        confirmed: false,
        key_refused: false,
    };
}

impl Session {
    /// The session with ids `rx_session`/`tx_session` (as it had them) ended: no ids,
    /// no candidate, nothing to answer, and its ids remembered (when it had any) so
    /// its late packets are answered RESET(RETRY_EXHAUSTED).
    pub(in crate::rdm) fn end(&mut self, rx_session: u32, tx_session: u32) {
        self.tx_session = 0;
        self.rx_session = 0;
        self.cand = None;
        self.send_hello_ack = false;
        self.busy_until = None;
        if rx_session != 0 {
            self.failed_rx_session = rx_session;
            self.failed_tx_session = tx_session;
        }
    }
}
