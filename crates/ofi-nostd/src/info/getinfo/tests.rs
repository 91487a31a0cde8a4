use super::*;
use crate::info::{AuthKey, FI_PROV_SPECIFIC, fi_version};

const V: u32 = API_VERSION;

const IFACES: [Interface<'static>; 3] = [
    Interface {
        name: "eth0",
        ip: [10, 0, 0, 5],
        prefix_len: 24,
        mtu: 1500,
        loopback: false,
    },
    Interface {
        name: "eth1",
        ip: [192, 168, 7, 2],
        prefix_len: 16,
        mtu: 9000,
        loopback: false,
    },
    Interface {
        name: "lo",
        ip: [127, 0, 0, 1],
        prefix_len: 8,
        mtu: 65536,
        loopback: true,
    },
];

struct MapResolver;
impl Resolver for MapResolver {
    fn resolve(&self, host: &str) -> Option<[u8; 4]> {
        (host == "peer.example").then_some([192, 168, 9, 9])
    }
}

fn prov() -> Provider<'static> {
    Provider {
        cfg: ProviderConfig::DEFAULT,
        interfaces: &IFACES,
        resolver: &NoResolver,
    }
}

fn with_cfg(cfg: ProviderConfig) -> Provider<'static> {
    Provider { cfg, ..prov() }
}

fn out() -> [Info; 12] {
    Default::default()
}

/// Runs getinfo into a fresh buffer and returns the entries.
fn run(
    node: Option<&str>,
    service: Option<&str>,
    flags: Flags,
    hints: Option<&Info>,
    p: &Provider<'_>,
) -> Result<std::vec::Vec<Info>> {
    let mut o = out();
    let n = getinfo(V, node, service, flags, hints, p, &mut o)?;
    Ok(o[..n].to_vec())
}

extern crate std;

fn hints() -> Info {
    Info::default()
}

fn rdm_hints() -> Info {
    let mut h = hints();
    h.caps = Flags::MSG | Flags::TAGGED;
    h.ep_attr.ep_type = EpType::Rdm;
    h
}

fn src(i: &Info) -> EpAddr {
    EpAddr::from_sockaddr_in(i.src_addr.as_ref().unwrap()).unwrap()
}

fn dest(i: &Info) -> Option<EpAddr> {
    i.dest_addr
        .as_ref()
        .map(|d| EpAddr::from_sockaddr_in(d).unwrap())
}

#[cfg(feature = "atomic")]
#[test]
fn no_hints_lists_rdm_then_dgram_on_every_interface() {
    let r = run(None, None, Flags::empty(), None, &prov()).unwrap();
    assert_eq!(r.len(), 6);
    let types: std::vec::Vec<_> = r.iter().map(|i| i.ep_attr.ep_type).collect();
    assert_eq!(
        types,
        [
            EpType::Rdm,
            EpType::Rdm,
            EpType::Rdm,
            EpType::Dgram,
            EpType::Dgram,
            EpType::Dgram
        ]
    );
    let names: std::vec::Vec<_> = r.iter().map(|i| i.domain_attr.name.as_str()).collect();
    assert_eq!(names, ["eth0", "eth1", "lo", "eth0", "eth1", "lo"]);

    let rdm = &r[0];
    let rma = Flags::RMA
        | Flags::ATOMIC
        | Flags::READ
        | Flags::WRITE
        | Flags::REMOTE_READ
        | Flags::REMOTE_WRITE
        | Flags::RMA_EVENT;
    assert_eq!(
        rdm.caps,
        Flags::MSG
            | Flags::TAGGED
            | rma
            | Flags::SEND
            | Flags::RECV
            | Flags::DIRECTED_RECV
            | Flags::MULTI_RECV
            | Flags::SOURCE
            | Flags::NAMED_RX_CTX
            | Flags::LOCAL_COMM
            | Flags::REMOTE_COMM
    );
    assert_eq!(rdm.mode, Mode::empty());
    assert_eq!(rdm.addr_format, AddrFormat::SOCKADDR_IN);
    assert_eq!(src(rdm), EpAddr::new([10, 0, 0, 5], 0, 0));
    assert_eq!(rdm.dest_addr, None);
    assert_eq!(
        rdm.tx_attr.caps,
        Flags::MSG
            | Flags::TAGGED
            | Flags::RMA
            | Flags::ATOMIC
            | Flags::READ
            | Flags::WRITE
            | Flags::SEND
            | Flags::NAMED_RX_CTX
    );
    assert_eq!(rdm.tx_attr.rma_iov_limit, 1);
    assert_eq!(
        (
            rdm.ep_attr.max_order_raw_size,
            rdm.ep_attr.max_order_war_size
        ),
        (rdm.ep_attr.max_msg_size, 0)
    );
    assert_eq!(
        rdm.rx_attr.caps,
        Flags::MSG
            | Flags::TAGGED
            | Flags::RMA
            | Flags::ATOMIC
            | Flags::REMOTE_READ
            | Flags::REMOTE_WRITE
            | Flags::RMA_EVENT
            | Flags::RECV
            | Flags::DIRECTED_RECV
            | Flags::MULTI_RECV
            | Flags::SOURCE
    );
    assert_eq!(rdm.tx_attr.msg_order, RDM_MSG_ORDER);
    assert_eq!(rdm.rx_attr.msg_order, RDM_MSG_ORDER);
    assert_eq!(rdm.ep_attr.protocol, Protocol::NOSTD_RDM);
    assert_eq!(rdm.ep_attr.max_msg_size, u32::MAX as usize);
    assert_eq!(rdm.ep_attr.mem_tag_format, 0xAAAA_AAAA_AAAA_AAAA);
    assert_eq!((rdm.ep_attr.tx_ctx_cnt, rdm.ep_attr.rx_ctx_cnt), (1, 1));
    let d = &rdm.domain_attr;
    assert_eq!(d.threading, Threading::Safe);
    assert_eq!(
        (d.control_progress, d.data_progress),
        (Progress::Manual, Progress::Manual)
    );
    assert_eq!(d.resource_mgmt, ResourceMgmt::Enabled);
    assert_eq!(d.av_type, AvType::Unspec);
    assert_eq!(d.mr_mode, MrMode::empty());
    assert_eq!((d.mr_key_size, d.cq_data_size), (8, 8));
    assert_eq!(d.caps, Flags::LOCAL_COMM | Flags::REMOTE_COMM);
    assert_eq!(rdm.fabric_attr.name.as_str(), "nostd");
    assert_eq!(rdm.fabric_attr.prov_name.as_str(), "nostd");
    assert_eq!(rdm.fabric_attr.prov_version, fi_version(1, 0));
    assert_eq!(rdm.fabric_attr.api_version, V);

    let dgram = &r[3];
    assert_eq!(
        dgram.caps,
        DGRAM_CAPS | Flags::LOCAL_COMM | Flags::REMOTE_COMM
    );
    assert_eq!(dgram.ep_attr.protocol, Protocol::NOSTD_DGRAM);
    // MTU 1500 - IPv4 20 - UDP 8 - our header 32.
    assert_eq!(dgram.ep_attr.max_msg_size, 1440);
    assert_eq!(dgram.tx_attr.inject_size, 1024);
    assert_eq!(r[4].ep_attr.max_msg_size, 9000 - 60);
    assert_eq!(dgram.tx_attr.msg_order, Order::NONE);

    // The loopback interface reaches only this host.
    assert_eq!(r[2].caps & COMM_CAPS, Flags::LOCAL_COMM);
}

