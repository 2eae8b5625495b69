//! Check: takes what the final link reported about the probe symbols and hooks, and the binary it
//! wrote (still under its temporary name); hands on nothing when no call to a probe symbol or a
//! hook can run outside the site table's control, or the error that names what survived.
//!
//! Run on every output, LTO or not. What it asks:
//! - who references a hook (`mcount`, `__fentry__`, `__cyg_profile_func_enter/exit`), a probe
//!   symbol the stubs define, or glibc's gmon start-up (`__monstartup`, `_mcleanup`)? The linker
//!   says, for every file it loads (`--trace-symbol`, GNU ld and lld alike). The inputs
//!   bootprof-link rewrote have been checked relocation by relocation already (a reference that
//!   is not a site fails there); shared libraries are not the program's code. Anything else
//!   that references them is code nobody rewrote: LTO code generated inside the final link, a
//!   start file, a system archive. That is the error.
//! - does the binary import a hook or probe symbol (a dynamic reference that no stub defined)?
//! - does every site its table lists hold its NOP?

use crate::error::{Error, Location, Result};
use bootprof_format::file::{classify, FileKind, SNIFF_LEN};
use bootprof_format::linked::{first_without_nop, Image};
use bootprof_format::Kind;
use std::collections::BTreeSet;
use std::path::Path;

/// glibc's gmon start-up, which `gcrt1.o` (`-pg` on a link line) brings in.
pub const GMON: &[&str] = &["__monstartup", "_mcleanup"];

/// The symbols whose references the final link reports: the hooks, the gmon start-up and the
/// probe symbols the stubs define.
pub fn traced_symbols<'a>(stubbed: impl IntoIterator<Item = &'a [u8]>) -> BTreeSet<String> {
    // The hooks, which any link may meet.
    let hooks = bootprof_format::HOOKS.iter().map(|(s, _)| s);
    let mut traced: BTreeSet<String> = hooks.chain(GMON).map(|s| s.to_string()).collect();
    traced.extend(
        stubbed
            .into_iter()
            .map(|n| String::from_utf8_lossy(n).into_owned()),
    );
    traced
}

/// One line of the linker's `--trace-symbol` report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traced {
    /// The file, as the linker names it (`x.o`, `libx.a(m.o)`, `x.o (symbol from plugin)`).
    pub file: String,
    /// The symbol.
    pub symbol: String,
    /// Whether the file references the symbol (rather than defines it).
    pub reference: bool,
}

/// Reads a line of the linker's output as a `--trace-symbol` report about one of `traced`:
/// `[LINKER: ]FILE: reference to SYM`, or `...: [shared |lazy |common ]definition of SYM`
/// (GNU ld writes them to stderr behind its own name, lld to stdout).
pub fn parse_traced(line: &str, traced: &BTreeSet<String>) -> Option<Traced> {
    const FORMS: &[(&str, bool)] = &[
        (": reference to ", true),
        (": definition of ", false),
        (": shared definition of ", false),
        (": lazy definition of ", false),
        (": common definition of ", false),
        (": common of ", false),
    ];
    let line = line.trim_end();
    let (head, symbol, reference) = FORMS.iter().find_map(|&(form, reference)| {
        let (head, symbol) = line.rsplit_once(form)?;
        traced
            .contains(symbol)
            .then(|| (head, symbol.to_string(), reference))
    })?;
    // GNU ld puts its own name first ("/usr/bin/ld.bfd: x.o: ...").
    let file = match head.split_once(": ") {
        Some((program, rest)) if is_linker_name(program) => rest,
        _ => head,
    };
    Some(Traced {
        file: file.to_string(),
        symbol,
        reference,
    })
}

/// Whether `program` names a linker (`ld`, `/usr/bin/ld.bfd`, `ld.gold`, `ld.lld`, `mold`, ...).
fn is_linker_name(program: &str) -> bool {
    let base = program.rsplit('/').next().unwrap_or(program);
    base == "ld"
        || base.starts_with("ld.")
        || base.ends_with("-ld")
        || base.ends_with("lld")
        || base == "mold"
}

/// Checks the references the final link reported. `inputs` are the arguments of the final link
/// (the rewritten inputs and the generated stubs among them); `output` names the link in the
/// error.
pub fn check_references(traced: &[Traced], inputs: &[String], output: &Path) -> Result<()> {
    let inputs: BTreeSet<&str> = inputs.iter().map(String::as_str).collect();
    let mut survived = Vec::new();
    for t in traced.iter().filter(|t| t.reference) {
        let (file, plugin) = match t.file.strip_suffix(" (symbol from plugin)") {
            Some(f) => (f, true),
            None => (t.file.as_str(), false),
        };
        // `libx.a(m.o)` is a member of libx.a.
        let container = file
            .strip_suffix(')')
            .and_then(|f| f.split_once('('))
            .map_or(file, |(a, _)| a);
        // lld reports the symbols it was asked to trace as referenced by `<internal>`.
        if !plugin && (inputs.contains(container) || file == "<internal>") {
            continue;
        }
        if !plugin && is_shared_object(Path::new(container)) {
            continue;
        }
        survived.push(format!(
            "`{}` is referenced by {} ({})",
            t.symbol,
            t.file,
            why_not_rewritten(file, plugin, &t.symbol)
        ));
    }
    if survived.is_empty() {
        return Ok(());
    }
    Err(Error::Refused {
        at: Location::file(output.display().to_string()),
        what: format!(
            "calls to probe symbols or hooks would stay live outside the site table; the link \
             is refused and the previous output kept: {}",
            survived.join("; ")
        ),
    })
}

