//! Recorders: takes hits of enabled sites; hands on a TSLOG-style event log, dumped as a trace
//! file (`bootprof_format::trace`), and Lego-style profile points.
//!
//! - **Event log.** A fixed array of 32-byte records, mapped once (`BOOTPROF_BUFFER` records,
//!   default 262,144) and populated when recording starts, so it works from the first constructor
//!   without the allocator and no record pays a page fault. Threads take chunks of it with one atomic add per chunk and fill their chunk with
//!   plain stores: the record path shares no atomic with other threads. When the array is full,
//!   records are dropped and counted; the start of the boot is never overwritten and nothing
//!   blocks. Which hit becomes which record is `bootprof_format::trace::record_kind`.
//! - **Profile points.** Every ENTER/EXIT pair (a function with `-finstrument-functions`, or a
//!   `BOOTPROF_ENTER()`/`EXIT()` region) is a point: a per-thread shadow stack matches them, and the
//!   ENTER site keeps count, total, min and max with relaxed atomics (no lock).
//! - **Dump.** At exit, on `bootprof_dump()`, and on the signal named by `BOOTPROF_DUMP_SIGNAL`
//!   (handled by a thread woken through a pipe, since writing files is not signal-safe), the log is
//!   written to `BOOTPROF_OUTPUT` (default `bootprof.<pid>.trace`) under a temporary name, then
//!   renamed. The TSC frequency is measured between the start of recording and the dump.

use crate::clock::{monotonic_ns, rdtsc};
use crate::note::{note, note_raw};
pub use crate::site::Point;
use crate::site::{self, SiteRec};
use bootprof_format::trace::{self as fmt, Record, RecordKind, SiteEntry, TraceHeader};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Records a thread takes at a time.
const CHUNK: usize = 256;
/// Default capacity, in records.
pub const DEFAULT_BUFFER: usize = 262_144;

#[repr(C)]
struct Slot {
    tsc: u64,
    arg: u64,
    tid: u32,
    site: u32,
    /// 0 = not written (yet).
    kind: u8,
    _pad: [u8; 7],
}

static RECORDING: AtomicBool = AtomicBool::new(false);
static FULL: AtomicBool = AtomicBool::new(false);
static SLOTS: AtomicPtr<Slot> = AtomicPtr::new(std::ptr::null_mut());
static CAPACITY: AtomicUsize = AtomicUsize::new(0);
static NEXT: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static START_TSC: AtomicU64 = AtomicU64::new(0);
static START_NS: AtomicU64 = AtomicU64::new(0);
/// Set by an exit handler: the process is ending, undoing work is wasted.
pub(crate) static EXITING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread's chunk: next free slot and end.
    static CHUNK_POS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// Shadow stack for profile points: (ENTER site, function name pointer, tsc).
    static STACK: Cell<usize> = const { Cell::new(0) };
    static FRAMES: [Cell<(usize, u64)>; STACK_DEPTH] = const { [const { Cell::new((0, 0)) }; STACK_DEPTH] };
}

const STACK_DEPTH: usize = 128;

/// Whether hits are being recorded.
#[inline]
pub fn recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// Starts recording with room for `capacity` records (the first call maps the buffer; later calls
/// only switch recording back on). Returns false if the buffer cannot be mapped.
pub fn start(capacity: usize) -> bool {
    if SLOTS.load(Ordering::Acquire).is_null() {
        let capacity = capacity.max(CHUNK);
        let bytes = capacity * std::mem::size_of::<Slot>();
        // SAFETY: an anonymous private mapping, zero-filled, never unmapped.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                // Populated now: a page fault per 128 records would cost more than recording.
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            note("cannot map the record buffer; not recording");
            return false;
        }
        START_TSC.store(rdtsc(), Ordering::Relaxed);
        START_NS.store(monotonic_ns(), Ordering::Relaxed);
        CAPACITY.store(capacity, Ordering::Relaxed);
        SLOTS.store(p.cast(), Ordering::Release);
    }
    RECORDING.store(true, Ordering::Release);
    true
}

/// The capacity `BOOTPROF_BUFFER` asks for (a positive number of records), else the default.
pub fn configured_capacity() -> usize {
    std::env::var("BOOTPROF_BUFFER")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_BUFFER)
}

/// Stops recording (what was recorded stays, for the dump).
pub fn stop() {
    RECORDING.store(false, Ordering::Release);
}

