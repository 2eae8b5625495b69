//! The stacks over time: takes a [`Model`]; walks its records once, in order, keeping a stack of
//! frames per thread, and hands each frame to a [`Sink`] when it opens and when it closes.
//!
//! * ENTER pushes a function frame; EXIT pops down to the innermost open frame of that name
//!   (frames above it are closed as [`Closed::Inferred`]); an EXIT with no such frame is
//!   dropped. WAIT pushes a `wait:<what>` frame, UNWAIT pops it.
//! * Hooks such as `__fentry__` and `mcount` record ENTER only, unless the program ran with
//!   `bootprof run --graph` (then their EXITs are recorded too). For an ENTER from a hook, the
//!   argument is the caller's address (its return address): if the instrumented function
//!   containing it (within [`crate::model::FRAME_REACH`] of its start) is open on the thread's
//!   stack, with only frames that never see an EXIT above it, those frames have returned and
//!   are closed ([`Closed::Inferred`]) before the new one opens; else the new frame opens on top
//!   of the stack as it is. For functions with entries only ([`Model::entry_only`]) both the
//!   returns and the nesting are therefore inferred: the formats mark such frames.
//! * Records a report-time filter left out ([`Model::left_out`]) are skipped.
//! * Blame ([`crate::holds`]): while a waiting thread W is blamed on a holder H, W's
//!   `wait:<what>` frame is replaced by `wait:<what> (blamed on H)` and H's stack is copied on
//!   top of it; every push and pop on H is repeated on W (and on whoever is blamed on W), as a
//!   frame marked `mirrored`. A record of W's own that changes its stack ends the blame first.
//! * A record whose call stack was recorded (`bootprof run --stacktrace`) is handed to
//!   [`Sink::stack`] first, with the stack's frames named outermost first (the thread's own
//!   stack of frames is left as the records build it). FRAME records are not walked otherwise.
//! * Frames still open when the records end close where their thread's process ended (a
//!   session's), else at the last record's time ([`Closed::End`]).
//!   Stacks deeper than [`MAX_DEPTH`] are not followed further (the frames are counted, not
//!   shown), which keeps memory bounded for traces of ENTERs that never return.

use crate::model::{Model, NameId, NO_NAME};
use bootprof_format::trace::{Record, RecordKind};
use std::io;

/// Frames deeper than this are counted but not kept.
pub const MAX_DEPTH: usize = 2048;

/// What a frame stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// A function, or a region annotated with `BOOTPROF_ENTER`/`EXIT`.
    Function,
    /// A wait (`wait:<what>`).
    Wait,
    /// A wait blamed on a holder (`wait:<what> (blamed on H)`).
    Blame,
}

/// An open frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Its name.
    pub name: NameId,
    /// When it opened, ns.
    pub start: u64,
    /// Total time of the frames directly above it that have closed, ns.
    pub children: u64,
    /// What it is.
    pub kind: FrameKind,
    /// Whether it is a copy of a holder's frame shown on a waiting thread.
    pub mirrored: bool,
}

/// Why a frame closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// By its own EXIT (or UNWAIT, or the end of its blame).
    Exit,
    /// Because a frame below it closed, or a later ENTER showed it had returned.
    Inferred,
    /// The trace ended first.
    End,
}

/// A call stack recorded at a hit (`bootprof run --stacktrace`).
#[derive(Debug, Clone, Copy)]
pub struct Stack<'a> {
    /// The hit's record.
    pub record: &'a Record,
    /// Its FRAME records, innermost first: the site's address, then return addresses.
    pub frames: &'a [Record],
    /// The path a flame graph shows: the frames' functions outermost first (`[unknown]` where no
    /// instrumented function holds the address), then the hit's own name unless it is an ENTER
    /// or EXIT (whose name is the innermost function already). The frames outside the outermost
    /// one an instrumented function holds (the C library's start-up code, mostly) are left
    /// out, so the path starts where the thread's own frames do.
    pub path: &'a [NameId],
}

