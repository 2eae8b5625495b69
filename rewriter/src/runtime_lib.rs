//! The runtime library as `bootprof-link` links it: takes the link line and the runtime the
//! `bootprof-link` executable carries ([`Embedded`]: a small relocatable object prelinked from the
//! `bootprof-runtime` staticlib when `bootprof-link` was built, and the C header); hands on the
//! arguments that link it, after unpacking it into the per-user cache ([`crate::cache`]) once.
//! `BOOTPROF_RUNTIME` names another runtime instead: an object, linked as it is, or an archive
//! (`libbootprof_runtime.a`), prelinked ([`crate::prelink`]) once into an object beside it (the
//! archive itself is linked when that fails).
//!
//! The same files answer `--print-runtime`, `--print-include-dir` and `--print-pkg-config-dir`
//! ([`Query`]): where a build finds the header and the runtime without bootprof's sources.

use crate::args::LinkLine;
use crate::error::{Error, Result};
use crate::stubs::{REGISTER_SYMBOL, UNREGISTER_SYMBOL};
use crate::{cache, prelink};
use std::path::{Path, PathBuf};

/// The runtime a `bootprof-link` executable carries, built into it (see `runtime/cli/build.rs`).
pub struct Embedded {
    /// The prelinked runtime object.
    pub object: &'static [u8],
    /// `runtime/include/bootprof.h`.
    pub header: &'static [u8],
    /// The package version, for the pkg-config file.
    pub version: &'static str,
    /// A name for `object` and `header` that changes with their contents: their directory in the
    /// cache.
    pub id: &'static str,
}

/// The runtime object's file name in its cache directory.
const OBJECT: &str = "bootprof_runtime.o";
/// The header's directory in the cache directory (what `-I` names).
const INCLUDE: &str = "include";
/// The pkg-config file's directory in the cache directory (what `PKG_CONFIG_PATH` names).
const PKG_CONFIG: &str = "pkgconfig";

impl Embedded {
    /// The cache directory holding the object, `include/bootprof.h` and
    /// `pkgconfig/bootprof.pc`, unpacked now where missing.
    pub fn unpacked(&self) -> Result<PathBuf> {
        cache::unpack(self.id, |dir| {
            vec![
                (OBJECT, self.object.to_vec()),
                ("include/bootprof.h", self.header.to_vec()),
                ("pkgconfig/bootprof.pc", self.pkg_config(dir).into_bytes()),
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

    /// The runtime a link would use: `BOOTPROF_RUNTIME` when set (and not empty), else this one,
    /// unpacked.
    pub fn object_to_link(&self) -> Result<PathBuf> {
        match std::env::var_os("BOOTPROF_RUNTIME").filter(|p| !p.is_empty()) {
            Some(path) => {
                let path = PathBuf::from(path);
                if is_archive(&path) {
                    Ok(prelinked(&path).unwrap_or(path))
                } else if path.is_file() {
                    Ok(path)
                } else {
                    Err(Error::Usage(format!(
                        "BOOTPROF_RUNTIME names {}, which is not a file: point it at a runtime \
                         archive (libbootprof_runtime.a) or object, or unset it to link the \
                         runtime bootprof-link carries",
                        path.display()
                    )))
                }
            }
            None => Ok(self.unpacked()?.join(OBJECT)),
        }
    }
}

/// Whether `path` is an `ar` archive (by its magic).
fn is_archive(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| &magic == b"!<arch>\n")
}

/// The object prelinked from `archive`, beside it (`libbootprof_runtime.o`), made now if it is
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
    /// `--print-runtime`: the runtime object (or archive) a link would use.
    Runtime,
    /// `--print-include-dir`: the directory holding `bootprof.h`.
    IncludeDir,
    /// `--print-pkg-config-dir`: the directory holding `bootprof.pc`, for `PKG_CONFIG_PATH`.
    PkgConfigDir,
}

impl Query {
    /// The query `arg` asks, if it is one.
    pub fn parse(arg: &str) -> Option<Query> {
        match arg {
            "--print-runtime" => Some(Query::Runtime),
            "--print-include-dir" => Some(Query::IncludeDir),
            "--print-pkg-config-dir" => Some(Query::PkgConfigDir),
            _ => None,
        }
    }

    /// The answer for `runtime`, its files unpacked first.
    pub fn answer(self, runtime: &Embedded) -> Result<PathBuf> {
        match self {
            Query::Runtime => runtime.object_to_link(),
            Query::IncludeDir => Ok(runtime.unpacked()?.join(INCLUDE)),
            Query::PkgConfigDir => Ok(runtime.unpacked()?.join(PKG_CONFIG)),
        }
    }
}

/// The C library's functions whose calls from the program go to the runtime's `__wrap_NAME`
/// (`-Wl,--wrap`, which works for static programs too): the jumps that leave frames without
/// returning, and `backtrace`, which must see the real return addresses of frames whose return
/// the runtime hooked (`BOOTPROF_GRAPH`).
pub const WRAPPED: [&str; 5] = [
    "longjmp",
    "_longjmp",
    "siglongjmp",
    "__longjmp_chk",
    "backtrace",
];

/// The arguments that link the runtime into `line`'s output, or none: with `--no-runtime`, for
/// shared objects (their tables register with the executable's runtime), for links without the
/// C library, and for Rust programs (which use the `bootprof-runtime` crate itself).
pub fn runtime_args(line: &LinkLine, runtime: &Embedded) -> Result<Vec<String>> {
    // `-u` pulls the runtime's entry points in (the stubs refer to them only weakly); shared
    // objects loaded later find the executable's copies by their exports.
    let entry_points = [REGISTER_SYMBOL, UNREGISTER_SYMBOL];
    let with_register = |middle: Vec<String>| {
        let mut v: Vec<String> = entry_points.iter().map(|s| format!("-Wl,-u,{s}")).collect();
        // `-u` too: a static link pulls the real ones out of libc.a only when something names
        // them, and the program's own references now name the wrappers.
        v.extend(WRAPPED.iter().map(|s| format!("-Wl,--wrap={s},-u,{s}")));
        v.extend(middle);
        v.extend(
            entry_points
                .iter()
                .map(|s| format!("-Wl,--export-dynamic-symbol={s}")),
        );
        v
    };
    let shared_or_bare = line.args.iter().any(|a| {
        matches!(
            a.as_str(),
            "-shared" | "-nostdlib" | "-nodefaultlibs" | "-r"
        )
    });
    if line.options.no_runtime || shared_or_bare {
        return Ok(Vec::new());
    }
    if line.args.iter().any(|a| a.ends_with(".rlib")) {
        // A Rust program has the runtime when it depends on the crate (one std is enough).
        let has_runtime = line.args.iter().any(|a| {
            std::path::Path::new(a)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libbootprof_runtime-") && n.ends_with(".rlib"))
        });
        return Ok(if has_runtime {
            with_register(Vec::new())
        } else {
            Vec::new()
        });
    }
    let object = runtime.object_to_link()?;
    Ok(with_register(vec![
        object.display().to_string(),
        "-lm".into(),
    ]))
}
