//! The probe-site table: the one definition shared by the rewriter (which writes it), the
//! runtime (which reads it from memory) and `bootprof list` (which reads it from a file).
//!
//! # Layout
//!
//! The rewriter adds one *fragment* per text section that holds sites, in a section named
//! [`SECTION_NAME`] (a C identifier, so the final linker defines `__start_bootprof_sites` and
//! `__stop_bootprof_sites`). Each fragment is tied to its text section with `SHF_LINK_ORDER`, so
//! `--gc-sections` drops the fragment with the function. The linker concatenates the fragments; all
//! of them are multiples of 8 bytes and 8-aligned, so no padding appears between them (a reader
//! still skips zero words, to be safe against a linker that pads).
//!
//! A fragment is a [`Header`], then (from version 2 on) its [`TargetBlock`], then `count`
//! [`RawSite`] entries and their name pool, all little-endian. Every address is stored PC-relative, as the
//! signed distance from the field itself to its target, so a PIE or shared object needs no
//! dynamic relocation and the table stays read-only.
//!
//! Version 2 gives the linker few relocations to apply: one for the text section's start (each
//! entry's `site` is an offset from it) and one per distinct target (each entry's `target` is an
//! index into the fragment's target slots; the sites calling one probe symbol share its slot).
//! Version 1 relocated both fields of every entry, two relocations per site (43% more relocations
//! for the final link of a `-pg` program). Version 3 has version 2's layout; its is-enabled call
//! sites hold a one-instruction NOP ([`code::Nops`]), where versions 1 and 2 hold two
//! instructions. Version 4 (what `bootprof-link` writes) has version 3's NOPs and compact
//! entries ([`CompactSite`], 16 bytes instead of [`RawSite`]'s 40): the original instruction is
//! not stored (its [`Form`] says what it was); the probe's (or hook's) name is the target
//! slot's, which the entry points at (each slot holds its target and, beside it, the name of
//! what the sites calling it call: every site calling one probe symbol shares it); the
//! function's offset is 16 bits; and the demangled name follows the function's own in the pool
//! (`symbol\0demangled\0`, the second empty for a name that is not mangled). The table is the
//! largest thing the rewriting adds to a program (a `-finstrument-functions` sqlite3 has
//! 21,000 sites), and the final link reads, copies and (with `--build-id`) hashes every byte
//! of it. A fragment with a site 64 KiB or more into its function is written in version 3's
//! layout.
//! Tables of every version, in binaries linked before, are still read; a runtime that reads
//! only up to version 2 refuses version 3 (it would write version 2's NOP back over version
//! 3's), one that reads up to version 3 refuses version 4.
//!
//! # The probe lifecycle, once
//!
//! 1. The program calls a probe symbol (`__dtrace_sdt_p__n`) or a profiling hook (`__fentry__`).
//! 2. At link time `bootprof-link` turns each such call into one long NOP ([`disabled_bytes`]) and
//!    records it here, with the original instruction bytes and the address of the generated stub.
//! 3. At run time the runtime enables a site by writing `int3` over its first byte (trap mode) or by
//!    putting a call to the stub back (call mode); the stub or the SIGTRAP handler enters the
//!    dispatcher, which runs the handlers and the recorders; disabling writes the NOP back.
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
pub mod attach;
pub mod code;
#[cfg(feature = "alloc")]
pub mod counts;
#[cfg(feature = "demangle")]
pub mod demangle;
pub mod file;
pub mod lane;
pub mod latency;
pub mod le;
#[cfg(feature = "elf")]
pub mod linked;
#[cfg(feature = "std")]
pub mod location;
pub mod note;
#[cfg(feature = "alloc")]
pub mod order;
#[cfg(feature = "alloc")]
pub mod pattern;
pub mod trace;

pub use code::{disabled_bytes, Nops, NOP5};

/// Name of the site-table section (a C identifier, for `__start_`/`__stop_`).
pub const SECTION_NAME: &str = "bootprof_sites";
/// Start of a linked binary's table: defined by `bootprof-link`'s linker script fragment
/// (`linker-scripts/bootprof-sites.inc`), even when the linker dropped every fragment
/// (`--gc-sections`) and with them the section.
pub const TABLE_START: &str = "__bootprof_sites_start";
/// End of the table (equal to [`TABLE_START`] when the table is empty).
pub const TABLE_STOP: &str = "__bootprof_sites_stop";
/// First word of every fragment: `BPST` in little-endian byte order.
pub const MAGIC: u32 = u32::from_le_bytes(*b"BPST");
/// Version of the fragment layout `bootprof-link` writes: the [`TargetBlock`] after the header,
/// [`CompactSite`] entries, and is-enabled call sites disabled as one instruction
/// ([`Nops::Mov`]).
pub const VERSION: u16 = 4;
/// Version 3: the [`TargetBlock`] after the header, [`RawSite`] entries, is-enabled call sites
/// disabled as one instruction.
pub const VERSION_3: u16 = 3;
/// Version 2: version 3's layout, is-enabled call sites disabled as two instructions
/// ([`Nops::Xor`], as in version 1).
pub const VERSION_2: u16 = 2;
/// The first version: each entry's `site` and `target` are distances from the field itself.
pub const VERSION_1: u16 = 1;
/// Size of [`Header`] in bytes.
pub const HEADER_SIZE: usize = 16;
/// Offset of [`TargetBlock::text`] in a fragment of version 2 or 3.
pub const TEXT_FIELD: usize = HEADER_SIZE;
/// Offset of the first target slot in a fragment of version 2 or 3.
pub const TARGETS_AT: usize = HEADER_SIZE + 8;
/// Size of [`RawSite`] in bytes: an entry of versions 1 to 3.
pub const ENTRY_SIZE: usize = 40;
/// Size of [`CompactSite`] in bytes: an entry of version 4, the smallest of any version.
pub const COMPACT_ENTRY_SIZE: usize = 16;
/// Longest instruction a site can be (and the size of [`RawSite::orig`]).
pub const MAX_SITE_LEN: usize = 8;

/// Name of the section the C header's guards are recorded in (`BOOTPROF_PROBE`,
/// `BOOTPROF_ENABLED`): one [`GUARD_RECORD_SIZE`]-byte record per guard, `.long site - .`,
/// `.long target - .`, `.quad probe_symbol`, all three relocated (`R_X86_64_PC32`, `R_X86_64_PC32`,
/// `R_X86_64_64`). Not allocated: `bootprof-link` turns each record into a [`Form::Guard`] entry
/// of the table and its relocations into `R_X86_64_NONE`; a plain link ignores it.
pub const GUARD_SECTION: &str = ".bootprof_guard";
/// Size of one record of [`GUARD_SECTION`].
pub const GUARD_RECORD_SIZE: usize = 16;

/// Symbol-name prefix of named probes: `__dtrace_sdt_<provider>__<name>`.
pub const PROBE_PREFIX: &str = "__dtrace_sdt_";
/// Symbol-name prefix of is-enabled tests: `__dtrace_isenabled_<provider>__<name>`.
pub const ISENABLED_PREFIX: &str = "__dtrace_isenabled_";
/// The profiling hooks compilers call, and the kind of a site calling each.
pub const HOOKS: [(&str, Kind); 4] = [
    ("mcount", Kind::Mcount),
    ("__fentry__", Kind::Fentry),
    ("__cyg_profile_func_enter", Kind::CygEnter),
    ("__cyg_profile_func_exit", Kind::CygExit),
];

/// Header of one fragment.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: u32,
    /// [`VERSION`].
    pub version: u16,
    /// [`ENTRY_SIZE`] when written; readers step by this value, so later versions may grow entries.
    pub entry_size: u16,
    /// Number of entries that follow the header.
    pub count: u32,
    /// Size of the whole fragment (header, entries, names), a multiple of 8.
    pub size: u32,
}

/// What follows the header of a fragment of version 2 or 3: the addresses its entries share,
/// each one relocation for the linker. Followed by `targets` slots (`i32`, each the distance from the slot
/// to a target: a probe symbol's stub, a tail site's thunk, a guard's out-of-line code), then zero
/// padding to 8 bytes; the entries start there ([`entries_at`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetBlock {
    /// Distance from this field to the first byte of the fragment's text section.
    pub text: i32,
    /// Number of target slots that follow.
    pub targets: u32,
}

