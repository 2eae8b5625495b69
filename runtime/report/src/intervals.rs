//! What a lane says of the intervals its process measured (`bootprof run --latency`; layout in
//! `bootprof_format::latency`): takes its latency area and kept windows; hands on the process's
//! [`Latency`] (the figures of every interval and the windows kept) and the records of the kept
//! windows, which the reports show in place of the flight recorder's rings.

use bootprof_format::lane::{self as fmt, SlotStats};
use bootprof_format::latency::{self as area, word, Area, Window};
use bootprof_format::trace::{Record, RecordKind};

/// What one process measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latency {
    /// The FROM and TO patterns.
    pub from: String,
    /// See `from`.
    pub to: String,
    /// Intervals measured.
    pub count: u64,
    /// Their sum, shortest and longest, in ticks.
    pub sum: u64,
    /// See `sum` (u64::MAX when none).
    pub min: u64,
    /// See `sum`.
    pub max: u64,
    /// Windows to keep, and the lower bound of a kept interval (ns, 0 for none).
    pub limit: u64,
    /// See `limit`.
    pub bound_ns: u64,
    /// Windows kept over the run (some replaced later by longer ones).
    pub kept: u64,
    /// Intervals over the bound that were not kept (no longer than any of the N kept then).
    pub not_kept: u64,
    /// Windows not kept for want of room in the lane.
    pub no_room: u64,
    /// TO hits with no FROM open, and FROM hits too deeply nested.
    pub unopened: u64,
    /// See `unopened`.
    pub too_deep: u64,
    /// (bucket, intervals) of every bucket that has some.
    pub histogram: Vec<(usize, u64)>,
    /// The windows the lane holds, longest first.
    pub windows: Vec<KeptWindow>,
}

/// One kept window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptWindow {
    /// Its descriptor.
    pub window: Window,
    /// Records of the window read: those of every thread between its FROM and TO records, and
    /// the calls, waits and holds still open at its FROM record that its chunks show.
    pub records: u64,
}

impl Latency {
    /// Decodes the area in `b` (the bytes after its chunk header); `None` if it is damaged.
    pub fn decode(b: &[u8]) -> Option<Latency> {
        let a = Area::decode(b)?;
        let mut windows: Vec<KeptWindow> = a
            .windows()
            .map(|window| KeptWindow { window, records: 0 })
            .collect();
        windows.sort_by_key(|w| (std::cmp::Reverse(w.window.ticks()), w.window.number));
        let text = |t: &[u8]| String::from_utf8_lossy(t).into_owned();
        Some(Latency {
            from: text(a.from),
            to: text(a.to),
            count: a.words[word::COUNT],
            sum: a.words[word::SUM],
            min: a.words[word::MIN],
            max: a.words[word::MAX],
            limit: a.words[word::LIMIT],
            bound_ns: a.words[word::BOUND_NS],
            kept: a.words[word::KEPT],
            not_kept: a.words[word::NOT_KEPT],
            no_room: a.words[word::NO_ROOM],
            unopened: a.words[word::UNOPENED],
            too_deep: a.words[word::TOO_DEEP],
            histogram: (0..area::HIST_BUCKETS)
                .map(|b| (b, a.bucket_count(b)))
                .filter(|&(_, n)| n > 0)
                .collect(),
            windows,
        })
    }

    /// The interval below which `fraction` (0..=1) of the intervals lie, in ticks: the middle of
    /// its histogram bucket, within the shortest and longest seen.
    pub fn percentile(&self, fraction: f64) -> u64 {
        let total: u64 = self.histogram.iter().map(|&(_, n)| n).sum();
        let rank = ((fraction * total as f64).ceil() as u64).clamp(1, total.max(1));
        let mut seen = 0;
        for &(b, n) in &self.histogram {
            seen += n;
            if seen >= rank {
                let (lo, hi) = (area::bucket_low(b), area::bucket_high(b));
                return (lo + (hi - lo) / 2).clamp(self.min.min(self.max), self.max);
            }
        }
        self.max
    }
}

/// Chunks of kept windows, gathered while a lane's chunks are read.
#[derive(Default)]
pub(crate) struct KeptChunks {
    /// (window, thread, records before, chunk index).
    chunks: Vec<(u64, u32, u64, usize)>,
}

impl KeptChunks {
    /// Notes chunk `k`, a copy of thread `tid`'s chunk for window `window`.
    pub(crate) fn add(&mut self, window: u64, tid: u32, before: u64, k: usize) {
        self.chunks.push((window, tid, before, k));
    }

