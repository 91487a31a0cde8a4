//! Connection management (fi_cm(3)) in the safe API: passive endpoints, connecting,
//! accepting and refusing, shutting down, and the connection events, as calls that
//! return `Result`s.
//!
//! A connected endpoint is an [`Endpoint`] of type FI_EP_MSG: after
//! [`Endpoint::connect`] and [`Endpoint::wait_connected`] (or
//! [`PassiveEndpoint::accept`] on the listening side) it sends to its peer whatever
//! address a post names. Events the core owes (FI_CONNREQ, FI_CONNECTED,
//! FI_SHUTDOWN, refusals and timeouts) are kept per domain until the object they
//! belong to asks for them.

use std::time::{Duration, Instant};

use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::cm::{CmEventKind, ConnReqId};
use ofi_nostd::domain::{BindTarget, CmFid, PepHandle};
use ofi_nostd::flags::Flags;

use super::Domain;
use super::ep::Endpoint;
use super::error::Result;
use super::shared::{DomainRef, Inner};
use crate::storage::Heap;

/// The EQ token the safe API binds: events are routed by their fid, not by EQ.
const EQ_TOKEN: u64 = 1;
/// How long a wait naps between passes when nothing happened.
const NAP: Duration = Duration::from_micros(50);

/// A connection request a passive endpoint received (FI_CONNREQ).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnRequest {
    /// The connecting endpoint.
    pub from: EpAddr,
    /// Its CM data.
    pub data: Vec<u8>,
    req: ConnReqId,
}

/// What happened to a connection (the EQ events of an active endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnEvent {
    /// FI_CONNECTED, with the accepting side's CM data (empty at the accepting side).
    Connected(Vec<u8>),
    /// FI_SHUTDOWN: the peer shut down, closed, or died.
    Shutdown,
    /// FI_ECONNREFUSED: the listener refused, with its data.
    Refused(Vec<u8>),
    /// FI_ETIMEDOUT: no answer within the retry budget.
    TimedOut,
}

impl ConnEvent {
    fn from_core(kind: CmEventKind) -> Option<ConnEvent> {
        Some(match kind {
            CmEventKind::Connected(d) => ConnEvent::Connected(d.to_vec()),
            CmEventKind::Shutdown => ConnEvent::Shutdown,
            CmEventKind::Error {
                err: Errno::ECONNREFUSED,
                data,
            } => ConnEvent::Refused(data.to_vec()),
            CmEventKind::Error { .. } => ConnEvent::TimedOut,
            CmEventKind::ConnReq { .. } => return None,
        })
    }
}

/// Moves the core's pending CM events into the domain's list.
fn drain<C: Send + 'static>(g: &mut Inner<C>) {
    while let Some(e) = g.core.cm_event() {
        g.cm_events.push(e);
    }
}

/// Runs passes until `take` finds what it wants in the domain's events, or `timeout`
/// passes (-FI_EAGAIN).
fn wait_event<C: Send + 'static, T>(
    shared: &DomainRef<C>,
    timeout: Duration,
    mut take: impl FnMut(&mut Inner<C>) -> Option<T>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        {
            let mut g = shared.lock();
            if shared.manual() {
                g.progress()?;
            }
            drain(&mut g);
            if let Some(t) = take(&mut g) {
                // What the event's packet made due (ESTABLISHED, SHUTDOWN_ACK) leaves
                // now, not at the application's next call into this domain.
                g.progress_tx()?;
                return Ok(t);
            }
        }
        if Instant::now() >= deadline {
            return Err(Errno::EAGAIN.into());
        }
        std::thread::sleep(NAP);
    }
}

/// A passive endpoint (`fid_pep`): listens for connection requests at its address.
pub struct PassiveEndpoint<C: Send + 'static = u64> {
    shared: DomainRef<C>,
    h: PepHandle<Heap>,
    addr: EpAddr,
    closed: bool,
}

impl<C: Send + 'static> Domain<C> {
    /// `fi_passive_ep`, bound to the domain's events and listening (`fi_listen`): the
    /// first one of a domain has endpoint id 0, so a plain address (IP and port) names
    /// it. -FI_ENOSYS in a build without FI_EP_MSG.
    pub fn passive_endpoint(&self) -> Result<PassiveEndpoint<C>> {
        let shared = self.shared.clone();
        let mut g = shared.lock();
        let h = g.core.pep_open(0)?;
        let r = g
            .core
            .pep_bind_eq(h, EQ_TOKEN)
            .and_then(|()| g.core.pep_listen(h))
            .and_then(|()| g.core.pep_addr(h));
        let addr = match r {
            Ok(a) => a,
            Err(e) => {
                let _ = g.core.pep_close(h);
                return Err(e.into());
            }
        };
        drop(g);
        Ok(PassiveEndpoint {
            shared,
            h,
            addr,
            closed: false,
        })
    }
}

