//! Call filters (`BOOTPROF_DEPTH=N`, `BOOTPROF_MIN_TIME=NANOSECONDS`; `bootprof run --depth
//! --min-time`): takes the ENTER and EXIT records of calls whose exits are recorded (functions
//! built with `-finstrument-functions`, `-pg`/`-mfentry` functions under `BOOTPROF_GRAPH=1`,
//! annotated regions); hands on to the recorder only the calls that pass, so that the trace
//! stays small.
//!
//! - Depth: only the outermost N levels of calls of each thread are recorded.
//! - Shortest call: a call is recorded only if it took at least that long, which is known at
//!   its EXIT: its ENTER is held back until then, on a per-thread stack of [`HELD`] entries
//!   (no allocation). When a call is kept, the ENTERs held for the calls around it are written
//!   first (they last at least as long), each with its own time; a call nested in a kept one but
//!   shorter than the bound is left out. Records are written later than their time, so a
//!   thread's records are not in time order in its lane; the readers sort them.
//!
//! A call left out is counted in the lane's header (`field::FILTERED`, beside the filter's
//! settings), so a report says the trace is filtered. Calls more than [`HELD`] levels deep are
//! left out (and counted) whatever the filter. A frame left without its EXIT (`longjmp` out of
//! `-finstrument-functions` code) is found at the EXIT of a call below it: if its ENTER was
//! still held, it is left out. A held call's stack (`BOOTPROF_STACKTRACE`) is not recorded.

use crate::buffer;
use crate::note::note;
use crate::prelude::*;
use crate::recorder;
use crate::site::SiteRec;
use bootprof_format::lane::field;
use bootprof_format::trace::RecordKind;
use core::cell::Cell;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Levels of calls a thread's filter stack holds.
pub const HELD: usize = 256;

/// Levels kept (`usize::MAX`: all).
static DEPTH: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The shortest call kept, in TSC ticks (0: all).
static MIN_TICKS: AtomicU64 = AtomicU64::new(0);
/// The settings as given, for the lane's header: depth (0 = none) and nanoseconds (0 = none).
static GIVEN: (AtomicUsize, AtomicU64) = (AtomicUsize::new(0), AtomicU64::new(0));

/// One open call. All zeroes (no site: never matched, never written) is an empty one, what a
/// thread's newly mapped stack holds.
#[derive(Clone, Copy)]
struct Call {
    site: Option<&'static SiteRec>,
    arg: u64,
    tsc: u64,
    /// Its ENTER is written.
    written: bool,
    /// Left out (too deep): neither record is written.
    out: bool,
}

crate::sys::thread_local_cells! {
    /// Open calls of this thread (beyond [`HELD`], counted only).
    static LEVEL: Cell<usize> = Cell::new(0);
    /// This thread's stack of [`HELD`] calls, mapped at its first call (null before): 8 KB
    /// in the static thread-local block would be zeroed at the start of every thread of every
    /// program, filtered or not.
    static CALLS: Cell<*mut Call> = Cell::new(core::ptr::null_mut());
}

/// Open call `i` of this thread (below its level: the stack is there).
fn call(i: usize) -> Call {
    debug_assert!(i < HELD);
    // SAFETY: a level above i means `enter` found the stack (`exit` checks); i < HELD.
    CALLS.with(|c| unsafe { *c.get().add(i) })
}

/// Sets open call `i` of this thread (below its level: the stack is there).
fn set_call(i: usize, value: Call) {
    debug_assert!(i < HELD);
    // SAFETY: as in `call`.
    CALLS.with(|c| unsafe { *c.get().add(i) = value });
}

/// Whether this thread has its stack of calls, mapped now if not (anonymous memory: all zeroes,
/// empty calls; mapping is safe in a signal handler, where a trap-mode hit runs, as `malloc` is
/// not). A thread key unmaps it when the thread ends.
fn has_stack() -> bool {
    !CALLS.with(Cell::get).is_null() || map_stack()
}

#[cold]
fn map_stack() -> bool {
    static KEY: crate::sys::OnceLock<Option<libc::pthread_key_t>> = crate::sys::OnceLock::new();
    let Some(key) = *KEY.get_or_init(|| {
        let mut key = 0;
        // SAFETY: a key we own, with a destructor for what it holds.
        (unsafe { libc::pthread_key_create(&mut key, Some(unmap_stack)) } == 0).then_some(key)
    }) else {
        return false;
    };
    // SAFETY: a fresh anonymous mapping, ours.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            STACK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    // SAFETY: this thread's value of our key.
    unsafe { libc::pthread_setspecific(key, p) };
    CALLS.with(|c| c.set(p.cast()));
    true
}

/// The size of a thread's stack of calls.
const STACK_BYTES: usize = HELD * core::mem::size_of::<Call>();

/// A thread ends: its stack goes (a call after this, from another key's destructor, maps
/// another, which the C library's next round of destructors unmaps).
unsafe extern "C" fn unmap_stack(p: *mut libc::c_void) {
    CALLS.with(|c| c.set(core::ptr::null_mut()));
    // SAFETY: the mapping map_stack made for this thread.
    unsafe { libc::munmap(p, STACK_BYTES) };
}

/// Whether a filter is set.
#[inline]
pub(crate) fn on() -> bool {
    crate::site::hit_path() & crate::site::FILTERS != 0
}

