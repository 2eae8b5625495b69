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
use bootprof_format::{self as format, code, MAX_SITE_LEN};
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

#[doc(hidden)]
pub use crate::site::{lookup_benchmark, synthetic_site};
pub use crate::site::{Mode, Names, SiteRec, MAX_HANDLERS};

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

/// Whether every name of a table's sites lies in the table, NUL-terminated, as valid UTF-8: then
/// a copy of the table describes the sites in a lane. Checked without reading most names: each
/// fragment's name pool (`format::Sites::pool`) is checked once, as valid UTF-8 ending in a NUL,
/// and a name's address against the pool of its fragment; a name elsewhere (a hook's name, which
/// the rewriter may keep in one fragment for all) is read. A name at an address checked for
/// one of the two sites before is not checked again (a function's sites share its name, and
/// its entry and exit hooks take turns with two slot names).
struct InTable {
    pool: core::ops::Range<usize>,
    pool_ok: bool,
    /// The last two addresses checked, for each of the four names.
    seen: [[usize; 2]; 4],
    all: bool,
}

impl InTable {
    fn new() -> InTable {
        InTable {
            pool: 0..0,
            pool_ok: false,
            seen: [[usize::MAX; 2]; 4],
            all: true,
        }
    }

    /// Takes the name pool of the fragment the next sites come from.
    fn set_pool(&mut self, table: &[u8], pool: core::ops::Range<usize>) {
        if pool != self.pool {
            let bytes = &table[pool.clone()];
            self.pool_ok = bytes.last() == Some(&0) && core::str::from_utf8(bytes).is_ok();
            self.pool = pool;
        }
    }

    /// Checks the names of `site`: each one starts in its fragment's pool at a character's
    /// first byte (so it runs to a NUL inside the pool), or is a string elsewhere in the table.
    #[inline(always)]
    fn check(&mut self, table: &[u8], site: &format::SiteCore) {
        for (i, at) in site.strings.into_iter().enumerate() {
            let seen = &mut self.seen[i];
            if at == 0 || seen.contains(&at) {
                continue;
            }
            *seen = [at, seen[0]];
            let in_pool = self.pool_ok
                && self.pool.contains(&at)
                && table.get(at).is_some_and(|&b| (b as i8) >= -0x40);
            if !in_pool {
                self.all &= string_at(table, at);
            }
        }
    }
}

/// Whether a NUL-terminated string of valid UTF-8 starts at `at` of `table`.
fn string_at(table: &[u8], at: usize) -> bool {
    let Some(rest) = table.get(at..) else {
        return false;
    };
    rest.iter()
        .position(|&b| b == 0)
        .is_some_and(|n| core::str::from_utf8(&rest[..n]).is_ok())
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
    // Room for a record an entry, never freed (a site may be hit as long as the process runs).
    let room = crate::sys::lasting_room::<SiteRec>(bytes.len() / format::COMPACT_ENTRY_SIZE);
    // The records point at the table's info, made before them: its count of sites (for the
    // profile points) is the room's, an upper bound.
    let info = site::TableInfo::leak(bytes, first_id, room.len());
    let mut reading = Reading {
        bytes,
        first_id,
        info,
        in_table: InTable::new(),
        latency: crate::latency::wanted(),
        // What a hook's hit records depends on its kind alone.
        hook_records: core::array::from_fn(|k| {
            let kind = format::Kind::from_u8(k as u8);
            let rec = kind.and_then(|k| format::trace::record_kind(k, "", ""));
            rec.map_or(0, |r| r as u8)
        }),
        room,
        len: 0,
    };
    let mut sites = format::sites(bytes, start as u64);
    while let Some(run) = sites.next_run() {
        let run = match run {
            Ok(run) => run,
            Err(e) => {
                reading.refuse(e);
                break;
            }
        };
        reading.in_table.set_pool(bytes, run.pool());
        // A loop for each layout: the compact one's reads test no layout.
        let whole = match run.compact() {
            Some(compact) => (0..run.len()).all(|i| reading.take(compact.core(i))),
            None => (0..run.len()).all(|i| reading.take(run.core(i))),
        };
        if !whole {
            break;
        }
    }
    let Reading {
        room,
        len,
        in_table,
        ..
    } = reading;
    // Ids are never reused, even after an object is unloaded.
    NEXT_ID.store(first_id + len as u32, Ordering::Relaxed);
    // SAFETY: the first `len` records were written above, and the room is never freed.
    let recs: &'static [SiteRec] =
        unsafe { core::slice::from_raw_parts(room.as_ptr().cast(), len) };
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
    let lookup = Box::leak(Box::new(site::Lookup::of(recs)));
    let table = site::Table {
        info,
        sites: recs,
        lookup,
        self_contained: in_table.all,
    };
    reg.tables.push(table);
    site::publish(&reg.tables);
    crate::recorder::describe_table(reg.tables.last().expect("just pushed"));
}