/// Receives the frames as they open and close. `below` is the stack under the frame (its
/// length is the frame's depth).
pub trait Sink {
    /// A frame opens.
    fn open(&mut self, _lane: usize, _below: &[Frame], _frame: &Frame) -> io::Result<()> {
        Ok(())
    }
    /// A frame closes at `end`.
    fn close(
        &mut self,
        lane: usize,
        below: &[Frame],
        frame: &Frame,
        end: u64,
        how: Closed,
    ) -> io::Result<()>;
    /// A record with a recorded call stack, at `t` (before the record itself is walked).
    fn stack(&mut self, _lane: usize, _stack: &Stack, _t: u64) -> io::Result<()> {
        Ok(())
    }
    /// Blame `blame` (an index into the model's `holds.blames`) starts showing on its waiter
    /// `lane` at `t`: its blame frame opens next.
    fn blame(&mut self, _lane: usize, _blame: usize, _t: u64) -> io::Result<()> {
        Ok(())
    }
    /// A record that is not about the stack (EVENT, HOLD, RELEASE, THREAD), record `index` of
    /// the trace, at `t`.
    fn instant(
        &mut self,
        _lane: usize,
        _index: usize,
        _record: &Record,
        _name: NameId,
        _t: u64,
    ) -> io::Result<()> {
        Ok(())
    }
}

struct Active {
    blame: usize,
    holder: usize,
    /// Index of the blame frame on the waiter's stack.
    base: usize,
}

#[derive(Default)]
struct LaneState {
    stack: Vec<Frame>,
    /// Frames pushed beyond [`MAX_DEPTH`].
    hidden: usize,
    blame: Option<Active>,
    /// Lanes currently showing a copy of this one.
    mirrors: Vec<usize>,
}

struct Walker<'a, 'm, S: Sink> {
    model: &'a Model<'m>,
    lanes: Vec<LaneState>,
    sink: &'a mut S,
    /// The path of the last recorded stack (reused).
    path: Vec<NameId>,
}

/// Walks `model`'s records, feeding `sink`.
pub fn walk<S: Sink>(model: &Model, sink: &mut S) -> io::Result<()> {
    let records = &model.trace.records;
    let mut w = Walker {
        model,
        lanes: (0..model.lanes.len())
            .map(|_| LaneState::default())
            .collect(),
        sink,
        path: Vec::new(),
    };
    // Blame starts (after a record) and ends (before one), by record index.
    let mut starts: Vec<(usize, usize)> = (model.holds.blames.iter().enumerate())
        .map(|(b, blame)| (blame.start, b))
        .collect();
    let mut ends: Vec<(usize, usize)> = (model.holds.blames.iter().enumerate())
        .map(|(b, blame)| (blame.release, b))
        .collect();
    starts.sort_unstable();
    ends.sort_unstable();
    let (mut next_start, mut next_end) = (0, 0);
    let mut last_tid = None;
    let mut lane = 0;
    let mut iter = records.iter();
    let mut i = 0;
    while let Some(r) = iter.next() {
        let t = model.ns(r.tsc);
        while next_end < ends.len() && ends[next_end].0 == i {
            let b = ends[next_end].1;
            let waiter = model.holds.blames[b].waiter;
            if w.lanes[waiter].blame.as_ref().is_some_and(|a| a.blame == b) {
                w.end_blame(waiter, t)?;
            }
            next_end += 1;
        }
        if last_tid != Some(r.tid) {
            lane = model.lane(r.tid);
            last_tid = Some(r.tid);
        }
        // A blame that starts at its WAIT opens the blame frame instead of the wait frame.
        let at_wait = (r.kind == RecordKind::Wait)
            .then(|| {
                starts[next_start..]
                    .iter()
                    .take_while(|&&(s, _)| s == i)
                    .find(|&&(_, b)| model.holds.blames[b].waiter == lane)
            })
            .flatten();
        // A call a report-time filter left out is not there, nor is its recorded stack.
        let left_out = model.left_out(i);
        if !left_out {
            w.stack(lane, &r, iter.ahead(), t)?;
        }
        match at_wait {
            Some(&(_, b)) => w.start_blame(b, t, true)?,
            None if r.kind == RecordKind::Frame || left_out => {}
            None => w.record(lane, i, &r, t)?,
        }
        while next_start < starts.len() && starts[next_start].0 == i {
            if Some(&starts[next_start]) != at_wait {
                w.start_blame(starts[next_start].1, t, false)?;
            }
            next_start += 1;
        }
        i += 1;
    }
    // Frames still open close where their thread's process ended (the trace's end for one
    // process).
    for l in 0..w.lanes.len() {
        if w.lanes[l].blame.is_some() {
            w.end_blame(l, model.lane_end_ns(l))?;
        }
    }
    for l in 0..w.lanes.len() {
        let end = model.lane_end_ns(l);
        while !w.lanes[l].stack.is_empty() || w.lanes[l].hidden > 0 {
            w.pop(l, end, Closed::End)?;
        }
    }
    Ok(())
}

