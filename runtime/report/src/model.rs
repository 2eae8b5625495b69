//! What every format needs besides the records: takes a [`Trace`]; hands on interned names
//! (one per site and record kind, by `bootprof_format::trace::display_name`), one lane per
//! thread that has records (with its name and first record), times in nanoseconds since the
//! trace start, the function containing an address, the call stacks recorded at hits (the
//! FRAME records after them), and the waits and their blame (found by [`crate::holds`]).
//!
//! The trace starts at the header's start TSC, or at the first record if one is earlier.
//! Nanoseconds are computed exactly from the TSC and its frequency, and saturate at `u64::MAX`
//! (584 years), as do the sums of durations the formats make: only the TSCs of a damaged trace
//! get there, and a sum that wrapped would show such a trace as a short one.

use crate::trace::Trace;
use bootprof_format::trace::{display_name, Record, RecordKind, NO_SITE};
use std::collections::HashMap;

/// An interned name.
pub type NameId = u32;

/// One thread that has records.
#[derive(Debug, Clone)]
pub struct Lane {
    /// Thread id.
    pub tid: u32,
    /// The `tid` its records carry (the thread id, unless two processes of a session share it).
    pub key: u32,
    /// Its process's pid.
    pub pid: u32,
    /// Its process, in a session (an index into the trace's `processes`).
    pub process: Option<usize>,
    /// Its process's label (`name-pid`) interned, in a session; else [`NO_NAME`].
    pub process_label: NameId,
    /// Its name: from its last THREAD record (`BOOTPROF_THREAD(name)`), else from the trace's
    /// thread table (the recorder reads `/proc/.../comm`).
    pub name: Option<String>,
    /// The name, or the tid when it has none, interned (the root of its folded stacks).
    pub label: NameId,
    /// Index of its first record (when the thread was first seen: its "creation").
    pub first: usize,
    /// Nanoseconds of its first and last record.
    pub first_ns: u64,
    /// See `first_ns`.
    pub last_ns: u64,
}

impl Lane {
    /// The name, or the tid.
    pub fn label_text(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.tid.to_string())
    }
}

/// A trace made ready for the formats.
pub struct Model<'t> {
    /// The trace.
    pub trace: &'t Trace,
    /// The TSC of time zero.
    pub origin: u64,
    /// Nanoseconds of the last record (0 for an empty trace).
    pub end_ns: u64,
    /// The threads with records, in the order they first appear.
    pub lanes: Vec<Lane>,
    /// Waits and blame.
    pub holds: Holds,
    names: Vec<String>,
    index: HashMap<String, NameId>,
    lane_of: HashMap<u32, usize>,
    /// Per site: its name as an ENTER/EXIT (the function) and as anything else.
    site_func: Vec<NameId>,
    site_other: Vec<NameId>,
    /// Per site: `wait:<what>`, interned for the sites some WAIT or UNWAIT record uses.
    site_wait: Vec<NameId>,
    /// Per site: whether it is a function hook.
    site_hook: Vec<bool>,
    /// Per name: whether some EXIT record ends a region of that name.
    has_exit: Vec<bool>,
    /// Per name: whether a function hook's ENTER record opens a frame of that name.
    hook_enter: Vec<bool>,
    /// Records left out by a report-time filter ([`Model::filter`]), by index, and what it said.
    filtered: Option<crate::filter::Filtered>,
    /// Process, start address and name of every function that holds a site, sorted.
    functions: Vec<(usize, u64, NameId)>,
    no_site: NameId,
    /// `[unknown]`: a frame of a recorded stack that no instrumented function holds.
    unknown: NameId,
    /// The symbol of each function name that is a demangled one.
    symbols: HashMap<NameId, String>,
    mul: u64,
    /// The source lines of the sites and frames (`--srcline`), and per name the distinct lines
    /// of its sites.
    sources: Option<(crate::srcline::SourceLines, HashMap<NameId, String>)>,
}

