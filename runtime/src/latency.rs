//! Worst-interval tracing: takes the hits of the sites `BOOTPROF_LATENCY=FROM..TO` names (while
//! recording into a session with each thread's last records kept, a flight recorder); hands on,
//! in the lane's latency area (layout in `bootprof_format::latency`), the count, sum, shortest,
//! longest and histogram of every interval, and copies of the records around the longest ones
//! (kept windows), made before the rings overwrite them.
//!
//! Per thread, a FROM hit opens an interval and a TO hit closes the most recently opened one
//! (intervals nest like calls, so one function's ENTER..EXIT works under recursion). A site that
//! matches both patterns (one probe hit once per frame) first closes, then opens. ENTER, WAIT
//! and HOLD records can only open, EXIT, UNWAIT and RELEASE only close.
//!
//! Which windows are kept: the N longest intervals (`BOOTPROF_LATENCY_WINDOWS`, default 1: the
//! longest so far), of those at least `BOOTPROF_LATENCY_MIN` nanoseconds long if that is set.
//! An interval no longer than the shortest kept one costs the histogram's atomic adds and one
//! comparison; a longer one takes the window lock and copies every chunk of the lane whose
//! records overlap it (the threads' rings are read while their owners write on: a chunk that is
//! rewritten while it is copied is left out and the window says so). The copy runs on the thread
//! that closed the interval, in a signal handler in trap mode: it allocates nothing and calls
//! only `fallocate`.

use crate::buffer;
use crate::note::note;
use crate::prelude::*;
use crate::site::SiteRec;
use crate::sys::OnceLock;
use bootprof_format::lane::{
    self as lane, CHUNK_HEADER_SIZE, CHUNK_KEPT, CHUNK_LATENCY, CHUNK_SIZE, KIND_ARG_SLOT,
    KIND_WIDE_ARG, MAX_DELTA, SLOT_SIZE,
};
use bootprof_format::latency::{self as fmt, word};
use bootprof_format::pattern::{self, Pattern};
use bootprof_format::trace::RecordKind;
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// A site's role: it opens intervals.
pub(crate) const FROM: u8 = 1;
/// A site's role: it closes intervals.
pub(crate) const TO: u8 = 2;

/// Intervals open at once on one thread; deeper FROM hits are counted and ignored.
const DEPTH: usize = 32;
/// Free chunk ranges remembered for reuse (more are left punched, unused).
const FREE_RANGES: usize = 64;

/// What `BOOTPROF_LATENCY`, `BOOTPROF_LATENCY_MIN` and `BOOTPROF_LATENCY_WINDOWS` ask for.
struct Config {
    from: Vec<Pattern>,
    to: Vec<Pattern>,
    from_text: String,
    to_text: String,
    bound_ns: u64,
    windows: u64,
}

/// Chunk index of the area's first chunk plus one (the area starts after its header); 0: none.
static AREA: AtomicU64 = AtomicU64::new(0);
/// Intervals no longer than this are not kept: the shortest kept one's, once N are kept.
static THRESHOLD: AtomicU64 = AtomicU64::new(0);
/// The window lock (a flag: the copy may run in a signal handler).
static LOCKED: AtomicBool = AtomicBool::new(false);
/// Windows kept now, and the descriptor the next one goes into (under the window lock).
static KEPT_NOW: AtomicU64 = AtomicU64::new(0);
static FREE_DESCRIPTOR: AtomicUsize = AtomicUsize::new(0);
/// Number of the last window kept.
static NUMBER: AtomicU64 = AtomicU64::new(0);
/// Free chunk ranges (first, count; count 0 = unused slot), under the window lock.
static FREE: [(AtomicU64, AtomicU64); FREE_RANGES] =
    [const { (AtomicU64::new(0), AtomicU64::new(0)) }; FREE_RANGES];

