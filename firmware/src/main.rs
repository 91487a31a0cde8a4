//! The firmware image: the ofi-nostd core on one Armv8-A core, serving a host through a
//! virtio-net device on QEMU's `virt` machine.
//!
//! Boot ([`rt::boot`]) brings the core to EL1 with the MMU and caches on, then
//! `kmain` finds the virtio-net transport, brings the NIC queue up (jumbo frames when the
//! device advises an MTU), opens the core in a static [`firmware::arena::Arena`]
//! ([`firmware::app::Responder`]: DGRAM and RDM endpoints with msg and tagged echo
//! services) at the address the MAC names ([`firmware::app::Plan::from_mac`]), and
//! polls forever: progress whenever a frame arrived or the core's
//! [`poll_timeout`](firmware::app::Responder::poll_timeout) passed on the generic
//! timer, completions turned into echoes, a statistics line every second while traffic
//! flows.
//!
//! Bare-metal targets only; elsewhere this file compiles to a stub so host builds of the
//! workspace keep working.

#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("the firmware image runs on bare metal: build it with `cargo xtask firmware`");
    std::process::exit(2);
}

#[cfg(target_os = "none")]
mod rt;

#[cfg(target_os = "none")]
mod image {
    use firmware::app::{FW_ARENA, Plan, Responder, Stats};
    use firmware::arena::Arena;
    use firmware::virtio::{MmioRegs, NetMem, VirtioNet};
    use ofi_nostd::time::{Duration, Instant};
    use static_cell::{ConstStaticCell, StaticCell};
    use wire::link::Link as _;

    use crate::rt::{self, timer::GenericTimer};

    /// QEMU virt: 32 virtio-mmio transports from here, 0x200 bytes apart.
    const VIRTIO_MMIO_BASE: usize = 0x0a00_0000;
    const VIRTIO_MMIO_STRIDE: usize = 0x200;
    const VIRTIO_MMIO_COUNT: usize = 32;

    /// Receive and transmit descriptors; buffers of 9 KiB (header + a 9014-byte jumbo
    /// frame: QEMU's `host_mtu=9000`).
    const RX: usize = 64;
    const TX: usize = 64;
    const BUF: usize = 9216;

    type Nic = VirtioNet<'static, MmioRegs, RX, TX, BUF>;
    type Store = &'static Arena<FW_ARENA>;
    type App = Responder<Store>;

    static NET_MEM: ConstStaticCell<NetMem<RX, TX, BUF>> = ConstStaticCell::new(NetMem::new());
    static ARENA: Arena<FW_ARENA> = Arena::new();
    static APP: StaticCell<App> = StaticCell::new();

    /// Finds the first virtio-mmio transport with a network device.
    fn find_nic() -> Option<MmioRegs> {
        (0..VIRTIO_MMIO_COUNT).find_map(|i| {
            let base = VIRTIO_MMIO_BASE + i * VIRTIO_MMIO_STRIDE;
            // SAFETY: QEMU virt has a virtio-mmio register window at each of these
            // addresses (device memory in the boot map); probing only reads it, and the
            // transport we keep is used by nothing else.
            let regs = unsafe { MmioRegs::new(base) };
            match Nic::probe(&regs) {
                Ok(()) => Some(regs),
                Err(firmware::virtio::InitError::Legacy(v)) => {
                    defmt::error!(
                        "virtio-mmio at {=usize:#x}: legacy transport (version {=u32}); run QEMU with -global virtio-mmio.force-legacy=false",
                        base,
                        v
                    );
                    None
                }
                Err(_) => None,
            }
        })
    }

