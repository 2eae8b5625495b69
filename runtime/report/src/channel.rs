//! The client's end of attaching (`bootprof attach`, `bootprof list --pid`): takes a process id;
//! hands on a [`Channel`] to the runtime inside that process, after the knock (the contract is
//! `bootprof_format::attach`): the user's private directory, the knock file in it, the attach
//! signal sent until the runtime's listener answers on its socket. Everything that can be told
//! before knocking is told first, each with its own error: no such process, another user's,
//! secure-execution mode, attaching turned off.

use bootprof_format::attach as proto;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long to knock before giving up.
const KNOCK_FOR: Duration = Duration::from_secs(5);
/// Between knocks.
const KNOCK_EVERY: Duration = Duration::from_millis(20);
/// How long a request may wait for its answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// The runtime library a client offers a process whose lean runtime has not loaded one yet
/// (`bootprof_format::attach`): the `bootprof` command's own.
#[derive(Clone, Debug)]
pub struct OfferedLibrary {
    /// Its file name in the user's private directory (`libbootprof.ID.so`).
    pub file_name: String,
    /// Its contents.
    pub bytes: &'static [u8],
}

/// What `/proc/PID` says of the process before knocking.
pub struct Target {
    /// Its pid, as we see it.
    pub pid: u32,
    /// Its pid in its own pid namespace (what its knock file and socket are named after).
    pub own_pid: u32,
    /// Its effective user and group.
    pub uid: u32,
    gid: u32,
    /// The attach signal it listens for.
    pub signal: i32,
    /// Its user's private directory, through its root (a container's `/tmp` too).
    pub dir: PathBuf,
}

