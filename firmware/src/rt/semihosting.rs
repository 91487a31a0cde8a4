//! Arm semihosting, AArch64 flavour (`hlt #0xf000`): only SYS_EXIT, to end a QEMU run
//! with an exit code. QEMU must run with `-semihosting`; on a core without a debugger
//! attached the instruction is undefined, so only `qemu-exit` builds use it.

const SYS_EXIT: u64 = 0x18;
const ADP_STOPPED_APPLICATION_EXIT: u64 = 0x2_0026;

/// Exits the emulator with `code`.
pub fn exit(code: u32) -> ! {
    let block = [ADP_STOPPED_APPLICATION_EXIT, u64::from(code)];
    // SAFETY: SYS_EXIT reads the two-word parameter block at x1 (valid, on our stack)
    // and does not return under QEMU; should it return, we halt below.
    unsafe {
        core::arch::asm!(
            "hlt #0xf000",
            in("x0") SYS_EXIT,
            in("x1") block.as_ptr(),
            options(nostack, readonly)
        );
    }
    super::halt()
}
