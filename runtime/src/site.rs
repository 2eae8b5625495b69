//! Sites: takes the pattern language; hands on what every other module shares about a site: its
//! record ([`SiteRec`]), its state constants, the [`Mode`] an enabled site fires in, its
//! profile-point figures ([`Point`]), the list of registered sites with the notrace and handler
//! patterns (under one lock), and the lookup snapshot the dispatchers read without a lock (the
//! sites sorted by address with a compact hash table of their positions, immutable, swapped in
//! atomically by [`publish`]).
//!
//! Nothing here writes code or changes a state; the registry does, through these types.

use crate::prelude::*;
use crate::sys::Mutex;
use alloc::collections::BTreeMap;
use bootprof_format::pattern::Pattern;
use bootprof_format::{Form, Kind, MAX_SITE_LEN};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

/// Whether `pattern` selects a site of kind `kind` with names `n` (see [`SiteRec::matches`]).
pub(crate) fn names_match(pattern: &Pattern, kind: Kind, n: &Names) -> bool {
    let probe;
    let match_name = if kind.is_hook() {
        n.function
    } else {
        probe = format!("{}:{}", n.provider, n.name);
        probe.as_str()
    };
    bootprof_format::pattern::site_matches(pattern, match_name, n.provider, n.function, n.demangled)
}

/// The name at address `a` of a loaded object's site table: empty for none, `?` when not UTF-8.
pub(crate) fn name_at(a: Option<u64>) -> &'static str {
    let Some(a) = a else {
        return "";
    };
    // SAFETY: the rewriter points every name at a NUL-terminated string of the object's
    // read-only data, which lives as long as the table (and its sites).
    let c = unsafe { core::ffi::CStr::from_ptr(a as *const core::ffi::c_char) };
    c.to_str().unwrap_or("?")
}

/// How an enabled site fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// `int3` over the first byte; the SIGTRAP handler dispatches.
    Trap = 1,
    /// The call to the site's stub is put back; the stub enters the dispatcher.
    Call = 2,
}

pub(crate) const DISABLED: u8 = 0;
pub(crate) const TRAP: u8 = 1;
pub(crate) const CALL: u8 = 2;
/// `int3` is on the first byte on the way from disabled to call mode.
pub(crate) const ENABLING_CALL: u8 = 3;
/// `int3` is on the first byte on the way from call mode to disabled.
pub(crate) const DISABLING_CALL: u8 = 4;

/// One site of a loaded object: what the hit path and enabling read, in one cache line. Its
/// names, its stub's id, its disabled bytes and its profile point are found when asked for: the
/// names from its entry in the table ([`SiteRec::names`]), the point in its table's
/// [`TableInfo::points`]; reading a table of 21,000 sites then writes 1.3 MB, not 4.4 MB.
#[repr(C, align(64))]
pub struct SiteRec {
    /// Address of the site.
    pub addr: u64,
    /// Address of its stub.
    pub target: u64,
    /// The table the site came from (which loaded object).
    pub(crate) table: &'static TableInfo,
    /// Bit i set: handler i wants this site.
    pub(crate) handlers: AtomicU64,
    /// Hits since start (in a fork child, when counting, since the fork): see [`SiteRec::count`].
    pub(crate) hits: AtomicU64,
    /// Unique, in registration order: the probe id handlers see.
    pub id: u32,
    /// Offset of its entry in the table (where its names are found).
    pub(crate) entry: u32,
    /// Offset in the function.
    pub func_offset: u32,
    /// Kind of site.
    pub kind: Kind,
    /// The instruction it was.
    pub form: Form,
    /// One of the state constants.
    pub(crate) state: AtomicU8,
    /// The record a hit makes (`bootprof_format::trace::RecordKind` as a byte), 0 for none.
    pub(crate) rec_kind: u8,
    /// Whether its hits open or close measured intervals (`latency::FROM`, `TO`).
    pub(crate) latency: u8,
    /// Whether a hit's record is followed by its call stack (`BOOTPROF_STACKTRACE`).
    pub(crate) stacktrace: AtomicBool,
    /// Whether the table names its enclosing function.
    pub(crate) has_function: bool,
}

const _: () = assert!(core::mem::size_of::<SiteRec>() == 64);

