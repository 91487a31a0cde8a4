//! Boot: from QEMU's (or a boot loader's) jump to `_start` to Rust with caches on.
//!
//! 1. Secondary cores park (`MPIDR_EL1.Aff0 != 0`); the image is single-core.
//! 2. At EL2 (QEMU `virtualization=on`, or a DPU boot loader), drop to EL1h with the
//!    timer accessible; at EL1, carry on. (EL3 starts are not supported: QEMU `virt`
//!    only starts there with `secure=on`.)
//! 3. Stack (`__stack_top`, see `firmware.ld`), FP/SIMD enabled (`CPACR_EL1.FPEN`; the
//!    compiler uses NEON registers for copies), `.bss` zeroed, exception vectors set.
//! 4. An identity map with 1 GiB blocks: 0..1 GiB device memory (nGnRnE, never
//!    executable: the UART, virtio-mmio, the GIC), 1..2 GiB normal write-back cacheable
//!    memory (QEMU virt RAM), nothing else; then MMU, data and instruction caches on.
//! 5. `kmain`.
//!
//! Everything before `kmain` is assembly, so no compiled code runs with the MMU off
//! (where every access is device memory and an unaligned one faults).
//!
//! Exceptions are terminal: each vector passes its index, `ESR_EL1`, `ELR_EL1` and
//! `FAR_EL1` to [`exception`], which logs them and stops.

core::arch::global_asm!(
    r#"
    .section .text.boot, "ax"
    .global _start
_start:
    mrs     x0, mpidr_el1
    and     x0, x0, #0xff
    cbz     x0, 1f
0:  wfe
    b       0b

1:  mrs     x0, CurrentEL
    lsr     x0, x0, #2
    cmp     x0, #2
    b.ne    2f
    // EL2 -> EL1h: EL1 is AArch64, EL1 may use the physical timer, no virtual offset.
    mov     x0, #(1 << 31)
    msr     hcr_el2, x0
    mov     x0, #3
    msr     cnthctl_el2, x0
    msr     cntvoff_el2, xzr
    mov     x0, #0x3c5
    msr     spsr_el2, x0
    adr     x0, 2f
    msr     elr_el2, x0
    eret

2:  adrp    x0, __stack_top
    add     x0, x0, :lo12:__stack_top
    mov     sp, x0
    mov     x0, #(3 << 20)
    msr     cpacr_el1, x0
    isb

    adrp    x0, __bss_start
    add     x0, x0, :lo12:__bss_start
    adrp    x1, __bss_end
    add     x1, x1, :lo12:__bss_end
3:  cmp     x0, x1
    b.hs    4f
    stp     xzr, xzr, [x0], #16
    b       3b

4:  adrp    x0, __vectors
    add     x0, x0, :lo12:__vectors
    msr     vbar_el1, x0

    // Level-1 table: [0] = 0..1 GiB device, [1] = 1..2 GiB normal memory.
    adrp    x0, __page_table
    add     x0, x0, :lo12:__page_table
    mov     x1, #0x401                  // block, AF, AttrIndx 0 (device)
    orr     x1, x1, #(3 << 53)          // PXN | UXN
    str     x1, [x0]
    mov     x1, #0x40000000
    mov     x2, #0x705                  // block, AttrIndx 1, inner shareable, AF
    orr     x1, x1, x2
    str     x1, [x0, #8]
    mov     x1, #0xff00                 // MAIR: attr0 device-nGnRnE, attr1 normal WB
    msr     mair_el1, x1
    // TCR: T0SZ=32 (4 GiB), WB cacheable inner shareable walks, 4 KiB granule,
    // no TTBR1 walks (EPD1), 32-bit physical addresses.
    movz    x1, #0x3520
    movk    x1, #0x80, lsl #16
    msr     tcr_el1, x1
    msr     ttbr0_el1, x0
    dsb     ish
    isb
    tlbi    vmalle1
    dsb     ish
    isb
    mrs     x1, sctlr_el1
    orr     x1, x1, #1                  // M
    orr     x1, x1, #(1 << 2)           // C
    orr     x1, x1, #(1 << 12)          // I
    bic     x1, x1, #(1 << 1)           // A: unaligned normal accesses allowed
    msr     sctlr_el1, x1
    isb

    bl      kmain
    b       0b

    .section .bss.page_table, "aw", @nobits
    .balign 4096
__page_table:
    .space  4096

    .section .text.vectors, "ax"
    .balign 2048
__vectors:
    .set    vec, 0
    .rept   16
    .balign 128
    mov     x0, #vec
    mrs     x1, esr_el1
    mrs     x2, elr_el1
    mrs     x3, far_el1
    b       {handler}
    .set    vec, vec + 1
    .endr
"#,
    handler = sym exception,
);

/// Every exception ends here: `kind` is the vector index (0-3 current EL with SP0,
/// 4-7 current EL with SPx, 8-15 lower ELs; within each group synchronous, IRQ, FIQ,
/// SError).
extern "C" fn exception(kind: u64, esr: u64, elr: u64, far: u64) -> ! {
    super::log::force_release();
    defmt::error!(
        "EXCEPTION vector {=u64} ESR_EL1={=u64:#x} (class {=u64:#x}) ELR_EL1={=u64:#x} FAR_EL1={=u64:#x}",
        kind,
        esr,
        esr >> 26,
        elr,
        far
    );
    super::exit(102)
}

unsafe extern "C" {
    static __stack_bottom: u8;
    static __stack_top: u8;
}

/// Byte the unused stack is painted with.
const PAINT: u8 = 0xa5;

/// Paints the stack below the current frame (minus a margin), so that
/// [`stack_peak`] can tell how deep it ever went. Call once, early.
#[inline(never)]
pub fn paint_stack() {
    let bottom = core::ptr::addr_of!(__stack_bottom) as usize;
    let here = {
        let marker = 0u8;
        core::ptr::addr_of!(marker) as usize
    };
    let end = here.saturating_sub(4096).max(bottom);
    // SAFETY: `bottom..end` is the unused part of our own stack (the linker script's
    // `.stack` section, below the live frames with a 4 KiB margin); nothing else refers
    // to it, and writing bytes there has no other effect.
    unsafe { core::ptr::write_bytes(bottom as *mut u8, PAINT, end - bottom) };
}

/// Stack size and the deepest use since [`paint_stack`] (bytes).
pub fn stack_peak() -> (usize, usize) {
    let bottom = core::ptr::addr_of!(__stack_bottom) as usize;
    let top = core::ptr::addr_of!(__stack_top) as usize;
    let mut p = bottom;
    // SAFETY: reads of our own stack memory below the live frames' deepest point so
    // far (bytes still painted are by definition not in use); `p` stays below `top`.
    while p < top && unsafe { core::ptr::read_volatile(p as *const u8) } == PAINT {
        p += 1;
    }
    (top - bottom, top - p)
}
