//! The firmware image: the ofi-nostd core on one Armv8-A core, serving a host through a
//! virtio-net device on QEMU's `virt` machine.
//!
//! Boot ([`rt::boot`]) brings the core to EL1 with the MMU and caches on, then
//! `kmain` finds the virtio-net transport, brings the NIC queue up, opens the core on
//! static pools ([`firmware::app::Responder`] over `Fixed<16>` storage) at the address
//! the MAC names ([`firmware::app::Plan::from_mac`]), and polls forever: progress,
//! completions turned into echoes, a statistics line every second while traffic flows.
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
    use firmware::app::{Plan, Responder};
    use firmware::virtio::{MmioRegs, NetMem, VirtioNet};
    use ofi_nostd::storage::Fixed;
    use ofi_nostd::time::Duration;
    use static_cell::{ConstStaticCell, StaticCell};
    use wire::link::Link as _;

    use crate::rt::{self, timer::GenericTimer};

    /// QEMU virt: 32 virtio-mmio transports from here, 0x200 bytes apart.
    const VIRTIO_MMIO_BASE: usize = 0x0a00_0000;
    const VIRTIO_MMIO_STRIDE: usize = 0x200;
    const VIRTIO_MMIO_COUNT: usize = 32;

    /// Receive and transmit descriptors; buffers of 2 KiB (header + 1514-byte frame).
    const RX: usize = 64;
    const TX: usize = 64;
    const BUF: usize = 2048;

    type Nic = VirtioNet<'static, MmioRegs, RX, TX, BUF>;
    type App = Responder<Fixed<16>>;

    static NET_MEM: ConstStaticCell<NetMem<RX, TX, BUF>> = ConstStaticCell::new(NetMem::new());
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
            "virtio-net at {=usize:#x}: features {=u64:#x}, MAC {=u8:02x}:{=u8:02x}:{=u8:02x}:{=u8:02x}:{=u8:02x}:{=u8:02x}, {=usize} rx / {=usize} tx descriptors",
            base,
            nic.features(),
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
        let app = match Responder::new(&caps, &plan, Fixed::<16>, seed) {
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
            "core up on Fixed<16> storage: responder {=usize} bytes static, stack peak {=usize} of {=usize} bytes",
            core::mem::size_of::<App>(),
            peak,
            stack
        );
        let peer = plan.host_peer();
        let [p0, p1, p2, p3] = peer.ip;
        defmt::info!(
            "ready: DGRAM ping-pong responder at {=u8}.{=u8}.{=u8}.{=u8}:{=u16}/{=u8} (endpoint 0), serving {=u8}.{=u8}.{=u8}.{=u8}:{=u16}",
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

    /// The main loop: progress and echoes; once a second, a statistics line if anything
    /// changed. (An RDM endpoint with message and tagged echo services slots in here as
    /// more services of the same responder.)
    fn serve(app: &mut App, nic: &mut Nic, timer: &mut GenericTimer) -> ! {
        let mut next_report = timer.now() + Duration::from_secs(1);
        let mut reported = *app.stats();
        loop {
            let now = timer.now();
            // Only memory is polled here: the virtio rings, never a device register (in
            // QEMU every register access takes the global lock the TAP's I/O needs).
            let moved = app.poll(now, nic);
            if now >= next_report {
                next_report = now + Duration::from_secs(1);
                let s = *app.stats();
                if s != reported {
                    let n = nic.stats();
                    let net = app.domain().net_stats();
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
                    reported = s;
                }
            }
            if !moved {
                core::hint::spin_loop();
            }
        }
    }
}
