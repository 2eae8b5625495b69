//! A recording session: the directory `bootprof run` creates (`BOOTPROF_SESSION`), and in it one
//! *lane* file per process that carried the runtime. The runtime writes its records straight into
//! its lane through a shared file mapping, so they are in the kernel's page cache the moment they
//! are written and outlive the process however it ends (exit, `_exit`, a fatal signal, SIGKILL,
//! `exec`), and `bootprof report` can read a session while its programs still run.
//!
//! ```text
//! SESSION/
//!   session            written by `bootprof run`: SessionHeader (times, boot id, root pid)
//!   <pid>.<n>.lane     one per process image: n = 0, 1, ... (an `exec` keeps the pid)
//! ```
//!
//! # A lane file
//!
//! ```text
//! 0       4096   lane header (fields at the LANE_* offsets below), mapped and updated in place
//! 4096    ...    chunks of CHUNK_SIZE bytes, claimed in order by the process's threads
//! ```
//!
//! Every chunk starts with a 32-byte header of four little-endian words; its last byte, the
//! chunk's type, is written last and commits the header (0 = not written):
//!
//! - **data** ([`CHUNK_DATA`]): word 0 the chunk's base TSC, word 1 the records its thread wrote
//!   before this chunk, word 3 the thread id in its low 32 bits. Then [`RECORDS_PER_CHUNK`] slots
//!   of 16 bytes, filled in order by that one thread.
//! - **metadata** ([`CHUNK_META`]): word 0 the length of a blob of [`Meta`] entries that starts
//!   after the header and runs on through as many chunks as it needs (claimed together).
//! - **latency area** ([`CHUNK_LATENCY`]) and **kept window** ([`CHUNK_KEPT`]) chunks, in a run
//!   that measures intervals: see [`crate::latency`].
//!
//! A slot is two words. Word 0: the TSC minus the chunk's base (bits 0-47), bits 0-15 of the
//! site id (48-63). Word 1: the argument (bits 0-47: a function hook's parent address, a probe's
//! first argument), bits 16-23 of the site id (48-55), and the kind byte (56-63) written last,
//! which commits the record: a slot whose kind byte is 0 is ignored (not written yet, or being
//! written when the process died). The kind byte is a `RecordKind` (1-9), plus [`KIND_WIDE_ARG`]
//! when the argument does not fit in 48 bits: the whole argument is then in word 0 of the *next*
//! slot, whose kind byte is [`KIND_ARG_SLOT`] (written before the record it belongs to).
//!
//! A hit whose call stack is recorded is followed, in its thread's slots, by one FRAME record
//! (kind 9) per frame, with the hit's TSC and site: the site's address, then return addresses,
//! innermost first (see `RecordKind::Frame`). The stack may run on into the thread's next chunk;
//! when the lane is full, or a ring chunk was reused, a stack may lose its end, or its hit. A
//! reader that predates FRAME counts those slots as damaged and reads the rest.
//!
//! A chunk's records are in time order; a thread's chunks are ordered by word 1 (records before),
//! which also tells how many records of a thread are missing when the oldest were overwritten
//! (keep-last mode reuses a thread's ring of chunks) or never written.
//!
//! Site names come from metadata chunks; a lane made by `fork` inherits the sites of its parent's
//! lane (named in its header) as they were at the fork: the parent's chunks before
//! `LANE_PARENT_CHUNKS`.
//!
//! # Hit counts
//!
//! A process that counts hits (`BOOTPROF_COUNT=1`, what `bootprof run --count` sets) records
//! none (no data chunks, unless the program starts the recorder itself). Its lane is version
//! [`LANE_VERSION`] (as every lane this runtime writes), with [`FLAG_COUNTS`] set in the
//! header's `FLAGS` field, and holds a
//! [`Meta::Counts`] entry per time it wrote its counts (at exit and from the handler of a fatal
//! signal, just before it writes how it ended; at each `bootprof_dump()`): each one holds every
//! site's hits since the process started (a `fork` child starts from 0, and does not inherit the
//! entries of its parent's lane), so the last one is the one to read. A counting lane without one
//! is a process that ended without writing them (SIGKILL, `_exit`, `exec`) or still runs.

use crate::le::{u32_at, u64_at};
use crate::trace::{Record, RecordKind};

/// First bytes of a lane file.
pub const LANE_MAGIC: [u8; 8] = *b"BPLANE\0\0";
/// The lane layout described here, as the runtime writes it: version 3 with [`Meta::TableFile`]
/// entries (a loaded object's site table left in the object's file, which the runtime linked
/// into the session directory), which a reader of version 3 would take for damage. Readers
/// read all four versions.
pub const LANE_VERSION: u32 = 4;
/// Version 2 with [`Meta::Table`] entries (a loaded object's site table copied whole, where
/// version 2 had a [`Meta::Site`] entry per site), which a reader of version 2 would take for
/// damage.
pub const LANE_VERSION_3: u32 = 3;
/// Version 1 with the `FLAGS` header field, [`Meta::Counts`] entries, the latency area and kept
/// windows ([`CHUNK_LATENCY`], [`CHUNK_KEPT`]) and program-given thread names
/// ([`META_THREAD_GIVEN`]), which a reader of version 1 would take for damage.
pub const LANE_VERSION_2: u32 = 2;
/// The first lane layout: none of what version 2 added (its `FLAGS` field reads as 0).
pub const LANE_VERSION_1: u32 = 1;
/// Bit of the header's `FLAGS` field: the process counts hits and writes [`Meta::Counts`] entries.
pub const FLAG_COUNTS: u32 = 1;
/// Size of the lane header; the chunks start here.
pub const LANE_HEADER_SIZE: usize = 4096;
/// Size of a chunk.
pub const CHUNK_SIZE: usize = 4096;
/// Size of a chunk's header.
pub const CHUNK_HEADER_SIZE: usize = 32;
/// Size of a record slot.
pub const SLOT_SIZE: usize = 16;
/// Record slots in a data chunk.
pub const RECORDS_PER_CHUNK: usize = (CHUNK_SIZE - CHUNK_HEADER_SIZE) / SLOT_SIZE;
/// Type byte of a data chunk.
pub const CHUNK_DATA: u8 = 0xD1;
/// Type byte of a metadata chunk.
pub const CHUNK_META: u8 = 0xE1;
/// Type byte of the first chunk of the latency area (see [`crate::latency`]).
pub const CHUNK_LATENCY: u8 = 0xC1;
/// Type byte of a data chunk copied into a kept window (see [`crate::latency`]).
pub const CHUNK_KEPT: u8 = 0xD2;
/// Added to a record's kind byte when its argument is in the next slot.
pub const KIND_WIDE_ARG: u8 = 0x10;
/// Kind byte of a slot that holds the previous record's argument.
pub const KIND_ARG_SLOT: u8 = 0xFF;
/// Largest site id a record can name (24 bits).
pub const MAX_SITE_ID: u32 = (1 << 24) - 1;
/// Largest TSC distance from a chunk's base a record can hold (48 bits).
pub const MAX_DELTA: u64 = (1 << 48) - 1;
/// Largest argument held in the record's own slot.
pub const MAX_NARROW_ARG: u64 = (1 << 48) - 1;

