//! Recorders: takes hits of enabled sites; hands on a TSLOG-style event log in a lane (see
//! `buffer` and `bootprof_format::lane`), dumped as a trace file on demand, and
//! Lego-style profile points.
//!
//! - **Event log.** Each thread fills chunks of the lane with 16-byte records using plain stores;
//!   a chunk is claimed with one atomic add, so the record path shares no atomic with other
//!   threads. Each record's last byte commits it. What is kept is chosen per run
//!   (`BOOTPROF_KEEP`): `start` (the default: the first `BOOTPROF_BUFFER` records, default
//!   262,144; later ones are dropped and counted, the start of the boot is never overwritten),
//!   `last` (each thread keeps its last `BOOTPROF_BUFFER` records in a ring of chunks: a flight
//!   recorder) or `all` (the lane grows while the file system has room). In a session
//!   (`BOOTPROF_SESSION`) the lane is a file the records reach as they are written, and how the
//!   process ends (exit status, fatal signal) is written into it. The hit of a site that records
//!   its call stack (`BOOTPROF_STACKTRACE`) is followed by a FRAME record per frame, with the
//!   hit's time (`record_stack`): a stack takes up to 64 records of the buffer.
//! - **Profile points.** Every ENTER/EXIT pair (a function with `-finstrument-functions` or under
//!   `BOOTPROF_GRAPH`, or a `BOOTPROF_ENTER()`/`EXIT()` region) is a point: a per-thread shadow
//!   stack matches them, and the ENTER site keeps count, total, min and max with relaxed atomics
//!   (no lock). Only while someone will read them ([`count_points`]): `BOOTPROF_POINTS=1` from
//!   the start, else from the first call that reads them ([`points_table`],
//!   `bootprof_print_points`) or asks for them (`bootprof_count_points`); the accounting is a
//!   good part of the cost of an EXIT, and a trace holds the same pairs anyway
//!   (`bootprof report --format points`).
//! - **Counts.** With `BOOTPROF_COUNT=1` nothing is recorded: hits are counted exactly, and the
//!   counts go into the lane (or to stderr without a session) when the process ends (`counts`).
//! - **Dump.** At exit (when `BOOTPROF_OUTPUT` is set, or without a session), on
//!   `bootprof_dump()`, and on the signal named by `BOOTPROF_DUMP_SIGNAL` (handled by a thread
//!   woken through a pipe, since writing files is not signal-safe), the log is written as one
//!   trace file (`bootprof_format::trace`) to `BOOTPROF_OUTPUT` (default `bootprof.<pid>.trace`)
//!   under a temporary name, then renamed. The TSC frequency is measured between the start of
//!   recording and the dump.

use crate::buffer;
use crate::clock::{now, rdtsc};
use crate::counts;
use crate::note::{note, note_raw};
use crate::prelude::*;
pub use crate::site::Point;
use crate::site::{self, SiteRec};
use crate::sys;
use bootprof_format::lane::{
    self as lane, field, Keep, Meta, CHUNK_DATA, CHUNK_HEADER_SIZE, CHUNK_SIZE, KIND_ARG_SLOT,
    KIND_WIDE_ARG, MAX_DELTA, MAX_NARROW_ARG, MAX_SITE_ID, RECORDS_PER_CHUNK, SLOT_SIZE,
};
use bootprof_format::trace::{self as fmt, Record, RecordKind, SiteEntry, TraceHeader};
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Default capacity, in records.
pub const DEFAULT_BUFFER: usize = 262_144;

