//! Writing the program's own code while other threads may be running it.
//!
//! Takes a batch of `(address, bytes)` writes; makes the pages writable for the moment of the
//! writes (one `mprotect` to read-write-execute per run of adjacent pages: execute is never
//! dropped, other threads may be on the page) and puts its original protection back, read from
//! `/proc/self/maps`. Where `mprotect` is refused (a W^X policy), the writes go through
//! `/proc/self/mem` instead; when both fail, nothing has been written. [`sync_cores`] makes every
//! thread of the process execute a serializing instruction, as Intel's cross-modifying-code rules
//! ask before new bytes may be executed:
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE)`, or, on kernels without it, an
//! `mprotect` on a private page, whose TLB shootdown interrupts every CPU running this process.

use crate::prelude::*;
use core::sync::atomic::{AtomicU8, Ordering};

/// Why text could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextError {
    /// The address that could not be written.
    pub address: u64,
    /// `errno` of `mprotect`.
    pub mprotect_errno: i32,
    /// `errno` of the `/proc/self/mem` write.
    pub procmem_errno: i32,
}

impl core::fmt::Display for TextError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "cannot write code at {:#x}: mprotect failed ({}), /proc/self/mem failed ({})",
            self.address,
            crate::sys::Errno(self.mprotect_errno),
            crate::sys::Errno(self.procmem_errno)
        )
    }
}

impl core::error::Error for TextError {}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE: libc::c_long = 1 << 5;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE: libc::c_long = 1 << 6;

/// 0: not tried, 1: membarrier works, 2: fall back to mprotect.
static SYNC_METHOD: AtomicU8 = AtomicU8::new(0);

/// How code is written: `BOOTPROF_TEXT_WRITE=auto` (default: mprotect, then /proc/self/mem;
/// large runs of pages copied whole while the process has one thread, see [`write_batch_alone`]),
/// `inplace` (as `auto`, never copying runs whole), `procmem` (skip mprotect, as where W^X
/// refuses it) or `fail` (refuse both: for testing that a failed enable leaves every site as it
/// was).
fn write_policy() -> u8 {
    static POLICY: crate::sys::OnceLock<u8> = crate::sys::OnceLock::new();
    *POLICY.get_or_init(|| match crate::sys::var("BOOTPROF_TEXT_WRITE") {
        Some("procmem") => 1,
        Some("fail") => 2,
        Some("inplace") => 3,
        _ => 0,
    })
}

/// Makes every thread of this process serialize its instruction stream.
pub fn sync_cores() {
    let mut method = SYNC_METHOD.load(Ordering::Acquire);
    if method == 0 {
        // SAFETY: membarrier takes two integer arguments and touches no memory of ours.
        let r = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
                0,
            )
        };
        method = if r == 0 { 1 } else { 2 };
        SYNC_METHOD.store(method, Ordering::Release);
    }
    if method == 1 {
        // SAFETY: as above.
        let r = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE,
                0,
            )
        };
        if r == 0 {
            return;
        }
    }
    shootdown();
}

/// The fallback: changing a page's protection flushes the TLB of every CPU this process runs on,
/// by an interrupt, and returning from an interrupt serializes.
fn shootdown() {
    static PAGE: crate::sys::OnceLock<usize> = crate::sys::OnceLock::new();
    let page = *PAGE.get_or_init(|| {
        // SAFETY: an anonymous private mapping, never unmapped.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            // SAFETY: the page is ours and writable; touching it populates the TLB entry.
            unsafe { core::ptr::write_volatile(p as *mut u8, 1) };
        }
        p as usize
    });
    if page != libc::MAP_FAILED as usize {
        // SAFETY: the page is ours; only its protection changes.
        unsafe {
            libc::mprotect(page as *mut _, 4096, libc::PROT_READ);
            libc::mprotect(page as *mut _, 4096, libc::PROT_READ | libc::PROT_WRITE);
        }
    }
}

/// Runs `f` if this thread is the process's only one, with every signal blocked: then no other
/// code runs while `f` writes the program's code, so a site may be rewritten whole in one pass,
/// without the cross-modifying protocol's `int3` bridge (as at start-up, before `main`, where a
/// program that enables every site spends most of its enabling time in the bridge's three
/// passes). `None` (and `f` not run) when there are other threads, or their number cannot be
/// read. No thread can start meanwhile: only this one could start it.
pub fn alone<R>(f: impl FnOnce() -> R) -> Option<R> {
    let old = crate::syscall::block_all();
    let r = (threads() == Some(1)).then(f);
    crate::syscall::restore_mask(old);
    r
}

/// The process's number of threads: field 20 of `/proc/self/stat`.
fn threads() -> Option<u64> {
    let stat = crate::sys::read_to_string(b"/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_ascii_whitespace().nth(17)?.parse().ok()
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// The mappings of `/proc/self/maps` (its text `maps`), in its order (by address): start, end
/// and protection.
fn parse_maps(maps: &str) -> Vec<(usize, usize, libc::c_int)> {
    let mut out = Vec::new();
    for line in maps.lines() {
        let Some((range, rest)) = line.split_once(' ') else {
            continue;
        };
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        else {
            continue;
        };
        let p = rest.as_bytes();
        let mut prot = 0;
        if p.first() == Some(&b'r') {
            prot |= libc::PROT_READ;
        }
        if p.get(1) == Some(&b'w') {
            prot |= libc::PROT_WRITE;
        }
        if p.get(2) == Some(&b'x') {
            prot |= libc::PROT_EXEC;
        }
        out.push((lo, hi, prot));
    }
    out
}

/// A batch of writes: [`Writes::each`] calls its argument with each write's address and bytes,
/// in the same order every time (writing visits a batch several times). A batch of every site
/// of a large program is made this way from the sites themselves, not kept in a vector of
/// hundreds of kilobytes whose pages cost more than the writes. Generic, not a `dyn` closure:
/// each trait object's table is a pointer the dynamic loader relocates at every program's
/// start-up, used or not.
pub trait Writes {
    /// Calls `f` with each write's address and bytes, in order.
    fn each(&self, f: impl FnMut(u64, &[u8]));

    /// Calls `f` with each write's address and length, in order: what finding the pages needs,
    /// which a batch may tell without making the bytes.
    fn spans(&self, mut f: impl FnMut(u64, usize)) {
        self.each(|a, b| f(a, b.len()));
    }
}

/// The writes of a list, as a batch.
#[cfg(test)]
struct Listed<'a>(&'a [(u64, &'a [u8])]);

#[cfg(test)]
impl Writes for Listed<'_> {
    fn each(&self, mut f: impl FnMut(u64, &[u8])) {
        for &(a, b) in self.0 {
            f(a, b);
        }
    }
}

/// The pages `writes` touch, as ranges of adjacent pages (start, end), in address order: in one
/// pass when the writes are in address order (a table's sites are), else sorted first.
fn page_ranges(writes: &impl Writes, ps: usize) -> Vec<(usize, usize)> {
    let span = |a: u64, len: usize| {
        let first = a as usize & !(ps - 1);
        let last = (a as usize + len.max(1) - 1) & !(ps - 1);
        (first, last + ps)
    };
    let push =
        |spans: &mut Vec<(usize, usize)>, (start, end): (usize, usize)| match spans.last_mut() {
            Some((_, e)) if start <= *e => *e = (*e).max(end),
            _ => spans.push((start, end)),
        };
    let (mut spans, mut last, mut sorted) = (Vec::new(), 0, true);
    // The span the last write fell in: the next one in address order most often falls in it
    // too (tens of sites a page), and is then counted in at once.
    let mut current = 0..0;
    writes.spans(|a, len| {
        sorted &= a >= last;
        last = a;
        let a = a as usize;
        if sorted && a + len.max(1) <= current.end {
            return;
        }
        if sorted {
            let s = span(a as u64, len);
            push(&mut spans, s);
            current = s.0..s.1;
        }
    });
    if sorted {
        return spans;
    }
    let mut all: Vec<(usize, usize)> = Vec::new();
    writes.spans(|a, len| all.push(span(a, len)));
    bootprof_format::order::sort_by_key(&mut all, |&s| s);
    spans.clear();
    for s in all {
        push(&mut spans, s);
    }
    spans
}

/// Runs of adjacent pages with the same original protection covering `ranges` (see
/// [`page_ranges`]): one mprotect each way per run (a batch of thousands of sites spread over a
/// program's text touches hundreds of pages). A page no mapping holds is taken for code.
fn protection_runs(ranges: &[(usize, usize)], maps: &str) -> Vec<(usize, usize, libc::c_int)> {
    let maps = parse_maps(maps);
    let code = libc::PROT_READ | libc::PROT_EXEC;
    let mut runs: Vec<(usize, usize, libc::c_int)> = Vec::new();
    for &(start, end) in ranges {
        let mut p = start;
        while p < end {
            let (prot, until) = match maps.iter().find(|m| m.1 > p) {
                Some(&(lo, hi, prot)) if lo <= p => (prot, hi.min(end)),
                Some(&(lo, _, _)) => (code, lo.min(end)),
                None => (code, end),
            };
            match runs.last_mut() {
                Some((s, len, pr)) if *s + *len == p && *pr == prot => *len += until - p,
                _ => runs.push((p, until - p, prot)),
            }
            p = until;
        }
    }
    runs
}

/// Writes every `(address, bytes)` of `writes`; byte stores, each byte with one store, in order.
///
/// # Safety
/// Each write must be to this process's code, at a site whose old and new bytes are each valid
/// for a thread to execute at any moment (the caller runs the cross-modifying protocol).
pub unsafe fn write_batch(writes: &impl Writes) -> Result<(), TextError> {
    let ranges = page_ranges(writes, page_size());
    if ranges.is_empty() {
        return Ok(());
    }
    let maps = crate::sys::read_to_string(b"/proc/self/maps").unwrap_or_default();
    let opened = Opened::new(protection_runs(&ranges, &maps));
    if opened.failed.is_none() {
        write_bytes(writes, |a| Some(Dest::Live(a)));
    }
    opened.close();
    fall_back(writes, opened.failed)
}

/// [`write_batch`] for a process of one thread with its signals blocked ([`alone`]), which may
/// also put large runs of pages in place whole: runs of code of at least [`COPY_MIN_RUN_PAGES`]
/// pages, [`COPY_MIN_PAGES`] in all, whose pages are all still the file's own (none written since
/// it was mapped) are copied into anonymous memory in transparent huge pages, written there, and
/// moved over the original pages with `mremap`. The copy-on-write of a file's private pages costs
/// the kernel a page fault's work for each 4 KiB page (the sqlite3 shell with every site
/// enabled: 0.6-0.8 ms for its 370 pages of code, a third of its start-up to the first record);
/// one huge page is zeroed, filled and moved in about a fifth of that
/// (`benches/runtime/textcopy.c`). One walk over the batch writes
/// both the copies and the pages written in place.
///
/// The pages moved are anonymous from then on: `/proc/PID/maps` shows them without the file's
/// name, and uprobes placed on the file after it (`perf probe -x`, bpftrace) do not reach them.
/// Pages a uprobe or a debugger has already written are not the file's own, so their run is
/// written in place; `BOOTPROF_TEXT_WRITE=inplace` never moves pages.
///
/// # Safety
/// As [`write_batch`], and no other thread may run nor signal handler interrupt meanwhile: the
/// pages moved are briefly absent from the address space.
pub unsafe fn write_batch_alone(writes: &impl Writes) -> Result<(), TextError> {
    if write_policy() != 0 {
        // SAFETY: the caller's promise.
        return unsafe { write_batch(writes) };
    }
    let ranges = page_ranges(writes, page_size());
    if ranges.is_empty() {
        return Ok(());
    }
    let maps = crate::sys::read_to_string(b"/proc/self/maps").unwrap_or_default();
    let mut runs = protection_runs(&ranges, &maps);
    let copies = Copies::of(&runs);
    runs.retain(|r| !copies.runs.contains(r));
    let opened = Opened::new(runs);
    let in_place = opened.failed.is_none();
    // The copied run the last write fell in: the next one most often falls in it too.
    let mut last = 0;
    write_bytes(writes, |a| match copies.of_address(a, &mut last) {
        Some(to) => Some(Dest::Copy(to)),
        None => in_place.then_some(Dest::Live(a)),
    });
    opened.close();
    let copied: Vec<(usize, usize)> = copies.runs.iter().map(|r| (r.0, r.1)).collect();
    // SAFETY: the caller is alone, and the copies hold the writes.
    let moved = unsafe { copies.put_in_place() };
    let unmoved: Vec<(usize, usize)> = copied
        .iter()
        .filter(|r| !moved.contains(r))
        .copied()
        .collect();
    if !unmoved.is_empty() {
        // Copies that could not be put in place: their runs' writes made in place after all.
        let rest = Select {
            writes,
            runs: &unmoved,
            inside: true,
        };
        // SAFETY: the caller's promise, for fewer writes.
        unsafe { write_batch(&rest) }?;
    }
    let rest = Select {
        writes,
        runs: &copied,
        inside: false,
    };
    fall_back(&rest, opened.failed)
}

/// The fewest pages [`write_batch_alone`] moves whole, all runs together: a huge page is zeroed
/// in about the time the kernel takes to copy 50 pages on write.
pub const COPY_MIN_PAGES: usize = 64;

/// The fewest pages of a run [`write_batch_alone`] moves: each run moved is an `mprotect` and an
/// `mremap`, about as long as copying a few pages on write.
pub const COPY_MIN_RUN_PAGES: usize = 16;

/// Where [`write_bytes`] puts a write.
#[derive(Clone, Copy)]
enum Dest {
    /// Code that may run: byte stores, each byte with one store, in order.
    Live(usize),
    /// A copy of code that nothing runs: the bytes copied at once.
    Copy(usize),
}

/// Stores the bytes of each write of `writes` where `to(address)` says, skipping the writes it
/// gives no place for.
fn write_bytes(writes: &impl Writes, mut to: impl FnMut(usize) -> Option<Dest>) {
    writes.each(|a, b| match to(a as usize) {
        Some(Dest::Live(to)) => {
            for (i, &byte) in b.iter().enumerate() {
                // SAFETY: `to` is in a page of code the caller opened for writing, and the
                // caller vouches for the bytes.
                unsafe { core::ptr::write_volatile((to + i) as *mut u8, byte) };
            }
        }
        Some(Dest::Copy(to)) => {
            // Four bytes in one store, then the rest one by one (a call's five bytes are two
            // stores): not a call to `memcpy` for each site, which the compiler makes of a plain
            // loop (the rest's stores are volatile for that alone; nothing runs the copy).
            let (four, rest) = b.split_at(b.len().min(4));
            // SAFETY: `to` is in a copy the caller made, at least `b.len()` bytes from its end.
            unsafe {
                if let Ok(four) = <[u8; 4]>::try_from(four) {
                    core::ptr::write_unaligned(to as *mut [u8; 4], four);
                } else {
                    for (i, &byte) in four.iter().enumerate() {
                        core::ptr::write_volatile((to + i) as *mut u8, byte);
                    }
                }
                for (i, &byte) in rest.iter().enumerate() {
                    core::ptr::write_volatile((to + four.len() + i) as *mut u8, byte);
                }
            }
        }
        None => {}
    });
}

/// Runs of pages of code (start, length, original protection) made writable, as many as could
/// be (`opened`), and why the next one could not (`failed`: its address and `errno`).
struct Opened {
    runs: Vec<(usize, usize, libc::c_int)>,
    opened: usize,
    failed: Option<(u64, i32)>,
}

impl Opened {
    /// `runs` made writable (one `mprotect` to read-write-execute each: execute is never
    /// dropped, other threads may be on the page) and their pages' copies made, unless the
    /// write policy says to skip `mprotect`.
    fn new(runs: Vec<(usize, usize, libc::c_int)>) -> Opened {
        let mut o = Opened {
            runs,
            opened: 0,
            failed: None,
        };
        if matches!(write_policy(), 1 | 2) {
            o.failed = o.runs.first().map(|r| (r.0 as u64, libc::EPERM));
            return o;
        }
        for &(start, len, _) in &o.runs {
            // SAFETY: start..start+len are pages of our own code; we only add write permission.
            let r = unsafe {
                libc::mprotect(
                    start as *mut _,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                )
            };
            if r != 0 {
                o.failed = Some((start as u64, crate::sys::Errno::last().0));
                return o;
            }
            o.opened += 1;
        }
        // The pages' copies made in one system call, not one page fault each (a batch of every
        // site of a large program writes hundreds of pages).
        for &(start, len, _) in &o.runs {
            crate::sys::populate_write(start, len);
        }
        o
    }

    /// Puts back the protection the runs opened had.
    fn close(&self) {
        for &(start, len, prot) in self.runs.iter().take(self.opened) {
            // SAFETY: restores the protection the pages had.
            unsafe { libc::mprotect(start as *mut _, len, prot) };
        }
    }
}

/// Where `mprotect` failed (`failed`), `writes` go through `/proc/self/mem`, unless the write
/// policy refuses that too.
fn fall_back(writes: &impl Writes, failed: Option<(u64, i32)>) -> Result<(), TextError> {
    let Some((_, mprotect_errno)) = failed else {
        return Ok(());
    };
    if write_policy() == 2 {
        return Err(TextError {
            address: first_address(writes),
            mprotect_errno,
            procmem_errno: libc::EPERM,
        });
    }
    write_procmem(writes).map_err(|(address, procmem_errno)| TextError {
        address,
        mprotect_errno,
        procmem_errno,
    })
}

/// The writes of a batch inside the runs `runs` (start, length), or outside them.
struct Select<'a, W> {
    writes: &'a W,
    runs: &'a [(usize, usize)],
    inside: bool,
}

impl<W: Writes> Select<'_, W> {
    fn takes(&self, a: u64) -> bool {
        let a = a as usize;
        self.runs.iter().any(|&(s, len)| (s..s + len).contains(&a)) == self.inside
    }
}

impl<W: Writes> Writes for Select<'_, W> {
    fn each(&self, mut f: impl FnMut(u64, &[u8])) {
        self.writes.each(|a, b| {
            if self.takes(a) {
                f(a, b)
            }
        });
    }

    fn spans(&self, mut f: impl FnMut(u64, usize)) {
        self.writes.spans(|a, len| {
            if self.takes(a) {
                f(a, len)
            }
        });
    }
}

/// Runs of code copied into anonymous memory, to be written there and moved over the original
/// pages ([`write_batch_alone`]).
#[derive(Default)]
struct Copies {
    /// The runs (start, length, protection), in address order.
    runs: Vec<(usize, usize, libc::c_int)>,
    /// Where each run's copy is.
    at: Vec<usize>,
    /// The room holding the copies, and its length.
    room: (usize, usize),
}

impl Copies {
    /// Copies of the runs of code among `runs` (start, length, protection) that
    /// [`write_batch_alone`] says: none when they are too few pages or the room cannot be had.
    fn of(runs: &[(usize, usize, libc::c_int)]) -> Copies {
        let ps = page_size();
        let code = libc::PROT_READ | libc::PROT_EXEC;
        let long = |&&(_, len, prot): &&(usize, usize, libc::c_int)| {
            len / ps >= COPY_MIN_RUN_PAGES && prot & code == code
        };
        if runs.iter().filter(long).map(|r| r.1).sum::<usize>() / ps < COPY_MIN_PAGES {
            return Copies::default();
        }
        let runs: Vec<_> = runs
            .iter()
            .filter(long)
            .filter(|&&(start, len, _)| file_pages_unwritten(start, len, ps))
            .copied()
            .collect();
        let total: usize = runs.iter().map(|r| r.1).sum();
        let Some(room) = (total / ps >= COPY_MIN_PAGES)
            .then(|| crate::sys::huge_room(total))
            .flatten()
        else {
            return Copies::default();
        };
        crate::sys::populate_write(room, total);
        let mut at = Vec::with_capacity(runs.len());
        let mut next = room;
        let mut exe = None;
        for &(start, len, _) in &runs {
            if !read_from_executable(&mut exe, (start, len), next) {
                // SAFETY: the run's pages are mapped and readable (PROT_READ); the room is
                // ours and `total` long.
                unsafe { core::ptr::copy_nonoverlapping(start as *const u8, next as *mut u8, len) };
            }
            at.push(next);
            next += len;
        }
        Copies {
            runs,
            at,
            room: (room, total.next_multiple_of(crate::sys::HUGE_PAGE)),
        }
    }

    /// Where the byte at `addr` is in a copy, if a run copied holds it; the run `last` (the one
    /// found before) is tried first, and `last` is set to the one found.
    #[inline]
    fn of_address(&self, addr: usize, last: &mut usize) -> Option<usize> {
        let holds = |&(s, len, _): &(usize, usize, libc::c_int)| (s..s + len).contains(&addr);
        let i = match self.runs.get(*last) {
            Some(run) if holds(run) => *last,
            _ => self.runs.iter().position(holds)?,
        };
        *last = i;
        Some(self.at[i] + (addr - self.runs[i].0))
    }

    /// Moves the copies over their runs, each with its run's protection; returns the runs moved
    /// (start, length). None is moved when a copy cannot be made executable (a W^X policy), and
    /// a run whose `mremap` is refused keeps its pages. The room is unmapped.
    ///
    /// # Safety
    /// As [`write_batch_alone`]; the copies hold what their runs are to hold.
    unsafe fn put_in_place(self) -> Vec<(usize, usize)> {
        let mut moved = Vec::new();
        if self.runs.is_empty() {
            return moved;
        }
        // Protections first, for all, so that a refusal moves none.
        let protected = self.runs.iter().zip(&self.at).all(|(&(_, len, prot), &c)| {
            // SAFETY: the copy is ours.
            unsafe { libc::mprotect(c as *mut _, len, prot) == 0 }
        });
        for (&(start, len, _), &c) in self.runs.iter().zip(&self.at) {
            // SAFETY: the copy replaces the run at the same address, with the same length,
            // protection and bytes but the batch's writes; nothing else runs meanwhile.
            let to = protected.then(|| unsafe {
                libc::mremap(
                    c as *mut _,
                    len,
                    len,
                    libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                    start as *mut libc::c_void,
                )
            });
            if to == Some(start as *mut libc::c_void) {
                moved.push((start, len));
            }
        }
        // SAFETY: what is left of the room (the copies moved are no longer in it).
        unsafe { libc::munmap(self.room.0 as *mut _, self.room.1) };
        moved
    }
}

/// Reads the pages of the run `(start, len)` into `to` from the main program's file (`exe`,
/// opened on first need), when they are that file's pages: the kernel copies them from its page
/// cache, where copying them from memory makes it map each of them first (the sqlite3 shell's
/// 1.5 MB, `benches/runtime/textcopy.c`: 26-33 µs against 28-62 µs). False when they are not,
/// or it fails.
fn read_from_executable(
    exe: &mut Option<Option<crate::sys::Fd>>,
    (start, len): (usize, usize),
    to: usize,
) -> bool {
    let Some(offset) = crate::sys::offset_in_executable(start, len) else {
        return false;
    };
    let file =
        exe.get_or_insert_with(|| crate::sys::Fd::open(b"/proc/self/exe", libc::O_RDONLY, 0).ok());
    let Some(file) = file else {
        return false;
    };
    let mut done = 0;
    while done < len {
        // SAFETY: reads into the room's `len` bytes from `to`, ours.
        let n = unsafe {
            libc::pread(
                file.0,
                (to + done) as *mut libc::c_void,
                len - done,
                (offset + done as u64) as libc::off_t,
            )
        };
        if n <= 0 {
            return false;
        }
        done += n as usize;
    }
    true
}

/// Whether every page of `[start, start + len)` is still its file's own, not a private copy
/// (nor swapped out): `/proc/self/pagemap` says each present page is a file page. A page written
/// since it was mapped (a uprobe's or a debugger's breakpoint, an earlier batch) is private
/// anonymous memory, and so is every page of anonymous code. `false` when the map cannot be
/// read.
fn file_pages_unwritten(start: usize, len: usize, ps: usize) -> bool {
    const PRESENT: u64 = 1 << 63;
    const SWAPPED: u64 = 1 << 62;
    const FILE: u64 = 1 << 61;
    let Ok(map) = crate::sys::Fd::open(b"/proc/self/pagemap", libc::O_RDONLY, 0) else {
        return false;
    };
    let mut entries = vec![0u64; len / ps];
    let bytes = entries.len() * 8;
    // SAFETY: reads into our own buffer of `bytes` bytes.
    let n = unsafe {
        libc::pread(
            map.0,
            entries.as_mut_ptr().cast(),
            bytes,
            (start / ps * 8) as libc::off_t,
        )
    };
    n == bytes as isize
        && entries
            .iter()
            .all(|&e| e & SWAPPED == 0 && (e & PRESENT == 0 || e & FILE != 0))
}

/// The address of the first write of `writes` (0 for none).
fn first_address(writes: &impl Writes) -> u64 {
    let mut first = None;
    writes.spans(|a, _| {
        first.get_or_insert(a);
    });
    first.unwrap_or(0)
}

/// Writes through `/proc/self/mem`, which the kernel allows even on read-only mappings. Checks
/// first that every address can be written, so a failure leaves nothing half-written.
fn write_procmem(writes: &impl Writes) -> Result<(), (u64, i32)> {
    let mem = crate::sys::Fd::open(b"/proc/self/mem", libc::O_RDWR, 0)
        .map_err(|e| (first_address(writes), e.0))?;
    // One byte at `at`, read into or written from `byte`; the errno when it is not moved.
    let moved = |byte: *mut u8, at: u64, write: bool| -> Result<(), (u64, i32)> {
        // SAFETY: one byte of a buffer the caller owns; `at` is an offset into /proc/self/mem.
        let n = unsafe {
            match write {
                true => libc::pwrite(mem.0, byte.cast(), 1, at as libc::off_t),
                false => libc::pread(mem.0, byte.cast(), 1, at as libc::off_t),
            }
        };
        match n {
            1 => Ok(()),
            0 => Err((at, libc::EIO)),
            _ => Err((at, crate::sys::Errno::last().0)),
        }
    };
    // Probe every site by writing back its current first byte (a no-op if it succeeds); the
    // first failure stops everything.
    let mut failed = Ok(());
    writes.spans(|a, _| {
        if failed.is_ok() {
            let mut cur = 0u8;
            failed = moved(&mut cur, a, false).and_then(|()| moved(&mut cur, a, true));
        }
    });
    writes.each(|a, b| {
        for (i, &byte) in b.iter().enumerate() {
            if failed.is_ok() {
                let mut byte = byte;
                failed = moved(&mut byte, a + i as u64, true).map_err(|(_, e)| (a, e));
            }
        }
    });
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protection_from_maps() {
        let maps =
            "00400000-00402000 r-xp 00000000 08:01 1 /bin/x\n00402000-00403000 r-xp 0 0:0 0\n\
             00601000-00602000 rw-p 0 0:0 0\n";
        let rx = libc::PROT_READ | libc::PROT_EXEC;
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        assert_eq!(
            parse_maps(maps),
            [
                (0x400000, 0x402000, rx),
                (0x402000, 0x403000, rx),
                (0x601000, 0x602000, rw)
            ]
        );
        // Adjacent pages with one protection make one run, across mappings; a page no mapping
        // holds is taken for code; another protection starts another run.
        let ranges = [(0x401000, 0x403000), (0x5ff000, 0x602000)];
        assert_eq!(
            protection_runs(&ranges, maps),
            [
                (0x401000, 0x2000, rx),
                (0x5ff000, 0x2000, rx),
                (0x601000, 0x1000, rw)
            ]
        );
    }

    /// The number of threads read where the kernel keeps it, and no one-pass writing while
    /// another thread runs. Checked in a forked child, whose threads are exactly the ones it
    /// starts (the test harness runs other tests' threads beside this one).
    #[test]
    fn threads_counted_and_not_alone_with_another() {
        // SAFETY: the child only runs this test's code and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = std::panic::catch_unwind(|| {
                assert_eq!(threads(), Some(1));
                assert_eq!(alone(|| 7), Some(7));
                let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
                let other = std::thread::spawn(move || stop_rx.recv());
                assert_eq!(threads(), Some(2));
                assert_eq!(alone(|| 7), None);
                stop_tx.send(()).unwrap();
                other.join().unwrap().unwrap();
            })
            .map_or(1, |()| 0);
            // SAFETY: leaving the forked child without running the harness's exit code.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child's checks failed (status {status:#x})"
        );
    }

    /// Writes in address order and out of it touch the same pages, merged into ranges; a write
    /// across a page boundary touches both pages.
    #[test]
    fn pages_of_writes() {
        let b: &[u8] = &[0; 5];
        let sorted = [(0x1000, b), (0x1ffe, b), (0x5000, b)];
        let want = [(0x1000, 0x3000), (0x5000, 0x6000)];
        assert_eq!(page_ranges(&Listed(&sorted), 0x1000), want);
        let shuffled = [sorted[2], sorted[0], sorted[1]];
        assert_eq!(page_ranges(&Listed(&shuffled), 0x1000), want);
        // Writes inside the span of the one before, one that ends past it (its next page
        // added), one on the page after, one that leaves the order (all sorted again).
        let inside = [
            (0x1000, b),
            (0x1100, b),
            (0x1ffc, b),
            (0x2ffe, b),
            (0x3010, b),
            (0x7000, b),
        ];
        let want = [(0x1000, 0x4000), (0x7000, 0x8000)];
        assert_eq!(page_ranges(&Listed(&inside), 0x1000), want);
        let out_of_order = [
            inside[0], inside[5], inside[1], inside[3], inside[2], inside[4],
        ];
        assert_eq!(page_ranges(&Listed(&out_of_order), 0x1000), want);
    }
}
