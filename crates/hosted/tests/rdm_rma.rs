//! RMA on the simulator: writes (with remote CQ data) and reads of every size class
//! between two RDM endpoints over a lossy, reordering, duplicating, corrupting network;
//! every byte lands exactly where it was aimed and nowhere else.

use hosted::netsim::{Faults, NetSim};
use hosted::simlink::{Cluster, Completion, Node, NodeConfig};
use ofi_nostd::domain::{RmaArgs, RmaIov};
use ofi_nostd::flags::Flags;
use ofi_nostd::mem::IoVec;
use ofi_nostd::mr::MrAttr;
use ofi_nostd::time::Duration;

const B: u64 = Node::BASE;
/// The target's region: offsets `REGION .. REGION + REGION_LEN` of node 1's memory.
const REGION: usize = 0x8_0000;
const REGION_LEN: usize = 0x4_0000;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(131).wrapping_add(i as u64 * 7) >> 1) as u8)
        .collect()
}

/// Runs until node `i` has `n` completions on its receive (`rx`) or transmit CQ.
fn wait(c: &mut Cluster, i: usize, rx: bool, n: usize) -> Vec<Completion> {
    c.wait_cq(i, rx, n, Duration::from_secs(30))
        .unwrap_or_else(|(why, got)| {
            panic!("waiting for {n} completions on node {i}: {why:?}, got {got:?}")
        })
}

#[test]
fn writes_and_reads_of_every_size_survive_a_hostile_network() {
    let faults = Faults {
        loss: 0.10,
        reorder: 0.05,
        duplicate: 0.01,
        corrupt: 0.001,
        ..Faults::default()
    };
    let mut c = Cluster::new(NetSim::new(11, faults), 2, &NodeConfig::default()).unwrap();
    let iov = [IoVec::new(B + REGION as u64, REGION_LEN)];
    let mr = c.nodes[1]
        .dom
        .mr_reg(
            &MrAttr {
                mr_iov: &iov,
                access: Flags::REMOTE_READ | Flags::REMOTE_WRITE,
                requested_key: 0x77,
                ..MrAttr::default()
            },
            Flags::empty(),
        )
        .unwrap();
    let key = c.nodes[1].dom.mrs().key(mr).unwrap();
    // (offset in the region, length): 1 byte to 100 KiB, packed back to back.
    let sizes = [1usize, 7, 64, 1000, 1424, 1425, 4096, 9000, 65_536, 100_000];
    let mut at = 0usize;
    let mut expect = vec![0u8; REGION_LEN];
    for (k, &len) in sizes.iter().enumerate() {
        let data = pattern(k as u64, len);
        let src = c.nodes[0].put(0, &data);
        let rma = RmaIov {
            addr: at as u64,
            len: len as u64,
            key,
        };
        let local = [IoVec::new(src, len)];
        let mut args = RmaArgs::new(&local, 1, rma, 100 + k as u64);
        args.data = 0xDA7A_0000 + k as u64;
        c.nodes[0]
            .op(|d, ep, m| d.writemsg(ep, m, &args, Flags::REMOTE_CQ_DATA))
            .unwrap();
        let done = wait(&mut c, 0, false, 1);
        assert_eq!(done[0].err, None, "write {k}");
        assert_eq!(done[0].context, 100 + k as u64);
        assert_eq!(done[0].flags, Flags::RMA | Flags::WRITE);
        let remote = wait(&mut c, 1, true, 1);
        assert_eq!(
            (remote[0].data, remote[0].len),
            (0xDA7A_0000 + k as u64, len),
            "write {k}"
        );
        expect[at..at + len].copy_from_slice(&data);
        assert_eq!(c.nodes[1].get(REGION, REGION_LEN), &expect[..], "write {k}");

        // Read it back into a cleared buffer.
        let dst = B + 0x4_0000;
        c.nodes[0].mem[0x4_0000..0x4_0000 + len].fill(0);
        let local = [IoVec::new(dst, len)];
        let args = RmaArgs::new(&local, 1, rma, 200 + k as u64);
        c.nodes[0]
            .op(|d, ep, m| d.readmsg(ep, m, &args, Flags::empty()))
            .unwrap();
        let done = wait(&mut c, 0, false, 1);
        assert_eq!(
            (done[0].err, done[0].flags),
            (None, Flags::RMA | Flags::READ)
        );
        assert_eq!(c.nodes[0].get(0x4_0000, len), &data[..], "read {k}");
        at += len;
    }
    // Nothing outside the region was touched, and the lossy network did its worst.
    assert!(c.nodes[1].mem[..REGION].iter().all(|&b| b == 0));
    assert!(
        c.nodes[1].mem[REGION + REGION_LEN..]
            .iter()
            .all(|&b| b == 0)
    );
    assert!(c.sim.stats().duplicated > 0 && c.sim.stats().reordered > 0);
    let s = *c.nodes[0]
        .dom
        .ep(c.nodes[0].ep)
        .unwrap()
        .rdm()
        .unwrap()
        .stats();
    assert!(s.tx_timeout_retransmits + s.tx_fast_retransmits > 0);
}

