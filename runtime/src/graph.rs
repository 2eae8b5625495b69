//! Function-graph tracing (`BOOTPROF_GRAPH=1`, `bootprof run --graph`, [`set`]): takes the
//! recorded hits of `__fentry__` and `mcount` hooks, which by themselves say only that a function
//! was entered; hands on an EXIT record of the function when it returns, as uftrace and ftrace's
//! function-graph tracer do.
//!
//! At the hook (`hook`) the function's return address is swapped for the trampoline
//! `bootprof_graph_return`, and the real one is pushed on the thread's shadow stack with its
//! slot (the address of the word it was in: the stack top at an `__fentry__` site, `8(%rbp)` at
//! an `mcount` site). The function's `ret` enters the trampoline, which keeps the return value
//! (rax, rdx, xmm0, xmm1; the x87 stack is not touched, so a `long double` in st0 survives) and
//! calls [`bootprof_graph_exit`]: it pops the entry of that slot, records the EXIT with the
//! hook's site (so the report names the function, as for `__cyg_profile_func_exit`), and the
//! trampoline jumps to the real address (a `jmp` through r11, not a `ret`: the function's own
//! `ret` already took the return-stack entry of that address, so a second `ret` would be
//! mispredicted).
//!
//! The shadow stack is a fixed array of [`DEPTH`] entries in thread-local storage (no
//! allocation, so a hook in a signal handler can use it; each thread has its own, and a fork
//! child keeps a copy of its thread's). A call deeper than that is neither hooked nor recorded
//! (ENTER and EXIT both left out, so the trace stays balanced); such calls are counted and the
//! count is said on stderr at exit.
//!
//! Frames can end without returning; their entries are dropped, each with an EXIT record, where
//! that is seen:
//! - `longjmp`, `_longjmp`, `siglongjmp` and `__longjmp_chk` called by code `bootprof-link`
//!   linked are wrapped (`-Wl,--wrap`, which works for static programs too): before jumping,
//!   the entries below the stack pointer the `jmp_buf` holds are dropped.
//! - An exception (C++, or a thread's forced unwinding) goes through the trampoline's own unwind
//!   information: the unwinder reads the return address from the slot, and the trampoline's
//!   personality routine ([`bootprof_graph_personality`]) puts the real address back there first.
//!   The frames it unwinds keep their entries until the next hook or trampoline on the thread
//!   finds them stale.
//! - At a hook, entries whose slot is at or below the new frame's and no longer holds the
//!   trampoline are stale; at the trampoline, entries above the one of its own slot are.
//!
//! A hooked function that tail-calls another shares its frame: the second hook finds the
//! trampoline already in the slot and pushes an entry whose return address is the trampoline
//! itself, so the return runs the trampoline twice, recording both EXITs, innermost first.
//!
//! `backtrace()` called by code `bootprof-link` linked is wrapped too: the real return addresses
//! are put back for the time it takes.

use crate::clock::rdtsc;
use crate::note::note;
use crate::prelude::*;
use crate::site::{self, SiteRec};
use crate::{filter, recorder, thread};
use bootprof_format::trace::RecordKind;
use core::cell::Cell;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicU64, Ordering};

/// Entries of a thread's shadow stack.
pub const DEPTH: usize = 256;

/// Calls not hooked because their thread's shadow stack was full.
static TOO_DEEP: AtomicU64 = AtomicU64::new(0);

/// One hooked frame: its real return address, where that was, and the hook's site.
#[derive(Clone, Copy)]
struct Entry {
    ret: u64,
    slot: u64,
    site: Option<&'static SiteRec>,
}

impl Entry {
    const EMPTY: Entry = Entry {
        ret: 0,
        slot: 0,
        site: None,
    };
}

crate::sys::thread_local_cells! {
    /// Entries in use.
    static TOP: Cell<usize> = Cell::new(0);
    static ENTRIES: [Cell<Entry>; DEPTH] = [const { Cell::new(Entry::EMPTY) }; DEPTH];
}

fn entry(i: usize) -> Entry {
    ENTRIES.with(|e| e[i].get())
}

