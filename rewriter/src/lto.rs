//! LTO code generation, part of gathering: takes the link line and its inputs; when some of them
//! hold compiler IR instead of machine code (gcc's `-flto` objects with their `.gnu.lto_*`
//! sections, fat or slim; LLVM bitcode from clang `-flto`, `-flto=thin` or rustc
//! `-C linker-plugin-lto`; alone or as archive members), runs the user's own link once with the
//! linker told to keep the machine code that its LTO generates, and hands on those objects.
//!
//! Hooks (`-pg`, `-pg -mfentry`, `-finstrument-functions`) and probe calls of IR inputs exist only
//! once LTO has generated code, and that code is generated from the whole program (inlining,
//! internalising, dropping functions): a partial link (`-r`) would generate different code, with
//! a different set of hooks. So the one code generation is the real link's own: gcc keeps its
//! LTRANS objects (`-save-temps`: `OUT.ltransN.ltrans.o`), LLVM (lld, or GNU ld with the LLVM
//! plugin) writes them where `-plugin-opt=obj-path=` says (`lto.o`, `lto.o1`, ...). The objects
//! then take the place of the IR inputs on the line, are rewritten like any other, and the final
//! link links machine code only: no IR input is left for code generation to run a second time.
//! The output of this first link is thrown away; probe symbols that only the stubs define yet are
//! allowed to stay undefined in it.

use crate::args::{ArgKind, LinkLine};
use crate::driver;
use crate::error::{Error, Location, Result};
use bootprof_format::file::{classify, FileKind};
use std::path::{Path, PathBuf};

/// Whose IR an input holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ir {
    /// gcc's GIMPLE, in `.gnu.lto_*` sections of an ELF object (slim, or fat with machine code
    /// beside it).
    Gcc,
    /// LLVM bitcode (raw or in its wrapper).
    Llvm,
}

/// The IR kinds found among a link's inputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IrKinds {
    /// Some input holds gcc IR.
    pub gcc: bool,
    /// Some input holds LLVM bitcode.
    pub llvm: bool,
}

impl IrKinds {
    /// Adds `ir`.
    pub fn add(&mut self, ir: Option<Ir>) {
        match ir {
            Some(Ir::Gcc) => self.gcc = true,
            Some(Ir::Llvm) => self.llvm = true,
            None => {}
        }
    }

    /// Adds every kind of `other`.
    pub fn add_all(&mut self, other: IrKinds) {
        self.gcc |= other.gcc;
        self.llvm |= other.llvm;
    }

    /// Whether `ir` is one of these kinds.
    pub fn has(self, ir: Option<Ir>) -> bool {
        match ir {
            Some(Ir::Gcc) => self.gcc,
            Some(Ir::Llvm) => self.llvm,
            None => false,
        }
    }

    /// Whether any input holds IR.
    pub fn any(self) -> bool {
        self.gcc || self.llvm
    }
}

/// Whose IR the object `data` holds, if any: LLVM bitcode by its magic, gcc's by its
/// `.gnu.lto_*` sections (read from the section headers only).
pub fn object_ir(data: &[u8]) -> Option<Ir> {
    use object::read::elf::FileHeader;
    match classify(data) {
        FileKind::Bitcode => return Some(Ir::Llvm),
        FileKind::Object => {}
        _ => return None,
    }
    let header = crate::elf::FileHeader64::parse(data).ok()?;
    let sections = header.sections(crate::elf::LE, data).ok()?;
    sections
        .iter()
        .any(|s| {
            sections
                .section_name(crate::elf::LE, s)
                .is_ok_and(|n| n.starts_with(b".gnu.lto_"))
        })
        .then_some(Ir::Gcc)
}

/// The IR kinds of the members of the archive `data` (none when it cannot be read: rewriting
/// the archive then says what is wrong with it).
pub fn archive_ir(data: &[u8], path: &Path) -> IrKinds {
    let mut kinds = IrKinds::default();
    let Ok(archive) = object::read::archive::ArchiveFile::parse(data) else {
        return kinds;
    };
    let base = path.parent().unwrap_or(Path::new("."));
    for member in archive.members().flatten() {
        if archive.is_thin() {
            // A thin archive's members are files of their own, named relative to it.
            let name = String::from_utf8_lossy(member.name()).into_owned();
            if let Ok(m) = crate::elf::map(&base.join(name)) {
                kinds.add(object_ir(&m));
            }
        } else if let Ok(bytes) = member.data(data) {
            kinds.add(object_ir(bytes));
        }
    }
    kinds
}

