//! The runtime library as `bootprof-link` links it: takes the link line and the runtime the
//! `bootprof-link` executable carries ([`Embedded`]: two small relocatable objects prelinked from
//! the `bootprof-runtime` staticlib when `bootprof-link` was built, one for executables and one
//! for shared objects ([`Output`]), and the C header); hands on the arguments that link the
//! runtime, after unpacking it into the per-user cache ([`crate::cache`]) once.
//! `BOOTPROF_RUNTIME` names another runtime instead, for both: an object, linked as it is, or an
//! archive (`libbootprof_runtime_c.a`), prelinked ([`crate::prelink`]) once into an object beside
//! it (the archive itself is linked when that fails).
//!
//! Executables and shared objects alike carry the runtime; of several copies in one process, the
//! executable's serves, found by the others through a note its runtime object carries
//! (runtime/src/serving.rs), else the one the global lookup scope resolves the entry points to.
//!
//! The same files answer `--print-runtime`, `--print-shared-runtime`, `--print-include-dir` and
//! `--print-pkg-config-dir` ([`Query`]): where a build finds the header and the runtime without
//! bootprof's sources.

use crate::args::{ArgKind, LinkLine};
use crate::error::{Error, Result};
use crate::stubs::{REGISTER_SYMBOL, UNREGISTER_SYMBOL};
use crate::{cache, prelink};
use std::path::{Path, PathBuf};

/// The runtime a `bootprof-link` executable carries, built into it (see `runtime/cli/build.rs`).
pub struct Embedded {
    /// The prelinked whole runtime executables carry (initial-exec thread-locals).
    pub object: &'static [u8],
    /// The prelinked whole runtime shared objects carry (general-dynamic thread-locals, which a
    /// library loaded by `dlopen` needs; and the rule for which copy serves).
    pub shared_object: &'static [u8],
    /// The prelinked lean runtime executables carry: it keeps the site tables and loads the
    /// runtime library when something asks for the runtime.
    pub lean: &'static [u8],
    /// The prelinked lean runtime shared objects carry.
    pub lean_shared: &'static [u8],
    /// The runtime library the lean runtime loads (`libbootprof.so`).
    pub library: &'static [u8],
    /// `runtime/include/bootprof.h`.
    pub header: &'static [u8],
    /// The package version, for the pkg-config file.
    pub version: &'static str,
    /// A name for the files above that changes with their contents: their directory in the
    /// cache.
    pub id: &'static str,
}

/// What a link makes, which decides the runtime object it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// An executable (position-independent or not, static or not).
    Executable,
    /// A shared object (`-shared`).
    SharedObject,
}

/// Which runtime a link carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carried {
    /// The whole runtime, linked in.
    Whole,
    /// The lean runtime, which loads the runtime library ([`LIBRARY`]) when asked.
    Lean,
}

impl Output {
    /// The runtime object's file name in its cache directory.
    fn object(self, carried: Carried) -> &'static str {
        match (self, carried) {
            (Output::Executable, Carried::Whole) => "bootprof_runtime.o",
            (Output::SharedObject, Carried::Whole) => "bootprof_runtime_shared.o",
            (Output::Executable, Carried::Lean) => "bootprof_lean.o",
            (Output::SharedObject, Carried::Lean) => "bootprof_lean_shared.o",
        }
    }
}
/// The header's directory in the cache directory (what `-I` names).
const INCLUDE: &str = "include";
/// The pkg-config file's directory in the cache directory (what `PKG_CONFIG_PATH` names).
const PKG_CONFIG: &str = "pkgconfig";
/// The runtime library's file name in the cache directory.
pub const LIBRARY: &str = "libbootprof.so";

