//! Sites: takes the pattern language; hands on what every other module shares about a site: its
//! record ([`SiteRec`]), its state constants, the [`Mode`] an enabled site fires in, its
//! profile-point figures ([`Point`]), the registered tables and their sites with the notrace and
//! handler patterns (under one lock), and the lookup snapshot the dispatchers read without a lock
//! (each table's [`Lookup`], immutable, swapped in atomically by [`publish`]).
//!
//! Nothing here writes code or changes a state; the registry does, through these types.

use crate::prelude::*;
use crate::sys::Mutex;
use bootprof_format::pattern::Pattern;
use bootprof_format::{Form, Kind, Layout, Name as NameOf, Nops, MAX_SITE_LEN};
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
/// `TableInfo::points`; reading a table of 21,000 sites then writes 1.3 MB, not 4.4 MB.
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
    /// Its NOPs, by its table fragment's version.
    pub(crate) nops: Nops,
    /// Its entry's layout, by its table fragment's version (where its demangled name is).
    pub(crate) layout: Layout,
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

impl Names {
    /// The names of the entry at offset `entry` of the loaded table `bytes`, laid out as
    /// `layout`.
    pub(crate) fn of_entry(bytes: &'static [u8], entry: usize, layout: Layout) -> Names {
        let base = bytes.as_ptr() as u64;
        let name = |which| name_at(bootprof_format::name_of(bytes, base, entry, layout, which));
        Names {
            provider: name(NameOf::Provider),
            name: name(NameOf::Probe),
            function: name(NameOf::Function),
            demangled: name(NameOf::Demangled),
        }
    }
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

    /// The address of its name `which`, found from its entry.
    #[inline]
    fn name_addr(&self, which: NameOf) -> Option<u64> {
        let bytes = self.table.bytes;
        let (base, entry) = (bytes.as_ptr() as u64, self.entry as usize);
        bootprof_format::name_of(bytes, base, entry, self.layout, which)
    }

