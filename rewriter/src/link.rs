//! Final link: takes the rewritten link line; runs the real driver with the output redirected to a
//! temporary name beside the real one, and renames it into place only when the link succeeds, so
//! a failed link leaves the previous output untouched. The driver's stderr and exit status pass
//! through unchanged.

use crate::args::{ArgKind, LinkLine};
use crate::driver::{driver_command, exit_code, status_of};
use crate::error::{Error, Result};
use std::path::Path;

/// Runs the final link of `args` (the line's arguments after gathering) with the output going to
/// a temporary file beside `line.output`, renamed over it on success (and removed otherwise).
/// Returns the driver's exit code.
pub fn final_link(line: &LinkLine, args: Vec<String>, dir: &Path) -> Result<i32> {
    let output = &line.output;
    // Creating the temporary checks that the output can be written at all before the link.
    let tmp = temporary_output(output).map_err(|e| Error::io(output, e))?;
    let args = redirect_output(line, args, &tmp);
    let (status, _) = status_of(driver_command(&line.driver, &args, dir)?)?;
    if !status.success() {
        return Ok(exit_code(status));
    }
    tmp.persist(output)
        .map_err(|e| Error::io(output, e.error))?;
    Ok(0)
}

/// An empty file beside `output`, removed when dropped unless persisted; created with the mode
/// a linker gives its output, for a linker that writes the file in place. (Created by us, not by
/// tempfile, so that an error is the system's own, as for any file the user names.)
fn temporary_output(output: &Path) -> std::io::Result<tempfile::TempPath> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = output
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("a.out");
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let file = tempfile::Builder::new()
        .prefix(&format!(".{name}.bootprof-"))
        .suffix(".tmp")
        .make_in(dir, |path| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o777)
                .open(path)
        })?;
    Ok(file.into_temp_path())
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