impl Embedded {
    /// The cache directory holding the objects, the runtime library, `include/bootprof.h` and
    /// `pkgconfig/bootprof.pc`, unpacked now where missing.
    pub fn unpacked(&self) -> Result<PathBuf> {
        cache::unpack(self.id, |dir| {
            vec![
                (
                    Output::Executable.object(Carried::Whole),
                    self.object.into(),
                ),
                (
                    Output::SharedObject.object(Carried::Whole),
                    self.shared_object.into(),
                ),
                (Output::Executable.object(Carried::Lean), self.lean.into()),
                (
                    Output::SharedObject.object(Carried::Lean),
                    self.lean_shared.into(),
                ),
                (LIBRARY, self.library.into()),
                ("include/bootprof.h", self.header.into()),
                (
                    "pkgconfig/bootprof.pc",
                    self.pkg_config(dir).into_bytes().into(),
                ),
            ]
        })
    }

    /// The pkg-config file for a cache directory `dir`: the compile flags that find the header.
    /// No `Libs`: `bootprof-link` links the runtime itself.
    fn pkg_config(&self, dir: &Path) -> String {
        format!(
            "prefix={}\n\
             includedir=${{prefix}}/{INCLUDE}\n\
             \n\
             Name: bootprof\n\
             Description: bootprof's probe header (bootprof.h); link through bootprof-link, which \
             links the runtime\n\
             Version: {}\n\
             Cflags: -I${{includedir}}\n",
            dir.display(),
            self.version
        )
    }

    /// The runtime a link of `output` would use: `BOOTPROF_RUNTIME` when set (and not empty),
    /// for either, and always whole; else the one carried for `output`, unpacked.
    pub fn object_to_link(&self, output: Output, carried: Carried) -> Result<(PathBuf, Carried)> {
        match std::env::var_os("BOOTPROF_RUNTIME").filter(|p| !p.is_empty()) {
            Some(path) => {
                let path = PathBuf::from(path);
                if is_archive(&path) {
                    Ok((prelinked(&path).unwrap_or(path), Carried::Whole))
                } else if path.is_file() {
                    Ok((path, Carried::Whole))
                } else {
                    Err(Error::Usage(format!(
                        "BOOTPROF_RUNTIME names {}, which is not a file: point it at a runtime \
                         archive (libbootprof_runtime_c.a) or object, or unset it to link the \
                         runtime bootprof-link carries",
                        path.display()
                    )))
                }
            }
            None => Ok((self.unpacked()?.join(output.object(carried)), carried)),
        }
    }
}

/// The runtime library `library` (the bytes of a `libbootprof.so` built with the runtime of
/// cache name `id`), unpacked into the per-user cache where `bootprof-link` of the same build
/// unpacks its: what `bootprof run` hands the programs it runs.
pub fn unpacked_library(id: &str, library: &'static [u8]) -> Result<PathBuf> {
    Ok(cache::unpack(id, |_| vec![(LIBRARY, library.into())])?.join(LIBRARY))
}

/// Whether `path` is an `ar` archive (by its magic).
fn is_archive(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| &magic == b"!<arch>\n")
}

/// The object prelinked from `archive`, beside it (`NAME.o` for `NAME.a`), made now if it is
/// missing or older than the archive; `None` when it cannot be made.
fn prelinked(archive: &Path) -> Option<PathBuf> {
    let cached = archive.with_extension("o");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(object), Some(lib)) = (modified(&cached), modified(archive)) {
        if object >= lib {
            return Some(cached);
        }
    }
    prelink::prelink(archive, &cached, REGISTER_SYMBOL)
        .ok()
        .map(|()| cached)
}

/// What `bootprof-link --print-...` prints: a path, one line, for builds that use bootprof
/// without its sources (`cc -I"$(bootprof-link --print-include-dir)"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    /// `--print-runtime`: the runtime object (or archive) a link of an executable would use.
    Runtime,
    /// `--print-shared-runtime`: the runtime object (or archive) a link of a shared object
    /// would use.
    SharedRuntime,
    /// `--print-include-dir`: the directory holding `bootprof.h`.
    IncludeDir,
    /// `--print-pkg-config-dir`: the directory holding `bootprof.pc`, for `PKG_CONFIG_PATH`.
    PkgConfigDir,
    /// `--print-library`: the runtime library the lean runtime of the programs this
    /// `bootprof-link` links loads (`BOOTPROF_LIBRARY` names another).
    Library,
}