/// Offsets of the lane header's fields (all little-endian).
pub mod field {
    /// `[u8; 8]` [`super::LANE_MAGIC`].
    pub const MAGIC: usize = 0;
    /// `u32` [`super::LANE_VERSION`].
    pub const VERSION: usize = 8;
    /// `u32` header size ([`super::LANE_HEADER_SIZE`]).
    pub const HEADER_SIZE: usize = 12;
    /// `u32` chunk size ([`super::CHUNK_SIZE`]).
    pub const CHUNK_SIZE: usize = 16;
    /// `u32` what the lane keeps ([`super::Keep`] as a number).
    pub const KEEP: usize = 20;
    /// `u32` process id.
    pub const PID: usize = 24;
    /// `u32` parent process id.
    pub const PPID: usize = 28;
    /// `u64` TSC when the lane was created.
    pub const START_TSC: usize = 32;
    /// `u64` `CLOCK_MONOTONIC` nanoseconds when the lane was created.
    pub const START_NS: usize = 40;
    /// `u64` `CLOCK_REALTIME` nanoseconds when the lane was created.
    pub const START_REALTIME_NS: usize = 48;
    /// `u64` chunks claimed so far (may run past the file's end when growing it failed).
    pub const CLAIMED: usize = 56;
    /// `u64` records dropped: buffer full (keep-start), file could not grow, no ring left.
    pub const DROPPED: usize = 64;
    /// `u64` TSC when the process ended, as the process saw it (0 = not seen).
    pub const END_TSC: usize = 72;
    /// `u32` how it ended, as the process saw it ([`super::End`] as a number).
    pub const END_KIND: usize = 80;
    /// `u32` the exit status or the signal.
    pub const END_CODE: usize = 84;
    /// `u64` TSC ticks per second, measured by the process when it ran long enough (else 0).
    pub const TSC_HZ: usize = 88;
    /// `u32` how it ended, as its waiting parent (`bootprof run`) saw it ([`super::End`]).
    pub const REAPED_KIND: usize = 96;
    /// `u32` the exit status or signal the parent saw.
    pub const REAPED_CODE: usize = 100;
    /// `u64` data chunks one keep-start lane may hold, or one thread's ring in keep-last.
    pub const LIMIT_CHUNKS: usize = 104;
    /// `u64` chunks of the parent's lane whose metadata this lane inherits (after `fork`).
    pub const PARENT_CHUNKS: usize = 112;
    /// `u64` chunks the lane holds: the file was allocated this far (a claim past it failed,
    /// and its records were dropped and counted).
    pub const GROWN: usize = 120;
    /// `[u8; 16]` the kernel's boot id (TSC values compare only within one boot).
    pub const BOOT_ID: usize = 128;
    /// `u32` flags ([`super::FLAG_COUNTS`]); version [`super::LANE_VERSION`] on (zero in
    /// version 1).
    pub const FLAGS: usize = 144;
    /// `u32` the call filter's depth (`BOOTPROF_DEPTH`: only the outermost this many levels of
    /// calls per thread are recorded), 0 = none. Zero in lanes written before it.
    pub const FILTER_DEPTH: usize = 148;
    /// `u64` the call filter's shortest call, nanoseconds (`BOOTPROF_MIN_TIME`), 0 = none.
    pub const FILTER_MIN_NS: usize = 152;
    /// `u64` calls the filter left out (their ENTER and EXIT records not written).
    pub const FILTERED: usize = 160;
    /// `[u8; 64]` file name of the parent's lane in the session, NUL-padded (after `fork`).
    pub const PARENT_LANE: usize = 192;
    /// `[u8; ...]` the executable's path, then its command line (NUL-separated), to the end of
    /// the header.
    pub const EXE: usize = 256;
}

/// What a lane keeps when there are more records than room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Keep {
    /// The first records (boot); later ones are dropped and counted.
    Start = 0,
    /// The last records of each thread (a flight recorder); older ones are overwritten.
    Last = 1,
    /// Everything: the lane grows as long as the file system has room.
    All = 2,
}

impl Keep {
    /// The keep mode numbered `n`.
    pub fn from_u32(n: u32) -> Option<Keep> {
        [Keep::Start, Keep::Last, Keep::All]
            .into_iter()
            .find(|k| *k as u32 == n)
    }

    /// Its name, as `--keep` and `BOOTPROF_KEEP` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Keep::Start => "start",
            Keep::Last => "last",
            Keep::All => "all",
        }
    }

    /// The keep mode named `s`.
    pub fn from_name(s: &str) -> Option<Keep> {
        [Keep::Start, Keep::Last, Keep::All]
            .into_iter()
            .find(|k| k.name() == s)
    }
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum End {
    /// Not known (yet).
    Unknown = 0,
    /// It exited with a status.
    Exit = 1,
    /// A signal ended it.
    Signal = 2,
    /// Not the process's end: the end of recording into a lane that `bootprof attach` had it
    /// make; the process went on running.
    Detached = 3,
}

impl End {
    /// The end numbered `n`.
    pub fn from_u32(n: u32) -> End {
        match n {
            1 => End::Exit,
            2 => End::Signal,
            3 => End::Detached,
            _ => End::Unknown,
        }
    }
}

