//! The registry: takes the site tables the loaded objects register and the patterns callers
//! enable, disable and attach handlers with; hands on the registered sites and their lookup
//! snapshot (both kept in `site`), and carries out enable/disable by writing code ([`text`]) with
//! the cross-modifying protocol, installing the SIGTRAP handler ([`trap`](crate::trap)) before the
//! first site is enabled.

use crate::note::note;
use crate::prelude::*;
use crate::site::{self, lock, Handler, CALL, DISABLED, DISABLING_CALL, ENABLING_CALL, TRAP};
use crate::text::{self, TextError};
use bootprof_format::pattern::{Pattern, PatternError};
use bootprof_format::{self as format, code, Form, MAX_SITE_LEN};
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

#[doc(hidden)]
pub use crate::site::{lookup_benchmark, synthetic_site};
pub use crate::site::{Mode, SiteRec, MAX_HANDLERS};

/// Why an enable or disable failed.
#[derive(Debug)]
pub enum Error {
    /// The pattern is malformed.
    Pattern(PatternError),
    /// Code could not be written; no site was changed.
    Text(TextError),
    /// A call-mode site's stub is out of reach of a 32-bit displacement.
    Unreachable(u64),
    /// All handler slots are taken.
    TooManyHandlers,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Pattern(e) => e.fmt(f),
            Error::Text(e) => e.fmt(f),
            Error::Unreachable(a) => write!(f, "site {a:#x} cannot reach its stub with a call"),
            Error::TooManyHandlers => write!(f, "more than {MAX_HANDLERS} handlers"),
        }
    }
}

impl core::error::Error for Error {}

impl From<PatternError> for Error {
    fn from(e: PatternError) -> Self {
        Error::Pattern(e)
    }
}

