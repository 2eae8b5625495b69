//! `bootprof report` on synthetic traces written here with the format crate's encoders: two
//! named threads and one unnamed, nested ENTER/EXIT, events, and a wait on the main thread
//! blamed on a worker's hold. Every check is computed from the numbers the trace was built
//! with, not from the code under test. Also: a real flame-graph renderer (inferno) reads the
//! folded output, headless Chromium draws the flame chart, and damaged traces fail cleanly.
//!
//! `BOOTPROF_SAVE_FLAMECHART=PATH` makes `flamechart_screenshot` keep its PNG at PATH (this is
//! how `docs/flamechart.png` is made; see `docs/README.md`).

use crate::util::{cmd, run, Out, TempDir, BOOTPROF};
use bootprof_format::trace::{Record, RecordKind, SiteEntry, TraceHeader, NONE, RECORD_SIZE};
use bootprof_format::Kind;
use serde_json::{Number, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// A trace under construction. Times are in TSC ticks; the TSC runs at 1 GHz, so a tick is a
/// nanosecond, and the trace starts at [`START`].
struct Builder {
    sites: Vec<SiteEntry>,
    strings: Vec<u8>,
    threads: Vec<(u32, u32)>,
    records: Vec<Record>,
    /// Function name -> start address, for parent addresses.
    functions: HashMap<String, u64>,
    /// Site indices by (kind, provider, name, function).
    by_key: HashMap<(u8, String, String, String), u32>,
}

const START: u64 = 5_000_000;
const HZ: u64 = 1_000_000_000;
const PID: u32 = 4242;

impl Builder {
    fn new() -> Builder {
        Builder {
            sites: Vec::new(),
            strings: Vec::new(),
            threads: Vec::new(),
            records: Vec::new(),
            functions: HashMap::new(),
            by_key: HashMap::new(),
        }
    }

    fn string(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return NONE;
        }
        let at = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        at
    }

    /// The start address of `function` (functions are 0x100 apart from 0x401000).
    fn function(&mut self, function: &str) -> u64 {
        let next = 0x40_1000 + 0x100 * self.functions.len() as u64;
        *self.functions.entry(function.to_string()).or_insert(next)
    }

    /// The site of (kind, provider, name) in `function`, made on first use.
    fn site(&mut self, kind: Kind, provider: &str, name: &str, function: &str) -> u32 {
        let key = (kind as u8, provider.into(), name.into(), function.into());
        if let Some(&s) = self.by_key.get(&key) {
            return s;
        }
        let func_offset = match kind {
            Kind::Fentry => 0,
            Kind::CygExit => 0x40,
            _ => 0x10 + 8 * self.sites.len() as u32 % 0x20,
        };
        let start = self.function(function);
        let entry = SiteEntry {
            id: 100 + self.sites.len() as u32,
            kind: kind as u8,
            name: self.string(name),
            function: self.string(function),
            provider: self.string(provider),
            func_offset,
            address: start + u64::from(func_offset),
        };
        self.sites.push(entry);
        let s = self.sites.len() as u32 - 1;
        self.by_key.insert(key, s);
        s
    }

    fn thread(&mut self, tid: u32, name: Option<&str>) {
        let name = name.map_or(NONE, |n| self.string(n));
        self.threads.push((tid, name));
    }

    fn record(&mut self, t: u64, tid: u32, kind: RecordKind, site: u32, arg: u64) {
        self.records.push(Record {
            tsc: START + t,
            arg,
            tid,
            site,
            kind,
        });
    }

    /// ENTER of `function` through `__fentry__`, called from `parent` (`None`: thread start).
    fn enter(&mut self, t: u64, tid: u32, function: &str, parent: Option<&str>) {
        let site = self.site(Kind::Fentry, "", "__fentry__", function);
        let arg = parent.map_or(0, |p| self.function(p) + 0x23);
        self.record(t, tid, RecordKind::Enter, site, arg);
    }

    /// EXIT of `function` through `__cyg_profile_func_exit`.
    fn exit(&mut self, t: u64, tid: u32, function: &str) {
        let site = self.site(Kind::CygExit, "", "__cyg_profile_func_exit", function);
        self.record(t, tid, RecordKind::Exit, site, 0);
    }

    /// A record of an annotation probe `provider:name` in `function`.
    fn probe(&mut self, t: u64, tid: u32, kind: RecordKind, provider: &str, name: &str, arg: u64) {
        let site = self.site(Kind::Probe, provider, name, "annotated");
        self.record(t, tid, kind, site, arg);
    }

    fn bytes(&self) -> Vec<u8> {
        let mut records = self.records.clone();
        records.sort_by_key(|r| r.tsc);
        let header = TraceHeader {
            tsc_hz: HZ,
            start_tsc: START,
            pid: PID,
            ..TraceHeader::default()
        };
        let mut out = Vec::new();
        let (sites, threads, strings) = (&self.sites, &self.threads, &self.strings);
        bootprof_format::trace::write_trace(header, sites, threads, strings, &records, |b| {
            out.extend_from_slice(b);
            Ok::<(), std::convert::Infallible>(())
        })
        .unwrap_or_else(|never| match never {});
        out
    }

    fn write(&self, dir: &TempDir, name: &str) -> PathBuf {
        let path = dir.join(name);
        crate::util::write(&path, self.bytes());
        path
    }
}

const MAIN: u32 = 100;
const USB: u32 = 101;
const ANON: u32 = 102;