/// The lane header's fields.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LaneHeader {
    /// Keep mode, as a number.
    pub keep: u32,
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// TSC at creation.
    pub start_tsc: u64,
    /// `CLOCK_MONOTONIC` at creation, nanoseconds.
    pub start_ns: u64,
    /// `CLOCK_REALTIME` at creation, nanoseconds.
    pub start_realtime_ns: u64,
    /// Chunks claimed.
    pub claimed: u64,
    /// Records dropped.
    pub dropped: u64,
    /// TSC at the end the process saw (0 = none).
    pub end_tsc: u64,
    /// The end the process saw, and its code.
    pub end: (u32, u32),
    /// TSC frequency the process measured (0 = none).
    pub tsc_hz: u64,
    /// The end its parent saw, and its code.
    pub reaped: (u32, u32),
    /// See [`field::LIMIT_CHUNKS`].
    pub limit_chunks: u64,
    /// See [`field::PARENT_CHUNKS`].
    pub parent_chunks: u64,
    /// See [`field::GROWN`].
    pub grown: u64,
    /// See [`field::BOOT_ID`].
    pub boot_id: [u8; 16],
    /// See [`field::FLAGS`].
    pub flags: u32,
    /// See [`field::FILTER_DEPTH`].
    pub filter_depth: u32,
    /// See [`field::FILTER_MIN_NS`].
    pub filter_min_ns: u64,
    /// See [`field::FILTERED`].
    pub filtered: u64,
}

impl LaneHeader {
    /// Decodes and checks the fixed fields of a lane header; the error says what is wrong.
    pub fn decode(b: &[u8]) -> Result<LaneHeader, &'static str> {
        if b.len() < LANE_HEADER_SIZE {
            return Err("shorter than the 4096-byte lane header");
        }
        if b[..8] != LANE_MAGIC {
            return Err("not a bootprof lane (bad magic)");
        }
        let version = u32_at(b, field::VERSION);
        if ![LANE_VERSION, LANE_VERSION_3, LANE_VERSION_2, LANE_VERSION_1].contains(&version) {
            return Err("unknown lane version");
        }
        if u32_at(b, field::HEADER_SIZE) as usize != LANE_HEADER_SIZE
            || u32_at(b, field::CHUNK_SIZE) as usize != CHUNK_SIZE
        {
            return Err("unknown header or chunk size");
        }
        let mut boot_id = [0; 16];
        boot_id.copy_from_slice(&b[field::BOOT_ID..field::BOOT_ID + 16]);
        Ok(LaneHeader {
            keep: u32_at(b, field::KEEP),
            pid: u32_at(b, field::PID),
            ppid: u32_at(b, field::PPID),
            start_tsc: u64_at(b, field::START_TSC),
            start_ns: u64_at(b, field::START_NS),
            start_realtime_ns: u64_at(b, field::START_REALTIME_NS),
            claimed: u64_at(b, field::CLAIMED),
            dropped: u64_at(b, field::DROPPED),
            end_tsc: u64_at(b, field::END_TSC),
            end: (u32_at(b, field::END_KIND), u32_at(b, field::END_CODE)),
            tsc_hz: u64_at(b, field::TSC_HZ),
            reaped: (u32_at(b, field::REAPED_KIND), u32_at(b, field::REAPED_CODE)),
            limit_chunks: u64_at(b, field::LIMIT_CHUNKS),
            parent_chunks: u64_at(b, field::PARENT_CHUNKS),
            grown: u64_at(b, field::GROWN),
            boot_id,
            flags: if version == LANE_VERSION_1 {
                0
            } else {
                u32_at(b, field::FLAGS)
            },
            filter_depth: u32_at(b, field::FILTER_DEPTH),
            filter_min_ns: u64_at(b, field::FILTER_MIN_NS),
            filtered: u64_at(b, field::FILTERED),
        })
    }
}

/// The NUL-terminated byte string at `at` in `b` (up to `max` bytes; without the NUL).
pub fn c_string(b: &[u8], at: usize, max: usize) -> &[u8] {
    let end = (at + max).min(b.len());
    let s = b.get(at..end).unwrap_or(&[]);
    let n = s.iter().position(|&c| c == 0).unwrap_or(s.len());
    &s[..n]
}

/// The two words of a record slot: `delta` TSC ticks after the chunk's base (at most
/// [`MAX_DELTA`]), `site` (at most [`MAX_SITE_ID`]), `kind` (a `RecordKind` byte, perhaps plus
/// [`KIND_WIDE_ARG`]) and an argument of at most 48 bits. Word 1 is the one to write last.
#[inline(always)]
pub const fn record_words(delta: u64, site: u32, kind: u8, arg48: u64) -> (u64, u64) {
    let site = site as u64;
    (
        delta | (site & 0xffff) << 48,
        arg48 | (site >> 16 & 0xff) << 48 | (kind as u64) << 56,
    )
}

/// Word 3 of a chunk header: the thread id (data chunks) and the type byte that commits it.
#[inline(always)]
pub const fn chunk_word3(tid: u32, kind: u8) -> u64 {
    tid as u64 | (kind as u64) << 56
}

/// One record of a data chunk, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRecord {
    /// Absolute TSC (base + delta).
    pub tsc: u64,
    /// Site id.
    pub site: u32,
    /// What it says.
    pub kind: RecordKind,
    /// The argument.
    pub arg: u64,
}

impl SlotRecord {
    /// The record, as the trace format has it, of thread `tid` (its `site` still the site id).
    pub fn record(self, tid: u32) -> Record {
        Record {
            tsc: self.tsc,
            arg: self.arg,
            tid,
            site: self.site,
            kind: self.kind,
        }
    }
}

/// A chunk, decoded from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// Never written (or its header not committed yet).
    Empty,
    /// A data chunk of thread `tid`.
    Data {
        /// Thread id.
        tid: u32,
        /// Base TSC.
        base: u64,
        /// Records the thread wrote before this chunk.
        before: u64,
        /// The slots (without the header).
        slots: &'a [u8],
    },
    /// The first chunk of a metadata blob of `len` bytes.
    Meta {
        /// The blob's length.
        len: u64,
    },
    /// The first chunk of the latency area, of `len` bytes.
    Latency {
        /// The area's length.
        len: u64,
    },
    /// A data chunk copied into kept window `window`.
    Kept {
        /// The window's number.
        window: u64,
        /// Thread id.
        tid: u32,
        /// Base TSC.
        base: u64,
        /// Records the thread wrote before this chunk.
        before: u64,
        /// The slots (without the header).
        slots: &'a [u8],
    },
    /// A header with an unknown type byte.
    Unknown(u8),
}

