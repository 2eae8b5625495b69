//! What `bootprof` says when something is missing or cut short: a reader that closes the pipe, a
//! binary without a site table, and a trace that was not written (each cause named); and outputs
//! that are pipes, written into rather than replaced.

use crate::util::{cmd, compile_c, link_bin, require, run, write, Out, TempDir, BOOTPROF};
use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// A program with hook sites that ends as its first argument says: normally, by `abort()`, or
/// by `_exit(0)` (which skips the runtime's exit handler); or, with `DIE_EARLY=kill` or
/// `DIE_EARLY=exit` in its environment, before any constructor has run (the runtime's too).
const PROGRAM: &str = r#"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void early(int argc, char **argv, char **envp) {
    (void)argc, (void)argv;
    for (; *envp; envp++) {
        if (strcmp(*envp, "DIE_EARLY=kill") == 0) raise(SIGKILL);
        if (strcmp(*envp, "DIE_EARLY=exit") == 0) _exit(3);
    }
}
__attribute__((section(".preinit_array"), used)) static void (*run_early)(int, char **, char **) = early;
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
    // It carries the runtime and records, with no site for a pattern to match.
    let session = dir.join("s");
    let out = run(cmd(BOOTPROF, ["run", "-e", "app:*", "-o"])
        .arg(&session)
        .arg("--")
        .arg(&gc));
    let expected = format!(
        "bootprof: warning: pattern `app:*` (-e) matched no site of {}: it has none",
        gc.display()
    );
    assert!(out.stderr.lines().any(|l| l == expected), "{out}");
}

/// Variables added to a command's environment.
type Env<'a> = &'a [(&'a str, &'a str)];

/// `bootprof run -o SESSION -- COMMAND...` in `dir`, with `env` added; returns its output and
/// the reason it gives for an empty session (what follows `SESSION: `), if it gives one.
fn record_in(dir: &TempDir, session: &Path, env: Env, command: &[&OsStr]) -> (Out, String) {
    let mut c = cmd(
        BOOTPROF,
        [
            "run".as_ref(),
            "-o".as_ref(),
            session.as_os_str(),
            "--".as_ref(),
        ],
    );
    c.args(command)
        .envs(env.iter().copied())
        .current_dir(dir.path());
    let out = run(c);
    out.no_panic();
    let prefix = format!(
        "bootprof: no process recorded into the session {}: ",
        session.display()
    );
    let why = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_default();
    let why = why.to_string();
    (out, why)
}

