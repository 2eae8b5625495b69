//! bootprof's reports: the reading side of the probe lifecycle. [`list`] reads a linked
//! binary's site table back and checks each site's NOP; [`run`] starts a program with the
//! runtime's settings so that it records a trace; [`attach`] does the same for a program that
//! runs already (through a [`channel`] to the runtime inside it), and [`live`] prints a
//! session's records as they arrive; the rest turns a trace into reports.
//!
//! [`trace`] reads and checks the file -> [`model`] resolves names, threads and times ->
//! [`holds`] finds the waits to blame on other threads' holds -> [`timeline`] walks the records
//! once, rebuilding each thread's stack (with the blamed holders' stacks spliced in) and feeding
//! the frames to a format: [`text`] (ftrace-like lines, record by record), [`chrome`] (Chrome
//! Trace Event JSON), [`perfetto`] (a Perfetto protobuf trace), [`folded`] (folded stacks for
//! flame graphs), [`flamechart`] (an SVG flame chart), [`points`] (a profile-point table),
//! [`summary`] (the top functions, events, waits), [`latency`] (the intervals `bootprof run
//! --latency` measured). [`counts`] needs no records: it prints the hit counts a session's
//! processes wrote when they counted instead of recording (`bootprof run --count`).
//!
//! The records themselves are not held: [`records`] reads a trace file's from the file, and
//! merges a session's lanes by time into a temporary file when they are many. Every format
//! writes as it goes; the ones that aggregate keep one entry per distinct stack or name, and the
//! flame chart keeps only the frames wide enough to draw, so memory does not grow with the
//! trace (about 60 MB for 37.5 million records).
#![deny(missing_docs)]
// Errors are built once per failed report; their size does not matter, their context does.
#![allow(clippy::result_large_err)]

pub mod attach;
pub mod channel;
pub mod chrome;
pub mod counts;
pub mod error;
pub mod filter;
pub mod flamechart;
pub mod folded;
pub mod grow;
pub mod holds;
pub mod input;
pub mod intervals;
pub mod latency;
pub mod list;
pub mod live;
pub mod missing;
pub mod model;
pub mod perfetto;
pub mod points;
pub mod process;
pub mod records;
pub mod run;
pub mod session;
pub mod signals;
pub mod srcline;
pub mod summary;
pub mod text;
pub mod timeline;
pub mod trace;
pub mod unmatched;

pub use error::{Error, Location, Result};
pub use input::read_trace;
pub use trace::{parse_trace, read_trace_file, Trace, TraceSite, Truncation};

use std::io::Write;
use std::path::Path;

/// The output formats of `bootprof report`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One line per record, laid out like ftrace's `trace` file.
    Text,
    /// Chrome Trace Event JSON (chrome://tracing, Perfetto, speedscope).
    Chrome,
    /// Folded stacks, `a;b;c NANOSECONDS`, for flame-graph tools.
    Folded,
    /// An SVG flame chart: time from left to right, one band per thread.
    Flamechart,
    /// A profile-point table: count, total, average, min and max per region.
    Points,
    /// The top functions by inclusive and self time, the events, the waits.
    Summary,
    /// Intervals measured by `bootprof run --latency`: the longest, percentiles, a histogram
    /// and the windows kept.
    Latency,
    /// Hits per site, summed over the processes and per process, of a session recorded with
    /// `bootprof run --count`.
    Counts,
    /// A Perfetto trace (protobuf) for ui.perfetto.dev and trace_processor.
    Perfetto,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 9] = [
        Format::Text,
        Format::Chrome,
        Format::Folded,
        Format::Flamechart,
        Format::Points,
        Format::Summary,
        Format::Latency,
        Format::Counts,
        Format::Perfetto,
    ];
}

