//! Hit counting (`bootprof run --count`, `BOOTPROF_COUNT=1`), with `tests/runtime/count.c`: exact
//! counts under threads in both modes, a process tree's counts each in its own lane, processes
//! that never wrote theirs shown as such, the patterns obeyed, and nothing recorded.

use super::{ok, run, tools, Work, FORMS};
use std::path::Path;
use std::process::{Command, Output};

/// Runs `command` under `bootprof run --count -o NAME` with `options`; returns the session read
/// back, the run's output and the table it printed (its stderr after the line that heads it).
fn count_run(
    w: &Work,
    name: &str,
    options: &[&str],
    command: &[&str],
) -> (bootprof_report::Trace, Output, String) {
    let dir = w.path(name);
    let o = Command::new(tools().join("bootprof"))
        .args(["run", "--count", "-o"])
        .arg(&dir)
        .args(options)
        .arg("--")
        .args(command)
        .current_dir(&w.0)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let heading = format!(
        "(again: `bootprof report --format counts {}`):\n",
        dir.display()
    );
    let table = match stderr.split_once(&heading) {
        Some((_, table)) => table.to_string(),
        None => panic!("no table in:\n{stderr}"),
    };
    let t = bootprof_report::read_trace(&dir).unwrap_or_else(|e| panic!("{e}\n{stderr}"));
    // Counting records nothing.
    assert!(t.records.is_empty(), "{} records", t.records.len());
    assert!(t.processes.iter().all(|p| p.records == 0 && p.dropped == 0));
    (t, o, table)
}

/// What `bootprof report --format counts` prints for the session `dir`.
fn report_counts(dir: &Path) -> String {
    ok(&Command::new(tools().join("bootprof"))
        .args(["report", "--format", "counts"])
        .arg(dir)
        .output()
        .unwrap())
}

/// The table of `count threads N`: hot 4N, warm 2N, cold once.
fn threads_table(n: u64) -> String {
    format!(
        "     hits  kind        site\n{:>9}  probe       count:hot\n{:>9}  probe       count:warm\n        1  probe       count:cold\n",
        4 * n,
        2 * n
    )
}

/// Four threads hit one site at once (and a second site): exactly 4N and 2N hits, in trap and
/// call mode, with guards and with calls in line, counted into a session and, without one,
/// printed at exit. (The relaxed counter of a run that does not count loses about a quarter of
/// the call-mode hits here on two cores.)
#[test]
fn four_threads_on_one_site_count_exactly_in_both_modes() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("count-threads-{form}"), flags);
        w.build("count", &["count.c"], &[], &[]);
        // Trap mode is some hundred times slower a hit.
        for (mode, n) in [("trap", 200_000u64), ("call", 1_000_000)] {
            let name = format!("{mode}.session");
            let (_, o, table) = count_run(
                &w,
                &name,
                &["--mode", mode, "-e", "count:*"],
                &["./count", "threads", &n.to_string()],
            );
            assert!(o.status.success(), "{form} {mode}: {o:?}");
            assert_eq!(table, threads_table(n), "{form} {mode}");
            assert_eq!(report_counts(&w.path(&name)), table, "{form} {mode}");
            let o = run(
                &w.path("count"),
                &["threads", &n.to_string()],
                &[
                    ("BOOTPROF_COUNT", "1"),
                    ("BOOTPROF_ENABLE", "count:*"),
                    ("BOOTPROF_MODE", mode),
                ],
            );
            ok(&o);
            let stderr = String::from_utf8_lossy(&o.stderr);
            let (heading, table) = stderr.split_once('\n').unwrap();
            let exe = format!(
                "bootprof: hit counts of {} (pid ",
                w.path("count").display()
            );
            assert!(
                heading.starts_with(&exe) && heading.ends_with("):"),
                "{stderr}"
            );
            assert_eq!(table, threads_table(n), "{form} {mode}, no session");
        }
        // Counting writes no trace file, whatever else asks for one.
        assert!(std::fs::read_dir(&w.0).unwrap().all(|e| e
            .unwrap()
            .path()
            .extension()
            .is_none_or(|x| x != "trace")));
    }
}

