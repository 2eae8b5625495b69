//! LTO: `tests/sources/lto` built with every form of `-flto` that gcc and clang have, with GNU ld
//! and lld, PIE and not, its library archived by `ar`, `gcc-ar` or `llvm-ar`, one object without
//! `-flto` on the same line, with named probes alone, `-pg`, `-pg -mfentry` and
//! `-finstrument-functions`. In each, the table must hold exactly the hook and probe calls (and
//! guards) that the same LTO link makes without bootprof (counted in its disassembly), every one a
//! NOP, none left live, and the program must run the same disabled and with every site enabled.
//! Also: a C++ program, LTO code generation run once, and a hook that would survive refused.

use crate::json::{list, Listing};
use crate::objdump::calls_to_probes;
use crate::util::{
    cmd, defined_functions, have, link_bin, read, repo_root, require, run, skipped, source_dir,
    write, TempDir,
};
use std::path::{Path, PathBuf};

/// One build of the test program.
struct Build<'a> {
    /// Compiler and link driver.
    cc: &'a str,
    /// The LTO flags (compile and link).
    lto: &'a [&'a str],
    /// `bfd` or `lld`.
    ld: &'a str,
    /// How the program is linked: `-pie`, `-no-pie` (objects `-fno-pie`) or `-static`.
    link: &'a str,
    /// Hook flags (compile, and link for gcc, whose LTO code generation reads `-pg` there).
    hooks: &'a [&'a str],
    /// The archiver.
    ar: &'a str,
}

impl Build<'_> {
    fn name(&self) -> String {
        format!(
            "{} {} {} {} {} {}",
            self.cc,
            self.lto.join(" "),
            self.ld,
            self.link.trim_start_matches('-'),
            if self.hooks.is_empty() {
                "probes".into()
            } else {
                self.hooks.join(" ")
            },
            self.ar
        )
    }

    /// The flags of the link line, before the inputs.
    fn link_flags(&self) -> Vec<String> {
        let mut f = vec![format!("-fuse-ld={}", self.ld), "-O2".into()];
        f.push(self.link.into());
        f.extend(self.hooks.iter().map(|s| s.to_string()));
        f.extend(self.lto.iter().map(|s| s.to_string()));
        f
    }
}

fn include_flag() -> String {
    format!("-I{}", repo_root().join("runtime/include").display())
}

/// Compiles `src` of `tests/sources/lto` with `flags` into `dir`.
fn compile(b: &Build, dir: &Path, src: &str, flags: &[&str]) -> PathBuf {
    let out = dir.join(format!("{src}.o"));
    let mut c = cmd(b.cc, ["-c", "-O2", &include_flag()]);
    if b.link == "-no-pie" {
        c.arg("-fno-pie");
    }
    c.args(b.hooks).args(flags).arg(source_dir("lto").join(src));
    run(c.arg("-o").arg(&out)).ok();
    out
}

/// Guards recorded in the binary's `.bootprof_guard` section (16 bytes each).
fn guard_records(binary: &Path) -> usize {
    let out = run(cmd("readelf", ["-SW"]).arg(binary)).ok();
    for l in out.stdout.lines() {
        if l.contains(" .bootprof_guard ") {
            let size = l
                .split_whitespace()
                .skip_while(|w| *w != ".bootprof_guard")
                .nth(4);
            return usize::from_str_radix(size.unwrap_or("0"), 16).unwrap_or(0) / 16;
        }
    }
    0
}

/// The site table of `binary`, checked against the same link without bootprof: exactly
/// `expected` sites (that link's hook and probe calls and guards), each holding its NOP, and no
/// call to a hook or probe symbol left in the code. `what` names the build in messages.
pub fn check_table(binary: &Path, expected: usize, what: &str) -> Listing {
    let (listing, out) = list(binary);
    assert_eq!(out.code, Some(0), "{what}: {out}");
    assert_eq!(
        listing.sites.len(),
        expected,
        "{what}: the table has {} sites, the link without bootprof {expected} calls and \
         guards:\n{}",
        listing.sites.len(),
        listing.out
    );
    assert!(
        listing.sites.iter().all(|s| s.nop),
        "{what}: {}",
        listing.out
    );
    let left = calls_to_probes(binary, &defined_functions(binary));
    assert!(left.is_empty(), "{what}: calls left live: {left:#?}");
    listing
}

