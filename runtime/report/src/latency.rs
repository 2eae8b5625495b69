//! `--format latency`: takes a trace whose processes measured intervals ([`crate::intervals`]);
//! hands on, per process, the longest interval, percentiles, the histogram and the kept windows.

use crate::intervals::{duration, Latency};
use crate::model::Model;
use bootprof_format::latency as area;
use std::io::{self, Write};

/// `--format latency`: per process that measured intervals, the figures, percentiles, the
/// histogram and the kept windows.
pub fn write(model: &Model, out: &mut dyn Write) -> io::Result<()> {
    let trace = model.trace;
    let hz = trace.header.tsc_hz.max(1) as f64;
    let ns = |ticks: u64| ticks as f64 * 1e9 / hz;
    let mut any = false;
    for (i, p) in trace.processes.iter().enumerate() {
        let Some(l) = &p.latency else { continue };
        any = true;
        writeln!(out, "# latency {} .. {}   {}", l.from, l.to, p.label())?;
        if l.count == 0 {
            writeln!(out, "no interval was closed")?;
        } else {
            writeln!(
                out,
                "intervals {}   shortest {}   mean {}   longest {}",
                l.count,
                duration(ns(l.min)),
                duration(ns(l.sum) / l.count as f64),
                duration(ns(l.max))
            )?;
            let pct: Vec<String> = [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")]
                .iter()
                .map(|&(f, name)| format!("{name} {}", duration(ns(l.percentile(f)))))
                .collect();
            writeln!(
                out,
                "{}   (histogram buckets: within 6.25%)",
                pct.join("   ")
            )?;
        }
        write_counts(l, out)?;
        write_histogram(l, &ns, out)?;
        write_windows(model, i, l, &ns, out)?;
        writeln!(out)?;
    }
    if !any {
        writeln!(
            out,
            "no interval was measured: record with bootprof run --latency FROM..TO"
        )?;
    }
    Ok(())
}

fn write_counts(l: &Latency, out: &mut dyn Write) -> io::Result<()> {
    let now = l.windows.len() as u64;
    if l.bound_ns > 0 {
        let over = l.kept + l.not_kept;
        writeln!(
            out,
            "kept: up to {} windows, the longest intervals of at least {}: {over} intervals \
             were, {now} windows kept, {} not (the limit)",
            l.limit,
            duration(l.bound_ns as f64),
            over.saturating_sub(now)
        )?;
    } else {
        let which = if l.limit == 1 {
            "the longest interval".to_string()
        } else {
            format!("the {} longest intervals", l.limit)
        };
        writeln!(
            out,
            "kept: {which}: {now} window{} (a longer interval replaced a kept one {} time{})",
            if now == 1 { "" } else { "s" },
            l.kept.saturating_sub(now),
            if l.kept.saturating_sub(now) == 1 {
                ""
            } else {
                "s"
            }
        )?;
    }
    if l.no_room > 0 {
        writeln!(
            out,
            "{} windows could not be kept: no room in the lane",
            l.no_room
        )?;
    }
    if l.unopened > 0 || l.too_deep > 0 {
        writeln!(
            out,
            "unmatched: {} TO hits with no FROM open on their thread, {} FROM hits nested more \
             than 32 deep",
            l.unopened, l.too_deep
        )?;
    }
    Ok(())
}

/// The histogram, one line per bucket that has intervals (merged by powers of two when there
/// would be more than 40 lines).
fn write_histogram(l: &Latency, ns: &dyn Fn(u64) -> f64, out: &mut dyn Write) -> io::Result<()> {
    let mut rows: Vec<(u64, u64, u64)> = l
        .histogram
        .iter()
        .map(|&(b, n)| (area::bucket_low(b), area::bucket_high(b), n))
        .collect();
    if rows.len() > 40 {
        let mut merged: Vec<(u64, u64, u64)> = Vec::new();
        for (lo, hi, n) in rows {
            let octave = |v: u64| 64 - v.leading_zeros();
            match merged.last_mut() {
                Some(m) if octave(m.0) == octave(lo) => {
                    m.1 = hi;
                    m.2 += n;
                }
                _ => merged.push((lo, hi, n)),
            }
        }
        rows = merged;
    }
    let most = rows.iter().map(|r| r.2).max().unwrap_or(1);
    writeln!(out, "{:>24} {:>10}", "interval", "count")?;
    for (lo, hi, n) in rows {
        let bar = "#".repeat(((n * 40).div_ceil(most)) as usize);
        let range = format!(
            "{} - {}",
            duration(ns(lo)),
            duration(ns(hi.saturating_add(1)))
        );
        writeln!(out, "{range:>24} {n:>10} {bar}")?;
    }
    Ok(())
}

fn write_windows(
    model: &Model,
    process: usize,
    l: &Latency,
    ns: &dyn Fn(u64) -> f64,
    out: &mut dyn Write,
) -> io::Result<()> {
    let trace = model.trace;
    for (i, w) in l.windows.iter().enumerate() {
        let win = &w.window;
        let thread = trace
            .threads
            .iter()
            .find(|(key, _)| trace.thread_process.get(key) == Some(&(process, win.tid)))
            .and_then(|(_, name)| name.clone());
        let mut notes = Vec::new();
        if win.flags & area::WINDOW_RING_SHORT != 0 {
            notes.push("a thread's records of its start were overwritten: raise --buffer");
        }
        if win.flags & area::WINDOW_BEFORE_LANE != 0 {
            notes.push("it started before this process's lane: in its parent, before the fork");
        }
        if win.flags & area::WINDOW_CHUNKS_LOST != 0 {
            notes.push("some records of other threads were being overwritten and are missing");
        }
        writeln!(
            out,
            "window {}: {} on thread {}{} from {} s to {} s, {} records{}",
            i + 1,
            duration(ns(win.ticks())),
            win.tid,
            thread.map(|n| format!(" ({n})")).unwrap_or_default(),
            crate::model::seconds_micros(model.ns(win.from_tsc)),
            crate::model::seconds_micros(model.ns(win.to_tsc)),
            w.records,
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join("; "))
            }
        )?;
    }
    Ok(())
}
