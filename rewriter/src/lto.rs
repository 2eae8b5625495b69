//! LTO code generation, part of gathering: takes the link line and its inputs; when some of them
//! hold compiler IR instead of machine code (gcc's `-flto` objects with their `.gnu.lto_*`
//! sections, fat or slim; LLVM bitcode from clang `-flto`, `-flto=thin` or rustc
//! `-C linker-plugin-lto`; alone or as archive members), runs the user's own link once with the
//! linker told to keep the machine code that its LTO generates, and hands on those objects.
//!
//! Hooks (`-pg`, `-pg -mfentry`, `-finstrument-functions`) and probe calls of IR inputs exist only
//! once LTO has generated code, and that code is generated from the whole program (inlining,
//! internalising, dropping functions): a partial link (`-r`) would generate different code, with
//! a different set of hooks. So the one code generation is the real link's own, and we keep what
//! it makes (see [`generate`]). The objects then take the place of the IR inputs on the line, are rewritten like any other, and the final
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

/// Whether a section of the ELF object `data` has a name and contents for which `f` holds
/// (reading the section headers, and the contents only of sections `f` asks about).
fn any_section<'d>(data: &'d [u8], f: impl Fn(&[u8], &dyn Fn() -> &'d [u8]) -> bool) -> bool {
    use object::read::elf::{FileHeader, SectionHeader};
    let Ok(header) = crate::elf::FileHeader64::parse(data) else {
        return false;
    };
    let Ok(sections) = header.sections(crate::elf::LE, data) else {
        return false;
    };
    sections.iter().any(|s| {
        let contents = || s.data(crate::elf::LE, data).unwrap_or_default();
        sections
            .section_name(crate::elf::LE, s)
            .is_ok_and(|name| f(name, &contents))
    })
}

/// Whose IR the object `data` holds, if any: LLVM bitcode by its magic, gcc's by its
/// `.gnu.lto_*` sections.
pub fn object_ir(data: &[u8]) -> Option<Ir> {
    match classify(data) {
        FileKind::Bitcode => Some(Ir::Llvm),
        FileKind::Object => {
            any_section(data, |name, _| name.starts_with(b".gnu.lto_")).then_some(Ir::Gcc)
        }
        _ => None,
    }
}

/// Whether gcc compiled the IR object `data` with `-pg` (its `.gnu.lto_.opts` section records
/// the compile options; `-pg` as `'-p'`). gcc's LTO code generation makes hooks only when `-pg`
/// is on the link line as well.
pub fn gcc_compiled_with_pg(data: &[u8]) -> bool {
    any_section(data, |name, contents| {
        name == b".gnu.lto_.opts"
            && contents()
                .split(|&b| b == b' ' || b == 0)
                .any(|o| o == b"'-p'" || o == b"'-pg'")
    })
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
    fuse_ld(line).is_some_and(|l| l.ends_with("lld"))
}

