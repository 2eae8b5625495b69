//! Final link: takes the rewritten link line and the symbols to trace; runs the real driver with
//! the output redirected to a temporary name beside the real one, has [`check`] look at what the
//! linker reported and at the binary, and puts it in place only when the link succeeds and
//! the check passes, so a failed or refused link leaves the previous output untouched. The
//! driver's output (less the trace lines asked for here) and exit status pass through.

use crate::args::{ArgKind, LinkLine};
use crate::check::{self, Traced};
use crate::driver::{driver_command, exit_code};
use crate::error::{Error, Result};
use crate::linker::{self, Found, Linker};
use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

/// Runs the final link of `args` (the line's arguments after gathering) with the output going to
/// a temporary file beside `line.output`, the linker reporting every file that references one of
/// `messages.traced`; makes `checks` meanwhile (what the linker prints is held back until they
/// pass; when they fail, the link is abandoned and their error returned); checks the references
/// and the binary, and puts the binary in `line.output`'s place when both are right (removing it
/// otherwise).
pub fn final_link(
    line: &LinkLine,
    args: &[String],
    messages: &Messages,
    dir: &Path,
    checks: impl FnOnce() -> Result<()>,
    linker_known: bool,
) -> Result<Linked> {
    start(line, args, messages, dir, None, linker_known)?.finish_checked(line, args, checks)
}

/// How a final link ended.
#[derive(Debug)]
pub struct Linked {
    /// The driver's exit code.
    pub code: i32,
    /// The time the checks of the references and of the output took.
    pub checked: std::time::Duration,
    /// The output the new one replaced, its name removed: its blocks are freed when this
    /// descriptor closes (after the process, [`crate::leftovers`]).
    pub replaced: Option<std::fs::File>,
}

/// Starts the final link of `args` as [`final_link`] does, without waiting for it; what the
/// driver prints is held back until [`Running::finish_checked`]. With a `gate`, the linker waits
/// for its linker script, which [`Running::open`] hands it.
pub fn start(
    line: &LinkLine,
    args: &[String],
    messages: &Messages,
    dir: &Path,
    gate: Option<Gate>,
    linker_known: bool,
) -> Result<Running> {
    let output = &line.output;
    // Creating the temporary checks that the output can be written at all before the link.
    let tmp = temporary_output(output).map_err(|e| Error::io(output, e))?;
    let mut linked = redirect_output(line, args.to_vec(), &tmp);
    linked.extend(
        messages
            .traced
            .iter()
            .map(|s| format!("-Wl,--trace-symbol={s}")),
    );
    let mut cmd = driver_command(&line.driver, &linked, dir)?;
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| Error::Spawn { program, source })?;
    let hold = Arc::new(Mutex::new(Hold::Held(Vec::new())));
    let messages = Arc::new(messages.clone());
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let (stdout, stderr) = (OwnedFd::from(stdout), OwnedFd::from(stderr));
    let passing = [(Stream::Out, stdout), (Stream::Err, stderr)].map(|(to, from)| {
        let from = std::fs::File::from(from);
        let (hold, messages) = (Arc::clone(&hold), Arc::clone(&messages));
        std::thread::spawn(move || forward(from, to, &hold, &messages))
    });
    let find_linker = linker_known && linker::runs_once(line);
    Ok(Running {
        child,
        tmp: Some(tmp),
        passing: passing.map(Some),
        hold,
        gate,
        find_linker,
        linker: None,
    })
}

/// A final link started by [`start`]: the driver, the threads passing its output through, and
/// the temporary output. Dropped unfinished, it is abandoned ([`Running::abandon`]).
pub struct Running {
    child: std::process::Child,
    tmp: Option<tempfile::TempPath>,
    passing: [Option<std::thread::JoinHandle<Vec<Traced>>>; 2],
    hold: Arc<Mutex<Hold>>,
    gate: Option<Gate>,
    /// Whether to look for the linker: the driver runs GNU ld or lld, once
    /// ([`linker::runs_once`]).
    find_linker: bool,
    /// The linker, found under the driver: its exit starts the work after the link.
    linker: Option<Linker>,
}

impl Running {
    /// Hands the waiting linker `script` through the gate; what it prints stays held back until
    /// [`Running::finish_checked`]. `false` when the linker ended without reading it (a linker that does
    /// not read its scripts so, or a driver that failed first): the link is then abandoned, and
    /// the caller runs it again.
    pub fn open(&mut self, script: &[u8]) -> Result<bool> {
        let Some(mut gate) = self.gate.take() else {
            return Err(Error::Internal(
                "a link without a gate, or one opened before, was opened".into(),
            ));
        };
        // Taken first: a gate that failed is not passed through again when the link is
        // abandoned (dropped, its pipe closed, the linker reads to its end).
        let read = gate
            .pass(script, &mut self.child)
            .map_err(|e| Error::io(&gate.path, e))?;
        if read && self.find_linker {
            match Linker::find(self.child.id()) {
                Found::Linker(linker) => self.linker = Some(linker),
                Found::NotYet => {}
                Found::Never => self.find_linker = false,
            }
        }
        Ok(read)
    }