/// Where the entries of a fragment of version 2 or 3 with `targets` target slots start, from the
/// fragment's start ([`Layout::entries_at`] for any version).
pub const fn entries_at(targets: u32) -> usize {
    Layout::Wide.entries_at(targets)
}

/// One probe site, as stored. Offsets of the `i32` fields are relative to the field itself.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawSite {
    /// Versions 2 and 3: the site's offset from the start of its text section
    /// ([`TargetBlock::text`]). Version 1: the distance to the first byte of the site.
    pub site: i32,
    /// Versions 2 and 3: the index of the target slot holding what the site called: the stub
    /// (what call mode calls again) or, for a [`Form::Guard`], the out-of-line code the enabled
    /// guard jumps to. Version 1: the distance to that target.
    pub target: i32,
    /// Distance to the provider name (NUL-terminated), 0 for function hooks.
    pub provider: i32,
    /// Distance to the probe name (NUL-terminated), or to the hook symbol's name for hooks.
    pub name: i32,
    /// Distance to the name of the enclosing function, 0 when unknown.
    pub function: i32,
    /// Offset of the site from the start of its enclosing function.
    pub func_offset: u32,
    /// [`Kind`] as a byte.
    pub kind: u8,
    /// [`Form`] as a byte.
    pub form: u8,
    /// Length of the site in bytes (5 or 6).
    pub len: u8,
    /// Reserved, zero.
    pub flags: u8,
    /// The instruction as the compiler emitted it, displacement bytes zero; `len` bytes are used.
    pub orig: [u8; MAX_SITE_LEN],
    /// Distance to the enclosing function's demangled name (C++ or Rust, as the reports show
    /// it), 0 when the name is not mangled; patterns match it as well as the symbol. (Zero in
    /// tables written before it existed, which read as "not mangled".)
    pub demangled: i32,
}

/// One probe site of a fragment of version 4, as stored. The `i32` fields are distances from
/// the field itself, as in a [`RawSite`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactSite {
    /// The site's offset from the start of its text section ([`TargetBlock::text`]).
    pub site: u32,
    /// Distance to the target slot of what the site called: a [`CompactSlot`] of its
    /// fragment's.
    pub slot: i32,
    /// Distance to the name of the enclosing function, 0 when unknown. Its NUL is followed by
    /// the demangled name (C++ or Rust, as the reports show it), NUL-terminated, empty when
    /// the name is not mangled.
    pub function: i32,
    /// Offset of the site from the start of its enclosing function.
    pub func_offset: u16,
    /// [`Kind`] as a byte.
    pub kind: u8,
    /// [`Form`] as a byte; the instruction as compiled is the form's opcode, displacement zero
    /// ([`Form::opcode`]).
    pub form: u8,
}

/// A target slot of a fragment of version 4 (a version 2 or 3 slot is its `target` alone).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactSlot {
    /// Distance to the target: a probe symbol's stub, a tail site's thunk, a guard's
    /// out-of-line code.
    pub target: i32,
    /// Distance to the name of what the sites calling the target call: for a probe, its
    /// provider and its name, each NUL-terminated (`provider\0name\0`); for a hook, the hook
    /// symbol's name.
    pub name: i32,
}

/// How a fragment's entries are laid out, by its version.
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// Versions 1 to 3: [`RawSite`], target slots of 4 bytes.
    Wide,
    /// Version 4: [`CompactSite`], target slots of 8 ([`CompactSlot`]).
    #[default]
    Compact,
}

impl Layout {
    /// The layout of a fragment of version `version`.
    pub fn of_version(version: u16) -> Layout {
        if version >= VERSION {
            Layout::Compact
        } else {
            Layout::Wide
        }
    }

    /// The size of an entry (the least a fragment's header may give).
    pub const fn entry_size(self) -> usize {
        match self {
            Layout::Wide => ENTRY_SIZE,
            Layout::Compact => COMPACT_ENTRY_SIZE,
        }
    }

    /// The size of a target slot.
    pub const fn slot_size(self) -> usize {
        match self {
            Layout::Wide => 4,
            Layout::Compact => 8,
        }
    }

    /// Where the entries of a fragment of version 2 or later with `targets` target slots start,
    /// from the fragment's start.
    pub const fn entries_at(self, targets: u32) -> usize {
        (TARGETS_AT + self.slot_size() * targets as usize).next_multiple_of(8)
    }
}

const _: () = assert!(core::mem::size_of::<Header>() == HEADER_SIZE);
const _: () = assert!(core::mem::size_of::<RawSite>() == ENTRY_SIZE);
const _: () = assert!(core::mem::size_of::<CompactSite>() == COMPACT_ENTRY_SIZE);
const _: () = assert!(core::mem::size_of::<CompactSlot>() == 8);
// The layouts are what tables on disk hold: the field offsets must not move.
const _: () = assert!(
    field::TARGET == 4
        && field::PROVIDER == 8
        && field::NAME == 12
        && field::FUNCTION == 16
        && field::FUNC_OFFSET == 20
        && field::KIND == 24
        && field::DEMANGLED == 36
);
const _: () = assert!(
    compact::SLOT == 4
        && compact::FUNCTION == 8
        && compact::FUNC_OFFSET == 12
        && compact::KIND == 14
        && compact::FORM == 15
);

/// What a site is for.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A named probe `__dtrace_sdt_<provider>__<name>(args...)`.
    Probe = 1,
    /// An is-enabled test `__dtrace_isenabled_<provider>__<name>()`, which returns 0 when disabled.
    IsEnabled = 2,
    /// `mcount` (`-pg`), called after the prologue.
    Mcount = 3,
    /// `__fentry__` (`-pg -mfentry`), the first instruction of the function.
    Fentry = 4,
    /// `__cyg_profile_func_enter(this_fn, call_site)` (`-finstrument-functions`).
    CygEnter = 5,
    /// `__cyg_profile_func_exit(this_fn, call_site)` (`-finstrument-functions`).
    CygExit = 6,
}

impl Kind {
    /// All kinds, in table order.
    pub const ALL: [Kind; 6] = [
        Kind::Probe,
        Kind::IsEnabled,
        Kind::Mcount,
        Kind::Fentry,
        Kind::CygEnter,
        Kind::CygExit,
    ];

    /// The kind stored as `byte`, if any.
    #[inline]
    pub fn from_u8(byte: u8) -> Option<Kind> {
        Some(match byte {
            1 => Kind::Probe,
            2 => Kind::IsEnabled,
            3 => Kind::Mcount,
            4 => Kind::Fentry,
            5 => Kind::CygEnter,
            6 => Kind::CygExit,
            _ => return None,
        })
    }

    /// The kind whose [`Kind::name`] is `name`, if any.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Short lowercase name, as printed by `bootprof list`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Probe => "probe",
            Kind::IsEnabled => "is-enabled",
            Kind::Mcount => "mcount",
            Kind::Fentry => "fentry",
            Kind::CygEnter => "cyg-enter",
            Kind::CygExit => "cyg-exit",
        }
    }

    /// Whether this kind is a function hook (named by its function rather than provider:name).
    #[inline]
    pub fn is_hook(self) -> bool {
        !matches!(self, Kind::Probe | Kind::IsEnabled)
    }

    /// Whether the ENTER records of this kind's sites carry the function's parent, the address
    /// it returns to (`-pg` hooks).
    pub fn records_parent(self) -> bool {
        matches!(self, Kind::Fentry | Kind::Mcount)
    }

    /// Whether the ENTER and EXIT records of this kind's sites carry `this_fn`, the address of
    /// the function they are for, which is not the enclosing one when the compiler inlined the
    /// function there (`-finstrument-functions` hooks; 0 in lanes and traces written before).
    pub fn records_this_fn(self) -> bool {
        matches!(self, Kind::CygEnter | Kind::CygExit)
    }

    /// The kind of a site calling the symbol `name`, if `name` is a probe symbol or a hook.
    /// For named probes, also the provider and probe name (split at the first `__`).
    pub fn classify(name: &[u8]) -> Option<(Kind, &[u8], &[u8])> {
        if let Some(&(_, kind)) = HOOKS.iter().find(|(s, _)| s.as_bytes() == name) {
            return Some((kind, b"", name));
        }
        let (kind, rest) = if let Some(rest) = name.strip_prefix(PROBE_PREFIX.as_bytes()) {
            (Kind::Probe, rest)
        } else if let Some(rest) = name.strip_prefix(ISENABLED_PREFIX.as_bytes()) {
            (Kind::IsEnabled, rest)
        } else {
            return None;
        };
        let split = rest.windows(2).position(|w| w == b"__")?;
        let (provider, probe) = (&rest[..split], &rest[split + 2..]);
        if provider.is_empty() || probe.is_empty() {
            return None;
        }
        Some((kind, provider, probe))
    }
}

