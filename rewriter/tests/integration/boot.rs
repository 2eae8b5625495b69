//! The boot example end to end: examples/boot linked by bootprof-link, run under `bootprof run`,
//! reported as a flame chart; each phase and the worker blamed for main's wait must appear with
//! their durations, read from the SVG's numbers (the sleeps in the program are lower bounds).

use crate::util::{cmd, link_bin, repo_root, run, Out, TempDir, BOOTPROF};
use std::path::{Path, PathBuf};

/// `bootprof run -o TRACE -- EXE`.
fn record(exe: &Path, trace: &Path) -> Out {
    let args = [
        "run".as_ref(),
        "-o".as_ref(),
        trace.as_os_str(),
        "--".as_ref(),
        exe.as_os_str(),
    ];
    run(cmd(BOOTPROF, args)).ok()
}

/// `bootprof report TRACE --format FORMAT`, its output.
fn report(trace: &Path, format: &str) -> String {
    run(cmd(
        BOOTPROF,
        [
            "report".as_ref(),
            trace.as_os_str(),
            "--format".as_ref(),
            format.as_ref(),
        ],
    ))
    .ok()
    .stdout
}

/// (name, duration ms, x, width) of every frame of the chart.
fn frames(svg: &str) -> Vec<(String, f64, f64, f64)> {
    let mut out = Vec::new();
    for part in svg.split("<title>").skip(1) {
        let (title, rest) = part.split_once("</title>").expect("closed title");
        // "early_init (20.183 ms, from 0.218 ms)"; names may hold " (" themselves.
        let Some(at) = title.find(" ms, from ") else {
            continue;
        };
        let open = title[..at].rfind(" (").expect("a duration in parentheses");
        let name = &title[..open];
        let ms: f64 = title[open + 2..at].parse().expect("duration");
        let rect = rest.split("<rect").nth(1).expect("a rect after the title");
        let attr = |a: &str| -> f64 {
            let v = rect.split(&format!(" {a}=\"")).nth(1).unwrap();
            v[..v.find('"').unwrap()].parse().unwrap()
        };
        out.push((name.to_string(), ms, attr("x"), attr("width")));
    }
    out
}

/// examples/boot, compiled and linked by bootprof-link into `dir`.
pub fn build(dir: &TempDir) -> PathBuf {
    let obj = dir.join("boot.o");
    run(cmd("cc", ["-O2", "-pthread", "-c", "-I"])
        .arg(repo_root().join("runtime/include"))
        .arg(repo_root().join("examples/boot/main.c"))
        .arg("-o")
        .arg(&obj))
    .ok();
    let exe = dir.join("boot");
    run(cmd(link_bin(), ["cc", "-pthread", "-o"])
        .arg(&exe)
        .arg(&obj))
    .ok();
    exe
}

#[test]
fn boot_example_flame_chart_shows_each_phase_and_the_blamed_worker() {
    let dir = TempDir::new("boot-chart");
    let exe = build(&dir);
    let trace = dir.join("boot.trace");
    let o = record(&exe, &trace);
    assert_eq!(o.stdout, "booted with 3 settings\n");
    let svg_path = dir.join("boot.svg");
    run(cmd(
        BOOTPROF,
        [
            "report".as_ref(),
            trace.as_os_str(),
            "--format".as_ref(),
            "flamechart".as_ref(),
            "-o".as_ref(),
            svg_path.as_os_str(),
        ],
    ))
    .ok();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let f = frames(&svg);
    let find = |name: &str| -> (f64, f64, f64) {
        let v: Vec<_> = f.iter().filter(|x| x.0 == name).collect();
        assert_eq!(
            v.len(),
            1,
            "one frame named {name} in {:?}",
            f.iter().map(|x| &x.0).collect::<Vec<_>>()
        );
        (v[0].1, v[0].2, v[0].3)
    };
    for (phase, at_least) in [
        ("early_init", 20.0),
        ("parse_config", 30.0),
        ("mount_disk", 60.0),
        ("delay", 40.0),
        ("main", 130.0),
    ] {
        let (ms, _, _) = find(phase);
        assert!(
            ms >= at_least && ms < at_least + 100.0,
            "{phase}: {ms} ms, want about {at_least}"
        );
    }
    // The time axis is linear: every frame's width per millisecond is the same.
    let (main_ms, _, main_w) = find("main");
    let scale = main_w / main_ms;
    for (name, ms, _, w) in &f {
        if *ms > 1.0 {
            assert!(
                (w / ms - scale).abs() / scale < 0.01,
                "{name}: width {w} for {ms} ms"
            );
        }
    }
    // main's wait for the disk is blamed on the worker that held it, for as long as it held it,
    // and the worker's warm_cache is spliced under the wait, inside mount_disk.
    let (blamed_ms, blamed_x, blamed_w) = find("wait:disk (blamed on diskworker)");
    let (mount_ms, mount_x, mount_w) = find("mount_disk");
    assert!(
        blamed_ms >= 55.0 && blamed_ms <= mount_ms,
        "blamed {blamed_ms} ms within mount_disk {mount_ms} ms"
    );
    assert!(blamed_x >= mount_x && blamed_x + blamed_w <= mount_x + mount_w + 0.01);
    let spliced: Vec<_> = f.iter().filter(|x| x.0 == "warm_cache").collect();
    assert_eq!(
        spliced.len(),
        2,
        "warm_cache on the worker's band and spliced under main's wait"
    );
    // The worker's own warm_cache sleeps 60 ms; the copy under main's wait starts at the later of
    // main's WAIT and warm_cache's start, which the scheduler may order either way.
    assert!(
        spliced.iter().all(|x| x.1 >= 55.0) && spliced.iter().any(|x| x.1 >= 60.0),
        "warm_cache: {spliced:?}"
    );
}

/// `-finstrument-functions` sites give entries and exits: full call stacks in the folded output,
/// one count per call.
#[test]
fn instrumented_functions_give_full_call_stacks() {
    let dir = TempDir::new("instrument-stacks");
    let obj = dir.join("i.o");
    run(cmd("cc", ["-O1", "-finstrument-functions", "-c"])
        .arg(repo_root().join("examples/instrument/main.c"))
        .arg("-o")
        .arg(&obj))
    .ok();
    let exe = dir.join("instrument");
    run(cmd(link_bin(), ["cc", "-o"]).arg(&exe).arg(&obj)).ok();
    let trace = dir.join("i.trace");
    record(&exe, &trace);
    let folded = report(&trace, "folded");
    let stacks: Vec<&str> = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s))
        .collect();
    assert!(
        stacks
            .iter()
            .any(|s| s.ends_with("main;shout;count_vowels")),
        "{folded}"
    );
    let points = report(&trace, "points");
    let calls = |name: &str| -> u64 {
        points
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(
        (calls("main"), calls("shout"), calls("count_vowels")),
        (1, 2, 2),
        "{points}"
    );
}
