//! The Rust API: takes patterns, handlers and the environment (`BOOTPROF_ENABLE`,
//! `BOOTPROF_NOTRACE`, `BOOTPROF_MODE`) from the program; hands them on to the registry (enable,
//! disable, notrace, handlers) and the recorder (record, dump), and hands back what the sites
//! are doing (their list with state and hits, hit counts by pattern, whether SIGTRAP is still
//! ours). The crate root re-exports all of it; the C API is built on it.

use crate::dispatch::{HandlerFn, Hit};
use crate::note::note;
use crate::prelude::*;
use crate::registry::{self, Error, Mode};
use crate::sys;
use crate::{recorder, site, trap};
use bootprof_format::pattern::{self, Pattern};
use core::sync::atomic::Ordering;

/// Starts recording hits of enabled sites (TSLOG-style event log; see [`recorder`]).
pub fn record() -> bool {
    recorder::start(recorder::configured_capacity())
}

/// Writes the event log to `path` (atomically); returns the number of records. Counting hits
/// (`BOOTPROF_COUNT=1`), writes the counts so far instead (into the session's lane, else to
/// stderr), and the event log too only if the program started recording (else returns 0).
#[cfg(feature = "std")]
pub fn dump(path: impl AsRef<std::path::Path>) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    recorder::dump_on_demand(path.as_ref().as_os_str().as_bytes())
        .map(|n| n.unwrap_or(0))
        .map_err(std::io::Error::from)
}

/// Enables every site matching `pattern` in trap mode. Returns how many sites changed.
pub fn enable(pattern: &str) -> Result<usize, Error> {
    enable_with(pattern, Mode::Trap)
}

/// Enables every site matching `pattern` in `mode` (a site enabled in the other mode switches).
pub fn enable_with(pattern: &str, mode: Mode) -> Result<usize, Error> {
    registry::set_state(pattern, mode as u8)
}

/// Disables every site matching `pattern`, putting its exact NOP back.
pub fn disable(pattern: &str) -> Result<usize, Error> {
    registry::set_state(pattern, site::DISABLED)
}

/// Records the call stack at every hit of the sites matching `pattern` (`on`), or stops it:
/// after a hit's record, one FRAME record per frame, unwound by frame pointers (see the
/// `unwind` module). Enabling is separate ([`enable`]). Returns how many sites match.
pub fn stacktrace(pattern: &str, on: bool) -> Result<usize, Error> {
    registry::set_stacktrace(pattern, on)
}

/// Records function exits (`on`) or stops hooking new calls: each recorded hit of an
/// `__fentry__` or `mcount` hook swaps the function's return address for a trampoline that
/// records its EXIT, as uftrace does (see [`graph`](crate::graph)). Frames hooked already still
/// return through it. `BOOTPROF_GRAPH=1` turns it on before the first constructor.
pub fn set_graph(on: bool) {
    crate::graph::set(on);
}

/// Adds a `notrace` pattern: matching sites are never enabled (exclusion wins over [`enable`]).
pub fn notrace(pattern: &str) -> Result<(), Error> {
    let p = Pattern::parse(pattern)?;
    site::lock().notrace.push(p);
    Ok(())
}

/// Removes every `notrace` pattern.
pub fn clear_notrace() {
    site::lock().notrace.clear();
}

/// A handler registration; [`remove_handler`] ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerId(pub usize);

/// Registers a C-style handler for the sites matching `pattern`.
pub fn add_handler_fn(
    pattern: &str,
    func: HandlerFn,
    cookie: *mut core::ffi::c_void,
) -> Result<HandlerId, Error> {
    registry::add_handler(pattern, func, cookie as usize).map(HandlerId)
}

/// Registers a closure for the sites matching `pattern`. The closure lives until removed.
pub fn add_handler<F: Fn(&Hit) + Send + Sync + 'static>(
    pattern: &str,
    f: F,
) -> Result<HandlerId, Error> {
    extern "C" fn shim<F: Fn(&Hit)>(hit: *const Hit, cookie: *mut core::ffi::c_void) {
        // SAFETY: the cookie is the leaked closure below; the hit lives for the call.
        unsafe { (*(cookie as *const F))(&*hit) }
    }
    let cookie = Box::into_raw(Box::new(f));
    add_handler_fn(pattern, shim::<F>, cookie.cast()).inspect_err(|_| {
        // SAFETY: not registered: nothing else holds the pointer.
        drop(unsafe { Box::from_raw(cookie) });
    })
}

/// Removes a handler (its closure, if any, is leaked: a hit may still be running it).
pub fn remove_handler(id: HandlerId) -> bool {
    registry::remove_handler(id.0)
}

/// One site, as [`sites`] lists it: ftrace's `available_filter_functions`, with state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteInfo {
    /// Id (registration order).
    pub id: u32,
    /// Address.
    pub address: u64,
    /// Kind.
    pub kind: bootprof_format::Kind,
    /// Provider (empty for hooks).
    pub provider: &'static str,
    /// Probe name (hook symbol for hooks).
    pub name: &'static str,
    /// Enclosing function.
    pub function: &'static str,
    /// Its demangled name (C++ or Rust), empty when the symbol is not mangled.
    pub demangled: &'static str,
    /// Offset in the function.
    pub func_offset: u32,
    /// What patterns match against (and, for hooks, the demangled name).
    pub match_name: String,
    /// None when disabled.
    pub mode: Option<Mode>,
    /// Hits so far.
    pub hits: u64,
}

