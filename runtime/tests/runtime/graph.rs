//! Function exits by return hooking (`bootprof run --graph`), where return addresses matter:
//! `tests/runtime/graph.c` (longjmp, signal handlers, threads, fork, deep recursion, tail calls,
//! sites disabled under live frames, `backtrace()`) built with `__fentry__` and with `mcount`,
//! and `tests/runtime/graph_throw.cpp` (C++ exceptions), each run plainly and under
//! `bootprof run --graph` in trap and call mode: the program's output must not change, and
//! each thread's ENTER and EXIT lines of the text report are checked exactly.

use super::*;
use std::collections::BTreeMap;

/// `bootprof run --graph --mode MODE -o SESSION -- EXE ARG`: the run's output and, per
/// `TASK-PID` of the text report, its lines (`name <-caller` for an ENTER, `EXIT name`),
/// in order; `PROCESS END` lines left out.
fn graph_run(
    w: &Work,
    exe: &Path,
    arg: &str,
    mode: &str,
) -> (Output, BTreeMap<String, Vec<String>>) {
    let dir = w.path(&format!("{arg}-{mode}"));
    let o = Command::new(tools().join("bootprof"))
        .args(["run", "--graph", "--mode", mode, "-o"])
        .arg(&dir)
        .arg("--")
        .arg(exe)
        .arg(arg)
        .output()
        .unwrap();
    let text = report_of(&dir, "text");
    let mut threads: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let task = line.split_whitespace().next().unwrap().to_string();
        let (_, event) = line.split_once(": ").unwrap();
        if !event.starts_with("PROCESS END") {
            threads.entry(task).or_default().push(event.to_string());
        }
    }
    (o, threads)
}

/// The lines of `threads` without the callers (`<-...`), one list per thread, sorted.
fn names(threads: &BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    let mut all: Vec<Vec<String>> = threads
        .values()
        .map(|lines| {
            lines
                .iter()
                .map(|l| l.split(" <-").next().unwrap().to_string())
                .collect()
        })
        .collect();
    all.sort();
    all
}

fn list(text: &str) -> Vec<String> {
    text.split('|').map(str::to_string).collect()
}

/// `n` nested calls of `f`, returning.
fn nested(f: &str, n: usize) -> Vec<String> {
    let mut v = vec![f.to_string(); n];
    v.extend(vec![format!("EXIT {f}"); n]);
    v
}

/// What each scenario of graph.c must record, per thread (sorted as [`names`] sorts).
fn expected(scenario: &str) -> Vec<Vec<String>> {
    let main = |inner: &str| list(&format!("main|{inner}|EXIT main"));
    match scenario {
        "jump" => vec![main(
            "j_outer|j_mid|j_deep|EXIT j_deep|EXIT j_mid|j_after|EXIT j_after|EXIT j_outer|\
             s_outer|s_deep|s_handler|s_work|EXIT s_work|EXIT s_handler|EXIT s_deep|j_after|\
             EXIT j_after|EXIT s_outer",
        )],
        "signal" => vec![main(
            "h_outer|h_inner|h_handler|h_work|EXIT h_work|EXIT h_handler|EXIT h_inner|EXIT h_outer",
        )],
        "threads" => {
            let mut v: Vec<Vec<String>> = (3..7)
                .map(|n| {
                    let mut t = vec!["t_main".to_string()];
                    t.extend(nested("r_down", n + 1));
                    t.push("EXIT t_main".into());
                    t
                })
                .collect();
            v.push(list("main|EXIT main"));
            v.sort();
            v
        }
        "fork" => {
            let mut v = vec![
                list("main|f_fork|EXIT f_fork|EXIT main"),
                list("f_child|EXIT f_child|EXIT f_fork|EXIT main"),
            ];
            v.sort();
            v
        }
        "deep" => {
            // main and 255 of the 301 calls fill the shadow stack's 256 entries.
            let mut v = vec!["main".to_string()];
            v.extend(nested("r_down", 255));
            v.push("EXIT main".into());
            vec![v]
        }
        "tails" => vec![main("t_a|t_b|t_c|EXIT t_c|EXIT t_b|EXIT t_a")],
        "disable" => {
            let mut v = vec![
                list("main|EXIT main"),
                list("w_main|w_spin|EXIT w_spin|EXIT w_main"),
            ];
            v.sort();
            v
        }
        "backtrace" => vec![main("bt_a|bt_b|EXIT bt_b|EXIT bt_a")],
        _ => unreachable!(),
    }
}

