//! Without feature `auth-mac` (the DPU firmware): no per-packet MAC (spec 4.10). The
//! endpoint never announces AUTH_MAC, so a keyed peer refuses it (AUTH_FAILED);
//! packets leave and are taken as without a key.

use wire::packet::Repr;

use super::*;

/// What a packet leaving gets: nothing, without the feature.
#[derive(Clone, Copy)]
pub(super) struct Seal<'a>(core::marker::PhantomData<&'a ()>);

impl Seal<'_> {
    /// No MAC.
    pub(super) const NONE: Seal<'static> = Seal(core::marker::PhantomData);

    /// Bytes the datagram grows by: none.
    #[inline(always)]
    pub(super) fn room(&self) -> usize {
        0
    }

    /// The datagram length: the packet's.
    #[inline(always)]
    pub(super) fn apply(&self, _buf: &mut [u8], n: usize) -> usize {
        n
    }
}

/// No MAC state.
pub(super) struct MacState<S: Storage>(core::marker::PhantomData<S>);

impl<S: Storage> MacState<S> {
    /// Nothing to allocate.
    pub(super) fn new(_store: &mut S, _auth: &[u8], _peers: usize) -> Result<Self> {
        Ok(MacState(core::marker::PhantomData))
    }

    /// Never on.
    #[inline(always)]
    pub(super) fn on(&self) -> bool {
        false
    }
}

/// Whose key a control packet is sealed with: nobody's, without the feature.
#[derive(Clone, Copy)]
pub(super) enum SealFor {
    /// No MAC.
    Nothing,
    /// Peer `p`'s session.
    Peer(#[allow(dead_code)] usize),
    /// The reset key.
    Reset,
    /// An answer key.
    Answer(#[allow(dead_code)] u64),
}

impl<S: Storage> Rdm<S> {
    /// No MAC.
    #[inline(always)]
    pub(super) fn seal_for(&self, _p: usize) -> Seal<'_> {
        Seal::NONE
    }

    /// Runs `f` without a seal.
    #[inline(always)]
    pub(super) fn with_seal<R>(&self, _s: SealFor, f: impl FnOnce(Seal<'_>) -> R) -> R {
        f(Seal::NONE)
    }

    /// No answer is sealed.
    pub(super) fn answer_to(&self, _h: &wire::packet::HelloRepr) -> Option<u64> {
        None
    }

    /// Never called (`on` is false).
    pub(super) fn mac_dropped(&mut self, _from: &EpAddr, _repr: &Repr<'_>) {}

    /// Nothing announced.
    pub(super) fn mac_caps(&self) -> u64 {
        0
    }

    /// Every peer: a keyed peer refuses us, not we it.
    pub(super) fn mac_peer_ok(&self, _caps: u64) -> bool {
        true
    }

    /// No keys.
    pub(super) fn mac_install(&mut self, _p: usize, _we_initiated: bool) {}

    /// Never called (`on` is false).
    pub(super) fn mac_rx_ok(&self, _from: &EpAddr, _repr: &Repr<'_>, _raw: &[u8]) -> bool {
        true
    }
}
