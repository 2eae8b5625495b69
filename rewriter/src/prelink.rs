//! Prelinking the runtime: takes the runtime's staticlib (megabytes, with `core` and `alloc`);
//! hands on one small relocatable object (a few hundred kilobytes), so that each link
//! pulls that instead of searching the archive.
//!
//! The object is a partial link (`ld -r --gc-sections`) rooted at every `bootprof_*` symbol the
//! archive defines (the C API and the registration entry points: the list comes from the archive,
//! through `nm`, so it cannot drift from the runtime) and every `__wrap_*` one (what the
//! program's calls to the C library functions bootprof-link wraps reach), its input sections
//! merged by kind ([`MERGE_SCRIPT`]), then stripped of debug information and of the LLVM bitcode
//! the Rust libraries carry, with every symbol but those made local (the object brings its own
//! `core` and `alloc`, which must not meet a Rust program's).
//!
//! Two users, so this file needs nothing but `std`: `runtime/cli/build.rs` includes it to make
//! the object `bootprof-link` carries, and [`crate::runtime_lib`] prelinks an archive that
//! `BOOTPROF_RUNTIME` names.

use std::path::Path;
use std::process::Command;

/// The linker script of the partial link: the runtime's input sections (one per function and
/// per constant, about a thousand) merged into one output section per kind, so that every link
/// that carries the runtime reads a few dozen sections instead (GNU ld spends thousands of
/// instructions on each). Thread-locals stay apart from other data; `.eh_frame` is kept whole
/// (`--gc-sections` would drop it: nothing refers to it) and rebuilt by the final link; what the
/// script does not name stays as it was: `.init_array.*` with its priority, COMDAT group members
/// (a partial link keeps them apart), and the mergeable constants and strings (`SHF_MERGE`), so
/// that the final link still merges them and drops their `.L` labels. Every output section
/// starts at address 0, as in any relocatable object.
pub const MERGE_SCRIPT: &str = "\
SECTIONS
{
  .text 0 : { *(.text .text.*) }
  .rodata 0 : { INPUT_SECTION_FLAGS (!SHF_MERGE) *(.rodata .rodata.*) }
  .eh_frame 0 : { KEEP (*(.eh_frame)) }
  .gcc_except_table 0 : { *(.gcc_except_table .gcc_except_table.*) }
  .tdata 0 : { *(.tdata .tdata.*) }
  .tbss 0 : { *(.tbss .tbss.*) }
  .data.rel.ro 0 : { *(.data.rel.ro .data.rel.ro.*) }
  .data 0 : { *(.data .data.*) }
  .bss 0 : { *(.bss .bss.*) }
}
";

/// Prelinks `archive` into `output`, which must define `required` (the entry point every linked
/// site table calls: an archive without it is not the runtime). `output` appears whole or not
/// at all: it is written under a temporary name beside it, then renamed. The error says which
/// step failed and why.
pub fn prelink(archive: &Path, output: &Path, required: &str) -> Result<(), String> {
    let roots = entry_points(archive)?;
    if !roots.iter().any(|r| r == required) {
        return Err(format!(
            "{} defines no {required}: it is not bootprof's runtime",
            archive.display()
        ));
    }
    let temporary = |step: &str| {
        let mut name = output.as_os_str().to_owned();
        name.push(format!(".{}.{step}", std::process::id()));
        std::path::PathBuf::from(name)
    };
    let (partial, stripped) = (temporary("partial"), temporary("stripped"));
    let script = temporary("ld");
    std::fs::write(&script, MERGE_SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
    let mut ld = Command::new("ld");
    ld.args(["-r", "--gc-sections"]);
    for root in &roots {
        ld.arg("-u").arg(root);
    }
    ld.arg("-T").arg(&script);
    ld.arg(archive).arg("-o").arg(&partial);
    let mut objcopy = Command::new("objcopy");
    objcopy
        .args([
            "--remove-section=.llvmbc",
            "--remove-section=.llvmcmd",
            "--strip-debug",
        ])
        // Every other symbol the object defines becomes local: the `core` and `alloc` inside
        // it never meet a Rust program's own, nor its `_Unwind_Resume` a C++ program's.
        .args(roots.iter().map(|r| format!("--keep-global-symbol={r}")))
        .arg(&partial)
        .arg(&stripped);
    let made = run(&mut ld)
        .and_then(|_| run(&mut objcopy))
        .and_then(|_| {
            // The COMDAT groups of the personality's indirect references (`DW.ref.NAME`,
            // which `core` makes for its unwind tables) would be merged with a Rust or C++
            // program's own, and ours discarded under the object's unwind tables: renamed,
            // they are the object's alone.
            let refs = comdat_refs(&stripped)?;
            if refs.is_empty() {
                return Ok(());
            }
            let mut rename = Command::new("objcopy");
            rename.args(
                refs.iter()
                    .map(|name| format!("--redefine-sym={name}=bootprof.{name}")),
            );
            run(rename.arg(&stripped)).map(drop)
        })
        .and_then(|_| {
            std::fs::rename(&stripped, output).map_err(|e| format!("{}: {e}", output.display()))
        });
    let _ = std::fs::remove_file(&partial);
    let _ = std::fs::remove_file(&stripped);
    let _ = std::fs::remove_file(&script);
    made
}

/// The global `bootprof_*` and `__wrap_*` symbols `archive` defines.
fn entry_points(archive: &Path) -> Result<Vec<String>, String> {
    let mut names = defined_symbols(archive, &["--extern-only"], |name| {
        name.starts_with("bootprof_") || name.starts_with("__wrap_")
    })?;
    names.sort();
    names.dedup();
    Ok(names)
}

/// The `DW.ref.*` symbols `object` defines (each the signature of a COMDAT group).
fn comdat_refs(object: &Path) -> Result<Vec<String>, String> {
    defined_symbols(object, &[], |name| name.starts_with("DW.ref."))
}

/// The names of the symbols `file` defines that `wanted` takes (`nm --defined-only`, with
/// `options`), in `nm`'s order.
fn defined_symbols(
    file: &Path,
    options: &[&str],
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<String>, String> {
    let mut nm = Command::new("nm");
    nm.args(["--defined-only", "--portability"])
        .args(options)
        .arg(file);
    let listing = run(&mut nm)?;
    Ok(String::from_utf8_lossy(&listing)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| wanted(name))
        .map(str::to_string)
        .collect())
}

/// Runs `cmd`; its standard output, or an error with the command and what it printed.
pub fn run(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let shown = format!("{cmd:?}");
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(o.stdout),
        Ok(o) => Err(format!(
            "`{shown}` failed with {}:\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Err(format!("cannot run `{shown}`: {e}")),
    }
}
