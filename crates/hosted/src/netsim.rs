//! A deterministic network simulator on virtual time.
//!
//! N ports exchange UDP datagrams (payload plus source and destination socket
//! addresses) through one switch whose faults are drawn from a seeded generator: loss,
//! reordering (extra delay), duplication, corruption (one flipped bit), fixed delay with
//! jitter, and a per-port egress rate with a bounded queue. Nothing reads a clock and
//! nothing depends on hash order or thread timing, so the same seed and the same inputs
//! give the same packets, byte for byte — which is what lets a protocol bug found at
//! seed 1234 be replayed and fixed.

use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddrV4;

use ofi_nostd::time::{Duration, Instant};

/// A small, fixed pseudo-random generator (SplitMix64). Hand-written on purpose: a
/// dependency upgrade must never change what a seed produces.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            ((self.next_u64() as u128 * n as u128) >> 64) as u64
        }
    }

    /// True with probability `p` (0.0 ..= 1.0).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// The faults and timing of the simulated network.
#[derive(Debug, Clone)]
pub struct Faults {
    /// Probability a datagram is lost.
    pub loss: f64,
    /// Probability a datagram is held back by `reorder_delay` (so later ones overtake it).
    pub reorder: f64,
    /// Extra delay of a reordered datagram.
    pub reorder_delay: Duration,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability one bit of a datagram is flipped.
    pub corrupt: f64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Uniform extra delay in `0..=jitter`.
    pub jitter: Duration,
    /// Egress rate of each port in bits per second; 0 means unlimited.
    pub rate_bps: u64,
    /// Datagrams a port may have queued for egress before tail drop.
    pub queue_limit: usize,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(50),
            duplicate: 0.0,
            corrupt: 0.0,
            delay: Duration::from_micros(5),
            jitter: Duration::ZERO,
            rate_bps: 0,
            queue_limit: 4096,
        }
    }
}

/// One datagram in flight or delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// Sender.
    pub src: SocketAddrV4,
    /// Receiver.
    pub dst: SocketAddrV4,
    /// UDP payload.
    pub payload: Vec<u8>,
}

/// What happened to the datagrams, for assertions and goodput tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams handed to the network.
    pub sent: u64,
    /// Datagrams put into a receive queue (duplicates count twice).
    pub delivered: u64,
    /// Lost by the loss model.
    pub lost: u64,
    /// Dropped because a port's egress or receive queue was full.
    pub queue_drops: u64,
    /// Dropped because no port has the destination address.
    pub unroutable: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Corrupted.
    pub corrupted: u64,
    /// Delayed for reordering.
    pub reordered: u64,
    /// Payload bytes delivered.
    pub bytes_delivered: u64,
    /// Dropped because the sending or receiving port was cut off ([`NetSim::set_down`]).
    pub cut: u64,
}

struct InFlight {
    at: Instant,
    order: u64,
    port: usize,
    dgram: Datagram,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    // Min-heap on (time, insertion order): ties resolve the same way every run.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.order).cmp(&(self.at, self.order))
    }
}

struct Port {
    addr: SocketAddrV4,
    down: bool,
    rx: VecDeque<Datagram>,
    /// When the egress wire is free again, in nanoseconds (finer than `Instant`, so
    /// serialisation times do not round away).
    egress_free_ns: u64,
    /// Departure times of the datagrams queued for egress, oldest first.
    egress: VecDeque<Instant>,
}

/// The simulated network.
pub struct NetSim {
    now: Instant,
    rng: Rng,
    faults: Faults,
    ports: Vec<Port>,
    in_flight: BinaryHeap<InFlight>,
    order: u64,
    stats: Stats,
    /// Copies of every datagram sent while tapping (an on-path observer's view).
    tap: Option<Vec<Datagram>>,
}

/// Index of a port of a [`NetSim`].
pub type PortId = usize;

impl NetSim {
    /// An empty network at time zero.
    pub fn new(seed: u64, faults: Faults) -> Self {
        NetSim {
            now: Instant::ZERO,
            rng: Rng::new(seed),
            faults,
            ports: Vec::new(),
            in_flight: BinaryHeap::new(),
            order: 0,
            stats: Stats::default(),
            tap: None,
        }
    }

    /// Starts (`true`) or stops recording a copy of every datagram sent, as an
    /// on-path attacker sees them (hostile-network tests sniff session ids this way).
    pub fn set_tap(&mut self, on: bool) {
        self.tap = on.then(Vec::new);
    }

