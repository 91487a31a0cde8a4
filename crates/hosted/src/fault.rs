//! A fault-injecting link wrapper, in the spirit of smoltcp's `FaultInjector`.
//!
//! [`FaultLink`] wraps any [`Link`] (either [`Medium`](wire::link::Medium)) and, driven by
//! a seeded [`Rng`], loses, reorders, duplicates and corrupts frames, separately for the
//! receive and the transmit direction ([`FaultSpec`]). Everything it does is counted in
//! [`FaultStats`], so a test can check that no frame was lost or invented beyond what the
//! counters say.
//!
//! # Determinism
//!
//! Each direction has its own generator, derived from [`FaultConfig::seed`], and draws a
//! fixed number of values per frame that enters the fault stage (a frame taken from the
//! inner link on receive, a frame the stack wrote on transmit; empty polls draw nothing).
//! So the fate of the *k*-th received frame depends only on the seed and *k*, whatever
//! the transmit traffic or the polling pattern, and the same seed with the same frames
//! gives the same outcome, byte for byte. Delay-based holds ([`Hold::Delay`]) read only
//! the virtual clock the caller sets with [`FaultLink::set_now`].
//!
//! # Storage
//!
//! Held (reordered) and duplicated frames are copied, with their [`RxMeta`] / [`TxMeta`],
//! into a fixed pool of [`FaultConfig::slots`] buffers per direction, each as large as the
//! inner link's MTU, allocated once in [`FaultLink::new`]; a frame finds no allocation
//! on its path. When every slot is busy a frame that should be held or duplicated passes
//! normally instead and [`DirStats::no_slot`] counts it. Frames that need no copy (passed,
//! lost, or corrupted on transmit) are never copied: on receive a passed frame is the
//! driver's own buffer, on transmit the stack writes into the driver's buffer directly.
//!
//! # Release of held frames
//!
//! A held frame becomes due after [`Hold::Frames`] later frames of its direction were
//! delivered, or once the clock reaches its [`Hold::Delay`] deadline; a duplicate is due
//! at once. Due receive frames are handed out by the next [`Link::receive`] before any
//! new frame. Due transmit frames are pushed to the inner link by the next
//! [`Link::transmit`], [`Link::receive`], [`FaultLink::poll`], [`FaultLink::set_now`]
//! or [`FaultLink::release_all`], as far as the inner link has room. Frames held for a
//! count of later frames wait forever if no more frames come:
//! [`FaultLink::release_all`] lets them go.

use core::fmt;

use ofi_nostd::time::{Duration, Instant};
use wire::link::{Capabilities, Link, RxMeta, RxToken, TxMeta, TxToken};

use crate::netsim::Rng;

/// When a reordered frame is let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// After this many later frames of the same direction were delivered (0: at the
    /// next poll).
    Frames(u32),
    /// Once the clock set with [`FaultLink::set_now`] has moved this far past the moment
    /// the frame was held.
    Delay(Duration),
}

/// The faults of one direction. Probabilities are in `0.0..=1.0` and drawn
/// independently per frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultSpec {
    /// Probability a frame is lost (nothing else happens to a lost frame).
    pub loss: f64,
    /// Probability a frame is held back (reordered) as [`hold`](Self::hold) says.
    pub reorder: f64,
    /// How long a reordered frame is held back.
    pub hold: Hold,
    /// Probability an extra, uncorrupted copy of a frame is delivered right after it
    /// (before it, if the frame itself is held back).
    pub duplicate: f64,
    /// Probability one random bit of a (non-empty) frame is flipped.
    pub corrupt: f64,
}

impl FaultSpec {
    /// No faults (frames held back, if `reorder` is raised, for 3 later frames).
    pub const NONE: FaultSpec = FaultSpec {
        loss: 0.0,
        reorder: 0.0,
        hold: Hold::Frames(3),
        duplicate: 0.0,
        corrupt: 0.0,
    };
}

impl Default for FaultSpec {
    fn default() -> Self {
        Self::NONE
    }
}

