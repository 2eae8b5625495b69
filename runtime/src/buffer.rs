//! The recording buffer: takes claims for chunks from the recorder, and metadata blobs (site
//! names, thread names, hit counts); hands back chunk memory in a lane (layout in
//! `bootprof_format::lane`).
//!
//! In a session (`BOOTPROF_SESSION=DIR`) the lane is a file in DIR, created exclusively and
//! mapped shared: every store lands in the page cache at once, so whatever ends the process, the
//! records it wrote are there for `bootprof report`. Without a session the lane is anonymous
//! memory, dumped by the recorder. Either way a large range of address space is reserved once and
//! the lane grows inside it (the file by `fallocate`, so a full disk is a failed claim, never a
//! SIGBUS), its new pages populated up front, so a record rarely pays a page fault.
//!
//! A `fork` child gets a lane of its own (`after_fork`), which names its parent's lane for the
//! sites registered before the fork. Claims never block on a lock: growing is done by whichever
//! thread needs it first while the others wait a few microseconds for it (a thread cannot wait on
//! itself: the dispatcher never re-enters the recorder on one thread).

use crate::clock::{monotonic_ns, rdtsc, realtime_ns};
use crate::prelude::*;
use crate::sys::{self, display, Errno};
use bootprof_format::lane::{self as fmt, field, Keep, CHUNK_SIZE, LANE_HEADER_SIZE};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Start of the mapping (the lane header); null until a buffer exists. After [`close`] it
/// points at what took the closed lane's place (anonymous memory), never at nothing, so that a
/// thread still on its way through a record writes into memory that is there.
static BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
/// Whether the buffer at `BASE` is in use (false after [`close`]).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Counts the lanes closed: a thread whose chunk belongs to an older lane forgets it.
static GENERATION: AtomicU32 = AtomicU32::new(0);
/// The address ranges attach lanes use in turn, (start, length) each, 0 until first used: a
/// range, once reserved, is never unmapped (a closed lane leaves anonymous memory in its place),
/// so a thread held up in the middle of a record across any number of attaches writes into
/// memory that is there, never crashes; and it is used again only [`RANGES`] lanes later, so
/// that such a late write lands in a later lane only if its thread was held up for that many
/// attaches.
static ATTACH_RANGES: [[AtomicU64; 2]; RANGES] =
    [const { [const { AtomicU64::new(0) }; 2] }; RANGES];
/// How many ranges attach lanes take turns in.
const RANGES: usize = 4;
/// The range the next attach lane uses.
static NEXT_RANGE: AtomicU32 = AtomicU32::new(0);
/// Chunks the mapping may ever hold.
static MAX_CHUNKS: AtomicU64 = AtomicU64::new(0);
static GROWING: AtomicBool = AtomicBool::new(false);
/// The lane file, or -1 for anonymous memory.
static FD: AtomicI32 = AtomicI32::new(-1);
/// The session directory, or -1.
static DIR_FD: AtomicI32 = AtomicI32::new(-1);
static KEEP: AtomicU32 = AtomicU32::new(Keep::Start as u32);
/// The lane file's name in the session (for a fork child's header), NUL-padded.
static NAME: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

/// Address space reserved for a lane: records never move, so the range is taken once.
const RESERVE: [usize; 4] = [64 << 30, 8 << 30, 1 << 30, 64 << 20];
/// Chunks a lane starts with (32 KiB: a short process's metadata and first records).
const FIRST_CHUNKS: u64 = 8;
/// At least this many chunks are added at once (256 KiB).
const MIN_STEP: u64 = 64;
/// At most this many chunks are added at once (4 MiB): a step of new pages stalls the thread
/// that makes them for milliseconds, and `bootprof run` makes a lane's pages up to 8 MiB
/// ahead of it (runtime/report/src/grow.rs), which a larger step would outrun.
const MAX_STEP: u64 = 1024;

/// What a new buffer is for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setup {
    pub keep: Keep,
    /// See `field::LIMIT_CHUNKS`.
    pub limit_chunks: u64,
}

