//! Domain, endpoint and DGRAM data-path tests: two domains on in-memory UDP links.

extern crate std;

use std::boxed::Box;
use std::vec;
use std::vec::Vec;

use wire::link::{Loopback, Medium, UdpAddr};
use wire::packet::{DgramRepr, Packet};

use super::*;
use crate::av::{AvAddrs, AvAttr};
use crate::cntr::CntrAttr;
use crate::cq::CqAttr;
use crate::cq::{CqContextEntry, CqDataEntry, CqFormat, CqMsgEntry, CqTaggedEntry};
use crate::ep::{EpOpt, FI_OPT_ENDPOINT};
use crate::flags::{FI_ADDR_UNSPEC, FiAddr};
use crate::info::EpType;
use crate::info::default_info;
use crate::info::{FabricAttr, ProviderConfig};
use crate::mem::IoVec;
use crate::mem::SliceMemory;
use crate::net::NetConfig;
use crate::storage::test_storage::VecStorage;
use wire::packet::{Body, Header, Repr};

const MTU: usize = 1472;
type Link = Loopback<32, { MTU + 42 }>;

struct Host {
    _fabric: Fabric<VecStorage>,
    dom: Domain<VecStorage>,
    link: Box<Link>,
    mem: Vec<u8>,
    ep: EpHandle<VecStorage>,
    tx_cq: CqHandle<VecStorage>,
    rx_cq: CqHandle<VecStorage>,
    av: AvHandle<VecStorage>,
    send_cntr: CntrHandle,
    recv_cntr: CntrHandle,
}

const BASE: u64 = 0x10_000;

fn cfg() -> ProviderConfig {
    ProviderConfig {
        tx_size: 8,
        rx_size: 8,
        ep_cnt: 4,
        cq_cnt: 4,
        cntr_cnt: 4,
        mr_cnt: 4,
        inject_size: 64,
        ..ProviderConfig::DEFAULT
    }
}

fn dgram_info() -> Info {
    let mut info = default_info(EpType::Dgram, None, &cfg());
    info.caps |= Flags::SOURCE;
    info
}

fn open_domain(ip: [u8; 4]) -> (Fabric<VecStorage>, Domain<VecStorage>) {
    open_domain_on(ip, Medium::Udp)
}

fn net_config(ip: [u8; 4], medium: Medium) -> NetConfig {
    match medium {
        Medium::Udp => NetConfig::new(&wire::link::Capabilities::new(medium, MTU), ip, 7000),
        Medium::Ethernet => {
            let caps = wire::link::Capabilities::new(medium, MTU + 42);
            let mac = [2, 0, 0, 0, 0, ip[3]];
            NetConfig::new(&caps, ip, 7000).with_ethernet(mac, 24, None)
        }
    }
}

fn open_domain_on(ip: [u8; 4], medium: Medium) -> (Fabric<VecStorage>, Domain<VecStorage>) {
    let info = dgram_info();
    let mut fabric = Fabric::open(&FabricAttr::default(), 1, VecStorage, 2).unwrap();
    let dc = DomainConfig {
        arp_entries: 4,
        ..DomainConfig::new(net_config(ip, medium), cfg(), 9)
    };
    let dom = Domain::open(&mut fabric, &info, dc, VecStorage, 2).unwrap();
    (fabric, dom)
}

fn host(ip: [u8; 4], format: CqFormat, selective: bool) -> Host {
    host_on(ip, format, selective, Medium::Udp)
}

fn host_on(ip: [u8; 4], format: CqFormat, selective: bool, medium: Medium) -> Host {
    let (fabric, mut dom) = open_domain_on(ip, medium);
    let cq_attr = CqAttr {
        format,
        size: 16,
        ..CqAttr::default()
    };
    let tx_cq = dom.cq_open(&cq_attr, 10).unwrap();
    let rx_cq = dom.cq_open(&cq_attr, 11).unwrap();
    let av = dom
        .av_open(
            &mut AvAttr {
                count: 8,
                ..AvAttr::default()
            },
            12,
        )
        .unwrap();
    let send_cntr = dom.cntr_open(&CntrAttr::default(), 13).unwrap();
    let recv_cntr = dom.cntr_open(&CntrAttr::default(), 14).unwrap();
    let ep = dom.ep_open(&dgram_info(), 15).unwrap();
    let sel = if selective {
        Flags::SELECTIVE_COMPLETION
    } else {
        Flags::empty()
    };
    dom.ep_bind(ep, BindTarget::Cq(tx_cq), Flags::TRANSMIT | sel)
        .unwrap();
    dom.ep_bind(ep, BindTarget::Cq(rx_cq), Flags::RECV | sel)
        .unwrap();
    dom.ep_bind(ep, BindTarget::Av(av), Flags::empty()).unwrap();
    dom.ep_bind(ep, BindTarget::Cntr(send_cntr), Flags::SEND)
        .unwrap();
    dom.ep_bind(ep, BindTarget::Cntr(recv_cntr), Flags::RECV)
        .unwrap();
    dom.ep_enable(ep).unwrap();
    let local = (medium == Medium::Udp).then(|| UdpAddr::new(ip.into(), 7000));
    let link = Box::new(Link::new(medium, local));
    Host {
        _fabric: fabric,
        dom,
        link,
        mem: vec![0; 4096],
        ep,
        tx_cq,
        rx_cq,
        av,
        send_cntr,
        recv_cntr,
    }
}

impl Host {
    fn insert(&mut self, peer: &Host) -> FiAddr {
        let addr = peer.dom.ep_addr(peer.ep).unwrap();
        let mut out = [0; 1];
        let n = self
            .dom
            .av_mut(self.av)
            .unwrap()
            .insert(AvAddrs::Ep(&[addr]), Some(&mut out), Flags::empty(), None)
            .unwrap();
        assert_eq!(n, 1);
        out[0]
    }

    fn progress(&mut self) -> ProgressReport {
        self.progress_at(Instant::ZERO)
    }

    fn progress_at(&mut self, now: Instant) -> ProgressReport {
        let mut mem = SliceMemory::new(BASE, &mut self.mem);
        self.dom.progress(now, &mut *self.link, &mut mem).unwrap()
    }

    fn put(&mut self, off: u64, data: &[u8]) {
        self.mem[off as usize..off as usize + data.len()].copy_from_slice(data);
    }

    fn get(&self, off: u64, len: usize) -> &[u8] {
        &self.mem[off as usize..off as usize + len]
    }
}

/// Moves everything `a` transmitted to `b` and lets `b` process it.
fn pump(a: &mut Host, b: &mut Host) {
    a.progress();
    a.link.transfer_to(&mut *b.link);
    b.progress();
}

fn pair(format: CqFormat) -> (Host, Host, FiAddr, FiAddr) {
    let mut a = host([10, 0, 0, 1], format, false);
    let mut b = host([10, 0, 0, 2], format, false);
    let b_at_a = a.insert(&b);
    let a_at_b = b.insert(&a);
    (a, b, b_at_a, a_at_b)
}

