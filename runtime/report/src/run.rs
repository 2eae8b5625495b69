//! `bootprof run`: takes a program and the probes to enable; creates a recording session (a
//! directory, see `bootprof_format::lane`), starts the program with the runtime's environment
//! (`BOOTPROF_SESSION`, `BOOTPROF_ENABLE`, `BOOTPROF_NOTRACE`, `BOOTPROF_STACKTRACE`,
//! `BOOTPROF_MODE`, `BOOTPROF_KEEP`, `BOOTPROF_BUFFER`, `BOOTPROF_POINTS`, `BOOTPROF_GRAPH`,
//! `BOOTPROF_DEPTH`, `BOOTPROF_MIN_TIME`, `BOOTPROF_COUNT`, `BOOTPROF_LATENCY`), which every process of its tree that carries the runtime inherits, waits
//! for it as the tree's subreaper (writing how each process it reaps ended into its lane), and
//! hands on its exit code and the session (with `--count`, after printing the hit counts its
//! processes wrote). Then it says what went wrong, if something did: why no process recorded
//! ([`crate::missing`]), which patterns matched no site ([`crate::unmatched`]).

use crate::Trace;
use bootprof_format::lane::{field, End, Keep, SessionHeader};
use bootprof_format::pattern;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// How enabled sites fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// int3 over each site; hits go through a SIGTRAP handler.
    Trap,
    /// The call to each site's stub is put back; faster hits.
    Call,
}

impl Mode {
    /// The value of `BOOTPROF_MODE`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Trap => "trap",
            Mode::Call => "call",
        }
    }
}

/// What a session keeps (`--keep`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeepArg {
    /// The first records (boot).
    Start,
    /// Each thread's last records (a flight recorder).
    Last,
    /// Every record.
    All,
}

impl KeepArg {
    /// The keep mode it names.
    pub fn keep(self) -> Keep {
        match self {
            KeepArg::Start => Keep::Start,
            KeepArg::Last => Keep::Last,
            KeepArg::All => Keep::All,
        }
    }
}