/// The instruction a site held before it was rewritten.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Form {
    /// `e8 rel32`: `call sym` (5 bytes).
    CallRel32 = 1,
    /// `e9 rel32`: `jmp sym`, a tail call (5 bytes).
    JmpRel32 = 2,
    /// `ff 15 rel32`: `call *sym@GOTPCREL(%rip)` (6 bytes).
    CallGot = 3,
    /// `ff 25 rel32`: `jmp *sym@GOTPCREL(%rip)`, a tail call through the GOT (6 bytes).
    JmpGot = 4,
    /// A guard: a 5-byte NOP in line (from an `asm goto` of the C header) that, enabled, becomes
    /// `e9 rel32`, a jump to out-of-line code (the call to the probe with its arguments, or the
    /// "enabled" branch of an is-enabled test). The call out of line is a site of its own.
    Guard = 5,
}

impl Form {
    /// The form stored as `byte`, if any.
    #[inline]
    pub fn from_u8(byte: u8) -> Option<Form> {
        Some(match byte {
            1 => Form::CallRel32,
            2 => Form::JmpRel32,
            3 => Form::CallGot,
            4 => Form::JmpGot,
            5 => Form::Guard,
            _ => return None,
        })
    }

    /// Length of the instruction in bytes.
    #[allow(clippy::len_without_is_empty)] // an instruction is never empty
    #[inline]
    pub fn len(self) -> usize {
        match self {
            Form::CallRel32 | Form::JmpRel32 | Form::Guard => 5,
            Form::CallGot | Form::JmpGot => 6,
        }
    }

    /// Whether the site was a tail call (a jump: the probe "returns" for its caller).
    #[inline]
    pub fn is_tail(self) -> bool {
        matches!(self, Form::JmpRel32 | Form::JmpGot)
    }

    /// Short name, as printed by `bootprof list`.
    pub fn name(self) -> &'static str {
        match self {
            Form::CallRel32 => "call",
            Form::JmpRel32 => "jmp",
            Form::CallGot => "call-got",
            Form::JmpGot => "jmp-got",
            Form::Guard => "guard",
        }
    }
}

/// Why a table could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableError {
    /// A fragment header does not start with [`MAGIC`]; the offset is from the table start.
    BadMagic(usize),
    /// A fragment has a version this reader does not know.
    BadVersion(usize, u16),
    /// A fragment's sizes do not fit (entries too small, or running past the fragment or table).
    BadSize(usize),
    /// An entry has an unknown kind or form byte.
    BadEntry(usize),
}

impl core::fmt::Display for TableError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            TableError::BadMagic(o) => {
                write!(f, "site table fragment at offset {o:#x} has no magic")
            }
            TableError::BadVersion(o, v) => {
                write!(
                    f,
                    "site table fragment at offset {o:#x} has unknown version {v}"
                )
            }
            TableError::BadSize(o) => {
                write!(f, "site table fragment at offset {o:#x} is truncated")
            }
            TableError::BadEntry(o) => write!(f, "site table entry at offset {o:#x} is invalid"),
        }
    }
}

/// One site of a table, its addresses resolved against the table's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// Address of the site.
    pub site: u64,
    /// Address of the stub the site called.
    pub target: u64,
    /// Address of the provider name, if any.
    pub provider: Option<u64>,
    /// Address of the probe (or hook symbol) name, if any.
    pub name: Option<u64>,
    /// Address of the enclosing function's name, if any.
    pub function: Option<u64>,
    /// Address of that name demangled, if it is a mangled one.
    pub demangled: Option<u64>,
    /// Offset of the site in its function.
    pub func_offset: u32,
    /// What the site is for.
    pub kind: Kind,
    /// The instruction it held.
    pub form: Form,
    /// The instruction bytes as compiled (displacement zero).
    pub orig: [u8; MAX_SITE_LEN],
    /// The NOPs its fragment's version gives it ([`Place::nop`]).
    pub nops: Nops,
}

/// What a site's record in a running process needs of its entry, decoded without its names or
/// its original bytes ([`Sites::next_core`]): the runtime reads tens of thousands of these at
/// start-up and finds the names again from `entry` ([`name_at`]) when asked for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteCore {
    /// Offset of the entry in the table.
    pub entry: usize,
    /// Address of the site.
    pub site: u64,
    /// Address of the stub the site called.
    pub target: u64,
    /// Offset of the site in its function.
    pub func_offset: u32,
    /// What the site is for.
    pub kind: Kind,
    /// The instruction it held.
    pub form: Form,
    /// The offsets in the table of the strings its entry points at, 0 for none: a
    /// [`Layout::Wide`] entry's provider, name, function and demangled name; a
    /// [`Layout::Compact`] one's slot name (a hook's name, or a probe's provider with its name
    /// after it), 0, function (its demangled name after it), 0. What a reader checks of its
    /// names; [`name_of`] finds each again from the entry's offset.
    pub strings: [usize; 4],
    /// The NOPs its fragment's version gives it ([`Place::nop`]).
    pub nops: Nops,
    /// How its entry is laid out.
    pub layout: Layout,
}

use le::{u16_at as le_u16, u32_at as le_u32};

/// Walks the sites of a table whose bytes are `bytes`, loaded at address `base`.
///
/// Fragments are read one after another; zero words between them are skipped. The iterator
/// yields an error once and then stops if a fragment is malformed.
pub fn sites(bytes: &[u8], base: u64) -> Sites<'_> {
    Sites {
        cur: Run {
            frag: Fragment {
                bytes,
                base,
                shared: None,
                nops: Nops::Mov,
                layout: Layout::Compact,
            },
            first: 0,
            entry_size: 0,
            count: 0,
            pool: 0..0,
        },
        last: 0,
        failed: false,
    }
}

/// What the entries of a fragment of version 2 or 3 share: the text section's address and the
/// target slots (offsets into the table).
#[derive(Clone, Copy)]
struct Shared {
    text: u64,
    targets: usize,
    count: u32,
}

/// The table (its bytes, loaded at `base`) and what one fragment's entries share: the text
/// address and target slots (`None` for version 1), their NOPs and their layout. What reading
/// one entry takes, small enough for a reader's loop to keep in registers.
#[derive(Clone, Copy)]
struct Fragment<'a> {
    bytes: &'a [u8],
    base: u64,
    shared: Option<Shared>,
    nops: Nops,
    layout: Layout,
}

/// The entries of one fragment that [`Sites::next_run`] hands over at once: read each with
/// [`Run::core`], in a loop of the caller's that keeps nothing else of the walk.
#[derive(Clone)]
pub struct Run<'a> {
    frag: Fragment<'a>,
    /// Offset of the first entry, the distance between entries, and how many there are.
    first: usize,
    entry_size: usize,
    count: usize,
    /// The fragment's name pool: from its entries' end to its end.
    pool: core::ops::Range<usize>,
}

impl Run<'_> {
    /// How many entries the run has.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the run has no entry.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The name pool of the run's fragment ([`Sites::pool`]).
    pub fn pool(&self) -> core::ops::Range<usize> {
        self.pool.clone()
    }

    /// The [`SiteCore`] of entry `i` (below [`Run::len`]), as [`Sites::next_core`] reads it.
    #[inline(always)]
    pub fn core(&self, i: usize) -> Result<SiteCore, TableError> {
        self.core_in(self.frag, i)
    }

    /// The run, when its entries have the compact layout, as a [`CompactRun`]: read in a
    /// loop of its own, whose reads test no layout.
    pub fn compact(&self) -> Option<CompactRun<'_>> {
        (self.frag.layout == Layout::Compact).then_some(CompactRun(self))
    }

    /// [`Run::core`] with `frag`'s layout (a constant where the caller fixes it).
    #[inline(always)]
    fn core_in(&self, frag: Fragment<'_>, i: usize) -> Result<SiteCore, TableError> {
        let at = self.first + i * self.entry_size;
        match frag.bytes.get(at..at + frag.layout.entry_size()) {
            Some(e) => frag.core(at, e),
            None => Err(TableError::BadSize(at)),
        }
    }
}

