//! The flame chart's script, driven in headless Chromium. examples/boot runs twice under one
//! `bootprof run` (a session of two processes, each with `main` and `diskworker`, so threads
//! share bands); `bootprof report --format flamechart` draws it, and an HTML page inlines the
//! SVG followed by `flamechart_driver.js`, which clicks frames, presses keys and searches,
//! recording every frame's geometry after each step into the page for `chromium --dump-dom`
//! to print. Expectations come from the static SVG's geometry and, for the share of time a
//! search matched, from the Chrome JSON report of the same session.
//!
//! `BOOTPROF_SAVE_FLAMECHART_ZOOMED=PATH` also keeps a screenshot of the chart zoomed into the
//! second run's `mount_disk`, with `warm_cache` searched for, at PATH (how
//! `docs/flamechart-zoomed.png` is made).

use crate::util::{cmd, run, TempDir, BOOTPROF};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// What the script and the writer share: the chart's left edge and width, a character's width.
const X0: f64 = 10.0;
const CHART: f64 = 1180.0;
const CHAR: f64 = 6.7;
const MATCH: &str = "rgb(230,0,230)";

/// A frame of the static chart, in document order.
#[derive(Debug)]
struct Frame {
    name: String,
    /// Index of its thread's `<g class="lane">`.
    lane: usize,
    /// x and width as written, and in thousandths of a pixel (the grid edges lie on).
    x: String,
    w: String,
    xu: i64,
    wu: i64,
    y: f64,
    /// A recorded stack's column: a time, not a span.
    hit: bool,
    fill: String,
    label: Option<(String, String)>,
}

impl Frame {
    /// Its extent in time, in thousandths of a pixel.
    fn time(&self) -> (i64, i64) {
        (self.xu, self.xu + if self.hit { 0 } else { self.wu })
    }
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

fn attr(tag: &str, name: &str) -> String {
    let at = tag
        .find(&format!(" {name}=\""))
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + name.len()
        + 3;
    tag[at..at + tag[at..].find('"').unwrap()].to_string()
}

fn units(v: &str) -> i64 {
    (v.parse::<f64>().unwrap() * 1000.0).round() as i64
}

fn frames(svg: &str) -> Vec<Frame> {
    let mut out = Vec::new();
    for (lane, part) in svg.split("<g class=\"lane\"").skip(1).enumerate() {
        for g in part.split("<g class=\"f").skip(1) {
            let g = &g[..g.find("</g>").unwrap()];
            let title = &g[g.find("<title>").unwrap() + 7..g.find("</title>").unwrap()];
            let title = unescape(title);
            let rect = &g[g.find("<rect").unwrap()..];
            let rect = &rect[..rect.find("/>").unwrap()];
            let label = g.find("<text").map(|at| {
                let text = &g[at..];
                let open = text.find('>').unwrap();
                let content = &text[open + 1..text.find("</text>").unwrap()];
                (attr(&text[..open], "x"), unescape(content))
            });
            let (x, w) = (attr(rect, "x"), attr(rect, "width"));
            out.push(Frame {
                name: title[..title.rfind(" (").unwrap()].to_string(),
                lane,
                xu: units(&x),
                wu: units(&w),
                x,
                w,
                y: attr(rect, "y").parse().unwrap(),
                hit: g.starts_with(" h\""),
                fill: attr(rect, "fill"),
                label,
            });
        }
    }
    out
}

/// `name` cut with ".." to fit `w` pixels, as the chart cuts labels; "" when fewer than three
/// characters fit.
fn cut(name: &str, w: f64) -> String {
    let fits = (w / CHAR).floor();
    if fits < 3.0 {
        return String::new();
    }
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= fits as usize {
        return name.to_string();
    }
    chars[..fits as usize - 2].iter().collect::<String>() + ".."
}

/// The state of one frame after a step: `[display, opacity, x, width, fill, label x, label]`.
fn field(f: &Value, i: usize) -> Option<&str> {
    f[i].as_str()
}

fn num(f: &Value, i: usize) -> f64 {
    field(f, i).unwrap().parse().unwrap()
}

/// Runs `steps` on the chart in Chromium: the state before the first step, then after each.
fn drive(
    chromium: &mut std::process::Command,
    dir: &TempDir,
    svg: &str,
    steps: Value,
) -> Vec<Value> {
    let page = dir.join("page.html");
    std::fs::write(&page, page_html(svg, &steps)).unwrap();
    let out = run(chromium
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display())));
    let Some(at) = out.stdout.find("<pre id=\"result\">") else {
        panic!("no result in the page Chromium printed:{out}");
    };
    let json = &out.stdout[at + 17..];
    let json = unescape(&json[..json.find("</pre>").unwrap()]);
    let result: Value = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("the driver's result is not JSON ({e}):{out}"));
    assert!(result.get("error").is_none(), "the driver failed: {result}");
    let states = result.as_array().unwrap().clone();
    assert_eq!(states.len(), steps.as_array().unwrap().len() + 1);
    for s in &states {
        assert_eq!(s["errors"], json!([]), "script errors");
    }
    states
}

