//! Attaching: takes a knock (the `knock` module starts [`listener`] on its own thread); hands on
//! one conversation with `bootprof attach` or `bootprof list --pid` over a unix socket (the
//! requests are in `bootprof_format::attach`): the sites' list with their states and hits,
//! sites enabled by pattern and mode, recording into the client's session directory or counting
//! hits exactly, and, when the client detaches or goes away, exactly the sites this attach
//! enabled disabled again and checked to hold their NOPs (and, counting, their hits while it
//! was attached handed on).
//!
//! Only the program's own effective user, or root, gets in: the socket lies in that user's
//! private directory (mode 0700, checked before it is used) and the peer's credentials
//! (`SO_PEERCRED`) are checked once connected. A program in secure-execution mode (setuid,
//! setgid, file capabilities) never listens, nor one started with `BOOTPROF_ATTACH=0`.

#[cfg(not(feature = "library"))]
use crate::knock;
use crate::note::note;
use crate::prelude::*;
use crate::registry::{self, Mode, SiteRec};
use crate::sys::{self, display, Fd};
use crate::{recorder, site};
use alloc::sync::Arc;
use bootprof_format::attach::{self as proto, SiteLine};
use bootprof_format::lane::Keep;
use bootprof_format::pattern::{self, Pattern};
use core::sync::atomic::{AtomicUsize, Ordering};

/// Attaches that count hits, connected now: while there is one, hits are counted exactly.
static COUNTING: AtomicUsize = AtomicUsize::new(0);

/// How long the listener waits for the client that knocked to connect.
const CONNECT_WAIT_MS: i32 = 10_000;

/// Installs the knock's handler, which starts [`listener`] (see `knock::init_from_environment`).
#[cfg(not(feature = "library"))]
pub(crate) fn init_from_environment(asked: bool) {
    knock::init_from_environment(asked, listener);
}

/// The listener thread: serves one client, then ends (the next knock starts another).
#[cfg(not(feature = "library"))]
pub(crate) extern "C" fn listener(arg: *mut libc::c_void) -> *mut libc::c_void {
    serve_knock(arg);
    knock::listener_done();
    core::ptr::null_mut()
}

/// The listener thread's work, on the thread the knock started: serves the client that knocked
/// (and any that come while one is connected). The knock's handler, and whether a listener
/// runs, are the serving copy's (`knock`): in the runtime library, the lean runtime's, which
/// calls this through the library's table and ends the listening itself.
#[cfg_attr(not(feature = "std"), optimize(size))]
pub(crate) extern "C" fn serve_knock(_: *mut libc::c_void) -> *mut libc::c_void {
    // The program's signals are for the program's threads.
    // SAFETY: a full set we own; blocks signals of this thread only.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        for sync in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGTRAP,
        ] {
            libc::sigdelset(&mut all, sync);
        }
        crate::syscall::sigmask(libc::SIG_BLOCK, &all);
        libc::prctl(libc::PR_SET_NAME, c"bootprof-attach".as_ptr());
    }
    if let Err(e) = serve() {
        note(&format!("attach: {e}"));
    }
    core::ptr::null_mut()
}