/// A [`Run`] of entries of the compact layout ([`Run::compact`]).
pub struct CompactRun<'r>(&'r Run<'r>);

impl CompactRun<'_> {
    /// [`Run::core`], the layout known.
    #[inline(always)]
    pub fn core(&self, i: usize) -> Result<SiteCore, TableError> {
        let frag = Fragment {
            layout: Layout::Compact,
            ..self.0.frag
        };
        self.0.core_in(frag, i)
    }
}

/// Iterator returned by [`sites`].
pub struct Sites<'a> {
    /// The table, and the entries of the current fragment not read yet (where the next
    /// fragment's header is when there are none).
    cur: Run<'a>,
    /// Offset of the last entry read.
    last: usize,
    failed: bool,
}

/// Where a site is and what it holds: what [`Sites::places`] reads of each entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// Address of the site.
    pub site: u64,
    /// Address of the stub the site called.
    pub target: u64,
    /// What the site is for.
    pub kind: Kind,
    /// The instruction it held.
    pub form: Form,
    /// The NOPs its fragment's version gives it.
    pub nops: Nops,
}

impl Site {
    /// Where it is and what it holds.
    pub fn place(&self) -> Place {
        Place {
            site: self.site,
            target: self.target,
            kind: self.kind,
            form: self.form,
            nops: self.nops,
        }
    }
}

impl Place {
    /// The bytes the site holds while disabled ([`disabled_bytes`]).
    pub fn nop(&self) -> [u8; MAX_SITE_LEN] {
        disabled_bytes(self.kind, self.form, self.nops)
    }
}

impl<'a> Sites<'a> {
    fn fail<T>(&mut self, e: TableError) -> Option<Result<T, TableError>> {
        self.failed = true;
        Some(Err(e))
    }

    /// The same walk yielding each site's [`Place`] only, with the same checks (an entry's
    /// kind and form, its target slot): for a reader that needs no names, such as the check
    /// that every site of a linked binary holds its NOP.
    pub fn places(self) -> impl Iterator<Item = Result<Place, TableError>> + 'a {
        let mut sites = self;
        core::iter::from_fn(move || {
            let (at, e) = match sites.next_entry()? {
                Ok(entry) => entry,
                Err(e) => return sites.fail(e),
            };
            match sites.place(at, e) {
                Ok(place) => Some(Ok(place)),
                Err(e) => sites.fail(e),
            }
        })
    }

    /// The next entry's offset and bytes (as many as its layout's entry has), reading the next
    /// fragment's header when the current one has no entry left; `None` at the table's end or
    /// after an error.
    #[inline]
    fn next_entry(&mut self) -> Option<Result<(usize, &'a [u8]), TableError>> {
        if let Err(e) = self.entries_left()? {
            return Some(Err(e));
        }
        let at = self.cur.first;
        self.last = at;
        self.cur.first += self.cur.entry_size;
        self.cur.count -= 1;
        if self.cur.count == 0 {
            self.cur.first = self.cur.pool.end;
        }
        // The header check put every entry inside the fragment.
        let bytes: &'a [u8] = self.cur.frag.bytes;
        match bytes.get(at..at + self.cur.frag.layout.entry_size()) {
            Some(e) => Some(Ok((at, e))),
            None => Some(Err(TableError::BadSize(at))),
        }
    }

    /// Reads fragment headers until the current fragment has entries left; `None` at the
    /// table's end or after an error.
    #[inline]
    fn entries_left(&mut self) -> Option<Result<(), TableError>> {
        if self.failed {
            return None;
        }
        while self.cur.count == 0 {
            match self.next_fragment() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(()))
    }

    /// The [`Place`] of the entry `e` at offset `at`: its kind and form checked, its site and
    /// target resolved (through the fragment's slots from version 2 on, the slot index checked).
    #[inline]
    fn place(&self, at: usize, e: &[u8]) -> Result<Place, TableError> {
        self.cur.frag.place_and_name(at, e).map(|(place, _)| place)
    }

    /// The name pool of the fragment the last site came from, as offsets into the table: what
    /// follows its entries up to its end (the names the rewriter wrote, NUL-terminated, then
    /// zero padding). Empty before the first site.
    #[inline]
    pub fn pool(&self) -> core::ops::Range<usize> {
        self.cur.pool.clone()
    }

    /// Offset in the table of the entry the last site came from: where [`name_at`] finds its
    /// names again.
    pub fn entry(&self) -> usize {
        self.last
    }

    /// Reads the fragment header at `self.cur.first` (after any zero padding); false at the
    /// table's end or after an error (`self.failed` then says which).
    fn next_fragment(&mut self) -> Result<bool, TableError> {
        let b = self.cur.frag.bytes;
        // Skip padding a linker may have put between fragments.
        while self.cur.first + 4 <= b.len() && le_u32(b, self.cur.first) == 0 {
            self.cur.first += 4;
        }
        if self.cur.first >= b.len() {
            return Ok(false);
        }
        let at = self.cur.first;
        if at + 4 <= b.len() && le_u32(b, at) != MAGIC {
            return Err(TableError::BadMagic(at));
        }
        if at + HEADER_SIZE > b.len() {
            return Err(TableError::BadSize(at));
        }
        let version = le_u16(b, at + 4);
        let entry_size = le_u16(b, at + 6) as usize;
        let count = le_u32(b, at + 8);
        let size = le_u32(b, at + 12) as usize;
        let (entries_at, shared) = match version {
            VERSION_1 => (at + HEADER_SIZE, None),
            VERSION_2 | VERSION_3 | VERSION => {
                if at + TARGETS_AT > b.len() {
                    return Err(TableError::BadSize(at));
                }
                let text = self.cur.frag.base + (at + TEXT_FIELD) as u64;
                let text = text.wrapping_add(le_u32(b, at + TEXT_FIELD) as i32 as i64 as u64);
                let targets = le_u32(b, at + TEXT_FIELD + 4);
                let shared = Shared {
                    text,
                    targets: at + TARGETS_AT,
                    count: targets,
                };
                let layout = Layout::of_version(version);
                let entries = (targets <= u32::MAX / 8).then(|| at + layout.entries_at(targets));
                (entries.ok_or(TableError::BadSize(at))?, Some(shared))
            }
            _ => return Err(TableError::BadVersion(at, version)),
        };
        let entries_end = (count as usize)
            .checked_mul(entry_size)
            .and_then(|n| n.checked_add(entries_at));
        let fragment_end = at.checked_add(size);
        let (Some(entries_end), Some(fragment_end)) = (entries_end, fragment_end) else {
            return Err(TableError::BadSize(at));
        };
        let layout = Layout::of_version(version);
        if entry_size < layout.entry_size()
            || size % 8 != 0
            || fragment_end > b.len()
            || entries_end > fragment_end
        {
            return Err(TableError::BadSize(at));
        }
        self.cur.first = entries_at;
        self.cur.count = count as usize;
        self.cur.entry_size = entry_size;
        self.cur.frag.shared = shared;
        self.cur.frag.nops = Nops::of_version(version);
        self.cur.frag.layout = layout;
        self.cur.pool = entries_end..fragment_end;
        Ok(true)
    }
}

/// The address `base + at` plus the signed distance stored at `field` of `entry` (which starts
/// at `at`), or `None` when the distance is 0.
#[inline]
fn rel(entry: &[u8], field: usize, base: u64, at: usize) -> Option<u64> {
    let v = i32::from_le_bytes([
        entry[field],
        entry[field + 1],
        entry[field + 2],
        entry[field + 3],
    ]);
    (v != 0).then(|| (base + (at + field) as u64).wrapping_add(v as i64 as u64))
}