/// An HTML page with `svg` inline and the driver after it, running `steps`.
fn page_html(svg: &str, steps: &Value) -> String {
    let driver = include_str!("flamechart_driver.js");
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>body{{margin:0}}</style>\
         <script>window.bpErrors = []; window.onerror = function (m) {{ bpErrors.push(m); }};\
         </script></head><body>\n{}\n<pre id=\"result\"></pre><script>{driver}({steps});\
         </script></body></html>",
        &svg[svg.find("<svg").expect("<svg")..]
    )
}

/// Every frame as the static chart has it, and the controls of a chart not zoomed.
fn assert_as_drawn(state: &Value, frames: &[Frame], what: &str) {
    assert_eq!(state["same"], true, "{what}: the chart is not as drawn");
    assert_eq!(state["reset"], false, "{what}: Reset Zoom shown");
    assert_eq!(state["ticks"], json!([]), "{what}: the zoomed axis is left");
    for (f, s) in frames.iter().zip(state["frames"].as_array().unwrap()) {
        let label = f.label.as_ref();
        let want = json!([
            null,
            null,
            f.x,
            f.w,
            f.fill,
            label.map(|l| &l.0),
            label.map(|l| &l.1)
        ]);
        assert_eq!(s, &want, "{what}: {f:?}");
    }
}

/// After a click on `frames[z]`: it fills the chart's width; its callers too, faded; every
/// frame of any thread that overlaps its time range is drawn to the new scale, cut at its
/// edges, with its label cut to the new width; every other frame hidden.
fn assert_zoomed(state: &Value, frames: &[Frame], z: usize) {
    let (zx, zw) = (frames[z].xu, frames[z].wu);
    let scale = CHART / (zw as f64 / 1000.0);
    let px = |u: i64| X0 + (u - zx) as f64 / 1000.0 * scale;
    let (za, zb) = frames[z].time();
    assert_eq!(state["reset"], true, "Reset Zoom shown");
    for (i, (f, s)) in frames
        .iter()
        .zip(state["frames"].as_array().unwrap())
        .enumerate()
    {
        let (a, b) = f.time();
        let caller = f.lane == frames[z].lane && f.y > frames[z].y && a <= za && b >= zb;
        let inside = if f.hit {
            a >= zx && a < zx + zw
        } else {
            a < zx + zw && b > zx
        };
        let what = format!("{f:?} zoomed into {:?}: {s}", frames[z]);
        if !(caller || inside || i == z) {
            assert_eq!(field(s, 0), Some("none"), "hidden: {what}");
            continue;
        }
        assert_eq!(field(s, 0), None, "shown: {what}");
        let faded = caller.then_some("0.5");
        assert_eq!(field(s, 1), faded, "faded as a caller: {what}");
        let (x, w) = if caller || i == z {
            (X0, CHART)
        } else if f.hit {
            (px(a), f.wu as f64 / 1000.0)
        } else {
            (px(a.max(zx)), px(b.min(zx + zw)) - px(a.max(zx)))
        };
        assert!((num(s, 2) - x).abs() < 0.002, "x {x}: {what}");
        assert!((num(s, 3) - w).abs() < 0.002, "width {w}: {what}");
        assert_eq!(
            field(s, 6).unwrap_or(""),
            cut(&f.name, w - 4.0),
            "label: {what}"
        );
        if field(s, 6).is_some_and(|l| !l.is_empty()) {
            assert!((num(s, 5) - (x + 2.0)).abs() < 0.002, "label x: {what}");
        }
    }
}

