//! Parse the link line: takes `bootprof-link`'s argv, hands on a [`LinkLine`]: our own options, the
//! driver, its arguments with `@file` response files expanded, which of them are inputs (objects,
//! archives, sources, `-l` libraries) and which is the output, and whether the line must pass
//! through untouched.

use crate::error::{Error, Result};
use bootprof_format::file::{self, FileKind, SNIFF_LEN};
use std::path::{Path, PathBuf};

/// `bootprof-link`'s own options (they come before the driver).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Report every input's sites and every relocation that is not a site.
    pub verbose: bool,
    /// Gather by one `-r` partial link of all object inputs.
    pub partial_link: bool,
    /// Do not link the runtime.
    pub no_runtime: bool,
    /// Link the whole runtime, not the lean runtime that loads the runtime library.
    pub embed_runtime: bool,
    /// Keep the private directory of rewritten inputs.
    pub keep_temps: bool,
    /// Remove the link's files before exiting, not in a child after it.
    pub no_fork: bool,
    /// Print one line of statistics to stderr.
    pub stats: bool,
}

/// What an argument of the driver is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// An option, or the value of the option before it.
    Option,
    /// An input file: object, archive, shared library, linker script...
    File,
    /// A source file the driver would compile (`.c`, `.cc`, `.S`, ...).
    Source,
    /// `-lname` or `-l name` (the value is in the same argument, or the next one is `Option`).
    Library,
    /// The value of `-o` (or the argument `-oFILE` itself).
    Output,
}

/// A parsed link line.
#[derive(Debug, Clone)]
pub struct LinkLine {
    /// Our own options.
    pub options: Options,
    /// The driver program (`cc`, `/usr/bin/cc`, `clang`, ...).
    pub driver: String,
    /// Its arguments, response files expanded.
    pub args: Vec<String>,
    /// What each argument is.
    pub kinds: Vec<ArgKind>,
    /// The output file (`a.out` when there is no `-o`).
    pub output: PathBuf,
    /// Why the line passes through untouched, if it does.
    pub passthrough: Option<&'static str>,
    /// `-L` directories, in order.
    pub lib_dirs: Vec<PathBuf>,
    /// Whether the line links statically (`-static`, `-static-pie`) — `-l` then finds `.a` only.
    pub static_link: bool,
}

/// Driver options whose value is the next argument.
const TAKES_VALUE: &[&str] = &[
    "-o",
    "-x",
    "-Xlinker",
    "-Xassembler",
    "-Xpreprocessor",
    "-Xclang",
    "-mllvm",
    "-T",
    "-L",
    "-l",
    "-u",
    "-e",
    "-z",
    "-I",
    "-D",
    "-U",
    "-include",
    "-imacros",
    "-isystem",
    "-idirafter",
    "-iprefix",
    "-iquote",
    "-isysroot",
    "-MF",
    "-MT",
    "-MQ",
    "-aux-info",
    "--param",
    "-target",
    "--sysroot",
    "-dumpdir",
    "-dumpbase",
    "-B",
    "-specs",
    "--specs",
    "-arch",
    "-G",
];

/// Extensions of the files a driver compiles.
const SOURCE_EXT: &[&str] = &[
    "c", "cc", "cp", "cxx", "cpp", "c++", "C", "CPP", "i", "ii", "s", "S", "sx", "m", "mm",
];

/// Extensions that mark a link input (never a driver).
const INPUT_EXT: &[&str] = &["o", "a", "rlib", "so", "lo", "obj", "lds", "ld"];

/// Whether `arg` names an input-like file by its extension (`.o`, `.a`, `.so.1`, `.c`, ...).
fn has_input_ext(arg: &str) -> bool {
    let name = Path::new(arg)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(arg);
    if name.contains(".so.") {
        return true;
    }
    match name.rsplit_once('.') {
        Some((_, ext)) => INPUT_EXT.contains(&ext) || SOURCE_EXT.contains(&ext),
        None => false,
    }
}

/// Whether `arg` is a program we can run: a path to an executable file, or a name found in `PATH`.
fn is_program(arg: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if arg.contains('/') {
        return executable(Path::new(arg)) && !is_link_input_file(Path::new(arg));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| executable(&d.join(arg))))
}

