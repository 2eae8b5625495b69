//! `--format flamechart`: takes a [`Model`]; hands on one self-contained SVG flame *chart*:
//! unlike a flame graph, the x axis is time since the trace start, so frames stay in the order
//! they ran. One band per thread (in the order the threads first appear), outermost frames at
//! the bottom of the band, callees stacked above; in a session of several processes, threads
//! that did not run at the same time share a band (each labelled where it starts), and a line
//! marks where each process ended, red for a crash. Every frame has a `<title>` tooltip with its
//! name, duration and start in milliseconds, and a label when it is wide enough for one. A time
//! axis with gridlines runs along the top.
//!
//! A frame of a function with entries only (`-pg`/`-mfentry` code recorded without `bootprof
//! run --graph`) is labelled `name (inferred)`, and the caption says why: when it returned was
//! inferred from later calls. A frame's tooltip says when its end is not an EXIT: `its return
//! inferred`, or `still open at the end of its thread`.
//!
//! Frames narrower than [`MIN_WIDTH`] pixels are not drawn (nor kept: their callees are
//! narrower still), so the SVG stays small whatever the length of the trace.
//!
//! A hit whose call stack was recorded (`bootprof run --stacktrace`) is drawn where it happened
//! as a column [`HIT_WIDTH`] pixels wide, outlined: its stack's functions from the bottom of the
//! band up, from the outermost one that is instrumented (`[unknown]` for an address between
//! them that no instrumented function holds), the hit itself on top, so an EVENT stands as a
//! leaf on its real callers (drawn over the thread's timed frames, which stay as the ENTER/EXIT
//! records built them). Of the hits of one thread within a pixel of each
//! other only the first is drawn, which bounds the columns by the chart's width. Colours: functions
//! in warm hues (by name, so a function keeps its colour), waits grey, blame frames purple, and
//! the blamed thread's frames copied under them in blue-green.
//!
//! The geometry is on the root element for tools that read the chart back: `data-x0` (left
//! edge of time zero), `data-chart-width` (pixels for the whole span) and `data-ns` (the span,
//! ns, from the trace start, or with `--from-first-record` from the first record, to the last
//! record; frames' start times count from the same zero). A frame's edges are times placed on
//! a grid of a thousandth of a pixel, so frames that start or end at the same time share the
//! edge exactly, however far the chart is zoomed.
//!
//! One inline script (`SCRIPT`, written once, after the frames) makes the chart explorable
//! as flamegraph.pl's SVGs are: a click on a frame zooms into its time range, "Reset Zoom",
//! Escape or a click on the background zooms out, "Search" (or Ctrl-F, `/`) highlights the
//! frames whose names match and says the share of the threads' time they cover. The script
//! finds what it needs in the document: each thread's frames in a `<g class="lane">` (its
//! label, where the label may go and where the thread's time ends as `data-` attributes), the controls (hidden until the script
//! shows them), the static axis in `<g class="bp-ticks">`. Without the script the picture is
//! the same, with no control shown.

use crate::model::{millis, Model, NameId};
use crate::timeline::{self, Closed, Frame, FrameKind, Sink, Stack};
use std::io::{self, Write};

/// Frames narrower than this many pixels are left out.
pub const MIN_WIDTH: f64 = 0.1;
/// Width of the column of a recorded stack, in pixels.
pub const HIT_WIDTH: f64 = 1.0;
const MARGIN: f64 = 10.0;
const ROW: f64 = 16.0;
const BAND_TOP: f64 = 72.0;
const LABEL: f64 = 20.0;
const GAP: f64 = 12.0;
const FONT: f64 = 11.0;
/// Width of one character of the 11px monospace font, near enough.
const CHAR: f64 = 6.7;
/// The fill of a frame whose name matches a search.
const MATCH: &str = "rgb(230,0,230)";
/// The script that zooms and searches: a function expression, called with the chart's constants.
const SCRIPT: &str = include_str!("flamechart.js");

#[derive(Clone, Copy)]
struct Span {
    depth: u32,
    start: u64,
    end: u64,
    name: NameId,
    kind: FrameKind,
    mirrored: bool,
    /// A frame of a recorded stack (drawn [`HIT_WIDTH`] wide at `start`).
    hit: bool,
    /// How it closed.
    how: Closed,
}

struct Collect {
    scale: f64,
    /// Time zero of the chart, ns after the start of recording.
    zero: u64,
    lanes: Vec<Vec<Span>>,
    /// Per lane, the time of the last recorded stack drawn.
    last_hit: Vec<Option<u64>>,
}

