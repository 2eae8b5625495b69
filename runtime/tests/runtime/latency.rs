//! Worst-interval tracing (`bootprof run --latency`), in real programs: `tests/runtime/latency.c`
//! runs requests between two probes while a second thread hits a probe of its own.

use super::*;
use bootprof_report::intervals::Latency;
use bootprof_report::Trace;

/// `bootprof run -o DIR ARGS... -- COMMAND...` in `w`; the session read back, and the output.
fn latency_run(w: &Work, dir: &str, args: &[&str], command: &[&str]) -> (Trace, Output) {
    let dir = w.path(dir);
    let o = Command::new(tools().join("bootprof"))
        .arg("run")
        .arg("-o")
        .arg(&dir)
        .args(args)
        .arg("--")
        .args(command)
        .current_dir(&w.0)
        .output()
        .unwrap();
    ok(&o);
    let t = bootprof_report::read_trace(&dir)
        .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&o.stderr)));
    (t, o)
}

fn ms(t: &Trace, ticks: u64) -> f64 {
    ticks as f64 * 1e3 / t.header.tsc_hz as f64
}

fn latency_of(t: &Trace) -> &Latency {
    assert_eq!(t.processes.len(), 1);
    t.processes[0]
        .latency
        .as_ref()
        .expect("the lane has a latency area")
}

/// The records of the site named `name`, as (tsc, argument).
fn hits(t: &Trace, name: &str) -> Vec<(u64, u64)> {
    t.records
        .iter()
        .filter(|r| t.sites[r.site as usize].name == name)
        .map(|r| (r.tsc, r.arg))
        .collect()
}

const REQUESTS: &str = "latency:request_start..latency:request_done";

