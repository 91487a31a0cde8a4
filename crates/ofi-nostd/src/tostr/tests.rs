//! Snapshot tests: the expected texts were printed by libfabric 1.17's own `fi_tostr`
//! and `fi_info` (see `snapshots/gen.c`).

extern crate std;

use super::*;
use crate::addr::EpAddr;
use crate::info::{
    AuthKey, AvType, EpType, Progress, RawAddr, ResourceMgmt, Threading, TrafficClass, fi_version,
    name,
};
use std::string::String;

fn s(f: impl FnOnce(&mut String) -> fmt::Result) -> String {
    let mut out = String::new();
    f(&mut out).unwrap();
    out
}

/// The fi_info `snapshots/gen.c` builds.
fn gen_info() -> Info {
    let mut i = Info {
        caps: Flags::MSG
            | Flags::TAGGED
            | Flags::SEND
            | Flags::RECV
            | Flags::DIRECTED_RECV
            | Flags::MULTI_RECV
            | Flags::SOURCE
            | Flags::LOCAL_COMM
            | Flags::REMOTE_COMM,
        mode: Mode::CONTEXT,
        addr_format: AddrFormat::SOCKADDR_IN,
        src_addr: Some(
            RawAddr::from_slice(&EpAddr::new([10, 1, 2, 3], 4791, 7).to_sockaddr_in()).unwrap(),
        ),
        ..Default::default()
    };
    i.tx_attr = TxAttr {
        caps: Flags::MSG | Flags::TAGGED | Flags::SEND,
        op_flags: Flags::TRANSMIT_COMPLETE | Flags::INJECT,
        msg_order: Order::SAS,
        inject_size: 1024,
        size: 1024,
        iov_limit: 4,
        tclass: TrafficClass::BULK_DATA,
        ..Default::default()
    };
    i.rx_attr = RxAttr {
        caps: Flags::MSG
            | Flags::TAGGED
            | Flags::RECV
            | Flags::MULTI_RECV
            | Flags::SOURCE
            | Flags::DIRECTED_RECV,
        msg_order: Order::SAS,
        comp_order: CompOrder::STRICT,
        size: 512,
        iov_limit: 4,
        mode: Mode::CONTEXT,
        ..Default::default()
    };
    i.ep_attr = EpAttr {
        ep_type: EpType::Rdm,
        protocol: Protocol::NOSTD_RDM,
        protocol_version: 1,
        max_msg_size: 4294967295,
        mem_tag_format: 0xaaaa_aaaa_aaaa_aaaa,
        tx_ctx_cnt: 1,
        rx_ctx_cnt: 1,
        auth_key: AuthKey::from_slice(b"abc").unwrap(),
        ..Default::default()
    };
    i.domain_attr = DomainAttr {
        name: name("eth0"),
        threading: Threading::Safe,
        control_progress: Progress::Manual,
        data_progress: Progress::Auto,
        resource_mgmt: ResourceMgmt::Enabled,
        av_type: AvType::Table,
        mr_mode: MrMode::PROV_KEY | MrMode::VIRT_ADDR,
        mr_key_size: 8,
        cq_data_size: 8,
        cq_cnt: 128,
        ep_cnt: 64,
        tx_ctx_cnt: 1,
        rx_ctx_cnt: 1,
        max_ep_tx_ctx: 1,
        max_ep_rx_ctx: 1,
        cntr_cnt: 32,
        mr_iov_limit: 1,
        caps: Flags::LOCAL_COMM | Flags::REMOTE_COMM,
        mode: Mode::RESTRICTED_COMP,
        auth_key: AuthKey::from_slice(b"12345").unwrap(),
        max_err_data: 16,
        mr_cnt: 1024,
        tclass: TrafficClass::dscp(46),
        ..Default::default()
    };
    i.fabric_attr = FabricAttr {
        name: name("nostd"),
        prov_name: name("nostd"),
        prov_version: fi_version(1, 0),
        api_version: fi_version(1, 17),
    };
    i
}

#[test]
fn info_matches_libfabric() {
    let mut i = gen_info();
    assert_eq!(
        s(|w| write_info(w, &i)),
        include_str!("snapshots/info_sockaddr_in.txt")
    );
    assert_eq!(
        s(|w| write_tostr(w, Data::Info(&i))),
        include_str!("snapshots/info_sockaddr_in.txt")
    );

    i.dest_addr = Some(
        RawAddr::from_slice(&EpAddr::new([192, 168, 0, 1], 9228, 0).to_sockaddr_in()).unwrap(),
    );
    i.addr_format = AddrFormat::SOCKADDR;
    assert_eq!(
        s(|w| write_info(w, &i)),
        include_str!("snapshots/info_sockaddr.txt")
    );

    i.addr_format = AddrFormat::STR;
    i.src_addr = Some(RawAddr::from_slice(b"fi_addr_nostd://10.1.2.3:4791/7\0").unwrap());
    i.dest_addr = Some(RawAddr::from_slice(b"fi_sockaddr_in://192.168.0.1:9228\0").unwrap());
    assert_eq!(
        s(|w| write_info(w, &i)),
        include_str!("snapshots/info_str.txt")
    );

    i.addr_format = AddrFormat::UNSPEC;
    i.src_addr =
        Some(RawAddr::from_slice(&EpAddr::new([10, 1, 2, 3], 4791, 7).to_sockaddr_in()).unwrap());
    i.dest_addr = None;
    i.domain_attr.name = name("");
    i.fabric_attr.name = name("");
    assert_eq!(
        s(|w| write_info(w, &i)),
        include_str!("snapshots/info_unspec_null_names.txt")
    );
}

