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
//!
//! A record whose call stack was recorded (`bootprof run --stacktrace`) is followed, as in
//! ftrace's `stacktrace` option, by a `<stack trace>` line with the same context, then one line
//! per frame, innermost first: ` => function+0xOFFSET` (the site, then return addresses), the
//! address in hex when no instrumented function holds it (with `sym-addr`, ` <0xADDRESS>` after
//! the name). `raw` and `hex` show the FRAME records as they are instead.
//!
//! With `--srcline`, each name is followed by its source line, ` [file:line]`: a function's
//! (ENTER, EXIT) its first line, a probe's or an annotation's the site's own; and each frame of
//! a recorded stack by its own (for a return address, its call's): `f [prog.c:12] <-main`,
//! `EVENT app:step [prog.c:20] arg=0x1`, ` => f+0x20 [prog.c:14]`.
//!
//! The header says, in `# note:` lines, what makes the records less than a complete, measured
//! trace: functions with entries only (their returns are inferred by the other formats), and a
//! report-time filter (`--depth`, `--min-time`), whose calls' ENTER and EXIT lines are left out.
//!
//! A session of several processes adds a TGID column (the process id, as ftrace's `record-tgid`
//! option does), a header line per process (its parent, how it ended, its records and losses)
//! and a `PROCESS END` line where each process ended (`exit 0`, `killed by SIGSEGV`, ...); a
//! single process gets that line only when it crashed.

use crate::model::{Model, NameId};
use bootprof_format::trace::RecordKind;
use std::io::{self, Write};

/// Annotated regions deeper than this do not name their parent.
const MAX_DEPTH: usize = 256;

/// ftrace's trace options that apply to a user-space trace (`bootprof report --options`, a
/// comma-separated list; `no` before a name turns it off):
///
/// | option | default | what it does |
/// |---|---|---|
/// | `print-parent` | on | an ENTER shows its caller after `<-` |
/// | `sym-offset` | off | a hook's function and its caller as `name+0xOFFSET`: the site's offset in its function, the return address's in the caller (`init_config+0x0 <-main+0x23`) |
/// | `sym-addr` | off | the address after each of those names: `init_config <0x401200> <-main <0x401023>` |
/// | `raw` | off | each record as numbers, `KIND SITE ARG` in decimal (the kind as in the trace format, the site's index in the trace) |
/// | `hex` | off | as `raw`, in hexadecimal |
/// | `context-info` | on | the TASK-PID, CPU and TIMESTAMP columns |
/// | `record-tgid` | off | the TGID column (the process id) even for one process |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextOptions {
    /// See the table.
    pub print_parent: bool,
    /// See the table.
    pub sym_offset: bool,
    /// See the table.
    pub sym_addr: bool,
    /// See the table.
    pub raw: bool,
    /// See the table.
    pub hex: bool,
    /// See the table.
    pub context_info: bool,
    /// See the table.
    pub record_tgid: bool,
}

impl Default for TextOptions {
    fn default() -> TextOptions {
        TextOptions {
            print_parent: true,
            sym_offset: false,
            sym_addr: false,
            raw: false,
            hex: false,
            context_info: true,
            record_tgid: false,
        }
    }
}

impl TextOptions {
    /// The option names, as `--options` takes them.
    pub const NAMES: [&'static str; 7] = [
        "print-parent",
        "sym-offset",
        "sym-addr",
        "raw",
        "hex",
        "context-info",
        "record-tgid",
    ];

    /// The defaults changed by `list` (`sym-offset,noprint-parent`); the error names an
    /// unknown option and lists the known ones.
    pub fn parse(list: &str) -> Result<TextOptions, String> {
        let mut o = TextOptions::default();
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (on, name) = match item.strip_prefix("no") {
                Some(rest) if TextOptions::NAMES.contains(&rest) => (false, rest),
                _ => (true, item),
            };
            let field = match name {
                "print-parent" => &mut o.print_parent,
                "sym-offset" => &mut o.sym_offset,
                "sym-addr" => &mut o.sym_addr,
                "raw" => &mut o.raw,
                "hex" => &mut o.hex,
                "context-info" => &mut o.context_info,
                "record-tgid" => &mut o.record_tgid,
                _ => {
                    return Err(format!(
                        "unknown text option `{item}` (known: {}; `no` before a name turns it off)",
                        TextOptions::NAMES.join(", ")
                    ))
                }
            };
            *field = on;
        }
        Ok(o)
    }
}

