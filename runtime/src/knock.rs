//! The knock: the attach signal's handler. Takes the signal; hands on one listener thread (the
//! `attach` module's), started only when the signal is a knock, or the signal to the program's
//! own disposition when it is not.
//!
//! Until someone attaches, this is all the runtime has for attaching: one signal disposition. No
//! thread, descriptor, timer or polling. A knock is the attach signal sent by a process (`kill`,
//! `tgkill`, `sigqueue`) while the knock file `/tmp/.bootprof-<euid>/attach.<pid>` exists, owned
//! by the process's own effective user (whom the directory, mode 0700, also belongs to): a
//! stranger can neither send the signal nor make the file. Anything else goes on to the
//! disposition the signal had before ours (the program's handler, or its default action), so
//! the program's own use of the signal is kept.
//!
//! # Why starting a thread from this handler is safe
//!
//! `pthread_create` is not async-signal-safe: it takes locks (the C library's allocator, its
//! list of thread stacks, the dynamic linker's TLS lock). Called in a thread interrupted while
//! holding one, it would wait for that thread, which is itself: a deadlock. Those locks are only
//! ever held while the C library's or the dynamic linker's own code runs, so the handler starts
//! the thread only when the interrupted thread is at a point where it holds none of them:
//!
//! - its PC is outside `libc.so`, `ld-linux` and `libpthread` (in the program's code, another
//!   library's, or the vDSO), and no handler of the program runs below ours (no signal with a
//!   handler is blocked in the interrupted mask: a handler may have interrupted the C library);
//! - or it is parked in a blocking system call the C library never makes holding those locks:
//!   restarted (`SA_RESTART` puts the PC back on the `syscall` instruction and the call's number
//!   in `rax`) and one of [`PARKED_SYSCALLS`], or interrupted with `EINTR` (`epoll_wait`, `poll`,
//!   `nanosleep`, ...: the C library's own waits for a lock are restarted, never interrupted).
//!
//! Otherwise the knock is left unanswered: the client knocks again, thread by thread, until one
//! is at such a point; an idle program (blocked in `read`, `accept`, `epoll_wait`) is at one at
//! once, a busy one in its own code nearly always. In a static program the C library is part of
//! the executable, so only the second kind of point serves. The maps are read with plain system
//! calls into a buffer on the stack.

use crate::sys::OnceLock;
use core::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The listener's entry point, as `pthread_create` takes it.
pub(crate) type Entry = extern "C" fn(*mut libc::c_void) -> *mut libc::c_void;

/// What the handler needs, set once before it is installed.
struct Knock {
    signal: libc::c_int,
    /// The knock file's path up to the pid: `/tmp/.bootprof-<euid>/attach.`.
    prefix: [u8; 64],
    prefix_len: usize,
    euid: libc::uid_t,
    /// The disposition before ours.
    previous: libc::sigaction,
    entry: Entry,
    /// The C library is inside the executable (no dynamic linker).
    static_program: bool,
}

// SAFETY: plain data, written once before any reader.
unsafe impl Sync for Knock {}
// SAFETY: as above.
unsafe impl Send for Knock {}

static KNOCK: OnceLock<Knock> = OnceLock::new();
/// A listener thread is starting or listening.
static LISTENING: AtomicBool = AtomicBool::new(false);
/// The process that sent the last knock: the client knocks until its listener answers, and on a
/// busy machine a knock may reach a thread only after the listener removed the knock file; its
/// signals are knocks all the same, not the program's (0: none yet).
static KNOCKER: AtomicI32 = AtomicI32::new(0);

/// System calls a thread may be parked in without holding any lock of the C library's.
const PARKED_SYSCALLS: [i64; 18] = [
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_recvfrom,
    libc::SYS_recvmsg,
    libc::SYS_sendto,
    libc::SYS_sendmsg,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_connect,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_open,
    libc::SYS_openat,
    libc::SYS_flock,
];