impl Sink for Collect {
    fn stack(&mut self, lane: usize, stack: &Stack, t: u64) -> io::Result<()> {
        let near = |last: u64| (t.saturating_sub(last)) as f64 * self.scale < HIT_WIDTH;
        if self.last_hit[lane].is_some_and(near) {
            return Ok(());
        }
        self.last_hit[lane] = Some(t);
        let at = t.saturating_sub(self.zero);
        for (depth, &name) in stack.path.iter().enumerate() {
            self.lanes[lane].push(Span {
                depth: depth as u32,
                start: at,
                end: at,
                name,
                kind: FrameKind::Function,
                mirrored: false,
                hit: true,
                how: Closed::Exit,
            });
        }
        Ok(())
    }

    fn close(
        &mut self,
        lane: usize,
        below: &[Frame],
        frame: &Frame,
        end: u64,
        how: Closed,
    ) -> io::Result<()> {
        if (end.saturating_sub(frame.start)) as f64 * self.scale >= MIN_WIDTH {
            self.lanes[lane].push(Span {
                depth: below.len() as u32,
                start: frame.start.saturating_sub(self.zero),
                end: end.saturating_sub(self.zero),
                name: frame.name,
                kind: frame.kind,
                mirrored: frame.mirrored,
                hit: false,
                how,
            });
        }
        Ok(())
    }
}

/// Writes the SVG.
pub fn write(m: &Model, options: &crate::Options, out: &mut dyn Write) -> io::Result<()> {
    let width = f64::from(options.width.max(300));
    let chart = width - 2.0 * MARGIN;
    let zero = match m.trace.records.first() {
        Some(r) if options.from_first_record => m.ns(r.tsc),
        _ => 0,
    };
    let total = m.end_ns.saturating_sub(zero).max(1);
    let scale = chart / total as f64;
    let mut collect = Collect {
        scale,
        zero,
        lanes: vec![Vec::new(); m.lanes.len()],
        last_hit: vec![None; m.lanes.len()],
    };
    timeline::walk(m, &mut collect)?;
    let lane_rows: Vec<u32> = (collect.lanes.iter())
        .map(|spans| spans.iter().map(|s| s.depth + 1).max().unwrap_or(1))
        .collect();
    let bands = bands(m);
    let rows: Vec<u32> = (bands.iter())
        .map(|b| b.iter().map(|&l| lane_rows[l]).max().unwrap_or(1))
        .collect();
    let height = BAND_TOP
        + rows
            .iter()
            .map(|&r| LABEL + f64::from(r) * ROW + GAP)
            .sum::<f64>()
        + MARGIN;

    writeln!(
        out,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" \
         xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"monospace\" font-size=\"{FONT}\" \
         data-x0=\"{MARGIN}\" data-chart-width=\"{chart}\" data-ns=\"{total}\">"
    )?;
    writeln!(
        out,
        "<style>.f rect{{stroke:white;stroke-width:0.5}} .f:hover rect{{stroke:black}} \
         .h rect{{stroke:#333}} text{{pointer-events:none}} .bp-live .f{{cursor:pointer}} \
         .c{{pointer-events:auto;cursor:pointer;fill:#1a5fb4}} .c:hover{{text-decoration:underline}}</style>"
    )?;
    writeln!(
        out,
        "<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"#fdfdf8\"/>"
    )?;
    titles(out, m, width, zero, total)?;
    controls(out, width)?;
    axis(out, total, chart, height)?;

    let x = |ns: u64| MARGIN + ns.saturating_sub(zero).min(total) as f64 * scale;
    let mut top = BAND_TOP;
    let mut marked = std::collections::HashSet::new();
    for (b, lanes) in bands.iter().enumerate() {
        let band = LABEL + f64::from(rows[b]) * ROW;
        let fill = if b % 2 == 0 { "#f2f2ee" } else { "#e9e9e4" };
        writeln!(
            out,
            "<rect x=\"0\" y=\"{top}\" width=\"{width}\" height=\"{band}\" fill=\"{fill}\"/>"
        )?;
        let bottom = top + band;
        for (i, &l) in lanes.iter().enumerate() {
            let lane = &m.lanes[l];
            // A band of its own starts at the left; sharing one, at the thread's first record,
            // and its label is cut to end where the next thread of the band starts.
            let (left, right) = if lanes.len() == 1 {
                (MARGIN, width)
            } else {
                let next = lanes.get(i + 1).map_or(width, |&n| x(m.lanes[n].first_ns));
                (x(lane.first_ns), next)
            };
            // Where the thread's time ends, for the script: a band of its own is always there.
            let end = if lanes.len() == 1 {
                width
            } else {
                x(m.lane_end_ns(l))
            };
            let label = lane_label(m, l);
            let label_y = top + 14.0;
            write!(out, "<g class=\"lane\" data-label=\"")?;
            escape(out, &label)?;
            writeln!(
                out,
                "\" data-left=\"{left:.3}\" data-right=\"{right:.3}\" data-end=\"{end:.3}\" \
                 data-y=\"{label_y}\">"
            )?;
            let bold = "class=\"lbl\" font-weight=\"bold\"";
            cut_text(out, &label, left, label_y, right - left, bold)?;
            for s in &collect.lanes[l] {
                frame(out, m, s, bottom, scale)?;
            }
            // Where the process ended, on the band of its first thread.
            if let Some(p) = lane.process.filter(|&p| marked.insert(p)) {
                process_end(out, m, p, (top, bottom), x)?;
            }
            writeln!(out, "</g>")?;
        }
        top = bottom + GAP;
    }
    script(out, height)?;
    writeln!(out, "</svg>")
}