/// The index of the `n`th frame named `name`.
fn find(frames: &[Frame], name: &str, n: usize) -> usize {
    (frames.iter().enumerate())
        .filter(|(_, f)| f.name == name)
        .nth(n)
        .unwrap_or_else(|| panic!("no frame {n} named {name}: {frames:?}"))
        .0
}

/// A frame of the Chrome report: name, start and end (ns).
type Span = (String, u64, u64);

/// The share of the threads' time (per thread, the time its frames cover) that the frames
/// `matches` picks cover, in percent, from the Chrome JSON report (B/E pairs per thread).
fn matched_share(chrome: &Value, matches: impl Fn(&str) -> bool) -> f64 {
    let mut open: BTreeMap<(u64, u64), Vec<(String, u64)>> = BTreeMap::new();
    let mut spans: BTreeMap<(u64, u64), Vec<Span>> = BTreeMap::new();
    for e in chrome["traceEvents"].as_array().unwrap() {
        let thread = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let ns = || (e["ts"].as_f64().unwrap() * 1000.0).round() as u64;
        match e["ph"].as_str() {
            Some("B") => (open.entry(thread).or_default())
                .push((e["name"].as_str().unwrap().to_string(), ns())),
            Some("E") => {
                let (name, start) = open.get_mut(&thread).unwrap().pop().unwrap();
                spans.entry(thread).or_default().push((name, start, ns()));
            }
            _ => {}
        }
    }
    let covered = |mut s: Vec<(u64, u64)>| -> u64 {
        s.sort_unstable();
        let (mut sum, mut end) = (0, 0);
        for (a, b) in s {
            if b > end {
                sum += b - a.max(end);
                end = b;
            }
        }
        sum
    };
    let (mut matched, mut total) = (0, 0);
    for s in spans.values() {
        total += covered(s.iter().map(|f| (f.1, f.2)).collect());
        let m = s.iter().filter(|f| matches(&f.0));
        matched += covered(m.map(|f| (f.1, f.2)).collect());
    }
    100.0 * matched as f64 / total as f64
}

/// After a search: exactly the frames whose names match have the highlight, and the share
/// shown is `share` to its one decimal (either neighbour when `share` is within the chart's
/// rounding of a half).
fn assert_searched(state: &Value, frames: &[Frame], matches: impl Fn(&str) -> bool, share: f64) {
    for (f, s) in frames.iter().zip(state["frames"].as_array().unwrap()) {
        let fill = if matches(&f.name) { MATCH } else { &f.fill };
        assert_eq!(field(s, 4), Some(fill), "{f:?}");
    }
    let shown = state["matched"].as_str().expect("Matched: shown");
    let pct = shown
        .strip_prefix("Matched: ")
        .and_then(|s| s.strip_suffix('%'))
        .unwrap_or_else(|| panic!("{shown}"));
    assert_eq!(
        pct.len() - pct.find('.').unwrap(),
        2,
        "one decimal: {shown}"
    );
    let got: f64 = pct.parse().unwrap();
    assert!(
        format!("{share:.1}") == pct || (got - share).abs() < 0.0501,
        "{shown}, want {share:.3}%"
    );
}