/// Installs the knock's handler, which starts `entry` on a knock, unless attaching is off:
/// `BOOTPROF_ATTACH=0`, or the process runs in secure-execution mode. `BOOTPROF_ATTACH_SIGNAL`
/// chooses the signal. Once, at the first registration of the copy of the runtime that serves.
/// `asked`: whether any `BOOTPROF_` variable is set (if none is, neither of attaching's is).
pub(crate) fn init_from_environment(asked: bool, entry: Entry) {
    use bootprof_format::attach as proto;
    static ONCE: crate::sys::Once = crate::sys::Once::new();
    ONCE.call_once(|| {
        if asked && crate::sys::var_is(proto::ENV_ATTACH, "0") {
            return;
        }
        if crate::sys::auxv(libc::AT_SECURE) != 0 {
            return;
        }
        let signal = match crate::sys::var(proto::ENV_SIGNAL).filter(|_| asked) {
            Some(name) if !name.is_empty() => proto::signal_number(name).unwrap_or_else(|| {
                crate::note::note_parts(&[
                    proto::ENV_SIGNAL,
                    "=",
                    name,
                    " is not a signal attaching may use (URG, WINCH, USR1, USR2, RTMIN+N); \
                     using URG",
                ]);
                proto::DEFAULT_SIGNAL
            }),
            _ => proto::DEFAULT_SIGNAL,
        };
        install(signal, entry);
    });
}

/// Installs the handler of `signal`, which starts `entry` on a knock. Once.
fn install(signal: libc::c_int, entry: Entry) {
    // From the auxiliary vector (what geteuid and getauxval say before `main`): the effective
    // user, and whether a dynamic loader runs the program.
    let euid = crate::sys::auxv(libc::AT_EUID) as u32;
    let static_program = crate::sys::auxv(libc::AT_BASE) == 0;
    // `/tmp/.bootprof-EUID/attach.`, made without allocating (start-up of a program nobody
    // attaches to stays cheap).
    let mut prefix = [0u8; 64];
    let mut len = 0;
    let mut put = |b: &[u8]| {
        prefix[len..len + b.len()].copy_from_slice(b);
        len += b.len();
    };
    put(bootprof_format::attach::USER_DIR_PREFIX.as_bytes());
    let mut digits = [0u8; 10];
    let n = crate::note::put_decimal(&mut digits, euid);
    put(&digits[..n]);
    put(b"/");
    put(bootprof_format::attach::KNOCK_PREFIX.as_bytes());
    // SAFETY: a zeroed sigaction is a valid value for the query to fill.
    let mut previous: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: a query of the current disposition.
    unsafe { crate::syscall::sigaction(signal, core::ptr::null(), &mut previous) };
    let knock = Knock {
        signal,
        prefix,
        prefix_len: len,
        euid,
        previous,
        entry,
        static_program,
    };
    if KNOCK.set(knock).is_err() {
        return;
    }
    // SAFETY: installs our handler; the previous disposition is kept above for it to chain to.
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        // SA_RESTART: a system call a knock interrupts goes on (and the handler learns which).
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        fill(&mut sa.sa_mask);
        crate::syscall::sigaction(signal, &sa, core::ptr::null_mut());
    }
}

/// The runtime library the client that knocked offers, when the knock file of this process
/// names one (`bootprof_format::attach::is_offered_library`): its path, in the user's private
/// directory beside the knock file. For the lean runtime's listener, before it loads the
/// library.
#[cfg(feature = "lean")]
pub(crate) fn offered_library() -> Option<alloc::vec::Vec<u8>> {
    let k = KNOCK.get()?;
    let mut path = k.prefix[..k.prefix_len].to_vec();
    let mut digits = [0u8; 10];
    // SAFETY: getpid has no preconditions.
    let n = crate::note::put_decimal(&mut digits, unsafe { libc::getpid() } as u32);
    path.extend_from_slice(&digits[..n]);
    let named = crate::sys::read(&path).ok()?;
    let name = named.trim_ascii();
    if !bootprof_format::attach::is_offered_library(name) {
        return None;
    }
    path.truncate(k.prefix_len - bootprof_format::attach::KNOCK_PREFIX.len());
    path.extend_from_slice(name);
    Some(path)
}

