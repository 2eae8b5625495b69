//! Dispatch: takes a hit (from the SIGTRAP handler in trap mode, or from a stub through the
//! trampolines below in call mode); hands a [`Hit`] to every handler whose pattern matches the
//! site, with a per-thread guard so a handler that fires probes itself is not re-entered.
//!
//! Call mode: the site calls its stub, the stub loads its name into `r11` and jumps through the
//! object's pointer table to one of three trampolines here (probe, is-enabled, hook). A trampoline
//! saves every argument register, `rax`, `r10` and `r11`, and for `mcount` and `__fentry__` hooks
//! also `xmm0`-`xmm7` (they run before the function's own code, so all of its arguments must
//! survive; the `-finstrument-functions` hooks are ordinary calls, through the probe's), calls
//! [`bootprof_dispatch_call`] with a pointer to the saved registers, and restores them; for
//! is-enabled sites the saved `rax` is set to 1 or 0.
//!
//! A site that records its call stack gets it unwound from the program's own registers at the
//! site: in trap mode the interrupted `rsp` and `rbp`, in call mode the `rbp` the trampoline
//! saved and the stack pointer just above the return address the site's call pushed.

pub use crate::clock::rdtsc;
use crate::site::{self, SiteRec, CALL, ENABLING_CALL, MAX_HANDLERS};
pub(crate) use crate::unwind::Origin;
use bootprof_format::code;
use bootprof_format::trace::RecordKind;
use bootprof_format::Kind;
use core::sync::atomic::{AtomicUsize, Ordering};

/// What a handler receives. Layout is part of the C API (`struct bootprof_hit`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Hit {
    /// The site's id (registration order).
    pub site_id: u32,
    /// The site's kind ([`bootprof_format::Kind`] as a byte).
    pub kind: u8,
    /// 1: trap mode, 2: call mode.
    pub via: u8,
    /// Reserved.
    pub reserved: u16,
    /// Provider (empty for hooks), NUL-terminated.
    pub provider: *const u8,
    /// Probe name (the hook symbol for hooks), NUL-terminated.
    pub name: *const u8,
    /// Enclosing function, NUL-terminated.
    pub function: *const u8,
    /// Address of the site.
    pub site: u64,
    /// Address of the enclosing function.
    pub function_addr: u64,
    /// For function hooks: the address the function will return to (its caller); else 0.
    pub parent: u64,
    /// The call's integer arguments: rdi, rsi, rdx, rcx, r8, r9.
    pub args: [u64; 6],
    /// Thread id.
    pub tid: u32,
    /// Reserved.
    pub reserved2: u32,
    /// Time stamp counter at the hit.
    pub tsc: u64,
}

impl Hit {
    fn str_at(p: *const u8) -> &'static str {
        if p.is_null() {
            return "";
        }
        // SAFETY: every pointer in a Hit is one of the table's NUL-terminated static strings.
        unsafe { core::ffi::CStr::from_ptr(p as *const core::ffi::c_char) }
            .to_str()
            .unwrap_or("?")
    }

    /// The provider.
    pub fn provider(&self) -> &'static str {
        Self::str_at(self.provider)
    }

    /// The probe name (or the hook symbol).
    pub fn name(&self) -> &'static str {
        Self::str_at(self.name)
    }

    /// The enclosing function.
    pub fn function(&self) -> &'static str {
        Self::str_at(self.function)
    }
}

/// A handler: called with the hit and the cookie given at registration.
pub type HandlerFn = extern "C" fn(hit: *const Hit, cookie: *mut core::ffi::c_void);

/// Handler slots, read without a lock on the hit path: function and cookie.
static SLOTS: [(AtomicUsize, AtomicUsize); MAX_HANDLERS] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; MAX_HANDLERS];

pub(crate) fn set_slot(slot: usize, value: Option<(HandlerFn, usize)>) {
    match value {
        Some((f, cookie)) => {
            SLOTS[slot].1.store(cookie, Ordering::Release);
            SLOTS[slot].0.store(f as usize, Ordering::Release);
        }
        None => SLOTS[slot].0.store(0, Ordering::Release),
    }
}

pub(crate) use crate::thread::tid;

/// Counts the hit and runs the site's handlers. `args` are rdi..r9; `slot`, for a function hook,
/// is the address of the word holding the function's return address (else 0); `from` is where
/// the hit stopped the program (for its call stack, when the site records one).
#[inline(always)]
pub(crate) fn fire(site: &'static SiteRec, args: [u64; 6], slot: u64, via: u8, from: Origin) {
    if !fire_plain(site, args[0], slot) {
        fire_general(site, args, slot, via, from);
    }
}