/// What to run and how (the arguments of `bootprof run`).
#[derive(Clone, Debug, clap::Args)]
pub struct RunOptions {
    /// Patterns of the sites to enable (provider:name, or a function for hooks; `*`
    /// wildcards at either end). Repeatable; default: the patterns of BOOTPROF_ENABLE when it
    /// is set, else every site. A pattern that matches no site of the program (nor of the other
    /// processes of its session) gets a warning naming the nearest sites; the program runs all
    /// the same.
    #[arg(short = 'e', long = "enable", value_name = "PATTERN")]
    pub enable: Vec<String>,
    /// Patterns of sites never to enable, even when an --enable pattern matches them
    /// (ftrace's set_ftrace_notrace). Repeatable; default: BOOTPROF_NOTRACE's, if set.
    #[arg(short = 'x', long = "notrace", value_name = "PATTERN")]
    pub notrace: Vec<String>,
    /// Patterns of sites whose every hit records its call stack (ftrace's stacktrace option):
    /// the site's address and the return addresses of its callers, at most 64, unwound by
    /// frame pointers (build with -fno-omit-frame-pointer). These sites are enabled too.
    /// Repeatable; default: BOOTPROF_STACKTRACE's, if set.
    #[arg(long = "stacktrace", value_name = "PATTERN")]
    pub stacktrace: Vec<String>,
    /// How enabled sites fire.
    #[arg(long, value_enum, default_value = "trap")]
    pub mode: Mode,
    /// Record function exits of `-pg`/`-mfentry` code: each recorded hit of an `__fentry__` or
    /// `mcount` hook swaps the function's return address for a trampoline that records its EXIT
    /// (as uftrace does), so the reports show real durations instead of estimates.
    #[arg(long, conflicts_with = "count")]
    pub graph: bool,
    /// Record only the outermost N levels of calls of each thread (calls whose exits are
    /// recorded: with --graph, -finstrument-functions, annotated regions); the calls left out
    /// are counted, and the report says so.
    #[arg(long, value_name = "N", conflicts_with = "count",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub depth: Option<u32>,
    /// Record only the calls that took at least this long (e.g. 1ms, 250us): a call's ENTER is
    /// held back until its EXIT says how long it took; a call shorter than that is left out,
    /// even inside a call that is kept. Same calls as --depth.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "count")]
    pub min_time: Option<u64>,
    /// The session directory to create (it must not exist); default `bootprof.<pid>.session`.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Which records to keep when there are more than the buffer holds: the first ones (start),
    /// each thread's last ones (last, a flight recorder), or all of them (all, as long as the
    /// file system has room).
    #[arg(long, value_enum, default_value = "start")]
    pub keep: KeepArg,
    /// Capacity of the event log, in records (per thread with --keep last).
    #[arg(long, value_name = "RECORDS")]
    pub buffer: Option<usize>,
    /// Print the profile-point table to stderr when the program exits.
    #[arg(long)]
    pub points: bool,
    /// Measure the intervals from FROM to TO on each thread (each a comma-separated list of
    /// patterns; one pattern alone: its ENTER..EXIT) and keep the records around the longest
    /// one (every thread's, from a flight recorder of --buffer records per thread) plus a
    /// histogram of all of them: `bootprof report --format latency`.
    #[arg(long, value_name = "FROM..TO")]
    pub latency: Option<String>,
    /// With --latency: keep every interval at least this long (e.g. 5ms, 250us, 1s), each in
    /// its own window, up to --latency-windows of them (the longest), like a slow-request log.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "latency")]
    pub latency_min: Option<u64>,
    /// With --latency: how many windows to keep, the longest intervals' (1 to 10,000; default 1,
    /// or 100 with --latency-min).
    #[arg(long, value_name = "N", requires = "latency",
          value_parser = clap::value_parser!(u64).range(1..=bootprof_format::latency::MAX_WINDOWS))]
    pub latency_windows: Option<u64>,
    /// Count hits instead of recording them: no trace, exact counts however many threads hit a
    /// site, and a table of hits per site (summed over the processes, and per process) on stderr
    /// when the program ends; `bootprof report --format counts` prints it again.
    #[arg(long, conflicts_with_all = ["keep", "buffer", "points", "latency"])]
    pub count: bool,
    /// Print the records as they arrive (at most about 20 ms after they are written), in the
    /// text report's format with the process id of each line (as `--options record-tgid`
    /// shows it), while the program runs; records the reader could not keep up with are
    /// counted and shown (`LOST N RECORDS`).
    #[arg(long, conflicts_with = "count")]
    pub live: bool,
    /// Leave the growing of each lane to its own process. By default `bootprof run` makes the
    /// pages of every lane that grows ahead of its process, from its own (at most 8 MiB
    /// ahead), which takes most of what a new page costs off the traced threads; what was made
    /// and not used is cut off again when the process ends.
    #[arg(long)]
    pub no_grow_ahead: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
    /// The runtime library the lean runtime of the programs loads (`BOOTPROF_LIBRARY`), unless
    /// the environment names one already: the `bootprof` command's own, so that a program whose
    /// link-time library is gone (a cleared cache, another machine) is recorded all the same.
    #[arg(skip)]
    pub library: Option<PathBuf>,
}