#[test]
fn api_version_is_echoed_and_newer_versions_are_enosys() {
    let mut o = out();
    // libfabric 2.5 (MPICH 5 asks it) is the newest API answered.
    for v in [fi_version(1, 9), fi_version(2, 5)] {
        let n = getinfo(v, None, None, Flags::empty(), None, &prov(), &mut o).unwrap();
        assert!(n > 0);
        assert!(o[..n].iter().all(|i| i.fabric_attr.api_version == v));
    }
    assert_eq!(
        getinfo(
            fi_version(2, 6),
            None,
            None,
            Flags::empty(),
            None,
            &prov(),
            &mut o
        ),
        Err(Errno::ENOSYS)
    );
    assert_eq!(
        getinfo(
            fi_version(3, 0),
            None,
            None,
            Flags::empty(),
            None,
            &prov(),
            &mut o
        ),
        Err(Errno::ENOSYS)
    );
}

#[test]
fn invalid_getinfo_flags_are_ebadflags() {
    assert_eq!(
        run(None, None, Flags::MSG, None, &prov()),
        Err(Errno::EBADFLAGS)
    );
    assert_eq!(
        run(None, None, Flags::INJECT, None, &prov()),
        Err(Errno::EBADFLAGS)
    );
}

#[cfg(feature = "atomic")]
#[test]
fn unsupported_primary_cap_is_enodata() {
    // RMA and atomics are RDM capabilities only.
    for cap in [Flags::RMA, Flags::ATOMIC] {
        let mut h = hints();
        h.caps = cap;
        let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
        assert!(r.iter().all(|i| i.ep_attr.ep_type == EpType::Rdm));
    }
    for cap in [Flags::MULTICAST, Flags::COLLECTIVE, Flags::HMEM] {
        let mut h = hints();
        h.caps = Flags::MSG | cap;
        assert_eq!(
            run(None, None, Flags::empty(), Some(&h), &prov()),
            Err(Errno::ENODATA),
            "{cap:?}"
        );
    }
    // A modifier of an unsupported primary.
    let mut h = hints();
    h.caps = Flags::MSG | Flags::REMOTE_WRITE;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
}

#[test]
fn primaries_are_granted_exactly_and_free_secondaries_unasked() {
    let mut h = hints();
    h.caps = Flags::MSG;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert_eq!(r.len(), 6);
    for i in &r {
        // No TAGGED, no SEND/RECV or DIRECTED_RECV added, no costly FI_SOURCE.
        assert_eq!(
            i.caps & (Flags::PRIMARY_CAPS | Flags::PRIMARY_MODIFIERS),
            Flags::MSG
        );
        assert!(i.caps.contains(Flags::MULTI_RECV));
        assert!(!i.caps.contains(Flags::SOURCE));
        assert_eq!(i.tx_attr.caps, Flags::MSG);
        assert_eq!(i.rx_attr.caps, Flags::MSG | Flags::MULTI_RECV);
        assert!(i.caps.contains(i.rx_attr.caps) && i.caps.contains(i.tx_attr.caps));
    }
    // Neither LOCAL nor REMOTE asked: both where available.
    assert_eq!(r[0].caps & COMM_CAPS, COMM_CAPS);
}

#[test]
fn requested_secondary_caps_are_honoured_or_enodata() {
    let mut h = hints();
    h.caps = Flags::MSG | Flags::SOURCE;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert!(
        r.iter()
            .all(|i| i.caps.contains(Flags::SOURCE) && i.rx_attr.caps.contains(Flags::SOURCE))
    );
    for cap in [
        Flags::RMA_EVENT,
        Flags::FENCE,
        Flags::TRIGGER,
        Flags::SHARED_AV,
        Flags::SOURCE_ERR,
        Flags::RMA_PMEM,
    ] {
        h.caps = Flags::MSG | cap;
        assert_eq!(
            run(None, None, Flags::empty(), Some(&h), &prov()),
            Err(Errno::ENODATA),
            "{cap:?}"
        );
    }
}

/// fi_getinfo(3): FI_RMA_EVENT requires FI_REMOTE_READ and/or FI_REMOTE_WRITE, which
/// naming no RMA modifier at all implies.
#[cfg(feature = "atomic")]
#[test]
fn rma_event_needs_a_remote_side() {
    let mut h = hints();
    let ok = |h: &Info| run(None, None, Flags::empty(), Some(h), &prov());
    h.caps = Flags::RMA | Flags::RMA_EVENT;
    let r = ok(&h).unwrap();
    assert!(r.iter().all(|i| i.caps.contains(Flags::RMA_EVENT)));
    h.caps = Flags::RMA | Flags::READ | Flags::RMA_EVENT;
    assert_eq!(ok(&h), Err(Errno::ENODATA), "an initiator only");
    h.caps = Flags::RMA | Flags::READ | Flags::REMOTE_WRITE | Flags::RMA_EVENT;
    let r = ok(&h).unwrap();
    assert!(r.iter().all(|i| i.caps.contains(Flags::RMA_EVENT)));
    assert!(r.iter().all(|i| !i.caps.contains(Flags::REMOTE_READ)));
}

#[test]
fn local_and_remote_comm_are_not_volunteered_against_the_request() {
    let mut h = hints();
    h.caps = Flags::MSG | Flags::LOCAL_COMM;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert!(r.iter().all(|i| i.caps & COMM_CAPS == Flags::LOCAL_COMM));
    assert!(r.iter().all(|i| i.domain_attr.caps == Flags::LOCAL_COMM));

    h.caps = Flags::MSG | Flags::REMOTE_COMM;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert_eq!(
        r.len(),
        4,
        "the loopback interface cannot reach other hosts"
    );
    assert!(r.iter().all(|i| i.caps & COMM_CAPS == Flags::REMOTE_COMM));

    // Domain caps ask the same way.
    let mut h = hints();
    h.domain_attr.caps = Flags::SHARED_AV;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );

    // A provider whose non-loopback domains cannot loop back.
    let p = with_cfg(ProviderConfig {
        local_comm: false,
        ..ProviderConfig::DEFAULT
    });
    let mut h = hints();
    h.caps = Flags::MSG | Flags::LOCAL_COMM;
    let r = run(None, None, Flags::empty(), Some(&h), &p).unwrap();
    assert!(r.iter().all(|i| i.domain_attr.name.as_str() == "lo"));
}

#[test]
fn context_caps_must_be_consistent_with_info_caps() {
    let mut h = hints();
    h.caps = Flags::MSG;
    h.tx_attr.caps = Flags::MSG | Flags::TAGGED;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
    // An RX-only cap on the TX side.
    let mut h = hints();
    h.tx_attr.caps = Flags::MSG | Flags::RECV;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
    // A secondary cap the endpoint did not ask for.
    let mut h = hints();
    h.caps = Flags::MSG;
    h.rx_attr.caps = Flags::MSG | Flags::RECV | Flags::SOURCE;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
    // A receive-only endpoint cannot have a sending context.
    let mut h = hints();
    h.caps = Flags::MSG | Flags::RECV;
    h.tx_attr.caps = Flags::MSG | Flags::SEND;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
    // Consistent context caps narrow the context; modifiers are implied.
    let mut h = hints();
    h.caps = Flags::MSG | Flags::SOURCE;
    h.rx_attr.caps = Flags::MSG | Flags::RECV | Flags::SOURCE;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    for i in &r {
        assert!(
            (i.caps | Flags::RECV).contains(i.rx_attr.caps),
            "{:?} / {:?}",
            i.caps,
            i.rx_attr.caps
        );
        assert_eq!(
            i.rx_attr.caps,
            Flags::MSG | Flags::RECV | Flags::SOURCE | Flags::MULTI_RECV
        );
        assert_eq!(i.tx_attr.caps, Flags::MSG);
    }
    // With no endpoint caps, context caps select from everything offered.
    let mut h = hints();
    h.tx_attr.caps = Flags::TAGGED | Flags::SEND;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert!(
        r.iter()
            .all(|i| i.ep_attr.ep_type == EpType::Rdm
                && i.tx_attr.caps == Flags::TAGGED | Flags::SEND)
    );
}

