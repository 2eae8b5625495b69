//! Final link: takes the rewritten link line; runs the real driver with the output redirected to a
//! temporary name beside the real one, and renames it into place only when the link succeeds, so
//! a failed link leaves the previous output untouched. The driver's stderr and exit status pass
//! through unchanged.

use crate::args::{quote_response_arg, ArgKind, LinkLine};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
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

fn status_of(mut cmd: Command) -> Result<(ExitStatus, String)> {
    let what = describe(&cmd);
    let status = cmd.status().map_err(|source| Error::Spawn {
        program: cmd.get_program().to_string_lossy().into_owned(),
        source,
    })?;
    Ok((status, what))
}

/// Runs a command of ours (a compile, a partial link); its failure is an error.
pub(crate) fn run_checked(cmd: Command) -> Result<()> {
    let (status, command) = status_of(cmd)?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Command { command, status })
    }
}

/// Builds the driver command for `args`, through a response file in `dir` when the line is long.
pub(crate) fn driver_command(driver: &str, args: &[String], dir: &Path) -> Result<Command> {
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

/// Runs the final link of `args` (the line's arguments after gathering) with the output going to
/// a temporary file that is renamed over `line.output` on success. Returns the driver's exit code.
pub fn final_link(line: &LinkLine, args: Vec<String>, dir: &Path) -> Result<i32> {
    let output = &line.output;
    let tmp = temporary_output(output);
    // Make sure the output can be written at all before running the link.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| Error::io(output, e))?;
    let _ = std::fs::remove_file(&tmp);
    let args = redirect_output(line, args, &tmp);
    let cmd = driver_command(&line.driver, &args, dir)?;
    let result = status_of(cmd);
    let status = match result {
        Ok((status, _)) => status,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    if !status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Ok(exit_code(status));
    }
    if let Err(e) = std::fs::rename(&tmp, output) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(output, e));
    }
    Ok(0)
}

fn temporary_output(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("a.out");
    output.with_file_name(format!(".{name}.bootprof-{}.tmp", std::process::id()))
}

/// Points the line's `-o` at `tmp` (adding `-o tmp` when the line has none).
fn redirect_output(line: &LinkLine, mut args: Vec<String>, tmp: &Path) -> Vec<String> {
    let tmp = tmp.display().to_string();
    // Gathering may have removed arguments, but never an output: find it again by value.
    let mut found = false;
    let mut i = 0;
    while i < args.len() {
        if args[i] == "-o" && i + 1 < args.len() {
            args[i + 1] = tmp.clone();
            found = true;
            i += 2;
            continue;
        }
        if args[i].starts_with("-o") && args[i].len() > 2 && line.kinds.contains(&ArgKind::Output) {
            args[i] = format!("-o{tmp}");
            found = true;
        }
        i += 1;
    }
    if !found {
        args.push("-o".into());
        args.push(tmp);
    }
    args
}
