//! `--live` (`bootprof run`, `bootprof attach`): takes a session directory whose processes are
//! recording into it; hands on, to standard output, each record as it arrives, in the text
//! report's line format (`TASK-PID [000] SECONDS: WHAT`), like ftrace's `trace_pipe`.
//!
//! Each [`Live::poll`] (every 20 ms) maps every lane file of the session again if it grew, reads
//! the metadata chunks it has not read (site and thread names) and the records committed since
//! the last poll in each data chunk (a slot counts once its kind byte is written; the first
//! slot without one is where the thread is writing), and prints them sorted by time. Records a
//! thread wrote that were overwritten before this reader saw them (a ring of `--keep last`
//! reuses its chunks) are counted as lost, from each chunk's count of the records its thread
//! wrote before it: each thread's chunks are read in the order it wrote them, and a chunk its
//! ring takes again while it is read is read at the next poll, so that a record is either
//! shown or counted lost, once. (The count is of slots: a record with an argument too wide
//! for its slot takes two, and counts twice when lost.) Records the process dropped (its
//! buffer full) are counted from its lane's header. Both are shown as they happen, as
//! `LOST N RECORDS` lines, and summed at the end.
//!
//! A name's caller (`<-caller` after a hook's function) is the instrumented function holding
//! the recorded return address, as the text report finds it; a region's parent (annotations) is
//! not followed here.

use bootprof_format::lane::{self as fmt, field, Meta, CHUNK_SIZE, LANE_HEADER_SIZE, SLOT_SIZE};
use bootprof_format::le::u64_at;
use bootprof_format::trace::{display_name, RecordKind};
use bootprof_format::Kind;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

/// One lane being followed.
struct Lane {
    file: std::fs::File,
    map: Option<memmap2::Mmap>,
    /// Site id -> its names.
    sites: HashMap<u32, SiteNames>,
    /// Function starts, sorted, with their names (for a hook's caller).
    functions: Vec<(u64, String)>,
    threads: HashMap<u32, String>,
    /// Threads whose name the program gave (it outranks the kernel's, as in the reports).
    named: std::collections::HashSet<u32>,
    /// The process's name (its executable's), for its main thread before it is named.
    name: String,
    /// Whether its end was seen.
    ended: bool,
    /// Metadata chunks read.
    metas: std::collections::HashSet<u64>,
    /// Data chunk (its byte in the lane) -> (records its thread wrote before it, slots read).
    progress: HashMap<usize, (u64, usize)>,
    /// Thread -> slots it wrote that this reader has accounted for (read or counted lost).
    seen: HashMap<u32, u64>,
    start_tsc: u64,
    start_ns: u64,
    dropped: u64,
    pid: u32,
    /// The lane this process was forked from (its sites are this one's too).
    parent: Option<PathBuf>,
}

/// A site's names as the text report shows them: its function, its probe, whether it is a
/// function hook.
type SiteNames = (String, String, Kind);

/// A session followed live.
pub struct Live {
    dir: PathBuf,
    lanes: HashMap<PathBuf, Lane>,
    /// TSC and nanoseconds of the session's start: time 0 of the lines.
    zero: Option<(u64, u64)>,
    /// The TSC's rate, measured when following began (until it can be measured from `zero`).
    hz: f64,
    /// Thread -> the annotated regions open on it (for a region's parent).
    regions: HashMap<u32, Vec<String>>,
    /// Whether every line shows its process id.
    tgid: bool,
    shown: u64,
    lost: u64,
    dropped: u64,
}

/// What a poll found: a thread's record, or where a process ended (`exit 0`, ...).
enum Item {
    Record(u32, fmt::SlotRecord),
    End(String),
}

/// What a poll found, with its time and lane.
type Found = (u64, PathBuf, Item);

