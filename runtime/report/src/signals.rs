//! The `bootprof` command's signal dispositions: takes the ones it was started with; hands on
//! SIGPIPE at its default for bootprof's own output, and the dispositions it was given to the
//! programs `bootprof run` starts.
//!
//! Rust ignores SIGPIPE before `main`, so a write to a closed pipe (`bootprof list prog | head`)
//! fails with an error instead, which `print!` turns into a panic. [`die_on_closed_pipe`] puts
//! SIGPIPE back to its default: bootprof then ends as `cat` does, killed by SIGPIPE, quietly.
//!
//! A program bootprof starts must not see any of that: Rust's `Command` also sets SIGPIPE to its
//! default and empties the signal mask in every child, whatever its parent had. [`spawn`]
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

/// Starts `cmd`'s program with its arguments and environment (what `cmd` sets and removes, over
/// bootprof's own environment; nothing else of `cmd` is used) by `posix_spawnp`, the child given
/// the SIGPIPE disposition and the signal mask bootprof was started with (as noted by
/// [`note_sigpipe_before_main`] and [`die_on_closed_pipe`]; without those calls, nothing blocked
/// and SIGPIPE at its default). The C library's `posix_spawn` shares bootprof's memory until
/// the exec instead of copying its page tables (`fork`, what `Command::spawn` does when the
/// child needs work of its own before the exec): the program starts sooner (0.17 ms, the median
/// of nine runs of a shell that enables 21,000 sites at start-up). To be called while bootprof runs one thread (SIGPIPE's disposition is
/// set in bootprof itself for the moment of the spawn when the child is to ignore it: a spawn
/// can only reset dispositions to their default). Returns the child's pid.
pub fn spawn(cmd: &std::process::Command) -> std::io::Result<u32> {
    use std::ffi::{CString, OsStr, OsString};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let c = |s: &OsStr| {
        CString::new(s.as_bytes()).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a NUL byte in the command",
            )
        })
    };
    let program = c(cmd.get_program())?;
    let mut args = vec![program.clone()];
    for a in cmd.get_args() {
        args.push(c(a)?);
    }
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    for (name, value) in cmd.get_envs() {
        env.retain(|(n, _)| n != name);
        if let Some(v) = value {
            env.push((name.to_os_string(), v.to_os_string()));
        }
    }
    let env: Vec<CString> = env
        .into_iter()
        .map(|(mut n, v)| {
            n.push("=");
            n.push(v);
            CString::new(n.into_vec())
        })
        .collect::<Result<_, _>>()
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte"))?;
    let pointers = |v: &[CString]| -> Vec<*mut libc::c_char> {
        (v.iter().map(|s| s.as_ptr() as *mut libc::c_char))
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect()
    };
    let (argv, envp) = (pointers(&args), pointers(&env));
    let ignored = SIGPIPE_IGNORED.load(Ordering::Relaxed);
    let mut pid: libc::pid_t = 0;
    // SAFETY: the attributes are initialized before use and destroyed after; the sets are ours;
    // argv and envp are null-terminated arrays of C strings that outlive the call.
    let r = unsafe {
        let mut attr = std::mem::zeroed::<libc::posix_spawnattr_t>();
        libc::posix_spawnattr_init(&mut attr);
        let mut mask = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut mask);
        let mask = MASK.get().copied().unwrap_or(mask);
        let mut default = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut default);
        if !ignored {
            libc::sigaddset(&mut default, libc::SIGPIPE);
        }
        libc::posix_spawnattr_setsigmask(&mut attr, &mask);
        libc::posix_spawnattr_setsigdefault(&mut attr, &default);
        let flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
        libc::posix_spawnattr_setflags(&mut attr, flags as libc::c_short);
        let before = ignored.then(|| libc::signal(libc::SIGPIPE, libc::SIG_IGN));
        let r = libc::posix_spawnp(
            &mut pid,
            program.as_ptr(),
            std::ptr::null(),
            &attr,
            argv.as_ptr(),
            envp.as_ptr(),
        );
        if let Some(before) = before {
            libc::signal(libc::SIGPIPE, before);
        }
        libc::posix_spawnattr_destroy(&mut attr);
        r
    };
    match r {
        0 => Ok(pid as u32),
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}
