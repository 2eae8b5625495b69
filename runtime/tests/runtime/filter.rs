//! Call filters: `tests/runtime/filter.c` (calls of known lengths) built with `-pg -mfentry`
//! (run with `--graph`) and with `-finstrument-functions`, run under `bootprof run --depth`
//! and `--min-time` in trap and call mode: the program's output must not change, the text
//! report holds exactly the calls kept, and its header says how many were left out; `bootprof
//! report --depth --min-time` leaves out the same calls of an unfiltered run. The same program
//! recorded without `--graph` has entries only, and the reports say their times are inferred.

use super::*;

/// The ENTER and EXIT lines of the text report of `session`, without callers (`name`, `EXIT
/// name`), and its header lines.
fn calls(session: &Path, extra: &[&str]) -> (Vec<String>, Vec<String>) {
    let o = Command::new(tools().join("bootprof"))
        .args(["report", "--format", "text"])
        .args(extra)
        .arg(session)
        .output()
        .unwrap();
    let text = ok(&o);
    let (header, body): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.starts_with('#'));
    let lines = body
        .iter()
        .map(|l| l.split_once(": ").unwrap().1)
        .filter(|e| !e.starts_with("PROCESS END"))
        .map(|e| e.split(" <-").next().unwrap().to_string())
        .collect();
    (lines, header.iter().map(|l| l.to_string()).collect())
}

/// `bootprof run [--graph] --mode MODE FILTER -o DIR -- EXE`: the run's output.
fn record(w: &Work, exe: &Path, graph: bool, mode: &str, filter: &[&str], dir: &str) -> String {
    let mut cmd = Command::new(tools().join("bootprof"));
    cmd.arg("run");
    if graph {
        cmd.arg("--graph");
    }
    let o = cmd
        .args(["--mode", mode])
        .args(filter)
        .arg("-o")
        .arg(w.path(dir))
        .arg("--")
        .arg(exe)
        .output()
        .unwrap();
    ok(&o)
}

/// Each filter, what it keeps and how many calls it leaves out.
const CASES: [(&[&str], &str, usize); 3] = [
    (
        &["--min-time", "1ms"],
        "main|outer|slow|nap|EXIT nap|EXIT slow|EXIT outer|EXIT main",
        4,
    ),
    (&["--depth", "2"], "main|outer|EXIT outer|EXIT main", 6),
    (
        &["--depth", "3", "--min-time", "1ms"],
        "main|outer|slow|EXIT slow|EXIT outer|EXIT main",
        5,
    ),
];

#[test]
fn call_filters_keep_the_outer_and_long_calls_in_the_runtime_and_in_reports() {
    for (build, flags, graph) in [
        ("fentry", &["-pg", "-mfentry"][..], true),
        ("cyg", &["-finstrument-functions"][..], false),
    ] {
        let w = Work::new(&format!("filter-{build}"));
        let exe = w.build("filter", &["filter.c"], flags, &[]);
        let plain = ok(&run(&exe, &[], &[]));
        assert_eq!(plain, "13\n");
        for mode in ["trap", "call"] {
            let all = format!("all-{mode}");
            assert_eq!(record(&w, &exe, graph, mode, &[], &all), plain);
            for (i, (filter, kept, left_out)) in CASES.iter().enumerate() {
                let what = format!("{build} {mode} {filter:?}");
                let options = filter.join(" ");
                let dir = format!("{i}-{mode}");
                assert_eq!(record(&w, &exe, graph, mode, filter, &dir), plain);
                let (lines, header) = calls(&w.path(&dir), &[]);
                assert_eq!(lines.join("|"), *kept, "{what}");
                let note = format!(", {left_out} calls left out by its filter ({options})");
                assert!(
                    header
                        .iter()
                        .any(|l| l.starts_with("# process ") && l.ends_with(&note)),
                    "{what}: {header:?}"
                );
                // The same filter at report time, over the unfiltered run.
                let (lines, header) = calls(&w.path(&all), filter);
                assert_eq!(lines.join("|"), *kept, "{what}, at report time");
                let note = format!(
                    "# note: filtered at report time ({options}): {left_out} calls left out"
                );
                assert!(header.contains(&note), "{what}: {header:?}");
            }
        }
    }
}