/// Listens on the socket for the client that knocked and for any that come while one is
/// connected (`bootprof list --pid` during an attach), each served by a thread of its own once
/// its credentials are checked; ends when the last one has gone (or when none came within
/// [`CONNECT_WAIT_MS`]).
fn serve() -> Result<(), String> {
    // SAFETY: no preconditions.
    let (euid, pid) = unsafe { (libc::geteuid(), libc::getpid() as u32) };
    let dir = proto::user_dir(euid).into_bytes();
    let meta = sys::lstat(&dir).map_err(|e| format!("{}: {e}", display(&dir)))?;
    if meta.st_mode & libc::S_IFMT != libc::S_IFDIR
        || meta.st_uid != euid
        || meta.st_mode & 0o077 != 0
    {
        return Err(format!(
            "{} is not a directory private to user {euid}: attach refused",
            display(&dir)
        ));
    }
    let _ = sys::remove_file(&sys::join(&dir, proto::knock_file(pid).as_bytes()));
    let path = sys::join(&dir, proto::socket_file(pid).as_bytes());
    let _ = sys::remove_file(&path);
    let listener =
        listen(&path).map_err(|e| format!("cannot listen on {}: {e}", display(&path)))?;
    let _ = sys::chmod(&path, 0o600);
    let active = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    let mut served = false;
    let mut idle_since = sys::Instant::now();
    loop {
        if let Some(stream) = accept_within(&listener, 100) {
            served |= admit(stream, euid, pid, &active, &mut threads);
        }
        if active.load(Ordering::Acquire) > 0 {
            idle_since = sys::Instant::now();
            continue;
        }
        let patience = if served { 0 } else { CONNECT_WAIT_MS as u64 };
        if idle_since.elapsed_ns() / 1_000_000 >= patience {
            break;
        }
    }
    let _ = sys::remove_file(&path);
    // Whoever connected before the name was gone is served all the same.
    while let Some(stream) = accept_within(&listener, 0) {
        admit(stream, euid, pid, &active, &mut threads);
    }
    for t in threads {
        t.join();
    }
    Ok(())
}

/// A unix stream socket listening at `path`.
fn listen(path: &[u8]) -> sys::Result<Fd> {
    // SAFETY: an address we own, filled within its bounds (the path is checked to fit).
    unsafe {
        let mut addr: libc::sockaddr_un = core::mem::zeroed();
        if path.len() >= addr.sun_path.len() || path.contains(&0) {
            return Err(sys::Errno(libc::ENAMETOOLONG));
        }
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, &s) in addr.sun_path.iter_mut().zip(path) {
            *d = s as libc::c_char;
        }
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(sys::Errno::last());
        }
        let fd = Fd(fd);
        let len = core::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::bind(fd.0, (&addr as *const libc::sockaddr_un).cast(), len) != 0
            || libc::listen(fd.0, 16) != 0
        {
            return Err(sys::Errno::last());
        }
        Ok(fd)
    }
}

/// Serves `stream` on a thread of its own if its peer is the process's user or root (true),
/// else tells it why not.
#[cfg_attr(not(feature = "std"), optimize(size))]
fn admit(
    stream: Fd,
    euid: u32,
    pid: u32,
    active: &Arc<AtomicUsize>,
    threads: &mut Vec<sys::Thread>,
) -> bool {
    match peer_uid(&stream) {
        Some(uid) if uid == euid || uid == 0 => {}
        uid => {
            let who = uid.map_or("an unknown user".into(), |u| format!("user {u}"));
            let _ = stream.write_all(
                format!(
                    "error permission denied: process {pid} belongs to user {euid}, not to {who}\n"
                )
                .as_bytes(),
            );
            return false;
        }
    }
    let ours = active.clone();
    active.fetch_add(1, Ordering::AcqRel);
    let spawned = sys::spawn(c"bootprof-attach", move || {
        Session::default().talk(stream);
        ours.fetch_sub(1, Ordering::AcqRel);
    });
    match spawned {
        Ok(t) => threads.push(t),
        Err(e) => {
            active.fetch_sub(1, Ordering::AcqRel);
            note(&format!("attach: cannot start a thread: {e}"));
        }
    }
    true
}

