//! bootprof's runtime, as far as issue 2 needs it: finding this program's probe-site table in
//! memory. Enabling, dispatch and recording come with the runtime issue.
//!
//! The table lies between the linker-defined symbols `__start_bootprof_sites` and
//! `__stop_bootprof_sites`. They are referenced weakly (through the GOT, which holds 0 for an
//! undefined weak symbol) and hidden, so a program or shared object without sites links and finds
//! an empty table, and each shared object finds its own table rather than the main program's.
#![deny(missing_docs)]

pub use bootprof_format as format;

core::arch::global_asm!(
    ".weak __start_bootprof_sites",
    ".hidden __start_bootprof_sites",
    ".weak __stop_bootprof_sites",
    ".hidden __stop_bootprof_sites",
    ".pushsection .text.bootprof_table_bounds,\"ax\",@progbits",
    ".p2align 4",
    ".local bootprof_table_start",
    "bootprof_table_start:",
    "    movq __start_bootprof_sites@GOTPCREL(%rip), %rax",
    "    ret",
    ".local bootprof_table_stop",
    "bootprof_table_stop:",
    "    movq __stop_bootprof_sites@GOTPCREL(%rip), %rax",
    "    ret",
    ".popsection",
    // Exported under mangling-free names the Rust side can declare.
    ".pushsection .data.rel.ro.bootprof_table_bounds,\"aw\",@progbits",
    ".p2align 3",
    ".globl bootprof_table_bounds_fns",
    ".hidden bootprof_table_bounds_fns",
    "bootprof_table_bounds_fns:",
    "    .quad bootprof_table_start",
    "    .quad bootprof_table_stop",
    ".popsection",
    options(att_syntax)
);

extern "C" {
    static bootprof_table_bounds_fns: [extern "C" fn() -> usize; 2];
}

/// The raw bytes of this program's site table (empty when it has no sites) and their address.
pub fn table() -> (&'static [u8], u64) {
    // SAFETY: the two functions only load linker-defined addresses; the static is immutable.
    let (start, stop) = unsafe {
        (
            bootprof_table_bounds_fns[0](),
            bootprof_table_bounds_fns[1](),
        )
    };
    if start == 0 || stop <= start {
        return (&[], 0);
    }
    // SAFETY: the linker places the whole `bootprof_sites` output section between the two
    // symbols, in a loaded, read-only segment that lives as long as the program.
    let bytes = unsafe { core::slice::from_raw_parts(start as *const u8, stop - start) };
    (bytes, start as u64)
}

/// The sites of this program's table, in table order.
pub fn sites() -> format::Sites<'static> {
    let (bytes, base) = table();
    format::sites(bytes, base)
}

/// Reads the NUL-terminated name at `addr`, as stored in a site entry.
///
/// # Safety
/// `addr` must come from a [`format::Site`] of this program's own table.
pub unsafe fn name_at(addr: u64) -> &'static str {
    // SAFETY: the rewriter stores NUL-terminated names in a loaded read-only section.
    let c = unsafe { core::ffi::CStr::from_ptr(addr as *const core::ffi::c_char) };
    c.to_str().unwrap_or("?")
}