/// Whether the file at `path` is a relocatable ELF object or an archive (by its first bytes).
fn is_link_input_file(path: &Path) -> bool {
    matches!(sniff(path), FileKind::Object | FileKind::Archive)
}

/// The kind of the file at `path`, by its first bytes (an unreadable file reads as empty).
pub(crate) fn sniff(path: &Path) -> FileKind {
    use std::io::Read;
    let mut head = [0u8; SNIFF_LEN];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    file::classify(&head[..n])
}

/// Splits the text of a response file the way GCC's libiberty does: whitespace separates
/// arguments; single quotes keep everything literally; double quotes keep whitespace; a
/// backslash escapes the next character (outside single quotes).
pub fn split_response_file(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_arg = false;
    let mut chars = text.chars();
    let (mut single, mut double) = (false, false);
    while let Some(c) = chars.next() {
        if single {
            if c == '\'' {
                single = false;
            } else {
                cur.push(c);
            }
        } else if c == '\\' {
            if let Some(n) = chars.next() {
                cur.push(n);
            }
            in_arg = true;
        } else if double {
            if c == '"' {
                double = false;
            } else {
                cur.push(c);
            }
        } else if c == '\'' {
            single = true;
            in_arg = true;
        } else if c == '"' {
            double = true;
            in_arg = true;
        } else if c.is_whitespace() {
            if in_arg {
                out.push(std::mem::take(&mut cur));
                in_arg = false;
            }
        } else {
            cur.push(c);
            in_arg = true;
        }
    }
    if in_arg {
        out.push(cur);
    }
    out
}

/// Quotes `arg` for a response file (the inverse of [`split_response_file`]).
pub fn quote_response_arg(arg: &str) -> String {
    let mut s = String::with_capacity(arg.len() + 2);
    for c in arg.chars() {
        if c.is_whitespace() || matches!(c, '\\' | '\'' | '"') {
            s.push('\\');
        }
        s.push(c);
    }
    if s.is_empty() {
        s.push_str("''");
    }
    s
}

/// Expands `@file` arguments (recursively, at most 32 levels deep). A response file that cannot
/// be read stays a literal argument, as GCC does.
pub fn expand_response_files(args: Vec<String>) -> Vec<String> {
    fn go(args: Vec<String>, depth: u32, out: &mut Vec<String>) {
        for a in args {
            match a.strip_prefix('@') {
                Some(path) if depth < 32 && !path.is_empty() => match std::fs::read_to_string(path)
                {
                    Ok(text) => go(split_response_file(&text), depth + 1, out),
                    Err(_) => out.push(a),
                },
                _ => out.push(a),
            }
        }
    }
    let mut out = Vec::with_capacity(args.len());
    go(args, 0, &mut out);
    out
}

/// Parses `bootprof-link`'s arguments (without `argv[0]`). `default_driver` is used in the drop-in
/// form (from `BOOTPROF_CC`); `extra_flags` are our options from `BOOTPROF_LINK_FLAGS`.
pub fn parse(argv: Vec<String>, default_driver: &str, extra_flags: &str) -> Result<LinkLine> {
    let mut options = Options::default();
    let mut apply = |a: &str| -> bool {
        match a {
            "--verbose" => options.verbose = true,
            "--partial-link" => options.partial_link = true,
            "--no-runtime" => options.no_runtime = true,
            "--embed-runtime" => options.embed_runtime = true,
            "--keep-temps" => options.keep_temps = true,
            "--no-fork" => options.no_fork = true,
            "--stats" => options.stats = true,
            _ => return false,
        }
        true
    };
    for f in extra_flags.split_whitespace() {
        if !apply(f) {
            return Err(Error::Usage(format!(
                "BOOTPROF_LINK_FLAGS: unknown option `{f}`"
            )));
        }
    }
    let mut rest = argv.into_iter().peekable();
    while let Some(a) = rest.peek() {
        if !apply(a) {
            break;
        }
        rest.next();
    }
    let rest: Vec<String> = rest.collect();
    let (driver, args) = match rest.first() {
        Some(first)
            if !first.starts_with('-')
                && !first.starts_with('@')
                && !has_input_ext(first)
                && is_program(first) =>
        {
            (first.clone(), rest[1..].to_vec())
        }
        _ => (default_driver.to_string(), rest),
    };
    let args = expand_response_files(args);
    Ok(classify(options, driver, args))
}