    /// Its name `which`: empty for none, `?` when not UTF-8.
    fn name(&self, which: NameOf) -> &'static str {
        name_at(self.name_addr(which))
    }

    /// Its name `which`, as a C string (empty for none).
    fn c_name_of(&self, which: NameOf) -> *const u8 {
        self.name_addr(which)
            .map_or(c"".as_ptr().cast(), |a| a as *const u8)
    }

    /// Its names, read from its entry.
    pub fn names(&self) -> Names {
        Names::of_entry(self.table.bytes, self.entry as usize, self.layout)
    }

    /// Provider (empty for hooks).
    pub fn provider(&self) -> &'static str {
        self.name(NameOf::Provider)
    }

    /// Probe name (the hook symbol for hooks).
    pub fn probe_name(&self) -> &'static str {
        self.name(NameOf::Probe)
    }

    /// Enclosing function (empty if unknown).
    pub fn function(&self) -> &'static str {
        self.name(NameOf::Function)
    }

    /// The provider, name and function as NUL-terminated C strings, for the C API.
    pub(crate) fn c_names(&self) -> [*const u8; 3] {
        [
            self.c_name_of(NameOf::Provider),
            self.c_name_of(NameOf::Probe),
            self.c_name_of(NameOf::Function),
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
        bootprof_format::disabled_bytes(self.kind, self.form, self.nops)
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
/// table's `TableInfo`).
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

/// How one table's sites are found by address: buckets of equal spans of addresses (about one
/// site each), each the position of its first site in address order. A lookup reads its
/// bucket's two positions and the sites between them (the one it finds, as a rule: the site a
/// hit reads next anyway). Built from the records once a table is read, writing 4 bytes a
/// bucket: no hash table scattered over hundreds of kilobytes, no copy of the sites.
pub(crate) struct Lookup {
    /// The table's sites, in table order.
    pub sites: &'static [SiteRec],
    /// The lowest and highest site address.
    lo: u64,
    hi: u64,
    /// A bucket spans `1 << shift` bytes of addresses.
    shift: u32,
    /// Position in `sites` of the `i`th site in address order; empty when the sites are in
    /// address order (as a table's are, as a rule: each fragment is sorted, and the linker lays
    /// fragments out in the order of their text sections).
    order: Vec<u32>,
    /// `buckets[b]`: how many sites lie below `lo + (b << shift)`; one more at the end, the
    /// number of sites.
    buckets: Vec<u32>,
    /// Tail sites (`Form::is_tail`), which leave no return address of their own: found by the
    /// stub they jump to instead.
    tails: Vec<&'static SiteRec>,
}

impl Lookup {
    /// The lookup of a table's `sites` (in table order): one pass over the records, which counts
    /// them into buckets spanning their first and last addresses and finds whether they are in
    /// address order (and the tail sites); out of address order, their positions sorted by
    /// address, and counted again.
    pub(crate) fn of(sites: &'static [SiteRec]) -> Lookup {
        let first = sites.first().map_or(0, |s| s.addr);
        let last = sites.last().map_or(0, |s| s.addr);
        let (mut lo, mut span) = (first, last.wrapping_sub(first));
        let mut order = Vec::new();
        let mut tails = Vec::new();
        // None for sites over 4 GB apart, which are sorted below.
        let (mut shift, mut buckets) = (0, Vec::new());
        // Buckets for `n` sites over `span` bytes from `lo`: about one site a bucket, between n
        // and 2n of them; each bucket's sites counted, then summed (no branch that depends on
        // the addresses: a loop that walked the buckets and the sites together mispredicted
        // every other step).
        let layout = |span: u64, n: usize| {
            let shift = (span / (n as u64).max(1)).max(1).ilog2().min(31);
            (shift, vec![0u32; (span >> shift) as usize + 2])
        };
        let mut sorted = span <= u64::from(u32::MAX);
        if sorted {
            (shift, buckets) = layout(span, sites.len());
            let mut prev = None;
            for s in sites {
                // In order, each address is above the one before and at most the last.
                sorted &= prev.is_none_or(|p| s.addr > p) && s.addr <= last;
                prev = Some(s.addr);
                if let Some(b) = buckets.get_mut(((s.addr.wrapping_sub(lo)) >> shift) as usize + 1)
                {
                    *b += 1;
                }
                if s.form.is_tail() {
                    tails.push(s);
                }
            }
        } else {
            tails.extend(sites.iter().filter(|s| s.form.is_tail()));
        }
        if !sorted {
            // Out of address order: the sites' positions sorted by address. Sites over 4 GB
            // apart, or two at one address, are no table bootprof-link makes: those past the
            // first are not found.
            order = (0..sites.len() as u32).collect();
            bootprof_format::order::sort_by_key(&mut order, |&i| sites[i as usize].addr);
            lo = order.first().map_or(0, |&i| sites[i as usize].addr);
            let mut at = None;
            order.retain(|&i| {
                let off = sites[i as usize].addr - lo;
                let keep = off <= u64::from(u32::MAX) && at.is_none_or(|l| off > l);
                if keep {
                    at = Some(off);
                }
                keep
            });
            span = at.unwrap_or(0);
            (shift, buckets) = layout(span, order.len());
            for &i in &order {
                buckets[((sites[i as usize].addr - lo) >> shift) as usize + 1] += 1;
            }
        }
        for b in 1..buckets.len() {
            buckets[b] += buckets[b - 1];
        }
        Lookup {
            sites,
            lo,
            hi: lo + span,
            shift,
            order,
            buckets,
            tails,
        }
    }
}

impl Lookup {
    /// The `i`th site in address order.
    #[inline(always)]
    fn by_address(&self, i: usize) -> &'static SiteRec {
        match self.order.get(i) {
            Some(&p) => &self.sites[p as usize],
            None => &self.sites[i],
        }
    }

    /// The site at exactly `addr`, if it is one of this table's.
    #[inline(always)]
    pub fn lookup(&self, addr: u64) -> Option<&'static SiteRec> {
        if addr < self.lo || addr > self.hi {
            return None;
        }
        let b = ((addr - self.lo) >> self.shift) as usize;
        // SAFETY: `addr - lo <= hi - lo`, so `b` is at most the last bucket, and `buckets` has
        // one more entry.
        let (from, to) = unsafe {
            (
                *self.buckets.get_unchecked(b) as usize,
                *self.buckets.get_unchecked(b + 1) as usize,
            )
        };
        for i in from..to {
            let site = self.by_address(i);
            if site.addr >= addr {
                return (site.addr == addr).then_some(site);
            }
        }
        None
    }

    /// The same answer by binary search over the sites in address order (the benchmark's
    /// yardstick).
    pub fn lookup_sorted(&self, addr: u64) -> Option<&'static SiteRec> {
        let n = self.buckets.last().map_or(0, |&n| n as usize);
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let site = self.by_address(mid);
            match site.addr.cmp(&addr) {
                core::cmp::Ordering::Less => lo = mid + 1,
                core::cmp::Ordering::Greater => hi = mid,
                core::cmp::Ordering::Equal => return Some(site),
            }
        }
        None
    }
}