#[test]
fn flamechart_zooms_resets_and_searches_in_chromium() {
    let dir = TempDir::new("chart-script");
    let Some(mut chromium) = crate::util::chromium(&dir) else {
        return;
    };
    let boot = crate::boot::build(&dir);
    let session = dir.join("boot.session");
    let both = format!("{0} && {0}", boot.display());
    run(cmd(BOOTPROF, ["run", "-o"])
        .arg(&session)
        .args(["--", "sh", "-c", &both]))
    .ok();
    let report = |format: &str, out: &Path| {
        run(cmd(BOOTPROF, ["report", "--format", format, "-o"])
            .arg(out)
            .arg(&session))
        .ok();
        std::fs::read_to_string(out).unwrap()
    };
    let svg = report("flamechart", &dir.join("chart.svg"));
    let chrome: Value = serde_json::from_str(&report("chrome", &dir.join("chart.json"))).unwrap();
    assert_eq!(svg.matches("<script").count(), 1, "one script");
    for outside in ["href=", " src=", "url(", "import(", "fetch("] {
        assert!(
            !svg.contains(outside),
            "the chart must not refer to anything: {outside}"
        );
    }
    let frames = frames(&svg);
    assert_eq!(
        (
            frames.iter().map(|f| f.lane).max(),
            svg.matches("<rect x=\"0\" y=\"").count()
        ),
        (Some(3), 3),
        "four threads in two bands (and the background)"
    );
    // The second run's frames: mount_disk, the wait in it blamed on its worker, and around it.
    let mount = find(&frames, "mount_disk", 1);
    let blamed = find(&frames, "wait:disk (blamed on diskworker)", 1);
    // warm_cache copied above the blamed wait, and the worker's own, in another band.
    let cache = |same_lane: bool| {
        (0..frames.len())
            .find(|&i| {
                let f = &frames[i];
                let during = f.xu >= frames[mount].xu && f.xu < frames[mount].xu + frames[mount].wu;
                f.name == "warm_cache" && (f.lane == frames[mount].lane) == same_lane && during
            })
            .expect("warm_cache during mount_disk")
    };
    let (blamed_copy, worker_cache) = (cache(true), cache(false));
    let steps = json!([
        ["frame", "mount_disk", 1],
        ["frame", "wait:disk (blamed on diskworker)", 1],
        ["key", "Escape", false],
        ["frame", "mount_disk", 1],
        ["background"],
        ["frame", "delay", 0],
        ["control", ".bp-reset"],
        ["prompt", "^(delay|warm_cache)$"],
        ["control", ".bp-search"],
        ["frame", "mount_disk", 1],
        ["key", "Escape", false],
        ["prompt", "wait:disk (blamed"],
        ["key", "f", true],
        ["control", ".bp-clear"],
        ["key", "/", false],
        ["prompt", ""],
        ["key", "/", false],
        ["frame", "main", 1],
        ["key", "Escape", false],
    ]);
    let states = drive(&mut chromium, &dir, &svg, steps);
    assert_eq!(
        states[0]["search"], true,
        "Search shown once the script runs"
    );
    assert_as_drawn(&states[0], &frames, "before any step");
    check_zooms(
        &states,
        &svg,
        &frames,
        [mount, blamed, blamed_copy, worker_cache],
    );
    // Resets: Escape, a click on the background, Reset Zoom.
    for (step, how) in [(3, "Escape"), (5, "the background"), (7, "Reset Zoom")] {
        assert_as_drawn(&states[step], &frames, how);
    }
    assert_zoomed(&states[6], &frames, find(&frames, "delay", 0));
    // A regular expression, kept through a zoom; Escape resets both. A plain text that is not a
    // regular expression, by Ctrl-F; Clear search; "/"; "/" answered with nothing clears.
    let regex = |n: &str| n == "delay" || n == "warm_cache";
    assert_searched(&states[9], &frames, regex, matched_share(&chrome, regex));
    assert_zoomed(&states[10], &frames, mount);
    assert_searched(&states[10], &frames, regex, matched_share(&chrome, regex));
    assert_as_drawn(&states[11], &frames, "Escape after a search");
    let plain = |n: &str| n.contains("wait:disk (blamed");
    assert_searched(&states[13], &frames, plain, matched_share(&chrome, plain));
    assert_as_drawn(&states[14], &frames, "Clear search");
    assert_searched(&states[15], &frames, plain, matched_share(&chrome, plain));
    assert_as_drawn(&states[17], &frames, "an empty search");
    // The second run's main: the first run's worker shared the band of the second's, up to
    // where it started (well inside main), but had ended before main began.
    let main = find(&frames, "main", 1);
    assert_zoomed(&states[18], &frames, main);
    assert_labels(
        &states[18],
        &svg,
        [frames[main].lane, frames[worker_cache].lane],
    );
    assert_as_drawn(&states[19], &frames, "Escape");
    if let Some(keep) = std::env::var_os("BOOTPROF_SAVE_FLAMECHART_ZOOMED") {
        screenshot(&dir, &svg, Path::new(&keep));
    }
}