/// [`fire`] for the two common cases, which need neither the hit's other arguments nor where it
/// stopped the program (a dispatcher reads them only after this): a hit that is only counted,
/// and one that is only recorded ([`record_only`]). False, having done nothing, for any other.
#[inline(always)]
fn fire_plain(site: &'static SiteRec, arg0: u64, slot: u64) -> bool {
    let mask = site.handlers.load(Ordering::Acquire);
    let path = site::hit_path();
    if mask == 0 && path & site::ACTS == 0 {
        // Two loads and a plain count: no handler, no recorder, no exact count.
        site.count(false);
        return true;
    }
    mask == 0
        && path & !site::GRAPH == site::RECORDS
        && record_only(site, arg0, slot, path & site::GRAPH != 0)
}

/// [`fire`] for every hit [`fire_plain`] leaves.
#[inline(never)]
fn fire_general(site: &'static SiteRec, args: [u64; 6], slot: u64, via: u8, from: Origin) {
    let mask = site.handlers.load(Ordering::Acquire);
    let path = site::hit_path();
    let record = path & site::RECORDS != 0 && site.rec_kind != 0;
    let exactly = path & (site::COUNTS_EXACTLY | site::COUNTS_FOR_ATTACH) != 0;
    if mask == 0 && !record {
        // Nothing runs and nothing is recorded: the hit is only counted. No thread-local
        // re-entry guard is needed (no handler of ours is on this path), and none is read.
        site.count(exactly);
        return;
    }
    fire_handlers(site, args, slot, via, mask, (record, exactly), from);
}

/// The hit of a site that is only recorded, the common case of tracing: no handler wants the
/// site, hits are not counted exactly, no call filter is set and no profile points are
/// accounted (the caller checked these), the site's record is no THREAD record, and it is
/// followed by no call stack and opens or closes no measured interval. Does what
/// [`fire_handlers`] does for such a hit, with none of the steps the other cases need; false,
/// having done nothing, for any other hit. `graph`: function-graph tracing is on.
#[inline(always)]
fn record_only(site: &'static SiteRec, arg0: u64, slot: u64, graph: bool) -> bool {
    let Some(kind) = RecordKind::from_u8(site.rec_kind) else {
        return false;
    };
    if kind == RecordKind::Thread || site.latency != 0 || site.stacktrace() {
        return false;
    }
    if !crate::thread::enter() {
        return true;
    }
    site.count(false);
    let tsc = rdtsc();
    // As in `fire_handlers`: a site disabled since this thread came in records nothing.
    if site.state() != site::DISABLED {
        if let Some((parent, _)) = parent_of(site, slot, graph, tsc) {
            // No profile points: the caller saw the hit path's word without them.
            crate::recorder::append(site, kind, record_arg(site, parent, arg0), tsc);
        }
    }
    crate::thread::leave();
    true
}

/// What a hit's record carries: a -pg hook's parent; else `rdi`, the first argument: a
/// -finstrument-functions hook's this_fn (which names a function the compiler inlined into the
/// enclosing one), a probe's own first argument.
#[inline(always)]
fn record_arg(site: &SiteRec, parent: u64, rdi: u64) -> u64 {
    if site.kind.records_parent() {
        parent
    } else {
        rdi
    }
}

/// The parent of a hook's function, and whether its return is hooked: the word at `slot` (the
/// function's return address; 0 without a slot), or, when `hook` (a recorded hit under
/// function-graph tracing), the real return address [`crate::graph::hook`] found once it hooked
/// the return. `None` when the return could not be hooked (the call is too deep): the hit must
/// not be recorded.
#[inline(always)]
fn parent_of(site: &'static SiteRec, slot: u64, hook: bool, tsc: u64) -> Option<(u64, bool)> {
    if slot == 0 {
        return Some((0, false));
    }
    if hook {
        return crate::graph::hook(site, slot, tsc).map(|real| (real, true));
    }
    // SAFETY: a hook's slot is the word its function returns through, on the program's stack.
    Some((unsafe { *(slot as *const u64) }, false))
}