/// The small boot, times in µs (ticks are ns):
///
/// ```text
/// main (100): main 0..200 { init_config 10..30 { parse 12..20 }  ready@35
///             wait root 40..140  parse 150..154 }
/// usb  (101): named by THREAD@5, hold root 8..130 { usb_probe 50..120 { delay 60..90 } }
/// 102:        tick@100 (no name anywhere)
/// ```
///
/// The wait is blamed on usb from 40 (the WAIT; usb held root since 8 and exists since 5) to
/// 130 (its RELEASE): 90 µs, during which usb_probe (50..120) and delay (60..90) run.
fn small_boot() -> Builder {
    use RecordKind::*;
    let us = 1000;
    let mut b = Builder::new();
    b.thread(MAIN, Some("main"));
    b.thread(USB, None);
    b.thread(ANON, None);
    b.enter(0, MAIN, "main", None);
    b.probe(5 * us, USB, Thread, "bpthread", "usb", 0);
    b.probe(8 * us, USB, Hold, "bphold", "root", 0);
    b.enter(10 * us, MAIN, "init_config", Some("main"));
    b.enter(12 * us, MAIN, "parse", Some("init_config"));
    b.exit(20 * us, MAIN, "parse");
    b.exit(30 * us, MAIN, "init_config");
    b.probe(35 * us, MAIN, Event, "app", "ready", 0x2a);
    b.probe(40 * us, MAIN, Wait, "bpwait", "root", 0);
    b.enter(50 * us, USB, "usb_probe", None);
    b.enter(60 * us, USB, "delay", Some("usb_probe"));
    b.exit(90 * us, USB, "delay");
    b.probe(100 * us, ANON, Event, "app", "tick", 1);
    b.exit(120 * us, USB, "usb_probe");
    b.probe(130 * us, USB, Release, "bprelease", "root", 0);
    b.probe(140 * us, MAIN, Unwait, "bpunwait", "root", 0);
    b.enter(150 * us, MAIN, "parse", Some("main"));
    b.exit(154 * us, MAIN, "parse");
    b.exit(200 * us, MAIN, "main");
    b
}

fn report(trace: &Path, format: &str) -> Out {
    let out = run(cmd(BOOTPROF, ["report", "--format", format]).arg(trace));
    out.no_panic();
    out.ok()
}

#[test]
fn text_lines_and_timestamps() {
    let dir = TempDir::new("report-text");
    let trace = small_boot().write(&dir, "boot.trace");
    let out = run(cmd(BOOTPROF, ["report"]).arg(&trace)).ok();
    let lines: Vec<&str> = out.stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), small_boot().records.len(), "{out}");
    // TASK-PID [CPU] SECONDS.MICROS: WHAT
    let parsed: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            let (task, rest) = l.trim_start().split_once(" [000] ").expect(l);
            let (ts, what) = rest.trim_start().split_once(": ").expect(l);
            (
                task.trim_end().to_string(),
                ts.to_string(),
                what.to_string(),
            )
        })
        .collect();
    let expect = [
        ("main-100", "0.000000", "main"),
        ("usb-101", "0.000005", "THREAD usb"),
        ("usb-101", "0.000008", "HOLD root"),
        ("main-100", "0.000010", "init_config <-main"),
        ("main-100", "0.000012", "parse <-init_config"),
        ("main-100", "0.000020", "EXIT parse"),
        ("main-100", "0.000030", "EXIT init_config"),
        ("main-100", "0.000035", "EVENT app:ready arg=0x2a"),
        ("main-100", "0.000040", "WAIT root"),
        ("usb-101", "0.000050", "usb_probe"),
        ("usb-101", "0.000060", "delay <-usb_probe"),
        ("usb-101", "0.000090", "EXIT delay"),
        ("<...>-102", "0.000100", "EVENT app:tick arg=0x1"),
        ("usb-101", "0.000120", "EXIT usb_probe"),
        ("usb-101", "0.000130", "RELEASE root"),
        ("main-100", "0.000140", "UNWAIT root"),
        ("main-100", "0.000150", "parse <-main"),
        ("main-100", "0.000154", "EXIT parse"),
        ("main-100", "0.000200", "EXIT main"),
    ];
    for (i, (got, want)) in parsed.iter().zip(expect).enumerate() {
        assert_eq!(
            (got.0.as_str(), got.1.as_str(), got.2.as_str()),
            want,
            "line {i}: {}",
            lines[i]
        );
    }
    assert!(out.stdout.starts_with("# tracer: bootprof\n"), "{out}");
    assert!(out.stdout.contains("#           TASK-PID"), "{out}");
}

#[test]
fn text_timestamps_count_from_the_trace_start_at_any_frequency() {
    // 2.5 GHz, records 1.5 s and 2.000004 s after the start.
    let mut b = Builder::new();
    let site = b.site(Kind::Probe, "app", "late", "f");
    b.thread(7, Some("t"));
    b.record(3_750_000_000, 7, RecordKind::Event, site, 0);
    b.record(5_000_010_000, 7, RecordKind::Event, site, 0);
    let mut bytes = b.bytes();
    bytes[16..24].copy_from_slice(&2_500_000_000u64.to_le_bytes());
    let dir = TempDir::new("report-hz");
    let trace = dir.join("hz.trace");
    crate::util::write(&trace, bytes);
    let out = report(&trace, "text");
    assert!(
        out.stdout
            .contains("t-7       [000]      1.500000: EVENT app:late"),
        "{out}"
    );
    assert!(
        out.stdout.contains("[000]      2.000004: EVENT app:late"),
        "{out}"
    );
}

/// Chrome's events per thread, checked for balance; returns per tid the (name, cat, B ts,
/// E ts) of every frame, and the instants.
fn chrome_frames(doc: &Value) -> BTreeMap<u64, Vec<(String, String, f64, f64)>> {
    let events = match doc.get("traceEvents") {
        Some(Value::Array(v)) => v,
        other => panic!("no traceEvents array: {other:?}"),
    };
    assert_eq!(
        doc.get("displayTimeUnit").and_then(Value::as_str),
        Some("ns")
    );
    let mut open: HashMap<u64, Vec<(String, String, f64)>> = HashMap::new();
    let mut frames: BTreeMap<u64, Vec<(String, String, f64, f64)>> = BTreeMap::new();
    for e in events {
        let ph = e.get("ph").and_then(Value::as_str).expect("ph");
        let tid = e.get("tid").and_then(Value::as_u64).expect("tid");
        assert_eq!(e.get("pid").and_then(Value::as_u64), Some(u64::from(PID)));
        let name = e
            .get("name")
            .and_then(Value::as_str)
            .expect("name")
            .to_string();
        let ts = || match e.get("ts") {
            Some(Value::Number(n)) => n.as_f64().expect("ts"),
            other => panic!("ts: {other:?}"),
        };
        match ph {
            "B" => {
                let cat = e
                    .get("cat")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                open.entry(tid).or_default().push((name, cat, ts()));
            }
            "E" => {
                let (n, cat, start) = open
                    .get_mut(&tid)
                    .and_then(|s| s.pop())
                    .unwrap_or_else(|| panic!("E without B on tid {tid}: {name}"));
                assert_eq!(n, name, "E does not match the innermost B on tid {tid}");
                assert!(ts() >= start);
                frames
                    .entry(tid)
                    .or_default()
                    .push((name, cat, start, ts()));
            }
            "i" => assert_eq!(e.get("s").and_then(Value::as_str), Some("t")),
            "M" => {}
            other => panic!("unexpected phase {other}"),
        }
    }
    for (tid, stack) in open {
        assert!(stack.is_empty(), "unbalanced B on tid {tid}: {stack:?}");
    }
    frames
}

