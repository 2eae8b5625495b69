//! Runs one corpus case through the matrix: {-O0, -O2} x {GNU ld, lld} x {PIE, -no-pie, -static},
//! each linked plainly (with a generated object defining the probe symbols as empty functions, the
//! disabled behaviour) and through bootprof-link, and checks:
//!
//! - the two programs print the same and exit the same (and as the case's directives expect);
//! - `bootprof list --json` shows exactly the call sites `objdump -dr` finds in the inputs (kind,
//!   form, function, offset), all holding their NOP, and `bootprof list` exits 0;
//! - no call or jump to a probe symbol is left in the output's code;
//! - functions the case says are absent are, with their sites;
//! - `-pg` programs write no gmon.out and pull in no gmon code;
//! - linking again gives the same bytes; `--partial-link` gives the same sites and behaviour.
//!
//! Objects are compiled once per optimisation level and code model and shared by the linkers and
//! link modes.

use crate::corpus::Case;
use crate::json::{list, Listing};
use crate::objdump::{calls_to_probes, sites_in_objects, Expected};
use crate::util::{
    classify, cmd, defined_functions, have, is_probe_symbol, link_bin, mkdir, nm, read, run,
    skipped, write, Out, TempDir,
};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

const OPT_LEVELS: [&str; 2] = ["-O0", "-O2"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linker {
    Bfd,
    Lld,
}

impl Linker {
    pub fn flag(self) -> &'static str {
        match self {
            Linker::Bfd => "-fuse-ld=bfd",
            Linker::Lld => "-fuse-ld=lld",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Linker::Bfd => "bfd",
            Linker::Lld => "lld",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pie,
    NoPie,
    Static,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Pie => "pie",
            Mode::NoPie => "no-pie",
            Mode::Static => "static",
        }
    }

    /// Compiler flags for objects linked in this mode (`-static` links the default PIE objects,
    /// as `cc -static` does on a PIE-by-default system).
    fn cflags(self) -> &'static [&'static str] {
        match self {
            Mode::Pie | Mode::Static => &[],
            Mode::NoPie => &["-fno-pie"],
        }
    }

    fn ldflags(self) -> &'static [&'static str] {
        match self {
            Mode::Pie => &[],
            Mode::NoPie => &["-no-pie"],
            Mode::Static => &["-static"],
        }
    }
}

/// One compile of a case: objects for one optimisation level and code model.
struct Build {
    dir: PathBuf,
    opt: &'static str,
    objects: Vec<PathBuf>,
    archive: Option<PathBuf>,
    shared_objects: Vec<PathBuf>,
    /// Defines every probe symbol the inputs reference as an empty function (is-enabled: 0).
    defs: PathBuf,
    /// Call sites of the program's objects and archive members.
    expected: Vec<Expected>,
    /// Call sites of the shared library's objects.
    expected_lib: Vec<Expected>,
    /// Functions defined by the program's inputs, and by the library's.
    functions: BTreeSet<String>,
    lib_functions: BTreeSet<String>,
}

fn compile_one(case: &Case, dir: &Path, src: &str, flags: &[&str]) -> PathBuf {
    let stem = Path::new(src).file_stem().unwrap().to_string_lossy();
    let object = dir.join(format!("{stem}.o"));
    let mut c = cmd(&case.driver, ["-c"]);
    c.args(flags)
        .args(&case.compile)
        .arg("-I")
        .arg(&case.dir)
        .arg("-I")
        .arg(crate::util::repo_root().join("runtime/include"))
        .arg(case.dir.join(src))
        .arg("-o")
        .arg(&object);
    run(&mut c).ok();
    object
}

