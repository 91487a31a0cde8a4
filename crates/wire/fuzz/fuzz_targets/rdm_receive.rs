//! Datagrams from the network into keyed RDM endpoints (spec 4.9 cookies, 4.10 MACs):
//! two simulated hosts with an auth key and one established session, then the input
//! arrives at one of them, spoofed as its peer (the MAC check, the window behind it) or
//! from a stranger (the stateless handshake's cookie check). Nothing may panic, and the
//! endpoints must stay alive: a message posted afterwards completes (delivered or failed)
//! within the retry budget, never hangs.
//!
//! The setup is deterministic (fixed seeds), so the session keys are the same on every
//! run and the seeds in `seeds/rdm_receive/` are genuine sealed datagrams sniffed from
//! it: replays whose MAC verifies, so mutations start past the check. They are written
//! by running the target with `RDM_RECEIVE_DUMP=<dir>` set.
//!
//! The first input byte picks the direction (`% 3`: to host 1 as from host 0, to host 0
//! as from host 1, to host 1 from a stranger) and, with bit 0x80, has the harness refill
//! the CRC after the mutation, so flipped bits reach the parsers behind it.
#![no_main]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Mutex;

use hosted::netsim::{Faults, NetSim};
use hosted::simlink::{Cluster, Node, NodeConfig};
use libfuzzer_sys::fuzz_target;
use ofi_nostd::flags::FI_ADDR_UNSPEC;
use ofi_nostd::info::ProviderConfig;
use ofi_nostd::mem::IoVec;
use ofi_nostd::rdm::RdmConfig;
use ofi_nostd::time::Duration;
use wire::packet::{Packet, flags};

const KEY: &[u8] = b"fuzzed job key";
const B: u64 = Node::BASE;
/// Where a host stranger to both sends from.
const STRANGER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 77), 4791);

fn config() -> NodeConfig {
    NodeConfig {
        provider: ProviderConfig {
            tx_size: 16,
            rx_size: 16,
            ep_cnt: 2,
            cq_cnt: 2,
            cntr_cnt: 2,
            mr_cnt: 2,
            inject_size: 64,
            max_auth_key_size: 64,
            ..ProviderConfig::DEFAULT
        },
        rdm: RdmConfig {
            max_peers: 4,
            reorder_slots: 32,
            unexp_slots: 32,
            unexp_msgs: 32,
            ..RdmConfig::DEFAULT
        },
        cq_size: 64,
        mem_size: 1 << 16,
        auth_key: KEY.to_vec(),
        ..NodeConfig::default()
    }
}

fn addr(c: &Cluster, i: usize) -> SocketAddrV4 {
    let a = c.nodes[i].addr();
    SocketAddrV4::new(Ipv4Addr::from(a.ip), a.port)
}

/// Posts a tagged message of 64 bytes from `from` to `to` (receive first) and runs until
/// its send completes (successfully or not) or `within` passes; whether it completed.
fn exchange(c: &mut Cluster, from: usize, to: usize, tag: u64, within: Duration) -> bool {
    let _ = c.nodes[to]
        .op(|d, ep, _| d.trecv(ep, IoVec::new(B + 4096, 64), FI_ADDR_UNSPEC, tag, 0, tag));
    let a = c.nodes[from].put(0, &[tag as u8; 64]);
    if c.nodes[from]
        .op(|d, ep, m| d.tsend(ep, m, IoVec::new(a, 64), to as u64, tag, tag))
        .is_err()
    {
        return true;
    }
    c.wait_cq(from, false, 1, within).is_ok()
}

/// The two hosts with their session up, and (once) the datagrams it took.
fn setup() -> Cluster {
    let mut c = Cluster::new(NetSim::new(7, Faults::default()), 2, &config()).expect("cluster");
    c.sim.set_tap(true);
    assert!(
        exchange(&mut c, 0, 1, 1, Duration::from_millis(100)),
        "the session comes up"
    );
    assert!(
        exchange(&mut c, 1, 0, 2, Duration::from_millis(100)),
        "and carries data back"
    );
    let tapped = c.sim.take_tapped();
    c.sim.set_tap(false);
    if let Some(dir) = std::env::var_os("RDM_RECEIVE_DUMP") {
        static ONCE: Mutex<bool> = Mutex::new(false);
        let mut done = ONCE.lock().unwrap();
        if !*done {
            *done = true;
            let to1 = addr(&c, 1);
            for (k, d) in tapped.iter().enumerate() {
                let sel = if d.dst == to1 { 0u8 } else { 1 };
                let mut bytes = vec![sel];
                bytes.extend_from_slice(&d.payload);
                let name = format!("sniffed-{k:02}.bin");
                std::fs::write(std::path::Path::new(&dir).join(name), bytes).unwrap();
            }
        }
    }
    c
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    if body.len() > 9000 {
        return;
    }
    let mut c = setup();
    let (to, from) = match sel % 3 {
        0 => (1, addr(&c, 0)),
        1 => (0, addr(&c, 1)),
        _ => (1, STRANGER),
    };
    let mut bytes = body.to_vec();
    if sel & 0x80 != 0 && bytes.len() >= 24 {
        let view = Packet::new_unchecked(&bytes[..]);
        if view.flags() & flags::CRC != 0 && usize::from(view.packet_len()) <= bytes.len() {
            Packet::new_unchecked(&mut bytes[..]).fill_checksum();
        }
    }
    let port = c.sim.add_port(from);
    let dst = addr(&c, to);
    c.sim.send(port, dst, &bytes);
    c.run_for(Duration::from_millis(1));
    // Still alive both ways: a junk datagram never wedges an endpoint (a forged packet
    // cannot end the session either, but the fuzzer can learn a tag from the compare,
    // which no attacker off this process can: only liveness is asserted).
    assert!(
        exchange(&mut c, 0, 1, 3, Duration::from_secs(5)),
        "a message from host 0 after the junk never completed"
    );
    assert!(
        exchange(&mut c, 1, 0, 4, Duration::from_secs(5)),
        "a message from host 1 after the junk never completed"
    );
});