impl Target {
    /// Reads what `/proc/PID` says; an error for a process that cannot be attached to.
    pub fn of(pid: u32, signal: Option<&str>) -> Result<Target, String> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_err(|_| format!("no process {pid}"))?;
        if status.lines().any(|l| l.starts_with("State:\tZ")) {
            return Err(format!("process {pid} has ended"));
        }
        let ids = |key: &str| -> Vec<u32> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| {
                    v.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        let (uids, gids, nspids) = (ids("Uid:"), ids("Gid:"), ids("NSpid:"));
        let (Some(&uid), Some(&gid)) = (uids.get(1), gids.get(1)) else {
            return Err(format!("/proc/{pid}/status: no Uid or Gid line"));
        };
        // SAFETY: no preconditions.
        let me = unsafe { libc::geteuid() };
        if me != 0 && me != uid {
            return Err(format!(
                "process {pid} belongs to user {uid}: only that user (or root) may attach to it"
            ));
        }
        if uids.first() != Some(&uid) || gids.first() != Some(&gid) {
            return Err(format!(
                "process {pid} runs in secure-execution mode (set-user-ID or set-group-ID): it \
                 refuses attach"
            ));
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let var = |name: &str| {
            environ.split(|&b| b == 0).find_map(|kv| {
                let kv = std::str::from_utf8(kv).ok()?;
                kv.strip_prefix(name)?.strip_prefix('=').map(str::to_string)
            })
        };
        if var(proto::ENV_ATTACH).as_deref() == Some("0") {
            return Err(format!(
                "process {pid} has attaching turned off ({}=0 in its environment)",
                proto::ENV_ATTACH
            ));
        }
        let signal = match signal
            .map(str::to_string)
            .or_else(|| var(proto::ENV_SIGNAL))
        {
            Some(name) if !name.is_empty() => proto::signal_number(&name).ok_or_else(|| {
                format!(
                    "{name} is not a signal attaching may use (URG, WINCH, USR1, USR2, RTMIN+N)"
                )
            })?,
            _ => proto::DEFAULT_SIGNAL,
        };
        Ok(Target {
            pid,
            own_pid: nspids.last().copied().unwrap_or(pid),
            uid,
            gid,
            signal,
            dir: PathBuf::from(format!("/proc/{pid}/root{}", proto::user_dir(uid))),
        })
    }

    /// Makes the user's private directory, or checks the one there: a directory of the
    /// process's user that no one else may enter.
    fn private_dir(&self) -> Result<(), String> {
        let show = self.dir.display();
        match std::fs::DirBuilder::new().mode(0o700).create(&self.dir) {
            Ok(()) => self.give_to_user(&self.dir)?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {show}: {e}")),
        }
        let meta = std::fs::symlink_metadata(&self.dir).map_err(|e| format!("{show}: {e}"))?;
        if !meta.is_dir() || meta.uid() != self.uid || meta.mode() & 0o077 != 0 {
            return Err(format!(
                "{show} is not a directory private to user {} (mode 0700): remove it",
                self.uid
            ));
        }
        Ok(())
    }

    /// Puts `library` in the user's private directory (once: a file of that name holds it
    /// already after an earlier attach), for the process to read.
    fn offer(&self, library: &OfferedLibrary) -> Result<(), String> {
        let path = self.dir.join(&library.file_name);
        if std::fs::read(&path).is_ok_and(|there| there == library.bytes) {
            return Ok(());
        }
        let temporary = self
            .dir
            .join(format!(".{}.{}", library.file_name, std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temporary)
            .and_then(|mut f| std::io::Write::write_all(&mut f, library.bytes))
            .map_err(|e| format!("cannot write {}: {e}", temporary.display()))
            .and_then(|()| self.give_to_user(&temporary))
            .and_then(|()| {
                std::fs::rename(&temporary, &path)
                    .map_err(|e| format!("cannot rename to {}: {e}", path.display()))
            });
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written
    }

    /// Hands what root made for the process (its directories and files) to the process's user.
    pub fn give_to_user(&self, path: &std::path::Path) -> Result<(), String> {
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } == 0 && self.uid != 0 {
            std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid))
                .map_err(|e| format!("cannot give {} to user {}: {e}", path.display(), self.uid))?;
        }
        Ok(())
    }

    /// Sends the attach signal to the process (`thread` 0) or to one of its threads.
    fn signal(&self, thread: u32) -> Result<(), String> {
        // SAFETY: plain system calls.
        let r = unsafe {
            if thread == 0 {
                libc::kill(self.pid as libc::pid_t, self.signal)
            } else {
                libc::syscall(
                    libc::SYS_tgkill,
                    self.pid as libc::c_long,
                    thread as libc::c_long,
                    self.signal as libc::c_long,
                ) as libc::c_int
            }
        };
        if r == 0 {
            return Ok(());
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ESRCH) if thread != 0 => Ok(()),
            Some(libc::ESRCH) => Err(format!("process {} is gone", self.pid)),
            Some(libc::EPERM) => Err(format!(
                "cannot signal process {}: permission denied (it belongs to another user)",
                self.pid
            )),
            _ => Err(format!(
                "cannot signal process {}: {}",
                self.pid,
                std::io::Error::last_os_error()
            )),
        }
    }

    /// The process's threads, by id.
    fn threads(&self) -> Vec<u32> {
        std::fs::read_dir(format!("/proc/{}/task", self.pid))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect()
    }
}

/// A conversation with the runtime inside a process.
pub struct Channel {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    /// The process, as `/proc` described it.
    pub target: Target,
    /// Sites registered in the process.
    pub sites: usize,
}