    #[unsafe(no_mangle)]
    extern "C" fn kmain() -> ! {
        rt::boot::paint_stack();
        let mut timer = GenericTimer::new();
        defmt::info!(
            "ofi-nostd firmware {=str}: booted at EL1, MMU and caches on, generic timer at {=u64} Hz",
            env!("CARGO_PKG_VERSION"),
            timer.frequency()
        );
        let Some(regs) = find_nic() else {
            defmt::error!("no virtio-net device on the virtio-mmio transports");
            rt::exit(3);
        };
        let base = regs.base();
        let mut nic = match Nic::new(
            regs,
            NET_MEM.take(),
            Plan::mac_for(firmware::app::DEFAULT_IP),
        ) {
            Ok(n) => n,
            Err(e) => {
                defmt::error!(
                    "virtio-net at {=usize:#x}: bring-up failed: {}",
                    base,
                    defmt::Debug2Format(&e)
                );
                rt::exit(4);
            }
        };
        let plan = Plan::from_mac(nic.mac());
        let [m0, m1, m2, m3, m4, m5] = plan.mac;
        let [a, b, c, d] = plan.ip;
        defmt::info!(
            "virtio-net at {=usize:#x}: features {=u64:#x}, frames up to {=usize} bytes, MAC {=u8:02x}:{=u8:02x}:{=u8:02x}:{=u8:02x}:{=u8:02x}:{=u8:02x}, {=usize} rx / {=usize} tx descriptors",
            base,
            nic.features(),
            nic.frame_max(),
            m0,
            m1,
            m2,
            m3,
            m4,
            m5,
            RX,
            TX
        );
        let caps = nic.capabilities();
        let seed = timer.micros() ^ 0x6f66_692d_6e6f_7374;
        let app = match Responder::new(&caps, &plan, &ARENA, seed) {
            Ok(r) => APP.init(r),
            Err(e) => {
                defmt::error!(
                    "core bring-up failed: {=str} returned {=str}",
                    e.call,
                    e.errno.name()
                );
                rt::exit(5);
            }
        };
        let (stack, peak) = rt::boot::stack_peak();
        defmt::info!(
            "core up in a static arena: {=usize} of {=usize} bytes used, responder {=usize} bytes static, stack peak {=usize} of {=usize} bytes",
            ARENA.used(),
            FW_ARENA,
            core::mem::size_of::<App>(),
            peak,
            stack
        );
        let peer = plan.host_peer();
        let [p0, p1, p2, p3] = peer.ip;
        defmt::info!(
            "ready: DGRAM echo (endpoint 0) and RDM msg and tagged echo (endpoint 1) at {=u8}.{=u8}.{=u8}.{=u8}:{=u16}/{=u8}, serving {=u8}.{=u8}.{=u8}.{=u8}:{=u16}",
            a,
            b,
            c,
            d,
            plan.port,
            plan.prefix_len,
            p0,
            p1,
            p2,
            p3,
            peer.port
        );
        serve(app, &mut nic, &mut timer)
    }

    /// The main loop: the core's progress whenever a frame is waiting, the core's
    /// next timer ([`Responder::poll_timeout`]) has come, or the last pass moved
    /// something; echoes in the same pass. Once a second, a statistics line per service
    /// whose counters changed.
    fn serve(app: &mut App, nic: &mut Nic, timer: &mut GenericTimer) -> ! {
        let mut next_report = timer.now() + Duration::from_secs(1);
        let mut reported = [Stats::default(); 3];
        let mut moved = true;
        let mut wake = Instant::ZERO;
        loop {
            let now = timer.now();
            // Only memory is polled here: the virtio rings, never a device register (in
            // QEMU every register access takes the global lock the TAP's I/O needs).
            if moved || now >= wake || nic.rx_pending() {
                moved = app.poll(now, nic);
                // At the latest every 10 ms (ARP and the like), sooner for the core's
                // own timers (retransmissions, delayed acks).
                let tick = now + Duration::from_millis(10);
                wake = app.poll_timeout().map_or(tick, |t| t.min(tick));
            }
            if now >= next_report {
                next_report = now + Duration::from_secs(1);
                report(app, nic, &mut reported);
            }
            if !moved {
                core::hint::spin_loop();
            }
        }
    }

    /// The statistics lines of the services whose counters changed since `reported`.
    fn report(app: &App, nic: &Nic, reported: &mut [Stats; 3]) {
        let now = [*app.stats(), *app.msg_stats(), *app.tagged_stats()];
        if now == *reported {
            return;
        }
        let n = nic.stats();
        let net = app.domain().net_stats();
        let s = now[0];
        if s != reported[0] {
            defmt::info!(
                "dgram echo: {=u64} received, {=u64} echoed ({=u64} bytes), {=u64} errors, {=u64} unknown sources; nic rx {=u64} tx {=u64} full {=u64}; net dropped {=u64}",
                s.rx,
                s.echoed,
                s.bytes,
                s.errors,
                s.unknown_src,
                n.rx_frames,
                n.tx_frames,
                n.tx_full,
                net.total_dropped()
            );
        }
        if now[1..] != reported[1..] {
            let (m, t) = (now[1], now[2]);
            let r = app.rdm_stats().unwrap_or_default();
            defmt::info!(
                "rdm echo: msg {=u64} echoed ({=u64} bytes), tagged {=u64} echoed ({=u64} bytes), {=u64} errors; {=u64} packets out, {=u64} retransmitted, {=u64} in, {=u64} duplicates, {=u64} sessions; nic rx {=u64} tx {=u64} full {=u64}; net dropped {=u64}; stack peak {=usize}",
                m.echoed,
                m.bytes,
                t.echoed,
                t.bytes,
                m.errors + t.errors,
                r.tx_packets,
                r.tx_timeout_retransmits + r.tx_fast_retransmits,
                r.rx_packets,
                r.rx_duplicates,
                r.sessions,
                n.rx_frames,
                n.tx_frames,
                n.tx_full,
                net.total_dropped(),
                rt::boot::stack_peak().1
            );
        }
        *reported = now;
    }
}
