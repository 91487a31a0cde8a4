//! One endpoint and its buffers: posting receives and sends, reading completions, and
//! the message format (what the 64-bit CQ data or tag of each message says).

use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::cq::CqAttr;
use ofi_nostd::eq::WaitObj;
use ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use ofi_nostd::info::EpType;

use super::Failure;
use crate::api::{Av, Buf, Completion, Cq, CqBatch, Domain, Endpoint, OpId, PassiveEndpoint};

/// Set in the CQ data of control messages.
const CTRL: u64 = 1 << 63;

/// Bits of the iteration number in a data word (the rest is the round).
const SEQ_BITS: u32 = 40;

/// Bytes a control message may carry.
pub(crate) const CTRL_MAX: usize = 64;

/// The most bytes of buffers one direction keeps (posted receives, or sends in flight):
/// windows of huge messages are shortened to fit.
const BUF_BUDGET: usize = 64 << 20;

/// Completion queue entries.
const CQ_SIZE: usize = 4096;
/// Completions a busy-polling multi-receive reader takes per call.
const READ_BATCH: usize = 32;

const CTX_TX: u64 = 1;
const CTX_RX: u64 = 2;
const CTX_CTRL_RX: u64 = 3;
/// `--multi-recv`: messages up to this size go to multi-receive buffers...
const MULTI_MAX_MSG: usize = 16 << 10;
/// ...of at least this many bytes.
const MULTI_MIN: usize = 64 << 10;
/// Busy-polling pumps between two readings of the clock (see `Session::pump`).
const PUMPS_PER_CLOCK: u32 = 32;

/// What a control message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Client → server: options and the client's address.
    Hello = 1,
    /// Server → client: accepted.
    HelloAck,
    /// Server → client: refused (the payload says why).
    Nak,
    /// Client → server: the next size's parameters.
    Sync,
    /// Server → client: receives are posted.
    SyncAck,
    /// Client → server: a stream (or burst) ended.
    End,
    /// Server → client: what the server received.
    EndAck,
    /// Client → server: done.
    Fin,
    /// Server → client: goodbye.
    FinAck,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        use Kind::*;
        [
            Hello, HelloAck, Nak, Sync, SyncAck, End, EndAck, Fin, FinAck,
        ]
        .into_iter()
        .find(|k| *k as u8 == b)
    }
}

/// A control message.
#[derive(Debug, Clone)]
pub(crate) struct Ctrl {
    pub kind: Kind,
    /// The request's id, echoed by its answer.
    pub id: u32,
    pub payload: Vec<u8>,
}

/// What reading the endpoint produced.
#[derive(Debug)]
pub(crate) enum Event {
    /// A data message: its round, iteration number and buffer (the caller reposts it).
    Data { round: u16, seq: u64, buf: Buf },
    /// A control message (its buffer is already reposted).
    Ctrl(Ctrl),
}

fn data_word(round: u16, seq: u64) -> u64 {
    (u64::from(round) << SEQ_BITS) | (seq & ((1 << SEQ_BITS) - 1))
}