/// Whether recording was ever started (a counting process's dump writes no empty trace).
static STARTED: AtomicBool = AtomicBool::new(false);
/// Whether the lane is one an attach had made ([`start_attached`]): closed when it detaches,
/// let go in a fork child.
static ATTACHED: AtomicBool = AtomicBool::new(false);
/// Keep-start: the lane (`buffer::generation`) that is full, if one is (`u32::MAX` for none).
/// Tagged with its lane: a thread held up in the middle of a record while an attach ended must
/// not find the next attach's lane full.
static FULL: AtomicU32 = AtomicU32::new(u32::MAX);
/// Records dropped by this process (the lane's header has the same count).
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Data chunks handed out (keep-start stops at the lane's limit).
static DATA_CHUNKS: AtomicU64 = AtomicU64::new(0);
/// Threads that have recorded (each named in the lane at its first record).
static THREADS: AtomicU64 = AtomicU64::new(0);
/// Keep-start: record slots the lane may hold (its last chunk may be used in part).
static CAPACITY: AtomicU64 = AtomicU64::new(0);
/// Set by an exit handler: the process is ending, undoing work is wasted.
pub(crate) static EXITING: AtomicBool = AtomicBool::new(false);

/// This thread's place in its lane: what a record reads (one thread-local, so one address).
struct Cursor {
    /// The next slot of the thread's chunk.
    next: Cell<usize>,
    /// The end of the chunk (0: no chunk).
    end: Cell<usize>,
    /// The chunk's base TSC.
    base: Cell<u64>,
    /// The lane (`buffer::generation`) this thread's chunk and ring are in.
    lane: Cell<u32>,
}

crate::sys::thread_local_cells! {
    static CURSOR: Cursor = Cursor {
        next: Cell::new(0),
        end: Cell::new(0),
        base: Cell::new(0),
        lane: Cell::new(0),
    };
    /// Slots this thread filled before its current chunk.
    static BEFORE: Cell<u64> = Cell::new(0);
    /// Address of the first slot of this thread's current chunk.
    static CHUNK_START: Cell<usize> = Cell::new(0);
    /// Keep-last: this thread's ring (first chunk, chunks, chunks taken so far); 0 chunks = none yet.
    static RING: Cell<(u64, u64, u64)> = Cell::new((0, 0, 0));
    /// Keep-last: this thread's ring's place in the table worst-interval tracing reads.
    static RING_SLOT: Cell<Option<usize>> = Cell::new(None);
    /// Shadow stack for profile points: (ENTER site, function name pointer, tsc).
    static STACK: Cell<usize> = Cell::new(0);
    static FRAMES: [Cell<(usize, u64)>; STACK_DEPTH] = [const { Cell::new((0, 0)) }; STACK_DEPTH];
}

const STACK_DEPTH: usize = 128;

/// Whether hits are being recorded.
#[inline]
pub fn recording() -> bool {
    site::hit_path() & site::RECORDS != 0
}

/// What to keep, as `BOOTPROF_KEEP` says (`start`, `last` or `all`; default `start`); measuring
/// intervals (`BOOTPROF_LATENCY`) keeps the last records whatever it says.
pub fn configured_keep() -> Keep {
    if crate::latency::wanted() {
        return Keep::Last;
    }
    match sys::var("BOOTPROF_KEEP") {
        Some(v) if !v.is_empty() => Keep::from_name(v).unwrap_or_else(|| {
            note(&format!(
                "BOOTPROF_KEEP={v} is not start, last or all; keeping the start"
            ));
            Keep::Start
        }),
        _ => Keep::Start,
    }
}

/// Starts recording with room for `capacity` records (per thread when keeping the last ones; the
/// first call creates the buffer, in the session `BOOTPROF_SESSION` names if any; later calls
/// only switch recording back on). Returns false if no buffer can be had.
pub fn start(capacity: usize) -> bool {
    start_with(capacity, configured_keep())
}

/// [`start`] with an explicit keep mode.
pub fn start_with(capacity: usize, keep: Keep) -> bool {
    if !open(capacity, keep) {
        return false;
    }
    STARTED.store(true, Ordering::Relaxed);
    site::set_hit_path(site::RECORDS, true);
    true
}

/// Creates the buffer, if there is none, with room for `capacity` records (in the session
/// `BOOTPROF_SESSION` names, if any), installs the process's exit and fork hooks and describes
/// the sites in it. False if no buffer can be had.
#[cfg_attr(not(feature = "std"), optimize(size))]
fn open(capacity: usize, keep: Keep) -> bool {
    if buffer::exists() {
        return true;
    }
    let chunks = capacity.div_ceil(RECORDS_PER_CHUNK).max(1) as u64;
    CAPACITY.store(capacity as u64, Ordering::Relaxed);
    let session = sys::var_os("BOOTPROF_SESSION").filter(|s| !s.is_empty());
    let setup = buffer::Setup {
        keep,
        limit_chunks: chunks,
    };
    // The tables registered so far are read before the lane exists, and described once below.
    drop(site::lock());
    if let Err(e) = buffer::create(setup, session) {
        note(&e);
        if !buffer::exists() {
            return false;
        }
    }
    install_process_hooks(true);
    describe_tables(&site::lock());
    crate::latency::setup();
    true
}

/// Starts recording, for `bootprof attach`, into a new lane in the session directory `dir`
/// (`keep` and `capacity` as `BOOTPROF_KEEP` and `BOOTPROF_BUFFER` say them); an error when the
/// process records or counts on its own already, or when the lane cannot be made.
pub(crate) fn start_attached(dir: &[u8], keep: Keep, capacity: usize) -> Result<(), String> {
    if buffer::exists() || site::counting() {
        return Err(
            "the program records (or counts) hits on its own already: attach without \
                    recording, or to a program that does not"
                .into(),
        );
    }
    let chunks = capacity.div_ceil(RECORDS_PER_CHUNK).max(1) as u64;
    CAPACITY.store(capacity as u64, Ordering::Relaxed);
    forget_lane_totals();
    DROPPED.store(0, Ordering::Relaxed);
    let setup = buffer::Setup {
        keep,
        limit_chunks: chunks,
    };
    buffer::create_lane(setup, dir)
        .map_err(|e| format!("cannot create a lane in {}: {e}", sys::display(dir)))?;
    ATTACHED.store(true, Ordering::Release);
    // No handlers for fatal signals: an attach changes no disposition of the program's.
    install_process_hooks(false);
    describe_tables(&site::lock());
    STARTED.store(true, Ordering::Relaxed);
    site::set_hit_path(site::RECORDS, true);
    Ok(())
}

/// Stops the recording [`start_attached`] started and closes its lane: what it holds ends where
/// the attach ended (`End::Detached`, after every record begun before it).
pub(crate) fn stop_attached() {
    if !ATTACHED.swap(false, Ordering::AcqRel) {
        return;
    }
    site::set_hit_path(site::RECORDS, false);
    // A hit that saw recording on as it was turned off finishes its record meanwhile, so that
    // the end written below comes after every record in the lane.
    sys::sleep_ns(2_000_000);
    let hz = measured_hz();
    if hz != 0 {
        buffer::word(field::TSC_HZ).store(hz, Ordering::Relaxed);
    }
    if THREADS.load(Ordering::Relaxed) > 1 {
        name_threads();
    }
    buffer::close(Some(lane::End::Detached));
}

/// The capacity `BOOTPROF_BUFFER` asks for (a positive number of records), else the default.
pub fn configured_capacity() -> usize {
    sys::var("BOOTPROF_BUFFER")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_BUFFER)
}

/// Stops recording (what was recorded stays, for the dump).
pub fn stop() {
    site::set_hit_path(site::RECORDS, false);
}

/// Describes the sites of every table read so far in the lane (see [`describe_table`]).
fn describe_tables(reg: &site::Registry) {
    for table in &reg.tables {
        describe_table(table);
    }
}

/// Describes the sites of a table just read in the lane, so that its records can be read
/// without the process: a copy of the table, in one piece, when it holds all its names (as
/// `bootprof-link` writes them), else the names of each site (a metadata blob).
pub(crate) fn describe_table(table: &site::Table) {
    let Some(first) = table.sites.first() else {
        return;
    };
    if !buffer::exists() {
        return;
    }
    if !table.self_contained {
        describe_sites(table.sites);
        return;
    }
    let bytes = table.info.bytes;
    let address = bytes.as_ptr() as u64;
    if buffer::in_session() {
        // The table's bytes are its object's file's: that file is linked into the session
        // directory (once for every process of the session), or else the bytes go from that
        // file to the lane's.
        let (input, from) = mapped_file(address as usize);
        let input = input.as_ref().map_or(-1, |f| f.0);
        if link_object(input, first.id, address, from, bytes.len()) {
            return;
        }
        let head = lane::table_header(first.id, address, bytes.len());
        buffer::append_meta_from_file(&head, input, from, bytes);
        return;
    }
    let meta = Meta::Table {
        first_id: first.id,
        address,
        table: bytes,
    };
    buffer::append_meta(meta.encoded_len(), buffer::Wait::Yes, |room| {
        meta.encode(room)
    });
}

/// The file mapped at `addr`, and the offset of `addr` in it. In the main program: its file,
/// opened through `/proc/self/exe` (the file executed, even if another has taken its name
/// since), the offset from its program headers. Elsewhere, from `/proc/self/maps`: opened
/// through `/proc/self/map_files` (the file mapped, even if another has taken its name since),
/// or, where the kernel refuses that (to a process without `CAP_SYS_ADMIN`), by its path, if the
/// file there is still the one mapped (its device and inode); `None` for anonymous memory or a
/// file that cannot be opened.
fn mapped_file(addr: usize) -> (Option<sys::Fd>, u64) {
    if let Some(at) = sys::offset_in_executable(addr, 1) {
        if let Ok(file) = sys::Fd::open(b"/proc/self/exe", libc::O_RDONLY, 0) {
            return (Some(file), at);
        }
    }
    let Some(m) = sys::file_mapping_of(addr) else {
        return (None, 0);
    };
    let at = m.offset + (addr - m.lo) as u64;
    let by_range = format!("/proc/self/map_files/{:x}-{:x}", m.lo, m.hi);
    if let Ok(file) = sys::Fd::open(by_range.as_bytes(), libc::O_RDONLY, 0) {
        return (Some(file), at);
    }
    let Ok(file) = sys::Fd::open(m.path.as_bytes(), libc::O_RDONLY, 0) else {
        return (None, 0);
    };
    let same = file_of(file.0)
        .is_some_and(|(dev, ino, _)| (libc::major(dev), libc::minor(dev), ino) == m.file);
    (same.then_some(file), at)
}