    /// Lets the linker's output through, what it printed so far first.
    fn release(&mut self) {
        let mut hold = lock(&self.hold);
        if let Hold::Held(lines) = std::mem::replace(&mut *hold, Hold::Through) {
            for (to, line) in lines {
                to.write_line(&line);
            }
        }
    }

    /// Makes `checks` while the linker runs, then lets what the linker prints through, waits for
    /// the link, checks the references and the binary, and puts it in place, as [`final_link`]
    /// says; when `checks` fail, abandons the link (what the linker printed dropped, its output
    /// removed) and returns their error.
    pub fn finish_checked(
        mut self,
        line: &LinkLine,
        args: &[String],
        checks: impl FnOnce() -> Result<()>,
    ) -> Result<Linked> {
        if let Err(e) = checks() {
            self.stop();
            return Err(e);
        }
        self.finish(line, args)
    }

    /// [`Running::finish_checked`] once the checks have passed. With the linker found (at its
    /// gate, or looked for now), its output is checked as soon as it exits, while the driver
    /// ends; the check is made again if the file changed by the driver's end.
    fn finish(mut self, line: &LinkLine, args: &[String]) -> Result<Linked> {
        self.release();
        if self.linker.is_none() && self.find_linker {
            self.linker = self.look_for_linker();
        }
        let output = &line.output;
        let linked = match self.linker.take() {
            Some(linker) if linker.wait() => {
                let tmp = self.tmp.as_deref().expect("taken once");
                if line.options.verbose {
                    eprintln!("bootprof-link: the linker ended before its driver: its output is checked meanwhile");
                }
                Some(Checked::new(tmp, output))
            }
            _ => None,
        };
        let (status, reports) = self.wait()?;
        let tmp = self.tmp.take().expect("taken once");
        if !status.success() {
            return Ok(Linked {
                code: exit_code(status),
                checked: std::time::Duration::ZERO,
                replaced: None,
            });
        }
        let started = std::time::Instant::now();
        check::check_references(&reports, args, output)?;
        let references = started.elapsed();
        let checked = match linked {
            Some(checked) if checked.stands(&tmp) => checked,
            _ => Checked::new(&tmp, output),
        };
        checked.result?;
        // The output check's own time, whether it was made at the linker's exit or now.
        let checked = references + checked.took;
        let mut replaced = None;
        if bootprof_format::file::written_in_place(output) {
            // Copied into the device or pipe: renaming over it would put a file in its place.
            std::fs::File::open(&tmp)
                .and_then(|mut from| {
                    let mut to = std::fs::OpenOptions::new().write(true).open(output)?;
                    std::io::copy(&mut from, &mut to)
                })
                .map_err(|e| Error::io(output, e))?;
        } else if let Some(old) = replace_output(tmp, output).map_err(|e| Error::io(output, e))? {
            // Its name removed now, while a descriptor keeps its blocks: freeing them waits.
            replaced = std::fs::File::open(&old).ok();
            drop(old);
        }
        Ok(Linked {
            code: 0,
            checked,
            replaced,
        })
    }

    /// The linker under the driver, looked for every quarter of a millisecond until it is
    /// there (GNU ld is exec'd 2-3 ms after its driver), or until the chain shows it never will
    /// be, or the driver ends.
    fn look_for_linker(&mut self) -> Option<Linker> {
        loop {
            match Linker::find(self.child.id()) {
                Found::Linker(linker) => return Some(linker),
                Found::Never => return None,
                Found::NotYet => {}
            }
            if !matches!(self.child.try_wait(), Ok(None)) {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_micros(250));
        }
    }

    /// Stops the link: a waiting linker is handed a script it refuses, so that it exits at once
    /// and writes nothing; what it printed is dropped, and its temporary output removed.
    pub fn abandon(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        *lock(&self.hold) = Hold::Dropped;
        if let Some(mut gate) = self.gate.take() {
            let _ = gate.pass(ABANDONED, &mut self.child);
        }
        let _ = self.wait();
        self.tmp = None;
    }

    /// Waits for the driver and for its output to be passed through; the trace lines.
    fn wait(&mut self) -> Result<(std::process::ExitStatus, Vec<Traced>)> {
        let mut reports = Vec::new();
        for passing in self.passing.iter_mut().filter_map(Option::take) {
            reports.extend(passing.join().unwrap_or_default());
        }
        reports.dedup();
        let status = self.child.wait().map_err(|source| Error::Spawn {
            program: "the link driver".into(),
            source,
        })?;
        Ok((status, reports))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.tmp.is_some() {
            self.stop();
        }
    }
}