/// Builds the program as `b` says, plain and through bootprof-link, and checks the table against
/// the plain link's calls. Returns a line for the report.
fn check_build(t: &TempDir, b: &Build) -> String {
    let name = b.name();
    let dir = crate::util::mkdir(t.join(name.replace([' ', '='], "_")));
    let main = compile(b, &dir, "main.c", b.lto);
    let mut calls_flags = b.lto.to_vec();
    calls_flags.push("-DBOOTPROF_CALL_SITES");
    let calls = compile(b, &dir, "calls.c", &calls_flags);
    let plain = compile(b, &dir, "plain.c", &[]);
    let work = compile(b, &dir, "work.c", b.lto);
    let unused = compile(b, &dir, "unused.c", b.lto);
    let lib = dir.join("libwork.a");
    run(cmd(b.ar, ["rcs"]).arg(&lib).arg(&work).arg(&unused)).ok();
    let inputs = [
        main.as_path(),
        calls.as_path(),
        plain.as_path(),
        lib.as_path(),
    ];

    // The same LTO link without bootprof, the probe symbols defined by plain functions.
    let reference = dir.join("reference");
    let probes = dir.join("probes.o");
    let mut c = cmd(b.cc, ["-c", "-O2"]);
    if b.link == "-no-pie" {
        c.arg("-fno-pie");
    }
    run(c
        .arg(source_dir("lto").join("probes.c"))
        .arg("-o")
        .arg(&probes))
    .ok();
    run(cmd(b.cc, b.link_flags())
        .args(inputs)
        .arg(&probes)
        .arg("-o")
        .arg(&reference))
    .ok();
    let live = calls_to_probes(&reference, &defined_functions(&reference));
    let expected = live.len() + guard_records(&reference);

    let app = dir.join("app");
    let linked = run(cmd(link_bin(), ["--stats", b.cc])
        .args(b.link_flags())
        .args(inputs)
        .arg("-o")
        .arg(&app));
    linked.no_panic();
    let linked = linked.ok();
    let listing = check_table(&app, expected, &name);
    assert!(
        !listing.sites.iter().any(|s| s.name == "unused"),
        "{name}: the unused archive member's site is in the table"
    );
    let hooks = listing
        .sites
        .iter()
        .filter(|s| s.provider.is_none())
        .count();
    assert_eq!(hooks > 0, !b.hooks.is_empty(), "{name}: {}", listing.out);
    // --stats counts the sites of every input, the unused archive member's too.
    assert!(linked.stderr.contains(" sites="), "{name}: {linked}");
    for (enable, mode) in [
        (None, None),
        (Some("*"), Some("call")),
        (Some("*"), Some("trap")),
    ] {
        let mut c = cmd(&app, [""; 0]);
        if let (Some(e), Some(m)) = (enable, mode) {
            c.env("BOOTPROF_ENABLE", e).env("BOOTPROF_MODE", m);
        }
        let ran = run(c).ok();
        assert_eq!(ran.stdout, "total 475\n", "{name} {mode:?}");
    }
    format!("{name}: {} sites", listing.sites.len())
}

/// A `main` that calls work.c's `work` (or any `int work(int)` returning 2x+1), in `t`.
fn work_driver(t: &TempDir) -> PathBuf {
    let driver = t.join("driver.c");
    write(
        &driver,
        "int work(int);\nint main(void) { return work(1) == 3 ? 0 : 1; }\n",
    );
    driver
}

/// Runs `check_build` on each of `builds` whose tools are present.
fn check_all(t: &TempDir, builds: &[Build]) {
    let mut report = Vec::new();
    for b in builds {
        if !have(b.cc) || !have(b.ar) || (b.ld == "lld" && !have("lld")) {
            skipped(&format!("{}: a tool is missing", b.name()));
            continue;
        }
        report.push(check_build(t, b));
    }
    println!("{}", report.join("\n"));
}

const HOOKS: &[&[&str]] = &[
    &[],
    &["-pg"],
    &["-pg", "-mfentry"],
    &["-finstrument-functions"],
];

#[test]
fn gcc_every_lto_form_with_gnu_ld() {
    require!("gcc", "gcc-ar", "readelf", "objdump");
    let t = TempDir::new("lto-gcc");
    let mut builds = Vec::new();
    for lto in [
        &["-flto"][..],
        &["-flto=auto"],
        &["-flto=2"],
        &["-flto", "-ffat-lto-objects"],
    ] {
        for hooks in HOOKS {
            for (link, ar) in [("-pie", "gcc-ar"), ("-no-pie", "ar")] {
                builds.push(Build {
                    cc: "gcc",
                    lto,
                    ld: "bfd",
                    link,
                    hooks,
                    ar,
                });
            }
        }
    }
    check_all(&t, &builds);
}