/// Configuration of a [`FaultLink`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultConfig {
    /// Seed of the fault generators (the same seed gives the same faults).
    pub seed: u64,
    /// Faults of received frames.
    pub rx: FaultSpec,
    /// Faults of transmitted frames.
    pub tx: FaultSpec,
    /// Buffers per direction for held and duplicated frames, allocated once.
    pub slots: usize,
}

impl FaultConfig {
    /// No faults yet, 16 slots per direction.
    pub const fn new(seed: u64) -> Self {
        FaultConfig {
            seed,
            rx: FaultSpec::NONE,
            tx: FaultSpec::NONE,
            slots: 16,
        }
    }
}

/// What a [`FaultLink`] did to the frames of one direction.
///
/// Every frame that entered (`seen`) was either lost (`dropped`), delivered, or is still
/// held; duplicates add frames. So at any time
/// `delivered + held == seen - dropped + duplicated`, where `held` is
/// [`FaultLink::held_rx`] / [`FaultLink::held_tx`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirStats {
    /// Frames that entered the fault stage: taken from the inner link (receive) or
    /// written by the stack (transmit).
    pub seen: u64,
    /// Frames lost, including a frame to be held that was longer than a slot.
    pub dropped: u64,
    /// Frames with one bit flipped.
    pub corrupted: u64,
    /// Frames held back for reordering.
    pub reordered: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Holds or duplications skipped because every slot was busy.
    pub no_slot: u64,
    /// Frames handed on: to the stack (receive) or to the inner link (transmit),
    /// duplicates and released held frames included.
    pub delivered: u64,
}

/// What a [`FaultLink`] did, per direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Received frames.
    pub rx: DirStats,
    /// Transmitted frames.
    pub tx: DirStats,
}

/// The dice thrown for one frame (always five draws, whatever the rates).
#[derive(Debug, Clone, Copy, Default)]
struct Fate {
    drop: bool,
    corrupt: bool,
    hold: bool,
    dup: bool,
    /// Random bits choosing the flipped bit.
    bit: u64,
    /// A hold was drawn but no slot was free.
    hold_refused: bool,
}

fn hit(rng: &mut Rng, p: f64) -> bool {
    let x = rng.next_u64();
    p > 0.0 && ((x >> 11) as f64 / (1u64 << 53) as f64) < p
}

impl Fate {
    fn draw(rng: &mut Rng, spec: &FaultSpec) -> Self {
        let drop = hit(rng, spec.loss);
        let corrupt = hit(rng, spec.corrupt);
        let hold = hit(rng, spec.reorder);
        let dup = hit(rng, spec.duplicate);
        let bit = rng.next_u64();
        Fate {
            drop,
            corrupt: corrupt && !drop,
            hold: hold && !drop,
            dup: dup && !drop,
            bit,
            hold_refused: false,
        }
    }
}

/// Flip the bit of `frame` chosen by `bits`; false for an empty frame.
fn flip(frame: &mut [u8], bits: u64) -> bool {
    let nbits = frame.len() as u128 * 8;
    let i = ((u128::from(bits) * nbits) >> 64) as usize;
    match frame.get_mut(i / 8) {
        Some(b) => {
            *b ^= 1 << (i % 8);
            true
        }
        None => false,
    }
}

#[derive(Debug, Clone, Copy)]
enum Release {
    /// After this many more delivered frames.
    Frames(u32),
    /// At this time.
    At(Instant),
}

#[derive(Debug)]
struct Slot<M> {
    buf: Box<[u8]>,
    len: usize,
    meta: M,
    busy: bool,
    seq: u64,
    release: Release,
}

/// State of one direction.
#[derive(Debug)]
struct Dir<M> {
    spec: FaultSpec,
    rng: Rng,
    slots: Vec<Slot<M>>,
    /// Copy of a received frame being corrupted (the driver's buffer is read-only).
    scratch: Box<[u8]>,
    stats: DirStats,
    seq: u64,
    now: Instant,
}