/// 200 requests of about 1 ms, one of 50 ms: the longest is about 50 ms (a busy machine may
/// stretch it a little), the records kept are
/// that request's (its three probes) and the other thread's during it, nothing of the other
/// requests; the histogram holds all 200. In both modes, and for one function's ENTER..EXIT
/// (`-finstrument-functions`) as well as for two probes.
#[test]
fn the_longest_interval_is_kept_with_every_threads_records() {
    let w = Work::new("latency-longest");
    w.build("latency", &["latency.c"], &[], &[]);
    w.build(
        "latency-functions",
        &["latency.c"],
        &["-finstrument-functions"],
        &[],
    );
    let cases = [
        ("latency", REQUESTS, "trap"),
        ("latency", REQUESTS, "call"),
        ("latency-functions", "request", "call"),
    ];
    for (i, (exe, spec, mode)) in cases.into_iter().enumerate() {
        let exe = format!("./{exe}");
        let (t, o) = latency_run(
            &w,
            &format!("s{i}"),
            &["--latency", spec, "--mode", mode],
            &[&exe, "requests", "200", "50", "120"],
        );
        let l = latency_of(&t);
        let what = format!("{spec} {mode}");
        assert_eq!(l.count, 200, "{what}");
        assert!(
            (49.9..100.0).contains(&ms(&t, l.max)),
            "{what}: {}",
            ms(&t, l.max)
        );
        assert!((0.9..5.0).contains(&ms(&t, l.percentile(0.5))), "{what}");
        assert_eq!(l.histogram.iter().map(|h| h.1).sum::<u64>(), 200, "{what}");
        assert_eq!((l.windows.len(), l.kept >= 1), (1, true), "{what}");
        let win = l.windows[0].window;
        assert_eq!(win.ticks(), l.max, "{what}");
        assert_eq!(win.flags, 0, "{what}: nothing of the window missing");
        // That request's three probes, nothing of any other request.
        for probe in ["request_start", "step", "request_done"] {
            let h = hits(&t, probe);
            assert_eq!(
                h.iter().map(|h| h.1).collect::<Vec<_>>(),
                [120],
                "{what} {probe}"
            );
        }
        // The other thread's records of the same time, all of them: its counter has no gaps.
        let bg = hits(&t, "background");
        assert!(bg.len() >= 50, "{what}: {} background records", bg.len());
        assert!(bg
            .iter()
            .all(|&(tsc, _)| (win.from_tsc..=win.to_tsc).contains(&tsc)));
        assert!(bg.windows(2).all(|p| p[1].1 == p[0].1 + 1), "{what}");
        assert_eq!(t.records.len() as u64, l.windows[0].records, "{what}");
        if spec == "request" {
            let enters = t
                .records
                .iter()
                .filter(|r| r.kind == bootprof_format::trace::RecordKind::Enter)
                .count();
            assert_eq!(enters, 1, "one ENTER of request");
        }
        let report = report_of(&w, &format!("s{i}"), "latency");
        assert!(report.contains("intervals 200 "), "{report}");
        assert!(report.contains("window 1: "), "{report}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains("200 intervals, the longest "), "{stderr}");
    }
}

/// `bootprof report --format FORMAT DIR` in `w`'s directory.
fn report_of(w: &Work, dir: &str, format: &str) -> String {
    let o = Command::new(tools().join("bootprof"))
        .args(["report", "--format", format, dir])
        .current_dir(&w.0)
        .output()
        .unwrap();
    ok(&o)
}

/// `--latency-min`: every interval over the bound is kept in its own window, up to
/// `--latency-windows` of them (the longest); the rest are counted.
#[test]
fn latency_min_keeps_each_slow_interval_in_its_own_window() {
    let w = Work::new("latency-min");
    w.build("latency", &["latency.c"], &[], &[]);
    let slow = ["10", "20", "30", "40", "50"];
    let command = |n: &'static str| {
        let mut c = vec!["./latency", "requests", n, "100"];
        c.extend(slow);
        c
    };
    let (t, _) = latency_run(
        &w,
        "all",
        &["--latency", REQUESTS, "--latency-min", "60ms"],
        &command("60"),
    );
    let l = latency_of(&t);
    assert_eq!(
        (l.count, l.windows.len(), l.kept, l.not_kept),
        (60, 5, 5, 0)
    );
    let mut kept: Vec<u64> = hits(&t, "request_start").iter().map(|h| h.1).collect();
    kept.sort_unstable();
    assert_eq!(kept, [10, 20, 30, 40, 50]);
    for win in &l.windows {
        assert!(ms(&t, win.window.ticks()) >= 60.0);
        // Each window holds its own request: one start, in its interval.
        let starts: Vec<_> = hits(&t, "request_start")
            .into_iter()
            .filter(|h| h.0 == win.window.from_tsc)
            .collect();
        assert_eq!(starts.len(), 1, "{win:?}");
    }
    // Room for three: the three longest are kept, two counted.
    let (t, _) = latency_run(
        &w,
        "three",
        &[
            "--latency",
            REQUESTS,
            "--latency-min",
            "60ms",
            "--latency-windows",
            "3",
        ],
        &command("60"),
    );
    let l = latency_of(&t);
    // Five over the bound: each was kept, or counted as not kept (no longer than the three kept
    // then); three remain.
    assert_eq!((l.count, l.windows.len(), l.kept + l.not_kept), (60, 3, 5));
    assert_eq!(hits(&t, "request_start").len(), 3);
    assert!(l
        .windows
        .windows(2)
        .all(|p| p[0].window.ticks() >= p[1].window.ticks()));
}

/// One probe alone is both ends: the interval from each hit to the next.
#[test]
fn one_probe_measures_from_each_hit_to_the_next() {
    let w = Work::new("latency-frames");
    w.build("latency", &["latency.c"], &[], &[]);
    let (t, _) = latency_run(
        &w,
        "s",
        &["--latency", "latency:frame", "--mode", "call"],
        &["./latency", "frames", "100"],
    );
    let l = latency_of(&t);
    assert_eq!(l.count, 99);
    assert!((99.9..150.0).contains(&ms(&t, l.max)), "{}", ms(&t, l.max));
    let frames: Vec<u64> = hits(&t, "frame").iter().map(|h| h.1).collect();
    assert_eq!(frames, [50, 51]);
}