#[test]
fn dgram_exchange_with_every_cq_format_and_counters() {
    for format in [
        CqFormat::Context,
        CqFormat::Msg,
        CqFormat::Data,
        CqFormat::Tagged,
    ] {
        let (mut a, mut b, b_at_a, a_at_b) = pair(format);
        b.dom
            .recv(b.ep, IoVec::new(BASE + 100, 64), FI_ADDR_UNSPEC, 0xB0)
            .unwrap();
        a.put(0, b"hello, dgram");
        let mem = SliceMemory::new(BASE, &mut a.mem);
        a.dom
            .senddata(a.ep, &mem, IoVec::new(BASE, 12), 0xfeed, b_at_a, 0xA0)
            .unwrap();
        pump(&mut a, &mut b);
        assert_eq!(b.get(100, 12), b"hello, dgram");
        let rx = b.dom.cq_mut(b.rx_cq).unwrap();
        let recv_flags = (Flags::RECV | Flags::MSG | Flags::REMOTE_CQ_DATA).bits();
        match format {
            CqFormat::Context => {
                let mut e = [CqContextEntry::default(); 2];
                assert_eq!(rx.read(&mut e), Ok(1));
                assert_eq!(e[0].op_context, 0xB0);
            }
            CqFormat::Msg => {
                let mut e = [CqMsgEntry::default(); 2];
                assert_eq!(rx.read(&mut e), Ok(1));
                assert_eq!(
                    (e[0].op_context, e[0].flags, e[0].len),
                    (0xB0, recv_flags, 12)
                );
            }
            CqFormat::Data => {
                let mut e = [CqDataEntry::default(); 2];
                let mut src = [0; 2];
                assert_eq!(rx.readfrom(&mut e, &mut src), Ok(1));
                assert_eq!(
                    (e[0].op_context, e[0].flags, e[0].len, e[0].data),
                    (0xB0, recv_flags, 12, 0xfeed)
                );
                assert_eq!(src[0], a_at_b, "FI_SOURCE names the sender's AV entry");
            }
            _ => {
                let mut e = [CqTaggedEntry::default(); 2];
                assert_eq!(rx.read(&mut e), Ok(1));
                assert_eq!((e[0].op_context, e[0].len, e[0].data), (0xB0, 12, 0xfeed));
            }
        }
        assert_eq!(
            rx.read(&mut [CqContextEntry::default()])
                .err()
                .filter(|_| format == CqFormat::Context),
            match format {
                CqFormat::Context => Some(Errno::EAGAIN),
                _ => None,
            }
        );
        let mut e = [CqContextEntry::default(); 1];
        if format == CqFormat::Context {
            assert_eq!(a.dom.cq_mut(a.tx_cq).unwrap().read(&mut e), Ok(1));
            assert_eq!(e[0].op_context, 0xA0);
        } else {
            assert_eq!(
                a.dom.cq_mut(a.tx_cq).unwrap().read(&mut e),
                Err(Errno::EINVAL),
                "wrong struct for the format"
            );
        }
        assert_eq!(a.dom.cntr(a.send_cntr).unwrap().value(), 1);
        assert_eq!(b.dom.cntr(b.recv_cntr).unwrap().value(), 1);
        assert_eq!(b.dom.ep(b.ep).unwrap().stats().rx_msgs, 1);
    }
}

#[test]
fn sendv_recvv_scatter_gather() {
    let (mut a, mut b, b_at_a, _) = pair(CqFormat::Msg);
    b.dom
        .recvv(
            b.ep,
            &[IoVec::new(BASE + 200, 3), IoVec::new(BASE + 300, 10)],
            FI_ADDR_UNSPEC,
            1,
        )
        .unwrap();
    a.put(0, b"abc");
    a.put(50, b"defgh");
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .sendv(
            a.ep,
            &mem,
            &[IoVec::new(BASE, 3), IoVec::new(BASE + 50, 5)],
            b_at_a,
            2,
        )
        .unwrap();
    pump(&mut a, &mut b);
    assert_eq!(b.get(200, 3), b"abc");
    assert_eq!(b.get(300, 5), b"defgh");
    let mut e = [CqMsgEntry::default(); 1];
    assert_eq!(b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e), Ok(1));
    assert_eq!(e[0].len, 8);
}

#[test]
fn inject_copies_at_post_and_writes_no_completion() {
    let (mut a, mut b, b_at_a, _) = pair(CqFormat::Msg);
    b.dom
        .recv(b.ep, IoVec::new(BASE, 64), FI_ADDR_UNSPEC, 1)
        .unwrap();
    b.dom
        .recv(b.ep, IoVec::new(BASE + 64, 64), FI_ADDR_UNSPEC, 2)
        .unwrap();
    a.put(0, b"first");
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .inject(a.ep, &mem, IoVec::new(BASE, 5), b_at_a)
        .unwrap();
    a.put(0, b"later");
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .injectdata(a.ep, &mem, IoVec::new(BASE, 5), 77, b_at_a)
        .unwrap();
    assert_eq!(
        a.dom.inject(a.ep, &mem, IoVec::new(BASE, 65), b_at_a),
        Err(Errno::EMSGSIZE),
        "beyond inject_size"
    );
    pump(&mut a, &mut b);
    assert_eq!(b.get(0, 5), b"first", "data was taken when inject returned");
    assert_eq!(b.get(64, 5), b"later");
    assert_eq!(
        a.dom
            .cq_mut(a.tx_cq)
            .unwrap()
            .read(&mut [CqMsgEntry::default(); 4]),
        Err(Errno::EAGAIN)
    );
    assert_eq!(
        a.dom.cntr(a.send_cntr).unwrap().value(),
        2,
        "counters still count injects"
    );
    let mut e = [CqMsgEntry::default(); 4];
    assert_eq!(b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e), Ok(2));
    assert_eq!(
        e[1].flags,
        (Flags::RECV | Flags::MSG | Flags::REMOTE_CQ_DATA).bits()
    );
}

