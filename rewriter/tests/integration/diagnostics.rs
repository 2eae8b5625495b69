//! What `bootprof` says when something is missing or cut short: a reader that closes the pipe, a
//! binary without a site table, and a trace that was not written (each cause named).

use crate::util::{cmd, compile_c, link_bin, require, run, write, Out, TempDir, BOOTPROF};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

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

/// A program with 2,000 instrumented functions, each called 3 times: its site listing and its
/// trace's text report are each far longer than a pipe holds (64 KiB).
fn many_functions() -> String {
    let mut src = String::from("#include <stdio.h>\nint sink;\n");
    for i in 0..2000 {
        src +=
            &format!("__attribute__((noinline)) void function_{i:04}(void) {{ sink += {i}; }}\n");
    }
    src += "int main(void) {\n    for (int n = 0; n < 3; n++) {\n";
    for i in 0..2000 {
        src += &format!("        function_{i:04}();\n");
    }
    src + "    }\n    return sink == 3 * 1999000 ? 0 : 1;\n}\n"
}

/// Runs `program ARGS` with its standard output a pipe, reads the first 100 bytes of it, closes
/// it while the program still has much to write, and returns how it ended and its stderr.
fn close_pipe_early(program: impl AsRef<std::ffi::OsStr>, args: &[&Path]) -> (ExitStatus, String) {
    use std::io::Read;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 100];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap(), stderr)
}

// `bootprof list prog | head` used to end in a Rust panic (print! on a closed pipe).
#[test]
fn a_closed_pipe_ends_list_and_report_quietly_as_cat_does() {
    require!("cc");
    let dir = TempDir::new("closed-pipe");
    let src = dir.join("many.c");
    write(&src, many_functions());
    let obj = compile_c(&src, &dir.join("many.o"), &["-O1", "-pg", "-mfentry"]);
    let exe = dir.join("many");
    run(cmd(link_bin(), ["cc", "-o"]).arg(&exe).arg(&obj)).ok();
    let session = dir.join("session");
    record(&session, &exe, &[]).ok();
    let listing = run(cmd(BOOTPROF, ["list".as_ref(), exe.as_os_str()])).ok();
    let report = run(cmd(BOOTPROF, ["report".as_ref(), session.as_os_str()])).ok();
    for (what, out) in [("list", &listing), ("report", &report)] {
        assert!(
            out.stdout.len() > 2 * 65536,
            "{what}: too short to fill a pipe: {out}"
        );
    }
    // cat, for comparison: killed by SIGPIPE, nothing on stderr.
    let listed = dir.join("listing");
    write(&listed, &listing.stdout);
    let (cat, cat_stderr) = close_pipe_early("cat", &[&listed]);
    assert_eq!((cat.signal(), cat_stderr.as_str()), (Some(13), ""));
    let (list, report) = (Path::new("list"), Path::new("report"));
    for args in [[list, &exe], [report, &session]] {
        let (status, stderr) = close_pipe_early(BOOTPROF, &args);
        assert_eq!(
            status.signal(),
            Some(13),
            "{args:?}: {status}, unlike cat: {stderr}"
        );
        assert_eq!(stderr, "", "{args:?}");
    }
}

/// `show`: prints SIGPIPE's disposition and whether SIGUSR1 is blocked. `launch CMD...`: ignores
/// SIGPIPE, blocks SIGUSR1 and runs CMD.
const SIGNALS: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((noinline)) int show(void) {
    struct sigaction sa;
    sigset_t mask;
    sigaction(SIGPIPE, 0, &sa);
    sigprocmask(SIG_SETMASK, 0, &mask);
    printf("SIGPIPE %s, SIGUSR1 %s\n", sa.sa_handler == SIG_IGN ? "ignored" : "default",
           sigismember(&mask, SIGUSR1) ? "blocked" : "not blocked");
    return 0;
}
int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "launch") == 0) {
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, 0);
        signal(SIGPIPE, SIG_IGN);
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        return 127;
    }
    return show();
}
"#;

// bootprof restores SIGPIPE to its default for itself; the programs it runs must not notice.
#[test]
fn a_program_run_by_bootprof_gets_the_signal_dispositions_bootprof_was_given() {
    require!("cc");
    let dir = TempDir::new("dispositions");
    let src = dir.join("signals.c");
    write(&src, SIGNALS);
    let obj = compile_c(&src, &dir.join("signals.o"), &["-O2", "-pg", "-mfentry"]);
    let exe = dir.join("signals");
    run(cmd(link_bin(), ["cc", "-o"]).arg(&exe).arg(&obj)).ok();
    for (n, launch) in [false, true].into_iter().enumerate() {
        let prefix: Vec<&std::ffi::OsStr> = if launch {
            vec![exe.as_os_str(), "launch".as_ref()]
        } else {
            Vec::new()
        };
        let direct = match prefix.split_first() {
            Some((first, rest)) => run(cmd(first, rest).arg(&exe).arg("show")).ok(),
            None => run(cmd(&exe, ["show"])).ok(),
        };
        let expected = if launch {
            "SIGPIPE ignored, SIGUSR1 blocked\n"
        } else {
            "SIGPIPE default, SIGUSR1 not blocked\n"
        };
        assert_eq!(direct.stdout, expected, "{direct}");
        let session = dir.join(format!("s{n}"));
        let mut through = match prefix.split_first() {
            Some((first, rest)) => {
                let mut c = cmd(first, rest);
                c.arg(&BOOTPROF);
                c
            }
            None => cmd(BOOTPROF, [] as [&str; 0]),
        };
        through.args([
            "run".as_ref(),
            "-o".as_ref(),
            session.as_os_str(),
            "--".as_ref(),
        ]);
        let out = run(through.arg(&exe).arg("show")).ok();
        assert_eq!(out.stdout, expected, "launched: {launch}: {out}");
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
        let expected = format!(
            "bootprof: error: {}: no bootprof site table",
            plain.display()
        );
        assert!(
            out.stderr.starts_with(&expected) && out.stdout.is_empty(),
            "{out}"
        );
    }
    // Linked by bootprof-link, but the one function with a site was unused and --gc-sections
    // dropped it, and with it the table's only fragment: an empty table, not a missing one.
    let src = dir.join("unused.c");
    write(
        &src,
        "void __dtrace_sdt_app__unused(unsigned long);\n\
         __attribute__((noinline)) void unused(void) { __dtrace_sdt_app__unused(1); }\n\
         int main(void) { return 0; }\n",
    );
    let obj = compile_c(&src, &dir.join("unused.o"), &["-O2", "-ffunction-sections"]);
    let gc = dir.join("gc");
    run(cmd(link_bin(), ["cc", "-Wl,--gc-sections", "-o"])
        .arg(&gc)
        .arg(&obj))
    .ok();
    let out = run(cmd(BOOTPROF, ["list".as_ref(), gc.as_os_str()])).ok();
    assert_eq!(
        out.stdout,
        "0 sites: the site table is empty (the linker dropped every function that held a site, \
         as --gc-sections does with unused ones)\n",
        "{out}"
    );
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
