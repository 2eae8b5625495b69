//! `--format perfetto`: takes a [`Model`]; hands on a Perfetto trace, the protobuf message
//! `perfetto.protos.Trace` written as a stream of `TracePacket`s, for ui.perfetto.dev and
//! trace_processor. What it holds is what the Chrome JSON holds ([`chrome`](crate::chrome)):
//!
//! * A track per process (`ProcessDescriptor`: pid, `name-pid` as the other formats label a
//!   session's processes, the command line; `pid N` for a single process's trace file) and, under
//!   it, a track per thread that has records (`ThreadDescriptor`: pid, tid, thread name).
//! * Frames as `TYPE_SLICE_BEGIN`/`TYPE_SLICE_END` on their thread's track, in the order the
//!   [`timeline`] opens and closes them, so they balance and nest per thread:
//!   an EXIT without its ENTER is dropped; the frames of entries-only hooks (`__fentry__`,
//!   `mcount`) close where a later ENTER shows they returned; frames still open when the records
//!   end close where their process ended (the trace's last record for a single process), as the
//!   Chrome JSON closes them. No EXIT is made up beyond those. Categories as in the Chrome JSON:
//!   `function`, `wait`, `blame` (a wait blamed on a holder), `blamed` (the holder's frames
//!   copied over it).
//! * EVENT, HOLD and RELEASE records as `TYPE_INSTANT` on their thread's track (an EVENT's
//!   argument as the annotation `arg`); a call stack recorded at a hit as an instant named after
//!   the hit, its frames in the annotation `stack`, innermost first; where each process ended (a
//!   crash, in a single process's trace) as an instant on the process's track; what the trace
//!   lost, if anything, as an instant on the global track at time zero (`records not shown`),
//!   and what the report must say of how its frames were made (functions with entries only, a
//!   report-time filter) as another (`bootprof notes`).
//! * A frame of a function with entries only is named `name (inferred)`, as in the Chrome JSON.
//! * A blamed wait: the blame slice names the holder and the hold in annotations (`holder`,
//!   `holder_tid`, `holder_pid`, `held_since_ns`, `released_at_ns`) and starts a flow (id: the
//!   blame's index + 1) that ends at the holder's RELEASE: the arrow from the wait to the release
//!   that ended it.
//!
//! All packets are on one sequence. Event names are interned (`InternedData.event_names`, sent
//! in the packet that first uses a name: iid = the model's name id + 1), categories and
//! annotation names too (sent in the first packet, which clears the sequence's incremental
//! state). Times are nanoseconds since the trace start on `BUILTIN_CLOCK_BOOTTIME` (trace
//! processor's own trace clock, so nothing is converted); when the session's lanes say when
//! recording began in wall-clock time, a `ClockSnapshot` maps time zero to it on
//! `BUILTIN_CLOCK_REALTIME`.
//!
//! Each packet is encoded and written as the walk reaches it, through a buffer of its own:
//! memory beyond the records does not grow with the output.

mod protos;

use crate::model::{Model, NameId};
use crate::timeline::{self, Closed, Frame, FrameKind, Sink, Stack};
use bootprof_format::trace::{Record, RecordKind};
use protos::*;
use std::collections::HashMap;
use std::io::{self, BufWriter, Write};

/// The sequence every packet is on.
const SEQUENCE: u32 = 1;

/// Event categories, interned: the iid of `CATEGORIES[i]` is `i + 1`.
const CATEGORIES: [&str; 9] = [
    "function", "wait", "blame", "blamed", "event", "hold", "stack", "process", "bootprof",
];

/// An event category (its iid).
#[derive(Clone, Copy)]
enum Category {
    Function = 1,
    Wait,
    Blame,
    Blamed,
    Event,
    Hold,
    Stack,
    Process,
    Bootprof,
}

/// Annotation names, interned: the iid of `ANNOTATIONS[i]` is `i + 1`.
const ANNOTATIONS: [&str; 8] = [
    "arg",
    "what",
    "stack",
    "holder",
    "holder_tid",
    "holder_pid",
    "held_since_ns",
    "released_at_ns",
];