impl Channel {
    /// Knocks on process `pid` (with the attach signal `signal`, else the one its environment
    /// names) and connects to its listener; offers it `library`, for a lean runtime that has
    /// not loaded one (its file name in the knock file).
    pub fn open(
        pid: u32,
        signal: Option<&str>,
        library: Option<&OfferedLibrary>,
    ) -> Result<Channel, String> {
        let target = Target::of(pid, signal)?;
        target.private_dir()?;
        let knock = target.dir.join(proto::knock_file(target.own_pid));
        let socket = target.dir.join(proto::socket_file(target.own_pid));
        let named = match library {
            Some(library) => {
                target.offer(library)?;
                library.file_name.as_bytes()
            }
            None => b"",
        };
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&knock)
            .and_then(|mut f| std::io::Write::write_all(&mut f, named))
            .map_err(|e| format!("cannot create the knock file {}: {e}", knock.display()))?;
        let connected = target
            .give_to_user(&knock)
            .and_then(|()| knock_until_answered(&target, &socket));
        let _ = std::fs::remove_file(&knock);
        let stream = connected?;
        stream
            .set_read_timeout(Some(ANSWER_WITHIN))
            .map_err(|e| e.to_string())?;
        let reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
        let mut channel = Channel {
            stream,
            reader,
            target,
            sites: 0,
        };
        let (_, ok) = channel.request(&format!("hello {}", proto::PROTOCOL_VERSION))?;
        let mut words = ok.split_whitespace();
        if words.next() != Some(&proto::PROTOCOL_VERSION.to_string()) {
            return Err(format!(
                "process {pid} speaks another version of the attach protocol ({ok})"
            ));
        }
        channel.sites = words.nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
        Ok(channel)
    }

    /// Sends `request`; returns the data lines of the answer and the rest of its `ok` line, or
    /// the `error` line's message.
    pub fn request(&mut self, request: &str) -> Result<(Vec<String>, String), String> {
        self.send(request)?;
        let mut data = Vec::new();
        loop {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) => {
                    return Err(format!(
                        "process {} ended the conversation (it exited?)",
                        self.target.pid
                    ))
                }
                Ok(_) => {}
                Err(e) => return Err(format!("reading from process {}: {e}", self.target.pid)),
            }
            let line = line.trim_end_matches('\n');
            if let Some(rest) = line.strip_prefix("ok") {
                return Ok((data, rest.trim_start().to_string()));
            }
            if let Some(message) = line.strip_prefix("error ") {
                return Err(format!("process {}: {message}", self.target.pid));
            }
            data.push(line.to_string());
        }
    }

    fn send(&mut self, request: &str) -> Result<(), String> {
        let line = format!("{request}\n");
        let mut sent = 0;
        while sent < line.len() {
            // SAFETY: sends bytes of our buffer; MSG_NOSIGNAL: a closed peer is an error here,
            // not a SIGPIPE that ends bootprof.
            let n = unsafe {
                libc::send(
                    self.stream.as_raw_fd(),
                    line[sent..].as_ptr().cast(),
                    line.len() - sent,
                    libc::MSG_NOSIGNAL,
                )
            };
            if n <= 0 {
                return Err(format!(
                    "process {} closed the conversation (it exited?)",
                    self.target.pid
                ));
            }
            sent += n as usize;
        }
        Ok(())
    }

    /// Whether the process ended the conversation (it exited): the socket reads as closed.
    pub fn closed(&self) -> bool {
        let mut fds = libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own; no wait.
        let ready = unsafe { libc::poll(&mut fds, 1, 0) };
        ready == 1 && fds.revents & (libc::POLLHUP | libc::POLLIN | libc::POLLERR) != 0
    }
}

/// Sends the attach signal, to the process and then to each of its threads in turn (a knock is
/// answered only by a thread at a point where the runtime may start its listener), until the
/// listener's socket takes a connection.
fn knock_until_answered(target: &Target, socket: &std::path::Path) -> Result<UnixStream, String> {
    let start = Instant::now();
    let mut threads = Vec::new();
    let mut n = 0usize;
    while start.elapsed() < KNOCK_FOR {
        if n % 8 == 7 || threads.is_empty() {
            threads = target.threads();
        }
        let thread = if n == 0 || threads.is_empty() {
            0
        } else {
            threads[n % threads.len()]
        };
        target.signal(thread)?;
        n += 1;
        let answer_by = Instant::now() + KNOCK_EVERY;
        while Instant::now() < answer_by {
            if let Ok(stream) = UnixStream::connect(socket) {
                return Ok(stream);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    Err(format!(
        "no answer from process {} within {} s: it does not carry bootprof's runtime (linked \
         by bootprof-link), it handles SIG{} itself (start it with {}=USR2, or another), \
         another bootprof is attached to it, or its runtime library could not be loaded (its \
         standard error says why)",
        target.pid,
        KNOCK_FOR.as_secs(),
        signal_name(target.signal),
        proto::ENV_SIGNAL
    ))
}

/// The short name of an attach signal.
fn signal_name(sig: i32) -> String {
    match sig {
        10 => "USR1".into(),
        12 => "USR2".into(),
        23 => "URG".into(),
        28 => "WINCH".into(),
        n => format!("RTMIN+{}", n - 34),
    }
}