/// Rings the window copies read (more threads than this: the whole lane is scanned).
const RINGS: usize = 256;
/// Each thread's ring: first chunk, chunks, chunks taken so far (published by its owner at each
/// chunk it takes, so a copy can walk back from the newest instead of scanning the lane).
static RING_TABLE: [(AtomicU64, AtomicU64, AtomicU64); RINGS] =
    [const { (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)) }; RINGS];
/// Rings in the table.
static RING_COUNT: AtomicUsize = AtomicUsize::new(0);
/// A ring did not fit in the table.
static RINGS_LOST: AtomicBool = AtomicBool::new(false);

crate::sys::thread_local_cells! {
    /// Open intervals: how many, and of each the TSC of its FROM record and of its start.
    static OPEN: Cell<usize> = Cell::new(0);
    static STARTS: [Cell<(u64, u64)>; DEPTH] = [const { Cell::new((0, 0)) }; DEPTH];
}

fn config() -> Option<&'static Config> {
    static CONFIG: OnceLock<Option<Config>> = OnceLock::new();
    CONFIG
        .get_or_init(|| match read_config() {
            Ok(c) => c,
            Err(e) => {
                note(&e);
                None
            }
        })
        .as_ref()
}

#[cfg_attr(not(feature = "std"), optimize(size))]
fn read_config() -> Result<Option<Config>, String> {
    let Some(spec) = crate::sys::var_os("BOOTPROF_LATENCY").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let spec = String::from_utf8_lossy(spec).into_owned();
    let (from_text, to_text) = spec.split_once("..").unwrap_or((&spec, &spec));
    let parse = |t: &str| {
        pattern::parse_list(t)
            .map_err(|e| format!("BOOTPROF_LATENCY={spec}: {e}; nothing measured"))
    };
    let (from, to) = (parse(from_text)?, parse(to_text)?);
    if from_text.len() >= fmt::PATTERN_LEN || to_text.len() >= fmt::PATTERN_LEN {
        return Err(format!(
            "BOOTPROF_LATENCY={spec}: a pattern list is longer than {} bytes; nothing measured",
            fmt::PATTERN_LEN - 1
        ));
    }
    let number = |name: &str, default: u64| match crate::sys::var(name) {
        Some(v) if !v.is_empty() => v
            .parse::<u64>()
            .map_err(|_| format!("{name}={v} is not a number; nothing measured")),
        _ => Ok(default),
    };
    let bound_ns = number("BOOTPROF_LATENCY_MIN", 0)?;
    let windows = number("BOOTPROF_LATENCY_WINDOWS", 1)?;
    if windows == 0 || windows > fmt::MAX_WINDOWS {
        return Err(format!(
            "BOOTPROF_LATENCY_WINDOWS={windows} is not 1 to {}; nothing measured",
            fmt::MAX_WINDOWS
        ));
    }
    Ok(Some(Config {
        from,
        to,
        from_text: from_text.to_string(),
        to_text: to_text.to_string(),
        bound_ns,
        windows,
    }))
}

/// Whether `BOOTPROF_LATENCY` asks for intervals (the recorder then keeps the last records).
pub(crate) fn wanted() -> bool {
    config().is_some()
}

/// The role (`FROM`, `TO`, both or 0) of a site that `matches` patterns, and whose hits make
/// records of `rec_kind` (a `RecordKind` byte, 0 for none).
pub(crate) fn role(matches: impl Fn(&Pattern) -> bool, rec_kind: u8) -> u8 {
    let Some(c) = config() else { return 0 };
    use RecordKind::*;
    let kind = RecordKind::from_u8(rec_kind);
    let mut role = 0;
    if !matches!(kind, None | Some(Exit | Unwait | Release)) && c.from.iter().any(&matches) {
        role |= FROM;
    }
    if !matches!(kind, None | Some(Enter | Wait | Hold)) && c.to.iter().any(&matches) {
        role |= TO;
    }
    role
}

