//! A link wrapper that writes every frame to a pcap file, in the spirit of smoltcp's
//! `PcapWriter`.
//!
//! [`PcapLink`] wraps any [`Link`] and writes each frame received or transmitted through
//! it as one record of a classic pcap file (little-endian, version 2.4, microsecond
//! timestamps), in the order the frames pass: a received frame when the stack consumes
//! it, a transmitted one when the stack has written it.
//!
//! # Link types
//!
//! * [`Medium::Ethernet`]: the frames as they are, [`LINKTYPE_ETHERNET`].
//! * [`Medium::Udp`]: the link carries only UDP payloads, so an IPv4 and a UDP header
//!   (with valid checksums, TTL 64) are synthesised around each one and the file uses
//!   [`LINKTYPE_RAW`] (bare IPv4). Wireshark and tshark decode that directly as
//!   IPv4/UDP (so `udp.srcport` and friends work) without the fake all-zero MAC
//!   addresses an Ethernet encapsulation would need. Addresses come from the metadata:
//!   a received payload goes from [`RxMeta::src`] to [`RxMeta::dst`] (or the
//!   wrapper's [`PcapConfig::local`] address when the link does not say), a transmitted
//!   one from `local` to [`TxMeta::dst`] (or [`PcapConfig::peer`] for a connected
//!   socket). An address nobody knows is written as `0.0.0.0:0`.
//!
//! # Timestamps
//!
//! From [`PcapClock`]: the system clock (the default), a time the caller sets
//! ([`PcapLink::set_time`], e.g. the simulator's virtual time), or a closure.
//!
//! # Flush policy
//!
//! Each record (16-byte header and frame) is assembled in a buffer allocated once and
//! handed to the writer with a single `write_all`. Then, as [`PcapConfig::flush`] says:
//! [`Flush::EachRecord`] (the default) flushes the writer after every record, so the
//! file is complete up to the last frame even if the process dies or the test fails
//! mid-way (the cost is a system call per frame with a `BufWriter<File>`);
//! [`Flush::Every`] flushes after every *n* records; [`Flush::Manual`] never flushes by
//! itself (call [`PcapLink::flush`], or rely on the writer flushing when dropped, as
//! `BufWriter` does). The file header is written and, unless the policy is `Manual`,
//! flushed by [`PcapLink::new`].
//!
//! The link traits cannot report I/O errors, so the first write error is kept
//! ([`PcapLink::take_error`]), recording stops and the frames keep flowing; records not
//! written are counted in [`PcapStats::failed`].

use core::fmt;
use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wire::frame::{
    ChecksumCapabilities, ETH_HEADER_LEN, ETH_IPV4_UDP_HEADER_LEN, EthernetAddress, Ipv4Address,
    UdpFrameRepr, emit_udp_ipv4_ethernet,
};
use wire::link::{Capabilities, Link, Medium, RxMeta, RxToken, TxMeta, TxToken, UdpAddr};

/// Magic number of a classic pcap file with microsecond timestamps.
pub const PCAP_MAGIC: u32 = 0xa1b2_c3d4;
/// Link type of Ethernet II frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Link type of bare IPv4/IPv6 packets.
pub const LINKTYPE_RAW: u32 = 101;
/// Snapshot length written in the file header; longer frames are truncated.
pub const SNAPLEN: u32 = 262_144;
/// Length of the pcap file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Length of a pcap record header.
pub const RECORD_HEADER_LEN: usize = 16;

/// When the writer is flushed; see the [module documentation](self#flush-policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flush {
    /// After every record.
    #[default]
    EachRecord,
    /// After every this many records (0 behaves as 1).
    Every(u32),
    /// Only when [`PcapLink::flush`] is called.
    Manual,
}

