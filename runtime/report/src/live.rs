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
//! wrote before it; records the process dropped (its buffer full) are counted from its lane's
//! header. Both are shown as they happen, as `LOST N RECORDS` lines, and summed at the end.
//!
//! A name's caller (`<-caller` after a hook's function) is the instrumented function holding
//! the recorded return address, as the text report finds it; a region's parent (annotations) is
//! not followed here.

use bootprof_format::lane::{self as fmt, field, Meta, CHUNK_SIZE, LANE_HEADER_SIZE, SLOT_SIZE};
use bootprof_format::le::u64_at;
use bootprof_format::trace::{display_name, RecordKind};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

/// One lane being followed.
struct Lane {
    file: std::fs::File,
    map: Option<memmap2::Mmap>,
    /// Site id -> (function name, probe name, function start, is a hook).
    sites: HashMap<u32, (String, String, u64, bool)>,
    /// Function starts, sorted, with their names (for a hook's caller).
    functions: Vec<(u64, String)>,
    threads: HashMap<u32, String>,
    /// Metadata chunks read.
    metas: std::collections::HashSet<u64>,
    /// Data chunk -> (records its thread wrote before it, slots read).
    progress: HashMap<u64, (u64, usize)>,
    /// Thread -> slots it wrote that this reader has accounted for (read or lost).
    seen: HashMap<u32, u64>,
    start_tsc: u64,
    start_ns: u64,
    dropped: u64,
}

/// A session followed live.
pub struct Live {
    dir: PathBuf,
    lanes: HashMap<PathBuf, Lane>,
    /// TSC and nanoseconds of the first lane's start: time 0 of the lines.
    zero: Option<(u64, u64)>,
    shown: u64,
    lost: u64,
    dropped: u64,
}

/// A record found by a poll: time, lane, thread, the record.
type Found = (u64, PathBuf, u32, fmt::SlotRecord);

impl Live {
    /// Follows the session directory `dir`.
    pub fn new(dir: PathBuf) -> Live {
        Live {
            dir,
            lanes: HashMap::new(),
            zero: None,
            shown: 0,
            lost: 0,
            dropped: 0,
        }
    }

    /// Prints the records that arrived since the last poll.
    pub fn poll(&mut self) {
        let mut found: Vec<Found> = Vec::new();
        let mut notes = Vec::new();
        for path in lane_files(&self.dir) {
            if !self.lanes.contains_key(&path) {
                let Some(lane) = Lane::open(&path) else {
                    continue;
                };
                if self.zero.is_none_or(|z| lane.start_tsc < z.0) {
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
        for (tsc, path, tid, r) in &found {
            let lane = &self.lanes[path];
            let line = lane.line(self.zero, *tsc, *tid, r);
            let _ = out.write_all(line.as_bytes());
            self.shown += 1;
        }
        let _ = out.flush();
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

fn lane_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "lane"))
        .collect();
    v.sort();
    v
}

impl Lane {
    fn open(path: &std::path::Path) -> Option<Lane> {
        let file = std::fs::File::open(path).ok()?;
        let mut header = [0u8; 64];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut header, 0).ok()?;
        if header[..8] != fmt::LANE_MAGIC {
            return None;
        }
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
            for k in 0..chunks {
                let at = LANE_HEADER_SIZE + k * CHUNK_SIZE;
                lost += self.read_chunk(&map, k as u64, at, path, found);
            }
        }
        let dropped = if map.len() >= LANE_HEADER_SIZE {
            u64_at(&map, field::DROPPED)
        } else {
            0
        };
        self.map = Some(map);
        let new_drops = dropped.saturating_sub(self.dropped);
        self.dropped = self.dropped.max(dropped);
        (lost, new_drops)
    }

    /// Reads chunk `k` (at byte `at` of `map`); returns the records lost before it.
    fn read_chunk(
        &mut self,
        map: &[u8],
        k: u64,
        at: usize,
        path: &std::path::Path,
        found: &mut Vec<Found>,
    ) -> u64 {
        match fmt::chunk(&map[at..at + CHUNK_SIZE]) {
            fmt::Chunk::Meta { len } if !self.metas.contains(&k) => {
                let start = at + fmt::CHUNK_HEADER_SIZE;
                if let Some(blob) = map.get(start..start + len as usize) {
                    self.metas.insert(k);
                    self.read_meta(blob);
                }
                0
            }
            fmt::Chunk::Data {
                tid,
                base,
                before,
                slots,
            } => {
                let (was_before, done) = self.progress.get(&k).copied().unwrap_or((before, 0));
                // A ring chunk taken again: its slots start over.
                let done = if was_before == before { done } else { 0 };
                let seen = self.seen.entry(tid).or_insert(before);
                let lost = before.saturating_sub(*seen);
                let end = committed(slots, done);
                fmt::slot_records(base, &slots[done * SLOT_SIZE..end * SLOT_SIZE], |r| {
                    found.push((r.tsc, path.to_path_buf(), tid, r))
                });
                *seen = (*seen).max(before + end as u64);
                self.progress.insert(k, (before, end));
                lost
            }
            _ => 0,
        }
    }