/// Called by the listener thread as it ends: the next knock starts another.
pub(crate) fn listener_done() {
    LISTENING.store(false, Ordering::Release);
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: errno is this thread's; a handler must leave it as it found it.
    let errno = unsafe { *libc::__errno_location() };
    if let Some(k) = KNOCK.get() {
        // SAFETY: getpid has no preconditions.
        let own = unsafe { libc::getpid() };
        let sender = sent_by_another(info, own);
        match sender.filter(|_| knock_file_exists(k, own as u32)) {
            Some(knocker) => {
                KNOCKER.store(knocker, Ordering::Relaxed);
                if !LISTENING.load(Ordering::Acquire)
                    && safe_point(k, ctx)
                    && LISTENING
                        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    && !spawn(k.entry)
                {
                    LISTENING.store(false, Ordering::Release);
                }
            }
            // A knock of the last knocker that arrived after its file was gone is not the
            // program's either.
            None if sender.is_some_and(|s| s != 0 && s == KNOCKER.load(Ordering::Relaxed)) => {}
            None => {
                let ignored = matches!(sig, libc::SIGURG | libc::SIGWINCH);
                crate::sigchain::chain(&k.previous, ignored, sig, info, ctx);
            }
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// The pid of the process that sent the signal, if a process other than `own` (this one) did
/// (by `kill`, `tgkill` or `sigqueue`; 0 when the sender is outside this process's pid
/// namespace). The program's own signals to itself are never knocks.
fn sent_by_another(info: *const libc::siginfo_t, own: libc::pid_t) -> Option<i32> {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler; a signal sent by a
    // process (these codes) carries the sender's pid.
    let (code, sender) = unsafe { ((*info).si_code, (*info).si_pid()) };
    (matches!(code, libc::SI_USER | libc::SI_TKILL | libc::SI_QUEUE) && sender != own)
        .then_some(sender)
}

/// Whether the knock file of process `pid` (this one) exists, owned by our user: a signal from
/// another process meanwhile is a knock.
fn knock_file_exists(k: &Knock, pid: u32) -> bool {
    let mut path = [0u8; 80];
    path[..k.prefix_len].copy_from_slice(&k.prefix[..k.prefix_len]);
    let n = crate::note::put_decimal(&mut path[k.prefix_len..], pid);
    path[k.prefix_len + n] = 0;
    // SAFETY: a NUL-terminated path; lstat fills the struct we own (async-signal-safe).
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        crate::syscall::lstat(path.as_ptr().cast(), &mut st) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_uid == k.euid
    }
}

/// Starts the listener thread, detached; false if it cannot be started.
fn spawn(entry: Entry) -> bool {
    // SAFETY: called only at a point where the interrupted thread holds none of the locks
    // pthread_create takes (see the module's comment); the attribute object is ours.
    unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let mut thread: libc::pthread_t = 0;
        let r = libc::pthread_create(&mut thread, &attr, entry, core::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        r == 0
    }
}

/// Whether the interrupted thread holds none of the locks `pthread_create` takes (see the
/// module's comment).
fn safe_point(k: &Knock, ctx: *mut libc::c_void) -> bool {
    // SAFETY: the kernel passes a valid ucontext to an SA_SIGINFO handler.
    let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
    if handler_below(k, &uc.uc_sigmask) {
        return false;
    }
    let g = &uc.uc_mcontext.gregs;
    let pc = g[libc::REG_RIP as usize] as u64;
    let rax = g[libc::REG_RAX as usize];
    let Some(mapping) = mapping_of(pc) else {
        return false;
    };
    let c_library = mapping.c_library || (k.static_program && mapping.executable);
    if !c_library {
        return true;
    }
    // SAFETY: two bytes at (or just before) a PC inside an executable mapping that holds them.
    let at = |a: u64| unsafe { core::ptr::read_volatile(a as *const [u8; 2]) };
    let syscall = [0x0f, 0x05];
    let restarted = pc + 2 <= mapping.end && at(pc) == syscall && PARKED_SYSCALLS.contains(&rax);
    let interrupted =
        pc >= mapping.start + 2 && at(pc - 2) == syscall && rax == -(libc::EINTR as i64);
    restarted || interrupted
}

/// Whether a signal with a handler (other than ours) is blocked in `mask`: a handler of the
/// program's may be running below ours.
fn handler_below(k: &Knock, mask: &libc::sigset_t) -> bool {
    (1..64).any(|sig| {
        // SAFETY: queries of our own copy of the mask and of dispositions.
        unsafe {
            if sig == k.signal || libc::sigismember(mask, sig) != 1 {
                return false;
            }
            let mut sa: libc::sigaction = core::mem::zeroed();
            crate::syscall::sigaction(sig, core::ptr::null(), &mut sa) == 0
                && sa.sa_sigaction != libc::SIG_DFL
                && sa.sa_sigaction != libc::SIG_IGN
        }
    })
}

/// The executable mapping holding an address, as `/proc/self/maps` says.
struct Mapping {
    start: u64,
    end: u64,
    /// The C library's, the dynamic linker's or (old glibc) libpthread's code.
    c_library: bool,
    /// A file that is not a shared library (no `.so` in its name): the executable.
    executable: bool,
}

/// The mapping holding `pc`, read from `/proc/self/maps` with plain system calls.
fn mapping_of(pc: u64) -> Option<Mapping> {
    // SAFETY: a NUL-terminated path; open, read and close are async-signal-safe.
    let fd = unsafe {
        libc::open(
            c"/proc/self/maps".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 4096];
    let mut have = 0;
    let mut found = None;
    'read: loop {
        // SAFETY: reads into the free part of our buffer.
        let n = unsafe { libc::read(fd, buf[have..].as_mut_ptr().cast(), buf.len() - have) };
        if n <= 0 {
            break;
        }
        have += n as usize;
        let mut start = 0;
        while let Some(nl) = buf[start..have].iter().position(|&b| b == b'\n') {
            if let Some(m) = parse_line(&buf[start..start + nl], pc) {
                found = Some(m);
                break 'read;
            }
            start += nl + 1;
        }
        buf.copy_within(start..have, 0);
        have -= start;
        if have == buf.len() {
            // A line longer than the buffer: not one we can read.
            break;
        }
    }
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    found
}

/// The mapping a line of `/proc/self/maps` describes, if it holds `pc`.
fn parse_line(line: &[u8], pc: u64) -> Option<Mapping> {
    let range = line.split(|&b| b == b' ').next()?;
    let dash = range.iter().position(|&b| b == b'-')?;
    let start = hex(&range[..dash])?;
    let end = hex(&range[dash + 1..])?;
    if pc < start || pc >= end {
        return None;
    }
    // The path, after the other fields, may hold spaces; those fields hold no `/` nor `[`.
    let path = match line.iter().position(|&b| b == b'/' || b == b'[') {
        Some(at) => &line[at..],
        None => b"",
    };
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(b"");
    let c_library = [
        &b"libc.so"[..],
        b"libc-",
        b"ld-linux",
        b"ld-2.",
        b"libpthread",
    ]
    .iter()
    .any(|p| name.starts_with(p));
    let executable = !name.windows(3).any(|w| w == b".so") && !name.starts_with(b"[");
    Some(Mapping {
        start,
        end,
        c_library,
        executable,
    })
}

fn hex(digits: &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for &d in digits {
        v = v.checked_mul(16)? + (d as char).to_digit(16)? as u64;
    }
    Some(v)
}

/// `sigfillset` without the call: every signal but the two glibc keeps for itself (32 and 33:
/// thread cancellation and `setxid`, which its `sigfillset` leaves out too).
fn fill(set: &mut libc::sigset_t) {
    // SAFETY: sigset_t is plain bits; glibc's is 1024 bits, signal n at bit n - 1.
    let words = unsafe {
        core::slice::from_raw_parts_mut(
            (set as *mut libc::sigset_t).cast::<u64>(),
            core::mem::size_of::<libc::sigset_t>() / 8,
        )
    };
    words.fill(!0);
    words[0] &= !(3 << 31);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_maps_line_tells_the_c_library_from_the_program() {
        let libc = b"7f0000001000-7f0000002000 r-xp 00028000 08:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6";
        let m = parse_line(libc, 0x7f00_0000_1800).unwrap();
        assert!(m.c_library && !m.executable);
        assert!(parse_line(libc, 0x7f00_0000_2000).is_none());
        let exe = b"555555554000-555555556000 r-xp 00001000 08:01 9 /tmp/my prog";
        let m = parse_line(exe, 0x5555_5555_4010).unwrap();
        assert!(!m.c_library && m.executable);
        let vdso = b"7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]";
        let m = parse_line(vdso, 0x7ffd_1001).unwrap();
        assert!(!m.c_library && !m.executable);
    }
}