#[test]
fn required_mode_must_be_offered() {
    let p = with_cfg(ProviderConfig {
        required_mode: Mode::CONTEXT,
        ..ProviderConfig::DEFAULT
    });
    let h = rdm_hints();
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &p),
        Err(Errno::ENODATA)
    );
    let mut h = rdm_hints();
    h.mode = Mode::CONTEXT | Mode::CONTEXT2 | Mode::MSG_PREFIX;
    let r = run(None, None, Flags::empty(), Some(&h), &p).unwrap();
    assert!(
        r.iter()
            .all(|i| i.mode == Mode::CONTEXT && i.tx_attr.mode == Mode::CONTEXT)
    );
    // A context mode hint that drops the requirement.
    h.rx_attr.mode = Mode::CONTEXT2;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &p),
        Err(Errno::ENODATA)
    );
    // NULL hints: the provider's modes.
    let r = run(None, None, Flags::empty(), None, &p).unwrap();
    assert!(r.iter().all(|i| i.mode == Mode::CONTEXT));
}

#[test]
fn offered_modes_are_cleared_unless_the_provider_uses_them() {
    let mut h = rdm_hints();
    h.mode = Mode::CONTEXT | Mode::CONTEXT2 | Mode::LOCAL_MR;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert!(r.iter().all(|i| i.mode.is_empty()));
    let p = with_cfg(ProviderConfig {
        optional_mode: Mode::CONTEXT,
        ..ProviderConfig::DEFAULT
    });
    let r = run(None, None, Flags::empty(), Some(&h), &p).unwrap();
    assert!(r.iter().all(|i| i.mode == Mode::CONTEXT));
    // Not offered: not required either.
    h.mode = Mode::empty();
    let r = run(None, None, Flags::empty(), Some(&h), &p).unwrap();
    assert!(r.iter().all(|i| i.mode.is_empty()));
}

#[test]
fn ep_type_filters() {
    let mut h = hints();
    h.ep_attr.ep_type = EpType::Dgram;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert_eq!(r.len(), 3);
    assert!(r.iter().all(|i| i.ep_attr.ep_type == EpType::Dgram));
    for t in [EpType::Msg, EpType::SockStream, EpType::SockDgram] {
        h.ep_attr.ep_type = t;
        assert_eq!(
            run(None, None, Flags::empty(), Some(&h), &prov()),
            Err(Errno::ENODATA)
        );
    }
    // FI_EP_MSG once the adapter serves it (and the build has `msg-ep`): after RDM and
    // DGRAM, with RDM's capabilities but those that need several peers.
    let p = with_cfg(ProviderConfig {
        msg_ep: true,
        ..ProviderConfig::DEFAULT
    });
    let all = run(None, None, Flags::empty(), None, &p).unwrap();
    let served = cfg!(feature = "msg-ep");
    assert_eq!(all.len(), if served { 9 } else { 6 });
    assert!(all[..6].iter().all(|i| i.ep_attr.ep_type != EpType::Msg));
    h.ep_attr.ep_type = EpType::Msg;
    match run(None, None, Flags::empty(), Some(&h), &p) {
        Ok(r) => {
            assert!(served);
            assert_eq!(r.len(), 3);
            for i in &r {
                assert_eq!(i.ep_attr.ep_type, EpType::Msg);
                assert_eq!(i.ep_attr.protocol, Protocol::NOSTD_MSG);
                assert!(
                    i.caps
                        .contains(Flags::MSG | Flags::TAGGED | Flags::SEND | Flags::RECV)
                );
                assert!(!i.caps.intersects(Flags::DIRECTED_RECV | Flags::SOURCE));
                assert_eq!(
                    i.caps.contains(Flags::RMA),
                    cfg!(feature = "rma"),
                    "RMA as the build serves it"
                );
            }
        }
        Err(e) => assert!(!served && e == Errno::ENODATA),
    }
    // TAGGED exists only on RDM (and MSG, not offered by default).
    let mut h = hints();
    h.caps = Flags::TAGGED;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert!(r.iter().all(|i| i.ep_attr.ep_type == EpType::Rdm));
}

#[test]
fn addr_formats() {
    let mut h = rdm_hints();
    h.addr_format = AddrFormat::STR;
    let r = run(
        Some("10.0.0.9"),
        Some("4791"),
        Flags::empty(),
        Some(&h),
        &prov(),
    )
    .unwrap();
    assert_eq!(r[0].addr_format, AddrFormat::STR);
    assert_eq!(
        r[0].src_addr.as_deref(),
        Some(&b"fi_addr_nostd://10.0.0.5:0/0\0"[..])
    );
    assert_eq!(
        r[0].dest_addr.as_deref(),
        Some(&b"fi_addr_nostd://10.0.0.9:4791/0\0"[..])
    );

    h.addr_format = AddrFormat::SOCKADDR;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert_eq!(r[0].addr_format, AddrFormat::SOCKADDR);
    assert_eq!(r[0].src_addr.as_ref().unwrap().len(), 16);

    for f in [
        AddrFormat::SOCKADDR_IN6,
        AddrFormat::SOCKADDR_IB,
        AddrFormat::PSMX2,
        AddrFormat(FI_PROV_SPECIFIC),
    ] {
        h.addr_format = f;
        assert_eq!(
            run(None, None, Flags::empty(), Some(&h), &prov()),
            Err(Errno::ENODATA)
        );
    }
}