#[test]
fn chrome_is_json_with_balanced_frames_and_the_blame() {
    let dir = TempDir::new("report-chrome");
    let trace = small_boot().write(&dir, "boot.trace");
    let out = report(&trace, "chrome");
    let doc: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    let frames = chrome_frames(&doc);
    let find = |tid: u64, name: &str| -> Vec<(String, f64, f64)> {
        frames[&tid]
            .iter()
            .filter(|f| f.0 == name)
            .map(|f| (f.1.clone(), f.2, f.3))
            .collect()
    };
    assert_eq!(find(100, "main"), vec![("function".into(), 0.0, 200.0)]);
    assert_eq!(
        find(100, "parse"),
        vec![
            ("function".into(), 12.0, 20.0),
            ("function".into(), 150.0, 154.0)
        ]
    );
    assert_eq!(
        find(100, "wait:root (blamed on usb)"),
        vec![("blame".into(), 40.0, 130.0)]
    );
    assert_eq!(find(100, "wait:root"), vec![("wait".into(), 130.0, 140.0)]);
    // usb's frames, on usb and copied onto main for the blamed time.
    assert_eq!(
        find(101, "usb_probe"),
        vec![("function".into(), 50.0, 120.0)]
    );
    assert_eq!(find(100, "usb_probe"), vec![("blamed".into(), 50.0, 120.0)]);
    assert_eq!(find(100, "delay"), vec![("blamed".into(), 60.0, 90.0)]);
    // Thread names as metadata, instants for the events.
    let events = match doc.get("traceEvents") {
        Some(Value::Array(v)) => v,
        _ => unreachable!(),
    };
    let names: Vec<(u64, String)> = events
        .iter()
        .filter(|e| e.get("name").and_then(Value::as_str) == Some("thread_name"))
        .map(|e| {
            let n = e
                .get("args")
                .and_then(|a| a.get("name"))
                .and_then(Value::as_str);
            (
                e.get("tid").and_then(Value::as_u64).unwrap(),
                n.unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            (100, "main".into()),
            (101, "usb".into()),
            (102, "102".into())
        ]
    );
    let ready = events
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some("app:ready"))
        .expect("app:ready");
    assert_eq!(ready.get("ph").and_then(Value::as_str), Some("i"));
    assert_eq!(
        ready
            .get("ts")
            .and_then(Value::as_number)
            .map(Number::as_str),
        Some("35.000")
    );
}

#[test]
fn chrome_drops_unmatched_exits_and_closes_open_frames_at_the_end() {
    let mut b = Builder::new();
    b.thread(1, Some("a"));
    b.exit(1000, 1, "never_entered");
    b.enter(2000, 1, "outer", None);
    b.enter(3000, 1, "inner", Some("outer"));
    b.exit(4000, 1, "inner");
    let dir = TempDir::new("report-unbalanced");
    let trace = b.write(&dir, "t.trace");
    let out = report(&trace, "chrome");
    let frames = chrome_frames(&serde_json::from_str(&out.stdout).unwrap());
    let got: Vec<(String, f64, f64)> = frames[&1].iter().map(|f| (f.0.clone(), f.2, f.3)).collect();
    assert_eq!(
        got,
        // outer has no EXIT: its end is inferred, and its name says so.
        vec![
            ("inner".into(), 3.0, 4.0),
            ("outer (inferred)".into(), 2.0, 4.0)
        ]
    );
    assert!(!out.stdout.contains("never_entered"), "{out}");
}

/// The folded lines of the small boot, by hand: self time of each stack in ns.
const SMALL_FOLDED: &[(&str, u64)] = &[
    ("main;main", 200_000 - 20_000 - 90_000 - 10_000 - 4_000),
    ("main;main;init_config", 20_000 - 8_000),
    ("main;main;init_config;parse", 8_000),
    ("main;main;parse", 4_000),
    ("main;main;wait:root", 10_000),
    ("main;main;wait:root (blamed on usb)", 90_000 - 70_000),
    (
        "main;main;wait:root (blamed on usb);usb_probe",
        70_000 - 30_000,
    ),
    (
        "main;main;wait:root (blamed on usb);usb_probe;delay",
        30_000,
    ),
    ("usb;usb_probe", 40_000),
    ("usb;usb_probe;delay", 30_000),
];

