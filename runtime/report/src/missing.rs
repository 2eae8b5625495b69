//! Why `bootprof run`'s session holds no lane: takes the program as it was named, how it ended
//! and the session directory; hands on one sentence saying what happened, from what can be
//! checked after the fact: the directory (removed, or not writable), the program (not found, a
//! script, no site table, a table but no runtime), or, when the program could have recorded, how
//! it ended before it did.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Why no process of `program`'s run, which ended as `ended` says (`exit status 3`, `killed by
/// SIGKILL`), recorded into the session directory `dir`.
pub fn why_no_lane(program: &OsStr, ended: &str, dir: &Path) -> String {
    if let Some(why) = unwritable(dir) {
        return format!("{why}; the program ended with {ended}");
    }
    let Some(path) = find_program(program) else {
        return format!(
            "`{}` was not found to check it; it ended with {ended}",
            program.to_string_lossy()
        );
    };
    let shown = path.display();
    if std::fs::read(&path).is_ok_and(|d| d.starts_with(b"#!")) {
        return format!(
            "{shown} is a script, and no program it ran recorded (were they linked by \
             bootprof-link?); it ended with {ended}"
        );
    }
    if let Err(e) = crate::list::list(&path) {
        return match e {
            crate::Error::NoTable(_) => {
                format!("{e}; nor did any program it ran record; it ended with {ended}")
            }
            e => format!("{e}; it ended with {ended}"),
        };
    }
    match runtime(&path) {
        Runtime::Defined | Runtime::Required => format!(
            "{shown} carries the bootprof runtime, but ended ({ended}) without a lane: before the \
             runtime started (which it does in its constructors), or the runtime could not \
             create its lane (it then says why on stderr)"
        ),
        Runtime::Weak => format!(
            "{shown} has a site table but no bootprof runtime to record with: nothing defines \
             bootprof_register, to which it holds only a weak reference (it was linked with \
             --no-runtime)"
        ),
        Runtime::Absent => format!(
            "{shown} has a site table but no bootprof runtime to record with: it neither defines \
             nor refers to bootprof_register (a Rust program that does not depend on \
             bootprof-runtime, or a binary linked with --no-runtime and stripped)"
        ),
    }
}

/// Why the session directory `dir` could not take a lane, if it could not: it is gone, or it is
/// not writable.
fn unwritable(dir: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    if !dir.is_dir() {
        return Some(format!(
            "the session directory {} was removed while the program ran",
            dir.display()
        ));
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: access reads a NUL-terminated path we own.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 {
        return None;
    }
    Some(format!(
        "the session directory {} is not writable: {}",
        dir.display(),
        std::io::Error::last_os_error()
    ))
}

/// `program` as the system finds it: a path when it holds a `/`, else the first match in `PATH`.
pub fn find_program(program: &OsStr) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
}

/// What a binary says of `bootprof_register`, the runtime's entry point.
enum Runtime {
    /// It defines it: the runtime is linked in.
    Defined,
    /// It needs it (a strong reference): the dynamic loader finds it in a shared library, or
    /// does not start the program.
    Required,
    /// A weak reference alone, which `bootprof-link`'s constructor holds: without a definition
    /// it is 0, and nothing registers.
    Weak,
    /// No trace of it.
    Absent,
}

/// What the binary at `path` says of `bootprof_register`.
fn runtime(path: &Path) -> Runtime {
    use object::{Object, ObjectSymbol, SymbolSection};
    let Ok(data) = std::fs::read(path) else {
        return Runtime::Absent;
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Runtime::Absent;
    };
    // The runtime's note: a stripped executable exports none of its symbols.
    if file.section_by_name(".note.bootprof").is_some() {
        return Runtime::Defined;
    }
    let mut found = Runtime::Absent;
    for s in file.symbols().chain(file.dynamic_symbols()) {
        if s.name() != Ok("bootprof_register") {
            continue;
        }
        if s.is_definition() {
            return Runtime::Defined;
        }
        if s.section() == SymbolSection::Undefined {
            found = if s.is_weak() {
                Runtime::Weak
            } else {
                Runtime::Required
            };
        }
    }
    found
}