#[test]
fn selective_completion_and_counters() {
    let mut a = host([10, 0, 0, 1], CqFormat::Msg, true);
    let mut b = host([10, 0, 0, 2], CqFormat::Msg, true);
    let b_at_a = a.insert(&b);
    b.dom
        .recv(b.ep, IoVec::new(BASE, 16), FI_ADDR_UNSPEC, 1)
        .unwrap();
    let buf = [IoVec::new(BASE, 16)];
    b.dom
        .recvmsg(
            b.ep,
            &MsgArgs::new(&buf, FI_ADDR_UNSPEC, 2),
            Flags::COMPLETION,
        )
        .unwrap();
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .send(a.ep, &mem, IoVec::new(BASE, 4), b_at_a, 3)
        .unwrap();
    let one = [IoVec::new(BASE, 4)];
    a.dom
        .sendmsg(
            a.ep,
            &mem,
            &MsgArgs::new(&one, b_at_a, 4),
            Flags::COMPLETION,
        )
        .unwrap();
    pump(&mut a, &mut b);
    let mut e = [CqMsgEntry::default(); 4];
    assert_eq!(a.dom.cq_mut(a.tx_cq).unwrap().read(&mut e), Ok(1));
    assert_eq!(e[0].op_context, 4, "only the FI_COMPLETION send reports");
    assert_eq!(b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e), Ok(1));
    assert_eq!(e[0].op_context, 2);
    assert_eq!(a.dom.cntr(a.send_cntr).unwrap().value(), 2);
    assert_eq!(b.dom.cntr(b.recv_cntr).unwrap().value(), 2);
}

#[test]
fn multi_recv_packs_messages_and_releases_the_buffer() {
    let (mut a, mut b, b_at_a, _) = pair(CqFormat::Data);
    b.dom
        .ep_mut(b.ep)
        .unwrap()
        .setopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv, 64)
        .unwrap();
    let buf = [IoVec::new(BASE + 1000, 256)];
    b.dom
        .recvmsg(
            b.ep,
            &MsgArgs::new(&buf, FI_ADDR_UNSPEC, 9),
            Flags::MULTI_RECV,
        )
        .unwrap();
    for i in 0..4u8 {
        a.put(i as u64 * 60, &[i; 60]);
        let mem = SliceMemory::new(BASE, &mut a.mem);
        a.dom
            .send(
                a.ep,
                &mem,
                IoVec::new(BASE + i as u64 * 60, 60),
                b_at_a,
                100 + i as u64,
            )
            .unwrap();
    }
    pump(&mut a, &mut b);
    let mut e = [CqDataEntry::default(); 8];
    assert_eq!(b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e), Ok(4));
    for (i, x) in e[..4].iter().enumerate() {
        assert_eq!(x.op_context, 9);
        assert_eq!(x.len, 60);
        assert_eq!(
            x.buf,
            BASE + 1000 + 60 * i as u64,
            "messages packed back to back"
        );
        let last = i == 3;
        assert_eq!(
            x.flags & Flags::MULTI_RECV.bits() != 0,
            last,
            "only the release carries FI_MULTI_RECV"
        );
        assert_eq!(b.get(1000 + 60 * i as u64, 60), &[i as u8; 60]);
    }
    assert_eq!(b.dom.ep(b.ep).unwrap().rx_size_left(), 8, "buffer released");
}

#[test]
fn multi_recv_release_when_next_message_does_not_fit() {
    let (mut a, mut b, b_at_a, _) = pair(CqFormat::Data);
    b.dom
        .ep_mut(b.ep)
        .unwrap()
        .setopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv, 8)
        .unwrap();
    let buf = [IoVec::new(BASE + 1000, 100)];
    b.dom
        .recvmsg(
            b.ep,
            &MsgArgs::new(&buf, FI_ADDR_UNSPEC, 9),
            Flags::MULTI_RECV,
        )
        .unwrap();
    b.dom
        .recv(b.ep, IoVec::new(BASE + 2000, 100), FI_ADDR_UNSPEC, 10)
        .unwrap();
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .send(a.ep, &mem, IoVec::new(BASE, 60), b_at_a, 1)
        .unwrap();
    a.dom
        .send(a.ep, &mem, IoVec::new(BASE, 60), b_at_a, 2)
        .unwrap();
    pump(&mut a, &mut b);
    let mut e = [CqDataEntry::default(); 8];
    assert_eq!(b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e), Ok(3));
    assert_eq!((e[0].op_context, e[0].len), (9, 60));
    assert_eq!(
        (e[1].op_context, e[1].flags, e[1].len),
        (9, Flags::MULTI_RECV.bits(), 0),
        "release entry"
    );
    assert_eq!(
        (e[2].op_context, e[2].len),
        (10, 60),
        "the next receive took the message"
    );
}

#[test]
fn truncation_is_an_error_entry() {
    let (mut a, mut b, b_at_a, _) = pair(CqFormat::Msg);
    b.dom
        .recv(b.ep, IoVec::new(BASE, 4), FI_ADDR_UNSPEC, 5)
        .unwrap();
    a.put(0, b"0123456789");
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .send(a.ep, &mem, IoVec::new(BASE, 10), b_at_a, 1)
        .unwrap();
    pump(&mut a, &mut b);
    let cq = b.dom.cq_mut(b.rx_cq).unwrap();
    assert_eq!(cq.read(&mut [CqMsgEntry::default(); 1]), Err(Errno::EAVAIL));
    let err = cq
        .readerr(Flags::empty(), crate::info::API_VERSION, &mut [])
        .unwrap();
    assert_eq!(
        (err.err, err.op_context, err.len, err.olen),
        (Errno::ETRUNC.code(), 5, 4, 6)
    );
    assert_eq!(b.get(0, 4), b"0123");
    assert_eq!(b.get(4, 2), &[0, 0], "nothing written past the buffer");
    assert_eq!(b.dom.cntr(b.recv_cntr).unwrap().err_value(), 1);
}

#[test]
fn cancel_posted_receive() {
    let (_, mut b, _, _) = pair(CqFormat::Msg);
    b.dom
        .recv(b.ep, IoVec::new(BASE, 4), FI_ADDR_UNSPEC, 0x55)
        .unwrap();
    b.dom.ep_cancel(b.ep, 0x99).unwrap();
    assert_eq!(
        b.dom
            .cq_mut(b.rx_cq)
            .unwrap()
            .read(&mut [CqMsgEntry::default(); 1]),
        Err(Errno::EAGAIN),
        "nothing matched"
    );
    b.dom.ep_cancel(b.ep, 0x55).unwrap();
    let cq = b.dom.cq_mut(b.rx_cq).unwrap();
    let err = cq
        .readerr(Flags::empty(), crate::info::API_VERSION, &mut [])
        .unwrap();
    assert_eq!((err.err, err.op_context), (Errno::ECANCELED.code(), 0x55));
    assert_eq!(b.dom.ep(b.ep).unwrap().rx_size_left(), 8);
}

#[test]
fn cancel_queued_send() {
    let (mut a, _, b_at_a, _) = pair(CqFormat::Msg);
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .send(a.ep, &mem, IoVec::new(BASE, 4), b_at_a, 0x66)
        .unwrap();
    a.dom.ep_cancel(a.ep, 0x66).unwrap();
    assert_eq!(a.progress().tx, 0);
    let err = a
        .dom
        .cq_mut(a.tx_cq)
        .unwrap()
        .readerr(Flags::empty(), crate::info::API_VERSION, &mut [])
        .unwrap();
    assert_eq!((err.err, err.op_context), (Errno::ECANCELED.code(), 0x66));
    assert_eq!(a.dom.cntr(a.send_cntr).unwrap().err_value(), 1);
}

