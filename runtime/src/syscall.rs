//! System calls made directly, for the C library functions that only newer symbol versions of
//! glibc have (`openat@GLIBC_2.4`, `stat@GLIBC_2.33`, ...): takes the same arguments as those
//! functions; hands on the same results (`-1` and `errno` on failure). Every symbol version a
//! program needs costs its start-up a check by the dynamic loader; the runtime, in every program,
//! keeps to the ones a plain C program needs anyway. Each function here is one system call with
//! no more to it in the C library than the call itself (`pthread_sigmask` leaves the C library's
//! two internal signals alone, as here).

use libc::{c_char, c_int, c_long};

/// System call `n` with up to four arguments: the kernel's result (`-errno` on failure).
///
/// # Safety
/// The arguments must be what system call `n` takes.
#[inline]
unsafe fn syscall4(n: c_long, a: usize, b: usize, c: usize, d: usize) -> c_long {
    let r: c_long;
    // SAFETY: per the contract; the kernel clobbers rcx and r11 and nothing else.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") n => r,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack)
        );
    }
    r
}

/// System call `n` with six arguments: the kernel's result (`-errno` on failure).
///
/// # Safety
/// The arguments must be what system call `n` takes.
#[inline]
unsafe fn syscall6(n: c_long, args: [usize; 6]) -> c_long {
    let r: c_long;
    // SAFETY: per the contract; the kernel clobbers rcx and r11 and nothing else.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") n => r,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack)
        );
    }
    r
}

/// The kernel's result as the C library gives it: `-1` with `errno` set on failure.
fn result(r: c_long) -> c_int {
    if (-4095..0).contains(&r) {
        // SAFETY: __errno_location returns the calling thread's errno.
        unsafe { *libc::__errno_location() = -r as c_int };
        -1
    } else {
        r as c_int
    }
}

/// As the C library's `copy_file_range` (glibc 2.27): up to `len` bytes from `input` at
/// `*in_off` to `output` at `*out_off`, both offsets advanced; the bytes copied.
pub fn copy_file_range(
    input: c_int,
    in_off: &mut i64,
    output: c_int,
    out_off: &mut i64,
    len: usize,
) -> isize {
    // SAFETY: the kernel reads and writes the two offsets, ours; the descriptors it checks.
    let r = unsafe {
        syscall6(
            libc::SYS_copy_file_range,
            [
                input as usize,
                (in_off as *mut i64) as usize,
                output as usize,
                (out_off as *mut i64) as usize,
                len,
                0,
            ],
        )
    };
    if (-4095..0).contains(&r) {
        // SAFETY: __errno_location returns the calling thread's errno.
        unsafe { *libc::__errno_location() = -r as c_int };
        -1
    } else {
        r as isize
    }
}

/// As the C library's `openat`.
///
/// # Safety
/// `path` must be a NUL-terminated string.
pub unsafe fn openat(dir: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    // SAFETY: per the contract.
    result(unsafe {
        syscall4(
            libc::SYS_openat,
            dir as usize,
            path as usize,
            flags as usize,
            mode as usize,
        )
    })
}

/// As the C library's `unlinkat`.
///
/// # Safety
/// `path` must be a NUL-terminated string.
pub unsafe fn unlinkat(dir: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: per the contract.
    result(unsafe {
        syscall4(
            libc::SYS_unlinkat,
            dir as usize,
            path as usize,
            flags as usize,
            0,
        )
    })
}

/// As the C library's `linkat`.
///
/// # Safety
/// `from` and `to` must be NUL-terminated strings.
pub unsafe fn linkat(
    from_dir: c_int,
    from: *const c_char,
    to_dir: c_int,
    to: *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: per the contract.
    result(unsafe {
        syscall6(
            libc::SYS_linkat,
            [
                from_dir as usize,
                from as usize,
                to_dir as usize,
                to as usize,
                flags as usize,
                0,
            ],
        )
    })
}

/// As the C library's `fallocate`.
pub fn fallocate(fd: c_int, mode: c_int, offset: libc::off_t, len: libc::off_t) -> c_int {
    // SAFETY: plain integers; the kernel checks the descriptor.
    result(unsafe {
        syscall4(
            libc::SYS_fallocate,
            fd as usize,
            mode as usize,
            offset as usize,
            len as usize,
        )
    })
}