/// The names of a table's sites, as `&'static str` with the C string each is the start of.
///
/// The rewriter puts a fragment's names in its name pool (`format::Sites::pool`): the pool is
/// checked once, as valid UTF-8 ending in a NUL, so a name in it costs one `strlen`; a name
/// elsewhere is read and checked on its own (`?` when it is not UTF-8). The last name read for
/// each field is kept: a fragment's hooks share their hook's name, a function's sites its name.
struct Names {
    table: &'static [u8],
    start: u64,
    pool: core::ops::Range<usize>,
    pool_ok: bool,
    last: [(u64, &'static str, *const u8); 4],
    /// Whether every name read so far lies in the table, NUL-terminated, as valid UTF-8.
    self_contained: bool,
}

impl Names {
    fn new(table: &'static [u8]) -> Names {
        Names {
            table,
            start: table.as_ptr() as u64,
            pool: 0..0,
            pool_ok: false,
            last: [(0, "", core::ptr::null()); 4],
            self_contained: true,
        }
    }

    /// Takes the name pool of the fragment the next sites come from.
    fn set_pool(&mut self, pool: core::ops::Range<usize>) {
        if pool != self.pool {
            let bytes = &self.table[pool.clone()];
            self.pool_ok = bytes.last() == Some(&0) && core::str::from_utf8(bytes).is_ok();
            self.pool = pool;
        }
    }

    /// The name at `addr` (field `field` of the entry: the cache slot), empty for none.
    fn get(&mut self, field: usize, addr: Option<u64>) -> (&'static str, *const u8) {
        let Some(a) = addr else {
            return ("", c"".as_ptr().cast());
        };
        let (last, name, c) = self.last[field];
        if last == a && !c.is_null() {
            return (name, c);
        }
        let name = self.read(a);
        self.last[field] = (a, name, a as *const u8);
        (name, a as *const u8)
    }

    fn read(&mut self, a: u64) -> &'static str {
        let at = a.wrapping_sub(self.start) as usize;
        let table = self.table;
        let starts_a_name = |at: usize| at == self.pool.start || table[at - 1] == 0;
        if self.pool_ok && self.pool.contains(&at) && starts_a_name(at) {
            // SAFETY: a NUL ends the pool, so the string ends inside it.
            let len =
                unsafe { core::ffi::CStr::from_ptr(table[at..].as_ptr().cast()) }.count_bytes();
            // SAFETY: the pool is valid UTF-8, and the name runs from the pool's start or a NUL
            // to a NUL: whole characters.
            return unsafe { core::str::from_utf8_unchecked(&table[at..at + len]) };
        }
        // SAFETY: the rewriter points every name at a NUL-terminated string of the object's
        // read-only data, which lives as long as the table.
        let c = unsafe { core::ffi::CStr::from_ptr(a as *const core::ffi::c_char) };
        let name = c.to_str().ok();
        if name.is_none() || at >= table.len() || table.len() - at <= c.count_bytes() {
            self.self_contained = false;
        }
        name.unwrap_or("?")
    }
}

/// Records the table `[start, stop)` of one loaded object, to be read when anything first
/// needs the sites (`site::defer`).
///
/// # Safety
/// `start..stop` must be a `bootprof_sites` table of a loaded object that is not unloaded
/// before it unregisters the table.
pub(crate) unsafe fn register_table(start: *const u8, stop: *const u8) {
    if start.is_null() || stop <= start {
        return;
    }
    site::defer(start as usize, stop as usize, read_table);
}

/// Reads the table `[start, stop)` (registered by [`register_table`]) into the registry: its
/// sites' records in one allocation, the lookup snapshot, and the table described in the lane.
fn read_table(reg: &mut site::Registry, start: usize, stop: usize) {
    // SAFETY: a table register_table was given, of an object still loaded (an object unloads
    // only after unregistering its table, which reads every pending table first); it lives as
    // long as its sites are registered, and its memory is never written.
    let bytes: &'static [u8] =
        unsafe { core::slice::from_raw_parts(start as *const u8, stop - start) };
    static NEXT_ID: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
    let first_id = NEXT_ID.load(Ordering::Relaxed);
    let mut recs: Vec<SiteRec> = Vec::with_capacity(bytes.len() / format::ENTRY_SIZE);
    let mut names = Names::new(bytes);
    let latency = crate::latency::wanted();
    let mut sites = format::sites(bytes, start as u64);
    while let Some(site) = sites.next() {
        let Ok(site) = site else {
            note(&format!("ignoring a malformed site table at {start:#x}"));
            break;
        };
        names.set_pool(sites.pool());
        let id = first_id + recs.len() as u32;
        recs.push(site_rec(id, start as u64, &site, &mut names, latency));
    }
    // Ids are never reused, even after an object is unloaded.
    NEXT_ID.store(first_id + recs.len() as u32, Ordering::Relaxed);
    let recs: &'static [SiteRec] = recs.leak();
    if reg.handlers.iter().any(Option::is_some) {
        for rec in recs {
            let mut mask = 0u64;
            for (h, handler) in reg.handlers.iter().enumerate() {
                if handler.as_ref().is_some_and(|h| rec.matches(&h.pattern)) {
                    mask |= 1 << h;
                }
            }
            rec.handlers.store(mask, Ordering::Relaxed);
        }
    }
    reg.sites.extend(recs.iter());
    site::publish(&reg.sites);
    let table = site::Table {
        bytes,
        sites: recs,
        self_contained: names.self_contained,
    };
    crate::recorder::describe_table(&table);
    reg.tables.push(table);
}

/// The record of `site`, the `id`th of the table at `table`.
fn site_rec(id: u32, table: u64, site: &format::Site, names: &mut Names, latency: bool) -> SiteRec {
    let (provider, c_provider) = names.get(0, site.provider);
    let (name, c_name) = names.get(1, site.name);
    let (function, c_function) = names.get(2, site.function);
    let (demangled, _) = names.get(3, site.demangled);
    let match_name: &'static str = if site.kind.is_hook() {
        function
    } else {
        Box::leak(format!("{provider}:{name}").into_boxed_str())
    };
    // The stub starts `lea rel32(%rip), %r11` (`code::LEA_R11`): its name string is the id.
    // (A guard's target is the program's own code, not a stub.)
    let stub_id = if site.target != 0 && site.form != Form::Guard {
        // SAFETY: the target is the stub the rewriter generated, 13 readable bytes of code.
        let lea =
            unsafe { core::ptr::read_unaligned(site.target as *const [u8; code::LEA_R11_LEN]) };
        code::stub_id(site.target, &lea).unwrap_or(0)
    } else {
        0
    };
    let rec_kind = format::trace::record_kind(site.kind, provider, name).map_or(0, |k| k as u8);
    let latency = if latency {
        crate::latency::role(
            |p| format::pattern::site_matches(p, match_name, provider, function, demangled),
            rec_kind,
        )
    } else {
        0
    };
    SiteRec {
        id,
        table,
        addr: site.site,
        kind: site.kind,
        form: site.form,
        target: site.target,
        provider,
        name,
        function,
        demangled,
        func_offset: site.func_offset,
        match_name,
        c_provider,
        c_name,
        c_function,
        stub_id,
        nop: format::disabled_bytes(site.kind, site.form),
        state: AtomicU8::new(DISABLED),
        handlers: AtomicU64::new(0),
        hits: AtomicU64::new(0),
        rec_kind,
        latency,
        stacktrace: core::sync::atomic::AtomicBool::new(false),
        point: site::Point::new(),
    }
}