impl<C: Send + 'static> PassiveEndpoint<C> {
    /// Its address (`fi_getname`), what connectors dial.
    pub fn addr(&self) -> EpAddr {
        self.addr
    }

    /// `fi_control(FI_BACKLOG)`: requests waiting for an answer it holds at most;
    /// more are not answered, so their connectors retry.
    pub fn set_backlog(&self, n: usize) -> Result<()> {
        Ok(self.shared.lock().core.pep_set_backlog(self.h, n)?)
    }

    /// Waits up to `timeout` for the next connection request (FI_CONNREQ);
    /// -FI_EAGAIN when none came.
    pub fn request(&self, timeout: Duration) -> Result<ConnRequest> {
        let me = CmFid::Pep(self.h);
        wait_event(&self.shared, timeout, |g| {
            let i = g.cm_events.iter().position(|e| e.fid == me)?;
            match g.cm_events.remove(i).kind {
                CmEventKind::ConnReq { req, from, data } => Some(ConnRequest {
                    from,
                    data: data.to_vec(),
                    req,
                }),
                _ => None,
            }
        })
    }

    /// `fi_accept` of `req` on `ep` (a new FI_EP_MSG endpoint of this domain, bound to
    /// its CQs), with `data` (at most 256 bytes; more is cut). The endpoint is
    /// connected once [`Endpoint::wait_connected`] returns.
    pub fn accept(&self, req: &ConnRequest, ep: &Endpoint<C>, data: &[u8]) -> Result<()> {
        let (eshared, h) = ep.parts();
        if !eshared.same(&self.shared) {
            return Err(Errno::EDOMAIN.into());
        }
        let mut g = self.shared.lock();
        bind_events(&mut g, h)?;
        let (peer, conn_id) = g.core.pep_take(self.h, req.req)?;
        g.core.accept(h, peer, conn_id, data)?;
        g.progress_tx()?;
        Ok(())
    }

    /// `fi_reject` of `req` with `data` (at most 256 bytes): the connector sees
    /// FI_ECONNREFUSED with it.
    pub fn reject(&self, req: &ConnRequest, data: &[u8]) -> Result<()> {
        let mut g = self.shared.lock();
        g.core.pep_reject(self.h, req.req, data)?;
        g.progress_tx()?;
        Ok(())
    }

    /// `fi_close`.
    pub fn close(mut self) -> Result<()> {
        self.closed = true;
        self.close_inner()
    }

    fn close_inner(&self) -> Result<()> {
        let mut g = self.shared.lock();
        let me = CmFid::Pep(self.h);
        g.cm_events.retain(|e| e.fid != me);
        Ok(g.core.pep_close(self.h)?)
    }
}

impl<C: Send + 'static> Drop for PassiveEndpoint<C> {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.close_inner();
        }
    }
}

/// Binds the endpoint to the domain's events once (fi_ep_bind of an EQ).
fn bind_events<C: Send + 'static>(
    g: &mut Inner<C>,
    h: ofi_nostd::domain::EpHandle<Heap>,
) -> ofi_nostd::Result<()> {
    if g.core.ep(h)?.eq().is_none() {
        g.core
            .ep_bind(h, BindTarget::Eq(EQ_TOKEN), Flags::empty())?;
    }
    Ok(())
}

impl<C: Send + 'static> Endpoint<C> {
    /// `fi_connect` to the passive endpoint at `dest` with `data` (at most 256 bytes;
    /// more is cut). The answer comes as an event: [`Endpoint::wait_connected`].
    /// -FI_EISCONN after an earlier connect or accept.
    pub fn connect(&self, dest: EpAddr, data: &[u8]) -> Result<()> {
        let (shared, h) = self.parts();
        let mut g = shared.lock();
        bind_events(&mut g, h)?;
        g.core.connect(h, dest, data)?;
        g.progress_tx()?;
        Ok(())
    }

    /// Waits up to `timeout` for the next connection event of this endpoint;
    /// -FI_EAGAIN when none came.
    pub fn cm_event(&self, timeout: Duration) -> Result<ConnEvent> {
        let (shared, h) = self.parts();
        let me = CmFid::Ep(h);
        wait_event(shared, timeout, |g| {
            let i = g.cm_events.iter().position(|e| e.fid == me)?;
            ConnEvent::from_core(g.cm_events.remove(i).kind)
        })
    }

    /// Waits for FI_CONNECTED and returns the peer's CM data: -FI_ECONNREFUSED
    /// (refused; the data is in [`Endpoint::cm_event`]'s form only),
    /// -FI_ETIMEDOUT, -FI_ECONNRESET for a shutdown first, -FI_EAGAIN after `timeout`.
    pub fn wait_connected(&self, timeout: Duration) -> Result<Vec<u8>> {
        match self.cm_event(timeout)? {
            ConnEvent::Connected(d) => Ok(d),
            ConnEvent::Refused(_) => Err(Errno::ECONNREFUSED.into()),
            ConnEvent::TimedOut => Err(Errno::ETIMEDOUT.into()),
            ConnEvent::Shutdown => Err(Errno::ECONNRESET.into()),
        }
    }

    /// `fi_shutdown`: no new operations; the peer sees FI_SHUTDOWN after everything
    /// this endpoint sent. -FI_ENOTCONN when not connected.
    pub fn shutdown(&self) -> Result<()> {
        let (shared, h) = self.parts();
        let mut g = shared.lock();
        g.core.shutdown(h)?;
        g.progress_tx()?;
        Ok(())
    }

    /// `fi_getpeer`: the connected peer; -FI_ENOTCONN before it is known.
    pub fn peer(&self) -> Result<EpAddr> {
        let (shared, h) = self.parts();
        Ok(shared.lock().core.getpeer(h)?)
    }
}