/// The output check of a linked file ([`check::check_output`]), with what the file was when
/// checked.
struct Checked {
    result: Result<()>,
    /// The file's inode, length and modification time before the check.
    stamp: Option<(u64, u64, std::time::SystemTime)>,
    /// How long the check took.
    took: std::time::Duration,
}

impl Checked {
    /// Checks `linked`, the file linked for `output`.
    fn new(linked: &Path, output: &Path) -> Checked {
        let started = std::time::Instant::now();
        let stamp = stamp(linked);
        let result = check::check_output(linked, output);
        Checked {
            result,
            stamp,
            took: started.elapsed(),
        }
    }

    /// Whether `linked` is still the file checked.
    fn stands(&self, linked: &Path) -> bool {
        self.stamp.is_some() && self.stamp == stamp(linked)
    }
}

/// A file's inode, length and modification time.
fn stamp(path: &Path) -> Option<(u64, u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.ino(), meta.len(), meta.modified().ok()?))
}

/// What a linker handed through the gate is told when the link is abandoned: not a linker
/// script, so that GNU ld and lld stop at once.
const ABANDONED: &[u8] = b"bootprof-link abandoned this link\n";

/// The linker script of a link started before its inputs are written: a symbolic link, at the
/// script's path, to the read end of a pipe this process holds (`/proc/PID/fd/N`). The linker
/// opens it as a file and waits to read it; GNU ld and lld read their `-T` scripts while
/// reading their options, before any input, and read a pipe to its end. If this process dies,
/// the link's name for the pipe goes with it: the linker cannot wait for ever.
pub struct Gate {
    path: std::path::PathBuf,
    read: OwnedFd,
    write: Option<std::fs::File>,
}

impl Gate {
    /// A gate at `path` (where the script would be).
    pub fn new(path: &Path) -> std::io::Result<Gate> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array, which this process then owns.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both were just opened by pipe2, and nothing else owns them.
        let (read, write) = unsafe {
            (
                OwnedFd::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        };
        let target = format!("/proc/{}/fd/{}", std::process::id(), read.as_raw_fd());
        std::os::unix::fs::symlink(target, path)?;
        Ok(Gate {
            path: path.to_path_buf(),
            read,
            write: Some(write),
        })
    }