/// A site's names, read from its table's entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Names {
    /// Provider (empty for hooks).
    pub provider: &'static str,
    /// Probe name (the hook symbol for hooks).
    pub name: &'static str,
    /// Enclosing function (empty if unknown).
    pub function: &'static str,
    /// Its demangled name (empty if it is not a mangled name).
    pub demangled: &'static str,
}

/// A table read into the registry, as its sites refer to it: its bytes (where their names are)
/// and their profile points.
pub struct TableInfo {
    /// Its bytes, in the loaded object.
    pub(crate) bytes: &'static [u8],
    /// Id of its first site (the others follow).
    pub(crate) first_id: u32,
    /// Its sites' profile points, by id from `first_id`: null until profile points are counted
    /// ([`want_points`]), then never freed.
    points: AtomicPtr<Point>,
    /// How many sites the points are for.
    len: usize,
}

impl TableInfo {
    /// A table of `len` sites, the first with id `first_id`, leaked: its sites point at it.
    pub(crate) fn leak(bytes: &'static [u8], first_id: u32, len: usize) -> &'static TableInfo {
        let info = Box::leak(Box::new(TableInfo {
            bytes,
            first_id,
            points: AtomicPtr::new(core::ptr::null_mut()),
            len,
        }));
        if POINTS_WANTED.load(Ordering::Acquire) {
            info.make_points();
        }
        info
    }

    /// Gives the table its profile points, if it has none yet (under the registry's lock).
    fn make_points(&self) {
        if self.points.load(Ordering::Acquire).is_null() && self.len > 0 {
            let points: Box<[Point]> = (0..self.len).map(|_| Point::new()).collect();
            let p = Box::leak(points).as_mut_ptr();
            self.points.store(p, Ordering::Release);
        }
    }
}

/// Whether the tables' profile points are wanted (set once, never cleared).
static POINTS_WANTED: AtomicBool = AtomicBool::new(false);

/// Gives every table read so far, and every one read from now on, its sites' profile points:
/// called before profile points are first counted. Takes the registry's lock.
pub(crate) fn want_points() {
    if POINTS_WANTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let reg = REGISTRY.lock();
    for t in &reg.tables {
        t.info.make_points();
    }
}

impl SiteRec {
    /// The current state.
    pub fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// The mode the site is enabled in (a site on its way to call mode counts as enabled).
    pub fn mode(&self) -> Option<Mode> {
        match self.state() {
            TRAP => Some(Mode::Trap),
            CALL | ENABLING_CALL => Some(Mode::Call),
            _ => None,
        }
    }

    /// Length of the site in bytes.
    pub fn site_len(&self) -> usize {
        self.form.len()
    }

    /// The address of the name field `field` of its entry points at (`format::field::NAME`...).
    #[inline]
    fn name_addr(&self, field: usize) -> Option<u64> {
        let bytes = self.table.bytes;
        bootprof_format::name_at(bytes, bytes.as_ptr() as u64, self.entry as usize, field)
    }

    /// The name field `field` of its entry points at: empty for none, `?` when not UTF-8.
    fn name(&self, field: usize) -> &'static str {
        name_at(self.name_addr(field))
    }

    /// The name field `field` of its entry points at, as a C string (empty for none).
    fn c_name_of(&self, field: usize) -> *const u8 {
        self.name_addr(field)
            .map_or(c"".as_ptr().cast(), |a| a as *const u8)
    }

    /// Its names, read from its entry.
    pub fn names(&self) -> Names {
        use bootprof_format::field;
        Names {
            provider: self.name(field::PROVIDER),
            name: self.name(field::NAME),
            function: self.name(field::FUNCTION),
            demangled: self.name(field::DEMANGLED),
        }
    }

