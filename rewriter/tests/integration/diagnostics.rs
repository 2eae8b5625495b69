//! What `bootprof` says when something is missing or cut short: a reader that closes the pipe, a
//! binary without a site table, and a trace that was not written (each cause named).

use crate::util::{cmd, compile_c, link_bin, require, run, write, Out, TempDir, BOOTPROF};
use std::path::{Path, PathBuf};

/// A program with hook sites that ends as its first argument says: normally, by `abort()`, or
/// by `_exit(0)` (which skips the runtime's exit handler).
const PROGRAM: &str = r#"
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) int work(int n) { return n * 3 + 1; }
int main(int argc, char **argv) {
    int sum = 0;
    for (int i = 0; i < 100; i++) sum += work(i);
    if (argc > 1 && argv[1][0] == 'a') abort();
    if (argc > 1 && argv[1][0] == 'x') _exit(0);
    return sum == 14950 ? 0 : 1;
}
"#;

/// The program compiled `-pg -mfentry` in `dir`, linked as `name` with `link` (`None`: plain cc).
fn build(dir: &TempDir, name: &str, link: Option<&[&str]>) -> PathBuf {
    let src = dir.join("prog.c");
    write(&src, PROGRAM);
    let obj = compile_c(&src, &dir.join("prog.o"), &["-O2", "-pg", "-mfentry"]);
    let exe = dir.join(name);
    let mut linker = match link {
        Some(flags) => {
            let mut c = cmd(link_bin(), flags);
            c.arg("cc");
            c
        }
        None => cmd("cc", [] as [&str; 0]),
    };
    linker.arg("-o").arg(&exe).arg(&obj);
    run(&mut linker).ok();
    exe
}

/// `bootprof run -o TRACE -- EXE ARGS`.
fn record(trace: &Path, exe: &Path, args: &[&str]) -> Out {
    let out = run(
        cmd(BOOTPROF, ["run".as_ref(), "-o".as_ref(), trace.as_os_str()])
            .arg("--")
            .arg(exe)
            .args(args),
    );
    out.no_panic();
    out
}

/// Runs `bootprof ARGS` with its standard output a pipe whose reader is gone before bootprof
/// writes; returns bootprof's exit status as the shell reports it, and its stderr.
fn into_closed_pipe(args: &[&Path]) -> (String, String) {
    let script = r#"{ sleep 0.3; "$0" "$@"; echo "status=$?" >&2; } | head -c 0"#;
    let out = run(cmd("sh", ["-c", script]).arg(&BOOTPROF).args(args));
    let status = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("status="))
        .unwrap_or_else(|| panic!("no status line: {out}"))
        .to_string();
    (status, out.stderr)
}

// `bootprof list prog | head` used to end in a Rust panic (print! on a closed pipe).
#[test]
fn a_closed_pipe_ends_list_and_report_quietly_as_cat_does() {
    require!("cc", "sh", "head");
    let dir = TempDir::new("closed-pipe");
    let exe = build(&dir, "prog", Some(&[]));
    let trace = dir.join("prog.trace");
    record(&trace, &exe, &[]).ok();
    // cat, for comparison: killed by SIGPIPE, 128 + 13 to the shell, nothing on stderr.
    let (cat_status, _) = {
        let script = r#"{ sleep 0.3; cat "$0"; echo "status=$?" >&2; } | head -c 0"#;
        let out = run(cmd("sh", ["-c", script]).arg(&exe));
        let s = out.stderr.lines().find_map(|l| l.strip_prefix("status="));
        (s.map(String::from).unwrap_or_default(), out.stderr)
    };
    let list = Path::new("list");
    let report = Path::new("report");
    for args in [vec![list, &exe], vec![report, &trace]] {
        let (status, stderr) = into_closed_pipe(&args);
        assert_eq!(
            status, cat_status,
            "{args:?}: exit status unlike cat's: {stderr}"
        );
        let rest: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.starts_with("status="))
            .collect();
        assert!(rest.is_empty(), "{args:?} printed on stderr: {rest:?}");
    }
}