impl<M: Copy + Default> Dir<M> {
    fn new(spec: FaultSpec, seed: u64, slots: usize, mtu: usize, scratch: usize) -> Self {
        Dir {
            spec,
            rng: Rng::new(seed),
            slots: (0..slots)
                .map(|_| Slot {
                    buf: vec![0; mtu].into_boxed_slice(),
                    len: 0,
                    meta: M::default(),
                    busy: false,
                    seq: 0,
                    release: Release::Frames(0),
                })
                .collect(),
            scratch: vec![0; scratch].into_boxed_slice(),
            stats: DirStats::default(),
            seq: 0,
            now: Instant::ZERO,
        }
    }

    fn held(&self) -> usize {
        self.slots.iter().filter(|s| s.busy).count()
    }

    fn has_free(&self) -> bool {
        self.slots.iter().any(|s| !s.busy)
    }

    /// The oldest held frame that may go now.
    fn due(&self) -> Option<usize> {
        let now = self.now;
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.busy
                    && match s.release {
                        Release::Frames(n) => n == 0,
                        Release::At(t) => t <= now,
                    }
            })
            .min_by_key(|(_, s)| s.seq)
            .map(|(i, _)| i)
    }

    /// Count one delivered frame against the holds waiting for later frames.
    fn tick(&mut self) {
        for s in self.slots.iter_mut().filter(|s| s.busy) {
            if let Release::Frames(n) = &mut s.release {
                *n = n.saturating_sub(1);
            }
        }
    }

    fn hold_release(&self) -> Release {
        match self.spec.hold {
            Hold::Frames(n) => Release::Frames(n),
            Hold::Delay(d) => Release::At(self.now + d),
        }
    }

    /// Copy `frame` into a free slot; its index, or `None` if none is free or it is too long.
    fn store(&mut self, frame: &[u8], meta: M, release: Release) -> Option<usize> {
        let seq = self.seq;
        let (i, slot) = self
            .slots
            .iter_mut()
            .enumerate()
            .find(|(_, s)| !s.busy && s.buf.len() >= frame.len())?;
        slot.buf.get_mut(..frame.len())?.copy_from_slice(frame);
        slot.len = frame.len();
        slot.meta = meta;
        slot.busy = true;
        slot.seq = seq;
        slot.release = release;
        self.seq += 1;
        Some(i)
    }

    /// Store an extra copy, counting it.
    fn duplicate(&mut self, frame: &[u8], meta: M) {
        if self.store(frame, meta, Release::Frames(0)).is_some() {
            self.stats.duplicated += 1;
        } else {
            self.stats.no_slot += 1;
        }
    }

    fn release_all(&mut self) {
        for s in self.slots.iter_mut().filter(|s| s.busy) {
            s.release = Release::Frames(0);
        }
    }

    /// Receive: a frame that is lost or held (never handed to the stack now).
    fn divert(&mut self, fate: Fate, meta: M, frame: &[u8]) {
        self.stats.seen += 1;
        if fate.drop {
            self.stats.dropped += 1;
            return;
        }
        let release = self.hold_release();
        match self.store(frame, meta, release) {
            Some(i) => {
                self.stats.reordered += 1;
                if fate.corrupt
                    && let Some(s) = self.slots.get_mut(i)
                    && flip(s.buf.get_mut(..s.len).unwrap_or(&mut []), fate.bit)
                {
                    self.stats.corrupted += 1;
                }
            }
            // Longer than a slot: it cannot be kept, so it is lost.
            None => self.stats.dropped += 1,
        }
        if fate.dup {
            self.duplicate(frame, meta);
        }
    }

    /// Receive: a frame handed to the stack now (possibly corrupted, possibly duplicated).
    fn pass<R>(&mut self, fate: Fate, meta: M, frame: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
        self.stats.seen += 1;
        if fate.hold_refused {
            self.stats.no_slot += 1;
        }
        self.stats.delivered += 1;
        self.tick();
        if fate.dup {
            self.duplicate(frame, meta);
        }
        if fate.corrupt
            && let Some(copy) = self.scratch.get_mut(..frame.len())
        {
            copy.copy_from_slice(frame);
            if flip(copy, fate.bit) {
                self.stats.corrupted += 1;
            }
            return f(copy);
        }
        f(frame)
    }

    /// Take the held frame in slot `i`.
    fn take<R>(&mut self, i: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let Some(s) = self.slots.get_mut(i) else {
            return f(&[]);
        };
        s.busy = false;
        self.stats.delivered += 1;
        f(s.buf.get(..s.len).unwrap_or(&[]))
    }
}