#[test]
fn attributes_beyond_the_offer_are_enodata() {
    let base = run(None, None, Flags::empty(), Some(&rdm_hints()), &prov()).unwrap()[0].clone();
    type Tweak = fn(&mut Info, &Info);
    let too_big: &[(&str, Tweak)] = &[
        ("inject_size", |h, b| {
            h.tx_attr.inject_size = b.tx_attr.inject_size + 1
        }),
        ("tx size", |h, b| h.tx_attr.size = b.tx_attr.size + 1),
        ("tx iov_limit", |h, b| {
            h.tx_attr.iov_limit = b.tx_attr.iov_limit + 1
        }),
        ("rma_iov_limit", |h, _| h.tx_attr.rma_iov_limit = 2),
        ("rx size", |h, b| h.rx_attr.size = b.rx_attr.size + 1),
        ("rx iov_limit", |h, b| {
            h.rx_attr.iov_limit = b.rx_attr.iov_limit + 1
        }),
        ("max_msg_size", |h, b| {
            h.ep_attr.max_msg_size = b.ep_attr.max_msg_size + 1
        }),
        ("msg_prefix_size", |h, _| h.ep_attr.msg_prefix_size = 8),
        ("max_order_raw_size", |h, b| {
            h.ep_attr.max_order_raw_size = b.ep_attr.max_order_raw_size + 1
        }),
        ("max_order_war_size", |h, _| {
            h.ep_attr.max_order_war_size = 1
        }),
        ("max_order_waw_size", |h, b| {
            h.ep_attr.max_order_waw_size = b.ep_attr.max_order_waw_size + 1
        }),
        ("protocol_version", |h, _| h.ep_attr.protocol_version = 2),
        ("tx_ctx_cnt", |h, _| {
            h.ep_attr.tx_ctx_cnt = ofi_nostd_max_ctx() + 1
        }),
        ("mr_key_size", |h, b| {
            h.domain_attr.mr_key_size = b.domain_attr.mr_key_size + 1
        }),
        ("cq_data_size", |h, _| h.domain_attr.cq_data_size = 9),
        ("cq_cnt", |h, b| {
            h.domain_attr.cq_cnt = b.domain_attr.cq_cnt + 1
        }),
        ("ep_cnt", |h, b| {
            h.domain_attr.ep_cnt = b.domain_attr.ep_cnt + 1
        }),
        ("domain tx_ctx_cnt", |h, b| {
            h.domain_attr.tx_ctx_cnt = b.domain_attr.tx_ctx_cnt + 1
        }),
        ("domain rx_ctx_cnt", |h, b| {
            h.domain_attr.rx_ctx_cnt = b.domain_attr.rx_ctx_cnt + 1
        }),
        ("max_ep_tx_ctx", |h, _| {
            h.domain_attr.max_ep_tx_ctx = ofi_nostd_max_ctx() + 1
        }),
        ("max_ep_rx_ctx", |h, _| {
            h.domain_attr.max_ep_rx_ctx = ofi_nostd_max_ctx() + 1
        }),
        ("max_ep_stx_ctx", |h, b| {
            h.domain_attr.max_ep_stx_ctx = b.domain_attr.max_ep_stx_ctx + 1
        }),
        ("max_ep_srx_ctx", |h, b| {
            h.domain_attr.max_ep_srx_ctx = b.domain_attr.max_ep_srx_ctx + 1
        }),
        ("cntr_cnt", |h, b| {
            h.domain_attr.cntr_cnt = b.domain_attr.cntr_cnt + 1
        }),
        ("mr_iov_limit", |h, b| {
            h.domain_attr.mr_iov_limit = b.domain_attr.mr_iov_limit + 1
        }),
        ("max_err_data", |h, b| {
            h.domain_attr.max_err_data = b.domain_attr.max_err_data + 1
        }),
        ("mr_cnt", |h, b| {
            h.domain_attr.mr_cnt = b.domain_attr.mr_cnt + 1
        }),
        ("protocol", |h, _| h.ep_attr.protocol = Protocol::RXD),
        ("tx tclass", |h, _| {
            h.tx_attr.tclass = TrafficClass::dscp(10)
        }),
        ("tx tclass beyond the labels", |h, _| {
            h.tx_attr.tclass = TrafficClass(TrafficClass::NETWORK_CTRL.0 + 1)
        }),
        ("domain tclass", |h, _| {
            h.domain_attr.tclass = TrafficClass::dscp(46)
        }),
    ];
    for (what, tweak) in too_big {
        let mut h = rdm_hints();
        tweak(&mut h, &base);
        assert_eq!(
            run(None, None, Flags::empty(), Some(&h), &prov()),
            Err(Errno::ENODATA),
            "{what}"
        );
    }
    // Exactly the offer is fine, and the granted values are the offer's.
    let mut h = rdm_hints();
    h.tx_attr.inject_size = base.tx_attr.inject_size;
    h.tx_attr.size = 16;
    h.ep_attr.max_msg_size = base.ep_attr.max_msg_size;
    h.domain_attr.cq_cnt = base.domain_attr.cq_cnt;
    h.ep_attr.protocol = Protocol::NOSTD_RDM;
    h.tx_attr.tclass = TrafficClass::BEST_EFFORT;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert_eq!(r[0].tx_attr.size, base.tx_attr.size);
    assert_eq!(r[0].tx_attr.tclass, TrafficClass::BEST_EFFORT);
    // Every label is granted as asked, on the domain and the transmit context alike.
    for label in [
        TrafficClass::LOW_LATENCY,
        TrafficClass::DEDICATED_ACCESS,
        TrafficClass::BULK_DATA,
        TrafficClass::SCAVENGER,
        TrafficClass::NETWORK_CTRL,
    ] {
        let mut h = rdm_hints();
        h.tx_attr.tclass = label;
        h.domain_attr.tclass = label;
        let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
        assert!(!r.is_empty());
        for i in &r {
            assert_eq!((i.tx_attr.tclass, i.domain_attr.tclass), (label, label));
        }
    }

    // DGRAM's max_msg_size is the MTU's: a 2000-byte datagram fits only eth1 (MTU 9000)
    // and lo.
    let mut h = hints();
    h.ep_attr.ep_type = EpType::Dgram;
    h.ep_attr.max_msg_size = 2000;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    let names: std::vec::Vec<_> = r.iter().map(|i| i.domain_attr.name.as_str()).collect();
    assert_eq!(names, ["eth1", "lo"]);
}

#[test]
fn auth_keys_on_rdm_only() {
    // RDM proves keys in its handshake (up to 64 bytes); DGRAM has no handshake.
    for ep_key in [false, true] {
        let key = AuthKey::from_slice(&[9; 64]).unwrap();
        let mut h = rdm_hints();
        let mut d = hints();
        d.ep_attr.ep_type = EpType::Dgram;
        for x in [&mut h, &mut d] {
            if ep_key {
                x.ep_attr.auth_key = key.clone();
            } else {
                x.domain_attr.auth_key = key.clone();
            }
        }
        let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
        assert!(r.iter().all(|i| i.ep_attr.ep_type == EpType::Rdm));
        assert_eq!(
            run(None, None, Flags::empty(), Some(&d), &prov()),
            Err(Errno::ENODATA)
        );
    }
}

#[test]
fn auth_keys_when_the_adapter_supports_them() {
    let p = with_cfg(ProviderConfig {
        max_auth_key_size: 16,
        ..ProviderConfig::DEFAULT
    });
    let mut h = rdm_hints();
    h.domain_attr.auth_key = AuthKey::from_slice(b"job-42").unwrap();
    let r = run(None, None, Flags::empty(), Some(&h), &p).unwrap();
    assert_eq!(r[0].domain_attr.auth_key.as_slice(), b"job-42");
    h.domain_attr.auth_key = AuthKey::from_slice(&[7; 17]).unwrap();
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &p),
        Err(Errno::ENODATA)
    );
}

#[test]
fn op_flags_and_ordering() {
    let mut h = hints();
    h.tx_attr.op_flags = Flags::DELIVERY_COMPLETE;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert!(
        r.iter().all(|i| i.ep_attr.ep_type == EpType::Rdm),
        "DGRAM cannot know delivery"
    );
    assert_eq!(r[0].tx_attr.op_flags, Flags::DELIVERY_COMPLETE);

    let mut h = hints();
    h.tx_attr.op_flags = Flags::INJECT | Flags::TRANSMIT_COMPLETE;
    h.rx_attr.op_flags = Flags::MULTI_RECV;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov())
            .unwrap()
            .len(),
        6
    );
    h.tx_attr.op_flags = Flags::FENCE;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );

    // Message orderings are RDM's (all but write-after-read and DATA; atomics keep
    // write-after-read too, which Intel MPI and MPICH ask), DGRAM has none; the offer is
    // the whole set, and RAW and WAW hold for data too (max_order_*_size).
    for want in [
        Order::SAS,
        Order::SAS | Order::RAW | Order::WAW,
        Order::RMA_RAW | Order::ATOMIC_WAW | Order::WAS,
        Order::ATOMIC_RAR | Order::ATOMIC_RAW | Order::ATOMIC_WAR | Order::ATOMIC_WAW,
        RDM_MSG_ORDER,
    ] {
        let mut h = hints();
        h.tx_attr.msg_order = want;
        h.rx_attr.msg_order = want;
        let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
        assert!(!r.is_empty());
        assert!(r.iter().all(|i| i.ep_attr.ep_type == EpType::Rdm
            && i.tx_attr.msg_order == RDM_MSG_ORDER
            && i.rx_attr.msg_order == RDM_MSG_ORDER));
    }
    let rdm = &run(None, None, Flags::empty(), Some(&rdm_hints()), &prov()).unwrap()[0];
    assert_eq!(rdm.ep_attr.max_order_war_size, 0);
    assert!(rdm.ep_attr.max_order_raw_size > 0 && rdm.ep_attr.max_order_waw_size > 0);
    for no in [Order::DATA, Order::WAR, Order::RMA_WAR] {
        let mut h = hints();
        h.tx_attr.msg_order = Order::SAS | no;
        assert_eq!(
            run(None, None, Flags::empty(), Some(&h), &prov()),
            Err(Errno::ENODATA),
            "{no:?}"
        );
    }
    // FI_ORDER_NONE asks for the default.
    let r = run(None, None, Flags::empty(), Some(&rdm_hints()), &prov()).unwrap();
    assert_eq!(r[0].tx_attr.msg_order, RDM_MSG_ORDER);

    // comp_order STRICT only where the engine promises it; DATA never.
    let mut h = rdm_hints();
    h.tx_attr.comp_order = CompOrder::STRICT;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
    let p = with_cfg(ProviderConfig {
        comp_order_strict: true,
        ..ProviderConfig::DEFAULT
    });
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &p).unwrap()[0]
            .tx_attr
            .comp_order,
        CompOrder::STRICT
    );
    h.tx_attr.comp_order = CompOrder::NONE;
    h.rx_attr.comp_order = CompOrder::DATA;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &p),
        Err(Errno::ENODATA)
    );
}