/// Whether a buffer exists.
#[inline]
pub(crate) fn exists() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Which lane the buffer is: a thread's chunk in an older one is no longer its to fill.
#[inline]
pub(crate) fn generation() -> u32 {
    GENERATION.load(Ordering::Acquire)
}

/// The keep mode of the buffer.
#[inline]
pub(crate) fn keep() -> Keep {
    Keep::from_u32(KEEP.load(Ordering::Relaxed)).unwrap_or(Keep::Start)
}

/// The session directory, open (-1 outside a session).
pub(crate) fn session_dir() -> i32 {
    DIR_FD.load(Ordering::Relaxed)
}

/// Whether the buffer is a lane file in a session.
pub(crate) fn in_session() -> bool {
    FD.load(Ordering::Relaxed) >= 0
}

/// A header field of the lane, as an atomic word.
#[inline]
pub(crate) fn word(offset: usize) -> &'static AtomicU64 {
    let base = BASE.load(Ordering::Relaxed);
    debug_assert!(!base.is_null());
    // SAFETY: the header's page is mapped for the life of the process; fields are 8-aligned.
    unsafe { &*(base.add(offset) as *const AtomicU64) }
}

/// Chunks the lane holds (file allocated, pages populated): the header's `GROWN` word, which
/// readers use to tell a failed claim from a file cut short.
#[inline]
fn grown() -> &'static AtomicU64 {
    word(field::GROWN)
}

/// Writes a `u32` header field (the low half of its word is the field, the high half the next).
pub(crate) fn set_u32(offset: usize, value: u32) {
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: as in `word`; a 4-aligned field in the header page.
    unsafe { (*(base.add(offset) as *const AtomicU32)).store(value, Ordering::Relaxed) };
}

/// The memory of chunk `k` (which the caller claimed).
#[inline]
pub(crate) fn chunk(k: u64) -> *mut u8 {
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: claimed chunks are inside the mapping (see `claim`).
    unsafe { base.add(LANE_HEADER_SIZE + k as usize * CHUNK_SIZE) }
}

/// Chunks claimed so far, and the bytes of the mapping that hold them (for the dump).
pub(crate) fn used() -> &'static [u8] {
    if !exists() {
        return &[];
    }
    let n = word(field::CLAIMED)
        .load(Ordering::Acquire)
        .min(grown().load(Ordering::Acquire));
    // SAFETY: the first `n` chunks exist and stay mapped.
    unsafe {
        core::slice::from_raw_parts(
            BASE.load(Ordering::Relaxed),
            LANE_HEADER_SIZE + n as usize * CHUNK_SIZE,
        )
    }
}

/// Claims `n` consecutive chunks; their index, or `None` when the lane cannot grow to hold them.
pub(crate) fn claim(n: u64) -> Option<u64> {
    claim_as(n, Wait::Yes)
}

/// Whether a claim that needs the lane grown waits while another thread grows it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    Yes,
    /// In a signal handler: the thread it interrupted may be the one growing the lane, which
    /// would never finish; the claim fails instead.
    No,
}

fn claim_as(n: u64, wait: Wait) -> Option<u64> {
    let k = word(field::CLAIMED).fetch_add(n, Ordering::AcqRel);
    let end = k.checked_add(n)?;
    (end <= grown().load(Ordering::Acquire) || grow(end, wait)).then_some(k)
}

/// Appends a metadata blob (`bootprof_format::lane::Meta` entries) of at most `len` bytes to the
/// lane: `fill` writes it in place (into zeroed memory) and returns the bytes it used. False if
/// there is no room. Async-signal-safe with [`Wait::No`] and a `fill` that is.
pub(crate) fn append_meta(len: usize, wait: Wait, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
    let Some(k) = claim_as(fmt::meta_chunks(len as u64), wait) else {
        return false;
    };
    let p = chunk(k);
    // SAFETY: the claimed chunks are ours, consecutive in the mapping, and hold `len` bytes after
    // the first one's header (`meta_chunks`); a new claim's memory is zero.
    let used = fill(unsafe { core::slice::from_raw_parts_mut(p.add(fmt::CHUNK_HEADER_SIZE), len) });
    // SAFETY: chunk `k` is ours.
    unsafe {
        commit_chunk_header(
            p,
            used.min(len) as u64,
            0,
            fmt::chunk_word3(0, fmt::CHUNK_META),
        )
    };
    true
}