#[test]
fn datagrams_without_receive_or_endpoint_are_counted_and_dropped() {
    let (mut a, mut b, b_at_a, _) = pair(CqFormat::Msg);
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .send(a.ep, &mem, IoVec::new(BASE, 4), b_at_a, 1)
        .unwrap();
    pump(&mut a, &mut b);
    assert_eq!(b.dom.ep(b.ep).unwrap().stats().rx_no_buffer, 1);
    let src = Some(UdpAddr::new([10, 0, 0, 1].into(), 7000));
    assert!(b.link.inject(b"garbage that is not a packet", src));
    let mut pkt = [0u8; 64];
    let r = Repr {
        header: Header {
            src_ep: 0,
            dst_ep: 3,
            session: 0,
            seq: 0,
            crc: false,
            ack_req: false,
        },
        body: Body::Dgram(DgramRepr {
            cq_data: None,
            payload: b"x",
        }),
    };
    let n = r.emit(&mut Packet::new_unchecked(&mut pkt[..])).unwrap();
    assert!(b.link.inject(&pkt[..n], src));
    assert!(b.link.inject(&pkt[..n], None));
    b.progress();
    let st = b.dom.stats();
    assert_eq!((st.rx_malformed, st.rx_no_endpoint), (1, 1));
    let no_source = crate::net::DropReason::NoSource;
    assert_eq!(b.dom.net_stats().dropped(no_source), 1);
    // Every truncation of a valid datagram is refused without harm.
    for cut in 0..n {
        assert!(b.link.inject(&pkt[..cut], src) || cut == 0);
        b.progress();
    }
    assert_eq!(b.dom.ep(b.ep).unwrap().stats().rx_msgs, 0);
}

#[test]
fn posting_errors() {
    let (mut a, _, b_at_a, _) = pair(CqFormat::Msg);
    let mem = SliceMemory::new(BASE, &mut a.mem);
    let big = IoVec::new(BASE, MTU);
    assert_eq!(
        a.dom.send(a.ep, &mem, big, b_at_a, 1),
        Err(Errno::EMSGSIZE),
        "beyond the link MTU"
    );
    let max = a.dom.ep(a.ep).unwrap().max_msg_size;
    assert_eq!(max, MTU - 24 - 8);
    assert_eq!(
        a.dom.send(a.ep, &mem, IoVec::new(BASE, 1), 999, 1),
        Err(Errno::EINVAL),
        "not in the AV"
    );
    let five = [IoVec::new(BASE, 1); 5];
    assert_eq!(
        a.dom.sendv(a.ep, &mem, &five, b_at_a, 1),
        Err(Errno::EINVAL),
        "iov_limit"
    );
    for i in 0..8 {
        a.dom
            .send(a.ep, &mem, IoVec::new(BASE, 1), b_at_a, i)
            .unwrap();
    }
    assert_eq!(
        a.dom.send(a.ep, &mem, IoVec::new(BASE, 1), b_at_a, 9),
        Err(Errno::EAGAIN),
        "tx queue full"
    );
    assert_eq!(a.dom.ep(a.ep).unwrap().tx_size_left(), 0);
    let buf = [IoVec::new(BASE, 8), IoVec::new(BASE, 8)];
    assert_eq!(
        a.dom.recvmsg(
            a.ep,
            &MsgArgs::new(&buf, FI_ADDR_UNSPEC, 1),
            Flags::MULTI_RECV
        ),
        Err(Errno::EINVAL)
    );
}

#[test]
fn cq_full_pushes_back_with_eagain() {
    let (mut dom_f, mut dom) = open_domain([10, 0, 0, 5]);
    let cq = dom
        .cq_open(
            &CqAttr {
                size: 2,
                ..CqAttr::default()
            },
            0,
        )
        .unwrap();
    let av = dom.av_open(&mut AvAttr::default(), 0).unwrap();
    let ep = dom.ep_open(&dgram_info(), 0).unwrap();
    dom.ep_bind(ep, BindTarget::Cq(cq), Flags::TRANSMIT | Flags::RECV)
        .unwrap();
    dom.ep_bind(ep, BindTarget::Av(av), Flags::empty()).unwrap();
    dom.ep_enable(ep).unwrap();
    dom.recv(ep, IoVec::new(BASE, 8), FI_ADDR_UNSPEC, 1)
        .unwrap();
    dom.recv(ep, IoVec::new(BASE, 8), FI_ADDR_UNSPEC, 2)
        .unwrap();
    assert_eq!(
        dom.recv(ep, IoVec::new(BASE, 8), FI_ADDR_UNSPEC, 3),
        Err(Errno::EAGAIN),
        "CQ could not hold its completion"
    );
    dom.ep_close(ep).unwrap();
    assert_eq!(
        dom.cq(cq).unwrap().reserved(),
        0,
        "closing released the reservations"
    );
    dom.cq_close(cq).unwrap();
    dom.av_close(av).unwrap();
    assert!(dom.close(&mut dom_f).is_ok());
    dom_f.check_close().unwrap();
}