/// States 1 and 2: zoomed into the second run's mount_disk, then into the blamed wait in it.
fn check_zooms(
    states: &[Value],
    svg: &str,
    frames: &[Frame],
    [mount, blamed, copy, worker]: [usize; 4],
) {
    assert_zoomed(&states[1], frames, mount);
    assert_zoomed(&states[2], frames, blamed);
    // The checks that matter most, by name.
    let s = |step: usize, i: usize| &states[step]["frames"][i];
    let factor = CHART / frames[mount].wu as f64 * 1000.0;
    for i in [blamed, copy, worker] {
        let want = frames[i].wu as f64 / 1000.0 * factor;
        assert!(
            (num(s(1, i), 3) - want).abs() < 1.0,
            "{:?} scaled by {factor}",
            frames[i]
        );
    }
    assert_eq!((num(s(1, mount), 2), num(s(1, mount), 3)), (X0, CHART));
    let main = (0..frames.len())
        .find(|&i| frames[i].name == "main" && frames[i].lane == frames[mount].lane)
        .unwrap();
    assert_eq!((num(s(1, main), 2), num(s(1, main), 3)), (X0, CHART));
    assert_eq!(field(s(1, main), 1), Some("0.5"), "main faded");
    for (name, n) in [
        ("delay", 1),
        ("parse_config", 1),
        ("mount_disk", 0),
        ("main", 0),
    ] {
        let i = find(frames, name, n);
        assert_eq!(field(s(1, i), 0), Some("none"), "{name} {n} hidden");
    }
    // The labels of the second run's threads, which ran in the window; none for the first's.
    let second = [frames[mount].lane, frames[worker].lane];
    assert_labels(&states[1], svg, second);
    // The zoomed time axis: ascending ticks, in ms, inside mount_disk's time range.
    let span: f64 = attr(&svg[svg.find("<svg").unwrap()..], "data-ns")
        .parse()
        .unwrap();
    let ms = |u: i64| (u as f64 / 1000.0 - X0) * span / CHART / 1e6;
    let (from, to) = (
        ms(frames[mount].xu),
        ms(frames[mount].xu + frames[mount].wu),
    );
    let ticks: Vec<f64> = (states[1]["ticks"].as_array().unwrap().iter())
        .map(|t| {
            let t = t.as_str().unwrap();
            t.strip_suffix(" ms")
                .unwrap_or_else(|| panic!("{t}"))
                .parse()
                .unwrap()
        })
        .collect();
    assert!(
        ticks.len() >= 2
            && ticks.windows(2).all(|w| w[0] < w[1])
            && ticks.iter().all(|&t| t >= from - 0.001 && t <= to + 0.001),
        "{ticks:?} in {from}..{to} ms"
    );
}

/// Only the threads `ran` have their labels, uncut (the chart is wide enough for them).
fn assert_labels(state: &Value, svg: &str, ran: [usize; 2]) {
    let labels = (svg.split("<g class=\"lane\" data-label=\"").skip(1))
        .map(|l| unescape(&l[..l.find('"').unwrap()]));
    for (lane, label) in labels.enumerate() {
        let want = if ran.contains(&lane) { &label } else { "" };
        let got = state["lanes"][lane].as_str().unwrap_or("");
        assert_eq!(got, want, "the label of lane {lane}");
    }
}

/// Keeps a screenshot of the chart zoomed into the second run's mount_disk, with warm_cache
/// searched for, at `keep`.
fn screenshot(dir: &TempDir, svg: &str, keep: &Path) {
    let page = dir.join("page.html");
    let height = attr(&svg[svg.find("<svg").unwrap()..], "height");
    std::fs::write(
        &page,
        page_html(
            svg,
            &json!([
                ["frame", "mount_disk", 1],
                ["prompt", "warm_cache"],
                ["key", "/", false]
            ]),
        ),
    )
    .unwrap();
    let mut chromium = crate::util::chromium(dir).unwrap();
    run(chromium
        .arg(format!("--screenshot={}", keep.display()))
        .arg(format!("--window-size=1200,{height}"))
        .arg(format!("file://{}", page.display())))
    .ok();
    eprintln!("saved {}", keep.display());
}