#[test]
fn domain_models() {
    // Threading: any model with less concurrency than the adapter's is granted as asked.
    let mut h = rdm_hints();
    h.domain_attr.threading = Threading::Domain;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()).unwrap()[0]
            .domain_attr
            .threading,
        Threading::Domain
    );
    let fw = with_cfg(ProviderConfig {
        threading: Threading::Domain,
        ..ProviderConfig::DEFAULT
    });
    h.domain_attr.threading = Threading::Safe;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &fw),
        Err(Errno::ENODATA)
    );
    h.domain_attr.threading = Threading::Completion;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &fw),
        Err(Errno::ENODATA)
    );
    h.domain_attr.threading = Threading::Unspec;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &fw).unwrap()[0]
            .domain_attr
            .threading,
        Threading::Domain
    );

    // Progress: exactly what was asked, or ENODATA.
    let mut h = rdm_hints();
    h.domain_attr.data_progress = Progress::Auto;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
    let hosted = with_cfg(ProviderConfig {
        progress_auto: true,
        ..ProviderConfig::DEFAULT
    });
    let r = run(None, None, Flags::empty(), Some(&h), &hosted).unwrap();
    assert_eq!(
        (
            r[0].domain_attr.control_progress,
            r[0].domain_attr.data_progress
        ),
        (Progress::Manual, Progress::Auto)
    );
    h.domain_attr.data_progress = Progress::Manual;
    h.domain_attr.control_progress = Progress::Manual;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &hosted).unwrap()[0]
            .domain_attr
            .data_progress,
        Progress::Manual
    );

    // Resource management and AV type are granted as asked.
    let mut h = rdm_hints();
    h.domain_attr.resource_mgmt = ResourceMgmt::Disabled;
    h.domain_attr.av_type = AvType::Table;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert_eq!(r[0].domain_attr.resource_mgmt, ResourceMgmt::Disabled);
    assert_eq!(r[0].domain_attr.av_type, AvType::Table);
    h.domain_attr.av_type = AvType::Map;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()).unwrap()[0]
            .domain_attr
            .av_type,
        AvType::Map
    );
}

#[cfg(feature = "atomic")]
#[test]
fn mr_mode_matching() {
    let mut h = rdm_hints();
    // Offered restrictions are cleared: the provider needs none.
    h.domain_attr.mr_mode =
        MrMode::LOCAL | MrMode::ENDPOINT | MrMode::ALLOCATED | MrMode::PROV_KEY | MrMode::VIRT_ADDR;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()).unwrap()[0]
            .domain_attr
            .mr_mode,
        MrMode::empty()
    );
    // Legacy values are echoed exactly, and cannot be combined.
    for legacy in [MrMode::BASIC, MrMode::SCALABLE] {
        h.domain_attr.mr_mode = legacy;
        assert_eq!(
            run(None, None, Flags::empty(), Some(&h), &prov()).unwrap()[0]
                .domain_attr
                .mr_mode,
            legacy
        );
        h.domain_attr.mr_mode = legacy | MrMode::LOCAL;
        assert_eq!(
            run(None, None, Flags::empty(), Some(&h), &prov()),
            Err(Errno::ENODATA)
        );
    }
    // Before 1.5, mr_mode is an enum; 0 means "BASIC or SCALABLE".
    h.domain_attr.mr_mode = MrMode::empty();
    let mut o = out();
    let n = getinfo(
        fi_version(1, 4),
        None,
        None,
        Flags::empty(),
        Some(&h),
        &prov(),
        &mut o,
    )
    .unwrap();
    assert!(
        o[..n]
            .iter()
            .all(|i| i.domain_attr.mr_mode == MrMode::SCALABLE)
    );
    let n = getinfo(
        fi_version(1, 4),
        None,
        None,
        Flags::empty(),
        None,
        &prov(),
        &mut o,
    )
    .unwrap();
    assert!(
        o[..n]
            .iter()
            .all(|i| i.domain_attr.mr_mode == MrMode::SCALABLE)
    );
    h.domain_attr.mr_mode = MrMode::LOCAL;
    assert_eq!(
        getinfo(
            fi_version(1, 4),
            None,
            None,
            Flags::empty(),
            Some(&h),
            &prov(),
            &mut o
        ),
        Err(Errno::ENODATA)
    );

    // A data path that needs registered local buffers.
    let zc = with_cfg(ProviderConfig {
        mr_mode: MrMode::LOCAL | MrMode::PROV_KEY,
        ..ProviderConfig::DEFAULT
    });
    h.domain_attr.mr_mode = MrMode::empty();
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &zc),
        Err(Errno::ENODATA)
    );
    // PROV_KEY only binds RMA targets, which these hints do not ask for; with FI_RMA
    // it does.
    h.domain_attr.mr_mode = MrMode::LOCAL;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &zc).unwrap()[0]
            .domain_attr
            .mr_mode,
        MrMode::LOCAL
    );
    h.caps |= Flags::RMA;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &zc),
        Err(Errno::ENODATA)
    );
    h.domain_attr.mr_mode = MrMode::LOCAL | MrMode::PROV_KEY;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &zc).unwrap()[0]
            .domain_attr
            .mr_mode,
        MrMode::LOCAL | MrMode::PROV_KEY
    );
    h.caps = h.caps.difference(Flags::RMA);
    // Legacy scheme with local registration: FI_LOCAL_MR mode is required.
    h.domain_attr.mr_mode = MrMode::SCALABLE;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &zc),
        Err(Errno::ENODATA)
    );
    h.mode = Mode::LOCAL_MR;
    let r = run(None, None, Flags::empty(), Some(&h), &zc).unwrap();
    assert_eq!(
        (r[0].domain_attr.mr_mode, r[0].mode),
        (MrMode::SCALABLE, Mode::LOCAL_MR)
    );
    // NULL hints from a pre-1.5 application: the legacy value, with FI_LOCAL_MR.
    let n = getinfo(
        fi_version(1, 4),
        None,
        None,
        Flags::empty(),
        None,
        &zc,
        &mut o,
    )
    .unwrap();
    // Provider keys make the RDM entries (RMA targets) FI_MR_BASIC.
    assert!(o[..n].iter().all(|i| {
        let legacy = match i.ep_attr.ep_type {
            EpType::Rdm => MrMode::BASIC,
            _ => MrMode::SCALABLE,
        };
        i.domain_attr.mr_mode == legacy && i.mode == Mode::LOCAL_MR
    }));
}

#[test]
fn name_filters() {
    let mut h = hints();
    h.domain_attr.name = name("eth1");
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|i| i.domain_attr.name.as_str() == "eth1"));
    h.domain_attr.name = name("mlx5_0");
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );

    let mut h = hints();
    h.fabric_attr.name = name("192.0.2.0/24");
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
    h.fabric_attr.name = name("nostd");
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov())
            .unwrap()
            .len(),
        6
    );

    let mut h = hints();
    h.fabric_attr.prov_name = name("tcp");
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
    h.fabric_attr.prov_name = name("NoStd");
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov())
            .unwrap()
            .len(),
        6
    );
    h.fabric_attr.prov_version = fi_version(1, 1);
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
}

