//! The runtime library as `bootprof-link` links it: takes `libbootprof_runtime.a` (a Rust
//! staticlib, tens of megabytes with the standard library); hands on one small relocatable object
//! made from it once and cached beside it, so each link pulls a megabyte of code instead of
//! searching the archive.
//!
//! The object is a partial link (`ld -r --gc-sections`) rooted at every `bootprof_*` symbol the
//! archive's index defines (the C API and the registration entry points: the list comes from the
//! archive, so it cannot drift from the runtime), then stripped of debug information and of the
//! LLVM bitcode the standard library carries. If any step fails, the archive itself is linked.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The global `bootprof_*` symbols the archive's index defines.
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
        .filter(|n| n.starts_with("bootprof_"))
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
    if !roots.iter().any(|r| r == crate::stubs::REGISTER_SYMBOL) {
        return None;
    }
    let pid = std::process::id();
    let partial = cached.with_extension(format!("partial.{pid}.o"));
    let stripped = cached.with_extension(format!("stripped.{pid}.o"));
    let mut ld = Command::new("ld");
    ld.args(["-r", "--gc-sections"]);
    for r in &roots {
        ld.arg("-u").arg(r);
    }
    ld.arg(archive).arg("-o").arg(&partial);
    let ok = ld.output().is_ok_and(|o| o.status.success())
        && Command::new("objcopy")
            .args([
                "--remove-section=.llvmbc",
                "--remove-section=.llvmcmd",
                "--strip-debug",
            ])
            .arg(&partial)
            .arg(&stripped)
            .output()
            .is_ok_and(|o| o.status.success())
        && std::fs::rename(&stripped, &cached).is_ok();
    let _ = std::fs::remove_file(&partial);
    let _ = std::fs::remove_file(&stripped);
    ok.then_some(cached)
}