/// Where record timestamps come from.
#[derive(Default)]
pub enum PcapClock {
    /// `SystemTime::now()`, as time since the Unix epoch.
    #[default]
    System,
    /// A time the caller sets with [`PcapLink::set_time`] (since the Unix epoch, or any
    /// epoch the caller likes, e.g. the simulator's zero).
    Manual(Duration),
    /// A closure returning the time since the epoch.
    Custom(Box<dyn FnMut() -> Duration + Send>),
}

impl fmt::Debug for PcapClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcapClock::System => f.write_str("System"),
            PcapClock::Manual(t) => f.debug_tuple("Manual").field(t).finish(),
            PcapClock::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl PcapClock {
    fn now(&mut self) -> Duration {
        match self {
            PcapClock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
            PcapClock::Manual(t) => *t,
            PcapClock::Custom(f) => f(),
        }
    }
}

/// Configuration of a [`PcapLink`].
#[derive(Debug, Default)]
pub struct PcapConfig {
    /// The wrapped link's own address ([`Medium::Udp`] only): the source of what it
    /// transmits, the destination of what it receives when [`RxMeta::dst`] is `None`.
    pub local: Option<UdpAddr>,
    /// Destination of transmitted payloads whose [`TxMeta::dst`] is `None` (a
    /// connected socket; [`Medium::Udp`] only).
    pub peer: Option<UdpAddr>,
    /// When to flush the writer.
    pub flush: Flush,
    /// Timestamp source.
    pub clock: PcapClock,
}

impl PcapConfig {
    /// Defaults with the link's own address (what a [`Medium::Udp`] link needs).
    pub fn local(local: UdpAddr) -> Self {
        PcapConfig {
            local: Some(local),
            ..Self::default()
        }
    }
}

/// What a [`PcapLink`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PcapStats {
    /// Records of received frames written.
    pub rx_records: u64,
    /// Records of transmitted frames written.
    pub tx_records: u64,
    /// Bytes written, file header included.
    pub bytes: u64,
    /// Frames not recorded: after a write error, or a UDP payload too long for IPv4.
    pub failed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Rx,
    Tx,
}

const UNSPECIFIED: UdpAddr = UdpAddr::new(Ipv4Address::UNSPECIFIED, 0);

/// The writing half, borrowed by the tokens alongside the inner link's token.
struct Recorder<W> {
    writer: W,
    medium: Medium,
    local: Option<UdpAddr>,
    peer: Option<UdpAddr>,
    flush: Flush,
    clock: PcapClock,
    /// One record: header and frame (IPv4/UDP headers synthesised on UDP links).
    record: Vec<u8>,
    since_flush: u32,
    stats: PcapStats,
    error: Option<io::Error>,
}

impl<W: Write> Recorder<W> {
    fn linktype(&self) -> u32 {
        match self.medium {
            Medium::Ethernet => LINKTYPE_ETHERNET,
            Medium::Udp => LINKTYPE_RAW,
        }
    }

    fn write_header(&mut self) -> io::Result<()> {
        let mut h = [0u8; FILE_HEADER_LEN];
        h[0..4].copy_from_slice(&PCAP_MAGIC.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay 0.
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&self.linktype().to_le_bytes());
        self.writer.write_all(&h)?;
        if self.flush != Flush::Manual {
            self.writer.flush()?;
        }
        self.stats.bytes += FILE_HEADER_LEN as u64;
        Ok(())
    }

    fn rx(&mut self, meta: RxMeta, frame: &[u8]) {
        let src = meta.src.unwrap_or(UNSPECIFIED);
        let dst = meta.dst.or(self.local).unwrap_or(UNSPECIFIED);
        self.record(Direction::Rx, src, dst, frame);
    }

    fn tx(&mut self, meta: TxMeta, frame: &[u8]) {
        let src = self.local.unwrap_or(UNSPECIFIED);
        let dst = meta.dst.or(self.peer).unwrap_or(UNSPECIFIED);
        self.record(Direction::Tx, src, dst, frame);
    }

