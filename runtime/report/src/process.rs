//! A process of a session as the reports see it: takes what its lane says; hands on its pid,
//! parent, executable, span, how it ended and what it lost.

use bootprof_format::lane::{Keep, CHUNK_SIZE};

/// One process of a session (one lane: an `exec` starts a new one with the same pid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// The lane's file name.
    pub lane: String,
    /// The executable's path.
    pub exe: String,
    /// The command line.
    pub args: Vec<String>,
    /// TSC when its lane was made (its start, as far as the trace goes).
    pub start_tsc: u64,
    /// `CLOCK_REALTIME` nanoseconds when its lane was made (at `start_tsc`), if its lane says.
    pub start_realtime_ns: Option<u64>,
    /// TSC at its end, if known; else that of its last record.
    pub end_tsc: Option<u64>,
    /// How it ended.
    pub ending: Ending,
    /// What its lane kept.
    pub keep: Keep,
    /// Records read.
    pub records: u64,
    /// Records it dropped (buffer full, or the file system full).
    pub dropped: u64,
    /// Records being written when it stopped (their commit byte missing), ignored.
    pub torn: u64,
    /// Records older than its ring kept (keep-last), overwritten.
    pub overwritten: u64,
    /// Chunks or slots that make no sense (damage), ignored.
    pub damaged: u64,
    /// Bytes of chunks it claimed that its lane file does not hold (the file was cut short).
    pub cut_bytes: u64,
    /// The intervals it measured and the windows it kept (`bootprof run --latency`).
    pub latency: Option<crate::intervals::Latency>,
    /// The hit counts it wrote, if it counted hits (`bootprof run --count`).
    pub counts: Counts,
    /// The call filter it recorded with (`bootprof run --depth --min-time`), if any.
    pub filter: crate::filter::Filter,
    /// Calls the filter left out.
    pub filtered: u64,
    /// Why the names of a site table it registered could not be read, for each such table (its
    /// sites' records are left out).
    pub unread_tables: Vec<String>,
}

/// What a process's lane says of its hit counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counts {
    /// It did not count hits (it recorded them, or nothing).
    Off,
    /// It counted, but wrote no counts: it ended without running its exit handlers (SIGKILL,
    /// `_exit`, `exec`, a signal the runtime does not catch), or it still runs; or, when it wrote
    /// how it ended (`wrote_end`), its lane had no room left for them.
    NotWritten {
        /// It wrote its own end into its lane.
        wrote_end: bool,
    },
    /// The counts it wrote last.
    Written {
        /// (site, hits): the site's index in the trace's sites.
        hits: Vec<(u32, u64)>,
        /// They were written at its end (at exit, or by the handler of the signal that ended it);
        /// else at a `bootprof_dump()` before an end that wrote none.
        at_end: bool,
    },
}

impl Counts {
    /// Why there are no counts, given how the process ended; `None` when there are (or it did not
    /// count).
    pub fn missing(&self, ending: Ending) -> Option<String> {
        match (self, ending) {
            (Counts::NotWritten { wrote_end: true }, _) => {
                Some(format!("no room left in its lane for them ({ending})"))
            }
            (Counts::NotWritten { .. }, Ending::Exit(code)) => {
                Some(format!("exit {code} without running exit handlers (_exit)"))
            }
            (Counts::NotWritten { .. }, _) => Some(ending.to_string()),
            _ => None,
        }
    }
}

impl Process {
    /// The executable's file name (`?` when the lane does not say).
    pub fn name(&self) -> &str {
        exe_name(&self.exe)
    }

    /// `name-pid`, as the reports label a process: the executable's file name and the pid.
    pub fn label(&self) -> String {
        format!("{}-{}", self.name(), self.pid)
    }

    /// What the process lost, in one line, if anything.
    pub fn losses(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.dropped > 0 {
            parts.push(format!(
                "{} records dropped ({})",
                self.dropped,
                why_dropped(self.keep)
            ));
        }
        if self.overwritten > 0 {
            parts.push(format!(
                "{} older records overwritten (keep last)",
                self.overwritten
            ));
        }
        if self.torn > 0 {
            parts.push(format!(
                "{} records were being written when it stopped",
                self.torn
            ));
        }
        if self.damaged > 0 {
            parts.push(format!("{} damaged chunks or slots", self.damaged));
        }
        for why in &self.unread_tables {
            parts.push(format!("the names of a site table are missing ({why})"));
        }
        if self.cut_bytes > 0 {
            parts.push(format!(
                "its lane file was cut short: the last {} bytes ({} chunks) of what it recorded \
                 are missing",
                self.cut_bytes,
                self.cut_bytes.div_ceil(CHUNK_SIZE as u64)
            ));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// What a report says of the process besides its ending: its losses; when it measured
    /// intervals, that only the kept windows' records are there; when it recorded with a call
    /// filter, how many calls that left out.
    pub fn notes(&self) -> Option<String> {
        let kept = self.latency.as_ref().map(|l| {
            format!(
                "only the records of the {} kept windows of {} intervals measured (the longest; \
                 see --format latency)",
                l.windows.len(),
                l.count
            )
        });
        let filtered = self.filter.is_some().then(|| {
            format!(
                "{} calls left out by its filter ({})",
                self.filtered,
                self.filter.options()
            )
        });
        let parts: Vec<String> = (self.losses().into_iter())
            .chain(kept)
            .chain(filtered)
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this status.
    Exit(u32),
    /// This signal ended it.
    Signal(u32),
    /// It `exec`ed another program that carries the runtime (the next lane of its pid).
    Exec,
    /// It still runs.
    Running,
    /// `bootprof attach` detached from it: recording ended there, the process ran on.
    Detached,
    /// It is gone without a word: its exit handlers did not run and no fatal signal it could
    /// catch ended it (`_exit`, SIGKILL, the OOM killer, or `exec` of a program without the
    /// runtime).
    Vanished,
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::Exit(code) => write!(f, "exit {code}"),
            Ending::Signal(sig) => write!(f, "killed by {}", signal_name(*sig)),
            Ending::Exec => f.write_str("exec"),
            Ending::Running => f.write_str("still running"),
            Ending::Detached => f.write_str("detached"),
            Ending::Vanished => f.write_str("ended without exit handlers (_exit, SIGKILL or exec)"),
        }
    }
}

impl Ending {
    /// Whether it ended abnormally (a signal, or vanished): the reports mark where.
    pub fn crashed(self) -> bool {
        matches!(self, Ending::Signal(_) | Ending::Vanished)
    }
}

/// The usual name of `signal`.
pub fn signal_name(signal: u32) -> String {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

/// Why a lane that keeps `keep` drops records: keep-start when its buffer is full; every mode
/// when the lane cannot grow.
pub fn why_dropped(keep: Keep) -> &'static str {
    match keep {
        Keep::Start => "buffer full, or no room to grow the lane",
        Keep::Last | Keep::All => "no room to grow the lane",
    }
}

/// The file name of the executable at path `exe` (`?` when there is none).
pub fn exe_name(exe: &str) -> &str {
    exe.rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("?")
}