/// Decodes the chunk in `b` (exactly [`CHUNK_SIZE`] bytes).
pub fn chunk(b: &[u8]) -> Chunk<'_> {
    let w3 = u64_at(b, 24);
    match (w3 >> 56) as u8 {
        0 => Chunk::Empty,
        CHUNK_DATA => Chunk::Data {
            tid: w3 as u32,
            base: u64_at(b, 0),
            before: u64_at(b, 8),
            slots: &b[CHUNK_HEADER_SIZE..],
        },
        CHUNK_META => Chunk::Meta { len: u64_at(b, 0) },
        CHUNK_LATENCY => Chunk::Latency { len: u64_at(b, 0) },
        CHUNK_KEPT => Chunk::Kept {
            window: u64_at(b, 16),
            tid: w3 as u32,
            base: u64_at(b, 0),
            before: u64_at(b, 8),
            slots: &b[CHUNK_HEADER_SIZE..],
        },
        t => Chunk::Unknown(t),
    }
}

/// What reading a data chunk's slots found besides its records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotStats {
    /// Committed records.
    pub records: u64,
    /// Slots holding bytes but no commit: records being written when the writer stopped.
    pub torn: u64,
    /// Slots whose kind byte is not a record kind (damage).
    pub bad: u64,
}

/// The committed records of a data chunk's `slots`, in order, given its `base` TSC; a slot
/// without its commit byte ends nothing (later ones are still read), it is counted as torn.
pub fn slot_records(base: u64, slots: &[u8], mut each: impl FnMut(SlotRecord)) -> SlotStats {
    let mut stats = SlotStats::default();
    let n = slots.len() / SLOT_SIZE;
    let mut i = 0;
    while i < n {
        let at = i * SLOT_SIZE;
        let w0 = u64_at(slots, at);
        let w1 = u64_at(slots, at + 8);
        i += 1;
        let kind = (w1 >> 56) as u8;
        if kind == 0 {
            if w0 != 0 || w1 != 0 {
                stats.torn += 1;
            }
            continue;
        }
        let site = (w0 >> 48) as u32 | ((w1 >> 48) as u32 & 0xff) << 16;
        let record_kind = match RecordKind::from_u8(kind & !KIND_WIDE_ARG) {
            Some(k) if kind != KIND_ARG_SLOT => k,
            _ => {
                stats.bad += 1;
                continue;
            }
        };
        let mut arg = w1 & MAX_NARROW_ARG;
        if kind & KIND_WIDE_ARG != 0 {
            // Written before its record: present whenever the record is.
            if i < n && (u64_at(slots, i * SLOT_SIZE + 8) >> 56) as u8 == KIND_ARG_SLOT {
                arg = u64_at(slots, i * SLOT_SIZE);
                i += 1;
            } else {
                stats.bad += 1;
                continue;
            }
        }
        stats.records += 1;
        each(SlotRecord {
            tsc: base.wrapping_add(w0 & MAX_DELTA),
            site,
            kind: record_kind,
            arg,
        });
    }
    stats
}

/// Tag of a site entry in a metadata blob.
pub const META_SITE: u8 = 1;
/// Tag of a thread-name entry in a metadata blob (the name the kernel has for the thread).
pub const META_THREAD: u8 = 2;
/// Tag of a thread-name entry for a name the program gave the thread (a THREAD record): it
/// outlives the record, which a flight recorder overwrites, and outranks the kernel's name.
pub const META_THREAD_GIVEN: u8 = 4;
/// Tag of a hit-count entry in a metadata blob (lane version 2 on).
pub const META_COUNTS: u8 = 3;
/// Tag of a site-table entry in a metadata blob (lane version 3 on).
pub const META_TABLE: u8 = 5;
/// Tag of a site-table entry that names the table's file (lane version 4 on).
pub const META_TABLE_FILE: u8 = 6;
/// Bytes of one site's count in a [`Meta::Counts`] entry: `u32` site id, `u64` hits.
pub const COUNT_SIZE: usize = 12;
/// Bytes before the counts of a [`Meta::Counts`] entry: the tag and the number of counts.
const COUNTS_HEADER: usize = 5;
/// Bytes before the table of a [`Meta::Table`] entry: the tag, the first id, the address and
/// the table's length.
pub const TABLE_HEADER: usize = 1 + 4 + 8 + 4;

