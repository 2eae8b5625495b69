//! `cargo install --path runtime/cli` gives a working toolkit: installed into a temporary root,
//! the commands are used from an unrelated directory with a clean environment (PATH = the root's
//! `bin` and /usr/bin:/bin, HOME a fresh directory, nothing of bootprof's source tree in sight).
//! The header comes from `--print-include-dir` (and pkg-config); a C program with named probes
//! and a `-pg -mfentry` program are linked, listed, run disabled and enabled in trap and in call
//! mode, and reported. Then where the runtime and header are unpacked: `XDG_CACHE_HOME`, a home
//! that cannot be written (the temporary directory instead, refused when others can write it),
//! and `BOOTPROF_RUNTIME` naming a missing file.

use crate::util::{cmd, link_bin, mkdir, repo_root, require, run, write, Out, TempDir};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Named probes: three `app:step` hits with 0, 1, 2, then `app:done` with their sum.
const PROBES_C: &str = r#"#include "bootprof.h"
#include <stdio.h>

int main(void) {
    int sum = 0;
    for (int i = 0; i < 3; i++) {
        BOOTPROF_PROBE(app, step, i);
        sum += i;
    }
    BOOTPROF_PROBE(app, done, sum);
    printf("sum %d\n", sum);
    return 0;
}
"#;

/// Function hooks (`-pg -mfentry`): main calls twice 4 times, each twice calls leaf twice.
const FENTRY_C: &str = r#"#include <stdio.h>

__attribute__((noinline)) int leaf(int x) { return x * 2; }
__attribute__((noinline)) int twice(int x) { return leaf(x) + leaf(x + 1); }

int main(void) {
    int sum = 0;
    for (int i = 0; i < 4; i++)
        sum += twice(i);
    printf("sum %d\n", sum);
    return 0;
}
"#;

/// The installed toolkit, and the clean environment it is used in.
struct Installed {
    /// The install root's `bin`.
    bin: PathBuf,
    /// The working directory: outside the source tree, empty at first.
    work: PathBuf,
    /// HOME.
    home: PathBuf,
}

impl Installed {
    /// `program` (an installed command, or one of /usr/bin) with `args`, in the working
    /// directory, with nothing in its environment but PATH and HOME.
    fn cmd(&self, program: &str, args: &[&str]) -> Command {
        let installed = self.bin.join(program);
        let mut c = if installed.is_file() {
            cmd(installed, args)
        } else {
            cmd(program, args)
        };
        c.env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .env("HOME", &self.home)
            .current_dir(&self.work);
        c
    }

    /// Runs `program args`, requiring success; its stdout.
    fn ok(&self, program: &str, args: &[&str]) -> String {
        run(self.cmd(program, args)).ok().stdout
    }
}

/// Installs the `bootprof` package into `root` as a user would, except that it builds in this
/// test's own target directory, where the test build has already compiled the package
/// (`link_bin`): so the install compiles nothing and takes seconds instead of minutes, and puts
/// in `root/bin` what a fresh `cargo install` builds from the same sources.
fn install(root: &Path) {
    let target = Path::new(link_bin())
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/bootprof-link");
    let mut c = cmd(
        env!("CARGO"),
        ["install", "--quiet", "--locked", "--offline"],
    );
    c.arg("--path")
        .arg(repo_root().join("runtime/cli"))
        .arg("--root")
        .arg(root)
        .arg("--target-dir")
        .arg(target);
    run(c).ok();
    let mut installed: Vec<String> = std::fs::read_dir(root.join("bin"))
        .expect("the install root's bin")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    installed.sort();
    assert_eq!(
        installed,
        ["bootprof", "bootprof-link"],
        "in {}",
        root.display()
    );
}

/// The text report's rows: what follows each timestamp (`EVENT app:step arg=0x0`,
/// `leaf <-twice`).
fn report_rows(report: &str) -> Vec<String> {
    report
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(": ").map(|(_, row)| row.to_string()))
        .collect()
}

#[test]
fn installed_toolkit_links_runs_and_reports_from_anywhere() {
    require!("cc", "ld", "objcopy", "pkg-config");
    let dir = TempDir::new("install");
    let root = dir.join("root");
    install(&root);
    let t = Installed {
        bin: root.join("bin"),
        work: mkdir(dir.join("work")),
        home: mkdir(dir.join("home")),
    };

    let include = t.ok("bootprof-link", &["--print-include-dir"]);
    let include = include.trim_end();
    let cache = t.home.join(".cache/bootprof");
    assert!(
        Path::new(include).starts_with(&cache) && Path::new(include).join("bootprof.h").is_file(),
        "--print-include-dir printed {include}, not a directory holding bootprof.h under {}",
        cache.display()
    );
    let pc_dir = t.ok("bootprof-link", &["--print-pkg-config-dir"]);
    let mut pkg_config = t.cmd("pkg-config", &["--cflags", "bootprof"]);
    pkg_config.env("PKG_CONFIG_PATH", pc_dir.trim_end());
    assert_eq!(
        run(pkg_config).ok().stdout.trim_end(),
        format!("-I{include}")
    );
    let runtime = t.ok("bootprof-link", &["--print-runtime"]);
    let runtime = Path::new(runtime.trim_end());
    assert_eq!(runtime.parent(), Path::new(include).parent());
    let meta = std::fs::metadata(runtime).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o644, "{}", runtime.display());
    let meta = std::fs::metadata(runtime.parent().unwrap()).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o700, "{}", runtime.display());
    // The runtime shared objects carry, beside it.
    let shared = t.ok("bootprof-link", &["--print-shared-runtime"]);
    let shared = Path::new(shared.trim_end());
    assert_eq!(shared.parent(), runtime.parent());
    assert_ne!(shared, runtime);
    assert!(shared.is_file(), "{}", shared.display());

    write(t.work.join("probes.c"), PROBES_C);
    write(t.work.join("fentry.c"), FENTRY_C);
    let include_flag = format!("-I{include}");
    t.ok("cc", &["-O2", &include_flag, "-c", "probes.c"]);
    t.ok("bootprof-link", &["cc", "-o", "probes", "probes.o"]);
    t.ok("cc", &["-O2", "-pg", "-mfentry", "-c", "fentry.c"]);
    t.ok("bootprof-link", &["cc", "-pg", "-o", "fentry", "fentry.o"]);
    probes_program(&t);
    fentry_program(&t);
    cache_places(&t, &dir);
}