/// `fire` for a site with handlers or a recorder: one thread runs them once at a time.
#[inline(never)]
fn fire_handlers(
    site: &'static SiteRec,
    args: [u64; 6],
    slot: u64,
    via: u8,
    mask: u64,
    (mut record, exactly): (bool, bool),
    from: Origin,
) {
    if !crate::thread::enter() {
        return;
    }
    site.count(exactly);
    let tsc = rdtsc();
    if record && site.state() == site::DISABLED {
        // Disabled since this thread came in (it was held up on its way, in a call-mode stub
        // or the trap handler): the hit belongs to the time the site was on, which its record
        // would misdate, perhaps into the lane of a later attach.
        record = false;
    }
    let tid = tid();
    // The function's exit is recorded when it returns; a call too deep for the shadow stack is
    // recorded neither way (its handlers still get the parent).
    let hook = record && crate::graph::on();
    let (parent, hooked) = parent_of(site, slot, hook, tsc).unwrap_or_else(|| {
        record = false;
        parent_of(site, slot, false, tsc).unwrap_or_default()
    });
    if record {
        if let Some(kind) = RecordKind::from_u8(site.rec_kind) {
            let arg = record_arg(site, parent, args[0]);
            // A call filter applies to the calls whose exits are recorded: not to the entries of
            // a hook without --graph.
            let entry_only = matches!(site.kind, Kind::Fentry | Kind::Mcount) && !hooked;
            let filtered = crate::filter::on()
                && !entry_only
                && matches!(kind, RecordKind::Enter | RecordKind::Exit);
            let written = match (filtered, kind) {
                (false, _) => {
                    crate::recorder::record(site, kind, arg, tsc);
                    true
                }
                (true, RecordKind::Enter) => crate::filter::enter(site, arg, tsc),
                (true, _) => {
                    crate::filter::exit(site, tsc);
                    false
                }
            };
            if written && site.stacktrace() {
                let real = crate::graph::real_returns();
                crate::recorder::record_stack(site, from, real, tsc);
            }
            if site.latency != 0 {
                // After the record and its stack: a window it closes holds both.
                crate::latency::hit(site, tsc, tid);
            }
        }
    }
    if mask != 0 {
        run_handlers(site, args, parent, (via, tid, tsc), mask);
    }
    crate::thread::leave();
}

/// Hands the hit to the handlers in `mask` (only a hit some handler gets is built).
fn run_handlers(
    site: &'static SiteRec,
    args: [u64; 6],
    parent: u64,
    (via, tid, tsc): (u8, u32, u64),
    mut mask: u64,
) {
    let [provider, name, function] = site.c_names();
    let hit = Hit {
        site_id: site.id,
        kind: site.kind as u8,
        via,
        reserved: 0,
        provider,
        name,
        function,
        site: site.addr,
        function_addr: site.addr - u64::from(site.func_offset),
        parent,
        args,
        tid,
        reserved2: 0,
        tsc,
    };
    while mask != 0 {
        let slot = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        let f = SLOTS[slot].0.load(Ordering::Acquire);
        if f != 0 {
            let cookie = SLOTS[slot].1.load(Ordering::Acquire);
            // SAFETY: only HandlerFn values are stored in a slot.
            let f: HandlerFn = unsafe { core::mem::transmute::<usize, HandlerFn>(f) };
            f(&hit, cookie as *mut core::ffi::c_void);
        }
    }
}

/// The registers a trampoline saved, in memory order (lowest address first).
#[repr(C)]
pub struct Frame {
    r11: u64,
    r10: u64,
    r9: u64,
    r8: u64,
    rcx: u64,
    rdx: u64,
    rsi: u64,
    rdi: u64,
    rax: u64,
    rbp: u64,
    ret: u64,
    /// For a hook: the function's own return address (the word above the site's call).
    above: u64,
}

/// Entered from a trampoline in call mode. `class` is 0 (probe), 1 (is-enabled) or 2 (hook).
///
/// # Safety
/// Only the trampolines call this, with their saved-register frame.
#[no_mangle]
pub unsafe extern "C" fn bootprof_dispatch_call(frame: *mut Frame, class: u32) {
    // SAFETY: the trampoline passes its own frame.
    let frame = unsafe { &mut *frame };
    let Some(index) = site::index() else {
        return;
    };
    // A call site returns to site + 5 (call mode always writes a 5-byte call).
    let site = match index.lookup(frame.ret.wrapping_sub(code::REL32_LEN as u64)) {
        Some(s) if !s.is_tail() => Some(s),
        // A tail site jumped: no return address of its own; find it by its stub.
        _ => index.tail(frame.r11, |s| matches!(s.state(), CALL | ENABLING_CALL)),
    };
    let Some(site) = site else {
        if class == 1 {
            frame.rax = 0;
        }
        return;
    };
    let enabled = matches!(site.state(), CALL | ENABLING_CALL);
    if class == 1 {
        frame.rax = u64::from(enabled);
    }
    if !enabled {
        return;
    }
    let slot = match site.kind {
        bootprof_format::Kind::Fentry => core::ptr::addr_of!(frame.above) as u64,
        // The function's prologue set rbp; its return address sits above the saved rbp (-pg code
        // keeps a frame pointer).
        bootprof_format::Kind::Mcount if frame.rbp != 0 => frame.rbp + 8,
        _ => 0,
    };
    if fire_plain(site, frame.rdi, slot) {
        return;
    }
    let args = [
        frame.rdi, frame.rsi, frame.rdx, frame.rcx, frame.r8, frame.r9,
    ];
    // The stack pointer at the site: above the return address its call pushed (a tail jump
    // pushed none); the program's rbp is the one the trampoline saved.
    let ret_at = core::ptr::addr_of!(frame.ret) as u64;
    let from = Origin {
        sp: if site.is_tail() { ret_at } else { ret_at + 8 },
        fp: frame.rbp,
    };
    fire_general(site, args, slot, 2, from);
}

