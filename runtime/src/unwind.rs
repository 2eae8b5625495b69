//! Unwinding by frame pointers: takes where a hit stopped the program (its stack pointer and frame
//! pointer at the site's instruction, and whether a return address is on top of the stack); hands
//! on the hit's call stack, innermost first: the site's address, then the return address of every
//! caller whose frame pointer chain it can follow, at most [`MAX_FRAMES`] addresses in all.
//!
//! At a probe mid-function, and at an `mcount` or `__cyg_profile_func_enter` hook (which run after
//! the prologue), `rbp` is the function's own frame: `[rbp + 8]` is its return address and
//! `[rbp]` its caller's frame. At an `__fentry__` hook (before `push rbp`) and at a tail jump
//! (after the epilogue) the function has no frame: its return address is on top of the stack
//! and `rbp` is already its caller's frame. Code built without frame pointers leaves `rbp`
//! holding anything: the walk then stops early, or skips the callers whose frames it cannot see.
//!
//! Every read is checked first: each frame pointer must lie in the readable mapping that holds
//! the stack pointer, be 8-byte aligned, and lie above the one before (above the stack pointer,
//! for the first); the walk stops at the first that does not, or at a return address of 0. The
//! mapping's bounds are cached per thread and read from `/proc/self/maps` with `open`, `read`
//! and `close` only (async-signal-safe, as the SIGTRAP handler needs), into a buffer on the
//! stack: once per thread, and again only when a hit's stack pointer lies outside them (a stack
//! that grew, a signal stack).
//!
//! A frame whose return the function-graph tracer hooked holds the trampoline's address in its
//! return-address word; the caller hands a `real` function that gives back the address the word
//! held before (from the shadow stack, by the word's address), so the stack names the callers.

use core::cell::Cell;

/// Most addresses a hit's stack holds (the site's and 63 return addresses).
pub const MAX_FRAMES: usize = 64;

/// Where a hit stopped the program.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Origin {
    /// The stack pointer at the site's instruction.
    pub sp: u64,
    /// The frame pointer (`rbp`) at the site's instruction.
    pub fp: u64,
}

crate::sys::thread_local_cells! {
    /// The readable mapping that held this thread's stack pointer at its last stack: [start,
    /// end); (0, 0) until one is read, (1, 0) when `/proc/self/maps` cannot be opened.
    static STACK: Cell<(u64, u64)> = Cell::new((0, 0));
}

/// Writes the stack of a hit of the site at `pc` into `out`, innermost first; returns how many
/// addresses it wrote (at least 1: `pc`). `ret_on_top`: the site runs with no frame of its own
/// (an `__fentry__` hook, a tail jump), so the return address is on top of the stack. `real`
/// takes the address of a return-address word and the word, and gives the real return address.
pub(crate) fn frames(
    pc: u64,
    ret_on_top: bool,
    at: Origin,
    out: &mut [u64; MAX_FRAMES],
    mut real: impl FnMut(u64, u64) -> u64,
) -> usize {
    out[0] = pc;
    let mut n = 1;
    let Some(top) = stack_end(at.sp) else {
        return n;
    };
    let fits = |p: u64, floor: u64, len: u64| {
        p >= floor && p % 8 == 0 && p.checked_add(len).is_some_and(|end| end <= top)
    };
    if ret_on_top && fits(at.sp, at.sp, 8) {
        // SAFETY: `sp .. sp + 8` lies in the readable mapping that holds the stack pointer.
        let ret = unsafe { core::ptr::read_volatile(at.sp as *const u64) };
        if ret != 0 {
            out[n] = real(at.sp, ret);
            n += 1;
        }
    }
    let (mut fp, mut floor) = (at.fp, at.sp);
    while n < MAX_FRAMES && fits(fp, floor, 16) {
        // SAFETY: `fp .. fp + 16` lies in the readable mapping that holds the stack pointer.
        let (next, ret) = unsafe {
            (
                core::ptr::read_volatile(fp as *const u64),
                core::ptr::read_volatile((fp + 8) as *const u64),
            )
        };
        if ret == 0 {
            break;
        }
        out[n] = real(fp + 8, ret);
        n += 1;
        // The next frame must lie above this one: a chain that loops or runs down ends here.
        floor = fp + 16;
        fp = next;
    }
    n
}

/// The end of the readable mapping that holds `sp` (this thread's stack), if it is known.
fn stack_end(sp: u64) -> Option<u64> {
    let (start, end) = STACK.with(Cell::get);
    if (start..end).contains(&sp) {
        return Some(end);
    }
    if (start, end) == (1, 0) {
        return None;
    }
    let found = read_mapping(sp);
    match found {
        Ok(Some(m)) => STACK.with(|s| s.set(m)),
        Ok(None) => {}
        Err(()) => STACK.with(|s| s.set((1, 0))),
    }
    found.ok().flatten().map(|(_, end)| end)
}