#[test]
fn bind_and_enable_rules() {
    let (mut fabric, mut dom) = open_domain([10, 0, 0, 1]);
    let (_f2, mut other) = open_domain([10, 0, 0, 2]);
    let cq = dom.cq_open(&CqAttr::default(), 0).unwrap();
    let cq2 = dom.cq_open(&CqAttr::default(), 0).unwrap();
    let foreign = other.cq_open(&CqAttr::default(), 0).unwrap();
    let av = dom.av_open(&mut AvAttr::default(), 0).unwrap();
    let c = dom.cntr_open(&CntrAttr::default(), 0).unwrap();
    let ep = dom.ep_open(&dgram_info(), 77).unwrap();
    assert_eq!(
        dom.ep_bind(ep, BindTarget::Cq(foreign), Flags::TRANSMIT),
        Err(Errno::EDOMAIN)
    );
    assert_eq!(
        dom.ep_bind(ep, BindTarget::Cq(cq), Flags::SELECTIVE_COMPLETION),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        dom.ep_bind(ep, BindTarget::Cq(cq), Flags::TRANSMIT | Flags::MSG),
        Err(Errno::EINVAL)
    );
    assert_eq!(dom.ep_enable(ep), Err(Errno::ENOCQ));
    dom.ep_bind(ep, BindTarget::Cq(cq), Flags::TRANSMIT)
        .unwrap();
    assert_eq!(
        dom.ep_bind(ep, BindTarget::Cq(cq2), Flags::TRANSMIT),
        Err(Errno::EINVAL),
        "one TX CQ"
    );
    assert_eq!(
        dom.ep_enable(ep),
        Err(Errno::ENOAV),
        "a receive CQ is not needed to enable"
    );
    dom.ep_bind(ep, BindTarget::Cq(cq2), Flags::RECV).unwrap();
    assert_eq!(dom.ep_enable(ep), Err(Errno::ENOAV));
    dom.ep_bind(ep, BindTarget::Cntr(c), Flags::SEND | Flags::RECV)
        .unwrap();
    assert_eq!(
        dom.ep_bind(ep, BindTarget::Cntr(c), Flags::SEND),
        Err(Errno::EINVAL),
        "one counter per type"
    );
    assert_eq!(
        dom.ep_bind(ep, BindTarget::Cntr(c), Flags::REMOTE_WRITE),
        Err(Errno::EINVAL),
        "needs FI_RMA_EVENT"
    );
    assert_eq!(
        dom.ep_bind(ep, BindTarget::Cntr(c), Flags::empty()),
        Err(Errno::EINVAL)
    );
    dom.ep_bind(ep, BindTarget::Av(av), Flags::empty()).unwrap();
    assert_eq!(
        dom.ep_bind(ep, BindTarget::Av(av), Flags::empty()),
        Err(Errno::EINVAL),
        "one AV"
    );
    let mem = SliceMemory::new(0, &mut []);
    assert_eq!(
        dom.send(ep, &mem, IoVec::new(0, 0), 0, 0),
        Err(Errno::EOPBADSTATE)
    );
    assert_eq!(
        dom.recv(ep, IoVec::new(0, 0), 0, 0),
        Err(Errno::EOPBADSTATE)
    );
    dom.ep_enable(ep).unwrap();
    assert_eq!(dom.ep_enable(ep), Err(Errno::EOPBADSTATE));
    assert_eq!(
        dom.ep_bind(ep, BindTarget::Eq(5), Flags::empty()),
        Err(Errno::EOPBADSTATE),
        "bindings freeze at enable"
    );
    assert_eq!(dom.cq_close(cq), Err(Errno::EBUSY));
    assert_eq!(dom.av_close(av), Err(Errno::EBUSY));
    assert_eq!(dom.cntr_close(c), Err(Errno::EBUSY));
    assert_eq!(fabric.check_close(), Err(Errno::EBUSY));
    let dom = match dom.close(&mut fabric) {
        Err((d, e)) => {
            assert_eq!(e, Errno::EBUSY);
            d
        }
        Ok(()) => panic!("domain closed with objects open"),
    };
    let mut dom = dom;
    dom.ep_close(ep).unwrap();
    assert_eq!(dom.ep_close(ep), Err(Errno::EINVAL), "stale endpoint");
    dom.cq_close(cq).unwrap();
    dom.cq_close(cq2).unwrap();
    dom.av_close(av).unwrap();
    dom.cntr_close(c).unwrap();
    assert_eq!(dom.cq(cq).err(), Some(Errno::EINVAL));
    assert!(dom.close(&mut fabric).is_ok());
    fabric.check_close().unwrap();
}

/// An endpoint that only initiates needs no receive CQ (fi_endpoint(3): CQs for the
/// operations it *initiates*; fabtests' `fi_rdm_multi_domain` binds a transmit CQ
/// alone): it enables and sends, its peer receives, and a receive posted on it has
/// nowhere to complete: -FI_ENOCQ, with nothing queued.
#[test]
fn an_endpoint_without_a_receive_cq_sends_but_cannot_post_receives() {
    let (fabric, mut dom) = open_domain([10, 0, 0, 1]);
    let attr = CqAttr {
        format: CqFormat::Msg,
        ..CqAttr::default()
    };
    let cq = dom.cq_open(&attr, 1).unwrap();
    let av = dom.av_open(&mut AvAttr::default(), 2).unwrap();
    let cntr = dom.cntr_open(&CntrAttr::default(), 4).unwrap();
    let ep = dom.ep_open(&dgram_info(), 3).unwrap();
    dom.ep_bind(ep, BindTarget::Cq(cq), Flags::TRANSMIT)
        .unwrap();
    dom.ep_bind(ep, BindTarget::Av(av), Flags::empty()).unwrap();
    dom.ep_enable(ep).unwrap();
    let link = Box::new(Link::new(
        Medium::Udp,
        Some(UdpAddr::new([10, 0, 0, 1].into(), 7000)),
    ));
    let mut a = Host {
        _fabric: fabric,
        dom,
        link,
        mem: vec![0; 4096],
        ep,
        tx_cq: cq,
        rx_cq: cq,
        av,
        send_cntr: cntr,
        recv_cntr: cntr,
    };
    let mut b = host([10, 0, 0, 2], CqFormat::Msg, false);
    let b_at_a = a.insert(&b);
    assert_eq!(
        a.dom.recv(a.ep, IoVec::new(BASE, 8), FI_ADDR_UNSPEC, 7),
        Err(Errno::ENOCQ)
    );
    assert_eq!(a.dom.ep(a.ep).unwrap().rx_size_left(), cfg().rx_size);
    b.dom
        .recv(b.ep, IoVec::new(BASE, 8), FI_ADDR_UNSPEC, 8)
        .unwrap();
    a.put(0, b"tx only!");
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .send(a.ep, &mem, IoVec::new(BASE, 8), b_at_a, 9)
        .unwrap();
    pump(&mut a, &mut b);
    let mut e = [CqMsgEntry::default(); 2];
    assert_eq!(a.dom.cq_mut(a.tx_cq).unwrap().read(&mut e), Ok(1));
    assert_eq!(e[0].op_context, 9);
    assert_eq!(b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e), Ok(1));
    assert_eq!((e[0].op_context, e[0].len), (8, 8));
    assert_eq!(b.get(0, 8), b"tx only!");
}

#[test]
fn ops_flags_and_options() {
    let (_, mut b, _, _) = pair(CqFormat::Msg);
    let ep = b.dom.ep_mut(b.ep).unwrap();
    assert_eq!(
        ep.getopsflag(Flags::TRANSMIT | Flags::RECV),
        Err(Errno::EINVAL)
    );
    ep.setopsflag(Flags::TRANSMIT | Flags::INJECT | Flags::COMPLETION)
        .unwrap();
    assert_eq!(
        ep.getopsflag(Flags::TRANSMIT),
        Ok(Flags::INJECT | Flags::COMPLETION)
    );
    assert_eq!(
        ep.setopsflag(Flags::RECV | Flags::INJECT),
        Err(Errno::EINVAL),
        "not a receive flag"
    );
    ep.setopsflag(Flags::RECV | Flags::MULTI_RECV).unwrap();
    assert_eq!(ep.getopsflag(Flags::RECV), Ok(Flags::MULTI_RECV));
    assert_eq!(
        ep.getopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv),
        Ok(crate::ep::DEFAULT_MIN_MULTI_RECV)
    );
    ep.setopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv, 128)
        .unwrap();
    assert_eq!(ep.getopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv), Ok(128));
    assert_eq!(ep.getopt(FI_OPT_ENDPOINT, EpOpt::CmDataSize), Ok(0));
    assert_eq!(
        ep.setopt(FI_OPT_ENDPOINT, EpOpt::CmDataSize, 8),
        Err(Errno::EOPNOTSUPP),
        "read-only"
    );
    assert_eq!(ep.getopt(1, EpOpt::MinMultiRecv), Err(Errno::ENOPROTOOPT));
    assert_eq!(
        ep.getopt(FI_OPT_ENDPOINT, EpOpt::BufferedLimit),
        Err(Errno::ENOPROTOOPT)
    );
    assert_eq!(b.dom.ep_addr(b.ep).unwrap().ip, [10, 0, 0, 2]);
}