/// One entry of a metadata blob. Strings are a `u32` length and that many bytes.
///
/// - site: tag [`META_SITE`], `u32 id`, `u8 kind` (a [`crate::Kind`]), `u32 func_offset`,
///   `u64 address`, then provider, name and function as strings;
/// - thread: tag [`META_THREAD`] (or [`META_THREAD_GIVEN`]), `u32 tid`, then its name as a
///   string;
/// - counts: tag [`META_COUNTS`], `u32 n`, then `n` counts of [`COUNT_SIZE`] bytes: `u32` site
///   id, `u64` hits since the process started (a site missing was neither enabled nor hit);
/// - table: tag [`META_TABLE`], `u32 first_id`, `u64 address`, then the bytes of a loaded
///   object's site table (as `bootprof-link` wrote it, [`crate::sites`]) as a string: its sites
///   in table order have the ids `first_id`, `first_id + 1`, ... (the runtime writes one when
///   every name of the table lies in the table, as the rewriter puts them; see [`Meta::sites`]);
/// - table file: tag [`META_TABLE_FILE`], `u32 first_id`, `u64 address`, `u64 len`, `u64
///   offset`, `u64 size`, then the file's GNU build ID and its name in the session directory as
///   strings: the table entry whose bytes are the `len` bytes at `offset` of that file, as long
///   as it is the file it was (its size and build ID; the runtime links the loaded object's
///   file into the session directory instead of copying the table into the lane, when the
///   object has a build ID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meta<'a> {
    /// A site the process registered.
    Site {
        /// The runtime's site id.
        id: u32,
        /// [`crate::Kind`] as a byte.
        kind: u8,
        /// Offset in its function.
        func_offset: u32,
        /// Address in the process.
        address: u64,
        /// Provider (empty for hooks).
        provider: &'a [u8],
        /// Probe name, or the hook symbol.
        name: &'a [u8],
        /// The enclosing function.
        function: &'a [u8],
    },
    /// A thread's name.
    Thread {
        /// Thread id.
        tid: u32,
        /// Its name.
        name: &'a [u8],
        /// Whether the program gave it (a THREAD record) rather than the kernel.
        given: bool,
    },
    /// The process's hit counts when it wrote them.
    Counts {
        /// The counts as stored: a multiple of [`COUNT_SIZE`] bytes (see [`counts`]).
        counts: &'a [u8],
    },
    /// The sites of a loaded object's table, described by the table itself.
    Table {
        /// The runtime's id of the table's first site.
        first_id: u32,
        /// The table's address in the process.
        address: u64,
        /// The table's bytes.
        table: &'a [u8],
    },
    /// A [`Meta::Table`] whose bytes are in a file of the session directory: its reader reads
    /// them from there, if the file is still the one named (its size and build ID; a copy of
    /// the session elsewhere keeps both).
    TableFile {
        /// The runtime's id of the table's first site.
        first_id: u32,
        /// The table's address in the process.
        address: u64,
        /// The table's length in bytes.
        len: u64,
        /// Where the table starts in the file.
        offset: u64,
        /// The file's size.
        size: u64,
        /// The object's GNU build ID (`NT_GNU_BUILD_ID`).
        build_id: &'a [u8],
        /// The file's name in the session directory.
        name: &'a [u8],
    },
}

/// Room for [`object_file_name`]: `object-`, the device in hex, `-`, the inode in decimal.
pub const OBJECT_FILE_NAME_MAX: usize = 7 + 16 + 1 + 20;

/// The name a loaded object's file, of device `dev` and inode `ino`, is linked under in a
/// session directory (written into `out`): one per file, which every process of the session
/// that loads it shares.
pub fn object_file_name(dev: u64, ino: u64, out: &mut [u8; OBJECT_FILE_NAME_MAX]) -> &str {
    /// Writes `n` in base `base` at the start of `out`; its length. By hand, not through
    /// `core::fmt`, whose writer's table of functions is pointers the dynamic loader relocates
    /// at the start of every program that carries the runtime.
    #[inline(never)]
    fn digits(n: u64, base: u64, out: &mut [u8]) -> usize {
        let (mut len, mut rest) = (1, n / base);
        while rest != 0 {
            (len, rest) = (len + 1, rest / base);
        }
        let mut rest = n;
        for o in out[..len].iter_mut().rev() {
            *o = b"0123456789abcdef"[(rest % base) as usize];
            rest /= base;
        }
        len
    }
    out[..7].copy_from_slice(b"object-");
    let mut n = 7;
    n += digits(dev, 16, &mut out[n..]);
    out[n] = b'-';
    n += 1;
    n += digits(ino, 10, &mut out[n..]);
    core::str::from_utf8(&out[..n]).unwrap_or("")
}

/// Bytes of a [`Meta::TableFile`] entry besides its build ID's and name's bytes.
const TABLE_FILE_HEADER: usize = 1 + 4 + 4 * 8 + 4 + 4;

/// What comes before the table's bytes in a [`Meta::Table`] entry of `len` bytes of table (for
/// a writer that puts the table behind it without holding it in memory).
pub fn table_header(first_id: u32, address: u64, len: usize) -> [u8; TABLE_HEADER] {
    let mut h = [0u8; TABLE_HEADER];
    h[0] = META_TABLE;
    h[1..5].copy_from_slice(&first_id.to_le_bytes());
    h[5..13].copy_from_slice(&address.to_le_bytes());
    h[13..].copy_from_slice(&(len as u32).to_le_bytes());
    h
}

/// Bytes of a [`Meta::Counts`] entry of `n` counts.
pub const fn counts_entry_len(n: usize) -> usize {
    COUNTS_HEADER + n * COUNT_SIZE
}

/// Writes the tag and the number of counts, `n`, of a [`Meta::Counts`] entry at the start of
/// `entry` (what the runtime writes in place, count by count, where it may not allocate).
pub fn put_counts_header(entry: &mut [u8], n: u32) {
    entry[0] = META_COUNTS;
    entry[1..COUNTS_HEADER].copy_from_slice(&n.to_le_bytes());
}

/// Writes count `i` (site `site`, `hits`) of the [`Meta::Counts`] entry starting at `entry`.
pub fn put_count(entry: &mut [u8], i: usize, site: u32, hits: u64) {
    let at = counts_entry_len(i);
    entry[at..at + 4].copy_from_slice(&site.to_le_bytes());
    entry[at + 4..at + COUNT_SIZE].copy_from_slice(&hits.to_le_bytes());
}

/// The (site id, hits) pairs of a [`Meta::Counts`] entry's `counts`.
pub fn counts(counts: &[u8]) -> impl Iterator<Item = (u32, u64)> + '_ {
    counts
        .chunks_exact(COUNT_SIZE)
        .map(|c| (u32_at(c, 0), u64_at(c, 4)))
}