/// Atomics apply exactly once whatever the network does: three nodes fetch-and-add 1
/// to one counter 200 times each over 10% loss, reordering and duplication; the counter
/// ends at 600 and every fetched value 0..600 came back exactly once.
#[test]
fn fetch_and_add_is_exactly_once_over_a_lossy_network() {
    use ofi_nostd::domain::AtomicArgs;
    use wire::packet::{AtomicDatatype, AtomicOp};
    let faults = Faults {
        loss: 0.10,
        reorder: 0.05,
        duplicate: 0.05,
        ..Faults::default()
    };
    let mut c = Cluster::new(NetSim::new(23, faults), 4, &NodeConfig::default()).unwrap();
    let iov = [IoVec::new(B + REGION as u64, 64)];
    let mr = c.nodes[0]
        .dom
        .mr_reg(
            &MrAttr {
                mr_iov: &iov,
                access: Flags::REMOTE_READ | Flags::REMOTE_WRITE,
                requested_key: 0x99,
                ..MrAttr::default()
            },
            Flags::empty(),
        )
        .unwrap();
    let key = c.nodes[0].dom.mrs().key(mr).unwrap();
    const ROUNDS: usize = 200;
    let mut fetched = Vec::new();
    for round in 0..ROUNDS {
        for n in 1..4 {
            let one = c.nodes[n].put(0, &1u64.to_ne_bytes());
            // Each fetch lands in a slot of its own.
            let slot = 0x100 + round * 8;
            let res = IoVec::new(B + slot as u64, 8);
            let ops = [IoVec::new(one, 8)];
            let args = AtomicArgs {
                iov: &ops,
                addr: 0,
                rma: RmaIov {
                    addr: 0,
                    len: 8,
                    key,
                },
                datatype: AtomicDatatype::U64,
                op: AtomicOp::Sum,
                count: 1,
                context: round as u64,
                data: 0,
            };
            c.nodes[n]
                .op(|d, ep, m| d.fetch_atomicmsg(ep, m, &args, res, Flags::empty()))
                .unwrap();
        }
        for n in 1..4 {
            let done = wait(&mut c, n, false, 1);
            assert_eq!((done[0].err, done[0].context), (None, round as u64));
            let slot = 0x100 + round * 8;
            let v = u64::from_ne_bytes(c.nodes[n].get(slot, 8).try_into().unwrap());
            fetched.push(v);
        }
    }
    let total = u64::from_ne_bytes(c.nodes[0].get(REGION, 8).try_into().unwrap());
    assert_eq!(total, 3 * ROUNDS as u64);
    fetched.sort_unstable();
    assert_eq!(fetched, (0..3 * ROUNDS as u64).collect::<Vec<_>>());
    assert!(c.sim.stats().duplicated > 0 && c.sim.stats().lost > 0);
}