#[test]
fn a_session_without_processes_is_explained_by_what_happened() {
    require!("cc", "sh");
    let dir = TempDir::new("missing-trace");
    let good = build(&dir, "good", Some(&[]));
    let bare = build(&dir, "bare", Some(&["--no-runtime"]));
    let plain = build(&dir, "plain", None);
    let script = dir.join("wrapper");
    write(&script, "#!/bin/sh\nexit 5\n");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (good_, bare_, plain_, script_) = (
        good.display(),
        bare.display(),
        plain.display(),
        script.display(),
    );
    let carries = |ended: &str| {
        format!(
            "{good_} carries the bootprof runtime, but ended ({ended}) without a lane: before the \
             runtime started (which it does in its constructors), or the runtime could not \
             create its lane (it then says why on stderr)"
        )
    };
    let removed = dir.join("s-removed");
    let remove_then_run = format!("rm -r \"$BOOTPROF_SESSION\" && exec {good_}");
    let cases: Vec<(Vec<&OsStr>, Env, i32, String)> = vec![
        (
            vec![plain.as_os_str()],
            &[],
            0,
            format!(
                "{plain_}: no bootprof site table (it was not linked by bootprof-link, or none of \
                 its inputs calls a probe or a profiling hook); nor did any program it ran \
                 record; it ended with exit status 0"
            ),
        ),
        (
            vec![bare.as_os_str()],
            &[],
            0,
            format!(
                "{bare_} has a site table but no bootprof runtime to record with: nothing \
                 defines bootprof_register, to which it holds only a weak reference (it was \
                 linked with --no-runtime)"
            ),
        ),
        (
            vec![good.as_os_str()],
            &[("DIE_EARLY", "kill")],
            128 + 9,
            carries("killed by SIGKILL"),
        ),
        (
            vec![good.as_os_str()],
            &[("DIE_EARLY", "exit")],
            3,
            carries("exit status 3"),
        ),
        (
            vec![script.as_os_str()],
            &[],
            5,
            format!(
                "{script_} is a script, and no program it ran recorded (were they linked by \
                 bootprof-link?); it ended with exit status 5"
            ),
        ),
        (
            vec!["sh".as_ref(), "-c".as_ref(), remove_then_run.as_ref()],
            &[],
            0,
            format!(
                "the session directory {} was removed while the program ran; the program ended \
                 with exit status 0",
                removed.display()
            ),
        ),
    ];
    // Stripped, a program that carries the runtime has no symbol of it left (it exports none):
    // its note still says so.
    let stripped = dir.join("good-stripped");
    run(cmd(
        "strip",
        ["-o".as_ref(), stripped.as_os_str(), good.as_os_str()],
    ))
    .ok();
    let (out, said) = record_in(
        &dir,
        &dir.join("s-stripped"),
        &[("DIE_EARLY", "exit")],
        &[stripped.as_os_str()],
    );
    let carries_stripped =
        carries("exit status 3").replacen(&good_.to_string(), &stripped.display().to_string(), 1);
    assert_eq!((out.code, said), (Some(3), carries_stripped), "{out}");
    for (n, (command, env, code, why)) in cases.into_iter().enumerate() {
        let session = if n == 5 {
            removed.clone()
        } else {
            dir.join(format!("s{n}"))
        };
        let (out, said) = record_in(&dir, &session, env, &command);
        assert_eq!((out.code, said), (Some(code), why), "{out}");
        if session.exists() {
            let report = run(cmd(BOOTPROF, ["report".as_ref(), session.as_os_str()]));
            assert!(
                report.code == Some(1) && report.stderr.contains("holds no lane files"),
                "{report}"
            );
        }
    }
    // A program that cannot be started: an error, and no session is left behind.
    let not_executable = dir.join("prog.c");
    for (exe, error) in [
        (dir.join("nosuch"), "No such file or directory (os error 2)"),
        (not_executable, "Permission denied (os error 13)"),
    ] {
        let session = dir.join("s-exec");
        let (out, _) = record_in(&dir, &session, &[], &[exe.as_os_str()]);
        let expected = format!("bootprof: error: cannot run {}: {error}\n", exe.display());
        assert_eq!(
            (out.code, out.stderr.as_str()),
            (Some(1), expected.as_str()),
            "{out}"
        );
        assert!(!session.exists(), "{} left behind", session.display());
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
    require!("cc", "sh");
    let dir = TempDir::new("unmatched-pattern");
    let exe = build(&dir, "prog", Some(&[]));
    let other = dir.join("other");
    std::fs::copy(&exe, &other).unwrap();
    let (exe_, other_) = (exe.display(), other.display());
    let session = dir.join("s");
    let warning = |pattern: &str, from: &str, of: &str, nearest: &str| {
        format!("bootprof: warning: pattern `{pattern}` ({from}) matched no site of {of}; nearest: {nearest}")
    };
    let both = format!("{exe_}; {other_}");
    let of_exe = format!("{exe_} (3 sites)");
    // (options, command, environment, warnings)
    type Case<'a> = (Vec<&'a str>, Vec<&'a OsStr>, Env<'a>, Vec<String>);
    let cases: Vec<Case> = vec![
        // The sites of the session (the program's lane)...
        (
            vec!["-e", "wrok*", "-e", "work", "-x", "*nosuch"],
            vec![exe.as_os_str()],
            &[],
            vec![
                warning("wrok*", "-e", &of_exe, "work, early, main"),
                warning("*nosuch", "-x", &of_exe, "work, early, main"),
            ],
        ),
        // ... or, when it recorded nothing, of its own table.
        (
            vec!["-e", "wrok*,work"],
            vec![exe.as_os_str()],
            &[("DIE_EARLY", "kill")],
            vec![warning("wrok*", "-e", &of_exe, "work, early, main")],
        ),
        // The runtime's own variable, inherited, stands for -e.
        (
            vec![],
            vec![exe.as_os_str()],
            &[("BOOTPROF_ENABLE", "mian")],
            vec![warning(
                "mian",
                "BOOTPROF_ENABLE",
                &of_exe,
                "main, work, early",
            )],
        ),
        // Every process of the session: the program named, then the others.
        (
            vec!["-e", "wrok*"],
            vec!["sh".as_ref(), "-c".as_ref(), both.as_ref()],
            &[],
            vec![warning(
                "wrok*",
                "-e",
                &format!("sh, {exe_}, {other_} (6 sites)"),
                "work, early, main",
            )],
        ),
    ];
    for (options, command, env, expected) in cases {
        let _ = std::fs::remove_dir_all(&session);
        let mut c = cmd(BOOTPROF, ["run"]);
        c.args(&options)
            .arg("-o")
            .arg(&session)
            .arg("--")
            .args(&command);
        let out = run(c.envs(env.iter().copied()).current_dir(dir.path()));
        out.no_panic();
        let warnings: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("warning"))
            .collect();
        assert_eq!(warnings, expected, "{out}");
    }
}