impl<'a> Meta<'a> {
    /// Bytes [`Meta::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        match self {
            Meta::Site {
                provider,
                name,
                function,
                ..
            } => 1 + 4 + 1 + 4 + 8 + 12 + provider.len() + name.len() + function.len(),
            Meta::Thread { name, .. } => 1 + 4 + 4 + name.len(),
            Meta::Counts { counts } => COUNTS_HEADER + counts.len(),
            Meta::Table { table, .. } => TABLE_HEADER + table.len(),
            Meta::TableFile { build_id, name, .. } => {
                TABLE_FILE_HEADER + build_id.len() + name.len()
            }
        }
    }

    /// Writes the entry at the start of `out` (at least [`Meta::encoded_len`] bytes); returns
    /// the bytes written.
    pub fn encode(&self, out: &mut [u8]) -> usize {
        let mut at = 0;
        let mut put = |b: &[u8]| {
            out[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        };
        let string = |put: &mut dyn FnMut(&[u8]), s: &[u8]| {
            put(&(s.len() as u32).to_le_bytes());
            put(s);
        };
        match *self {
            Meta::Site {
                id,
                kind,
                func_offset,
                address,
                provider,
                name,
                function,
            } => {
                put(&[META_SITE]);
                put(&id.to_le_bytes());
                put(&[kind]);
                put(&func_offset.to_le_bytes());
                put(&address.to_le_bytes());
                string(&mut put, provider);
                string(&mut put, name);
                string(&mut put, function);
            }
            Meta::Thread { tid, name, given } => {
                put(&[if given {
                    META_THREAD_GIVEN
                } else {
                    META_THREAD
                }]);
                put(&tid.to_le_bytes());
                string(&mut put, name);
            }
            Meta::Counts { counts } => {
                let n = (counts.len() / COUNT_SIZE) as u32;
                let mut header = [0u8; COUNTS_HEADER];
                put_counts_header(&mut header, n);
                put(&header);
                put(counts);
            }
            Meta::Table {
                first_id,
                address,
                table,
            } => {
                put(&table_header(first_id, address, table.len()));
                put(table);
            }
            Meta::TableFile {
                first_id,
                address,
                len,
                offset,
                size,
                build_id,
                name,
            } => {
                put(&[META_TABLE_FILE]);
                put(&first_id.to_le_bytes());
                for word in [address, len, offset, size] {
                    put(&word.to_le_bytes());
                }
                string(&mut put, build_id);
                string(&mut put, name);
            }
        }
        at
    }

    /// Decodes the entry at the start of `b`: the entry and its length, or `None` if `b` does
    /// not hold a whole entry with a known tag.
    pub fn decode(b: &[u8]) -> Option<(Meta<'_>, usize)> {
        let mut at = 1;
        let take = |at: &mut usize, n: usize| -> Option<&[u8]> {
            let end = at.checked_add(n)?;
            let s = b.get(*at..end)?;
            *at = end;
            Some(s)
        };
        let u32_of = |at: &mut usize| take(at, 4).map(|s| u32_at(s, 0));
        let string = |at: &mut usize| {
            let n = u32_of(at)? as usize;
            take(at, n)
        };
        let meta = match *b.first()? {
            META_SITE => {
                let id = u32_of(&mut at)?;
                let kind = take(&mut at, 1)?[0];
                let func_offset = u32_of(&mut at)?;
                let address = u64_at(take(&mut at, 8)?, 0);
                Meta::Site {
                    id,
                    kind,
                    func_offset,
                    address,
                    provider: string(&mut at)?,
                    name: string(&mut at)?,
                    function: string(&mut at)?,
                }
            }
            tag @ (META_THREAD | META_THREAD_GIVEN) => Meta::Thread {
                tid: u32_of(&mut at)?,
                name: string(&mut at)?,
                given: tag == META_THREAD_GIVEN,
            },
            META_COUNTS => {
                let n = u32_of(&mut at)? as usize;
                Meta::Counts {
                    counts: take(&mut at, n.checked_mul(COUNT_SIZE)?)?,
                }
            }
            META_TABLE => Meta::Table {
                first_id: u32_of(&mut at)?,
                address: u64_at(take(&mut at, 8)?, 0),
                table: string(&mut at)?,
            },
            META_TABLE_FILE => {
                let first_id = u32_of(&mut at)?;
                let mut word = || take(&mut at, 8).map(|s| u64_at(s, 0));
                let (address, len, offset, size) = (word()?, word()?, word()?, word()?);
                Meta::TableFile {
                    first_id,
                    address,
                    len,
                    offset,
                    size,
                    build_id: string(&mut at)?,
                    name: string(&mut at)?,
                }
            }
            _ => return None,
        };
        Some((meta, at))
    }

    /// A [`Meta::TableFile`] entry as the [`Meta::Table`] entry whose bytes, read from its file,
    /// are `table`; any other entry as it is.
    pub fn with_table<'b>(self, table: &'b [u8]) -> Meta<'b>
    where
        'a: 'b,
    {
        match self {
            Meta::TableFile {
                first_id, address, ..
            } => Meta::Table {
                first_id,
                address,
                table,
            },
            other => other,
        }
    }

    /// The sites this entry describes, each as a [`Meta::Site`]: a site entry itself, a table
    /// entry's sites in table order (up to the first malformed fragment, where the runtime
    /// stopped reading it too; a name outside the table reads as empty), nothing for the others.
    pub fn sites(&self) -> impl Iterator<Item = Meta<'a>> + 'a {
        let (site, table) = match *self {
            Meta::Site { .. } => (Some(*self), None),
            Meta::Table {
                first_id,
                address,
                table,
            } => (None, Some((first_id, address, table))),
            _ => (None, None),
        };
        let from_table = table.into_iter().flat_map(|(first_id, address, table)| {
            let name = move |at: Option<u64>| {
                at.and_then(|a| usize::try_from(a.wrapping_sub(address)).ok())
                    .and_then(|at| table.get(at..))
                    .map_or(&[][..], |rest| {
                        &rest[..rest.iter().position(|&c| c == 0).unwrap_or(rest.len())]
                    })
            };
            crate::sites(table, address)
                .map_while(Result::ok)
                .zip(first_id..)
                .map(move |(s, id)| Meta::Site {
                    id,
                    kind: s.kind as u8,
                    func_offset: s.func_offset,
                    address: s.site,
                    provider: name(s.provider),
                    name: name(s.name),
                    function: name(s.function),
                })
        });
        site.into_iter().chain(from_table)
    }
}

/// Chunks a metadata blob of `len` bytes occupies.
pub const fn meta_chunks(len: u64) -> u64 {
    (CHUNK_HEADER_SIZE as u64 + len).div_ceil(CHUNK_SIZE as u64)
}