/// Every scenario of graph.c, with `__fentry__` and with `mcount` hooks, in trap and call mode:
/// the same output as without bootprof, and exactly the expected ENTERs and EXITs.
#[test]
fn graph_exits_survive_longjmp_signals_threads_fork_recursion_tail_calls_and_disabling() {
    let scenarios = [
        "jump",
        "signal",
        "threads",
        "fork",
        "deep",
        "tails",
        "disable",
        "backtrace",
    ];
    for (build, flags) in [
        ("fentry", &["-pg", "-mfentry"][..]),
        ("mcount", &["-pg"][..]),
    ] {
        let w = Work::new(&format!("graph-{build}"));
        let exe = w.build("graph", &["graph.c"], flags, &[]);
        for scenario in scenarios {
            let plain = ok(&run(&exe, &[scenario], &[]));
            for mode in ["trap", "call"] {
                let what = format!("{build} {scenario} {mode}");
                let (o, threads) = graph_run(&w, &exe, scenario, mode);
                assert_eq!(ok(&o), plain, "{what}: the output changed");
                assert_eq!(names(&threads), expected(scenario), "{what}: {threads:#?}");
                let err = String::from_utf8_lossy(&o.stderr);
                match scenario {
                    "deep" => assert!(
                        err.contains(
                            "46 calls deeper than the shadow stack (256 frames per thread) \
                             were not traced"
                        ),
                        "{what}: {err}"
                    ),
                    // The sites were disabled while the other thread's frames were live.
                    "disable" => {
                        let n = err.split("sites disabled: ").nth(1).unwrap_or("0\n");
                        let n: usize = n.lines().next().unwrap().parse().unwrap();
                        assert!(n > 0, "{what}: {err}");
                    }
                    // A tail-called function's caller is the real one, not the trampoline.
                    "tails" => {
                        let lines = threads.values().next().unwrap();
                        assert!(
                            lines.contains(&"t_c <-main".to_string()),
                            "{what}: {lines:?}"
                        );
                    }
                    "backtrace" => assert!(
                        plain.contains("backtrace 1 frames: bt_b 1, bt_a 1, main 1"),
                        "{plain}"
                    ),
                    _ => {}
                }
            }
        }
    }
}

/// A static program: the wrapped longjmp and backtrace reach the C library's own (bootprof-link
/// names them, so the static link pulls them in), with and without --graph.
#[test]
fn graph_exits_in_a_static_program() {
    let w = Work::new("graph-static");
    let exe = w.build("graph", &["graph.c"], &["-pg", "-mfentry"], &["-static"]);
    for scenario in ["jump", "backtrace"] {
        let plain = ok(&run(&exe, &[scenario], &[]));
        let (o, threads) = graph_run(&w, &exe, scenario, "call");
        assert_eq!(ok(&o), plain, "{scenario}: the output changed");
        assert_eq!(
            names(&threads),
            expected(scenario),
            "{scenario}: {threads:#?}"
        );
    }
    assert!(
        ok(&run(&exe, &["backtrace"], &[])).contains("bt_b 1, bt_a 1, main 1"),
        "backtrace() in a static program"
    );
}