impl Dir<TxMeta> {
    /// Transmit: decide the fate of a frame the stack wrote; true if it goes out now.
    fn transmit(&mut self, meta: TxMeta, frame: &mut [u8]) -> bool {
        let fate = Fate::draw(&mut self.rng, &self.spec);
        self.stats.seen += 1;
        if fate.drop {
            self.stats.dropped += 1;
            return false;
        }
        if fate.dup {
            self.duplicate(frame, meta);
        }
        if fate.corrupt && flip(frame, fate.bit) {
            self.stats.corrupted += 1;
        }
        if fate.hold {
            let release = self.hold_release();
            if self.store(frame, meta, release).is_some() {
                self.stats.reordered += 1;
                return false;
            }
            self.stats.no_slot += 1;
        }
        self.stats.delivered += 1;
        self.tick();
        true
    }
}

/// A link wrapper that injects faults; see the [module documentation](self).
///
/// It holds `2 * (slots + 1)` buffers of the inner link's MTU.
pub struct FaultLink<L> {
    inner: L,
    rx: Dir<RxMeta>,
    tx: Dir<TxMeta>,
    config: FaultConfig,
}

impl<L: fmt::Debug> fmt::Debug for FaultLink<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultLink")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .field("stats", &self.stats())
            .field("held_rx", &self.rx.held())
            .field("held_tx", &self.tx.held())
            .finish()
    }
}

impl<L: Link> FaultLink<L> {
    /// Wrap `inner`, allocating the slots (sized by the inner link's MTU at this moment).
    pub fn new(inner: L, config: FaultConfig) -> Self {
        let mtu = inner.capabilities().mtu;
        // Independent generators per direction, both derived from the one seed.
        let mut seeds = Rng::new(config.seed);
        let (rx_seed, tx_seed) = (seeds.next_u64(), seeds.next_u64());
        FaultLink {
            rx: Dir::new(config.rx, rx_seed, config.slots, mtu, mtu),
            tx: Dir::new(config.tx, tx_seed, config.slots, mtu, 0),
            inner,
            config,
        }
    }

    /// Set the virtual clock (it never goes back) and push due transmit frames out.
    pub fn set_now(&mut self, now: Instant) {
        let now = now.max(self.rx.now);
        self.rx.now = now;
        self.tx.now = now;
        self.poll();
    }

    /// Push due held transmit frames to the inner link as far as it has room; returns
    /// how many went.
    pub fn poll(&mut self) -> usize {
        let mut n = 0;
        while let Some(i) = self.tx.due() {
            let Some(tok) = self.inner.transmit() else {
                break;
            };
            let Some(slot) = self.tx.slots.get_mut(i) else {
                break;
            };
            let sent = tok.consume_with(slot.len, |buf| match buf.get_mut(..slot.len) {
                Some(dst) => {
                    dst.copy_from_slice(slot.buf.get(..slot.len).unwrap_or(&[]));
                    let mut meta = slot.meta;
                    meta.len = slot.len;
                    (meta, true)
                }
                None => (TxMeta::none(), false),
            });
            if !sent {
                break;
            }
            slot.busy = false;
            self.tx.stats.delivered += 1;
            n += 1;
        }
        n
    }

    /// Make every held frame due now (receive ones go out with the next receives) and
    /// push transmit ones out as far as the inner link has room.
    pub fn release_all(&mut self) {
        self.rx.release_all();
        self.tx.release_all();
        self.poll();
    }
}

impl<L> FaultLink<L> {
    /// The configuration it was built with (rates as last set).
    pub fn config(&self) -> &FaultConfig {
        &self.config
    }

    /// Change the receive faults (the generator goes on where it was).
    pub fn set_rx_faults(&mut self, spec: FaultSpec) {
        self.config.rx = spec;
        self.rx.spec = spec;
    }