impl Query {
    /// The query `arg` asks, if it is one.
    pub fn parse(arg: &str) -> Option<Query> {
        match arg {
            "--print-runtime" => Some(Query::Runtime),
            "--print-shared-runtime" => Some(Query::SharedRuntime),
            "--print-include-dir" => Some(Query::IncludeDir),
            "--print-pkg-config-dir" => Some(Query::PkgConfigDir),
            "--print-library" => Some(Query::Library),
            _ => None,
        }
    }

    /// The answer for `runtime`, its files unpacked first.
    pub fn answer(self, runtime: &Embedded) -> Result<PathBuf> {
        match self {
            Query::Runtime => Ok(runtime
                .object_to_link(Output::Executable, Carried::Whole)?
                .0),
            Query::SharedRuntime => Ok(runtime
                .object_to_link(Output::SharedObject, Carried::Whole)?
                .0),
            Query::IncludeDir => Ok(runtime.unpacked()?.join(INCLUDE)),
            Query::PkgConfigDir => Ok(runtime.unpacked()?.join(PKG_CONFIG)),
            Query::Library => Ok(runtime.unpacked()?.join(LIBRARY)),
        }
    }
}

pub use crate::wrap::WRAPPED;

/// What links the runtime into a link's output.
#[derive(Debug, Default)]
pub struct RuntimeArgs {
    /// The arguments to add to the link line (none: no runtime).
    pub args: Vec<String>,
    /// When the output carries the lean runtime: the runtime library it loads, whose path goes
    /// into the stubs object (`stubs::LIBRARY_PATH_SYMBOL`).
    pub library: Option<PathBuf>,
}

/// The arguments that link the runtime into `line`'s output, or none: with `--no-runtime`, and
/// for partial links (`-r`, whose sites are rewritten by the final link). A link without the
/// default libraries (`-nostdlib`, `-nodefaultlibs`) gets the runtime when it names the C
/// library itself (which the runtime needs); one that does not is refused, since its table
/// would have no runtime to enable it (`--no-runtime` asks for that). A shared object gets the runtime
/// for shared objects, an executable the other. A Rust program that depends on the
/// `bootprof-runtime` crate has the runtime already (its rlib, with the standard library).
///
/// Which runtime: the lean one ([`Carried::Lean`]), which loads the runtime library when
/// something asks for the runtime, unless the output must carry the whole runtime: with
/// `--embed-runtime`, when an input calls the C API (`calls_api`: the program enables its own
/// probes, and must not depend on a file to do it), for a static link (no `dlopen`), and for
/// the runtime `BOOTPROF_RUNTIME` names. A Rust program that does not depend on the crate gets
/// a runtime object as a C program does (its symbols local, so its `core` never meets the
/// program's). `walks_stacks`: whether an input calls the unwinder's `_Unwind_Backtrace`, which
/// is wrapped only then (lld would otherwise turn the runtime's weak reference to the real one
/// into a strong one, and the program would need `libgcc_s`).
pub fn runtime_args(
    line: &LinkLine,
    runtime: &Embedded,
    calls_api: bool,
    walks_stacks: bool,
) -> Result<RuntimeArgs> {
    let has = |flags: &[&str]| line.args.iter().any(|a| flags.contains(&a.as_str()));
    if line.options.no_runtime || has(&["-r"]) {
        return Ok(RuntimeArgs::default());
    }
    let output = if has(&["-shared"]) {
        Output::SharedObject
    } else {
        Output::Executable
    };
    let whole =
        line.options.embed_runtime || calls_api || has(&["-static", "-static-pie", "--static"]);
    let wanted = if whole { Carried::Whole } else { Carried::Lean };
    // Before `-nodefaultlibs`, which rustc passes to every link (it names the libraries itself).
    let rust = line.args.iter().any(|a| a.ends_with(".rlib"));
    if rust
        && line.args.iter().any(|a| {
            // A Rust program has the runtime when it depends on the crate (one std is enough).
            std::path::Path::new(a)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_runtime_rlib)
        })
    {
        return Ok(RuntimeArgs {
            args: entry_point_args(output, Vec::new(), None, walks_stacks),
            library: None,
        });
    }
    let (object, carried) = runtime.object_to_link(output, wanted)?;
    let exports = exported_names(&object, output);
    // Nothing more: the runtime calls no function of libm (an `-lm` costs GNU ld a read of
    // libm's symbols, once more when the program names it too).
    let mut libraries = vec![object.display().to_string()];
    if !rust && has(&["-nostdlib", "-nodefaultlibs"]) {
        if !names_the_c_library(line) {
            return Err(Error::Refused {
                at: crate::error::Location::file(line.output.display().to_string()),
                what: "this link has probe or hook sites but no C library (-nostdlib or \
                       -nodefaultlibs without -lc), which the bootprof runtime needs: the site \
                       table would have no runtime to enable it. Name the C library (-lc), or \
                       pass --no-runtime to bootprof-link to link the table without a runtime \
                       (the program's sites then stay disabled unless it links one itself)"
                    .into(),
            });
        }
        // After the runtime object too: a static C library named before it was searched before
        // the runtime's references to it existed.
        libraries.push("-lc".into());
    }
    if output == Output::SharedObject || carried == Carried::Lean {
        // The rule for which copy serves, and the lean runtime's loading of the library, call
        // dlopen, dlsym and dladdr: in the C library since glibc 2.34 (libdl.a is then empty),
        // in libdl before.
        libraries.push("-ldl".into());
    }
    // Beside the lean runtime in the cache directory (unpacked once per link: each unpacking
    // reads every file back).
    let library = (carried == Carried::Lean).then(|| object.with_file_name(LIBRARY));
    Ok(RuntimeArgs {
        args: entry_point_args(output, libraries, exports, walks_stacks),
        library,
    })
}