/// Records one hit of `site` (an enabled site whose record kind is not "none").
#[inline]
pub(crate) fn record(site: &SiteRec, kind: RecordKind, arg: u64, tid: u32, tsc: u64) {
    if matches!(kind, RecordKind::Enter | RecordKind::Exit) {
        profile_point(site, kind, tsc);
    }
    let slots = SLOTS.load(Ordering::Relaxed);
    if slots.is_null() {
        return;
    }
    let pos = CHUNK_POS.with(|c| {
        let (mut pos, mut end) = c.get();
        if pos == end {
            if FULL.load(Ordering::Relaxed) {
                return None;
            }
            let cap = CAPACITY.load(Ordering::Relaxed);
            let start = NEXT.fetch_add(CHUNK, Ordering::Relaxed);
            if start >= cap {
                FULL.store(true, Ordering::Relaxed);
                return None;
            }
            pos = start;
            end = (start + CHUNK).min(cap);
        }
        c.set((pos + 1, end));
        Some(pos)
    });
    let Some(pos) = pos else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    // SAFETY: `pos` is inside the mapping and belongs to this thread's chunk alone.
    unsafe {
        let s = slots.add(pos);
        (*s).tsc = tsc;
        (*s).arg = arg;
        (*s).tid = tid;
        (*s).site = site.id;
        // The kind goes last: a dump running meanwhile skips a slot whose kind is still 0.
        std::ptr::write_volatile(&mut (*s).kind, kind as u8);
    }
}

/// Matches ENTER/EXIT on this thread's shadow stack and accounts the interval to the ENTER site.
fn profile_point(site: &SiteRec, kind: RecordKind, tsc: u64) {
    let depth = STACK.with(Cell::get);
    if kind == RecordKind::Enter {
        if depth < STACK_DEPTH {
            FRAMES.with(|f| f[depth].set((site as *const SiteRec as usize, tsc)));
        }
        STACK.with(|s| s.set(depth + 1));
        return;
    }
    // EXIT: pop to the frame of the same function (frames of functions left by longjmp or
    // unwinding are dropped on the way).
    let mut d = depth.min(STACK_DEPTH);
    while d > 0 {
        d -= 1;
        let (enter, t0) = FRAMES.with(|f| f[d].get());
        // SAFETY: frames hold addresses of leaked, never-freed SiteRecs.
        let enter = unsafe { &*(enter as *const SiteRec) };
        if enter.c_function == site.c_function {
            let ns_ticks = tsc.saturating_sub(t0);
            let p = &enter.point;
            p.count.fetch_add(1, Ordering::Relaxed);
            p.total.fetch_add(ns_ticks, Ordering::Relaxed);
            p.min.fetch_min(ns_ticks, Ordering::Relaxed);
            p.max.fetch_max(ns_ticks, Ordering::Relaxed);
            STACK.with(|s| s.set(d));
            return;
        }
    }
    STACK.with(|s| s.set(depth.saturating_sub(1)));
}

/// TSC ticks per second, measured between the start of recording and now (at least 5 ms, so the
/// clock's jitter of a microsecond or two stays under 0.05%).
pub fn tsc_hz() -> u64 {
    let (mut t0, mut n0) = (
        START_TSC.load(Ordering::Relaxed),
        START_NS.load(Ordering::Relaxed),
    );
    if t0 == 0 {
        t0 = rdtsc();
        n0 = monotonic_ns();
    }
    let mut t1 = rdtsc();
    let mut n1 = monotonic_ns();
    while n1.saturating_sub(n0) < 5_000_000 {
        std::hint::spin_loop();
        t1 = rdtsc();
        n1 = monotonic_ns();
    }
    ((t1 - t0) as u128 * 1_000_000_000 / u128::from(n1 - n0)) as u64
}

