//! Gather the relocatable inputs: takes a [`LinkLine`]; hands on [`Gathered`]: the line's
//! arguments with its sources compiled, and the inputs to rewrite (each object and archive, or
//! the one object a partial link made of all the objects).
//!
//! Two ways:
//! - default: each object input and each archive is an input of its own (rewritten in parallel);
//! - `--partial-link`: all object inputs are first partially linked (`DRIVER -r`, with the
//!   user's driver, linker and code-generation flags) into one object, which takes the place of
//!   the first object on the line.
//!
//! Inputs that hold compiler IR (`-flto`) have no code to rewrite: [`lto`] runs the link's own
//! code generation first, and its objects take their place.
//!
//! Sources on the line are compiled first, with the line's compile flags, so their sites are
//! rewritten too.

use crate::args::{ArgKind, LinkLine};
use crate::error::Result;
use crate::{driver, lto};
use bootprof_format::file::FileKind;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What gathering produced.
#[derive(Debug, Default)]
pub struct Gathered {
    /// The link line's arguments, sources replaced by their objects and a partial link's
    /// object in place of the first object; objects made by LTO code generation are appended.
    pub args: Vec<String>,
    /// The order of `args` on the final line (indices; LTO's objects where the IR was).
    pub order: Vec<usize>,
    /// The inputs to rewrite, in line order.
    pub inputs: Vec<Input>,
    /// Indices of arguments to drop from the line (objects merged by a partial link).
    pub removed: BTreeSet<usize>,
    /// Archives among the inputs.
    pub archives: usize,
    /// Lines for `--verbose`.
    pub notes: Vec<String>,
    /// Time spent in the link that ran LTO code generation, if one ran.
    pub codegen: std::time::Duration,
}

/// One input to rewrite.
#[derive(Debug, Clone)]
pub struct Input {
    /// Index of the argument it replaces.
    pub arg: usize,
    /// The file.
    pub path: PathBuf,
    /// What it is.
    pub kind: InputKind,
    /// Its bytes, when mapped already to see what it is (the rewrite maps it otherwise).
    pub data: Option<Arc<memmap2::Mmap>>,
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
    let args = compile_sources(line, dir)?;
    let mut g = Gathered {
        order: (0..args.len()).collect(),
        args,
        ..Gathered::default()
    };
    let found = classify_inputs(line, &g.args);
    g.archives = found.archives.len();
    let archives: Vec<Input> = found.archives.iter().map(|(j, _)| j.clone()).collect();
    let generated = lto::generated_at_link_time(line, found.ir);
    let objects = if generated.any() {
        generate_code(line, &mut g, found, generated, dir)?
    } else {
        found.objects.into_iter().map(|(j, _)| j).collect()
    };
    if line.options.partial_link && !objects.is_empty() {
        let out = partial_link(line, &objects, dir)?;
        let first = objects[0].arg;
        g.removed.extend(objects.iter().skip(1).map(|j| j.arg));
        g.args[first] = out.display().to_string();
        g.inputs.push(Input {
            arg: first,
            path: out,
            kind: InputKind::Object,
            data: None,
        });
    } else {
        g.inputs.extend(objects);
    }
    g.inputs.extend(archives);
    Ok(g)
}

/// The line's objects and archives, and the IR among them.
struct Classified {
    /// Objects (and files named like objects that are not ELF), each with the IR it holds.
    objects: Vec<(Input, Option<lto::Ir>)>,
    /// Archives, each with the IR its members hold.
    archives: Vec<(Input, lto::IrKinds)>,
    /// All the IR found.
    ir: lto::IrKinds,
}

/// Sorts the arguments `args` of `line` into objects and archives (`-l` libraries found as
/// archives in the user's directories included).
fn classify_inputs(line: &LinkLine, args: &[String]) -> Classified {
    let mut c = Classified {
        objects: Vec::new(),
        archives: Vec::new(),
        ir: lto::IrKinds::default(),
    };
    for (arg, kind) in line.kinds.iter().enumerate() {
        let path = match kind {
            ArgKind::File | ArgKind::Source => PathBuf::from(&args[arg]),
            ArgKind::Library => match line
                .library_name(arg)
                .and_then(|n| line.find_static_library(n))
            {
                Some(path) => {
                    let data = crate::elf::map(&path).ok().map(Arc::new);
                    c.push_archive(arg, path, data);
                    continue;
                }
                None => continue,
            },
            _ => continue,
        };
        // Mapped once, here, for its first bytes and its section headers (at its end), and
        // kept for the rewrite.
        let data = crate::elf::map(&path).ok().map(Arc::new);
        let bytes = data.as_deref().map_or(&[][..], |d| &d[..]);
        let (kind, ir) = match bootprof_format::file::classify(bytes) {
            FileKind::Archive => {
                c.push_archive(arg, path, data);
                continue;
            }
            FileKind::Bitcode => (InputKind::Object, Some(lto::Ir::Llvm)),
            FileKind::Object => (InputKind::Object, lto::object_ir(bytes)),
            FileKind::Other if named_like_an_object(&path) => (InputKind::NotElf, None),
            FileKind::Other | FileKind::OtherElf => continue,
        };
        c.ir.add(ir);
        let input = Input {
            arg,
            path,
            kind,
            data,
        };
        c.objects.push((input, ir));
    }
    c
}