#[test]
fn attrs_match_libfabric() {
    let i = gen_info();
    assert_eq!(
        s(|w| write_tostr(w, Data::TxAttr(&i.tx_attr))),
        include_str!("snapshots/tx_attr.txt")
    );
    assert_eq!(
        s(|w| write_tostr(w, Data::RxAttr(&i.rx_attr))),
        include_str!("snapshots/rx_attr.txt")
    );
    assert_eq!(
        s(|w| write_tostr(w, Data::EpAttr(&i.ep_attr))),
        include_str!("snapshots/ep_attr.txt")
    );
    assert_eq!(
        s(|w| write_tostr(w, Data::DomainAttr(&i.domain_attr))),
        include_str!("snapshots/domain_attr.txt")
    );
    assert_eq!(
        s(|w| write_tostr(w, Data::FabricAttr(&i.fabric_attr))),
        include_str!("snapshots/fabric_attr.txt")
    );
}

/// Regenerates `snapshots/values.txt` line by line.
#[test]
fn flags_and_enums_match_libfabric() {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut line = |label: &str, v: u32, d: Data<'_>| {
        let text = s(|w| write_tostr(w, d));
        writeln!(out, "{label} {v}: {text}").unwrap();
    };
    let all = u64::MAX;
    line("caps", 0, Data::Caps(Flags::from_bits_retain(all)));
    line("caps", 1, Data::Caps(Flags::empty()));
    line("op_flags", 0, Data::OpFlags(Flags::from_bits_retain(all)));
    line("mode", 0, Data::Mode(Mode::from_bits_retain(all)));
    line("msg_order", 0, Data::MsgOrder(Order::from_bits_retain(all)));
    line(
        "cq_event_flags",
        0,
        Data::CqEventFlags(Flags::from_bits_retain(all)),
    );
    line(
        "mr_mode",
        0,
        Data::MrMode(MrMode::from_bits_retain(u32::MAX)),
    );
    for i in 0..18 {
        line("addr_format", i, Data::AddrFormat(AddrFormat(i)));
    }
    let ps = FI_PROV_SPECIFIC | 5;
    line("addr_format", ps, Data::AddrFormat(AddrFormat(ps)));
    for i in 0..28 {
        line("protocol", i, Data::Protocol(Protocol(i)));
    }
    line("protocol", ps, Data::Protocol(Protocol(ps)));
    type Ctor = fn(u32) -> Data<'static>;
    let enums: [(&str, u32, Ctor); 14] = [
        ("ep_type", 7, Data::EpType),
        ("threading", 7, Data::Threading),
        ("progress", 4, Data::Progress),
        ("av_type", 4, Data::AvType),
        ("eq_event", 8, Data::EqEvent),
        ("cq_format", 6, Data::CqFormat),
        ("op_type", 12, Data::OpType),
        ("atomic_type", 17, Data::AtomicType),
        ("atomic_op", 20, Data::AtomicOp),
        ("collective_op", 10, Data::CollectiveOp),
        ("hmem_iface", 7, Data::HmemIface),
        ("log_level", 5, Data::LogLevel),
        ("log_subsys", 11, Data::LogSubsys),
        ("version", 1, |_| Data::Version),
    ];
    for (label, n, ctor) in enums {
        for i in 0..n {
            line(label, i, ctor(i));
        }
    }
    let orders = [0, 0x1FF, 0x100, 0x1FF | (1 << 16), 1 << 16, 0x3];
    for (i, o) in orders.into_iter().enumerate() {
        let text = s(|w| write_comp_order(w, CompOrder::from_bits_retain(o)));
        writeln!(out, "comp_order {i}: [ {text} ]").unwrap();
    }
    let expected = include_str!("snapshots/values.txt");
    for (ours, theirs) in out.lines().zip(expected.lines()) {
        assert_eq!(ours, theirs);
    }
    assert_eq!(out, expected);
}

