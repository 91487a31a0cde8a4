//! The Arm generic timer: `CNTPCT_EL0` ticks at `CNTFRQ_EL0` Hz, converted to the
//! core's [`Instant`] (microseconds since boot) and offered as an `embedded-hal` delay.

use ofi_nostd::time::Instant;

/// The EL1 physical counter as a clock.
#[derive(Debug, Clone, Copy)]
pub struct GenericTimer {
    freq: u64,
    start: u64,
}

fn cntpct() -> u64 {
    let t: u64;
    // SAFETY: reading the physical counter has no side effects; EL1 may read it.
    // The `isb` keeps the read from being hoisted above earlier instructions.
    unsafe { core::arch::asm!("isb", "mrs {}, cntpct_el0", out(reg) t, options(nomem, nostack)) };
    t
}

impl GenericTimer {
    /// The timer, its epoch now.
    pub fn new() -> Self {
        let freq: u64;
        // SAFETY: reading the counter frequency register has no side effects.
        unsafe { core::arch::asm!("mrs {}, cntfrq_el0", out(reg) freq, options(nomem, nostack)) };
        GenericTimer {
            // Firmware (or QEMU) programs CNTFRQ; guard against a zero anyway.
            freq: if freq == 0 { 62_500_000 } else { freq },
            start: cntpct(),
        }
    }

    /// Ticks per second.
    pub fn frequency(&self) -> u64 {
        self.freq
    }

    /// Microseconds since [`GenericTimer::new`].
    pub fn micros(&self) -> u64 {
        let ticks = cntpct().wrapping_sub(self.start);
        (u128::from(ticks) * 1_000_000 / u128::from(self.freq)) as u64
    }

    /// The core's time.
    pub fn now(&self) -> Instant {
        Instant::from_micros(self.micros())
    }
}

impl embedded_hal::delay::DelayNs for GenericTimer {
    fn delay_ns(&mut self, ns: u32) {
        let ticks = (u128::from(ns) * u128::from(self.freq)).div_ceil(1_000_000_000) as u64;
        let t0 = cntpct();
        while cntpct().wrapping_sub(t0) < ticks {
            core::hint::spin_loop();
        }
    }
}

/// Microseconds since boot, for defmt timestamps (before [`GenericTimer::new`] runs
/// the counter's own epoch is used).
pub fn uptime_micros() -> u64 {
    let freq: u64;
    // SAFETY: as in `GenericTimer::new`.
    unsafe { core::arch::asm!("mrs {}, cntfrq_el0", out(reg) freq, options(nomem, nostack)) };
    (u128::from(cntpct()) * 1_000_000 / u128::from(freq.max(1))) as u64
}