/// A request that waits for a lock another thread took just before the request began: its
/// window shows the holder's call and HOLD from their own records (before the interval), so the
/// wait is blamed on the holder; nothing else of the time before the interval is shown.
#[test]
fn a_hold_taken_before_the_interval_is_shown_and_blamed() {
    let w = Work::new("latency-held");
    w.build("latency", &["latency.c"], &[], &[]);
    for (i, mode) in ["trap", "call"].into_iter().enumerate() {
        let dir = format!("s{i}");
        let (t, o) = latency_run(
            &w,
            &dir,
            &["--latency", REQUESTS, "--mode", mode],
            &["./latency", "held", "30"],
        );
        assert!(ok(&o).contains("done 1"), "{mode}");
        let l = latency_of(&t);
        assert_eq!(l.count, 1, "{mode}");
        let win = l.windows[0].window;
        let before: Vec<String> = t
            .records
            .iter()
            .filter(|r| r.tsc < win.from_tsc)
            .map(|r| {
                let site = &t.sites[r.site as usize];
                format!("{:?} {} {}", r.kind, site.function, site.name)
            })
            .collect();
        assert_eq!(
            before,
            ["Enter hold_lock enter", "Hold hold_lock lock"],
            "{mode}"
        );
        assert_eq!(t.records.len() as u64, l.windows[0].records, "{mode}");
        assert_eq!(hits(&t, "request_start").len(), 1, "{mode}");
        let summary = report_of(&w, &dir, "summary");
        assert!(summary.contains("blamed on holder"), "{mode}: {summary}");
    }
}