/// Why `file`, which references `symbol`, was not rewritten.
fn why_not_rewritten(file: &str, plugin: bool, symbol: &str) -> &'static str {
    let base = file.rsplit('/').next().unwrap_or(file);
    if plugin {
        "an LTO input whose code is generated during the final link, after bootprof-link \
         rewrote the inputs"
    } else if base.contains(".ltrans") || base.starts_with("lto.o") || base.contains(".lto.") {
        "LTO objects whose hooks were generated at link time, which bootprof-link did not see"
    } else if GMON.contains(&symbol) && (base.starts_with("gcrt") || base.starts_with("grcrt")) {
        "glibc's gmon profiling start-up, which -pg brings in: pass -pg to the compiler only"
    } else {
        "an input bootprof-link did not rewrite: one the compiler driver, a linker script or a \
         linker option adds"
    }
}

/// Whether `path` is a shared object (read from its first bytes).
fn is_shared_object(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; SNIFF_LEN];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && classify(&head) == FileKind::OtherElf
}

/// Checks the linked binary at `path` (named `output` in messages): it imports no hook, probe
/// symbol or gmon start-up, and every site its table lists holds its NOP. A file that is not a
/// 64-bit ELF (`--oformat binary`) has nothing to check.
pub fn check_output(path: &Path, output: &Path) -> Result<()> {
    use object::read::elf::ElfFile64;
    use object::{Object, ObjectSymbol};
    let data = crate::elf::map(path)?;
    let Ok(elf) = ElfFile64::<crate::elf::LE>::parse(&*data) else {
        return Ok(());
    };
    let at = |what: String| Error::Refused {
        at: Location::file(output.display().to_string()),
        what,
    };
    for sym in elf.dynamic_symbols().filter(|s| s.is_undefined()) {
        let name = sym.name_bytes().unwrap_or_default();
        let probe = Kind::classify(name).is_some();
        if probe || GMON.iter().any(|g| g.as_bytes() == name) {
            return Err(at(format!(
                "the linked program imports `{}`: a call to it stays live outside the site \
                 table; the link is refused and the previous output kept",
                String::from_utf8_lossy(name)
            )));
        }
    }
    let image = Image::new(&elf, &data);
    let bad = first_without_nop(&elf, &image).map_err(|e| {
        Error::malformed(
            Location {
                section: Some(bootprof_format::SECTION_NAME.into()),
                ..Location::file(output.display().to_string())
            },
            e,
        )
    })?;
    if let Some(bad) = bad {
        return Err(at(format!(
            "the site at {:#x} ({}+{:#x}) does not hold its NOP in the linked program; the link \
             is refused and the previous output kept",
            bad.site,
            image.string_at(bad.function).unwrap_or_default(),
            bad.func_offset
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_linkers_trace_lines() {
        let traced = traced_symbols([&b"__dtrace_sdt_app__x"[..]]);
        let bfd = parse_traced("/usr/bin/ld.bfd: n.o: reference to __fentry__", &traced);
        assert_eq!(
            bfd,
            Some(Traced {
                file: "n.o".into(),
                symbol: "__fentry__".into(),
                reference: true
            })
        );
        let lld = parse_traced(
            "/lib/x86_64-linux-gnu/libc.so.6: shared definition of mcount",
            &traced,
        );
        assert_eq!(
            lld.map(|t| (t.file, t.reference)),
            Some(("/lib/x86_64-linux-gnu/libc.so.6".into(), false))
        );
        let plugin = parse_traced(
            "/usr/bin/ld: m.o (symbol from plugin): reference to __dtrace_sdt_app__x",
            &traced,
        );
        assert_eq!(
            plugin.map(|t| t.file),
            Some("m.o (symbol from plugin)".into())
        );
        assert_eq!(parse_traced("n.o: reference to printf", &traced), None);
        assert_eq!(
            parse_traced("collect2: error: ld returned 1 exit status", &traced),
            None
        );
    }

    /// A program linked plainly with `-pg -mfentry` imports glibc's `__fentry__`: the check of
    /// the output refuses it; the same program without hooks passes.
    #[test]
    fn an_imported_hook_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("p.c");
        std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
        let link = |name: &str, flags: &[&str]| {
            let out = dir.path().join(name);
            let ok = std::process::Command::new("cc")
                .args(flags)
                .arg(&src)
                .arg("-o")
                .arg(&out)
                .status()
                .is_ok_and(|s| s.success());
            ok.then_some(out)
        };
        let (Some(hooked), Some(plain)) =
            (link("hooked", &["-pg", "-mfentry"]), link("plain", &[]))
        else {
            eprintln!("skipped: cc cannot link");
            return;
        };
        let err = check_output(&hooked, Path::new("app"))
            .unwrap_err()
            .to_string();
        // glibc's gmon start-up (gcrt1.o) and its __fentry__ are all imports.
        assert!(
            ["__fentry__", "__monstartup", "_mcleanup"]
                .iter()
                .any(|s| err.contains(&format!("imports `{s}`"))),
            "{err}"
        );
        assert!(err.starts_with("app: "), "{err}");
        check_output(&plain, Path::new("app")).unwrap();
    }
}
