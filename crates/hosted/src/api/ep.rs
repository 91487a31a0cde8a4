//! Endpoints and their data transfers.

use std::sync::atomic::{AtomicBool, Ordering};

use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::atomic::AtomicKind;
use ofi_nostd::domain::{AtomicArgs, BindTarget, EpHandle, MsgArgs, RmaArgs, RmaIov, TaggedArgs};
use ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use ofi_nostd::mem::{IoVec, Memory};
pub use wire::packet::{AtomicDatatype, AtomicOp};

use super::av::Av;
use super::buf::Buf;
use super::cntr::Counter;
use super::cq::Cq;
use super::error::{PostError, Result};
use super::shared::DomainRef;
use super::table::{Op, OpId};
use crate::storage::Heap;

/// An endpoint (fi_endpoint(3)).
///
/// Open it with [`Domain::endpoint`](super::Domain::endpoint), bind a CQ for each
/// direction and an AV, then [`Endpoint::enable`] it. Data operations take `&self`, so
/// an endpoint can be shared between threads (the domain lock serialises them).
pub struct Endpoint<C: Send + 'static = u64> {
    shared: DomainRef<C>,
    h: EpHandle<Heap>,
    addr: EpAddr,
    closed: bool,
    /// [`Endpoint::set_more`]: sends posted now carry FI_MORE.
    more: AtomicBool,
}

enum Kind {
    Send {
        data: Option<u64>,
        tag: Option<u64>,
    },
    /// A receive, tagged with (tag, ignore) or not; `extra`: FI_PEEK, FI_CLAIM,
    /// FI_DISCARD.
    Recv {
        tag: Option<(u64, u64)>,
        extra: Flags,
    },
    /// An RMA write of the buffer's bytes (with remote CQ data or not).
    Write {
        data: Option<u64>,
        to: RemoteRegion,
    },
    /// An RMA read into the buffer's whole capacity.
    Read {
        from: RemoteRegion,
    },
}

impl Kind {
    /// A plain receive, tagged with (tag, ignore) or not.
    fn recv(tag: Option<(u64, u64)>) -> Kind {
        Kind::Recv {
            tag,
            extra: Flags::empty(),
        }
    }
}

/// What a tagged peek ([`Endpoint::tpeek`]) does with the message it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peek {
    /// Reports it only (FI_PEEK): it stays for the next matching receive.
    Look,
    /// Reserves it for [`Endpoint::trecv_claimed`] (FI_PEEK | FI_CLAIM).
    Claim,
    /// Drops it (FI_PEEK | FI_DISCARD).
    Discard,
}

/// Where an RMA operation goes in a peer's registered memory: an offset into the
/// region (its first byte is 0) and the region's key ([`Mr::key`](super::Mr::key)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteRegion {
    /// Offset into the region.
    pub offset: u64,
    /// The region's key.
    pub key: u64,
}

/// A [`Memory`] over one borrowed slice, for injects (copied before the call returns).
struct Borrowed<'a> {
    base: u64,
    bytes: &'a [u8],
}

impl Memory for Borrowed<'_> {
    fn read(&self, addr: u64, out: &mut [u8]) -> ofi_nostd::Result<()> {
        let off = usize::try_from(addr.checked_sub(self.base).ok_or(Errno::EFAULT)?)
            .map_err(|_| Errno::EFAULT)?;
        let src = off
            .checked_add(out.len())
            .and_then(|end| self.bytes.get(off..end))
            .ok_or(Errno::EFAULT)?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn write(&mut self, _addr: u64, _data: &[u8]) -> ofi_nostd::Result<()> {
        Err(Errno::EFAULT)
    }
}