#[test]
fn fid_types_have_c_ordinals() {
    assert_eq!(FiType::Info as u32, 0);
    assert_eq!(FiType::Protocol as u32, 12);
    assert_eq!(FiType::Version as u32, 18);
    assert_eq!(FiType::MrMode as u32, 21);
    assert_eq!(FiType::LogSubsys as u32, 28);
    assert_eq!(Data::Caps(Flags::MSG).fi_type(), FiType::Caps);
    assert_eq!(Data::Version.fi_type(), FiType::Version);
}

#[test]
fn addresses_match_ofi_straddr() {
    let addr = |f: AddrFormat, b: &[u8]| s(|w| write_addr(w, f, Some(b)));
    let bytes: std::vec::Vec<u8> = (1..=64).collect();
    // What libfabric 1.17 prints for bytes 01 02 03 ... in each format.
    assert_eq!(
        addr(AddrFormat::PSMX, &bytes),
        "fi_addr_psmx://807060504030201"
    );
    assert_eq!(
        addr(AddrFormat::GNI, &bytes),
        "fi_addr_gni://807060504030201"
    );
    assert_eq!(
        addr(AddrFormat::PSMX2, &bytes),
        "fi_addr_psmx2://807060504030201:100f0e0d0c0b0a09"
    );
    assert_eq!(
        addr(AddrFormat::PSMX3, &bytes),
        "fi_addr_psmx3://807060504030201:100f0e0d0c0b0a09:1817161514131211:201f1e1d1c1b1a19"
    );
    assert_eq!(
        addr(AddrFormat::OPX, &bytes),
        "fi_addr_opx://0807060504030201"
    );
    assert_eq!(addr(AddrFormat::CXI, &bytes), "fi_addr_cxi://0x04030201");
    // sockaddr_in with the wrong family, and unknown formats: nothing.
    assert_eq!(addr(AddrFormat::SOCKADDR_IN, &bytes), "");
    assert_eq!(addr(AddrFormat::UNSPEC, &bytes), "");
    assert_eq!(addr(AddrFormat(16), &bytes), "");
    assert_eq!(
        s(|w| write_addr(w, AddrFormat::SOCKADDR_IN, None)),
        "(null)"
    );
    // IPv6, as FI_SOCKADDR and FI_SOCKADDR_IN6 (inet_ntop's compression).
    let mut six = [0u8; 28];
    six[..2].copy_from_slice(&10u16.to_ne_bytes());
    six[2..4].copy_from_slice(&7471u16.to_be_bytes());
    six[8..24].copy_from_slice(&"fe80::6:12".parse::<Ipv6Addr>().unwrap().octets());
    assert_eq!(
        addr(AddrFormat::SOCKADDR_IN6, &six),
        "fi_sockaddr_in6://[fe80::6:12]:7471"
    );
    assert_eq!(
        addr(AddrFormat::SOCKADDR, &six),
        "fi_sockaddr_in6://[fe80::6:12]:7471"
    );
    six[8..24].copy_from_slice(&"::ffff:1.2.3.4".parse::<Ipv6Addr>().unwrap().octets());
    assert_eq!(
        addr(AddrFormat::SOCKADDR_IN6, &six),
        "fi_sockaddr_in6://[::ffff:1.2.3.4]:7471"
    );
}