    /// The datagrams recorded since the last call (nothing when not tapping).
    pub fn take_tapped(&mut self) -> Vec<Datagram> {
        self.tap.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Attaches a port with address `addr`.
    pub fn add_port(&mut self, addr: SocketAddrV4) -> PortId {
        self.ports.push(Port {
            addr,
            down: false,
            rx: VecDeque::new(),
            egress_free_ns: 0,
            egress: VecDeque::new(),
        });
        self.ports.len() - 1
    }

    /// The address of `port`.
    pub fn addr(&self, port: PortId) -> SocketAddrV4 {
        self.ports[port].addr
    }

    /// Virtual time now.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// What happened so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Changes the faults from now on.
    pub fn set_faults(&mut self, faults: Faults) {
        self.faults = faults;
    }

    /// Cuts `port` off the network (`true`) or reconnects it: while cut, everything it
    /// sends and everything sent to it, in flight or new, is dropped.
    pub fn set_down(&mut self, port: PortId, down: bool) {
        self.ports[port].down = down;
    }

    /// Removes `port`'s address from the network (a host that went away for good), so
    /// a new port may take the address.
    pub fn detach(&mut self, port: PortId) {
        let p = &mut self.ports[port];
        p.addr = SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0);
        p.down = true;
        p.rx.clear();
    }

    /// Sends `payload` from `port` to `dst` at the current time.
    pub fn send(&mut self, port: PortId, dst: SocketAddrV4, payload: &[u8]) {
        self.stats.sent += 1;
        if let Some(t) = self.tap.as_mut() {
            t.push(Datagram {
                src: self.ports[port].addr,
                dst,
                payload: payload.to_vec(),
            });
        }
        let f = &self.faults;
        let (delay, jitter, rate, limit) = (f.delay, f.jitter, f.rate_bps, f.queue_limit);
        let p = &mut self.ports[port];
        let now = self.now;
        while p.egress.front().is_some_and(|t| *t <= now) {
            p.egress.pop_front();
        }
        if p.egress.len() >= limit {
            self.stats.queue_drops += 1;
            return;
        }
        // Serialisation at the port's rate: the datagram leaves when the wire is free.
        let now_ns = now.total_micros().saturating_mul(1000);
        let start = p.egress_free_ns.max(now_ns);
        let wire_bits = (payload.len() as u64 + 42) * 8; // Ethernet + IPv4 + UDP headers
        let tx_ns = (wire_bits * 1_000_000_000).checked_div(rate).unwrap_or(0);
        p.egress_free_ns = start + tx_ns;
        let departs = Instant::from_micros(p.egress_free_ns.div_ceil(1000));
        p.egress.push_back(departs);
        let src = p.addr;
        if p.down {
            self.stats.cut += 1;
            return;
        }

        if self.rng.chance(self.faults.loss) {
            self.stats.lost += 1;
            return;
        }
        let copies = if self.rng.chance(self.faults.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        let Some(to) = self
            .ports
            .iter()
            .position(|q| q.addr == dst && !q.addr.ip().is_unspecified())
        else {
            self.stats.unroutable += 1;
            return;
        };
        for _ in 0..copies {
            let mut bytes = payload.to_vec();
            if !bytes.is_empty() && self.rng.chance(self.faults.corrupt) {
                self.stats.corrupted += 1;
                let bit = self.rng.below(bytes.len() as u64 * 8);
                bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
            }
            let mut at =
                departs + delay + Duration::from_micros(self.rng.below(jitter.total_micros() + 1));
            if self.rng.chance(self.faults.reorder) {
                self.stats.reordered += 1;
                at += self.faults.reorder_delay;
            }
            self.order += 1;
            self.in_flight.push(InFlight {
                at,
                order: self.order,
                port: to,
                dgram: Datagram {
                    src,
                    dst,
                    payload: bytes,
                },
            });
        }
    }

    /// When the next datagram arrives, if any is in flight.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.peek().map(|f| f.at)
    }

    /// Advances virtual time to `t` (never backwards), delivering every datagram due by
    /// then into its port's receive queue.
    pub fn advance_to(&mut self, t: Instant) {
        let t = t.max(self.now);
        while self.in_flight.peek().is_some_and(|f| f.at <= t) {
            let Some(f) = self.in_flight.pop() else { break };
            self.now = f.at.max(self.now);
            let port = &mut self.ports[f.port];
            if port.down {
                self.stats.cut += 1;
                continue;
            }
            if port.rx.len() >= self.faults.queue_limit {
                self.stats.queue_drops += 1;
                continue;
            }
            self.stats.delivered += 1;
            self.stats.bytes_delivered += f.dgram.payload.len() as u64;
            port.rx.push_back(f.dgram);
        }
        self.now = t;
    }

    /// Takes the oldest datagram waiting at `port`.
    pub fn recv(&mut self, port: PortId) -> Option<Datagram> {
        self.ports[port].rx.pop_front()
    }