    /// Assemble the record in `self.record` (no allocation once it has grown to the
    /// link's MTU, which [`PcapLink::new`] reserves) and write it.
    fn record(&mut self, dir: Direction, src: UdpAddr, dst: UdpAddr, frame: &[u8]) {
        if self.error.is_some() {
            self.stats.failed += 1;
            return;
        }
        let orig_len = match self.medium {
            Medium::Ethernet => {
                let incl = frame.len().min(SNAPLEN as usize);
                self.record.clear();
                self.record.resize(RECORD_HEADER_LEN, 0);
                self.record
                    .extend_from_slice(frame.get(..incl).unwrap_or(frame));
                frame.len()
            }
            Medium::Udp => {
                // Emit Ethernet/IPv4/UDP so that the IPv4 header starts right after the
                // record header: the Ethernet header lands on (and is then overwritten
                // by) the record header's bytes.
                let eth_at = RECORD_HEADER_LEN - ETH_HEADER_LEN;
                self.record.clear();
                self.record
                    .resize(eth_at + ETH_IPV4_UDP_HEADER_LEN + frame.len(), 0);
                let repr = UdpFrameRepr {
                    src_mac: EthernetAddress([0; 6]),
                    dst_mac: EthernetAddress([0; 6]),
                    src,
                    dst,
                    ttl: wire::frame::DEFAULT_TTL,
                };
                let caps = ChecksumCapabilities::default();
                let emitted = self
                    .record
                    .get_mut(eth_at..)
                    .map(|buf| emit_udp_ipv4_ethernet(buf, &repr, frame, &caps));
                let Some(Ok(eth_len)) = emitted else {
                    self.stats.failed += 1;
                    return;
                };
                let ip_len = eth_len - ETH_HEADER_LEN;
                self.record
                    .truncate(RECORD_HEADER_LEN + ip_len.min(SNAPLEN as usize));
                ip_len
            }
        };
        let ts = self.clock.now();
        let incl_len = self.record.len() - RECORD_HEADER_LEN;
        let mut h = [0u8; RECORD_HEADER_LEN];
        // Classic pcap seconds are 32 bits: good until 2106.
        h[0..4].copy_from_slice(&(ts.as_secs() as u32).to_le_bytes());
        h[4..8].copy_from_slice(&ts.subsec_micros().to_le_bytes());
        h[8..12].copy_from_slice(&(incl_len as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(orig_len as u32).to_le_bytes());
        if let Some(head) = self.record.get_mut(..RECORD_HEADER_LEN) {
            head.copy_from_slice(&h);
        }
        if let Err(e) = self.write_record() {
            self.error = Some(e);
            self.stats.failed += 1;
            return;
        }
        self.stats.bytes += self.record.len() as u64;
        match dir {
            Direction::Rx => self.stats.rx_records += 1,
            Direction::Tx => self.stats.tx_records += 1,
        }
    }

    fn write_record(&mut self) -> io::Result<()> {
        self.writer.write_all(&self.record)?;
        self.since_flush += 1;
        let due = match self.flush {
            Flush::EachRecord => true,
            Flush::Every(n) => self.since_flush >= n.max(1),
            Flush::Manual => false,
        };
        if due {
            self.since_flush = 0;
            self.writer.flush()?;
        }
        Ok(())
    }
}

/// A link wrapper recording every frame to a pcap file; see the
/// [module documentation](self).
pub struct PcapLink<L, W: Write> {
    inner: L,
    rec: Recorder<W>,
}

impl<L: fmt::Debug, W: Write> fmt::Debug for PcapLink<L, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapLink")
            .field("inner", &self.inner)
            .field("medium", &self.rec.medium)
            .field("stats", &self.rec.stats)
            .field("error", &self.rec.error)
            .finish_non_exhaustive()
    }
}