/// The entry points (`bootprof_*`, `__wrap_*`: default-visibility globals it defines) of the
/// runtime object `object` that an executable exports, by name: none when the object carries
/// the note by which shared objects' copies of the runtime find the executable's
/// ([`ENTRIES_NOTE`]); `None` for a shared object's output, or when `object` is not a
/// relocatable object (an archive `BOOTPROF_RUNTIME` names whose prelink failed): the patterns
/// [`EXPORTED`] then export them. Exporting costs GNU ld a match of every symbol of the link
/// against the dynamic list (a fifth of its work on a 20,000-function program, whatever the
/// list holds); names, not patterns, at least spare it `fnmatch` in wide characters.
fn exported_names(object: &Path, output: Output) -> Option<Vec<String>> {
    use object::read::elf::Sym;
    if output != Output::Executable {
        return None;
    }
    let data = crate::elf::map(object).ok()?;
    let obj = crate::elf::Object::parse(&data, &object.display().to_string()).ok()?;
    let has_note = (0..obj.sections.len()).any(|i| obj.section_name(i) == ENTRIES_NOTE);
    if has_note {
        return Some(Vec::new());
    }
    let mut names: Vec<String> = obj
        .symbols
        .iter()
        .filter(|s| s.st_bind() != object::elf::STB_LOCAL)
        .filter(|s| s.st_visibility() == object::elf::STV_DEFAULT)
        .filter(|s| s.st_shndx(crate::elf::LE) != object::elf::SHN_UNDEF)
        .filter_map(|s| obj.symbols.symbol_name(crate::elf::LE, s).ok())
        .filter(|n| {
            EXPORTED
                .iter()
                .any(|p| n.starts_with(p.trim_end_matches('*').as_bytes()))
        })
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    names.sort();
    names.dedup();
    Some(names)
}

/// Whether `line` names the C library itself: `-lc` (`-l c`, `-l:libc.so.6`, ...) or a path to
/// `libc.so*` or `libc.a`.
fn names_the_c_library(line: &LinkLine) -> bool {
    let is_libc = |name: &str| name == "libc.a" || name.starts_with("libc.so");
    (0..line.args.len()).any(|i| {
        let file_name = Path::new(&line.args[i])
            .file_name()
            .and_then(|n| n.to_str());
        match line.kinds[i] {
            ArgKind::Library => line
                .library_name(i)
                .is_some_and(|l| l == "c" || l.strip_prefix(':').is_some_and(is_libc)),
            ArgKind::File => file_name.is_some_and(is_libc),
            _ => false,
        }
    })
}