/// A DGRAM endpoint is not reliable: FI_DELIVERY_COMPLETE (reliable endpoints only),
/// FI_MATCH_COMPLETE and FI_COMMIT_COMPLETE are levels it cannot give, and FI_FENCE
/// needs a capability not offered; refused as defaults (-FI_EINVAL) and per call
/// (-FI_EBADFLAGS, nothing queued).
#[test]
fn dgram_refuses_completion_levels_it_cannot_give() {
    let (mut a, mut b, b_at_a, _) = pair(CqFormat::Msg);
    let bad = [
        Flags::DELIVERY_COMPLETE,
        Flags::MATCH_COMPLETE,
        Flags::COMMIT_COMPLETE,
        Flags::FENCE,
    ];
    let left = a.dom.ep(a.ep).unwrap().tx_size_left();
    for f in bad {
        let mut info = dgram_info();
        info.tx_attr.op_flags = f;
        assert_eq!(a.dom.ep_open(&info, 5).err(), Some(Errno::EINVAL), "{f:?}");
        let ep = a.dom.ep_mut(a.ep).unwrap();
        assert_eq!(ep.setopsflag(Flags::TRANSMIT | f), Err(Errno::EINVAL));
        assert_eq!(ep.alias(Flags::TRANSMIT | f), Err(Errno::EINVAL));
        let mem = SliceMemory::new(BASE, &mut a.mem);
        let one = [IoVec::new(BASE, 4)];
        assert_eq!(
            a.dom.sendmsg(a.ep, &mem, &MsgArgs::new(&one, b_at_a, 7), f),
            Err(Errno::EBADFLAGS)
        );
    }
    assert_eq!(a.dom.ep(a.ep).unwrap().tx_size_left(), left);
    b.dom
        .recv(b.ep, IoVec::new(BASE, 8), FI_ADDR_UNSPEC, 1)
        .unwrap();
    let mem = SliceMemory::new(BASE, &mut a.mem);
    let one = [IoVec::new(BASE, 4)];
    let tc = Flags::TRANSMIT_COMPLETE;
    a.dom
        .sendmsg(a.ep, &mem, &MsgArgs::new(&one, b_at_a, 8), tc)
        .unwrap();
    pump(&mut a, &mut b);
    let mut e = [CqMsgEntry::default(); 2];
    assert_eq!(a.dom.cq_mut(a.tx_cq).unwrap().read(&mut e), Ok(1));
    assert_eq!(e[0].op_context, 8);
    assert_eq!(b.dom.ep(b.ep).unwrap().stats().rx_msgs, 1);
}

#[test]
fn other_endpoint_types_are_refused() {
    let (_, mut dom) = open_domain([10, 0, 0, 1]);
    let mut info = dgram_info();
    for t in [EpType::SockStream, EpType::SockDgram, EpType::Unspec] {
        info.ep_attr.ep_type = t;
        assert_eq!(dom.ep_open(&info, 0).err(), Some(Errno::EINVAL), "{t:?}");
    }
    // FI_EP_MSG only in a build that serves it.
    info.ep_attr.ep_type = EpType::Msg;
    info.caps = Flags::MSG;
    assert_eq!(dom.ep_open(&info, 0).is_ok(), cfg!(feature = "msg-ep"));
}

/// fi_endpoint checks its `info`: one context each way (more, or a shared one, would be
/// a scalable or shared-context endpoint), and nothing the domain does not offer, in
/// the endpoint's caps or a context's.
#[test]
fn fi_endpoint_refuses_contexts_and_caps_it_does_not_offer() {
    type Edit = fn(&mut Info);
    let (_, mut dom) = open_domain([10, 0, 0, 1]);
    let cases: [(&str, Edit); 4] = [
        ("two tx contexts", |i| i.ep_attr.tx_ctx_cnt = 2),
        ("two rx contexts", |i| i.ep_attr.rx_ctx_cnt = 2),
        ("a tx cap not offered", |i| i.tx_attr.caps |= Flags::FENCE),
        ("an rx cap not offered", |i| {
            i.rx_attr.caps |= Flags::RMA_PMEM
        }),
    ];
    for (what, edit) in cases {
        let mut info = dgram_info();
        edit(&mut info);
        assert_eq!(dom.ep_open(&info, 0).err(), Some(Errno::EINVAL), "{what}");
    }
    let mut info = dgram_info();
    (info.ep_attr.tx_ctx_cnt, info.ep_attr.rx_ctx_cnt) = (1, 0);
    dom.ep_open(&info, 0).unwrap();
}

#[test]
fn dgram_over_ethernet_resolves_the_peer_with_arp_first() {
    let mut a = host_on([10, 0, 0, 1], CqFormat::Msg, false, Medium::Ethernet);
    let mut b = host_on([10, 0, 0, 2], CqFormat::Msg, false, Medium::Ethernet);
    let b_at_a = a.insert(&b);
    b.dom
        .recv(b.ep, IoVec::new(BASE, 64), FI_ADDR_UNSPEC, 1)
        .unwrap();
    a.put(0, b"over ethernet");
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .send(a.ep, &mem, IoVec::new(BASE, 13), b_at_a, 2)
        .unwrap();
    assert_eq!(a.progress().tx, 0, "waits for ARP");
    assert_eq!(a.dom.net_stats().arp_requests_sent, 1);
    pump(&mut a, &mut b);
    assert_eq!(b.dom.net_stats().arp_replies_sent, 1);
    pump(&mut b, &mut a);
    pump(&mut a, &mut b);
    assert_eq!(b.get(0, 13), b"over ethernet");
    let mut e = [CqMsgEntry::default(); 2];
    assert_eq!(b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e), Ok(1));
    assert_eq!((e[0].op_context, e[0].len), (1, 13));
    assert_eq!(a.dom.cq_mut(a.tx_cq).unwrap().read(&mut e), Ok(1));
}