#[test]
fn node_and_service_name_the_destination() {
    let r = run(
        Some("192.168.3.4"),
        Some("4791"),
        Flags::empty(),
        Some(&rdm_hints()),
        &prov(),
    )
    .unwrap();
    assert_eq!(dest(&r[0]), Some(EpAddr::new([192, 168, 3, 4], 4791, 0)));
    // The interface on the destination's subnet comes first.
    assert_eq!(r[0].domain_attr.name.as_str(), "eth1");
    assert_eq!(src(&r[0]), EpAddr::new([192, 168, 7, 2], 0, 0));
    // Service alone: a port on this host, loopback first.
    let r = run(
        None,
        Some("9228"),
        Flags::empty(),
        Some(&rdm_hints()),
        &prov(),
    )
    .unwrap();
    assert_eq!(dest(&r[0]), Some(EpAddr::new([127, 0, 0, 1], 9228, 0)));
    assert_eq!(r[0].domain_attr.name.as_str(), "lo");
    // Host names go through the resolver.
    let p = Provider {
        resolver: &MapResolver,
        ..prov()
    };
    let r = run(Some("peer.example"), Some("1"), Flags::empty(), None, &p).unwrap();
    assert_eq!(dest(&r[0]), Some(EpAddr::new([192, 168, 9, 9], 1, 0)));
    assert_eq!(
        run(Some("peer.example"), None, Flags::NUMERICHOST, None, &p),
        Err(Errno::ENODATA)
    );
    assert_eq!(
        run(Some("other.example"), None, Flags::empty(), None, &p),
        Err(Errno::ENODATA)
    );
    assert_eq!(
        run(Some("peer.example"), None, Flags::empty(), None, &prov()),
        Err(Errno::ENODATA)
    );
}

#[test]
fn fi_source_names_the_local_address() {
    let r = run(
        Some("10.0.0.5"),
        Some("4791"),
        Flags::SOURCE,
        Some(&rdm_hints()),
        &prov(),
    )
    .unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(src(&r[0]), EpAddr::new([10, 0, 0, 5], 4791, 0));
    assert_eq!(r[0].dest_addr, None);
    // An address that is not ours.
    assert_eq!(
        run(Some("10.0.0.6"), None, Flags::SOURCE, None, &prov()),
        Err(Errno::ENODATA)
    );
    // Service only: that port on every interface.
    let r = run(None, Some("5000"), Flags::SOURCE, None, &prov()).unwrap();
    assert_eq!(r.len(), 6);
    assert!(r.iter().all(|i| src(i).port == 5000));
    // The wildcard address.
    assert_eq!(
        run(Some("0.0.0.0"), Some("7"), Flags::SOURCE, None, &prov())
            .unwrap()
            .len(),
        6
    );
    // Neither node nor service.
    assert_eq!(
        run(None, None, Flags::SOURCE, None, &prov()),
        Err(Errno::EINVAL)
    );
    // With FI_SOURCE, hints->dest_addr is read; hints->src_addr is ignored.
    let mut h = rdm_hints();
    h.dest_addr =
        Some(RawAddr::from_slice(&EpAddr::new([10, 0, 0, 7], 99, 3).to_sockaddr_in()).unwrap());
    h.src_addr =
        Some(RawAddr::from_slice(&EpAddr::new([192, 168, 7, 2], 1, 0).to_sockaddr_in()).unwrap());
    let r = run(Some("10.0.0.5"), None, Flags::SOURCE, Some(&h), &prov()).unwrap();
    assert_eq!(src(&r[0]), EpAddr::new([10, 0, 0, 5], 0, 0));
    assert_eq!(dest(&r[0]), Some(EpAddr::new([10, 0, 0, 7], 99, 3)));
}

#[test]
fn hint_addresses() {
    let mut h = rdm_hints();
    h.src_addr = Some(
        RawAddr::from_slice(&EpAddr::new([192, 168, 7, 2], 6000, 2).to_sockaddr_in()).unwrap(),
    );
    h.dest_addr =
        Some(RawAddr::from_slice(&EpAddr::new([10, 0, 0, 7], 99, 3).to_sockaddr_in()).unwrap());
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(src(&r[0]), EpAddr::new([192, 168, 7, 2], 6000, 2));
    assert_eq!(dest(&r[0]), Some(EpAddr::new([10, 0, 0, 7], 99, 3)));
    // node/service override hints->dest_addr.
    let r = run(
        Some("10.0.0.8"),
        Some("1"),
        Flags::empty(),
        Some(&h),
        &prov(),
    )
    .unwrap();
    assert_eq!(dest(&r[0]), Some(EpAddr::new([10, 0, 0, 8], 1, 0)));
    // FI_ADDR_STR hints.
    let mut h = rdm_hints();
    h.addr_format = AddrFormat::STR;
    h.src_addr = Some(RawAddr::from_slice(b"fi_addr_nostd://10.0.0.5:7/1\0").unwrap());
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    assert_eq!(
        r[0].src_addr.as_deref(),
        Some(&b"fi_addr_nostd://10.0.0.5:7/1\0"[..])
    );
    // Zero-length, garbage and IPv6 addresses.
    h.src_addr = Some(RawAddr::new());
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::EINVAL)
    );
    let mut h = rdm_hints();
    h.src_addr = Some(RawAddr::from_slice(&[0xff; 16]).unwrap());
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::EINVAL)
    );
    let mut six = [0u8; 28];
    six[..2].copy_from_slice(&10u16.to_ne_bytes());
    h.src_addr = Some(RawAddr::from_slice(&six).unwrap());
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
}

#[test]
fn addr_str_nodes() {
    let r = run(
        Some("fi_addr_nostd://10.0.0.9:4791/5"),
        None,
        Flags::empty(),
        None,
        &prov(),
    )
    .unwrap();
    assert_eq!(dest(&r[0]), Some(EpAddr::new([10, 0, 0, 9], 4791, 5)));
    assert_eq!(r[0].domain_attr.name.as_str(), "eth0");
    let r = run(
        Some("fi_sockaddr_in://10.0.0.9:4791"),
        None,
        Flags::empty(),
        None,
        &prov(),
    )
    .unwrap();
    assert_eq!(dest(&r[0]), Some(EpAddr::new([10, 0, 0, 9], 4791, 0)));
    // FI_ADDR_STR with a service.
    assert_eq!(
        run(
            Some("fi_sockaddr_in://10.0.0.9:4791"),
            Some("4791"),
            Flags::empty(),
            None,
            &prov()
        ),
        Err(Errno::EINVAL)
    );
    // Malformed bodies.
    for bad in [
        "fi_addr_nostd://10.0.0:1",
        "fi_addr_nostd://10.0.0.1:99999",
        "fi_addr_nostd://10.0.0.1:1/x",
        "fi_sockaddr_in://10.0.0.1:1/2",
        "fi_sockaddr_in://host:1",
        "fi_addr_nostd://256.0.0.1:1",
    ] {
        assert_eq!(
            run(Some(bad), None, Flags::empty(), None, &prov()),
            Err(Errno::EINVAL),
            "{bad}"
        );
    }
    // A format we do not speak.
    assert_eq!(
        run(
            Some("fi_sockaddr_in6://[::1]:1"),
            None,
            Flags::empty(),
            None,
            &prov()
        ),
        Err(Errno::ENODATA)
    );
    // FI_SOURCE with an FI_ADDR_STR node.
    let r = run(
        Some("fi_addr_nostd://127.0.0.1:9/4"),
        None,
        Flags::SOURCE,
        None,
        &prov(),
    )
    .unwrap();
    assert_eq!(src(&r[0]), EpAddr::new([127, 0, 0, 1], 9, 4));
}

#[test]
fn bad_node_and_service_strings() {
    for bad in [
        "10.0.0",
        "10.0.0.1.2",
        "1.2.3.256",
        "01234.1.1.1",
        "",
        "10..0.1",
    ] {
        assert_eq!(
            run(Some(bad), None, Flags::NUMERICHOST, None, &prov()),
            Err(Errno::ENODATA),
            "{bad:?}"
        );
    }
    assert_eq!(
        run(
            Some("10.0.0.1"),
            Some("http"),
            Flags::empty(),
            None,
            &prov()
        ),
        Err(Errno::ENODATA)
    );
    assert_eq!(
        run(
            Some("10.0.0.1"),
            Some("65536"),
            Flags::empty(),
            None,
            &prov()
        ),
        Err(Errno::ENODATA)
    );
    assert_eq!(
        run(Some("10.0.0.1"), Some("-1"), Flags::empty(), None, &prov()),
        Err(Errno::ENODATA)
    );
    assert!(
        run(
            Some("10.0.0.1"),
            Some("65535"),
            Flags::NUMERICHOST,
            None,
            &prov()
        )
        .is_ok()
    );
}