/// A client that connects within `ms` milliseconds, if one does.
fn accept_within(listener: &Fd, ms: i32) -> Option<Fd> {
    let mut fds = libc::pollfd {
        fd: listener.0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own.
    if unsafe { libc::poll(&mut fds, 1, ms) } != 1 {
        return None;
    }
    // SAFETY: accepts on our own socket, without the peer's address.
    let fd = unsafe {
        crate::syscall::accept4(
            listener.0,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        note(&format!(
            "attach: accepting a connection: {}",
            sys::Errno::last()
        ));
        return None;
    }
    Some(Fd(fd))
}

/// The user id of the process at the other end of `stream`.
fn peer_uid(stream: &Fd) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = core::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED fills the ucred we own, of the length given.
    let r = unsafe {
        libc::getsockopt(
            stream.0,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred.uid)
}

/// What one attach has done, to be undone when it ends.
#[derive(Default)]
struct Session {
    /// The sites this attach enabled (they were disabled before).
    enabled: Vec<&'static SiteRec>,
    /// Patterns of sites this attach never enables.
    notrace: Vec<Pattern>,
    /// Whether this attach started recording.
    recording: bool,
    /// Counting (`count`): the hits each site of `enabled` had when this attach enabled it.
    counted_from: Option<Vec<u64>>,
}

impl Session {
    /// Answers the client's requests until it detaches or goes away; then detaches.
    fn talk(mut self, stream: Fd) {
        let mut lines = Lines {
            fd: &stream,
            pending: Vec::new(),
        };
        while let Some(line) = lines.next_line() {
            let (verb, rest) = line.split_once(' ').unwrap_or((&line, ""));
            if verb == "detach" {
                let answer = self.detach();
                let _ = stream.write_all(answer.as_bytes());
                return;
            }
            let answer = self.answer(verb, rest);
            if stream.write_all(answer.as_bytes()).is_err() {
                break;
            }
        }
        self.detach();
    }

    /// The answer to one request, every line of it.
    fn answer(&mut self, verb: &str, rest: &str) -> String {
        let result = match verb {
            "hello" => Ok(hello()),
            "list" => Ok(list()),
            "record" => self.record(rest),
            "count" => self.count(),
            "notrace" => pattern::parse_list(rest)
                .map(|list| {
                    self.notrace.extend(list);
                    "ok\n".to_string()
                })
                .map_err(|e| e.to_string()),
            "enable" => self.enable(rest),
            _ => Err(format!("unknown request `{verb}`")),
        };
        result.unwrap_or_else(|e| format!("error {}\n", e.replace('\n', " ")))
    }

    /// `record KEEP RECORDS DIR`.
    fn record(&mut self, rest: &str) -> Result<String, String> {
        let mut parts = rest.splitn(3, ' ');
        let keep = parts.next().and_then(Keep::from_name);
        let capacity = parts.next().and_then(|n| n.parse::<usize>().ok());
        let (Some(keep), Some(capacity), Some(dir)) = (keep, capacity, parts.next()) else {
            return Err(format!("`record {rest}` is not `record KEEP RECORDS DIR`"));
        };
        if self.recording || self.counted_from.is_some() {
            return Err("this attach records or counts already".into());
        }
        recorder::start_attached(dir.as_bytes(), keep, capacity.max(1))?;
        self.recording = true;
        Ok("ok\n".into())
    }

    /// `count`: from now until the detach, hits are counted exactly, and the detach hands on the
    /// hits of the sites this attach enables from now on.
    fn count(&mut self) -> Result<String, String> {
        if self.recording || self.counted_from.is_some() {
            return Err("this attach records or counts already".into());
        }
        if !self.enabled.is_empty() {
            return Err("`count` must come before the first `enable`".into());
        }
        if COUNTING.fetch_add(1, Ordering::AcqRel) == 0 {
            site::set_hit_path(site::COUNTS_FOR_ATTACH, true);
        }
        self.counted_from = Some(Vec::new());
        Ok("ok\n".into())
    }

    /// `enable trap|call PATTERNS`.
    fn enable(&mut self, rest: &str) -> Result<String, String> {
        let (mode, list) = rest.split_once(' ').unwrap_or((rest, ""));
        let mode = match mode {
            "trap" => Mode::Trap,
            "call" => Mode::Call,
            _ => return Err(format!("mode `{mode}` is neither trap nor call")),
        };
        let patterns = pattern::parse_list(list).map_err(|e| e.to_string())?;
        let (changed, hits) =
            registry::enable_disabled(&patterns, &self.notrace, mode).map_err(|e| e.to_string())?;
        let n = changed.len();
        self.enabled.extend(changed);
        if let Some(from) = &mut self.counted_from {
            from.extend(hits);
        }
        Ok(format!("ok {n}\n"))
    }

    /// Stops recording, disables every site this attach enabled and checks that each holds its
    /// NOP again: `ok RESTORED NOT_RESTORED`; counting, after a [`SiteLine`] per site it enabled
    /// (guards aside: their hits are their calls') with the hits it had while enabled.
    #[cfg_attr(not(feature = "std"), optimize(size))]
    fn detach(&mut self) -> String {
        // The lane first: once a client sees the sites disabled, the session is whole.
        if self.recording {
            recorder::stop_attached();
            self.recording = false;
        }
        let restored = registry::restore(&self.enabled);
        let reg = site::lock();
        let not_restored = self
            .enabled
            .iter()
            .filter(|s| reg.holds(s))
            .filter(|s| s.state() == site::DISABLED && !registry::holds_nop(s))
            .count();
        let enabled = core::mem::take(&mut self.enabled);
        let mut counts = String::new();
        if let Some(from) = self.counted_from.take() {
            // After the sites are disabled: nothing counts any more.
            for (s, from) in enabled.iter().zip(from).filter(|(s, _)| !s.is_guard()) {
                let hits = s.hits.load(Ordering::Relaxed).wrapping_sub(from);
                counts.push_str(&site_line(s, hits).encode());
                counts.push('\n');
            }
            if COUNTING.fetch_sub(1, Ordering::AcqRel) == 1 {
                site::set_hit_path(site::COUNTS_FOR_ATTACH, false);
            }
        }
        match restored {
            Ok(n) => format!("{counts}ok {n} {not_restored}\n"),
            Err(e) => format!(
                "error {} of the {} sites this attach enabled could not be disabled: {e}\n",
                enabled.len() - not_restored.min(enabled.len()),
                enabled.len()
            ),
        }
    }
}

/// `ok 1 PID SITES`.
fn hello() -> String {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    format!(
        "ok {} {pid} {}\n",
        proto::PROTOCOL_VERSION,
        site::lock().site_count()
    )
}

/// Every registered site as a [`SiteLine`], then `ok COUNT`.
fn list() -> String {
    let sites: Vec<_> = site::lock().sites().collect();
    let mut out = String::new();
    for s in &sites {
        out.push_str(&site_line(s, s.hits.load(Ordering::Relaxed)).encode());
        out.push('\n');
    }
    out.push_str(&format!("ok {}\n", sites.len()));
    out
}

/// `s` as a [`SiteLine`], with `hits`.
fn site_line(s: &SiteRec, hits: u64) -> SiteLine {
    let names = s.names();
    SiteLine {
        id: s.id,
        address: s.addr,
        state: match s.mode() {
            Some(Mode::Trap) => "trap",
            Some(Mode::Call) => "call",
            None => "disabled",
        }
        .into(),
        holds_nop: registry::holds_nop(s),
        hits,
        kind: s.kind.name().into(),
        provider: names.provider.into(),
        name: names.name.into(),
        function: names.function.into(),
        demangled: names.demangled.into(),
        func_offset: s.func_offset,
    }
}

/// The lines a client sends, read from its socket (a line that is not UTF-8 ends the talk).
struct Lines<'a> {
    fd: &'a Fd,
    /// Bytes read after the last line handed on.
    pending: Vec<u8>,
}

impl Lines<'_> {
    /// The next line, without its newline; `None` at the end of the stream or on an error.
    fn next_line(&mut self) -> Option<String> {
        loop {
            if let Some(at) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=at).take(at).collect();
                return String::from_utf8(line).ok();
            }
            let mut buf = [0u8; 4096];
            match self.fd.read(&mut buf) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
            }
        }
    }
}