/// Whether hooks hook returns.
#[inline]
pub(crate) fn on() -> bool {
    site::hit_path() & site::GRAPH != 0
}

/// Turns hooking returns on or off (frames hooked already still return through the
/// trampoline, and their EXITs are still recorded).
pub fn set(on: bool) {
    if on {
        static ONCE: crate::sys::Once = crate::sys::Once::new();
        ONCE.call_once(|| crate::sys::at_exit(say_too_deep));
    }
    site::set_hit_path(site::GRAPH, on);
}

/// `BOOTPROF_GRAPH=1` turns it on.
pub(crate) fn init_from_environment() {
    if crate::sys::var_is("BOOTPROF_GRAPH", "1") {
        set(true);
    }
}

extern "C" fn say_too_deep() {
    let n = TOO_DEEP.load(Ordering::Relaxed);
    if n > 0 {
        note(&format!(
            "{n} calls deeper than the shadow stack ({DEPTH} frames per thread) were not traced"
        ));
    }
}

/// The trampoline's address.
fn trampoline() -> u64 {
    bootprof_graph_return as *const () as u64
}

/// Reads the word at `slot`.
///
/// # Safety
/// `slot` is a return-address word of this thread's stack, live or left by a frame that ended.
unsafe fn word(slot: u64) -> u64 {
    // SAFETY: per the contract.
    unsafe { core::ptr::read_volatile(slot as *const u64) }
}

/// Records the EXIT of a frame that ended (returned, or was left).
#[inline(always)]
fn record_exit(e: Entry, tsc: u64) {
    let path = site::hit_path();
    if let (Some(site), true) = (e.site, path & site::RECORDS != 0) {
        if path & site::FILTERS != 0 {
            filter::exit(site, tsc);
        } else if path & site::POINTS != 0 {
            recorder::record(site, RecordKind::Exit, 0, tsc);
        } else {
            recorder::append(site, RecordKind::Exit, 0, tsc);
        }
    }
}

/// Hooks the return of the function whose hook `site` is being recorded, its return address at
/// `slot`: pushes the real address on the shadow stack and puts the trampoline's in its place.
/// Returns the real address (the function's parent), or `None` when the shadow stack is full
/// (the call is then not hooked, and must not be recorded). Called with the thread's guard held.
#[inline(always)]
pub(crate) fn hook(site: &'static SiteRec, slot: u64, tsc: u64) -> Option<u64> {
    let tramp = trampoline();
    // SAFETY: `slot` holds the return address of the function being entered.
    let ret = unsafe { word(slot) };
    let top = TOP.with(Cell::get);
    // The common case: a call made by the frame of the newest entry (or the first call), not a
    // tail call, with room on the stack: no entry is stale, the caller is the return address.
    if ret != tramp && top < DEPTH && (top == 0 || entry(top - 1).slot > slot) {
        push(Entry {
            ret,
            slot,
            site: Some(site),
        });
        return Some(ret);
    }
    hook_in_full(site, slot, ret, tsc)
}

/// Pushes `e` on this thread's shadow stack (which has room) and puts the trampoline in its
/// slot: the function returns through the trampoline now.
#[inline(always)]
fn push(e: Entry) {
    let top = TOP.with(Cell::get);
    ENTRIES.with(|x| x[top].set(e));
    TOP.with(|t| t.set(top + 1));
    // SAFETY: the function's own return address; it returns through the trampoline now.
    unsafe { core::ptr::write_volatile(e.slot as *mut u64, trampoline()) };
}