/// An annotation name (its iid).
#[derive(Clone, Copy)]
enum Annotation {
    Arg = 1,
    What,
    Stack,
    Holder,
    HolderTid,
    HolderPid,
    HeldSinceNs,
    ReleasedAtNs,
}

/// Writes the Perfetto trace.
pub fn write(m: &Model, out: &mut dyn Write) -> io::Result<()> {
    let mut w = Perfetto {
        m,
        out: BufWriter::with_capacity(1 << 16, out),
        packet: Vec::with_capacity(256),
        sent: vec![false; m.name_count() + 1],
        blame: None,
        releases: HashMap::new(),
        threads: 1 + m.trace.processes.len().max(1) as u64,
        own_names: 0,
        spare: None,
    };
    w.start()?;
    timeline::walk(m, &mut w)?;
    w.process_ends()?;
    w.losses()?;
    w.out.flush()
}

struct Perfetto<'a, 'm> {
    m: &'a Model<'m>,
    out: BufWriter<&'a mut dyn Write>,
    /// The packet being encoded (reused).
    packet: Vec<u8>,
    /// Per name slot (see [`Perfetto::slot`]): whether its name was sent.
    sent: Vec<bool>,
    /// A blame whose frame opens next: (waiter lane, blame).
    blame: Option<(usize, usize)>,
    /// Flows that end at a RELEASE record, by the record's index: blames shown, not yet ended.
    releases: HashMap<usize, Vec<u64>>,
    /// The uuid of the first thread track (the process tracks come before it, from 1).
    threads: u64,
    /// Names made here so far (see [`Perfetto::own_name`]).
    own_names: u64,
    /// The last event written, for its allocations.
    spare: Option<TrackEvent>,
}

impl Perfetto<'_, '_> {
    /// Writes `packet` as field 1 of `Trace`.
    fn emit(&mut self, packet: &TracePacket) -> io::Result<()> {
        use prost::Message;
        self.packet.clear();
        self.packet.push(0x0a); // field 1, length-delimited
        packet
            .encode_length_delimited(&mut self.packet)
            .map_err(io::Error::other)?;
        self.out.write_all(&self.packet)
    }