/// An endpoint with a CQ and an AV, the receives it has posted and its send buffers.
pub(crate) struct Session {
    domain: Domain<u64>,
    cq: Cq<u64>,
    ep: Endpoint<u64>,
    av: Av<u64>,
    /// The peer (FI_ADDR_UNSPEC until known).
    pub peer: FiAddr,
    pub tagged: bool,
    pub dgram: bool,
    pub inject_size: usize,
    pub timeout: Duration,
    spin: bool,
    /// Data-class receives posted (untagged ones also take control messages in msg mode).
    rx_posted: HashSet<OpId, BuildHasherDefault<IdHasher>>,
    rx_cap: usize,
    rx_round: u16,
    rx_next_seq: u64,
    /// Cancelling: completions of data receives are dropped, not reposted.
    draining: bool,
    /// Forgetting a failed client ([`Session::reset`]): operations that complete with
    /// an error are counted in `forgot`, not failures.
    lenient: bool,
    forgot: u64,
    /// The control receive of tagged mode.
    ctrl_posted: Option<OpId>,
    inbox: VecDeque<Event>,
    tx_free: Vec<Buf>,
    tx_total: usize,
    tx_cap: usize,
    scratch: Vec<u8>,
    /// The last control id used by this side.
    pub ctrl_id: u32,
    /// Cancelled or discarded messages (stale replies), for -v.
    pub stale: u64,
    /// Completion reads that found nothing (busy-polling), for -v: how much of its
    /// time a side spent waiting for the other.
    empty_polls: u64,
    /// Polls spent waiting for a send buffer to come back, for -v.
    pub tx_waits: u64,
    /// Pumps so far (see [`Session::pump`]).
    pumps: u32,
    /// Data receives are multi-receive buffers (`--multi-recv`, msg mode).
    multi: bool,
    /// Completions read ahead in one call (busy-polling a multi-receive buffer: a
    /// stream of small messages pays the read's lock and checks once per batch).
    batch: CqBatch<u64>,
    /// Where a message received into a multi-receive buffer is copied (the buffer
    /// stays posted): the `buf` of its event, handed back by [`Session::recycle`].
    rx_copy: Buf,
}

fn fab(what: &str) -> impl Fn(crate::api::Error) -> Failure + '_ {
    move |e| Failure::new(format!("{what}: {e}"))
}

