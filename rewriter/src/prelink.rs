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
//! `core` and `alloc`, which must not meet a Rust program's), and of the `R_X86_64_NONE`
//! relocations the partial link leaves ([`drop_none_relocations`]).
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
        .and_then(|_| drop_none_relocations(&stripped))
        .and_then(|_| {
            std::fs::rename(&stripped, output).map_err(|e| format!("{}: {e}", output.display()))
        });
    let _ = std::fs::remove_file(&partial);
    let _ = std::fs::remove_file(&stripped);
    let _ = std::fs::remove_file(&script);
    made
}

/// Removes the `R_X86_64_NONE` relocations from the relocation sections of the ELF64
/// relocatable object `path`, in place. `ld -r --gc-sections` drops the unwind entries (FDEs)
/// of the functions it discards but leaves each of their relocations behind as an
/// `R_X86_64_NONE` at a kept entry's offset: hundreds of them in `.rela.eh_frame`, which every
/// final link then reads and sorts through for nothing (0.46 M of GNU ld's instructions in a
/// link of sqlite3). The others keep their order; each section shrinks, its bytes stay where
/// they were.
pub fn drop_none_relocations(path: &Path) -> Result<(), String> {
    let fail = |what: &str| format!("{}: {what}", path.display());
    let mut elf = std::fs::read(path).map_err(|e| fail(&e.to_string()))?;
    let word = |b: &[u8], at: usize, n: usize| -> Option<u64> {
        let bytes = b.get(at..at + n)?;
        Some(bytes.iter().rev().fold(0, |v, &x| v << 8 | u64::from(x)))
    };
    if elf.get(..6) != Some(&b"\x7fELF\x02\x01"[..]) {
        return Err(fail("not a little-endian ELF64 file"));
    }
    let header = |at: usize, n: usize| word(&elf, at, n).map(|v| v as usize);
    let (Some(shoff), Some(shentsize), Some(shnum)) =
        (header(0x28, 8), header(0x3a, 2), header(0x3c, 2))
    else {
        return Err(fail("truncated ELF header"));
    };
    let mut changed = false;
    for i in 0..shnum {
        let sh = shoff + i * shentsize;
        let field = |at: usize, n: usize| word(&elf, sh + at, n).map(|v| v as usize);
        let (Some(kind), Some(offset), Some(size), Some(entsize)) =
            (field(4, 4), field(0x18, 8), field(0x20, 8), field(0x38, 8))
        else {
            return Err(fail(&format!("section header {i} is truncated")));
        };
        const SHT_RELA: usize = 4;
        if kind != SHT_RELA || entsize != 24 {
            continue;
        }
        let Some(section) = elf.get_mut(offset..offset + size) else {
            return Err(fail(&format!("section {i} runs past the file")));
        };
        let mut kept = 0;
        for at in (0..size / 24).map(|r| r * 24) {
            // The low half of r_info: the type, 0 for R_X86_64_NONE.
            if section[at + 8..at + 12] != [0; 4] {
                section.copy_within(at..at + 24, kept);
                kept += 24;
            }
        }
        if kept < size {
            section[kept..].fill(0);
            elf[sh + 0x20..sh + 0x28].copy_from_slice(&(kept as u64).to_le_bytes());
            changed = true;
        }
    }
    if changed {
        std::fs::write(path, &elf).map_err(|e| fail(&e.to_string()))?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that is not a little-endian ELF64 object, or whose section headers or relocations
    /// run past its end, is refused with its name and what is wrong; nothing is written.
    #[test]
    fn drop_none_relocations_refuses_what_is_not_an_elf64_object() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, b"not an object").unwrap();
        let e = drop_none_relocations(&text).unwrap_err();
        assert!(
            e.contains("notes.txt") && e.contains("not a little-endian ELF64"),
            "{e}"
        );
        // An ELF64 header whose section header table lies past the end of the file.
        let mut header = vec![0u8; 64];
        header[..6].copy_from_slice(b"\x7fELF\x02\x01");
        header[0x28..0x30].copy_from_slice(&4096u64.to_le_bytes());
        header[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        header[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
        let cut = dir.path().join("cut.o");
        std::fs::write(&cut, &header).unwrap();
        let e = drop_none_relocations(&cut).unwrap_err();
        assert!(
            e.contains("cut.o") && e.contains("section header 0 is truncated"),
            "{e}"
        );
        assert_eq!(std::fs::read(&cut).unwrap(), header);
        // A relocation section whose bytes run past the end of the file.
        let mut object = header.clone();
        object[0x28..0x30].copy_from_slice(&64u64.to_le_bytes());
        object[0x3c..0x3e].copy_from_slice(&1u16.to_le_bytes());
        let mut rela = [0u8; 64];
        rela[4..8].copy_from_slice(&4u32.to_le_bytes()); // SHT_RELA
        rela[0x18..0x20].copy_from_slice(&128u64.to_le_bytes());
        rela[0x20..0x28].copy_from_slice(&48u64.to_le_bytes());
        rela[0x38..0x40].copy_from_slice(&24u64.to_le_bytes());
        object.extend_from_slice(&rela);
        let past = dir.path().join("past.o");
        std::fs::write(&past, &object).unwrap();
        let e = drop_none_relocations(&past).unwrap_err();
        assert!(
            e.contains("past.o") && e.contains("section 0 runs past the file"),
            "{e}"
        );
        assert_eq!(std::fs::read(&past).unwrap(), object);
    }
}