/// `libraries` (what links the runtime) with the flags around them: `-u` pulls the runtime's
/// registration entry points in (the stubs refer to them only weakly), `--wrap` sends the
/// program's calls of [`WRAPPED`] to the runtime, and an executable exports `exports` (else the
/// entry points by [`EXPORTED`]: a runtime in a Rust program's crate, which may not carry the
/// note), so that the shared objects it loads bind their calls to its runtime rather than to
/// their own copies (a shared object's are default-visibility globals, exported anyway).
fn entry_point_args(
    output: Output,
    libraries: Vec<String>,
    exports: Option<Vec<String>>,
    walks_stacks: bool,
) -> Vec<String> {
    let entry_points = [REGISTER_SYMBOL, UNREGISTER_SYMBOL];
    let mut v: Vec<String> = entry_points.iter().map(|s| format!("-Wl,-u,{s}")).collect();
    // `-u` too: a static link pulls the real ones out of libc.a only when something names
    // them, and the program's own references now name the wrappers.
    v.extend(
        WRAPPED
            .iter()
            .filter(|&&(s, _)| walks_stacks || s != "_Unwind_Backtrace")
            .map(|&(s, pull)| match pull {
                true => format!("-Wl,--wrap={s},-u,{s}"),
                false => format!("-Wl,--wrap={s}"),
            }),
    );
    v.extend(libraries);
    if output == Output::Executable {
        let exports = exports.unwrap_or_else(|| EXPORTED.map(String::from).to_vec());
        // One argument: the driver passes it on to the linker as it is.
        let each: Vec<String> = exports
            .iter()
            .map(|s| format!("--export-dynamic-symbol={s}"))
            .collect();
        if !each.is_empty() {
            v.push(format!("-Wl,{}", each.join(",")));
        }
    }
    v
}

/// The section of a runtime object whose note leads a shared object's copy of the runtime to the
/// executable's entry points (runtime/src/serving.rs): with it, an executable exports nothing.
const ENTRIES_NOTE: &str = ".note.bootprof";

/// The runtime's entry points an executable exports, as the linkers' `--export-dynamic-symbol`
/// takes them (glob patterns: GNU ld since 2.35, lld since 11).
const EXPORTED: [&str; 2] = ["bootprof_*", "__wrap_*"];

/// Whether `name` is the file name of the runtime crate's rlib as a link line has it:
/// `libbootprof_runtime-HASH.rlib` from cargo, `libbootprof_runtime.rlib` when rustc passes a
/// copy of its own (it does under LTO), either behind the `NNNN-` of bootprof-link's private
/// copy of an input it rewrote.
fn is_runtime_rlib(name: &str) -> bool {
    let name = match name.split_once('-') {
        Some((n, rest)) if n.len() == 4 && n.bytes().all(|b| b.is_ascii_digit()) => rest,
        _ => name,
    };
    name == "libbootprof_runtime.rlib"
        || (name.starts_with("libbootprof_runtime-") && name.ends_with(".rlib"))
}

#[cfg(test)]
mod tests {
    use super::is_runtime_rlib;

    #[test]
    fn the_runtime_rlib_by_every_name_a_link_line_gives_it() {
        for name in [
            "libbootprof_runtime-1a2b3c4d5e6f7a8b.rlib",
            "libbootprof_runtime.rlib",
            "0006-libbootprof_runtime.rlib",
            "0012-libbootprof_runtime-1a2b3c4d5e6f7a8b.rlib",
        ] {
            assert!(is_runtime_rlib(name), "{name}");
        }
        for name in [
            "libbootprof_format-1a2b3c4d5e6f7a8b.rlib",
            "libbootprof_runtime.a",
            "0006-libbootprof_runtime.a",
            "libbootprof_runtime_extra.rlib",
            "12-libbootprof_runtime.rlib",
        ] {
            assert!(!is_runtime_rlib(name), "{name}");
        }
    }
}
