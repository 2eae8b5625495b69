//! `bootprof report --srcline`: the source lines of a real C program's functions, probe and
//! stack frames, from its DWARF, position-independent or not; a note for a program without
//! debug information; an error for a format that does not show them.

use crate::util::{cmd, link_bin, require, run, write, TempDir, BOOTPROF};
use std::path::{Path, PathBuf};

/// Line numbers matter: square is on line 5, sum_squares on 9, the probe on 12, the call of
/// square on 13, main on 18 and its call of sum_squares on 19.
const PROGRAM: &str = "#include <stdio.h>

void __dtrace_sdt_app__step(unsigned long);

__attribute__((noinline)) int square(int n) {
    return n * n;
}

__attribute__((noinline)) int sum_squares(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        __dtrace_sdt_app__step(i);
        s += square(i);
    }
    return s;
}

int main(void) {
    printf(\"%d\\n\", sum_squares(4));
    return 0;
}
";

/// `prog.c` compiled in `dir` (so that its DWARF names it `prog.c`, in `dir`) with `flags`,
/// linked by bootprof-link as `name` with `link`; run, recording the stacks at `square`.
/// Returns the executable and the session.
fn build_and_record(
    dir: &TempDir,
    name: &str,
    flags: &[&str],
    link: &[&str],
) -> (PathBuf, PathBuf) {
    write(dir.join("prog.c"), PROGRAM);
    let obj = format!("{name}.o");
    let compile = cmd(
        "cc",
        ["-c", "-O1", "-pg", "-mfentry", "-fno-omit-frame-pointer"],
    );
    let mut compile = compile;
    compile
        .args(flags)
        .args(["prog.c", "-o", &obj])
        .current_dir(dir.path());
    run(compile).ok();
    let exe = dir.join(name);
    run(cmd(link_bin(), ["cc"])
        .args(link)
        .arg("-o")
        .arg(&exe)
        .arg(dir.join(&obj)))
    .ok();
    let session = dir.join(format!("{name}.session"));
    run(cmd(BOOTPROF, ["run", "--stacktrace", "square", "-o"])
        .arg(&session)
        .arg("--")
        .arg(&exe))
    .ok();
    (exe, session)
}

/// `bootprof report --srcline --format FORMAT SESSION`: (exit code, stdout, stderr).
fn report(session: &Path, format: &str) -> (Option<i32>, String, String) {
    let out = run(cmd(BOOTPROF, ["report", "--srcline", "--format", format]).arg(session));
    out.no_panic();
    (out.code, out.stdout, out.stderr)
}

#[test]
fn srcline_shows_the_lines_of_functions_probes_and_frames() {
    require!("cc");
    let dir = TempDir::new("srcline");
    for (name, link) in [("pie", &[][..]), ("nopie", &["-no-pie"][..])] {
        let (_, session) = build_and_record(&dir, name, &["-g"], link);
        let (code, text, stderr) = report(&session, "text");
        assert_eq!((code, stderr.as_str()), (Some(0), ""), "{name}: {text}");
        let records: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once(": ").map(|(_, r)| r))
            .filter(|r| !r.starts_with("main") && !r.starts_with("<stack"))
            .take(3)
            .collect();
        assert_eq!(
            records,
            [
                "sum_squares [prog.c:9] <-main",
                "EVENT app:step [prog.c:12] arg=0x0",
                "square [prog.c:5] <-sum_squares",
            ],
            "{name}: {text}"
        );
        // The stack at square: the site (square's first line), then the calls.
        let frames: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(" => "))
            .take(3)
            .map(|l| l.split_once(' ').map_or(l, |(_, r)| r))
            .map(|l| l.rsplit_once(' ').map_or(l, |(_, r)| r))
            .collect();
        assert_eq!(
            frames,
            ["[prog.c:5]", "[prog.c:13]", "[prog.c:19]"],
            "{name}: {text}"
        );
        let (_, summary, _) = report(&session, "summary");
        for line in [
            "  main [prog.c:18]",
            "  sum_squares [prog.c:9]",
            "  square [prog.c:5]",
            "  app:step [prog.c:12]",
        ] {
            assert!(
                summary.lines().any(|l| l.ends_with(line)),
                "{name}: {line}: {summary}"
            );
        }
        let (_, points, _) = report(&session, "points");
        let square = points.lines().find(|l| l.starts_with("square "));
        assert!(
            square.is_some_and(|l| l.ends_with(" prog.c:5")),
            "{name}: {points}"
        );
    }
}

#[test]
fn srcline_without_debug_information_says_so_once() {
    require!("cc");
    let dir = TempDir::new("srcline-nog");
    let (exe, session) = build_and_record(&dir, "nog", &[], &[]);
    let exe = std::fs::canonicalize(exe).unwrap();
    let (code, points, stderr) = report(&session, "points");
    assert_eq!(code, Some(0), "{points}");
    assert_eq!(
        stderr,
        format!(
            "bootprof: note: --srcline: {}: no debug information (built without -g, or \
             stripped): its functions have no source line\n",
            exe.display()
        )
    );
    let square = points.lines().find(|l| l.starts_with("square "));
    assert!(square.is_some_and(|l| l.ends_with(" -")), "{points}");
    // Formats that do not show source lines refuse the option.
    let (code, out, stderr) = report(&session, "chrome");
    assert_eq!(
        (code, out.as_str(), stderr.as_str()),
        (
            Some(1),
            "",
            "bootprof: error: --srcline applies to --format text, summary and points only\n"
        )
    );
}