/// What [`read_table`] keeps while it reads a table's entries.
struct Reading {
    bytes: &'static [u8],
    first_id: u32,
    info: &'static site::TableInfo,
    in_table: InTable,
    latency: bool,
    hook_records: [u8; 8],
    /// Room for a record an entry; the first `len` are written.
    room: &'static mut [core::mem::MaybeUninit<SiteRec>],
    len: usize,
}

impl Reading {
    /// Takes the next entry's site: its record written, its address in the lookup, its names
    /// checked. False (and a note) for an entry that cannot be read: the sites before it are
    /// kept.
    #[inline(always)]
    fn take(&mut self, site: Result<format::SiteCore, format::TableError>) -> bool {
        let site = match site {
            Ok(site) => site,
            Err(e) => {
                self.refuse(e);
                return false;
            }
        };
        self.in_table.check(self.bytes, &site);
        // Every entry takes at least COMPACT_ENTRY_SIZE bytes of the table: the room has one
        // for each.
        self.room[self.len].write(site_rec(
            self.first_id + self.len as u32,
            self.info,
            &site,
            self.latency,
            &self.hook_records,
        ));
        self.len += 1;
        true
    }

    /// Says why the rest of the table is not read: a version this runtime does not know (a
    /// newer bootprof-link wrote it), or a malformed entry.
    #[cold]
    fn refuse(&self, e: format::TableError) {
        let start = self.bytes.as_ptr() as usize;
        note(&format!("ignoring the site table at {start:#x}: {e}"));
    }
}