/// Appends a metadata blob of `head` followed by the `len` bytes at offset `from` of the file
/// `input` (which are also the bytes at `copy`, its mapping): the bytes go from file to file
/// (`copy_file_range`, in the kernel), not through this process's memory, when the lane is a
/// file; else, or when that fails, they are copied from `copy`. A site table of a large program
/// (900 KB for 21,000 sites) then costs its start-up a third of what populating the lane's pages
/// and copying into them did. False if there is no room.
pub(crate) fn append_meta_from_file(head: &[u8], input: i32, from: u64, copy: &[u8]) -> bool {
    let len = head.len() + copy.len();
    let n = fmt::meta_chunks(len as u64);
    let k = word(field::CLAIMED).fetch_add(n, Ordering::AcqRel);
    let Some(end) = k.checked_add(n) else {
        return false;
    };
    if end > grown().load(Ordering::Acquire) && !grow_populating(end, Wait::Yes, end) {
        return false;
    }
    let p = chunk(k);
    // SAFETY: the claimed chunks are ours, consecutive in the mapping, and hold `len` bytes after
    // the first one's header (`meta_chunks`).
    let room = unsafe { core::slice::from_raw_parts_mut(p.add(fmt::CHUNK_HEADER_SIZE), len) };
    room[..head.len()].copy_from_slice(head);
    let fd = FD.load(Ordering::Relaxed);
    let at = LANE_HEADER_SIZE + k as usize * CHUNK_SIZE + fmt::CHUNK_HEADER_SIZE + head.len();
    let (mut in_off, mut out_off, mut left) = (from as i64, at as i64, copy.len());
    while fd >= 0 && input >= 0 && left > 0 {
        match crate::syscall::copy_file_range(input, &mut in_off, fd, &mut out_off, left) {
            n if n > 0 => left -= n as usize,
            _ => break,
        }
    }
    if fd < 0 || input < 0 || left > 0 {
        room[head.len()..].copy_from_slice(copy);
    }
    // SAFETY: chunk `k` is ours.
    unsafe { commit_chunk_header(p, len as u64, 0, fmt::chunk_word3(0, fmt::CHUNK_META)) };
    true
}

/// Writes a chunk header's first words, then word 3 (which commits it).
///
/// # Safety
/// `p` is a chunk this thread claimed.
#[inline]
pub(crate) unsafe fn commit_chunk_header(p: *mut u8, w0: u64, w1: u64, w3: u64) {
    let w = p.cast::<u64>();
    // SAFETY: per the contract; chunks are 4096-aligned.
    unsafe {
        w.write(w0);
        w.add(1).write(w1);
        w.add(2).write(0);
        (*w.add(3).cast::<AtomicU64>()).store(w3, Ordering::Release);
    }
}

/// Makes the lane hold at least `end` chunks now (a benchmark's buffer, grown beforehand).
pub(crate) fn grow_to(end: u64) -> bool {
    end <= grown().load(Ordering::Acquire) || grow(end, Wait::Yes)
}

/// Grows the lane to at least `end` chunks; false if it cannot (or, not waiting, if another
/// thread is growing it).
#[cold]
fn grow(end: u64, wait: Wait) -> bool {
    grow_populating(end, wait, 0)
}

/// [`grow`], populating only the new chunks from `populate_from` on (those before it are to be
/// written through the file, where populating their pages first would only cost time).
fn grow_populating(end: u64, wait: Wait, populate_from: u64) -> bool {
    loop {
        if GROWING
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            let have = grown().load(Ordering::Acquire);
            let ok = end <= have || {
                let step = if have == 0 {
                    FIRST_CHUNKS
                } else {
                    (have / 4).clamp(MIN_STEP, MAX_STEP)
                };
                let to = end.max(have + step).min(MAX_CHUNKS.load(Ordering::Relaxed));
                let ok = end <= to && extend(have, to, populate_from);
                if ok {
                    grown().store(to, Ordering::Release);
                }
                ok
            };
            GROWING.store(false, Ordering::Release);
            return ok;
        }
        if wait == Wait::No {
            return false;
        }
        while GROWING.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
        if end <= grown().load(Ordering::Acquire) {
            return true;
        }
    }
}