#[test]
fn folded_stacks_and_self_times() {
    let dir = TempDir::new("report-folded");
    let trace = small_boot().write(&dir, "boot.trace");
    let out = report(&trace, "folded");
    let got: Vec<(String, u64)> = out
        .stdout
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').expect(l);
            (stack.to_string(), n.parse().expect(l))
        })
        .collect();
    let want: Vec<(String, u64)> = SMALL_FOLDED
        .iter()
        .map(|(s, n)| (s.to_string(), *n))
        .collect();
    assert_eq!(got, want, "{out}");
    // The blamed holder's time under main equals the blamed interval, 90 µs.
    let blamed: u64 = got
        .iter()
        .filter(|(s, _)| s.starts_with("main;main;wait:root (blamed on usb)"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(blamed, 90_000);
}

#[test]
fn folded_renders_with_inferno() {
    let dir = TempDir::new("report-inferno");
    let trace = small_boot().write(&dir, "boot.trace");
    let out = report(&trace, "folded");
    let mut svg = Vec::new();
    let mut options = inferno::flamegraph::Options::default();
    options.count_name = "ns".into();
    inferno::flamegraph::from_lines(&mut options, out.stdout.lines(), &mut svg)
        .unwrap_or_else(|e| panic!("inferno cannot render the folded stacks: {e}\n{out}"));
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.starts_with("<?xml"), "{}", &svg[..svg.len().min(200)]);
    for name in ["usb_probe", "init_config", "blamed on usb"] {
        assert!(svg.contains(name), "{name} is not in inferno's SVG");
    }
    // inferno's tooltip for main's root frame counts every ns of the two threads' stacks.
    let total: u64 = SMALL_FOLDED.iter().map(|(_, n)| n).sum();
    assert!(
        svg.contains(&format!("all ({} ns", fmt_thousands(total))),
        "total {total}"
    );
}

fn fmt_thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The frames of a flame chart: (title, x, y, width), and the root's geometry.
struct Chart {
    x0: f64,
    width: f64,
    ns: f64,
    frames: Vec<(String, f64, f64, f64)>,
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[at..].find('"')?;
    Some(tag[at..at + end].to_string())
}

fn parse_chart(svg: &str) -> Chart {
    let root = &svg[svg.find("<svg").expect("<svg")..];
    let root = &root[..root.find('>').unwrap()];
    let num = |tag: &str, name: &str| -> f64 {
        attr(tag, name)
            .unwrap_or_else(|| panic!("no {name} in {tag}"))
            .parse()
            .unwrap()
    };
    let mut frames = Vec::new();
    for group in svg.split("<g class=\"f\">").skip(1) {
        let title = &group[group.find("<title>").unwrap() + 7..group.find("</title>").unwrap()];
        let rect = &group[group.find("<rect").unwrap()..];
        let rect = &rect[..rect.find("/>").unwrap()];
        frames.push((
            title.to_string(),
            num(rect, "x"),
            num(rect, "y"),
            num(rect, "width"),
        ));
    }
    Chart {
        x0: num(root, "data-x0"),
        width: num(root, "data-chart-width"),
        ns: num(root, "data-ns"),
        frames,
    }
}

#[test]
fn flamechart_rectangles_match_the_durations() {
    let dir = TempDir::new("report-flamechart");
    let trace = small_boot().write(&dir, "boot.trace");
    let out = report(&trace, "flamechart");
    let svg = &out.stdout;
    assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"));
    // Self-contained: its one script inline, nothing fetched.
    assert_eq!(svg.matches("<script").count(), 1, "one script");
    assert!(
        !svg.contains("href=") && !svg.contains(" src="),
        "a reference outside"
    );
    let chart = parse_chart(svg);
    assert_eq!(chart.ns, 200_000.0);
    let px = |ns: f64| ns * chart.width / chart.ns;
    // A title is `NAME (DURATION ms, from START ms[, copied from the thread blamed ...])`.
    let frames = |name: &str| -> Vec<(f64, f64, f64, String)> {
        chart
            .frames
            .iter()
            .filter(|f| f.0.rfind(" (").is_some_and(|at| &f.0[..at] == name))
            .map(|f| (f.1, f.2, f.3, f.0.clone()))
            .collect()
    };
    let close = |a: f64, b: f64| (a - b).abs() < 0.01;
    // (start ns, duration ns) of every frame, by name.
    let expect: &[(&str, &[(f64, f64)])] = &[
        ("main", &[(0.0, 200_000.0)]),
        ("init_config", &[(10_000.0, 20_000.0)]),
        ("parse", &[(12_000.0, 8_000.0), (150_000.0, 4_000.0)]),
        ("wait:root (blamed on usb)", &[(40_000.0, 90_000.0)]),
        ("wait:root", &[(130_000.0, 10_000.0)]),
        ("usb_probe", &[(50_000.0, 70_000.0), (50_000.0, 70_000.0)]),
        ("delay", &[(60_000.0, 30_000.0), (60_000.0, 30_000.0)]),
    ];
    for (name, spans) in expect {
        let got = frames(name);
        assert_eq!(got.len(), spans.len(), "{name}: {got:?}");
        for ((x, _, w, title), (start, dur)) in got.iter().zip(spans.iter()) {
            assert!(close(*x, chart.x0 + px(*start)), "{title}: x {x}");
            assert!(close(*w, px(*dur)), "{title}: width {w}");
            let ms = format!("({:.3} ms", dur / 1e6);
            assert!(title.contains(&ms), "{title} should say {ms}");
        }
    }
    // The copies of usb's frames sit on main's band, above the blame frame; the originals on
    // usb's band, lower down the chart.
    let blame_y = frames("wait:root (blamed on usb)")[0].1;
    let probes = frames("usb_probe");
    let copy = probes
        .iter()
        .find(|f| f.3.contains("copied"))
        .expect("copy");
    let own = probes
        .iter()
        .find(|f| !f.3.contains("copied"))
        .expect("own");
    assert!(copy.1 < blame_y, "the copy is stacked on the blame frame");
    assert!(own.1 > blame_y, "usb's band comes after main's");
    // Tick labels on the time axis.
    assert!(
        svg.contains(">0 µs</text>") && svg.contains(">200 µs</text>"),
        "{svg}"
    );
}

/// `--from-first-record`: the chart's time zero is the first record, not the start of recording;
/// frames keep their durations and move left by the same amount.
/// `--width` sets the chart's width; a width the chart cannot be drawn at (under 300 pixels, the
/// chart's own lower bound, or over a million) is refused and writes nothing.
#[test]
fn flamechart_width_is_given_and_bad_widths_are_refused() {
    let dir = TempDir::new("report-width");
    let trace = small_boot().write(&dir, "boot.trace");
    let wide = run(cmd(
        BOOTPROF,
        ["report", "--format", "flamechart", "--width", "2400"],
    )
    .arg(&trace))
    .ok();
    assert_eq!(attr(&wide.stdout, "width").as_deref(), Some("2400"));
    for bad in ["299", "1000001", "wide"] {
        let svg = dir.join("bad.svg");
        let out = run(cmd(
            BOOTPROF,
            ["report", "--format", "flamechart", "--width", bad, "-o"],
        )
        .arg(&svg)
        .arg(&trace));
        out.no_panic();
        assert_eq!(out.code, Some(2), "{bad}: {out}");
        assert!(
            out.stderr
                .contains(&format!("invalid value '{bad}' for '--width <PIXELS>'")),
            "{bad}: {out}"
        );
        assert!(!svg.exists(), "{bad}");
    }
}