/// The record of `site`, the `id`th site, of the table `table` (`hook_records`: the record kind
/// of a hook's hits, by its kind).
#[inline]
fn site_rec(
    id: u32,
    table: &'static site::TableInfo,
    site: &format::SiteCore,
    latency: bool,
    hook_records: &[u8; 8],
) -> SiteRec {
    let bytes = table.bytes;
    // A probe's record kind and a site's latency role depend on its names: only then are they
    // read (a hook's record kind is its kind's).
    let names = || site::Names::of_entry(bytes, site.entry, site.layout);
    let named = (!site.kind.is_hook() || latency).then(names);
    let rec_kind = match &named {
        Some(n) => format::trace::record_kind(site.kind, n.provider, n.name).map_or(0, |k| k as u8),
        None => hook_records[site.kind as usize],
    };
    let latency = match &named {
        Some(n) if latency => {
            crate::latency::role(|p| site::names_match(p, site.kind, n), rec_kind)
        }
        _ => 0,
    };
    SiteRec {
        addr: site.site,
        target: site.target,
        table,
        handlers: AtomicU64::new(0),
        hits: AtomicU64::new(0),
        id,
        entry: site.entry as u32,
        func_offset: site.func_offset,
        kind: site.kind,
        form: site.form,
        state: AtomicU8::new(DISABLED),
        rec_kind,
        latency,
        stacktrace: core::sync::atomic::AtomicBool::new(false),
        has_function: site.strings[2] != 0,
        nops: site.nops,
        layout: site.layout,
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
    let Some(at) = (reg.tables.iter()).position(|t| t.info.bytes.as_ptr() as u64 == start) else {
        return 0;
    };
    let gone = reg.tables[at].sites;
    let all = Chosen::of(core::iter::once(gone));
    let (trap, call) = (
        all.only(|s| s.state() == TRAP),
        all.only(|s| s.state() == CALL),
    );
    if disable_trap(&trap)
        .and_then(|()| switch_call(&call, false))
        .is_err()
    {
        note("cannot restore the sites of an object being unloaded");
    }
    reg.tables.remove(at);
    site::publish(&reg.tables);
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
    let all = Chosen::of(reg.tables.iter().map(|t| t.sites));
    // Every site, none left out: only their states to test (`*` at a large program's start).
    let chosen = if matches!(pattern, Pattern::Any) && (to == DISABLED || reg.notrace.is_empty()) {
        all.only(|s| s.state() != target_state(s, to))
    } else {
        all.only(|s| {
            s.matches(&pattern)
                && (to == DISABLED || !reg.notrace.iter().any(|n| s.matches(n)))
                && s.state() != target_state(s, to)
        })
    };
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
        .sites()
        .filter(|s| s.state() == DISABLED && patterns.iter().any(|p| s.matches(p)))
        .filter(|s| !notrace.iter().chain(&reg.notrace).any(|n| s.matches(n)))
        .collect();
    let hits = (chosen.iter())
        .map(|s| s.hits.load(core::sync::atomic::Ordering::Relaxed))
        .collect();
    switch_locked(
        Chosen::of(chosen.iter().map(|s| core::slice::from_ref(*s))),
        mode as u8,
    )?;
    Ok((chosen, hits))
}

/// Disables those of `sites` that are still registered and enabled (the program may have
/// disabled some itself meanwhile, or unloaded their object); returns how many it disabled.
pub(crate) fn restore(sites: &[&'static SiteRec]) -> Result<usize, Error> {
    let reg = lock();
    let chosen = Chosen::of(sites.iter().map(|s| core::slice::from_ref(*s)))
        .only(|s| s.state() != DISABLED && reg.holds(s));
    switch_locked(chosen, DISABLED)
}

/// Whether the code at `site` is exactly its NOP, as the file holds it.
pub(crate) fn holds_nop(site: &SiteRec) -> bool {
    let len = site.site_len();
    // SAFETY: a registered site is `len` bytes of the loaded object's code, readable while the
    // object is loaded.
    let now = unsafe { core::slice::from_raw_parts(site.addr as *const u8, len) };
    now == &site.nop()[..len]
}

/// The sites of a batch, as runs of adjacent records of one table: every site of a table is
/// one run, where a vector of references to each would cost more pages than the writes.
#[derive(Default)]
struct Chosen {
    runs: Vec<&'static [SiteRec]>,
    len: usize,
}

impl Chosen {
    /// The sites of `runs`, in their order.
    fn of(runs: impl Iterator<Item = &'static [SiteRec]>) -> Chosen {
        let mut chosen = Chosen::default();
        for run in runs {
            chosen.push(run);
        }
        chosen
    }

    /// Adds `run` after the others.
    fn push(&mut self, run: &'static [SiteRec]) {
        if !run.is_empty() {
            self.len += run.len();
            self.runs.push(run);
        }
    }

    /// Those of its sites for which `keep` holds, in its order.
    fn only(&self, keep: impl Fn(&SiteRec) -> bool) -> Chosen {
        let mut chosen = Chosen::default();
        for run in &self.runs {
            let mut start = 0;
            for (i, s) in run.iter().enumerate() {
                if !keep(s) {
                    chosen.push(&run[start..i]);
                    start = i + 1;
                }
            }
            chosen.push(&run[start..]);
        }
        chosen
    }

    fn iter(&self) -> impl Iterator<Item = &'static SiteRec> + '_ {
        self.runs.iter().flat_map(|r| r.iter())
    }

    /// Calls `f` with each of its sites, in its order: a loop per run, which the batches'
    /// walks over every site of a large program take (`iter`'s flattening costs each site a
    /// test of which run it is in).
    #[inline(always)]
    fn each(&self, mut f: impl FnMut(&'static SiteRec)) {
        for run in &self.runs {
            for s in run.iter() {
                f(s);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets the state of each of its sites to `state`.
    fn set(&self, state: u8) {
        self.each(|s| s.state.store(state, Ordering::Release));
    }

    /// The batch that writes `part` of each site's `bytes`.
    fn writing(&self, bytes: Bytes, part: Part) -> Batch<'_> {
        Batch {
            sites: self,
            bytes,
            part,
        }
    }
}

/// What a [`Batch`] writes at each site: an int3, its NOP, or its enabled call-mode bytes
/// ([`call_bytes`]; checked reachable before any batch of them is written).
#[derive(Clone, Copy)]
enum Bytes {
    Int3,
    Nop,
    Call,
}

/// Which of a site's bytes a [`Batch`] writes.
#[derive(Clone, Copy)]
enum Part {
    /// Its first byte.
    First,
    /// Its bytes after the first.
    Rest,
    /// All of them.
    Whole,
}

/// The writes of one step of a batch: `part` of `bytes` at each site of `sites`. What to
/// write is data, not a closure: one instance of the writer serves every step.
struct Batch<'a> {
    sites: &'a Chosen,
    bytes: Bytes,
    part: Part,
}

impl text::Writes for Batch<'_> {
    fn each(&self, mut f: impl FnMut(u64, &[u8])) {
        self.sites.each(|s| {
            let bytes = match self.bytes {
                Bytes::Int3 => [code::INT3; MAX_SITE_LEN],
                Bytes::Nop => s.nop(),
                Bytes::Call => call_bytes(s).unwrap_or_else(|| s.nop()),
            };
            let (at, range) = self.part.of(s);
            f(at, &bytes[range]);
        });
    }

    fn spans(&self, mut f: impl FnMut(u64, usize)) {
        self.sites.each(|s| {
            let (at, range) = self.part.of(s);
            f(at, range.len());
        });
    }
}

impl Part {
    /// Where this part of `site` starts, and which of its bytes it is.
    #[inline]
    fn of(self, site: &SiteRec) -> (u64, core::ops::Range<usize>) {
        match self {
            Part::First => (site.addr, 0..1),
            Part::Rest => (site.addr + 1, 1..site.site_len()),
            Part::Whole => (site.addr, 0..site.site_len()),
        }
    }
}

/// Moves every site of `chosen` to the state `to` in one batch (see [`set_state`]); the
/// registry's lock is held by the caller. Returns how many sites changed.
fn switch_locked(chosen: Chosen, to: u8) -> Result<usize, Error> {
    if chosen.is_empty() {
        return Ok(0);
    }
    if to != DISABLED {
        crate::trap::install();
    }
    // The guards apart, and the other sites by the mode they leave: one pass finds whether
    // there are any guards and whether every site is disabled (a batch of every site of a
    // large program, at its start, has neither to sort out).
    let (mut any_guard, mut all_disabled) = (false, true);
    chosen.each(|s| {
        any_guard |= s.is_guard();
        all_disabled &= s.state() == DISABLED;
    });
    let (guards, chosen) = match any_guard {
        false => (Chosen::default(), chosen),
        true => (
            chosen.only(SiteRec::is_guard),
            chosen.only(|s| !s.is_guard()),
        ),
    };
    let (from_trap, from_call) = match to {
        CALL | TRAP if all_disabled => Default::default(),
        _ => (
            chosen.only(|s| s.state() == TRAP),
            chosen.only(|s| s.state() == CALL),
        ),
    };
    if to == DISABLED {
        switch_call(&guards, false)?;
    }
    // Leave the old mode first: trap sites back to NOP, call sites through the protocol.
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
    Ok(chosen.len + guards.len)
}

/// Whether a site's NOP is two instructions: an is-enabled tail site's `xor eax, eax` and `ret`,
/// or, in a table written before version 3, an is-enabled call site's `xor eax, eax` and a NOP.
/// A thread stopped between them resumes at the second, inside the bytes after the first: the
/// bridge may not change those while another thread runs.
fn two_part(site: &SiteRec) -> bool {
    code::disabled_is_two_instructions(site.kind, site.form, site.nops)
}

fn enable_trap(sites: &Chosen) -> Result<(), Error> {
    sites.set(TRAP);
    // SAFETY: an int3 over the first byte of a NOP is a single-byte store of a valid instruction.
    if let Err(e) = unsafe { text::write_batch(&sites.writing(Bytes::Int3, Part::First)) } {
        sites.set(DISABLED);
        return Err(Error::Text(e));
    }
    text::sync_cores();
    Ok(())
}

fn disable_trap(sites: &Chosen) -> Result<(), Error> {
    // SAFETY: puts back the NOP's first byte; a thread that trapped before is rewound by the
    // handler to re-execute the NOP.
    unsafe { text::write_batch(&sites.writing(Bytes::Nop, Part::First)) }.map_err(Error::Text)?;
    sites.set(DISABLED);
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

/// Moves `sites` from disabled to call mode (`enable`) or back: in one pass while the process
/// has one thread ([`switch_call_alone`]), else with the int3 bridge ([`bridge`]). A thread that
/// meets the bridge's int3 is handled by the SIGTRAP handler as the old or new instruction, by
/// the transient state. Enabled while other threads run, [`two_part`] sites get trap mode's int3
/// instead: the bridge may not rewrite their bytes after the first.
fn switch_call(sites: &Chosen, enable: bool) -> Result<(), Error> {
    if sites.is_empty() {
        return Ok(());
    }
    // Every site's new bytes are checked before any is written; they are made again for each
    // pass (cheaper than keeping them).
    if enable {
        let mut unreachable = None;
        sites.each(|s| {
            if unreachable.is_none() && call_bytes(s).is_none() {
                unreachable = Some(s.addr);
            }
        });
        if let Some(addr) = unreachable {
            return Err(Error::Unreachable(addr));
        }
    }
    let new = if enable { Bytes::Call } else { Bytes::Nop };
    let (transient, done) = if enable {
        (ENABLING_CALL, CALL)
    } else {
        (DISABLING_CALL, DISABLED)
    };
    if let Some(r) = text::alone(|| switch_call_alone(sites, new, done)) {
        return r;
    }
    if enable && sites.iter().any(two_part) {
        // Other threads run: the two-part sites get trap mode's int3, the others the bridge;
        // if the bridge fails, the int3s are taken back (no site changed).
        let two = sites.only(two_part);
        enable_trap(&two)?;
        let rest = sites.only(|s| !two_part(s));
        return bridge(&rest, new, (transient, done)).inspect_err(|_| {
            let _ = disable_trap(&two);
        });
    }
    bridge(sites, new, (transient, done))
}

/// Moves `sites` to their `new` bytes with the int3 bridge, each in the state `transient`
/// meanwhile and `done` after: int3 on byte 0 -> sync -> bytes 1.. -> sync -> byte 0 -> sync.
fn bridge(sites: &Chosen, new: Bytes, (transient, done): (u8, u8)) -> Result<(), Error> {
    if sites.is_empty() {
        return Ok(());
    }
    sites.set(transient);
    // SAFETY: an int3 over byte 0, then the rest of the new instruction behind it, then its
    // first byte: at every moment each site decodes as int3 + junk (never executed: the handler
    // resumes elsewhere) or as the complete old or new instruction.
    let step1 = unsafe { text::write_batch(&sites.writing(Bytes::Int3, Part::First)) };
    if let Err(e) = step1 {
        sites.set(if done == CALL { DISABLED } else { CALL });
        return Err(Error::Text(e));
    }
    text::sync_cores();
    // SAFETY: see above; the same pages were writable a moment ago.
    unsafe { text::write_batch(&sites.writing(new, Part::Rest)) }.map_err(Error::Text)?;
    text::sync_cores();
    // SAFETY: see above.
    unsafe { text::write_batch(&sites.writing(new, Part::First)) }.map_err(Error::Text)?;
    text::sync_cores();
    sites.set(done);
    Ok(())
}

/// [`switch_call`] in one pass, for a process of one thread with its signals blocked
/// ([`text::alone`]): nothing runs a site while its bytes change, so each gets its `new` bytes
/// whole, and its state `done` after.
fn switch_call_alone(sites: &Chosen, new: Bytes, done: u8) -> Result<(), Error> {
    // SAFETY: no other thread exists and this one takes no signal until the writes are done:
    // no code runs the sites meanwhile.
    unsafe { text::write_batch_alone(&sites.writing(new, Part::Whole)) }.map_err(Error::Text)?;
    text::sync_cores();
    sites.set(done);
    Ok(())
}

/// Turns the recording of call stacks on (`on`) or off for every site matching `pattern`.
/// Returns how many sites match.
pub(crate) fn set_stacktrace(pattern: &str, on: bool) -> Result<usize, Error> {
    let pattern = Pattern::parse(pattern)?;
    let reg = lock();
    let mut n = 0;
    for s in reg.sites().filter(|s| s.matches(&pattern)) {
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
    for s in reg.sites().filter(|s| s.matches(&pattern)) {
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
    for s in reg.sites() {
        s.handlers.fetch_and(!(1 << slot), Ordering::AcqRel);
    }
    crate::dispatch::set_slot(slot, None);
    reg.handlers[slot] = None;
    true
}
