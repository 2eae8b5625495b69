//! `bootprof run`'s lane grower: makes the pages of each lane of the session ahead of the
//! process writing it, from bootprof's own process, so that the traced threads find them made.
//!
//! A traced process grows its lane itself (`fallocate`, then `MADV_POPULATE_WRITE` through its
//! shared mapping: runtime/src/buffer.rs `extend`), and on ext4 making a new page costs it
//! 3-4 µs, some 25 ns of every traced call that writes two records. When the page is already in
//! the page cache, written (its space reserved), the same `extend` costs the process about a
//! tenth of that: it maps the page. This thread appends zeros to every lane that is growing, so
//! that its file runs up to [`MAX_LEAD`] ahead of what the process has grown it to (the
//! header's `GROWN`), and the process's next `extend` finds the pages there. (Appended, not
//! allocated by `fallocate` first: blocks allocated ahead take ext4 some 25 ms per 16 MiB to
//! give back when the lane is cut, pages only written a few.)
//!
//! Correctness never depends on it: the runtime grows its lane as it always does, whether the
//! grower is ahead, behind or absent (a program run without `bootprof run`, an attach). The
//! zeros are *appended* (`O_APPEND`: each write lands at the file's end at the moment it is
//! made, under the inode's lock, as the runtime's `fallocate` changes the end), so they never
//! land over a page the process has grown into and may have written. Readers read only the
//! chunks a lane's header says it claimed and grew (`claimed.min(grown)`), so zeros past them
//! are no records to anyone.
//!
//! What was appended and never used is cut off again ([`Grower::finish`] and, while the run goes
//! on, for each lane whose process has ended): the lane ends as long as its process made it.
//! A lane is cut only while no other process has it open for writing, which a write lease
//! (`F_SETLEASE`) tells for sure: a process that maps its lane holds it open, so a lane still
//! being written (a process that outlives `bootprof run`, one in another pid namespace) is
//! never cut under it; such a lane keeps at most [`MAX_LEAD`] of zeros past its end.

use bootprof_format::lane::{field, Keep, LANE_HEADER_SIZE, LANE_MAGIC};
use bootprof_format::le::{u32_at, u64_at};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Chunks a lane is grown at most ahead of its process (8 MiB); a lane is grown half its length
/// ahead, between `MIN_LEAD` and this: more than the runtime adds to it at once (a quarter of
/// its length, at most 4 MiB), so that its next growth finds every page made. One traced
/// thread writing records as fast as it can (about 0.5 GB/s) takes 16 ms to use it up, many of
/// this grower's passes. It bounds the zeros a lane holds past its end, which cost page cache,
/// disk, and the time to cut them off again (about 1 ms for 8 MiB on ext4).
pub const MAX_LEAD: u64 = 2048;
/// Chunks a lane is grown at least ahead of its process (512 KiB): twice what the runtime adds
/// to a small lane at once.
const MIN_LEAD: u64 = 128;
/// Lanes at most this many chunks (the runtime's first 32 KiB) are not grown: most processes
/// of a session record that little, and would only be given zeros to cut off again.
const SMALL: u64 = 8;
/// Bytes appended at once: short enough that the process's own `fallocate`, which waits for
/// an append in progress (the inode's lock), waits a fraction of a millisecond at most.
const PIECE: usize = 256 << 10;
/// How long the grower sleeps when every lane is as far ahead as it should be, while lanes
/// were grown or created in the last [`QUIET`]; after that, [`RESCAN`] (a new lane wakes it).
/// A pass reads every lane's header: a session of many idle processes costs little.
const IDLE: Duration = Duration::from_millis(2);
const QUIET: Duration = Duration::from_millis(100);
/// How often the session directory is read again for new lanes when the kernel cannot tell of
/// them (no inotify), and how long a quiet grower sleeps.
const RESCAN: Duration = Duration::from_millis(20);