/// The address of the name that field `field` (one of [`field::PROVIDER`], [`field::NAME`],
/// [`field::FUNCTION`], [`field::DEMANGLED`]) of the [`Layout::Wide`] entry at offset `entry`
/// points at, in a table whose bytes are `bytes`, loaded at `base`; `None` when the entry has no
/// such name (or lies outside the table). The fields are where they are in versions 1 to 3,
/// relative to themselves: a site's names are found again from its entry's offset alone
/// ([`name_of`], for entries of any layout).
#[inline]
pub fn name_at(bytes: &[u8], base: u64, entry: usize, field: usize) -> Option<u64> {
    let e = bytes.get(entry..entry.checked_add(field + 4)?)?;
    rel(e, field, base, entry)
}

/// One of the names of a site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    /// A probe's provider (none for hooks).
    Provider,
    /// The probe's name, or the hook symbol's.
    Probe,
    /// The enclosing function's symbol.
    Function,
    /// The enclosing function's demangled name (none when the symbol is not mangled).
    Demangled,
}

/// The address of the name `which` of the entry at offset `entry`, laid out as `layout`, in a
/// table whose bytes are `bytes`, loaded at `base`; `None` when the entry has no such name (or
/// it lies or runs outside the table). Found from the entry's offset alone: a
/// [`Layout::Wide`] entry points at each name ([`name_at`]); a [`Layout::Compact`] one points at
/// its function's name, which its demangled name follows, and at its target slot, whose name
/// is the hook's, or the probe's provider followed by its name.
#[inline]
pub fn name_of(bytes: &[u8], base: u64, entry: usize, layout: Layout, which: Name) -> Option<u64> {
    if layout == Layout::Wide {
        let field = match which {
            Name::Provider => field::PROVIDER,
            Name::Probe => field::NAME,
            Name::Function => field::FUNCTION,
            Name::Demangled => field::DEMANGLED,
        };
        return name_at(bytes, base, entry, field);
    }
    let at = |a: u64| usize::try_from(a.checked_sub(base)?).ok();
    let after = |a: u64| -> Option<u64> {
        let from = at(a)?;
        let nul = bytes.get(from..)?.iter().position(|&b| b == 0)?;
        let next = from + nul + 1;
        // Not empty, and ended inside the table.
        let n = bytes.get(next..)?.iter().position(|&b| b == 0)?;
        (n > 0).then_some(base + next as u64)
    };
    match which {
        Name::Function => name_at(bytes, base, entry, compact::FUNCTION),
        Name::Demangled => after(name_at(bytes, base, entry, compact::FUNCTION)?),
        Name::Provider | Name::Probe => {
            let kind = Kind::from_u8(*bytes.get(entry + compact::KIND)?)?;
            let slot = name_at(bytes, base, entry, compact::SLOT)?;
            let named = name_at(bytes, base, at(slot)?, 4)?;
            match (which, kind.is_hook()) {
                (Name::Provider, true) => None,
                (Name::Probe, false) => after(named),
                _ => Some(named),
            }
        }
    }
}

impl<'a> Sites<'a> {
    /// The next site's [`SiteCore`]: as [`Iterator::next`], without reading its names.
    #[inline]
    pub fn next_core(&mut self) -> Option<Result<SiteCore, TableError>> {
        let (at, e) = match self.next_entry()? {
            Ok(entry) => entry,
            Err(e) => return self.fail(e),
        };
        match self.cur.frag.core(at, e) {
            Ok(core) => Some(Ok(core)),
            Err(e) => self.fail(e),
        }
    }

    /// The entries of the current fragment not yet read, or of the next one, at once: the
    /// walk goes on after them. `None` at the table's end or after an error, which is yielded
    /// once; an error [`Run::core`] gives for one entry is the caller's to stop at.
    pub fn next_run(&mut self) -> Option<Result<Run<'a>, TableError>> {
        if let Err(e) = self.entries_left()? {
            return self.fail(e);
        }
        let run = self.cur.clone();
        self.last = run.first + (run.count - 1) * run.entry_size;
        self.cur.count = 0;
        self.cur.first = self.cur.pool.end;
        Some(Ok(run))
    }
}

impl Fragment<'_> {
    /// [`Sites::place`], and where the name of a [`Layout::Compact`] entry's slot is in the table
    /// (0 for none, and for other entries).
    #[inline(always)]
    fn place_and_name(&self, at: usize, e: &[u8]) -> Result<(Place, usize), TableError> {
        let bad = TableError::BadEntry(at);
        let base = self.base;
        // The slot, from version 2 on: checked to be one of the fragment's.
        let (kind, form, site, slot) = match (self.layout, self.shared) {
            (Layout::Compact, Some(shared)) => {
                let e: &[u8; COMPACT_ENTRY_SIZE] = e.try_into().map_err(|_| bad)?;
                let d = le_u32(e, compact::SLOT) as i32 as isize as usize;
                let slot = (at + compact::SLOT).wrapping_add(d);
                let index = slot.wrapping_sub(shared.targets);
                if index % 8 != 0 || index / 8 >= shared.count as usize {
                    return Err(bad);
                }
                let site = shared.text.wrapping_add(le_u32(e, compact::SITE) as u64);
                (e[compact::KIND], e[compact::FORM], site, Some(slot))
            }
            (Layout::Wide, Some(shared)) => {
                let e: &[u8; ENTRY_SIZE] = e.try_into().map_err(|_| bad)?;
                let index = le_u32(e, field::TARGET);
                if index >= shared.count {
                    return Err(bad);
                }
                let slot = shared.targets + 4 * index as usize;
                let site = shared.text.wrapping_add(le_u32(e, field::SITE) as u64);
                (e[field::KIND], e[field::KIND + 1], site, Some(slot))
            }
            // Version 1: the target is in the entry.
            (_, None) => {
                let site = rel(e, field::SITE, base, at).unwrap_or(base + at as u64);
                (e[field::KIND], e[field::KIND + 1], site, None)
            }
        };
        let (Some(kind), Some(form)) = (Kind::from_u8(kind), Form::from_u8(form)) else {
            return Err(bad);
        };
        // A slot of version 4: its target, then its name; of versions 2 and 3, its target.
        let (target, name) = match slot {
            None => (rel(e, field::TARGET, base, at).unwrap_or(0), 0),
            Some(slot) => {
                let Some(d) = self.bytes.get(slot..slot + 8) else {
                    return Err(bad);
                };
                let distance = i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as i64 as u64;
                let target = (base + slot as u64).wrapping_add(distance);
                let name = match i32::from_le_bytes([d[4], d[5], d[6], d[7]]) {
                    _ if self.layout == Layout::Wide => 0,
                    0 => 0,
                    n => (slot + 4).wrapping_add(n as isize as usize),
                };
                (target, name)
            }
        };
        let place = Place {
            site,
            target,
            kind,
            form,
            nops: self.nops,
        };
        Ok((place, name))
    }

    /// The [`SiteCore`] of the entry `e` at offset `at` of this fragment.
    #[inline(always)]
    fn core(&self, at: usize, e: &[u8]) -> Result<SiteCore, TableError> {
        let (place, name) = self.place_and_name(at, e)?;
        // The table offset a name field at `f` (its distance `d`) points at, 0 for none.
        let to = |f: usize, d: u32| match d {
            0 => 0,
            d => (at + f).wrapping_add(d as i32 as isize as usize),
        };
        let word = |f: usize| le_u32(e, f);
        let (func_offset, strings) = match self.layout {
            Layout::Compact => {
                let function = to(compact::FUNCTION, word(compact::FUNCTION));
                let func_offset = u32::from(le_u16(e, compact::FUNC_OFFSET));
                (func_offset, [name, 0, function, 0])
            }
            Layout::Wide => {
                let fields = [
                    field::PROVIDER,
                    field::NAME,
                    field::FUNCTION,
                    field::DEMANGLED,
                ];
                (word(field::FUNC_OFFSET), fields.map(|f| to(f, word(f))))
            }
        };
        Ok(SiteCore {
            entry: at,
            site: place.site,
            target: place.target,
            func_offset,
            kind: place.kind,
            form: place.form,
            strings,
            nops: place.nops,
            layout: self.layout,
        })
    }
}