/// Makes chunks `from..to` exist: allocated in the file (a full file system fails here, not with
/// a SIGBUS on a store later) and populated, but for those before `populate_from`, which are to
/// be written through the file: neither populated nor written with zeros first.
fn extend(from: u64, to: u64, populate_from: u64) -> bool {
    let at = LANE_HEADER_SIZE + from as usize * CHUNK_SIZE;
    let len = (to - from) as usize * CHUNK_SIZE;
    let skip = (populate_from.clamp(from, to) - from) as usize * CHUNK_SIZE;
    let fd = FD.load(Ordering::Relaxed);
    if fd >= 0 {
        zeros_past_end(fd, at + skip, at + len);
        let r = crate::syscall::fallocate(fd, 0, at as libc::off_t, len as libc::off_t);
        if r != 0 {
            let unsupported = crate::sys::Errno::last().0 == libc::EOPNOTSUPP;
            // SAFETY: a plain system call on our own descriptor.
            if !unsupported || unsafe { libc::ftruncate(fd, (at + len) as libc::off_t) } != 0 {
                return false;
            }
        }
    }
    crate::sys::populate_write(
        BASE.load(Ordering::Relaxed) as usize + at + skip,
        len - skip,
    );
    true
}

/// Writes zeros into the part of `from..to` that lies past the end of the lane file `fd`. On
/// ext4 a page the process then populates costs it about 1 µs written so, against 4 µs only
/// allocated (an unwritten extent's page is made at the fault, and marked written later);
/// `bootprof run`'s grower, when it is ahead, has written them already, and nothing is written
/// here. Only past the end: what lies before it may hold records (a punched window's chunks
/// being reused read as zeros anyway). Best effort: where it fails, `fallocate` decides.
fn zeros_past_end(fd: libc::c_int, from: usize, to: usize) {
    /// Bytes written at once: pieces of one page of zeros.
    const PIECES: usize = 256;
    let page = [0u8; 4096];
    let iov = [libc::iovec {
        iov_base: page.as_ptr() as *mut libc::c_void,
        iov_len: page.len(),
    }; PIECES];
    // SAFETY: a plain system call on our own descriptor.
    let end = unsafe { libc::lseek(fd, 0, libc::SEEK_END) };
    let Ok(mut at) = usize::try_from(end) else {
        return;
    };
    at = at.max(from);
    while at < to {
        let n = (to - at).div_ceil(page.len()).min(PIECES);
        // SAFETY: `n` iovecs of our own page of zeros, which the kernel only reads.
        let written = unsafe {
            crate::syscall::pwritev(fd, iov.as_ptr(), n as libc::c_int, at as libc::off_t)
        };
        if written <= 0 {
            return;
        }
        at += written as usize;
    }
}

/// Frees chunks `k..k + n` (a kept window a longer one replaced): their blocks leave the file
/// (they read as zeros, empty chunks) and their pages leave memory. The chunks stay claimed; see
/// [`refill`] to use them again.
pub(crate) fn punch(k: u64, n: u64) {
    let at = LANE_HEADER_SIZE + k as usize * CHUNK_SIZE;
    let len = n as usize * CHUNK_SIZE;
    let fd = FD.load(Ordering::Relaxed);
    let punched = fd >= 0
        && crate::syscall::fallocate(
            fd,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            at as libc::off_t,
            len as libc::off_t,
        ) == 0;
    if !punched {
        // A file system that cannot punch holes (or anonymous memory): zeros, at least.
        // SAFETY: the range is inside our mapping and ours (the caller freed it).
        unsafe { core::ptr::write_bytes(chunk(k), 0, len) };
    }
}

/// Makes punched chunks `k..k + n` hold data again (allocated in the file, so a full file system
/// fails here rather than with a SIGBUS on a store); false if it cannot.
pub(crate) fn refill(k: u64, n: u64) -> bool {
    extend(k, k + n, 0)
}