/// Every site of every registered object, in id order.
pub fn sites() -> Vec<SiteInfo> {
    site::lock()
        .sites()
        .map(|s| {
            let n = s.names();
            SiteInfo {
                id: s.id,
                address: s.addr,
                kind: s.kind,
                provider: n.provider,
                name: n.name,
                function: n.function,
                demangled: n.demangled,
                func_offset: s.func_offset,
                match_name: s.match_name(),
                mode: s.mode(),
                hits: s.hits.load(Ordering::Relaxed),
            }
        })
        .collect()
}

/// The sum of the hit counters of the sites matching `pattern`.
pub fn hits(pattern: &str) -> Result<u64, Error> {
    let p = Pattern::parse(pattern)?;
    Ok(site::lock()
        .sites()
        .filter(|s| s.matches(&p))
        .map(|s| s.hits.load(Ordering::Relaxed))
        .sum())
}

/// Checks that the runtime still owns SIGTRAP; false if the program installed its own handler
/// after a probe was enabled in trap mode (trap-mode hits would then go to the program).
pub fn check() -> bool {
    !trap_mode_in_use() || trap::handler_in_place()
}

fn trap_mode_in_use() -> bool {
    site::lock().sites().any(|s| s.state() != site::DISABLED)
}

/// Applies `BOOTPROF_STACKTRACE`, `BOOTPROF_ENABLE` and `BOOTPROF_MODE` to every table registered
/// so far; called after each registration, so shared objects and later `dlopen`s are covered
/// too. The environment is read once.
pub(crate) fn apply_environment() {
    static ENV: crate::sys::OnceLock<Option<Environment>> = crate::sys::OnceLock::new();
    let Some(env) = ENV.get_or_init(read_environment) else {
        return;
    };
    // Stacks first: a site's first hit after it is enabled has its stack.
    for p in &env.stacktrace {
        if let Err(e) = stacktrace(&pattern_text(p), true) {
            note(&format!("BOOTPROF_STACKTRACE: {e}"));
        }
    }
    for (p, var) in (env.enable.iter().map(|p| (p, "BOOTPROF_ENABLE")))
        .chain(env.stacktrace.iter().map(|p| (p, "BOOTPROF_STACKTRACE")))
    {
        if let Err(e) = enable_with(&pattern_text(p), env.mode) {
            note(&format!("{var}: {e}"));
        }
    }
}

/// What the environment asks for at start-up.
struct Environment {
    /// `BOOTPROF_ENABLE`.
    enable: Vec<Pattern>,
    /// `BOOTPROF_STACKTRACE`: these sites record their call stacks, and are enabled too.
    stacktrace: Vec<Pattern>,
    /// `BOOTPROF_MODE`.
    mode: Mode,
}

#[cfg_attr(not(feature = "std"), optimize(size))]
fn read_environment() -> Option<Environment> {
    let (enable, stacktrace) = ("BOOTPROF_ENABLE", "BOOTPROF_STACKTRACE");
    if sys::var_os(enable).is_none() && sys::var_os(stacktrace).is_none() {
        return None;
    }
    if let Some(notrace) = sys::var_os("BOOTPROF_NOTRACE") {
        match pattern::parse_list(&String::from_utf8_lossy(notrace)) {
            Ok(list) => site::lock().notrace.extend(list),
            Err(e) => note(&format!("BOOTPROF_NOTRACE: {e}")),
        }
    }
    if crate::sys::auxv(libc::AT_SECURE) != 0 {
        note("BOOTPROF_ENABLE and BOOTPROF_STACKTRACE ignored in secure-execution mode");
        return None;
    }
    let mode = match sys::var("BOOTPROF_MODE") {
        Some("call") => Mode::Call,
        Some("trap") | None => Mode::Trap,
        Some(other) => {
            note(&format!(
                "BOOTPROF_MODE={other} is neither trap nor call; using trap"
            ));
            Mode::Trap
        }
    };
    // A list that does not parse is reported, and enables nothing.
    let list = |var: &str| -> Vec<Pattern> {
        let text = sys::var_os(var).unwrap_or_default();
        pattern::parse_list(&String::from_utf8_lossy(text)).unwrap_or_else(|e| {
            note(&format!("{var}: {e}"));
            Vec::new()
        })
    };
    Some(Environment {
        enable: list(enable),
        stacktrace: list(stacktrace),
        mode,
    })
}

fn pattern_text(p: &Pattern) -> String {
    match p {
        Pattern::Exact(s) => s.clone(),
        Pattern::Prefix(s) => format!("{s}*"),
        Pattern::Suffix(s) => format!("*{s}"),
        Pattern::Contains(s) => format!("*{s}*"),
        Pattern::Any => "*".into(),
    }
}