/// The `session` file `bootprof run` writes in a session directory.
///
/// ```text
/// 0   8  magic "BPSESSN\0"
/// 8   4  version (1)
/// 12  4  root pid (the program bootprof run started)
/// 16  16 boot id
/// 32  8  TSC at the start, 40 8 CLOCK_MONOTONIC ns at the start
/// 48  8  TSC at the end,   56 8 CLOCK_MONOTONIC ns at the end (0 while it runs)
/// 64  4  keep mode, 68 4 the root's end kind, 72 4 its code
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SessionHeader {
    /// The program's pid.
    pub root_pid: u32,
    /// The kernel's boot id.
    pub boot_id: [u8; 16],
    /// TSC and monotonic nanoseconds at the start.
    pub start: (u64, u64),
    /// TSC and monotonic nanoseconds at the end ((0, 0) while it runs).
    pub end: (u64, u64),
    /// Keep mode.
    pub keep: u32,
    /// How the root program ended ([`End`]) and its code.
    pub root_end: (u32, u32),
}

/// First bytes of a session file.
pub const SESSION_MAGIC: [u8; 8] = *b"BPSESSN\0";
/// Size of a session file.
pub const SESSION_SIZE: usize = 76;

impl SessionHeader {
    /// The session file's bytes.
    pub fn encode(&self) -> [u8; SESSION_SIZE] {
        let mut b = [0u8; SESSION_SIZE];
        b[..8].copy_from_slice(&SESSION_MAGIC);
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        b[12..16].copy_from_slice(&self.root_pid.to_le_bytes());
        b[16..32].copy_from_slice(&self.boot_id);
        b[32..40].copy_from_slice(&self.start.0.to_le_bytes());
        b[40..48].copy_from_slice(&self.start.1.to_le_bytes());
        b[48..56].copy_from_slice(&self.end.0.to_le_bytes());
        b[56..64].copy_from_slice(&self.end.1.to_le_bytes());
        b[64..68].copy_from_slice(&self.keep.to_le_bytes());
        b[68..72].copy_from_slice(&self.root_end.0.to_le_bytes());
        b[72..76].copy_from_slice(&self.root_end.1.to_le_bytes());
        b
    }

