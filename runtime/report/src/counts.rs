//! Hit-count tables (`bootprof run --count`, `bootprof report --format counts`): takes a
//! session's processes and the counts each wrote into its lane; hands on one table summed over
//! every process (a site enabled and never hit shows 0), then, where there are several, each
//! process's own (the sites it hit). A process whose counts are missing is never left out unseen:
//! it gets a line saying so and how it ended, and the totals say they leave it out.
//!
//! ```text
//!      hits  kind        site
//!       35  probe       count:hot
//!        1  probe       count:cold
//! 1 process of 3 wrote no counts: the totals leave it out
//! per process:
//! count-4711 (exit 0)
//!        15  probe       count:hot
//!         1  probe       count:cold
//! count-4712 (exit 0)
//!        20  probe       count:hot
//! count-4713: counts not written: killed by SIGKILL
//! ```

use crate::process::{Counts, Process};
use crate::trace::Trace;
use bootprof_format::counts::{self as table, Row};
use std::fmt::Write as _;

/// Writes the table of `trace`'s counts to `out`.
pub fn write(trace: &Trace, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    out.write_all(text(trace).as_bytes())
}

/// Whether any process of `trace` counted hits.
pub fn counted(trace: &Trace) -> bool {
    trace.processes.iter().any(|p| p.counts != Counts::Off)
}

/// The table of `trace`'s counts, as text.
pub fn text(trace: &Trace) -> String {
    let mut out = String::new();
    if !counted(trace) {
        out.push_str(
            "no hit counts: nothing in this trace counted hits (`bootprof run --count` does)\n",
        );
        return out;
    }
    let all = table::rows(trace.processes.iter().flat_map(|p| rows_of(trace, p)));
    let width = table::width(&all);
    if !all.is_empty() {
        table::write_heading(width, "", &mut out);
        table::write_rows(&all, width, "", &mut out);
    }
    let without = trace
        .processes
        .iter()
        .filter(|p| !matches!(p.counts, Counts::Written { .. }))
        .count();
    let n = trace.processes.len();
    if without > 0 && n > 1 {
        let _ = writeln!(
            out,
            "{without} process{} of {n} wrote no counts: the totals leave {} out",
            if without == 1 { "" } else { "es" },
            if without == 1 { "it" } else { "them" },
        );
    }
    if n == 1 {
        // Its table is the one above: only what is amiss is said.
        let p = &trace.processes[0];
        if let Some(line) = status(p).filter(|_| !plain(p)) {
            let _ = writeln!(out, "{line}");
        }
        return out;
    }
    out.push_str("per process:\n");
    for p in &trace.processes {
        // A site enabled and never hit is in the totals; here it would only repeat them.
        let rows = table::rows(rows_of(trace, p).filter(|r| r.hits > 0));
        match status(p) {
            Some(line) => {
                let _ = writeln!(out, "{line}");
            }
            None => {
                let _ = writeln!(out, "{} ({})", p.label(), p.ending);
            }
        }
        table::write_rows(&rows, width, "", &mut out);
    }
    out
}

/// The rows of the counts `p` wrote (none if it wrote none).
fn rows_of<'t>(trace: &'t Trace, p: &'t Process) -> impl Iterator<Item = Row> + 't {
    let hits = match &p.counts {
        Counts::Written { hits, .. } => hits.as_slice(),
        _ => &[],
    };
    hits.iter().filter_map(|&(site, hits)| {
        let s = trace.sites.get(site as usize)?;
        Some(Row {
            hits,
            kind: s.kind,
            site: table::site_name(s.kind, &s.provider, &s.name, &s.function),
        })
    })
}

/// Whether `p` wrote its counts at its end, and they hold a hit.
fn plain(p: &Process) -> bool {
    matches!(&p.counts, Counts::Written { hits, at_end: true } if hit(hits))
}

fn hit(hits: &[(u32, u64)]) -> bool {
    hits.iter().any(|&(_, n)| n > 0)
}