/// Links the object file open as `input` into the session directory (unless it is there) and
/// tells the lane that the table of `len` bytes at `address`, whose first site is `first_id`,
/// is at `offset` of that file: a system call or two where copying the table into the lane
/// took hundreds of microseconds for every process. The lane names the file by its size and
/// the object's build ID, which a copy of the session keeps. False (and nothing written) when
/// it cannot be done: an object without a build ID, a session directory on another file
/// system, a file the process may not link (`protected_hardlinks`), one deleted since it was
/// loaded.
fn link_object(input: i32, first_id: u32, address: u64, offset: u64, len: usize) -> bool {
    let dir = buffer::session_dir();
    if input < 0 || dir < 0 {
        return false;
    }
    let (Some((dev, ino, size)), Some((id, id_len))) = (file_of(input), build_id_of(address))
    else {
        return false;
    };
    let mut room = [0u8; lane::OBJECT_FILE_NAME_MAX];
    let name = lane::object_file_name(dev, ino, &mut room);
    let name_len = name.len();
    let mut c_name = [0u8; lane::OBJECT_FILE_NAME_MAX + 1];
    c_name[..name_len].copy_from_slice(name.as_bytes());
    let from = format!("/proc/self/fd/{input}\0");
    // SAFETY: two NUL-terminated paths; the directory is the session's, open.
    let linked = unsafe {
        crate::syscall::linkat(
            libc::AT_FDCWD,
            from.as_ptr().cast(),
            dir,
            c_name.as_ptr().cast(),
            libc::AT_SYMLINK_FOLLOW,
        )
    } == 0;
    let there = linked || {
        // Another process of the session linked it: the same file, if it is the same inode.
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated name in the open session directory.
        let fd = unsafe { crate::syscall::openat(dir, c_name.as_ptr().cast(), flags, 0) };
        let same = fd >= 0 && file_of(fd).is_some_and(|(d, i, _)| (d, i) == (dev, ino));
        if fd >= 0 {
            // SAFETY: closes the descriptor opened above.
            unsafe { libc::close(fd) };
        }
        same
    };
    if !there {
        return false;
    }
    let meta = Meta::TableFile {
        first_id,
        address,
        len: len as u64,
        offset,
        size,
        build_id: &id[..id_len],
        name: &c_name[..name_len],
    };
    buffer::append_meta(meta.encoded_len(), buffer::Wait::Yes, |room| {
        meta.encode(room)
    })
}

/// The device, inode and size of the file open as `fd`.
fn file_of(fd: i32) -> Option<(u64, u64, u64)> {
    // SAFETY: all zeroes is a valid stat.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    (crate::syscall::fstat(fd, &mut st) == 0).then_some((st.st_dev, st.st_ino, st.st_size as u64))
}

/// The GNU build ID of the loaded object that maps `addr` (from its `PT_NOTE` segments, in
/// memory), and its length; `None` when it has none (or none longer than 64 bytes).
fn build_id_of(addr: u64) -> Option<([u8; 64], usize)> {
    sys::in_notes(sys::Object::Holding(addr as usize), |notes, align| {
        let id = bootprof_format::note::gnu_build_id(notes, align).filter(|id| id.len() <= 64)?;
        let mut out = [0u8; 64];
        out[..id.len()].copy_from_slice(id);
        Some((out, id.len()))
    })
}

/// Writes the names of `sites` into the lane (a metadata blob).
fn describe_sites(sites: &[SiteRec]) {
    let metas: Vec<Meta> = sites
        .iter()
        .map(|s| {
            let n = s.names();
            Meta::Site {
                id: s.id,
                kind: s.kind as u8,
                func_offset: s.func_offset,
                address: s.addr,
                provider: n.provider.as_bytes(),
                name: n.name.as_bytes(),
                function: n.function.as_bytes(),
            }
        })
        .collect();
    let len: usize = metas.iter().map(Meta::encoded_len).sum();
    let mut blob = vec![0u8; len];
    let mut at = 0;
    for m in &metas {
        at += m.encode(&mut blob[at..]);
    }
    write_meta(&blob);
}

/// Appends a metadata blob to the lane; false if there is no room.
fn write_meta(blob: &[u8]) -> bool {
    buffer::append_meta(blob.len(), buffer::Wait::Yes, |room| {
        room.copy_from_slice(blob);
        blob.len()
    })
}

/// Records one hit of `site` (an enabled site whose record kind is not "none").
#[inline(always)]
pub(crate) fn record(site: &SiteRec, kind: RecordKind, arg: u64, tsc: u64) {
    if site::hit_path() & site::POINTS == 0 && kind != RecordKind::Thread {
        append(site, kind, arg, tsc);
    } else {
        record_in_full(site, kind, arg, tsc);
    }
}

/// [`record`] for a record that accounts no profile point (no one counts them, as
/// `site::hit_path` says) and is no THREAD record, which the caller knows.
///
/// The common case is written here, in line: a record of a site id and an argument that fit
/// one slot, with room for it in this thread's chunk of the current lane, its time within the
/// chunk's reach. Everything else, [`record_in_full`].
#[inline(always)]
pub(crate) fn append(site: &SiteRec, kind: RecordKind, arg: u64, tsc: u64) {
    // A chunk in the current lane means the buffer exists: one that goes away (an attach that
    // ends) changes the lane's generation; a fork child forgets its chunk before it records.
    if site.id <= MAX_SITE_ID && arg <= MAX_NARROW_ARG && lane() == buffer::generation() {
        let (pos, end, base) = cursor();
        // A time before the base wraps around to far beyond its reach.
        let delta = tsc.wrapping_sub(base);
        if pos + SLOT_SIZE <= end && delta <= MAX_DELTA {
            // SAFETY: `pos..pos + SLOT_SIZE` is inside this thread's own chunk.
            unsafe { write_record(pos, delta, site.id, kind as u8, arg) };
            CURSOR.with(|c| c.next.set(pos + SLOT_SIZE));
            return;
        }
    }
    record_in_full(site, kind, arg, tsc);
}