/// As the C library's `pwritev` (`pwritev@GLIBC_2.10`). The kernel takes the offset in two
/// halves, the high one ignored on x86-64.
///
/// # Safety
/// `iov` must point to `n` iovecs of readable memory.
pub unsafe fn pwritev(fd: c_int, iov: *const libc::iovec, n: c_int, offset: libc::off_t) -> c_int {
    // SAFETY: per the contract.
    result(unsafe {
        syscall4(
            libc::SYS_pwritev,
            fd as usize,
            iov as usize,
            n as usize,
            offset as usize,
        )
    })
}

/// As the C library's `accept4`.
///
/// # Safety
/// `addr` and `len` must be null or what `accept4` takes.
pub unsafe fn accept4(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
    flags: c_int,
) -> c_int {
    // SAFETY: per the contract.
    result(unsafe {
        syscall4(
            libc::SYS_accept4,
            fd as usize,
            addr as usize,
            len as usize,
            flags as usize,
        )
    })
}

/// As the C library's `pipe2`.
///
/// # Safety
/// `fds` must point to two writable `c_int`s.
pub unsafe fn pipe2(fds: *mut c_int, flags: c_int) -> c_int {
    // SAFETY: per the contract.
    result(unsafe { syscall4(libc::SYS_pipe2, fds as usize, flags as usize, 0, 0) })
}

/// As the C library's `stat` (x86-64: the kernel's `struct stat` is the C library's).
///
/// # Safety
/// `path` must be a NUL-terminated string.
pub unsafe fn stat(path: *const c_char, st: &mut libc::stat) -> c_int {
    // SAFETY: per the contract; the kernel writes the whole struct.
    unsafe { fstatat(path, st, 0) }
}

/// As the C library's `fstat`.
pub fn fstat(fd: c_int, st: &mut libc::stat) -> c_int {
    let st: *mut libc::stat = st;
    // SAFETY: the kernel writes the whole struct, ours; it checks the descriptor.
    result(unsafe { syscall4(libc::SYS_fstat, fd as usize, st as usize, 0, 0) })
}

/// As the C library's `lstat`.
///
/// # Safety
/// `path` must be a NUL-terminated string.
pub unsafe fn lstat(path: *const c_char, st: &mut libc::stat) -> c_int {
    // SAFETY: per the contract.
    unsafe { fstatat(path, st, libc::AT_SYMLINK_NOFOLLOW) }
}

/// `newfstatat` relative to the working directory.
///
/// # Safety
/// `path` must be a NUL-terminated string.
unsafe fn fstatat(path: *const c_char, st: &mut libc::stat, flags: c_int) -> c_int {
    let st: *mut libc::stat = st;
    // SAFETY: per the contract; the kernel writes the whole struct.
    result(unsafe {
        syscall4(
            libc::SYS_newfstatat,
            libc::AT_FDCWD as usize,
            path as usize,
            st as usize,
            flags as usize,
        )
    })
}

/// As the C library's `pthread_sigmask`: the calling thread's signal mask, but never blocking
/// the two signals the C library keeps for itself (thread cancellation and `setuid` across
/// threads, 32 and 33), which its `pthread_sigmask` leaves out too.
pub fn sigmask(how: c_int, set: &libc::sigset_t) -> c_int {
    // The kernel's signal set is the first 64 bits of the C library's.
    // SAFETY: a sigset_t is at least 8 bytes.
    let mut bits = unsafe { *(set as *const libc::sigset_t).cast::<u64>() };
    if how == libc::SIG_BLOCK || how == libc::SIG_SETMASK {
        bits &= !(3u64 << 31);
    }
    let bits: *const u64 = &bits;
    // SAFETY: the kernel reads 8 bytes of the set; no old set is asked for.
    let r = unsafe { syscall4(libc::SYS_rt_sigprocmask, how as usize, bits as usize, 0, 8) };
    // pthread_sigmask returns the error number itself.
    if r < 0 {
        -r as c_int
    } else {
        0
    }
}

/// Blocks every signal the calling thread can block (but the C library's two, as [`sigmask`]);
/// returns the mask it had, for [`restore_mask`].
pub fn block_all() -> u64 {
    let bits: u64 = !(3u64 << 31);
    let mut old: u64 = 0;
    // SAFETY: the kernel reads and writes 8 bytes of signal set each, both ours.
    let r = unsafe {
        syscall4(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK as usize,
            (&raw const bits) as usize,
            (&raw mut old) as usize,
            8,
        )
    };
    if r < 0 {
        // Nothing was blocked: restoring the empty-handed mask must not unblock anything.
        return u64::MAX;
    }
    old
}

/// Puts back the mask [`block_all`] returned.
pub fn restore_mask(old: u64) {
    if old == u64::MAX {
        return;
    }
    // SAFETY: the kernel reads 8 bytes of signal set, ours.
    unsafe {
        syscall4(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as usize,
            (&raw const old) as usize,
            0,
            8,
        )
    };
}

