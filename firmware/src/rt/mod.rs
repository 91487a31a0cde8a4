//! The bare-metal runtime of the image on an Armv8-A core: boot (exception level, MMU,
//! FP/SIMD, stack, `.bss`), exception vectors, the generic timer, defmt over the PL011
//! UART, semihosting exit, and the panic handler.

pub mod boot;
pub mod log;
pub mod semihosting;
pub mod timer;

/// Stops this core for good (interrupts are masked: `wfe` only wakes on events).
pub fn halt() -> ! {
    loop {
        // SAFETY: `wfe` only waits for an event; no memory or register effects.
        unsafe { core::arch::asm!("wfe", options(nomem, nostack, preserves_flags)) };
    }
}

/// Ends the run: exits QEMU with `code` through semihosting when the image was built
/// for QEMU (the `qemu-exit` feature), else halts.
pub fn exit(code: u32) -> ! {
    if cfg!(feature = "qemu-exit") {
        semihosting::exit(code);
    }
    halt()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    static PANICKING: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    if !PANICKING.swap(true, core::sync::atomic::Ordering::Relaxed) {
        log::force_release();
        let msg = defmt::Display2Format(&info.message());
        match info.location() {
            Some(l) => defmt::error!("PANIC at {=str}:{=u32}: {}", l.file(), l.line(), msg),
            None => defmt::error!("PANIC: {}", msg),
        }
    }
    exit(101)
}
