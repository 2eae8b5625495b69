//! The Rust API: takes patterns, handlers and the environment (`BOOTPROF_ENABLE`,
//! `BOOTPROF_NOTRACE`, `BOOTPROF_MODE`) from the program; hands them on to the registry (enable,
//! disable, notrace, handlers) and the recorder (record, dump), and hands back what the sites
//! are doing (their list with state and hits, hit counts by pattern, whether SIGTRAP is still
//! ours). The crate root re-exports all of it; the C API is built on it.

use crate::dispatch::{HandlerFn, Hit};
use crate::note::note;
use crate::registry::{self, Error, Mode};
use crate::{recorder, site, trap};
use bootprof_format::pattern::{self, Pattern};
use std::sync::atomic::Ordering;

/// Starts recording hits of enabled sites (TSLOG-style event log; see [`recorder`]).
pub fn record() -> bool {
    recorder::start(recorder::configured_capacity())
}

/// Writes the event log to `path` (atomically); returns the number of records. Counting hits
/// (`BOOTPROF_COUNT=1`), writes the counts so far instead (into the session's lane, else to
/// stderr), and the event log too only if the program started recording (else returns 0).
pub fn dump(path: impl AsRef<std::path::Path>) -> std::io::Result<u64> {
    recorder::dump_on_demand(path.as_ref()).map(|n| n.unwrap_or(0))
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
    cookie: *mut std::ffi::c_void,
) -> Result<HandlerId, Error> {
    registry::add_handler(pattern, func, cookie as usize).map(HandlerId)
}

/// Registers a closure for the sites matching `pattern`. The closure lives until removed.
pub fn add_handler<F: Fn(&Hit) + Send + Sync + 'static>(
    pattern: &str,
    f: F,
) -> Result<HandlerId, Error> {
    extern "C" fn shim<F: Fn(&Hit)>(hit: *const Hit, cookie: *mut std::ffi::c_void) {
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
    /// Offset in the function.
    pub func_offset: u32,
    /// What patterns match against.
    pub match_name: &'static str,
    /// None when disabled.
    pub mode: Option<Mode>,
    /// Hits so far.
    pub hits: u64,
}

/// Every site of every registered object, in id order.
pub fn sites() -> Vec<SiteInfo> {
    site::lock()
        .sites
        .iter()
        .map(|s| SiteInfo {
            id: s.id,
            address: s.addr,
            kind: s.kind,
            provider: s.provider,
            name: s.name,
            function: s.function,
            func_offset: s.func_offset,
            match_name: s.match_name,
            mode: s.mode(),
            hits: s.hits.load(Ordering::Relaxed),
        })
        .collect()
}

/// The sum of the hit counters of the sites matching `pattern`.
pub fn hits(pattern: &str) -> Result<u64, Error> {
    let p = Pattern::parse(pattern)?;
    Ok(site::lock()
        .sites
        .iter()
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
    site::lock()
        .sites
        .iter()
        .any(|s| s.state() != site::DISABLED)
}

/// Applies `BOOTPROF_ENABLE` / `BOOTPROF_MODE` to every table registered so far; called after
/// each registration, so shared objects and later `dlopen`s are covered too. The environment is
/// read once.
pub(crate) fn apply_environment() {
    static ENV: std::sync::OnceLock<Option<(Vec<Pattern>, Mode)>> = std::sync::OnceLock::new();
    let Some((patterns, mode)) = ENV.get_or_init(read_environment) else {
        return;
    };
    for p in patterns {
        if let Err(e) = enable_with(&pattern_text(p), *mode) {
            note(&format!("BOOTPROF_ENABLE: {e}"));
        }
    }
}

fn read_environment() -> Option<(Vec<Pattern>, Mode)> {
    let patterns = std::env::var_os("BOOTPROF_ENABLE")?;
    if let Some(notrace) = std::env::var_os("BOOTPROF_NOTRACE") {
        match pattern::parse_list(&notrace.to_string_lossy()) {
            Ok(list) => site::lock().notrace.extend(list),
            Err(e) => note(&format!("BOOTPROF_NOTRACE: {e}")),
        }
    }
    // SAFETY: getauxval has no preconditions.
    if unsafe { libc::getauxval(libc::AT_SECURE) } != 0 {
        note("BOOTPROF_ENABLE ignored in secure-execution mode");
        return None;
    }
    let mode = match std::env::var("BOOTPROF_MODE").as_deref() {
        Ok("call") => Mode::Call,
        Ok("trap") | Err(_) => Mode::Trap,
        Ok(other) => {
            note(&format!(
                "BOOTPROF_MODE={other} is neither trap nor call; using trap"
            ));
            Mode::Trap
        }
    };
    match pattern::parse_list(&patterns.to_string_lossy()) {
        Ok(list) => Some((list, mode)),
        Err(e) => {
            note(&format!("BOOTPROF_ENABLE: {e}"));
            None
        }
    }
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