impl Session {
    /// Opens the endpoint (`ep_type`, tagged or not) on `domain`.
    pub(crate) fn open(
        domain: Domain<u64>,
        ep_type: EpType,
        tagged: bool,
        spin: bool,
        timeout: Duration,
    ) -> Result<Session, Failure> {
        let cq = domain
            .cq_with(&CqAttr {
                size: CQ_SIZE,
                wait_obj: WaitObj::Fd,
                ..CqAttr::default()
            })
            .map_err(fab("fi_cq_open"))?;
        let av = domain.av().map_err(fab("fi_av_open"))?;
        let ep = domain.endpoint(ep_type).map_err(fab("fi_endpoint"))?;
        ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV)
            .map_err(fab("fi_ep_bind"))?;
        let msg = ep_type == EpType::Msg;
        if !msg {
            // A connected endpoint has its peer instead, and fi_connect / fi_accept
            // enable it.
            ep.bind_av(&av).map_err(fab("fi_ep_bind"))?;
            ep.enable().map_err(fab("fi_enable"))?;
        }
        let inject_size = domain
            .info()
            .tx_attr
            .inject_size
            .min(if ep_type == EpType::Dgram {
                usize::MAX
            } else {
                domain.info().ep_attr.max_msg_size
            });
        let mut s = Session {
            domain,
            cq,
            ep,
            av,
            peer: FI_ADDR_UNSPEC,
            tagged,
            dgram: ep_type == EpType::Dgram,
            inject_size,
            timeout,
            spin,
            rx_posted: HashSet::default(),
            rx_cap: CTRL_MAX,
            rx_round: 0,
            rx_next_seq: 0,
            draining: false,
            lenient: false,
            forgot: 0,
            ctrl_posted: None,
            inbox: VecDeque::new(),
            tx_free: Vec::new(),
            tx_total: 0,
            tx_cap: 0,
            scratch: Vec::new(),
            ctrl_id: 0,
            stale: 0,
            empty_polls: 0,
            tx_waits: 0,
            pumps: 0,
            multi: false,
            batch: CqBatch::default(),
            rx_copy: Buf::default(),
        };
        // Ready for control messages: two untagged receives (msg mode) or the control
        // receive (tagged mode). A connected endpoint posts them once connected.
        if !msg {
            s.configure_rx(CTRL_MAX, 2, 0)?;
        }
        Ok(s)
    }

    /// FI_EP_MSG client: connects to the passive endpoint at `to`, then posts the
    /// control receives.
    pub(crate) fn connect(&mut self, to: EpAddr) -> Result<(), Failure> {
        self.ep
            .connect(to, b"ofi-pingpong")
            .map_err(fab("fi_connect"))?;
        self.ep
            .wait_connected(self.timeout)
            .map_err(fab("waiting for FI_CONNECTED"))?;
        self.configure_rx(CTRL_MAX, 2, 0)
    }

    /// FI_EP_MSG server: a passive endpoint listening at the domain's address.
    pub(crate) fn listen(&self) -> Result<PassiveEndpoint<u64>, Failure> {
        self.domain.passive_endpoint().map_err(fab("fi_passive_ep"))
    }

    /// FI_EP_MSG server: accepts the first connection request on `pep` with this
    /// session's endpoint, then posts the control receives.
    pub(crate) fn accept(&mut self, pep: &PassiveEndpoint<u64>) -> Result<(), Failure> {
        let req = pep
            .request(self.timeout)
            .map_err(fab("waiting for FI_CONNREQ"))?;
        pep.accept(&req, &self.ep, b"").map_err(fab("fi_accept"))?;
        self.ep
            .wait_connected(self.timeout)
            .map_err(fab("waiting for FI_CONNECTED"))?;
        self.configure_rx(CTRL_MAX, 2, 0)
    }

    /// Receives data (and, in msg mode, control messages) into multi-receive buffers
    /// (FI_MULTI_RECV) from the next [`Session::configure_rx`] on: one post per buffer
    /// instead of one per message. Msg mode only (multi-receive takes untagged
    /// messages).
    pub(crate) fn set_multi(&mut self, on: bool) -> Result<(), Failure> {
        if on && self.tagged {
            return Err(Failure::new("--multi-recv needs -m msg"));
        }
        self.multi = on;
        Ok(())
    }

    /// Limits DGRAM injects to the largest DGRAM message.
    pub(crate) fn limit_inject(&mut self, max_msg: usize) {
        self.inject_size = self.inject_size.min(max_msg);
    }

    /// Our address (fi_getname).
    pub(crate) fn addr(&self) -> EpAddr {
        self.ep.addr()
    }

    /// Inserts the peer's address into the AV and talks to it from now on; the last
    /// peer's entry is removed (a server serving clients one after another keeps one;
    /// the AV counts inserts of one address, so a client back at the same address
    /// keeps its entry).
    pub(crate) fn set_peer(&mut self, addr: EpAddr) -> Result<(), Failure> {
        let new = self.av.insert(addr).map_err(fab("fi_av_insert"))?;
        if self.peer != FI_ADDR_UNSPEC {
            self.av.remove(self.peer).map_err(fab("fi_av_remove"))?;
        }
        self.peer = new;
        Ok(())
    }

    /// Forgets a failed peer's operations: cancels every posted receive and waits
    /// (at most the timeout) until every send is back, completions with an error
    /// counted instead of failing; drops the send buffers and every queued event but
    /// hellos, and posts receives for control messages again. Returns how many
    /// operations completed with an error meanwhile.
    pub(crate) fn reset(&mut self) -> Result<u64, Failure> {
        self.lenient = true;
        self.forgot = 0;
        let r = self
            .configure_rx(CTRL_MAX, 2, 0)
            .and_then(|()| self.tx_idle());
        self.lenient = false;
        r?;
        self.tx_free.clear();
        self.tx_total = 0;
        self.tx_cap = 0;
        self.inbox
            .retain(|e| matches!(e, Event::Ctrl(c) if c.kind == Kind::Hello));
        Ok(self.forgot)
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// Posts one data-class receive: untagged in msg mode; in tagged mode for the next
    /// iteration number of the current round, exactly.
    /// FI_MORE on the sends that follow until turned off (see `Endpoint::set_more`).
    pub(crate) fn set_more(&self, on: bool) {
        self.ep.set_more(on);
    }

    /// Whether data receives are multi-receive buffers now (small messages only).
    fn multi_rx(&self) -> bool {
        self.multi && self.rx_cap <= MULTI_MAX_MSG
    }

    pub(crate) fn post_rx(&mut self, buf: Buf) -> Result<(), Failure> {
        let r = if self.multi_rx() {
            self.ep.recv_multi(buf, FI_ADDR_UNSPEC, CTX_RX)
        } else if self.tagged {
            let tag = data_word(self.rx_round, self.rx_next_seq);
            self.rx_next_seq += 1;
            self.ep.trecv(buf, FI_ADDR_UNSPEC, tag, 0, CTX_RX)
        } else {
            self.ep.recv(buf, FI_ADDR_UNSPEC, CTX_RX)
        };
        let id = r.map_err(|e| Failure::new(format!("posting a receive: {e}")))?;
        self.rx_posted.insert(id);
        Ok(())
    }

    fn post_ctrl_rx(&mut self) -> Result<(), Failure> {
        self.post_ctrl_rx_with(Buf::zeroed(CTRL_MAX))
    }

    /// Replaces every posted data receive by `count` receives of `cap` bytes (fewer if
    /// they would exceed the buffer budget) for round `round`; control messages that
    /// arrive meanwhile are kept for [`Session::next`].
    pub(crate) fn configure_rx(
        &mut self,
        cap: usize,
        count: usize,
        round: u16,
    ) -> Result<(), Failure> {
        self.draining = true;
        for id in self.rx_posted.clone() {
            // An operation that already completed is not affected.
            let _ = self.ep.cancel(id);
        }
        let deadline = self.deadline();
        while !self.rx_posted.is_empty() {
            match self.poll(Some(deadline))? {
                Some(Event::Ctrl(c)) => self.inbox.push_back(Event::Ctrl(c)),
                Some(Event::Data { .. }) => self.stale += 1,
                None if Instant::now() >= deadline => {
                    self.draining = false;
                    return Err(Failure::new("cancelled receives did not complete"));
                }
                None => {}
            }
        }
        self.draining = false;
        let cap = if self.tagged { cap } else { cap.max(CTRL_MAX) };
        self.rx_cap = cap;
        self.rx_round = round;
        self.rx_next_seq = 0;
        let count = count.min((BUF_BUDGET / cap.max(1)).max(2));
        if self.multi_rx() {
            // Two buffers, each holding at least the window: one stays posted while
            // the other comes back and is posted again.
            let each = (cap * count).max(MULTI_MIN);
            self.rx_copy_room();
            for _ in 0..2 {
                self.post_rx(Buf::zeroed(each))?;
            }
        } else {
            for _ in 0..count {
                self.post_rx(Buf::zeroed(cap))?;
            }
        }
        if self.tagged && self.ctrl_posted.is_none() {
            self.post_ctrl_rx()?;
        }
        Ok(())
    }

    /// Waits until every send buffer is back, then keeps `count` send buffers of `size`
    /// bytes (fewer if they would exceed the budget; none when `size` goes by inject).
    /// Returns how many there are.
    pub(crate) fn prepare_tx(&mut self, size: usize, count: usize) -> Result<usize, Failure> {
        self.tx_idle()?;
        let count = if size < self.inject_size {
            0
        } else {
            count.min((BUF_BUDGET / size.max(1)).max(2))
        };
        if self.tx_cap != size || self.tx_total != count {
            self.tx_free = (0..count).map(|_| Buf::zeroed(size)).collect();
            self.tx_total = count;
            self.tx_cap = size;
        }
        if self.scratch.len() < size.min(self.inject_size) {
            self.scratch = vec![0; size.min(self.inject_size)];
        }
        Ok(count)
    }

    /// Waits until every send has completed.
    pub(crate) fn tx_idle(&mut self) -> Result<(), Failure> {
        let mut deadline = None;
        while self.tx_free.len() < self.tx_total {
            self.pump(&mut deadline, "a send to complete")?;
        }
        Ok(())
    }

    /// What -v reports at the end: discarded messages, waits for send buffers, the
    /// domain's packet counters.
    /// Connection attempts our RDM engine refused for their auth key (0 on DGRAM).
    pub(crate) fn auth_failures(&self) -> u64 {
        self.ep.rdm_stats().map_or(0, |r| r.auth_failures)
    }

    pub(crate) fn stats(&self) -> String {
        let d = self.domain.stats();
        let n = self.domain.net_stats();
        let mut drops = crate::drops::DropReport::new(&self.domain.link_drops(), &n, &d);
        let rdm_stats = self.ep.rdm_stats();
        if let Some(r) = &rdm_stats {
            drops.add_rdm(r);
        }
        let rdm = rdm_stats.map_or(String::new(), |r| format!("; rdm: {r:?}"));
        format!(
            "{} stale messages discarded, {} polls waiting for a send buffer, {} empty completion reads, {} packets sent, {} received, {drops}; link: {n:?}{rdm}",
            self.stale, self.tx_waits, self.empty_polls, d.tx_packets, d.rx_packets
        )
    }

    /// Reads one completion (events go to the inbox) while waiting for `what`; fails at
    /// the deadline, which the first pump of a wait sets (`None` before: waits that
    /// never pump never read the clock). Busy-polling, the clock is read every
    /// [`PUMPS_PER_CLOCK`] pumps only: a send that waits for room pumps once per
    /// message, and a clock reading cost as much as the rest of the pump.
    fn pump(&mut self, deadline: &mut Option<Instant>, what: &str) -> Result<(), Failure> {
        self.pumps = self.pumps.wrapping_add(1);
        let now = (deadline.is_none() || !self.spin || self.pumps.is_multiple_of(PUMPS_PER_CLOCK))
            .then(Instant::now);
        // `now` is read whenever no deadline is set yet.
        let d = *deadline.get_or_insert_with(|| now.unwrap_or_else(Instant::now) + self.timeout);
        let nap = now.map(|n| d.min(n + Duration::from_millis(1)));
        if let Some(e) = self.poll(nap)? {
            self.inbox.push_back(e);
        }
        if now.is_some() && Instant::now() >= d {
            return Err(Failure::new(format!(
                "timed out after {:?} waiting for {what}",
                self.timeout
            )));
        }
        Ok(())
    }

    /// Sends a control message (copied at once: fi_injectdata).
    pub(crate) fn send_ctrl(&mut self, kind: Kind, id: u32, payload: &[u8]) -> Result<(), Failure> {
        debug_assert!(payload.len() <= CTRL_MAX);
        let word = CTRL | (u64::from(kind as u8) << 48) | u64::from(id);
        let mut deadline = None;
        loop {
            match self.ep.injectdata(payload, word, self.peer) {
                Ok(()) => return Ok(()),
                Err(e) if e == Errno::EAGAIN => self.pump(&mut deadline, "room to send")?,
                Err(e) => return Err(Failure::new(format!("sending {kind:?}: {e}"))),
            }
        }
    }

    /// Sends the first control message to a new peer as fi_senddata with a completion
    /// (not inject, whose failure no completion reports), so that a connection the
    /// peer refuses (another auth key: -FI_EKEYREJECTED) ends the run with that error
    /// instead of a timeout.
    pub(crate) fn send_ctrl_tracked(
        &mut self,
        kind: Kind,
        id: u32,
        payload: &[u8],
    ) -> Result<(), Failure> {
        let word = CTRL | (u64::from(kind as u8) << 48) | u64::from(id);
        let mut buf = Buf::zeroed(payload.len());
        buf.copy_from(payload);
        let mut deadline = None;
        loop {
            match self.ep.senddata(buf, word, self.peer, CTX_TX) {
                Ok(_) => return Ok(()),
                Err(e) if e.errno == Errno::EAGAIN => {
                    buf = e.buf;
                    self.pump(&mut deadline, "room to send")?;
                }
                Err(e) => {
                    return Err(Failure::new(format!(
                        "sending {kind:?}: {}",
                        crate::api::Error::Fabric(e.errno)
                    )));
                }
            }
        }
    }

    /// Sends data message `seq` of `round`, `size` bytes, filled with `pattern`'s bytes
    /// when given: fi_inject below the inject size, else fi_send from a send buffer
    /// (waiting for one to come back if all are in flight).
    pub(crate) fn send_data(
        &mut self,
        size: usize,
        round: u16,
        seq: u64,
        pattern: Option<u64>,
    ) -> Result<(), Failure> {
        let word = data_word(round, seq);
        let mut deadline = None;
        if size < self.inject_size {
            if let Some(p) = pattern {
                super::fill(&mut self.scratch[..size], p);
            }
            loop {
                let data = &self.scratch[..size];
                let r = if self.tagged {
                    self.ep.tinject(data, self.peer, word)
                } else {
                    self.ep.injectdata(data, word, self.peer)
                };
                match r {
                    Ok(()) => return Ok(()),
                    Err(e) if e == Errno::EAGAIN => self.pump(&mut deadline, "room to send")?,
                    Err(e) => return Err(Failure::new(format!("fi_inject of {size} bytes: {e}"))),
                }
            }
        }
        let mut buf = loop {
            match self.tx_free.pop() {
                Some(b) => break b,
                None => {
                    self.tx_waits += 1;
                    self.pump(&mut deadline, "a send buffer to come back")?;
                }
            }
        };
        buf.set_len(size);
        if let Some(p) = pattern {
            super::fill(&mut buf, p);
        }
        loop {
            let r = if self.tagged {
                self.ep.tsend(buf, self.peer, word, CTX_TX)
            } else {
                self.ep.senddata(buf, word, self.peer, CTX_TX)
            };
            match r {
                Ok(_) => return Ok(()),
                Err(e) if e.errno == Errno::EAGAIN => {
                    buf = e.buf;
                    self.pump(&mut deadline, "room to send")?;
                }
                Err(e) => {
                    return Err(Failure::new(format!(
                        "fi_send of {size} bytes: {}",
                        crate::api::Error::Fabric(e.errno)
                    )));
                }
            }
        }
    }

    /// The next event, waiting until `deadline`; `None` when it passed.
    pub(crate) fn next(&mut self, deadline: Instant) -> Result<Option<Event>, Failure> {
        if let Some(e) = self.inbox.pop_front() {
            return Ok(Some(e));
        }
        // The clock is read every few empty polls: on the latency path a poll is a
        // fraction of a microsecond and each reading would add to it.
        let mut polls = 0u32;
        loop {
            if let Some(e) = self.poll(Some(deadline))? {
                return Ok(Some(e));
            }
            polls = polls.wrapping_add(1);
            if (!self.spin || polls.is_multiple_of(PUMPS_PER_CLOCK)) && Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }

    /// The next event, waiting at most about `timeout`. Busy-polling, the clock is
    /// first read after a few empty polls (then the wait starts), so an event that is
    /// already there costs no reading of it.
    pub(crate) fn next_within(&mut self, timeout: Duration) -> Result<Option<Event>, Failure> {
        if !self.spin {
            return self.next(Instant::now() + timeout);
        }
        if let Some(e) = self.inbox.pop_front() {
            return Ok(Some(e));
        }
        let mut deadline = None;
        let mut polls = 0u32;
        loop {
            if let Some(e) = self.poll(None)? {
                return Ok(Some(e));
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(PUMPS_PER_CLOCK) {
                let now = Instant::now();
                if now >= *deadline.get_or_insert(now + timeout) {
                    return Ok(None);
                }
            }
        }
    }

    /// Reads at most one completion: busy-polling (`fi_cq_read`) or, with blocking
    /// waits, sleeping in `fi_cq_sread` until `deadline` (at most 100 ms at a time).
    fn poll(&mut self, deadline: Option<Instant>) -> Result<Option<Event>, Failure> {
        let r = if self.spin && self.multi || !self.batch.is_empty() {
            // Messages of a multi-receive buffer are copied out in the same call (and a
            // batch read before a reconfiguration is taken first).
            if self.batch.is_empty()
                && let Err(e) = self.cq.read_batch(&mut self.batch, READ_BATCH)
                && e != Errno::EAGAIN
            {
                return Err(Failure::new(format!("fi_cq_read: {e}")));
            }
            match self.batch.pop() {
                Some((c, msg)) => {
                    if let Some(m) = msg {
                        copy_room(&mut self.rx_copy, self.rx_cap);
                        self.rx_copy
                            .copy_from(&m[..m.len().min(self.rx_copy.capacity())]);
                    }
                    Ok(c)
                }
                None => Err(Errno::EAGAIN.into()),
            }
        } else if self.spin {
            self.cq.read()
        } else {
            let left = deadline
                .map_or(Duration::ZERO, |d| {
                    d.saturating_duration_since(Instant::now())
                })
                .min(Duration::from_millis(100));
            self.cq.sread(left)
        };
        match r {
            Ok(c) => self.take(c),
            Err(e) if e == Errno::EAGAIN => {
                self.empty_polls += 1;
                Ok(None)
            }
            Err(e) => Err(Failure::new(format!("fi_cq_read: {e}"))),
        }
    }

    fn take(&mut self, c: Completion<u64>) -> Result<Option<Event>, Failure> {
        if c.offset.is_some() {
            return self.take_multi(c);
        }
        match c.context {
            CTX_TX => {
                let len = c.buf.len();
                if c.buf.capacity() == self.tx_cap && self.tx_free.len() < self.tx_total {
                    self.tx_free.push(c.buf);
                }
                if let Some(e) = c.error {
                    if self.lenient {
                        self.forgot += 1;
                        return Ok(None);
                    }
                    return Err(Failure::new(format!(
                        "a send of {len} bytes failed: {}",
                        crate::api::Error::Fabric(e.errno)
                    )));
                }
                Ok(None)
            }
            ctx => {
                let ctrl_rx = ctx == CTX_CTRL_RX;
                if ctrl_rx {
                    self.ctrl_posted = None;
                } else {
                    self.rx_posted.remove(&c.op);
                }
                if let Some(e) = c.error {
                    if e.errno == Errno::ECANCELED {
                        return Ok(None);
                    }
                    if self.lenient {
                        self.forgot += 1;
                        if ctrl_rx {
                            self.post_ctrl_rx()?;
                        }
                        return Ok(None);
                    }
                    return Err(Failure::new(format!(
                        "a receive failed: {}{}",
                        crate::api::Error::Fabric(e.errno),
                        if e.errno == Errno::ETRUNC {
                            format!(" ({} bytes did not fit)", e.olen)
                        } else {
                            String::new()
                        }
                    )));
                }
                let word = if self.tagged && !ctrl_rx {
                    c.tag
                } else {
                    c.data
                };
                let Some(word) = word else {
                    // Not ours (no CQ data): drop it.
                    self.stale += 1;
                    self.repost(ctrl_rx, c.buf)?;
                    return Ok(None);
                };
                if word & CTRL != 0 {
                    let ctrl = ctrl_event(word, &c.buf);
                    self.repost(ctrl_rx, c.buf)?;
                    return Ok(ctrl);
                }
                Ok(Some(data_event(word, c.buf)))
            }
        }
    }

    /// Makes `rx_copy` hold a message of the current size (a new one only when an
    /// event kept the last or the size grew).
    fn rx_copy_room(&mut self) {
        copy_room(&mut self.rx_copy, self.rx_cap);
    }

    /// A completion of a multi-receive buffer: a message (copied out of the buffer, or
    /// out of the buffer that came back with it), and when the buffer came back, its
    /// re-post.
    fn take_multi(&mut self, mut c: Completion<u64>) -> Result<Option<Event>, Failure> {
        // Busy-polling reads copied into it already (with room: see `poll`); otherwise
        // an event may have kept the last one.
        self.rx_copy_room();
        let at = c.offset.unwrap_or(0);
        let back = c.buf.capacity() > 0;
        if back {
            self.rx_posted.remove(&c.op);
            if let Some(e) = c.error {
                if e.errno == Errno::ECANCELED {
                    return Ok(None);
                }
                if self.lenient {
                    self.forgot += 1;
                    return Ok(None);
                }
                return Err(Failure::new(format!(
                    "a multi-receive failed: {}",
                    crate::api::Error::Fabric(e.errno)
                )));
            }
            if c.len > 0 {
                let n = c.len.min(self.rx_copy.capacity());
                let msg = c.buf.get(at..at + n).unwrap_or(&[]);
                self.rx_copy.copy_from(msg);
            }
            // Posted again at once (unless cancelling or configured otherwise).
            if !self.draining && self.multi_rx() {
                let mut buf = std::mem::take(&mut c.buf);
                buf.set_len(buf.capacity());
                self.post_rx(buf)?;
            }
            if c.len == 0 {
                return Ok(None); // the release alone
            }
        } else {
            if let Some(e) = c.error {
                if self.lenient {
                    self.forgot += 1;
                    return Ok(None);
                }
                return Err(Failure::new(format!(
                    "a receive failed: {}",
                    crate::api::Error::Fabric(e.errno)
                )));
            }
            if !self.spin {
                self.cq.copy_multi(&c, &mut self.rx_copy);
            }
        }
        let Some(word) = c.data else {
            self.stale += 1;
            return Ok(None);
        };
        if word & CTRL != 0 {
            return Ok(ctrl_event(word, &self.rx_copy));
        }
        Ok(Some(data_event(word, std::mem::take(&mut self.rx_copy))))
    }

    fn repost(&mut self, ctrl_rx: bool, mut buf: Buf) -> Result<(), Failure> {
        if ctrl_rx {
            buf.set_len(buf.capacity());
            return self.post_ctrl_rx_with(buf);
        }
        if self.draining || buf.capacity() != self.rx_cap {
            return Ok(());
        }
        buf.set_len(buf.capacity());
        self.post_rx(buf)
    }

    fn post_ctrl_rx_with(&mut self, buf: Buf) -> Result<(), Failure> {
        let id = self
            .ep
            .recv(buf, FI_ADDR_UNSPEC, CTX_CTRL_RX)
            .map_err(|e| Failure::new(format!("posting a receive: {e}")))?;
        self.ctrl_posted = Some(id);
        Ok(())
    }

    /// Reposts a data receive buffer the caller got in an [`Event::Data`] (dropped if
    /// it belongs to an older configuration).
    pub(crate) fn recycle(&mut self, buf: Buf) -> Result<(), Failure> {
        if self.multi_rx() {
            // A copy out of a multi-receive buffer: the next message's copy goes there.
            if buf.capacity() >= self.rx_cap {
                self.rx_copy = buf;
            }
            return Ok(());
        }
        self.repost(false, buf)
    }
}

/// Makes `copy` hold at least `cap` bytes (a new buffer only when it is smaller).
fn copy_room(copy: &mut Buf, cap: usize) {
    if copy.capacity() < cap {
        *copy = Buf::zeroed(cap);
    }
}

/// The event of a control message: its word (CTRL set) and payload; `None` for a kind
/// we do not know.
fn ctrl_event(word: u64, payload: &[u8]) -> Option<Event> {
    Kind::from_u8((word >> 48) as u8).map(|kind| {
        Event::Ctrl(Ctrl {
            kind,
            id: word as u32,
            payload: payload.to_vec(),
        })
    })
}

/// The event of a data message: its word (round and iteration) and buffer.
fn data_event(word: u64, buf: Buf) -> Event {
    Event::Data {
        round: (word >> SEQ_BITS) as u16,
        seq: word & ((1 << SEQ_BITS) - 1),
        buf,
    }
}

/// Hashes an [`OpId`] (a slot index and a generation, already well spread) with one
/// multiplication: the set of posted receives is touched twice per message, where
/// SipHash would cost more than the rest of the bookkeeping.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}