    /// Provider (empty for hooks).
    pub fn provider(&self) -> &'static str {
        self.name(bootprof_format::field::PROVIDER)
    }

    /// Probe name (the hook symbol for hooks).
    pub fn probe_name(&self) -> &'static str {
        self.name(bootprof_format::field::NAME)
    }

    /// Enclosing function (empty if unknown).
    pub fn function(&self) -> &'static str {
        self.name(bootprof_format::field::FUNCTION)
    }

    /// The provider, name and function as NUL-terminated C strings, for the C API.
    pub(crate) fn c_names(&self) -> [*const u8; 3] {
        use bootprof_format::field;
        [
            self.c_name_of(field::PROVIDER),
            self.c_name_of(field::NAME),
            self.c_name_of(field::FUNCTION),
        ]
    }

    /// What tells its function from others without reading a name: the function's address
    /// (the site's less its offset in it), 0 when the table names no function.
    #[inline]
    pub(crate) fn function_key(&self) -> u64 {
        if self.has_function {
            self.addr.wrapping_sub(u64::from(self.func_offset))
        } else {
            0
        }
    }

    /// What patterns match for a probe: `provider:name` (for a hook, its function).
    pub fn match_name(&self) -> String {
        let n = self.names();
        if self.kind.is_hook() {
            n.function.into()
        } else {
            format!("{}:{}", n.provider, n.name)
        }
    }

    /// Whether `pattern` selects this site: by `provider:name` for probes, by function (symbol or
    /// demangled name) for hooks, and by either for the `BOOTPROF_ENTER()`/`EXIT()` annotations,
    /// whose region is their function. `*` matches without a name read.
    pub fn matches(&self, pattern: &Pattern) -> bool {
        if matches!(pattern, Pattern::Any) {
            return true;
        }
        names_match(pattern, self.kind, &self.names())
    }

    /// The function's name as the tables printed at exit show it: demangled if it has a
    /// demangled name, else the symbol.
    pub fn function_name(&self) -> &'static str {
        let n = self.names();
        if n.demangled.is_empty() {
            n.function
        } else {
            n.demangled
        }
    }

    /// The bytes of the disabled site.
    pub(crate) fn nop(&self) -> [u8; MAX_SITE_LEN] {
        bootprof_format::disabled_bytes(self.kind, self.form)
    }

    /// Address of its stub's name string (what a stub loads into r11), 0 for none: the stub
    /// starts `lea rel32(%rip), %r11` (`code::LEA_R11`). A guard's target is the program's own
    /// code, not a stub.
    pub(crate) fn stub_id(&self) -> u64 {
        use bootprof_format::code;
        if self.target == 0 || self.form == Form::Guard || self.table.bytes.is_empty() {
            return 0;
        }
        // SAFETY: the target is the stub the rewriter generated, 13 readable bytes of code.
        let lea =
            unsafe { core::ptr::read_unaligned(self.target as *const [u8; code::LEA_R11_LEN]) };
        code::stub_id(self.target, &lea).unwrap_or(0)
    }

    /// Its profile point, once profile points are counted ([`want_points`]).
    #[inline]
    pub(crate) fn point(&self) -> Option<&'static Point> {
        let points = self.table.points.load(Ordering::Acquire);
        let i = self.id.wrapping_sub(self.table.first_id) as usize;
        if points.is_null() || i >= self.table.len {
            return None;
        }
        // SAFETY: `points` holds `len` points, never freed once published.
        Some(unsafe { &*points.add(i) })
    }

    /// Whether a hit's record is followed by its call stack.
    #[inline]
    pub fn stacktrace(&self) -> bool {
        self.stacktrace.load(Ordering::Relaxed)
    }

    /// Whether the site runs with no frame of its own, its function's return address on top of
    /// the stack: an `__fentry__` hook (before the prologue) or a tail jump (after the epilogue).
    pub fn return_address_on_top(&self) -> bool {
        self.kind == Kind::Fentry || self.is_tail()
    }

    /// Whether the site is a tail jump.
    pub fn is_tail(&self) -> bool {
        self.form.is_tail()
    }

    /// Whether the site is a guard: a NOP that, enabled, jumps to out-of-line code.
    pub fn is_guard(&self) -> bool {
        self.form == Form::Guard
    }

    /// Counts a hit: `exactly` ([`COUNTS_EXACTLY`], `BOOTPROF_COUNT=1`) with a locked add, exact
    /// however many threads hit the site at once, for a locked instruction per hit (and the
    /// cache line going from core to core when threads hit one site together); otherwise with a
    /// relaxed load and a store, no locked instruction: concurrent hits of one site may lose
    /// counts (the counter is then a cheap estimate, as `bootprof_hits()` and `BOOTPROF_STATS`
    /// report it).
    #[inline]
    pub(crate) fn count(&self, exactly: bool) {
        if exactly {
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.hits
                .store(self.hits.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }
}

/// What a hit does besides running its handlers, in one word the hit path reads once (so that a
/// hit with neither costs one load and one test for both, and a hit that is only recorded one
/// load and one comparison): [`RECORDS`], [`COUNTS_EXACTLY`], [`COUNTS_FOR_ATTACH`], and how
/// records are made, [`GRAPH`] and [`FILTERS`].
static HIT_PATH: AtomicU8 = AtomicU8::new(0);
/// Bit of [`hit_path`]: the recorder is on.
pub(crate) const RECORDS: u8 = 1;
/// Bit of [`hit_path`]: hits are counted exactly (`BOOTPROF_COUNT=1`); set before the first site
/// registers, never cleared.
pub(crate) const COUNTS_EXACTLY: u8 = 2;
/// Bit of [`hit_path`]: hits are counted exactly for an attach that counts (`bootprof attach
/// --count`), while one is attached; unlike [`COUNTS_EXACTLY`] the process does not count on its
/// own (it writes no counts at exit).
pub(crate) const COUNTS_FOR_ATTACH: u8 = 4;
/// Bit of [`hit_path`]: recorded `mcount` and `__fentry__` hits hook their function's return
/// (`graph`), whose EXIT is recorded too.
pub(crate) const GRAPH: u8 = 8;
/// Bit of [`hit_path`]: a call filter is set (`filter`): calls' records go through it.
pub(crate) const FILTERS: u8 = 16;
/// Bit of [`hit_path`]: recorded ENTER/EXIT pairs are accounted as profile points
/// (`recorder::count_points`); set once, never cleared.
pub(crate) const POINTS: u8 = 32;
/// The bits of [`hit_path`] that say whether a hit does anything but count itself.
pub(crate) const ACTS: u8 = RECORDS | COUNTS_EXACTLY | COUNTS_FOR_ATTACH;

/// What a hit does besides running its handlers (see [`HIT_PATH`]).
#[inline]
pub(crate) fn hit_path() -> u8 {
    HIT_PATH.load(Ordering::Relaxed)
}

/// Turns `bit` of [`hit_path`] on or off; the word as it was.
pub(crate) fn set_hit_path(bit: u8, on: bool) -> u8 {
    if on {
        HIT_PATH.fetch_or(bit, Ordering::Release)
    } else {
        HIT_PATH.fetch_and(!bit, Ordering::Release)
    }
}

/// Whether hits are counted exactly (`BOOTPROF_COUNT=1`).
pub(crate) fn counting() -> bool {
    hit_path() & COUNTS_EXACTLY != 0
}

/// Count, total, min and max TSC ticks of one profile point (kept for its ENTER site, in its
/// table's [`TableInfo`]).
#[derive(Default)]
pub struct Point {
    pub(crate) count: AtomicU64,
    pub(crate) total: AtomicU64,
    pub(crate) min: AtomicU64,
    pub(crate) max: AtomicU64,
}

impl Point {
    pub(crate) const fn new() -> Point {
        Point {
            count: AtomicU64::new(0),
            total: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
        }
    }
}

/// The lookup snapshot: the sites sorted by address, and an open-addressing hash table of their
/// positions (a `u32` a slot, half the slots empty or more: 8 to 16 bytes a site, where a table
/// of addresses and references took 64). A lookup reads one slot, then the site it names, whose
/// address says whether it is the one (the caller reads that site's cache line next anyway).
pub(crate) struct Index {
    pub sites: Vec<&'static SiteRec>,
    /// Position in `sites` plus one of the site hashed to each slot; 0 marks an empty slot.
    slots: Vec<u32>,
    mask: usize,
    /// Stub name address -> tail sites calling that stub (for call-mode tail sites, which leave
    /// no return address of their own).
    pub tails: BTreeMap<u64, Vec<&'static SiteRec>>,
}

#[inline(always)]
fn slot_of(addr: u64, mask: usize) -> usize {
    (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & mask
}

impl Index {
    fn new(sites: Vec<&'static SiteRec>, tails: BTreeMap<u64, Vec<&'static SiteRec>>) -> Index {
        let cap = (sites.len() * 2).next_power_of_two().max(16);
        let mask = cap - 1;
        let mut slots = vec![0u32; cap];
        for (i, site) in sites.iter().enumerate() {
            let mut h = slot_of(site.addr, mask);
            while slots[h] != 0 {
                h = (h + 1) & mask;
            }
            slots[h] = i as u32 + 1;
        }
        Index {
            sites,
            slots,
            mask,
            tails,
        }
    }

    /// The site at exactly `addr`.
    #[inline(always)]
    pub fn lookup(&self, addr: u64) -> Option<&'static SiteRec> {
        let mut h = slot_of(addr, self.mask);
        loop {
            // SAFETY: `h <= mask`, and `slots` has `mask + 1` entries; a slot holds 0 or the
            // position plus one of a site in `sites`.
            let i = unsafe { *self.slots.get_unchecked(h) } as usize;
            if i == 0 {
                return None;
            }
            // SAFETY: as above.
            let site = unsafe { *self.sites.get_unchecked(i - 1) };
            if site.addr == addr {
                return Some(site);
            }
            h = (h + 1) & self.mask;
        }
    }

    /// The same answer by binary search over the sorted sites (the benchmark's yardstick).
    pub fn lookup_sorted(&self, addr: u64) -> Option<&'static SiteRec> {
        let i = self.sites.binary_search_by_key(&addr, |s| s.addr).ok()?;
        Some(self.sites[i])
    }
}