/// Options of the formats; [`Default`] gives what `bootprof report` uses.
#[derive(Clone, Debug)]
pub struct Options {
    /// How many rows `summary` shows in each table.
    pub top: usize,
    /// Width of the flame chart in pixels.
    pub width: u32,
    /// Flame chart: time zero is the first record, not the start of recording (whatever ran
    /// between the two, the runtime's own set-up first of all, is left out of the picture).
    pub from_first_record: bool,
    /// Text format: ftrace's trace options.
    pub text: text::TextOptions,
    /// Show C++ and Rust functions by their demangled names (`--no-demangle` turns it off).
    pub demangle: bool,
    /// Text, summary and points: show the source file:line of each function, probe and frame
    /// (see [`srcline`]).
    pub srcline: bool,
    /// Leave out the calls deeper or shorter than this (`--depth`, `--min-time`; see
    /// [`filter`]).
    pub filter: filter::Filter,
}

impl Format {
    /// Whether the format shows source lines (`--srcline`).
    pub fn shows_srcline(self) -> bool {
        matches!(self, Format::Text | Format::Summary | Format::Points)
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            top: 20,
            width: 1200,
            from_first_record: false,
            text: text::TextOptions::default(),
            demangle: true,
            srcline: false,
            filter: filter::Filter::default(),
        }
    }
}

/// Writes `trace` in `format` to `out` (with `options.srcline`, the source lines read, their
/// notes left out: see [`write_report_with`]).
pub fn write_report(
    trace: &Trace,
    format: Format,
    options: &Options,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let sources = options.srcline.then(|| srcline::SourceLines::of(trace));
    write_report_with(trace, format, options, sources, out)
}

/// Writes `trace` in `format` to `out`, showing `sources` if given (and the format shows them).
pub fn write_report_with(
    trace: &Trace,
    format: Format,
    options: &Options,
    sources: Option<srcline::SourceLines>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    write_report_noting(trace, format, options, sources, out).map(drop)
}

/// [`write_report_with`], returning what the report says of how its frames were made
/// ([`model::Model::caveats`]), for the formats that have no room to say it.
pub fn write_report_noting(
    trace: &Trace,
    format: Format,
    options: &Options,
    sources: Option<srcline::SourceLines>,
    out: &mut dyn Write,
) -> std::io::Result<Vec<String>> {
    if format == Format::Counts {
        // Counts, not records: nothing to model.
        return counts::write(trace, out).map(|()| Vec::new());
    }
    let mut model = model::Model::new(trace);
    if let Some(sources) = sources.filter(|_| format.shows_srcline()) {
        model.set_sources(sources);
    }
    model.filter(options.filter);
    holds::blame(&mut model);
    let written = match format {
        Format::Text => text::write_with(&model, &options.text, out),
        Format::Chrome => chrome::write(&model, out),
        Format::Folded => folded::write(&model, out),
        Format::Flamechart => flamechart::write(&model, options, out),
        Format::Points => points::write(&model, out),
        Format::Summary => summary::write(&model, options, out),
        Format::Latency => latency::write(&model, out),
        Format::Perfetto => perfetto::write(&model, out),
        Format::Counts => counts::write(trace, out),
    };
    written.map(|()| model.caveats())
}