/// Claims and writes the lane's latency area (when recording starts, and in a fork child's new
/// lane); false if the lane has no room for it.
#[cfg_attr(not(feature = "std"), optimize(size))]
pub(crate) fn setup() -> bool {
    let Some(c) = config() else { return true };
    AREA.store(0, Ordering::Relaxed);
    THRESHOLD.store(0, Ordering::Relaxed);
    LOCKED.store(false, Ordering::Relaxed);
    NUMBER.store(0, Ordering::Relaxed);
    for (first, n) in &FREE {
        first.store(0, Ordering::Relaxed);
        n.store(0, Ordering::Relaxed);
    }
    KEPT_NOW.store(0, Ordering::Relaxed);
    FREE_DESCRIPTOR.store(0, Ordering::Relaxed);
    RING_COUNT.store(0, Ordering::Relaxed);
    RINGS_LOST.store(false, Ordering::Relaxed);
    if !buffer::in_session() {
        note("BOOTPROF_LATENCY needs a session (bootprof run --latency); nothing measured");
        return false;
    }
    let len = fmt::area_len(c.windows);
    let Some(k) = buffer::claim(lane::meta_chunks(len as u64)) else {
        note("no room in the lane for the latency area; nothing measured");
        return false;
    };
    let p = buffer::chunk(k);
    let hz = if c.bound_ns > 0 {
        crate::clock::quick_tsc_hz()
    } else {
        0
    };
    let bound_ticks = (u128::from(c.bound_ns) * u128::from(hz) / 1_000_000_000) as u64;
    // SAFETY: the claimed chunks are ours and hold `len` bytes after the header.
    unsafe {
        let area = p.add(CHUNK_HEADER_SIZE);
        let w = area.cast::<u64>();
        w.add(word::LIMIT).write(c.windows);
        w.add(word::MIN).write(u64::MAX);
        w.add(word::BOUND_TICKS)
            .write(bound_ticks.max(u64::from(c.bound_ns > 0)));
        w.add(word::BOUND_NS).write(c.bound_ns);
        w.add(word::BOUND_HZ).write(hz);
        w.add(word::BUCKETS).write(fmt::HIST_BUCKETS as u64);
        let text = |at: usize, t: &str| {
            core::ptr::copy_nonoverlapping(t.as_ptr(), area.add(at), t.len());
        };
        text(fmt::FROM_AT, &c.from_text);
        text(fmt::TO_AT, &c.to_text);
        let header = p.cast::<u64>();
        header.write(len as u64);
        (*header.add(3).cast::<AtomicU64>())
            .store(lane::chunk_word3(0, CHUNK_LATENCY), Ordering::Release);
    }
    AREA.store(k + 1, Ordering::Release);
    true
}

/// Notes a thread's new ring of `len` chunks from `first` (when intervals are measured); its
/// place in the table, for [`ring_taken`].
pub(crate) fn ring_made(first: u64, len: u64) -> Option<usize> {
    if !wanted() {
        return None;
    }
    let slot = RING_COUNT.fetch_add(1, Ordering::AcqRel);
    let Some((f, l, taken)) = RING_TABLE.get(slot) else {
        RINGS_LOST.store(true, Ordering::Release);
        return None;
    };
    taken.store(0, Ordering::Relaxed);
    f.store(first, Ordering::Relaxed);
    l.store(len, Ordering::Release);
    Some(slot)
}

/// The ring in `slot` has taken `taken` chunks (its newest is `taken - 1`, modulo its length).
#[inline]
pub(crate) fn ring_taken(slot: usize, taken: u64) {
    RING_TABLE[slot].2.store(taken, Ordering::Release);
}

/// The area's word `i`.
fn area_word(area: u64, i: usize) -> &'static AtomicU64 {
    // SAFETY: the area's chunks are claimed and mapped for the life of the lane; words are
    // 8-aligned.
    unsafe { &*(buffer::chunk(area).add(CHUNK_HEADER_SIZE + i * 8) as *const AtomicU64) }
}

/// Word `k` of window descriptor `i`.
fn window_word(area: u64, i: usize, k: usize) -> &'static AtomicU64 {
    area_word(area, fmt::window_at(i) / 8 + k)
}