impl<C: Send + 'static> Endpoint<C> {
    pub(crate) fn new(shared: DomainRef<C>, h: EpHandle<Heap>, addr: EpAddr) -> Self {
        Endpoint {
            shared,
            h,
            addr,
            closed: false,
            more: AtomicBool::new(false),
        }
    }

    /// The data operations of a context of a scalable endpoint ([`super::sep`]): the
    /// engine `h` carries it, and the context, not this view, closes it.
    pub(crate) fn context_view(shared: DomainRef<C>, h: EpHandle<Heap>, addr: EpAddr) -> Self {
        let mut e = Endpoint::new(shared, h, addr);
        e.closed = true;
        e
    }

    /// The domain this endpoint is on.
    pub(crate) fn shared_ref(&self) -> &DomainRef<C> {
        &self.shared
    }

    /// The core handle.
    pub(crate) fn handle(&self) -> EpHandle<Heap> {
        self.h
    }

    /// Its domain and core handle (connection management, `cm.rs`).
    pub(super) fn parts(&self) -> (&DomainRef<C>, EpHandle<Heap>) {
        (&self.shared, self.h)
    }

    fn same_domain(&self, other: &DomainRef<C>) -> Result<()> {
        if self.shared.same(other) {
            Ok(())
        } else {
            Err(Errno::EDOMAIN.into())
        }
    }

    /// `fi_getname`: the address peers insert into their AVs.
    pub fn addr(&self) -> EpAddr {
        self.addr
    }

    /// `fi_ep_bind` of a CQ with FI_TRANSMIT and/or FI_RECV. Every operation posted
    /// through this API asks for a completion (that is how its buffer comes back), so
    /// FI_SELECTIVE_COMPLETION only affects injects (which never complete).
    pub fn bind_cq(&self, cq: &Cq<C>, flags: Flags) -> Result<()> {
        self.same_domain(cq.shared())?;
        let mut g = self.shared.lock();
        g.core.ep_bind(self.h, BindTarget::Cq(cq.handle()), flags)?;
        if let Some(e) = g.eps.iter_mut().find(|e| e.h == self.h) {
            e.cqs.push(cq.handle());
        }
        Ok(())
    }

    /// `fi_ep_bind` of the address vector.
    pub fn bind_av(&self, av: &Av<C>) -> Result<()> {
        self.same_domain(av.shared())?;
        let mut g = self.shared.lock();
        Ok(g.core
            .ep_bind(self.h, BindTarget::Av(av.handle()), Flags::empty())?)
    }

    /// `fi_ep_bind` of a counter for the operation types in `flags` (FI_SEND, FI_RECV,
    /// ...).
    pub fn bind_counter(&self, cntr: &Counter<C>, flags: Flags) -> Result<()> {
        self.same_domain(cntr.shared())?;
        let mut g = self.shared.lock();
        Ok(g.core
            .ep_bind(self.h, BindTarget::Cntr(cntr.handle()), flags)?)
    }

    /// `fi_enable`: -FI_ENOCQ without a transmit CQ (an endpoint that can send), -FI_ENOAV
    /// without an AV. A receive CQ is needed only to post receives (-FI_ENOCQ there).
    pub fn enable(&self) -> Result<()> {
        Ok(self.shared.lock().core.ep_enable(self.h)?)
    }

    /// `fi_send`: sends the first `buf.len()` bytes to `dest`. The buffer comes back in
    /// the completion (or in the error). -FI_EMSGSIZE beyond the endpoint's
    /// `max_msg_size`, -FI_EAGAIN when the transmit queue or the CQ is full.
    pub fn send(&self, buf: Buf, dest: FiAddr, context: C) -> Result<OpId, PostError<C>> {
        self.post(
            Kind::Send {
                data: None,
                tag: None,
            },
            buf,
            dest,
            context,
        )
    }

    /// `fi_senddata`: a send carrying 64 bits of remote CQ data.
    pub fn senddata(
        &self,
        buf: Buf,
        data: u64,
        dest: FiAddr,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post(
            Kind::Send {
                data: Some(data),
                tag: None,
            },
            buf,
            dest,
            context,
        )
    }

    /// `fi_write`: writes the first `buf.len()` bytes into a peer's registered memory
    /// at `to`. Completes (the buffer comes back) when the peer answered: -FI_EACCES
    /// for a bad key, a range outside the region or a region without remote write
    /// access.
    pub fn write(
        &self,
        buf: Buf,
        dest: FiAddr,
        to: RemoteRegion,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post(Kind::Write { data: None, to }, buf, dest, context)
    }

    /// `fi_writedata`: a write whose target also gets `data` in a completion.
    pub fn writedata(
        &self,
        buf: Buf,
        data: u64,
        dest: FiAddr,
        to: RemoteRegion,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post(
            Kind::Write {
                data: Some(data),
                to,
            },
            buf,
            dest,
            context,
        )
    }

    /// `fi_read`: reads `buf.capacity()` bytes of a peer's registered memory at `from`
    /// into `buf` (its length is that when it comes back).
    pub fn read(
        &self,
        buf: Buf,
        src: FiAddr,
        from: RemoteRegion,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post(Kind::Read { from }, buf, src, context)
    }

    /// `fi_atomic`: applies `op` to the peer's elements of `datatype` at `to` with the
    /// native-endian elements in `operands` (copied by the call; at most 64 bytes).
    /// Completes (with an empty buffer) when the peer answered; -FI_EOPNOTSUPP for an
    /// operation or type the endpoint does not serve, -FI_EINVAL for operands that are
    /// not whole elements.
    pub fn atomic(
        &self,
        operands: &[u8],
        dest: FiAddr,
        to: RemoteRegion,
        op: AtomicOp,
        datatype: AtomicDatatype,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post_atomic(
            AtomicKind::Write,
            operands,
            &[],
            Buf::default(),
            (dest, to),
            (op, datatype),
            context,
        )
    }

    /// `fi_fetch_atomic`: as [`Endpoint::atomic`] (FI_ATOMIC_READ too, with no
    /// operands), and the original values come back in `result` (its capacity: the
    /// elements' length).
    #[allow(clippy::too_many_arguments)]
    pub fn fetch_atomic(
        &self,
        operands: &[u8],
        result: Buf,
        dest: FiAddr,
        to: RemoteRegion,
        op: AtomicOp,
        datatype: AtomicDatatype,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post_atomic(
            AtomicKind::Fetch,
            operands,
            &[],
            result,
            (dest, to),
            (op, datatype),
            context,
        )
    }

    /// `fi_compare_atomic`: the compare-and-swap family, `compare` holding the compare
    /// values (MSWAP: the mask) and `operands` the swap values; the original values
    /// come back in `result`.
    #[allow(clippy::too_many_arguments)]
    pub fn compare_atomic(
        &self,
        operands: &[u8],
        compare: &[u8],
        result: Buf,
        dest: FiAddr,
        to: RemoteRegion,
        op: AtomicOp,
        datatype: AtomicDatatype,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post_atomic(
            AtomicKind::Compare,
            operands,
            compare,
            result,
            (dest, to),
            (op, datatype),
            context,
        )
    }

    /// An atomic post: the operands go through a scratch copy (the core copies them
    /// before the call returns); `result` is lent like a receive buffer.
    #[allow(clippy::too_many_arguments)]
    fn post_atomic(
        &self,
        kind: AtomicKind,
        operands: &[u8],
        compare: &[u8],
        result: Buf,
        (dest, to): (FiAddr, RemoteRegion),
        (op, datatype): (AtomicOp, AtomicDatatype),
        context: C,
    ) -> Result<OpId, PostError<C>> {
        const MAX: usize = ofi_nostd::atomic::MAX_ATOMIC_BYTES;
        let size = datatype.size();
        let n = if op == AtomicOp::Read {
            result.capacity()
        } else {
            operands.len()
        };
        let fetch = kind != AtomicKind::Write;
        let refused = n == 0
            || n > MAX
            || !n.is_multiple_of(size)
            || compare.len() > MAX
            || (kind == AtomicKind::Compare && compare.len() != n)
            || (fetch && result.capacity() < n);
        if refused {
            return Err(PostError {
                errno: Errno::EINVAL,
                buf: result,
                context,
            });
        }
        let mut scratch = [0u8; 2 * MAX];
        scratch[..compare.len()].copy_from_slice(compare);
        scratch[MAX..MAX + operands.len()].copy_from_slice(operands);
        let mem = Borrowed {
            base: scratch.as_ptr() as u64,
            bytes: &scratch,
        };
        let posted = if fetch { n } else { 0 };
        let result_at = IoVec::new(result.addr(), posted);
        let mut g = self.shared.lock();
        let inner = &mut *g;
        let id = inner.ops.insert(Op {
            buf: result,
            context,
            ep: self.h.index(),
            posted,
            multi: None,
            claim: false,
        });
        let flags = self.op_flags(inner, Flags::TRANSMIT);
        let ops = [IoVec::new(mem.base + MAX as u64, operands.len())];
        let args = AtomicArgs {
            iov: &ops[..usize::from(op != AtomicOp::Read)],
            addr: dest,
            rma: RmaIov {
                addr: to.offset,
                len: n as u64,
                key: to.key,
            },
            datatype,
            op,
            count: n / size,
            context: id.raw(),
            data: 0,
        };
        let cmp = IoVec::new(mem.base, compare.len());
        let r = match kind {
            AtomicKind::Write => inner.core.atomicmsg(self.h, &mem, &args, flags),
            AtomicKind::Fetch => inner
                .core
                .fetch_atomicmsg(self.h, &mem, &args, result_at, flags),
            AtomicKind::Compare => inner
                .core
                .compare_atomicmsg(self.h, &mem, &args, cmp, result_at, flags),
        };
        self.posted(inner, id, r, true)
    }

    /// `fi_recv`: posts `buf` (its whole capacity) for one message from `src`
    /// (FI_ADDR_UNSPEC: anyone).
    pub fn recv(&self, buf: Buf, src: FiAddr, context: C) -> Result<OpId, PostError<C>> {
        self.post(Kind::recv(None), buf, src, context)
    }

    /// `fi_recvmsg` with FI_MULTI_RECV: posts `buf` for as many untagged messages from
    /// `src` as fit, each placed after the one before. Every message has its own
    /// completion with a clone of `context`, its [`Completion::offset`] and `len`; the
    /// buffer itself stays posted and comes back with the completion whose flags hold
    /// FI_MULTI_RECV, once less than the endpoint's FI_OPT_MIN_MULTI_RECV (64 bytes) is
    /// left (or with -FI_ECANCELED and a length of 0 after [`Endpoint::cancel`]; the
    /// offsets of the messages completed before stay valid). One post serves a stream
    /// of small messages: no receive to re-post per message. -FI_EINVAL on an endpoint
    /// without FI_MULTI_RECV.
    ///
    /// [`Completion::offset`]: super::Completion::offset
    pub fn recv_multi(&self, buf: Buf, src: FiAddr, context: C) -> Result<OpId, PostError<C>>
    where
        C: Clone,
    {
        self.post_with(
            Kind::recv(None),
            buf,
            src,
            context,
            Some(<C as Clone>::clone),
        )
    }

    /// `fi_tsend`: a tagged send (FI_EP_RDM endpoints with FI_TAGGED; -FI_EOPNOTSUPP
    /// otherwise). Otherwise as [`Endpoint::send`].
    pub fn tsend(
        &self,
        buf: Buf,
        dest: FiAddr,
        tag: u64,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post(
            Kind::Send {
                data: None,
                tag: Some(tag),
            },
            buf,
            dest,
            context,
        )
    }

    /// `fi_tsenddata`: a tagged send carrying remote CQ data.
    pub fn tsenddata(
        &self,
        buf: Buf,
        data: u64,
        dest: FiAddr,
        tag: u64,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post(
            Kind::Send {
                data: Some(data),
                tag: Some(tag),
            },
            buf,
            dest,
            context,
        )
    }

    /// `fi_trecv`: posts `buf` for one message whose tag equals `tag` in every bit not
    /// set in `ignore`, from `src` (FI_ADDR_UNSPEC: anyone; a specific source needs
    /// FI_DIRECTED_RECV). The completion's [`Completion::tag`](super::Completion::tag)
    /// is the message's tag.
    pub fn trecv(
        &self,
        buf: Buf,
        src: FiAddr,
        tag: u64,
        ignore: u64,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post(Kind::recv(Some((tag, ignore))), buf, src, context)
    }

    /// `fi_trecvmsg` with FI_PEEK (fi_tagged(3)): whether a message from `src` whose tag
    /// matches `tag` outside `ignore` has arrived. It completes at once: with the
    /// message's length, tag, CQ data and source (no data: the completion's buffer is
    /// empty), or with -FI_ENOMSG when there is none. [`Peek::Claim`] also reserves the
    /// message for [`Endpoint::trecv_claimed`] under the returned id, and
    /// [`Peek::Discard`] drops it. An MPI probe (`MPI_Iprobe`, `MPI_Improbe`) maps here.
    pub fn tpeek(
        &self,
        src: FiAddr,
        tag: u64,
        ignore: u64,
        mode: Peek,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        let extra = Flags::PEEK
            | match mode {
                Peek::Look => Flags::empty(),
                Peek::Claim => Flags::CLAIM,
                Peek::Discard => Flags::DISCARD,
            };
        self.post(
            Kind::Recv {
                tag: Some((tag, ignore)),
                extra,
            },
            Buf::default(),
            src,
            context,
        )
    }

    /// `fi_trecvmsg` with FI_CLAIM: receives into `buf` the message a successful
    /// [`Peek::Claim`] peek `peek` reserved. It completes under `peek`'s id (returned
    /// again), as any receive does. -FI_ENOMSG when `peek` claimed nothing (it found no
    /// message, or its message was received or discarded already).
    pub fn trecv_claimed(&self, peek: OpId, buf: Buf, context: C) -> Result<OpId, PostError<C>> {
        self.post_claimed(peek, buf, context, Flags::empty())
    }

    /// `fi_trecvmsg` with FI_CLAIM | FI_DISCARD: drops the message peek `peek` claimed;
    /// it completes under `peek`'s id with no data. -FI_ENOMSG as for
    /// [`Endpoint::trecv_claimed`].
    pub fn tdiscard_claimed(&self, peek: OpId, context: C) -> Result<OpId, PostError<C>> {
        self.post_claimed(peek, Buf::default(), context, Flags::DISCARD)
    }

    fn post_claimed(
        &self,
        peek: OpId,
        buf: Buf,
        context: C,
        extra: Flags,
    ) -> Result<OpId, PostError<C>> {
        let posted = if extra.contains(Flags::DISCARD) {
            0
        } else {
            buf.capacity()
        };
        let iov = [IoVec::new(buf.addr(), posted)];
        let mut g = self.shared.lock();
        let inner = &mut *g;
        let op = Op {
            buf,
            context,
            ep: self.h.index(),
            posted,
            multi: None,
            claim: false,
        };
        if let Err(op) = inner.ops.fill_reserved(peek, op) {
            return Err(PostError {
                errno: Errno::ENOMSG,
                buf: op.buf,
                context: op.context,
            });
        }
        let flags = self.op_flags(inner, Flags::RECV) | Flags::CLAIM | extra;
        let args = TaggedArgs::new(&iov, FI_ADDR_UNSPEC, 0, peek.raw());
        match inner.core.trecvmsg(self.h, &args, flags) {
            Ok(()) => Ok(peek),
            Err(errno) => {
                // Refused (the claimed message stays claimed): the id stays reserved.
                let op = inner
                    .ops
                    .take_reserving(peek)
                    .expect("a refused claim's buffer is still in the table");
                Err(PostError {
                    errno,
                    buf: op.buf,
                    context: op.context,
                })
            }
        }
    }

    /// `fi_tinject`: a tagged inject, copied before the call returns; no completion.
    pub fn tinject(&self, data: &[u8], dest: FiAddr, tag: u64) -> Result<()> {
        let mem = Borrowed {
            base: data.as_ptr() as u64,
            bytes: data,
        };
        let iov = IoVec::new(mem.base, data.len());
        let mut g = self.shared.lock();
        let r = g.core.tinject(self.h, &mem, iov, dest, tag);
        self.after_send(&mut g, r.err());
        Ok(r?)
    }

    /// `fi_inject`: sends `data`, copied before the call returns; no completion.
    /// -FI_EMSGSIZE beyond `inject_size`.
    pub fn inject(&self, data: &[u8], dest: FiAddr) -> Result<()> {
        self.inject_inner(data, None, dest)
    }

    /// `fi_injectdata`: an inject carrying remote CQ data.
    pub fn injectdata(&self, data: &[u8], cq_data: u64, dest: FiAddr) -> Result<()> {
        self.inject_inner(data, Some(cq_data), dest)
    }

    fn inject_inner(&self, data: &[u8], cq_data: Option<u64>, dest: FiAddr) -> Result<()> {
        let mem = Borrowed {
            base: data.as_ptr() as u64,
            bytes: data,
        };
        let iov = IoVec::new(mem.base, data.len());
        let mut g = self.shared.lock();
        let r = match cq_data {
            None => g.core.inject(self.h, &mem, iov, dest),
            Some(d) => g.core.injectdata(self.h, &mem, iov, d, dest),
        };
        self.after_send(&mut g, r.err());
        Ok(r?)
    }

    /// The flags a post in direction `dir` (FI_TRANSMIT or FI_RECV) goes with: the
    /// endpoint's operation flags, and FI_COMPLETION (every post asks for one: it is
    /// what hands the buffer back).
    fn op_flags(&self, inner: &super::shared::Inner<C>, dir: Flags) -> Flags {
        inner
            .core
            .ep(self.h)
            .and_then(|e| e.getopsflag(dir))
            .unwrap_or(Flags::empty())
            | Flags::COMPLETION
    }

    fn post(&self, kind: Kind, buf: Buf, addr: FiAddr, context: C) -> Result<OpId, PostError<C>> {
        self.post_with(kind, buf, addr, context, None)
    }

    /// A post; `multi` for a multi-receive buffer (FI_MULTI_RECV).
    fn post_with(
        &self,
        kind: Kind,
        buf: Buf,
        addr: FiAddr,
        context: C,
        multi: Option<fn(&C) -> C>,
    ) -> Result<OpId, PostError<C>> {
        let posted = match kind {
            Kind::Send { .. } | Kind::Write { .. } => buf.len(),
            Kind::Recv { .. } | Kind::Read { .. } => buf.capacity(),
        };
        let iov = [IoVec::new(buf.addr(), posted)];
        let mut g = self.shared.lock();
        let inner = &mut *g;
        let claim =
            matches!(kind, Kind::Recv { extra, .. } if extra.contains(Flags::PEEK | Flags::CLAIM));
        let id = inner.ops.insert(Op {
            buf,
            context,
            ep: self.h.index(),
            posted,
            multi,
            claim,
        });
        let dir = match kind {
            Kind::Send { .. } | Kind::Write { .. } | Kind::Read { .. } => Flags::TRANSMIT,
            Kind::Recv { .. } => Flags::RECV,
        };
        let mut flags = self.op_flags(inner, dir);
        if multi.is_some() {
            flags |= Flags::MULTI_RECV;
        }
        if let Kind::Recv { extra, .. } = kind {
            flags |= extra;
        }
        let r = match kind {
            Kind::Send { data, tag } => {
                let mut args = TaggedArgs::new(&iov, addr, tag.unwrap_or(0), id.raw());
                if let Some(d) = data {
                    args.data = d;
                    flags |= Flags::REMOTE_CQ_DATA;
                }
                match tag {
                    Some(_) => inner.rt.core.tsendmsg(self.h, &inner.ops, &args, flags),
                    None => {
                        let m = MsgArgs {
                            data: args.data,
                            ..MsgArgs::new(&iov, addr, id.raw())
                        };
                        inner.rt.core.sendmsg(self.h, &inner.ops, &m, flags)
                    }
                }
            }
            Kind::Write { data, to } => {
                let rma = RmaIov {
                    addr: to.offset,
                    len: posted as u64,
                    key: to.key,
                };
                let mut args = RmaArgs::new(&iov, addr, rma, id.raw());
                if let Some(d) = data {
                    args.data = d;
                    flags |= Flags::REMOTE_CQ_DATA;
                }
                inner.rt.core.writemsg(self.h, &inner.ops, &args, flags)
            }
            Kind::Read { from } => {
                let rma = RmaIov {
                    addr: from.offset,
                    len: posted as u64,
                    key: from.key,
                };
                let args = RmaArgs::new(&iov, addr, rma, id.raw());
                inner.rt.core.readmsg(self.h, &inner.ops, &args, flags)
            }
            Kind::Recv { tag: None, .. } => {
                inner
                    .core
                    .recvmsg(self.h, &MsgArgs::new(&iov, addr, id.raw()), flags)
            }
            Kind::Recv {
                tag: Some((tag, ignore)),
                ..
            } => {
                let args = TaggedArgs {
                    ignore,
                    ..TaggedArgs::new(&iov, addr, tag, id.raw())
                };
                inner.core.trecvmsg(self.h, &args, flags)
            }
        };
        self.posted(inner, id, r, !matches!(kind, Kind::Recv { .. }))
    }

    /// The end of a post the core answered `r` for: a send's (`sends`) transmit pass,
    /// or, refused, the buffer and context back out of the table (and on -FI_EAGAIN a
    /// pass, so what blocks it can drain).
    fn posted(
        &self,
        inner: &mut super::shared::Inner<C>,
        id: OpId,
        r: ofi_nostd::Result<()>,
        sends: bool,
    ) -> Result<OpId, PostError<C>> {
        match r {
            Ok(()) => {
                if sends {
                    self.after_send(inner, None);
                }
                Ok(id)
            }
            Err(errno) => {
                if errno == Errno::EAGAIN {
                    self.after_send(inner, Some(errno));
                }
                let op = inner
                    .ops
                    .remove(id)
                    .expect("a refused post's buffer is still in the table");
                Err(PostError {
                    errno,
                    buf: op.buf,
                    context: op.context,
                })
            }
        }
    }

    /// FI_MORE (fi_msg(3)) on every send posted while `on`: their packets wait, and
    /// leave together with the transmit pass that turning it off runs (or with the next
    /// progress call, whichever comes first). For bursts: one pass and one transmit
    /// batch for the burst instead of one per message.
    pub fn set_more(&self, on: bool) {
        if !self.more.swap(on, Ordering::Relaxed) || on {
            return;
        }
        let mut g = self.shared.lock();
        self.after_send(&mut g, None);
    }

    /// Pushes a new send to the link now rather than at the next progress pass (a pass
    /// without receiving: the next CQ read receives), and wakes the progress thread if
    /// the link pushed back. A post refused with -FI_EAGAIN runs a full pass instead, so
    /// that a caller retrying the post makes progress even without reading a CQ.
    fn after_send(&self, g: &mut super::shared::Inner<C>, refused: Option<Errno>) {
        let _ = match refused {
            None if self.more.load(Ordering::Relaxed) => return,
            None => {
                let queue = g.rt.ep_queue(self.h);
                g.progress_tx_on(queue)
            }
            Some(Errno::EAGAIN) => {
                let queue = g.rt.ep_queue(self.h);
                g.progress_on(queue)
            }
            Some(_) => return,
        };
        if !self.shared.manual() && g.pending_tx() > 0 {
            self.shared.kick();
        }
    }

    /// `fi_cancel`: a queued operation completes with FI_ECANCELED (its buffer comes back
    /// in that completion); one already done is not affected.
    pub fn cancel(&self, op: OpId) -> Result<()> {
        let mut g = self.shared.lock();
        g.core.ep_cancel(self.h, op.raw())?;
        g.wake();
        Ok(())
    }

    /// `fi_tx_size_left`.
    pub fn tx_size_left(&self) -> usize {
        self.shared.lock().core.ep_tx_size_left(self.h).unwrap_or(0)
    }

    /// `fi_rx_size_left`.
    pub fn rx_size_left(&self) -> usize {
        self.shared
            .lock()
            .core
            .ep(self.h)
            .map_or(0, |e| e.rx_size_left())
    }

    /// What an RDM endpoint's reliability engine counted (packets, bundles, acks,
    /// retransmissions, refusals); `None` for a DGRAM endpoint.
    pub fn rdm_stats(&self) -> Option<ofi_nostd::rdm::RdmStats> {
        let g = self.shared.lock();
        g.core.ep(self.h).ok()?.rdm().map(|r| *r.stats())
    }

    /// `fi_close`: discards outstanding operations (no completions, as fi_endpoint(3)
    /// says) and hands back their buffers and contexts. Completions already queued stay
    /// in their CQs with their buffers.
    pub fn close(mut self) -> Vec<(Buf, C)> {
        self.closed = true;
        self.close_inner()
            .into_iter()
            .map(|op| (op.buf, op.context))
            .collect()
    }

    fn close_inner(&self) -> Vec<Op<C>> {
        self.shared.lock().close_ep(self.h).unwrap_or_default()
    }
}

impl<C: Send + 'static> Drop for Endpoint<C> {
    fn drop(&mut self) {
        if !self.closed {
            // Dropped after the lock is released: contexts may run code when dropped.
            let gone = self.close_inner();
            drop(gone);
        }
    }
}
