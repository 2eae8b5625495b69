//! `--format chrome`: takes a [`Model`]; hands on Chrome Trace Event JSON, for chrome://tracing,
//! Perfetto or speedscope:
//!
//! ```text
//! {"traceEvents":[
//! {"name":"thread_name","ph":"M","pid":1000,"tid":1000,"args":{"name":"main"}},
//! {"name":"main","cat":"function","ph":"B","pid":1000,"tid":1000,"ts":0.000},
//! {"name":"app:start","cat":"event","ph":"i","s":"t","pid":1000,"tid":1000,"ts":0.400,"args":{"arg":"0x7"}},
//! {"name":"main","cat":"function","ph":"E","pid":1000,"tid":1000,"ts":1.800}
//! ],"displayTimeUnit":"ns"}
//! ```
//!
//! A frame of a function with entries only (`-pg`/`-mfentry` code recorded without `bootprof
//! run --graph`) is named `name (inferred)`: its end was inferred. The trace's `otherData` holds
//! `bootprof_notes` when something of the kind is to be said (functions with entries only, a
//! report-time filter), and `bootprof_not_shown`, what the processes lost.
//!
//! Frames are B/E pairs on their thread, in the order the [`timeline`] opens
//! and closes them, so they balance per thread: an EXIT without its ENTER is dropped, frames
//! open at the end close at the last record's time. Waits are frames of category `wait`, blame
//! frames `blame`, and the holder's frames copied under them `blamed`. EVENT, HOLD and RELEASE
//! records are thread-scoped instant events. A call stack recorded at a hit (`bootprof run
//! --stacktrace`) is an instant event of category `stack` named after the hit, its frames in
//! `args.stack`, innermost first, as the text report prints them (`function+0xOFFSET`, or the
//! address). Times are microseconds with three decimals.

use crate::model::{Model, NameId};
use crate::timeline::{self, Closed, Frame, FrameKind, Sink, Stack};
use bootprof_format::trace::{Record, RecordKind};
use std::io::{self, Write};

/// Writes the Chrome JSON.
pub fn write(m: &Model, out: &mut dyn Write) -> io::Result<()> {
    let pid = m.trace.header.pid;
    writeln!(out, "{{\"traceEvents\":[")?;
    if m.trace.processes.is_empty() {
        write!(
            out,
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{pid},\"args\":{{\"name\":\"pid {pid}\"}}}}"
        )?;
    }
    // A session: one Chrome process per process, named `exe-pid`, sorted by start.
    for (i, p) in m.trace.processes.iter().enumerate() {
        let sep = if i == 0 { "" } else { ",\n" };
        write!(
            out,
            "{sep}{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
            p.pid, p.pid
        )?;
        json_string(out, &p.label())?;
        write!(
            out,
            "}}}},\n{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{i}}}}}",
            p.pid, p.pid
        )?;
    }
    for lane in &m.lanes {
        write!(
            out,
            ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
            lane.pid, lane.tid
        )?;
        json_string(out, &lane.label_text())?;
        write!(out, "}}}}")?;
    }
    let mut sink = Chrome {
        m,
        out: Vec::with_capacity(FLUSH_AT + 4096),
        dest: out,
    };
    timeline::walk(m, &mut sink)?;
    // Where each process ended (a crash, in a single process's trace), as a process-wide
    // instant event.
    for p in &m.trace.processes {
        let Some(t) = p
            .end_tsc
            .filter(|_| m.many_processes() || p.ending.crashed())
        else {
            continue;
        };
        let t = m.ns(t);
        write!(sink.out, ",\n{{\"name\":")?;
        json_string(&mut sink.out, &format!("process end: {}", p.ending))?;
        write!(
            sink.out,
            ",\"cat\":\"process\",\"ph\":\"i\",\"s\":\"p\",\"pid\":{},\"tid\":{},\"ts\":{}.{:03}}}",
            p.pid,
            p.pid,
            t / 1000,
            t % 1000
        )?;
    }
    // Shown by Perfetto and chrome://tracing as the trace's metadata.
    let mut other = serde_json::Map::new();
    if let Some(losses) = m.trace.losses() {
        other.insert("bootprof_not_shown".into(), losses.into());
    }
    let caveats = m.caveats();
    if !caveats.is_empty() {
        other.insert("bootprof_notes".into(), caveats.join("; ").into());
    }
    if other.is_empty() {
        writeln!(sink.out, "\n],\"displayTimeUnit\":\"ns\"}}")?;
    } else {
        writeln!(
            sink.out,
            "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{}}}",
            serde_json::Value::Object(other)
        )?;
    }
    sink.dest.write_all(&sink.out)
}