/// [`hook`] in every case: entries of frames that ended dropped (their EXITs recorded), a tail
/// call's caller found, a call too deep left out. `ret` is the word at `slot`.
#[inline(never)]
fn hook_in_full(site: &'static SiteRec, slot: u64, ret: u64, tsc: u64) -> Option<u64> {
    let tramp = trampoline();
    let mut top = TOP.with(Cell::get);
    while top > 0 {
        let e = entry(top - 1);
        // An entry above this frame is live; one of this slot is this frame's tail caller when
        // the trampoline is in it (a tail call), else a frame that ended; one below it is a
        // frame that ended, unless its slot still holds the trampoline (it may be live on
        // another stack, as a signal handler's on an alternate one).
        // SAFETY: a slot below this frame's is on this thread's stack.
        let live = e.slot > slot
            || (e.slot == slot && ret == tramp)
            || (e.slot < slot && unsafe { word(e.slot) } == tramp);
        if live {
            break;
        }
        top -= 1;
        TOP.with(|t| t.set(top));
        record_exit(e, tsc);
    }
    let parent = if ret == tramp {
        // A tail call: the real caller is the one of the first entry of this slot.
        (0..top)
            .rev()
            .map(entry)
            .take_while(|e| e.slot == slot)
            .find(|e| e.ret != tramp)
            .map_or(0, |e| e.ret)
    } else {
        ret
    };
    if top == DEPTH {
        TOO_DEEP.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    push(Entry {
        ret,
        slot,
        site: Some(site),
    });
    Some(parent)
}

/// What a stack walk of this thread, innermost frame first, calls with each return-address word's
/// address and contents: the real return address where the word holds the trampoline and the
/// shadow stack has the word's entry (for a tail call's shared frame, the first caller's), else
/// the word as it is. The walk's words lie ever higher on the stack, as the entries do from the
/// top down, so one pass over the entries serves the whole walk.
pub(crate) fn real_returns() -> impl FnMut(u64, u64) -> u64 {
    let tramp = trampoline();
    let mut i = TOP.with(Cell::get);
    move |slot, ret| {
        if ret != tramp {
            return ret;
        }
        // Entries below this word (frames that ended, or that the walk did not see) are passed.
        while i > 0 && entry(i - 1).slot < slot {
            i -= 1;
        }
        (0..i)
            .rev()
            .map(entry)
            .take_while(|e| e.slot == slot)
            .find(|e| e.ret != tramp)
            .map_or(ret, |e| e.ret)
    }
}

/// Entered from the trampoline when a hooked function returned from `slot`: pops its entry (and
/// those above it, frames that ended without returning), records their EXITs, and returns the
/// real return address.
///
/// # Safety
/// Only the trampoline calls this, with the address of the word the function returned through.
#[no_mangle]
pub unsafe extern "C" fn bootprof_graph_exit(slot: u64) -> u64 {
    let tsc = rdtsc();
    let guarded = thread::enter();
    let top = TOP.with(Cell::get);
    if guarded && top > 0 {
        // The common case: the newest entry is this frame's (none above it is stale).
        let newest = entry(top - 1);
        if newest.slot == slot {
            TOP.with(|t| t.set(top - 1));
            record_exit(newest, tsc);
            thread::leave();
            return newest.ret;
        }
    }
    exit_in_full(slot, tsc, guarded, top)
}

/// [`bootprof_graph_exit`] in every case: the entries above the frame's own are of frames that
/// ended without returning (their EXITs recorded first), or the thread was handling a hit
/// (`guarded` false: nothing is recorded).
#[inline(never)]
fn exit_in_full(slot: u64, tsc: u64, guarded: bool, top: usize) -> u64 {
    let Some(i) = (0..top).rev().find(|&i| entry(i).slot == slot) else {
        lost(slot)
    };
    TOP.with(|t| t.set(i));
    let found = entry(i);
    if guarded {
        for j in (i + 1..top).rev() {
            record_exit(entry(j), tsc);
        }
        record_exit(found, tsc);
        thread::leave();
    }
    found.ret
}

/// A return through the trampoline that no entry knows: where to go is lost.
#[cold]
fn lost(slot: u64) -> ! {
    let msg = format!(
        "bootprof: a traced function returned through {slot:#x}, which its thread's shadow \
         stack does not hold; its return address is lost\n"
    );
    // SAFETY: write(2) and abort(3) are async-signal-safe.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort()
    }
}