/// [`record`] in every case: a profile point accounted, a new lane, a new chunk, a site id past
/// 24 bits (dropped and counted), a wide argument (a slot of its own), a THREAD record's name.
#[inline(never)]
fn record_in_full(site: &SiteRec, kind: RecordKind, arg: u64, tsc: u64) {
    if matches!(kind, RecordKind::Enter | RecordKind::Exit) && site::hit_path() & site::POINTS != 0
    {
        profile_point(site, kind, tsc);
    }
    if !buffer::exists() {
        return;
    }
    let lane = buffer::generation();
    if self::lane() != lane {
        // The lane this thread's chunk was in is closed (an attach ended): start afresh.
        forget_thread_cursor();
        CURSOR.with(|c| c.lane.set(lane));
        if tsc < buffer::word(field::START_TSC).load(Ordering::Relaxed) {
            // A hit from before this lane began (its thread was held up on its way here since
            // an earlier attach): not this lane's to hold. Its thread's later hits are later.
            return;
        }
    }
    if site.id > MAX_SITE_ID {
        // A record names its site in 24 bits; one that cannot is dropped, and counted.
        drop_record();
        return;
    }
    let wide = arg > MAX_NARROW_ARG;
    let need = SLOT_SIZE << usize::from(wide);
    let (mut pos, mut end, mut base) = cursor();
    let mut delta = tsc.saturating_sub(base);
    // A record older than the chunk's base (an ENTER a filter held back) starts a chunk.
    if pos + need > end || delta > MAX_DELTA || tsc < base {
        match next_chunk(crate::thread::tid(), tsc, pos, end) {
            Some((p, e)) => {
                (pos, end, base, delta) = (p, e, tsc, 0);
            }
            None => {
                set_cursor((0, 0, 0));
                drop_record();
                return;
            }
        }
    }
    let byte = kind as u8;
    // SAFETY: `pos..pos + need` is inside this thread's own chunk.
    unsafe {
        if wide {
            let w = pos as *mut u64;
            w.add(2).write(arg);
            (*w.add(3).cast::<AtomicU64>()).store((KIND_ARG_SLOT as u64) << 56, Ordering::Release);
            write_record(pos, delta, site.id, byte | KIND_WIDE_ARG, 0);
        } else {
            write_record(pos, delta, site.id, byte, arg);
        }
    }
    set_cursor((pos + need, end, base));
    if kind == RecordKind::Thread {
        given_thread_name(site, crate::thread::tid());
    }
}

/// This thread's place in its chunk: the next slot, the end, the base TSC.
#[inline(always)]
fn cursor() -> (usize, usize, u64) {
    CURSOR.with(|c| (c.next.get(), c.end.get(), c.base.get()))
}

/// The lane this thread's chunk and ring are in.
#[inline(always)]
fn lane() -> u32 {
    CURSOR.with(|c| c.lane.get())
}

/// Moves this thread to `(next slot, end, base TSC)` of a chunk.
fn set_cursor((next, end, base): (usize, usize, u64)) {
    CURSOR.with(|c| {
        c.next.set(next);
        c.end.set(end);
        c.base.set(base);
    });
}

/// Writes the 16-byte record at `pos`: `delta` ticks after its chunk's base, of site `id`, of
/// `kind` (a `RecordKind` byte, perhaps with `KIND_WIDE_ARG`), with a narrow `arg`.
///
/// # Safety
/// `pos..pos + SLOT_SIZE` is a free slot of this thread's own chunk.
#[inline(always)]
unsafe fn write_record(pos: usize, delta: u64, id: u32, kind: u8, arg: u64) {
    let w = pos as *mut u64;
    let (w0, w1) = lane::record_words(delta, id, kind, arg);
    // SAFETY: per the contract.
    unsafe {
        w.write(w0);
        // Last: the kind byte commits the record (a reader, or a crash, sees it whole or not).
        (*w.add(1).cast::<AtomicU64>()).store(w1, Ordering::Release);
    }
}

/// Writes the name a THREAD record of `site` gives thread `tid` into the lane's metadata, where
/// it outlives the record (a ring overwrites it). Out of line: the record path keeps a small
/// frame.
#[cold]
#[inline(never)]
fn given_thread_name(site: &SiteRec, tid: u32) {
    let meta = Meta::Thread {
        tid,
        name: site.probe_name().as_bytes(),
        given: true,
    };
    let mut blob = [0u8; 96];
    if meta.encoded_len() <= blob.len() {
        let n = meta.encode(&mut blob);
        write_meta(&blob[..n]);
    }
}

/// Records the call stack of a hit of `site` that stopped the program at `from`, after the hit's
/// own record: one FRAME record per address (`unwind::frames`, with `real` giving the real return
/// address of a hooked frame), with the hit's time.
#[inline(never)]
pub(crate) fn record_stack(
    site: &SiteRec,
    from: crate::unwind::Origin,
    real: impl FnMut(u64, u64) -> u64,
    tsc: u64,
) {
    let mut frames = [0u64; crate::unwind::MAX_FRAMES];
    let n = crate::unwind::frames(
        site.addr,
        site.return_address_on_top(),
        from,
        &mut frames,
        real,
    );
    for &address in &frames[..n] {
        record(site, RecordKind::Frame, address, tsc);
    }
}

#[cold]
fn drop_record() {
    DROPPED.fetch_add(1, Ordering::Relaxed);
    if buffer::exists() {
        buffer::word(field::DROPPED).fetch_add(1, Ordering::Relaxed);
    }
}

/// Claims this thread's next chunk (after the one ending at `end`, filled up to `pos`) and writes
/// its header; its address, or `None` when the record must be dropped.
#[cold]
#[inline(never)]
fn next_chunk(tid: u32, tsc: u64, pos: usize, end: usize) -> Option<(usize, usize)> {
    let first = end == 0;
    let mut slots = RECORDS_PER_CHUNK;
    let before = if first {
        BEFORE.with(Cell::get)
    } else {
        let filled = (pos - CHUNK_START.with(Cell::get)) / SLOT_SIZE;
        BEFORE.with(|b| b.get()) + filled as u64
    };
    BEFORE.with(|b| b.set(before));
    let k = match buffer::keep() {
        Keep::Start => {
            let lane = lane();
            if FULL.load(Ordering::Relaxed) == lane {
                return None;
            }
            let limit = buffer::word(field::LIMIT_CHUNKS).load(Ordering::Relaxed);
            let nth = DATA_CHUNKS.fetch_add(1, Ordering::Relaxed);
            if nth >= limit {
                FULL.store(lane, Ordering::Relaxed);
                return None;
            }
            if nth + 1 == limit {
                // The last chunk holds what is left of the capacity, exactly.
                let left = CAPACITY.load(Ordering::Relaxed) - nth * RECORDS_PER_CHUNK as u64;
                slots = left.min(RECORDS_PER_CHUNK as u64) as usize;
            }
            buffer::claim(1)?
        }
        Keep::All => buffer::claim(1)?,
        Keep::Last => ring_chunk()?,
    };
    if buffer::generation() != lane() {
        // The lane closed, and perhaps another began, since this record began: the chunk just
        // claimed may be the new lane's, which is not this record's.
        return None;
    }
    if first && before == 0 {
        THREADS.fetch_add(1, Ordering::Relaxed);
        name_thread(tid);
    }
    let p = buffer::chunk(k);
    // SAFETY: chunk `k` is this thread's now.
    unsafe { buffer::commit_chunk_header(p, tsc, before, lane::chunk_word3(tid, CHUNK_DATA)) };
    let start = p as usize + CHUNK_HEADER_SIZE;
    CHUNK_START.with(|c| c.set(start));
    Some((start, start + slots * SLOT_SIZE))
}