impl Live {
    /// Follows the session directory `dir`; `tgid`: every line shows its process id (the TGID
    /// column), as the text report does for a session of several processes, which a session
    /// that may gain processes (`bootprof run`'s) may become.
    pub fn new(dir: PathBuf, tgid: bool) -> Live {
        let then = crate::session::clocks_now();
        std::thread::sleep(std::time::Duration::from_millis(6));
        let now = crate::session::clocks_now();
        let hz = (now.0 - then.0) as f64 * 1e9 / (now.1 - then.1).max(1) as f64;
        let zero = std::fs::read(dir.join("session"))
            .ok()
            .and_then(|b| fmt::SessionHeader::decode(&b).ok())
            .map(|h| h.start);
        Live {
            dir,
            lanes: HashMap::new(),
            zero,
            hz,
            regions: HashMap::new(),
            tgid,
            shown: 0,
            lost: 0,
            dropped: 0,
        }
    }

    /// Prints the records that arrived since the last poll.
    pub fn poll(&mut self) {
        let mut found: Vec<Found> = Vec::new();
        let mut notes = Vec::new();
        for path in crate::session::lane_files(&self.dir) {
            if !self.lanes.contains_key(&path) {
                let Some(lane) = Lane::open(&path) else {
                    continue;
                };
                if self.zero.is_none() {
                    self.zero = Some((lane.start_tsc, lane.start_ns));
                }
                self.lanes.insert(path.clone(), lane);
            }
            let lane = self.lanes.get_mut(&path).expect("inserted above");
            let (lost, dropped) = lane.read(&path, &mut found);
            if lost + dropped > 0 {
                notes.push((lost, dropped));
            }
        }
        found.sort_by_key(|f| f.0);
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for (lost, dropped) in notes {
            self.lost += lost;
            self.dropped += dropped;
            if lost > 0 {
                let _ = writeln!(out, "LOST {lost} RECORDS (the reader fell behind)");
            }
            if dropped > 0 {
                let _ = writeln!(out, "LOST {dropped} RECORDS (dropped: the buffer was full)");
            }
        }
        if let Some((t0, n0)) = self.zero {
            let (t1, n1) = crate::session::clocks_now();
            if n1.saturating_sub(n0) > 100_000_000 {
                self.hz = t1.saturating_sub(t0) as f64 * 1e9 / (n1 - n0) as f64;
            }
        }
        for (tsc, path, item) in &found {
            let line = match item {
                Item::Record(tid, r) => {
                    self.shown += 1;
                    self.line(path, *tsc, *tid, r)
                }
                Item::End(ending) => self.end_line(path, *tsc, ending),
            };
            let _ = out.write_all(line.as_bytes());
        }
        let _ = out.flush();
    }

    /// The names of site `id` of the lane at `path` (or of the lane it was forked from).
    fn site(&self, path: &std::path::Path, id: u32) -> Option<&SiteNames> {
        let mut lane = self.lanes.get(path)?;
        for _ in 0..64 {
            if let Some(s) = lane.sites.get(&id) {
                return Some(s);
            }
            lane = self.lanes.get(lane.parent.as_ref()?)?;
        }
        None
    }

    /// The TASK-PID (TGID) column of thread `tid` of the lane at `path`, and the time column
    /// of `tsc`, as the text report writes them.
    fn context(&self, path: &std::path::Path, tid: u32, tsc: u64) -> String {
        let lane = &self.lanes[path];
        let name = match lane.threads.get(&tid) {
            Some(name) => name.as_str(),
            None if tid == lane.pid => lane.name.as_str(),
            None => "<...>",
        };
        self.context_named(path, name, tid, tsc)
    }

    /// [`Live::context`] with the task's name given.
    fn context_named(&self, path: &std::path::Path, name: &str, tid: u32, tsc: u64) -> String {
        let zero = self.zero.map_or(0, |z| z.0);
        let ns = (tsc.saturating_sub(zero) as f64 * 1e9 / self.hz) as u64;
        let lane = &self.lanes[path];
        let mut task = format!("{name:>16}-{tid:<7}");
        if self.tgid || self.lanes.len() > 1 {
            task = format!("{task} ({:>7})", lane.pid);
        }
        format!(
            "{task} [000] {:>6}.{:06}: ",
            ns / 1_000_000_000,
            ns % 1_000_000_000 / 1000
        )
    }