/// The udp;ofi_rxd entry of this machine's `fi_info -p udp -v`, rebuilt from its values.
fn udp_rxd_info() -> Info {
    let rma_order = Order::RAR
        | Order::RAW
        | Order::RAS
        | Order::WAW
        | Order::WAS
        | Order::SAW
        | Order::SAS
        | Order::RMA_RAR
        | Order::RMA_RAW
        | Order::RMA_WAW
        | Order::ATOMIC_RAR
        | Order::ATOMIC_RAW
        | Order::ATOMIC_WAR
        | Order::ATOMIC_WAW;
    let mut i = Info {
        caps: Flags::MSG
            | Flags::RMA
            | Flags::TAGGED
            | Flags::ATOMIC
            | Flags::READ
            | Flags::WRITE
            | Flags::RECV
            | Flags::SEND
            | Flags::REMOTE_READ
            | Flags::REMOTE_WRITE
            | Flags::MULTI_RECV
            | Flags::LOCAL_COMM
            | Flags::REMOTE_COMM
            | Flags::RMA_EVENT
            | Flags::SOURCE
            | Flags::DIRECTED_RECV,
        addr_format: AddrFormat::SOCKADDR_IN,
        src_addr: Some(
            RawAddr::from_slice(&EpAddr::new([192, 0, 2, 2], 0, 0).to_sockaddr_in()).unwrap(),
        ),
        ..Default::default()
    };
    i.tx_attr = TxAttr {
        caps: Flags::MSG
            | Flags::RMA
            | Flags::TAGGED
            | Flags::ATOMIC
            | Flags::READ
            | Flags::WRITE
            | Flags::SEND,
        msg_order: rma_order,
        inject_size: 1256,
        size: 1024,
        iov_limit: 4,
        rma_iov_limit: 4,
        ..Default::default()
    };
    i.rx_attr = RxAttr {
        caps: Flags::MSG
            | Flags::RMA
            | Flags::TAGGED
            | Flags::ATOMIC
            | Flags::RECV
            | Flags::REMOTE_READ
            | Flags::REMOTE_WRITE
            | Flags::MULTI_RECV
            | Flags::RMA_EVENT
            | Flags::SOURCE
            | Flags::DIRECTED_RECV,
        msg_order: rma_order,
        size: 1024,
        iov_limit: 4,
        ..Default::default()
    };
    i.ep_attr = EpAttr {
        ep_type: EpType::Rdm,
        protocol: Protocol::RXD,
        protocol_version: 1,
        max_msg_size: usize::MAX,
        max_order_raw_size: usize::MAX,
        max_order_waw_size: usize::MAX,
        mem_tag_format: 0xaaaa_aaaa_aaaa_aaaa,
        tx_ctx_cnt: 1,
        rx_ctx_cnt: 1,
        ..Default::default()
    };
    i.domain_attr = DomainAttr {
        name: name("eth0"),
        threading: Threading::Safe,
        control_progress: Progress::Manual,
        data_progress: Progress::Manual,
        resource_mgmt: ResourceMgmt::Enabled,
        mr_key_size: 8,
        cq_data_size: 8,
        cq_cnt: 128,
        ep_cnt: 128,
        tx_ctx_cnt: 1,
        rx_ctx_cnt: 1,
        max_ep_tx_ctx: 1,
        max_ep_rx_ctx: 1,
        mr_iov_limit: 1,
        ..Default::default()
    };
    i.fabric_attr = FabricAttr {
        name: name("192.0.2.0/24"),
        prov_name: name("udp;ofi_rxd"),
        prov_version: fi_version(117, 0),
        api_version: fi_version(1, 17),
    };
    i
}

#[test]
fn fi_info_tool_formats_match() {
    let i = udp_rxd_info();
    assert_eq!(
        s(|w| write_short(w, &i)),
        include_str!("snapshots/fi_info_udp_short.txt")
    );
    assert_eq!(
        s(|w| write_verbose(w, &i)),
        include_str!("snapshots/fi_info_udp_verbose.txt")
    );
}

#[cfg(feature = "atomic")]
#[test]
fn our_own_offer_prints_like_fi_info() {
    use crate::info::{Interface, NoResolver, Provider, ProviderConfig, getinfo};
    let ifaces = [Interface {
        name: "eth0",
        ip: [192, 0, 2, 2],
        prefix_len: 24,
        mtu: 1500,
        loopback: false,
    }];
    let p = Provider {
        cfg: ProviderConfig::DEFAULT,
        interfaces: &ifaces,
        resolver: &NoResolver,
    };
    let mut out: [Info; 2] = Default::default();
    let n = getinfo(
        fi_version(1, 17),
        None,
        None,
        Flags::empty(),
        None,
        &p,
        &mut out,
    )
    .unwrap();
    let short = s(|w| out[..n].iter().try_for_each(|i| write_short(w, i)));
    assert_eq!(
        short,
        "provider: nostd\n    fabric: nostd\n    domain: eth0\n    version: 1.0\n    type: FI_EP_RDM\n    protocol: Provider specific\n\
         provider: nostd\n    fabric: nostd\n    domain: eth0\n    version: 1.0\n    type: FI_EP_DGRAM\n    protocol: Provider specific\n"
    );
    let verbose = s(|w| write_verbose(w, &out[0]));
    assert!(verbose.starts_with("---\nfi_info:\n    caps: [ FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC, FI_READ, FI_WRITE, FI_RECV, FI_SEND, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_MULTI_RECV, FI_LOCAL_COMM, FI_REMOTE_COMM, FI_RMA_EVENT, FI_SOURCE, FI_NAMED_RX_CTX, FI_DIRECTED_RECV ]\n    mode: [  ]\n"));
    assert!(
        verbose.contains("    src_addr: fi_sockaddr_in://192.0.2.2:0\n    dest_addr: (null)\n")
    );
    assert!(verbose.ends_with("        api_version: 1.17\n    nic: (nil)\n"));
}

#[test]
fn writing_needs_no_allocation() {
    // A fixed buffer is enough; overflow is a fmt::Error, never a panic.
    let i = gen_info();
    let mut big: heapless::String<4096> = heapless::String::new();
    write_info(&mut big, &i).unwrap();
    assert_eq!(big.as_str(), include_str!("snapshots/info_sockaddr_in.txt"));
    let mut small: heapless::String<64> = heapless::String::new();
    assert!(write_info(&mut small, &i).is_err());
}
