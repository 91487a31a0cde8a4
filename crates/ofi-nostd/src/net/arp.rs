//! The ARP cache: a fixed table of next hops in caller storage, the policy that fills it
//! from received ARP messages, the resolution a send asks for, and the small queue of
//! ARP frames waiting for a transmit slot (see the policy in the [module
//! docs](super)).

use heapless::Deque;
use wire::frame::{self, ARP_FRAME_LEN, ArpMessage, ArpOperation, EthernetAddress, Ipv4Address};
use wire::link::{Link, TxMeta, TxToken};

use super::framing::is_group_mac;
use super::{DropReason, NetConfig, NetStats};
use crate::errno::{Errno, Result};
use crate::time::{Duration, Instant};

/// ARP frames (replies and refresh requests) [`Net`](super::Net) can hold until
/// [`Net::poll_tx`](super::Net::poll_tx). More are dropped and counted
/// ([`NetStats::arp_tx_dropped`]); the asker retries.
pub const ARP_TX_QUEUE_LEN: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum ArpState {
    #[default]
    Free,
    /// Asked (or about to ask), no answer yet.
    Pending,
    /// MAC known since `confirmed`.
    Resolved,
    /// `arp_max_requests` requests went unanswered; sends fail until the hold ends
    /// (see [`ArpCache::resolve`]).
    Failed,
}

/// One slot of the ARP cache. Callers only provide storage (`[ArpEntry::EMPTY; N]`);
/// the getters are for diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArpEntry {
    state: ArpState,
    ip: [u8; 4],
    mac: [u8; 6],
    /// When the MAC was last learned or confirmed.
    confirmed: Instant,
    /// Last use by a send, for LRU replacement (learn time for learned entries).
    used: Instant,
    /// Last ARP request sent for `ip`, for rate limiting.
    requested: Option<Instant>,
    /// Requests sent since the entry last became pending.
    asked: u8,
}

impl ArpEntry {
    /// An unused slot.
    pub const EMPTY: ArpEntry = ArpEntry {
        state: ArpState::Free,
        ip: [0; 4],
        mac: [0; 6],
        confirmed: Instant::ZERO,
        used: Instant::ZERO,
        requested: None,
        asked: 0,
    };

    /// The IPv4 address this slot is about, unless it is free.
    pub fn ip(&self) -> Option<[u8; 4]> {
        (self.state != ArpState::Free).then_some(self.ip)
    }

    /// The MAC address, once resolved (possibly expired: see
    /// [`Net::arp_lookup`](super::Net::arp_lookup)).
    pub fn mac(&self) -> Option<[u8; 6]> {
        (self.state == ArpState::Resolved).then_some(self.mac)
    }

    /// Waiting for an ARP reply.
    pub fn is_pending(&self) -> bool {
        self.state == ArpState::Pending
    }

    /// Gave up: its requests went unanswered (see [`NetConfig::arp_max_requests`]).
    pub fn has_failed(&self) -> bool {
        self.state == ArpState::Failed
    }

    fn expired(&self, now: Instant, timeout: Duration) -> bool {
        match self.state {
            ArpState::Free => false,
            ArpState::Pending | ArpState::Failed => now - self.used >= timeout,
            ArpState::Resolved => now - self.confirmed >= timeout,
        }
    }
}

/// An ARP frame waiting in the queue for [`ArpCache::poll_tx`].
#[derive(Debug, Clone, Copy)]
enum PendingArp {
    /// Answer this request.
    Reply(ArpMessage),
    /// Ask for `target`, unicast to a known MAC (refresh) or broadcast.
    Request {
        target: [u8; 4],
        eth_dst: Option<[u8; 6]>,
    },
}

/// What [`ArpCache::resolve`] found for a next hop.
pub(super) enum Hop {
    /// Send to this MAC.
    Mac([u8; 6]),
    /// Not known yet; a request went out (or one did recently).
    Pending,
    /// The hop did not answer: fail the send.
    Failed,
}