/// Many seconds of requests, each longer than the last (a new longest nearly every time, so a
/// window is copied and the previous one freed at nearly every request): the lane stays within
/// its rings, the latency area and two windows, far less than what was recorded.
#[test]
fn a_long_run_stays_within_its_memory_bound() {
    let w = Work::new("latency-bound");
    w.build("latency", &["latency.c"], &[], &[]);
    let (t, o) = latency_run(
        &w,
        "s",
        &["--latency", REQUESTS, "--buffer", "4096"],
        // At least 200,000 background records (3.2 MB) and 30 requests, however busy the
        // machine.
        &["./latency", "growing", "4", "200000", "30"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let numbers: Vec<u64> = out
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let (requests, background) = (numbers[0], numbers[1]);
    let recorded = (requests * 3 + background) * 16;
    let l = latency_of(&t);
    assert_eq!(l.count, requests);
    // About 90 requests (at least 30 on a busy machine), each a new longest: each one's window
    // kept, and the one before it replaced.
    assert!(requests > 20, "{requests} requests");
    assert_eq!(l.kept, requests, "windows kept over the run");
    assert_eq!(l.windows.len(), 1);
    let lane = lane_file(&w.path("s"));
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&lane).unwrap();
    let allocated = meta.blocks() * 512;
    // Two rings of 4096 records (18 chunks each), the area (3 chunks), metadata, and two windows
    // of at most 40 chunks (the longest, 90 ms, spans more of the other thread's records than its
    // ring holds: a window copies at most both rings), in a lane that grows by at least 64 chunks
    // at a time: under 160 chunks.
    let bound = 160 * 4096 + 4096;
    eprintln!(
        "recorded {recorded} bytes in {requests} requests; lane: {} bytes long, {allocated} \
         allocated",
        meta.len()
    );
    assert!(allocated <= bound, "{allocated} bytes allocated");
    assert!(recorded > 4 * bound, "only {recorded} bytes recorded");
}

/// What cannot be measured says why, and runs nothing.
#[test]
fn bad_latency_settings_are_explained() {
    let w = Work::new("latency-bad");
    w.build("latency", &["latency.c"], &[], &[]);
    let long = format!("{}..b", "x".repeat(300));
    let bad: [(&[&str], &str); 8] = [
        (&["--latency", "latency:frame.."], "patterns on both sides"),
        (&["--latency", &long], "at most 255 bytes"),
        (
            &["--latency", "a..b", "--latency-windows", "0"],
            "--latency-windows",
        ),
        (
            &["--latency", "a..b", "--latency-windows", "10001"],
            "--latency-windows",
        ),
        (&["--latency", "a..b", "--count"], "--count"),
        (
            &["--latency", "a..b", "--latency-min", "5"],
            "is not a duration",
        ),
        (&["--latency", "a..b", "--keep", "all"], "--keep all"),
        (&["--latency-min", "5ms"], "--latency"),
    ];
    for (args, says) in bad {
        let o = Command::new(tools().join("bootprof"))
            .arg("run")
            .args(args)
            .args(["--", "./latency", "frames", "3"])
            .current_dir(&w.0)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("done"),
            "{args:?} ran"
        );
    }
    // Without a session there is no lane to keep windows in: said, and the program runs.
    let o = run(
        &w.path("latency"),
        &["frames", "3"],
        &[
            ("BOOTPROF_ENABLE", "*"),
            ("BOOTPROF_LATENCY", "latency:frame"),
            ("BOOTPROF_RECORD", "1"),
            ("BOOTPROF_OUTPUT", w.path("t.trace").to_str().unwrap()),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(ok(&o).contains("done 3"));
    assert!(err.contains("BOOTPROF_LATENCY needs a session"), "{err}");
    // Settings a program is started with by hand: said, nothing measured, the program runs.
    for (name, value, says) in [
        (
            "BOOTPROF_LATENCY_WINDOWS",
            "0",
            "BOOTPROF_LATENCY_WINDOWS=0 is not 1 to 10000",
        ),
        (
            "BOOTPROF_LATENCY_MIN",
            "5ms",
            "BOOTPROF_LATENCY_MIN=5ms is not a number",
        ),
        ("BOOTPROF_LATENCY", "a..[", "BOOTPROF_LATENCY=a..["),
    ] {
        let mut env = vec![
            ("BOOTPROF_ENABLE", "*"),
            ("BOOTPROF_LATENCY", "latency:frame"),
            ("BOOTPROF_SESSION", w.0.to_str().unwrap()),
        ];
        env.retain(|(k, _)| *k != name);
        env.push((name, value));
        let o = run(&w.path("latency"), &["frames", "3"], &env);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(ok(&o).contains("done 3"), "{name}");
        assert!(err.contains(says), "{name}: {err}");
    }
}

/// The README's slow-request hunt: in `examples/requests` the slow request is the one that waited
/// for the long flush, and its window holds the flusher's records of that time, names and all.
#[test]
fn the_example_slow_request_is_the_one_that_waited_for_the_flush() {
    let w = Work::new("latency-example");
    let src = root().join("examples/requests/main.c");
    w.build("requests", &[src.to_str().unwrap()], &[], &[]);
    let (t, o) = latency_run(
        &w,
        "s",
        &["--latency", "server:request_begin..server:request_end"],
        &["./requests"],
    );
    assert!(ok(&o).contains("served 300 requests"));
    let l = latency_of(&t);
    assert_eq!(l.count, 300);
    // The slow request waits for whatever is left of the 40 ms flush when its append comes: all
    // of it less the time since the flush took the lock, which a loaded machine can stretch to a
    // few milliseconds. Every other request takes about 1 ms.
    assert!(ms(&t, l.max) >= 20.0, "{}", ms(&t, l.max));
    let begin = hits(&t, "request_begin");
    let end = hits(&t, "request_end");
    assert_eq!((begin.len(), end.len()), (1, 1));
    assert_eq!(begin[0].1, end[0].1, "one request's window");
    let name_of = |r: &bootprof_format::trace::Record| {
        t.threads
            .iter()
            .find(|(k, _)| *k == r.tid)
            .and_then(|(_, n)| n.clone())
    };
    let on = |site: &str| {
        t.records
            .iter()
            .filter(|r| t.sites[r.site as usize].function == site)
            .map(|r| name_of(&r))
            .collect::<Vec<_>>()
    };
    assert!(on("write_out")
        .iter()
        .all(|n| n.as_deref() == Some("flusher")));
    assert!(!on("write_out").is_empty());
    assert!(on("append_log")
        .iter()
        .all(|n| n.as_deref() == Some("main")));
    let summary = report_of(&w, "s", "summary");
    assert!(summary.contains("blamed on flusher"), "{summary}");
}