    /// Writes `text` into the pipe, closes its end, and waits until the linker has read all of
    /// it or `child` has ended (`false`). Once read, `text` takes the gate's place as a file,
    /// for a driver that runs its linker again.
    fn pass(&mut self, text: &[u8], child: &mut std::process::Child) -> std::io::Result<bool> {
        use std::os::fd::AsRawFd;
        let Some(mut write) = self.write.take() else {
            return Err(std::io::Error::other(
                "the linker script was handed over already",
            ));
        };
        // Far less than a pipe holds: the write does not wait for the reader. Closed at once,
        // so that the linker reads the end with the text, not after this process sees it read.
        write.write_all(text)?;
        drop(write);
        loop {
            let mut unread: libc::c_int = 0;
            // SAFETY: FIONREAD stores the pipe's unread byte count in the int it is given.
            if unsafe { libc::ioctl(self.read.as_raw_fd(), libc::FIONREAD, &mut unread) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if unread == 0 {
                // For a second reading only: this link has its script, and a second linker
                // without one fails on its own.
                let file = self.path.with_extension("ld.written");
                let _ =
                    std::fs::write(&file, text).and_then(|()| std::fs::rename(&file, &self.path));
                return Ok(true);
            }
            if child.try_wait()?.is_some() {
                return Ok(false);
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}

/// What happens to the linker's output lines.
enum Hold {
    /// Kept, in order, until the link's checks have passed (and the linker has its script).
    Held(Vec<(Stream, Vec<u8>)>),
    /// Passed through as they come.
    Through,
    /// Dropped: the link was abandoned.
    Dropped,
}

fn lock(hold: &Mutex<Hold>) -> std::sync::MutexGuard<'_, Hold> {
    hold.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which of this process's outputs a line goes to.
#[derive(Clone, Copy)]
enum Stream {
    Out,
    Err,
}

impl Stream {
    fn write_line(self, line: &[u8]) {
        // A closed stdout or stderr is the reader's business, not the link's.
        let _ = match self {
            Stream::Out => write_line(std::io::stdout().lock(), line),
            Stream::Err => write_line(std::io::stderr().lock(), line),
        };
    }
}

fn write_line(mut to: impl Write, line: &[u8]) -> std::io::Result<()> {
    to.write_all(line)?;
    to.write_all(b"\n")?;
    to.flush()
}

/// Passes `from` to `to` line by line as `hold` says, as `messages` says: the trace lines kept
/// back (and returned), the inputs named as the line names them.
fn forward(
    from: impl std::io::Read,
    to: Stream,
    hold: &Mutex<Hold>,
    messages: &Messages,
) -> Vec<Traced> {
    let mut reports = Vec::new();
    for line in std::io::BufReader::new(from).split(b'\n') {
        let Ok(line) = line else { break };
        if let Some(t) = check::parse_traced(&String::from_utf8_lossy(&line), &messages.traced) {
            reports.push(t);
            continue;
        }
        let line = messages.renames.apply(line);
        match &mut *lock(hold) {
            Hold::Held(lines) => lines.push((to, line)),
            Hold::Through => to.write_line(&line),
            Hold::Dropped => {}
        }
    }
    reports
}

/// What becomes of the driver's messages.
#[derive(Debug, Clone, Default)]
pub struct Messages {
    /// The symbols the linker reports the references of: its trace lines are kept back for the
    /// check ([`check::check_references`]).
    pub traced: BTreeSet<String>,
    /// The names said in place of the inputs' private copies.
    pub renames: Renames,
}

/// The names the linker's messages give the private copies of inputs, and the inputs' own
/// names, which the messages say instead: a message about `DIR/0003.pack.a(0003-main.o)` or
/// `DIR/0003-main.o` names `main.o`, as the plain link's would.
#[derive(Debug, Clone, Default)]
pub struct Renames {
    pairs: Vec<(String, String)>,
}

impl Renames {
    /// Messages name `private` as `own`, for each pair.
    pub fn new(pairs: Vec<(String, String)>) -> Renames {
        Renames { pairs }
    }

    /// `line` with each private name in it replaced by its input's own (a line that is not
    /// UTF-8 as it is).
    fn apply(&self, line: Vec<u8>) -> Vec<u8> {
        let Ok(text) = std::str::from_utf8(&line) else {
            return line;
        };
        let mut renamed = None::<String>;
        for (private, own) in &self.pairs {
            let current = renamed.as_deref().unwrap_or(text);
            if current.contains(private.as_str()) {
                renamed = Some(current.replace(private.as_str(), own));
            }
        }
        renamed.map_or(line, String::into_bytes)
    }
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
    use super::{replace_output, Checked, Renames};
    use std::path::Path;

    #[test]
    fn messages_name_the_inputs_as_the_line_does() {
        // As `rewrite` makes them (`pack::member_renames`, `pack::archive_suffix`).
        let pack = "/tmp/bootprof-link.1.x/0003.pack.a";
        let renames = Renames::new(vec![
            (format!(" in archive {pack}"), String::new()),
            (format!("{pack}(0003-main.o)"), "obj/main.o".into()),
            ("0003-main.o:(".into(), "obj/main.o:(".into()),
            ("/tmp/bootprof-link.1.x/0005-util.o".into(), "util.o".into()),
        ]);
        let apply = |line: &str| String::from_utf8(renames.apply(line.into())).unwrap();
        // GNU ld's, for a member and for a file alone.
        assert_eq!(
            apply(
                "/usr/bin/ld: /tmp/bootprof-link.1.x/0003.pack.a(0003-main.o): in function `main':"
            ),
            "/usr/bin/ld: obj/main.o: in function `main':"
        );
        assert_eq!(
            apply("/usr/bin/ld: /tmp/bootprof-link.1.x/0005-util.o:(.text+0x8): undefined"),
            "/usr/bin/ld: util.o:(.text+0x8): undefined"
        );
        // lld's member.
        assert_eq!(
            apply(">>>               0003-main.o:(main) in archive /tmp/bootprof-link.1.x/0003.pack.a"),
            ">>>               obj/main.o:(main)"
        );
        assert_eq!(
            apply("collect2: error: ld returned 1"),
            "collect2: error: ld returned 1"
        );
        let not_utf8 = b"\xff /tmp/bootprof-link.1.x/0005-util.o".to_vec();
        assert_eq!(renames.apply(not_utf8.clone()), not_utf8);
    }

    #[test]
    fn a_check_stands_for_the_file_it_checked_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("linked");
        std::fs::write(&path, "not an ELF file").unwrap();
        let checked = Checked::new(&path, &path);
        assert!(checked.result.is_ok());
        assert!(checked.stands(&path));
        // A linker run again writes another file in its place.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "another one").unwrap();
        assert!(!checked.stands(&path));
        std::fs::remove_file(&path).unwrap();
        assert!(!checked.stands(&path));
    }

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