    /// `PROCESS END exit 0`, where the process of the lane at `path` ended (shown, as the text
    /// report shows it, in a session of several processes or for a process that crashed).
    fn end_line(&self, path: &std::path::Path, tsc: u64, ending: &str) -> String {
        if !self.tgid && self.lanes.len() < 2 && !ending.starts_with("killed") {
            return String::new();
        }
        let lane = &self.lanes[path];
        let context = self.context_named(path, &lane.name, lane.pid, tsc);
        format!("{context}PROCESS END {ending}\n")
    }

    /// The record's line, as the text report writes it.
    fn line(&mut self, path: &std::path::Path, tsc: u64, tid: u32, r: &fmt::SlotRecord) -> String {
        let context = self.context(path, tid, tsc);
        let lane = &self.lanes[path];
        let (mut func, other, kind) = self
            .site(path, r.site)
            .map_or(("?".into(), "?".into(), Kind::Probe), |(f, o, k)| {
                (f.clone(), o.clone(), *k)
            });
        if let Some(inlined) = (kind.records_this_fn() && r.arg != 0)
            .then(|| lane.starting_at(r.arg))
            .flatten()
        {
            func = inlined.to_string();
        }
        let regions = self.regions.entry(tid).or_default();
        let what = match r.kind {
            RecordKind::Enter if kind.records_parent() && r.arg != 0 => match lane.caller(r.arg) {
                Some(c) => format!("{func} <-{c}"),
                None => format!("{func} <-{:#x}", r.arg),
            },
            RecordKind::Enter if kind.is_hook() => func,
            RecordKind::Enter => {
                let text = match regions.last() {
                    Some(parent) => format!("{func} <-{parent}"),
                    None => func.clone(),
                };
                regions.push(func);
                text
            }
            RecordKind::Exit => {
                if let Some(i) = regions.iter().rposition(|n| *n == func) {
                    regions.truncate(i);
                }
                format!("EXIT {func}")
            }
            RecordKind::Event => format!("EVENT {other} arg={:#x}", r.arg),
            RecordKind::Frame => format!(" => {:#x}", r.arg),
            RecordKind::Thread => format!(
                "THREAD {}",
                lane.threads.get(&tid).map_or("-", String::as_str)
            ),
            kind => format!("{} {other}", kind.name()),
        };
        format!("{context}{what}\n")
    }

    /// Says on stderr how many records were shown, lost and dropped.
    pub fn finish(&self) {
        eprintln!(
            "bootprof: live: {} records shown, {} lost (the reader fell behind), {} dropped \
             (buffer full)",
            self.shown, self.lost, self.dropped
        );
    }
}