/// Takes a hit of a site with a latency role, after its record (of TSC `tsc`) was written. An
/// interval starts when the FROM hit's recording is done, not at its record: what recording it
/// cost (a thread's first record sets up its ring) is not the program's time.
#[inline(never)]
pub(crate) fn hit(site: &SiteRec, tsc: u64, tid: u32) {
    let Some(area) = AREA.load(Ordering::Acquire).checked_sub(1) else {
        return;
    };
    if site.latency & TO != 0 {
        let open = OPEN.with(Cell::get);
        if open == 0 {
            area_word(area, word::UNOPENED).fetch_add(1, Ordering::Relaxed);
        } else {
            OPEN.with(|o| o.set(open - 1));
            let from = STARTS.with(|s| s[open - 1].get());
            close(area, from, tsc, tid);
        }
    }
    if site.latency & FROM != 0 {
        let open = OPEN.with(Cell::get);
        if open == DEPTH {
            area_word(area, word::TOO_DEEP).fetch_add(1, Ordering::Relaxed);
        } else {
            STARTS.with(|s| s[open].set((tsc, crate::clock::rdtsc())));
            OPEN.with(|o| o.set(open + 1));
        }
    }
}

/// Accounts the interval from `from` (its FROM record's TSC, and its start) to `to` of thread
/// `tid`, and keeps its window if it is among the longest.
fn close(area: u64, from: (u64, u64), to: u64, tid: u32) {
    let ticks = to.saturating_sub(from.1);
    area_word(area, word::COUNT).fetch_add(1, Ordering::Relaxed);
    area_word(area, word::SUM).fetch_add(ticks, Ordering::Relaxed);
    // A new shortest or longest is rare: a load decides, most of the time without a locked op.
    let (min, max) = (area_word(area, word::MIN), area_word(area, word::MAX));
    if ticks < min.load(Ordering::Relaxed) {
        min.fetch_min(ticks, Ordering::Relaxed);
    }
    if ticks > max.load(Ordering::Relaxed) {
        max.fetch_max(ticks, Ordering::Relaxed);
    }
    let bucket = fmt::HIST_AT / 8 + fmt::bucket(ticks);
    area_word(area, bucket).fetch_add(1, Ordering::Relaxed);
    let bound = area_word(area, word::BOUND_TICKS).load(Ordering::Relaxed);
    if ticks < bound {
        return;
    }
    let threshold = THRESHOLD.load(Ordering::Relaxed);
    if threshold != 0 && ticks <= threshold {
        if bound != 0 {
            // A slow-request log that is full: this one is counted, not kept.
            area_word(area, word::NOT_KEPT).fetch_add(1, Ordering::Relaxed);
        }
        return;
    }
    while LOCKED
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
    keep_window(area, from, to, tid);
    LOCKED.store(false, Ordering::Release);
}