/// A Perfetto trace is binary: written to a terminal it is refused (with the way to get it), and
/// nothing is written; to a pipe or a file it is written. The terminal is a pseudo-terminal that
/// `script` (util-linux) gives the command.
#[test]
fn perfetto_is_not_written_to_a_terminal() {
    crate::util::require!("script");
    let dir = TempDir::new("report-perfetto-tty");
    let trace = small_boot().write(&dir, "boot.trace");
    let command = format!(
        "{} report --format perfetto {}",
        Path::new(&BOOTPROF).display(),
        trace.display()
    );
    let out = run(cmd("script", ["-qec", &command, "/dev/null"]));
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stdout.contains(
            "bootprof: error: --format perfetto writes a binary file: give -o FILE, or redirect \
             standard output"
        ),
        "{out}"
    );
    let piped = report(&trace, "perfetto");
    assert!(!piped.stdout.is_empty());
}

#[test]
fn flamechart_from_the_first_record() {
    use RecordKind::*;
    let dir = TempDir::new("report-flamechart-first");
    let us = 1000;
    let mut b = Builder::new();
    b.thread(MAIN, Some("main"));
    b.enter(700 * us, MAIN, "main", None);
    b.enter(710 * us, MAIN, "parse", Some("main"));
    b.exit(730 * us, MAIN, "parse");
    b.probe(750 * us, MAIN, Event, "app", "ready", 1);
    b.exit(800 * us, MAIN, "main");
    let trace = b.write(&dir, "late.trace");
    let whole = parse_chart(&report(&trace, "flamechart").stdout);
    assert_eq!(whole.ns, 800_000.0);
    let out = run(cmd(
        BOOTPROF,
        ["report", "--format", "flamechart", "--from-first-record"],
    )
    .arg(&trace))
    .ok();
    assert!(
        out.stdout
            .contains("0.100 ms from the first record (0.700 ms after recording began)"),
        "{}",
        out.stdout
    );
    let late = parse_chart(&out.stdout);
    assert_eq!(late.ns, 100_000.0);
    let px = |ns: f64| ns * late.width / late.ns;
    for (name, start, dur) in [("main", 0.0, 100_000.0), ("parse", 10_000.0, 20_000.0)] {
        let f = late
            .frames
            .iter()
            .find(|f| f.0.starts_with(&format!("{name} (")))
            .unwrap_or_else(|| panic!("no {name}: {:?}", late.frames));
        assert!((f.1 - (late.x0 + px(start))).abs() < 0.01, "{f:?}");
        assert!((f.3 - px(dur)).abs() < 0.01, "{f:?}");
        assert!(
            f.0.contains(&format!("from {:.3} ms", start / 1e6)),
            "{f:?}"
        );
    }
}

#[test]
fn points_count_total_average_min_max() {
    let dir = TempDir::new("report-points");
    let trace = small_boot().write(&dir, "boot.trace");
    let out = report(&trace, "points");
    let rows: Vec<Vec<String>> = out
        .stdout
        .lines()
        .skip(2)
        .filter(|l| !l.starts_with('-'))
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    let want = [
        ["main", "1", "0.200000", "200000", "200000", "200000"],
        ["usb_probe", "1", "0.070000", "70000", "70000", "70000"],
        ["delay", "1", "0.030000", "30000", "30000", "30000"],
        ["init_config", "1", "0.020000", "20000", "20000", "20000"],
        ["parse", "2", "0.012000", "6000", "4000", "8000"],
    ];
    assert_eq!(
        rows,
        want.map(|r| r.map(String::from).to_vec()).to_vec(),
        "{out}"
    );
    assert!(out.stdout.starts_with("name "), "{out}");
}

#[test]
fn summary_orders_by_inclusive_and_self_time() {
    let dir = TempDir::new("report-summary");
    let trace = small_boot().write(&dir, "boot.trace");
    let out = report(&trace, "summary");
    let section = |title: &str| -> Vec<String> {
        let at = out
            .stdout
            .find(title)
            .unwrap_or_else(|| panic!("{title}: {out}"));
        out.stdout[at..]
            .lines()
            .skip(2)
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_whitespace().last().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        section("by inclusive time"),
        ["main", "usb_probe", "delay", "init_config", "parse"]
    );
    // Self: main 76 µs, usb_probe 40, delay 30, init_config 12 and parse 12 (by name).
    assert_eq!(
        section("by self time"),
        ["main", "usb_probe", "delay", "init_config", "parse"]
    );
    assert!(
        out.stdout.contains("0.076  ") || out.stdout.contains(" 0.076 "),
        "{out}"
    );
    assert_eq!(section("events\n"), ["app:ready", "app:tick"]);
    assert!(
        out.stdout
            .contains("main waited 0.100 ms on root from 0.040 ms: 0.090 ms blamed on usb"),
        "{out}"
    );
}

#[test]
fn output_file_is_written_whole() {
    let dir = TempDir::new("report-output");
    let trace = small_boot().write(&dir, "boot.trace");
    let svg = dir.join("chart.svg");
    let out = run(cmd(BOOTPROF, ["report", "--format", "flamechart", "-o"])
        .arg(&svg)
        .arg(&trace));
    out.no_panic();
    let out = out.ok();
    assert!(out.stdout.is_empty(), "{out}");
    let text = String::from_utf8(crate::util::read(&svg)).unwrap();
    assert!(text.trim_end().ends_with("</svg>"));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "a temporary file was left: {names:?}");
    // Readable by its user only, as every file bootprof creates.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&svg).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}