static INDEX: AtomicPtr<Index> = AtomicPtr::new(core::ptr::null_mut());

/// The current snapshot (empty before the first registration).
pub(crate) fn index() -> Option<&'static Index> {
    // SAFETY: snapshots are leaked, never freed, once published.
    unsafe { INDEX.load(Ordering::Acquire).as_ref() }
}

/// The site at exactly `pc` in the current snapshot.
#[inline]
pub(crate) fn lookup(pc: u64) -> Option<&'static SiteRec> {
    index().and_then(|i| i.lookup(pc))
}

/// Builds and publishes a new snapshot of `sites`.
pub(crate) fn publish(sites: &[&'static SiteRec]) {
    let mut sites = sites.to_vec();
    // The tables' sites come in address order, as a rule (each fragment is sorted, and the
    // linker lays fragments out in the order of their text sections): sorting is then skipped.
    if !sites.windows(2).all(|w| w[0].addr < w[1].addr) {
        bootprof_format::order::sort_by_key(&mut sites, |s| s.addr);
    }
    let mut tails: BTreeMap<u64, Vec<&'static SiteRec>> = BTreeMap::new();
    for s in sites.iter().filter(|s| s.form.is_tail()) {
        let id = s.stub_id();
        if id != 0 {
            tails.entry(id).or_default().push(s);
        }
    }
    let index = Box::into_raw(Box::new(Index::new(sites, tails)));
    // The old snapshot may still be read by a signal handler: it is leaked, not freed.
    INDEX.store(index, Ordering::Release);
}

/// A registered handler, as the registry keeps it (the hit path reads `dispatch`'s slots).
#[derive(Clone)]
pub(crate) struct Handler {
    pub pattern: Pattern,
}

/// Maximum number of handlers at once (one bit each in a site's mask).
pub const MAX_HANDLERS: usize = 64;

/// The registered sites (in registration order), the notrace patterns and the handlers'
/// patterns: what enable, disable and the dumps read and change under [`lock`].
pub(crate) struct Registry {
    pub sites: Vec<&'static SiteRec>,
    /// The tables read into `sites`, in the order they were read (an unloaded object's table
    /// leaves with its sites).
    pub tables: Vec<Table>,
    pub notrace: Vec<Pattern>,
    pub handlers: Vec<Option<Handler>>,
    /// Tables registered and not read yet, `[start, stop)` (see [`defer`]).
    pending: [(usize, usize); PENDING],
    pending_len: usize,
    /// What reads a table into `sites` (the registry's; this module is below it).
    reader: Option<TableReader>,
}

/// A table read into the registry: what a lane is told of its sites.
pub(crate) struct Table {
    /// Its bytes and profile points.
    pub info: &'static TableInfo,
    /// Its sites, in table order (their ids follow each other from the first's).
    pub sites: &'static [SiteRec],
    /// Whether every name of its sites lies in the table as valid UTF-8, NUL-terminated: a copy
    /// of the table describes them (`lane::Meta::Table`), else each site is described.
    pub self_contained: bool,
}

/// Reads the table `[start, stop)` into the registry.
pub(crate) type TableReader = fn(&mut Registry, usize, usize);

/// Tables kept unread at most; one more is read at once.
const PENDING: usize = 32;

pub(crate) static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    sites: Vec::new(),
    tables: Vec::new(),
    notrace: Vec::new(),
    handlers: Vec::new(),
    pending: [(0, 0); PENDING],
    pending_len: 0,
    reader: None,
});

