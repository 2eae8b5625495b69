//! The calling thread's state on the hit path: its id (cached, and forgotten in a fork child),
//! and the guard that keeps a thread from handling a hit inside the handling of another (a
//! handler, or a signal handler, that fires a site or returns from a traced function meanwhile).

use core::cell::Cell;

crate::sys::thread_local_cells! {
    static BUSY: Cell<bool> = Cell::new(false);
    static TID: Cell<u32> = Cell::new(0);
}

/// Takes the guard: true if the thread was not handling a hit already (it must [`leave`] then).
#[inline]
pub(crate) fn enter() -> bool {
    BUSY.with(|g| !g.replace(true))
}

/// Gives the guard back.
#[inline]
pub(crate) fn leave() {
    BUSY.with(|g| g.set(false));
}

/// The calling thread's id, cached (and reset in a forked child).
pub(crate) fn tid() -> u32 {
    TID.with(|t| {
        let v = t.get();
        if v != 0 {
            return v;
        }
        // SAFETY: gettid has no arguments.
        let v = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        t.set(v);
        v
    })
}

/// Makes a forked child forget the parent's cached thread id.
pub(crate) fn forget_tid() {
    TID.with(|t| t.set(0));
}

/// Makes a forked child forget the parent's cached thread id: installed before any site is
/// enabled (when the registry first reads its tables), not at start-up, since until a site is
/// hit no thread has one cached.
pub(crate) fn install_fork_handler() {
    static ONCE: crate::sys::Once = crate::sys::Once::new();
    extern "C" fn child() {
        forget_tid();
    }
    ONCE.call_once(|| {
        // SAFETY: registers a handler with no preconditions.
        unsafe { libc::pthread_atfork(None, None, Some(child)) };
    });
}