/// Creates the buffer: a lane file in the session directory `session` if there is one, else
/// anonymous memory. Returns a note to print when the session cannot be used (recording then
/// goes to memory).
pub(crate) fn create(setup: Setup, session: Option<&[u8]>) -> Result<(), String> {
    KEEP.store(setup.keep as u32, Ordering::Relaxed);
    let mut problem = None;
    if let Some(dir) = session {
        match open_dir(dir) {
            Ok(dir_fd) => {
                DIR_FD.store(dir_fd, Ordering::Relaxed);
                match new_lane(setup, None, None) {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        let dir = display(dir);
                        problem = Some(format!("cannot create a lane in {dir:?}: {e}"))
                    }
                }
            }
            Err(e) => {
                let dir = display(dir);
                problem = Some(format!("cannot use the session directory {dir:?}: {e}"))
            }
        }
    }
    let base = reserve(-1, None).ok_or("cannot reserve memory for the record buffer")?;
    BASE.store(base, Ordering::Release);
    ACTIVE.store(true, Ordering::Release);
    init_header(setup, None);
    if !grow(FIRST_CHUNKS, Wait::Yes) {
        return Err("cannot populate the record buffer".into());
    }
    match problem {
        Some(p) => Err(format!("{p}; recording in memory instead")),
        None => Ok(()),
    }
}

/// Creates the buffer as a lane file in the session directory `dir`, or fails (no recording into
/// memory instead): what `bootprof attach` asks for, once per attach.
pub(crate) fn create_lane(setup: Setup, dir: &[u8]) -> sys::Result<()> {
    if exists() {
        return Err(Errno(libc::EBUSY));
    }
    KEEP.store(setup.keep as u32, Ordering::Relaxed);
    let dir_fd = open_dir(dir)?;
    DIR_FD.store(dir_fd, Ordering::Relaxed);
    let range = NEXT_RANGE.fetch_add(1, Ordering::Relaxed) as usize % RANGES;
    new_lane(setup, None, Some(range)).inspect_err(|_| {
        DIR_FD.store(-1, Ordering::Relaxed);
        // SAFETY: our own descriptor.
        unsafe { libc::close(dir_fd) };
    })
}

/// Ends the lane: writes `end` into it (unless an end is there), then lets it go. Anonymous
/// memory takes the lane's place in the address space at once (see [`ATTACH_RANGES`]), so a
/// thread still writing a record it began writes there, not into the file; threads forget
/// their chunks at their next record ([`generation`]).
///
/// `end` is `None` in a fork child: the mapping is its parent's lane, which it must not write.
pub(crate) fn close(end: Option<fmt::End>) {
    if !exists() {
        return;
    }
    if let Some(end) = end {
        set_end(end, 0);
    }
    ACTIVE.store(false, Ordering::Release);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    let base = BASE.load(Ordering::Acquire);
    let len = LANE_HEADER_SIZE + MAX_CHUNKS.load(Ordering::Relaxed) as usize * CHUNK_SIZE;
    // SAFETY: replaces our own mapping by anonymous memory of the same size, in place; then
    // closes our own descriptors.
    unsafe {
        let placed = anonymous_over(base, len);
        debug_assert!(placed);
        for fd in [
            FD.swap(-1, Ordering::AcqRel),
            DIR_FD.swap(-1, Ordering::AcqRel),
        ] {
            if fd >= 0 {
                libc::close(fd);
            }
        }
    }
}

