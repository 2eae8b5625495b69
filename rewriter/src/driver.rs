//! Running the compiler driver and our own commands: takes a driver and its arguments; hands
//! on its exit status (a shell's code), an error for a command of ours that failed, or, for a
//! line passed through, this process replaced by the driver. Used by `gather` (compiles, the
//! partial link) and `link` (the final link).

use crate::args::{quote_response_arg, LinkLine};
use crate::error::{Error, Result};
use std::path::Path;
use std::process::{Command, ExitStatus};

/// Above this many bytes of arguments, the driver gets a response file instead.
const MAX_COMMAND_LINE: usize = 100_000;

/// The exit code a shell would report for `status`.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args().take(12) {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    if cmd.get_args().len() > 12 {
        s.push_str(" ...");
    }
    s
}

/// Runs `cmd` and waits for it; returns its status and a short form of its command line.
pub fn status_of(mut cmd: Command) -> Result<(ExitStatus, String)> {
    let what = describe(&cmd);
    let status = cmd.status().map_err(|source| Error::Spawn {
        program: cmd.get_program().to_string_lossy().into_owned(),
        source,
    })?;
    Ok((status, what))
}

/// Runs a command of ours (a compile, a partial link); its failure is an error.
pub fn run_checked(cmd: Command) -> Result<()> {
    let (status, command) = status_of(cmd)?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Command { command, status })
    }
}

/// Builds the driver command for `args`, through a response file in `dir` when the line is long.
pub fn driver_command(driver: &str, args: &[String], dir: &Path) -> Result<Command> {
    let mut cmd = Command::new(driver);
    let total: usize = args.iter().map(|a| a.len() + 1).sum();
    if total > MAX_COMMAND_LINE {
        let rsp = dir.join("link.rsp");
        let text: Vec<String> = args.iter().map(|a| quote_response_arg(a)).collect();
        std::fs::write(&rsp, text.join("\n")).map_err(|e| Error::io(&rsp, e))?;
        cmd.arg(format!("@{}", rsp.display()));
    } else {
        cmd.args(args);
    }
    Ok(cmd)
}

/// Runs the line unchanged, replacing this process (pass-through).
pub fn exec_unchanged(line: &LinkLine) -> Error {
    use std::os::unix::process::CommandExt;
    let source = Command::new(&line.driver).args(&line.args).exec();
    Error::Spawn {
        program: line.driver.clone(),
        source,
    }
}