/// Drops the entries of the frames below stack pointer `sp` (a `longjmp` to a frame whose stack
/// pointer is `sp`), recording their EXITs now.
fn unwind_to(sp: u64) {
    if TOP.with(Cell::get) == 0 || !thread::enter() {
        return;
    }
    let tsc = rdtsc();
    loop {
        let top = TOP.with(Cell::get);
        if top == 0 || entry(top - 1).slot >= sp {
            break;
        }
        TOP.with(|t| t.set(top - 1));
        record_exit(entry(top - 1), tsc);
    }
    thread::leave();
}

/// The stack pointer a glibc `jmp_buf` holds (word 6, mangled with the thread's pointer guard:
/// xor, then rotated left by 17 bits).
///
/// # Safety
/// `env` is a `jmp_buf` (or `sigjmp_buf`) filled by `setjmp`.
unsafe fn jmp_buf_sp(env: *const u64) -> u64 {
    let guard: u64;
    // SAFETY: the pointer guard is at %fs:0x30 in glibc's thread control block.
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0x30]", out(reg) guard, options(nostack, readonly));
    }
    // SAFETY: per the contract.
    unsafe { env.add(6).read() }.rotate_right(17) ^ guard
}

use crate::wrapped::{
    bootprof_real___longjmp_chk, bootprof_real__longjmp, bootprof_real_backtrace,
    bootprof_real_longjmp, bootprof_real_siglongjmp, Jump, UnwindBacktrace, END_OF_STACK,
    REAL_UNWIND_BACKTRACE,
};

/// Drops the shadow stack down to `env`'s frame, then jumps with the real function `real`.
///
/// # Safety
/// As the C library's function.
unsafe fn jump(real: Jump, env: *mut u64, val: c_int) -> ! {
    // SAFETY: per the contract.
    unwind_to(unsafe { jmp_buf_sp(env) });
    // SAFETY: the real function of that name.
    unsafe { real(env, val) }
}

/// `longjmp`, as the program calls it.
///
/// # Safety
/// As `longjmp`.
#[no_mangle]
pub unsafe extern "C" fn __wrap_longjmp(env: *mut u64, val: c_int) -> ! {
    crate::serving::hand_on!(counterpart_if_decided, __wrap_longjmp(env, val));
    // SAFETY: per the contract.
    unsafe { jump(bootprof_real_longjmp, env, val) }
}

/// `_longjmp`, as the program calls it.
///
/// # Safety
/// As `_longjmp`.
#[no_mangle]
pub unsafe extern "C" fn __wrap__longjmp(env: *mut u64, val: c_int) -> ! {
    crate::serving::hand_on!(counterpart_if_decided, __wrap__longjmp(env, val));
    // SAFETY: per the contract.
    unsafe { jump(bootprof_real__longjmp, env, val) }
}

/// `siglongjmp`, as the program calls it.
///
/// # Safety
/// As `siglongjmp`.
#[no_mangle]
pub unsafe extern "C" fn __wrap_siglongjmp(env: *mut u64, val: c_int) -> ! {
    crate::serving::hand_on!(counterpart_if_decided, __wrap_siglongjmp(env, val));
    // SAFETY: per the contract.
    unsafe { jump(bootprof_real_siglongjmp, env, val) }
}

/// `__longjmp_chk` (`longjmp` with `_FORTIFY_SOURCE`), as the program calls it.
///
/// # Safety
/// As `__longjmp_chk`.
#[no_mangle]
pub unsafe extern "C" fn __wrap___longjmp_chk(env: *mut u64, val: c_int) -> ! {
    crate::serving::hand_on!(counterpart_if_decided, __wrap___longjmp_chk(env, val));
    // SAFETY: per the contract.
    unsafe { jump(bootprof_real___longjmp_chk, env, val) }
}

/// Bit set in an entry's slot while its real return address is back in place.
const RESTORED: u64 = 1;