fn classify(options: Options, driver: String, args: Vec<String>) -> LinkLine {
    let mut kinds = vec![ArgKind::Option; args.len()];
    let mut output = PathBuf::from("a.out");
    let mut passthrough: Option<&'static str> = None;
    let mut lib_dirs = Vec::new();
    let mut static_link = false;
    let mut has_input = false;
    let mut verbose_only = false;
    let mut linker_flags: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let next = args.get(i + 1).map(String::as_str);
        if a == "-" || !a.starts_with('-') {
            let is_source = Path::new(a)
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| SOURCE_EXT.contains(&e));
            kinds[i] = if a == "-" || is_source {
                ArgKind::Source
            } else {
                ArgKind::File
            };
            has_input = true;
            i += 1;
            continue;
        }
        match a {
            "-o" => {
                if let Some(v) = next {
                    output = PathBuf::from(v);
                    kinds[i + 1] = ArgKind::Output;
                }
            }
            "-l" => {
                kinds[i] = ArgKind::Library;
                has_input = true;
            }
            "-L" => {
                if let Some(v) = next {
                    lib_dirs.push(PathBuf::from(v));
                }
            }
            "-Xlinker" => linker_flags.extend(next),
            "-x" => passthrough = passthrough.or(Some("-x selects a language; compile separately")),
            "-static" | "-static-pie" | "--static" => static_link = true,
            "-r" | "--relocatable" => passthrough = passthrough.or(Some("relocatable link (-r)")),
            "--version" | "-dumpversion" | "-dumpmachine" | "-dumpspecs" | "-###" | "--help" => {
                passthrough = passthrough.or(Some("not a link"))
            }
            "-E" | "-S" | "-c" | "-M" | "-MM" | "-fsyntax-only" => {
                passthrough = passthrough.or(Some("compiles without linking"))
            }
            "-v" | "-V" => verbose_only = true,
            _ if a.starts_with("-print-") || a.starts_with("--print-") => {
                passthrough = passthrough.or(Some("not a link"))
            }
            _ if a.starts_with("-Wl,") => linker_flags.extend(a[4..].split(',')),
            _ if a.starts_with("-l") => {
                kinds[i] = ArgKind::Library;
                has_input = true;
            }
            _ if a.starts_with("-L") => lib_dirs.push(PathBuf::from(&a[2..])),
            _ if a.starts_with("-o") => {
                output = PathBuf::from(&a[2..]);
                kinds[i] = ArgKind::Output;
            }
            _ => {}
        }
        if TAKES_VALUE.contains(&a) && i + 1 < args.len() {
            i += 1;
        }
        i += 1;
    }
    for f in &linker_flags {
        match *f {
            "-r" | "-i" | "--relocatable" | "-Ur" => {
                passthrough = passthrough.or(Some("relocatable link (-r)"))
            }
            "--version" | "-v" | "-V" | "--help" => {
                passthrough = passthrough.or(Some("not a link"))
            }
            _ => {}
        }
    }
    if !has_input {
        passthrough = passthrough.or(Some(if verbose_only {
            "-v without inputs"
        } else {
            "no inputs"
        }));
    }
    LinkLine {
        options,
        driver,
        args,
        kinds,
        output,
        passthrough,
        lib_dirs,
        static_link,
    }
}

impl LinkLine {
    /// The library name of argument `i` (a [`ArgKind::Library`]): `m` for `-lm` or `-l m`.
    pub fn library_name(&self, i: usize) -> Option<&str> {
        let a = &self.args[i];
        if a == "-l" {
            self.args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix("-l")
        }
    }

