//! `bootprof attach` and `bootprof list --pid`: take a running process linked by bootprof-link;
//! through a [`Channel`] to the runtime inside it, enable the chosen sites, record into a new
//! session directory, and detach (at the end of `--duration`, on Ctrl-C, SIGTERM or SIGHUP, or
//! when bootprof itself is killed: the runtime detaches when the connection breaks), which
//! disables exactly the sites this attach enabled and checks that each holds its NOP again.
//! With `--count` it records nothing: the runtime counts the hits of the sites it enabled,
//! exactly, and hands them on at the detach, printed as `bootprof run --count` prints its table.
//! The process runs on. `bootprof list --pid` prints the live state of every site.

use crate::channel::{Channel, OfferedLibrary};
use crate::run::{parse_duration, KeepArg, Mode, Session};
use bootprof_format::attach::SiteLine;
use bootprof_format::counts::{self, Row};
use bootprof_format::Kind;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What to attach to and how (the arguments of `bootprof attach`).
#[derive(Clone, Debug, clap::Args)]
pub struct AttachOptions {
    /// Patterns of the sites to enable (provider:name, or a function for hooks; `*` wildcards
    /// at either end). Repeatable; default: every site. Sites the program enabled itself are
    /// left as they are.
    #[arg(short = 'e', long = "enable", value_name = "PATTERN")]
    pub enable: Vec<String>,
    /// Patterns of sites never to enable, even when an --enable pattern matches them.
    #[arg(short = 'x', long = "notrace", value_name = "PATTERN")]
    pub notrace: Vec<String>,
    /// How enabled sites fire.
    #[arg(long, value_enum, default_value = "trap")]
    pub mode: Mode,
    /// Record nothing: count the hits of the sites this attach enables, exactly (however many
    /// threads hit one site at once), and print them on detaching, as a table on standard
    /// output.
    #[arg(long, conflicts_with_all = ["output", "keep", "buffer", "live"])]
    pub count: bool,
    /// The session directory to create (it must not exist); default
    /// `bootprof.<pid>.attach<N>.session`, N the first number free.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Detach after this long (seconds, or a duration such as 500ms); default: on Ctrl-C.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub duration: Option<u64>,
    /// Which records to keep when there are more than the buffer holds (as `bootprof run`).
    #[arg(long, value_enum, default_value = "start")]
    pub keep: KeepArg,
    /// Capacity of the event log, in records (per thread with --keep last).
    #[arg(long, value_name = "RECORDS", default_value_t = 262_144)]
    pub buffer: usize,
    /// Print the records as they arrive, in the text report's format, while attached.
    #[arg(long)]
    pub live: bool,
    /// The attach signal (URG, WINCH, USR1, USR2, RTMIN+N); default: the one the process's
    /// environment names in BOOTPROF_ATTACH_SIGNAL, else URG.
    #[arg(long, value_name = "SIGNAL")]
    pub signal: Option<String>,
    /// The process to attach to.
    pub pid: u32,
    /// The runtime library offered to a process whose lean runtime has not loaded one: the
    /// `bootprof` command's own.
    #[arg(skip)]
    pub library: Option<OfferedLibrary>,
}

/// A duration given as plain seconds (`2`, `0.5`) or with a unit (`500ms`).
pub fn parse_seconds(text: &str) -> Result<u64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s < 1e9 => Ok((s * 1e9).round() as u64),
        Ok(_) => Err(format!("`{text}` is not a duration from 1ns to 1e9 s")),
        Err(_) => parse_duration(text),
    }
}

/// Set by SIGINT, SIGTERM and SIGHUP: detach now.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Attaches, records (or counts) until it is time to detach, detaches; returns the exit code
/// (0, or 1 when a site could not be restored or the process ended while attached).
pub fn attach(options: AttachOptions) -> Result<i32, String> {
    let mut channel = Channel::open(
        options.pid,
        options.signal.as_deref(),
        options.library.as_ref(),
    )?;
    if options.count {
        return attach_counting(channel, &options);
    }
    let pid = options.pid;
    let dir = match &options.output {
        Some(d) => d.clone(),
        None => free_session_name(pid),
    };
    let mut session = Session::create(&dir, options.keep.keep())?;
    session.started(pid);
    catch_stop_signals();
    let prepared = channel
        .target
        .give_to_user(session.dir())
        .and_then(|()| enable(&mut channel, &options, &session));
    let enabled = match prepared {
        Ok(n) => n,
        Err(e) => {
            // The runtime detaches as the connection closes; an empty session is no use.
            drop(channel);
            if session.lanes() == 0 {
                session.discard();
            }
            return Err(e);
        }
    };
    eprintln!(
        "bootprof: attached to process {pid}: {}, recording into {}; {}",
        enabled_sites(enabled, &options),
        session.dir().display(),
        until_when(&options)
    );
    let mut live = options
        .live
        .then(|| crate::live::Live::new(session.dir().to_path_buf(), false));
    let until = options
        .duration
        .map(|ns| Instant::now() + Duration::from_nanos(ns));
    let gone = wait(&channel, until, live.as_mut());
    let result = if gone {
        Err(format!("process {pid} ended while attached"))
    } else {
        channel.request("detach").map(|(_, ok)| ok)
    };
    if let Some(live) = live.as_mut() {
        live.poll();
        live.finish();
    }
    session.detached();
    for line in crate::session::dropped_records(session.dir()) {
        eprintln!("bootprof: warning: {line}");
    }
    let show = session.dir().display().to_string();
    match result {
        Ok(ok) => Ok(say_detached(
            pid,
            &ok,
            &format!("read the session with `bootprof report {show}`"),
        )),
        Err(e) => {
            eprintln!("bootprof: {e}; the session {show} holds what it recorded until then");
            Ok(1)
        }
    }
}