/// The lookup snapshot: every registered table's [`Lookup`], by address, and the tail sites by
/// stub; immutable, swapped in atomically by [`publish`] (the tables' lookups are made once,
/// as they are read).
pub(crate) struct Index {
    /// The tables' lookups, by their lowest address.
    tables: Vec<&'static Lookup>,
    /// The tail sites by the stub they call (its name's address; call-mode tail sites leave no
    /// return address of their own), sorted by stub: a few, searched by halving (a map's code
    /// would weigh more than they do).
    tails: Vec<(u64, &'static SiteRec)>,
}

impl Index {
    /// The snapshot of `tables` and of the tail sites `tails` (each with its stub, in table
    /// order), each sorted as the lookups need them.
    fn new(mut tables: Vec<&'static Lookup>, mut tails: Vec<(u64, &'static SiteRec)>) -> Index {
        bootprof_format::order::sort_by_key(&mut tables, |l| l.lo);
        // Stable: the sites of one stub stay in table order.
        bootprof_format::order::sort_by_key(&mut tails, |&(stub, _)| stub);
        Index { tables, tails }
    }

    /// The site at exactly `addr`.
    #[inline(always)]
    pub fn lookup(&self, addr: u64) -> Option<&'static SiteRec> {
        match self.tables.as_slice() {
            [only] => only.lookup(addr),
            tables => {
                let i = tables.partition_point(|t| t.lo <= addr);
                tables[..i].iter().rev().find_map(|t| t.lookup(addr))
            }
        }
    }

    /// The first of the tail sites calling the stub `stub` (its name's address) for which
    /// `wanted` holds.
    #[inline]
    pub fn tail(&self, stub: u64, wanted: impl Fn(&SiteRec) -> bool) -> Option<&'static SiteRec> {
        let from = self.tails.partition_point(|&(s, _)| s < stub);
        self.tails[from..]
            .iter()
            .take_while(|&&(s, _)| s == stub)
            .map(|&(_, site)| site)
            .find(|site| wanted(site))
    }

    /// Every registered site, table by table.
    pub fn sites(&self) -> impl Iterator<Item = &'static SiteRec> + '_ {
        self.tables.iter().flat_map(|t| t.sites.iter())
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

/// Builds and publishes a new snapshot of the lookups of `tables`.
pub(crate) fn publish(tables: &[Table]) {
    let lookups: Vec<&'static Lookup> = tables.iter().map(|t| t.lookup).collect();
    let mut tails: Vec<(u64, &'static SiteRec)> = Vec::new();
    for &s in lookups.iter().flat_map(|l| &l.tails) {
        let id = s.stub_id();
        if id != 0 {
            tails.push((id, s));
        }
    }
    let index = Box::into_raw(Box::new(Index::new(lookups, tails)));
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
    /// The tables read, in the order they were read (an unloaded object's table leaves with
    /// its sites): their sites are the registered ones ([`Registry::sites`]).
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
    /// How its sites are found by address.
    pub lookup: &'static Lookup,
    /// Whether every name of its sites lies in the table as valid UTF-8, NUL-terminated: a copy
    /// of the table describes them (`lane::Meta::Table`), else each site is described.
    pub self_contained: bool,
}

/// Reads the table `[start, stop)` into the registry.
pub(crate) type TableReader = fn(&mut Registry, usize, usize);

/// Tables kept unread at most; one more is read at once.
const PENDING: usize = 32;

impl Registry {
    /// The registered sites, in the order they were registered.
    pub fn sites(&self) -> impl Iterator<Item = &'static SiteRec> + '_ {
        self.tables.iter().flat_map(|t| t.sites.iter())
    }

    /// How many sites are registered.
    pub fn site_count(&self) -> usize {
        self.tables.iter().map(|t| t.sites.len()).sum()
    }

    /// The `i`th registered site.
    pub fn site(&self, mut i: usize) -> Option<&'static SiteRec> {
        for t in &self.tables {
            match t.sites.get(i) {
                Some(s) => return Some(s),
                None => i -= t.sites.len(),
            }
        }
        None
    }

    /// Whether `site` is one of the registered sites (its object is still loaded).
    pub fn holds(&self, site: &SiteRec) -> bool {
        self.tables
            .iter()
            .any(|t| t.sites.as_ptr_range().contains(&(site as *const SiteRec)))
    }
}

pub(crate) static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
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

/// Measures the lookup structure: builds the lookup of a table of `n` synthetic sites spread
/// like code (addresses 5 to 40 bytes apart) and returns the mean nanoseconds per lookup of the
/// buckets and of a binary search over the same sites, for `lookups` random present addresses.
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
    let sites: Vec<SiteRec> = (0..n)
        .map(|i| {
            addr += 5 + rand() % 36;
            synthetic(i as u32, addr)
        })
        .collect();
    let lookup = Lookup::of(sites.leak());
    let probes: Vec<u64> = (0..lookups)
        .map(|_| lookup.sites[(rand() % n as u64) as usize].addr)
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
    let buckets = time(&|a| lookup.lookup(a));
    let sorted = time(&|a| lookup.lookup_sorted(a));
    (buckets, sorted)
}