    /// Whether the line gives the linker a script of its own (`-T`, `-Wl,-T`, `--script`).
    pub fn has_linker_script(&self) -> bool {
        let mut linker_args = Vec::new();
        let mut i = 0;
        while i < self.args.len() {
            let a = self.args[i].as_str();
            if a == "-T" || (a.starts_with("-T") && a.len() > 2) {
                return true;
            }
            if a == "-Xlinker" {
                linker_args.extend(self.args.get(i + 1).map(String::as_str));
                i += 1;
            } else if let Some(list) = a.strip_prefix("-Wl,") {
                linker_args.extend(list.split(','));
            }
            i += 1;
        }
        linker_args.iter().any(|f| {
            *f == "-T" || f.starts_with("--script") || (f.starts_with("-T") && f.len() > 2)
        })
    }

    /// Finds `-lname` in the user's `-L` directories as a static archive, the way the linker
    /// would: per directory, `libname.so` wins over `libname.a` unless linking statically, and
    /// `-l:file` names the file exactly. System directories are not searched: their archives are
    /// not ours to rewrite. `None` when the library is a shared one or not in a `-L` directory.
    pub fn find_static_library(&self, name: &str) -> Option<PathBuf> {
        for dir in &self.lib_dirs {
            if let Some(exact) = name.strip_prefix(':') {
                let p = dir.join(exact);
                if p.is_file() {
                    return has_archive_magic(&p).then_some(p);
                }
                continue;
            }
            if !self.static_link && dir.join(format!("lib{name}.so")).exists() {
                return None;
            }
            let p = dir.join(format!("lib{name}.a"));
            if p.is_file() {
                return Some(p);
            }
        }
        None
    }
}

fn has_archive_magic(p: &Path) -> bool {
    sniff(p) == FileKind::Archive
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn response_file_quoting() {
        assert_eq!(
            split_response_file("a 'b c' \"d e\" f\\ g\n\\\"h\\\\ ''"),
            v(&["a", "b c", "d e", "f g", "\"h\\", ""])
        );
        for s in ["plain", "with space", "q'uote", "b\\s", "d\"q", ""] {
            assert_eq!(split_response_file(&quote_response_arg(s)), v(&[s]));
        }
    }

    #[test]
    fn driver_and_dropin_forms() {
        let l = parse(
            v(&["--verbose", "cc", "-o", "app", "main.o", "-lm"]),
            "gcc",
            "",
        )
        .unwrap();
        assert_eq!(l.driver, "cc");
        assert!(l.options.verbose);
        assert_eq!(l.output, PathBuf::from("app"));
        assert_eq!(
            l.kinds,
            vec![
                ArgKind::Option,
                ArgKind::Output,
                ArgKind::File,
                ArgKind::Library
            ]
        );
        assert!(l.passthrough.is_none());
        let l = parse(v(&["-o", "app", "main.o"]), "gcc", "--partial-link").unwrap();
        assert_eq!(l.driver, "gcc");
        assert!(l.options.partial_link);
        let l = parse(v(&["main.o", "-oapp"]), "cc", "").unwrap();
        assert_eq!(l.driver, "cc");
        assert_eq!(l.output, PathBuf::from("app"));
    }

    #[test]
    fn passthrough_lines() {
        for line in [
            &["cc", "--version"][..],
            &["cc", "-r", "-o", "x.o", "a.o"],
            &["cc", "-Wl,-r", "-o", "x.o", "a.o"],
            &["cc", "-Xlinker", "--relocatable", "a.o"],
            &["cc", "-v"],
            &["cc", "-c", "a.c"],
            &["cc", "-print-prog-name=ld"],
        ] {
            let l = parse(v(line), "cc", "").unwrap();
            assert!(l.passthrough.is_some(), "{line:?}");
        }
        let l = parse(v(&["cc", "-v", "-o", "x", "a.o"]), "cc", "").unwrap();
        assert!(l.passthrough.is_none());
    }

    #[test]
    fn values_are_not_inputs() {
        let l = parse(
            v(&[
                "cc",
                "-T",
                "script.ld",
                "-L",
                "dir",
                "-u",
                "sym",
                "a.o",
                "x.c",
            ]),
            "cc",
            "",
        )
        .unwrap();
        assert_eq!(l.kinds[1], ArgKind::Option);
        assert_eq!(l.kinds[6], ArgKind::File);
        assert_eq!(l.kinds[7], ArgKind::Source);
        assert_eq!(l.lib_dirs, vec![PathBuf::from("dir")]);
    }
}