#[test]
fn prov_attr_only() {
    let mut o = out();
    let n = getinfo(
        fi_version(1, 10),
        Some("junk"),
        None,
        Flags::PROV_ATTR_ONLY,
        None,
        &prov(),
        &mut o,
    )
    .unwrap();
    assert_eq!(n, 1);
    assert_eq!(o[0].fabric_attr.prov_name.as_str(), "nostd");
    assert_eq!(o[0].fabric_attr.prov_version, PROV_VERSION);
    assert_eq!(o[0].fabric_attr.api_version, fi_version(1, 10));
    assert_eq!(o[0].domain_attr.name.as_str(), "");
    assert_eq!(o[0].src_addr, None);
    let mut h = hints();
    h.fabric_attr.prov_name = name("verbs");
    assert_eq!(
        getinfo(
            V,
            None,
            None,
            Flags::PROV_ATTR_ONLY,
            Some(&h),
            &prov(),
            &mut o
        ),
        Err(Errno::ENODATA)
    );
    assert_eq!(
        getinfo(V, None, None, Flags::PROV_ATTR_ONLY, None, &prov(), &mut []),
        Err(Errno::ETOOSMALL)
    );
    // Works with no interfaces at all, unlike a normal query.
    let none = Provider {
        interfaces: &[],
        ..prov()
    };
    assert_eq!(
        getinfo(V, None, None, Flags::PROV_ATTR_ONLY, None, &none, &mut o),
        Ok(1)
    );
    assert_eq!(
        getinfo(V, None, None, Flags::empty(), None, &none, &mut o),
        Err(Errno::ENODATA)
    );
}

#[test]
fn mem_tag_format_is_echoed() {
    let mut h = rdm_hints();
    h.ep_attr.mem_tag_format = 0x0000_FFFF_0000_FFFF;
    assert_eq!(
        run(None, None, Flags::empty(), Some(&h), &prov()).unwrap()[0]
            .ep_attr
            .mem_tag_format,
        0x0000_FFFF_0000_FFFF
    );
}

#[test]
fn a_short_slice_keeps_the_best_entries() {
    let mut o: [Info; 2] = Default::default();
    assert_eq!(
        getinfo(V, None, None, Flags::empty(), None, &prov(), &mut o),
        Err(Errno::ETOOSMALL)
    );
    assert!(o.iter().all(|i| i.ep_attr.ep_type == EpType::Rdm));
    assert_eq!(o[0].domain_attr.name.as_str(), "eth0");
    let mut o: [Info; 6] = Default::default();
    assert_eq!(
        getinfo(V, None, None, Flags::empty(), None, &prov(), &mut o),
        Ok(6)
    );
    assert_eq!(
        IFACES.len() * MAX_ENTRIES_PER_INTERFACE,
        if cfg!(feature = "msg-ep") { 9 } else { 6 }
    );
}

#[test]
fn output_fed_back_as_hints_still_matches() {
    // fabtests caps regression: every returned entry, used as hints, returns itself first.
    let all = run(None, None, Flags::empty(), None, &prov()).unwrap();
    for info in &all {
        let mut h = info.clone();
        h.mode = Mode::CONTEXT;
        h.domain_attr.mr_mode =
            MrMode::LOCAL | MrMode::VIRT_ADDR | MrMode::ALLOCATED | MrMode::PROV_KEY;
        let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
        assert_eq!(r[0].caps, info.caps);
        assert_eq!(r[0].domain_attr.name, info.domain_attr.name);
        assert_eq!(r[0].ep_attr.ep_type, info.ep_attr.ep_type);
    }
}

#[test]
fn parsers() {
    assert_eq!(parse_ipv4("0.0.0.0"), Some([0; 4]));
    assert_eq!(parse_ipv4("255.255.255.255"), Some([255; 4]));
    assert_eq!(parse_ipv4("+1.2.3.4"), None);
    assert_eq!(parse_ipv4("1.2.3.4 "), None);
    assert_eq!(
        parse_addr_str("fi_addr_nostd://1.2.3.4:5/6\0"),
        Ok(EpAddr::new([1, 2, 3, 4], 5, 6))
    );
    assert_eq!(
        parse_addr_str("fi_addr_nostd://1.2.3.4"),
        Ok(EpAddr::new([1, 2, 3, 4], 0, 0))
    );
    assert_eq!(
        parse_addr_str("fi_sockaddr://1.2.3.4:80"),
        Ok(EpAddr::new([1, 2, 3, 4], 80, 0))
    );
    assert_eq!(parse_addr_str("1.2.3.4:80"), Err(Errno::EINVAL));
    assert_eq!(parse_addr_str("fi_addr_psmx2://1"), Err(Errno::ENODATA));
    // Round trip through the output encoding.
    let a = EpAddr::new([255, 255, 255, 255], 65535, 65535);
    let raw = encode_addr(AddrFormat::STR, &a);
    assert_eq!(decode_addr(AddrFormat::STR, &raw), Ok(a));
    assert_eq!(
        decode_addr(
            AddrFormat::SOCKADDR_IN,
            &encode_addr(AddrFormat::SOCKADDR_IN, &a)
        ),
        Ok(a)
    );
}

/// A build without RMA and atomics (the `rma` and `atomic` features off) never offers
/// them: asked for, there is nothing to return; unasked, the offer omits them and their
/// modifiers.
#[cfg(not(feature = "rma"))]
#[test]
fn a_build_without_rma_and_atomics_never_offers_them() {
    for cap in [
        Flags::RMA,
        Flags::ATOMIC,
        Flags::MSG | Flags::RMA,
        Flags::TAGGED | Flags::ATOMIC | Flags::READ,
        Flags::MSG | Flags::RMA_EVENT,
    ] {
        let mut h = hints();
        h.caps = cap;
        assert_eq!(
            run(None, None, Flags::empty(), Some(&h), &prov()),
            Err(Errno::ENODATA),
            "{cap:?}"
        );
    }
    let all = run(None, None, Flags::empty(), None, &prov()).unwrap();
    assert!(all.iter().any(|i| i.ep_attr.ep_type == EpType::Rdm));
    let unserved = Flags::RMA
        | Flags::ATOMIC
        | Flags::READ
        | Flags::WRITE
        | Flags::REMOTE_READ
        | Flags::REMOTE_WRITE
        | Flags::RMA_EVENT;
    for i in &all {
        assert!(!i.caps.intersects(unserved), "{:?}", i.caps);
        assert!(!i.tx_attr.caps.intersects(unserved));
        assert!(!i.rx_attr.caps.intersects(unserved));
    }
    // Messages are still there.
    let mut h = hints();
    h.caps = Flags::MSG | Flags::TAGGED;
    assert!(
        !run(None, None, Flags::empty(), Some(&h), &prov())
            .unwrap()
            .is_empty()
    );
}

fn ofi_nostd_max_ctx() -> usize {
    crate::sep::MAX_CTX
}

#[test]
fn scalable_endpoints_are_offered() {
    // FI_NAMED_RX_CTX and up to MAX_CTX contexts per endpoint (fi_scalable_ep).
    let mut h = rdm_hints();
    h.caps = Flags::MSG | Flags::NAMED_RX_CTX;
    h.ep_attr.tx_ctx_cnt = 4;
    h.ep_attr.rx_ctx_cnt = 2;
    let r = run(None, None, Flags::empty(), Some(&h), &prov()).unwrap();
    for i in &r {
        assert!(i.caps.contains(Flags::NAMED_RX_CTX));
        assert_eq!((i.ep_attr.tx_ctx_cnt, i.ep_attr.rx_ctx_cnt), (4, 2));
        assert_eq!(i.domain_attr.max_ep_tx_ctx, crate::sep::MAX_CTX);
        assert_eq!(i.domain_attr.max_ep_rx_ctx, crate::sep::MAX_CTX);
    }
}