/// The value of the line's last `-fuse-ld=`, the linker the driver will run.
pub(crate) fn fuse_ld(line: &LinkLine) -> Option<&str> {
    line.args
        .iter()
        .zip(&line.kinds)
        .filter(|(_, k)| **k == ArgKind::Option)
        .filter_map(|(a, _)| a.strip_prefix("-fuse-ld="))
        .next_back()
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

/// The name gcc's driver looks for, along its `-B` directories first, to run LTO code generation.
pub const GCC_WRAPPER: &str = "lto-wrapper";
/// The real `lto-wrapper`, for bootprof-link standing in for it.
const REAL_WRAPPER_ENV: &str = "BOOTPROF_LTO_WRAPPER";
/// Where bootprof-link, standing in for `lto-wrapper`, keeps the objects it generated.
const KEEP_ENV: &str = "BOOTPROF_LTO_KEEP";
/// The list of kept objects in that directory, one path a line, in link order.
const KEPT_LIST: &str = "objects.list";

/// Runs the link `args` (the user's line with its sources compiled) once, keeping the machine
/// code LTO generates for `ir` in `dir/lto`; returns those objects in the order the linker
/// takes them. A failed link is the link's failure: its stderr has passed through, and
/// [`Error::LinkFailed`] carries its exit status.
///
/// gcc: its linker plugin runs `lto-wrapper`, which prints the objects it generated (the LTRANS
/// partitions, and with `-g` the early debug information they refer to) for the plugin to add to
/// the link. A `-B` directory holding bootprof-link under that name makes the driver run it
/// instead ([`stand_in_for_lto_wrapper`]): it runs the real one and keeps what it printed.
/// LLVM (lld, or GNU ld with the LLVM plugin) writes its objects where `-plugin-opt=obj-path=`
/// says: `lto.o`, `lto.o1`, ...
pub fn generate(line: &LinkLine, args: &[String], ir: IrKinds, dir: &Path) -> Result<Vec<PathBuf>> {
    let cg = dir.join("lto");
    std::fs::create_dir(&cg).map_err(|e| Error::io(&cg, e))?;
    let out = cg.join("out");
    let mut args = crate::link::redirect_output(line, args.to_vec(), &out);
    let mut env = Vec::new();
    if ir.gcc {
        let bin = cg.join("bin");
        std::fs::create_dir(&bin).map_err(|e| Error::io(&bin, e))?;
        let me = std::env::current_exe().map_err(|e| Error::io("/proc/self/exe", e))?;
        let link = bin.join(GCC_WRAPPER);
        std::os::unix::fs::symlink(&me, &link).map_err(|e| Error::io(&link, e))?;
        // First, so that no `-B` of the user's is searched before it.
        args.insert(0, format!("-B{}/", bin.display()));
        env.push((REAL_WRAPPER_ENV, real_lto_wrapper(line)?));
        env.push((KEEP_ENV, cg.display().to_string()));
    }
    if ir.llvm {
        args.push(format!(
            "-Wl,-plugin-opt=obj-path={}",
            cg.join("lto.o").display()
        ));
    }
    // The probe symbols are defined by the stubs of the final link, made from this link's code.
    args.push("-Wl,--unresolved-symbols=ignore-all".into());
    let mut cmd = driver::driver_command(&line.driver, &args, dir)?;
    cmd.envs(env);
    let (status, _) = driver::status_of(cmd)?;
    if !status.success() {
        return Err(Error::LinkFailed(driver::exit_code(status)));
    }
    let mut objects = kept_by_stand_in(&cg)?;
    objects.extend(llvm_objects(&cg)?);
    for path in &objects {
        let data = crate::elf::map(path)?;
        // An object that still holds IR would be handed to code generation again.
        if classify(&data) != FileKind::Object || object_ir(&data).is_some() {
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

/// The `lto-wrapper` the driver of `line` would run (`DRIVER -print-prog-name=lto-wrapper`, with
/// the line's options that choose the driver's tools).
fn real_lto_wrapper(line: &LinkLine) -> Result<String> {
    let mut cmd = std::process::Command::new(&line.driver);
    let mut i = 0;
    while i < line.args.len() {
        let a = &line.args[i];
        if a == "-B" || a == "--sysroot" {
            cmd.args(&line.args[i..(i + 2).min(line.args.len())]);
            i += 1;
        } else if a.starts_with("-B") || a.starts_with("--sysroot=") {
            cmd.arg(a);
        }
        i += 1;
    }
    let out = cmd
        .arg(format!("-print-prog-name={GCC_WRAPPER}"))
        .output()
        .map_err(|source| Error::Spawn {
            program: line.driver.clone(),
            source,
        })?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !Path::new(&path).is_absolute() {
        return Err(Error::Usage(format!(
            "`{} -print-prog-name={GCC_WRAPPER}` does not name gcc's LTO wrapper, which the LTO \
             objects on the line need",
            line.driver
        )));
    }
    Ok(path)
}

/// bootprof-link run as `lto-wrapper` (`argv` without `argv[0]`): runs the real one with the same
/// arguments and environment, keeps a link to each object it prints in the directory the parent
/// named, lists them there in order, and prints what it printed so that the plugin adds them to
/// the link as always. Returns the exit status.
pub fn stand_in_for_lto_wrapper(argv: &[std::ffi::OsString]) -> i32 {
    let (Some(real), Some(keep)) = (
        std::env::var_os(REAL_WRAPPER_ENV),
        std::env::var_os(KEEP_ENV),
    ) else {
        eprintln!("lto-wrapper (bootprof-link): run by gcc's plugin only, under bootprof-link");
        return 1;
    };
    let keep = PathBuf::from(keep);
    let out = match std::process::Command::new(&real)
        .args(argv)
        .stderr(std::process::Stdio::inherit())
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!(
                "lto-wrapper (bootprof-link): cannot run {}: {e}",
                real.to_string_lossy()
            );
            return 1;
        }
    };
    if !out.status.success() {
        return driver::exit_code(out.status);
    }
    let mut list = String::new();
    for (i, name) in String::from_utf8_lossy(&out.stdout).lines().enumerate() {
        let from = Path::new(name.trim());
        if name.trim().is_empty() {
            continue;
        }
        let base = from.file_name().map(|b| b.to_string_lossy().into_owned());
        let to = keep.join(format!("{i:04}-{}", base.unwrap_or_default()));
        // The plugin removes its temporaries after the link: keep our own name for each.
        let kept = std::fs::hard_link(from, &to).or_else(|_| std::fs::copy(from, &to).map(|_| ()));
        if let Err(e) = kept {
            eprintln!("lto-wrapper (bootprof-link): {}: {e}", from.display());
            return 1;
        }
        list.push_str(&format!("{}\n", to.display()));
    }
    let listed = keep.join(KEPT_LIST);
    if let Err(e) = std::fs::write(&listed, list) {
        eprintln!("lto-wrapper (bootprof-link): {}: {e}", listed.display());
        return 1;
    }
    use std::io::Write;
    let mut stdout = std::io::stdout();
    if stdout
        .write_all(&out.stdout)
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return 1;
    }
    0
}

/// The objects the `lto-wrapper` stand-in kept in `cg`, in link order (none when it did not run:
/// no IR object was taken into the link).
fn kept_by_stand_in(cg: &Path) -> Result<Vec<PathBuf>> {
    let listed = cg.join(KEPT_LIST);
    match std::fs::read_to_string(&listed) {
        Ok(text) => Ok(text.lines().map(PathBuf::from).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io(listed, e)),
    }
}

/// The objects LLVM's code generation wrote in `cg`: `lto.o`, `lto.o1`, `lto.o2`, ... in order.
fn llvm_objects(cg: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(cg).map_err(|e| Error::io(cg, e))? {
        let entry = entry.map_err(|e| Error::io(cg, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let number = match name.strip_prefix("lto.o") {
            Some("") => Some(0),
            Some(n) => n.parse::<u64>().ok(),
            None => None,
        };
        if let Some(n) = number {
            found.push((n, entry.path()));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}