/// Static links, both compilers' LTO: the C library's own code is not rewritten, and must not be
/// taken for a hook that survived.
#[test]
fn static_lto_links() {
    require!("static", "readelf", "objdump");
    let t = TempDir::new("lto-static");
    let mut builds = Vec::new();
    for (cc, ld, ar) in [("gcc", "bfd", "gcc-ar"), ("clang", "lld", "llvm-ar")] {
        for hooks in [&["-pg", "-mfentry"][..], &["-finstrument-functions"]] {
            builds.push(Build {
                cc,
                lto: &["-flto"],
                ld,
                link: "-static",
                hooks,
                ar,
            });
        }
    }
    check_all(&t, &builds);
}

#[test]
fn gcc_fat_lto_objects_with_lld() {
    // lld runs no gcc plugin: it links a fat object's machine code, which is rewritten as usual.
    require!("gcc", "lld", "readelf", "objdump");
    let t = TempDir::new("lto-gcc-lld");
    let builds: Vec<Build> = HOOKS
        .iter()
        .map(|hooks| Build {
            cc: "gcc",
            lto: &["-flto", "-ffat-lto-objects"],
            ld: "lld",
            link: "-pie",
            hooks,
            ar: "ar",
        })
        .collect();
    check_all(&t, &builds);
}

#[test]
fn clang_full_and_thin_lto_with_both_linkers() {
    require!("clang", "llvm-ar", "readelf", "objdump");
    let t = TempDir::new("lto-clang");
    let mut builds = Vec::new();
    for lto in [&["-flto"][..], &["-flto=thin"]] {
        for ld in ["lld", "bfd"] {
            for hooks in HOOKS {
                for link in ["-pie", "-no-pie"] {
                    builds.push(Build {
                        cc: "clang",
                        lto,
                        ld,
                        link,
                        hooks,
                        ar: if ld == "lld" { "llvm-ar" } else { "ar" },
                    });
                }
            }
        }
    }
    check_all(&t, &builds);
}

/// gcc runs its LTO code generation (lto-wrapper) once per link through bootprof-link: the
/// final link gets the generated objects, no IR. And nothing is left in the working directory.
#[test]
fn lto_code_generation_runs_once() {
    require!("gcc", "strace");
    if run(cmd("strace", ["-f", "-o", "/dev/null", "true"])).code != Some(0) {
        skipped("strace cannot trace processes here (ptrace refused)");
        return;
    }
    let t = TempDir::new("lto-once");
    let b = Build {
        cc: "gcc",
        lto: &["-flto=auto"],
        ld: "bfd",
        link: "-pie",
        hooks: &["-pg", "-mfentry"],
        ar: "ar",
    };
    // With -g, gcc's code generation also hands the link the early debug information.
    let main = compile(&b, t.path(), "work.c", &["-flto=auto", "-g"]);
    let driver = work_driver(&t);
    let trace = t.join("strace.txt");
    let app = t.join("app");
    let wd = crate::util::mkdir(t.join("wd"));
    run(
        cmd("strace", ["-f", "-s", "1024", "-e", "trace=execve", "-o"])
            .current_dir(&wd)
            .arg(&trace)
            .arg(link_bin())
            .arg("gcc")
            .args(b.link_flags())
            .arg(&main)
            .arg(&driver)
            .arg("-o")
            .arg(&app),
    )
    .ok();
    let text = String::from_utf8_lossy(&read(&trace)).into_owned();
    let wrappers = text
        .lines()
        .filter(|l| !l.contains("ENOENT"))
        .filter_map(|l| l.split_once("execve(\"")?.1.split_once('"'))
        // gcc's own, not bootprof-link standing in for it (from its private directory).
        .filter(|(program, _)| {
            program.ends_with("/lto-wrapper") && !program.contains("bootprof-link.")
        })
        .count();
    assert_eq!(wrappers, 1, "lto-wrapper ran {wrappers} times:\n{text}");
    run(cmd(&app, [""; 0])).ok();
    let left: Vec<_> = std::fs::read_dir(&wd).unwrap().collect();
    assert!(
        left.is_empty(),
        "the link left files in its working directory: {left:?}"
    );
}