#[test]
fn a_binary_without_a_site_table_is_reported_as_such() {
    require!("cc");
    let dir = TempDir::new("no-table");
    let plain = build(&dir, "plain", None);
    for json in [false, true] {
        let mut c = cmd(BOOTPROF, ["list"]);
        if json {
            c.arg("--json");
        }
        let out = run(c.arg(&plain));
        out.no_panic();
        assert_eq!(out.code, Some(1), "{out}");
        assert!(
            out.stderr.contains("no bootprof site table") && out.stdout.is_empty(),
            "{out}"
        );
    }
}

#[test]
fn a_session_without_processes_is_explained_by_what_happened() {
    require!("cc");
    let dir = TempDir::new("missing-trace");
    let good = build(&dir, "good", Some(&[]));
    let bare = build(&dir, "bare", Some(&["--no-runtime"]));
    let plain = build(&dir, "plain", None);
    // Programs that cannot record: the session stays empty, and bootprof says why.
    for (n, (exe, why)) in [
        (&plain, "no bootprof site table"),
        (&bare, "no bootprof runtime"),
    ]
    .into_iter()
    .enumerate()
    {
        let session = dir.join(format!("s{n}"));
        let out = record(&session, exe, &[]);
        assert!(
            out.stderr.contains("no process recorded into the session") && out.stderr.contains(why),
            "{}: expected the reason `{why}`: {out}",
            exe.display()
        );
        let report = run(cmd(BOOTPROF, ["report".as_ref(), session.as_os_str()]));
        assert!(
            report.code == Some(1) && report.stderr.contains("holds no lane files"),
            "{report}"
        );
    }
    // A program that dies still leaves its records, and its own status comes back: abort is
    // 128 + 6.
    let session = dir.join("abort");
    let out = record(&session, &good, &["abort"]);
    assert_eq!(out.code, Some(134), "{out}");
    assert!(out.stderr.contains("1 process recorded"), "{out}");
    let summary = run(cmd(
        BOOTPROF,
        [
            "report".as_ref(),
            "--format".as_ref(),
            "summary".as_ref(),
            session.as_os_str(),
        ],
    ));
    let summary = summary.ok();
    assert!(summary.stdout.contains("killed by SIGABRT"), "{summary}");
    // A session directory that cannot be made: an error, and the program does not run.
    let out = record(&dir.join("missing/s"), &good, &[]);
    assert!(
        out.code == Some(1) && out.stderr.contains("cannot create the session directory"),
        "{out}"
    );
    // Nor one that is there already: a session is never written over.
    let out = record(&session, &good, &[]);
    assert!(
        out.code == Some(1) && out.stderr.contains("already exists"),
        "{out}"
    );
}

// `bootprof run -e 'nosuch*'` used to write an empty trace without a word.
#[test]
fn a_pattern_that_matches_no_site_is_reported_with_the_nearest_names() {
    require!("cc");
    let dir = TempDir::new("unmatched-pattern");
    let exe = build(&dir, "prog", Some(&[]));
    // With a trace (its sites are checked) and without one (the program's own table is).
    for args in [&[][..], &["abort"][..]] {
        let trace = dir.join("t.trace");
        let _ = std::fs::remove_dir_all(&trace);
        let out = run(cmd(
            BOOTPROF,
            ["run", "-e", "wrok*", "-e", "work", "-x", "*nosuch", "-o"],
        )
        .arg(&trace)
        .arg("--")
        .arg(&exe)
        .args(args));
        out.no_panic();
        assert!(
            out.stderr
                .contains("pattern `wrok*` (-e) matches none of the 2 sites; nearest: work, main")
                && out.stderr.contains("pattern `*nosuch` (-x) matches none"),
            "{args:?}: {out}"
        );
        assert!(!out.stderr.contains("pattern `work`"), "{args:?}: {out}");
    }
}