fn compile(case: &Case, root: &Path, opt: &'static str, model: Mode) -> Build {
    let dir = mkdir(root.join(format!("{}{}", &opt[1..], model.name())));
    let mut flags = vec![opt];
    flags.extend_from_slice(model.cflags());
    let objects: Vec<PathBuf> = case
        .objects
        .iter()
        .map(|src| compile_one(case, &dir, src, &flags))
        .collect();
    let mut members = Vec::new();
    let archive = case.archive.as_ref().map(|(name, srcs)| {
        let adir = mkdir(dir.join("archive"));
        members = srcs
            .iter()
            .map(|s| compile_one(case, &adir, s, &flags))
            .collect();
        let archive = dir.join(name);
        run(cmd("ar", ["rcs".as_ref(), archive.as_os_str()]).args(&members)).ok();
        archive
    });
    let shared_objects: Vec<PathBuf> = match &case.shared {
        Some((_, srcs)) => {
            let sdir = mkdir(dir.join("shared"));
            srcs.iter()
                .map(|s| compile_one(case, &sdir, s, &[opt, "-fPIC"]))
                .collect()
        }
        None => Vec::new(),
    };

    // The plain builds need the probe symbols defined: empty functions, the disabled behaviour.
    let mut probes = BTreeSet::new();
    for o in objects.iter().chain(&members).chain(&shared_objects) {
        let elf = crate::elf::Elf::open(o);
        probes.extend(
            elf.undefined_symbols()
                .into_iter()
                .filter(|s| is_probe_symbol(s)),
        );
    }
    let mut c_defs = String::from("#define H __attribute__((visibility(\"hidden\")))\n");
    for p in &probes {
        if p.starts_with("__dtrace_isenabled_") {
            c_defs += &format!("H int {p}(void) {{ return 0; }}\n");
        } else {
            c_defs += &format!("H void {p}(void) {{}}\n");
        }
    }
    write(dir.join("defs.c"), c_defs);
    let defs = dir.join("defs.o");
    run(cmd("cc", ["-c", "-fPIC", "-O0"])
        .arg(dir.join("defs.c"))
        .arg("-o")
        .arg(&defs))
    .ok();

    let program_inputs: Vec<PathBuf> = objects.iter().chain(&members).cloned().collect();
    let functions_of = |objects: &[PathBuf]| -> BTreeSet<String> {
        objects
            .iter()
            .flat_map(|o| crate::elf::Elf::open(o).defined_functions())
            .collect()
    };
    Build {
        functions: functions_of(&program_inputs),
        lib_functions: functions_of(&shared_objects),
        expected: sites_in_objects(&program_inputs),
        expected_lib: sites_in_objects(&shared_objects),
        dir,
        opt,
        objects,
        archive,
        shared_objects,
        defs,
    }
}

