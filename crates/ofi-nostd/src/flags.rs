//! libfabric's flag words, bit for bit as in `<rdma/fabric.h>` 1.17.
//!
//! Capabilities, operation flags and completion flags share one 64-bit namespace in
//! libfabric (`FI_MSG`, `FI_SEND`, `FI_INJECT`, ...), so they are one type, [`Flags`]. A
//! few bits mean different things in different places (bit 59 is `FI_DIRECTED_RECV` as a
//! capability, `FI_CLAIM` as an op flag and `FI_SELECTIVE_COMPLETION` as a bind flag);
//! each meaning has its own name.

use bitflags::bitflags;

bitflags! {
    /// Capabilities (`fi_info::caps`), operation flags (`op_flags`, per-call `flags`),
    /// completion flags (`fi_cq_entry::flags`) and bind flags.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Flags: u64 {
        /// FI_MSG: send/receive messages.
        const MSG = 1 << 1;
        /// FI_RMA: remote memory access.
        const RMA = 1 << 2;
        /// FI_TAGGED: tagged messages.
        const TAGGED = 1 << 3;
        /// FI_ATOMIC: remote atomics.
        const ATOMIC = 1 << 4;
        /// FI_MULTICAST.
        const MULTICAST = 1 << 5;
        /// FI_COLLECTIVE.
        const COLLECTIVE = 1 << 6;
        /// FI_READ: initiate RMA reads / atomic fetches; also an MR access bit.
        const READ = 1 << 8;
        /// FI_WRITE: initiate RMA writes / atomics; also an MR access bit.
        const WRITE = 1 << 9;
        /// FI_RECV: receive messages; also a completion flag and MR access bit.
        const RECV = 1 << 10;
        /// FI_SEND (FI_TRANSMIT): send messages; also a completion flag.
        const SEND = 1 << 11;
        /// FI_REMOTE_READ: target of RMA reads.
        const REMOTE_READ = 1 << 12;
        /// FI_REMOTE_WRITE: target of RMA writes.
        const REMOTE_WRITE = 1 << 13;
        /// FI_MULTI_RECV: one buffer receives many messages.
        const MULTI_RECV = 1 << 16;
        /// FI_REMOTE_CQ_DATA: immediate data carried to the target's CQ.
        const REMOTE_CQ_DATA = 1 << 17;
        /// FI_MORE: more operations follow immediately.
        const MORE = 1 << 18;
        /// FI_PEEK: look for a matching message without receiving it.
        const PEEK = 1 << 19;
        /// FI_TRIGGER: triggered operations.
        const TRIGGER = 1 << 20;
        /// FI_FENCE: wait for earlier operations before starting.
        const FENCE = 1 << 21;
        /// FI_PRIORITY.
        const PRIORITY = 1 << 22;
        /// FI_COMPLETION: generate a completion (with selective completion).
        const COMPLETION = 1 << 24;
        /// FI_INJECT: the buffer may be reused when the call returns.
        const INJECT = 1 << 25;
        /// FI_INJECT_COMPLETE: complete once the buffer may be reused.
        const INJECT_COMPLETE = 1 << 26;
        /// FI_TRANSMIT_COMPLETE: complete once the data left the initiator for good.
        const TRANSMIT_COMPLETE = 1 << 27;
        /// FI_DELIVERY_COMPLETE: complete once the target has the data.
        const DELIVERY_COMPLETE = 1 << 28;
        /// FI_AFFINITY.
        const AFFINITY = 1 << 29;
        /// FI_COMMIT_COMPLETE: complete once the data is persistent.
        const COMMIT_COMPLETE = 1 << 30;
        /// FI_MATCH_COMPLETE: complete once the target matched the message.
        const MATCH_COMPLETE = 1 << 31;
        /// FI_PEER_TRANSFER.
        const PEER_TRANSFER = 1 << 36;
        /// FI_AV_USER_ID.
        const AV_USER_ID = 1 << 41;
        /// FI_PEER.
        const PEER = 1 << 43;
        /// FI_XPU_TRIGGER.
        const XPU_TRIGGER = 1 << 44;
        /// FI_HMEM_HOST_ALLOC.
        const HMEM_HOST_ALLOC = 1 << 45;
        /// FI_HMEM_DEVICE_ONLY.
        const HMEM_DEVICE_ONLY = 1 << 46;
        /// FI_HMEM: device memory.
        const HMEM = 1 << 47;
        /// FI_VARIABLE_MSG (libfabric 1.x; removed in 2.0, whose bit 48 is
        /// FI_EXACT_DIRECTED_RECV).
        const VARIABLE_MSG = 1 << 48;
        /// FI_TAGGED_DIRECTED_RECV (API 2.0; 1.x's FI_HMEM_HOST_ALLOC bit): tagged
        /// receives may name the sender.
        const TAGGED_DIRECTED_RECV = 1 << 45;
        /// FI_TAGGED_MULTI_RECV (API 2.0; 1.x's FI_HMEM_DEVICE_ONLY bit): FI_MULTI_RECV
        /// on tagged receives.
        const TAGGED_MULTI_RECV = 1 << 46;
        /// FI_EXACT_DIRECTED_RECV (API 2.0; 1.x's FI_VARIABLE_MSG bit): directed
        /// receives name one sender, never FI_ADDR_UNSPEC.
        const EXACT_DIRECTED_RECV = 1 << 48;
        /// FI_RMA_PMEM.
        const RMA_PMEM = 1 << 49;
        /// FI_SOURCE_ERR: report unknown source addresses in error entries.
        const SOURCE_ERR = 1 << 50;
        /// FI_LOCAL_COMM: talk to peers on the same node.
        const LOCAL_COMM = 1 << 51;
        /// FI_REMOTE_COMM: talk to peers on other nodes.
        const REMOTE_COMM = 1 << 52;
        /// FI_SHARED_AV.
        const SHARED_AV = 1 << 53;
        /// FI_PROV_ATTR_ONLY (getinfo flag).
        const PROV_ATTR_ONLY = 1 << 54;
        /// FI_NUMERICHOST (getinfo flag): node is a numeric address.
        const NUMERICHOST = 1 << 55;
        /// FI_RMA_EVENT: RMA targets generate events.
        const RMA_EVENT = 1 << 56;
        /// FI_SOURCE: report the source address of received messages; getinfo: node is
        /// the source.
        const SOURCE = 1 << 57;
        /// FI_NAMED_RX_CTX.
        const NAMED_RX_CTX = 1 << 58;
        /// FI_DIRECTED_RECV: receives may name the sender.
        const DIRECTED_RECV = 1 << 59;
        /// FI_CLAIM (op flag, same bit as FI_DIRECTED_RECV): receive a peeked message.
        const CLAIM = 1 << 59;
        /// FI_DISCARD (op flag, same bit as FI_NAMED_RX_CTX): drop a peeked message.
        const DISCARD = 1 << 58;
        /// FI_SELECTIVE_COMPLETION (bind flag, same bit as FI_DIRECTED_RECV).
        const SELECTIVE_COMPLETION = 1 << 59;
    }
}

