//! Signals the runtime handles in the program's place (SIGTRAP for trap mode, the attach
//! signal): takes a signal that is not the runtime's and the disposition the program had before
//! ours; hands it on to that disposition, as if the runtime were not there.

/// Calls the disposition `previous` for `sig`: its handler (plain or `SA_SIGINFO`), nothing
/// for `SIG_IGN`, and for `SIG_DFL` the signal's default action: nothing for a signal ignored
/// by default (`ignored_by_default`), else the disposition reset and the signal raised again
/// unblocked, so that the process ends (or dumps core) as it would have.
pub(crate) fn chain(
    previous: &libc::sigaction,
    ignored_by_default: bool,
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    match previous.sa_sigaction {
        libc::SIG_IGN => {}
        libc::SIG_DFL if ignored_by_default => {}
        libc::SIG_DFL => default_action(sig),
        f if previous.sa_flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the previous handler was installed as an SA_SIGINFO handler.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { core::mem::transmute(f) };
            f(sig, info, ctx);
        }
        f => {
            // SAFETY: the previous handler was installed as a plain handler.
            let f: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(f) };
            f(sig);
        }
    }
}

/// The default action of `sig` (one that ends the process), as if we were not there.
pub(crate) fn default_action(sig: libc::c_int) {
    // SAFETY: resets the disposition and re-raises: the process ends as it would have.
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        crate::syscall::sigaction(sig, &sa, core::ptr::null_mut());
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        crate::syscall::sigmask(libc::SIG_UNBLOCK, &set);
        libc::raise(sig);
    }
}