/// Runs the program in a new session and waits for it; returns its exit code (a shell's: 128 +
/// signal when killed). A session without any process in it is reported on stderr.
pub fn run(mut options: RunOptions) -> Result<i32, String> {
    let [enable_from, notrace_from, stacktrace_from] = inherit_selection(&mut options);
    let latency_given = latency_given(options.latency.as_deref())?;
    let keep = match (&options.latency, options.keep) {
        (None, keep) => keep,
        (Some(_), KeepArg::Start | KeepArg::Last) => KeepArg::Last,
        (Some(_), KeepArg::All) => {
            return Err(
                "--latency keeps each thread's last records (a flight recorder); it \
                        cannot be used with --keep all"
                    .into(),
            )
        }
    };
    let patterns = if options.enable.is_empty() {
        "*".to_string()
    } else {
        options
            .enable
            .iter()
            .chain(&latency_given)
            .cloned()
            .collect::<Vec<_>>()
            .join(",")
    };
    let dir = options
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("bootprof.{}.session", std::process::id())));
    let mut session = Session::create(&dir, keep.keep())?;
    let mut cmd = std::process::Command::new(&options.command[0]);
    cmd.args(&options.command[1..])
        .env("BOOTPROF_SESSION", &session.dir)
        .env("BOOTPROF_ENABLE", patterns)
        .env("BOOTPROF_MODE", options.mode.name())
        .env("BOOTPROF_KEEP", keep.keep().name())
        // One process's trace file is not what a session is: every process writes its lane.
        .env_remove("BOOTPROF_OUTPUT")
        .env_remove("BOOTPROF_RECORD");
    optional_environment(&mut cmd, &options);
    let RunOptions {
        enable,
        notrace,
        stacktrace,
        latency,
        count,
        command,
        live: options_live,
        no_grow_ahead,
        ..
    } = options;
    // Orphaned descendants come to us, so their ends are known too.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let root = crate::signals::spawn(&cmd).map_err(|e| {
        // Nothing ran: no session either.
        session.discard();
        format!("cannot run {}: {e}", command[0].to_string_lossy())
    })?;
    session.started(root);
    let mut live = options_live.then(|| crate::live::Live::new(session.dir.clone(), true));
    let status = session.wait_for(root, live.as_mut(), !no_grow_ahead && !count);
    if let Some(live) = live.as_mut() {
        live.poll();
        live.finish();
    }
    session.finish(status);
    let lanes = session.lanes();
    let given = [
        (enable_from, &enable),
        (notrace_from, &notrace),
        (stacktrace_from, &stacktrace),
        ("--latency", &latency_given),
    ];
    // The session, read once for all that is said of it below (and only if something is).
    let wanted = count || latency.is_some() || given.iter().any(|(_, texts)| !texts.is_empty());
    let read = (lanes > 0 && wanted).then(|| {
        crate::session::read_session(&dir).map(|mut trace| {
            trace.demangle_names();
            trace
        })
    });
    let trace = read.as_ref().and_then(|r| r.as_ref().ok());
    if lanes == 0 {
        eprintln!(
            "bootprof: no process recorded into the session {}: {}",
            dir.display(),
            crate::missing::why_no_lane(&command[0], &status.to_string(), &dir)
        );
    } else if count {
        print_counts(&dir, lanes, read.as_ref());
    } else {
        eprintln!(
            "bootprof: session {} ({lanes} process{} recorded); read it with `bootprof report {}`",
            dir.display(),
            if lanes == 1 { "" } else { "es" },
            dir.display()
        );
    }
    for line in crate::session::dropped_records(&dir) {
        eprintln!("bootprof: warning: {line}");
    }
    for line in crate::unmatched::unmatched_patterns(&given, trace, &command[0]) {
        eprintln!("bootprof: {line}");
    }
    if let (true, Some(trace)) = (latency.is_some(), trace) {
        for line in latency_lines(&dir, trace) {
            eprintln!("bootprof: {line}");
        }
    }
    Ok(match status {
        Status::Exit(code) => code,
        Status::Signal(sig) => 128 + sig,
    })
}

/// Fills each of `options`' selection lists (-e, -x, --stacktrace) that was not given from the
/// runtime's own variable (`BOOTPROF_ENABLE`, `BOOTPROF_NOTRACE`, `BOOTPROF_STACKTRACE`) when
/// bootprof inherited it, as the program would without bootprof; returns where each list came
/// from, for the warnings.
fn inherit_selection(options: &mut RunOptions) -> [&'static str; 3] {
    let lists = [
        (&mut options.enable, "-e", "BOOTPROF_ENABLE"),
        (&mut options.notrace, "-x", "BOOTPROF_NOTRACE"),
        (
            &mut options.stacktrace,
            "--stacktrace",
            "BOOTPROF_STACKTRACE",
        ),
    ];
    lists.map(|(list, option, variable)| {
        let inherited = std::env::var(variable).ok();
        match inherited.filter(|v| list.is_empty() && !v.trim().is_empty()) {
            Some(v) => {
                list.push(v);
                variable
            }
            None => option,
        }
    })
}