impl<S: Sink> Walker<'_, '_, S> {
    /// Hands the call stack recorded at `record` (followed by `after`) to the sink, if it has
    /// one.
    fn stack(&mut self, lane: usize, record: &Record, after: &[Record], t: u64) -> io::Result<()> {
        let m = self.model;
        let frames = m.stack_of(record, after);
        if frames.is_empty() {
            return Ok(());
        }
        // Outermost first, from the outermost frame an instrumented function holds (or all of
        // them, when none does).
        let outermost = (frames.iter())
            .rposition(|f| m.frame_function(lane, f.arg).is_some())
            .unwrap_or(frames.len() - 1);
        self.path.clear();
        let names = frames[..=outermost].iter().rev();
        self.path.extend(names.map(|f| m.frame_name(lane, f.arg)));
        if !matches!(record.kind, RecordKind::Enter | RecordKind::Exit) {
            self.path.push(m.name(record));
        }
        let stack = Stack {
            record,
            frames,
            path: &self.path,
        };
        self.sink.stack(lane, &stack, t)
    }

    /// Record `i`, `r`, of `lane` at `t`.
    fn record(&mut self, lane: usize, i: usize, r: &Record, t: u64) -> io::Result<()> {
        let m = self.model;
        let changes_stack = matches!(
            r.kind,
            RecordKind::Enter | RecordKind::Exit | RecordKind::Wait | RecordKind::Unwait
        );
        if changes_stack && self.lanes[lane].blame.is_some() {
            self.end_blame(lane, t)?;
        }
        match r.kind {
            RecordKind::Enter => {
                let name = m.name(r);
                if let (Some(address), 0) = (m.parent(r), self.lanes[lane].hidden) {
                    if let Some((_, parent)) = m.frame_function(lane, address) {
                        self.return_to(lane, parent, t)?;
                    }
                }
                self.push(lane, Frame::new(name, t, FrameKind::Function, false))
            }
            RecordKind::Exit => self.pop_to(lane, m.name(r), FrameKind::Function, t),
            RecordKind::Wait => {
                let name = m.wait_frame(r);
                self.push(lane, Frame::new(name, t, FrameKind::Wait, false))
            }
            RecordKind::Unwait => self.pop_to(lane, m.wait_frame(r), FrameKind::Wait, t),
            _ => self.sink.instant(lane, i, r, m.name(r), t),
        }
    }

    /// Closes the frames above the innermost open `parent` if all of them never see an EXIT.
    fn return_to(&mut self, lane: usize, parent: NameId, t: u64) -> io::Result<()> {
        let stack = &self.lanes[lane].stack;
        let mut keep = None;
        for (i, f) in stack.iter().enumerate().rev() {
            if f.name == parent && f.kind == FrameKind::Function {
                keep = Some(i + 1);
                break;
            }
            if f.kind != FrameKind::Function || self.model.has_exit(f.name) {
                break;
            }
        }
        if let Some(keep) = keep {
            while self.lanes[lane].stack.len() > keep {
                self.pop(lane, t, Closed::Inferred)?;
            }
        }
        Ok(())
    }

    /// Pops down to and including the innermost open frame named `name` of `kind`; nothing if
    /// there is none (an unmatched EXIT). With frames hidden beyond the depth limit, the
    /// innermost hidden one is taken to be it.
    fn pop_to(&mut self, lane: usize, name: NameId, kind: FrameKind, t: u64) -> io::Result<()> {
        if self.lanes[lane].hidden > 0 {
            return self.pop(lane, t, Closed::Exit);
        }
        let found = self.lanes[lane]
            .stack
            .iter()
            .rposition(|f| f.name == name && f.kind == kind && !f.mirrored);
        if let (Some(i), true) = (found, name != NO_NAME) {
            while self.lanes[lane].stack.len() > i + 1 {
                self.pop(lane, t, Closed::Inferred)?;
            }
            self.pop(lane, t, Closed::Exit)?;
        }
        Ok(())
    }

