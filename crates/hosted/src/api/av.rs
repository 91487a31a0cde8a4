//! Address vectors.

use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::av::{AvAddrs, FI_SYNC_ERR};
use ofi_nostd::domain::AvHandle;
use ofi_nostd::flags::{FI_ADDR_NOTAVAIL, FiAddr, Flags};

use super::error::Result;
use super::shared::{DomainRef, Zombie};
use crate::storage::Heap;

/// An address vector (fi_av(3)): peers' addresses as `fi_addr_t` values.
pub struct Av<C: Send + 'static = u64> {
    shared: DomainRef<C>,
    h: AvHandle<Heap>,
}

impl<C: Send + 'static> Av<C> {
    pub(crate) fn new(shared: DomainRef<C>, h: AvHandle<Heap>) -> Self {
        Av { shared, h }
    }

    pub(crate) fn handle(&self) -> AvHandle<Heap> {
        self.h
    }

    pub(crate) fn shared(&self) -> &DomainRef<C> {
        &self.shared
    }

    /// `fi_av_insert` of one address.
    pub fn insert(&self, addr: EpAddr) -> Result<FiAddr> {
        self.insert_all(&[addr])?
            .pop()
            .unwrap_or(Err(Errno::EINVAL))
            .map_err(Into::into)
    }

    /// `fi_av_insert` of several addresses, with FI_SYNC_ERR: one result per address.
    pub fn insert_all(&self, addrs: &[EpAddr]) -> Result<Vec<std::result::Result<FiAddr, Errno>>> {
        let mut fi = vec![FI_ADDR_NOTAVAIL; addrs.len()];
        let mut errs = vec![0i32; addrs.len()];
        self.shared.lock().core.av_mut(self.h)?.insert(
            AvAddrs::Ep(addrs),
            Some(&mut fi),
            FI_SYNC_ERR,
            Some(&mut errs),
        )?;
        Ok(fi
            .into_iter()
            .zip(errs)
            .map(|(a, e)| match e {
                0 => Ok(a),
                e => Err(Errno::from_code(e).unwrap_or(Errno::EINVAL)),
            })
            .collect())
    }

    /// `fi_av_insert` of an FI_ADDR_STR address (`fi_addr_nostd://A.B.C.D:PORT[/ID]`,
    /// `fi_sockaddr_in://A.B.C.D:PORT`).
    pub fn insert_str(&self, addr: &str) -> Result<FiAddr> {
        self.insert(EpAddr::parse_addr_str(addr)?)
    }

    /// `fi_av_remove`.
    pub fn remove(&self, addr: FiAddr) -> Result<()> {
        Ok(self
            .shared
            .lock()
            .core
            .av_mut(self.h)?
            .remove(&[addr], Flags::empty())?)
    }

    /// `fi_av_lookup`: the address behind `addr`.
    pub fn lookup(&self, addr: FiAddr) -> Result<EpAddr> {
        Ok(self.shared.lock().core.av(self.h)?.lookup_addr(addr)?)
    }

    /// Addresses held.
    pub fn len(&self) -> usize {
        self.shared.lock().core.av(self.h).map_or(0, |a| a.len())
    }

    /// Whether the AV is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `fi_close`: -FI_EBUSY (with the AV handed back) while an endpoint is bound.
    pub fn close(self) -> std::result::Result<(), (Self, super::Error)> {
        let busy = self.shared.lock().core.av(self.h).map(|a| a.check_close());
        match busy {
            Ok(Err(e)) => Err((self, e.into())),
            _ => Ok(()),
        }
    }
}

impl<C: Send + 'static> Drop for Av<C> {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        if g.core.av_close(self.h) == Err(Errno::EBUSY) {
            g.zombies.push(Zombie::Av(self.h));
        }
    }
}
