//! `bootprof run`: takes a program and the probes to enable; starts it with the runtime's
//! environment (`BOOTPROF_ENABLE`, `BOOTPROF_NOTRACE`, `BOOTPROF_MODE`, `BOOTPROF_RECORD`,
//! `BOOTPROF_OUTPUT`, `BOOTPROF_BUFFER`, `BOOTPROF_POINTS`), waits for it, and hands on its exit
//! code and the trace file it should have left.

use bootprof_format::pattern::{self, Pattern};
use bootprof_format::Kind;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

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

/// What to run and how (the arguments of `bootprof run`).
#[derive(Clone, Debug, clap::Args)]
pub struct RunOptions {
    /// Patterns of the sites to enable (provider:name, or a function for hooks; `*`
    /// wildcards at either end). Repeatable; default: every site.
    #[arg(short = 'e', long = "enable", value_name = "PATTERN")]
    pub enable: Vec<String>,
    /// Patterns of sites never to enable, even when an --enable pattern matches them
    /// (ftrace's set_ftrace_notrace). Repeatable.
    #[arg(short = 'x', long = "notrace", value_name = "PATTERN")]
    pub notrace: Vec<String>,
    /// How enabled sites fire.
    #[arg(long, value_enum, default_value = "trap")]
    pub mode: Mode,
    /// The trace file.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Capacity of the event log, in records.
    #[arg(long, value_name = "RECORDS")]
    pub buffer: Option<usize>,
    /// Print the profile-point table to stderr when the program exits.
    #[arg(long)]
    pub points: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// Runs the program with the recorder's environment and waits for it; returns its exit code (a
/// shell's: 128 + signal when killed). A missing trace afterwards is reported on stderr.
pub fn run(options: RunOptions) -> Result<i32, String> {
    use std::os::unix::process::ExitStatusExt;
    let RunOptions {
        enable,
        notrace,
        mode,
        output,
        buffer,
        points,
        command,
    } = options;
    let patterns = if enable.is_empty() {
        "*".to_string()
    } else {
        enable.join(",")
    };
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("BOOTPROF_ENABLE", patterns)
        .env("BOOTPROF_MODE", mode.name())
        .env("BOOTPROF_RECORD", "1");
    if !notrace.is_empty() {
        cmd.env("BOOTPROF_NOTRACE", notrace.join(","));
    }
    if let Some(o) = &output {
        cmd.env("BOOTPROF_OUTPUT", o);
    }
    if let Some(b) = buffer {
        cmd.env("BOOTPROF_BUFFER", b.to_string());
    }
    if points {
        cmd.env("BOOTPROF_POINTS", "1");
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", command[0].to_string_lossy()))?;
    let pid = child.id();
    let status = child.wait().map_err(|e| e.to_string())?;
    let trace = output.unwrap_or_else(|| PathBuf::from(format!("bootprof.{pid}.trace")));
    if !trace.exists() {
        eprintln!(
            "bootprof: no trace was written ({}): {}",
            trace.display(),
            why_no_trace(&command[0], status, &trace)
        );
    }
    for line in unmatched_patterns(&enable, &notrace, &trace, &command[0]) {
        eprintln!("bootprof: {line}");
    }
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// Why `program`, which ended with `status`, left no trace at `trace`: the first of these that
/// holds. It was killed by a signal (the trace is written at exit); the trace's directory cannot
/// be written; the program has no site table, or no runtime to record with; else it ended
/// without the runtime's exit (`_exit`, `exec`).
fn why_no_trace(program: &OsStr, status: ExitStatus, trace: &Path) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(signal) = status.signal() {
        return format!(
            "the program was killed by signal {signal} ({}) before it could write it at exit",
            signal_name(signal)
        );
    }
    let dir = match trace.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Err(e) = tempfile::tempfile_in(dir) {
        return format!("its directory {} cannot be written ({e})", dir.display());
    }
    let Some(path) = find_program(program) else {
        return format!("`{}` was not found to check it", program.to_string_lossy());
    };
    match crate::list::list(&path) {
        Err(e) => e.to_string(),
        Ok(_) if !has_runtime(&path) => format!(
            "{} has a site table but no bootprof runtime to record with (it was linked with \
             --no-runtime, or is a Rust program that does not depend on bootprof-runtime)",
            path.display()
        ),
        Ok(_) => format!(
            "the program (exit status {}) ended without the runtime's exit handler: it left \
             through _exit or exec, or changed BOOTPROF_OUTPUT",
            status.code().unwrap_or(0)
        ),
    }
}

/// `program` as the system finds it: a path when it holds a `/`, else the first match in `PATH`.
fn find_program(program: &OsStr) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
}

/// Whether the binary at `path` defines `bootprof_register`, the runtime's entry point.
fn has_runtime(path: &Path) -> bool {
    use object::{Object, ObjectSymbol};
    let Ok(data) = std::fs::read(path) else {
        return false;
    };
    let Ok(file) = object::File::parse(&*data) else {
        return false;
    };
    file.symbols()
        .chain(file.dynamic_symbols())
        .any(|s| s.is_definition() && s.name() == Ok("bootprof_register"))
}

/// The usual name of `signal`.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

/// A site as patterns see it: probes by `provider:name`, hooks by their function, and the
/// `BOOTPROF_ENTER()`/`EXIT()` annotations (provider `bootprof`) by their function too.
struct SiteName {
    name: String,
    function: Option<String>,
}

impl SiteName {
    fn matches(&self, p: &Pattern) -> bool {
        p.matches(&self.name) || self.function.as_deref().is_some_and(|f| p.matches(f))
    }
}

/// The sites the patterns were applied to: those of the trace (every object that registered,
/// shared libraries included), or, without a trace, those of the program's own table.
fn site_names(trace: &Path, program: &OsStr) -> Vec<SiteName> {
    let name = |kind: Kind, provider: &str, name: &str, function: &str| SiteName {
        name: if kind.is_hook() {
            function.to_string()
        } else {
            format!("{provider}:{name}")
        },
        function: (provider == "bootprof").then(|| function.to_string()),
    };
    if let Ok(t) = crate::trace::read_trace(trace) {
        return t
            .sites
            .iter()
            .map(|s| name(s.kind, &s.provider, &s.name, &s.function))
            .collect();
    }
    let Some(listing) = find_program(program).and_then(|p| crate::list::list(&p).ok()) else {
        return Vec::new();
    };
    listing
        .sites
        .iter()
        .map(|s| {
            let provider = s.provider.as_deref().unwrap_or("");
            name(
                s.kind,
                provider,
                &s.name,
                s.function.as_deref().unwrap_or(""),
            )
        })
        .collect()
}

/// One line for each `-e`/`-x` pattern that matched none of the program's sites, with the
/// nearest names; nothing when the sites cannot be read.
fn unmatched_patterns(
    enable: &[String],
    notrace: &[String],
    trace: &Path,
    program: &OsStr,
) -> Vec<String> {
    if enable.is_empty() && notrace.is_empty() {
        return Vec::new();
    }
    let sites = site_names(trace, program);
    if sites.is_empty() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    for (option, texts) in [("-e", enable), ("-x", notrace)] {
        for text in texts {
            // A pattern that does not parse is the runtime's to report.
            let Ok(patterns) = pattern::parse_list(text) else {
                continue;
            };
            let texts = text.split(',').map(str::trim).filter(|t| !t.is_empty());
            for (p, text) in patterns.iter().zip(texts) {
                if sites.iter().any(|s| s.matches(p)) {
                    continue;
                }
                lines.push(format!(
                    "pattern `{text}` ({option}) matches none of the {} sites; nearest: {}",
                    sites.len(),
                    nearest(p, &sites).join(", ")
                ));
            }
        }
    }
    lines
}

/// The three site names closest to `p` (edit distance from the pattern's literal text to the
/// part of the name it would have to match).
fn nearest(p: &Pattern, sites: &[SiteName]) -> Vec<String> {
    let literal = match p {
        Pattern::Exact(s) | Pattern::Prefix(s) | Pattern::Suffix(s) | Pattern::Contains(s) => s,
        Pattern::Any => return Vec::new(),
    };
    let distance = |name: &str| -> usize {
        let chars: Vec<char> = name.chars().collect();
        let n = literal.chars().count().min(chars.len());
        let part = |from: usize| chars[from..from + n].iter().collect::<String>();
        match p {
            Pattern::Prefix(_) => strsim::levenshtein(literal, &part(0)),
            Pattern::Suffix(_) => strsim::levenshtein(literal, &part(chars.len() - n)),
            Pattern::Contains(_) => (0..=chars.len() - n)
                .map(|i| strsim::levenshtein(literal, &part(i)))
                .min()
                .unwrap_or(usize::MAX),
            _ => strsim::levenshtein(literal, name),
        }
    };
    let mut names: Vec<&str> = sites
        .iter()
        .flat_map(|s| std::iter::once(s.name.as_str()).chain(s.function.as_deref()))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut scored: Vec<(usize, &str)> = names.into_iter().map(|n| (distance(n), n)).collect();
    scored.sort_unstable();
    scored
        .into_iter()
        .take(3)
        .map(|(_, n)| n.to_string())
        .collect()
}
