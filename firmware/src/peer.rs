//! The other side of the responder: a DGRAM ping-pong client over any link, with data
//! checks. The QEMU test runs it on the host over a kernel UDP socket bound to the TAP's
//! address; the unit tests run it against the responder over in-memory links.

use ofi_nostd::addr::EpAddr;
use ofi_nostd::av::{AvAddrs, AvAttr};
use ofi_nostd::cq::{CqAttr, CqFormat, CqTaggedEntry};
use ofi_nostd::domain::{BindTarget, CqHandle, Domain, DomainConfig, EpHandle};
use ofi_nostd::errno::Errno;
use ofi_nostd::fabric::Fabric;
use ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use ofi_nostd::info::{API_VERSION, FabricAttr};
use ofi_nostd::mem::{IoVec, SliceMemory};
use ofi_nostd::net::NetConfig;
use ofi_nostd::storage::Storage;
use ofi_nostd::time::Instant;
use wire::link::Link;

use crate::app::{BringUpError, DGRAM_BUF, PROVIDER_CONFIG, dgram_info};

const TX_BASE: u64 = 0x2000_0000;
const RX_BASE: u64 = TX_BASE + DGRAM_BUF as u64;
const CTX_SEND: u64 = 1;
const CTX_RECV: u64 = 2;

/// The byte at offset `i` of ping `seq` of `size` bytes (offsets 0..4 carry `seq`).
pub fn pattern(seq: u32, size: usize, i: usize) -> u8 {
    if i < 4 {
        seq.to_le_bytes()[i]
    } else {
        (seq as usize)
            .wrapping_mul(31)
            .wrapping_add(i.wrapping_mul(7))
            .wrapping_add(size) as u8
    }
}

/// Where a ping stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PingState {
    /// Nothing outstanding.
    Idle,
    /// Sent and/or waiting for the echo.
    Waiting,
    /// The echo arrived with the right length and bytes.
    Done,
    /// The echo arrived but differs: its length, and the first differing offset.
    Mismatch {
        /// Bytes received.
        len: usize,
        /// First offset that differs (or `len` if only the length does).
        at: usize,
    },
    /// An error completion.
    Failed(Errno),
}

/// A DGRAM client that sends one datagram at a time and checks the echo.
pub struct Pinger<S: Storage> {
    _fabric: Fabric<S>,
    domain: Domain<S>,
    cq: CqHandle<S>,
    ep: EpHandle<S>,
    target: FiAddr,
    max_size: usize,
    bufs: [u8; 2 * DGRAM_BUF],
    size: usize,
    seq: u32,
    sent: bool,
    received: Option<usize>,
    state: PingState,
}

impl<S: Storage + Clone> Pinger<S> {
    /// A client on a link with capabilities `caps`, configured by `net` (set
    /// `with_ethernet` on raw links), that pings `target`.
    pub fn new(net: NetConfig, store: S, target: EpAddr, seed: u64) -> Result<Self, BringUpError> {
        let e = |call| move |errno| BringUpError { call, errno };
        let info = dgram_info();
        let mut fabric =
            Fabric::open(&FabricAttr::default(), 0, store.clone(), 0).map_err(e("fi_fabric"))?;
        let dc = DomainConfig {
            arp_entries: 8,
            // It only pings `target`; `Fixed<N>` storage could not hold a packet slot.
            loopback_slots: 0,
            ..DomainConfig::new(net, PROVIDER_CONFIG, seed)
        };
        let mut domain = Domain::open(&mut fabric, &info, dc, store, 0).map_err(e("fi_domain"))?;
        let cq = domain
            .cq_open(
                &CqAttr {
                    format: CqFormat::Tagged,
                    size: 16,
                    ..CqAttr::default()
                },
                0,
            )
            .map_err(e("fi_cq_open"))?;
        let av = domain
            .av_open(
                &mut AvAttr {
                    count: 4,
                    ..AvAttr::default()
                },
                0,
            )
            .map_err(e("fi_av_open"))?;
        let mut fi = [0 as FiAddr; 1];
        domain
            .av_mut(av)
            .and_then(|a| a.insert(AvAddrs::Ep(&[target]), Some(&mut fi), Flags::empty(), None))
            .map_err(e("fi_av_insert"))?;
        let ep = domain.ep_open(&info, 0).map_err(e("fi_endpoint"))?;
        domain
            .ep_bind(ep, BindTarget::Cq(cq), Flags::TRANSMIT | Flags::RECV)
            .map_err(e("fi_ep_bind(cq)"))?;
        domain
            .ep_bind(ep, BindTarget::Av(av), Flags::empty())
            .map_err(e("fi_ep_bind(av)"))?;
        domain.ep_enable(ep).map_err(e("fi_enable"))?;
        Ok(Pinger {
            _fabric: fabric,
            domain,
            cq,
            ep,
            target: fi[0],
            max_size: net
                .max_payload()
                .saturating_sub(wire::packet::BASE_LEN + 8)
                .min(DGRAM_BUF)
                .min(info.ep_attr.max_msg_size),
            bufs: [0; 2 * DGRAM_BUF],
            size: 0,
            seq: 0,
            sent: false,
            received: None,
            state: PingState::Idle,
        })
    }
}

