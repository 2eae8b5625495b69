//! Final link: takes the rewritten link line and the symbols to trace; runs the real driver with
//! the output redirected to a temporary name beside the real one, has [`check`] look at what the
//! linker reported and at the binary, and puts it in place only when the link succeeds and
//! the check passes, so a failed or refused link leaves the previous output untouched. The
//! driver's output (less the trace lines asked for here) and exit status pass through.

use crate::args::{ArgKind, LinkLine};
use crate::check::{self, Traced};
use crate::driver::{driver_command, exit_code};
use crate::error::{Error, Result};
use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::Stdio;

/// Runs the final link of `args` (the line's arguments after gathering) with the output going to
/// a temporary file beside `line.output`, the linker reporting every file that references one of
/// `traced`; checks the references and the binary, and puts the binary in `line.output`'s place
/// when both are right (removing it otherwise). Once the linker has exited, `done_with_inputs`
/// runs on a thread of its own beside the check (removing the rewritten inputs, a millisecond of
/// freeing pages on a large link, need not wait for it). Returns the driver's exit code and the
/// time the check took.
pub fn final_link(
    line: &LinkLine,
    args: Vec<String>,
    traced: &BTreeSet<String>,
    dir: &Path,
    done_with_inputs: impl FnOnce() + Send,
) -> Result<(i32, std::time::Duration)> {
    let output = &line.output;
    // Creating the temporary checks that the output can be written at all before the link.
    let tmp = temporary_output(output).map_err(|e| Error::io(output, e))?;
    let mut linked = redirect_output(line, args.clone(), &tmp);
    linked.extend(traced.iter().map(|s| format!("-Wl,--trace-symbol={s}")));
    let (status, reports) = run_traced(driver_command(&line.driver, &linked, dir)?, traced)?;
    if !status.success() {
        return Ok((exit_code(status), std::time::Duration::ZERO));
    }
    std::thread::scope(|s| {
        s.spawn(done_with_inputs);
        let started = std::time::Instant::now();
        check::check_references(&reports, &args, output)?;
        check::check_output(&tmp, output)?;
        let checked = started.elapsed();
        if bootprof_format::file::written_in_place(output) {
            // Copied into the device or pipe: renaming over it would put a file in its place.
            std::fs::File::open(&tmp)
                .and_then(|mut from| {
                    let mut to = std::fs::OpenOptions::new().write(true).open(output)?;
                    std::io::copy(&mut from, &mut to)
                })
                .map_err(|e| Error::io(output, e))?;
        } else if let Some(old) = replace_output(tmp, output).map_err(|e| Error::io(output, e))? {
            // Removing the old output frees its pages too: beside the inputs' removal.
            s.spawn(move || drop(old));
        }
        Ok((0, checked))
    })
}

/// Runs `cmd`, passing its stdout and stderr through line by line as they come, except the
/// linker's trace lines about `traced`, which are returned.
fn run_traced(
    mut cmd: std::process::Command,
    traced: &BTreeSet<String>,
) -> Result<(std::process::ExitStatus, Vec<Traced>)> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let spawn_error = |source| Error::Spawn {
        program: program.clone(),
        source,
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let mut reports = std::thread::scope(|s| {
        let out = s.spawn(|| forward(stdout, std::io::stdout(), traced));
        let err = forward(stderr, std::io::stderr(), traced);
        let mut all = out.join().unwrap_or_default();
        all.extend(err);
        all
    });
    reports.dedup();
    let status = child.wait().map_err(spawn_error)?;
    Ok((status, reports))
}

/// Copies `from` to `to` line by line, keeping back (and returning) the trace lines.
fn forward(from: impl std::io::Read, mut to: impl Write, traced: &BTreeSet<String>) -> Vec<Traced> {
    let mut reports = Vec::new();
    for line in std::io::BufReader::new(from).split(b'\n') {
        let Ok(line) = line else { break };
        match check::parse_traced(&String::from_utf8_lossy(&line), traced) {
            Some(t) => reports.push(t),
            None => {
                // A closed stdout or stderr is the reader's business, not the link's.
                let _ = to.write_all(&line).and_then(|()| to.write_all(b"\n"));
            }
        }
    }
    let _ = to.flush();
    reports
}

/// Puts the linked file `tmp` in the place of `output` at once, as a rename does, without
/// renaming over an existing output: ext4 (`auto_da_alloc`) starts writing a file's data out to
/// disk when it is renamed over another, which cost 3-4 ms on a 50 ms link. The two names are
/// exchanged (`renameat2` with `RENAME_EXCHANGE`); the old output, now at the temporary's name,
/// is returned for the caller to remove (dropping it removes it). Where the old output is not a
/// regular file (none, a symbolic link, a directory, which a rename refuses), or the file system
/// cannot exchange names, a plain rename, and nothing is returned.
fn replace_output(
    tmp: tempfile::TempPath,
    output: &Path,
) -> std::io::Result<Option<tempfile::TempPath>> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes());
    let (from, to) = (c(&tmp)?, c(output)?);
    let regular = std::fs::symlink_metadata(output).is_ok_and(|m| m.file_type().is_file());
    // SAFETY: both are NUL-terminated paths that live across the call.
    let exchanged = regular
        && unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        } == 0;
    if exchanged {
        Ok(Some(tmp))
    } else {
        tmp.persist(output).map(|_| None).map_err(|e| e.error)
    }
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
    let in_place = bootprof_format::file::written_in_place(output);
    let temp_dir = std::env::temp_dir();
    let dir = match output.parent() {
        // A device or a pipe (`-o /dev/null`) gets the output copied in: the temporary is not
        // put beside it.
        _ if in_place => temp_dir.as_path(),
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
pub fn redirect_output(line: &LinkLine, mut args: Vec<String>, tmp: &Path) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::replace_output;
    use std::path::Path;

    /// A temporary file holding `contents` in `dir`, as the link leaves its output.
    fn linked(dir: &Path, contents: &str) -> tempfile::TempPath {
        let file = tempfile::NamedTempFile::new_in(dir).unwrap();
        std::fs::write(file.path(), contents).unwrap();
        file.into_temp_path()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_new_output_takes_the_old_ones_place_and_nothing_else_stays() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("prog");
        // No output yet: a rename.
        let old = replace_output(linked(dir.path(), "first"), &out).unwrap();
        assert!(old.is_none());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "first");
        // Over a regular file: exchanged where the file system can, the old output handed back
        // under the temporary's name and removed with it.
        let old = replace_output(linked(dir.path(), "second"), &out).unwrap();
        if let Some(old) = old {
            assert_eq!(std::fs::read_to_string(&old).unwrap(), "first");
        }
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "second");
        assert_eq!(names(dir.path()), ["prog"]);
    }

    #[test]
    fn a_symbolic_link_in_the_outputs_place_is_replaced_and_its_target_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (target, out) = (dir.path().join("target"), dir.path().join("prog"));
        std::fs::write(&target, "target").unwrap();
        std::os::unix::fs::symlink(&target, &out).unwrap();
        assert!(replace_output(linked(dir.path(), "new"), &out)
            .unwrap()
            .is_none());
        assert!(std::fs::symlink_metadata(&out).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "target");
        assert_eq!(names(dir.path()), ["prog", "target"]);
    }

    #[test]
    fn a_directory_in_the_outputs_place_is_an_error_and_stays() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("prog");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("inside"), "kept").unwrap();
        assert!(replace_output(linked(dir.path(), "new"), &out).is_err());
        assert_eq!(std::fs::read_to_string(out.join("inside")).unwrap(), "kept");
        assert_eq!(names(dir.path()), ["prog"]);
    }
}
