//! Scalable endpoints (fi_endpoint(3) "SCALABLE ENDPOINTS"): one address, several
//! transmit and receive contexts.
//!
//! A scalable endpoint with `n = max(tx_ctx_cnt, rx_ctx_cnt)` contexts is `n` ordinary
//! endpoints of the domain (*context engines*), each with its own engine (queues,
//! sessions, sequence spaces, tag matching) and its own CQ and counter bindings, so two
//! contexts never share mutable state on the data path. Transmit context `k` and
//! receive context `k` are the two halves of engine `k` (a reliable session carries a
//! sender's data and its receiver's acknowledgements, so the halves that talk to the
//! same remote context share it).
//!
//! Every context answers to the endpoint's one address: engine `k`'s endpoint id on the
//! wire is the base id (engine 0's pool slot, below [`CTX_BASE_LIMIT`]) with `k` in the
//! bits above [`CTX_SHIFT`] (wire protocol 3.9). An id without those bits, which is
//! what a peer that knows nothing of contexts sends, reaches context 0; `fi_rx_addr`
//! puts the context index into an fi_addr's top `rx_ctx_bits`, and the AV turns it
//! into those id bits ([`crate::av::Av::resolve_ep`]).
//!
//! One side may be a shared context instead (`tx_ctx_cnt` or `rx_ctx_cnt` =
//! FI_SHARED_CONTEXT; fi_endpoint(3): "a shared context of one type, but a scalable
//! set of contexts of the alternate type"): that side has no contexts to open, every
//! engine is bound to the one shared context bound to the endpoint, and its CQs and
//! counters bind to the scalable endpoint itself. With a shared receive context the
//! engines receive from `fi_enable` of the endpoint on; with a shared transmit
//! context operations are posted to the scalable endpoint (engine 0).

use crate::errno::{Errno, Result};

/// The endpoint-id bit where a context index starts (wire protocol 3.9).
pub const CTX_SHIFT: u32 = wire::packet::EP_CTX_SHIFT;

/// Endpoint ids below this are base ids (pool slots); a domain opens no more
/// endpoints than this.
pub const CTX_BASE_LIMIT: usize = 1 << CTX_SHIFT;

/// The most context indices the endpoint id can carry (its top 6 bits).
pub const CTX_WIRE_MAX: usize = 1 << (16 - CTX_SHIFT);

/// The most transmit (and receive) contexts one scalable endpoint has here
/// (`max_ep_tx_ctx` / `max_ep_rx_ctx`): each is an engine with its own pools.
pub const MAX_CTX: usize = 16;

/// The wire endpoint id of context `index` of the scalable endpoint at `base`.
#[inline]
pub const fn ctx_ep_id(base: u16, index: usize) -> u16 {
    base | ((index as u16) << CTX_SHIFT)
}

/// Splits a wire endpoint id into its base id and its context index.
#[inline]
pub const fn split_ep_id(id: u16) -> (u16, usize) {
    (id & (CTX_BASE_LIMIT as u16 - 1), (id >> CTX_SHIFT) as usize)
}

/// Which half of a context engine a context fid names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtxSide {
    /// A transmit context (`fi_tx_context`).
    Tx,
    /// A receive context (`fi_rx_context`).
    Rx,
}

/// The contexts of one scalable endpoint, kept on its engine 0: the routing table
/// from context index to engine slot, and which contexts are open and enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contexts {
    /// Engines (`max(tx, rx)` of them).
    pub(crate) n: u8,
    /// Transmit contexts asked for at open (0: a shared transmit context).
    pub(crate) tx_cnt: u8,
    /// Receive contexts asked for at open (0: a shared receive context).
    pub(crate) rx_cnt: u8,
    /// Pool slot of each engine.
    pub(crate) slots: [u16; MAX_CTX],
    /// Open transmit / receive contexts (bit per index).
    pub(crate) tx_open: u16,
    pub(crate) rx_open: u16,
    /// Enabled transmit / receive contexts (bit per index).
    pub(crate) tx_enabled: u16,
    pub(crate) rx_enabled: u16,
    /// The shared side is enabled (`fi_enable` of the endpoint).
    pub(crate) shared_enabled: bool,
}

impl Contexts {
    /// A table for `tx` transmit and `rx` receive contexts (each `1..=MAX_CTX`, 0 read
    /// as 1 as libfabric does); -FI_EINVAL otherwise.
    pub fn new(tx: usize, rx: usize) -> Result<Contexts> {
        Self::counted(tx.max(1), rx.max(1))
    }

    /// A table for `n` contexts of the side that is not `shared` (`1..=MAX_CTX`, 0
    /// read as 1), the `shared` side being one shared context; -FI_EINVAL otherwise.
    pub fn with_shared(n: usize, shared: CtxSide) -> Result<Contexts> {
        match shared {
            CtxSide::Tx => Self::counted(0, n.max(1)),
            CtxSide::Rx => Self::counted(n.max(1), 0),
        }
    }

    fn counted(tx: usize, rx: usize) -> Result<Contexts> {
        if tx > MAX_CTX || rx > MAX_CTX {
            return Err(Errno::EINVAL);
        }
        Ok(Contexts {
            n: tx.max(rx) as u8,
            tx_cnt: tx as u8,
            rx_cnt: rx as u8,
            slots: [0; MAX_CTX],
            tx_open: 0,
            rx_open: 0,
            tx_enabled: 0,
            rx_enabled: 0,
            shared_enabled: false,
        })
    }

    /// The side that is a shared context, if one is.
    pub fn shared_side(&self) -> Option<CtxSide> {
        if self.tx_cnt == 0 {
            Some(CtxSide::Tx)
        } else if self.rx_cnt == 0 {
            Some(CtxSide::Rx)
        } else {
            None
        }
    }

