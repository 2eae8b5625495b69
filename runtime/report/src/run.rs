//! `bootprof run`: takes a program and the probes to enable; starts it with the runtime's
//! environment (`BOOTPROF_ENABLE`, `BOOTPROF_NOTRACE`, `BOOTPROF_MODE`, `BOOTPROF_RECORD`,
//! `BOOTPROF_OUTPUT`, `BOOTPROF_BUFFER`, `BOOTPROF_POINTS`), waits for it, and hands on its exit
//! code and the trace file it should have left.

use std::ffi::OsString;
use std::path::PathBuf;

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
            "bootprof: no trace was written ({}): was the program linked by bootprof-link?",
            trace.display()
        );
    }
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}