impl Lane {
    fn open(path: &std::path::Path) -> Option<Lane> {
        let file = std::fs::File::open(path).ok()?;
        let mut header = [0u8; LANE_HEADER_SIZE];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut header, 0).ok()?;
        if header[..8] != fmt::LANE_MAGIC {
            return None;
        }
        let parent = fmt::c_string(&header, field::PARENT_LANE, 64);
        Some(Lane {
            file,
            map: None,
            sites: HashMap::new(),
            functions: Vec::new(),
            threads: HashMap::new(),
            metas: Default::default(),
            progress: HashMap::new(),
            seen: HashMap::new(),
            start_tsc: u64_at(&header, field::START_TSC),
            start_ns: u64_at(&header, field::START_NS),
            dropped: 0,
            named: Default::default(),
            name: {
                let exe = fmt::c_string(&header, field::EXE, header.len() - field::EXE);
                let exe = String::from_utf8_lossy(exe);
                exe.rsplit('/')
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(15)
                    .collect()
            },
            ended: false,
            pid: bootprof_format::le::u32_at(&header, field::PID),
            parent: (!parent.is_empty())
                .then(|| path.with_file_name(String::from_utf8_lossy(parent).into_owned())),
        })
    }

    /// Adds the records committed since the last read to `found`; returns the records lost
    /// (overwritten unread) and dropped (by the process) since then.
    fn read(&mut self, path: &std::path::Path, found: &mut Vec<Found>) -> (u64, u64) {
        let len = self.file.metadata().map_or(0, |m| m.len()) as usize;
        if self.map.as_ref().is_none_or(|m| m.len() != len) {
            // SAFETY: a read-only shared map of a lane file; the process writes it meanwhile,
            // and every read of it below is bounds-checked and takes what it finds.
            self.map = unsafe { memmap2::Mmap::map(&self.file) }.ok();
        }
        let Some(map) = self.map.take() else {
            return (0, 0);
        };
        let mut lost = 0;
        if map.len() >= LANE_HEADER_SIZE {
            let claimed = u64_at(&map, field::CLAIMED) as usize;
            let chunks = claimed.min((map.len() - LANE_HEADER_SIZE) / CHUNK_SIZE);
            let mut data = Vec::new();
            for k in 0..chunks {
                let at = LANE_HEADER_SIZE + k * CHUNK_SIZE;
                match fmt::chunk(&map[at..at + CHUNK_SIZE]) {
                    fmt::Chunk::Meta { len } if !self.metas.contains(&(k as u64)) => {
                        let start = at + fmt::CHUNK_HEADER_SIZE;
                        if let Some(blob) = map.get(start..start + len as usize) {
                            self.metas.insert(k as u64);
                            self.read_meta(path.parent(), blob);
                        }
                    }
                    fmt::Chunk::Data { tid, before, .. } => data.push((tid, before, at)),
                    _ => {}
                }
            }
            // Each thread's chunks in the order it wrote them: a ring (`--keep last`) takes its
            // chunks round and round, so their order in the lane is not that.
            data.sort_unstable();
            for (tid, before, at) in data {
                lost += self.read_data(&map, tid, before, at, path, found);
            }
        }
        let dropped = if map.len() >= LANE_HEADER_SIZE {
            let end = u64_at(&map, field::END_TSC);
            if end != 0 && !self.ended {
                self.ended = true;
                let kind = fmt::End::from_u32(bootprof_format::le::u32_at(&map, field::END_KIND));
                let code = bootprof_format::le::u32_at(&map, field::END_CODE);
                let ending = match kind {
                    fmt::End::Exit => Some(crate::process::Ending::Exit(code)),
                    fmt::End::Signal => Some(crate::process::Ending::Signal(code)),
                    fmt::End::Detached => Some(crate::process::Ending::Detached),
                    fmt::End::Unknown => None,
                };
                if let Some(e) = ending {
                    found.push((end, path.to_path_buf(), Item::End(e.to_string())));
                }
            }
            u64_at(&map, field::DROPPED)
        } else {
            0
        };
        self.map = Some(map);
        let new_drops = dropped.saturating_sub(self.dropped);
        self.dropped = self.dropped.max(dropped);
        (lost, new_drops)
    }

    /// Reads the data chunk at byte `at` of `map`, which thread `tid` took after writing
    /// `before` records; returns the records of that thread lost before it (overwritten
    /// unread). A chunk that its ring took again meanwhile, before or while it is read, is left
    /// for the next poll, which counts what it held as lost: a record is shown, or counted lost,
    /// never both.
    fn read_data(
        &mut self,
        map: &[u8],
        tid: u32,
        before: u64,
        at: usize,
        path: &std::path::Path,
        found: &mut Vec<Found>,
    ) -> u64 {
        let header = |map: &[u8]| (word_now(map, at + 8), word_now(map, at + 24));
        let taken = header(map);
        let fmt::Chunk::Data {
            tid: now_tid,
            base,
            before: now_before,
            slots,
        } = fmt::chunk(&map[at..at + CHUNK_SIZE])
        else {
            return 0;
        };
        if (now_tid, now_before) != (tid, before) || taken.0 != before {
            return 0;
        }
        let (was_before, done) = self.progress.get(&at).copied().unwrap_or((before, 0));
        if before < was_before {
            return 0; // a header read half-written: the chunk is being taken again
        }
        // A ring chunk taken again: its slots start over.
        let done = if was_before == before { done } else { 0 };
        let end = committed(slots, done);
        let mark = found.len();
        fmt::slot_records(base, &slots[done * SLOT_SIZE..end * SLOT_SIZE], |r| {
            found.push((r.tsc, path.to_path_buf(), Item::Record(tid, r)))
        });
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        if header(map) != taken {
            // Taken again while its slots were read: what was read may be the new records.
            found.truncate(mark);
            return 0;
        }
        // Records of this thread before this chunk that no read accounted for were overwritten.
        let seen = self.seen.entry(tid).or_insert(0);
        let lost = before.saturating_sub(*seen);
        *seen = (*seen).max(before + end as u64);
        self.progress.insert(at, (before, end));
        lost
    }

    fn read_site(&mut self, meta: &Meta) {
        let Some(site) = crate::session::site_of(meta) else {
            return;
        };
        let (p, n, f) = (&site.provider, &site.name, &site.function);
        let shown = bootprof_format::demangle::demangle(f).unwrap_or(f.clone());
        let func = display_name(RecordKind::Enter, p, n, &shown).to_string();
        let other = display_name(RecordKind::Event, p, n, &shown).to_string();
        let start = site.address.wrapping_sub(u64::from(site.func_offset));
        if !f.is_empty() {
            self.functions.push((start, func.clone()));
        }
        self.sites.insert(site.id, (func, other, site.kind));
    }

    fn read_meta(&mut self, dir: Option<&std::path::Path>, mut blob: &[u8]) {
        while let Some((meta, n)) = Meta::decode(blob) {
            blob = &blob[n..];
            match meta {
                Meta::Site { .. } | Meta::Table { .. } => {
                    for site in meta.sites() {
                        self.read_site(&site);
                    }
                }
                // A table that cannot be read leaves its sites' records unnamed here; the
                // report at the end says why.
                Meta::TableFile { .. } => {
                    if let Ok(table) = crate::session::table_file_bytes(dir, &meta) {
                        for site in meta.with_table(&table).sites() {
                            self.read_site(&site);
                        }
                    }
                }
                Meta::Thread { tid, name, given } => {
                    if given || !self.named.contains(&tid) {
                        self.threads
                            .insert(tid, String::from_utf8_lossy(name).into_owned());
                    }
                    if given {
                        self.named.insert(tid);
                    }
                }
                Meta::Counts { .. } => {}
            }
        }
        self.functions.sort();
        self.functions.dedup_by_key(|f| f.0);
    }

    /// The instrumented function that starts at `address` (what a `-finstrument-functions`
    /// hook's `this_fn` names: the function the hook is for).
    fn starting_at(&self, address: u64) -> Option<&str> {
        let i = self.functions.partition_point(|f| f.0 < address);
        let (start, name) = self.functions.get(i)?;
        (*start == address).then_some(name.as_str())
    }

    /// The instrumented function holding `address` (not more than 64 KiB past its start).
    fn caller(&self, address: u64) -> Option<&str> {
        let i = self.functions.partition_point(|f| f.0 <= address);
        let (start, name) = self.functions.get(i.checked_sub(1)?)?;
        (address - start < crate::model::FRAME_REACH).then_some(name.as_str())
    }
}

/// The word at byte `at` of `map` as it is now (the process may be writing it): read again
/// each time it is asked for, never taken from an earlier read.
fn word_now(map: &[u8], at: usize) -> u64 {
    let bytes = &map[at..at + 8];
    // SAFETY: eight bytes of the map, 8-aligned (chunks are 4096-aligned in a page-aligned
    // map); a volatile read of memory another process writes, which tears no aligned word.
    unsafe { std::ptr::read_volatile(bytes.as_ptr().cast::<u64>()) }
}

/// The first slot from `from` on whose kind byte is not written yet (where the thread writes).
fn committed(slots: &[u8], from: usize) -> usize {
    let n = slots.len() / SLOT_SIZE;
    (from..n)
        .find(|&i| slots[i * SLOT_SIZE + SLOT_SIZE - 1] == 0)
        .unwrap_or(n)
}
