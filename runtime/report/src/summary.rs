//! `--format summary`: takes a [`Model`]; hands on a one-screen overview: the trace's size and
//! span, the threads, the top functions (and annotated regions) by inclusive and by self time,
//! the events by count, and the longest waits with the thread blamed for each. A session adds a
//! line per process (parent, start, end, how it ended, records, its top function by self time,
//! what it lost); the tables are over all processes.
//!
//! Inclusive time counts a function once however deeply it recurses (only its outermost open
//! frame on a thread); self time is a frame's time minus the frames directly inside it,
//! waits included. Both include frames still open when the trace ends, and leave out the
//! copies of blamed threads' frames (those are the holder's own time, counted there).
//!
//! Functions with entries only ([`Model::entry_only`]: `-pg`/`-mfentry` code recorded without
//! `bootprof run --graph`) are not in those tables: when they returned is inferred, not
//! measured, so they get a table of their own with their calls alone (and a note says so).
//!
//! With `--srcline`, each function and event is followed by its `file:line` in brackets.

use crate::model::{millis, Model, NameId};
use crate::timeline::{self, Closed, Frame, FrameKind, Sink};
use bootprof_format::trace::{Record, RecordKind};
use std::collections::HashMap;
use std::io::{self, Write};

/// Which number of a [`Usage`] to sort by.
pub type UsageKey = fn(&Usage) -> u64;

/// Time spent in one function.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Frames of it that closed (or were open at the end).
    pub calls: u64,
    /// Inclusive time, ns.
    pub inclusive: u64,
    /// Self time, ns.
    pub self_time: u64,
}

/// Per function: its usage; per event name: its count.
pub struct Totals {
    /// Functions.
    pub functions: HashMap<NameId, Usage>,
    /// Functions with entries only ([`Model::entry_only`]): their calls; their times are
    /// inferred, so they are not added up.
    pub entries: HashMap<NameId, u64>,
    /// Events.
    pub events: HashMap<NameId, u64>,
    /// Per process of a session (by its index), its functions.
    pub processes: HashMap<usize, HashMap<NameId, Usage>>,
}

/// Adds up `m`'s functions and events.
pub fn totals(m: &Model) -> io::Result<Totals> {
    let mut sink = Tally {
        m,
        functions: HashMap::new(),
        entries: HashMap::new(),
        events: HashMap::new(),
        processes: HashMap::new(),
        lane_process: m.lanes.iter().map(|l| l.process).collect(),
    };
    timeline::walk(m, &mut sink)?;
    Ok(Totals {
        functions: sink.functions,
        entries: sink.entries,
        events: sink.events,
        processes: sink.processes,
    })
}

/// What [`totals`] adds up while walking.
struct Tally<'a, 'm> {
    m: &'a Model<'m>,
    functions: HashMap<NameId, Usage>,
    entries: HashMap<NameId, u64>,
    events: HashMap<NameId, u64>,
    processes: HashMap<usize, HashMap<NameId, Usage>>,
    lane_process: Vec<Option<usize>>,
}

impl Totals {
    /// The functions by `key`, largest first, then by name; at most `n`.
    pub fn top(&self, m: &Model, n: usize, key: UsageKey) -> Vec<(NameId, Usage)> {
        let mut v: Vec<(NameId, Usage)> = self.functions.iter().map(|(k, u)| (*k, *u)).collect();
        v.sort_by(|a, b| key(&b.1).cmp(&key(&a.1)).then(m.text(a.0).cmp(m.text(b.0))));
        v.truncate(n);
        v
    }
}