/// The runtime's environment for what `options` asks beyond the sites and the mode: each
/// variable set, or removed so that an inherited one does not change the run; and the runtime
/// library `bootprof` carries (`BOOTPROF_LIBRARY`), unless the environment names one.
fn optional_environment(cmd: &mut std::process::Command, options: &RunOptions) {
    let set = |cmd: &mut std::process::Command, name: &str, value: Option<String>| {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    };
    let list = |l: &[String]| (!l.is_empty()).then(|| l.join(","));
    if let Some(library) = options
        .library
        .as_ref()
        .filter(|_| std::env::var_os("BOOTPROF_LIBRARY").is_none_or(|v| v.is_empty()))
    {
        cmd.env("BOOTPROF_LIBRARY", library);
    }
    set(cmd, "BOOTPROF_NOTRACE", list(&options.notrace));
    set(cmd, "BOOTPROF_STACKTRACE", list(&options.stacktrace));
    set(
        cmd,
        "BOOTPROF_BUFFER",
        options.buffer.map(|b| b.to_string()),
    );
    set(cmd, "BOOTPROF_POINTS", options.points.then(|| "1".into()));
    set(cmd, "BOOTPROF_GRAPH", options.graph.then(|| "1".into()));
    set(cmd, "BOOTPROF_DEPTH", options.depth.map(|d| d.to_string()));
    set(
        cmd,
        "BOOTPROF_MIN_TIME",
        options.min_time.map(|ns| ns.to_string()),
    );
    let latency = options.latency.is_some();
    let windows = options
        .latency_windows
        .unwrap_or(if options.latency_min.is_some() {
            100
        } else {
            1
        });
    set(cmd, "BOOTPROF_LATENCY", options.latency.clone());
    set(
        cmd,
        "BOOTPROF_LATENCY_WINDOWS",
        latency.then(|| windows.to_string()),
    );
    set(
        cmd,
        "BOOTPROF_LATENCY_MIN",
        options.latency_min.map(|ns| ns.to_string()),
    );
    // An inherited BOOTPROF_COUNT=1 would record nothing.
    set(cmd, "BOOTPROF_COUNT", options.count.then(|| "1".into()));
}

/// The patterns of `--latency FROM..TO` (FROM, and TO if it differs): their sites are enabled
/// too, and checked for matching none.
fn latency_given(spec: Option<&str>) -> Result<Vec<String>, String> {
    let Some(spec) = spec else {
        return Ok(Vec::new());
    };
    let (from, to) = latency_patterns(spec)?;
    Ok(if from == to {
        vec![from]
    } else {
        vec![from, to]
    })
}

/// The FROM and TO pattern lists of `--latency FROM..TO` (one list alone is both), checked.
fn latency_patterns(spec: &str) -> Result<(String, String), String> {
    let (from, to) = spec.split_once("..").unwrap_or((spec, spec));
    for list in [from, to] {
        if list.is_empty() {
            return Err(format!(
                "--latency {spec}: FROM..TO needs patterns on both sides of `..`"
            ));
        }
        pattern::parse_list(list).map_err(|e| format!("--latency {spec}: {e}"))?;
    }
    if from.len() > 255 || to.len() > 255 {
        return Err(format!(
            "--latency {spec}: each side may be at most 255 bytes long"
        ));
    }
    Ok((from.to_string(), to.to_string()))
}

