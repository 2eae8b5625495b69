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

/// What to run and how, in the order the runtime applies it.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Patterns of the sites to enable; empty means every site.
    pub enable: Vec<String>,
    /// Patterns of sites never to enable.
    pub notrace: Vec<String>,
    /// How enabled sites fire.
    pub mode: Mode,
    /// The trace file (default `bootprof.<pid>.trace` in the working directory).
    pub output: Option<PathBuf>,
    /// Capacity of the event log, in records.
    pub buffer: Option<usize>,
    /// Print the profile-point table to stderr at exit.
    pub points: bool,
    /// The program and its arguments (at least the program).
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
