//! The fabric (fi_fabric(3)): the root object, owner of the event queues.
//!
//! Domains are separate objects that count themselves here, so closing a fabric with a
//! domain or an EQ still open is refused with -FI_EBUSY, as fi_fabric(3) requires.

use crate::eq::{EqAttr, EqSlot, EventQueue};
use crate::errno::{Errno, Result};
use crate::info::{FABRIC_NAME, FabricAttr, PROV_NAME};
use crate::pool::{Handle, Pool, Slot};
use crate::storage::Storage;

/// Default EQ depth when `EqAttr::size` is 0.
pub const DEFAULT_EQ_SIZE: usize = 256;

/// An event queue living in fabric `S`'s storage.
pub type EqObj<S> = EventQueue<<S as Storage>::Slice<EqSlot>>;
/// Handle of an event queue.
pub type EqHandle<S> = Handle<EqObj<S>>;

/// An open fabric.
pub struct Fabric<S: Storage> {
    attr: FabricAttr,
    context: u64,
    store: S,
    eqs: Pool<EqObj<S>, S::Slice<Slot<EqObj<S>>>>,
    eq_contexts: S::Slice<u64>,
    domains: usize,
}

impl<S: Storage> Fabric<S> {
    /// `fi_fabric`: opens the fabric `attr` names (as getinfo returned it), with room for
    /// `max_eqs` event queues. A fabric or provider name that is not ours is -FI_EINVAL;
    /// storage that cannot be had is -FI_ENOMEM.
    pub fn open(attr: &FabricAttr, context: u64, mut store: S, max_eqs: usize) -> Result<Self> {
        if (!attr.name.is_empty() && attr.name.as_str() != FABRIC_NAME)
            || (!attr.prov_name.is_empty() && attr.prov_name.as_str() != PROV_NAME)
        {
            return Err(Errno::EINVAL);
        }
        let slots = store.slice(max_eqs, || Slot::VACANT).ok_or(Errno::ENOMEM)?;
        let eq_contexts = store.slice(max_eqs, || 0).ok_or(Errno::ENOMEM)?;
        let mut attr = attr.clone();
        attr.name = crate::info::name(FABRIC_NAME);
        attr.prov_name = crate::info::name(PROV_NAME);
        Ok(Fabric {
            attr,
            context,
            store,
            eqs: Pool::new(slots),
            eq_contexts,
            domains: 0,
        })
    }

    /// The fabric's attributes.
    pub fn attr(&self) -> &FabricAttr {
        &self.attr
    }

    /// The application's context of the fabric.
    pub fn context(&self) -> u64 {
        self.context
    }

    /// `fi_eq_open`. `EqAttr::size` 0 means [`DEFAULT_EQ_SIZE`].
    pub fn eq_open(&mut self, attr: &EqAttr, context: u64) -> Result<EqHandle<S>> {
        attr.validate()?;
        let size = if attr.size == 0 {
            DEFAULT_EQ_SIZE
        } else {
            attr.size
        };
        if self.eqs.is_full() {
            return Err(Errno::ENOMEM);
        }
        let storage = self
            .store
            .slice(size, || EqSlot::EMPTY)
            .ok_or(Errno::ENOMEM)?;
        let eq = EventQueue::new(&EqAttr { size, ..*attr }, storage)?;
        let h = self.eqs.insert(eq).map_err(|_| Errno::ENOMEM)?;
        self.eq_contexts.as_mut()[h.index()] = context;
        Ok(h)
    }

    /// The event queue `h` names; -FI_EINVAL if it is closed or not this fabric's.
    pub fn eq(&self, h: EqHandle<S>) -> Result<&EqObj<S>> {
        self.eqs.get(h).ok_or(Errno::EINVAL)
    }

    /// The event queue `h` names, mutably.
    pub fn eq_mut(&mut self, h: EqHandle<S>) -> Result<&mut EqObj<S>> {
        self.eqs.get_mut(h).ok_or(Errno::EINVAL)
    }

    /// The application's context of an event queue.
    pub fn eq_context(&self, h: EqHandle<S>) -> Result<u64> {
        self.eq(h)?;
        Ok(self.eq_contexts.as_ref()[h.index()])
    }

    /// `fi_close` of an EQ: -FI_EBUSY while objects are bound to it.
    pub fn eq_close(&mut self, h: EqHandle<S>) -> Result<()> {
        self.eq(h)?.check_close()?;
        self.eqs.remove(h);
        Ok(())
    }

    /// Records a domain opened on this fabric.
    pub(crate) fn domain_opened(&mut self) {
        self.domains += 1;
    }

    /// Records a domain closed.
    pub(crate) fn domain_closed(&mut self) {
        self.domains = self.domains.saturating_sub(1);
    }

    /// Domains open on this fabric.
    pub fn domains(&self) -> usize {
        self.domains
    }

    /// Whether `fi_close` may release the fabric: -FI_EBUSY while a domain or an EQ is
    /// open.
    pub fn check_close(&self) -> Result<()> {
        if self.domains > 0 || !self.eqs.is_empty() {
            return Err(Errno::EBUSY);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::Flags;
    use crate::storage::test_storage::VecStorage;

    #[test]
    fn open_eq_and_close_rules() {
        let mut f = Fabric::open(&FabricAttr::default(), 7, VecStorage, 2).unwrap();
        assert_eq!(f.attr().name.as_str(), "nostd");
        let a = f.eq_open(&EqAttr::default(), 11).unwrap();
        let b = f
            .eq_open(
                &EqAttr {
                    flags: Flags::WRITE,
                    ..EqAttr::default()
                },
                12,
            )
            .unwrap();
        assert_eq!(
            f.eq_open(&EqAttr::default(), 13).err(),
            Some(Errno::ENOMEM),
            "pool full"
        );
        assert_eq!(f.eq_context(b), Ok(12));
        assert_eq!(f.check_close(), Err(Errno::EBUSY), "EQs open");
        f.eq_mut(a).unwrap().bind_ref();
        assert_eq!(f.eq_close(a), Err(Errno::EBUSY), "EQ bound");
        f.eq_mut(a).unwrap().unbind_ref();
        f.eq_close(a).unwrap();
        assert_eq!(f.eq_close(a), Err(Errno::EINVAL), "stale handle");
        f.eq_close(b).unwrap();
        f.domain_opened();
        assert_eq!(f.check_close(), Err(Errno::EBUSY), "domain open");
        f.domain_closed();
        f.check_close().unwrap();
    }

    #[test]
    fn foreign_names_refused() {
        let attr = FabricAttr {
            name: crate::info::name("udp"),
            ..FabricAttr::default()
        };
        assert_eq!(
            Fabric::open(&attr, 0, VecStorage, 1).err(),
            Some(Errno::EINVAL)
        );
        let attr = FabricAttr {
            prov_name: crate::info::name("tcp"),
            ..FabricAttr::default()
        };
        assert_eq!(
            Fabric::open(&attr, 0, VecStorage, 1).err(),
            Some(Errno::EINVAL)
        );
    }
}