/// A duration such as `5ms`, `250us`, `1.5s` or `800ns`, in nanoseconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => {
            return Err(format!(
                "`{text}` is not a duration: a number and ns, us, ms or s (e.g. 5ms)"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration: a number and ns, us, ms or s"))?;
    let ns = value * scale;
    if !(1.0..1e18).contains(&ns) {
        return Err(format!("`{text}` is not a duration from 1ns to 1e9 s"));
    }
    Ok(ns.round() as u64)
}

/// One line per process that measured intervals: how many, and the longest.
fn latency_lines(dir: &Path, trace: &Trace) -> Vec<String> {
    let hz = trace.header.tsc_hz.max(1) as f64;
    let mut lines: Vec<String> = trace
        .processes
        .iter()
        .filter_map(|p| {
            let l = p.latency.as_ref()?;
            Some(if l.count == 0 {
                format!(
                    "{}: no interval from {} to {} was closed",
                    p.label(),
                    l.from,
                    l.to
                )
            } else {
                format!(
                    "{}: {} intervals, the longest {}, {} kept",
                    p.label(),
                    l.count,
                    crate::intervals::duration(l.max as f64 * 1e9 / hz),
                    match l.windows.len() {
                        1 => "its window".to_string(),
                        n => format!("{n} windows"),
                    }
                )
            })
        })
        .collect();
    lines.push(format!(
        "histogram and windows: `bootprof report --format latency {}`",
        dir.display()
    ));
    lines
}

/// Prints the hit counts the `lanes` processes of the session `dir` wrote, to stderr (the
/// program's stdout stays its own).
fn print_counts(dir: &Path, lanes: usize, read: Option<&crate::Result<Trace>>) {
    match read {
        Some(Ok(trace)) => eprint!(
            "bootprof: hit counts of {lanes} process{} (again: `bootprof report --format counts \
             {}`):\n{}",
            if lanes == 1 { "" } else { "es" },
            dir.display(),
            crate::counts::text(trace)
        ),
        Some(Err(e)) => eprintln!("bootprof: cannot read the counts: {e}"),
        None => {}
    }
}

/// How a process ended, as `waitpid` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Exit(i32),
    Signal(i32),
}

impl std::fmt::Display for Status {
    /// `exit status 3`, `killed by SIGKILL`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Status::Exit(c) => write!(f, "exit status {c}"),
            Status::Signal(s) => write!(f, "killed by {}", crate::process::signal_name(s as u32)),
        }
    }
}

impl Status {
    fn of(raw: libc::c_int) -> Option<Status> {
        if libc::WIFEXITED(raw) {
            Some(Status::Exit(libc::WEXITSTATUS(raw)))
        } else if libc::WIFSIGNALED(raw) {
            Some(Status::Signal(libc::WTERMSIG(raw)))
        } else {
            None
        }
    }

    fn lane_end(self) -> (End, u32) {
        match self {
            Status::Exit(c) => (End::Exit, c as u32),
            Status::Signal(s) => (End::Signal, s as u32),
        }
    }
}

/// The session directory `bootprof run` (or `bootprof attach`) owns, and its `session` file.
pub(crate) struct Session {
    /// Absolute, so processes that change directory still find it.
    dir: PathBuf,
    file: std::fs::File,
    header: SessionHeader,
}