/// Reads `BOOTPROF_DEPTH` (a positive number of levels) and `BOOTPROF_MIN_TIME` (a positive
/// number of nanoseconds), noting on stderr a value that is not one (and ignoring it), and
/// writes the settings into the lane's header.
pub(crate) fn init_from_environment() {
    static ONCE: crate::sys::Once = crate::sys::Once::new();
    ONCE.call_once(read_environment);
}

#[cfg_attr(not(feature = "std"), optimize(size))]
fn read_environment() {
    let positive = |name: &str| -> Option<u64> {
        let v = crate::sys::var(name)?;
        match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                note(&format!(
                    "{name}={v} is not a positive whole number; no filter is applied by it"
                ));
                None
            }
        }
    };
    let depth = positive("BOOTPROF_DEPTH");
    let min_ns = positive("BOOTPROF_MIN_TIME");
    if depth.is_none() && min_ns.is_none() {
        return;
    }
    if let Some(d) = depth {
        let d = usize::try_from(d).unwrap_or(usize::MAX);
        DEPTH.store(d, Ordering::Relaxed);
        GIVEN.0.store(d.min(u32::MAX as usize), Ordering::Relaxed);
    }
    if let Some(ns) = min_ns {
        let hz = crate::clock::quick_tsc_hz();
        let ticks = u128::from(ns) * u128::from(hz) / 1_000_000_000;
        MIN_TICKS.store(
            u64::try_from(ticks).unwrap_or(u64::MAX).max(1),
            Ordering::Relaxed,
        );
        GIVEN.1.store(ns, Ordering::Relaxed);
    }
    crate::site::set_hit_path(crate::site::FILTERS, true);
    describe();
    extern "C" fn child() {
        // A fork child's lane is new: it says the filter too (its count starts at 0).
        describe();
    }
    extern "C" fn say_left_out() {
        // A trace file has no room for the count: it goes to stderr.
        if buffer::exists() && !buffer::in_session() {
            let n = buffer::word(field::FILTERED).load(Ordering::Relaxed);
            note(&format!(
                "{n} calls were left out by the filter (BOOTPROF_DEPTH, BOOTPROF_MIN_TIME)"
            ));
        }
    }
    // SAFETY: registers a handler with no preconditions.
    unsafe { libc::pthread_atfork(None, None, Some(child)) };
    crate::sys::at_exit(say_left_out);
}

/// Writes the filter's settings into the lane's header, if there is a lane.
fn describe() {
    if !buffer::exists() {
        return;
    }
    let depth = GIVEN.0.load(Ordering::Relaxed) as u32;
    buffer::set_u32(field::FILTER_DEPTH, depth);
    let ns = GIVEN.1.load(Ordering::Relaxed);
    buffer::word(field::FILTER_MIN_NS).store(ns, Ordering::Relaxed);
}

/// Counts a call left out.
fn left_out() {
    if buffer::exists() {
        buffer::word(field::FILTERED).fetch_add(1, Ordering::Relaxed);
    }
}

/// The ENTER of a call of `site` (argument `arg`) at `tsc`: written now when the filter keeps
/// it at once (no shortest call), else held or left out. Whether it was written.
pub(crate) fn enter(site: &'static SiteRec, arg: u64, tsc: u64) -> bool {
    let level = LEVEL.with(Cell::get);
    LEVEL.with(|l| l.set(level + 1));
    if level >= HELD || !has_stack() {
        return false;
    }
    let out = level >= DEPTH.load(Ordering::Relaxed);
    let write = !out && MIN_TICKS.load(Ordering::Relaxed) == 0;
    set_call(
        level,
        Call {
            site: Some(site),
            arg,
            tsc,
            written: write,
            out,
        },
    );
    if write {
        recorder::record(site, RecordKind::Enter, arg, tsc);
    }
    write
}

/// The EXIT of a call of `site` at `tsc`: ends the innermost open call of its function (the
/// ones above it ended without an EXIT), and writes it if the filter keeps it.
pub(crate) fn exit(site: &'static SiteRec, tsc: u64) {
    let level = LEVEL.with(Cell::get);
    if level > HELD || (level > 0 && CALLS.with(Cell::get).is_null()) {
        // Too deep, or no stack could be mapped for this thread: its calls are left out.
        LEVEL.with(|l| l.set(level - 1));
        left_out();
        return;
    }
    let Some(at) = (0..level).rev().find(|&i| {
        call(i)
            .site
            .is_some_and(|s| s.function_key() == site.function_key())
    }) else {
        // An EXIT without its ENTER (the filter was set after it): written as it is.
        recorder::record(site, RecordKind::Exit, 0, tsc);
        return;
    };
    for i in at + 1..level {
        if !call(i).written {
            left_out();
        }
    }
    LEVEL.with(|l| l.set(at));
    let c = call(at);
    if c.out {
        left_out();
    } else if c.written {
        recorder::record(site, RecordKind::Exit, 0, tsc);
    } else if tsc.saturating_sub(c.tsc) >= MIN_TICKS.load(Ordering::Relaxed) {
        // Kept: the held calls around it are kept too, outermost first.
        for i in 0..=at {
            let held = call(i);
            if let (false, false, Some(s)) = (held.written, held.out, held.site) {
                recorder::record(s, RecordKind::Enter, held.arg, held.tsc);
                set_call(
                    i,
                    Call {
                        written: true,
                        ..held
                    },
                );
            }
        }
        recorder::record(site, RecordKind::Exit, 0, tsc);
    } else {
        left_out();
    }
}