/// One line per profile point that was hit: name, count, total ms, average, min and max ns.
pub fn points_table() -> String {
    use std::collections::BTreeMap;
    let hz = tsc_hz() as f64;
    let ns = |ticks: u64| ticks as f64 * 1e9 / hz;
    // Aggregate by name: a function may have several ENTER sites.
    let mut by_name: BTreeMap<&str, (u64, u64, u64, u64)> = BTreeMap::new();
    for s in site::lock().sites.iter() {
        let count = s.point.count.load(Ordering::Relaxed);
        if count == 0 {
            continue;
        }
        let e = by_name.entry(s.function).or_insert((0, 0, u64::MAX, 0));
        e.0 += count;
        e.1 += s.point.total.load(Ordering::Relaxed);
        e.2 = e.2.min(s.point.min.load(Ordering::Relaxed));
        e.3 = e.3.max(s.point.max.load(Ordering::Relaxed));
    }
    let mut rows: Vec<_> = by_name.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1 .1));
    let mut out = format!(
        "{:<40} {:>10} {:>12} {:>12} {:>12} {:>12}\n",
        "profile point", "count", "total ms", "avg ns", "min ns", "max ns"
    );
    for (name, (count, total, min, max)) in rows {
        out.push_str(&format!(
            "{:<40} {:>10} {:>12.3} {:>12.0} {:>12.0} {:>12.0}\n",
            name,
            count,
            ns(total) / 1e6,
            ns(total) / count as f64,
            ns(min),
            ns(max)
        ));
    }
    out
}

/// The default trace path: `BOOTPROF_OUTPUT`, else `bootprof.<pid>.trace`.
pub fn default_path() -> std::path::PathBuf {
    match std::env::var_os("BOOTPROF_OUTPUT") {
        Some(p) if !p.is_empty() => p.into(),
        // SAFETY: getpid has no preconditions.
        _ => format!("bootprof.{}.trace", unsafe { libc::getpid() }).into(),
    }
}

/// Writes the log recorded so far to `path` (atomically: a temporary file, then a rename).
/// Returns the number of records written.
pub fn dump(path: &std::path::Path) -> std::io::Result<u64> {
    let slots = SLOTS.load(Ordering::Acquire);
    let used = NEXT
        .load(Ordering::Relaxed)
        .min(CAPACITY.load(Ordering::Relaxed));
    let mut records: Vec<Record> = Vec::new();
    if !slots.is_null() {
        // SAFETY: the first `used` slots are inside the mapping; unwritten ones have kind 0.
        let all = unsafe { std::slice::from_raw_parts(slots, used) };
        for s in all {
            // SAFETY: reading a byte another thread may be writing: at worst we see 0 and skip.
            let kind = unsafe { std::ptr::read_volatile(&s.kind) };
            if let Some(kind) = RecordKind::from_u8(kind) {
                records.push(Record {
                    tsc: s.tsc,
                    arg: s.arg,
                    tid: s.tid,
                    site: s.site,
                    kind,
                });
            }
        }
    }
    // One thread's records are already in order; several threads' chunks interleave.
    if !records.is_sorted_by_key(|r| r.tsc) {
        records.sort_by_key(|r| r.tsc);
    }

    // Sites (all registered ones), their names in the pool; record site ids -> table indices.
    let mut strings: Vec<u8> = Vec::new();
    let mut interned: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    let mut intern = |s: &'static str, strings: &mut Vec<u8>| -> u32 {
        if s.is_empty() {
            return fmt::NONE;
        }
        *interned.entry(s).or_insert_with(|| {
            let at = strings.len() as u32;
            strings.extend_from_slice(s.as_bytes());
            strings.push(0);
            at
        })
    };
    let reg = site::lock();
    // Site ids are dense (a counter): a table maps them to indices in the trace.
    let max_id = reg
        .sites
        .iter()
        .map(|s| s.id as usize + 1)
        .max()
        .unwrap_or(0);
    let mut index_of = vec![fmt::NO_SITE; max_id];
    let mut sites = Vec::with_capacity(reg.sites.len());
    for (i, s) in reg.sites.iter().enumerate() {
        index_of[s.id as usize] = i as u32;
        sites.push(SiteEntry {
            id: s.id,
            kind: s.kind as u8,
            name: intern(s.name, &mut strings),
            function: intern(s.function, &mut strings),
            provider: intern(s.provider, &mut strings),
            func_offset: s.func_offset,
            address: s.addr,
        });
    }
    drop(reg);
    for r in &mut records {
        r.site = index_of
            .get(r.site as usize)
            .copied()
            .unwrap_or(fmt::NO_SITE);
    }
    // Threads: every tid seen, named from /proc while it still runs.
    let mut tids: Vec<u32> = records.iter().map(|r| r.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    let mut threads = Vec::with_capacity(tids.len());
    for tid in tids {
        let comm = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
            .map(|c| c.trim_end().to_string())
            .unwrap_or_default();
        let name = if comm.is_empty() {
            fmt::NONE
        } else {
            intern(Box::leak(comm.into_boxed_str()), &mut strings)
        };
        threads.push((tid, name));
    }
    let header = TraceHeader {
        tsc_hz: tsc_hz(),
        start_tsc: START_TSC.load(Ordering::Relaxed),
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() } as u32,
        sites: sites.len() as u32,
        threads: threads.len() as u32,
        strings: strings.len() as u32,
        records: records.len() as u64,
        dropped: DROPPED.load(Ordering::Relaxed),
    };
    let (file, tmp) = create_temporary(path)?;
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        fmt::write_trace(header, &sites, &threads, &strings, &records, |b| {
            out.write_all(b)
        })?;
        out.flush()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path)?;
    if EXITING.load(Ordering::Relaxed) {
        // Freeing tens of megabytes page by page only delays the exit.
        std::mem::forget(records);
    }
    Ok(header.records)
}