/// Keep-last: the next chunk of this thread's ring (claimed at its first record); a chunk taken
/// again is cleared first, so none of its old records outlives its new header.
fn ring_chunk() -> Option<u64> {
    let (mut first, mut len, taken) = RING.with(Cell::get);
    if len == 0 {
        // One chunk more than the capacity needs: the one being filled, so that at least the
        // last `capacity` records are always kept.
        len = buffer::word(field::LIMIT_CHUNKS).load(Ordering::Relaxed) + 1;
        first = buffer::claim(len)?;
        RING_SLOT.with(|r| r.set(crate::latency::ring_made(first, len)));
    }
    let k = first + taken % len;
    if taken >= len {
        // SAFETY: chunk `k` is in this thread's ring.
        unsafe { core::ptr::write_bytes(buffer::chunk(k), 0, CHUNK_SIZE) };
    }
    RING.with(|r| r.set((first, len, taken + 1)));
    if let Some(slot) = RING_SLOT.with(Cell::get) {
        crate::latency::ring_taken(slot, taken + 1);
    }
    Some(k)
}

/// Writes this thread's name (`PR_GET_NAME`) into the lane, at its first record.
fn name_thread(tid: u32) {
    let mut comm = [0u8; 17];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into our buffer.
    unsafe { libc::prctl(libc::PR_GET_NAME, comm.as_mut_ptr()) };
    let name = lane::c_string(&comm, 0, 16);
    let meta = Meta::Thread {
        tid,
        name,
        given: false,
    };
    let mut blob = [0u8; 32];
    let n = meta.encode(&mut blob);
    write_meta(&blob[..n]);
}

/// Forgets this thread's chunk and ring, and the lane's totals (in a fork child, whose lane is
/// new).
fn forget_cursor() {
    forget_thread_cursor();
    forget_lane_totals();
}

/// Forgets this thread's chunk and ring.
fn forget_thread_cursor() {
    set_cursor((0, 0, 0));
    BEFORE.with(|b| b.set(0));
    RING.with(|r| r.set((0, 0, 0)));
    RING_SLOT.with(|r| r.set(None));
}

/// Forgets what the recorder counted of the lane (for a new one).
fn forget_lane_totals() {
    DATA_CHUNKS.store(0, Ordering::Relaxed);
    THREADS.store(0, Ordering::Relaxed);
    FULL.store(u32::MAX, Ordering::Relaxed);
}

/// Starts accounting recorded ENTER/EXIT pairs as profile points, from now on (pairs whose ENTER
/// is recorded later; an EXIT whose ENTER came before finds no frame and is not counted). Not
/// undone: the per-thread shadow stacks would go stale. `BOOTPROF_POINTS=1` calls it before the
/// program's constructors; reading the points ([`points_table`]) calls it too.
pub fn count_points() {
    site::want_points();
    site::set_hit_path(site::POINTS, true);
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
        if enter.function_key() == site.function_key() {
            let ns_ticks = tsc.saturating_sub(t0);
            let Some(p) = enter.point() else {
                STACK.with(|s| s.set(d));
                return;
            };
            p.count.fetch_add(1, Ordering::Relaxed);
            p.total.fetch_add(ns_ticks, Ordering::Relaxed);
            // A locked read-modify-write only when the interval is a new extreme (rarely, once
            // the point has a few): the result is the same as fetch_min/fetch_max's.
            if ns_ticks < p.min.load(Ordering::Relaxed) {
                p.min.fetch_min(ns_ticks, Ordering::Relaxed);
            }
            if ns_ticks > p.max.load(Ordering::Relaxed) {
                p.max.fetch_max(ns_ticks, Ordering::Relaxed);
            }
            STACK.with(|s| s.set(d));
            return;
        }
    }
    STACK.with(|s| s.set(depth.saturating_sub(1)));
}

/// TSC ticks per second, measured between the start of recording and now (at least 5 ms, so the
/// clock's jitter of a microsecond or two stays under 0.05%).
pub fn tsc_hz() -> u64 {
    let start = recording_start().unwrap_or_else(now);
    loop {
        if let Some(hz) = hz_between(start, now()) {
            return hz;
        }
        core::hint::spin_loop();
    }
}

/// The TSC and the monotonic clock when recording started (this process's lane was made), if it
/// has.
fn recording_start() -> Option<(u64, u64)> {
    // The lane's header says when it was made.
    buffer::exists().then(|| {
        (
            buffer::word(field::START_TSC).load(Ordering::Relaxed),
            buffer::word(field::START_NS).load(Ordering::Relaxed),
        )
    })
}

/// TSC ticks per second between two readings of [`now`], if they lie at least 5 ms apart (so
/// the clock's jitter of a microsecond or two stays under 0.05%).
fn hz_between(start: (u64, u64), end: (u64, u64)) -> Option<u64> {
    crate::clock::hz_between(start, end, 5_000_000)
}

/// One line per profile point that was hit: name, count, total ms, average, min and max ns.
/// Points are accounted from the first such call (which finds none) unless [`count_points`] or
/// `BOOTPROF_POINTS=1` started the accounting earlier.
#[cfg_attr(not(feature = "std"), optimize(size))]
pub fn points_table() -> String {
    use alloc::collections::BTreeMap;
    site::want_points();
    let counting = site::set_hit_path(site::POINTS, true) & site::POINTS != 0;
    let hz = tsc_hz();
    let scaled = |ticks: u64, per_second: u64, per: u64| ticks_in(ticks, hz, per_second, per);
    let ns = |ticks: u64| scaled(ticks, 1_000_000_000, 1);
    // Aggregate by name: a function may have several ENTER sites.
    let mut by_name: BTreeMap<&str, (u64, u64, u64, u64)> = BTreeMap::new();
    for s in site::lock().sites() {
        let Some(point) = s.point() else {
            continue;
        };
        let count = point.count.load(Ordering::Relaxed);
        if count == 0 {
            continue;
        }
        let e = by_name
            .entry(s.function_name())
            .or_insert((0, 0, u64::MAX, 0));
        e.0 += count;
        e.1 += point.total.load(Ordering::Relaxed);
        e.2 = e.2.min(point.min.load(Ordering::Relaxed));
        e.3 = e.3.max(point.max.load(Ordering::Relaxed));
    }
    let mut rows: Vec<_> = by_name.into_iter().collect();
    bootprof_format::order::sort_by_key(&mut rows, |r| core::cmp::Reverse(r.1 .1));
    let mut out = format!(
        "{:<40} {:>10} {:>12} {:>12} {:>12} {:>12}\n",
        "profile point", "count", "total ms", "avg ns", "min ns", "max ns"
    );
    if !counting {
        // Not silently empty: say why, and how to have them.
        out.push_str(
            "(no profile points were counted before this table: they are counted from now on; \
             run with BOOTPROF_POINTS=1 (bootprof run --points) or call bootprof_count_points() \
             first to count from the start)\n",
        );
    }
    for (name, (count, total, min, max)) in rows {
        let micros = scaled(total, 1_000_000, 1);
        let ms = format!("{}.{:03}", micros / 1000, micros % 1000);
        out.push_str(&format!(
            "{:<40} {:>10} {:>12} {:>12} {:>12} {:>12}\n",
            name,
            count,
            ms,
            scaled(total, 1_000_000_000, count),
            ns(min),
            ns(max)
        ));
    }
    out
}