#[test]
fn damaged_traces_fail_with_file_and_offset() {
    let dir = TempDir::new("report-damaged");
    let good = small_boot().bytes();
    let records_at = good.len() - small_boot().records.len() * RECORD_SIZE;
    let mut cases: Vec<(&str, Vec<u8>, String)> = vec![
        ("empty", Vec::new(), "offset 0x0".into()),
        ("short-header", good[..40].to_vec(), "offset 0x28".into()),
    ];
    let mut bad_magic = good.clone();
    bad_magic[..8].copy_from_slice(b"NOTTRACE");
    cases.push(("magic", bad_magic, "bad magic".into()));
    let mut bad_kind = good.clone();
    bad_kind[records_at + 24] = 0x77;
    cases.push(("kind", bad_kind, format!("offset {:#x}", records_at + 24)));
    let mut unsorted = good.clone();
    unsorted[records_at + RECORD_SIZE..records_at + RECORD_SIZE + 8].fill(0);
    cases.push((
        "order",
        unsorted,
        format!("offset {:#x}", records_at + RECORD_SIZE),
    ));
    for (name, bytes, expect) in cases {
        let path = dir.join(format!("{name}.trace"));
        crate::util::write(&path, &bytes);
        for format in ["text", "folded"] {
            let out = run(cmd(BOOTPROF, ["report", "--format", format]).arg(&path));
            out.no_panic();
            assert_eq!(out.code, Some(1), "{name}: {out}");
            assert!(out.stderr.starts_with("bootprof: error: "), "{name}: {out}");
            assert!(
                out.stderr.contains(&path.display().to_string()),
                "{name}: {out}"
            );
            assert!(
                out.stderr.contains(&expect),
                "{name}: expected {expect}: {out}"
            );
            assert!(out.stderr.contains("malformed trace"), "{name}: {out}");
            assert!(out.stdout.is_empty(), "{name}: {out}");
        }
    }
    let out = run(cmd(BOOTPROF, ["report"]).arg(dir.join("missing.trace")));
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr.contains("missing.trace"), "{out}");
}

/// A trace cut short at every eighth of its length (a full disk, a writer killed while dumping)
/// is reported up to the cut: exit 0, a warning naming the file and how many records are
/// missing, and in the text report exactly the records before the cut.
#[test]
fn cut_traces_are_reported_up_to_the_cut() {
    let dir = TempDir::new("report-cut");
    let b = realistic_boot();
    let good = b.bytes();
    let records_at = good.len() - b.records.len() * RECORD_SIZE;
    let whole = dir.join("whole.trace");
    crate::util::write(&whole, &good);
    let full = run(cmd(BOOTPROF, ["report", "--format", "text"]).arg(&whole)).ok();
    let events = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(String::from)
            .collect()
    };
    let all = events(&full.stdout);
    assert!(full.stderr.is_empty(), "{full}");
    for eighth in 1..8 {
        let n = good.len() * eighth / 8;
        let path = dir.join(format!("cut-{eighth}.trace"));
        crate::util::write(&path, &good[..n]);
        let kept = n.saturating_sub(records_at) / RECORD_SIZE;
        let missing = b.records.len() - kept;
        for format in [
            "text",
            "summary",
            "folded",
            "chrome",
            "flamechart",
            "points",
        ] {
            let out = run(cmd(BOOTPROF, ["report", "--format", format]).arg(&path));
            out.no_panic();
            let out = out.ok();
            assert!(
                out.stderr.starts_with("bootprof: warning: ")
                    && out.stderr.contains(&path.display().to_string())
                    && out
                        .stderr
                        .contains(&format!("{missing} records are missing")),
                "cut at {n} ({eighth}/8), {format}: {out}"
            );
        }
        let text = run(cmd(BOOTPROF, ["report", "--format", "text"]).arg(&path)).ok();
        assert!(
            text.stdout.contains("# the trace file was cut short"),
            "{text}"
        );
        // Each record is one line of the text report, in order: the kept ones are the first.
        let lines = events(&text.stdout);
        assert_eq!(lines.len(), kept, "cut at {n}: {text}");
        let names = |ls: &[String]| -> Vec<String> {
            ls.iter()
                .map(|l| l.split_whitespace().skip(3).collect::<Vec<_>>().join(" "))
                .collect()
        };
        assert_eq!(names(&lines), names(&all[..kept]), "cut at {n}");
    }
}

/// Records the recorder dropped (its buffer was full) are shown by every format: a warning on
/// stderr always, and inside the report where the format has room (the text and summary
/// headers, the points table, the flame chart's subtitle, the Chrome trace's metadata).
#[test]
fn dropped_records_are_shown_by_every_format() {
    let dir = TempDir::new("report-dropped");
    let mut bytes = small_boot().bytes();
    // The header's dropped count (offset 56).
    bytes[56..64].copy_from_slice(&4000u64.to_le_bytes());
    let path = dir.join("dropped.trace");
    crate::util::write(&path, &bytes);
    let said = "4000 records were dropped (the recording buffer was full)";
    for (format, inside) in [
        ("text", Some("(4000 dropped)")),
        ("summary", Some("(4000 dropped)")),
        ("points", Some(said)),
        ("flamechart", Some(said)),
        ("chrome", Some(said)),
        ("folded", None),
    ] {
        let out = run(cmd(BOOTPROF, ["report", "--format", format]).arg(&path));
        out.no_panic();
        let out = out.ok();
        assert!(
            out.stderr.starts_with("bootprof: warning: ") && out.stderr.contains(said),
            "{format}: {out}"
        );
        if let Some(inside) = inside {
            assert!(out.stdout.contains(inside), "{format}: {out}");
        }
        if format == "chrome" {
            let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
            assert_eq!(
                v["otherData"]["bootprof_not_shown"].as_str(),
                Some(said),
                "{out}"
            );
        }
    }
    // Nothing lost, nothing said.
    let clean = small_boot().write(&dir, "clean.trace");
    let out = run(cmd(BOOTPROF, ["report", "--format", "chrome"]).arg(&clean)).ok();
    assert!(
        out.stderr.is_empty() && !out.stdout.contains("otherData"),
        "{out}"
    );
}