/// As the GNU C library's `strerror_r` (the GNU one, of the oldest symbol version, rather than
/// the XSI `__xpg_strerror_r`): the message for `errnum`, in `buf` or in the C library's own
/// memory.
///
/// # Safety
/// `buf` must be writable for `len` bytes.
pub unsafe fn strerror_r(errnum: c_int, buf: *mut c_char, len: usize) -> *const c_char {
    extern "C" {
        #[link_name = "strerror_r"]
        fn gnu_strerror_r(errnum: c_int, buf: *mut c_char, len: usize) -> *mut c_char;
    }
    // SAFETY: per the contract.
    unsafe { gnu_strerror_r(errnum, buf, len) }
}

/// The kernel's `struct sigaction` on x86-64 (the C library's is larger: a 1024-bit mask).
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

/// `SA_RESTORER`: the action names the code its handler returns to.
const SA_RESTORER: u64 = 0x0400_0000;

/// As the C library's `sigaction`, with the C library's `struct sigaction`: the kernel's view of
/// the action, translated (the first 64 signals of the mask, as the kernel keeps them); a handler
/// installed here returns through [`bootprof_restore_rt`] (the C library's own `__restore_rt`
/// is not exported), unless the action names its own restorer (one read back from the kernel
/// does). The two signals the C library keeps for itself are refused as its `sigaction`
/// refuses them.
///
/// # Safety
/// `act` and `old` must each be null or point to a `libc::sigaction`; a handler installed must be
/// fit to run on a signal.
pub unsafe fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    if sig == 32 || sig == 33 {
        return result(-c_long::from(libc::EINVAL));
    }
    let mut new = KernelSigaction {
        handler: 0,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    let mut previous = KernelSigaction { ..new };
    // SAFETY: per the contract.
    if let Some(act) = unsafe { act.as_ref() } {
        let flags = act.sa_flags as u64;
        new.handler = act.sa_sigaction;
        // SAFETY: a sigset_t is at least 8 bytes.
        new.mask = unsafe { *(&act.sa_mask as *const libc::sigset_t).cast::<u64>() };
        new.restorer = match flags & SA_RESTORER {
            0 => bootprof_restore_rt as *const () as usize,
            _ => act.sa_restorer.map_or(0, |f| f as usize),
        };
        new.flags = flags | SA_RESTORER;
    }
    let act_ptr = if act.is_null() {
        0
    } else {
        &new as *const _ as usize
    };
    let old_ptr = if old.is_null() {
        0
    } else {
        &mut previous as *mut _ as usize
    };
    // SAFETY: kernel structs we own, of the size given.
    let r = result(unsafe { syscall4(libc::SYS_rt_sigaction, sig as usize, act_ptr, old_ptr, 8) });
    // SAFETY: per the contract.
    if let (0, Some(old)) = (r, unsafe { old.as_mut() }) {
        // SAFETY: all zeroes is a valid sigaction.
        *old = unsafe { core::mem::zeroed() };
        old.sa_sigaction = previous.handler;
        old.sa_flags = previous.flags as c_int;
        // SAFETY: a sigset_t is at least 8 bytes.
        unsafe { *(&mut old.sa_mask as *mut libc::sigset_t).cast::<u64>() = previous.mask };
        // SAFETY: the kernel hands back the restorer it was given: code, or 0.
        old.sa_restorer =
            unsafe { core::mem::transmute::<usize, Option<extern "C" fn()>>(previous.restorer) };
    }
    r
}

extern "C" {
    /// Where a handler [`sigaction`] installed returns to: `rt_sigreturn`.
    fn bootprof_restore_rt();
}

// The bytes are the C library's `__restore_rt` exactly, which unwinders (the GCC unwinder that
// `backtrace` and C++ exceptions use, gdb) recognise as a signal frame by them:
//   48 c7 c0 0f 00 00 00    mov $15, %rax   (rt_sigreturn)
//   0f 05                   syscall
// The `nop` before it is there because an unwinder looks up a return address minus one.
core::arch::global_asm!(
    ".pushsection .text.bootprof_restore_rt,\"ax\",@progbits",
    ".p2align 4",
    "    nop",
    ".globl bootprof_restore_rt",
    ".hidden bootprof_restore_rt",
    ".type bootprof_restore_rt,@function",
    "bootprof_restore_rt:",
    "    .byte 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00",
    "    .byte 0x0f, 0x05",
    ".size bootprof_restore_rt, .-bootprof_restore_rt",
    ".popsection",
);