/// Under the window lock: keeps the window of `from..to` if it is still among the longest, and
/// frees the shortest kept one if there are now more than N.
fn keep_window(area: u64, (from, start): (u64, u64), to: u64, tid: u32) {
    let ticks = to.saturating_sub(start);
    let limit = area_word(area, word::LIMIT).load(Ordering::Relaxed) as usize;
    let threshold = THRESHOLD.load(Ordering::Relaxed);
    if threshold != 0 && ticks <= threshold {
        return;
    }
    let free = FREE_DESCRIPTOR.load(Ordering::Relaxed);
    if free > limit || window_word(area, free, 0).load(Ordering::Relaxed) != 0 {
        return;
    }
    let (wanted, ring_short) = scan(from, to, |_| {});
    let Some(first) = take_chunks(wanted) else {
        area_word(area, word::NO_ROOM).fetch_add(1, Ordering::Relaxed);
        return;
    };
    let number = NUMBER.fetch_add(1, Ordering::Relaxed) + 1;
    let mut copied = 0;
    let mut lost = false;
    scan(from, to, |source| {
        if copied == wanted {
            // A chunk that started to overlap after the first pass: newer than the TO record,
            // so it holds none of the window's records.
            return;
        }
        // SAFETY: chunk `first + copied` is one of the chunks taken for this window.
        if unsafe { copy_chunk(source, buffer::chunk(first + copied), number) } {
            copied += 1;
        } else {
            lost = true;
        }
    });
    let before_lane = from < buffer::word(lane::field::START_TSC).load(Ordering::Relaxed);
    let reach = match (before_lane, ring_short) {
        (true, _) => fmt::WINDOW_BEFORE_LANE,
        (false, true) => fmt::WINDOW_RING_SHORT,
        (false, false) => 0,
    };
    let flags = reach | if lost { fmt::WINDOW_CHUNKS_LOST } else { 0 };
    let d = |k: usize| window_word(area, free, k);
    d(1).store(u64::from(tid), Ordering::Relaxed);
    d(2).store(from, Ordering::Relaxed);
    d(3).store(to, Ordering::Relaxed);
    d(4).store(first, Ordering::Relaxed);
    d(5).store(wanted, Ordering::Relaxed);
    d(6).store(flags, Ordering::Relaxed);
    d(7).store(start, Ordering::Relaxed);
    // Last: the descriptor is whole.
    d(0).store(number, Ordering::Release);
    area_word(area, word::KEPT).fetch_add(1, Ordering::Relaxed);
    settle(area, limit, free);
}