    /// Change the transmit faults (the generator goes on where it was).
    pub fn set_tx_faults(&mut self, spec: FaultSpec) {
        self.config.tx = spec;
        self.tx.spec = spec;
    }

    /// What it did so far.
    pub fn stats(&self) -> FaultStats {
        FaultStats {
            rx: self.rx.stats,
            tx: self.tx.stats,
        }
    }

    /// Received frames held back (reordered or duplicate copies) not yet delivered.
    pub fn held_rx(&self) -> usize {
        self.rx.held()
    }

    /// Transmitted frames held back (reordered or duplicate copies) not yet handed to
    /// the inner link.
    pub fn held_tx(&self) -> usize {
        self.tx.held()
    }

    /// The virtual clock of [`Hold::Delay`].
    pub fn now(&self) -> Instant {
        self.rx.now
    }

    /// The wrapped link.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The wrapped link, mutably (e.g. to inject or drain a test link).
    pub fn inner_mut(&mut self) -> &mut L {
        &mut self.inner
    }

    /// Unwrap; frames still held are lost.
    pub fn into_inner(self) -> L {
        self.inner
    }
}

enum RxKind<'a, L: Link + 'a> {
    /// A frame of the inner link, handed on now.
    Pass {
        tok: L::RxToken<'a>,
        dir: &'a mut Dir<RxMeta>,
        fate: Fate,
    },
    /// A held frame whose time has come.
    Held {
        dir: &'a mut Dir<RxMeta>,
        slot: usize,
    },
}

/// Receive token of a [`FaultLink`].
pub struct FaultRxToken<'a, L: Link + 'a>(RxKind<'a, L>);

impl<'a, L: Link + 'a> fmt::Debug for FaultRxToken<'a, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held = matches!(self.0, RxKind::Held { .. });
        f.debug_struct("FaultRxToken")
            .field("held", &held)
            .finish_non_exhaustive()
    }
}

impl<'a, L: Link + 'a> RxToken for FaultRxToken<'a, L> {
    fn meta(&self) -> RxMeta {
        match &self.0 {
            RxKind::Pass { tok, .. } => tok.meta(),
            RxKind::Held { dir, slot } => dir.slots.get(*slot).map(|s| s.meta).unwrap_or_default(),
        }
    }

    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        match self.0 {
            RxKind::Pass { tok, dir, fate } => {
                let meta = tok.meta();
                tok.consume(|buf| dir.pass(fate, meta, buf, f))
            }
            RxKind::Held { dir, slot } => dir.take(slot, f),
        }
    }
}

/// Transmit token of a [`FaultLink`]: the stack writes into the inner link's buffer.
pub struct FaultTxToken<'a, L: Link + 'a> {
    tok: L::TxToken<'a>,
    dir: &'a mut Dir<TxMeta>,
}

impl<'a, L: Link + 'a> fmt::Debug for FaultTxToken<'a, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultTxToken").finish_non_exhaustive()
    }
}

impl<'a, L: Link + 'a> TxToken for FaultTxToken<'a, L> {
    fn consume_with<R, F: FnOnce(&mut [u8]) -> (TxMeta, R)>(self, max_len: usize, f: F) -> R {
        let FaultTxToken { tok, dir } = self;
        tok.consume_with(max_len, |buf| {
            let (meta, r) = f(buf);
            match buf.get_mut(..meta.len) {
                Some(frame) if meta.len != 0 => {
                    if dir.transmit(meta, frame) {
                        (meta, r)
                    } else {
                        (TxMeta::none(), r)
                    }
                }
                // Nothing to send (or an invalid length the inner link refuses anyway).
                _ => (meta, r),
            }
        })
    }
}