impl Iterator for Sites<'_> {
    type Item = Result<Site, TableError>;

    fn next(&mut self) -> Option<Self::Item> {
        let core = match self.next_core()? {
            Ok(core) => core,
            Err(e) => return Some(Err(e)),
        };
        let (bytes, base, at) = (self.cur.frag.bytes, self.cur.frag.base, core.entry);
        let name = |which: Name| name_of(bytes, base, at, core.layout, which);
        let mut orig = [0u8; MAX_SITE_LEN];
        match core.layout {
            Layout::Wide => orig.copy_from_slice(&bytes[at + 28..at + 28 + MAX_SITE_LEN]),
            Layout::Compact => {
                let opcode = core.form.opcode();
                orig[..opcode.len()].copy_from_slice(opcode);
            }
        }
        Some(Ok(Site {
            site: core.site,
            target: core.target,
            provider: name(Name::Provider),
            name: name(Name::Probe),
            function: name(Name::Function),
            demangled: name(Name::Demangled),
            func_offset: core.func_offset,
            kind: core.kind,
            form: core.form,
            orig,
            nops: core.nops,
        }))
    }
}

/// The header of a fragment of layout `version` ([`VERSION`] to [`VERSION_1`]), `size` bytes,
/// holding `count` entries (of the size its layout gives).
pub fn encode_header(version: u16, count: u32, size: u32) -> [u8; HEADER_SIZE] {
    let mut h = [0u8; HEADER_SIZE];
    let entry_size = Layout::of_version(version).entry_size() as u16;
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..6].copy_from_slice(&version.to_le_bytes());
    h[6..8].copy_from_slice(&entry_size.to_le_bytes());
    h[8..12].copy_from_slice(&count.to_le_bytes());
    h[12..16].copy_from_slice(&size.to_le_bytes());
    h
}

/// The bytes of one entry of version 4 ([`CompactSite`]) with its site, slot and function
/// fields zero.
pub fn encode_compact_entry(kind: Kind, form: Form, func_offset: u16) -> [u8; COMPACT_ENTRY_SIZE] {
    let mut e = [0u8; COMPACT_ENTRY_SIZE];
    e[compact::KIND] = kind as u8;
    e[compact::FORM] = form as u8;
    e[compact::FUNC_OFFSET..compact::FUNC_OFFSET + 2].copy_from_slice(&func_offset.to_le_bytes());
    e
}

/// The bytes of one entry of versions 1 to 3 ([`RawSite`]) with its address fields zero.
pub fn encode_entry(kind: Kind, form: Form, func_offset: u32, orig: &[u8]) -> [u8; ENTRY_SIZE] {
    let mut e = [0u8; ENTRY_SIZE];
    e[20..24].copy_from_slice(&func_offset.to_le_bytes());
    e[24] = kind as u8;
    e[25] = form as u8;
    e[26] = form.len() as u8;
    let n = orig.len().min(MAX_SITE_LEN);
    if n >= 4 {
        code::copy_site_bytes(&mut e[28..], orig, n);
    } else {
        e[28..28 + n].copy_from_slice(&orig[..n]);
    }
    e
}

/// Byte offsets of the fields of a [`CompactSite`], from its definition.
pub mod compact {
    use super::CompactSite;
    use core::mem::offset_of;
    /// [`CompactSite::site`].
    pub const SITE: usize = offset_of!(CompactSite, site);
    /// [`CompactSite::slot`].
    pub const SLOT: usize = offset_of!(CompactSite, slot);
    /// [`CompactSite::function`].
    pub const FUNCTION: usize = offset_of!(CompactSite, function);
    /// [`CompactSite::func_offset`], 16 bits.
    pub const FUNC_OFFSET: usize = offset_of!(CompactSite, func_offset);
    /// [`CompactSite::kind`].
    pub const KIND: usize = offset_of!(CompactSite, kind);
    /// [`CompactSite::form`].
    pub const FORM: usize = offset_of!(CompactSite, form);
}

/// Byte offsets of the fields of a [`RawSite`] (versions 1 to 3), from its definition.
pub mod field {
    use super::RawSite;
    use core::mem::offset_of;
    /// [`RawSite::site`].
    pub const SITE: usize = offset_of!(RawSite, site);
    /// [`RawSite::target`].
    pub const TARGET: usize = offset_of!(RawSite, target);
    /// [`RawSite::provider`].
    pub const PROVIDER: usize = offset_of!(RawSite, provider);
    /// [`RawSite::name`].
    pub const NAME: usize = offset_of!(RawSite, name);
    /// [`RawSite::function`].
    pub const FUNCTION: usize = offset_of!(RawSite, function);
    /// [`RawSite::func_offset`].
    pub const FUNC_OFFSET: usize = offset_of!(RawSite, func_offset);
    /// [`RawSite::kind`], [`RawSite::form`] after it.
    pub const KIND: usize = offset_of!(RawSite, kind);
    /// [`RawSite::demangled`].
    pub const DEMANGLED: usize = offset_of!(RawSite, demangled);
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn classify_names() {
        assert_eq!(
            Kind::classify(b"__dtrace_sdt_app__start"),
            Some((Kind::Probe, &b"app"[..], &b"start"[..]))
        );
        assert_eq!(
            Kind::classify(b"__dtrace_isenabled_db__query__done"),
            Some((Kind::IsEnabled, &b"db"[..], &b"query__done"[..]))
        );
        assert_eq!(
            Kind::classify(b"__fentry__").map(|c| c.0),
            Some(Kind::Fentry)
        );
        assert_eq!(Kind::classify(b"__dtrace_sdt_nounderscore"), None);
        assert_eq!(Kind::classify(b"__dtrace_sdt___x"), None);
        assert_eq!(Kind::classify(b"printf"), None);
    }