    fn read_meta(&mut self, mut blob: &[u8]) {
        while let Some((meta, n)) = Meta::decode(blob) {
            blob = &blob[n..];
            match meta {
                Meta::Site { .. } => {
                    let Some(site) = crate::session::site_of(&meta) else {
                        continue;
                    };
                    let (p, n, f) = (&site.provider, &site.name, &site.function);
                    let shown = bootprof_format::demangle::demangle(f).unwrap_or(f.clone());
                    let func = display_name(RecordKind::Enter, p, n, &shown).to_string();
                    let other = display_name(RecordKind::Event, p, n, &shown).to_string();
                    let start = site.address.wrapping_sub(u64::from(site.func_offset));
                    if !f.is_empty() {
                        self.functions.push((start, func.clone()));
                    }
                    self.sites
                        .insert(site.id, (func, other, start, site.kind.is_hook()));
                }
                Meta::Thread { tid, name, .. } => {
                    self.threads
                        .insert(tid, String::from_utf8_lossy(name).into_owned());
                }
                Meta::Counts { .. } => {}
            }
        }
        self.functions.sort();
        self.functions.dedup_by_key(|f| f.0);
    }

    /// The record's line, as the text report writes it.
    fn line(&self, zero: Option<(u64, u64)>, tsc: u64, tid: u32, r: &fmt::SlotRecord) -> String {
        let ns = self.ns(zero, tsc);
        let task = format!(
            "{:>16}-{:<7}",
            self.threads.get(&tid).map_or("<...>", String::as_str),
            tid
        );
        let (func, other, hook) = self
            .sites
            .get(&r.site)
            .map_or(("?", "?", false), |(f, o, _, h)| {
                (f.as_str(), o.as_str(), *h)
            });
        let what = match r.kind {
            RecordKind::Enter if hook && r.arg != 0 => match self.caller(r.arg) {
                Some(c) => format!("{func} <-{c}"),
                None => format!("{func} <-{:#x}", r.arg),
            },
            RecordKind::Enter => func.to_string(),
            RecordKind::Exit => format!("EXIT {func}"),
            RecordKind::Event => format!("EVENT {other} arg={:#x}", r.arg),
            RecordKind::Frame => format!(" => {:#x}", r.arg),
            kind => format!("{} {other}", kind.name()),
        };
        format!(
            "{task} [000] {:>6}.{:06}: {what}\n",
            ns / 1_000_000_000,
            ns % 1_000_000_000 / 1000
        )
    }

    /// The instrumented function holding `address` (not more than 64 KiB past its start).
    fn caller(&self, address: u64) -> Option<&str> {
        let i = self.functions.partition_point(|f| f.0 <= address);
        let (start, name) = self.functions.get(i.checked_sub(1)?)?;
        (address - start < crate::model::FRAME_REACH).then_some(name.as_str())
    }

    /// Nanoseconds from `zero` to `tsc`, at the TSC's rate measured from the lane's start to now.
    fn ns(&self, zero: Option<(u64, u64)>, tsc: u64) -> u64 {
        let (zero_tsc, _) = zero.unwrap_or((self.start_tsc, self.start_ns));
        let (now_tsc, now_ns) = crate::session::clocks_now();
        let ticks = now_tsc.saturating_sub(self.start_tsc) as f64;
        let elapsed = now_ns.saturating_sub(self.start_ns) as f64;
        let hz = if elapsed > 1e6 && ticks > 0.0 {
            ticks * 1e9 / elapsed
        } else {
            1e9
        };
        (tsc.saturating_sub(zero_tsc) as f64 * 1e9 / hz) as u64
    }
}

/// The first slot from `from` on whose kind byte is not written yet (where the thread writes).
fn committed(slots: &[u8], from: usize) -> usize {
    let n = slots.len() / SLOT_SIZE;
    (from..n)
        .find(|&i| slots[i * SLOT_SIZE + SLOT_SIZE - 1] == 0)
        .unwrap_or(n)
}