impl<L: Link, W: Write> PcapLink<L, W> {
    /// Wrap `inner` and write the pcap file header to `writer`. The medium, and so the
    /// file's link type, is read from the inner link's capabilities now.
    pub fn new(inner: L, writer: W, config: PcapConfig) -> io::Result<Self> {
        let caps = inner.capabilities();
        let mut rec = Recorder {
            writer,
            medium: caps.medium,
            local: config.local,
            peer: config.peer,
            flush: config.flush,
            clock: config.clock,
            record: Vec::with_capacity(
                RECORD_HEADER_LEN + ETH_IPV4_UDP_HEADER_LEN + caps.mtu.min(SNAPLEN as usize),
            ),
            since_flush: 0,
            stats: PcapStats::default(),
            error: None,
        };
        rec.write_header()?;
        Ok(PcapLink { inner, rec })
    }
}

impl<L, W: Write> PcapLink<L, W> {
    /// The file's link type ([`LINKTYPE_ETHERNET`] or [`LINKTYPE_RAW`]).
    pub fn linktype(&self) -> u32 {
        self.rec.linktype()
    }

    /// What was written so far.
    pub fn stats(&self) -> PcapStats {
        self.rec.stats
    }

    /// Flush the writer (whatever the policy).
    pub fn flush(&mut self) -> io::Result<()> {
        self.rec.since_flush = 0;
        self.rec.writer.flush()
    }

    /// The first write error, if recording stopped because of one; taking it resumes
    /// recording (the file may then have a damaged record where the error struck).
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.rec.error.take()
    }

    /// Set the timestamp of the next records, switching to [`PcapClock::Manual`].
    pub fn set_time(&mut self, since_epoch: Duration) {
        self.rec.clock = PcapClock::Manual(since_epoch);
    }

    /// The wrapped link.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The wrapped link, mutably (frames moved through it directly are not recorded).
    pub fn inner_mut(&mut self) -> &mut L {
        &mut self.inner
    }

    /// The writer.
    pub fn writer(&self) -> &W {
        &self.rec.writer
    }

    /// The writer, mutably.
    pub fn writer_mut(&mut self) -> &mut W {
        &mut self.rec.writer
    }

    /// Unwrap into the link and the writer (not flushed: call [`flush`](Self::flush)
    /// first under [`Flush::Manual`] if the writer does not flush on drop).
    pub fn into_parts(self) -> (L, W) {
        (self.inner, self.rec.writer)
    }
}

/// Receive token of a [`PcapLink`].
pub struct PcapRxToken<'a, L: Link + 'a, W: Write + 'a> {
    tok: L::RxToken<'a>,
    rec: &'a mut Recorder<W>,
}

impl<'a, L: Link + 'a, W: Write + 'a> fmt::Debug for PcapRxToken<'a, L, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapRxToken").finish_non_exhaustive()
    }
}

impl<'a, L: Link + 'a, W: Write + 'a> RxToken for PcapRxToken<'a, L, W> {
    fn meta(&self) -> RxMeta {
        self.tok.meta()
    }

    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let PcapRxToken { tok, rec } = self;
        let meta = tok.meta();
        tok.consume(|buf| {
            rec.rx(meta, buf);
            f(buf)
        })
    }
}

/// Transmit token of a [`PcapLink`]: the stack writes into the inner link's buffer.
pub struct PcapTxToken<'a, L: Link + 'a, W: Write + 'a> {
    tok: L::TxToken<'a>,
    rec: &'a mut Recorder<W>,
}

impl<'a, L: Link + 'a, W: Write + 'a> fmt::Debug for PcapTxToken<'a, L, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapTxToken").finish_non_exhaustive()
    }
}

impl<'a, L: Link + 'a, W: Write + 'a> TxToken for PcapTxToken<'a, L, W> {
    fn consume_with<R, F: FnOnce(&mut [u8]) -> (TxMeta, R)>(self, max_len: usize, f: F) -> R {
        let PcapTxToken { tok, rec } = self;
        tok.consume_with(max_len, |buf| {
            let (meta, r) = f(buf);
            if meta.len != 0
                && let Some(frame) = buf.get(..meta.len)
            {
                rec.tx(meta, frame);
            }
            (meta, r)
        })
    }
}