impl<S: Storage> Pinger<S> {
    /// The largest datagram the endpoint sends (the DGRAM `max_msg_size`: what one
    /// 1500-byte IP packet carries, whatever the link's MTU).
    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// The domain (statistics).
    pub fn domain(&self) -> &Domain<S> {
        &self.domain
    }

    /// Starts ping `seq` of `size` bytes: posts the receive for the echo, then the send.
    pub fn start(&mut self, seq: u32, size: usize) -> ofi_nostd::Result<()> {
        let size = size.min(DGRAM_BUF);
        for (i, b) in self.bufs[..size].iter_mut().enumerate() {
            *b = pattern(seq, size, i);
        }
        self.size = size;
        self.seq = seq;
        self.sent = false;
        self.received = None;
        if self.state != PingState::Waiting {
            // No receive is posted yet (a lost echo leaves the old one posted).
            self.domain.recv(
                self.ep,
                IoVec::new(RX_BASE, DGRAM_BUF),
                FI_ADDR_UNSPEC,
                CTX_RECV,
            )?;
        }
        let mem = SliceMemory::new(TX_BASE, &mut self.bufs);
        self.domain.send(
            self.ep,
            &mem,
            IoVec::new(TX_BASE, size),
            self.target,
            CTX_SEND,
        )?;
        self.state = PingState::Waiting;
        Ok(())
    }

    /// Progress on `link`; returns where the current ping stands.
    pub fn poll<L: Link>(&mut self, now: Instant, link: &mut L) -> PingState {
        let mut mem = SliceMemory::new(TX_BASE, &mut self.bufs);
        let _ = self.domain.progress(now, link, &mut mem);
        let mut entries = [CqTaggedEntry::default(); 4];
        while let Ok(cq) = self.domain.cq_mut(self.cq) {
            match cq.read(&mut entries) {
                Ok(n) => {
                    for e in &entries[..n] {
                        match e.op_context {
                            CTX_SEND => self.sent = true,
                            _ => self.received = Some(e.len),
                        }
                    }
                }
                Err(Errno::EAVAIL) => {
                    let mut err_data = [0u8; 64];
                    if let Ok(e) = cq.readerr(Flags::empty(), API_VERSION, &mut err_data) {
                        self.state =
                            PingState::Failed(Errno::from_code(e.err.abs()).unwrap_or(Errno::EIO));
                    }
                }
                Err(_) => break,
            }
        }
        if self.state == PingState::Waiting
            && let Some(len) = self.received
        {
            self.received = None;
            let (tx, rx) = self.bufs.split_at(DGRAM_BUF);
            let seq_ok = len >= 4.min(self.size) && rx[..4.min(len)] == tx[..4.min(len)];
            if !seq_ok && self.size >= 4 {
                // An echo of an earlier ping (its own was lost): wait for ours.
                let _ = self.domain.recv(
                    self.ep,
                    IoVec::new(RX_BASE, DGRAM_BUF),
                    FI_ADDR_UNSPEC,
                    CTX_RECV,
                );
            } else if len != self.size || rx[..len] != tx[..len] {
                let at = (0..len.min(self.size))
                    .find(|&i| rx[i] != tx[i])
                    .unwrap_or(len.min(self.size));
                self.state = PingState::Mismatch { len, at };
            } else {
                self.state = PingState::Done;
            }
        }
        if self.state == PingState::Done && !self.sent {
            return PingState::Waiting;
        }
        let s = self.state;
        if s == PingState::Done {
            self.state = PingState::Idle;
        }
        s
    }

    /// When [`Pinger::poll`] must run again at the latest.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.domain.poll_timeout()
    }
}