/// Creates the file a dump to `path` is written into before it is renamed over `path`: beside
/// it, under a name nobody can guess (`mkostemp`: `PATH.XXXXXX`), exclusively (never a file that
/// is already there, never through a symlink planted under that name, as in a directory others
/// can write to), readable and writable by its user only.
fn create_temporary(
    path: &std::path::Path,
) -> std::io::Result<(std::fs::File, std::path::PathBuf)> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::os::unix::io::FromRawFd;
    let mut template = path.as_os_str().as_bytes().to_vec();
    template.extend_from_slice(b".XXXXXX\0");
    // SAFETY: `template` is a writable NUL-terminated buffer ending in XXXXXX, as mkostemp needs.
    let fd = unsafe { libc::mkostemp(template.as_mut_ptr().cast(), libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    template.pop();
    // SAFETY: mkostemp returned a new descriptor that nothing else owns.
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    Ok((file, std::ffi::OsString::from_vec(template).into()))
}

/// Reads the recorder's environment at the first registration: `BOOTPROF_OUTPUT` (or
/// `BOOTPROF_RECORD=1`) starts recording into a buffer of `BOOTPROF_BUFFER` records and dumps at
/// exit; `BOOTPROF_DUMP_SIGNAL` (a number or a name like `USR2`) dumps on that signal;
/// `BOOTPROF_POINTS=1` prints the profile-point table to stderr at exit; `BOOTPROF_STATS=FILE`
/// appends one line of hit counts to FILE at exit (see [`stats_line`]).
pub(crate) fn init_from_environment() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let output = std::env::var_os("BOOTPROF_OUTPUT").is_some_and(|v| !v.is_empty());
        let record = output || std::env::var("BOOTPROF_RECORD").is_ok_and(|v| v == "1");
        let points = std::env::var("BOOTPROF_POINTS").is_ok_and(|v| v == "1");
        if record {
            start(configured_capacity());
        }
        if record || points {
            extern "C" fn at_exit() {
                if std::env::var("BOOTPROF_POINTS").is_ok_and(|v| v == "1") {
                    note_raw(&points_table());
                }
                if SLOTS.load(Ordering::Acquire).is_null() {
                    return;
                }
                let path = default_path();
                match dump(&path) {
                    Ok(n) => {
                        let dropped = DROPPED.load(Ordering::Relaxed);
                        let extra = if dropped > 0 {
                            format!(" ({dropped} dropped: buffer full)")
                        } else {
                            String::new()
                        };
                        note(&format!("{n} records written to {}{extra}", path.display()));
                    }
                    Err(e) => note(&format!("cannot write {}: {e}", path.display())),
                }
            }
            // SAFETY: registers a function with no preconditions.
            unsafe { libc::atexit(at_exit) };
        }
        if std::env::var_os("BOOTPROF_STATS").is_some_and(|v| !v.is_empty()) {
            extern "C" fn append_stats() {
                let Some(path) = std::env::var_os("BOOTPROF_STATS") else {
                    return;
                };
                use std::io::Write;
                let line = stats_line();
                use std::os::unix::fs::OpenOptionsExt;
                // Never through a symlink; a new file is its user's only.
                let written = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(&path)
                    // One write of one short line: O_APPEND keeps lines of concurrent processes whole.
                    .and_then(|mut f| f.write_all(line.as_bytes()));
                if let Err(e) = written {
                    note(&format!(
                        "cannot append to {}: {e}",
                        std::path::Path::new(&path).display()
                    ));
                }
            }
            // SAFETY: registers a function with no preconditions.
            unsafe { libc::atexit(append_stats) };
        }
        extern "C" fn mark_exiting() {
            EXITING.store(true, Ordering::Relaxed);
        }
        // SAFETY: registers a function with no preconditions. Registered after the dump handler,
        // so it runs before it (exit handlers run in reverse order) and before any destructor.
        unsafe { libc::atexit(mark_exiting) };
        if let Ok(sig) = std::env::var("BOOTPROF_DUMP_SIGNAL") {
            match signal_number(&sig) {
                Some(n) => dump_on_signal(n),
                None => note(&format!("BOOTPROF_DUMP_SIGNAL={sig} is not a signal")),
            }
        }
    });
}