/// The controls the script shows (hidden until it runs, so that the chart looks the same
/// without it): "Reset Zoom" top left once zoomed, "Search" top right, and while a search is
/// on, the share it matched below "Reset Zoom" and "Clear search" below "Search".
fn controls(out: &mut dyn Write, width: f64) -> io::Result<()> {
    let right = width - MARGIN;
    writeln!(
        out,
        "<text class=\"c bp-reset\" x=\"{MARGIN}\" y=\"22\" visibility=\"hidden\">Reset Zoom\
         <title>Back to the whole chart (Escape, or a click on the background)</title></text>\n\
         <text class=\"c bp-search\" x=\"{right}\" y=\"22\" text-anchor=\"end\" \
         visibility=\"hidden\">Search<title>Highlight the frames whose names match a regular \
         expression, or a plain text if it is not one (Ctrl-F or /)</title></text>\n\
         <text class=\"bp-matched\" x=\"{MARGIN}\" y=\"40\" visibility=\"hidden\"></text>\n\
         <text class=\"c bp-clear\" x=\"{right}\" y=\"40\" text-anchor=\"end\" \
         visibility=\"hidden\">Clear search<title>Back to the frames' own colours \
         (Escape)</title></text>"
    )
}

/// The script, once, with the constants it shares with the writer.
fn script(out: &mut dyn Write, height: f64) -> io::Result<()> {
    writeln!(out, "<script type=\"text/ecmascript\"><![CDATA[")?;
    out.write_all(SCRIPT.trim_end().as_bytes())?;
    writeln!(
        out,
        "({{char: {CHAR}, row: {ROW}, hit: {HIT_WIDTH}, match: \"{MATCH}\", axisY: {}, \
         gridBottom: {}}});\n]]></script>",
        BAND_TOP - 8.0,
        height - MARGIN
    )
}

/// The title and the line below it: whose trace, its span, its threads, what it lacks.
fn titles(out: &mut dyn Write, m: &Model, width: f64, zero: u64, total: u64) -> io::Result<()> {
    write!(
        out,
        "<text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">",
        width / 2.0
    )?;
    let whose = m.whose();
    escape(out, &format!("bootprof flame chart: {whose}"))?;
    writeln!(out, "</text>")?;
    write!(
        out,
        "<text x=\"{}\" y=\"40\" text-anchor=\"middle\" fill=\"#555\">",
        width / 2.0
    )?;
    escape(
        out,
        &format!(
            "{}, {} threads; time runs left to right; hover a frame for its name and \
             duration{}",
            if zero > 0 {
                format!(
                    "{} ms from the first record ({} ms after recording began)",
                    millis(total),
                    millis(zero)
                )
            } else {
                format!("{} ms", millis(m.end_ns))
            },
            m.lanes.len(),
            m.trace
                .losses()
                .map_or(String::new(), |l| format!(". Not shown: {l}"))
                + &caption_notes(m)
        ),
    )?;
    writeln!(out, "</text>")?;
    Ok(())
}