impl<L: Link, W: Write> Link for PcapLink<L, W> {
    type RxToken<'a>
        = PcapRxToken<'a, L, W>
    where
        Self: 'a;
    type TxToken<'a>
        = PcapTxToken<'a, L, W>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self) -> Option<Self::RxToken<'_>> {
        let tok = self.inner.receive()?;
        Some(PcapRxToken {
            tok,
            rec: &mut self.rec,
        })
    }

    fn transmit(&mut self) -> Option<Self::TxToken<'_>> {
        let tok = self.inner.transmit()?;
        Some(PcapTxToken {
            tok,
            rec: &mut self.rec,
        })
    }

    /// The inner link's burst receive (a poll-mode driver keeps its native burst).
    fn receive_burst<F: FnMut(RxMeta, &[u8])>(&mut self, max: usize, mut f: F) -> usize {
        let PcapLink { inner, rec } = self;
        inner.receive_burst(max, |meta, buf| {
            rec.rx(meta, buf);
            f(meta, buf)
        })
    }

    /// The inner link's burst transmit (a poll-mode driver keeps its native burst).
    fn transmit_burst<F: FnMut(&mut [u8]) -> Option<TxMeta>>(
        &mut self,
        max: usize,
        mut f: F,
    ) -> usize {
        let PcapLink { inner, rec } = self;
        inner.transmit_burst(max, |buf| {
            let meta = f(buf)?;
            if meta.len != 0
                && let Some(frame) = buf.get(..meta.len)
            {
                rec.tx(meta, frame);
            }
            Some(meta)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::frame::{Checksum, parse_eth_ipv4_udp};
    use wire::link::Loopback;

    type Lo = Loopback<8, 1514>;

    fn addr(last: u8, port: u16) -> UdpAddr {
        UdpAddr::new(Ipv4Address::new(10, 0, 0, last), port)
    }

    fn u16le(b: &[u8], at: usize) -> u16 {
        u16::from_le_bytes([b[at], b[at + 1]])
    }
    fn u32le(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    struct Record {
        ts: (u32, u32),
        orig_len: u32,
        data: Vec<u8>,
    }

    /// Parse a classic pcap file: its link type and records.
    fn parse(file: &[u8]) -> (u32, Vec<Record>) {
        assert!(file.len() >= FILE_HEADER_LEN);
        assert_eq!(&file[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "magic");
        assert_eq!((u16le(file, 4), u16le(file, 6)), (2, 4), "version");
        assert_eq!(u32le(file, 16), SNAPLEN);
        let linktype = u32le(file, 20);
        let mut at = FILE_HEADER_LEN;
        let mut recs = Vec::new();
        while at < file.len() {
            assert!(
                file.len() - at >= RECORD_HEADER_LEN,
                "truncated record header"
            );
            let incl = u32le(file, at + 8) as usize;
            let rec = Record {
                ts: (u32le(file, at), u32le(file, at + 4)),
                orig_len: u32le(file, at + 12),
                data: file[at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + incl].to_vec(),
            };
            assert!(rec.ts.1 < 1_000_000);
            recs.push(rec);
            at += RECORD_HEADER_LEN + incl;
        }
        assert_eq!(at, file.len());
        (linktype, recs)
    }

    fn eth_frame(i: u16) -> Vec<u8> {
        let repr = UdpFrameRepr {
            src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
            src: addr(1, 5000 + i),
            dst: addr(2, 6000),
            ttl: 64,
        };
        let payload: Vec<u8> = (0..20 + i).map(|b| b as u8).collect();
        let mut buf = vec![0; 1514];
        let n = emit_udp_ipv4_ethernet(&mut buf, &repr, &payload, &ChecksumCapabilities::default())
            .unwrap();
        buf.truncate(n);
        buf
    }

    /// An Ethernet capture through a looped link: each frame recorded on transmit and
    /// again on receive, byte for byte.
    #[test]
    fn ethernet_capture() {
        let lo = Lo::new_looped(Medium::Ethernet, None);
        let mut link = PcapLink::new(lo, Vec::new(), PcapConfig::default()).unwrap();
        assert_eq!(link.linktype(), LINKTYPE_ETHERNET);
        let frames: Vec<Vec<u8>> = (0..5).map(eth_frame).collect();
        for (i, f) in frames.iter().enumerate() {
            link.set_time(Duration::from_micros(1_000_000 * i as u64 + 250));
            let tok = link.transmit().unwrap();
            tok.consume(f.len(), |buf| buf.copy_from_slice(f));
            let tok = link.receive().unwrap();
            assert_eq!(tok.consume(|buf| buf.to_vec()), *f);
        }
        // Bursts are recorded too.
        assert_eq!(
            link.transmit_burst(2, |buf| {
                buf[..frames[0].len()].copy_from_slice(&frames[0]);
                Some(TxMeta::len(frames[0].len()))
            }),
            2
        );
        let mut got = 0;
        link.receive_burst(8, |_, buf| {
            assert_eq!(buf, &frames[0][..]);
            got += 1;
        });
        assert_eq!(got, 2);
        let stats = link.stats();
        assert_eq!(
            (stats.rx_records, stats.tx_records, stats.failed),
            (7, 7, 0)
        );
        let (_, file) = link.into_parts();
        assert_eq!(stats.bytes, file.len() as u64);
        let (lt, recs) = parse(&file);
        assert_eq!(lt, LINKTYPE_ETHERNET);
        assert_eq!(recs.len(), 14);
        for (i, f) in frames.iter().enumerate() {
            for r in &recs[2 * i..2 * i + 2] {
                assert_eq!(r.data, *f);
                assert_eq!(r.orig_len as usize, f.len());
                assert_eq!(r.ts, (i as u32, 250));
            }
        }
        for r in &recs[10..] {
            assert_eq!(r.data, frames[0]);
        }
    }

    /// Parse a synthesised IPv4/UDP record: (src, dst, payload), checksums verified.
    fn parse_raw(data: &[u8]) -> (UdpAddr, UdpAddr, Vec<u8>) {
        // Re-use the wire parser by prepending an Ethernet header.
        let mut eth = vec![0u8; 12];
        eth.extend_from_slice(&[0x08, 0x00]);
        eth.extend_from_slice(data);
        let mut caps = ChecksumCapabilities::ignored();
        caps.ipv4 = Checksum::Both;
        caps.udp = Checksum::Both;
        let f = parse_eth_ipv4_udp(&eth, &caps).unwrap();
        (f.repr.src, f.repr.dst, eth[f.payload].to_vec())
    }

    /// A UDP capture: payloads wrapped in IPv4/UDP with the metadata's addresses.
    #[test]
    fn udp_capture() {
        let (me, peer, other) = (addr(1, 7000), addr(2, 7001), addr(3, 7002));
        let lo = Lo::new(Medium::Udp, Some(me));
        let mut config = PcapConfig::local(me);
        config.peer = Some(other);
        config.flush = Flush::Every(3);
        let mut link = PcapLink::new(lo, Vec::new(), config).unwrap();
        assert_eq!(link.linktype(), LINKTYPE_RAW);
        // Transmit one addressed datagram and one for the connected peer.
        let tok = link.transmit().unwrap();
        tok.consume_with(1472, |buf| {
            buf[..5].copy_from_slice(b"hello");
            (TxMeta::to(5, peer), ())
        });
        let tok = link.transmit().unwrap();
        tok.consume(3, |buf| buf.copy_from_slice(b"abc"));
        assert_eq!(
            link.inner_mut().pop_tx(|d, b| (d, b.to_vec())),
            Some((Some(peer), b"hello".to_vec()))
        );
        // Receive one from the peer.
        assert!(link.inner_mut().inject(b"world!", Some(peer)));
        let tok = link.receive().unwrap();
        assert_eq!(tok.meta().src, Some(peer));
        tok.consume(|b| assert_eq!(b, b"world!"));
        link.flush().unwrap();
        let (_, file) = link.into_parts();
        let (lt, recs) = parse(&file);
        assert_eq!(lt, LINKTYPE_RAW);
        assert_eq!(recs.len(), 3);
        let want = [
            (me, peer, &b"hello"[..]),
            (me, other, &b"abc"[..]),
            (peer, me, &b"world!"[..]),
        ];
        for (r, (src, dst, payload)) in recs.iter().zip(want) {
            assert_eq!(r.orig_len as usize, r.data.len());
            assert_eq!(r.data.len(), 28 + payload.len());
            assert_eq!(parse_raw(&r.data), (src, dst, payload.to_vec()));
        }
    }

    /// The wrappers compose: a capture under a fault injector records exactly the
    /// frames the faults let through.
    #[test]
    fn capture_below_fault_injector() {
        use crate::fault::{FaultConfig, FaultLink};
        let lo = Lo::new(Medium::Ethernet, None);
        let pcap = PcapLink::new(lo, Vec::new(), PcapConfig::default()).unwrap();
        let mut config = FaultConfig::new(11);
        config.tx.loss = 0.5;
        let mut link = FaultLink::new(pcap, config);
        let f = eth_frame(1);
        for _ in 0..40 {
            let tok = link.transmit().unwrap();
            tok.consume(f.len(), |buf| buf.copy_from_slice(&f));
            link.inner_mut().inner_mut().pop_tx(|_, _| ());
        }
        let faults = link.stats().tx;
        assert!(faults.dropped > 0 && faults.delivered > 0);
        let (_, file) = link.into_inner().into_parts();
        let (_, recs) = parse(&file);
        assert_eq!(recs.len() as u64, faults.delivered);
        assert!(recs.iter().all(|r| r.data == f));
    }

    /// A writer that fails after `ok` writes.
    struct Failing {
        ok: usize,
    }
    impl Write for Failing {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.ok == 0 {
                return Err(io::Error::other("disk full"));
            }
            self.ok -= 1;
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_errors_stop_recording_not_traffic() {
        let lo = Lo::new_looped(Medium::Ethernet, None);
        let mut link = PcapLink::new(lo, Failing { ok: 2 }, PcapConfig::default()).unwrap();
        let f = eth_frame(0);
        for _ in 0..3 {
            let tok = link.transmit().unwrap();
            tok.consume(f.len(), |buf| buf.copy_from_slice(&f));
        }
        assert_eq!(link.inner().rx_len(), 3);
        let s = link.stats();
        assert_eq!((s.tx_records, s.failed), (1, 2));
        assert!(link.take_error().is_some());
        assert!(link.take_error().is_none());
    }

    /// tshark, if installed, decodes the UDP capture.
    #[test]
    fn tshark_reads_udp_capture() {
        let have = std::process::Command::new("sh")
            .args(["-c", "command -v tshark"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !have {
            eprintln!("tshark not installed; skipping");
            return;
        }
        let path = std::env::temp_dir().join(format!("hosted-pcap-{}.pcap", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        let me = addr(1, 7000);
        let lo = Lo::new(Medium::Udp, Some(me));
        let mut link = PcapLink::new(lo, io::BufWriter::new(file), PcapConfig::local(me)).unwrap();
        for port in [4001u16, 4002, 4003] {
            assert!(link.inner_mut().inject(b"ping", Some(addr(2, port))));
            link.receive().unwrap().consume(|_| ());
        }
        drop(link);
        let out = std::process::Command::new("tshark")
            .arg("-r")
            .arg(&path)
            .args(["-T", "fields", "-e", "udp.srcport"])
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ports: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(ports, ["4001", "4002", "4003"]);
    }
}