/// `backtrace`, as the program calls it: the real one, with the hooked frames' real return
/// addresses put back meanwhile, and without this function's own frame.
///
/// # Safety
/// As `backtrace`.
#[no_mangle]
pub unsafe extern "C" fn __wrap_backtrace(buffer: *mut *mut c_void, size: c_int) -> c_int {
    crate::serving::hand_on!(counterpart_if_decided, __wrap_backtrace(buffer, size));
    type Backtrace = unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int;
    if size <= 0 {
        return 0;
    }
    let real: Backtrace = bootprof_real_backtrace;
    let mut frames = [core::ptr::null_mut::<c_void>(); 257];
    let want = (size as usize).min(256) + 1;
    let guarded = thread::enter();
    if guarded {
        put_back(true);
    }
    // SAFETY: `frames` holds `want` pointers.
    let got = unsafe { real(frames.as_mut_ptr(), want as c_int) }.max(1) as usize;
    if guarded {
        put_back(false);
        thread::leave();
    }
    // SAFETY: the caller's buffer holds `size` pointers, at least `got - 1`.
    unsafe { core::ptr::copy_nonoverlapping(frames.as_ptr().add(1), buffer, got - 1) };
    (got - 1) as c_int
}

/// `_Unwind_Backtrace`, as the program calls it (Rust's `std::backtrace` and a panic's
/// `RUST_BACKTRACE`, C++'s `<stacktrace>`): the real one, with the hooked frames' real return
/// addresses put back meanwhile. No personality routine runs in such a walk, so without this
/// the unwinder would go from the trampoline to the trampoline without end. Without the real
/// one (a static link where nothing else pulled it in) the walk ends at once.
///
/// # Safety
/// As `_Unwind_Backtrace`.
#[no_mangle]
pub unsafe extern "C" fn __wrap__Unwind_Backtrace(trace: *mut c_void, arg: *mut c_void) -> c_int {
    crate::serving::hand_on!(counterpart_if_decided, __wrap__Unwind_Backtrace(trace, arg));
    // SAFETY: the data is the linker's.
    let f = unsafe { REAL_UNWIND_BACKTRACE };
    if f == 0 {
        return END_OF_STACK;
    }
    let guarded = thread::enter();
    if guarded {
        put_back(true);
    }
    // SAFETY: the real _Unwind_Backtrace, with the caller's arguments.
    let r = unsafe { core::mem::transmute::<usize, UnwindBacktrace>(f)(trace, arg) };
    if guarded {
        put_back(false);
        thread::leave();
    }
    r
}

/// Puts the real return addresses back into the slots that hold the trampoline (`real`), or the
/// trampoline back where they were put.
fn put_back(real: bool) {
    let tramp = trampoline();
    for i in (0..TOP.with(Cell::get)).rev() {
        let mut e = entry(i);
        // SAFETY: the slots of live frames (and of ended ones, on this thread's stack).
        unsafe {
            if real && e.ret != tramp && word(e.slot) == tramp {
                core::ptr::write_volatile(e.slot as *mut u64, e.ret);
                e.slot |= RESTORED;
            } else if !real && e.slot & RESTORED != 0 {
                e.slot &= !RESTORED;
                core::ptr::write_volatile(e.slot as *mut u64, tramp);
            } else {
                continue;
            }
        }
        ENTRIES.with(|x| x[i].set(e));
    }
}

