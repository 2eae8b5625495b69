//! The functions `bootprof-link` wraps: what a program's link sends to the runtime's
//! `__wrap_NAME`, and what the runtime library's own link (`runtime/cli/build.rs`, which
//! includes this file) points its `__real_NAME` at. Needs nothing but `core`.

/// The functions whose calls from the program go to the runtime's `__wrap_NAME` (`-Wl,--wrap`,
/// which works for static programs too), each with whether the link must pull the real one in
/// (`-u`): the C library's jumps that leave frames without returning, and the stack walkers
/// that must see the real return addresses of frames whose return the runtime hooked
/// (`BOOTPROF_GRAPH`): `backtrace`, and the unwinder's `_Unwind_Backtrace` (Rust's and C++'s
/// backtraces), not pulled in, so that a program that walks no stacks gains no unwinder, and
/// wrapped only when an input object calls it (see `runtime_lib::runtime_args`).
pub const WRAPPED: [(&str, bool); 6] = [
    ("longjmp", true),
    ("_longjmp", true),
    ("siglongjmp", true),
    ("__longjmp_chk", true),
    ("backtrace", true),
    ("_Unwind_Backtrace", false),
];