#[test]
fn cxx_program_with_lto() {
    require!("g++", "readelf", "objdump");
    let t = TempDir::new("lto-cxx");
    for (cxx, ld) in [("g++", "bfd"), ("clang++", "lld"), ("clang++", "bfd")] {
        if !have(cxx) || (ld == "lld" && !have("lld")) {
            skipped(&format!("{cxx} with {ld}"));
            continue;
        }
        let dir = crate::util::mkdir(t.join(format!("{cxx}-{ld}")));
        let flags = ["-O2", "-flto", "-pg", "-mfentry"];
        let object = dir.join("cxx.o");
        run(cmd(cxx, flags)
            .arg(include_flag())
            .arg("-c")
            .arg(source_dir("lto").join("cxx.cc"))
            .arg("-o")
            .arg(&object))
        .ok();
        // The same LTO link without bootprof, its one probe defined by a plain function.
        let probes = dir.join("probes.c");
        write(&probes, "void __dtrace_sdt_cxx__add(void) {}\n");
        let probes_o = dir.join("probes.o");
        run(cmd("cc", ["-c", "-O2"])
            .arg(&probes)
            .arg("-o")
            .arg(&probes_o))
        .ok();
        let reference = dir.join("reference");
        run(cmd(cxx, flags)
            .arg(format!("-fuse-ld={ld}"))
            .arg(&object)
            .arg(&probes_o)
            .arg("-o")
            .arg(&reference))
        .ok();
        let expected = calls_to_probes(&reference, &defined_functions(&reference)).len()
            + guard_records(&reference);
        let app = dir.join("app");
        let o = run(cmd(link_bin(), ["--stats", cxx])
            .args(flags)
            .arg(format!("-fuse-ld={ld}"))
            .arg(&object)
            .arg("-o")
            .arg(&app));
        o.no_panic();
        o.ok();
        let listing = check_table(&app, expected, &format!("{cxx} {ld}"));
        assert!(
            listing.sites.iter().any(|s| s.kind == "fentry"),
            "{}",
            listing.out
        );
        assert!(
            listing.sites.iter().any(|s| s.name == "add"),
            "{}",
            listing.out
        );
        for enable in ["", "*"] {
            let ran = run(cmd(&app, [""; 0])
                .env("BOOTPROF_ENABLE", enable)
                .env("BOOTPROF_MODE", "call"))
            .ok();
            assert_eq!(ran.stdout, "caught negative\ncount 10\n", "{cxx} {ld}");
        }
    }
}

/// A hook the rewriter cannot see (an object handed to the linker inside `-Wl,`) would call
/// glibc's `__fentry__`, or the stub, outside the table: the link is refused, naming the symbol,
/// the object and why, and the earlier output stays.
#[test]
fn a_hook_that_would_survive_fails_the_link() {
    require!("cc", "lld");
    let t = TempDir::new("lto-survivor");
    let b = Build {
        cc: "cc",
        lto: &[],
        ld: "bfd",
        link: "-pie",
        hooks: &["-pg", "-mfentry"],
        ar: "ar",
    };
    let hidden_src = t.join("hidden.c");
    write(&hidden_src, "int work(int x) { return 2 * x + 1; }\n");
    let hidden = t.join("hidden.o");
    run(cmd(b.cc, ["-c", "-O2"])
        .args(b.hooks)
        .arg(&hidden_src)
        .arg("-o")
        .arg(&hidden))
    .ok();
    let driver = work_driver(&t);
    let app = t.join("app");
    let old = b"an earlier output\n";
    for ld in ["bfd", "lld"] {
        write(&app, old);
        let o = run(cmd(link_bin(), ["cc", "-O2", "-pg", "-mfentry"])
            .arg(format!("-fuse-ld={ld}"))
            .arg(&driver)
            .arg(format!("-Wl,{}", hidden.display()))
            .arg("-o")
            .arg(&app));
        o.no_panic();
        assert_eq!(o.code, Some(1), "{ld}: {o}");
        for want in [
            "`__fentry__`",
            "hidden.o",
            "did not rewrite",
            "previous output kept",
        ] {
            assert!(o.stderr.contains(want), "{ld}: no `{want}` in:{o}");
        }
        assert_eq!(read(&app), old, "{ld}: the earlier output was touched");
    }
}

/// gcc's LTO code generation makes hooks only when `-pg` is on the link line too: an LTO link
/// of `-pg` objects without it has no hooks (as without bootprof-link), and bootprof-link says
/// why.
#[test]
fn pg_missing_from_a_gcc_lto_link_is_noted() {
    require!("gcc");
    let t = TempDir::new("lto-no-pg");
    let b = Build {
        cc: "gcc",
        lto: &["-flto"],
        ld: "bfd",
        link: "-pie",
        hooks: &["-pg", "-mfentry"],
        ar: "ar",
    };
    let object = compile(&b, t.path(), "work.c", b.lto);
    let driver = work_driver(&t);
    let app = t.join("app");
    let o = run(cmd(link_bin(), ["gcc", "-O2", "-flto"])
        .arg(&object)
        .arg(&driver)
        .arg("-o")
        .arg(&app))
    .ok();
    assert!(
        o.stderr
            .contains("work.c.o was compiled with -pg, but the link line has no -pg"),
        "{o}"
    );
    let (listing, _) = list(&app);
    assert!(
        listing.sites.iter().all(|s| s.provider.is_some()),
        "{}",
        listing.out
    );
}