/// The trampoline's personality routine: an exception (or a forced unwinding) found the
/// trampoline as a return address. Its unwind information says the caller's return address is
/// in the slot the trampoline was in; this puts the real one back there before the unwinder
/// reads it. Unwinding goes on (`_URC_CONTINUE_UNWIND`), or stops (`_URC_FATAL_PHASE1_ERROR`)
/// if the shadow stack does not know the slot.
///
/// # Safety
/// Only the unwinder calls this, with its context.
#[no_mangle]
pub unsafe extern "C" fn bootprof_graph_personality(
    _version: c_int,
    _actions: c_int,
    _class: u64,
    _exception: *mut c_void,
    context: *mut c_void,
) -> c_int {
    extern "C" {
        /// The unwinder's `_Unwind_GetCFA` (weak: a program without an unwinder never unwinds,
        /// and must not need one because the runtime names it).
        #[link_name = "bootprof_unwind_get_cfa"]
        static GET_CFA: usize;
    }
    // SAFETY: a word of our own read-only data.
    let get_cfa = unsafe { GET_CFA };
    if get_cfa == 0 {
        return 3;
    }
    // SAFETY: the unwinder's _Unwind_GetCFA, with the unwinder's context of the trampoline's
    // frame.
    let slot = unsafe {
        let get_cfa: unsafe extern "C" fn(*mut c_void) -> usize = core::mem::transmute(get_cfa);
        get_cfa(context)
    } as u64
        - 8;
    let tramp = trampoline();
    let real = (0..TOP.with(Cell::get))
        .rev()
        .map(entry)
        .find(|e| e.slot == slot && e.ret != tramp);
    match real {
        Some(e) => {
            // SAFETY: the slot the trampoline was returned to from, on this thread's stack.
            unsafe { core::ptr::write_volatile(slot as *mut u64, e.ret) };
            8
        }
        None => 3,
    }
}

// The trampoline. A hooked function's `ret` lands here with the stack pointer just above its
// slot; everything below is dead (the caller's red zone ended at the call). The unwind
// information covers the byte before the entry point (an unwinder looks up a return address
// minus one): the caller's frame starts at the stack pointer (the CFA) and its return address
// is in the slot below it, where the personality routine puts the real one. At the end the real
// address is in the slot and in r11, which the trampoline jumps through (r11 is scratch when a
// function returns).
core::arch::global_asm!(
    ".pushsection .text.bootprof_graph_return,\"ax\",@progbits",
    ".globl bootprof_graph_return",
    ".hidden bootprof_graph_return",
    ".type bootprof_graph_return,@function",
    ".p2align 4",
    ".cfi_startproc",
    ".cfi_personality 0x9b, bootprof_graph_personality_ref",
    ".cfi_def_cfa %rsp, 0",
    ".cfi_offset %rip, -8",
    "    nop",
    "bootprof_graph_return:",
    // The slot, where the real return address goes.
    "    sub $8, %rsp",
    ".cfi_def_cfa_offset 8",
    "    push %rbp",
    ".cfi_def_cfa_offset 16",
    ".cfi_offset %rbp, -16",
    "    mov %rsp, %rbp",
    ".cfi_def_cfa_register %rbp",
    "    push %rax",
    "    push %rdx",
    "    sub $32, %rsp",
    "    and $-16, %rsp",
    "    movdqu %xmm0, 0(%rsp)",
    "    movdqu %xmm1, 16(%rsp)",
    "    lea 8(%rbp), %rdi",
    "    call bootprof_graph_exit",
    "    mov %rax, 8(%rbp)",
    "    mov %rax, %r11",
    "    movdqu 0(%rsp), %xmm0",
    "    movdqu 16(%rsp), %xmm1",
    "    mov -8(%rbp), %rax",
    "    mov -16(%rbp), %rdx",
    "    leave",
    ".cfi_def_cfa %rsp, 8",
    "    lea 8(%rsp), %rsp",
    ".cfi_def_cfa %rsp, 0",
    ".cfi_register %rip, %r11",
    "    jmp *%r11",
    ".cfi_endproc",
    ".size bootprof_graph_return, .-bootprof_graph_return",
    ".popsection",
    ".pushsection .data.rel.ro.bootprof_graph_personality_ref,\"aw\",@progbits",
    ".p2align 3",
    "bootprof_graph_personality_ref:",
    "    .quad bootprof_graph_personality",
    ".popsection",
    // The unwinder's functions, by address (weak: a program without an unwinder has none).
    ".pushsection .data.rel.ro.bootprof_graph_real,\"aw\",@progbits",
    ".p2align 3",
    ".globl bootprof_unwind_get_cfa",
    ".hidden bootprof_unwind_get_cfa",
    "bootprof_unwind_get_cfa:",
    "    .quad _Unwind_GetCFA",
    ".weak _Unwind_GetCFA",
    ".popsection",
    options(att_syntax)
);

extern "C" {
    fn bootprof_graph_return();
}