#[test]
fn dgram_to_a_host_that_never_answers_arp_fails_instead_of_waiting_forever() {
    let mut a = host_on([10, 0, 0, 1], CqFormat::Msg, false, Medium::Ethernet);
    let mut b = host_on([10, 0, 0, 2], CqFormat::Msg, false, Medium::Ethernet);
    let b_at_a = a.insert(&b);
    let ms = Instant::from_millis;
    let mem = SliceMemory::new(BASE, &mut a.mem);
    for ctx in [0x71, 0x72] {
        a.dom
            .send(a.ep, &mem, IoVec::new(BASE, 4), b_at_a, ctx)
            .unwrap();
    }
    // b hears nothing: a's requests are lost.
    for t in [0, 100, 200, 250] {
        assert_eq!(a.progress_at(ms(t)).tx, 0);
        while a.link.pop_tx(|_, _| ()).is_some() {}
    }
    assert_eq!(a.dom.net_stats().arp_requests_sent, 3);
    let mut e = [CqMsgEntry::default(); 2];
    let read = |a: &mut Host, e: &mut [CqMsgEntry]| a.dom.cq_mut(a.tx_cq).unwrap().read(e);
    assert_eq!(read(&mut a, &mut e), Err(Errno::EAGAIN), "still resolving");
    // One interval after the last request the next hop has failed: both sends complete
    // with -FI_EHOSTUNREACH, in order, instead of blocking the queue for ever.
    a.progress_at(ms(300));
    for ctx in [0x71, 0x72] {
        let cq = a.dom.cq_mut(a.tx_cq).unwrap();
        assert_eq!(cq.read(&mut e), Err(Errno::EAVAIL));
        let err = cq
            .readerr(Flags::empty(), crate::info::API_VERSION, &mut [])
            .unwrap();
        assert_eq!((err.err, err.op_context), (Errno::EHOSTUNREACH.code(), ctx));
    }
    assert_eq!(a.dom.cntr(a.send_cntr).unwrap().err_value(), 2);
    assert_eq!(a.dom.net_stats().arp_failures, 1);
    // Once b answers, a later send goes through.
    b.dom
        .recv(b.ep, IoVec::new(BASE, 64), FI_ADDR_UNSPEC, 1)
        .unwrap();
    a.put(0, b"late");
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .send(a.ep, &mem, IoVec::new(BASE, 4), b_at_a, 0x73)
        .unwrap();
    let t = ms(600);
    assert_eq!(a.progress_at(t).tx, 0, "asks again");
    a.link.transfer_to(&mut *b.link);
    b.progress_at(t);
    b.link.transfer_to(&mut *a.link);
    a.progress_at(t);
    a.link.transfer_to(&mut *b.link);
    b.progress_at(t);
    assert_eq!(b.get(0, 4), b"late");
    assert_eq!(read(&mut a, &mut e), Ok(1));
    assert_eq!(e[0].op_context, 0x73);
}

#[test]
fn a_dgram_queue_waiting_for_arp_does_not_hold_up_other_endpoints() {
    let mut a = host_on([10, 0, 0, 1], CqFormat::Msg, false, Medium::Ethernet);
    let b = host_on([10, 0, 0, 2], CqFormat::Msg, false, Medium::Ethernet);
    let b_at_a = a.insert(&b);
    // A second endpoint on a, sending to its own domain's address (the loopback
    // queue: no ARP), enabled after the first so it comes later in every pass.
    let ep2 = a.dom.ep_open(&dgram_info(), 16).unwrap();
    a.dom
        .ep_bind(ep2, BindTarget::Cq(a.tx_cq), Flags::TRANSMIT)
        .unwrap();
    a.dom
        .ep_bind(ep2, BindTarget::Cq(a.rx_cq), Flags::RECV)
        .unwrap();
    a.dom
        .ep_bind(ep2, BindTarget::Av(a.av), Flags::empty())
        .unwrap();
    a.dom.ep_enable(ep2).unwrap();
    let own = a.dom.ep_addr(a.ep).unwrap();
    let mut out = [0; 1];
    a.dom
        .av_mut(a.av)
        .unwrap()
        .insert(AvAddrs::Ep(&[own]), Some(&mut out), Flags::empty(), None)
        .unwrap();
    a.dom
        .recv(a.ep, IoVec::new(BASE + 512, 64), FI_ADDR_UNSPEC, 0x81)
        .unwrap();
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .send(a.ep, &mem, IoVec::new(BASE, 4), b_at_a, 0x82)
        .unwrap();
    a.dom
        .send(ep2, &mem, IoVec::new(BASE, 4), out[0], 0x83)
        .unwrap();
    a.progress();
    // The looped datagram arrives on the next pass; the send to b still waits.
    a.progress();
    let mut e = [CqMsgEntry::default(); 2];
    assert_eq!(a.dom.cq_mut(a.tx_cq).unwrap().read(&mut e), Ok(1));
    assert_eq!(e[0].op_context, 0x83);
    assert_eq!(a.dom.cq_mut(a.rx_cq).unwrap().read(&mut e), Ok(1));
    assert_eq!(e[0].op_context, 0x81);
}

#[test]
fn aliases_carry_their_own_flags_and_pin_the_endpoint() {
    let (mut a, mut b, b_at_a, _) = pair(CqFormat::Msg);
    let ep = a.dom.ep_mut(a.ep).unwrap();
    assert_eq!(ep.alias(Flags::TRANSMIT | Flags::RECV), Err(Errno::EINVAL));
    assert_eq!(ep.alias(Flags::RECV | Flags::INJECT), Err(Errno::EINVAL));
    let (tx, rx) = ep.alias(Flags::TRANSMIT | Flags::INJECT).unwrap();
    assert_eq!((tx, rx), (Flags::INJECT, Flags::empty()));
    assert_eq!(a.dom.ep_close(a.ep), Err(Errno::EBUSY), "alias open");
    b.dom
        .recv(b.ep, IoVec::new(BASE, 8), FI_ADDR_UNSPEC, 1)
        .unwrap();
    let mem = SliceMemory::new(BASE, &mut a.mem);
    let one = [IoVec::new(BASE, 4)];
    a.dom
        .sendmsg(a.ep, &mem, &MsgArgs::new(&one, b_at_a, 7), tx)
        .unwrap();
    pump(&mut a, &mut b);
    assert_eq!(b.dom.ep(b.ep).unwrap().stats().rx_msgs, 1);
    let ep = a.dom.ep_mut(a.ep).unwrap();
    ep.alias_close().unwrap();
    assert_eq!(ep.alias_close(), Err(Errno::EINVAL));
    a.dom.ep_close(a.ep).unwrap();
}