/// Events are formatted into a buffer of our own and handed on in large pieces.
const FLUSH_AT: usize = 1 << 16;

struct Chrome<'a, 'm> {
    m: &'a Model<'m>,
    out: Vec<u8>,
    dest: &'a mut dyn Write,
}

impl Chrome<'_, '_> {
    fn event(&mut self, lane: usize, name: NameId, cat: &str, ph: &str, t: u64) -> io::Result<()> {
        if self.out.len() >= FLUSH_AT {
            self.dest.write_all(&self.out)?;
            self.out.clear();
        }
        write!(self.out, ",\n{{\"name\":")?;
        let name = if cat == "function" {
            self.m.frame_label(name)
        } else {
            self.m.text(name).into()
        };
        json_string(&mut self.out, &name)?;
        write!(
            self.out,
            ",\"cat\":\"{cat}\",\"ph\":\"{ph}\",\"pid\":{},\"tid\":{},\"ts\":{}.{:03}",
            self.m.lanes[lane].pid,
            self.m.lanes[lane].tid,
            t / 1000,
            t % 1000
        )
    }
}

fn category(frame: &Frame) -> &'static str {
    match (frame.mirrored, frame.kind) {
        (true, _) => "blamed",
        (false, FrameKind::Function) => "function",
        (false, FrameKind::Wait) => "wait",
        (false, FrameKind::Blame) => "blame",
    }
}

impl Sink for Chrome<'_, '_> {
    fn open(&mut self, lane: usize, _below: &[Frame], frame: &Frame) -> io::Result<()> {
        self.event(lane, frame.name, category(frame), "B", frame.start)?;
        if let Some(symbol) = self.m.symbol(frame.name) {
            write!(self.out, ",\"args\":{{\"symbol\":")?;
            json_string(&mut self.out, symbol)?;
            write!(self.out, "}}")?;
        }
        write!(self.out, "}}")
    }

    fn close(
        &mut self,
        lane: usize,
        _below: &[Frame],
        frame: &Frame,
        end: u64,
        _how: Closed,
    ) -> io::Result<()> {
        self.event(lane, frame.name, category(frame), "E", end)?;
        write!(self.out, "}}")
    }

    fn stack(&mut self, lane: usize, stack: &Stack, t: u64) -> io::Result<()> {
        self.event(lane, self.m.name(stack.record), "stack", "i", t)?;
        write!(self.out, ",\"s\":\"t\",\"args\":{{\"stack\":[")?;
        for (i, f) in stack.frames.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            json_string(&mut self.out, &self.m.frame_text(lane, f.arg))?;
        }
        write!(self.out, "]}}}}")
    }

    fn instant(
        &mut self,
        lane: usize,
        _index: usize,
        r: &Record,
        name: NameId,
        t: u64,
    ) -> io::Result<()> {
        let cat = match r.kind {
            RecordKind::Event => "event",
            RecordKind::Hold | RecordKind::Release => "hold",
            _ => return Ok(()),
        };
        self.event(lane, name, cat, "i", t)?;
        write!(self.out, ",\"s\":\"t\"")?;
        if r.kind == RecordKind::Event {
            write!(self.out, ",\"args\":{{\"arg\":\"{:#x}\"}}", r.arg)?;
        } else {
            write!(self.out, ",\"args\":{{\"what\":\"{}\"}}", r.kind.name())?;
        }
        write!(self.out, "}}")
    }
}

/// Writes `s` as a JSON string (escaped by serde_json).
pub fn json_string(out: &mut dyn Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(out, s).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_strings_are_escaped() {
        let mut out = Vec::new();
        super::json_string(&mut out, "a\"b\\c\nd\u{1}é").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"b\\\\c\\nd\\u0001é\""
        );
    }
}