/// `bootprof attach --count`: enables the chosen sites with hits counted exactly, waits, detaches
/// and prints the hits each had while attached (on standard output; what happens on stderr).
fn attach_counting(mut channel: Channel, options: &AttachOptions) -> Result<i32, String> {
    let pid = options.pid;
    catch_stop_signals();
    let enabled = channel
        .request("count")
        .and_then(|_| enable_sites(&mut channel, options))?;
    eprintln!(
        "bootprof: attached to process {pid}: {}, counting their hits; {}",
        enabled_sites(enabled, options),
        until_when(options)
    );
    let since = Instant::now();
    let until = options
        .duration
        .map(|ns| Instant::now() + Duration::from_nanos(ns));
    if wait(&channel, until, None) {
        eprintln!("bootprof: process {pid} ended while attached: its counts went with it");
        return Ok(1);
    }
    let (lines, ok) = channel.request("detach")?;
    let sites: Vec<SiteLine> = lines.iter().filter_map(|l| SiteLine::decode(l)).collect();
    let rows = counts::rows(sites.iter().filter_map(|s| {
        let kind = Kind::from_name(&s.kind)?;
        let function = if s.demangled.is_empty() {
            &s.function
        } else {
            &s.demangled
        };
        Some(Row {
            hits: s.hits,
            kind,
            site: counts::site_name(kind, &s.provider, &s.name, function),
        })
    }));
    let unknown = (sites.iter())
        .filter(|s| Kind::from_name(&s.kind).is_none())
        .count();
    if unknown > 0 {
        // Only from a runtime of another build: said, not left out silently.
        eprintln!(
            "bootprof: {unknown} sites of process {pid} are of kinds this bootprof does not \
             know: left out of the table"
        );
    }
    let mut table = String::new();
    if rows.is_empty() {
        table.push_str("no site enabled\n");
    } else {
        counts::write_table(&rows, "", &mut table);
    }
    eprintln!(
        "bootprof: hit counts of process {pid} while attached ({}):",
        crate::intervals::duration(since.elapsed().as_nanos() as f64)
    );
    print!("{table}");
    // The table before what follows it on a terminal.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    Ok(say_detached(pid, &ok, "each count is exact"))
}

/// From before the first site is enabled: a Ctrl-C (SIGTERM, SIGHUP) from then on detaches
/// cleanly (at once, if it comes while the sites are being enabled), never ends bootprof
/// half-way.
fn catch_stop_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe { libc::signal(sig, on_stop as *const () as libc::sighandler_t) };
    }
}

/// `N sites enabled in MODE mode`.
fn enabled_sites(n: usize, options: &AttachOptions) -> String {
    format!(
        "{n} site{} enabled in {} mode",
        if n == 1 { "" } else { "s" },
        options.mode.name()
    )
}

/// When the attach ends: `detaching after 1 s`, or `Ctrl-C detaches`.
fn until_when(options: &AttachOptions) -> String {
    match options.duration {
        Some(ns) => format!("detaching after {}", crate::intervals::duration(ns as f64)),
        None => "Ctrl-C detaches".into(),
    }
}

/// Says what the detach's `ok RESTORED NOT_RESTORED` means, then `then`; returns the exit code:
/// 1 when a site does not hold its NOP again.
fn say_detached(pid: u32, ok: &str, then: &str) -> i32 {
    let mut n = ok
        .split_whitespace()
        .map(|w| w.parse::<usize>().unwrap_or(0));
    let (restored, bad) = (n.next().unwrap_or(0), n.next().unwrap_or(0));
    eprintln!(
        "bootprof: detached from process {pid}: {restored} site{} disabled again, {}; {then}",
        if restored == 1 { "" } else { "s" },
        if bad == 0 {
            "each holds its NOP".to_string()
        } else {
            format!("{bad} do NOT hold their NOP")
        }
    );
    i32::from(bad != 0)
}

