//! Which optional operation families this build serves (the cargo features `rma`,
//! `atomic` and `msg-ep`), as types the engine's records carry.
//!
//! A record that only an RMA or atomic operation makes holds a [`Rma`] or [`Atomic`]
//! field. In a build without the feature that type has no value, so the record has
//! none either: an `Option` of it is always `None` and the compiler drops every path
//! that handles one, with no `cfg` on those paths (the short and receive paths stay as
//! they are). With the feature both are zero-sized: no record grows.

/// What a type without values holds (the feature is off), or nothing (it is on).
#[cfg(not(feature = "rma"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoRma {}
#[cfg(feature = "rma")]
type NoRma = ();

#[cfg(not(feature = "atomic"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoAtomic {}
#[cfg(feature = "atomic")]
type NoAtomic = ();

#[cfg(not(feature = "msg-ep"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoMsgEp {}
#[cfg(feature = "msg-ep")]
type NoMsgEp = ();

/// Proof that the build serves FI_EP_MSG (connected endpoints, passive endpoints):
/// only [`MsgEp::SERVED`] makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MsgEp(NoMsgEp);

impl MsgEp {
    /// `Some` when the build serves FI_EP_MSG.
    #[cfg(feature = "msg-ep")]
    pub(crate) const SERVED: Option<MsgEp> = Some(MsgEp(()));
    /// `Some` when the build serves FI_EP_MSG.
    #[cfg(not(feature = "msg-ep"))]
    pub(crate) const SERVED: Option<MsgEp> = None;
}

/// Proof that the build serves RMA (FI_RMA): only [`Rma::SERVED`] makes one.
// The field is private so that other modules do not see the type as empty (their
// matches on it stay as written; only code generation knows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rma(NoRma);

/// Proof that the build serves atomics (FI_ATOMIC): only [`Atomic::SERVED`] makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Atomic(NoAtomic);

impl Rma {
    /// `Some` when the build serves RMA.
    #[cfg(feature = "rma")]
    pub(crate) const SERVED: Option<Rma> = Some(Rma(()));
    /// `Some` when the build serves RMA.
    #[cfg(not(feature = "rma"))]
    pub(crate) const SERVED: Option<Rma> = None;
}

impl Atomic {
    /// `Some` when the build serves atomics.
    #[cfg(feature = "atomic")]
    #[cfg_attr(not(test), allow(dead_code, reason = "only atomic posts make one"))]
    pub(crate) const SERVED: Option<Atomic> = Some(Atomic(()));
    /// `Some` when the build serves atomics.
    #[cfg(not(feature = "atomic"))]
    #[cfg_attr(not(test), allow(dead_code, reason = "only atomic posts make one"))]
    pub(crate) const SERVED: Option<Atomic> = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_as_the_features_say_and_free_when_served() {
        assert_eq!(Rma::SERVED.is_some(), cfg!(feature = "rma"));
        assert_eq!(Atomic::SERVED.is_some(), cfg!(feature = "atomic"));
        assert_eq!(MsgEp::SERVED.is_some(), cfg!(feature = "msg-ep"));
        // Zero-sized when served: records that carry one do not grow. Without the
        // feature an `Option` of it has only `None`, so it is zero-sized too.
        assert_eq!(
            core::mem::size_of::<Option<Rma>>(),
            usize::from(cfg!(feature = "rma"))
        );
        assert_eq!(core::mem::size_of::<Rma>(), 0);
    }
}
