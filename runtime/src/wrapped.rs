//! The real functions behind the runtime's `__wrap_` entry points: `bootprof-link` sends the
//! program's calls of `longjmp`, `_longjmp`, `siglongjmp`, `__longjmp_chk`, `backtrace` and
//! `_Unwind_Backtrace` to the runtime (`-Wl,--wrap`), whose wrappers (`graph`'s, or the lean
//! runtime's until it hands them on) call the real ones through these.

use core::ffi::{c_int, c_void};

extern "C" {
    /// The real `longjmp`, `_longjmp`, `siglongjmp` and `__longjmp_chk` (`__real_NAME` under
    /// `-Wl,--wrap`, which is the only way the wrappers are reached): thunks that jump through
    /// the program's PLT, so that the dynamic loader binds each when it is first used, not at
    /// start-up.
    pub(crate) fn bootprof_real_longjmp(env: *mut u64, val: c_int) -> !;
    pub(crate) fn bootprof_real__longjmp(env: *mut u64, val: c_int) -> !;
    pub(crate) fn bootprof_real_siglongjmp(env: *mut u64, val: c_int) -> !;
    pub(crate) fn bootprof_real___longjmp_chk(env: *mut u64, val: c_int) -> !;
    /// The real `backtrace`, the same way.
    pub(crate) fn bootprof_real_backtrace(buffer: *mut *mut c_void, size: c_int) -> c_int;
    /// `__real__Unwind_Backtrace` (weak: 0 when nothing pulled an unwinder into the link).
    #[link_name = "bootprof_real_unwind_backtrace"]
    pub(crate) static REAL_UNWIND_BACKTRACE: usize;
}

/// A wrapped jump's type.
pub(crate) type Jump = unsafe extern "C" fn(*mut u64, c_int) -> !;

/// `_Unwind_Backtrace`'s type.
pub(crate) type UnwindBacktrace = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;

/// `_URC_END_OF_STACK`: what `_Unwind_Backtrace` answers for a walk without an unwinder.
pub(crate) const END_OF_STACK: c_int = 5;

core::arch::global_asm!(
    // The real functions the wrappers call (weak: absent without `-Wl,--wrap`, when no wrapper
    // is reached either), through the PLT: bound at first use.
    ".pushsection .text.bootprof_real,\"ax\",@progbits",
    ".globl bootprof_real_longjmp",
    ".hidden bootprof_real_longjmp",
    "bootprof_real_longjmp: jmp __real_longjmp@PLT",
    ".globl bootprof_real__longjmp",
    ".hidden bootprof_real__longjmp",
    "bootprof_real__longjmp: jmp __real__longjmp@PLT",
    ".globl bootprof_real_siglongjmp",
    ".hidden bootprof_real_siglongjmp",
    "bootprof_real_siglongjmp: jmp __real_siglongjmp@PLT",
    ".globl bootprof_real___longjmp_chk",
    ".hidden bootprof_real___longjmp_chk",
    "bootprof_real___longjmp_chk: jmp __real___longjmp_chk@PLT",
    ".globl bootprof_real_backtrace",
    ".hidden bootprof_real_backtrace",
    "bootprof_real_backtrace: jmp __real_backtrace@PLT",
    ".weak __real_longjmp",
    ".weak __real__longjmp",
    ".weak __real_siglongjmp",
    ".weak __real___longjmp_chk",
    ".weak __real_backtrace",
    ".popsection",
    // The unwinder's, by address (weak: a program without an unwinder has none).
    ".pushsection .data.rel.ro.bootprof_real,\"aw\",@progbits",
    ".p2align 3",
    ".globl bootprof_real_unwind_backtrace",
    ".hidden bootprof_real_unwind_backtrace",
    "bootprof_real_unwind_backtrace:",
    "    .quad __real__Unwind_Backtrace",
    ".weak __real__Unwind_Backtrace",
    ".popsection",
    options(att_syntax)
);
