//! bootprof's link-time rewriter: the library behind `bootprof-link` and `bootprof list`.
//!
//! The pipeline, one module per phase (see `DESIGN.md`): [`args`] parses the link line ->
//! [`gather`] collects the relocatable inputs (objects, archive members, or one partial link) ->
//! [`scan`] finds relocations against probe symbols (and `guard` reads the C header's guard
//! records) -> `patch` verifies each site and chooses its NOP -> `emit` writes the rewritten object with its table fragments, and [`stubs`] the
//! object defining every probe symbol -> [`link`] runs the final link with the rewritten inputs
//! and moves the output into place atomically. [`list`] reads the table back from a binary.
#![deny(missing_docs)]
// Errors are built once per failed link; their size does not matter, their context does.
#![allow(clippy::result_large_err)]

pub mod archive;
pub mod args;
pub(crate) mod emit;
pub mod error;
pub mod gather;
pub(crate) mod guard;
pub mod link;
pub mod list;
pub(crate) mod patch;
pub mod report;
pub mod runtime_lib;
pub mod scan;
pub mod stubs;

pub use error::{Error, Location, Result};
pub use scan::{NotASite, Plan, ProbeSymbol, SiteInfo};

use std::time::Instant;

/// The result of rewriting one relocatable object.
#[derive(Debug)]
pub struct Rewritten {
    /// The new object, or `None` when the object has no sites (use it unchanged).
    pub bytes: Option<Vec<u8>>,
    /// The sites found and patched.
    pub sites: Vec<SiteInfo>,
    /// Probe symbols the object references; the stub object must define them.
    pub referenced: Vec<ProbeSymbol>,
    /// Probe symbols the object defines itself.
    pub defined: Vec<Vec<u8>>,
    /// Relocations against probe symbols left alone, and why.
    pub not_sites: Vec<NotASite>,
    /// Number of relocation entries in the object.
    pub relocations: usize,
    /// Whether the object calls the runtime's API.
    pub uses_runtime: bool,
}

/// Rewrites one relocatable x86-64 ELF object: the rewriting core shared by every way of
/// gathering inputs. `file` names the object in messages. An object without sites, including
/// one rewritten before, comes back unchanged (`bytes` is `None`).
pub fn rewrite_object(data: &[u8], file: &str) -> Result<Rewritten> {
    let plan = scan::scan(data, file)?;
    let bytes = match &plan.object {
        Some(obj) => Some(emit::emit(obj, &plan.sites, file)?),
        None => None,
    };
    Ok(Rewritten {
        bytes,
        sites: plan.sites,
        referenced: plan.referenced,
        defined: plan.defined,
        not_sites: plan.not_sites,
        relocations: plan.relocations,
        uses_runtime: plan.uses_runtime,
    })
}

/// A private directory for rewritten inputs, removed when dropped unless kept.
struct TempDir {
    path: std::path::PathBuf,
    keep: bool,
}

impl TempDir {
    fn new(keep: bool) -> Result<TempDir> {
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = base.join(format!("bootprof-link.{}.{nanos:x}", std::process::id()));
        std::fs::create_dir(&path).map_err(|e| Error::io(&path, e))?;
        Ok(TempDir { path, keep })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.keep {
            eprintln!(
                "bootprof-link: kept temporary files in {}",
                self.path.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The arguments that link the runtime into `line`'s output, or none: with `--no-runtime`, for
/// shared objects (their tables register with the executable's runtime), for links without the
/// C library, and for Rust programs (which use the `bootprof-runtime` crate itself).
fn runtime_args(line: &args::LinkLine) -> Result<Vec<String>> {
    // `-u` pulls the runtime's entry points in (the stubs refer to them only weakly); shared
    // objects loaded later find the executable's copies by their exports.
    let entry_points = [stubs::REGISTER_SYMBOL, stubs::UNREGISTER_SYMBOL];
    let with_register = |middle: Vec<String>| {
        let mut v: Vec<String> = entry_points.iter().map(|s| format!("-Wl,-u,{s}")).collect();
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
    let lib = runtime_lib::prelinked(&lib).unwrap_or(lib);
    Ok(with_register(vec![lib.display().to_string(), "-lm".into()]))
}

/// Runs `bootprof-link` with `argv` (without argv[0]); returns the process exit code.
pub fn run_link(argv: Vec<String>) -> Result<i32> {
    let start = Instant::now();
    let driver = std::env::var("BOOTPROF_CC").unwrap_or_else(|_| "cc".into());
    let flags = std::env::var("BOOTPROF_LINK_FLAGS").unwrap_or_default();
    let line = args::parse(argv, &driver, &flags)?;
    if let Some(why) = line.passthrough {
        if line.options.verbose {
            eprintln!("bootprof-link: passing the line through unchanged: {why}");
        }
        return Err(link::exec_unchanged(&line));
    }
    let dir = TempDir::new(line.options.keep_temps)?;
    let gathered = gather::gather(&line, &dir.path)?;
    let scanned = start.elapsed();
    for note in &gathered.notes {
        eprintln!("bootprof-link: {note}");
    }
    let mut args = gathered.args;
    if !gathered.referenced.is_empty() {
        // Our mcount/__fentry__ replace glibc's: -pg must not bring in gcrt1.o and gmon.
        args.retain(|a| a != "-pg");
        let symbols: Vec<_> = gathered
            .referenced
            .iter()
            .map(|(n, k)| (n.clone(), *k))
            .collect();
        let stubs = stubs::stub_object(&symbols)?;
        let path = dir.path.join("bootprof-stubs.o");
        std::fs::write(&path, stubs).map_err(|e| Error::io(&path, e))?;
        args.push(path.display().to_string());
        if !line.has_linker_script() {
            // The table's place and bounds; a program with its own script INCLUDEs the fragment.
            for (name, text) in [
                ("bootprof-sites.ld", stubs::SITES_SCRIPT),
                ("bootprof-sites.inc", stubs::SITES_FRAGMENT),
            ] {
                let p = dir.path.join(name);
                std::fs::write(&p, text).map_err(|e| Error::io(&p, e))?;
            }
            args.push(format!("-L{}", dir.path.display()));
            args.push(format!(
                "-Wl,-T,{}",
                dir.path.join("bootprof-sites.ld").display()
            ));
        }
    }
    if !gathered.referenced.is_empty() || gathered.uses_runtime {
        args.extend(runtime_args(&line)?);
    }
    let code = link::final_link(&line, args, &dir.path)?;
    if line.options.stats {
        let total = start.elapsed();
        eprintln!(
            "bootprof-link: stats: objects={} archives={} relocations={} sites={} scan_ms={:.3} link_ms={:.3} total_ms={:.3}",
            gathered.objects,
            gathered.archives,
            gathered.relocations,
            gathered.sites,
            scanned.as_secs_f64() * 1e3,
            (total - scanned).as_secs_f64() * 1e3,
            total.as_secs_f64() * 1e3
        );
    }
    Ok(code)
}