    /// How many datagrams wait at `port`.
    pub fn pending(&self, port: PortId) -> usize {
        self.ports[port].rx.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn addr(i: u8) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, i), 7000)
    }

    fn run(seed: u64, faults: Faults) -> (Vec<(usize, Datagram)>, Stats) {
        let mut sim = NetSim::new(seed, faults);
        let a = sim.add_port(addr(1));
        let b = sim.add_port(addr(2));
        let mut got = Vec::new();
        for i in 0..500u32 {
            sim.send(a, addr(2), &i.to_be_bytes());
            sim.send(b, addr(1), &i.to_le_bytes());
            sim.advance_to(sim.now() + Duration::from_micros(3));
            for p in [a, b] {
                while let Some(d) = sim.recv(p) {
                    got.push((p, d));
                }
            }
        }
        sim.advance_to(sim.now() + Duration::from_secs(1));
        for p in [a, b] {
            while let Some(d) = sim.recv(p) {
                got.push((p, d));
            }
        }
        (got, sim.stats().clone())
    }

    #[test]
    fn lossless_delivers_everything_in_order() {
        let (got, st) = run(1, Faults::default());
        assert_eq!(st.delivered, 1000);
        let to_b: Vec<u32> = got
            .iter()
            .filter(|(p, _)| *p == 1)
            .map(|(_, d)| u32::from_be_bytes(d.payload[..4].try_into().unwrap()))
            .collect();
        assert_eq!(to_b, (0..500).collect::<Vec<_>>());
        assert!(got.iter().all(|(p, d)| d.dst == addr(*p as u8 + 1)));
    }

    #[test]
    fn same_seed_same_packets_other_seed_differs() {
        let f = Faults {
            loss: 0.1,
            reorder: 0.05,
            duplicate: 0.01,
            corrupt: 0.01,
            jitter: Duration::from_micros(4),
            ..Faults::default()
        };
        let (a, sa) = run(42, f.clone());
        let (b, sb) = run(42, f.clone());
        let (c, _) = run(43, f);
        assert_eq!(a, b);
        assert_eq!(sa, sb);
        assert_ne!(a, c);
        assert!(
            sa.lost > 50 && sa.lost < 150,
            "about 10% of 1000 lost: {}",
            sa.lost
        );
        assert!(sa.reordered > 0 && sa.duplicated > 0);
        assert_eq!(sa.delivered, sa.sent - sa.lost + sa.duplicated);
    }

    #[test]
    fn rate_limit_spaces_datagrams() {
        let mut sim = NetSim::new(
            7,
            Faults {
                rate_bps: 8_000_000,
                delay: Duration::ZERO,
                ..Faults::default()
            },
        );
        let a = sim.add_port(addr(1));
        let b = sim.add_port(addr(2));
        // 958 + 42 bytes = 8000 bits = 1 ms each at 8 Mbit/s.
        for _ in 0..3 {
            sim.send(a, addr(2), &[0u8; 958]);
        }
        sim.advance_to(Instant::from_micros(2_000));
        assert_eq!(sim.pending(b), 2);
        sim.advance_to(Instant::from_micros(3_000));
        assert_eq!(sim.pending(b), 3);
    }

    #[test]
    fn cut_ports_drop_both_ways_and_detached_addresses_move() {
        let mut sim = NetSim::new(5, Faults::default());
        let a = sim.add_port(addr(1));
        let b = sim.add_port(addr(2));
        sim.send(a, addr(2), b"in flight");
        sim.set_down(b, true);
        sim.advance_to(Instant::from_millis(1));
        sim.send(b, addr(1), b"from a cut port");
        sim.send(a, addr(2), b"to a cut port");
        sim.advance_to(Instant::from_millis(2));
        assert_eq!((sim.pending(a), sim.pending(b)), (0, 0));
        assert_eq!(sim.stats().cut, 3);
        sim.set_down(b, false);
        sim.send(a, addr(2), b"back");
        sim.advance_to(Instant::from_millis(3));
        assert_eq!(sim.recv(b).map(|d| d.payload), Some(b"back".to_vec()));
        sim.detach(b);
        let c = sim.add_port(addr(2));
        sim.send(a, addr(2), b"new host");
        sim.advance_to(Instant::from_millis(4));
        assert_eq!((sim.pending(b), sim.pending(c)), (0, 1));
    }

    #[test]
    fn unroutable_and_queue_limits_are_counted() {
        let mut sim = NetSim::new(
            3,
            Faults {
                queue_limit: 2,
                ..Faults::default()
            },
        );
        let a = sim.add_port(addr(1));
        let b = sim.add_port(addr(2));
        sim.send(a, addr(9), b"x");
        assert_eq!(sim.stats().unroutable, 1);
        for _ in 0..2 {
            sim.send(a, addr(2), b"y");
            sim.advance_to(sim.now() + Duration::from_millis(1));
        }
        sim.send(a, addr(2), b"z");
        sim.advance_to(sim.now() + Duration::from_millis(1));
        assert_eq!(sim.pending(b), 2);
        assert_eq!(sim.stats().queue_drops, 1, "receive queue full");
    }
}