/// C++ exceptions through hooked frames: caught several frames up (thrown by the program, by the
/// C++ library, and rethrown), with the same output as without bootprof and the frames they
/// unwound closed; uncaught, std::terminate ends the program with SIGABRT as without bootprof.
#[test]
fn graph_exits_survive_cxx_exceptions_caught_and_uncaught() {
    let w = Work::new("graph-throw");
    let exe = w.build_cxx(
        "graph_throw",
        "graph_throw.cpp",
        &["-O2", "-pg", "-mfentry"],
    );
    let plain = ok(&run(&exe, &["catch"], &[]));
    let guard = "Guard::Guard(long)|EXIT Guard::Guard(long)";
    let unwound = format!(
        "x_mid(long)|{guard}|x_deep(long)|{guard}|Guard::~Guard()|EXIT Guard::~Guard()|\
         EXIT x_deep(long)|Guard::~Guard()|EXIT Guard::~Guard()|EXIT x_mid(long)"
    );
    let after = "x_after(long)|EXIT x_after(long)";
    let want = list(&format!(
        "main|x_catch(long)|{unwound}|{after}|EXIT x_catch(long)|\
         v_catch(long)|v_at(std::vector<long, std::allocator<long> > const&, long)|\
         EXIT v_at(std::vector<long, std::allocator<long> > const&, long)|{after}|\
         EXIT v_catch(long)|r_outer(long)|r_inner(long)|{unwound}|EXIT r_inner(long)|{after}|\
         EXIT r_outer(long)|EXIT main"
    ));
    let aborted = run(&exe, &["uncaught"], &[]);
    assert_eq!(aborted.status.code(), None, "killed by a signal");
    let terminate = "terminate called after throwing an instance of 'std::runtime_error'";
    assert!(String::from_utf8_lossy(&aborted.stderr).contains(terminate));
    for mode in ["trap", "call"] {
        let (o, threads) = graph_run(&w, &exe, "catch", mode);
        assert_eq!(ok(&o), plain, "{mode}: the output changed");
        assert_eq!(names(&threads), vec![want.clone()], "{mode}: {threads:#?}");
        let (o, threads) = graph_run(&w, &exe, "uncaught", mode);
        assert_eq!(o.status.code(), Some(128 + libc::SIGABRT), "{mode}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), "start\n");
        assert!(String::from_utf8_lossy(&o.stderr).contains(terminate));
        assert_eq!(
            names(&threads),
            vec![list(&format!(
                "main|x_mid(long)|{guard}|x_deep(long)|{guard}"
            ))],
            "{mode}: {threads:#?}"
        );
    }
}

/// The (name, count) rows of a profile-point table (heading first), sorted by name.
fn point_rows(table: &str) -> Vec<(String, u64)> {
    let mut lines = table.lines();
    assert!(
        lines.next().is_some_and(|h| h.starts_with("profile point")),
        "{table}"
    );
    let mut rows: Vec<(String, u64)> = lines
        .filter(|l| !l.starts_with("(no profile points were counted"))
        .map(|l| {
            let mut f = l.split_whitespace();
            (f.next().unwrap().into(), f.next().unwrap().parse().unwrap())
        })
        .collect();
    rows.sort();
    rows
}

/// Profile points are accounted only while someone will read them: `--points` counts every
/// pair from the start (exactly, under --graph as with -finstrument-functions's exit hooks, and
/// the table at exit has them all); without it the first `bootprof_print_points` starts the
/// accounting, finds none and says so, and `bootprof_count_points` starts it where the program
/// says.
#[test]
fn profile_points_count_from_the_start_with_points_else_from_the_first_reader() {
    let w = Work::new("graph-points");
    let rows = |r: &[(&str, u64)]| -> Vec<(String, u64)> {
        r.iter().map(|&(n, c)| (n.to_string(), c)).collect()
    };
    let all = vec![rows(&[("leaf", 3)]), rows(&[("leaf", 5), ("table", 1)])];
    for (build, flags, graph) in [
        ("fentry", &["-pg", "-mfentry"][..], true),
        ("instrument", &["-finstrument-functions"][..], false),
    ] {
        let exe = w.build(&format!("points-{build}"), &["points.c"], flags, &[]);
        for (points, arg, want) in [
            (true, "-", all.clone()),
            // The first table started the accounting: the second has the calls after it (the
            // second table's own call had not returned when it was written).
            (false, "-", vec![vec![], rows(&[("leaf", 2)])]),
            (false, "count", all.clone()),
        ] {
            let what = format!("{build} --points {points} {arg}");
            let mut cmd = Command::new(tools().join("bootprof"));
            cmd.args(["run", "--mode", "call", "-o"])
                .arg(w.path(&format!("{build}-{points}-{arg}")));
            if graph {
                cmd.arg("--graph");
            }
            if points {
                cmd.arg("--points");
            }
            let o = cmd.arg("--").arg(&exe).arg(arg).output().unwrap();
            let out = ok(&o);
            let parts: Vec<&str> = out.split("--\n").collect();
            assert_eq!(parts.len(), 3, "{what}: {out}");
            assert_eq!(parts[2], "12\n", "{what}: the program's output");
            let got: Vec<_> = parts[..2].iter().map(|t| point_rows(t)).collect();
            assert_eq!(got, want, "{what}");
            // A table printed before anything counted says so, not only nothing.
            let said = parts
                .iter()
                .map(|t| t.contains("(no profile points were counted"));
            let counted_from_start = points || arg == "count";
            assert_eq!(
                said.collect::<Vec<_>>(),
                [!counted_from_start, false, false],
                "{what}: {out}"
            );
            // With --points the table at exit, on stderr, has every pair; else there is none.
            let err = String::from_utf8_lossy(&o.stderr);
            match err.find("profile point") {
                Some(at) => {
                    let table = err[at..]
                        .lines()
                        .take_while(|l| !l.starts_with("bootprof:"));
                    let table: Vec<&str> = table.collect();
                    assert!(points, "{what}: {err}");
                    assert_eq!(
                        point_rows(&table.join("\n")),
                        rows(&[("leaf", 5), ("main", 1), ("table", 2)]),
                        "{what}: {err}"
                    );
                }
                None => assert!(!points, "{what}: {err}"),
            }
        }
    }
}

/// A shared library (carrying its own copy of the runtime, loaded with `dlopen`) longjmps across
/// hooked frames of its own and of a host that carries the runtime and exports none of it: the
/// library's wrapped longjmp reaches the host's runtime (which serves, found by its note, and
/// holds the shadow stack of both objects' frames), so the frames jumped over get their exits
/// and the host's return through the trampoline correctly. -pg -mfentry, GNU ld and lld (`-z now`: every call of the library
/// bound at load to its own copy), both modes.
#[test]
fn graph_exits_survive_a_longjmp_from_a_shared_library() {
    let w = Work::new("graph-shared");
    let pg = ["-pg", "-mfentry"];
    for (suffix, ldflags) in [("", &[][..]), ("-lld", &["-fuse-ld=lld", "-Wl,-z,now"][..])] {
        let mut lib_flags = vec!["-shared"];
        lib_flags.extend(ldflags);
        let lib = format!("libgraph{suffix}.so");
        w.build(&lib, &["graph_lib.c"], &pg, &lib_flags);
        let rpath = format!("-Wl,-rpath,{}", w.0.display());
        let mut flags = vec![rpath.as_str(), "-ldl"];
        flags.extend(ldflags);
        let exe = w.build(&format!("host{suffix}"), &["graph_host.c"], &pg, &flags);
        let plain = ok(&run(&exe, &[&lib], &[]));
        // 10 * (x + 2) for x = 1, 2, 3.
        assert_eq!(plain, "longjmp across a library 120\n");
        for mode in ["trap", "call"] {
            let what = format!("{suffix} {mode}");
            let (o, threads) = graph_run(&w, &exe, &lib, mode);
            assert_eq!(ok(&o), plain, "{what}: the output changed");
            let once = "h_outer|h_mid|lib_mid|lib_deep|EXIT lib_deep|EXIT lib_mid|EXIT h_mid|\
                        h_after|EXIT h_after|EXIT h_outer";
            let want = list(&format!("main|{once}|{once}|{once}|EXIT main"));
            assert_eq!(names(&threads), [want], "{what}: {threads:#?}");
            // One runtime served both objects: one lane.
            assert_eq!(
                lanes_of(&w.path(&format!("{lib}-{mode}"))).len(),
                1,
                "{what}"
            );
        }
    }
}
