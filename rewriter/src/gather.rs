//! Gather the relocatable inputs: takes a [`LinkLine`]; hands on the link line with every input
//! that holds sites replaced by its rewritten private copy, and what the inputs reference.
//!
//! Two ways, one rewriting core ([`crate::rewrite_object`]):
//! - default: each object input (and each archive, member by member) is rewritten on its own, in
//!   parallel, into the private directory;
//! - `--partial-link` (chosen automatically when an input is an LTO object, whose code exists
//!   only after code generation): all object inputs are first partially linked (`DRIVER -r`,
//!   with the user's driver, linker and code-generation flags) into one object, which is
//!   rewritten and takes the place of the first object on the line.
//!
//! Sources on the line are compiled first, with the line's compile flags, so their sites are
//! rewritten too.

use crate::archive;
use crate::args::{ArgKind, LinkLine};
use crate::error::{Error, Location, Result};
use crate::Rewritten;
use bootprof_format::Kind;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What gathering produced.
#[derive(Debug, Default)]
pub struct Gathered {
    /// The link line's arguments with rewritten inputs substituted.
    pub args: Vec<String>,
    /// Probe symbols referenced by the inputs, with their kind.
    pub referenced: BTreeMap<Vec<u8>, Kind>,
    /// Probe symbols defined by the inputs (no stub for them).
    pub defined: BTreeSet<Vec<u8>>,
    /// Object files looked at (archive members included).
    pub objects: usize,
    /// Archives looked at.
    pub archives: usize,
    /// Relocations in the objects looked at.
    pub relocations: usize,
    /// Sites patched.
    pub sites: usize,
    /// Whether an input calls the runtime's API.
    pub uses_runtime: bool,
    /// Lines for `--verbose`, in input order.
    pub notes: Vec<String>,
}

/// A guard of `bootprof.h` whose out-of-line call goes to `symbol`, and where it is.
#[derive(Debug, Clone)]
struct GuardCall {
    at: Location,
    symbol: Vec<u8>,
}

/// One input to look at.
struct Job {
    /// Index of the argument it replaces.
    arg: usize,
    path: PathBuf,
}

/// The outcome of one job.
#[derive(Default)]
struct Done {
    replacement: Option<PathBuf>,
    referenced: Vec<(Vec<u8>, Kind)>,
    defined: Vec<Vec<u8>>,
    objects: usize,
    relocations: usize,
    sites: usize,
    uses_runtime: bool,
    notes: Vec<String>,
    guard_calls: Vec<GuardCall>,
}

impl Done {
    fn absorb(&mut self, file: &str, r: &Rewritten, verbose: bool) {
        self.objects += 1;
        self.relocations += r.relocations;
        self.sites += r.sites.len();
        self.uses_runtime |= r.uses_runtime;
        self.referenced
            .extend(r.referenced.iter().map(|p| (p.name.clone(), p.kind)));
        self.defined.extend(r.defined.iter().cloned());
        self.guard_calls.extend(
            r.sites
                .iter()
                .filter(|s| s.form == bootprof_format::Form::Guard && s.kind == Kind::Probe)
                .map(|s| GuardCall {
                    at: Location {
                        section: Some(s.section_name.clone()),
                        offset: Some(s.offset),
                        symbol: Some(String::from_utf8_lossy(&s.symbol).into_owned()),
                        ..Location::file(file)
                    },
                    symbol: s.symbol.clone(),
                }),
        );
        if verbose && (!r.sites.is_empty() || !r.not_sites.is_empty()) {
            self.notes.push(format!(
                "{file}: {} sites, {} other references to probe symbols",
                r.sites.len(),
                r.not_sites.len()
            ));
            for s in &r.sites {
                self.notes.push(format!(
                    "{file}: section `{}` offset {:#x}: {} {} in {}+{:#x}",
                    s.section_name,
                    s.offset,
                    s.kind.name(),
                    String::from_utf8_lossy(&s.symbol),
                    String::from_utf8_lossy(&s.function),
                    s.func_offset
                ));
            }
            for n in &r.not_sites {
                self.notes.push(format!("{}: not a site: {}", n.at, n.why));
            }
        }
    }
}

/// What kind of file an input is, by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileClass {
    /// A relocatable ELF object.
    Object,
    /// LLVM bitcode (clang `-flto`).
    Bitcode,
    /// An archive.
    Archive,
    /// Anything else ELF (shared library) or a linker script: the linker's business.
    Other,
    /// Not ELF, but named like an object.
    NotElf,
}

fn classify_file(path: &Path, data: &[u8]) -> FileClass {
    if archive::is_archive(data) {
        return FileClass::Archive;
    }
    if data.starts_with(b"BC\xc0\xde") || data.starts_with(&[0xde, 0xc0, 0x17, 0x0b]) {
        return FileClass::Bitcode;
    }
    if data.starts_with(b"\x7fELF") {
        if data.len() >= 18 && u16::from_le_bytes([data[16], data[17]]) == 1 {
            return FileClass::Object;
        }
        // A big-endian relocatable object is still an object (rewrite_object says why not).
        if data.len() >= 18 && data[5] == 2 && u16::from_be_bytes([data[16], data[17]]) == 1 {
            return FileClass::Object;
        }
        return FileClass::Other;
    }
    let objectish = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "o" | "obj" | "lo"));
    if objectish {
        FileClass::NotElf
    } else {
        FileClass::Other
    }
}