/// Runs every entry of the matrix that applies to case `name`.
pub fn run_case(name: &str) {
    let case = Case::load(name);
    for tool in [case.driver.as_str(), "objdump", "nm", "ar", "cc"] {
        if !have(tool) {
            skipped(&format!("{tool} not found"));
            return;
        }
    }
    let skips = |what: &str| case.skip.iter().any(|s| s == what);
    let mut linkers = vec![Linker::Bfd];
    if !skips("lld") {
        if have("lld") {
            linkers.push(Linker::Lld);
        } else {
            skipped("lld not found");
        }
    }
    let mut modes = vec![Mode::Pie];
    if !skips("no-pie") {
        modes.push(Mode::NoPie);
    }
    if !skips("static") {
        if have("static") {
            modes.push(Mode::Static);
        } else {
            skipped("static libc not found (-static)");
        }
    }

    let tmp = TempDir::new(name);
    let mut failures = Vec::new();
    for opt in OPT_LEVELS {
        for model in [Mode::Pie, Mode::NoPie] {
            let uses = |m: &Mode| m.cflags() == model.cflags();
            if !modes.iter().any(uses) {
                continue;
            }
            let build = compile(&case, tmp.path(), opt, model);
            assert!(
                !build.expected.is_empty(),
                "{name}: objdump found no call sites in the inputs: the case is wrong"
            );
            for &mode in modes.iter().filter(|m| uses(m)) {
                for &linker in &linkers {
                    let what = format!("{name} {opt} {} {}", linker.name(), mode.name());
                    // Keep going after a failure so one run shows every failing entry.
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        check_config(&case, &build, linker, mode)
                    }));
                    if let Err(e) = result {
                        let msg = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        // The panic hook printed the whole message; the summary takes its first line.
                        let first = msg.lines().next().unwrap_or_default().to_string();
                        failures.push(format!("[{what}] {first}"));
                    }
                }
            }
        }
    }
    if !failures.is_empty() {
        panic!(
            "{} of the matrix entries failed (details above):\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// The link line after the driver: `<linker> <mode> -o out <objects> [archive] [extra] [-l]`.
fn link_args(
    case: &Case,
    build: &Build,
    linker: Linker,
    mode: Mode,
    out: &Path,
    extra: &[&Path],
    libdir: Option<&Path>,
) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![linker.flag().into()];
    a.extend(mode.ldflags().iter().map(OsString::from));
    a.push("-o".into());
    a.push(out.into());
    a.extend(build.objects.iter().map(OsString::from));
    a.extend(build.archive.iter().map(OsString::from));
    a.extend(extra.iter().map(OsString::from));
    if let (Some((lib, _)), Some(dir)) = (&case.shared, libdir) {
        let l = lib.trim_start_matches("lib").trim_end_matches(".so");
        a.push(format!("-L{}", dir.display()).into());
        a.push(format!("-l{l}").into());
        a.push(format!("-Wl,-rpath,{}", dir.display()).into());
    }
    a.extend(case.link.iter().map(OsString::from));
    a
}

fn shared_args(build: &Build, linker: Linker, out: &Path, extra: &[&Path]) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![linker.flag().into(), "-shared".into(), "-o".into()];
    a.push(out.into());
    a.extend(build.shared_objects.iter().map(OsString::from));
    a.extend(extra.iter().map(OsString::from));
    a
}

fn bootprof_link(options: &[&str], driver: &str, args: &[OsString]) -> Command {
    let mut c = cmd(link_bin(), options);
    c.arg(driver).args(args);
    c
}

/// Links with `c`, requiring success and no panic.
#[track_caller]
fn link(mut c: Command) -> Out {
    let out = run(&mut c);
    out.no_panic();
    out.ok()
}

/// Runs `program` with the case's arguments in a fresh empty directory `dir`.
fn run_program(case: &Case, program: &Path, dir: &Path) -> Out {
    mkdir(dir);
    let mut c = cmd(program, &case.args);
    c.current_dir(dir);
    run(&mut c)
}

fn same_behaviour(what: &str, reference: &Out, other: &Out) {
    assert!(
        reference.stdout == other.stdout && reference.code == other.code,
        "{what} behaves differently from the plain build:\nplain:{reference}\n{what}:{other}"
    );
}

/// The identities `(kind, form, function, func_offset)` of the expected sites whose function is
/// in the (plain) output, sorted.
fn expected_identities(
    expected: &[Expected],
    functions: &BTreeSet<String>,
) -> Vec<(String, String, String, u64)> {
    let mut v: Vec<_> = expected
        .iter()
        .filter(|e| functions.contains(&e.function))
        .map(Expected::identity)
        .collect();
    v.sort();
    v
}

fn diff(
    expected: &[(String, String, String, u64)],
    listed: &[(String, String, String, u64)],
) -> String {
    let mut s = String::new();
    let mut rest = listed.to_vec();
    for e in expected {
        match rest.iter().position(|l| l == e) {
            Some(i) => {
                rest.remove(i);
            }
            None => s += &format!("  missing from the table: {e:?}\n"),
        }
    }
    for l in rest {
        s += &format!("  in the table, not in the inputs: {l:?}\n");
    }
    s
}

