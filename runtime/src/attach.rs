//! Attaching: takes a knock (the `knock` module starts [`listener`] on its own thread); hands on
//! one conversation with `bootprof attach` or `bootprof list --pid` over a unix socket (the
//! requests are in `bootprof_format::attach`): the sites' list with their states and hits,
//! sites enabled by pattern and mode, recording into the client's session directory, and, when
//! the client detaches or goes away, exactly the sites this attach enabled disabled again and
//! checked to hold their NOPs.
//!
//! Only the program's own effective user, or root, gets in: the socket lies in that user's
//! private directory (mode 0700, checked before it is used) and the peer's credentials
//! (`SO_PEERCRED`) are checked once connected. A program in secure-execution mode (setuid,
//! setgid, file capabilities) never listens, nor one started with `BOOTPROF_ATTACH=0`.

use crate::note::note;
use crate::registry::{self, Mode, SiteRec};
use crate::{knock, recorder, site};
use bootprof_format::attach::{self as proto, SiteLine};
use bootprof_format::lane::Keep;
use bootprof_format::pattern::{self, Pattern};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;

/// How long the listener waits for the client that knocked to connect.
const CONNECT_WAIT_MS: i32 = 10_000;

/// Installs the knock's handler, unless attaching is off: `BOOTPROF_ATTACH=0`, or the process
/// runs in secure-execution mode. `BOOTPROF_ATTACH_SIGNAL` chooses the signal. Once, at the
/// first registration.
pub(crate) fn init_from_environment() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os(proto::ENV_ATTACH).is_some_and(|v| v == "0") {
            return;
        }
        // SAFETY: getauxval has no preconditions.
        if unsafe { libc::getauxval(libc::AT_SECURE) } != 0 {
            return;
        }
        let signal = match std::env::var(proto::ENV_SIGNAL) {
            Ok(name) if !name.is_empty() => proto::signal_number(&name).unwrap_or_else(|| {
                note(&format!(
                    "{}={name} is not a signal attaching may use (URG, WINCH, USR1, USR2, \
                     RTMIN+N); using URG",
                    proto::ENV_SIGNAL
                ));
                proto::DEFAULT_SIGNAL
            }),
            _ => proto::DEFAULT_SIGNAL,
        };
        knock::install(signal, listener);
    });
}

/// The listener thread: serves one client, then ends (the next knock starts another).
pub(crate) extern "C" fn listener(_: *mut libc::c_void) -> *mut libc::c_void {
    // The program's signals are for the program's threads.
    // SAFETY: a full set we own; blocks signals of this thread only.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
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
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_NAME, c"bootprof-attach".as_ptr());
    }
    if let Err(e) = serve() {
        note(&format!("attach: {e}"));
    }
    knock::listener_done();
    std::ptr::null_mut()
}