/// Whether the object at `path` carries gcc's LTO intermediate code (`.gnu.lto_*` sections): its
/// real code, and so its sites, exist only after code generation. Reads section headers only.
fn has_gcc_lto_sections(path: &Path) -> bool {
    use object::read::elf::FileHeader;
    let Ok(data) = map(path) else {
        return false;
    };
    let Ok(header) = crate::scan::FileHeader64::parse(&*data) else {
        return false;
    };
    let Ok(sections) = header.sections(object::LittleEndian, &*data) else {
        return false;
    };
    sections.iter().any(|s| {
        sections
            .section_name(object::LittleEndian, s)
            .is_ok_and(|n| n.starts_with(b".gnu.lto_"))
    })
}

/// Maps `path` read-only.
pub(crate) fn map(path: &Path) -> Result<memmap2::Mmap> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the map is read-only and private to this process; like every linker we assume
    // inputs are not truncated under us while the link runs.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))
}

/// A unique, deterministic name for the private copy of argument `arg`.
fn private_name(dir: &Path, arg: usize, path: &Path) -> PathBuf {
    let base = path.file_name().and_then(|n| n.to_str()).unwrap_or("input");
    dir.join(format!("{arg:04}-{base}"))
}

fn run_job(job: &Job, dir: &Path, verbose: bool) -> Result<Done> {
    let data = map(&job.path)?;
    let file = job.path.display().to_string();
    let mut done = Done::default();
    match classify_file(&job.path, &data) {
        FileClass::NotElf => return Err(Error::NotElf(Location::file(file))),
        FileClass::Other | FileClass::Bitcode => {}
        FileClass::Object => {
            let r = crate::rewrite_object(&data, &file)?;
            done.absorb(&file, &r, verbose);
            if let Some(bytes) = r.bytes {
                let out = private_name(dir, job.arg, &job.path);
                std::fs::write(&out, bytes).map_err(|e| Error::io(&out, e))?;
                done.replacement = Some(out);
            }
        }
        FileClass::Archive => {
            let new = archive::rewrite_archive(&data, &job.path, |member, bytes| {
                let name = format!("{file}({member})");
                let r = crate::rewrite_object(bytes, &name)?;
                done.absorb(&name, &r, verbose);
                Ok(r.bytes)
            })?;
            if let Some(bytes) = new {
                let out = private_name(dir, job.arg, &job.path);
                std::fs::write(&out, bytes).map_err(|e| Error::io(&out, e))?;
                done.replacement = Some(out);
            }
        }
    }
    Ok(done)
}

/// Runs `jobs` on up to `available_parallelism` threads; results in job order.
fn run_jobs(jobs: &[Job], dir: &Path, verbose: bool) -> Vec<Result<Done>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Done>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = run_job(job, dir, verbose);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// Compiles the sources on the line into `dir` with the line's compile flags; returns the line's
/// arguments with each source replaced by its object.
fn compile_sources(line: &LinkLine, dir: &Path) -> Result<Vec<String>> {
    let mut args = line.args.clone();
    let flags = compile_flags(line);
    for (i, kind) in line.kinds.iter().enumerate() {
        if *kind != ArgKind::Source {
            continue;
        }
        let src = Path::new(&line.args[i]);
        let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("src");
        let out = dir.join(format!("{i:04}-{stem}.o"));
        let mut cmd = std::process::Command::new(&line.driver);
        cmd.args(&flags).arg("-c").arg(src).arg("-o").arg(&out);
        crate::link::run_checked(cmd)?;
        args[i] = out.display().to_string();
    }
    Ok(args)
}

/// The options of the line that matter to compiling and code generation.
fn compile_flags(line: &LinkLine) -> Vec<String> {
    const LINK_ONLY: &[&str] = &[
        "-shared",
        "-static",
        "-static-pie",
        "-pie",
        "-no-pie",
        "-rdynamic",
        "-nostdlib",
        "-nostartfiles",
        "-nodefaultlibs",
        "-s",
        "-r",
    ];
    const LINK_VALUE: &[&str] = &["-o", "-Xlinker", "-T", "-L", "-l", "-u", "-e", "-z"];
    let mut out = Vec::new();
    let mut i = 0;
    while i < line.args.len() {
        let a = &line.args[i];
        if line.kinds[i] != ArgKind::Option {
            i += 1;
            continue;
        }
        if LINK_VALUE.contains(&a.as_str()) {
            i += 2;
            continue;
        }
        let link_only = LINK_ONLY.contains(&a.as_str())
            || a.starts_with("-Wl,")
            || a.starts_with("-l")
            || a.starts_with("-L")
            || a.starts_with("-o");
        if !link_only {
            out.push(a.clone());
        }
        i += 1;
    }
    out
}

