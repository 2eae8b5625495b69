//! Hit counting (`BOOTPROF_COUNT=1`, what `bootprof run --count` sets): takes the sites' hit
//! counters, bumped exactly while counting (`SiteRec::count`); hands on the process's counts:
//! in a session, into its lane (a `Meta::Counts` entry: at exit, from the handler of a fatal
//! signal, at each `bootprof_dump()`), else as a table on stderr at exit.
//!
//! A process that counts records nothing: its lane holds its sites' names and its counts, and
//! says it counts (`FLAG_COUNTS`), so that a reader can tell a process that never wrote its counts
//! (SIGKILL, `_exit`, `exec`) from one that did not count. A fork child counts from 0.

use crate::buffer;
use crate::note::note_raw;
use crate::prelude::*;
use crate::site::{self, SiteRec};
use bootprof_format::counts::{self as table, Row};
use bootprof_format::lane;
use core::sync::atomic::Ordering;

/// Reads `BOOTPROF_COUNT`; when it is `1`, counts every hit exactly from now on (a fork child
/// from 0). Returns whether it counts.
pub(crate) fn init_from_environment() -> bool {
    if !crate::sys::var_is("BOOTPROF_COUNT", "1") {
        return false;
    }
    site::set_hit_path(site::COUNTS_EXACTLY, true);
    extern "C" fn child() {
        forget();
    }
    // SAFETY: registers a handler with no preconditions.
    unsafe { libc::pthread_atfork(None, None, Some(child)) };
    true
}

/// Whether a site's count is written: every site that is enabled or was hit. (A guard's hits
/// are its call's: it is enabled but never counts.)
fn counted(s: &SiteRec) -> bool {
    !s.is_guard() && (s.mode().is_some() || s.hits.load(Ordering::Relaxed) != 0)
}

/// The registered sites, from the snapshot the dispatchers read: no lock, no allocation.
fn sites() -> impl Iterator<Item = &'static SiteRec> {
    site::index().into_iter().flat_map(|i| i.sites())
}

/// Writes the counts into the lane; false without a session's lane or room in it.
/// Async-signal-safe: it reads the sites' snapshot (no lock), writes in place (no allocation),
/// and its claim never waits for another thread (which the signal may have interrupted).
pub(crate) fn write_into_lane() -> bool {
    if !buffer::exists() || !buffer::in_session() {
        return false;
    }
    let n = sites().filter(|s| counted(s)).count();
    buffer::append_meta(lane::counts_entry_len(n), buffer::Wait::No, |entry| {
        // Other threads still run: a site disabled since it was counted above is left out.
        let mut written = 0;
        for s in sites().filter(|s| counted(s)).take(n) {
            lane::put_count(entry, written, s.id, s.hits.load(Ordering::Relaxed));
            written += 1;
        }
        lane::put_counts_header(entry, written as u32);
        lane::counts_entry_len(written)
    })
}

/// The counts as a table, headed by the program and its pid (what stderr gets without a
/// session).
#[cfg_attr(not(feature = "std"), optimize(size))]
pub(crate) fn table() -> String {
    let rows = table::rows(sites().filter(|s| counted(s)).map(|s| {
        let n = s.names();
        Row {
            hits: s.hits.load(Ordering::Relaxed),
            kind: s.kind,
            site: table::site_name(s.kind, n.provider, n.name, s.function_name()),
        }
    }));
    let exe = crate::sys::read_link(b"/proc/self/exe").unwrap_or_default();
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let mut out = format!(
        "bootprof: hit counts of {} (pid {pid})",
        crate::sys::display(&exe)
    );
    if rows.is_empty() {
        out.push_str(": no site enabled or hit\n");
    } else {
        out.push_str(":\n");
        table::write_table(&rows, "", &mut out);
    }
    out
}

/// Writes the counts so far where they go: into the lane in a session, else the table to
/// stderr.
pub(crate) fn write() {
    if buffer::in_session() {
        if !write_into_lane() {
            note_raw("bootprof: no room left in the lane for the hit counts\n");
        }
    } else {
        note_raw(&table());
    }
}

/// At exit without a session: the table to stderr.
pub(crate) extern "C" fn print_at_exit() {
    note_raw(&table());
}

/// In a fork child: every counter back to 0 (the parent's hits are the parent's).
fn forget() {
    for s in sites() {
        s.hits.store(0, Ordering::Relaxed);
    }
}
