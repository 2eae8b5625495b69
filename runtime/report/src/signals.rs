//! The `bootprof` command's signal dispositions: takes the ones it was started with; hands on
//! SIGPIPE at its default for bootprof's own output, and the dispositions it was given to the
//! programs `bootprof run` starts.
//!
//! Rust ignores SIGPIPE before `main`, so a write to a closed pipe (`bootprof list prog | head`)
//! fails with an error instead, which `print!` turns into a panic. [`die_on_closed_pipe`] puts
//! SIGPIPE back to its default: bootprof then ends as `cat` does, killed by SIGPIPE, quietly.
//!
//! A program bootprof starts must not see any of that: Rust's `Command` also sets SIGPIPE to its
//! default and empties the signal mask in every child, whatever its parent had. [`pass_on`]
//! gives the child what bootprof itself was given instead: SIGPIPE ignored if it was ignored
//! (by a parent that ignores it), and the signal mask bootprof started with. Every other
//! disposition bootprof leaves alone, so the child inherits it as it would without bootprof
//! (handlers are reset by `exec` in any case).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// SIGPIPE was ignored when the process started (before Rust's own start-up ignored it).
static SIGPIPE_IGNORED: AtomicBool = AtomicBool::new(false);

/// The signal mask `main` started with (Rust's start-up leaves the mask alone).
static MASK: OnceLock<libc::sigset_t> = OnceLock::new();

/// Notes whether SIGPIPE is ignored. Rust ignores SIGPIPE before `main`, so this must run
/// earlier: the `bootprof` binary calls it from `.init_array`, which the C library runs before
/// the `main` that starts Rust's runtime.
pub extern "C" fn note_sigpipe_before_main() {
    // SAFETY: sigaction with a null new action only reads SIGPIPE's disposition into a struct we
    // own.
    let ignored = unsafe {
        let mut old = std::mem::zeroed::<libc::sigaction>();
        libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    };
    SIGPIPE_IGNORED.store(ignored, Ordering::Relaxed);
}

/// Notes the signal mask bootprof was started with, then sets SIGPIPE to its default. To be
/// called first thing in `main`, before any thread is started.
pub fn die_on_closed_pipe() {
    // SAFETY: `pthread_sigmask` with a null new set only reads the calling thread's mask into a
    // set we own; `signal` sets one signal's disposition. No other thread runs yet.
    let mask = unsafe {
        let mut mask = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut mask);
        libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut mask);
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        mask
    };
    let _ = MASK.set(mask);
}

/// Makes `cmd`'s child start with the SIGPIPE disposition and the signal mask bootprof was
/// started with (as noted by [`note_sigpipe_before_main`] and [`die_on_closed_pipe`]; without
/// those calls, Rust's defaults stay: SIGPIPE at its default, nothing blocked).
pub fn pass_on(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let Some(&mask) = MASK.get() else {
        return;
    };
    let ignored = SIGPIPE_IGNORED.load(Ordering::Relaxed);
    // SAFETY: the closure runs in the child between fork and exec, and calls only `signal` and
    // `pthread_sigmask`, which are async-signal-safe, on data copied before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if ignored {
                libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
            Ok(())
        });
    }
}