/// The linker the driver will run, by the last `-fuse-ld=`: `true` for lld.
fn uses_lld(line: &LinkLine) -> bool {
    line.args
        .iter()
        .zip(&line.kinds)
        .filter(|(_, k)| **k == ArgKind::Option)
        .filter_map(|(a, _)| a.strip_prefix("-fuse-ld="))
        .next_back()
        .is_some_and(|l| l.ends_with("lld"))
}

/// Which of `found` the link will hand to LTO code generation. gcc's IR goes to gcc's linker
/// plugin, which GNU ld runs and lld does not (lld links a fat object's machine code and ignores
/// its IR; a slim object fails there as it would without bootprof), and not with
/// `-fno-use-linker-plugin`. LLVM bitcode always goes to code generation.
pub fn generated_at_link_time(line: &LinkLine, found: IrKinds) -> IrKinds {
    let plugin_off = line
        .args
        .iter()
        .any(|a| a == "-fno-use-linker-plugin" || a == "-fno-lto");
    IrKinds {
        gcc: found.gcc && !uses_lld(line) && !plugin_off,
        llvm: found.llvm,
    }
}

/// Runs the link `args` (the user's line with its sources compiled) once, keeping the machine
/// code LTO generates for `ir` in `dir/lto`; returns those objects in the order the linker
/// generated them. A failed link is the link's failure: its stderr has passed through, and
/// [`Error::LinkFailed`] carries its exit status.
pub fn generate(line: &LinkLine, args: &[String], ir: IrKinds, dir: &Path) -> Result<Vec<PathBuf>> {
    let cg = dir.join("lto");
    std::fs::create_dir(&cg).map_err(|e| Error::io(&cg, e))?;
    let out = cg.join("out");
    let mut args = crate::link::redirect_output(line, args.to_vec(), &out);
    if ir.gcc {
        // gcc: keep the LTRANS objects, named after the output, in its directory.
        args.push("-save-temps".into());
    }
    if ir.llvm {
        args.push(format!(
            "-Wl,-plugin-opt=obj-path={}",
            cg.join("lto.o").display()
        ));
    }
    // The probe symbols are defined by the stubs of the final link, made from this link's code.
    args.push("-Wl,--unresolved-symbols=ignore-all".into());
    let (status, _) = driver::status_of(driver::driver_command(&line.driver, &args, dir)?)?;
    if !status.success() {
        return Err(Error::LinkFailed(driver::exit_code(status)));
    }
    generated_objects(&cg)
}

/// The objects LTO left in `cg`, in generation order: gcc's `out.ltrans<N>.ltrans.o`, LLVM's
/// `lto.o`, `lto.o<N>`. Anything else there (gcc's saved IR partitions `out.ltrans<N>.o`,
/// argument files, assembly) is not machine code for the link.
fn generated_objects(cg: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(cg).map_err(|e| Error::io(cg, e))? {
        let entry = entry.map_err(|e| Error::io(cg, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let number = if let Some(rest) = name.strip_prefix("out.ltrans") {
            rest.strip_suffix(".ltrans.o")
                .and_then(|n| n.parse::<u64>().ok())
        } else if name == "lto.o" {
            Some(0)
        } else {
            name.strip_prefix("lto.o")
                .and_then(|n| n.parse::<u64>().ok())
        };
        if let Some(n) = number {
            found.push((n, entry.path()));
        }
    }
    found.sort();
    let mut objects = Vec::new();
    for (_, path) in found {
        let data = crate::elf::map(&path)?;
        // An object that still holds IR would be handed to code generation again.
        if classify(&data) == FileKind::Object && object_ir(&data).is_none() {
            objects.push(path);
        } else {
            return Err(Error::Refused {
                at: Location::file(path.display().to_string()),
                what: "LTO code generation left a file that is not a relocatable object of \
                       machine code"
                    .into(),
            });
        }
    }
    Ok(objects)
}