/// Forgets the sites of the table starting at `start` (an object being unloaded), after putting
/// their NOPs back. Returns how many sites were forgotten.
pub(crate) fn unregister_table(start: u64) -> usize {
    if crate::recorder::EXITING.load(Ordering::Relaxed) || site::forget_pending(start as usize) {
        // The process is ending: its code goes away with it, and a thread may still run a site.
        // Or nothing ever read the table: it has no sites to forget.
        return 0;
    }
    let mut reg = lock();
    let (gone, kept): (Vec<&'static SiteRec>, Vec<&'static SiteRec>) =
        reg.sites.iter().partition(|s| s.table == start);
    if gone.is_empty() {
        return 0;
    }
    let trap: Vec<_> = gone.iter().copied().filter(|s| s.state() == TRAP).collect();
    let call: Vec<_> = gone.iter().copied().filter(|s| s.state() == CALL).collect();
    if disable_trap(&trap)
        .and_then(|()| switch_call(&call, false))
        .is_err()
    {
        note("cannot restore the sites of an object being unloaded");
    }
    reg.sites = kept;
    reg.tables.retain(|t| t.bytes.as_ptr() as u64 != start);
    site::publish(&reg.sites);
    gone.len()
}

/// The state `to` means for `site`: a guard is enabled by its jump whatever the mode (the mode
/// is its out-of-line call site's).
fn target_state(site: &SiteRec, to: u8) -> u8 {
    if site.is_guard() && to != DISABLED {
        CALL
    } else {
        to
    }
}

/// Changes the state of every site matching `pattern` (and no `notrace` pattern) to `to`
/// (`DISABLED`, `TRAP` or `CALL`), in one batch. Returns how many sites changed.
///
/// Guards are switched after the other sites when enabling and before them when disabling, so
/// that a guard never jumps to an out-of-line call that is still (or already) a NOP, as far as
/// one batch can tell.
pub(crate) fn set_state(pattern: &str, to: u8) -> Result<usize, Error> {
    let pattern = Pattern::parse(pattern)?;
    let reg = lock();
    let chosen: Vec<&'static SiteRec> = reg
        .sites
        .iter()
        .copied()
        .filter(|s| s.matches(&pattern))
        .filter(|s| to == DISABLED || !reg.notrace.iter().any(|n| s.matches(n)))
        .filter(|s| s.state() != target_state(s, to))
        .collect();
    switch_locked(chosen, to)
}

/// Enables in `mode`, for `bootprof attach`, the sites matching one of `patterns` and none of
/// `notrace` (nor of the program's notrace patterns) that are disabled now; returns them: the
/// sites this caller alone turned on, for [`restore`] to turn off again; and the hits each had
/// just before (a disabled site is not hit, so a count from these is exactly the new hits).
pub(crate) fn enable_disabled(
    patterns: &[Pattern],
    notrace: &[Pattern],
    mode: Mode,
) -> Result<(Vec<&'static SiteRec>, Vec<u64>), Error> {
    let reg = lock();
    let chosen: Vec<&'static SiteRec> = reg
        .sites
        .iter()
        .copied()
        .filter(|s| s.state() == DISABLED && patterns.iter().any(|p| s.matches(p)))
        .filter(|s| !notrace.iter().chain(&reg.notrace).any(|n| s.matches(n)))
        .collect();
    let hits = (chosen.iter())
        .map(|s| s.hits.load(core::sync::atomic::Ordering::Relaxed))
        .collect();
    switch_locked(chosen.clone(), mode as u8)?;
    Ok((chosen, hits))
}