    /// How many engines the endpoint has.
    pub fn engines(&self) -> usize {
        self.n as usize
    }

    /// Transmit and receive context counts (0 for a shared side).
    pub fn counts(&self) -> (usize, usize) {
        (self.tx_cnt as usize, self.rx_cnt as usize)
    }

    /// How many contexts (of both sides) are open.
    pub fn open_count(&self) -> u32 {
        self.tx_open.count_ones() + self.rx_open.count_ones()
    }

    /// The pool slot of engine `index`, if it exists.
    #[inline]
    pub(crate) fn slot(&self, index: usize) -> Option<u16> {
        (index < self.n as usize).then(|| self.slots[index])
    }

    fn bits(&mut self, side: CtxSide) -> (&mut u16, &mut u16, u8) {
        match side {
            CtxSide::Tx => (&mut self.tx_open, &mut self.tx_enabled, self.tx_cnt),
            CtxSide::Rx => (&mut self.rx_open, &mut self.rx_enabled, self.rx_cnt),
        }
    }

    /// Opens context `index` of `side`: -FI_EINVAL beyond the count asked for at open,
    /// -FI_EBUSY if it is already open.
    pub fn open(&mut self, side: CtxSide, index: usize) -> Result<()> {
        let (open, _, cnt) = self.bits(side);
        if index >= cnt as usize {
            return Err(Errno::EINVAL);
        }
        if *open & (1 << index) != 0 {
            return Err(Errno::EBUSY);
        }
        *open |= 1 << index;
        Ok(())
    }

    /// Enables an open context; -FI_EOPBADSTATE if it is not open or already enabled.
    pub fn enable(&mut self, side: CtxSide, index: usize) -> Result<()> {
        let (open, enabled, _) = self.bits(side);
        let bit = 1u16 << (index & (MAX_CTX - 1));
        if index >= MAX_CTX || *open & bit == 0 || *enabled & bit != 0 {
            return Err(Errno::EOPBADSTATE);
        }
        *enabled |= bit;
        Ok(())
    }

    /// Whether context `index` of `side` is enabled.
    pub fn enabled(&self, side: CtxSide, index: usize) -> bool {
        let bits = match side {
            CtxSide::Tx => self.tx_enabled,
            CtxSide::Rx => self.rx_enabled,
        };
        index < MAX_CTX && bits & (1 << index) != 0
    }

    /// Closes context `index` of `side`; returns whether engine `index` now has no
    /// open context. -FI_EINVAL if it was not open.
    pub fn close(&mut self, side: CtxSide, index: usize) -> Result<bool> {
        let (open, enabled, _) = self.bits(side);
        let bit = 1u16 << (index & (MAX_CTX - 1));
        if index >= MAX_CTX || *open & bit == 0 {
            return Err(Errno::EINVAL);
        }
        *open &= !bit;
        *enabled &= !bit;
        Ok((self.tx_open | self.rx_open) & bit == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_context_above_the_base() {
        assert_eq!(ctx_ep_id(5, 0), 5);
        assert_eq!(ctx_ep_id(5, 3), 0x0c05);
        assert_eq!(split_ep_id(0x0c05), (5, 3));
        assert_eq!(split_ep_id(1023), (1023, 0));
        assert_eq!(split_ep_id(0xffff), (1023, 63));
        assert_eq!(CTX_WIRE_MAX, 64);
    }

    #[test]
    fn contexts_open_enable_close() {
        assert_eq!(Contexts::new(MAX_CTX + 1, 1), Err(Errno::EINVAL));
        let mut c = Contexts::new(2, 3).unwrap();
        assert_eq!(c.engines(), 3);
        assert_eq!(c.counts(), (2, 3));
        assert_eq!(c.open(CtxSide::Tx, 2), Err(Errno::EINVAL));
        c.open(CtxSide::Tx, 1).unwrap();
        assert_eq!(c.open(CtxSide::Tx, 1), Err(Errno::EBUSY));
        c.open(CtxSide::Rx, 1).unwrap();
        assert_eq!(c.enable(CtxSide::Rx, 0), Err(Errno::EOPBADSTATE));
        c.enable(CtxSide::Tx, 1).unwrap();
        assert!(c.enabled(CtxSide::Tx, 1));
        assert!(!c.enabled(CtxSide::Rx, 1));
        assert_eq!(c.enable(CtxSide::Tx, 1), Err(Errno::EOPBADSTATE));
        assert_eq!(c.close(CtxSide::Tx, 1), Ok(false));
        assert!(!c.enabled(CtxSide::Tx, 1));
        assert_eq!(c.close(CtxSide::Rx, 1), Ok(true));
        assert_eq!(c.close(CtxSide::Rx, 1), Err(Errno::EINVAL));
    }

    #[test]
    fn one_side_may_be_a_shared_context() {
        let mut c = Contexts::with_shared(3, CtxSide::Rx).unwrap();
        assert_eq!((c.engines(), c.counts()), (3, (3, 0)));
        assert_eq!(c.shared_side(), Some(CtxSide::Rx));
        assert_eq!(c.open(CtxSide::Rx, 0), Err(Errno::EINVAL));
        c.open(CtxSide::Tx, 2).unwrap();
        let c = Contexts::with_shared(0, CtxSide::Tx).unwrap();
        assert_eq!((c.engines(), c.shared_side()), (1, Some(CtxSide::Tx)));
        assert_eq!(
            Contexts::with_shared(MAX_CTX + 1, CtxSide::Tx),
            Err(Errno::EINVAL)
        );
        assert_eq!(Contexts::new(2, 2).unwrap().shared_side(), None);
    }
}