/// A boot-like trace with a few hundred frames on three threads, for the screenshot.
fn realistic_boot() -> Builder {
    use RecordKind::*;
    let us = 1000u64;
    let mut b = Builder::new();
    b.thread(MAIN, Some("main"));
    b.thread(USB, None);
    b.thread(ANON, None);
    let mut t = 0;
    b.enter(t, MAIN, "main", None);
    t += 20 * us;
    b.enter(t, MAIN, "read_config", Some("main"));
    for i in 0..12 {
        b.enter(t + 5 * us, MAIN, "parse_line", Some("read_config"));
        t += 5 * us + (20 + 7 * (i % 4)) * us;
        b.exit(t, MAIN, "parse_line");
    }
    t += 10 * us;
    b.exit(t, MAIN, "read_config");
    b.probe(t, MAIN, Event, "app", "config_loaded", 12);
    b.enter(t, MAIN, "calibrate_clock", Some("main"));
    t += 400 * us;
    b.exit(t, MAIN, "calibrate_clock");
    b.enter(t, MAIN, "load_plugins", Some("main"));
    for (i, plugin) in ["audio", "net", "video", "input", "fonts", "spell"]
        .iter()
        .enumerate()
    {
        let i = i as u64;
        b.enter(t + 5 * us, MAIN, "load_plugin", Some("load_plugins"));
        b.enter(t + 10 * us, MAIN, "open_file", Some("load_plugin"));
        b.exit(t + 40 * us, MAIN, "open_file");
        b.enter(t + 45 * us, MAIN, "verify_signature", Some("load_plugin"));
        b.exit(t + (120 + 30 * i) * us, MAIN, "verify_signature");
        b.probe(t + (125 + 30 * i) * us, MAIN, Event, "plugin", plugin, i);
        t += (140 + 30 * i) * us;
        b.exit(t, MAIN, "load_plugin");
    }
    t += 10 * us;
    b.exit(t, MAIN, "load_plugins");
    // The device thread: holds "devices" from its start and probes them.
    let mut d = 50 * us;
    b.probe(d, USB, Thread, "bpthread", "usb-probe", 0);
    b.probe(d, USB, Hold, "bphold", "devices", 0);
    b.enter(d, USB, "probe_bus", None);
    for i in 0..8u64 {
        b.enter(d + 10 * us, USB, "probe_device", Some("probe_bus"));
        b.enter(d + 20 * us, USB, "reset_port", Some("probe_device"));
        b.enter(d + 25 * us, USB, "delay", Some("reset_port"));
        b.exit(d + (225 + 40 * (i % 3)) * us, USB, "delay");
        b.exit(d + (235 + 40 * (i % 3)) * us, USB, "reset_port");
        b.enter(
            d + (240 + 40 * (i % 3)) * us,
            USB,
            "read_descriptor",
            Some("probe_device"),
        );
        b.exit(d + (300 + 40 * (i % 3)) * us, USB, "read_descriptor");
        d += (320 + 40 * (i % 3)) * us;
        b.exit(d, USB, "probe_device");
    }
    d += 10 * us;
    b.exit(d, USB, "probe_bus");
    b.probe(d, USB, Release, "bprelease", "devices", 0);
    // A cache thread, never named: a short job early on.
    b.enter(100 * us, ANON, "warm_cache", None);
    for i in 0..20u64 {
        b.enter((110 + 30 * i) * us, ANON, "load_entry", Some("warm_cache"));
        b.exit((130 + 30 * i) * us, ANON, "load_entry");
    }
    b.exit(750 * us, ANON, "warm_cache");
    // main waits for the devices, then starts the services.
    b.probe(t, MAIN, Wait, "bpwait", "devices", 0);
    t = t.max(d) + 30 * us;
    b.probe(t, MAIN, Unwait, "bpunwait", "devices", 0);
    b.enter(t, MAIN, "start_services", Some("main"));
    for _ in 0..5 {
        b.enter(t + 10 * us, MAIN, "spawn_service", Some("start_services"));
        t += 150 * us;
        b.exit(t, MAIN, "spawn_service");
    }
    t += 20 * us;
    b.exit(t, MAIN, "start_services");
    b.probe(t, MAIN, Event, "app", "ready", 0);
    t += 10 * us;
    b.exit(t, MAIN, "main");
    b
}

#[test]
fn flamechart_screenshot() {
    let dir = TempDir::new("report-screenshot");
    let Some(mut chromium) = crate::util::chromium(&dir) else {
        return;
    };
    let trace = realistic_boot().write(&dir, "boot.trace");
    let svg = dir.join("boot.svg");
    run(cmd(BOOTPROF, ["report", "--format", "flamechart", "-o"])
        .arg(&svg)
        .arg(&trace))
    .ok();
    let png = dir.join("boot.png");
    let out = run(chromium
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,800")
        .arg(format!("file://{}", svg.display())));
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(size > 20_000, "screenshot is {size} bytes: {out}");
    let bytes = crate::util::read(&png);
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    if let Some(keep) = std::env::var_os("BOOTPROF_SAVE_FLAMECHART") {
        std::fs::copy(&png, &keep).unwrap();
        eprintln!("saved {}", Path::new(&keep).display());
    }
}

