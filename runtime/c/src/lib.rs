//! bootprof's runtime as C programs link it: takes the `bootprof-runtime` crate built without
//! the Rust standard library; hands on a static library (built by `runtime/cli/build.rs`) whose
//! only dependency is the C library: memory comes from `malloc`, and a panic (a bug in the
//! runtime) writes its message to stderr and aborts, so there is no unwinder, no `libgcc_s` and
//! none of the standard library's code (its `getaddrinfo` and `getpwuid_r` calls are what made a
//! `-static` link warn).
#![no_std]
//!
//! The allocator, the panic handler and the unwinding symbols `core` names are here with the
//! feature `standalone` only (what build.rs asks for): in the workspace's own builds the runtime
//! crate has the standard library, which has them.

// The C API and the entry points every linked site table calls are the runtime crate's
// `#[no_mangle]` functions; naming the crate links them in.
#[cfg(not(feature = "lean"))]
pub use bootprof_runtime::capi;
#[cfg(feature = "lean")]
pub use bootprof_runtime::lean;

#[cfg(feature = "standalone")]
mod standalone {
    use core::alloc::{GlobalAlloc, Layout};

    /// The C library's allocator: what the program itself uses.
    struct Malloc;

    /// What `malloc` aligns to on x86-64 (glibc: 16 bytes).
    const MALLOC_ALIGN: usize = 16;

    // SAFETY: malloc, realloc and posix_memalign return memory of at least the size asked, aligned
    // as asked (posix_memalign for alignments beyond malloc's), or null; free takes what they return.
    unsafe impl GlobalAlloc for Malloc {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if layout.align() <= MALLOC_ALIGN {
                // SAFETY: plain malloc.
                return unsafe { libc::malloc(layout.size()) }.cast();
            }
            let mut p = core::ptr::null_mut();
            // SAFETY: a power-of-two alignment (Layout's guarantee), a multiple of the pointer size.
            match unsafe { libc::posix_memalign(&mut p, layout.align(), layout.size()) } {
                0 => p.cast(),
                _ => core::ptr::null_mut(),
            }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, _: Layout) {
            // SAFETY: per GlobalAlloc's contract, ptr came from alloc or realloc.
            unsafe { libc::free(ptr.cast()) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            if layout.align() <= MALLOC_ALIGN {
                // SAFETY: per GlobalAlloc's contract; realloc keeps malloc's alignment.
                return unsafe { libc::realloc(ptr.cast(), new_size) }.cast();
            }
            // SAFETY: a new block as aligned as the old, the old contents copied, the old freed.
            unsafe {
                let new = self.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
                if !new.is_null() {
                    core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Malloc = Malloc;

    /// A panic is a bug in the runtime: its message goes to stderr, then the process aborts (as a
    /// Rust program built with `panic = "abort"` does).
    #[panic_handler]
    #[cfg(not(feature = "lean"))]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        let mut line = Line {
            buf: [0; 512],
            len: 0,
        };
        let _ = core::fmt::write(
            &mut line,
            format_args!("bootprof: the runtime panicked: {info}\n"),
        );
        // SAFETY: write(2) of our own buffer, then abort: both async-signal-safe.
        unsafe {
            libc::write(2, line.buf.as_ptr().cast(), line.len);
            libc::abort()
        }
    }

    /// The lean runtime's: without `core::fmt`, which it leaves out, so the message only when
    /// it is a plain one.
    #[panic_handler]
    #[cfg(feature = "lean")]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        let message = info.message().as_str().unwrap_or("(a formatted message)");
        for part in ["bootprof: the runtime panicked: ", message, "\n"] {
            // SAFETY: write(2) of a string; then abort: both async-signal-safe.
            unsafe { libc::write(2, part.as_ptr().cast(), part.len()) };
        }
        // SAFETY: as above.
        unsafe { libc::abort() }
    }

    /// A message built without allocating (the allocator may be what failed), cut at 512 bytes.
    #[cfg(not(feature = "lean"))]
    struct Line {
        buf: [u8; 512],
        len: usize,
    }

    #[cfg(not(feature = "lean"))]
    impl core::fmt::Write for Line {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let n = s.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
            Ok(())
        }
    }

    /// The personality routine the precompiled `core` and `alloc` name in their unwind tables. With
    /// panics aborting nothing unwinds through the runtime's frames, so it is never called; it is
    /// defined so that the program needs no Rust standard library (bootprof-link's prelinked object
    /// keeps it local, away from a Rust program's own).
    #[no_mangle]
    pub extern "C" fn rust_eh_personality() {
        // SAFETY: abort has no preconditions.
        unsafe { libc::abort() }
    }

    /// What the precompiled `core` calls to go on unwinding after a cleanup: never reached with
    /// panics aborting (see [`rust_eh_personality`]).
    #[no_mangle]
    pub extern "C" fn _Unwind_Resume() {
        // SAFETY: abort has no preconditions.
        unsafe { libc::abort() }
    }

    // The precompiled `core` calls these through the global offset table, which the dynamic
    // loader fills before `main` (a symbol lookup each): the runtime's own copies, local to its
    // object, keep a program's start-up free of them. String instructions: short, and not
    // compiled back into calls to themselves.

    /// # Safety
    /// As the C library's `memcpy`.
    #[no_mangle]
    pub unsafe extern "C" fn memcpy(dest: *mut u8, src: *const u8, n: usize) -> *mut u8 {
        // SAFETY: per the contract; rep movsb copies n bytes forward (the direction flag is
        // clear, as the ABI says).
        unsafe {
            core::arch::asm!(
                "rep movsb",
                inout("rcx") n => _,
                inout("rdi") dest => _,
                inout("rsi") src => _,
                options(nostack, preserves_flags)
            );
        }
        dest
    }

    /// # Safety
    /// As the C library's `memset`.
    #[no_mangle]
    pub unsafe extern "C" fn memset(dest: *mut u8, c: i32, n: usize) -> *mut u8 {
        // SAFETY: per the contract; rep stosb stores n bytes forward.
        unsafe {
            core::arch::asm!(
                "rep stosb",
                inout("rcx") n => _,
                inout("rdi") dest => _,
                in("al") c as u8,
                options(nostack, preserves_flags)
            );
        }
        dest
    }

    /// # Safety
    /// As the C library's `bcmp`: 0 if the n bytes are equal, else not 0.
    #[no_mangle]
    pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        let equal: u8;
        // SAFETY: per the contract; repe cmpsb compares until a difference or n bytes, and
        // its zero flag says whether the last pair compared was equal (with n = 0, `test`
        // leaves it set: equal).
        unsafe {
            core::arch::asm!(
                "test rcx, rcx",
                "repe cmpsb",
                "sete {equal}",
                equal = out(reg_byte) equal,
                inout("rcx") n => _,
                inout("rsi") a => _,
                inout("rdi") b => _,
                options(nostack, readonly)
            );
        }
        i32::from(equal == 0)
    }
}