/// Checks a listing against the sites found in the inputs; returns it for more checks.
#[track_caller]
fn check_listing(binary: &Path, expected: &[Expected], plain: &Path) -> Listing {
    let (listing, out) = list(binary);
    assert_eq!(out.code, Some(0), "bootprof list does not exit 0:{out}");
    let functions = defined_functions(plain);
    let want = expected_identities(expected, &functions);
    let got = listing.identities();
    assert!(
        want == got,
        "the table of {} does not match the call sites objdump finds in the inputs \
         ({} expected, {} listed):\n{}{}",
        binary.display(),
        want.len(),
        got.len(),
        diff(&want, &got),
        listing.out
    );
    assert_eq!(
        listing.count as usize,
        listing.sites.len(),
        "count:{}",
        listing.out
    );
    assert_eq!(listing.nop_ok, listing.count, "nop_ok:{}", listing.out);
    for s in &listing.sites {
        assert!(s.nop, "site does not hold its NOP: {s:?}");
        let len = if s.form.ends_with("-got") { 6 } else { 5 };
        assert_eq!(s.len, len, "length of a {} site: {s:?}", s.form);
        if matches!(s.kind.as_str(), "probe" | "is-enabled") {
            assert!(s.provider.is_some(), "a probe without provider: {s:?}");
        } else {
            assert_eq!(s.provider, None, "a hook with a provider: {s:?}");
            assert!(classify(&s.name).is_some(), "hook name: {s:?}");
        }
    }
    // Provider and name, per symbol: the multiset of `provider:name` must match too.
    let mut want_names: Vec<String> = expected
        .iter()
        .filter(|e| functions.contains(&e.function))
        .map(|e| {
            let (_, provider, name) = classify(&e.symbol).unwrap();
            format!("{provider}:{name}")
        })
        .collect();
    let mut got_names: Vec<String> = listing
        .sites
        .iter()
        .map(|s| format!("{}:{}", s.provider.as_deref().unwrap_or(""), s.name))
        .collect();
    want_names.sort();
    got_names.sort();
    assert_eq!(
        want_names, got_names,
        "probe names in the table:{}",
        listing.out
    );
    listing
}

#[track_caller]
fn check_no_calls_left(binary: &Path, functions: &BTreeSet<String>) {
    let calls = calls_to_probes(binary, functions);
    assert!(
        calls.is_empty(),
        "{} still calls probe symbols:\n{}",
        binary.display(),
        calls.join("\n")
    );
}

/// `-pg` checks: gmon.out not written, gcrt1.o/gmon not linked.
#[track_caller]
fn check_no_gmon(binary: &Path, run_dir: &Path) {
    assert!(
        !run_dir.join("gmon.out").exists(),
        "{} wrote gmon.out in {}",
        binary.display(),
        run_dir.display()
    );
    for (ty, name) in nm(binary) {
        let name = name.split('@').next().unwrap_or("");
        assert!(
            !name.contains("monstartup") && name != "_mcleanup",
            "{} pulls in gmon: `{ty} {name}` in nm",
            binary.display()
        );
        assert!(
            !(name == "__gmon_start__" && ty.is_ascii_uppercase()),
            "{} defines __gmon_start__ (gcrt1.o linked)",
            binary.display()
        );
    }
}

