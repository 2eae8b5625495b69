//! `--format text`: takes a [`Model`]; hands on one line per record, laid out like the trace
//! file of Linux's function tracer:
//!
//! ```text
//! #           TASK-PID      CPU#     TIMESTAMP  FUNCTION
//!             main-1000    [000]      0.000002: parse_args <-main
//!             main-1000    [000]      0.000005: EXIT parse_args
//!           <...>-1001    [000]      0.000007: EVENT app:ready arg=0x2a
//! ```
//!
//! TASK is the thread's name (`<...>` when it has none), PID its thread id; the CPU is not
//! recorded and shows as 000. TIMESTAMP is seconds.microseconds since the trace start. An ENTER
//! shows the function and, after `<-`, its caller: for hooks the instrumented function
//! containing the recorded parent address (its address in hex when no instrumented function
//! contains it), for annotated regions the region open below it on the same thread. Other
//! records show their kind and name: `EXIT f`, `EVENT app:start arg=0x7`, `WAIT root`,
//! `UNWAIT root`, `HOLD root`, `RELEASE root`, `THREAD worker`.

use crate::model::{Model, NameId};
use bootprof_format::trace::RecordKind;
use std::io::{self, Write};

/// Annotated regions deeper than this do not name their parent.
const MAX_DEPTH: usize = 256;

/// Writes the text report.
pub fn write(m: &Model, dest: &mut dyn Write) -> io::Result<()> {
    // Lines are formatted into a buffer of our own and handed on in large pieces.
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT + 4096);
    let out = &mut buf;
    let h = &m.trace.header;
    writeln!(out, "# tracer: bootprof")?;
    writeln!(out, "#")?;
    writeln!(
        out,
        "# pid {}, {} threads, {} records ({} dropped), TSC {} Hz",
        h.pid,
        m.lanes.len(),
        m.trace.records.len(),
        h.dropped,
        h.tsc_hz
    )?;
    if let Some(cut) = &m.trace.truncated {
        writeln!(out, "# the trace file was {cut}")?;
    }
    writeln!(out, "#")?;
    writeln!(
        out,
        "#           TASK-PID      CPU#     TIMESTAMP  FUNCTION"
    )?;
    writeln!(out, "#              | |          |          |         |")?;
    let tasks: Vec<String> = m
        .lanes
        .iter()
        .map(|l| format!("{:>16}-{:<7}", l.name.as_deref().unwrap_or("<...>"), l.tid))
        .collect();
    let mut stacks: Vec<Vec<NameId>> = vec![Vec::new(); m.lanes.len()];
    let mut last_tid = None;
    let mut lane = 0;
    for r in &m.trace.records {
        if last_tid != Some(r.tid) {
            lane = m.lane(r.tid);
            last_tid = Some(r.tid);
        }
        let ns = m.ns(r.tsc);
        write!(
            out,
            "{} [000] {:>6}.{:06}: ",
            tasks[lane],
            ns / 1_000_000_000,
            ns % 1_000_000_000 / 1000
        )?;
        let name = m.name(r);
        let text = m.text(name);
        let stack = &mut stacks[lane];
        match r.kind {
            RecordKind::Enter => {
                out.write_all(text.as_bytes())?;
                if m.is_hook(r) {
                    if r.arg != 0 {
                        match m.function_at(r.arg) {
                            Some(p) => write!(out, " <-{}", m.text(p))?,
                            None => write!(out, " <-{:#x}", r.arg)?,
                        }
                    }
                } else if let Some(&p) = stack.last() {
                    write!(out, " <-{}", m.text(p))?;
                }
                if stack.len() < MAX_DEPTH {
                    stack.push(name);
                }
                out.write_all(b"\n")?;
            }
            RecordKind::Exit => {
                if let Some(i) = stack.iter().rposition(|&n| n == name) {
                    stack.truncate(i);
                }
                writeln!(out, "EXIT {text}")?;
            }
            RecordKind::Event => writeln!(out, "EVENT {text} arg={:#x}", r.arg)?,
            RecordKind::Thread if r.site == bootprof_format::trace::NO_SITE => {
                let l = &m.lanes[lane];
                writeln!(out, "THREAD {}", l.name.as_deref().unwrap_or("-"))?
            }
            kind => writeln!(out, "{} {text}", kind.name())?,
        }
        if out.len() >= FLUSH_AT {
            dest.write_all(&out[..])?;
            out.clear();
        }
    }
    dest.write_all(&out[..])
}

const FLUSH_AT: usize = 1 << 16;