/// What the caption adds of how the frames were made: that frames marked (inferred) are of
/// functions with entries only, that a report-time filter left calls out.
fn caption_notes(m: &Model) -> String {
    let mut notes = String::new();
    if m.entry_only_functions() > 0 {
        notes.push_str(
            ". Frames marked (inferred): functions recorded without --graph, their returns \
             inferred from later calls",
        );
    }
    if let Some(filter) = m.filter_note() {
        notes.push_str(". ");
        notes.push_str(&filter);
    }
    notes
}

/// The bands of the chart, each a list of lanes: one per thread; in a session of several
/// processes, threads whose spans (first record to their process's end) do not overlap share a
/// band, the first band with room taking each in turn, so a tree of hundreds of short processes
/// stays a few bands tall and the ones that ran at once are side by side.
fn bands(m: &Model) -> Vec<Vec<usize>> {
    if !m.many_processes() {
        return (0..m.lanes.len()).map(|l| vec![l]).collect();
    }
    let mut bands: Vec<(u64, Vec<usize>)> = Vec::new();
    for l in 0..m.lanes.len() {
        let (start, end) = (m.lanes[l].first_ns, m.lane_end_ns(l));
        match bands.iter_mut().find(|(free, _)| *free < start) {
            Some((free, lanes)) => {
                *free = end;
                lanes.push(l);
            }
            None => bands.push((end, vec![l])),
        }
    }
    bands.into_iter().map(|(_, lanes)| lanes).collect()
}

/// A thread's label: its name and tid, after its process (`exe-pid: `) in a session.
fn lane_label(m: &Model, l: usize) -> String {
    let lane = &m.lanes[l];
    let label = match &lane.name {
        Some(n) => format!("{n} (tid {})", lane.tid),
        None => format!("tid {}", lane.tid),
    };
    match lane.process_label {
        crate::model::NO_NAME => label,
        p => format!("{}: {label}", m.text(p)),
    }
}

/// A line across the band `(top, bottom)` where process `p` of a session ended (drawn for
/// every process of a session of several, else only for a crash): red when it crashed, grey
/// otherwise, with how it ended as its title. `x` places a time in nanoseconds.
fn process_end(
    out: &mut dyn Write,
    m: &Model,
    p: usize,
    (top, bottom): (f64, f64),
    x: impl Fn(u64) -> f64,
) -> io::Result<()> {
    let Some(p) = m.trace.processes.get(p) else {
        return Ok(());
    };
    let Some(t) = p
        .end_tsc
        .filter(|_| m.many_processes() || p.ending.crashed())
    else {
        return Ok(());
    };
    let x = x(m.ns(t));
    let (colour, what) = if p.ending.crashed() {
        ("#d00", "crashed")
    } else {
        ("#777", "ended")
    };
    write!(out, "<g class=\"pe\"><title>")?;
    escape(out, &format!("{} {what}: {}", p.label(), p.ending))?;
    writeln!(
        out,
        "</title><line x1=\"{x:.3}\" y1=\"{top}\" x2=\"{x:.3}\" y2=\"{bottom}\" \
         stroke=\"{colour}\" stroke-width=\"2\"/></g>"
    )
}

/// The time axis: a tick every 1, 2 or 5 powers of ten, labelled, with faint gridlines.
fn axis(out: &mut dyn Write, total: u64, chart: f64, height: f64) -> io::Result<()> {
    let mut step = 1u64;
    'find: loop {
        for d in [1, 2, 5] {
            if step.saturating_mul(d).saturating_mul(10) >= total {
                step = step.saturating_mul(d);
                break 'find;
            }
        }
        step = step.saturating_mul(10);
    }
    let (unit, div) = match step {
        s if s >= 1_000_000_000 => ("s", 1_000_000_000),
        s if s >= 1_000_000 => ("ms", 1_000_000),
        s if s >= 1_000 => ("µs", 1_000),
        _ => ("ns", 1),
    };
    let y = BAND_TOP - 8.0;
    // The ticks of the whole span, which the script hides while zoomed, drawing the window's
    // own in `bp-zoomaxis`.
    writeln!(
        out,
        "<line x1=\"{MARGIN}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"#888\"/>\n\
         <g class=\"bp-zoomaxis\"></g>\n<g class=\"bp-ticks\">",
        MARGIN + chart
    )?;
    let mut t = 0u64;
    while t <= total {
        let x = MARGIN + t as f64 * chart / total as f64;
        // Labels at the edges stay inside the picture.
        let anchor = if t == 0 {
            "start"
        } else if x > MARGIN + chart - 30.0 {
            "end"
        } else {
            "middle"
        };
        writeln!(
            out,
            "<line x1=\"{x:.2}\" y1=\"{}\" x2=\"{x:.2}\" y2=\"{}\" stroke=\"#ccc\" \
             stroke-width=\"0.5\"/><text x=\"{x:.2}\" y=\"{}\" text-anchor=\"{anchor}\" \
             fill=\"#333\">{} {unit}</text>",
            y - 3.0,
            height - MARGIN,
            y - 6.0,
            t / div
        )?;
        t = match t.checked_add(step) {
            Some(t) => t,
            None => break,
        };
    }
    writeln!(out, "</g>")
}