/// Listens on the socket for the client that knocked and for any that come while one is
/// connected (`bootprof list --pid` during an attach), each served by a thread of its own once
/// its credentials are checked; ends when the last one has gone (or when none came within
/// [`CONNECT_WAIT_MS`]).
fn serve() -> Result<(), String> {
    // SAFETY: no preconditions.
    let (euid, pid) = unsafe { (libc::geteuid(), libc::getpid() as u32) };
    let dir = PathBuf::from(proto::user_dir(euid));
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != euid || meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{} is not a directory private to user {euid}: attach refused",
            dir.display()
        ));
    }
    let _ = std::fs::remove_file(dir.join(proto::knock_file(pid)));
    let path = dir.join(proto::socket_file(pid));
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    let active = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut threads = Vec::new();
    let mut served = false;
    let mut idle_since = std::time::Instant::now();
    loop {
        if let Some(stream) = accept_within(&listener, 100) {
            served |= admit(stream, euid, pid, &active, &mut threads);
        }
        if active.load(std::sync::atomic::Ordering::Acquire) > 0 {
            idle_since = std::time::Instant::now();
            continue;
        }
        let patience = if served { 0 } else { CONNECT_WAIT_MS as u128 };
        if idle_since.elapsed().as_millis() >= patience {
            break;
        }
    }
    let _ = std::fs::remove_file(&path);
    // Whoever connected before the name was gone is served all the same.
    while let Some(stream) = accept_within(&listener, 0) {
        admit(stream, euid, pid, &active, &mut threads);
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// Serves `stream` on a thread of its own if its peer is the process's user or root (true),
/// else tells it why not.
fn admit(
    mut stream: UnixStream,
    euid: u32,
    pid: u32,
    active: &std::sync::Arc<std::sync::atomic::AtomicUsize>,
    threads: &mut Vec<std::thread::JoinHandle<()>>,
) -> bool {
    match peer_uid(&stream) {
        Some(uid) if uid == euid || uid == 0 => {}
        uid => {
            let who = uid.map_or("an unknown user".into(), |u| format!("user {u}"));
            let _ = writeln!(
                stream,
                "error permission denied: process {pid} belongs to user {euid}, not to {who}"
            );
            return false;
        }
    }
    let ours = active.clone();
    active.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    let spawned = std::thread::Builder::new()
        .name("bootprof-attach".into())
        .spawn(move || {
            Session::default().talk(stream);
            ours.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        });
    match spawned {
        Ok(t) => threads.push(t),
        Err(e) => {
            active.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            note(&format!("attach: cannot start a thread: {e}"));
        }
    }
    true
}

/// A client that connects within `ms` milliseconds, if one does.
fn accept_within(listener: &UnixListener, ms: i32) -> Option<UnixStream> {
    let mut fds = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own.
    if unsafe { libc::poll(&mut fds, 1, ms) } != 1 {
        return None;
    }
    match listener.accept() {
        Ok((stream, _)) => Some(stream),
        Err(e) => {
            note(&format!("attach: accepting a connection: {e}"));
            None
        }
    }
}

/// The user id of the process at the other end of `stream`.
fn peer_uid(stream: &UnixStream) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED fills the ucred we own, of the length given.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
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
}

impl Session {
    /// Answers the client's requests until it detaches or goes away; then detaches.
    fn talk(mut self, stream: UnixStream) {
        let Ok(mut out) = stream.try_clone() else {
            return;
        };
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else {
                break;
            };
            let (verb, rest) = line.split_once(' ').unwrap_or((&line, ""));
            if verb == "detach" {
                let answer = self.detach();
                let _ = out.write_all(answer.as_bytes());
                return;
            }
            let answer = self.answer(verb, rest);
            if out.write_all(answer.as_bytes()).is_err() {
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
        if self.recording {
            return Err("this attach records already".into());
        }
        recorder::start_attached(std::ffi::OsStr::new(dir), keep, capacity.max(1))?;
        self.recording = true;
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
        let changed =
            registry::enable_disabled(&patterns, &self.notrace, mode).map_err(|e| e.to_string())?;
        let n = changed.len();
        self.enabled.extend(changed);
        Ok(format!("ok {n}\n"))
    }

    /// Stops recording, disables every site this attach enabled and checks that each holds its
    /// NOP again: `ok RESTORED NOT_RESTORED`.
    fn detach(&mut self) -> String {
        // The lane first: once a client sees the sites disabled, the session is whole.
        if self.recording {
            recorder::stop_attached();
            self.recording = false;
        }
        let restored = registry::restore(&self.enabled);
        let registered = site::lock().sites.clone();
        let not_restored = self
            .enabled
            .iter()
            .filter(|s| registered.iter().any(|r| std::ptr::eq(*r, **s)))
            .filter(|s| s.state() == site::DISABLED && !registry::holds_nop(s))
            .count();
        let enabled = std::mem::take(&mut self.enabled);
        match restored {
            Ok(n) => format!("ok {n} {not_restored}\n"),
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
        site::lock().sites.len()
    )
}

/// Every registered site as a [`SiteLine`], then `ok COUNT`.
fn list() -> String {
    let sites = site::lock().sites.clone();
    let mut out = String::new();
    for s in &sites {
        let line = SiteLine {
            id: s.id,
            address: s.addr,
            state: match s.mode() {
                Some(Mode::Trap) => "trap",
                Some(Mode::Call) => "call",
                None => "disabled",
            }
            .into(),
            holds_nop: registry::holds_nop(s),
            hits: s.hits.load(std::sync::atomic::Ordering::Relaxed),
            kind: s.kind.name().into(),
            provider: s.provider.into(),
            name: s.name.into(),
            function: s.function.into(),
            demangled: s.demangled.into(),
            func_offset: s.func_offset,
        };
        out.push_str(&line.encode());
        out.push('\n');
    }
    out.push_str(&format!("ok {}\n", sites.len()));
    out
}