macro_rules! trampoline {
    ($name:literal, $class:literal, $save:ident, $restore:ident) => {
        concat!(
            ".pushsection .text.",
            $name,
            ",\"ax\",@progbits\n",
            ".globl ",
            $name,
            "\n",
            ".hidden ",
            $name,
            "\n",
            ".type ",
            $name,
            ",@function\n",
            ".p2align 4\n",
            $name,
            ":\n",
            "    push %rbp\n",
            "    mov %rsp, %rbp\n",
            "    push %rax\n",
            "    push %rdi\n",
            "    push %rsi\n",
            "    push %rdx\n",
            "    push %rcx\n",
            "    push %r8\n",
            "    push %r9\n",
            "    push %r10\n",
            "    push %r11\n",
            $save!(),
            "    lea -72(%rbp), %rdi\n",
            "    mov $",
            $class,
            ", %esi\n",
            "    call bootprof_dispatch_call\n",
            $restore!(),
            "    lea -72(%rbp), %rsp\n",
            "    pop %r11\n",
            "    pop %r10\n",
            "    pop %r9\n",
            "    pop %r8\n",
            "    pop %rcx\n",
            "    pop %rdx\n",
            "    pop %rsi\n",
            "    pop %rdi\n",
            "    pop %rax\n",
            "    pop %rbp\n",
            "    ret\n",
            ".size ",
            $name,
            ", .-",
            $name,
            "\n",
            ".popsection\n"
        )
    };
}

// A probe or is-enabled site is an ordinary call: the compiler already treats the vector
// registers as clobbered, so only the stack is aligned.
macro_rules! no_xmm_save {
    () => {
        "    and $-16, %rsp\n"
    };
}
macro_rules! no_xmm_restore {
    () => {
        ""
    };
}
// A hook runs before or inside the function's prologue: its vector arguments must survive.
macro_rules! xmm_save {
    () => {
        concat!(
            "    sub $136, %rsp\n",
            "    and $-16, %rsp\n",
            "    movdqu %xmm0, 0(%rsp)\n",
            "    movdqu %xmm1, 16(%rsp)\n",
            "    movdqu %xmm2, 32(%rsp)\n",
            "    movdqu %xmm3, 48(%rsp)\n",
            "    movdqu %xmm4, 64(%rsp)\n",
            "    movdqu %xmm5, 80(%rsp)\n",
            "    movdqu %xmm6, 96(%rsp)\n",
            "    movdqu %xmm7, 112(%rsp)\n",
        )
    };
}
macro_rules! xmm_restore {
    () => {
        concat!(
            "    movdqu 0(%rsp), %xmm0\n",
            "    movdqu 16(%rsp), %xmm1\n",
            "    movdqu 32(%rsp), %xmm2\n",
            "    movdqu 48(%rsp), %xmm3\n",
            "    movdqu 64(%rsp), %xmm4\n",
            "    movdqu 80(%rsp), %xmm5\n",
            "    movdqu 96(%rsp), %xmm6\n",
            "    movdqu 112(%rsp), %xmm7\n",
        )
    };
}

core::arch::global_asm!(
    trampoline!("bootprof_tramp_probe", "0", no_xmm_save, no_xmm_restore),
    trampoline!("bootprof_tramp_isenabled", "1", no_xmm_save, no_xmm_restore),
    trampoline!("bootprof_tramp_hook", "2", xmm_save, xmm_restore),
    options(att_syntax)
);

extern "C" {
    fn bootprof_tramp_probe();
    fn bootprof_tramp_isenabled();
    fn bootprof_tramp_hook();
}

/// The three dispatcher addresses a stub object's pointer table receives.
pub(crate) fn trampolines() -> [usize; 3] {
    [
        bootprof_tramp_probe as *const () as usize,
        bootprof_tramp_isenabled as *const () as usize,
        bootprof_tramp_hook as *const () as usize,
    ]
}