/// Reads the named pipe `fifo` to its end on a thread of its own; the bytes when joined.
fn drain_fifo(fifo: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let fifo = fifo.to_path_buf();
    std::thread::spawn(move || std::fs::read(&fifo).unwrap())
}

/// A named pipe in `dir`.
fn mkfifo(dir: &TempDir, name: &str) -> PathBuf {
    let path = dir.join(name);
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    path
}

/// Outputs that are not regular files (`-o /dev/null`, `-o /dev/stdout`, a named pipe a reader
/// waits on) are written into, not replaced by a file renamed over them: a link's `-o`, the
/// runtime's dump (`BOOTPROF_OUTPUT`) and `bootprof report -o`, each into a named pipe, deliver
/// their whole output to its reader and leave the pipe a pipe. (Renaming over `/dev/null` as
/// root put a regular file in its place.)
#[test]
fn outputs_that_are_pipes_are_written_into_not_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let dir = TempDir::new("pipe-outputs");
    let exe = build(&dir, "prog", Some(&[]));
    let is_fifo = |p: &Path| std::fs::metadata(p).unwrap().file_type().is_fifo();

    // The link: the same executable into the pipe as into the file.
    let fifo = mkfifo(&dir, "link.fifo");
    let reader = drain_fifo(&fifo);
    let mut link = cmd(link_bin(), ["cc", "-o"]);
    link.arg(&fifo).arg(dir.join("prog.o"));
    run(&mut link).ok();
    // Checked before the reader is joined: a pipe renamed over would leave it waiting.
    assert!(is_fifo(&fifo), "the link replaced the pipe");
    let linked = reader.join().unwrap();
    assert_eq!(
        linked,
        crate::util::read(&exe),
        "the pipe got another executable"
    );

    // The runtime's dump of a trace.
    let fifo = mkfifo(&dir, "trace.fifo");
    let reader = drain_fifo(&fifo);
    let mut prog = cmd(&exe, [] as [&str; 0]);
    prog.env("BOOTPROF_OUTPUT", &fifo)
        .env("BOOTPROF_ENABLE", "*");
    run(&mut prog).ok();
    // Checked before the reader is joined: a pipe renamed over would leave it waiting.
    assert!(is_fifo(&fifo), "the dump replaced the pipe");
    let dumped = reader.join().unwrap();
    let trace = dir.join("dumped.trace");
    write(&trace, &dumped);
    let text = run(cmd(BOOTPROF, ["report".as_ref(), trace.as_os_str()])).ok();
    assert_eq!(text.stdout.matches(": work <-main").count(), 100, "{text}");

    // The report.
    let fifo = mkfifo(&dir, "report.fifo");
    let reader = drain_fifo(&fifo);
    let summary = |out: &[&OsStr]| {
        let mut c = cmd(BOOTPROF, ["report", "--format", "summary"]);
        c.args(out).arg(&trace);
        run(c).ok()
    };
    summary(&["-o".as_ref(), fifo.as_os_str()]);
    // Checked before the reader is joined: a pipe renamed over would leave it waiting.
    assert!(is_fifo(&fifo), "the report replaced the pipe");
    let reported = reader.join().unwrap();
    assert_eq!(String::from_utf8(reported).unwrap(), summary(&[]).stdout);
}