/// Writes the text report with the default options.
pub fn write(m: &Model, dest: &mut dyn Write) -> io::Result<()> {
    write_with(m, &TextOptions::default(), dest)
}

/// Writes the text report.
pub fn write_with(m: &Model, options: &TextOptions, dest: &mut dyn Write) -> io::Result<()> {
    // Lines are formatted into a buffer of our own and handed on in large pieces.
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT + 4096);
    let out = &mut buf;
    let many = m.many_processes() || options.record_tgid;
    header(m, options, out)?;
    let task = |name: Option<&str>, tid: u32, pid: u32| {
        let t = format!("{:>16}-{:<7}", name.unwrap_or("<...>"), tid);
        if many {
            format!("{t} ({pid:>7})")
        } else {
            t
        }
    };
    let tasks: Vec<String> = m
        .lanes
        .iter()
        .map(|l| task(l.name.as_deref(), l.tid, l.pid))
        .collect();
    // Where each process of a session ended, in time order, to be shown among the records.
    let mut ends: Vec<(u64, String, String)> = m
        .trace
        .processes
        .iter()
        .filter(|p| many || p.ending.crashed())
        .filter_map(|p| {
            let t = p.end_tsc?;
            let name = p.name();
            Some((
                t,
                task(Some(name), p.pid, p.pid),
                format!("PROCESS END {}", p.ending),
            ))
        })
        .collect();
    ends.sort();
    let mut ends = ends.into_iter().peekable();
    let mut stacks: Vec<Vec<NameId>> = vec![Vec::new(); m.lanes.len()];
    let mut last_tid = None;
    let mut lane = 0;
    let numbers = options.raw || options.hex;
    let mut records = m.trace.records.iter();
    let mut index = 0;
    while let Some(r) = records.next() {
        index += 1;
        if m.left_out(index - 1) {
            continue;
        }
        if last_tid != Some(r.tid) {
            lane = m.lane(r.tid);
            last_tid = Some(r.tid);
        }
        while let Some((t, task, what)) = ends.next_if(|e| e.0 < r.tsc) {
            end_line(out, m.ns(t), &task, &what)?;
        }
        if r.kind == RecordKind::Frame && !numbers {
            // Shown under its hit (or, without one, not at all).
            continue;
        }
        let context = |out: &mut Vec<u8>| -> io::Result<()> {
            if options.context_info {
                let ns = m.ns(r.tsc);
                write!(
                    out,
                    "{} [000] {:>6}.{:06}: ",
                    tasks[lane],
                    ns / 1_000_000_000,
                    ns % 1_000_000_000 / 1000
                )?;
            }
            Ok(())
        };
        context(out)?;
        if numbers {
            let (kind, site) = (r.kind as u8, r.site);
            if options.hex {
                writeln!(out, "{kind:x} {site:x} {:x}", r.arg)?;
            } else {
                writeln!(out, "{kind} {site} {}", r.arg)?;
            }
        } else {
            record_text(m, options, out, lane, &r, &mut stacks[lane])?;
            let frames = m.stack_of(&r, records.ahead());
            if !frames.is_empty() {
                context(out)?;
                out.write_all(b"<stack trace>\n")?;
                for f in frames {
                    write!(out, " => {}", m.frame_text(lane, f.arg))?;
                    if options.sym_addr {
                        write!(out, " <{:#x}>", f.arg)?;
                    }
                    source_suffix(out, m.frame_source(lane, f.arg))?;
                    out.write_all(b"\n")?;
                }
            }
        }
        if out.len() >= FLUSH_AT {
            dest.write_all(&out[..])?;
            out.clear();
        }
    }
    for (t, task, what) in ends {
        end_line(out, m.ns(t), &task, &what)?;
    }
    dest.write_all(&out[..])
}

const FLUSH_AT: usize = 1 << 16;