/// The line `BOOTPROF_STATS` appends at exit, tab-separated: `pid`, the executable's path,
/// sites registered, sites enabled, hits of enabled sites (all sites' counters summed; each counter
/// may lose counts under concurrent hits of one site), and the most-hit function with its hits.
pub(crate) fn stats_line() -> String {
    let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
    let reg = site::lock();
    let (mut enabled, mut hits, mut top) = (0usize, 0u64, ("-", 0u64));
    for s in &reg.sites {
        let h = s.hits.load(Ordering::Relaxed);
        enabled += usize::from(s.mode().is_some());
        hits += h;
        if h > top.1 {
            top = (s.function, h);
        }
    }
    format!(
        "{}\t{}\t{}\t{enabled}\t{hits}\t{}\t{}\n",
        // SAFETY: getpid has no preconditions.
        unsafe { libc::getpid() },
        exe.display(),
        reg.sites.len(),
        top.0,
        top.1
    )
}

fn signal_number(s: &str) -> Option<libc::c_int> {
    if let Ok(n) = s.parse::<libc::c_int>() {
        return (1..64).contains(&n).then_some(n);
    }
    Some(match s.trim_start_matches("SIG") {
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "HUP" => libc::SIGHUP,
        "PROF" => libc::SIGPROF,
        "WINCH" => libc::SIGWINCH,
        _ => return None,
    })
}

static DUMP_PIPE: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Dumps when `sig` arrives: the handler writes a byte to a pipe; a thread waiting on it dumps.
fn dump_on_signal(sig: libc::c_int) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        note("cannot create the dump pipe");
        return;
    }
    DUMP_PIPE.store(fds[1] as usize, Ordering::Release);
    let reader = fds[0];
    let spawned = std::thread::Builder::new()
        .name("bootprof-dump".into())
        .spawn(move || loop {
            let mut b = [0u8; 1];
            // SAFETY: reads one byte into our buffer from our pipe.
            let n = unsafe { libc::read(reader, b.as_mut_ptr().cast(), 1) };
            if n == 1 {
                let path = default_path();
                match dump(&path) {
                    Ok(n) => note(&format!("{n} records written to {}", path.display())),
                    Err(e) => note(&format!("cannot write {}: {e}", path.display())),
                }
            } else if n == 0 {
                return;
            }
        });
    if spawned.is_err() {
        note("cannot start the dump thread");
        return;
    }
    extern "C" fn on_signal(_: libc::c_int) {
        let fd = DUMP_PIPE.load(Ordering::Acquire);
        if fd != usize::MAX {
            // SAFETY: write(2) is async-signal-safe; one byte from a static buffer.
            unsafe { libc::write(fd as libc::c_int, b"d".as_ptr().cast(), 1) };
        }
    }
    // SAFETY: installs a handler that only calls write(2).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Number of records dropped so far because the buffer was full.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Measures [`record`] on this thread: mean nanoseconds per EVENT record with a fixed timestamp
/// (the recorder's own cost) and with `rdtsc` read for each record, over `n` records into a
/// buffer of `n` (so none is dropped). Starts recording.
#[doc(hidden)]
pub fn record_benchmark(n: usize) -> (f64, f64) {
    start(2 * n + CHUNK);
    let site = site::synthetic_site(0, 0x1000);
    let time = |with_tsc: bool| {
        let t = std::time::Instant::now();
        for i in 0..n as u64 {
            let tsc = if with_tsc { rdtsc() } else { i };
            record(site, RecordKind::Event, i, 1, tsc);
        }
        t.elapsed().as_secs_f64() * 1e9 / n as f64
    };
    (time(false), time(true))
}