/// The readable mapping of this process that holds `addr`, from `/proc/self/maps`; `Err` when the
/// file cannot be opened. Async-signal-safe: `open`, `read` and `close` into a buffer on the
/// stack, and `errno` as it was.
fn read_mapping(addr: u64) -> Result<Option<(u64, u64)>, ()> {
    // SAFETY: errno is this thread's; it is put back before returning.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe {
        libc::open(
            c"/proc/self/maps".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    let found = if fd < 0 {
        Err(())
    } else {
        let mut buf = [0u8; 512];
        let found = find_mapping(
            addr,
            |b: &mut [u8]| loop {
                // SAFETY: reads into the buffer we own, at most its length.
                let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) };
                // SAFETY: as above.
                if n >= 0 || unsafe { *libc::__errno_location() } != libc::EINTR {
                    return n.max(0) as usize;
                }
            },
            &mut buf,
        );
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        Ok(found)
    };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    found
}

/// The readable mapping holding `addr` among the lines of a maps file (`start-end perms ...`, in
/// hex) that `read` hands on in pieces (0 at the end), through `buf`.
fn find_mapping(
    addr: u64,
    mut read: impl FnMut(&mut [u8]) -> usize,
    buf: &mut [u8],
) -> Option<(u64, u64)> {
    // Field 0 is the start, 1 the end, 2 the permissions' first letter; 3 the rest of the line.
    let (mut field, mut start, mut end) = (0, 0u64, 0u64);
    loop {
        let n = read(buf);
        if n == 0 {
            return None;
        }
        for &c in &buf[..n] {
            match (field, c) {
                (_, b'\n') => (field, start, end) = (0, 0, 0),
                (0, b'-') | (1, b' ') => field += 1,
                (0 | 1, _) => {
                    let digit = u64::from((c as char).to_digit(16).unwrap_or(0));
                    let v = if field == 0 { &mut start } else { &mut end };
                    *v = v.wrapping_shl(4) | digit;
                }
                (2, _) => {
                    if c == b'r' && (start..end).contains(&addr) {
                        return Some((start, end));
                    }
                    field = 3;
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    const MAPS: &str = "\
55d0c0000000-55d0c0021000 r--p 00000000 08:01 123   /usr/bin/prog
7ffd00000000-7ffd00001000 ---p 00000000 00:00 0
7ffd00001000-7ffd00022000 rw-p 00000000 00:00 0     [stack]
";

    /// The mapping is found however the file is cut into reads; an address in an unreadable
    /// mapping, or in none, finds nothing.
    #[test]
    fn a_mapping_is_found_across_any_cut_of_the_file() {
        for piece in 1..MAPS.len() {
            let mut rest = MAPS.as_bytes();
            let mut read = |b: &mut [u8]| {
                let n = piece.min(rest.len()).min(b.len());
                b[..n].copy_from_slice(&rest[..n]);
                rest = &rest[n..];
                n
            };
            let mut buf = [0u8; 64];
            assert_eq!(
                find_mapping(0x7ffd_0002_0ff8, &mut read, &mut buf),
                Some((0x7ffd_0000_1000, 0x7ffd_0002_2000)),
                "reads of {piece} bytes"
            );
        }
        let none = |addr| {
            let mut rest = MAPS.as_bytes();
            let mut buf = [0u8; 64];
            find_mapping(
                addr,
                |b: &mut [u8]| {
                    let n = rest.len().min(b.len());
                    b[..n].copy_from_slice(&rest[..n]);
                    rest = &rest[n..];
                    n
                },
                &mut buf,
            )
        };
        assert_eq!(none(0x7ffd_0000_0800), None, "a guard page");
        assert_eq!(none(0x1000), None, "nothing mapped");
    }

    /// A chain of frames on a stack of our own: followed to its end; stopped at a frame pointer
    /// that runs down, one that is not aligned, and one outside the mapping.
    #[test]
    fn a_frame_chain_is_followed_and_stopped_where_it_goes_wrong() {
        let mut stack = vec![0u64; 64];
        let base = stack.as_ptr() as u64;
        let at = |i: usize| base + 8 * i as u64;
        // Frames at words 4, 10 and 20: (next frame, return address).
        for (i, next, ret) in [(4, at(10), 0x1004), (10, at(20), 0x2004), (20, 0, 0x3004)] {
            stack[i] = next;
            stack[i + 1] = ret;
        }
        stack[2] = 0x9004; // the return address on top, for a hook before its prologue
        let end = at(64);
        STACK.with(|s| s.set((base, end)));
        let walk = |sp: u64, fp: u64, on_top: bool| {
            let mut out = [0u64; MAX_FRAMES];
            let n = frames(0x500, on_top, Origin { sp, fp }, &mut out, |_, ret| ret);
            out[..n].to_vec()
        };
        assert_eq!(walk(at(2), at(4), false), [0x500, 0x1004, 0x2004, 0x3004]);
        assert_eq!(
            walk(at(2), at(4), true),
            [0x500, 0x9004, 0x1004, 0x2004, 0x3004]
        );
        // A frame pointer below the stack pointer, or misaligned: nothing beyond the site.
        assert_eq!(walk(at(6), at(4), false), [0x500]);
        assert_eq!(walk(at(2), at(4) + 4, false), [0x500]);
        // A chain that runs down: stopped after the frame that points back.
        stack[10] = at(4);
        assert_eq!(walk(at(2), at(4), false), [0x500, 0x1004, 0x2004]);
        // A frame pointer whose frame would end past the mapping.
        stack[10] = end - 8;
        assert_eq!(walk(at(2), at(4), false), [0x500, 0x1004, 0x2004]);
        STACK.with(|s| s.set((0, 0)));
    }
}