/// A site with no object behind it, for the benchmarks.
#[doc(hidden)]
pub fn synthetic_site(id: u32, addr: u64) -> &'static SiteRec {
    Box::leak(Box::new(synthetic(id, addr)))
}

fn synthetic(id: u32, addr: u64) -> SiteRec {
    /// The table of a site with no object behind it.
    static NONE: TableInfo = TableInfo {
        bytes: &[],
        first_id: 0,
        points: AtomicPtr::new(core::ptr::null_mut()),
        len: 0,
    };
    SiteRec {
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
        nops: Nops::Mov,
        layout: Layout::Compact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lookup of sites at `addrs` (in that order, as a table lists them), leaked.
    fn lookup_of(addrs: &[u64]) -> &'static Lookup {
        let sites: Vec<SiteRec> = (addrs.iter().enumerate())
            .map(|(i, &a)| SiteRec {
                form: if i % 7 == 3 {
                    Form::JmpRel32
                } else {
                    Form::CallRel32
                },
                ..synthetic(i as u32, a)
            })
            .collect();
        Box::leak(Box::new(Lookup::of(sites.leak())))
    }

    /// Every site is found by its address, and no address between, before or after them; in
    /// table order or out of it, with sites close together and far apart; tail sites are kept
    /// apart.
    #[test]
    fn every_site_and_nothing_else_is_found() {
        let mut addrs: Vec<u64> = Vec::new();
        let mut a = 0x40_0000u64;
        for i in 0..5000u64 {
            // Runs of sites a few bytes apart, and gaps of up to 64 KB.
            a += if i % 100 == 99 { 65_536 } else { 5 + i % 37 };
            addrs.push(a);
        }
        let mut shuffled = addrs.clone();
        let n = shuffled.len();
        for i in 0..n {
            shuffled.swap(i, (i * 7919) % n);
        }
        for order in [&addrs, &shuffled] {
            let lookup = lookup_of(order);
            for (i, &a) in order.iter().enumerate() {
                let site = lookup
                    .lookup(a)
                    .unwrap_or_else(|| panic!("{a:#x} not found"));
                assert_eq!((site.addr, site.id), (a, i as u32));
                assert_eq!(lookup.lookup_sorted(a).map(|s| s.id), Some(i as u32));
            }
            for &a in &addrs {
                assert!(lookup.lookup(a + 1).is_none() || addrs.contains(&(a + 1)));
            }
            assert!(lookup.lookup(addrs[0] - 1).is_none());
            assert!(lookup.lookup(addrs[n - 1] + 1).is_none());
            assert!(lookup.lookup(0).is_none() && lookup.lookup(u64::MAX).is_none());
            let tails: Vec<u32> = lookup.tails.iter().map(|s| s.id).collect();
            let want: Vec<u32> = (0..n as u32).filter(|i| i % 7 == 3).collect();
            assert_eq!(tails, want);
        }
    }

    /// One site, and two far apart (one bucket of 2^31 bytes): both found.
    #[test]
    fn one_site_and_two_far_apart() {
        let one = lookup_of(&[0x1000]);
        assert_eq!(one.lookup(0x1000).map(|s| s.id), Some(0));
        assert!(one.lookup(0x1001).is_none() && one.lookup(0xfff).is_none());
        let two = lookup_of(&[0x1000, 0x1000 + (3 << 30)]);
        assert_eq!(two.lookup(0x1000 + (3 << 30)).map(|s| s.id), Some(1));
        assert_eq!(two.lookup(0x1000).map(|s| s.id), Some(0));
        assert!(two.lookup(0x2000).is_none());
    }

    /// The snapshot finds each of its tables' sites, and nothing between or around them.
    #[test]
    fn the_snapshot_finds_the_sites_of_every_table() {
        let high = lookup_of(&[0x9000, 0x9010]);
        let low = lookup_of(&[0x1000, 0x1010, 0x1020]);
        let index = Index::new(vec![high, low], Vec::new());
        for a in [0x9000, 0x9010, 0x1000, 0x1010, 0x1020] {
            assert_eq!(index.lookup(a).map(|s| s.addr), Some(a));
        }
        for a in [0x500, 0x1005, 0x5000, 0x9008, 0xa000] {
            assert!(index.lookup(a).is_none(), "{a:#x}");
        }
        assert_eq!(index.sites().count(), 5);
    }

    /// A tail site is found by its stub: the first of that stub's sites, in table order, that
    /// the caller wants; none for a stub no tail site calls.
    #[test]
    fn tail_sites_are_found_by_their_stub_in_table_order() {
        let site = |id: u32| synthetic_site(id, 0x1000 + u64::from(id) * 8);
        let (a, b, c, d) = (site(0), site(1), site(2), site(3));
        // Table order, the stubs out of order: 0x30 called by a and c, 0x10 by b, 0x20 by d.
        let index = Index::new(Vec::new(), vec![(0x30, a), (0x10, b), (0x30, c), (0x20, d)]);
        let id = |s: Option<&SiteRec>| s.map(|s| s.id);
        assert_eq!(id(index.tail(0x30, |_| true)), Some(0));
        assert_eq!(id(index.tail(0x30, |s| s.id != 0)), Some(2));
        assert_eq!(id(index.tail(0x10, |_| true)), Some(1));
        assert_eq!(id(index.tail(0x20, |_| true)), Some(3));
        assert_eq!(id(index.tail(0x30, |_| false)), None);
        for stub in [0, 0x18, 0x28, 0x40] {
            assert_eq!(id(index.tail(stub, |_| true)), None);
        }
    }
}