    fn push(&mut self, lane: usize, frame: Frame) -> io::Result<()> {
        let state = &mut self.lanes[lane];
        if state.stack.len() >= MAX_DEPTH || state.hidden > 0 {
            state.hidden += 1;
        } else {
            self.sink.open(lane, &state.stack, &frame)?;
            state.stack.push(frame);
        }
        for i in 0..self.lanes[lane].mirrors.len() {
            let m = self.lanes[lane].mirrors[i];
            self.push(
                m,
                Frame {
                    mirrored: true,
                    ..frame
                },
            )?;
        }
        Ok(())
    }

    fn pop(&mut self, lane: usize, t: u64, how: Closed) -> io::Result<()> {
        let state = &mut self.lanes[lane];
        if state.hidden > 0 {
            state.hidden -= 1;
        } else if let Some(frame) = state.stack.pop() {
            let duration = t.saturating_sub(frame.start);
            self.sink.close(lane, &state.stack, &frame, t, how)?;
            if let Some(parent) = state.stack.last_mut() {
                parent.children = parent.children.saturating_add(duration);
            }
        } else {
            return Ok(());
        }
        for i in 0..self.lanes[lane].mirrors.len() {
            let m = self.lanes[lane].mirrors[i];
            self.pop(m, t, how)?;
        }
        Ok(())
    }

    /// Starts blame `b` at `t` if its waiter is still waiting on top of its stack, or, when
    /// `at_wait`, is starting to wait now (its WAIT record is the current one).
    fn start_blame(&mut self, b: usize, t: u64, at_wait: bool) -> io::Result<()> {
        let blame = &self.model.holds.blames[b];
        let (waiter, holder) = (blame.waiter, blame.holder);
        if at_wait {
            // The WAIT is the waiter's own record: it ends whatever blame it showed.
            self.end_blame(waiter, t)?;
        }
        let w = &self.lanes[waiter];
        let h = &self.lanes[holder];
        let waiting = at_wait
            || w.stack
                .last()
                .is_some_and(|f| f.kind == FrameKind::Wait && !f.mirrored && f.name == blame.wait);
        let blocked = !waiting || w.blame.is_some() || w.hidden > 0 || h.hidden > 0;
        if blocked || self.cycle(waiter, holder) {
            if at_wait {
                // Not blamed after all: an ordinary wait.
                let wait = Frame::new(blame.wait, t, FrameKind::Wait, false);
                return self.push(waiter, wait);
            }
            return Ok(());
        }
        if !at_wait {
            self.pop(waiter, t, Closed::Exit)?;
        }
        self.sink.blame(waiter, b, t)?;
        self.push(waiter, Frame::new(blame.frame, t, FrameKind::Blame, false))?;
        let base = self.lanes[waiter].stack.len() - 1;
        let copied: Vec<Frame> = self.lanes[holder].stack.clone();
        for f in copied {
            self.push(
                waiter,
                Frame {
                    start: t,
                    children: 0,
                    mirrored: true,
                    ..f
                },
            )?;
        }
        self.lanes[waiter].blame = Some(Active {
            blame: b,
            holder,
            base,
        });
        self.lanes[holder].mirrors.push(waiter);
        Ok(())
    }

    /// Whether `holder` shows `waiter` already, directly or through others: blaming would
    /// make a cycle.
    fn cycle(&self, waiter: usize, holder: usize) -> bool {
        let mut x = holder;
        while let Some(a) = &self.lanes[x].blame {
            if a.holder == waiter {
                return true;
            }
            x = a.holder;
        }
        false
    }