    /// The records of `latency`'s windows, in order per thread (a record in two windows once),
    /// counted into each window: of every thread, those of the window's interval, and before
    /// them the ENTER, WAIT and HOLD records its copied chunks show still open when the interval
    /// began (with their FRAME records), so that a call or a hold that began a little earlier
    /// (a lock the waiting thread is blamed on) is shown from its own record, not lost. Chunks
    /// of windows the descriptors do not name (a copy a crash interrupted, or a window freed)
    /// are left out.
    pub(crate) fn records(
        mut self,
        chunks: &[u8],
        latency: &mut Latency,
        stats: &mut SlotStats,
    ) -> Vec<Record> {
        // Each window's chunks of one thread together, in the order the thread wrote them.
        self.chunks
            .sort_unstable_by_key(|&(w, tid, before, _)| (w, tid, before));
        // (thread, records before its chunk, place in the chunk): the same record in two windows'
        // copies of one chunk has the same key (a later copy holds what an earlier one did, and
        // more), so it is kept once, and the keys order a thread's records as it wrote them.
        let mut keyed: Vec<(Key, Record)> = Vec::new();
        let mut open = OpenAtStart::default();
        let mut group = None;
        for &(number, tid, before, k) in &self.chunks {
            let Some(i) = latency
                .windows
                .iter()
                .position(|w| w.window.number == number)
            else {
                continue;
            };
            let at = k * fmt::CHUNK_SIZE;
            let fmt::Chunk::Kept { base, slots, .. } =
                fmt::chunk(&chunks[at..at + fmt::CHUNK_SIZE])
            else {
                continue;
            };
            if group != Some((i, tid)) {
                // The last group's thread's open records, if none of its records fell in the
                // interval.
                if let Some((last, _)) = group {
                    latency.windows[last].records += open.take_into(&mut keyed);
                }
                group = Some((i, tid));
            }
            let w = &mut latency.windows[i];
            let (from, to) = (w.window.from_tsc, w.window.to_tsc);
            let mut nth = 0u32;
            let s = fmt::slot_records(base, slots, |r| {
                let key = (tid, before, nth);
                nth += 1;
                if r.tsc < from {
                    open.before_start(key, r.record(tid));
                } else if r.tsc <= to {
                    w.records += open.take_into(&mut keyed) + 1;
                    keyed.push((key, r.record(tid)));
                }
            });
            stats.torn += s.torn;
            stats.bad += s.bad;
        }
        if let Some((last, _)) = group {
            latency.windows[last].records += open.take_into(&mut keyed);
        }
        keyed.sort_by_key(|&(key, _)| key);
        keyed.dedup_by_key(|&mut (key, _)| key);
        keyed.into_iter().map(|(_, r)| r).collect()
    }
}

/// Where a record was in its thread's lane: (thread, records before its chunk, place in it).
type Key = (u32, u64, u32);

/// One thread's records before a window's interval, read in order: the ENTER, WAIT and HOLD
/// records not yet closed (each with the FRAME records that follow it).
#[derive(Default)]
struct OpenAtStart {
    open: Vec<Vec<(Key, Record)>>,
    /// The last record read opened the innermost entry of `open` (its FRAMEs follow it).
    last_opened: bool,
}

impl OpenAtStart {
    fn before_start(&mut self, key: Key, r: Record) {
        use RecordKind::*;
        let opener = match r.kind {
            Enter | Wait | Hold => {
                self.open.push(vec![(key, r)]);
                self.last_opened = true;
                return;
            }
            Frame => {
                if let (true, Some(top)) = (self.last_opened, self.open.last_mut()) {
                    top.push((key, r));
                }
                return;
            }
            Exit => Enter,
            Unwait => Wait,
            Release => Hold,
            Event | Thread => {
                self.last_opened = false;
                return;
            }
        };
        self.last_opened = false;
        // A close ends the innermost open record of its kind (and whatever it left open).
        if let Some(i) = self.open.iter().rposition(|o| o[0].1.kind == opener) {
            self.open.truncate(i);
        }
    }

    /// Hands on the records still open (the interval begins), and how many; starts afresh.
    fn take_into(&mut self, keyed: &mut Vec<(Key, Record)>) -> u64 {
        self.last_opened = false;
        let before = keyed.len();
        keyed.extend(self.open.drain(..).flatten());
        (keyed.len() - before) as u64
    }
}

/// `ns` in the unit that suits it (ns, µs, ms or s), three significant decimals.
pub fn duration(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.3} us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}