/// getinfo at `version`.
fn run_at(version: u32, hints: Option<&Info>, p: &Provider<'_>) -> Result<std::vec::Vec<Info>> {
    let mut o = out();
    let n = getinfo(version, None, None, Flags::empty(), hints, p, &mut o)?;
    Ok(o[..n].to_vec())
}

/// API 2.0's progress (fi_domain(3) of 2.x): one model in `progress` (data_progress's
/// slot) for control and data, FI_PROGRESS_CONTROL_UNIFIED granted where manual
/// progress is; control_progress hints not read. Under 1.x, value 3 names nothing.
#[test]
fn api_2_progress_is_one_model() {
    let v2 = fi_version(2, 5);
    let hosted = with_cfg(ProviderConfig {
        progress_auto: true,
        ..ProviderConfig::DEFAULT
    });
    let mut h = rdm_hints();
    h.domain_attr.data_progress = Progress::ControlUnified;
    let r = run_at(v2, Some(&h), &hosted).unwrap();
    assert!(
        r.iter()
            .all(|i| i.domain_attr.data_progress == Progress::ControlUnified
                && i.domain_attr.control_progress == Progress::ControlUnified)
    );
    assert_eq!(
        run_at(fi_version(1, 17), Some(&h), &hosted),
        Err(Errno::ENODATA)
    );
    assert_eq!(
        run_at(fi_version(2, 0), Some(&h), &hosted).unwrap()[0]
            .domain_attr
            .data_progress,
        Progress::ControlUnified
    );
    // Manual only: CONTROL_UNIFIED still (it is manual progress).
    let manual = with_cfg(ProviderConfig {
        progress_manual: true,
        progress_auto: false,
        ..ProviderConfig::DEFAULT
    });
    assert!(run_at(v2, Some(&h), &manual).is_ok());
    // Auto asked in `progress`: both report it; a control_progress hint is not read.
    h.domain_attr.data_progress = Progress::Auto;
    h.domain_attr.control_progress = Progress::Manual;
    let r = run_at(v2, Some(&h), &hosted).unwrap();
    assert_eq!(
        (
            r[0].domain_attr.control_progress,
            r[0].domain_attr.data_progress
        ),
        (Progress::Auto, Progress::Auto)
    );
    h.domain_attr.data_progress = Progress::Unspec;
    h.domain_attr.control_progress = Progress::Auto;
    let r = run_at(v2, Some(&h), &manual).unwrap();
    assert_eq!(
        (
            r[0].domain_attr.control_progress,
            r[0].domain_attr.data_progress
        ),
        (Progress::Manual, Progress::Manual)
    );
    // Under 1.x both are read as before.
    assert_eq!(
        run_at(fi_version(1, 17), Some(&h), &manual),
        Err(Errno::ENODATA)
    );
}

/// API 2.0's capability bits 45 and 48 (1.x's FI_HMEM_HOST_ALLOC and FI_VARIABLE_MSG):
/// FI_TAGGED_DIRECTED_RECV and FI_EXACT_DIRECTED_RECV are offered on RDM from 2.0
/// only; FI_TAGGED_MULTI_RECV (bit 46) is not offered.
#[test]
fn api_2_directed_receive_caps() {
    let v2 = fi_version(2, 5);
    let both = Flags::TAGGED_DIRECTED_RECV | Flags::EXACT_DIRECTED_RECV;
    // Asking for nothing grants FI_TAGGED_DIRECTED_RECV, never the narrowing
    // FI_EXACT_DIRECTED_RECV (MPICH 5 opens its endpoint with such an info and posts
    // FI_ADDR_UNSPEC receives for MPI_ANY_SOURCE).
    let mut empty = rdm_hints();
    empty.caps = Flags::empty();
    for hints in [None, Some(&empty)] {
        let all = run_at(v2, hints, &prov()).unwrap();
        for i in &all {
            let rdm = i.ep_attr.ep_type == EpType::Rdm;
            assert_eq!(
                i.caps.contains(Flags::TAGGED_DIRECTED_RECV),
                rdm,
                "{:?}",
                i.ep_attr.ep_type
            );
            assert_eq!(i.rx_attr.caps.contains(Flags::TAGGED_DIRECTED_RECV), rdm);
            assert!(!i.caps.contains(Flags::EXACT_DIRECTED_RECV));
            assert!(!i.rx_attr.caps.contains(Flags::EXACT_DIRECTED_RECV));
            assert!(!i.tx_attr.caps.intersects(both));
            assert!(!i.caps.contains(Flags::TAGGED_MULTI_RECV));
        }
    }
    assert!(
        run_at(fi_version(1, 17), None, &prov())
            .unwrap()
            .iter()
            .all(|i| !i.caps.intersects(both | Flags::TAGGED_MULTI_RECV))
    );
    let mut h = rdm_hints();
    h.caps = Flags::TAGGED | Flags::TAGGED_DIRECTED_RECV;
    let r = run_at(v2, Some(&h), &prov()).unwrap();
    assert!(r[0].caps.contains(Flags::TAGGED_DIRECTED_RECV));
    assert!(
        !r[0]
            .caps
            .intersects(Flags::DIRECTED_RECV | Flags::EXACT_DIRECTED_RECV)
    );
    assert_eq!(
        run_at(fi_version(1, 17), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
    h.caps = Flags::TAGGED | Flags::EXACT_DIRECTED_RECV;
    assert!(
        run_at(v2, Some(&h), &prov()).unwrap()[0]
            .caps
            .contains(Flags::EXACT_DIRECTED_RECV)
    );
    // 1.17's FI_VARIABLE_MSG, the same bit: not offered.
    assert_eq!(
        run_at(fi_version(1, 17), Some(&h), &prov()),
        Err(Errno::ENODATA)
    );
    h.caps = Flags::TAGGED | Flags::TAGGED_MULTI_RECV;
    assert_eq!(run_at(v2, Some(&h), &prov()), Err(Errno::ENODATA));
    h.caps = Flags::MSG;
    h.ep_attr.ep_type = EpType::Dgram;
    h.rx_attr.caps = Flags::EXACT_DIRECTED_RECV;
    assert_eq!(run_at(v2, Some(&h), &prov()), Err(Errno::ENODATA));
}

#[test]
fn shared_contexts_are_offered_as_the_build_says() {
    // FI_SHARED_CONTEXT for both sides, on RDM and DGRAM (fi_stx_context,
    // fi_srx_context); without `shared-ctx` it is refused and none offered.
    let n = if cfg!(feature = "shared-ctx") { 16 } else { 0 };
    for dgram in [false, true] {
        let mut h = rdm_hints();
        if dgram {
            h.ep_attr.ep_type = EpType::Dgram;
            h.caps = Flags::MSG;
        }
        h.ep_attr.tx_ctx_cnt = FI_SHARED_CONTEXT;
        h.ep_attr.rx_ctx_cnt = FI_SHARED_CONTEXT;
        let r = run(None, None, Flags::empty(), Some(&h), &prov());
        if n == 0 {
            assert!(r.is_err());
            continue;
        }
        let r = r.unwrap();
        assert!(!r.is_empty());
        for i in &r {
            assert_eq!(i.ep_attr.tx_ctx_cnt, FI_SHARED_CONTEXT);
            assert_eq!(i.ep_attr.rx_ctx_cnt, FI_SHARED_CONTEXT);
            assert_eq!(i.domain_attr.max_ep_stx_ctx, n);
            assert_eq!(i.domain_attr.max_ep_srx_ctx, n);
        }
    }
}