impl Sink for Tally<'_, '_> {
    fn close(
        &mut self,
        lane: usize,
        below: &[Frame],
        frame: &Frame,
        end: u64,
        _how: Closed,
    ) -> io::Result<()> {
        if frame.kind != FrameKind::Function || frame.mirrored {
            return Ok(());
        }
        if self.m.entry_only(frame.name) {
            *self.entries.entry(frame.name).or_default() += 1;
            return Ok(());
        }
        let total = end.saturating_sub(frame.start);
        let recursive = below
            .iter()
            .any(|f| f.name == frame.name && f.kind == FrameKind::Function && !f.mirrored);
        let add = |u: &mut Usage| {
            u.calls += 1;
            u.self_time = u
                .self_time
                .saturating_add(total.saturating_sub(frame.children));
            if !recursive {
                u.inclusive = u.inclusive.saturating_add(total);
            }
        };
        add(self.functions.entry(frame.name).or_default());
        if let Some(p) = self.lane_process[lane] {
            add(self
                .processes
                .entry(p)
                .or_default()
                .entry(frame.name)
                .or_default());
        }
        Ok(())
    }

    fn instant(
        &mut self,
        _lane: usize,
        _index: usize,
        r: &Record,
        name: NameId,
        _t: u64,
    ) -> io::Result<()> {
        if r.kind == RecordKind::Event {
            *self.events.entry(name).or_default() += 1;
        }
        Ok(())
    }
}

/// The processes of a session, one line each: pid, parent, start and end (ms), how it ended,
/// records, its function with the most self time, and what it lost.
fn processes(m: &Model, totals: &Totals, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nprocesses")?;
    writeln!(
        out,
        "  {:>8}  {:>8}  {:<24} {:>12} {:>12}  {:<28} {:>10}  top self time",
        "pid", "parent", "name", "start ms", "end ms", "ended", "records"
    )?;
    for (i, p) in m.trace.processes.iter().enumerate() {
        let name = p.name();
        let top = totals.processes.get(&i).and_then(|f| {
            f.iter()
                .max_by(|a, b| {
                    a.1.self_time
                        .cmp(&b.1.self_time)
                        .then(m.text(*b.0).cmp(m.text(*a.0)))
                })
                .map(|(n, u)| format!("{} ({} ms)", m.text(*n), millis(u.self_time)))
        });
        writeln!(
            out,
            "  {:>8}  {:>8}  {:<24} {:>12} {:>12}  {:<28} {:>10}  {}{}",
            p.pid,
            p.ppid,
            name,
            millis(m.ns(p.start_tsc)),
            p.end_tsc.map_or("-".to_string(), |t| millis(m.ns(t))),
            p.ending.to_string(),
            p.records,
            top.unwrap_or_else(|| "-".into()),
            p.notes().map(|l| format!("; {l}")).unwrap_or_default()
        )?;
    }
    Ok(())
}

/// What `--srcline` adds after a function's or an event's name: ` [file:line]` (several,
/// comma-separated, when sites of that name are in several places), when known.
fn source(m: &Model, name: NameId) -> String {
    m.name_source(name)
        .map(|line| format!(" [{line}]"))
        .unwrap_or_default()
}

/// The functions with entries only, by calls: their times are not measured, so they are not in
/// the tables of times (whose self times of their callers include them).
fn entries(
    m: &Model,
    totals: &Totals,
    options: &crate::Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    if totals.entries.is_empty() {
        return Ok(());
    }
    let mut entries: Vec<(NameId, u64)> = totals.entries.iter().map(|(k, v)| (*k, *v)).collect();
    entries.sort_by(|a, b| b.1.cmp(&a.1).then(m.text(a.0).cmp(m.text(b.0))));
    writeln!(
        out,
        "\ntop {} functions with entries only, by calls (no EXIT recorded: their times are not \
         measured; `bootprof run --graph` measures them)",
        options.top
    )?;
    writeln!(out, "  {:>10}  name", "calls")?;
    for (name, calls) in entries.iter().take(options.top) {
        writeln!(out, "  {calls:>10}  {}{}", m.text(*name), source(m, *name))?;
    }
    if entries.len() > options.top {
        writeln!(out, "  ... and {} more", entries.len() - options.top)?;
    }
    Ok(())
}