/// The ARP cache of a [`Net`](super::Net): its slots in storage `A` and the queue of ARP
/// frames to send. The counters it moves live in the `Net`'s [`NetStats`], and its
/// timeouts in the [`NetConfig`]; both are passed in.
#[derive(Debug)]
pub(super) struct ArpCache<A> {
    /// The slots (`[ArpEntry; N]`, a slice, a box): the cache capacity is their number.
    entries: A,
    /// Replies and refresh requests waiting for [`poll_tx`](Self::poll_tx).
    tx: Deque<PendingArp, ARP_TX_QUEUE_LEN>,
}

impl<A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>> ArpCache<A> {
    /// A cache over `entries`, all slots reset.
    pub(super) fn new(mut entries: A) -> Self {
        for e in entries.as_mut().iter_mut() {
            *e = ArpEntry::EMPTY;
        }
        ArpCache {
            entries,
            tx: Deque::new(),
        }
    }

    /// The slots.
    pub(super) fn entries(&self) -> &[ArpEntry] {
        self.entries.as_ref()
    }

    /// The MAC of `ip` if the cache holds a mapping younger than `timeout`.
    pub(super) fn lookup(&self, now: Instant, ip: [u8; 4], timeout: Duration) -> Option<[u8; 6]> {
        let e = self.find(ip).and_then(|i| self.entries.as_ref().get(i))?;
        (e.state == ArpState::Resolved && !e.expired(now, timeout)).then_some(e.mac)
    }

    /// Forget every entry.
    pub(super) fn flush(&mut self) {
        for e in self.entries.as_mut().iter_mut() {
            *e = ArpEntry::EMPTY;
        }
    }

    /// ARP frames are queued for [`poll_tx`](Self::poll_tx).
    pub(super) fn has_pending_tx(&self) -> bool {
        !self.tx.is_empty()
    }

    fn find(&self, ip: [u8; 4]) -> Option<usize> {
        self.entries
            .as_ref()
            .iter()
            .position(|e| e.state != ArpState::Free && e.ip == ip)
    }

