//! `probe!` and `probe_enabled!`: probes for Rust programs.
//!
//! A plain `extern "C"` call to a probe symbol compiles to `call *sym@GOTPCREL(%rip)`, and in a
//! loop LLVM hoists the GOT load out and calls through a register, which is no longer a site.
//! These macros emit the call themselves (`asm!` with `sym`), so every use is exactly one
//! `call __dtrace_sdt_<provider>__<name>` (`e8` + `R_X86_64_PLT32`) with its arguments in rdi..r9
//! and the C ABI's caller-saved registers clobbered, like a real call. The `asm!` block may use the
//! stack (no `nostack`), so the compiler keeps nothing in the red zone across it.

/// A named probe with up to six integer arguments: `probe!(provider, name, a, b)`.
#[macro_export]
macro_rules! probe {
    ($provider:ident, $name:ident $(, $arg:expr)* $(,)?) => {{
        #[allow(unused_unsafe)]
        unsafe {
            unsafe extern "C" {
                #[link_name = concat!("__dtrace_sdt_", stringify!($provider), "__", stringify!($name))]
                fn probe_symbol();
            }
            $crate::__probe_call!(probe_symbol; [$($arg),*]; ["rdi", "rsi", "rdx", "rcx", "r8", "r9"]);
        }
    }};
}

/// Whether a probe is enabled: `if probe_enabled!(provider, name) { ... }`; false when disabled,
/// where the call is `mov $0, %eax`.
#[macro_export]
macro_rules! probe_enabled {
    ($provider:ident, $name:ident) => {{
        let enabled: u32;
        #[allow(unused_unsafe)]
        unsafe {
            unsafe extern "C" {
                #[link_name = concat!("__dtrace_isenabled_", stringify!($provider), "__", stringify!($name))]
                fn isenabled_symbol();
            }
            ::core::arch::asm!("call {f}", f = sym isenabled_symbol, lateout("eax") enabled, clobber_abi("C"));
        }
        enabled != 0
    }};
}

/// Boot-profiling annotations (TSLOG-style), zero-cost NOP sites like every probe:
/// `annotate!(enter)` / `annotate!(exit)` bracket a region named after the enclosing function;
/// `annotate!(event, name)`, `annotate!(wait, what)` / `annotate!(unwait, what)`,
/// `annotate!(hold, what)` / `annotate!(release, what)`, `annotate!(thread, name)`.
#[macro_export]
macro_rules! annotate {
    (enter) => {
        $crate::probe!(bootprof, enter)
    };
    (exit) => {
        $crate::probe!(bootprof, exit)
    };
    (event, $name:ident) => {
        $crate::probe!(bpevent, $name)
    };
    (wait, $what:ident) => {
        $crate::probe!(bpwait, $what)
    };
    (unwait, $what:ident) => {
        $crate::probe!(bpunwait, $what)
    };
    (hold, $what:ident) => {
        $crate::probe!(bphold, $what)
    };
    (release, $what:ident) => {
        $crate::probe!(bprelease, $what)
    };
    (thread, $name:ident) => {
        $crate::probe!(bpthread, $name)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __probe_call {
    ($f:ident; []; $regs:tt) => {
        ::core::arch::asm!("call {f}", f = sym $f, clobber_abi("C"))
    };
    ($f:ident; [$a:expr]; $regs:tt) => {
        ::core::arch::asm!("call {f}", f = sym $f, in("rdi") ($a) as u64, clobber_abi("C"))
    };
    ($f:ident; [$a:expr, $b:expr]; $regs:tt) => {
        ::core::arch::asm!("call {f}", f = sym $f, in("rdi") ($a) as u64, in("rsi") ($b) as u64,
            clobber_abi("C"))
    };
    ($f:ident; [$a:expr, $b:expr, $c:expr]; $regs:tt) => {
        ::core::arch::asm!("call {f}", f = sym $f, in("rdi") ($a) as u64, in("rsi") ($b) as u64,
            in("rdx") ($c) as u64, clobber_abi("C"))
    };
    ($f:ident; [$a:expr, $b:expr, $c:expr, $d:expr]; $regs:tt) => {
        ::core::arch::asm!("call {f}", f = sym $f, in("rdi") ($a) as u64, in("rsi") ($b) as u64,
            in("rdx") ($c) as u64, in("rcx") ($d) as u64, clobber_abi("C"))
    };
    ($f:ident; [$a:expr, $b:expr, $c:expr, $d:expr, $e:expr]; $regs:tt) => {
        ::core::arch::asm!("call {f}", f = sym $f, in("rdi") ($a) as u64, in("rsi") ($b) as u64,
            in("rdx") ($c) as u64, in("rcx") ($d) as u64, in("r8") ($e) as u64, clobber_abi("C"))
    };
    ($f:ident; [$a:expr, $b:expr, $c:expr, $d:expr, $e:expr, $g:expr]; $regs:tt) => {
        ::core::arch::asm!("call {f}", f = sym $f, in("rdi") ($a) as u64, in("rsi") ($b) as u64,
            in("rdx") ($c) as u64, in("rcx") ($d) as u64, in("r8") ($e) as u64, in("r9") ($g) as u64,
            clobber_abi("C"))
    };
}