    /// Decodes a session file.
    pub fn decode(b: &[u8]) -> Result<SessionHeader, &'static str> {
        if b.len() < SESSION_SIZE || b[..8] != SESSION_MAGIC {
            return Err("not a bootprof session file");
        }
        if u32_at(b, 8) != 1 {
            return Err("unknown session version");
        }
        let mut boot_id = [0; 16];
        boot_id.copy_from_slice(&b[16..32]);
        Ok(SessionHeader {
            root_pid: u32_at(b, 12),
            boot_id,
            start: (u64_at(b, 32), u64_at(b, 40)),
            end: (u64_at(b, 48), u64_at(b, 56)),
            keep: u32_at(b, 64),
            root_end: (u32_at(b, 68), u32_at(b, 72)),
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn a_record_survives_its_words() {
        let mut slots = [0u8; 3 * SLOT_SIZE];
        let (w0, w1) = record_words(MAX_DELTA, MAX_SITE_ID, 3, MAX_NARROW_ARG);
        slots[..8].copy_from_slice(&w0.to_le_bytes());
        slots[8..16].copy_from_slice(&w1.to_le_bytes());
        // A wide argument: the record, then its argument slot.
        let (w0, w1) = record_words(7, 0x12345, 3 | KIND_WIDE_ARG, 0);
        slots[16..24].copy_from_slice(&w0.to_le_bytes());
        slots[24..32].copy_from_slice(&w1.to_le_bytes());
        slots[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        slots[40..48].copy_from_slice(&((KIND_ARG_SLOT as u64) << 56).to_le_bytes());
        let mut got = [None; 2];
        let mut n = 0;
        let stats = slot_records(100, &slots, |r| {
            got[n] = Some(r);
            n += 1;
        });
        assert_eq!(stats.records, 2);
        let r = got[0].unwrap();
        assert_eq!(
            (r.tsc, r.site, r.kind, r.arg),
            (
                100 + MAX_DELTA,
                MAX_SITE_ID,
                RecordKind::Event,
                MAX_NARROW_ARG
            )
        );
        let r = got[1].unwrap();
        assert_eq!(
            (r.tsc, r.site, r.kind, r.arg),
            (107, 0x12345, RecordKind::Event, u64::MAX)
        );
    }

    /// The FRAME records of a stack read back in order after their hit, with its time and site.
    #[test]
    fn a_stack_reads_back_after_its_hit() {
        let mut slots = [0u8; 3 * SLOT_SIZE];
        let kinds = [RecordKind::Event, RecordKind::Frame, RecordKind::Frame];
        for (i, (kind, arg)) in kinds.into_iter().zip([7, 0x401020, 0x401234]).enumerate() {
            let (w0, w1) = record_words(5, 2, kind as u8, arg);
            slots[i * SLOT_SIZE..][..8].copy_from_slice(&w0.to_le_bytes());
            slots[i * SLOT_SIZE + 8..][..8].copy_from_slice(&w1.to_le_bytes());
        }
        let mut got = [None; 3];
        let mut n = 0;
        let stats = slot_records(100, &slots, |r| {
            got[n] = Some((r.tsc, r.site, r.kind, r.arg));
            n += 1;
        });
        assert_eq!((stats.records, stats.bad), (3, 0));
        assert_eq!(
            got,
            [
                Some((105, 2, RecordKind::Event, 7)),
                Some((105, 2, RecordKind::Frame, 0x401020)),
                Some((105, 2, RecordKind::Frame, 0x401234)),
            ]
        );
    }

    #[test]
    fn a_slot_without_its_commit_byte_is_torn_not_read() {
        let mut slots = [0u8; 2 * SLOT_SIZE];
        slots[0] = 5; // a TSC written, the kind byte not yet
        let (w0, w1) = record_words(9, 1, 1, 0);
        slots[16..24].copy_from_slice(&w0.to_le_bytes());
        slots[24..32].copy_from_slice(&w1.to_le_bytes());
        let stats = slot_records(0, &slots, |r| assert_eq!(r.tsc, 9));
        assert_eq!((stats.records, stats.torn), (1, 1));
    }

    #[test]
    fn metadata_entries_round_trip_and_refuse_a_cut() {
        let site = Meta::Site {
            id: 7,
            kind: 2,
            func_offset: 4,
            address: 0x401000,
            provider: b"app",
            name: b"start",
            function: b"main",
        };
        let mut buf = [0u8; 64];
        let n = site.encode(&mut buf);
        assert_eq!(n, site.encoded_len());
        assert_eq!(Meta::decode(&buf[..n]), Some((site, n)));
        for cut in 0..n {
            assert_eq!(Meta::decode(&buf[..cut]), None);
        }
    }

    /// A table entry names its sites as the site entries it replaces would: ids from its first
    /// id in table order, addresses and names resolved in the copy; a name outside the copy
    /// reads as empty, and the sites before a malformed fragment are kept.
    #[test]
    fn a_table_entry_reads_as_its_sites() {
        use crate::{
            encode_entry, encode_header, field, Form, Kind, ENTRY_SIZE, HEADER_SIZE, VERSION_1,
        };
        let names = b"app\0start\0main\0\0";
        let size = HEADER_SIZE + 2 * ENTRY_SIZE + names.len();
        let mut table = std::vec![0u8; size + 4];
        table[..HEADER_SIZE].copy_from_slice(&encode_header(VERSION_1, 2, size as u32));
        let pool = HEADER_SIZE + 2 * ENTRY_SIZE;
        table[pool..size].copy_from_slice(names);
        for (i, kind) in [Kind::Probe, Kind::Fentry].into_iter().enumerate() {
            let e = HEADER_SIZE + i * ENTRY_SIZE;
            table[e..e + ENTRY_SIZE].copy_from_slice(&encode_entry(kind, Form::CallRel32, 9, &[]));
            let mut set = |f: usize, to: i64| {
                let v = (to - (e + f) as i64) as i32;
                table[e + f..e + f + 4].copy_from_slice(&v.to_le_bytes());
            };
            set(field::SITE, -0x100);
            set(field::NAME, pool as i64 + 4);
            set(field::FUNCTION, pool as i64 + 10);
            if kind == Kind::Probe {
                set(field::PROVIDER, pool as i64);
            } else {
                // A provider far outside the table.
                set(field::PROVIDER, 0x10_0000);
            }
        }
        // A malformed fragment after the first: its sites are not read.
        table[size] = 1;
        let entry = Meta::Table {
            first_id: 40,
            address: 0x5000,
            table: &table,
        };
        let mut buf = std::vec![0u8; entry.encoded_len()];
        let n = entry.encode(&mut buf);
        assert_eq!(n, buf.len());
        // What a writer that sends the table from a file puts before it is the entry's start.
        assert_eq!(
            table_header(40, 0x5000, table.len()),
            buf[..TABLE_HEADER],
            "table_header"
        );
        let (meta, m) = Meta::decode(&buf).unwrap();
        assert_eq!((meta, m), (entry, n));
        for cut in 0..n {
            assert_eq!(Meta::decode(&buf[..cut]), None);
        }
        let sites: std::vec::Vec<Meta> = meta.sites().collect();
        let site = |id, kind: Kind, provider: &'static [u8]| Meta::Site {
            id,
            kind: kind as u8,
            func_offset: 9,
            address: 0x5000 - 0x100,
            provider,
            name: b"start",
            function: b"main",
        };
        assert_eq!(
            sites,
            [site(40, Kind::Probe, b"app"), site(41, Kind::Fentry, b"")]
        );
        assert_eq!(sites[0].sites().collect::<std::vec::Vec<_>>(), [sites[0]]);
    }

    /// Counts written in place, count by count, read back as the encoder would write them.
    #[test]
    fn counts_written_in_place_round_trip_and_refuse_a_cut() {
        let mut entry = [0u8; counts_entry_len(2)];
        put_counts_header(&mut entry, 2);
        put_count(&mut entry, 0, 7, u64::MAX);
        put_count(&mut entry, 1, MAX_SITE_ID + 1, 0);
        let (meta, n) = Meta::decode(&entry).unwrap();
        assert_eq!(n, entry.len());
        let Meta::Counts { counts: c } = meta else {
            panic!("{meta:?}");
        };
        let got: [(u32, u64); 2] = {
            let mut it = counts(c);
            [it.next().unwrap(), it.next().unwrap()]
        };
        assert_eq!(got, [(7, u64::MAX), (MAX_SITE_ID + 1, 0)]);
        let mut again = [0u8; counts_entry_len(2)];
        assert_eq!(meta.encode(&mut again), entry.len());
        assert_eq!((again, meta.encoded_len()), (entry, entry.len()));
        for cut in 0..n {
            assert_eq!(Meta::decode(&entry[..cut]), None);
        }
        // A count of entries no blob could hold is refused, not multiplied past usize.
        put_counts_header(&mut entry, u32::MAX);
        assert_eq!(Meta::decode(&entry), None);
    }

    /// A table-file entry round-trips, names its file by its device and inode, describes no
    /// sites by itself (its reader reads the file), and a cut entry is refused.
    #[test]
    fn table_file_entries_round_trip_and_refuse_a_cut() {
        let mut room = [0u8; OBJECT_FILE_NAME_MAX];
        let name = object_file_name(0xfe00, u64::MAX, &mut room);
        assert_eq!(name, "object-fe00-18446744073709551615");
        let mut room2 = [0u8; OBJECT_FILE_NAME_MAX];
        let longest = object_file_name(u64::MAX, u64::MAX, &mut room2);
        assert_eq!(longest.len(), OBJECT_FILE_NAME_MAX);
        assert_eq!(object_file_name(0, 0, &mut room2), "object-0-0");
        let entry = Meta::TableFile {
            first_id: 40,
            address: 0x5000,
            len: 923_160,
            offset: 1_897_808,
            size: 3_357_680,
            build_id: &[0x55, 0xcb, 0x8d, 0x31],
            name: name.as_bytes(),
        };
        let mut buf = std::vec![0u8; entry.encoded_len()];
        assert_eq!(entry.encode(&mut buf), buf.len());
        let (meta, n) = Meta::decode(&buf).unwrap();
        assert_eq!((meta, n), (entry, buf.len()));
        assert_eq!(meta.sites().count(), 0);
        // Its table read from the file, it is the table entry of those bytes.
        let table = [1u8, 2, 3];
        let read = Meta::Table {
            first_id: 40,
            address: 0x5000,
            table: &table,
        };
        assert_eq!(
            (meta.with_table(&table), read.with_table(&[])),
            (read, read)
        );
        for cut in 0..n {
            assert_eq!(Meta::decode(&buf[..cut]), None);
        }
    }
}