/// The options passed to a partial link: those that choose the driver's tools and code
/// generation (LTO happens here).
fn partial_link_flags(line: &LinkLine) -> Vec<String> {
    compile_flags(line)
        .into_iter()
        .filter(|a| {
            [
                "-f",
                "-m",
                "-O",
                "-g",
                "-B",
                "--sysroot",
                "-pthread",
                "-flto",
            ]
            .iter()
            .any(|p| a.starts_with(p))
        })
        .collect()
}

/// Gathers and rewrites the inputs of `line` into `dir`.
pub fn gather(line: &LinkLine, dir: &Path) -> Result<Gathered> {
    let mut args = compile_sources(line, dir)?;
    let verbose = line.options.verbose;
    let mut g = Gathered::default();

    // Which arguments are objects and archives.
    let mut objects = Vec::new();
    let mut archives = Vec::new();
    let mut lto = false;
    for (i, kind) in line.kinds.iter().enumerate() {
        match kind {
            ArgKind::File | ArgKind::Source => {
                let path = PathBuf::from(&args[i]);
                let mut head = [0u8; 18];
                let n = std::fs::File::open(&path)
                    .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
                    .unwrap_or(0);
                match classify_file(&path, &head[..n]) {
                    FileClass::Archive => archives.push(Job { arg: i, path }),
                    FileClass::Bitcode => {
                        lto = true;
                        objects.push(Job { arg: i, path });
                    }
                    FileClass::Object | FileClass::NotElf => objects.push(Job { arg: i, path }),
                    FileClass::Other => {}
                }
            }
            ArgKind::Library => {
                if let Some(path) = line
                    .library_name(i)
                    .and_then(|n| line.find_static_library(n))
                {
                    archives.push(Job { arg: i, path });
                }
            }
            _ => {}
        }
    }
    g.archives = archives.len();

    let mut partial = line.options.partial_link;
    if !partial && !lto {
        // gcc's LTO objects are ELF, told apart by their sections (clang's bitcode by its magic).
        lto = objects.iter().any(|j| has_gcc_lto_sections(&j.path));
    }
    if lto && !partial {
        partial = true;
        if verbose {
            g.notes
                .push("LTO objects on the line: gathering by a partial link".into());
        }
    }
    let mut removed = BTreeSet::new();
    let mut jobs: Vec<Job> = Vec::new();
    if partial && !objects.is_empty() {
        let out = dir.join("partial.o");
        let mut cmd = std::process::Command::new(&line.driver);
        cmd.args(partial_link_flags(line)).args(["-r", "-nostdlib"]);
        if lto && !line.driver.contains("clang") {
            cmd.arg("-flinker-output=nolto-rel");
        }
        cmd.arg("-o").arg(&out);
        for j in &objects {
            cmd.arg(&j.path);
        }
        crate::link::run_checked(cmd)?;
        let first = objects[0].arg;
        removed.extend(objects.iter().skip(1).map(|j| j.arg));
        jobs.push(Job {
            arg: first,
            path: out.clone(),
        });
        args[first] = out.display().to_string();
    } else {
        jobs.extend(objects);
    }
    jobs.extend(archives);

    let mut guard_calls = Vec::new();
    for (job, result) in jobs.iter().zip(run_jobs(&jobs, dir, verbose)) {
        let done = result?;
        guard_calls.extend(done.guard_calls);
        g.objects += done.objects;
        g.relocations += done.relocations;
        g.sites += done.sites;
        g.uses_runtime |= done.uses_runtime;
        for (name, kind) in done.referenced {
            g.referenced.insert(name, kind);
        }
        g.defined.extend(done.defined);
        g.notes.extend(done.notes);
        if let Some(new) = done.replacement {
            let new = new.display().to_string();
            match line.kinds[job.arg] {
                // `-l name` is two arguments: the path replaces both.
                ArgKind::Library if line.args[job.arg] == "-l" => {
                    args[job.arg] = new;
                    removed.insert(job.arg + 1);
                }
                _ => args[job.arg] = new,
            }
        }
    }
    // A guard's out-of-line call keeps only what bootprof's stub and dispatcher keep (every
    // register but r11; the stack unaligned): it must not reach a function the program defines.
    if let Some(c) = guard_calls.iter().find(|c| g.defined.contains(&c.symbol)) {
        return Err(Error::Refused {
            at: c.at.clone(),
            what: format!(
                "a bootprof.h guard calls `{}`, which the program defines itself; the guard's \
                 out-of-line call is only safe into bootprof's stub (compile with \
                 -DBOOTPROF_CALL_SITES, or drop the definition)",
                String::from_utf8_lossy(&c.symbol)
            ),
        });
    }
    for name in &g.defined {
        g.referenced.remove(name);
    }
    g.args = args
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !removed.contains(i))
        .map(|(_, a)| a)
        .collect();
    Ok(g)
}