impl Classified {
    /// Adds the archive at `path` (its bytes `data`), argument `arg`, with the IR of its
    /// members.
    fn push_archive(&mut self, arg: usize, path: PathBuf, data: Option<Arc<memmap2::Mmap>>) {
        let kinds = (data.as_deref())
            .map(|d| lto::archive_ir(d, &path))
            .unwrap_or_default();
        self.ir.add_all(kinds);
        self.archives.push((
            Input {
                arg,
                path,
                kind: InputKind::Archive,
                data,
            },
            kinds,
        ));
    }
}

/// Runs LTO code generation for the IR kinds `generated` and puts the objects it made on the
/// line where the first input holding such IR was; the IR objects leave the line (archives stay:
/// the members code generation took are defined by its objects now, so the final link takes
/// them no more). Returns the objects to rewrite, in line order.
fn generate_code(
    line: &LinkLine,
    g: &mut Gathered,
    found: Classified,
    generated: lto::IrKinds,
    dir: &Path,
) -> Result<Vec<Input>> {
    let started = std::time::Instant::now();
    let made = lto::generate(line, &g.args, generated, dir)?;
    g.codegen = started.elapsed();
    let place = found
        .objects
        .iter()
        .filter(|(_, ir)| generated.has(*ir))
        .map(|(j, _)| j.arg)
        .chain(
            found
                .archives
                .iter()
                .filter(|(_, kinds)| kinds.gcc && generated.gcc || kinds.llvm && generated.llvm)
                .map(|(j, _)| j.arg),
        )
        .min()
        .unwrap_or(g.args.len());
    if generated.gcc && !line.args.iter().any(|a| a == "-pg" || a == "-p") {
        if let Some((j, _)) = found.objects.iter().find(|(j, ir)| {
            *ir == Some(lto::Ir::Gcc)
                && crate::elf::map(&j.path).is_ok_and(|d| lto::gcc_compiled_with_pg(&d))
        }) {
            g.notes.push(format!(
                "note: {} was compiled with -pg, but the link line has no -pg: gcc's LTO code \
                 generation makes no hooks then (nor would it without bootprof-link); add -pg to \
                 the link",
                j.path.display()
            ));
        }
    }
    let mut objects = Vec::new();
    for (input, ir) in found.objects {
        if generated.has(ir) {
            g.removed.insert(input.arg);
        } else {
            objects.push(input);
        }
    }
    if line.options.verbose {
        g.notes.push(format!(
            "LTO code generation made {} object(s) from the IR inputs",
            made.len()
        ));
    }
    let at = g
        .order
        .iter()
        .position(|&i| i == place)
        .unwrap_or(g.order.len());
    let first_new = g.args.len();
    for path in made {
        objects.push(Input {
            arg: g.args.len(),
            kind: InputKind::Object,
            path,
            data: None,
        });
        g.args.push(
            objects
                .last()
                .expect("just pushed")
                .path
                .display()
                .to_string(),
        );
    }
    g.order.splice(at..at, first_new..g.args.len());
    let mut rank = vec![0; g.args.len()];
    for (r, &i) in g.order.iter().enumerate() {
        rank[i] = r;
    }
    objects.sort_by_key(|j| rank[j.arg]);
    Ok(objects)
}

/// Partially links `objects` into one object in `dir`.
fn partial_link(line: &LinkLine, objects: &[Input], dir: &Path) -> Result<PathBuf> {
    let out = dir.join("partial.o");
    let mut cmd = std::process::Command::new(&line.driver);
    cmd.args(partial_link_flags(line)).args(["-r", "-nostdlib"]);
    cmd.arg("-o").arg(&out);
    for j in objects {
        cmd.arg(&j.path);
    }
    driver::run_checked(cmd)?;
    Ok(out)
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