/// Disables those of `sites` that are still registered and enabled (the program may have
/// disabled some itself meanwhile, or unloaded their object); returns how many it disabled.
pub(crate) fn restore(sites: &[&'static SiteRec]) -> Result<usize, Error> {
    let reg = lock();
    let chosen: Vec<&'static SiteRec> = sites
        .iter()
        .copied()
        .filter(|s| s.state() != DISABLED && reg.sites.iter().any(|r| core::ptr::eq(*r, *s)))
        .collect();
    switch_locked(chosen, DISABLED)
}

/// Whether the code at `site` is exactly its NOP, as the file holds it.
pub(crate) fn holds_nop(site: &SiteRec) -> bool {
    let len = site.site_len();
    // SAFETY: a registered site is `len` bytes of the loaded object's code, readable while the
    // object is loaded.
    let now = unsafe { core::slice::from_raw_parts(site.addr as *const u8, len) };
    now == &site.nop[..len]
}

/// Moves every site of `chosen` to the state `to` in one batch (see [`set_state`]); the
/// registry's lock is held by the caller. Returns how many sites changed.
fn switch_locked(chosen: Vec<&'static SiteRec>, to: u8) -> Result<usize, Error> {
    if chosen.is_empty() {
        return Ok(0);
    }
    if to != DISABLED {
        crate::trap::install();
    }
    let (guards, chosen): (Vec<&'static SiteRec>, Vec<&'static SiteRec>) =
        chosen.into_iter().partition(|s| s.is_guard());
    if to == DISABLED {
        switch_call(&guards, false)?;
    }
    // Leave the old mode first: trap sites back to NOP, call sites through the protocol.
    let from_trap: Vec<_> = chosen
        .iter()
        .copied()
        .filter(|s| s.state() == TRAP)
        .collect();
    let from_call: Vec<_> = chosen
        .iter()
        .copied()
        .filter(|s| s.state() == CALL)
        .collect();
    disable_trap(&from_trap)?;
    switch_call(&from_call, false)?;
    match to {
        TRAP => enable_trap(&chosen)?,
        CALL => switch_call(&chosen, true)?,
        _ => {}
    }
    if to != DISABLED {
        switch_call(&guards, true)?;
    }
    Ok(chosen.len() + guards.len())
}

fn enable_trap(sites: &[&'static SiteRec]) -> Result<(), Error> {
    let writes: Vec<(u64, &[u8])> = sites.iter().map(|s| (s.addr, &[code::INT3][..])).collect();
    for s in sites {
        s.state.store(TRAP, Ordering::Release);
    }
    // SAFETY: an int3 over the first byte of a NOP is a single-byte store of a valid instruction.
    if let Err(e) = unsafe { text::write_batch(&writes) } {
        for s in sites {
            s.state.store(DISABLED, Ordering::Release);
        }
        return Err(Error::Text(e));
    }
    text::sync_cores();
    Ok(())
}

fn disable_trap(sites: &[&'static SiteRec]) -> Result<(), Error> {
    let writes: Vec<(u64, &[u8])> = sites.iter().map(|s| (s.addr, &s.nop[..1])).collect();
    // SAFETY: puts back the NOP's first byte; a thread that trapped before is rewound by the
    // handler to re-execute the NOP.
    unsafe { text::write_batch(&writes) }.map_err(Error::Text)?;
    for s in sites {
        s.state.store(DISABLED, Ordering::Release);
    }
    text::sync_cores();
    Ok(())
}

/// The bytes an enabled call-mode site holds (`code::enabled_bytes`): a call (or, for a tail
/// site, a jump) to its stub, padded with a one-byte NOP for six-byte sites; for a guard, the
/// jump to its out-of-line code. `None` when the target is out of reach of the 5-byte
/// instruction's 32-bit displacement.
fn call_bytes(site: &SiteRec) -> Option<[u8; MAX_SITE_LEN]> {
    let rel = site.target as i64 - (site.addr as i64 + code::REL32_LEN as i64);
    let rel = i32::try_from(rel).ok()?;
    Some(code::enabled_bytes(site.form, rel))
}

/// Moves `sites` from disabled to call mode (`enable`) or back, with the int3 bridge:
/// int3 on byte 0 -> sync -> bytes 1.. -> sync -> byte 0 -> sync. A thread that meets the int3 is
/// handled by the SIGTRAP handler as the old or new instruction, by the transient state.
fn switch_call(sites: &[&'static SiteRec], enable: bool) -> Result<(), Error> {
    if sites.is_empty() {
        return Ok(());
    }
    let mut new = Vec::with_capacity(sites.len());
    for s in sites {
        new.push(if enable {
            call_bytes(s).ok_or(Error::Unreachable(s.addr))?
        } else {
            s.nop
        });
    }
    let (transient, done) = if enable {
        (ENABLING_CALL, CALL)
    } else {
        (DISABLING_CALL, DISABLED)
    };
    for s in sites {
        s.state.store(transient, Ordering::Release);
    }
    // One vector for the three steps' writes (thousands of sites: its pages are touched once).
    let mut writes: Vec<(u64, &[u8])> = Vec::with_capacity(sites.len());
    writes.extend(sites.iter().map(|s| (s.addr, &[code::INT3][..])));
    // SAFETY: an int3 over byte 0, then the rest of the new instruction behind it, then its
    // first byte: at every moment each site decodes as int3 + junk (never executed: the handler
    // resumes elsewhere) or as the complete old or new instruction.
    let step1 = unsafe { text::write_batch(&writes) };
    if let Err(e) = step1 {
        for s in sites {
            s.state
                .store(if enable { DISABLED } else { CALL }, Ordering::Release);
        }
        return Err(Error::Text(e));
    }
    text::sync_cores();
    writes.clear();
    writes.extend(
        sites
            .iter()
            .zip(&new)
            .map(|(s, b)| (s.addr + 1, &b[1..s.site_len()])),
    );
    // SAFETY: see above; the same pages were writable a moment ago.
    unsafe { text::write_batch(&writes) }.map_err(Error::Text)?;
    text::sync_cores();
    writes.clear();
    writes.extend(sites.iter().zip(&new).map(|(s, b)| (s.addr, &b[..1])));
    // SAFETY: see above.
    unsafe { text::write_batch(&writes) }.map_err(Error::Text)?;
    text::sync_cores();
    for s in sites {
        s.state.store(done, Ordering::Release);
    }
    Ok(())
}

/// Turns the recording of call stacks on (`on`) or off for every site matching `pattern`.
/// Returns how many sites match.
pub(crate) fn set_stacktrace(pattern: &str, on: bool) -> Result<usize, Error> {
    let pattern = Pattern::parse(pattern)?;
    let reg = lock();
    let mut n = 0;
    for s in reg.sites.iter().filter(|s| s.matches(&pattern)) {
        s.stacktrace.store(on, Ordering::Relaxed);
        n += 1;
    }
    Ok(n)
}

/// Adds a handler; returns its slot.
pub(crate) fn add_handler(
    pattern: &str,
    func: crate::dispatch::HandlerFn,
    cookie: usize,
) -> Result<usize, Error> {
    let pattern = Pattern::parse(pattern)?;
    let mut reg = lock();
    let slot = match reg.handlers.iter().position(Option::is_none) {
        Some(i) => i,
        None if reg.handlers.len() < MAX_HANDLERS => {
            reg.handlers.push(None);
            reg.handlers.len() - 1
        }
        None => return Err(Error::TooManyHandlers),
    };
    crate::dispatch::set_slot(slot, Some((func, cookie)));
    for s in reg.sites.iter().filter(|s| s.matches(&pattern)) {
        s.handlers.fetch_or(1 << slot, Ordering::AcqRel);
    }
    reg.handlers[slot] = Some(Handler { pattern });
    Ok(slot)
}

/// Removes handler `slot`; false if there was none.
pub(crate) fn remove_handler(slot: usize) -> bool {
    let mut reg = lock();
    if reg.handlers.get(slot).is_none_or(Option::is_none) {
        return false;
    }
    for s in &reg.sites {
        s.handlers.fetch_and(!(1 << slot), Ordering::AcqRel);
    }
    crate::dispatch::set_slot(slot, None);
    reg.handlers[slot] = None;
    true
}
