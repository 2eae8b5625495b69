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
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Levels of calls a thread's filter stack holds.
pub const HELD: usize = 256;

/// Whether a filter is set.
static ON: AtomicBool = AtomicBool::new(false);
/// Levels kept (`usize::MAX`: all).
static DEPTH: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The shortest call kept, in TSC ticks (0: all).
static MIN_TICKS: AtomicU64 = AtomicU64::new(0);
/// The settings as given, for the lane's header: depth (0 = none) and nanoseconds (0 = none).
static GIVEN: (AtomicUsize, AtomicU64) = (AtomicUsize::new(0), AtomicU64::new(0));

/// One open call.
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

impl Call {
    const EMPTY: Call = Call {
        site: None,
        arg: 0,
        tsc: 0,
        written: false,
        // All zeroes (no site: never matched, never written), so that the thread-local array
        // takes no room in the file (`.tbss`, not `.tdata`).
        out: false,
    };
}

crate::sys::thread_local_cells! {
    /// Open calls of this thread (beyond [`HELD`], counted only).
    static LEVEL: Cell<usize> = Cell::new(0);
    static CALLS: [Cell<Call>; HELD] = [const { Cell::new(Call::EMPTY) }; HELD];
}

fn call(i: usize) -> Call {
    CALLS.with(|c| c[i].get())
}

fn set_call(i: usize, value: Call) {
    CALLS.with(|c| c[i].set(value));
}

/// Whether a filter is set.
#[inline]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Reads `BOOTPROF_DEPTH` (a positive number of levels) and `BOOTPROF_MIN_TIME` (a positive
/// number of nanoseconds), noting on stderr a value that is not one (and ignoring it), and
/// writes the settings into the lane's header.
pub(crate) fn init_from_environment() {
    static ONCE: crate::sys::Once = crate::sys::Once::new();
    ONCE.call_once(read_environment);
}

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
    ON.store(true, Ordering::Relaxed);
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
    // SAFETY: registers handlers with no preconditions.
    unsafe {
        libc::pthread_atfork(None, None, Some(child));
        libc::atexit(say_left_out);
    }
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
pub(crate) fn enter(site: &'static SiteRec, arg: u64, tid: u32, tsc: u64) -> bool {
    let level = LEVEL.with(Cell::get);
    LEVEL.with(|l| l.set(level + 1));
    if level >= HELD {
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
        recorder::record(site, RecordKind::Enter, arg, tid, tsc);
    }
    write
}

/// The EXIT of a call of `site` at `tsc`: ends the innermost open call of its function (the
/// ones above it ended without an EXIT), and writes it if the filter keeps it.
pub(crate) fn exit(site: &'static SiteRec, tid: u32, tsc: u64) {
    let level = LEVEL.with(Cell::get);
    if level > HELD {
        LEVEL.with(|l| l.set(level - 1));
        left_out();
        return;
    }
    let Some(at) = (0..level).rev().find(|&i| {
        call(i)
            .site
            .is_some_and(|s| s.c_function == site.c_function)
    }) else {
        // An EXIT without its ENTER (the filter was set after it): written as it is.
        recorder::record(site, RecordKind::Exit, 0, tid, tsc);
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
        recorder::record(site, RecordKind::Exit, 0, tid, tsc);
    } else if tsc.saturating_sub(c.tsc) >= MIN_TICKS.load(Ordering::Relaxed) {
        // Kept: the held calls around it are kept too, outermost first.
        for i in 0..=at {
            let held = call(i);
            if let (false, false, Some(s)) = (held.written, held.out, held.site) {
                recorder::record(s, RecordKind::Enter, held.arg, tid, held.tsc);
                set_call(
                    i,
                    Call {
                        written: true,
                        ..held
                    },
                );
            }
        }
        recorder::record(site, RecordKind::Exit, 0, tid, tsc);
    } else {
        left_out();
    }
}