    /// The clock snapshot, the packet that starts the sequence, and the tracks.
    fn start(&mut self) -> io::Result<()> {
        if let Some(realtime) = realtime_origin(self.m) {
            let clock = |clock_id, timestamp| Clock {
                clock_id: Some(clock_id),
                timestamp: Some(timestamp),
            };
            self.emit(&TracePacket {
                clock_snapshot: Some(ClockSnapshot {
                    clocks: vec![clock(CLOCK_BOOTTIME, 0), clock(CLOCK_REALTIME, realtime)],
                    primary_trace_clock: Some(CLOCK_BOOTTIME),
                }),
                ..Default::default()
            })?;
        }
        let interned = |names: &[&str]| -> Vec<Interned> {
            (names.iter().enumerate())
                .map(|(i, name)| Interned {
                    iid: Some(i as u64 + 1),
                    name: Some(name.to_string()),
                })
                .collect()
        };
        self.emit(&TracePacket {
            timestamp: Some(0),
            trusted_packet_sequence_id: Some(SEQUENCE),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            trace_packet_defaults: Some(TracePacketDefaults {
                timestamp_clock_id: Some(CLOCK_BOOTTIME),
            }),
            interned_data: Some(InternedData {
                event_categories: interned(&CATEGORIES),
                debug_annotation_names: interned(&ANNOTATIONS),
                ..Default::default()
            }),
            ..Default::default()
        })?;
        let m = self.m;
        let pid = m.trace.header.pid;
        if m.trace.processes.is_empty() {
            self.process_track(1, pid, format!("pid {pid}"), Vec::new())?;
        }
        for (i, p) in m.trace.processes.iter().enumerate() {
            self.process_track(1 + i as u64, p.pid, p.label(), p.args.clone())?;
        }
        for (l, lane) in m.lanes.iter().enumerate() {
            let parent = match lane.process {
                Some(p) => Some(1 + p as u64),
                None if m.trace.processes.is_empty() => Some(1),
                None => None,
            };
            self.emit(&TracePacket {
                timestamp: Some(0),
                trusted_packet_sequence_id: Some(SEQUENCE),
                track_descriptor: Some(TrackDescriptor {
                    uuid: Some(self.threads + l as u64),
                    parent_uuid: parent,
                    thread: Some(ThreadDescriptor {
                        pid: Some(lane.pid as i32),
                        tid: Some(i64::from(lane.tid)),
                        thread_name: Some(lane.label_text()),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })?;
        }
        Ok(())
    }

    fn process_track(
        &mut self,
        uuid: u64,
        pid: u32,
        name: String,
        cmdline: Vec<String>,
    ) -> io::Result<()> {
        self.emit(&TracePacket {
            timestamp: Some(0),
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(uuid),
                process: Some(ProcessDescriptor {
                    pid: Some(pid as i32),
                    cmdline,
                    process_name: Some(name),
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// The slot of `name` in `sent`: the name's id, or the last slot for an id the model does
    /// not hold (a wait without a site); its iid is the slot + 1.
    fn slot(&self, name: NameId) -> usize {
        (name as usize).min(self.m.name_count())
    }

    /// An event packet on `track` at `t`, named `name` (interned here if it is the first use),
    /// or an END (`name` and `category` `None`). Made of the last event packet's allocations
    /// (see [`Perfetto::emit_event`]): the events of a large trace allocate nothing.
    fn event(
        &mut self,
        track: u64,
        t: u64,
        kind: i32,
        name: Option<NameId>,
        category: Option<Category>,
    ) -> TracePacket {
        let mut event = self.spare.take().unwrap_or_default();
        event.category_iids.clear();
        event.category_iids.extend(category.map(|c| c as u64));
        event.debug_annotations.clear();
        event.flow_ids.clear();
        event.terminating_flow_ids.clear();
        event.r#type = Some(kind);
        event.track_uuid = Some(track);
        event.name_iid = None;
        let mut interned_data = None;
        if let Some(name) = name {
            let slot = self.slot(name);
            event.name_iid = Some(slot as u64 + 1);
            if !self.sent[slot] {
                self.sent[slot] = true;
                interned_data = Some(InternedData {
                    event_names: vec![Interned {
                        iid: Some(slot as u64 + 1),
                        name: Some(self.m.frame_label(name).into_owned()),
                    }],
                    ..Default::default()
                });
            }
        }
        TracePacket {
            timestamp: Some(t),
            trusted_packet_sequence_id: Some(SEQUENCE),
            // An END uses nothing interned.
            sequence_flags: name.map(|_| SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data,
            track_event: Some(event),
            ..Default::default()
        }
    }

    /// Writes an event packet made by [`Perfetto::event`] and keeps its allocations for the next.
    fn emit_event(&mut self, mut packet: TracePacket) -> io::Result<()> {
        self.emit(&packet)?;
        self.spare = packet.track_event.take();
        Ok(())
    }

    /// The annotations and the flow of blame `b`'s frame.
    fn blame_details(&mut self, b: usize, event: &mut TrackEvent) {
        let m = self.m;
        let blame = &m.holds.blames[b];
        let holder = &m.lanes[blame.holder];
        let held_since = m.ns(m.trace.records.at(blame.hold).tsc);
        event.debug_annotations = vec![
            annotation(Annotation::Holder).text(holder.label_text()),
            annotation(Annotation::HolderTid).uint(u64::from(holder.tid)),
            annotation(Annotation::HolderPid).uint(u64::from(holder.pid)),
            annotation(Annotation::HeldSinceNs).uint(held_since),
            annotation(Annotation::ReleasedAtNs).uint(blame.end_ns),
        ];
        let flow = b as u64 + 1;
        event.flow_ids.push(flow);
        self.releases.entry(blame.release).or_default().push(flow);
    }

    /// Names `packet`'s event with a name made here, not one of the model's: sent with it, under
    /// an iid past the model's.
    fn own_name(&mut self, packet: &mut TracePacket, name: String) {
        self.own_names += 1;
        let iid = self.m.name_count() as u64 + 1 + self.own_names;
        packet.interned_data = Some(InternedData {
            event_names: vec![Interned {
                iid: Some(iid),
                name: Some(name),
            }],
            ..Default::default()
        });
        if let Some(event) = packet.track_event.as_mut() {
            event.name_iid = Some(iid);
        }
    }

    /// Where each process ended, as [`chrome`](crate::chrome) shows it: in a session, every
    /// process; in a single process's trace, a crash.
    fn process_ends(&mut self) -> io::Result<()> {
        let m = self.m;
        for (i, p) in m.trace.processes.iter().enumerate() {
            let Some(t) = p
                .end_tsc
                .filter(|_| m.many_processes() || p.ending.crashed())
            else {
                continue;
            };
            let mut packet = TracePacket {
                timestamp: Some(m.ns(t)),
                trusted_packet_sequence_id: Some(SEQUENCE),
                sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
                track_event: Some(TrackEvent {
                    category_iids: vec![Category::Process as u64],
                    r#type: Some(TYPE_INSTANT),
                    track_uuid: Some(1 + i as u64),
                    ..Default::default()
                }),
                ..Default::default()
            };
            self.own_name(&mut packet, format!("process end: {}", p.ending));
            self.emit(&packet)?;
        }
        Ok(())
    }

    /// What the trace lost, if anything, and what the report must say of how its frames were
    /// made ([`Model::caveats`]): an instant each on the global track at time zero.
    fn losses(&mut self) -> io::Result<()> {
        if let Some(losses) = self.m.trace.losses() {
            self.global_note("records not shown", losses)?;
        }
        let caveats = self.m.caveats();
        if !caveats.is_empty() {
            self.global_note("bootprof notes", caveats.join("; "))?;
        }
        Ok(())
    }

    /// An instant named `name` on the global track at time zero, saying `what`.
    fn global_note(&mut self, name: &str, what: String) -> io::Result<()> {
        let mut packet = TracePacket {
            timestamp: Some(0),
            trusted_packet_sequence_id: Some(SEQUENCE),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            track_event: Some(TrackEvent {
                category_iids: vec![Category::Bootprof as u64],
                r#type: Some(TYPE_INSTANT),
                debug_annotations: vec![annotation(Annotation::What).text(what)],
                ..Default::default()
            }),
            ..Default::default()
        };
        self.own_name(&mut packet, name.into());
        self.emit(&packet)
    }
}

/// A debug annotation named `name`, without a value yet.
fn annotation(name: Annotation) -> DebugAnnotation {
    DebugAnnotation {
        name_iid: Some(name as u64),
        ..Default::default()
    }
}

impl DebugAnnotation {
    fn text(mut self, value: String) -> DebugAnnotation {
        self.string_value = Some(value);
        self
    }

    fn uint(mut self, value: u64) -> DebugAnnotation {
        self.uint_value = Some(value);
        self
    }
}

/// `CLOCK_REALTIME` nanoseconds at time zero of `m`, if the trace's lanes say when recording
/// began: from the first process's (the earliest lane's) wall-clock time at its start.
fn realtime_origin(m: &Model) -> Option<u64> {
    let p = m.trace.processes.first()?;
    let realtime = p.start_realtime_ns?;
    Some(realtime.saturating_sub(m.ns(p.start_tsc)))
}

fn category(frame: &Frame) -> Category {
    match (frame.mirrored, frame.kind) {
        (true, _) => Category::Blamed,
        (false, FrameKind::Function) => Category::Function,
        (false, FrameKind::Wait) => Category::Wait,
        (false, FrameKind::Blame) => Category::Blame,
    }
}

impl Sink for Perfetto<'_, '_> {
    fn open(&mut self, lane: usize, _below: &[Frame], frame: &Frame) -> io::Result<()> {
        let track = self.threads + lane as u64;
        let (name, category) = (Some(frame.name), Some(category(frame)));
        let mut packet = self.event(track, frame.start, TYPE_SLICE_BEGIN, name, category);
        let blame = self.blame.take();
        if let (Some((waiter, b)), FrameKind::Blame, false) = (blame, frame.kind, frame.mirrored) {
            if waiter == lane {
                if let Some(event) = packet.track_event.as_mut() {
                    self.blame_details(b, event);
                }
            }
        }
        self.emit_event(packet)
    }

    fn close(
        &mut self,
        lane: usize,
        _below: &[Frame],
        _frame: &Frame,
        end: u64,
        _how: Closed,
    ) -> io::Result<()> {
        // An END needs no name: it ends the innermost open slice of its track.
        let track = self.threads + lane as u64;
        let packet = self.event(track, end, TYPE_SLICE_END, None, None);
        self.emit_event(packet)
    }

    fn blame(&mut self, lane: usize, blame: usize, _t: u64) -> io::Result<()> {
        self.blame = Some((lane, blame));
        Ok(())
    }

    fn stack(&mut self, lane: usize, stack: &Stack, t: u64) -> io::Result<()> {
        let track = self.threads + lane as u64;
        let name = self.m.name(stack.record);
        let mut packet = self.event(track, t, TYPE_INSTANT, Some(name), Some(Category::Stack));
        let frames = (stack.frames.iter())
            .map(|f| DebugAnnotation {
                string_value: Some(self.m.frame_text(lane, f.arg)),
                ..Default::default()
            })
            .collect();
        if let Some(event) = packet.track_event.as_mut() {
            event.debug_annotations.push(DebugAnnotation {
                array_values: frames,
                ..annotation(Annotation::Stack)
            });
        }
        self.emit_event(packet)
    }

    fn instant(
        &mut self,
        lane: usize,
        index: usize,
        r: &Record,
        name: NameId,
        t: u64,
    ) -> io::Result<()> {
        let category = match r.kind {
            RecordKind::Event => Category::Event,
            RecordKind::Hold | RecordKind::Release => Category::Hold,
            _ => return Ok(()),
        };
        let track = self.threads + lane as u64;
        let mut packet = self.event(track, t, TYPE_INSTANT, Some(name), Some(category));
        let Some(event) = packet.track_event.as_mut() else {
            return Ok(());
        };
        event
            .debug_annotations
            .push(if r.kind == RecordKind::Event {
                annotation(Annotation::Arg).uint(r.arg)
            } else {
                annotation(Annotation::What).text(r.kind.name().to_string())
            });
        if r.kind == RecordKind::Release && !self.releases.is_empty() {
            if let Some(flows) = self.releases.remove(&index) {
                event.terminating_flow_ids = flows;
            }
        }
        self.emit_event(packet)
    }
}

#[cfg(test)]
mod tests {
    use super::protos::*;
    use crate::trace::{build::TraceBuilder, parse_trace};
    use bootprof_format::trace::RecordKind as K;
    use bootprof_format::Kind;
    use std::collections::HashMap;

    /// `Trace`, to read a whole trace back.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Trace {
        #[prost(message, repeated, tag = "1")]
        packet: Vec<TracePacket>,
    }

    /// A single process's trace file (no session): one process track `pid N`; a wait without a
    /// site and an EXIT without its ENTER; a recorded stack; dropped records. Every event's name
    /// and category is interned before or with it, and slices balance per track.
    #[test]
    fn a_trace_file_reads_back_balanced_with_every_name_interned() {
        let mut b = TraceBuilder::new(7, 1_000_000_000, 0);
        b.header.dropped = 5;
        let main = b.site(Kind::Fentry, "", "__fentry__", "main", 0x1000, 0);
        let exit = b.site(Kind::CygExit, "", "__cyg_profile_func_exit", "g", 0x1200, 8);
        let hit = b.site(Kind::Probe, "app", "hit", "main", 0x1020, 0x20);
        b.thread(7, Some("t"));
        b.record(1000, 7, K::Enter, main, 0);
        b.record(2000, 7, K::Exit, exit, 0);
        b.record(3000, 7, K::Event, hit, 9);
        b.record(3000, 7, K::Frame, hit, 0x1020);
        b.record(3000, 7, K::Frame, hit, 0x7f00_0000_0000);
        b.no_site(4000, 7, K::Wait);
        b.record(5000, 7, K::Event, hit, 10);
        let trace = parse_trace(&b.bytes(), "t").unwrap();
        let mut out = Vec::new();
        crate::write_report(
            &trace,
            crate::Format::Perfetto,
            &Default::default(),
            &mut out,
        )
        .unwrap();
        let decoded = <Trace as prost::Message>::decode(&out[..]).unwrap();
        let mut names: HashMap<u64, String> = HashMap::new();
        let mut categories: HashMap<u64, String> = HashMap::new();
        let mut open: HashMap<u64, Vec<String>> = HashMap::new();
        let mut seen = Vec::new();
        let mut processes = Vec::new();
        for (i, p) in decoded.packet.iter().enumerate() {
            let interned = p.interned_data.clone().unwrap_or_default();
            names.extend(
                interned
                    .event_names
                    .into_iter()
                    .map(|n| (n.iid.unwrap(), n.name.unwrap())),
            );
            categories.extend(
                (interned.event_categories.into_iter()).map(|n| (n.iid.unwrap(), n.name.unwrap())),
            );
            if i == 0 {
                assert_eq!(p.sequence_flags, Some(SEQ_INCREMENTAL_STATE_CLEARED));
            }
            if let Some(process) = p.track_descriptor.as_ref().and_then(|d| d.process.as_ref()) {
                processes.push((process.pid, process.process_name.clone()));
            }
            let Some(e) = &p.track_event else { continue };
            let stack = open.entry(e.track_uuid.unwrap_or(0)).or_default();
            if e.r#type == Some(TYPE_SLICE_END) {
                stack.pop().expect("an END with no slice open");
                continue;
            }
            let name = names[&e.name_iid.unwrap()].clone();
            let category = &categories[&e.category_iids[0]];
            if e.r#type == Some(TYPE_SLICE_BEGIN) {
                stack.push(name.clone());
            }
            let args: Vec<String> = (e.debug_annotations.iter())
                .map(|a| match (&a.string_value, a.uint_value) {
                    (Some(s), _) => s.clone(),
                    (None, Some(n)) => n.to_string(),
                    _ => (a.array_values.iter())
                        .map(|v| v.string_value.clone().unwrap())
                        .collect::<Vec<_>>()
                        .join(" "),
                })
                .collect();
            seen.push(format!(
                "{} {category} {name} {}",
                p.timestamp.unwrap(),
                args.join(",")
            ));
        }
        assert!(open.values().all(|s| s.is_empty()), "{open:?}");
        assert_eq!(processes, [(Some(7), Some("pid 7".to_string()))]);
        assert_eq!(
            seen,
            [
                // Recorded without --graph: main has entries only.
                "1000 function main (inferred) ",
                "3000 stack app:hit main+0x20 0x7f0000000000",
                "3000 event app:hit 9",
                "4000 wait ? ",
                "5000 event app:hit 10",
                "0 bootprof records not shown 5 records were dropped (the recording buffer was full)",
                "0 bootprof bootprof notes 1 function has entries only (-pg/-mfentry hooks \
                 recorded without `bootprof run --graph`): when it returned is inferred from \
                 later calls, so its durations and stacks are estimates, marked (inferred)",
            ]
        );
    }
}