/// Keeps the table `[start, stop)` to be read by `reader` the first time the registry is
/// locked: a program that nobody enables a site of, records or attaches to never reads its
/// tables (start-up costs what it cost without the runtime, nearly), and one that does reads
/// them all before anything looks at them.
pub(crate) fn defer(start: usize, stop: usize, reader: TableReader) {
    let mut reg = REGISTRY.lock();
    reg.reader = Some(reader);
    if reg.pending_len == PENDING {
        read_pending(&mut reg);
    }
    let n = reg.pending_len;
    reg.pending[n] = (start, stop);
    reg.pending_len = n + 1;
}

/// Forgets the table starting at `start` if it is still kept unread by [`defer`] (an object
/// unloaded, or the process ending, before anything needed its sites); false if it is not.
pub(crate) fn forget_pending(start: usize) -> bool {
    let mut reg = REGISTRY.lock();
    let n = reg.pending_len;
    let Some(i) = reg.pending[..n].iter().position(|&(s, _)| s == start) else {
        return false;
    };
    reg.pending.copy_within(i + 1..n, i);
    reg.pending_len = n - 1;
    true
}

/// Reads every table kept by [`defer`], in the order they came.
fn read_pending(reg: &mut Registry) {
    let (pending, n) = (reg.pending, reg.pending_len);
    reg.pending_len = 0;
    if let Some(read) = reg.reader {
        for &(start, stop) in &pending[..n] {
            read(reg, start, stop);
        }
    }
}