/// Without --graph, `-pg -mfentry` functions have entries only: the summary counts their calls
/// in a table of their own and ranks no time, the points table shows no time, the folded
/// stacks mark each of their frames, and each says why.
#[test]
fn entries_only_are_counted_not_timed() {
    let w = Work::new("filter-entries");
    let exe = w.build("filter", &["filter.c"], &["-pg", "-mfentry"], &[]);
    let plain = ok(&run(&exe, &[], &[]));
    assert_eq!(record(&w, &exe, false, "call", &[], "s"), plain);
    let note = "5 functions have entries only (-pg/-mfentry hooks recorded without `bootprof run \
                --graph`): when they returned is inferred from later calls, so their durations \
                and stacks are estimates, marked (inferred)";
    let summary = report_of(&w.path("s"), "summary");
    let rows: Vec<&str> = summary
        .lines()
        .skip_while(|l| !l.starts_with("top 20 functions with entries only"))
        .take(7)
        .collect();
    assert_eq!(
        rows[1..],
        [
            "       calls  name",
            "           4  quick",
            "           1  main",
            "           1  nap",
            "           1  outer",
            "           1  slow",
        ],
        "{summary}"
    );
    assert!(summary.contains(&format!("\nnote: {note}\n")), "{summary}");
    assert!(!summary.contains("by self time"), "{summary}");
    let points = report_of(&w.path("s"), "points");
    let quick = points.lines().find(|l| l.starts_with("quick ")).unwrap();
    assert_eq!(
        quick.split_whitespace().collect::<Vec<_>>(),
        ["quick", "4", "-", "-", "-", "-"]
    );
    assert!(points.ends_with(&format!("note: {note}\n")), "{points}");
    let folded = Command::new(tools().join("bootprof"))
        .args(["report", "--format", "folded"])
        .arg(w.path("s"))
        .output()
        .unwrap();
    let stacks: Vec<String> = ok(&folded)
        .lines()
        .map(|l| {
            l.rsplit_once(' ')
                .unwrap()
                .0
                .split_once(';')
                .unwrap()
                .1
                .to_string()
        })
        .collect();
    // The callers as the return addresses say: outer tail-calls slow, and slow nap, so main is
    // their caller (outer's frame is gone when slow starts).
    let expected = [
        "main (inferred)",
        "main (inferred);nap (inferred)",
        "main (inferred);outer (inferred)",
        "main (inferred);outer (inferred);quick (inferred)",
        "main (inferred);slow (inferred)",
        "main (inferred);slow (inferred);quick (inferred)",
    ]
    .map(|s| format!("filter;{s}"));
    assert_eq!(stacks, expected, "{stacks:#?}");
    let err = String::from_utf8_lossy(&folded.stderr);
    assert!(err.contains(note), "{err}");
}

/// Filter settings that mean nothing are refused with what is wrong, before anything runs or is
/// read: a depth of 0, a duration without its unit or with an unknown one, a filter with
/// `--count` (which records no calls to filter).
#[test]
fn bad_filter_settings_are_explained() {
    let w = Work::new("filter-bad");
    let bad: [(&str, &[&str], &str); 7] = [
        ("run", &["--depth", "0"], "0 is not in 1.."),
        ("run", &["--min-time", "5"], "is not a duration"),
        ("run", &["--min-time", "5xs"], "is not a duration"),
        ("run", &["--depth", "2", "--count"], "--count"),
        ("run", &["--min-time", "1ms", "--count"], "--count"),
        ("report", &["--depth", "0"], "0 is not in 1.."),
        ("report", &["--min-time", "5xs"], "is not a duration"),
    ];
    let session = w.path("never.session");
    for (command, args, says) in bad {
        let mut cmd = Command::new(tools().join("bootprof"));
        cmd.arg(command).args(args).current_dir(&w.0);
        match command {
            "run" => cmd.arg("-o").arg(&session).args(["--", "echo", "ran"]),
            _ => cmd.arg(&session),
        };
        let o = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{command} {args:?}: {err}");
        assert!(err.contains(says), "{command} {args:?}: {err}");
        assert!(o.stdout.is_empty(), "{command} {args:?} ran something");
        assert!(!session.exists(), "{command} {args:?} made a session");
    }
}