/// How far past the start of the nearest instrumented function below it an address of a recorded
/// stack may lie and still be shown as in that function; beyond, it is unknown (the site table
/// knows where functions start, not where they end: an address in a library or in a function
/// without sites lies past the last known start).
pub const FRAME_REACH: u64 = 64 << 10;

/// One wait of one thread.
#[derive(Debug, Clone)]
pub struct Wait {
    /// The waiting lane.
    pub lane: usize,
    /// What it waited for (the annotation's name).
    pub what: NameId,
    /// Its frame, `wait:<what>`.
    pub frame: NameId,
    /// Index of the WAIT record.
    pub start: usize,
    /// Index of the UNWAIT record, or `None` if the trace ends first.
    pub end: Option<usize>,
    /// Index into [`Holds::blames`], if someone is blamed.
    pub blame: Option<usize>,
}

/// A wait blamed on a holder.
#[derive(Debug, Clone)]
pub struct Blame {
    /// The waiting lane.
    pub waiter: usize,
    /// The lane blamed.
    pub holder: usize,
    /// What was waited for.
    pub what: NameId,
    /// The waiter's frame outside the blamed time, `wait:<what>`.
    pub wait: NameId,
    /// Index of the holder's HOLD record.
    pub hold: usize,
    /// Index of the record after which the blame starts (the latest of WAIT, HOLD and the
    /// holder's first record).
    pub start: usize,
    /// Index of the holder's RELEASE record, where the blame ends.
    pub release: usize,
    /// Nanoseconds at the start and the end of the blame.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// The frame shown over the holder's stacks, `wait:<what> (blamed on <holder>)`.
    pub frame: NameId,
}

/// The waits of a trace and their blame, as [`holds`](crate::holds) finds them.
#[derive(Debug, Clone, Default)]
pub struct Holds {
    /// Every wait, in the order the WAIT records come.
    pub waits: Vec<Wait>,
    /// The blamed ones, in the order of their waits.
    pub blames: Vec<Blame>,
}

/// What follows the name of a frame of a function with entries only (see
/// [`Model::frame_label`]): its return, and so its duration and what it is nested in, were
/// inferred.
pub const INFERRED: &str = " (inferred)";

/// No name.
pub const NO_NAME: NameId = NameId::MAX;