fn check_config(case: &Case, build: &Build, linker: Linker, mode: Mode) {
    let cfg = mkdir(build.dir.join(format!("{}-{}", linker.name(), mode.name())));
    let (plain_dir, bp_dir, partial_dir) = (
        mkdir(cfg.join("plain")),
        mkdir(cfg.join("bootprof")),
        mkdir(cfg.join("partial")),
    );
    let driver = case.driver.as_str();
    let defs = build.defs.as_path();

    // The shared library, plain and through bootprof-link.
    if let Some((lib, _)) = &case.shared {
        link(cmd(
            driver,
            shared_args(build, linker, &plain_dir.join(lib), &[defs]),
        ));
        link(bootprof_link(
            &[],
            driver,
            &shared_args(build, linker, &bp_dir.join(lib), &[]),
        ));
    }

    let plain = plain_dir.join("app");
    link(cmd(
        driver,
        link_args(case, build, linker, mode, &plain, &[defs], Some(&plain_dir)),
    ));
    let app = bp_dir.join("app");
    let bp_args = link_args(case, build, linker, mode, &app, &[], Some(&bp_dir));
    link(bootprof_link(&[], driver, &bp_args));
    let partial = partial_dir.join("app");
    let partial_args = link_args(case, build, linker, mode, &partial, &[], Some(&bp_dir));
    link(bootprof_link(&["--partial-link"], driver, &partial_args));

    // Behaviour.
    let ran_plain = run_program(case, &plain, &cfg.join("run-plain"));
    if let Some(expect) = &case.expect_stdout {
        assert_eq!(
            &ran_plain.stdout, expect,
            "the plain build's output:{ran_plain}"
        );
    }
    assert_eq!(
        ran_plain.code,
        Some(case.expect_exit),
        "the plain build's exit code:{ran_plain}"
    );
    let ran = run_program(case, &app, &cfg.join("run-bootprof"));
    same_behaviour("the bootprof-link build", &ran_plain, &ran);
    let ran_partial = run_program(case, &partial, &cfg.join("run-partial"));
    same_behaviour("the --partial-link build", &ran_plain, &ran_partial);

    // The tables against the call sites in the inputs.
    let listing = check_listing(&app, &build.expected, &plain);
    let mut kinds: BTreeSet<String> = listing.sites.iter().map(|s| s.kind.clone()).collect();
    check_no_calls_left(&app, &build.functions);
    if let Some((lib, _)) = &case.shared {
        let lib_listing =
            check_listing(&bp_dir.join(lib), &build.expected_lib, &plain_dir.join(lib));
        kinds.extend(lib_listing.sites.iter().map(|s| s.kind.clone()));
        check_no_calls_left(&bp_dir.join(lib), &build.lib_functions);
    }
    for kind in &case.expect_kinds {
        assert!(
            kinds.contains(kind),
            "no site of kind {kind} (program or library):{}",
            listing.out
        );
    }
    for (opt, form) in &case.expect_forms {
        if opt == &build.opt[1..] {
            assert!(
                listing.sites.iter().any(|s| &s.form == form),
                "no site of form {form} at -{opt}:{}",
                listing.out
            );
        }
    }
    // The check above sees calls to probe symbols where there are some: in the plain build.
    if build.expected.iter().any(|e| is_probe_symbol(&e.symbol)) {
        assert!(
            !calls_to_probes(&plain, &build.functions).is_empty(),
            "objdump shows no call to a probe in the plain build: the check is blind"
        );
    }

    // What must be left out, is.
    let plain_functions = defined_functions(&plain);
    let functions = defined_functions(&app);
    for f in &case.absent {
        assert!(
            !plain_functions.contains(f),
            "{f} is in the plain build: the case is wrong"
        );
        assert!(!functions.contains(f), "{f} is in {}", app.display());
        assert!(
            !listing.sites.iter().any(|s| &s.symbol == f),
            "{f} has sites in the table:{}",
            listing.out
        );
    }

    if case.is_pg() {
        assert!(
            cfg.join("run-plain/gmon.out").exists(),
            "the plain -pg build did not write gmon.out: the case is wrong"
        );
        check_no_gmon(&app, &cfg.join("run-bootprof"));
        check_no_gmon(&partial, &cfg.join("run-partial"));
    }

    // The same link again gives the same bytes.
    let first = read(&app);
    link(bootprof_link(&[], driver, &bp_args));
    let second = read(&app);
    if first != second {
        let at = first.iter().zip(&second).position(|(a, b)| a != b);
        panic!(
            "linking twice gives different outputs ({} and {} bytes, first difference at {:?})",
            first.len(),
            second.len(),
            at
        );
    }

    // --partial-link finds the same sites.
    let (partial_listing, out) = list(&partial);
    assert_eq!(
        out.code,
        Some(0),
        "bootprof list of the --partial-link build:{out}"
    );
    let (a, b) = (listing.identities(), partial_listing.identities());
    assert!(
        a == b,
        "--partial-link gives other sites than the default gather:\n{}",
        diff(&a, &b)
    );
}