/// The line that heads `p`'s counts when something is to be said of them (and `None` for
/// counts written at its end, which the label and ending head).
fn status(p: &Process) -> Option<String> {
    let label = p.label();
    let ending = p.ending;
    Some(match &p.counts {
        Counts::Off => format!("{label} ({ending}): did not count hits"),
        Counts::NotWritten { .. } => format!(
            "{label}: counts not written: {}",
            p.counts.missing(ending).unwrap_or_default()
        ),
        Counts::Written { at_end: false, .. } => format!(
            "{label} ({ending}): counts as of its last bootprof_dump() (its end wrote none)"
        ),
        Counts::Written { hits, .. } if !hit(hits) => format!("{label} ({ending}): no hits"),
        Counts::Written { .. } => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Ending;
    use crate::trace::TraceSite;
    use bootprof_format::lane::Keep;
    use bootprof_format::Kind;

    fn process(pid: u32, ending: Ending, counts: Counts) -> Process {
        Process {
            pid,
            ppid: 1,
            lane: format!("{pid}.0.lane"),
            exe: "/bin/app".into(),
            args: Vec::new(),
            start_tsc: 0,
            start_realtime_ns: None,
            end_tsc: None,
            ending,
            keep: Keep::Start,
            records: 0,
            dropped: 0,
            torn: 0,
            overwritten: 0,
            damaged: 0,
            cut_bytes: 0,
            filter: Default::default(),
            filtered: 0,
            unread_tables: Vec::new(),
            counts,
            latency: None,
        }
    }

    fn site(kind: Kind, provider: &str, name: &str, function: &str) -> TraceSite {
        TraceSite {
            kind,
            provider: provider.into(),
            name: name.into(),
            function: function.into(),
            symbol: None,
            func_offset: 0,
            address: 0,
            id: 0,
            process: 0,
        }
    }

    fn trace(processes: Vec<Process>) -> Trace {
        Trace {
            header: Default::default(),
            sites: vec![
                site(Kind::Probe, "app", "tick", "loop"),
                site(Kind::Fentry, "", "__fentry__", "parse"),
                site(Kind::Probe, "app", "idle", "loop"),
            ],
            threads: Vec::new(),
            records: crate::records::Records::from_vec(Vec::new()),
            truncated: None,
            processes,
            thread_process: Default::default(),
            problems: Vec::new(),
        }
    }

    fn written(hits: &[(u32, u64)], at_end: bool) -> Counts {
        Counts::Written {
            hits: hits.to_vec(),
            at_end,
        }
    }

    /// Every way a process's counts can be had or missed, each said in its own words, and the
    /// totals say whom they leave out.
    #[test]
    fn every_process_is_shown_with_its_counts_or_why_it_has_none() {
        let t = trace(vec![
            process(
                10,
                Ending::Exit(0),
                written(&[(0, 7), (1, 2), (2, 0)], true),
            ),
            process(11, Ending::Exit(0), written(&[(0, 3)], false)),
            process(
                12,
                Ending::Signal(9),
                Counts::NotWritten { wrote_end: false },
            ),
            process(13, Ending::Exit(5), Counts::NotWritten { wrote_end: false }),
            process(14, Ending::Exit(0), Counts::NotWritten { wrote_end: true }),
            process(15, Ending::Exec, Counts::NotWritten { wrote_end: false }),
            process(16, Ending::Exit(0), written(&[(2, 0)], true)),
            process(17, Ending::Exit(0), Counts::Off),
        ]);
        assert_eq!(
            text(&t),
            concat!(
                "     hits  kind        site\n",
                "       10  probe       app:tick\n",
                "        2  fentry      parse\n",
                "        0  probe       app:idle\n",
                "5 processes of 8 wrote no counts: the totals leave them out\n",
                "per process:\n",
                "app-10 (exit 0)\n",
                "        7  probe       app:tick\n",
                "        2  fentry      parse\n",
                "app-11 (exit 0): counts as of its last bootprof_dump() (its end wrote none)\n",
                "        3  probe       app:tick\n",
                "app-12: counts not written: killed by SIGKILL\n",
                "app-13: counts not written: exit 5 without running exit handlers (_exit)\n",
                "app-14: counts not written: no room left in its lane for them (exit 0)\n",
                "app-15: counts not written: exec\n",
                "app-16 (exit 0): no hits\n",
                "app-17 (exit 0): did not count hits\n",
            )
        );
    }

    /// One process: its table is the totals; a line only when something is amiss.
    #[test]
    fn one_process_gets_one_table() {
        let t = trace(vec![process(10, Ending::Exit(0), written(&[(0, 7)], true))]);
        assert_eq!(
            text(&t),
            "     hits  kind        site\n        7  probe       app:tick\n"
        );
        let t = trace(vec![process(
            10,
            Ending::Signal(9),
            Counts::NotWritten { wrote_end: false },
        )]);
        assert_eq!(text(&t), "app-10: counts not written: killed by SIGKILL\n");
        let t = trace(vec![process(10, Ending::Exit(0), Counts::Off)]);
        assert!(!counted(&t));
        assert!(text(&t).starts_with("no hit counts"), "{}", text(&t));
    }
}
