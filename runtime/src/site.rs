//! Sites: takes the pattern language; hands on what every other module shares about a site: its
//! record ([`SiteRec`]), its state constants, the [`Mode`] an enabled site fires in, its
//! profile-point figures ([`Point`]), the list of registered sites with the notrace and handler
//! patterns (under one lock), and the lookup snapshot the dispatchers read without a lock (an
//! immutable hash table over the sites' addresses, swapped in atomically by [`publish`]).
//!
//! Nothing here writes code or changes a state; the registry does, through these types.

use crate::prelude::*;
use crate::sys::Mutex;
use alloc::collections::BTreeMap;
use bootprof_format::pattern::Pattern;
use bootprof_format::{Form, Kind, MAX_SITE_LEN};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

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

/// One site of a loaded object.
pub struct SiteRec {
    /// Unique, in registration order: the probe id handlers see.
    pub id: u32,
    /// Start of the table the site came from (which loaded object).
    pub table: u64,
    /// Address of the site.
    pub addr: u64,
    /// Kind of site.
    pub kind: Kind,
    /// The instruction it was.
    pub form: Form,
    /// Address of its stub.
    pub target: u64,
    /// Provider (empty for hooks).
    pub provider: &'static str,
    /// Probe name (the hook symbol for hooks).
    pub name: &'static str,
    /// Enclosing function (empty if unknown).
    pub function: &'static str,
    /// Its demangled name (empty if it is not a mangled name).
    pub demangled: &'static str,
    /// Offset in the function.
    pub func_offset: u32,
    /// What patterns match: `provider:name` for probes, the function for hooks.
    pub match_name: &'static str,
    /// NUL-terminated C strings of the names, for the C API.
    pub(crate) c_provider: *const u8,
    pub(crate) c_name: *const u8,
    pub(crate) c_function: *const u8,
    /// Address of the stub's name string (what a stub loads into r11).
    pub(crate) stub_id: u64,
    /// The bytes of the disabled site.
    pub(crate) nop: [u8; MAX_SITE_LEN],
    /// One of the state constants.
    pub(crate) state: AtomicU8,
    /// Bit i set: handler i wants this site.
    pub(crate) handlers: AtomicU64,
    /// Hits since start (in a fork child, when counting, since the fork): see [`SiteRec::count`].
    pub(crate) hits: AtomicU64,
    /// The record a hit makes (`bootprof_format::trace::RecordKind` as a byte), 0 for none.
    pub(crate) rec_kind: u8,
    /// Whether its hits open or close measured intervals (`latency::FROM`, `TO`).
    pub(crate) latency: u8,
    /// Whether a hit's record is followed by its call stack (`BOOTPROF_STACKTRACE`).
    pub(crate) stacktrace: AtomicBool,
    /// Profile-point figures, when this is an ENTER site.
    pub(crate) point: Point,
}

// SAFETY: the raw pointers point into the loaded objects' read-only data, shared by all threads.
unsafe impl Sync for SiteRec {}
// SAFETY: as above.
unsafe impl Send for SiteRec {}

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

    /// Whether `pattern` selects this site: by `provider:name` for probes, by function (symbol or
    /// demangled name) for hooks, and by either for the `BOOTPROF_ENTER()`/`EXIT()` annotations,
    /// whose region is their function.
    pub fn matches(&self, pattern: &Pattern) -> bool {
        bootprof_format::pattern::site_matches(
            pattern,
            self.match_name,
            self.provider,
            self.function,
            self.demangled,
        )
    }

    /// The function's name as the tables printed at exit show it: demangled if it has a
    /// demangled name, else the symbol.
    pub fn function_name(&self) -> &'static str {
        if self.demangled.is_empty() {
            self.function
        } else {
            self.demangled
        }
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

/// Count, total, min and max TSC ticks of one profile point (kept on its ENTER site).
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

/// The lookup snapshot: sites sorted by address, and an open-addressing hash table over the
/// addresses (one probe in the common case, the key and the site's reference inline, so a lookup
/// is one cache miss).
pub(crate) struct Index {
    pub addrs: Vec<u64>,
    pub sites: Vec<&'static SiteRec>,
    /// (address, site); `None` marks an empty slot.
    table: Vec<(u64, Option<&'static SiteRec>)>,
    mask: usize,
    /// Stub name address -> tail sites calling that stub (for call-mode tail sites, which leave
    /// no return address of their own).
    pub tails: BTreeMap<u64, Vec<&'static SiteRec>>,
}

#[inline]
fn slot_of(addr: u64, mask: usize) -> usize {
    (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & mask
}

impl Index {
    fn new(sites: Vec<&'static SiteRec>, tails: BTreeMap<u64, Vec<&'static SiteRec>>) -> Index {
        let addrs: Vec<u64> = sites.iter().map(|s| s.addr).collect();
        let cap = (sites.len() * 2).next_power_of_two().max(16);
        let mask = cap - 1;
        let mut table = vec![(0u64, None); cap];
        for (&a, &site) in addrs.iter().zip(&sites) {
            let mut h = slot_of(a, mask);
            while table[h].1.is_some() {
                h = (h + 1) & mask;
            }
            table[h] = (a, Some(site));
        }
        Index {
            addrs,
            sites,
            table,
            mask,
            tails,
        }
    }

    /// The site at exactly `addr`.
    #[inline]
    pub fn lookup(&self, addr: u64) -> Option<&'static SiteRec> {
        let mut h = slot_of(addr, self.mask);
        loop {
            match self.table[h] {
                (_, None) => return None,
                (a, site) if a == addr => return site,
                _ => h = (h + 1) & self.mask,
            }
        }
    }

    /// The same answer by binary search over the sorted addresses (the benchmark's yardstick).
    pub fn lookup_sorted(&self, addr: u64) -> Option<&'static SiteRec> {
        self.addrs.binary_search(&addr).ok().map(|i| self.sites[i])
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
    bootprof_format::order::sort_by_key(&mut sites, |s| s.addr);
    let mut tails: BTreeMap<u64, Vec<&'static SiteRec>> = BTreeMap::new();
    for s in sites.iter().filter(|s| s.is_tail() && s.stub_id != 0) {
        tails.entry(s.stub_id).or_default().push(s);
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
    /// Its bytes, in the loaded object.
    pub bytes: &'static [u8],
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
        .map(|_| index.addrs[(rand() % n as u64) as usize])
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
    Box::leak(Box::new(SiteRec {
        id,
        table: 0,
        addr,
        kind: Kind::Fentry,
        form: Form::CallRel32,
        target: 0,
        provider: "",
        name: "",
        function: "",
        demangled: "",
        func_offset: 0,
        match_name: "",
        c_provider: core::ptr::null(),
        c_name: core::ptr::null(),
        c_function: core::ptr::null(),
        stub_id: 0,
        nop: [0; MAX_SITE_LEN],
        state: AtomicU8::new(DISABLED),
        handlers: AtomicU64::new(0),
        hits: AtomicU64::new(0),
        rec_kind: 0,
        latency: 0,
        stacktrace: AtomicBool::new(false),
        point: Point::new(),
    }))
}