impl Session {
    /// Creates `dir` (never one that exists, readable by its user only) and its session file.
    pub(crate) fn create(dir: &Path, keep: Keep) -> Result<Session, String> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => format!(
                    "{}: already exists; a session goes into a new directory (remove it, or \
                     choose another with -o)",
                    dir.display()
                ),
                _ => format!("cannot create the session directory {}: {e}", dir.display()),
            })?;
        let dir = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.join("session"))
            .map_err(|e| format!("{}: {e}", dir.join("session").display()))?;
        let header = SessionHeader {
            boot_id: boot_id(),
            start: crate::session::clocks_now(),
            keep: keep as u32,
            ..SessionHeader::default()
        };
        let mut s = Session { dir, file, header };
        s.write();
        Ok(s)
    }

    /// Removes the session directory and its session file, all there is before the program
    /// runs.
    pub(crate) fn discard(&self) {
        let _ = std::fs::remove_file(self.dir.join("session"));
        let _ = std::fs::remove_dir(&self.dir);
    }

    fn write(&mut self) {
        use std::os::unix::fs::FileExt;
        // A session file that cannot be written costs the report its exact TSC rate only.
        let _ = self.file.write_all_at(&self.header.encode(), 0);
    }

    pub(crate) fn started(&mut self, root: u32) {
        self.header.root_pid = root;
        self.write();
    }

    /// Reaps every process that ends until `root` does (orphans come here too), writing each
    /// one's end into its lane; then the orphans that have ended already. With `live`, prints
    /// the records as they arrive meanwhile; with `grow_ahead`, grows the lanes ahead of their
    /// processes meanwhile ([`crate::grow`]).
    fn wait_for(
        &mut self,
        root: u32,
        live: Option<&mut crate::live::Live>,
        grow_ahead: bool,
    ) -> Status {
        let grower = grow_ahead.then(|| crate::grow::Grower::start(self.dir.clone()));
        let status = self.reap_until(root, live);
        if let Some(g) = grower {
            g.finish();
        }
        status
    }

    /// [`Session::wait_for`]'s reaping.
    fn reap_until(&mut self, root: u32, mut live: Option<&mut crate::live::Live>) -> Status {
        let mut root_status = None;
        loop {
            let mut raw = 0;
            let flags = if root_status.is_some() || live.is_some() {
                libc::WNOHANG
            } else {
                0
            };
            // SAFETY: waitpid writes the status we own.
            let pid = unsafe { libc::waitpid(-1, &mut raw, flags) };
            if pid == 0 && root_status.is_none() {
                if let Some(live) = live.as_deref_mut() {
                    live.poll();
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    continue;
                }
            }
            if pid <= 0 {
                if pid < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                    continue;
                }
                break;
            }
            let Some(status) = Status::of(raw) else {
                continue;
            };
            self.reaped(pid as u32, status);
            if pid as u32 == root {
                root_status = Some(status);
            }
        }
        root_status.unwrap_or(Status::Exit(0))
    }

    /// Writes how `pid` ended into its newest lane (an `exec` leaves older lanes of one pid).
    fn reaped(&self, pid: u32, status: Status) {
        use std::os::unix::fs::{FileExt, OpenOptionsExt};
        let prefix = format!("{pid}.");
        let newest = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let n: u32 = name
                    .strip_prefix(&prefix)?
                    .strip_suffix(".lane")?
                    .parse()
                    .ok()?;
                Some((n, e.path()))
            })
            .max();
        let Some((_, path)) = newest else {
            return;
        };
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        else {
            return;
        };
        let (kind, code) = status.lane_end();
        let mut end = [0u8; 8];
        end[..4].copy_from_slice(&(kind as u32).to_le_bytes());
        end[4..].copy_from_slice(&code.to_le_bytes());
        let _ = file.write_all_at(&end, field::REAPED_KIND as u64);
        let mut tsc = [0u8; 8];
        if file.read_exact_at(&mut tsc, field::END_TSC as u64).is_ok() && tsc == [0; 8] {
            let _ = file.write_all_at(
                &crate::session::clocks_now().0.to_le_bytes(),
                field::END_TSC as u64,
            );
        }
    }

    fn finish(&mut self, root: Status) {
        self.header.end = crate::session::clocks_now();
        let (kind, code) = root.lane_end();
        self.header.root_end = (kind as u32, code);
        self.write();
    }

    /// The session's end, when `bootprof attach` detached from its process (which ran on).
    pub(crate) fn detached(&mut self) {
        self.header.end = crate::session::clocks_now();
        self.header.root_end = (End::Detached as u32, 0);
        self.write();
    }

    /// The session directory (absolute).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Lane files in the session.
    pub(crate) fn lanes(&self) -> usize {
        crate::session::lane_files(&self.dir).len()
    }
}

/// The kernel's boot id, as lanes store it.
fn boot_id() -> [u8; 16] {
    crate::session::current_boot_id().unwrap_or_default()
}