/// `ticks` of a clock of `hz` ticks per second in units of which a second has `per_second`,
/// divided by `per`, rounded to the nearest: integers only (the runtime formats no floating
/// point, whose code would be in every program).
fn ticks_in(ticks: u64, hz: u64, per_second: u64, per: u64) -> u64 {
    let divisor = u128::from(hz.max(1)) * u128::from(per.max(1));
    let scaled = (u128::from(ticks) * u128::from(per_second) + divisor / 2) / divisor;
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// The default trace path: `BOOTPROF_OUTPUT`, else `bootprof.<pid>.trace`.
pub fn default_path() -> Vec<u8> {
    match sys::var_os("BOOTPROF_OUTPUT") {
        Some(p) if !p.is_empty() => p.to_vec(),
        // SAFETY: getpid has no preconditions.
        _ => format!("bootprof.{}.trace", unsafe { libc::getpid() }).into_bytes(),
    }
}

/// Writes the log recorded so far to `path` (atomically: a temporary file, then a rename).
/// Returns the number of records written.
#[cfg_attr(not(feature = "std"), optimize(size))]
pub fn dump(path: &[u8]) -> sys::Result<u64> {
    let mut records: Vec<Record> = Vec::new();
    let bytes = buffer::used();
    if !bytes.is_empty() {
        // Each thread's chunks in the order it wrote them (a ring reuses its chunks out of
        // order), so that its records come in the order it wrote them: the FRAME records of a
        // stack after its hit, although they share its time.
        let mut data: Vec<(u32, u64, u64, &[u8])> = bytes[lane::LANE_HEADER_SIZE..]
            .chunks_exact(CHUNK_SIZE)
            .filter_map(|c| match lane::chunk(c) {
                lane::Chunk::Data {
                    tid,
                    base,
                    before,
                    slots,
                } => Some((tid, before, base, slots)),
                _ => None,
            })
            .collect();
        bootprof_format::order::sort_by_key(&mut data, |&(tid, before, ..)| (tid, before));
        for (tid, _, base, slots) in data {
            lane::slot_records(base, slots, |r| records.push(r.record(tid)));
        }
    }
    // Several threads' records interleave in time; the sort is stable, so records of one thread
    // and one time (a hit and its stack) stay in their order.
    if !records.is_sorted_by_key(|r| r.tsc) {
        bootprof_format::order::sort_by_key(&mut records, |r| r.tsc);
    }

    // Sites (all registered ones), their names in the pool; record site ids -> table indices.
    let mut strings: Vec<u8> = Vec::new();
    let mut interned: alloc::collections::BTreeMap<&str, u32> = Default::default();
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
    let max_id = reg.sites().map(|s| s.id as usize + 1).max().unwrap_or(0);
    let mut index_of = vec![fmt::NO_SITE; max_id];
    let mut sites = Vec::with_capacity(reg.site_count());
    for (i, s) in reg.sites().enumerate() {
        index_of[s.id as usize] = i as u32;
        let n = s.names();
        sites.push(SiteEntry {
            id: s.id,
            kind: s.kind as u8,
            name: intern(n.name, &mut strings),
            function: intern(n.function, &mut strings),
            provider: intern(n.provider, &mut strings),
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
    // (Runs of one thread's records give its tid once before the sort.)
    let mut tids: Vec<u32> = Vec::new();
    for r in &records {
        if tids.last() != Some(&r.tid) {
            tids.push(r.tid);
        }
    }
    bootprof_format::order::sort_by_key(&mut tids, |&t| t);
    tids.dedup();
    let mut threads = Vec::with_capacity(tids.len());
    for tid in tids {
        let comm = sys::read_to_string(format!("/proc/self/task/{tid}/comm").as_bytes())
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
        start_tsc: recording_start().map_or(0, |(tsc, _)| tsc),
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() } as u32,
        sites: sites.len() as u32,
        threads: threads.len() as u32,
        strings: strings.len() as u32,
        records: records.len() as u64,
        dropped: DROPPED.load(Ordering::Relaxed),
    };
    let write = |file: sys::Fd| {
        write_buffered(&file, |put| {
            fmt::write_trace(header, &sites, &threads, &strings, &records, put)
        })
    };
    write_file(path, write)?;
    if EXITING.load(Ordering::Relaxed) {
        // Freeing tens of megabytes page by page only delays the exit.
        core::mem::forget(records);
    }
    Ok(header.records)
}

/// Writes what `write` puts into `file` a megabyte at a time.
fn write_buffered(
    file: &sys::Fd,
    write: impl FnOnce(&mut dyn FnMut(&[u8]) -> sys::Result<()>) -> sys::Result<()>,
) -> sys::Result<()> {
    let mut out: Vec<u8> = Vec::with_capacity(1 << 20);
    write(&mut |b: &[u8]| {
        if out.len() + b.len() > out.capacity() {
            file.write_all(&out)?;
            out.clear();
        }
        if b.len() >= out.capacity() {
            return file.write_all(b);
        }
        out.extend_from_slice(b);
        Ok(())
    })?;
    file.write_all(&out)
}

/// What `bootprof_dump()` and `BOOTPROF_DUMP_SIGNAL` do. Counting, writes the counts so far (into
/// the lane; without a session, the table to stderr), and the event log to `path` only if
/// recording was started (by the program itself: counting records nothing). Else writes the
/// event log to `path`. Returns the records written, or `None` when no trace file was written.
pub fn dump_on_demand(path: &[u8]) -> sys::Result<Option<u64>> {
    if site::counting() {
        counts::write();
        if !STARTED.load(Ordering::Relaxed) {
            return Ok(None);
        }
    }
    dump(path).map(Some)
}

/// Writes the file at `path` with `write`: into a new file beside it, renamed over it when
/// complete; or, for a device or a pipe (`BOOTPROF_OUTPUT=/dev/null`, a FIFO a reader waits on),
/// into it as it is, not replaced by a file.
fn write_file(path: &[u8], write: impl FnOnce(sys::Fd) -> sys::Result<()>) -> sys::Result<()> {
    if written_in_place(path) {
        return write(sys::Fd::open(path, libc::O_WRONLY, 0)?);
    }
    let (file, tmp) = create_temporary(path)?;
    if let Err(e) = write(file) {
        let _ = sys::remove_file(&tmp);
        return Err(e);
    }
    sys::rename(&tmp, path)
}

/// Whether `path` is written into as it is (`bootprof_format::file::written_in_place`'s rule:
/// `/dev/null`, a FIFO a reader waits on), never replaced by a file put in its place.
fn written_in_place(path: &[u8]) -> bool {
    let p = sys::CPath::new(path);
    // SAFETY: a NUL-terminated path and a stat we own (all zeroes is a valid stat).
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        crate::syscall::stat(p.as_ptr(), &mut st) == 0
            && bootprof_format::file::written_in_place_mode(st.st_mode)
    }
}

/// Creates the file a dump to `path` is written into before it is renamed over `path`: beside
/// it, under a name nobody can guess (`mkostemp`: `PATH.XXXXXX`), exclusively (never a file that
/// is already there, never through a symlink planted under that name, as in a directory others
/// can write to), readable and writable by its user only.
fn create_temporary(path: &[u8]) -> sys::Result<(sys::Fd, Vec<u8>)> {
    let mut template = path.to_vec();
    template.extend_from_slice(b".XXXXXX\0");
    // SAFETY: `template` is a writable NUL-terminated buffer ending in XXXXXX, as mkostemp needs.
    let fd = unsafe { libc::mkostemp(template.as_mut_ptr().cast(), libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(sys::Errno::last());
    }
    template.pop();
    // A new descriptor that nothing else owns.
    Ok((sys::Fd(fd), template))
}

/// Reads the recorder's environment at the first registration: `BOOTPROF_SESSION` (a session
/// directory: the records go into a lane file there), `BOOTPROF_OUTPUT` or `BOOTPROF_RECORD=1`
/// start recording (`BOOTPROF_KEEP`, `BOOTPROF_BUFFER`); the trace is dumped at exit to
/// `BOOTPROF_OUTPUT` when it is set, or when there is no session. `BOOTPROF_DUMP_SIGNAL` (a
/// number or a name like `USR2`) dumps on that signal; `BOOTPROF_POINTS=1` prints the
/// profile-point table to stderr at exit; `BOOTPROF_STATS=FILE` appends one line of hit counts
/// to FILE at exit (see [`stats_line`]). `BOOTPROF_COUNT=1` counts hits exactly instead of
/// recording them (the variables that start recording are then ignored): the counts go into the
/// session's lane, or without a session to stderr at exit (see `counts`).
#[cfg_attr(not(feature = "std"), optimize(size))]
pub(crate) fn init_from_environment() {
    static ONCE: crate::sys::Once = crate::sys::Once::new();
    ONCE.call_once(|| {
        let set = sys::is_set;
        let counting = counts::init_from_environment();
        let record = !counting
            && (set("BOOTPROF_OUTPUT")
                || set("BOOTPROF_SESSION")
                || crate::sys::var_is("BOOTPROF_RECORD", "1"));
        let points = crate::sys::var_is("BOOTPROF_POINTS", "1");
        if points {
            count_points();
        }
        if record {
            start(configured_capacity());
        }
        if counting {
            if set("BOOTPROF_SESSION") {
                // The lane, for the sites' names and the counts; nothing is recorded into it.
                open(configured_capacity(), configured_keep());
            }
            if !buffer::in_session() {
                sys::at_exit(counts::print_at_exit);
            }
        }
        if record || points {
            extern "C" fn at_exit() {
                if crate::sys::var_is("BOOTPROF_POINTS", "1") {
                    note_raw(&points_table());
                }
                let wanted = sys::is_set("BOOTPROF_OUTPUT") || !buffer::in_session();
                if !buffer::exists() || !wanted {
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
                        let path = sys::display(&path);
                        note(&format!("{n} records written to {path}{extra}"));
                    }
                    Err(e) => note(&format!("cannot write {}: {e}", sys::display(&path))),
                }
            }
            sys::at_exit(at_exit);
        }
        if sys::is_set("BOOTPROF_STATS") {
            sys::at_exit(append_stats);
        }
        extern "C" fn mark_exiting() {
            EXITING.store(true, Ordering::Relaxed);
        }
        // Registered after the dump handler, so it runs before it (exit handlers run in reverse
        // order) and before any destructor.
        sys::at_exit(mark_exiting);
        if let Some(sig) = sys::var("BOOTPROF_DUMP_SIGNAL") {
            match signal_number(sig) {
                Some(n) => dump_on_signal(n),
                None => note(&format!("BOOTPROF_DUMP_SIGNAL={sig} is not a signal")),
            }
        }
    });
}

#[cfg_attr(not(feature = "std"), optimize(size))]
extern "C" fn append_stats() {
    let Some(path) = sys::var_os("BOOTPROF_STATS") else {
        return;
    };
    let line = stats_line();
    // Never through a symlink; a new file is its user's only.
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_NOFOLLOW;
    let written = sys::Fd::open(path, flags, 0o600)
        // One write of one short line: O_APPEND keeps lines of concurrent processes whole.
        .and_then(|f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        note(&format!("cannot append to {}: {e}", sys::display(path)));
    }
}

/// Signals that end a process whose end a lane records (when the program leaves them at their
/// default action): the faults, `abort`, and SIGTERM (how a service is stopped). SIGINT, SIGHUP,
/// SIGQUIT and SIGPIPE are left alone: programs commonly install their own handler for those
/// only when they are at their default action, and a handler of ours would change that; the
/// parent that reaps such a process still knows.
const FATAL_SIGNALS: [libc::c_int; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
    libc::SIGTERM,
];

extern "C" {
    /// glibc's exit handler that is given the exit status.
    fn on_exit(
        f: extern "C" fn(libc::c_int, *mut libc::c_void),
        arg: *mut libc::c_void,
    ) -> libc::c_int;
}

/// Once, when the buffer is created: a fork child gets a lane of its own; the lane records the
/// exit status (`on_exit`) and the fatal signal that ends the process (a handler for each of
/// [`FATAL_SIGNALS`] still at its default action, which writes the signal into the lane and
/// raises it again with the default action, so the process ends as it would have); a counting
/// process writes its counts just before either.
fn install_process_hooks(fatal_signals: bool) {
    extern "C" fn child() {
        forget_cursor();
        if ATTACHED.swap(false, Ordering::AcqRel) {
            // The attach is the parent's: its lane is not the child's to write into.
            site::set_hit_path(site::RECORDS, false);
            buffer::close(None);
        } else if !buffer::after_fork() {
            site::set_hit_path(site::RECORDS, false);
        } else if buffer::exists() {
            crate::latency::setup();
        }
    }
    extern "C" fn exited(status: libc::c_int, _: *mut libc::c_void) {
        // The counts first: a lane that says how its process ended has its last counts.
        if site::counting() {
            counts::write_into_lane();
        }
        buffer::set_end(lane::End::Exit, status as u32);
        if buffer::exists() && buffer::in_session() {
            let hz = measured_hz();
            if hz != 0 {
                buffer::word(field::TSC_HZ).store(hz, Ordering::Relaxed);
            }
            // With several threads, one may have been named after its first record. (One
            // thread's name is the program's, taken at its first record.)
            if THREADS.load(Ordering::Relaxed) > 1 {
                name_threads();
            }
        }
    }
    extern "C" fn fatal(sig: libc::c_int) {
        site::set_hit_path(site::RECORDS, false);
        if site::counting() {
            counts::write_into_lane();
        }
        buffer::set_end(lane::End::Signal, sig as u32);
        // SAFETY: signal and raise are async-signal-safe. The signal is blocked until this
        // handler returns; then it ends the process with the default action (a fault re-runs
        // the faulting instruction, which faults again, now without us).
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
    static ONCE: crate::sys::Once = crate::sys::Once::new();
    // SAFETY: registers handlers with no preconditions.
    ONCE.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(child));
        on_exit(exited, core::ptr::null_mut());
    });
    if !buffer::in_session() || !fatal_signals {
        return;
    }
    for sig in FATAL_SIGNALS {
        // SAFETY: reads the current action, and replaces it only when it is the default.
        unsafe {
            let mut old: libc::sigaction = core::mem::zeroed();
            if crate::syscall::sigaction(sig, core::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = fatal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            crate::syscall::sigaction(sig, &sa, core::ptr::null_mut());
        }
    }
}

/// The TSC frequency if recording has run long enough to measure it without waiting, else 0.
fn measured_hz() -> u64 {
    recording_start()
        .and_then(|start| hz_between(start, now()))
        .unwrap_or(0)
}

/// Writes the names the process's threads have now (`/proc/self/task/*/comm`) into the lane:
/// a thread may have been named after its first record.
#[cfg_attr(not(feature = "std"), optimize(size))]
fn name_threads() {
    let Ok(names) = sys::read_dir(b"/proc/self/task") else {
        return;
    };
    let mut blob = Vec::new();
    for name in names {
        let Some(tid) = core::str::from_utf8(&name)
            .ok()
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(comm) = sys::read_to_string(format!("/proc/self/task/{tid}/comm").as_bytes()) else {
            continue;
        };
        let meta = Meta::Thread {
            tid,
            name: comm.trim_end().as_bytes(),
            given: false,
        };
        let at = blob.len();
        blob.resize(at + meta.encoded_len(), 0);
        meta.encode(&mut blob[at..]);
    }
    if !blob.is_empty() {
        write_meta(&blob);
    }
}

/// The line `BOOTPROF_STATS` appends at exit, tab-separated: `pid`, the executable's path,
/// sites registered, sites enabled, hits of enabled sites (all sites' counters summed; each counter
/// may lose counts under concurrent hits of one site, unless counting with `BOOTPROF_COUNT=1`), and
/// the most-hit function with its hits.
pub(crate) fn stats_line() -> String {
    let exe = sys::read_link(b"/proc/self/exe").unwrap_or_default();
    let reg = site::lock();
    let (mut enabled, mut hits, mut top) = (0usize, 0u64, ("-", 0u64));
    for s in reg.sites() {
        let h = s.hits.load(Ordering::Relaxed);
        enabled += usize::from(s.mode().is_some());
        hits += h;
        if h > top.1 {
            top = (s.function(), h);
        }
    }
    format!(
        "{}\t{}\t{}\t{enabled}\t{hits}\t{}\t{}\n",
        // SAFETY: getpid has no preconditions.
        unsafe { libc::getpid() },
        sys::display(&exe),
        reg.site_count(),
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
    if unsafe { crate::syscall::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        note("cannot create the dump pipe");
        return;
    }
    DUMP_PIPE.store(fds[1] as usize, Ordering::Release);
    let reader = fds[0];
    let spawned = sys::spawn(c"bootprof-dump", move || loop {
        let mut b = [0u8; 1];
        // SAFETY: reads one byte into our buffer from our pipe.
        let n = unsafe { libc::read(reader, b.as_mut_ptr().cast(), 1) };
        if n == 1 {
            let path = default_path();
            match dump_on_demand(&path) {
                Ok(Some(n)) => note(&format!("{n} records written to {}", sys::display(&path))),
                Ok(None) => {}
                Err(e) => note(&format!("cannot write {}: {e}", sys::display(&path))),
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
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        crate::syscall::sigaction(sig, &sa, core::ptr::null_mut());
    }
}

/// Number of records dropped so far because the buffer was full.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Measures [`record`] on this thread, in the buffer the environment asks for (a session lane or
/// memory; `BOOTPROF_KEEP`): mean nanoseconds per EVENT record with a fixed timestamp (the
/// recorder's own cost) and with `rdtsc` read for each record, over `n` records each into a
/// buffer grown beforehand to hold them (so none is dropped and none waits for the buffer to
/// grow); then, except when keeping the last records (whose ring is claimed whole), with a fixed
/// timestamp into `n` more slots the buffer must first grow to hold. Starts recording.
#[doc(hidden)]
pub fn record_benchmark(n: usize) -> (f64, f64, Option<f64>) {
    start(4 * n + RECORDS_PER_CHUNK);
    let site = site::synthetic_site(0, 0x1000);
    let chunks = |records: usize| (records / RECORDS_PER_CHUNK + 4) as u64;
    let ring = buffer::keep() == Keep::Last;
    buffer::grow_to(chunks(if ring { 5 * n } else { 2 * n }));
    let time = |with_tsc: bool| {
        let t = crate::sys::Instant::now();
        for i in 0..n as u64 {
            let tsc = if with_tsc { rdtsc() } else { i };
            record(site, RecordKind::Event, i, tsc);
        }
        t.elapsed_ns() as f64 / n as f64
    };
    let (bare, with_tsc) = (time(false), time(true));
    (bare, with_tsc, (!ring).then(|| time(false)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The points table's times: rounded to the nearest unit, exact where floats were not, and
    /// no overflow for a day of ticks at 5 GHz.
    #[test]
    fn ticks_convert_to_rounded_units_in_integers() {
        let ghz3 = 3_000_000_000;
        assert_eq!(ticks_in(4_500_000, ghz3, 1_000_000, 1), 1500); // 1.500 ms
        assert_eq!(ticks_in(4_500_000, ghz3, 1_000_000_000, 3), 500_000); // average of 3
        assert_eq!(ticks_in(4, ghz3, 1_000_000_000, 1), 1); // 1.33 ns
        assert_eq!(ticks_in(5, ghz3, 1_000_000_000, 1), 2); // 1.67 ns
        assert_eq!(ticks_in(7, 0, 1, 0), 7); // no clock rate: ticks as they are
        let day = 5_000_000_000 * 86_400;
        assert_eq!(
            ticks_in(day, 5_000_000_000, 1_000_000_000, 1),
            86_400 * 1_000_000_000
        );
    }

    /// A hit of a site whose id does not fit a record is counted as dropped, never lost unseen.
    /// (The only test of this binary that records: the recorder is one per process.)
    #[test]
    fn a_site_id_past_24_bits_is_dropped_and_counted() {
        assert!(start_with(RECORDS_PER_CHUNK, Keep::Start));
        let fits = site::synthetic_site(MAX_SITE_ID, 0x1000);
        let past = site::synthetic_site(MAX_SITE_ID + 1, 0x2000);
        record(fits, RecordKind::Event, 1, 100);
        record(past, RecordKind::Event, 2, 200);
        assert_eq!(dropped(), 1);
        assert_eq!(buffer::word(field::DROPPED).load(Ordering::Relaxed), 1);
    }
}
