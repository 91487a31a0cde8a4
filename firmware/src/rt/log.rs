//! defmt over the PL011 UART of QEMU `virt` (0x0900_0000): raw defmt frames (rzcobs)
//! written byte by byte, decoded on the host by `defmt-print -e <image>` from QEMU's
//! serial output.
//!
//! Single core, interrupts masked: the logger needs no lock, only a depth count so that
//! a frame started while another is open (a panic inside a log call) is dropped rather
//! than interleaved.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicUsize, Ordering};

/// The PL011 data register.
const UART_DR: usize = 0x0900_0000;
/// The PL011 flag register.
const UART_FR: usize = 0x0900_0018;
/// FR: transmit FIFO full.
const FR_TXFF: u32 = 1 << 5;

/// Writes bytes to the UART, waiting while its FIFO is full.
fn uart_write(bytes: &[u8]) {
    for &b in bytes {
        // SAFETY: UART_FR / UART_DR are the PL011's registers on QEMU virt, mapped as
        // device memory by the boot code; only the logger touches the UART.
        unsafe {
            while core::ptr::read_volatile(UART_FR as *const u32) & FR_TXFF != 0 {
                core::hint::spin_loop();
            }
            core::ptr::write_volatile(UART_DR as *mut u32, u32::from(b));
        }
    }
}

struct EncoderCell(UnsafeCell<defmt::Encoder>);

// SAFETY: the encoder is only touched between acquire and release at depth 1, and the
// image runs on one core with interrupts masked, so never from two contexts at once.
unsafe impl Sync for EncoderCell {}

static ENCODER: EncoderCell = EncoderCell(UnsafeCell::new(defmt::Encoder::new()));
static DEPTH: AtomicUsize = AtomicUsize::new(0);

/// Forgets an open frame (the panic handler calls this so its message gets out even if
/// the panic came from inside a log call; the interrupted frame ends up truncated).
pub fn force_release() {
    if DEPTH.swap(0, Ordering::Relaxed) != 0 {
        // Close the interrupted frame so the decoder can resynchronise.
        uart_write(&[0]);
    }
}

#[defmt::global_logger]
struct Logger;

// SAFETY: acquire/release bracket every frame; nested frames are dropped (DEPTH > 1),
// so the encoder is never used re-entrantly.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        if DEPTH.fetch_add(1, Ordering::Acquire) == 0 {
            // SAFETY: depth 0 -> 1: we are the only user of the encoder.
            unsafe { (*ENCODER.0.get()).start_frame(uart_write) }
        }
    }

    unsafe fn flush() {}

    unsafe fn release() {
        if DEPTH.load(Ordering::Relaxed) == 1 {
            // SAFETY: depth 1: this frame owns the encoder.
            unsafe { (*ENCODER.0.get()).end_frame(uart_write) }
        }
        let _ = DEPTH.fetch_update(Ordering::Release, Ordering::Relaxed, |d| d.checked_sub(1));
    }

    unsafe fn write(bytes: &[u8]) {
        if DEPTH.load(Ordering::Relaxed) == 1 {
            // SAFETY: depth 1: this frame owns the encoder.
            unsafe { (*ENCODER.0.get()).write(bytes, uart_write) }
        }
    }
}

defmt::timestamp!("{=u64:us}", super::timer::uptime_micros());
