//! `--format points`: takes a [`Model`]; hands on a profile-point table: for every function or
//! annotated region, how many times it ran to completion and how long that took in total, on
//! average, at least and at most. Sorted by total time, longest first.
//!
//! ```text
//! name           count      total ms        avg ns        min ns        max ns
//! -------------- ------- ------------- ------------- ------------- -------------
//! load_config          2      1.500000        750000        500000       1000000
//! ```
//!
//! With `--srcline`, a last column, `source`, gives the `file:line` of each region (a function's
//! first line; an annotation's own), `-` when it is not known.
//!
//! A function with entries only (`-pg`/`-mfentry` code recorded without `bootprof run --graph`:
//! [`Model::entry_only`]) shows how many times it was entered and `-` for the times, which are
//! not measured; a note after the table says so.
//!
//! A run counts when its frame closed by its own EXIT or was seen to have returned (see
//! [`timeline`]); frames still open when the trace ends are left out, as are
//! waits and the copies of blamed threads' frames. A session of several processes gets a table
//! per process (headed `process exe-pid (how it ended)`), then the total over all of them.

use crate::model::{Model, NameId};
use crate::timeline::{self, Closed, Frame, FrameKind, Sink};
use std::collections::HashMap;
use std::io::{self, Write};

/// Statistics of one region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Completed runs.
    pub count: u64,
    /// Their total duration, ns.
    pub total: u64,
    /// The shortest, ns.
    pub min: u64,
    /// The longest, ns.
    pub max: u64,
}

/// The points of `m`, sorted by total time (longest first, then by name).
pub fn points(m: &Model) -> io::Result<Vec<(NameId, Point)>> {
    Ok(points_by_process(m)?.remove(&None).unwrap_or_default())
}

/// Points per process (`Some(index)`) and in total (`None`).
pub type ByProcess = HashMap<Option<usize>, Vec<(NameId, Point)>>;

/// The points of `m` in total (key `None`) and, for a session, per process (key: its index),
/// each list sorted by total time (longest first, then by name).
pub fn points_by_process(m: &Model) -> io::Result<ByProcess> {
    let mut sink = Points(m, HashMap::new());
    timeline::walk(m, &mut sink)?;
    let mut by: HashMap<Option<usize>, HashMap<NameId, Point>> = HashMap::new();
    for ((lane, name), p) in sink.1 {
        let process = m.lanes[lane].process;
        let keys = if m.many_processes() {
            vec![None, process]
        } else {
            vec![None]
        };
        for key in keys {
            let q = by
                .entry(key)
                .or_default()
                .entry(name)
                .or_insert(Point::EMPTY);
            q.count += p.count;
            q.total = q.total.saturating_add(p.total);
            q.min = q.min.min(p.min);
            q.max = q.max.max(p.max);
        }
    }
    Ok(by
        .into_iter()
        .map(|(k, v)| {
            let mut v: Vec<(NameId, Point)> = v.into_iter().collect();
            v.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(m.text(a.0).cmp(m.text(b.0))));
            (k, v)
        })
        .collect())
}

/// Writes the table: in a session of several processes, one per process, then the total.
pub fn write(m: &Model, out: &mut dyn Write) -> io::Result<()> {
    let mut by = points_by_process(m)?;
    if m.many_processes() {
        for (i, p) in m.trace.processes.iter().enumerate() {
            writeln!(out, "process {} ({})", p.label(), p.ending)?;
            table(m, &by.remove(&Some(i)).unwrap_or_default(), out)?;
            writeln!(out)?;
        }
        writeln!(out, "all {} processes", m.trace.processes.len())?;
    }
    table(m, &by.remove(&None).unwrap_or_default(), out)?;
    if let Some(losses) = m.trace.losses() {
        writeln!(out, "not counted: {losses}")?;
    }
    for caveat in m.caveats() {
        writeln!(out, "note: {caveat}")?;
    }
    Ok(())
}

fn table(m: &Model, points: &[(NameId, Point)], out: &mut dyn Write) -> io::Result<()> {
    let width = points
        .iter()
        .map(|(n, _)| m.text(*n).chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    // `--srcline`: a last column, the source lines of the region's sites.
    let source = |name: &str| {
        if m.shows_sources() {
            format!(" {name}")
        } else {
            String::new()
        }
    };
    writeln!(
        out,
        "{:<width$} {:>10} {:>14} {:>13} {:>13} {:>13}{}",
        "name",
        "count",
        "total ms",
        "avg ns",
        "min ns",
        "max ns",
        source("source")
    )?;
    let rule = |n: usize| "-".repeat(n);
    let line = format!(
        "{} {} {} {} {} {}{}",
        rule(width),
        rule(10),
        rule(14),
        rule(13),
        rule(13),
        rule(13),
        source(&rule(6))
    );
    writeln!(out, "{line}")?;
    for (name, p) in points {
        if m.entry_only(*name) {
            // Calls whose returns were inferred: counted, not timed.
            writeln!(
                out,
                "{:<width$} {:>10} {:>14} {:>13} {:>13} {:>13}{}",
                m.text(*name),
                p.count,
                "-",
                "-",
                "-",
                "-",
                source(m.name_source(*name).unwrap_or("-"))
            )?;
            continue;
        }
        writeln!(
            out,
            "{:<width$} {:>10} {:>7}.{:06} {:>13} {:>13} {:>13}{}",
            m.text(*name),
            p.count,
            p.total / 1_000_000,
            p.total % 1_000_000,
            p.total / p.count.max(1),
            p.min,
            p.max,
            source(m.name_source(*name).unwrap_or("-"))
        )?;
    }
    writeln!(out, "{line}")
}

impl Point {
    const EMPTY: Point = Point {
        count: 0,
        total: 0,
        min: u64::MAX,
        max: 0,
    };
}

/// Per (lane, name).
struct Points<'a, 'm>(&'a Model<'m>, HashMap<(usize, NameId), Point>);

impl Sink for Points<'_, '_> {
    fn close(
        &mut self,
        lane: usize,
        _below: &[Frame],
        frame: &Frame,
        end: u64,
        how: Closed,
    ) -> io::Result<()> {
        if frame.kind != FrameKind::Function || frame.mirrored {
            return Ok(());
        }
        if self.0.entry_only(frame.name) {
            // Every call counts; none is timed.
            self.1
                .entry((lane, frame.name))
                .or_insert(Point::EMPTY)
                .count += 1;
            return Ok(());
        }
        if how == Closed::End {
            return Ok(());
        }
        let d = end.saturating_sub(frame.start);
        let p = self.1.entry((lane, frame.name)).or_insert(Point::EMPTY);
        p.count += 1;
        p.total = p.total.saturating_add(d);
        p.min = p.min.min(d);
        p.max = p.max.max(d);
        Ok(())
    }
}