impl Flags {
    /// FI_TRANSMIT, libfabric's alias of FI_SEND.
    pub const TRANSMIT: Flags = Flags::SEND;

    /// The primary capabilities of fi_getinfo(3) 1.17: a provider grants only those the
    /// application asked for. The man page calls bit 44 `FI_XPU`; the 1.17 header names
    /// it `FI_XPU_TRIGGER`.
    pub const PRIMARY_CAPS: Flags = Flags::MSG
        .union(Flags::RMA)
        .union(Flags::TAGGED)
        .union(Flags::ATOMIC)
        .union(Flags::MULTICAST)
        .union(Flags::NAMED_RX_CTX)
        .union(Flags::DIRECTED_RECV)
        .union(Flags::VARIABLE_MSG)
        .union(Flags::HMEM)
        .union(Flags::COLLECTIVE)
        .union(Flags::XPU_TRIGGER);

    /// The primary modifiers of fi_getinfo(3) 1.17: they narrow a primary capability
    /// (send-only, RMA target only, ...); when none is given, all relevant ones are meant.
    pub const PRIMARY_MODIFIERS: Flags = Flags::READ
        .union(Flags::WRITE)
        .union(Flags::RECV)
        .union(Flags::SEND)
        .union(Flags::REMOTE_READ)
        .union(Flags::REMOTE_WRITE);

    /// The secondary capabilities of fi_getinfo(3) 1.17: a provider must honour them when
    /// asked and may grant them unasked when that costs nothing.
    pub const SECONDARY_CAPS: Flags = Flags::MULTI_RECV
        .union(Flags::SOURCE)
        .union(Flags::RMA_EVENT)
        .union(Flags::SHARED_AV)
        .union(Flags::TRIGGER)
        .union(Flags::FENCE)
        .union(Flags::LOCAL_COMM)
        .union(Flags::REMOTE_COMM)
        .union(Flags::SOURCE_ERR)
        .union(Flags::RMA_PMEM);

