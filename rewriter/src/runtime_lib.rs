//! The runtime library as `bootprof-link` links it: takes the link line and
//! `libbootprof_runtime.a` (a Rust staticlib, tens of megabytes with the standard library); hands
//! on the arguments that link it: one small relocatable object made from the archive once and
//! cached beside it, so each link pulls a megabyte of code instead of searching the archive.
//!
//! The object is a partial link (`ld -r --gc-sections`) rooted at every `bootprof_*` symbol the
//! archive's index defines (the C API and the registration entry points: the list comes from the
//! archive, so it cannot drift from the runtime), then stripped of debug information and of the
//! LLVM bitcode the standard library carries. If any step fails, the archive itself is linked.

use crate::args::LinkLine;
use crate::error::{Error, Result};
use crate::stubs::{REGISTER_SYMBOL, UNREGISTER_SYMBOL};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The global `bootprof_*` symbols the archive's index defines, and its `__wrap_*` functions
/// (what the program's calls to the functions of [`WRAPPED`] reach).
fn entry_points(archive: &[u8]) -> Vec<String> {
    let Ok(file) = object::read::archive::ArchiveFile::parse(archive) else {
        return Vec::new();
    };
    let Ok(Some(symbols)) = file.symbols() else {
        return Vec::new();
    };
    let mut names: Vec<String> = symbols
        .filter_map(Result::ok)
        .map(|s| String::from_utf8_lossy(s.name()).into_owned())
        .filter(|n| n.starts_with("bootprof_") || n.starts_with("__wrap_"))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The cached object for `archive`, made now if it is missing or older than the archive.
/// `None` when it cannot be made (the caller links the archive).
pub fn prelinked(archive: &Path) -> Option<PathBuf> {
    let cached = archive.with_extension("o");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(obj), Some(lib)) = (modified(&cached), modified(archive)) {
        if obj >= lib {
            return Some(cached);
        }
    }
    let data = std::fs::read(archive).ok()?;
    let roots = entry_points(&data);
    if !roots.iter().any(|r| r == REGISTER_SYMBOL) {
        return None;
    }
    // Both steps write temporaries beside the cache, the second renamed over it: links running
    // at the same time never see half an object.
    let temporary = |tag: &str| {
        use std::os::unix::fs::PermissionsExt;
        tempfile::Builder::new()
            .prefix(&format!("libbootprof_runtime.{tag}."))
            .suffix(".o")
            .permissions(std::fs::Permissions::from_mode(0o666))
            .tempfile_in(cached.parent()?)
            .ok()
            .map(tempfile::NamedTempFile::into_temp_path)
    };
    let partial = temporary("partial")?;
    let stripped = temporary("stripped")?;
    let mut ld = Command::new("ld");
    ld.args(["-r", "--gc-sections"]);
    for r in &roots {
        ld.arg("-u").arg(r);
    }
    ld.arg(archive).arg("-o").arg(&*partial);
    let ok = ld.output().is_ok_and(|o| o.status.success())
        && Command::new("objcopy")
            .args([
                "--remove-section=.llvmbc",
                "--remove-section=.llvmcmd",
                "--strip-debug",
            ])
            .arg(&*partial)
            .arg(&*stripped)
            .output()
            .is_ok_and(|o| o.status.success());
    (ok && stripped.persist(&cached).is_ok()).then_some(cached)
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
pub fn runtime_args(line: &LinkLine) -> Result<Vec<String>> {
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
    let lib = match std::env::var_os("BOOTPROF_RUNTIME") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_exe()
            .map_err(|e| Error::io("/proc/self/exe", e))?
            .with_file_name("libbootprof_runtime.a"),
    };
    if !lib.is_file() {
        return Err(Error::Usage(format!(
            "the runtime library {} is missing: build it (cargo build -p bootprof-runtime), point \
             BOOTPROF_RUNTIME at it, or link without it (--no-runtime)",
            lib.display()
        )));
    }
    let lib = prelinked(&lib).unwrap_or(lib);
    Ok(with_register(vec![lib.display().to_string(), "-lm".into()]))
}