    /// Ends the blame on `waiter` at `t`: closes the copies and the blame frame, and reopens
    /// the plain wait frame.
    fn end_blame(&mut self, waiter: usize, t: u64) -> io::Result<()> {
        let Some(active) = self.lanes[waiter].blame.take() else {
            return Ok(());
        };
        self.lanes[active.holder].mirrors.retain(|&m| m != waiter);
        while self.lanes[waiter].stack.len() > active.base + 1 || self.lanes[waiter].hidden > 0 {
            self.pop(waiter, t, Closed::Inferred)?;
        }
        self.pop(waiter, t, Closed::Exit)?;
        let blame = &self.model.holds.blames[active.blame];
        let wait = Frame::new(blame.wait, t, FrameKind::Wait, false);
        self.push(waiter, wait)
    }
}

impl Frame {
    fn new(name: NameId, start: u64, kind: FrameKind, mirrored: bool) -> Frame {
        Frame {
            name,
            start,
            children: 0,
            kind,
            mirrored,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{build::TraceBuilder, parse_trace};
    use bootprof_format::Kind;

    /// Checks what every sink relies on: per lane, frames close innermost first, never before
    /// they open, and copies of a holder's frames sit above a blame frame.
    struct Check {
        open: Vec<Vec<Frame>>,
        frames: usize,
        blamed: usize,
    }

    impl Sink for Check {
        fn open(&mut self, lane: usize, below: &[Frame], frame: &Frame) -> io::Result<()> {
            assert_eq!(below.len(), self.open[lane].len(), "depth");
            if frame.mirrored {
                assert!(
                    below.iter().any(|f| f.kind == FrameKind::Blame),
                    "copy without blame"
                );
                self.blamed += 1;
            }
            self.open[lane].push(*frame);
            Ok(())
        }

        fn close(
            &mut self,
            lane: usize,
            below: &[Frame],
            frame: &Frame,
            end: u64,
            _how: Closed,
        ) -> io::Result<()> {
            let top = self.open[lane].pop().expect("close without open");
            assert_eq!((top.name, top.start), (frame.name, frame.start));
            assert_eq!(below.len(), self.open[lane].len());
            assert!(end >= frame.start);
            assert!(
                frame.children <= end - frame.start,
                "children outlast their parent"
            );
            self.frames += 1;
            Ok(())
        }
    }

    /// Random ENTER/EXIT/WAIT/UNWAIT/HOLD/RELEASE on three threads that wait for and hold the
    /// same two things (so blame chains and would-be cycles happen), at every depth.
    #[test]
    fn random_traces_keep_stacks_consistent() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut frames, mut blamed) = (0, 0);
        for round in 0..300 {
            let mut b = TraceBuilder::new(1, 1_000_000_000, 0);
            let mut sites = Vec::new();
            for f in ["a", "b", "c"] {
                let at = 0x1000 * (sites.len() as u64 + 1);
                sites.push((
                    RecordKind::Enter,
                    b.site(Kind::Fentry, "", "__fentry__", f, at, 0),
                ));
                let exit = b.site(Kind::CygExit, "", "__cyg_profile_func_exit", f, at + 8, 8);
                sites.push((RecordKind::Exit, exit));
            }
            for what in ["x", "y"] {
                for (p, kind) in [
                    ("bpwait", RecordKind::Wait),
                    ("bpunwait", RecordKind::Unwait),
                    ("bphold", RecordKind::Hold),
                    ("bprelease", RecordKind::Release),
                ] {
                    sites.push((kind, b.site(Kind::Probe, p, what, "f", 0x9000, 4)));
                }
            }
            let mut tsc = 0;
            for _ in 0..(20 + round % 200) {
                tsc += next() % 3;
                let (kind, site) = sites[(next() % sites.len() as u64) as usize];
                let arg = 0x1000 * (1 + next() % 4) + 4;
                b.record(tsc, 1 + (next() % 3) as u32, kind, site, arg);
            }
            let trace = parse_trace(&b.bytes(), "random").unwrap();
            let mut model = Model::new(&trace);
            crate::holds::blame(&mut model);
            let mut check = Check {
                open: vec![Vec::new(); model.lanes.len()],
                frames: 0,
                blamed: 0,
            };
            walk(&model, &mut check).unwrap();
            assert!(check.open.iter().all(|s| s.is_empty()), "frames left open");
            frames += check.frames;
            blamed += check.blamed;
        }
        assert!(
            frames > 1000 && blamed > 10,
            "{frames} frames, {blamed} copies"
        );
    }
}