/// A process tree: a fork child counts from 0 in its own lane, an exec'd image in its own;
/// the image that exec'd, which runs no exit handler, is shown as not having written its counts;
/// a fatal signal's handler writes them, and so does `bootprof_dump()` before an `_exit`. Killed
/// by SIGKILL, a process is shown with how it ended and no table. The report prints what the run
/// printed.
#[test]
fn a_tree_shows_every_process_with_its_own_counts_or_why_it_has_none() {
    let w = Work::new("count-tree");
    w.build("count", &["count.c"], &[], &[]);
    let script = "./count fork; ./count exec 3 4; ./count segv 6; ./count dump 7 8; true";
    let (t, o, table) = count_run(&w, "tree", &[], &["sh", "-c", script]);
    ok(&o);
    let label = |i: usize| t.processes[i].label();
    let pids: Vec<u32> = t.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids.len(), 6, "{table}");
    assert_eq!(pids[2], pids[3], "the exec keeps its pid");
    let want = format!(
        "     hits  kind        site
       52  probe       count:hot
        2  probe       count:cold
        0  probe       count:warm
1 process of 6 wrote no counts: the totals leave it out
per process:
{} (exit 0)
       15  probe       count:hot
        1  probe       count:cold
{} (exit 0)
       20  probe       count:hot
{}: counts not written: exec
{} (exit 0)
        4  probe       count:hot
        1  probe       count:cold
{} (killed by SIGSEGV)
        6  probe       count:hot
{} (ended without exit handlers (_exit, SIGKILL or exec)): counts as of its last bootprof_dump() (its end wrote none)
        7  probe       count:hot
",
        label(0),
        label(1),
        label(2),
        label(3),
        label(4),
        label(5)
    );
    assert_eq!(table, want);
    assert_eq!(report_counts(&w.path("tree")), want);
    assert_eq!(t.processes[1].ppid, pids[0], "the fork child");

    let (t, o, table) = count_run(&w, "kill", &[], &["./count", "kill", "5"]);
    assert_eq!(o.status.code(), Some(128 + 9));
    assert_eq!(
        table,
        format!(
            "{}: counts not written: killed by SIGKILL\n",
            t.processes[0].label()
        )
    );
    let (t, o, table) = count_run(&w, "dump", &[], &["./count", "dump", "7", "8"]);
    ok(&o);
    assert_eq!(
        table,
        format!(
            "     hits  kind        site
        7  probe       count:hot
        0  probe       count:cold
        0  probe       count:warm
{} (exit 0): counts as of its last bootprof_dump() (its end wrote none)
",
            t.processes[0].label()
        )
    );
}

/// `-e` and `-x` choose what is counted: a function's hook (named by its function) and probes
/// by `provider:name`, less the excluded; nothing else of a program built with `-pg -mfentry`.
#[test]
fn count_patterns_choose_the_sites_and_name_hooks_by_function() {
    let w = Work::new("count-patterns");
    w.build("count", &["count.c"], &["-pg", "-mfentry"], &[]);
    let (_, o, table) = count_run(
        &w,
        "s",
        &["-e", "hot", "-e", "count:*", "-x", "count:warm"],
        &["./count", "threads", "1000"],
    );
    ok(&o);
    assert_eq!(
        table,
        "     hits  kind        site
     4000  probe       count:hot
     4000  fentry      hot
        1  probe       count:cold
"
    );
    // A session that recorded holds no counts: the report says so, and fails.
    let dir = w.path("recorded");
    ok(&Command::new(tools().join("bootprof"))
        .args(["run", "-e", "count:*", "-o"])
        .arg(&dir)
        .args(["--", "./count", "exit", "3"])
        .current_dir(&w.0)
        .output()
        .unwrap());
    let o = Command::new(tools().join("bootprof"))
        .args(["report", "--format", "counts"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no hit counts: it was recorded, not counted"),
        "{stderr}"
    );
}