/// Asks the process to record into the session and to enable the chosen sites; returns how
/// many it enabled.
fn enable(
    channel: &mut Channel,
    options: &AttachOptions,
    session: &Session,
) -> Result<usize, String> {
    channel.request(&format!(
        "record {} {} {}",
        options.keep.keep().name(),
        options.buffer.max(1),
        session.dir().display()
    ))?;
    enable_sites(channel, options)
}

/// Asks the process to enable the chosen sites (the -x patterns first); returns how many it
/// enabled.
fn enable_sites(channel: &mut Channel, options: &AttachOptions) -> Result<usize, String> {
    if !options.notrace.is_empty() {
        channel.request(&format!("notrace {}", options.notrace.join(",")))?;
    }
    let patterns = if options.enable.is_empty() {
        "*".to_string()
    } else {
        options.enable.join(",")
    };
    let (_, ok) = channel.request(&format!("enable {} {patterns}", options.mode.name()))?;
    let n = ok.trim().parse::<usize>().unwrap_or(0);
    if n == 0 {
        eprintln!(
            "bootprof: warning: no disabled site of process {} matches {patterns}",
            options.pid
        );
    }
    Ok(n)
}

/// Waits until `until`, a stop signal, or the process's end (true); prints new records
/// meanwhile when `live`.
fn wait(
    channel: &Channel,
    until: Option<Instant>,
    mut live: Option<&mut crate::live::Live>,
) -> bool {
    loop {
        if STOP.load(Ordering::Relaxed) || until.is_some_and(|t| Instant::now() >= t) {
            return false;
        }
        if channel.closed() {
            return true;
        }
        if let Some(live) = live.as_deref_mut() {
            live.poll();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `bootprof.<pid>.attach<N>.session`, N the first number free.
fn free_session_name(pid: u32) -> PathBuf {
    (1..)
        .map(|n| PathBuf::from(format!("bootprof.{pid}.attach{n}.session")))
        .find(|p| !p.exists())
        .unwrap_or_default()
}

/// `bootprof list --pid PID`: every site of the running process with its state (enabled or not,
/// mode, hits), in text or JSON; and whether every disabled site holds its NOP.
pub fn list_pid(
    pid: u32,
    json: bool,
    signal: Option<&str>,
    library: Option<&OfferedLibrary>,
) -> Result<(String, bool), String> {
    let mut channel = Channel::open(pid, signal, library)?;
    let (lines, _) = channel.request("list")?;
    drop(channel);
    let mut sites: Vec<SiteLine> = lines.iter().filter_map(|l| SiteLine::decode(l)).collect();
    sites.sort_by_key(|s| s.address);
    let disabled_bad = sites
        .iter()
        .filter(|s| s.state == "disabled" && !s.holds_nop)
        .count();
    let text = if json {
        sites_json(pid, &sites)
    } else {
        sites_text(&sites, disabled_bad)
    };
    Ok((text, disabled_bad == 0))
}

fn sites_text(sites: &[SiteLine], disabled_bad: usize) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for s in sites {
        let probe = if s.provider.is_empty() {
            "-".to_string()
        } else {
            format!("{}:{}", s.provider, s.name)
        };
        let function = match (&s.demangled, &s.function) {
            (d, _) if !d.is_empty() => d.as_str(),
            (_, f) if !f.is_empty() => f.as_str(),
            _ => "?",
        };
        let _ = writeln!(
            out,
            "{:#018x} {:<10} {:<32} {}+{:#x} {} {}",
            s.address,
            s.kind,
            probe,
            function,
            s.func_offset,
            match s.state.as_str() {
                "disabled" if s.holds_nop => "disabled nop".to_string(),
                "disabled" => "disabled BAD".to_string(),
                mode => format!("enabled {mode}"),
            },
            s.hits
        );
    }
    let enabled = sites.iter().filter(|s| s.state != "disabled").count();
    let _ = writeln!(
        out,
        "{} sites, {enabled} enabled; {}",
        sites.len(),
        if disabled_bad == 0 {
            "every disabled site holds its NOP".to_string()
        } else {
            format!("{disabled_bad} disabled sites do not hold their NOP")
        }
    );
    out
}

fn sites_json(pid: u32, sites: &[SiteLine]) -> String {
    let rows: Vec<serde_json::Value> = sites
        .iter()
        .map(|s| {
            serde_json::json!({
                "id": s.id,
                "address": s.address,
                "kind": s.kind,
                "provider": (!s.provider.is_empty()).then_some(&s.provider),
                "name": s.name,
                "function": (!s.function.is_empty()).then_some(&s.function),
                "demangled": (!s.demangled.is_empty()).then_some(&s.demangled),
                "func_offset": s.func_offset,
                "state": s.state,
                "nop": s.holds_nop,
                "hits": s.hits,
            })
        })
        .collect();
    let mut out =
        serde_json::json!({ "pid": pid, "count": sites.len(), "sites": rows }).to_string();
    out.push('\n');
    out
}