/// One record's text after its context, symbolic: `f <-caller`, `EXIT f`, `EVENT app:x arg=0x1`.
fn record_text(
    m: &Model,
    options: &TextOptions,
    out: &mut Vec<u8>,
    lane: usize,
    r: &bootprof_format::trace::Record,
    stack: &mut Vec<NameId>,
) -> io::Result<()> {
    let name = m.name(r);
    let text = m.text(name);
    match r.kind {
        RecordKind::Enter => {
            out.write_all(text.as_bytes())?;
            if m.is_hook(r) {
                let site = &m.trace.sites[r.site as usize];
                if m.inlined(r).is_none() {
                    // An inlined function's hook lies in its caller: no offset in the function.
                    symbol_suffix(out, options, u64::from(site.func_offset), site.address)?;
                }
                source_suffix(out, m.function_source(r.site))?;
                if let (Some(parent), true) = (m.parent(r), options.print_parent) {
                    match m.frame_function(lane, parent) {
                        Some((start, p)) => {
                            write!(out, " <-{}", m.text(p))?;
                            symbol_suffix(out, options, parent - start, parent)?;
                        }
                        None => write!(out, " <-{parent:#x}")?,
                    }
                }
            } else {
                source_suffix(out, m.function_source(r.site))?;
                if let Some(&p) = stack.last().filter(|_| options.print_parent) {
                    write!(out, " <-{}", m.text(p))?;
                }
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
            write!(out, "EXIT {text}")?;
            source_suffix(out, m.function_source(r.site))?;
            out.write_all(b"\n")?;
        }
        RecordKind::Event => {
            write!(out, "EVENT {text}")?;
            source_suffix(out, m.site_source(r.site))?;
            writeln!(out, " arg={:#x}", r.arg)?
        }
        RecordKind::Thread if r.site == bootprof_format::trace::NO_SITE => {
            let l = &m.lanes[lane];
            writeln!(out, "THREAD {}", l.name.as_deref().unwrap_or("-"))?
        }
        kind => {
            write!(out, "{} {text}", kind.name())?;
            source_suffix(out, m.site_source(r.site))?;
            out.write_all(b"\n")?
        }
    }
    Ok(())
}

/// What `--srcline` adds after a name: ` [file:line]`, when the line is known.
fn source_suffix(out: &mut Vec<u8>, line: Option<&str>) -> io::Result<()> {
    match line {
        Some(line) => write!(out, " [{line}]"),
        None => Ok(()),
    }
}

/// What `sym-offset` and `sym-addr` add after a function's name: `+0xOFFSET`, ` <0xADDRESS>`.
fn symbol_suffix(
    out: &mut Vec<u8>,
    options: &TextOptions,
    offset: u64,
    address: u64,
) -> io::Result<()> {
    if options.sym_offset {
        write!(out, "+{offset:#x}")?;
    }
    if options.sym_addr {
        write!(out, " <{address:#x}>")?;
    }
    Ok(())
}

/// The lines before the records: the trace's size, what it lacks, its processes, the columns.
fn header(m: &Model, options: &TextOptions, out: &mut Vec<u8>) -> io::Result<()> {
    let many = m.many_processes() || options.record_tgid;
    let h = &m.trace.header;
    writeln!(out, "# tracer: bootprof")?;
    writeln!(out, "#")?;
    let whose = m.whose();
    writeln!(
        out,
        "# {whose}, {} threads, {} records ({} dropped), TSC {} Hz",
        m.lanes.len(),
        m.trace.records.len(),
        h.dropped,
        h.tsc_hz
    )?;
    if let Some(cut) = &m.trace.truncated {
        writeln!(out, "# the trace file was {cut}")?;
    }
    for caveat in m.caveats() {
        writeln!(out, "# note: {caveat}")?;
    }
    for p in &m.trace.processes {
        writeln!(
            out,
            "# process {} (parent {}): {}, {} records{}",
            p.label(),
            p.ppid,
            p.ending,
            p.records,
            p.notes().map(|l| format!(", {l}")).unwrap_or_default()
        )?;
    }
    writeln!(out, "#")?;
    let what = if options.raw || options.hex {
        "KIND SITE ARG"
    } else {
        "FUNCTION"
    };
    if !options.context_info {
        writeln!(out, "# {what}")?;
    } else if many {
        writeln!(
            out,
            "#           TASK-PID      TGID    CPU#     TIMESTAMP  {what}"
        )?;
        writeln!(
            out,
            "#              | |          |        |          |         |"
        )?;
    } else {
        writeln!(out, "#           TASK-PID      CPU#     TIMESTAMP  {what}")?;
        writeln!(out, "#              | |          |          |         |")?;
    }
    Ok(())
}

/// The line where a process of a session ended: `PROCESS END exit 0`, `PROCESS END killed by
/// SIGSEGV`, ...
fn end_line(out: &mut Vec<u8>, ns: u64, task: &str, what: &str) -> io::Result<()> {
    writeln!(
        out,
        "{task} [000] {:>6}.{:06}: {what}",
        ns / 1_000_000_000,
        ns % 1_000_000_000 / 1000
    )
}