/// The registry, locked, every table registered so far read into it. (Whatever uses the sites
/// comes here first, before any hit: the fork handler that hits need is installed now.)
pub(crate) fn lock() -> crate::sys::MutexGuard<'static, Registry> {
    crate::thread::install_fork_handler();
    let mut reg = REGISTRY.lock();
    if reg.pending_len > 0 {
        read_pending(&mut reg);
    }
    reg
}

/// Measures the lookup structure: builds a snapshot of `n` synthetic sites spread like code
/// (addresses 5 to 40 bytes apart) and returns the mean nanoseconds per lookup of the hash table
/// and of a binary search over the same sites, for `lookups` random present addresses.
#[doc(hidden)]
pub fn lookup_benchmark(n: usize, lookups: usize) -> (f64, f64) {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut addr = 0x55_5555_0000u64;
    let sites: Vec<&'static SiteRec> = (0..n)
        .map(|i| {
            addr += 5 + rand() % 36;
            synthetic_site(i as u32, addr)
        })
        .collect();
    let index = Index::new(sites, BTreeMap::new());
    let probes: Vec<u64> = (0..lookups)
        .map(|_| index.sites[(rand() % n as u64) as usize].addr)
        .collect();
    let time = |f: &dyn Fn(u64) -> Option<&'static SiteRec>| {
        let t = crate::sys::Instant::now();
        let mut found = 0u64;
        for &a in &probes {
            found += u64::from(core::hint::black_box(f(a)).is_some());
        }
        assert_eq!(found as usize, lookups);
        t.elapsed_ns() as f64 / lookups as f64
    };
    let hash = time(&|a| index.lookup(a));
    let sorted = time(&|a| index.lookup_sorted(a));
    (hash, sorted)
}

/// A site with no object behind it, for the benchmarks.
#[doc(hidden)]
pub fn synthetic_site(id: u32, addr: u64) -> &'static SiteRec {
    /// The table of a site with no object behind it.
    static NONE: TableInfo = TableInfo {
        bytes: &[],
        first_id: 0,
        points: AtomicPtr::new(core::ptr::null_mut()),
        len: 0,
    };
    Box::leak(Box::new(SiteRec {
        addr,
        target: 0,
        table: &NONE,
        handlers: AtomicU64::new(0),
        hits: AtomicU64::new(0),
        id,
        entry: 0,
        func_offset: 0,
        kind: Kind::Fentry,
        form: Form::CallRel32,
        state: AtomicU8::new(DISABLED),
        rec_kind: 0,
        latency: 0,
        stacktrace: AtomicBool::new(false),
        has_function: false,
    }))
}