    #[test]
    fn round_trip_one_fragment() {
        let mut buf = [0u8; HEADER_SIZE + 2 * ENTRY_SIZE + 8];
        let size = (HEADER_SIZE + 2 * ENTRY_SIZE) as u32;
        buf[8..8 + HEADER_SIZE].copy_from_slice(&encode_header(VERSION_1, 2, size));
        let e = encode_entry(Kind::Fentry, Form::CallGot, 0, &[0xff, 0x15, 0, 0, 0, 0]);
        let at = 8 + HEADER_SIZE;
        buf[at..at + ENTRY_SIZE].copy_from_slice(&e);
        buf[at..at + 4].copy_from_slice(&(-16i32).to_le_bytes());
        let e2 = encode_entry(Kind::Probe, Form::JmpRel32, 7, &[0xe9, 0, 0, 0, 0]);
        buf[at + ENTRY_SIZE..at + 2 * ENTRY_SIZE].copy_from_slice(&e2);
        let all: Vec<Site> = sites(&buf, 0x1000).collect::<Result<_, _>>().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].site, 0x1000 + at as u64 - 16);
        assert_eq!(all[0].kind, Kind::Fentry);
        assert_eq!(all[1].func_offset, 7);
        assert!(all[1].form.is_tail());
    }

    /// A version 2 fragment: sites from the text section's address, targets through the shared
    /// slots; a version 1 fragment after it is read as before.
    /// An is-enabled call site reads with the NOPs of its fragment's version: one instruction
    /// from version 3 on, `xor` and a NOP before; the layout of versions 2 and 3 is one.
    #[test]
    fn each_fragment_gives_its_sites_its_versions_nops() {
        let one = entries_at(1) + ENTRY_SIZE;
        let v1 = HEADER_SIZE + ENTRY_SIZE;
        let mut buf = std::vec![0u8; 2 * one + v1];
        for (at, version) in [(0, VERSION_3), (one, VERSION_2)] {
            buf[at..at + HEADER_SIZE].copy_from_slice(&encode_header(version, 1, one as u32));
            buf[at + TEXT_FIELD + 4..at + TEXT_FIELD + 8].copy_from_slice(&1u32.to_le_bytes());
            let e = at + entries_at(1);
            let entry = encode_entry(Kind::IsEnabled, Form::CallRel32, 0, &[0xe8]);
            buf[e..e + ENTRY_SIZE].copy_from_slice(&entry);
        }
        buf[2 * one..2 * one + HEADER_SIZE]
            .copy_from_slice(&encode_header(VERSION_1, 1, v1 as u32));
        let entry = encode_entry(Kind::IsEnabled, Form::CallGot, 0, &[0xff, 0x15]);
        buf[2 * one + HEADER_SIZE..].copy_from_slice(&entry);
        let all: Vec<Site> = sites(&buf, 0x1000).collect::<Result<_, _>>().unwrap();
        let nops: Vec<Nops> = all.iter().map(|s| s.nops).collect();
        assert_eq!(nops, [Nops::Mov, Nops::Xor, Nops::Xor]);
        let bytes: Vec<Vec<u8>> = all
            .iter()
            .map(|s| s.place().nop()[..s.form.len()].to_vec())
            .collect();
        assert_eq!(
            bytes,
            [
                &[0xb8, 0, 0, 0, 0][..],
                &[0x33, 0xc0, 0x0f, 0x1f, 0x00][..],
                &[0x33, 0xc0, 0x0f, 0x1f, 0x40, 0x00][..],
            ]
        );
        // What the runtime reads for its records says the same.
        let mut it = sites(&buf, 0x1000);
        let cores: Vec<Nops> = core::iter::from_fn(|| it.next_core())
            .map(|c| c.unwrap().nops)
            .collect();
        assert_eq!(cores, nops);
        let places: Vec<Nops> = sites(&buf, 0x1000)
            .places()
            .map(|p| p.unwrap().nops)
            .collect();
        assert_eq!(places, nops);
    }

    #[test]
    fn version_2_fragment_then_version_1() {
        let v2 = entries_at(2) + 2 * ENTRY_SIZE;
        let mut buf = std::vec![0u8; v2 + HEADER_SIZE + ENTRY_SIZE];
        buf[..HEADER_SIZE].copy_from_slice(&encode_header(VERSION_3, 2, v2 as u32));
        // The text section starts 0x100 before the field; the slots point 0x40 and 0x80 back.
        buf[TEXT_FIELD..TEXT_FIELD + 4].copy_from_slice(&(-0x100i32).to_le_bytes());
        buf[TEXT_FIELD + 4..TEXT_FIELD + 8].copy_from_slice(&2u32.to_le_bytes());
        buf[TARGETS_AT..TARGETS_AT + 4].copy_from_slice(&(-0x40i32).to_le_bytes());
        buf[TARGETS_AT + 4..TARGETS_AT + 8].copy_from_slice(&(-0x80i32).to_le_bytes());
        for (i, (offset, slot)) in [(0x10u32, 1u32), (0x30, 0)].into_iter().enumerate() {
            let e = entries_at(2) + i * ENTRY_SIZE;
            buf[e..e + ENTRY_SIZE].copy_from_slice(&encode_entry(
                Kind::Fentry,
                Form::CallRel32,
                0,
                &[0xe8],
            ));
            buf[e..e + 4].copy_from_slice(&offset.to_le_bytes());
            buf[e + 4..e + 8].copy_from_slice(&slot.to_le_bytes());
        }
        let h = HEADER_SIZE + ENTRY_SIZE;
        buf[v2..v2 + HEADER_SIZE].copy_from_slice(&encode_header(VERSION_1, 1, h as u32));
        let e = encode_entry(Kind::Probe, Form::CallRel32, 3, &[0xe8]);
        buf[v2 + HEADER_SIZE..].copy_from_slice(&e);
        buf[v2 + HEADER_SIZE..v2 + HEADER_SIZE + 4].copy_from_slice(&(-8i32).to_le_bytes());
        buf[v2 + HEADER_SIZE + 4..v2 + HEADER_SIZE + 8].copy_from_slice(&(16i32).to_le_bytes());
        let all: Vec<Site> = sites(&buf, 0x1000).collect::<Result<_, _>>().unwrap();
        let text = 0x1000 + TEXT_FIELD as u64 - 0x100;
        let addresses: Vec<(u64, u64)> = all.iter().map(|s| (s.site, s.target)).collect();
        let v1_entry = 0x1000 + (v2 + HEADER_SIZE) as u64;
        assert_eq!(
            addresses,
            [
                (text + 0x10, 0x1000 + TARGETS_AT as u64 + 4 - 0x80),
                (text + 0x30, 0x1000 + TARGETS_AT as u64 - 0x40),
                (v1_entry - 8, v1_entry + 4 + 16),
            ]
        );
        assert_eq!(all[2].func_offset, 3);
        // A slot index past the fragment's slots is a bad entry.
        buf[entries_at(2) + 4] = 2;
        let mut it = sites(&buf, 0x1000);
        assert_eq!(it.next(), Some(Err(TableError::BadEntry(entries_at(2)))));
        assert_eq!(it.next(), None);
    }

    /// A site's core (what a running process keeps of it) is what the whole site says, and
    /// `name_at` finds its names again from the entry's offset alone, in both versions.
    #[test]
    fn site_cores_and_names_found_again_from_the_entry() {
        let v2 = entries_at(1) + ENTRY_SIZE + 16;
        let v1 = HEADER_SIZE + ENTRY_SIZE + 8;
        let mut buf = std::vec![0u8; v2 + v1];
        buf[..HEADER_SIZE].copy_from_slice(&encode_header(VERSION_3, 1, v2 as u32));
        buf[TEXT_FIELD..TEXT_FIELD + 4].copy_from_slice(&(-0x100i32).to_le_bytes());
        buf[TEXT_FIELD + 4..TEXT_FIELD + 8].copy_from_slice(&1u32.to_le_bytes());
        buf[TARGETS_AT..TARGETS_AT + 4].copy_from_slice(&(-0x40i32).to_le_bytes());
        let (e2, pool2) = (entries_at(1), entries_at(1) + ENTRY_SIZE);
        buf[pool2..pool2 + 12].copy_from_slice(b"__fentry__\0\0");
        buf[pool2 + 12..pool2 + 16].copy_from_slice(b"fn2\0");
        let e1 = v2 + HEADER_SIZE;
        buf[v2..v2 + HEADER_SIZE].copy_from_slice(&encode_header(VERSION_1, 1, v1 as u32));
        buf[e1 + ENTRY_SIZE..e1 + ENTRY_SIZE + 8].copy_from_slice(b"p\0n\0f1\0\0");
        let entries = [
            (e2, Kind::Fentry, [0, pool2, pool2 + 12, 0]),
            (
                e1,
                Kind::Probe,
                [e1 + ENTRY_SIZE, e1 + ENTRY_SIZE + 2, e1 + ENTRY_SIZE + 4, 0],
            ),
        ];
        for (e, kind, names) in entries {
            let entry = encode_entry(kind, Form::CallRel32, 7, &[0xe8]);
            buf[e..e + ENTRY_SIZE].copy_from_slice(&entry);
            let fields = [
                field::PROVIDER,
                field::NAME,
                field::FUNCTION,
                field::DEMANGLED,
            ];
            for (f, to) in fields.into_iter().zip(names).filter(|&(_, to)| to != 0) {
                let d = (to as i64 - (e + f) as i64) as i32;
                buf[e + f..e + f + 4].copy_from_slice(&d.to_le_bytes());
            }
        }
        buf[e1..e1 + 4].copy_from_slice(&(-8i32).to_le_bytes());
        let base = 0x1000u64;
        let all: Vec<Site> = sites(&buf, base).collect::<Result<_, _>>().unwrap();
        let mut it = sites(&buf, base);
        let mut cores = Vec::new();
        while let Some(core) = it.next_core() {
            cores.push(core.unwrap());
        }
        assert_eq!(cores.len(), 2);
        for ((site, core), (e, kind, names)) in all.iter().zip(&cores).zip(entries) {
            assert_eq!(
                (
                    core.entry,
                    core.site,
                    core.target,
                    core.kind,
                    core.func_offset
                ),
                (e, site.site, site.target, kind, 7)
            );
            let fields = [
                field::PROVIDER,
                field::NAME,
                field::FUNCTION,
                field::DEMANGLED,
            ];
            let found = fields.map(|f| name_at(&buf, base, e, f));
            let want = names.map(|at| (at != 0).then_some(base + at as u64));
            assert_eq!(found, want);
            assert_eq!(
                found,
                [site.provider, site.name, site.function, site.demangled]
            );
            assert_eq!(core.strings, names);
        }
        // An entry past the table has no names.
        assert_eq!(name_at(&buf, base, buf.len() - 8, field::NAME), None);
    }

    /// A version 4 fragment (compact entries) beside a version 3 one: sites and targets through
    /// the slots the entries point at, kind, form and offset; the probe's provider and name, or
    /// the hook's, from the slot; the function's name from the entry and its demangled name
    /// after it (none when empty); the instruction as compiled from the form; a slot pointer
    /// that is not one of the fragment's slots is a bad entry.
    #[test]
    fn compact_entries_read_as_wide_ones() {
        let names = b"app\0start\0_Z3fooi\0foo(int)\0bar\0\0__fentry__\0";
        let layout = Layout::Compact;
        let pool = layout.entries_at(2) + 2 * COMPACT_ENTRY_SIZE;
        let v4 = (pool + names.len()).next_multiple_of(8);
        let v3 = entries_at(1) + ENTRY_SIZE + 8;
        let mut buf = std::vec![0u8; v4 + v3];
        buf[..HEADER_SIZE].copy_from_slice(&encode_header(VERSION, 2, v4 as u32));
        assert_eq!(le_u16(&buf, 6), COMPACT_ENTRY_SIZE as u16);
        fn put(buf: &mut [u8], at: usize, to: i64) {
            let d = (to - at as i64) as i32;
            buf[at..at + 4].copy_from_slice(&d.to_le_bytes());
        }
        put(&mut buf, TEXT_FIELD, TEXT_FIELD as i64 - 0x100);
        buf[TEXT_FIELD + 4..TEXT_FIELD + 8].copy_from_slice(&2u32.to_le_bytes());
        // Slot 0: the probe's stub, named app:start; slot 1: __fentry__'s.
        put(&mut buf, TARGETS_AT, TARGETS_AT as i64 - 0x40);
        put(&mut buf, TARGETS_AT + 4, pool as i64);
        put(&mut buf, TARGETS_AT + 8, TARGETS_AT as i64 + 8 - 0x80);
        put(&mut buf, TARGETS_AT + 12, pool as i64 + 32);
        let entries = [
            // A probe in a C++ function, then a hook in a C one.
            (Kind::Probe, Form::JmpGot, 0x10u32, 0usize, pool + 10),
            (Kind::Fentry, Form::CallRel32, 0x30, 1, pool + 27),
        ];
        for (i, &(kind, form, offset, slot, function)) in entries.iter().enumerate() {
            let e = layout.entries_at(2) + i * COMPACT_ENTRY_SIZE;
            buf[e..e + COMPACT_ENTRY_SIZE].copy_from_slice(&encode_compact_entry(kind, form, 9));
            buf[e..e + 4].copy_from_slice(&offset.to_le_bytes());
            put(&mut buf, e + compact::SLOT, (TARGETS_AT + 8 * slot) as i64);
            put(&mut buf, e + compact::FUNCTION, function as i64);
        }
        buf[pool..pool + names.len()].copy_from_slice(names);
        let v3_entry = v4 + entries_at(1);
        buf[v4..v4 + HEADER_SIZE].copy_from_slice(&encode_header(VERSION_3, 1, v3 as u32));
        buf[v4 + TEXT_FIELD + 4..v4 + TEXT_FIELD + 8].copy_from_slice(&1u32.to_le_bytes());
        let e = encode_entry(Kind::Fentry, Form::CallGot, 5, &[0xff, 0x15, 0, 0, 0, 0]);
        buf[v3_entry..v3_entry + ENTRY_SIZE].copy_from_slice(&e);
        let base = 0x1000u64;
        let all: Vec<Site> = sites(&buf, base).collect::<Result<_, _>>().unwrap();
        assert_eq!(all.len(), 3);
        let text = base + TEXT_FIELD as u64 - 0x100;
        let slots = base + TARGETS_AT as u64;
        let at = |o: usize| Some(base + o as u64);
        let s = &all[0];
        assert_eq!(
            (s.site, s.target, s.kind, s.form, s.func_offset),
            (text + 0x10, slots - 0x40, Kind::Probe, Form::JmpGot, 9)
        );
        assert_eq!(
            [s.provider, s.name, s.function, s.demangled],
            [at(pool), at(pool + 4), at(pool + 10), at(pool + 18)]
        );
        assert_eq!(&s.orig[..], &[0xff, 0x25, 0, 0, 0, 0, 0, 0]);
        let s = &all[1];
        assert_eq!((s.site, s.target), (text + 0x30, slots + 8 - 0x80));
        assert_eq!(
            [s.provider, s.name, s.function, s.demangled],
            [None, at(pool + 32), at(pool + 27), None]
        );
        assert_eq!(&s.orig[..], &[0xe8, 0, 0, 0, 0, 0, 0, 0]);
        let s = &all[2];
        assert_eq!(
            (s.kind, s.form, s.func_offset),
            (Kind::Fentry, Form::CallGot, 5)
        );
        // The core the runtime keeps: the strings to check, and the names found again from its
        // entry.
        let mut it = sites(&buf, base);
        let cores: Vec<SiteCore> = core::iter::from_fn(|| it.next_core())
            .map(|c| c.unwrap())
            .collect();
        let layouts: Vec<Layout> = cores.iter().map(|c| c.layout).collect();
        assert_eq!(layouts, [Layout::Compact, Layout::Compact, Layout::Wide]);
        assert_eq!(cores[0].strings, [pool, 0, pool + 10, 0]);
        assert_eq!(cores[1].strings, [pool + 32, 0, pool + 27, 0]);
        for (core, site) in cores.iter().zip(&all) {
            assert_eq!(
                (core.site, core.target, core.nops),
                (site.site, site.target, Nops::Mov)
            );
            let name = |which| name_of(&buf, base, core.entry, core.layout, which);
            assert_eq!(
                [Name::Provider, Name::Probe, Name::Function, Name::Demangled].map(name),
                [site.provider, site.name, site.function, site.demangled]
            );
        }
        // Read a fragment at a time, as the runtime does: the same cores, the compact
        // fragment's through a loop that knows its layout.
        let mut it = sites(&buf, base);
        let mut by_run = Vec::new();
        while let Some(run) = it.next_run() {
            let run = run.unwrap();
            match run.compact() {
                Some(c) => by_run.extend((0..run.len()).map(|i| c.core(i).unwrap())),
                None => by_run.extend((0..run.len()).map(|i| run.core(i).unwrap())),
            }
        }
        assert_eq!(by_run, cores);
        // A demangled name that runs past the table is none.
        let cut = &buf[..pool + 20];
        assert_eq!(
            name_of(cut, base, cores[0].entry, Layout::Compact, Name::Demangled),
            None
        );
        // A slot pointer between two slots, or past them, is a bad entry.
        for wrong in [TARGETS_AT + 4, TARGETS_AT + 16] {
            let e = layout.entries_at(2);
            put(&mut buf, e + compact::SLOT, wrong as i64);
            let mut it = sites(&buf, base);
            assert_eq!(it.next(), Some(Err(TableError::BadEntry(e))));
            assert_eq!(it.next(), None);
            // Read by runs, the bad entry is the run's to report; the other one reads.
            let run = sites(&buf, base).next_run().unwrap().unwrap();
            let compact = run.compact().unwrap();
            assert_eq!(compact.core(0), Err(TableError::BadEntry(e)));
            assert!(compact.core(1).is_ok());
        }
    }

    #[test]
    fn truncated_fragment_is_an_error() {
        let mut buf = [0u8; HEADER_SIZE + 10];
        buf[..HEADER_SIZE].copy_from_slice(&encode_header(
            VERSION,
            1,
            (TARGETS_AT + 8 + ENTRY_SIZE) as u32,
        ));
        let mut it = sites(&buf, 0);
        assert_eq!(it.next(), Some(Err(TableError::BadSize(0))));
        assert_eq!(it.next(), None);
        let mut bad = [0u8; 8];
        bad[0] = 1;
        assert_eq!(sites(&bad, 0).next(), Some(Err(TableError::BadMagic(0))));
    }
}