#[test]
fn each_kind_of_bad_datagram_has_its_own_counter() {
    let (_a, mut b, _, _) = pair(CqFormat::Msg);
    let dst_ep = b.dom.ep_addr(b.ep).unwrap().ep_id;
    let src = Some(UdpAddr::new([10, 0, 0, 1].into(), 7000));
    let mut good = [0u8; 64];
    let r = Repr {
        header: Header {
            src_ep: 0,
            dst_ep,
            session: 0,
            seq: 0,
            crc: true,
            ack_req: false,
        },
        body: Body::Dgram(DgramRepr {
            cq_data: None,
            payload: b"abcd",
        }),
    };
    let n = r.emit(&mut Packet::new_unchecked(&mut good[..])).unwrap();
    let good = &good[..n];
    let bad = |at: usize, val: u8| {
        let mut p = good.to_vec();
        p[at] = val;
        p
    };
    type Field = fn(&DomainStats) -> u64;
    let cases: [(Vec<u8>, Field); 8] = [
        (bad(0, 0x00), |s| s.rx_bad_magic),
        (bad(2, 9), |s| s.rx_bad_version),
        (bad(3, 0x36), |s| s.rx_unknown_type),
        (good[..20].to_vec(), |s| s.rx_truncated),
        (bad(7, 10), |s| s.rx_bad_length),
        (bad(n - 1, b'x'), |s| s.rx_bad_checksum),
        (bad(5, 0x81), |s| s.rx_bad_flags),
        (
            {
                let mut p = bad(11, dst_ep.wrapping_add(5) as u8);
                Packet::new_unchecked(&mut p[..]).fill_checksum();
                p
            },
            |s| s.rx_no_endpoint,
        ),
    ];
    for (i, (pkt, field)) in cases.iter().enumerate() {
        let before = *b.dom.stats();
        assert!(b.link.inject(pkt, src));
        b.progress();
        let after = *b.dom.stats();
        assert_eq!(field(&after) - field(&before), 1, "case {i}: {after:?}");
        assert_eq!(b.dom.ep(b.ep).unwrap().stats().rx_msgs, 0, "case {i}");
    }
    // The untouched datagram is delivered to the endpoint (no receive posted: counted).
    assert!(b.link.inject(good, src));
    b.progress();
    assert_eq!(b.dom.ep(b.ep).unwrap().stats().rx_no_buffer, 1);
}

#[cfg(feature = "shared-ctx")]
#[path = "shared_tests.rs"]
mod shared;

/// On a domain of two receive queues, context k of a scalable endpoint is queue k's:
/// its CQ names that queue, a pass of queue 1 transmits context 1's datagram alone
/// (context 0's waits for queue 0's pass, on queue 0's link). Queue counts are checked
/// at open.
#[test]
fn a_pass_of_one_queue_transmits_for_its_contexts_alone() {
    use crate::sep::CtxSide;
    let mut fabric = Fabric::open(&FabricAttr::default(), 1, VecStorage, 2).unwrap();
    let dc = |queues| DomainConfig {
        queues,
        ..DomainConfig::new(net_config([10, 0, 0, 1], Medium::Udp), cfg(), 9)
    };
    for bad in [0, crate::net::MAX_QUEUES + 1] {
        assert!(matches!(
            Domain::open(&mut fabric, &dgram_info(), dc(bad), VecStorage, 2),
            Err(Errno::EINVAL)
        ));
    }
    let mut d = Domain::open(&mut fabric, &dgram_info(), dc(2), VecStorage, 2).unwrap();
    assert_eq!(d.queues(), 2);
    let mut info = dgram_info();
    info.ep_attr.tx_ctx_cnt = 2;
    info.ep_attr.rx_ctx_cnt = 2;
    let sep = d.sep_open(&info, 1).unwrap();
    let av = d
        .av_open(
            &mut AvAttr {
                count: 4,
                ..AvAttr::default()
            },
            3,
        )
        .unwrap();
    d.sep_bind(sep, BindTarget::Av(av), Flags::empty()).unwrap();
    let attr = CqAttr {
        size: 8,
        ..CqAttr::default()
    };
    let mut engines = Vec::new();
    let mut cqs = Vec::new();
    for k in 0..2 {
        let h = d.sep_ctx_open(sep, CtxSide::Tx, k, Flags::empty()).unwrap();
        let cq = d.cq_open(&attr, 10 + k as u64).unwrap();
        d.sep_ctx_bind(sep, CtxSide::Tx, k, BindTarget::Cq(cq), Flags::TRANSMIT)
            .unwrap();
        d.sep_ctx_enable(sep, CtxSide::Tx, k).unwrap();
        assert_eq!(d.ep_queue(h), k as u8);
        assert_eq!(d.cq_queue(cq), k as u8);
        engines.push(h);
        cqs.push(cq);
    }
    d.sep_enable(sep).unwrap();
    let peer = crate::addr::EpAddr::new([10, 0, 0, 2], 7000, 0);
    let mut out = [0; 1];
    d.av_mut(av)
        .unwrap()
        .insert(AvAddrs::Ep(&[peer]), Some(&mut out), Flags::empty(), None)
        .unwrap();
    let mut bytes = vec![0u8; 64];
    bytes[..2].copy_from_slice(b"c0");
    bytes[32..34].copy_from_slice(b"c1");
    let mem = SliceMemory::new(BASE, &mut bytes);
    for (k, h) in engines.iter().enumerate() {
        d.inject(*h, &mem, IoVec::new(BASE + 32 * k as u64, 2), out[0])
            .unwrap();
    }
    let local = Some(UdpAddr::new([10, 0, 0, 1].into(), 7000));
    let mut links: [Box<Link>; 2] = [
        Box::new(Link::new(Medium::Udp, local)),
        Box::new(Link::new(Medium::Udp, local)),
    ];
    let mut scratch = vec![0u8; 64];
    let mut pass = |d: &mut Domain<VecStorage>, q: u8, link: &mut Link| {
        let mut m = SliceMemory::new(BASE, &mut scratch);
        d.progress_queue(q, Instant::ZERO, link, &mut m, PassKind::Full)
            .unwrap()
    };
    let payload = |link: &mut Link| {
        link.pop_tx(|_, f| {
            let r = Repr::parse_bytes(f).unwrap();
            let Body::Dgram(dg) = r.body else {
                panic!("a datagram")
            };
            (r.header.src_ep, dg.payload.to_vec())
        })
    };
    let [l0, l1] = &mut links;
    assert_eq!(pass(&mut d, 1, l1).tx, 1);
    assert_eq!((l0.tx_len(), l1.tx_len()), (0, 1));
    let (src, data) = payload(l1).unwrap();
    assert_eq!(
        (src, &data[..]),
        (d.ep(engines[1]).unwrap().id(), &b"c1"[..])
    );
    assert_eq!(
        pass(&mut d, 1, l1).tx,
        0,
        "context 0's datagram is not queue 1's"
    );
    assert_eq!(pass(&mut d, 0, l0).tx, 1);
    let (src, data) = payload(l0).unwrap();
    assert_eq!(
        (src, &data[..]),
        (d.ep(engines[0]).unwrap().id(), &b"c0"[..])
    );
    assert_eq!(d.stats().tx_packets, 2);
}