    /// The capabilities that apply to a transmit context (fi_endpoint(3) `fi_tx_attr::caps`).
    pub const TX_CAPS: Flags = Flags::MSG
        .union(Flags::RMA)
        .union(Flags::TAGGED)
        .union(Flags::ATOMIC)
        .union(Flags::READ)
        .union(Flags::WRITE)
        .union(Flags::SEND)
        .union(Flags::HMEM)
        .union(Flags::TRIGGER)
        .union(Flags::FENCE)
        .union(Flags::MULTICAST)
        .union(Flags::RMA_PMEM)
        .union(Flags::NAMED_RX_CTX)
        .union(Flags::COLLECTIVE)
        .union(Flags::XPU_TRIGGER);

    /// The capabilities that apply to a receive context (fi_endpoint(3) `fi_rx_attr::caps`).
    pub const RX_CAPS: Flags = Flags::MSG
        .union(Flags::RMA)
        .union(Flags::TAGGED)
        .union(Flags::ATOMIC)
        .union(Flags::REMOTE_READ)
        .union(Flags::REMOTE_WRITE)
        .union(Flags::RECV)
        .union(Flags::HMEM)
        .union(Flags::TRIGGER)
        .union(Flags::RMA_PMEM)
        .union(Flags::DIRECTED_RECV)
        .union(Flags::VARIABLE_MSG)
        .union(Flags::TAGGED_DIRECTED_RECV)
        .union(Flags::TAGGED_MULTI_RECV)
        .union(Flags::MULTI_RECV)
        .union(Flags::SOURCE)
        .union(Flags::RMA_EVENT)
        .union(Flags::SOURCE_ERR)
        .union(Flags::COLLECTIVE)
        .union(Flags::XPU_TRIGGER);

    /// The domain capabilities (fi_domain(3) `fi_domain_attr::caps`), all secondary.
    pub const DOMAIN_CAPS: Flags = Flags::LOCAL_COMM
        .union(Flags::REMOTE_COMM)
        .union(Flags::SHARED_AV);
}

bitflags! {
    /// Mode bits (`fi_info::mode`): what the application promises to do for the provider.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Mode: u64 {
        /// FI_CONTEXT: each operation's context points at a `struct fi_context`.
        const CONTEXT = 1 << 59;
        /// FI_MSG_PREFIX: buffers start with space for a provider header.
        const MSG_PREFIX = 1 << 58;
        /// FI_ASYNC_IOV: iovecs must stay valid until completion.
        const ASYNC_IOV = 1 << 57;
        /// FI_RX_CQ_DATA: remote CQ data consumes a receive buffer.
        const RX_CQ_DATA = 1 << 56;
        /// FI_LOCAL_MR (deprecated): local buffers must be registered.
        const LOCAL_MR = 1 << 55;
        /// FI_NOTIFY_FLAGS_ONLY: completion flags are limited to the documented set.
        const NOTIFY_FLAGS_ONLY = 1 << 54;
        /// FI_RESTRICTED_COMP: CQs and counters are used only with endpoints.
        const RESTRICTED_COMP = 1 << 53;
        /// FI_CONTEXT2: each operation's context points at a `struct fi_context2`.
        const CONTEXT2 = 1 << 52;
        /// FI_BUFFERED_RECV.
        const BUFFERED_RECV = 1 << 51;
    }
}

bitflags! {
    /// Memory-registration mode bits (`fi_domain_attr::mr_mode`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct MrMode: u32 {
        /// FI_MR_BASIC (old enum value 1).
        const BASIC = 1 << 0;
        /// FI_MR_SCALABLE (old enum value 2).
        const SCALABLE = 1 << 1;
        /// FI_MR_LOCAL: local buffers must be registered.
        const LOCAL = 1 << 2;
        /// FI_MR_RAW: keys are raw bytes.
        const RAW = 1 << 3;
        /// FI_MR_VIRT_ADDR: RMA addresses are virtual addresses, not offsets.
        const VIRT_ADDR = 1 << 4;
        /// FI_MR_ALLOCATED: only allocated memory may be registered.
        const ALLOCATED = 1 << 5;
        /// FI_MR_PROV_KEY: the provider chooses keys.
        const PROV_KEY = 1 << 6;
        /// FI_MR_MMU_NOTIFY.
        const MMU_NOTIFY = 1 << 7;
        /// FI_MR_RMA_EVENT.
        const RMA_EVENT = 1 << 8;
        /// FI_MR_ENDPOINT: MRs are bound to endpoints.
        const ENDPOINT = 1 << 9;
        /// FI_MR_HMEM.
        const HMEM = 1 << 10;
        /// FI_MR_COLLECTIVE.
        const COLLECTIVE = 1 << 11;
    }
}