/// `program` (in the working directory): listed (`sites` sites, every one a NOP), run disabled
/// and then enabled (`-e '*'`) in trap and in call mode, each printing `stdout`; the text report
/// of each enabled run, by mode.
fn run_each_way(
    t: &Installed,
    program: &str,
    sites: usize,
    stdout: &str,
) -> Vec<(&'static str, String)> {
    let list = t.ok("bootprof", &["list", program]);
    assert!(
        list.ends_with(&format!("{sites} sites, all hold their NOP\n")),
        "{list}"
    );
    let path = format!("./{program}");
    assert_eq!(t.ok(&path, &[]), stdout);
    ["trap", "call"]
        .into_iter()
        .map(|mode| {
            let session = format!("{program}-{mode}");
            let out = t.ok(
                "bootprof",
                &["run", "-e", "*", "--mode", mode, "-o", &session, &path],
            );
            assert_eq!(out, stdout, "{mode} mode");
            (mode, t.ok("bootprof", &["report", &session]))
        })
        .collect()
}

/// The probes program (each probe a guard and a call site): its probes' arguments in order.
fn probes_program(t: &Installed) {
    for (mode, report) in run_each_way(t, "probes", 4, "sum 3\n") {
        assert_eq!(
            report_rows(&report),
            [
                "EVENT app:step arg=0x0",
                "EVENT app:step arg=0x1",
                "EVENT app:step arg=0x2",
                "EVENT app:done arg=0x3",
            ],
            "{mode} mode:\n{report}"
        );
    }
}

/// The `-pg -mfentry` program (main, twice and leaf): its calls in order, then counted.
fn fentry_program(t: &Installed) {
    let calls: Vec<&str> = std::iter::once("main")
        .chain(std::iter::repeat_n(["twice", "leaf", "leaf"], 4).flatten())
        .collect();
    for (mode, report) in run_each_way(t, "fentry", 3, "sum 32\n") {
        let functions: Vec<String> = report_rows(&report)
            .iter()
            .filter_map(|row| row.split_whitespace().next().map(str::to_string))
            .collect();
        assert_eq!(functions, calls, "{mode} mode:\n{report}");
    }
    t.ok(
        "bootprof",
        &[
            "run",
            "--count",
            "-e",
            "*",
            "-o",
            "fentry-count",
            "./fentry",
        ],
    );
    let counts = t.ok(
        "bootprof",
        &["report", "--format", "counts", "fentry-count"],
    );
    let rows: Vec<Vec<&str>> = counts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 3 && f[0].parse::<u64>().is_ok())
        .collect();
    assert_eq!(
        rows,
        [
            ["8", "fentry", "leaf"],
            ["4", "fentry", "twice"],
            ["1", "fentry", "main"]
        ],
        "{counts}"
    );
}

/// Where the runtime is unpacked: under XDG_CACHE_HOME when it is set; in the temporary directory
/// when the home cannot be written (and a link works from there); not in a temporary directory
/// others can write; not at all when BOOTPROF_RUNTIME names another, missing, runtime.
fn cache_places(t: &Installed, dir: &TempDir) {
    let print_runtime = |env: &[(&str, &Path)]| -> Out {
        let mut c = t.cmd("bootprof-link", &["--print-runtime"]);
        for (name, value) in env {
            c.env(name, value);
        }
        run(c)
    };
    let xdg = dir.join("xdg");
    let out = print_runtime(&[("XDG_CACHE_HOME", &xdg)]).ok();
    assert!(
        Path::new(out.stdout.trim_end()).starts_with(xdg.join("bootprof")),
        "{out}"
    );

    // A home under a regular file cannot be made, even by root.
    write(dir.join("not-a-directory"), "");
    let home = dir.join("not-a-directory/home");
    let tmp = mkdir(dir.join("tmp"));
    let uid = std::fs::metadata(dir.path()).unwrap().uid();
    let fallback = tmp.join(format!("bootprof-{uid}"));
    let env = [("HOME", home.as_path()), ("TMPDIR", tmp.as_path())];
    let out = print_runtime(&env).ok();
    assert!(
        Path::new(out.stdout.trim_end()).starts_with(&fallback),
        "{out}"
    );
    let mut link = t.cmd("bootprof-link", &["cc", "-pg", "-o", "fentry2", "fentry.o"]);
    link.envs(env);
    run(link).ok();
    assert_eq!(t.ok("./fentry2", &[]), "sum 32\n");

    std::fs::set_permissions(&fallback, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(
        &print_runtime(&env),
        &format!(
            "{}: not a directory of user {uid} closed to others",
            fallback.display()
        ),
    );

    let missing = dir.join("missing.a");
    refused(
        &print_runtime(&[("BOOTPROF_RUNTIME", &missing)]),
        &format!(
            "BOOTPROF_RUNTIME names {}, which is not a file",
            missing.display()
        ),
    );
}

/// Asserts that `out` is bootprof-link failing (exit status 1) with an error starting `message`.
#[track_caller]
fn refused(out: &Out, message: &str) {
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stderr
            .contains(&format!("bootprof-link: error: {message}")),
        "{out}"
    );
}
