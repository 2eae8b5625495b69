//! Gather the relocatable inputs: takes a [`LinkLine`]; hands on [`Gathered`]: the line's
//! arguments with its sources compiled, and the inputs to rewrite (each object and archive, or
//! the one object a partial link made of all the objects).
//!
//! Two ways:
//! - default: each object input and each archive is an input of its own (rewritten in parallel);
//! - `--partial-link` (chosen automatically when an input is an LTO object, whose code exists
//!   only after code generation): all object inputs are first partially linked (`DRIVER -r`,
//!   with the user's driver, linker and code-generation flags) into one object, which takes the
//!   place of the first object on the line.
//!
//! Sources on the line are compiled first, with the line's compile flags, so their sites are
//! rewritten too.

use crate::args::{sniff, ArgKind, LinkLine};
use crate::driver;
use crate::error::Result;
use bootprof_format::file::FileKind;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What gathering produced.
#[derive(Debug, Default)]
pub struct Gathered {
    /// The link line's arguments, sources replaced by their objects and a partial link's
    /// object in place of the first object.
    pub args: Vec<String>,
    /// The inputs to rewrite, in line order.
    pub inputs: Vec<Input>,
    /// Indices of arguments to drop from the line (objects merged by a partial link).
    pub removed: BTreeSet<usize>,
    /// Archives among the inputs.
    pub archives: usize,
    /// Lines for `--verbose`.
    pub notes: Vec<String>,
}

/// One input to rewrite.
#[derive(Debug)]
pub struct Input {
    /// Index of the argument it replaces.
    pub arg: usize,
    /// The file.
    pub path: PathBuf,
    /// What it is.
    pub kind: InputKind,
}

/// What an input is, by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// A relocatable ELF object.
    Object,
    /// A static archive: its members are rewritten.
    Archive,
    /// Named like an object, but not ELF: an error when rewritten.
    NotElf,
}

/// Whether `path` is named like an object file.
fn named_like_an_object(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "o" | "obj" | "lo"))
}

/// Gathers the inputs of `line`, compiling its sources into `dir`.
pub fn gather(line: &LinkLine, dir: &Path) -> Result<Gathered> {
    let mut g = Gathered {
        args: compile_sources(line, dir)?,
        ..Gathered::default()
    };
    // Which arguments are objects and archives.
    let mut objects = Vec::new();
    let mut archives = Vec::new();
    let mut lto = false;
    for (arg, kind) in line.kinds.iter().enumerate() {
        match kind {
            ArgKind::File | ArgKind::Source => {
                let path = PathBuf::from(&g.args[arg]);
                let kind = match sniff(&path) {
                    FileKind::Archive => {
                        archives.push(Input {
                            arg,
                            path,
                            kind: InputKind::Archive,
                        });
                        continue;
                    }
                    FileKind::Bitcode => {
                        lto = true;
                        InputKind::Object
                    }
                    FileKind::Object => InputKind::Object,
                    FileKind::Other if named_like_an_object(&path) => InputKind::NotElf,
                    FileKind::Other | FileKind::OtherElf => continue,
                };
                objects.push(Input { arg, path, kind });
            }
            ArgKind::Library => {
                if let Some(path) = line
                    .library_name(arg)
                    .and_then(|n| line.find_static_library(n))
                {
                    archives.push(Input {
                        arg,
                        path,
                        kind: InputKind::Archive,
                    });
                }
            }
            _ => {}
        }
    }
    g.archives = archives.len();
    if !line.options.partial_link && !lto {
        // gcc's LTO objects are ELF, told apart by their sections (clang's bitcode by its magic).
        lto = objects.iter().any(|j| has_gcc_lto_sections(&j.path));
    }
    let partial = line.options.partial_link || lto;
    if lto && !line.options.partial_link && line.options.verbose {
        g.notes
            .push("LTO objects on the line: gathering by a partial link".into());
    }
    if partial && !objects.is_empty() {
        let out = partial_link(line, &objects, lto, dir)?;
        let first = objects[0].arg;
        g.removed.extend(objects.iter().skip(1).map(|j| j.arg));
        g.args[first] = out.display().to_string();
        g.inputs.push(Input {
            arg: first,
            path: out,
            kind: InputKind::Object,
        });
    } else {
        g.inputs.extend(objects);
    }
    g.inputs.extend(archives);
    Ok(g)
}

/// Partially links `objects` into one object in `dir` (running LTO code generation when `lto`).
fn partial_link(line: &LinkLine, objects: &[Input], lto: bool, dir: &Path) -> Result<PathBuf> {
    let out = dir.join("partial.o");
    let mut cmd = std::process::Command::new(&line.driver);
    cmd.args(partial_link_flags(line)).args(["-r", "-nostdlib"]);
    if lto && !line.driver.contains("clang") {
        cmd.arg("-flinker-output=nolto-rel");
    }
    cmd.arg("-o").arg(&out);
    for j in objects {
        cmd.arg(&j.path);
    }
    driver::run_checked(cmd)?;
    Ok(out)
}

/// Whether the object at `path` carries gcc's LTO intermediate code (`.gnu.lto_*` sections): its
/// real code, and so its sites, exist only after code generation. Reads section headers only.
fn has_gcc_lto_sections(path: &Path) -> bool {
    use object::read::elf::FileHeader;
    let Ok(data) = crate::elf::map(path) else {
        return false;
    };
    let Ok(header) = crate::elf::FileHeader64::parse(&*data) else {
        return false;
    };
    let Ok(sections) = header.sections(crate::elf::LE, &*data) else {
        return false;
    };
    sections.iter().any(|s| {
        sections
            .section_name(crate::elf::LE, s)
            .is_ok_and(|n| n.starts_with(b".gnu.lto_"))
    })
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
        driver::run_checked(cmd)?;
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