/// The grower of a session's lanes, running in a thread of its own until [`Grower::finish`].
pub struct Grower {
    stop: Arc<AtomicBool>,
    /// The write end of a pipe whose read end the thread waits on: closed, it wakes the thread.
    wake: Option<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Grower {
    /// Starts growing the lanes of the session directory `dir` ahead of their processes.
    pub fn start(dir: PathBuf) -> Grower {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (woken, wake) = pipe().unzip();
        let thread = std::thread::Builder::new()
            .name("lane grower".into())
            .spawn(move || {
                idle_priority();
                Lanes::new(dir, woken).run(&flag)
            })
            .ok();
        Grower { stop, wake, thread }
    }

    /// Stops growing, and cuts off what was grown and not used from every lane no process is
    /// writing any more.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Release);
        drop(self.wake.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Puts the calling thread in the idle scheduling class: it runs only on a core nothing else
/// wants. Growing ahead saves the traced processes a little CPU time, but on a busy machine a
/// second runnable thread takes a core from them, which costs them far more in wall time (their
/// own growth is cheap: they write zeros past the lane's end themselves).
fn idle_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: changes the calling thread's own policy (pid 0); a refusal leaves it as it was.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
}

/// A pipe's read and write ends (close-on-exec: the program's processes never see them).
fn pipe() -> Option<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into our array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: the two new descriptors are ours alone to own.
    Some(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The lanes of a session being grown.
struct Lanes {
    dir: PathBuf,
    lanes: HashMap<PathBuf, Lane>,
    /// Lanes done with: cut back, or files that cannot be opened.
    done: HashSet<PathBuf>,
    /// Tells of files created in the session directory, if the kernel can.
    watch: Option<OwnedFd>,
    /// Readable (at its end) when the grower is to stop.
    woken: Option<OwnedFd>,
}

/// One lane being grown: its file, open for appending.
struct Lane {
    file: File,
    /// Whether zeros were appended to it (else there is nothing to cut off).
    appended: bool,
}

/// What the grower reads of a lane's header.
struct Header {
    grown: u64,
    ended: bool,
    /// The most chunks the lane will ever hold, when its keep mode says (`--keep start`: its
    /// data chunks, and room for the metadata).
    most: Option<u64>,
}

impl Lanes {
    fn new(dir: PathBuf, woken: Option<OwnedFd>) -> Lanes {
        Lanes {
            watch: watch(&dir),
            woken,
            dir,
            lanes: HashMap::new(),
            done: HashSet::new(),
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        let mut scanned: Option<Instant> = None;
        let mut busy = Instant::now();
        while !stop.load(Ordering::Acquire) {
            let due = match &self.watch {
                Some(fd) => scanned.is_none() || created(fd),
                None => scanned.is_none_or(|t| t.elapsed() >= RESCAN),
            };
            if due {
                self.scan();
                scanned = Some(Instant::now());
                busy = Instant::now();
            }
            if self.pass() {
                busy = Instant::now();
            } else {
                let idle = if busy.elapsed() < QUIET { IDLE } else { RESCAN };
                self.wait(idle);
            }
        }
        for (_, lane) in self.lanes.drain() {
            lane.cut_back();
        }
    }

    /// Sleeps `idle`, or until a file is created in the session directory or the grower is to
    /// stop.
    fn wait(&self, idle: Duration) {
        let polled = |fd: &Option<OwnedFd>| libc::pollfd {
            fd: fd.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds = [polled(&self.watch), polled(&self.woken)];
        // SAFETY: two pollfds of ours (a negative descriptor is skipped).
        unsafe { libc::poll(fds.as_mut_ptr(), 2, idle.as_millis() as libc::c_int) };
    }

    /// Opens the lanes that appeared since the last scan.
    fn scan(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.extension().is_none_or(|x| x != "lane")
                || self.lanes.contains_key(&path)
                || self.done.contains(&path)
            {
                continue;
            }
            match Lane::open(&path) {
                Some(lane) => {
                    self.lanes.insert(path, lane);
                }
                None => {
                    self.done.insert(path);
                }
            }
        }
    }

    /// Appends a piece to each lane that is not far enough ahead, and cuts back the lanes whose
    /// process ended; whether any lane was grown.
    fn pass(&mut self) -> bool {
        let mut grew = false;
        let mut finished = Vec::new();
        for (path, lane) in &mut self.lanes {
            // A lane just created may not have its header yet: it is looked at again next pass.
            let Some(header) = lane.header() else {
                continue;
            };
            if header.ended {
                if lane.cut_back() {
                    finished.push(path.clone());
                }
                continue;
            }
            grew |= lane.grow(&header);
        }
        for path in finished {
            self.lanes.remove(&path);
            self.done.insert(path);
        }
        grew
    }
}

impl Lane {
    fn open(path: &Path) -> Option<Lane> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .ok()?;
        Some(Lane {
            file,
            appended: false,
        })
    }

    /// The header's growth and end, or `None` when it cannot be read or is not a lane's (yet).
    fn header(&self) -> Option<Header> {
        let mut b = [0u8; 128];
        std::os::unix::fs::FileExt::read_exact_at(&self.file, &mut b, 0).ok()?;
        if b[..8] != LANE_MAGIC {
            return None;
        }
        let limit = u64_at(&b, field::LIMIT_CHUNKS);
        let start = u32_at(&b, field::KEEP) == Keep::Start as u32;
        Some(Header {
            grown: u64_at(&b, field::GROWN),
            ended: u64_at(&b, field::END_TSC) != 0,
            most: (start && limit > 0).then(|| limit.saturating_add(MIN_LEAD)),
        })
    }

    fn len(&self) -> Option<u64> {
        self.file.metadata().ok().map(|m| m.len())
    }

    /// Appends a piece of zeros if the file is less than its lead ahead of the chunks the header
    /// says the lane was grown to (and short of the most it will hold); whether it did.
    fn grow(&mut self, header: &Header) -> bool {
        let grown = header.grown;
        if grown <= SMALL {
            return false;
        }
        let Some(len) = self.len() else {
            return false;
        };
        let lead = (grown / 2).clamp(MIN_LEAD, MAX_LEAD);
        let chunks = (grown + lead).min(header.most.unwrap_or(u64::MAX));
        let target = LANE_HEADER_SIZE as u64 + chunks * CHUNK as u64;
        if len >= target {
            return false;
        }
        let n = PIECE.min((target - len) as usize);
        static ZEROS: [u8; PIECE] = [0; PIECE];
        let wrote = std::io::Write::write(&mut &self.file, &ZEROS[..n]).is_ok_and(|w| w > 0);
        self.appended |= wrote;
        wrote
    }

    /// Cuts the file back to the chunks its process grew it to, if no other process has it open
    /// for writing; whether the lane is done with (cut, or nothing to cut).
    fn cut_back(&self) -> bool {
        if !self.appended {
            return true;
        }
        let fd = self.file.as_raw_fd();
        // SAFETY: fcntl on our own descriptor. A write lease is granted only while no other
        // open file (a process's descriptor or mapping) can write the lane; whoever opens it
        // meanwhile waits until the lease is given back, and the notice of that comes as
        // SIGURG, which is ignored unless handled (never killing bootprof).
        let leased = unsafe {
            libc::fcntl(fd, F_SETSIG, libc::SIGURG) == 0
                && libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) == 0
        };
        if !leased {
            return false;
        }
        if let (Some(h), Some(len)) = (self.header(), self.len()) {
            let end = LANE_HEADER_SIZE as u64 + h.grown * CHUNK as u64;
            if h.grown > 0 && len > end {
                let _ = self.file.set_len(end);
            }
        }
        // SAFETY: as above.
        unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
        true
    }
}

const CHUNK: usize = bootprof_format::lane::CHUNK_SIZE;
/// `fcntl`'s command naming the signal that tells of a lease to give back (Linux).
const F_SETSIG: libc::c_int = 10;

/// An inotify descriptor that tells of files created in `dir`, or `None` if the kernel will not
/// give one (the directory is then read again every [`RESCAN`]).
fn watch(dir: &Path) -> Option<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: inotify_init1 takes flags only; the descriptor it returns is ours to own.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: as above.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a NUL-terminated path; our own descriptor.
    let added = unsafe {
        libc::inotify_add_watch(
            fd.as_raw_fd(),
            path.as_ptr(),
            libc::IN_CREATE | libc::IN_MOVED_TO,
        )
    };
    (added >= 0).then_some(fd)
}

/// Whether `watch` told of files created since the last call (its events read and dropped).
fn created(watch: &OwnedFd) -> bool {
    let mut any = false;
    let mut events = [0u8; 4096];
    loop {
        // SAFETY: reads into our buffer from our own non-blocking descriptor.
        let n = unsafe { libc::read(watch.as_raw_fd(), events.as_mut_ptr().cast(), events.len()) };
        if n <= 0 {
            return any;
        }
        any = true;
    }
}