/// Puts anonymous memory (reserved, not committed) over `len` bytes at `base`, in place.
///
/// # Safety
/// `base..base + len` is a mapping of ours that nothing needs the contents of.
unsafe fn anonymous_over(base: *mut u8, len: usize) -> bool {
    // SAFETY: per the contract; MAP_FIXED over our own range.
    let placed = unsafe {
        libc::mmap(
            base.cast(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    placed == base.cast()
}

fn open_dir(dir: &[u8]) -> sys::Result<libc::c_int> {
    if dir.contains(&0) {
        return Err(Errno(libc::EINVAL));
    }
    let path = sys::CPath::new(dir);
    // SAFETY: a NUL-terminated path. O_NOFOLLOW: never a symlink planted in the session's place.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(Errno::last());
    }
    Ok(out_of_the_way(fd))
}

/// Moves a descriptor the runtime keeps open (the session directory, the lane) to a high number,
/// and returns it. The lowest free numbers are the program's: a shell redirects `4<file` or
/// `exec 3>&-` by number, closing whatever was there, and the runtime would then grow or punch
/// the program's file through what it took for its lane. Above `min(RLIMIT_NOFILE, 1024) - 64`
/// (where a shell's own descriptors, from 10 up, do not reach); kept where it is when the limit
/// leaves no room. Async-signal-safe (system calls only), as a fork child's lane needs.
fn out_of_the_way(fd: libc::c_int) -> libc::c_int {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return fd;
    }
    let top = lim.rlim_cur.min(1024) as libc::c_int;
    let floor = if top > 128 { top - 64 } else { top / 2 };
    if fd >= floor {
        return fd;
    }
    // SAFETY: duplicates our own descriptor (close-on-exec, as it was), then closes the original.
    unsafe {
        let high = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor);
        if high < 0 {
            return fd;
        }
        libc::close(fd);
        high
    }
}