/// Writes the summary, showing `options.top` rows per table.
pub fn write(m: &Model, options: &crate::Options, out: &mut dyn Write) -> io::Result<()> {
    let h = &m.trace.header;
    let totals = totals(m)?;
    let whose = if m.many_processes() {
        format!("a {}", m.whose())
    } else {
        m.whose()
    };
    writeln!(
        out,
        "bootprof trace of {whose}: {} records ({} dropped), {} threads, {} ms from the start to \
         the last record",
        m.trace.records.len(),
        h.dropped,
        m.lanes.len(),
        millis(m.end_ns)
    )?;
    if let Some(cut) = &m.trace.truncated {
        writeln!(out, "the trace file was {cut}")?;
    }
    for caveat in m.caveats() {
        writeln!(out, "note: {caveat}")?;
    }
    if !m.trace.processes.is_empty() {
        processes(m, &totals, out)?;
    }
    writeln!(out, "\nthreads")?;
    for l in &m.lanes {
        writeln!(
            out,
            "  {:>8}  {:<24} first {:>12} ms  last {:>12} ms",
            l.tid,
            l.name.as_deref().unwrap_or("-"),
            millis(l.first_ns),
            millis(l.last_ns)
        )?;
    }
    let tables: [(&str, UsageKey); 2] = [
        ("by inclusive time", |u| u.inclusive),
        ("by self time", |u| u.self_time),
    ];
    // A trace of functions with entries only has no times to rank.
    let timed = !totals.functions.is_empty() || totals.entries.is_empty();
    for (title, key) in tables.into_iter().filter(|_| timed) {
        writeln!(out, "\ntop {} functions {title}", options.top)?;
        writeln!(
            out,
            "  {:>14}  {:>14}  {:>10}  name",
            "inclusive ms", "self ms", "calls"
        )?;
        for (name, u) in totals.top(m, options.top, key) {
            writeln!(
                out,
                "  {:>14}  {:>14}  {:>10}  {}{}",
                millis(u.inclusive),
                millis(u.self_time),
                u.calls,
                m.text(name),
                source(m, name)
            )?;
        }
    }
    entries(m, &totals, options, out)?;
    let mut events: Vec<(NameId, u64)> = totals.events.iter().map(|(k, v)| (*k, *v)).collect();
    events.sort_by(|a, b| b.1.cmp(&a.1).then(m.text(a.0).cmp(m.text(b.0))));
    writeln!(out, "\nevents")?;
    writeln!(out, "  {:>10}  name", "count")?;
    for (name, count) in events.iter().take(options.top) {
        writeln!(out, "  {count:>10}  {}{}", m.text(*name), source(m, *name))?;
    }
    if events.len() > options.top {
        writeln!(out, "  ... and {} more", events.len() - options.top)?;
    }
    let records = &m.trace.records;
    let span = |w: &crate::model::Wait| {
        let start = m.ns(records.at(w.start).tsc);
        let end = w
            .end
            .map_or(m.lane_end_ns(w.lane), |e| m.ns(records.at(e).tsc));
        (start, end.saturating_sub(start))
    };
    let mut waits: Vec<&crate::model::Wait> = m.holds.waits.iter().collect();
    waits.sort_by_key(|w| std::cmp::Reverse(span(w).1));
    writeln!(out, "\nlongest waits")?;
    for w in waits.iter().take(options.top) {
        let (start, length) = span(w);
        write!(
            out,
            "  {} waited {} ms on {} from {} ms",
            m.lanes[w.lane].label_text(),
            millis(length),
            m.text(w.what),
            millis(start)
        )?;
        if w.end.is_none() {
            write!(out, " until the end of the trace")?;
        }
        match w.blame {
            Some(b) => {
                let b = &m.holds.blames[b];
                writeln!(
                    out,
                    ": {} ms blamed on {}",
                    millis(b.end_ns.saturating_sub(b.start_ns)),
                    m.lanes[b.holder].label_text()
                )?
            }
            None => writeln!(out, ": blamed on no one")?,
        }
    }
    if waits.len() > options.top {
        writeln!(out, "  ... and {} more", waits.len() - options.top)?;
    }
    Ok(())
}