impl<'t> Model<'t> {
    /// Prepares `trace`.
    pub fn new(trace: &'t Trace) -> Model<'t> {
        let first_tsc = trace.records.first().map_or(u64::MAX, |r| r.tsc);
        let mut m = Model {
            trace,
            origin: trace.header.start_tsc.min(first_tsc),
            end_ns: 0,
            lanes: Vec::new(),
            holds: Holds::default(),
            names: Vec::new(),
            index: HashMap::new(),
            lane_of: HashMap::new(),
            site_func: Vec::with_capacity(trace.sites.len()),
            site_other: Vec::with_capacity(trace.sites.len()),
            site_wait: vec![NO_NAME; trace.sites.len()],
            site_hook: trace.sites.iter().map(|s| s.kind.is_hook()).collect(),
            has_exit: Vec::new(),
            hook_enter: Vec::new(),
            filtered: None,
            functions: Vec::new(),
            no_site: 0,
            unknown: 0,
            symbols: HashMap::new(),
            mul: 1_000_000_000,
            sources: None,
        };
        m.no_site = m.intern("-");
        m.unknown = m.intern("[unknown]");
        for site in &trace.sites {
            let (p, n, f) = (&*site.provider, &*site.name, &*site.function);
            let func = display_name(RecordKind::Enter, p, n, f).to_string();
            let func = if func.is_empty() {
                format!("{:#x}", site.address)
            } else {
                func
            };
            let other = display_name(RecordKind::Event, p, n, f).to_string();
            let func_id = m.intern(&func);
            if let Some(symbol) = &site.symbol {
                m.symbols.entry(func_id).or_insert_with(|| symbol.clone());
            }
            m.site_func.push(func_id);
            let other_id = m.intern(&other);
            m.site_other.push(other_id);
            if !site.function.is_empty() {
                let start = site.address.wrapping_sub(u64::from(site.func_offset));
                m.functions.push((site.process, start, func_id));
            }
        }
        m.functions.sort_unstable();
        m.functions.dedup_by_key(|f| (f.0, f.1));
        m.end_ns = trace.records.last().map_or(0, |r| m.ns(r.tsc));
        m.read_lanes();
        m
    }

    /// One pass over the records: the lanes, their names from THREAD records, which names
    /// have EXITs.
    fn read_lanes(&mut self) {
        let m = self;
        let trace = m.trace;
        let mut thread_names: HashMap<u32, Option<String>> =
            trace.threads.iter().cloned().collect();
        let mut named: HashMap<u32, String> = HashMap::new();
        // The lane of the previous record: records come in runs of one thread's.
        let mut last: Option<(u32, usize)> = None;
        for (i, r) in trace.records.iter().enumerate() {
            let known = match last {
                Some((tid, l)) if tid == r.tid => Some(l),
                _ => m.lane_of.get(&r.tid).copied(),
            };
            let lane = match known {
                Some(l) => l,
                None => {
                    let l = m.lanes.len();
                    m.lane_of.insert(r.tid, l);
                    let process = trace.process_of(r.tid);
                    let process_label = match process {
                        Some((_, p)) => m.intern(&p.label()),
                        None => NO_NAME,
                    };
                    m.lanes.push(Lane {
                        tid: trace.real_tid(r.tid),
                        key: r.tid,
                        pid: process.map_or(trace.header.pid, |(_, p)| p.pid),
                        process: process.map(|(i, _)| i),
                        process_label,
                        name: None,
                        label: NO_NAME,
                        first: i,
                        first_ns: m.ns(r.tsc),
                        last_ns: 0,
                    });
                    l
                }
            };
            last = Some((r.tid, lane));
            m.lanes[lane].last_ns = m.ns(r.tsc);
            match r.kind {
                RecordKind::Exit => {
                    let name = m.name(&r);
                    set(&mut m.has_exit, name);
                }
                RecordKind::Enter if m.is_hook(&r) => {
                    let name = m.name(&r);
                    set(&mut m.hook_enter, name);
                }
                RecordKind::Thread if r.site != NO_SITE => {
                    let name = &trace.sites[r.site as usize].name;
                    if !name.is_empty() {
                        named.insert(r.tid, name.clone());
                    }
                }
                RecordKind::Wait | RecordKind::Unwait if r.site != NO_SITE => {
                    let s = r.site as usize;
                    if m.site_wait[s] == NO_NAME {
                        let name = format!("wait:{}", m.names[m.site_other[s] as usize]);
                        m.site_wait[s] = m.intern(&name);
                    }
                }
                _ => {}
            }
        }
        for (tid, name) in named {
            thread_names.insert(tid, Some(name));
        }
        for l in 0..m.lanes.len() {
            let name = thread_names.get(&m.lanes[l].key).cloned().flatten();
            m.lanes[l].name = name;
            let label = m.lanes[l].label_text();
            m.lanes[l].label = m.intern(&label);
        }
    }

    /// The id of `name`, interned.
    pub fn intern(&mut self, name: &str) -> NameId {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.names.len() as NameId;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), id);
        id
    }

    /// The symbol of a function name that [`Trace::demangle_names`] demangled (the first one's,
    /// when two symbols demangle alike, as a C++ constructor's variants do).
    pub fn symbol(&self, id: NameId) -> Option<&str> {
        self.symbols.get(&id).map(String::as_str)
    }

    /// Shows `sources` (`--srcline`): the line of each site, of each name (the distinct lines
    /// of the sites that carry it: a function's name its first line, a probe's or an
    /// annotation's name the site's own), and of each frame.
    pub fn set_sources(&mut self, sources: crate::srcline::SourceLines) {
        let mut lines: HashMap<NameId, Vec<&str>> = HashMap::new();
        for (i, site) in self.trace.sites.iter().enumerate() {
            let i32 = i as u32;
            let function = (self.site_func[i], sources.function(i32));
            let own = (self.site_other[i], sources.site(i32));
            for (name, line) in
                [function, own]
                    .into_iter()
                    .take(if site.kind.is_hook() { 1 } else { 2 })
            {
                let Some(line) = line else {
                    continue;
                };
                let known = lines.entry(name).or_default();
                if !known.contains(&line) {
                    known.push(line);
                }
            }
        }
        let by_name = lines
            .into_iter()
            .map(|(name, mut l)| {
                l.sort_unstable();
                (name, l.join(", "))
            })
            .collect();
        self.sources = Some((sources, by_name));
    }

    /// Whether the source lines are shown (`--srcline`).
    pub fn shows_sources(&self) -> bool {
        self.sources.is_some()
    }

    /// `file:line` of site `site` (`--srcline`).
    pub fn site_source(&self, site: u32) -> Option<&str> {
        self.sources.as_ref()?.0.site(site)
    }

    /// `file:line` of the first instruction of the function holding site `site` (`--srcline`).
    pub fn function_source(&self, site: u32) -> Option<&str> {
        self.sources.as_ref()?.0.function(site)
    }

    /// `file:line` of the sites named `name`, comma-separated when they are several (`--srcline`).
    pub fn name_source(&self, name: NameId) -> Option<&str> {
        self.sources.as_ref()?.1.get(&name).map(String::as_str)
    }

    /// `file:line` of `address`, a frame of a stack recorded on `lane` (`--srcline`).
    pub fn frame_source(&self, lane: usize, address: u64) -> Option<&str> {
        let process = self.lanes[lane].process?;
        self.sources.as_ref()?.0.frame(process, address)
    }

    /// The text of a name.
    pub fn text(&self, id: NameId) -> &str {
        self.names.get(id as usize).map_or("?", |s| s)
    }

    /// How many names there are.
    pub fn name_count(&self) -> usize {
        self.names.len()
    }

    /// The name a record shows: the function for ENTER/EXIT, the probe or annotation otherwise,
    /// `-` for a record without a site.
    pub fn name(&self, r: &Record) -> NameId {
        if r.site == NO_SITE {
            return self.no_site;
        }
        let s = r.site as usize;
        match r.kind {
            RecordKind::Enter | RecordKind::Exit => self.inlined(r).unwrap_or(self.site_func[s]),
            _ => self.site_other[s],
        }
    }

    /// The function an ENTER or EXIT record of a `-finstrument-functions` hook is for, when its
    /// `this_fn` is the start of an instrumented function other than the enclosing one: one the
    /// compiler inlined there, whose hooks run inside its caller's code. `None` otherwise (the
    /// site names it).
    pub fn inlined(&self, r: &Record) -> Option<NameId> {
        let site = &self.trace.sites[r.site as usize];
        if r.arg == 0 || !site.kind.records_this_fn() {
            return None;
        }
        let key = (site.process, r.arg);
        let i = self
            .functions
            .partition_point(|&(p, start, _)| (p, start) < key);
        let &(p, start, name) = self.functions.get(i)?;
        ((p, start) == key).then_some(name)
    }

    /// The parent a function hook's ENTER record carries (the address the function returns
    /// to), if it carries one.
    pub fn parent(&self, r: &Record) -> Option<u64> {
        let carries = r.kind == RecordKind::Enter
            && r.site != NO_SITE
            && self.trace.sites[r.site as usize].kind.records_parent();
        (carries && r.arg != 0).then_some(r.arg)
    }

    /// `wait:<what>` for a WAIT or UNWAIT record.
    pub fn wait_frame(&self, r: &Record) -> NameId {
        if r.site == NO_SITE {
            return NO_NAME;
        }
        self.site_wait[r.site as usize]
    }

    /// Whether the record's site is a function hook.
    pub fn is_hook(&self, r: &Record) -> bool {
        r.site != NO_SITE && self.site_hook[r.site as usize]
    }

    /// Whether some EXIT record ends a region named `name`.
    pub fn has_exit(&self, name: NameId) -> bool {
        self.has_exit.get(name as usize).copied().unwrap_or(false)
    }

    /// Whether frames named `name` are of a function hook's ENTERs and no EXIT ends any of them
    /// (a `-pg`/`-mfentry` function recorded without `--graph`): when they returned is
    /// inferred (see [`crate::timeline`]), so their durations and the frames they are shown
    /// nested in are estimates.
    pub fn entry_only(&self, name: NameId) -> bool {
        self.hook_enter.get(name as usize).copied().unwrap_or(false) && !self.has_exit(name)
    }

    /// The name a frame of `name` shows in the formats that draw frames: its text, followed by
    /// [`INFERRED`] for a function with entries only.
    pub fn frame_label(&self, name: NameId) -> std::borrow::Cow<'_, str> {
        if self.entry_only(name) {
            format!("{}{INFERRED}", self.text(name)).into()
        } else {
            self.text(name).into()
        }
    }

    /// How many functions have entries only ([`Model::entry_only`]).
    pub fn entry_only_functions(&self) -> usize {
        (0..self.hook_enter.len() as NameId)
            .filter(|&n| self.entry_only(n))
            .count()
    }

    /// What a report must say of how its frames were made, one sentence each: that some
    /// functions have entries only (their returns inferred), that a report-time filter left
    /// calls out. Empty for a trace whose frames are all measured and complete (what the
    /// processes themselves lost or filtered is in [`Trace::losses`]).
    pub fn caveats(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let n = self.entry_only_functions();
        if n > 0 {
            lines.push(format!(
                "{n} function{} ha{} entries only (-pg/-mfentry hooks recorded without \
                 `bootprof run --graph`): when {} returned is inferred from later calls, so \
                 {} durations and stacks are estimates, marked (inferred)",
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "ve" },
                if n == 1 { "it" } else { "they" },
                if n == 1 { "its" } else { "their" },
            ));
        }
        lines.extend(self.filter_note());
        lines
    }

    /// What a report-time filter left out, if one was applied.
    pub fn filter_note(&self) -> Option<String> {
        self.filtered
            .as_ref()
            .map(crate::filter::Filtered::describe)
    }

    /// Leaves out, from every format, the calls `filter` drops (`bootprof report --depth
    /// --min-time`; see [`crate::filter`]).
    pub fn filter(&mut self, filter: crate::filter::Filter) {
        if !filter.is_some() {
            return;
        }
        let records = &self.trace.records;
        let mut calls = crate::filter::Calls::new(filter, records.len(), self.lanes.len());
        for (i, r) in records.iter().enumerate() {
            if !matches!(r.kind, RecordKind::Enter | RecordKind::Exit) {
                continue;
            }
            let name = self.name(&r);
            if !self.has_exit(name) {
                continue;
            }
            let (lane, t) = (self.lane(r.tid), self.ns(r.tsc));
            if r.kind == RecordKind::Enter {
                calls.enter(lane, i, name, t);
            } else {
                calls.exit(lane, i, name, t);
            }
        }
        self.filtered = Some(calls.finish());
    }

    /// Whether record `index` was left out by the report-time filter.
    #[inline]
    pub fn left_out(&self, index: usize) -> bool {
        self.filtered.as_ref().is_some_and(|f| f.contains(index))
    }

    /// The lane of thread `tid` (every tid of a record has one).
    pub fn lane(&self, tid: u32) -> usize {
        self.lane_of[&tid]
    }

    /// Nanoseconds from the trace start to `tsc`.
    pub fn ns(&self, tsc: u64) -> u64 {
        let ticks = tsc.saturating_sub(self.origin);
        let hz = self.trace.header.tsc_hz;
        match ticks.checked_mul(self.mul) {
            Some(n) => n / hz,
            None => {
                let n = u128::from(ticks) * u128::from(self.mul) / u128::from(hz);
                u64::try_from(n).unwrap_or(u64::MAX)
            }
        }
    }

    /// The instrumented function of `lane`'s process that contains `address`: the one with the
    /// highest start at or below it (functions without sites are unknown, so this is a guess
    /// near their ends).
    pub fn function_at(&self, lane: usize, address: u64) -> Option<NameId> {
        self.function_start_at(lane, address).map(|(_, name)| name)
    }

    /// [`Model::function_at`], with the function's start address.
    pub fn function_start_at(&self, lane: usize, address: u64) -> Option<(u64, NameId)> {
        let p = self.lanes[lane].process.unwrap_or(0);
        let i = self
            .functions
            .partition_point(|&(q, start, _)| (q, start) <= (p, address));
        let i = i.checked_sub(1)?;
        let (q, start, name) = self.functions[i];
        (q == p).then_some((start, name))
    }

    /// The call stack recorded at `r`, given the records after it (`bootprof run
    /// --stacktrace`): the FRAME records right after it of its thread, time and site,
    /// innermost first (the site's address, then return addresses). Empty for a record without
    /// one, and for a FRAME record itself.
    pub fn stack_of<'r>(&self, r: &Record, after: &'r [Record]) -> &'r [Record] {
        if r.kind == RecordKind::Frame {
            return &[];
        }
        let n = (after.iter())
            .take_while(|f| {
                f.kind == RecordKind::Frame && (f.tid, f.tsc, f.site) == (r.tid, r.tsc, r.site)
            })
            .count();
        &after[..n]
    }

    /// The instrumented function of `lane`'s process holding `address`, a frame of a recorded
    /// stack, and its start: as [`Model::function_start_at`], but not more than [`FRAME_REACH`]
    /// past the start.
    pub fn frame_function(&self, lane: usize, address: u64) -> Option<(u64, NameId)> {
        self.function_start_at(lane, address)
            .filter(|&(start, _)| address - start < FRAME_REACH)
    }

    /// The name of a frame of a recorded stack in a flame graph: its function, or `[unknown]`.
    pub fn frame_name(&self, lane: usize, address: u64) -> NameId {
        self.frame_function(lane, address)
            .map_or(self.unknown, |(_, name)| name)
    }

    /// A frame of a recorded stack as ftrace prints it: `function+0xOFFSET`, or the address in
    /// hex when no instrumented function holds it.
    pub fn frame_text(&self, lane: usize, address: u64) -> String {
        match self.frame_function(lane, address) {
            Some((start, name)) => format!("{}+{:#x}", self.text(name), address - start),
            None => format!("{address:#x}"),
        }
    }

    /// Whose trace this is, for a report's first line: `pid N`, or `session of N processes (root
    /// pid P)`.
    pub fn whose(&self) -> String {
        let h = &self.trace.header;
        if self.many_processes() {
            format!(
                "session of {} processes (root pid {})",
                self.trace.processes.len(),
                h.pid
            )
        } else {
            format!("pid {}", h.pid)
        }
    }

    /// Nanoseconds where `lane`'s frames still open at the end of the trace close: where its
    /// process ended, in a session (a process's functions do not run on after it); else (a
    /// single process's trace, or a process still running) the trace's last record.
    pub fn lane_end_ns(&self, lane: usize) -> u64 {
        let l = &self.lanes[lane];
        let ended = l.process.and_then(|p| {
            let p = self.trace.processes.get(p)?;
            (p.ending != crate::process::Ending::Running).then_some(p.end_tsc?)
        });
        match ended {
            Some(t) => self.ns(t).max(l.last_ns),
            None => self.end_ns,
        }
    }

    /// Whether the trace is a session of several processes (the reports then show each).
    pub fn many_processes(&self) -> bool {
        self.trace.processes.len() > 1
    }
}

/// Marks `name` in a per-name list of flags.
fn set(flags: &mut Vec<bool>, name: NameId) {
    let n = name as usize;
    if flags.len() <= n {
        flags.resize(n + 1, false);
    }
    flags[n] = true;
}

/// `ns` as `seconds.microseconds`.
pub fn seconds_micros(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1000)
}

/// `ns` as milliseconds with three decimals (microseconds).
pub fn millis(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000_000, ns % 1_000_000 / 1000)
}