impl<L: Link> Link for FaultLink<L> {
    type RxToken<'a>
        = FaultRxToken<'a, L>
    where
        Self: 'a;
    type TxToken<'a>
        = FaultTxToken<'a, L>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self) -> Option<Self::RxToken<'_>> {
        self.poll();
        let FaultLink { inner, rx, .. } = self;
        if let Some(slot) = rx.due() {
            return Some(FaultRxToken(RxKind::Held { dir: rx, slot }));
        }
        loop {
            // Draw on a copy first: an empty poll must not consume randomness.
            let mut rng = rx.rng.clone();
            let mut fate = Fate::draw(&mut rng, &rx.spec);
            if fate.hold && !rx.has_free() {
                fate.hold = false;
                fate.hold_refused = true;
            }
            if fate.drop || fate.hold {
                let tok = inner.receive()?;
                rx.rng = rng;
                let meta = tok.meta();
                tok.consume(|buf| rx.divert(fate, meta, buf));
                continue;
            }
            let tok = inner.receive()?;
            rx.rng = rng;
            return Some(FaultRxToken(RxKind::Pass { tok, dir: rx, fate }));
        }
    }

    fn transmit(&mut self) -> Option<Self::TxToken<'_>> {
        self.poll();
        let tok = self.inner.transmit()?;
        Some(FaultTxToken {
            tok,
            dir: &mut self.tx,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use wire::frame::Ipv4Address;
    use wire::link::{Loopback, Medium, UdpAddr};

    type Lo = Loopback<16, 64>;
    const FRAME: usize = 16;

    /// A frame carrying `id` four times, so a flipped bit is detectable and the id is
    /// still recoverable (three copies agree).
    fn frame(id: u32) -> [u8; FRAME] {
        let mut f = [0; FRAME];
        for c in f.chunks_mut(4) {
            c.copy_from_slice(&id.to_le_bytes());
        }
        f
    }

    /// The id of a frame and whether it was corrupted.
    fn decode(buf: &[u8]) -> (u32, bool) {
        assert_eq!(buf.len(), FRAME);
        let ids: Vec<u32> = buf
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let id = if ids[0] == ids[1] || ids[0] == ids[2] {
            ids[0]
        } else {
            ids[1]
        };
        (id, ids.iter().any(|&x| x != id))
    }

    fn peer() -> UdpAddr {
        UdpAddr::new(Ipv4Address::new(10, 0, 0, 2), 7000)
    }

    /// Push `n` frames through the receive side; what the stack saw, in order.
    fn run_rx(config: FaultConfig, n: u32) -> (Vec<(u32, bool, RxMeta)>, FaultLink<Lo>) {
        let mut link = FaultLink::new(Lo::new(Medium::Udp, None), config);
        let mut out = Vec::new();
        let mut next = 0;
        let mut step = 0u64;
        while next < n || link.held_rx() > 0 {
            while next < n && link.inner_mut().inject(&frame(next), Some(peer())) {
                next += 1;
            }
            step += 1;
            link.set_now(Instant::from_micros(step * 10));
            if next == n {
                link.release_all();
            }
            while let Some(tok) = link.receive() {
                let meta = tok.meta();
                let (id, bad) = tok.consume(decode);
                out.push((id, bad, meta));
            }
        }
        (out, link)
    }

    /// A frame that left the inner link: id, corrupted, destination.
    type TxSeen = (u32, bool, Option<UdpAddr>);

    /// Push `n` frames through the transmit side; what left the inner link, in order.
    fn run_tx(config: FaultConfig, n: u32) -> (Vec<TxSeen>, FaultLink<Lo>) {
        let mut link = FaultLink::new(Lo::new(Medium::Udp, None), config);
        let mut out = Vec::new();
        let mut next = 0;
        let mut step = 0u64;
        while next < n || link.held_tx() > 0 {
            while next < n {
                let Some(tok) = link.transmit() else { break };
                tok.consume_with(64, |buf| {
                    buf[..FRAME].copy_from_slice(&frame(next));
                    (TxMeta::to(FRAME, peer()), ())
                });
                next += 1;
            }
            step += 1;
            link.set_now(Instant::from_micros(step * 10));
            if next == n {
                link.release_all();
            }
            while let Some((id, bad, dst)) = link.inner_mut().pop_tx(|dst, buf| {
                let (id, bad) = decode(buf);
                (id, bad, dst)
            }) {
                out.push((id, bad, dst));
            }
        }
        (out, link)
    }

    fn spec(loss: f64, reorder: f64, duplicate: f64, corrupt: f64, hold: Hold) -> FaultSpec {
        FaultSpec {
            loss,
            reorder,
            hold,
            duplicate,
            corrupt,
        }
    }

    /// Check the counters against what came out: every loss, duplicate and corruption
    /// is accounted for, nothing else was lost or invented.
    fn account(out: &[(u32, bool)], n: u32, s: &DirStats) {
        assert_eq!(s.seen, u64::from(n));
        assert_eq!(s.delivered, out.len() as u64);
        assert_eq!(s.delivered, s.seen - s.dropped + s.duplicated, "{s:?}");
        let mut count: HashMap<u32, u64> = HashMap::new();
        for &(id, _) in out {
            assert!(id < n, "invented frame {id}");
            *count.entry(id).or_default() += 1;
        }
        let missing = (0..n).filter(|i| !count.contains_key(i)).count() as u64;
        let extra: u64 = count.values().map(|c| c - 1).sum();
        assert!(count.values().all(|&c| c <= 2));
        assert_eq!(missing, s.dropped, "{s:?}");
        assert_eq!(extra, s.duplicated, "{s:?}");
        let bad = out.iter().filter(|(_, b)| *b).count() as u64;
        assert_eq!(bad, s.corrupted, "{s:?}");
    }

    fn inversions(ids: &[u32]) -> usize {
        ids.windows(2).filter(|w| w[1] < w[0]).count()
    }

    #[test]
    fn no_faults_is_transparent() {
        let (out, link) = run_rx(FaultConfig::new(1), 100);
        let ids: Vec<u32> = out.iter().map(|o| o.0).collect();
        assert_eq!(ids, (0..100).collect::<Vec<_>>());
        assert!(out.iter().all(|o| !o.1 && o.2.src == Some(peer())));
        let s = link.stats().rx;
        assert_eq!((s.seen, s.delivered, s.dropped), (100, 100, 0));
        let (out, _) = run_tx(FaultConfig::new(1), 100);
        let ids: Vec<u32> = out.iter().map(|o| o.0).collect();
        assert_eq!(ids, (0..100).collect::<Vec<_>>());
    }

    fn mixed(seed: u64) -> FaultConfig {
        let mut c = FaultConfig::new(seed);
        c.rx = spec(0.1, 0.1, 0.05, 0.05, Hold::Frames(4));
        c.tx = spec(0.05, 0.2, 0.1, 0.02, Hold::Delay(Duration::from_micros(25)));
        c.slots = 8;
        c
    }

    #[test]
    fn deterministic_per_seed() {
        let (a, la) = run_rx(mixed(42), 2000);
        let (b, lb) = run_rx(mixed(42), 2000);
        assert_eq!(a, b);
        assert_eq!(la.stats(), lb.stats());
        let (c, _) = run_rx(mixed(43), 2000);
        assert_ne!(a, c);

        let (a, la) = run_tx(mixed(42), 2000);
        let (b, lb) = run_tx(mixed(42), 2000);
        assert_eq!(a, b);
        assert_eq!(la.stats(), lb.stats());
        let (c, _) = run_tx(mixed(43), 2000);
        assert_ne!(a, c);
    }

    #[test]
    fn counters_account_for_every_frame() {
        for seed in 0..5 {
            let n = 3000;
            let (out, link) = run_rx(mixed(seed), n);
            let v: Vec<(u32, bool)> = out.iter().map(|o| (o.0, o.1)).collect();
            account(&v, n, &link.stats().rx);
            // Metadata travels with held and duplicated frames.
            assert!(out.iter().all(|o| o.2.src == Some(peer())));
            assert!(inversions(&v.iter().map(|o| o.0).collect::<Vec<_>>()) > 0);
            assert_eq!(link.stats().tx, DirStats::default());

            let (out, link) = run_tx(mixed(seed), n);
            let v: Vec<(u32, bool)> = out.iter().map(|o| (o.0, o.1)).collect();
            account(&v, n, &link.stats().tx);
            assert!(out.iter().all(|o| o.2 == Some(peer())));
            assert!(inversions(&v.iter().map(|o| o.0).collect::<Vec<_>>()) > 0);
            assert_eq!(link.stats().rx, DirStats::default());
        }
    }

    fn near(got: u64, n: u32, p: f64) {
        let want = f64::from(n) * p;
        let sd = (want * (1.0 - p)).sqrt();
        assert!(
            (got as f64 - want).abs() < 5.0 * sd + 1.0,
            "got {got}, want about {want}"
        );
    }

    #[test]
    fn rates_are_roughly_honoured() {
        let n = 20_000;
        let mut c = FaultConfig::new(7);
        c.rx = spec(0.1, 0.05, 0.03, 0.02, Hold::Frames(2));
        c.tx = spec(0.2, 0.1, 0.05, 0.01, Hold::Frames(1));
        c.slots = 64;
        let (_, link) = run_rx(c, n);
        let s = link.stats().rx;
        assert_eq!(s.no_slot, 0);
        near(s.dropped, n, 0.1);
        // The others are drawn on frames that were not lost.
        let kept = n - s.dropped as u32;
        near(s.reordered, kept, 0.05);
        near(s.duplicated, kept, 0.03);
        near(s.corrupted, kept, 0.02);

        let (_, link) = run_tx(c, n);
        let s = link.stats().tx;
        assert_eq!(s.no_slot, 0);
        near(s.dropped, n, 0.2);
        let kept = n - s.dropped as u32;
        near(s.reordered, kept, 0.1);
        near(s.duplicated, kept, 0.05);
        near(s.corrupted, kept, 0.01);
    }

    #[test]
    fn full_pool_passes_frames_and_counts() {
        let mut c = FaultConfig::new(3);
        c.rx = spec(0.0, 1.0, 0.5, 0.0, Hold::Frames(1000));
        c.slots = 2;
        let mut link = FaultLink::new(Lo::new(Medium::Ethernet, None), c);
        for i in 0..10 {
            assert!(link.inner_mut().inject(&frame(i), None));
        }
        let mut got = Vec::new();
        while let Some(tok) = link.receive() {
            got.push(tok.consume(decode).0);
        }
        let s = link.stats().rx;
        assert_eq!(link.held_rx(), 2);
        assert!(s.no_slot > 0);
        assert_eq!(s.delivered + 2, s.seen - s.dropped + s.duplicated);
        link.release_all();
        while let Some(tok) = link.receive() {
            got.push(tok.consume(decode).0);
        }
        let v: Vec<(u32, bool)> = got.iter().map(|&i| (i, false)).collect();
        account(&v, 10, &link.stats().rx);
    }

    #[test]
    fn delay_hold_waits_for_the_clock() {
        let mut c = FaultConfig::new(9);
        c.rx = spec(0.0, 1.0, 0.0, 0.0, Hold::Delay(Duration::from_micros(100)));
        let mut link = FaultLink::new(Lo::new(Medium::Ethernet, None), c);
        assert!(link.inner_mut().inject(&frame(1), None));
        assert!(link.receive().is_none());
        assert_eq!(link.held_rx(), 1);
        link.set_now(Instant::from_micros(99));
        assert!(link.receive().is_none());
        link.set_now(Instant::from_micros(100));
        let tok = link.receive().unwrap();
        assert_eq!(tok.consume(decode), (1, false));
        assert_eq!(link.held_rx(), 0);
    }

    #[test]
    fn bursts_go_through_the_faults() {
        let mut c = FaultConfig::new(5);
        c.tx.loss = 1.0;
        let mut link = FaultLink::new(Lo::new(Medium::Ethernet, None), c);
        let sent = link.transmit_burst(4, |buf| {
            buf[..FRAME].copy_from_slice(&frame(0));
            Some(TxMeta::len(FRAME))
        });
        assert_eq!(sent, 4);
        assert_eq!(link.inner().tx_len(), 0);
        assert_eq!(link.stats().tx.dropped, 4);
    }
}