    /// The slot to (re)use: free, else expired, else least recently used.
    fn victim(&self, now: Instant, timeout: Duration, stats: &mut NetStats) -> Option<usize> {
        let (idx, class) = self
            .entries
            .as_ref()
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let class = match e.state {
                    ArpState::Free => 0u8,
                    ArpState::Failed => 1,
                    _ if e.expired(now, timeout) => 1,
                    _ => 2,
                };
                (i, (class, e.used))
            })
            .min_by_key(|&(_, k)| k)?;
        if class.0 == 2 {
            stats.arp_evictions += 1;
        }
        Some(idx)
    }

    /// Refresh the entry of `ip` if there is one; whether there was.
    fn update(&mut self, now: Instant, ip: [u8; 4], mac: [u8; 6]) -> bool {
        let Some(e) = self.find(ip).and_then(|i| self.entries.as_mut().get_mut(i)) else {
            return false;
        };
        e.state = ArpState::Resolved;
        e.mac = mac;
        e.confirmed = now;
        true
    }

    /// Enter `ip` at `mac`, resolved, in the slot [`victim`](Self::victim) picks.
    fn learn(
        &mut self,
        now: Instant,
        ip: [u8; 4],
        mac: [u8; 6],
        timeout: Duration,
        stats: &mut NetStats,
    ) {
        if let Some(e) = self
            .victim(now, timeout, stats)
            .and_then(|i| self.entries.as_mut().get_mut(i))
        {
            *e = ArpEntry {
                state: ArpState::Resolved,
                ip,
                mac,
                confirmed: now,
                used: now,
                ..ArpEntry::EMPTY
            };
        }
    }

    fn queue(&mut self, p: PendingArp, stats: &mut NetStats) {
        if self.tx.push_back(p).is_err() {
            stats.arp_tx_dropped += 1;
        }
    }

    /// Take in a received ARP message: answer requests for our IP, refresh known
    /// senders, learn the on-subnet sender of a request for us; the rest is dropped
    /// with its reason.
    pub(super) fn rx(
        &mut self,
        cfg: &NetConfig,
        stats: &mut NetStats,
        now: Instant,
        msg: &ArpMessage,
    ) -> core::result::Result<(), DropReason> {
        let sender_mac = msg.sender_mac.0;
        let sender_ip = msg.sender_ip.octets();
        let local_ip = cfg.local_ip;
        if sender_mac == [0; 6] || is_group_mac(sender_mac) {
            return Err(DropReason::BadSource);
        }
        if sender_ip == local_ip {
            return Err(if sender_mac == cfg.local_mac {
                DropReason::ArpNotForUs // our own request, looped back
            } else {
                DropReason::ArpConflict
            });
        }
        let learnable = cfg.on_subnet(sender_ip) && cfg.usable_unicast(sender_ip);
        let known = learnable && self.update(now, sender_ip, sender_mac);
        let for_us = msg.target_ip.octets() == local_ip;
        match msg.operation {
            ArpOperation::Request if for_us => {
                if learnable && !known {
                    self.learn(now, sender_ip, sender_mac, cfg.arp_timeout, stats);
                }
                self.queue(PendingArp::Reply(*msg), stats);
                Ok(())
            }
            _ if known => Ok(()),
            ArpOperation::Reply if for_us => Err(DropReason::ArpUnsolicited),
            _ => Err(DropReason::ArpNotForUs),
        }
    }

    /// Send queued ARP frames while the link has transmit slots; returns how many went.
    pub(super) fn poll_tx<L: Link>(
        &mut self,
        cfg: &NetConfig,
        stats: &mut NetStats,
        link: &mut L,
    ) -> usize {
        let mut sent = 0;
        while let Some(&p) = self.tx.front() {
            let Some(tok) = link.transmit() else { break };
            self.tx.pop_front();
            let (mac, ip) = (
                EthernetAddress(cfg.local_mac),
                Ipv4Address::from(cfg.local_ip),
            );
            let ok = tok.consume_with(ARP_FRAME_LEN, |buf| {
                let r = match p {
                    PendingArp::Reply(req) => frame::emit_arp_reply(buf, mac, ip, &req),
                    PendingArp::Request { target, eth_dst } => {
                        let r = frame::emit_arp_request(buf, mac, ip, Ipv4Address::from(target));
                        // A refresh goes unicast to the MAC we already know.
                        if let (Ok(_), Some(d), Some(h)) = (&r, eth_dst, buf.get_mut(..6)) {
                            h.copy_from_slice(&d);
                        }
                        r
                    }
                };
                match r {
                    Ok(n) => (TxMeta::len(n), true),
                    Err(_) => (TxMeta::none(), false),
                }
            });
            if !ok {
                stats.arp_tx_dropped += 1;
                continue;
            }
            sent += 1;
            match p {
                PendingArp::Reply(_) => stats.arp_replies_sent += 1,
                PendingArp::Request { .. } => stats.arp_requests_sent += 1,
            }
        }
        sent
    }

    /// Find the MAC of next hop `hop`, sending or queueing ARP requests as needed.
    ///
    /// A pending hop whose `arp_max_requests`-th request is one interval old has failed;
    /// it stays failed (no requests, [`Hop::Failed`] at once) for `arp_max_requests`
    /// intervals, as long as its resolution took, and the next send after that starts
    /// a new resolution.
    pub(super) fn resolve<L: Link>(
        &mut self,
        cfg: &NetConfig,
        stats: &mut NetStats,
        now: Instant,
        link: &mut L,
        hop: [u8; 4],
    ) -> Result<Hop> {
        if hop == cfg.local_ip {
            return Ok(Hop::Mac(cfg.local_mac));
        }
        let (timeout, interval) = (cfg.arp_timeout, cfg.arp_request_interval);
        let max_asked = cfg.arp_max_requests;
        let hold = Duration::from_micros(interval.total_micros() * u64::from(max_asked));
        let idx = match self.find(hop) {
            Some(i) => i,
            None => {
                let i = self
                    .victim(now, timeout, stats)
                    .ok_or(Errno::EHOSTUNREACH)?;
                if let Some(e) = self.entries.as_mut().get_mut(i) {
                    *e = ArpEntry {
                        state: ArpState::Pending,
                        ip: hop,
                        used: now,
                        ..ArpEntry::EMPTY
                    };
                }
                i
            }
        };
        let room = self.tx.len() < ARP_TX_QUEUE_LEN;
        let Some(e) = self.entries.as_mut().get_mut(idx) else {
            return Err(Errno::EHOSTUNREACH);
        };
        e.used = now;
        let may_ask = e.requested.is_none_or(|t| now - t >= interval);
        if e.state == ArpState::Pending && e.asked >= max_asked && may_ask {
            // The send that finds the failure fails, whatever the hold (even none).
            e.state = ArpState::Failed;
            stats.arp_failures += 1;
            stats.tx_arp_failed += 1;
            return Ok(Hop::Failed);
        }
        if e.state == ArpState::Failed {
            // `requested` is the last request: the failure came one interval later.
            let failed_for = e.requested.map_or(hold, |t| (now - t) - interval);
            if failed_for < hold {
                stats.tx_arp_failed += 1;
                return Ok(Hop::Failed);
            }
            e.state = ArpState::Pending; // ask again
            e.asked = 0;
        }
        if e.state == ArpState::Resolved {
            let age = now - e.confirmed;
            if age < timeout {
                let mac = e.mac;
                let half = Duration::from_micros(timeout.total_micros() / 2);
                if age >= half && may_ask && room {
                    e.requested = Some(now);
                    // Cannot fail: `room` was checked.
                    let _ = self.tx.push_back(PendingArp::Request {
                        target: hop,
                        eth_dst: Some(mac),
                    });
                }
                return Ok(Hop::Mac(mac));
            }
            e.state = ArpState::Pending; // expired: resolve afresh
            e.asked = 0;
        }
        if may_ask {
            let tok = link.transmit().ok_or(Errno::EAGAIN)?;
            let (mac, ip) = (
                EthernetAddress(cfg.local_mac),
                Ipv4Address::from(cfg.local_ip),
            );
            let ok = tok.consume_with(ARP_FRAME_LEN, |buf| {
                match frame::emit_arp_request(buf, mac, ip, Ipv4Address::from(hop)) {
                    Ok(n) => (TxMeta::len(n), true),
                    Err(_) => (TxMeta::none(), false),
                }
            });
            if ok {
                e.requested = Some(now);
                e.asked = e.asked.saturating_add(1);
                stats.arp_requests_sent += 1;
            } else {
                stats.arp_tx_dropped += 1;
            }
        }
        stats.tx_arp_pending += 1;
        Ok(Hop::Pending)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::boxed::Box;

    use wire::link::{Capabilities, Loopback, Medium};

    use super::*;

    const US: [u8; 4] = [10, 0, 0, 1];
    const MAC_US: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    fn cfg() -> NetConfig {
        NetConfig::new(&Capabilities::new(Medium::Ethernet, 1514), US, 7000)
            .with_ethernet(MAC_US, 24, None)
    }

    fn t(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn ip(last: u8) -> [u8; 4] {
        [10, 0, 0, last]
    }

    fn msg(operation: ArpOperation, sender_ip: [u8; 4], target_ip: [u8; 4]) -> ArpMessage {
        ArpMessage {
            operation,
            sender_mac: EthernetAddress(MAC_B),
            sender_ip: Ipv4Address::from(sender_ip),
            target_mac: EthernetAddress([0; 6]),
            target_ip: Ipv4Address::from(target_ip),
        }
    }

    #[test]
    fn slots_are_reset_and_only_known_entries_update() {
        let used = ArpEntry {
            state: ArpState::Resolved,
            ip: ip(9),
            ..ArpEntry::EMPTY
        };
        let mut c = ArpCache::new([used; 2]);
        assert!(c.entries().iter().all(|e| *e == ArpEntry::EMPTY));
        assert!(!c.update(t(0), ip(2), MAC_B), "nothing to refresh");
        assert_eq!(c.find(ip(2)), None);
        let mut stats = NetStats::default();
        c.learn(t(0), ip(2), MAC_B, Duration::from_secs(60), &mut stats);
        assert_eq!(c.lookup(t(1), ip(2), Duration::from_secs(60)), Some(MAC_B));
        assert!(c.update(t(5), ip(2), [2, 0, 0, 0, 0, 0xc]));
        assert_eq!(c.entries()[0].mac(), Some([2, 0, 0, 0, 0, 0xc]));
        // Expired lookups miss, but the entry stays until reused.
        assert_eq!(c.lookup(t(60_005), ip(2), Duration::from_secs(60)), None);
        assert_eq!(c.entries()[0].ip(), Some(ip(2)));
        c.flush();
        assert_eq!(c.find(ip(2)), None);
    }

    #[test]
    fn victims_are_free_then_expired_then_least_recently_used() {
        let timeout = Duration::from_secs(60);
        let mut stats = NetStats::default();
        let mut c = ArpCache::new([ArpEntry::EMPTY; 2]);
        c.learn(t(0), ip(2), MAC_B, timeout, &mut stats);
        c.learn(t(10), ip(3), MAC_B, timeout, &mut stats);
        assert_eq!(stats.arp_evictions, 0, "free slots first");
        assert_eq!(
            c.victim(t(20), timeout, &mut stats),
            Some(0),
            "least recently used"
        );
        assert_eq!(stats.arp_evictions, 1, "a live entry was chosen");
        c.entries.as_mut()[1].confirmed = Instant::ZERO;
        assert_eq!(
            c.victim(t(60_001), timeout, &mut stats),
            Some(0),
            "both expired: older use"
        );
        assert_eq!(stats.arp_evictions, 1, "expired entries are no eviction");
    }

    #[test]
    fn received_messages_follow_the_policy() {
        let (cfg, mut stats) = (cfg(), NetStats::default());
        let mut c = ArpCache::new([ArpEntry::EMPTY; 2]);
        let reply = msg(ArpOperation::Reply, ip(2), US);
        assert_eq!(
            c.rx(&cfg, &mut stats, t(0), &reply),
            Err(DropReason::ArpUnsolicited)
        );
        let other = msg(ArpOperation::Request, ip(2), ip(3));
        assert_eq!(
            c.rx(&cfg, &mut stats, t(0), &other),
            Err(DropReason::ArpNotForUs)
        );
        assert_eq!(c.find(ip(2)), None, "neither creates an entry");
        // A request for us: the sender is learned and a reply queued.
        let req = msg(ArpOperation::Request, ip(2), US);
        assert_eq!(c.rx(&cfg, &mut stats, t(0), &req), Ok(()));
        assert_eq!(c.lookup(t(0), ip(2), cfg.arp_timeout), Some(MAC_B));
        assert!(c.has_pending_tx());
        // Now the sender is known, anything from it refreshes it.
        assert_eq!(c.rx(&cfg, &mut stats, t(1), &other), Ok(()));
        let conflict = msg(ArpOperation::Reply, US, ip(2));
        assert_eq!(
            c.rx(&cfg, &mut stats, t(1), &conflict),
            Err(DropReason::ArpConflict)
        );
    }

    #[test]
    fn resolution_asks_then_uses_the_answer() {
        let (cfg, mut stats) = (cfg(), NetStats::default());
        let mut link: Box<Loopback<8, 1514>> = Box::new(Loopback::new(Medium::Ethernet, None));
        let mut c = ArpCache::new([ArpEntry::EMPTY; 2]);
        let hop = ip(2);
        assert!(matches!(
            c.resolve(&cfg, &mut stats, t(0), &mut *link, hop),
            Ok(Hop::Pending)
        ));
        assert_eq!((stats.arp_requests_sent, link.tx_len()), (1, 1));
        // Within the request interval: still pending, no second request.
        assert!(matches!(
            c.resolve(&cfg, &mut stats, t(1), &mut *link, hop),
            Ok(Hop::Pending)
        ));
        assert_eq!(stats.arp_requests_sent, 1);
        assert!(c.entries()[0].is_pending());
        let reply = msg(ArpOperation::Reply, hop, US);
        assert_eq!(c.rx(&cfg, &mut stats, t(2), &reply), Ok(()));
        assert!(matches!(
            c.resolve(&cfg, &mut stats, t(3), &mut *link, hop),
            Ok(Hop::Mac(MAC_B))
        ));
        assert!(matches!(
            c.resolve(&cfg, &mut stats, t(3), &mut *link, US),
            Ok(Hop::Mac(MAC_US))
        ));
    }
}