/// Not a check: writes a large synthetic trace for timing `bootprof report`, to the path in
/// `BOOTPROF_BIG_TRACE`, with `BOOTPROF_BIG_RECORDS` records (default 10,000,000): four threads
/// running nested calls over a call tree of 200 functions, an event every 50 records and a
/// blamed wait every 10,000.
///
/// ```text
/// BOOTPROF_BIG_TRACE=/tmp/big.trace cargo test --release -p bootprof-link \
///     --test integration report::big_trace -- --ignored
/// time target/release/bootprof report --format folded -o /tmp/big.folded /tmp/big.trace
/// ```
#[test]
#[ignore]
fn big_trace() {
    use std::io::Write;
    use RecordKind::*;
    let Some(path) = std::env::var_os("BOOTPROF_BIG_TRACE") else {
        crate::util::skipped("BOOTPROF_BIG_TRACE is not set");
        return;
    };
    let n: u64 = std::env::var("BOOTPROF_BIG_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let mut b = Builder::new();
    let functions: Vec<String> = (0..200).map(|f| format!("function_{f}")).collect();
    let (enter, exit): (Vec<u32>, Vec<u32>) = functions
        .iter()
        .map(|f| {
            (
                b.site(Kind::Fentry, "", "__fentry__", f),
                b.site(Kind::CygExit, "", "__cyg_profile_func_exit", f),
            )
        })
        .unzip();
    let tick = b.site(Kind::Probe, "app", "tick", "annotated");
    let [wait, unwait, hold, release] = [
        ("bpwait", Wait),
        ("bpunwait", Unwait),
        ("bphold", Hold),
        ("bprelease", Release),
    ]
    .map(|(p, _)| b.site(Kind::Probe, p, "root", "annotated"));
    for tid in 1..=4 {
        b.thread(tid, Some(&format!("thread{tid}")));
    }
    // The front of the file from the builder, the records streamed after it.
    b.record(0, 1, Event, tick, 0);
    let mut front = b.bytes();
    front.truncate(front.len() - RECORD_SIZE);
    front[48..56].copy_from_slice(&n.to_le_bytes());
    let file = std::fs::File::create(&path).unwrap();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    out.write_all(&front).unwrap();
    let mut emit = |t: u64, tid: u32, kind: RecordKind, site: u32, arg: u64| {
        let r = Record {
            tsc: START + t,
            arg,
            tid,
            site,
            kind,
        };
        out.write_all(&r.encode()).unwrap();
    };
    let mut seed = 0x1234_5678u64;
    let mut random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut stacks: Vec<Vec<u32>> = vec![Vec::new(); 5];
    let (mut t, mut written) = (0u64, 0u64);
    while written < n {
        t += 1 + random() % 100;
        let left = n - written;
        if written % 10_000 == 0 && left >= 4 {
            emit(t, 2, Hold, hold, 0);
            emit(t + 1, 1, Wait, wait, 0);
            emit(t + 70_000, 2, Release, release, 0);
            emit(t + 70_001, 1, Unwait, unwait, 0);
            (t, written) = (t + 70_001, written + 4);
            continue;
        }
        written += 1;
        let tid = 1 + (random() % 4) as u32;
        let stack = &mut stacks[tid as usize];
        let close = !stack.is_empty() && (stack.len() >= 6 || random() % 2 == 0);
        if written % 50 == 0 || (!close && left <= 8) {
            emit(t, 3, Event, tick, written);
        } else if close || left <= stack.len() as u64 {
            let f = stack.pop().unwrap();
            emit(t, tid, Exit, exit[f as usize], 0);
        } else {
            // Each function calls one of four callees of its own.
            let (f, parent) = match stack.last() {
                Some(&p) => (
                    (p * 7 + 1 + (random() % 4) as u32) % 200,
                    0x40_1000 + 0x100 * u64::from(p) + 0x23,
                ),
                None => ((random() % 10) as u32, 0),
            };
            stack.push(f);
            emit(t, tid, Enter, enter[f as usize], parent);
        }
    }
    out.flush().unwrap();
    eprintln!("wrote {n} records to {}", Path::new(&path).display());
}

/// ftrace's trace options on the text format, each against the numbers the trace was built with
/// (functions 0x100 apart from 0x401000 in the order first used: main, the annotations,
/// init_config, parse, ...; a hook's caller is its function + 0x23).
#[test]
fn text_options_like_ftraces() {
    let dir = TempDir::new("report-options");
    let trace = small_boot().write(&dir, "boot.trace");
    let lines = |options: &str| -> Vec<String> {
        let out = run(cmd(BOOTPROF, ["report", "--options", options]).arg(&trace)).ok();
        out.stdout
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    let what = |l: &str| {
        l.split_once(": ")
            .map_or(l.to_string(), |(_, w)| w.to_string())
    };
    let sym = lines("sym-offset,sym-addr");
    assert_eq!(
        what(&sym[3]),
        "init_config+0x0 <0x401200> <-main+0x23 <0x401023>"
    );
    assert_eq!(
        what(&sym[4]),
        "parse+0x0 <0x401300> <-init_config+0x23 <0x401223>"
    );
    assert_eq!(
        what(&lines("sym-offset")[4]),
        "parse+0x0 <-init_config+0x23"
    );
    assert_eq!(what(&lines("noprint-parent")[4]), "parse");
    // Without the context, a line is what happened alone.
    let bare = lines("nocontext-info");
    assert_eq!(bare.len(), small_boot().records.len());
    assert_eq!(
        (bare[0].as_str(), bare[7].as_str()),
        ("main", "EVENT app:ready arg=0x2a")
    );
    // raw and hex: KIND SITE ARG; app:ready is an EVENT (3) with argument 42.
    let raw = lines("raw");
    let (kind, rest) = what(&raw[7])
        .split_once(' ')
        .map(|(k, r)| (k.to_string(), r.to_string()))
        .unwrap();
    let (site, arg) = rest.split_once(' ').unwrap();
    assert_eq!((kind.as_str(), arg), ("3", "42"), "{}", raw[7]);
    let site: u32 = site.parse().unwrap();
    assert_eq!(what(&lines("hex")[7]), format!("3 {site:x} 2a"));
    // record-tgid: the process id beside every thread.
    assert!(lines("record-tgid")
        .iter()
        .all(|l| l.contains(&format!("({PID:>7}) [000]"))));
    // Only known names, and for the text format only.
    let out = run(cmd(BOOTPROF, ["report", "--options", "sym-ofset"]).arg(&trace));
    assert!(
        out.code == Some(2) && out.stderr.contains("unknown text option `sym-ofset`"),
        "{out}"
    );
    let out = run(cmd(
        BOOTPROF,
        ["report", "--format", "summary", "--options", "raw"],
    )
    .arg(&trace));
    assert!(
        out.code == Some(1) && out.stderr.contains("text only"),
        "{out}"
    );
}