/// Maps `fd` (or anonymous memory for -1) over the largest range of [`RESERVE`] the system gives
/// or, for attach lane range `range`, over that range (reserved the first time).
fn reserve(fd: libc::c_int, range: Option<usize>) -> Option<*mut u8> {
    let flags = if fd >= 0 {
        libc::MAP_SHARED
    } else {
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS
    } | libc::MAP_NORESERVE;
    let map = |at: *mut u8, len: usize, fixed: libc::c_int| {
        // SAFETY: a new mapping where the kernel picks, or over an attach range of ours that
        // holds no lane now (MAP_FIXED).
        let p = unsafe {
            libc::mmap(
                at.cast(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags | fixed,
                fd,
                0,
            )
        };
        (p != libc::MAP_FAILED).then(|| {
            let chunks = ((len - LANE_HEADER_SIZE) / CHUNK_SIZE) as u64;
            MAX_CHUNKS.store(chunks, Ordering::Relaxed);
            p.cast::<u8>()
        })
    };
    if let Some([start, len]) = range.map(|r| &ATTACH_RANGES[r]) {
        let (at, n) = (start.load(Ordering::Relaxed), len.load(Ordering::Relaxed));
        if at != 0 {
            return map(at as *mut u8, n as usize, libc::MAP_FIXED);
        }
        let p = RESERVE
            .iter()
            .find_map(|&n| Some((map(core::ptr::null_mut(), n, 0)?, n)))?;
        start.store(p.0 as u64, Ordering::Relaxed);
        len.store(p.1 as u64, Ordering::Relaxed);
        return Some(p.0);
    }
    RESERVE
        .iter()
        .find_map(|&n| map(core::ptr::null_mut(), n, 0))
}

/// Creates, maps and fills in this process's lane file in the session directory; `parent` is the
/// name and claimed chunks of the lane this process was forked from. Async-signal-safe enough for
/// a fork child: system calls and stack buffers only.
///
/// `range` is the attach lane range to map it over, if it is an attach's.
fn new_lane(
    setup: Setup,
    parent: Option<([u8; 64], u64)>,
    range: Option<usize>,
) -> sys::Result<()> {
    let dir = DIR_FD.load(Ordering::Relaxed);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let mut name = [0u8; 64];
    let mut fd = -1;
    for n in 0..10_000u32 {
        name = [0; 64];
        let len = lane_name(&mut name, pid, n);
        // SAFETY: a NUL-terminated name relative to our directory descriptor. Exclusive, never
        // through a symlink, readable by its user only.
        fd = unsafe {
            crate::syscall::openat(
                dir,
                name.as_ptr().cast(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
        };
        debug_assert!(len < 64);
        if fd >= 0 || Errno::last().0 != libc::EEXIST {
            break;
        }
    }
    if fd < 0 {
        return Err(Errno::last());
    }
    let fd = out_of_the_way(fd);
    // A lane that cannot be made whole is taken away again: no empty file left in the session,
    // no descriptor or mapping of it left for the fallback to memory to trip on.
    // What BASE pointed at before (null, or what a closed lane left): put back on failure.
    let previous = BASE.load(Ordering::Relaxed);
    let give_up = |e: Errno| {
        ACTIVE.store(false, Ordering::Release);
        // SAFETY: our own descriptor, mapping and file name in our directory.
        unsafe {
            if FD.load(Ordering::Relaxed) == fd {
                let base = BASE.swap(previous, Ordering::AcqRel);
                let len =
                    LANE_HEADER_SIZE + MAX_CHUNKS.load(Ordering::Relaxed) as usize * CHUNK_SIZE;
                // An attach range stays ours, and mapped.
                if range.is_some() {
                    anonymous_over(base, len);
                } else {
                    libc::munmap(base.cast(), len);
                }
            }
            FD.store(-1, Ordering::Relaxed);
            libc::close(fd);
            crate::syscall::unlinkat(dir, name.as_ptr().cast(), 0);
        }
        Err(e)
    };
    // SAFETY: our new descriptor.
    if unsafe { libc::ftruncate(fd, LANE_HEADER_SIZE as libc::off_t) } != 0 {
        return give_up(Errno::last());
    }
    let Some(base) = reserve(fd, range) else {
        return give_up(Errno::last());
    };
    for (i, w) in NAME.iter().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(&name[i * 8..i * 8 + 8]);
        w.store(u64::from_le_bytes(b), Ordering::Relaxed);
    }
    FD.store(fd, Ordering::Release);
    BASE.store(base, Ordering::Release);
    ACTIVE.store(true, Ordering::Release);
    init_header(setup, parent);
    if !grow(FIRST_CHUNKS, Wait::Yes) {
        return give_up(Errno(libc::ENOSPC));
    }
    Ok(())
}

/// Writes `<pid>.<n>.lane` and a NUL into `out`; returns its length without the NUL.
fn lane_name(out: &mut [u8; 64], pid: u32, n: u32) -> usize {
    let mut at = crate::note::put_decimal(out, pid);
    out[at] = b'.';
    at += 1;
    at += crate::note::put_decimal(&mut out[at..], n);
    out[at..at + 5].copy_from_slice(b".lane");
    at + 5
}

/// Fills in the header of a new lane (the mapping is zero).
fn init_header(setup: Setup, parent: Option<([u8; 64], u64)>) {
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: the header page is mapped and ours alone until the lane is in use.
    let header = unsafe { core::slice::from_raw_parts_mut(base, LANE_HEADER_SIZE) };
    let put = |h: &mut [u8], at: usize, b: &[u8]| h[at..at + b.len()].copy_from_slice(b);
    put(header, field::MAGIC, &fmt::LANE_MAGIC);
    // A counting process's lane holds its counts: the flag says a lane without them is a process
    // that did not write them.
    let flags = if crate::site::counting() {
        fmt::FLAG_COUNTS
    } else {
        0
    };
    put(header, field::VERSION, &fmt::LANE_VERSION.to_le_bytes());
    put(header, field::FLAGS, &flags.to_le_bytes());
    put(
        header,
        field::HEADER_SIZE,
        &(LANE_HEADER_SIZE as u32).to_le_bytes(),
    );
    put(
        header,
        field::CHUNK_SIZE,
        &(CHUNK_SIZE as u32).to_le_bytes(),
    );
    put(header, field::KEEP, &(setup.keep as u32).to_le_bytes());
    // SAFETY: getpid and getppid have no preconditions.
    let (pid, ppid) = unsafe { (libc::getpid(), libc::getppid()) };
    put(header, field::PID, &(pid as u32).to_le_bytes());
    put(header, field::PPID, &(ppid as u32).to_le_bytes());
    put(header, field::START_TSC, &rdtsc().to_le_bytes());
    put(header, field::START_NS, &monotonic_ns().to_le_bytes());
    put(
        header,
        field::START_REALTIME_NS,
        &realtime_ns().to_le_bytes(),
    );
    put(
        header,
        field::LIMIT_CHUNKS,
        &setup.limit_chunks.to_le_bytes(),
    );
    if let Some((name, chunks)) = parent {
        put(header, field::PARENT_LANE, &name);
        put(header, field::PARENT_CHUNKS, &chunks.to_le_bytes());
    }
    if FD.load(Ordering::Relaxed) < 0 {
        // Anonymous memory is read by this process's dump alone, which needs none of what
        // follows: who the process is is for the readers of a session's lanes.
        return;
    }
    let mut id = [0u8; 36];
    if read_file(b"/proc/sys/kernel/random/boot_id\0", &mut id) == 36 {
        put(header, field::BOOT_ID, &boot_id_bytes(&id));
    }
    // The executable, then the command line, to the end of the header.
    let exe = &mut header[field::EXE..];
    let room = exe.len() - 1;
    let n = readlink(b"/proc/self/exe\0", &mut exe[..room]);
    let rest = &mut exe[n + 1..];
    let len = rest.len() - 1;
    read_file(b"/proc/self/cmdline\0", &mut rest[..len]);
}

/// The 16 bytes of a boot id's text form (`xxxxxxxx-xxxx-...`).
fn boot_id_bytes(text: &[u8; 36]) -> [u8; 16] {
    let mut out = [0u8; 16];
    let digits = text.iter().filter(|c| c.is_ascii_hexdigit());
    for (i, c) in digits.take(32).enumerate() {
        let v = (*c as char).to_digit(16).unwrap_or(0) as u8;
        out[i / 2] |= if i % 2 == 0 { v << 4 } else { v };
    }
    out
}

/// Reads up to `out.len()` bytes of the file at the NUL-terminated `path`; returns the count.
fn read_file(path: &[u8], out: &mut [u8]) -> usize {
    // SAFETY: a NUL-terminated path; reads into our buffer.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return 0;
        }
        let mut got = 0;
        while got < out.len() {
            let n = libc::read(fd, out[got..].as_mut_ptr().cast(), out.len() - got);
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        libc::close(fd);
        got
    }
}

fn readlink(path: &[u8], out: &mut [u8]) -> usize {
    // SAFETY: a NUL-terminated path; writes at most out.len() bytes into our buffer.
    let n = unsafe { libc::readlink(path.as_ptr().cast(), out.as_mut_ptr().cast(), out.len()) };
    n.max(0) as usize
}

/// In a fork child: a lane file of its own (the parent's mapping is shared and stays the
/// parent's), which names the parent's lane for the sites registered before the fork. Anonymous
/// memory needs nothing: the child's copy is private. Returns false if the child cannot record.
pub(crate) fn after_fork() -> bool {
    let fd = FD.load(Ordering::Relaxed);
    if fd < 0 || !exists() {
        return true;
    }
    let old = BASE.load(Ordering::Relaxed);
    let old_len = LANE_HEADER_SIZE + MAX_CHUNKS.load(Ordering::Relaxed) as usize * CHUNK_SIZE;
    let parent_chunks = word(field::CLAIMED).load(Ordering::Acquire);
    let setup = Setup {
        keep: keep(),
        limit_chunks: word(field::LIMIT_CHUNKS).load(Ordering::Relaxed),
    };
    let mut name = [0u8; 64];
    for (i, w) in NAME.iter().enumerate() {
        name[i * 8..i * 8 + 8].copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    let ok = new_lane(setup, Some((name, parent_chunks)), None).is_ok();
    // SAFETY: the parent's mapping and descriptor are no use to the child; nothing of ours
    // points into the old mapping any more (the recorder forgets its cursors).
    unsafe {
        if ok {
            libc::munmap(old.cast(), old_len);
        }
        libc::close(fd);
    }
    if !ok {
        // Nothing of the child is recorded rather than written into the parent's lane.
        ACTIVE.store(false, Ordering::Release);
        BASE.store(core::ptr::null_mut(), Ordering::Release);
        FD.store(-1, Ordering::Relaxed);
    }
    ok
}

/// Records how the process ended, as it sees it (`End` as a number and its code), unless an end
/// is already recorded. Async-signal-safe.
pub(crate) fn set_end(kind: fmt::End, code: u32) {
    if !exists() || word(field::END_TSC).load(Ordering::Relaxed) != 0 {
        return;
    }
    set_u32(field::END_KIND, kind as u32);
    set_u32(field::END_CODE, code);
    word(field::END_TSC).store(rdtsc(), Ordering::Release);
}
