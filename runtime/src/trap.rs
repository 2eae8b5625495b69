//! Trap mode: the SIGTRAP handler. Takes the trap's saved registers; maps the PC (RIP-1) to a site
//! through the sites' lookup snapshot; runs the handlers and resumes after the site as the
//! enabled instruction would (a call returns, a tail jump returns to the caller, an is-enabled test
//! yields 1). A trap that is not at one of our sites goes to the handler that was installed before
//! ours, or to the default action, so a debugger's or `__builtin_debugtrap` breakpoint still works.

use crate::dispatch;
use crate::prelude::*;
use crate::site::{self, SiteRec, CALL, DISABLED, DISABLING_CALL, ENABLING_CALL, TRAP};
use bootprof_format::{code, Kind};
use core::sync::atomic::{AtomicBool, Ordering};

static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The SIGTRAP disposition before ours (set once, never freed: the handler reads it).
static PREVIOUS: core::sync::atomic::AtomicPtr<libc::sigaction> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// Installs the SIGTRAP handler once.
pub(crate) fn install() {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: a zeroed sigaction is a valid "no handler" value; we fill the fields we use.
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_sigtrap as *const () as usize;
        // NODEFER: a probe hit inside a handler (ours or the program's) must trap again.
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = core::mem::zeroed();
        crate::syscall::sigaction(libc::SIGTRAP, &sa, &mut old);
        PREVIOUS.store(Box::into_raw(Box::new(old)), Ordering::Release);
    }
}

/// Whether our SIGTRAP handler is still the installed one (false if the program replaced it
/// after us, or if no probe was ever enabled).
pub fn handler_in_place() -> bool {
    if !INSTALLED.load(Ordering::Acquire) {
        return false;
    }
    // SAFETY: querying the current disposition only.
    unsafe {
        let mut cur: libc::sigaction = core::mem::zeroed();
        crate::syscall::sigaction(libc::SIGTRAP, core::ptr::null(), &mut cur);
        cur.sa_sigaction == on_sigtrap as *const () as usize
    }
}

const REG_RIP: usize = libc::REG_RIP as usize;
const REG_RSP: usize = libc::REG_RSP as usize;
const REG_RAX: usize = libc::REG_RAX as usize;
const REG_RBP: usize = libc::REG_RBP as usize;

extern "C" fn on_sigtrap(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid ucontext to an SA_SIGINFO handler.
    let uc = unsafe { &mut *(ctx as *mut libc::ucontext_t) };
    let g = &mut uc.uc_mcontext.gregs;
    let pc = (g[REG_RIP] as u64).wrapping_sub(1);
    let site = site::lookup(pc);
    let Some(site) = site else {
        return chain(sig, info, ctx);
    };
    // The state first, then the byte. Every change stores the state before it writes an int3
    // and writes the bytes that take an int3 away before it stores the state, so a state read
    // first is never older than the int3 this thread hit, and the byte read after it is never
    // older than that state: an int3 seen with DISABLED is not ours. (Byte first, a disable
    // landing between the two reads showed our own int3 with DISABLED, and the trap went to
    // the default action: the process died of SIGTRAP.)
    let state = site.state();
    // SAFETY: the site is in our own loaded code.
    let byte = unsafe { core::ptr::read_volatile(pc as *const u8) };
    if byte != code::INT3 {
        // The int3 was taken away after this thread hit it: run the site again as it is now.
        g[REG_RIP] = pc as i64;
        return;
    }
    if site.is_guard() {
        // A guard is never trapped on purpose: this is the int3 of the bridge that writes or
        // takes away its jump. Run the jump (on its way in, or in place) or the NOP.
        match state {
            ENABLING_CALL | CALL => g[REG_RIP] = site.target as i64,
            DISABLING_CALL => g[REG_RIP] = (site.addr + site.site_len() as u64) as i64,
            _ => chain(sig, info, ctx),
        }
        return;
    }
    match state {
        TRAP | ENABLING_CALL => {
            let args = [
                g[libc::REG_RDI as usize] as u64,
                g[libc::REG_RSI as usize] as u64,
                g[libc::REG_RDX as usize] as u64,
                g[libc::REG_RCX as usize] as u64,
                g[libc::REG_R8 as usize] as u64,
                g[libc::REG_R9 as usize] as u64,
            ];
            let (sp, fp) = (g[REG_RSP] as u64, g[REG_RBP] as u64);
            let slot = return_slot(site, sp, fp);
            dispatch::fire(site, args, slot, 1, dispatch::Origin { sp, fp });
            resume(site, g, true);
        }
        DISABLING_CALL | CALL => resume(site, g, false),
        DISABLED => {
            // Not our int3 (a debugger's breakpoint on one of our sites).
            chain(sig, info, ctx)
        }
        _ => resume(site, g, false),
    }
}

/// Where a hooked function's return address is (0 for other sites): at an fentry site on top of
/// the stack; at an mcount site above the frame pointer the prologue set (-pg keeps one).
fn return_slot(site: &SiteRec, rsp: u64, rbp: u64) -> u64 {
    match site.kind {
        Kind::Fentry => rsp,
        Kind::Mcount if rbp != 0 => rbp + 8,
        _ => 0,
    }
}

/// Resumes as the enabled (`enabled`) or disabled instruction would have run.
fn resume(site: &SiteRec, g: &mut [libc::greg_t; 23], enabled: bool) {
    if site.kind == Kind::IsEnabled {
        g[REG_RAX] = i64::from(enabled);
    }
    if site.is_tail() {
        // The jump's target returns to the caller: emulate its `ret`.
        let rsp = g[REG_RSP] as u64;
        // SAFETY: a tail jump leaves the caller's return address on top of the stack.
        g[REG_RIP] = unsafe { *(rsp as *const u64) } as i64;
        g[REG_RSP] = (rsp + 8) as i64;
    } else {
        g[REG_RIP] = (site.addr + site.site_len() as u64) as i64;
    }
}

/// Hands the trap to the previous disposition.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = PREVIOUS.load(Ordering::Acquire);
    // SAFETY: set once before our handler was installed, never freed.
    match unsafe { prev.as_ref() } {
        Some(prev) => crate::sigchain::chain(prev, false, sig, info, ctx),
        None => crate::sigchain::default_action(sig),
    }
}