/// After a window was added: frees the shortest kept one if N + 1 are kept, and sets the
/// threshold a new interval has to pass (0 while fewer than N are kept).
fn settle(area: u64, limit: usize, added: usize) {
    let kept = KEPT_NOW.fetch_add(1, Ordering::Relaxed) as usize + 1;
    if kept <= limit {
        // Descriptors fill in order until N are kept; the last one stays free.
        FREE_DESCRIPTOR.store(added + 1, Ordering::Relaxed);
        if kept < limit {
            return;
        }
    }
    // N or N + 1 kept: the shortest is freed if N + 1, and sets the threshold.
    let ticks = |i: usize| {
        let d = |k| window_word(area, i, k).load(Ordering::Relaxed);
        d(3).saturating_sub(d(7))
    };
    let live = |i: &usize| window_word(area, *i, 0).load(Ordering::Relaxed) != 0;
    if kept > limit {
        if let Some(i) = (0..=limit).filter(live).min_by_key(|&i| ticks(i)) {
            let first = window_word(area, i, 4).load(Ordering::Relaxed);
            let n = window_word(area, i, 5).load(Ordering::Relaxed);
            // The descriptor first: a reader (or a crash) never sees a window whose chunks are
            // gone.
            window_word(area, i, 0).store(0, Ordering::Release);
            buffer::punch(first, n);
            give_back(first, n);
            FREE_DESCRIPTOR.store(i, Ordering::Relaxed);
            KEPT_NOW.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let threshold = (0..=limit).filter(live).map(ticks).min().unwrap_or(0);
    THRESHOLD.store(threshold, Ordering::Relaxed);
}

/// Calls `each` with every data chunk of the process whose records may overlap `from..=to`;
/// returns how many, and whether some thread's ring no longer reaches back to `from`. Walks each
/// thread's ring back from its newest chunk to the one that holds `from`, so a copy costs what
/// the window holds, not what the lane does; with more threads than the ring table holds, scans
/// the whole lane.
fn scan(from: u64, to: u64, mut each: impl FnMut(*const u8)) -> (u64, bool) {
    let rings = RING_COUNT.load(Ordering::Acquire);
    if RINGS_LOST.load(Ordering::Acquire) || rings > RINGS {
        return scan_lane(from, to, each);
    }
    let (mut count, mut short) = (0, false);
    for (first, len, taken) in &RING_TABLE[..rings] {
        let len = len.load(Ordering::Acquire);
        let (first, taken) = (first.load(Ordering::Relaxed), taken.load(Ordering::Acquire));
        if len == 0 || taken == 0 {
            continue;
        }
        let (mut inside, mut reached) = (false, false);
        for j in (taken.saturating_sub(len)..taken).rev() {
            let c = buffer::chunk(first + j % len);
            if (shared_word(c, 3) >> 56) as u8 != lane::CHUNK_DATA {
                continue;
            }
            let base = shared_word(c, 0);
            if base > to {
                continue;
            }
            // SAFETY: a chunk of the mapping.
            let bytes = unsafe { core::slice::from_raw_parts(c, CHUNK_SIZE) };
            let last = last_tsc(bytes, base);
            if last.is_some_and(|last| last >= from) {
                inside = true;
                count += 1;
                each(c);
            }
            // The newest chunk may be in the middle of being taken again: never the end.
            if base <= from && j + 1 < taken {
                reached = true;
                break;
            }
        }
        // A ring that never wrapped starts at the thread's first record: nothing overwritten.
        short |= inside && !reached && taken > len;
    }
    (count, short)
}

/// Threads whose rings a whole-lane scan follows (more are copied, but not checked for what
/// their rings lost).
const SCAN_THREADS: usize = 128;

/// [`scan`] over every chunk of the lane.
fn scan_lane(from: u64, to: u64, mut each: impl FnMut(*const u8)) -> (u64, bool) {
    let used = buffer::used();
    let chunks = &used[lane::LANE_HEADER_SIZE..];
    let mut count = 0;
    // Per thread: its id, the base of its oldest chunk, whether that is its first, whether it
    // has records in the window.
    let mut threads = [(0u32, u64::MAX, false, false); SCAN_THREADS];
    let mut known = 0;
    let mut k = 0;
    while (k + 1) * CHUNK_SIZE <= chunks.len() {
        let at = k * CHUNK_SIZE;
        let c = &chunks[at..at + CHUNK_SIZE];
        k += 1;
        let w3 = shared_word(c.as_ptr(), 3);
        let kind = (w3 >> 56) as u8;
        if kind == lane::CHUNK_META || kind == CHUNK_LATENCY {
            let len = shared_word(c.as_ptr(), 0);
            k += lane::meta_chunks(len).saturating_sub(1) as usize;
            continue;
        }
        if kind != lane::CHUNK_DATA {
            continue;
        }
        let base = shared_word(c.as_ptr(), 0);
        let inside = base <= to && last_tsc(c, base).is_some_and(|last| last >= from);
        let t = match threads[..known].iter().position(|t| t.0 == w3 as u32) {
            Some(t) => Some(t),
            None if known < SCAN_THREADS => {
                threads[known].0 = w3 as u32;
                known += 1;
                Some(known - 1)
            }
            None => None,
        };
        if let Some(t) = t.map(|t| &mut threads[t]) {
            if base < t.1 {
                (t.1, t.2) = (base, shared_word(c.as_ptr(), 1) == 0);
            }
            t.3 |= inside;
        }
        if inside {
            count += 1;
            each(c.as_ptr());
        }
    }
    let short = threads[..known]
        .iter()
        .any(|&(_, oldest, first, inside)| inside && oldest > from && !first);
    (count, short)
}

/// Word `i` from `p` in a chunk of the lane (a header's, or a slot's), read atomically: its owner
/// may be writing it.
fn shared_word(p: *const u8, i: usize) -> u64 {
    // SAFETY: `p` is in a chunk of the mapping, 8-aligned, as are the words after it.
    unsafe { (*(p.add(i * 8) as *const AtomicU64)).load(Ordering::Acquire) }
}

/// The TSC of the last committed record of the data chunk `c` (of base TSC `base`).
fn last_tsc(c: &[u8], base: u64) -> Option<u64> {
    let slots = (CHUNK_SIZE - CHUNK_HEADER_SIZE) / SLOT_SIZE;
    (0..slots).rev().find_map(|i| {
        let p = c.as_ptr().wrapping_add(CHUNK_HEADER_SIZE + i * SLOT_SIZE);
        let w1 = shared_word(p, 1);
        let kind = (w1 >> 56) as u8;
        (kind != 0 && kind != KIND_ARG_SLOT)
            .then(|| base.wrapping_add(shared_word(p, 0) & MAX_DELTA))
    })
}

/// Copies the data chunk at `source` (whose owner may be writing on) into `dest` as a chunk of
/// window `number`; false, and `dest` left without a header, if the source was taken again for
/// other records while it was read.
///
/// # Safety
/// `dest` is a chunk taken for the window.
unsafe fn copy_chunk(source: *const u8, dest: *mut u8, number: u64) -> bool {
    let (w0, w1, w3) = (
        shared_word(source, 0),
        shared_word(source, 1),
        shared_word(source, 3),
    );
    // SAFETY: `dest` is ours; its header stays uncommitted until the copy is whole.
    unsafe { (*(dest.add(24) as *const AtomicU64)).store(0, Ordering::Release) };
    let mut at = CHUNK_HEADER_SIZE;
    let mut wide = false;
    while at < CHUNK_SIZE {
        // The commit word first: a slot is copied whole or as empty. A wide record's argument
        // slot is written before the record: it is copied only after its record.
        let s1 = shared_word(source.wrapping_add(at), 1);
        let kind = (s1 >> 56) as u8;
        let whole = kind != 0 && (kind != KIND_ARG_SLOT || wide);
        wide = whole && kind != KIND_ARG_SLOT && kind & KIND_WIDE_ARG != 0;
        let (s0, s1) = if whole {
            (shared_word(source.wrapping_add(at), 0), s1)
        } else {
            (0, 0)
        };
        // SAFETY: as above; `at` is inside the chunk.
        unsafe {
            dest.add(at).cast::<u64>().write(s0);
            dest.add(at + 8).cast::<u64>().write(s1);
        }
        at += SLOT_SIZE;
    }
    if shared_word(source, 0) != w0 || shared_word(source, 3) != w3 {
        return false;
    }
    // SAFETY: as above.
    unsafe {
        let w = dest.cast::<u64>();
        w.write(w0);
        w.add(1).write(w1);
        w.add(2).write(number);
        (*w.add(3).cast::<AtomicU64>())
            .store(lane::chunk_word3(w3 as u32, CHUNK_KEPT), Ordering::Release);
    }
    true
}

/// `n` consecutive chunks for a window: a freed range that holds them, else new ones.
fn take_chunks(n: u64) -> Option<u64> {
    if n == 0 {
        return Some(0);
    }
    for (first, len) in &FREE {
        let have = len.load(Ordering::Relaxed);
        if have >= n {
            let k = first.load(Ordering::Relaxed);
            if !buffer::refill(k, n) {
                return None;
            }
            first.store(k + n, Ordering::Relaxed);
            len.store(have - n, Ordering::Relaxed);
            return Some(k);
        }
    }
    buffer::claim(n)
}

/// Remembers the freed chunks `first..first + n` for a later window, joined with the free ranges
/// next to it (windows that grow then fit where the last two were); forgotten if there is no free
/// slot (they stay punched out: no memory, only file offsets).
fn give_back(mut first: u64, mut n: u64) {
    loop {
        let next = FREE.iter().find(|(f, len)| {
            let (f, len) = (f.load(Ordering::Relaxed), len.load(Ordering::Relaxed));
            len != 0 && (f + len == first || first + n == f)
        });
        let Some((f, len)) = next else { break };
        let (g, m) = (f.load(Ordering::Relaxed), len.load(Ordering::Relaxed));
        len.store(0, Ordering::Relaxed);
        first = first.min(g);
        n += m;
    }
    if n == 0 {
        return;
    }
    if let Some((f, len)) = FREE
        .iter()
        .find(|(_, len)| len.load(Ordering::Relaxed) == 0)
    {
        f.store(first, Ordering::Relaxed);
        len.store(n, Ordering::Relaxed);
    }
}