bitflags! {
    /// Message ordering bits (`msg_order`, `comp_order` uses [`CompOrder`]).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Order: u64 {
        /// FI_ORDER_RAR.
        const RAR = 1 << 0;
        /// FI_ORDER_RAW.
        const RAW = 1 << 1;
        /// FI_ORDER_RAS.
        const RAS = 1 << 2;
        /// FI_ORDER_WAR.
        const WAR = 1 << 3;
        /// FI_ORDER_WAW.
        const WAW = 1 << 4;
        /// FI_ORDER_WAS.
        const WAS = 1 << 5;
        /// FI_ORDER_SAR.
        const SAR = 1 << 6;
        /// FI_ORDER_SAW.
        const SAW = 1 << 7;
        /// FI_ORDER_SAS: sends are delivered in the order they were issued.
        const SAS = 1 << 8;
        /// FI_ORDER_DATA (data ordering in `msg_order`).
        const DATA = 1 << 16;
        /// FI_ORDER_RMA_RAR.
        const RMA_RAR = 1 << 32;
        /// FI_ORDER_RMA_RAW.
        const RMA_RAW = 1 << 33;
        /// FI_ORDER_RMA_WAR.
        const RMA_WAR = 1 << 34;
        /// FI_ORDER_RMA_WAW.
        const RMA_WAW = 1 << 35;
        /// FI_ORDER_ATOMIC_RAR.
        const ATOMIC_RAR = 1 << 36;
        /// FI_ORDER_ATOMIC_RAW.
        const ATOMIC_RAW = 1 << 37;
        /// FI_ORDER_ATOMIC_WAR.
        const ATOMIC_WAR = 1 << 38;
        /// FI_ORDER_ATOMIC_WAW.
        const ATOMIC_WAW = 1 << 39;
    }
}

impl Order {
    /// FI_ORDER_NONE.
    pub const NONE: Order = Order::empty();
    /// FI_ORDER_STRICT: the nine classic ordering bits.
    pub const STRICT: Order = Order::from_bits_truncate(0x1FF);
}

bitflags! {
    /// Completion ordering (`comp_order`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct CompOrder: u64 {
        /// FI_ORDER_STRICT: completions in the order operations were posted.
        const STRICT = 0x1FF;
        /// FI_ORDER_DATA: data is placed in order.
        const DATA = 1 << 16;
    }
}

impl CompOrder {
    /// FI_ORDER_NONE.
    pub const NONE: CompOrder = CompOrder::empty();
}

/// `fi_addr_t`: an address vector index or mapped address.
pub type FiAddr = u64;

/// FI_ADDR_UNSPEC / FI_ADDR_NOTAVAIL: no address.
pub const FI_ADDR_UNSPEC: FiAddr = u64::MAX;
/// FI_ADDR_NOTAVAIL: an address that could not be inserted or is unknown.
pub const FI_ADDR_NOTAVAIL: FiAddr = u64::MAX;
/// FI_KEY_NOTAVAIL: a memory key that is not available.
pub const FI_KEY_NOTAVAIL: u64 = u64::MAX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_fabric_h() {
        assert_eq!(Flags::MSG.bits(), 0x2);
        assert_eq!(Flags::TAGGED.bits(), 0x8);
        assert_eq!(Flags::SEND.bits(), 1 << 11);
        assert_eq!(Flags::INJECT.bits(), 1 << 25);
        assert_eq!(Flags::DIRECTED_RECV, Flags::CLAIM);
        assert_eq!(Flags::SELECTIVE_COMPLETION.bits(), 1 << 59);
        assert_eq!(Mode::CONTEXT.bits(), 1 << 59);
        assert_eq!(MrMode::PROV_KEY.bits(), 64);
        assert_eq!(Order::STRICT.bits(), 0x1FF);
        assert!(Flags::PRIMARY_CAPS.contains(Flags::TAGGED));
        assert!(!Flags::PRIMARY_CAPS.intersects(Flags::SECONDARY_CAPS));
        assert!(!Flags::PRIMARY_CAPS.intersects(Flags::PRIMARY_MODIFIERS));
        assert!(!Flags::SECONDARY_CAPS.intersects(Flags::PRIMARY_MODIFIERS));
        // fi_getinfo(3) 1.17 lists exactly eleven primary caps, six modifiers, ten
        // secondary caps.
        assert_eq!(Flags::PRIMARY_CAPS.bits().count_ones(), 11);
        assert_eq!(Flags::PRIMARY_MODIFIERS.bits().count_ones(), 6);
        assert_eq!(Flags::SECONDARY_CAPS.bits().count_ones(), 10);
        assert!(
            Flags::DOMAIN_CAPS
                .difference(Flags::SECONDARY_CAPS)
                .is_empty()
        );
        assert!(Flags::TX_CAPS.contains(Flags::SEND) && !Flags::TX_CAPS.contains(Flags::RECV));
        assert!(Flags::RX_CAPS.contains(Flags::SOURCE) && !Flags::RX_CAPS.contains(Flags::SEND));
    }
}