/// `bootprof report`: reads `input`, writes `format` to `output` (atomically: a temporary file
/// in the same directory, renamed over it when complete) or to standard output.
pub fn report(
    input: &Path,
    format: Format,
    output: Option<&Path>,
    options: &Options,
) -> Result<()> {
    if options.srcline && !format.shows_srcline() {
        return Err(Error::Usage(
            "--srcline applies to --format text, summary and points only".into(),
        ));
    }
    if format == Format::Perfetto && output.is_none() && {
        use std::io::IsTerminal;
        std::io::stdout().is_terminal()
    } {
        return Err(Error::Usage(
            "--format perfetto writes a binary file: give -o FILE, or redirect standard output"
                .into(),
        ));
    }
    let mut trace = read_trace(input)?;
    if options.demangle {
        trace.demangle_names();
    }
    if format == Format::Counts && !counts::counted(&trace) {
        return Err(Error::Usage(format!(
            "{}: no hit counts: it was recorded, not counted (`bootprof run --count` counts)",
            input.display()
        )));
    }
    if let Some(losses) = trace.losses_only() {
        eprintln!(
            "bootprof: warning: {}: {losses}; reporting what it holds",
            input.display()
        );
    }
    let sources = options.srcline.then(|| srcline::SourceLines::of(&trace));
    for note in sources.iter().flat_map(|s| &s.notes) {
        eprintln!("bootprof: note: --srcline: {note}");
    }
    // Called once, by one of the two arms below. Records that could not be read back as they
    // were checked make the report an error (its file is then not written).
    let write = |out: &mut dyn Write| {
        let caveats = write_report_noting(&trace, format, options, sources, out)?;
        if format == Format::Folded {
            // A folded line has no room for them.
            for caveat in caveats {
                eprintln!("bootprof: note: {}: {caveat}", input.display());
            }
        }
        match trace.records.failure() {
            Some(what) => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, what)),
            None => Ok(()),
        }
    };
    let unreadable = |e: &std::io::Error| {
        (e.kind() == std::io::ErrorKind::InvalidData && trace.records.failure().is_some()).then(
            || Error::Malformed {
                at: Location::file(input.display().to_string()),
                format: "trace",
                what: format!("{e}; no report was made of it"),
            },
        )
    };
    match output {
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
            let done = write(&mut out).and_then(|()| out.flush());
            match done {
                // `bootprof report t | head` is not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                Err(e) => Err(unreadable(&e).unwrap_or_else(|| Error::io("<stdout>", e))),
                Ok(()) => Ok(()),
            }
        }
        Some(path) if bootprof_format::file::written_in_place(path) => {
            // A device or a pipe (`-o /dev/null`, `-o /dev/stdout`): written into as it is.
            let written = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|file| {
                    let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
                    write(&mut out)?;
                    out.flush()
                });
            written.map_err(|e| unreadable(&e).unwrap_or_else(|| Error::io(path, e)))
        }
        Some(path) => {
            // A temporary file in the same directory, renamed over `path` when complete: a
            // reader never sees half a report, and a failed report leaves the old one. Created
            // exclusively (never through a symlink), readable by its user only.
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            if path.file_name().is_none() {
                return Err(Error::Usage(format!("{}: not a file name", path.display())));
            }
            let written = (|| {
                use std::os::unix::fs::OpenOptionsExt;
                // Created by us, not by tempfile, so that an error is the system's own.
                let tmp = tempfile::Builder::new()
                    .prefix(".bootprof-report.")
                    .make_in(dir, |tmp| {
                        std::fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .mode(0o600)
                            .open(tmp)
                    })?;
                let mut out = std::io::BufWriter::with_capacity(1 << 16, tmp);
                write(&mut out)?;
                let tmp = out.into_inner().map_err(|e| e.into_error())?;
                tmp.as_file().sync_all()?;
                tmp.persist(path).map_err(|e| e.error)?;
                Ok(())
            })();
            written
                .map_err(|e: std::io::Error| unreadable(&e).unwrap_or_else(|| Error::io(path, e)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::build::TraceBuilder;
    use bootprof_format::trace::RecordKind as K;
    use bootprof_format::Kind;

    /// A stack recorded at a hit (FRAME records after it, innermost first) is shown under it by
    /// the text report, as its own line by the folded stacks and as `args.stack` in Chrome JSON;
    /// a FRAME record that follows no hit of its thread, time and site belongs to none.
    #[test]
    fn recorded_stacks_in_the_reports() {
        let mut b = TraceBuilder::new(1, 1_000_000_000, 0);
        let main = b.site(Kind::Fentry, "", "__fentry__", "main", 0x1000, 0);
        let f = b.site(Kind::Fentry, "", "__fentry__", "f", 0x1100, 0);
        let hit = b.site(Kind::Probe, "app", "hit", "f", 0x1120, 0x20);
        b.thread(1, Some("t"));
        b.record(1000, 1, K::Enter, main, 0);
        b.record(2000, 1, K::Enter, f, 0x1045);
        b.record(3000, 1, K::Event, hit, 7);
        for address in [0x1120, 0x1045, 0x7f00_0000_1234] {
            b.record(3000, 1, K::Frame, hit, address);
        }
        b.record(4000, 1, K::Frame, hit, 0x1120);
        b.record(5000, 1, K::Event, hit, 8);
        let trace = parse_trace(&b.bytes(), "t").unwrap();
        let report = |format| {
            let mut out = Vec::new();
            write_report(&trace, format, &Options::default(), &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let text = report(Format::Text);
        let body: Vec<&str> = text.lines().skip_while(|l| l.starts_with('#')).collect();
        assert_eq!(
            body,
            [
                "               t-1       [000]      0.000001: main",
                "               t-1       [000]      0.000002: f <-main",
                "               t-1       [000]      0.000003: EVENT app:hit arg=0x7",
                "               t-1       [000]      0.000003: <stack trace>",
                " => f+0x20",
                " => main+0x45",
                " => 0x7f0000001234",
                "               t-1       [000]      0.000005: EVENT app:hit arg=0x8",
            ],
            "{text}"
        );
        assert_eq!(
            report(Format::Folded),
            // Recorded without --graph: main and f have entries only; the recorded stack's
            // frames are unwound, not inferred.
            "t;main (inferred) 1000\nt;main (inferred);f (inferred) 3000\nt;main;f;app:hit 1\n"
        );
        let chrome = report(Format::Chrome);
        assert!(
            chrome.contains(
                "{\"name\":\"app:hit\",\"cat\":\"stack\",\"ph\":\"i\",\"pid\":1,\"tid\":1,\
                 \"ts\":3.000,\"s\":\"t\",\"args\":{\"stack\":[\"f+0x20\",\"main+0x45\",\
                 \"0x7f0000001234\"]}}"
            ),
            "{chrome}"
        );
        assert_eq!(chrome.matches("\"cat\":\"stack\"").count(), 1);
        // The flame chart: a column from main (the C library's frame below it left out) to the
        // hit on top.
        let svg = report(Format::Flamechart);
        let column: Vec<&str> = (svg.split("<g class=\"f h\"><title>").skip(1))
            .filter_map(|l| l.split(" (recorded stack of a hit at 0.003 ms)").next())
            .collect();
        assert_eq!(column, ["main", "f", "app:hit"], "{svg}");
        // Every format writes it (the Perfetto trace is binary, not text).
        for format in Format::ALL {
            let mut out = Vec::new();
            write_report(&trace, format, &Options::default(), &mut out).unwrap();
        }
    }

    /// A report-time filter leaves out the calls deeper than --depth and those shorter than
    /// --min-time, even inside a kept call, and every format says so; the frames of a function
    /// with entries only are marked, counted and not timed.
    #[test]
    fn filters_and_entries_only_in_the_reports() {
        let mut b = TraceBuilder::new(1, 1_000_000_000, 0);
        let mut sites = Vec::new();
        for (i, f) in ["main", "slow", "quick"].into_iter().enumerate() {
            let at = 0x1000 * (i as u64 + 1);
            let enter = b.site(Kind::CygEnter, "", "__cyg_profile_func_enter", f, at, 4);
            let exit = b.site(Kind::CygExit, "", "__cyg_profile_func_exit", f, at + 8, 12);
            sites.push((enter, exit));
        }
        let hook = b.site(Kind::Fentry, "", "__fentry__", "hooked", 0x9000, 0);
        b.thread(1, Some("t"));
        let [(main, main_x), (slow, slow_x), (quick, quick_x)] = sites[..] else {
            unreachable!()
        };
        for (tsc, kind, site) in [
            (0, K::Enter, main),
            (1_000, K::Enter, quick),
            (2_000, K::Exit, quick_x),
            (3_000, K::Enter, slow),
            (4_000, K::Enter, quick),
            (4_500, K::Exit, quick_x),
            (9_000, K::Exit, slow_x),
            (10_000, K::Exit, main_x),
        ] {
            b.record(tsc, 1, kind, site, 0);
        }
        b.record(11_000, 1, K::Enter, hook, 0x1010);
        b.record(12_000, 1, K::Enter, hook, 0x9010);
        let trace = parse_trace(&b.bytes(), "t").unwrap();
        let report = |format, depth, min_ns| {
            let options = Options {
                filter: filter::Filter { depth, min_ns },
                ..Options::default()
            };
            let mut out = Vec::new();
            write_report(&trace, format, &options, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            report(Format::Folded, None, Some(1_500)),
            "t;hooked (inferred) 1000\nt;main 4000\nt;main;slow 6000\n"
        );
        assert_eq!(
            report(Format::Folded, Some(1), None),
            "t;hooked (inferred) 1000\nt;main 10000\n"
        );
        let text = report(Format::Text, Some(2), Some(1_500));
        let entries = "# note: 1 function has entries only (-pg/-mfentry hooks recorded without \
                       `bootprof run --graph`): when it returned is inferred from later calls, \
                       so its durations and stacks are estimates, marked (inferred)\n";
        let filtered =
            "# note: filtered at report time (--depth 2 --min-time 1500ns): 2 calls left out\n";
        assert!(text.contains(&format!("{entries}{filtered}")), "{text}");
        let body: Vec<&str> = (text.lines())
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split_once(": ").unwrap().1)
            .collect();
        assert_eq!(
            body,
            [
                "main",
                "slow",
                "EXIT slow",
                "EXIT main",
                "hooked <-main",
                "hooked <-hooked"
            ]
        );
        let chrome = report(Format::Chrome, Some(2), Some(1_500));
        assert!(
            chrome.contains("\"bootprof_notes\":\"1 function has entries only")
                && chrome.contains("; filtered at report time (--depth 2 --min-time 1500ns)")
                && chrome.contains("{\"name\":\"hooked (inferred)\",\"cat\":\"function\""),
            "{chrome}"
        );
        let points = report(Format::Points, None, None);
        let hooked = points.lines().find(|l| l.starts_with("hooked ")).unwrap();
        assert_eq!(
            hooked.split_whitespace().collect::<Vec<_>>(),
            ["hooked", "2", "-", "-", "-", "-"]
        );
        let summary = report(Format::Summary, None, None);
        assert!(
            summary.contains(
                "top 20 functions with entries only, by calls (no EXIT recorded: their times \
                 are not measured; `bootprof run --graph` measures them)\n       calls  name\n\
                 \u{20}          2  hooked\n"
            ),
            "{summary}"
        );
        let svg = report(Format::Flamechart, None, None);
        assert!(
            svg.contains(">hooked (inferred) (0.001 ms, from 0.011 ms, still open at the end of its thread)<")
                && svg.contains("Frames marked (inferred): functions recorded without --graph"),
            "{svg}"
        );
    }

    /// Times that do not fit in u64 nanoseconds (a TSC rate of 1 Hz, TSCs of 2^62): two threads
    /// of one name each run f inside f for the whole trace. The folded stacks, the points and
    /// the summary add up those times across frames and threads: the sums saturate, not wrap.
    #[test]
    fn sums_of_times_saturate() {
        let mut b = TraceBuilder::new(1, 1, 0);
        let enter = b.site(Kind::Fentry, "", "__fentry__", "f", 0x1000, 0);
        let exit = b.site(Kind::CygExit, "", "__cyg_profile_func_exit", "f", 0x1008, 8);
        b.thread(1, Some("w"));
        b.thread(2, Some("w"));
        for tid in [1, 2] {
            b.record(0, tid, K::Enter, enter, 0);
            b.record(0, tid, K::Enter, enter, 0);
        }
        for tid in [1, 2] {
            b.record(1 << 62, tid, K::Exit, exit, 0);
            b.record(1 << 62, tid, K::Exit, exit, 0);
        }
        let trace = parse_trace(&b.bytes(), "t").unwrap();
        let report = |format| {
            let mut out = Vec::new();
            write_report(&trace, format, &Options::default(), &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let max = u64::MAX;
        assert_eq!(report(Format::Folded), format!("w;f;f {max}\n"));
        let points = report(Format::Points);
        let f = points.lines().find(|l| l.starts_with("f ")).unwrap();
        let total = format!("{}.{:06}", max / 1_000_000, max % 1_000_000);
        assert!(f.contains(&total), "{points}");
        let summary = report(Format::Summary);
        let ms = crate::model::millis(max);
        assert!(summary.contains(&format!("  {ms}  {ms}  ")), "{summary}");
    }
}