fn frame(out: &mut dyn Write, m: &Model, s: &Span, bottom: f64, scale: f64) -> io::Result<()> {
    // Both edges on the grid of a thousandth of a pixel, the width their difference: the same
    // time gives the same edge on every frame.
    let on_grid = |ns: u64| ((MARGIN + ns as f64 * scale) * 1000.0).round() / 1000.0;
    let x = on_grid(s.start);
    let w = on_grid(s.end) - x;
    let w = if s.hit { w.max(HIT_WIDTH) } else { w };
    let y = bottom - f64::from(s.depth + 1) * ROW;
    // A recorded stack's frames are unwound, not inferred.
    let name = if s.hit {
        m.text(s.name).into()
    } else {
        m.frame_label(s.name)
    };
    let name = &*name;
    let class = if s.hit { "f h" } else { "f" };
    write!(out, "<g class=\"{class}\"><title>")?;
    escape(out, name)?;
    if s.hit {
        write!(out, " (recorded stack of a hit at {} ms", millis(s.start))?;
    } else {
        write!(
            out,
            " ({} ms, from {} ms",
            millis(s.end - s.start),
            millis(s.start)
        )?;
    }
    if s.mirrored {
        out.write_all(b", copied from the thread blamed for this wait")?;
    }
    match (s.hit, s.how) {
        (false, Closed::Inferred) => out.write_all(b", its return inferred")?,
        (false, Closed::End) => out.write_all(b", still open at the end of its thread")?,
        _ => {}
    }
    write!(
        out,
        ")</title><rect x=\"{x:.3}\" y=\"{y}\" width=\"{w:.3}\" height=\"{}\" fill=\"{}\"/>",
        ROW - 1.0,
        colour(name, s.kind, s.mirrored)
    )?;
    cut_text(out, name, x + 2.0, y + ROW - 4.5, w - 4.0, "")?;
    out.write_all(b"</g>\n")
}

/// `text` at (`x`, `y`), cut with `..` to fit `w` pixels; nothing when fewer than 3 characters
/// fit. `attributes` go into the element as they are.
fn cut_text(
    out: &mut dyn Write,
    text: &str,
    x: f64,
    y: f64,
    w: f64,
    attributes: &str,
) -> io::Result<()> {
    let fits = (w / CHAR).floor();
    if fits < 3.0 {
        return Ok(());
    }
    let fits = fits as usize;
    write!(out, "<text x=\"{x:.3}\" y=\"{y}\" {attributes}>")?;
    if text.chars().count() <= fits {
        escape(out, text)?;
    } else {
        let cut: String = text.chars().take(fits - 2).collect();
        escape(out, &cut)?;
        out.write_all(b"..")?;
    }
    out.write_all(b"</text>")
}

fn colour(name: &str, kind: FrameKind, mirrored: bool) -> String {
    // FNV-1a: stable across runs and platforms.
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    let (a, b, c) = (h % 50, (h >> 8) % 130, (h >> 16) % 55);
    match (mirrored, kind) {
        (true, _) => format!("rgb({},{},{})", 70 + c, 170 + a, 190 + a),
        (false, FrameKind::Wait) => "rgb(190,190,190)".into(),
        (false, FrameKind::Blame) => "rgb(160,120,220)".into(),
        (false, FrameKind::Function) => format!("rgb({},{},{})", 205 + a, 100 + b, c),
    }
}

/// Writes `s` with XML's special characters escaped.
fn escape(out: &mut dyn Write, s: &str) -> io::Result<()> {
    let mut plain = 0;
    for (i, c) in s.char_indices() {
        let e = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '"' => "&quot;",
            c if (c as u32) < 0x20 => " ",
            _ => continue,
        };
        out.write_all(&s.as_bytes()[plain..i])?;
        out.write_all(e.as_bytes())?;
        plain = i + c.len_utf8();
    }
    out.write_all(&s.as_bytes()[plain..])
}
