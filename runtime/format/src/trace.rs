//! The trace file the runtime's recorder dumps (`bootprof.<pid>.trace`) and `bootprof report`
//! reads: everything a report needs (site names, thread names, the TSC frequency), versioned.
//!
//! ```text
//! offset  size  field
//! 0       8     magic "BPTRACE\0"
//! 8       4     version (1)
//! 12      4     header size (64)
//! 16      8     TSC ticks per second
//! 24      8     TSC at the start of recording (the first registration)
//! 32      4     pid
//! 36      4     number of sites
//! 40      4     number of threads
//! 44      4     size of the string pool, bytes
//! 48      8     number of records
//! 56      8     number of records dropped because the buffer was full
//! 64            sites:   count x 32 bytes  (SiteEntry)
//!               threads: count x 8 bytes   (tid u32, name: string offset u32, u32::MAX = none)
//!               strings: NUL-terminated names; offsets are from the start of the pool
//!               records: count x 32 bytes  (Record), sorted by TSC
//! ```
//!
//! A `SiteEntry` is `id u32, kind u8, pad [u8;3], name u32, function u32, provider u32,
//! func_offset u32, pad u32, address u64` (string offsets, u32::MAX = none). A `Record` is
//! `tsc u64, arg u64, tid u32, site u32, kind u8, pad [u8;7]`. All little-endian.
//!
//! A hit whose call stack was recorded (`bootprof run --stacktrace`) is followed by one FRAME
//! record per frame of that stack, innermost first: the site's address, then the return
//! addresses of its callers. They carry the hit's thread, time and site, so in the TSC order of
//! the file they come right after the hit's own record (the sort that orders a trace is stable,
//! and a thread's records reach it in the order they were written). A FRAME record that does not
//! follow a record of its thread, time and site (its hit was overwritten or lost) belongs to no
//! hit. A reader that predates FRAME refuses a trace holding one: its kind (9) is unknown to it.

/// First bytes of a trace file.
pub const MAGIC: [u8; 8] = *b"BPTRACE\0";
/// The version described here.
pub const VERSION: u32 = 1;
/// Size of the header.
pub const HEADER_SIZE: usize = 64;
/// Size of a site entry.
pub const SITE_SIZE: usize = 32;
/// Size of a thread entry.
pub const THREAD_SIZE: usize = 8;
/// Size of a record.
pub const RECORD_SIZE: usize = 32;
/// "No string".
pub const NONE: u32 = u32::MAX;
/// The `site` of a record not tied to a site (e.g. a thread's name).
pub const NO_SITE: u32 = u32::MAX;

/// What a record says.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordKind {
    /// A function (or annotated region) starts; `arg` is the parent (return) address for `-pg`
    /// hooks, the function's address (`this_fn`) for `-finstrument-functions` hooks.
    Enter = 1,
    /// A function (or annotated region) ends; `arg` is the function's address (`this_fn`) for
    /// `-finstrument-functions` hooks.
    Exit = 2,
    /// A point event (a named probe); `arg` is the probe's first argument.
    Event = 3,
    /// The thread starts waiting for `what` (the site's name).
    Wait = 4,
    /// The thread stops waiting.
    Unwait = 5,
    /// The thread takes a hold on `what` (others may wait for it).
    Hold = 6,
    /// The thread releases its hold.
    Release = 7,
    /// The thread names itself: the site's name is the thread's name.
    Thread = 8,
    /// One frame of the call stack recorded at the hit just before it (of the same thread, time
    /// and site); `arg` is the address: the site's for the first FRAME of a hit, then return
    /// addresses, innermost first.
    Frame = 9,
}

impl RecordKind {
    /// The kind stored as `byte`.
    #[inline]
    pub fn from_u8(byte: u8) -> Option<RecordKind> {
        use RecordKind::*;
        // A match, not a search: every record a report reads is decoded through here.
        Some(match byte {
            1 => Enter,
            2 => Exit,
            3 => Event,
            4 => Wait,
            5 => Unwait,
            6 => Hold,
            7 => Release,
            8 => Thread,
            9 => Frame,
            _ => return None,
        })
    }

    /// Upper-case name, as TSLOG prints it.
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Enter => "ENTER",
            RecordKind::Exit => "EXIT",
            RecordKind::Event => "EVENT",
            RecordKind::Wait => "WAIT",
            RecordKind::Unwait => "UNWAIT",
            RecordKind::Hold => "HOLD",
            RecordKind::Release => "RELEASE",
            RecordKind::Thread => "THREAD",
            RecordKind::Frame => "FRAME",
        }
    }
}

/// One record, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Time stamp counter.
    pub tsc: u64,
    /// The argument (see [`RecordKind`]).
    pub arg: u64,
    /// Thread id.
    pub tid: u32,
    /// Index into the trace's sites, or [`NO_SITE`].
    pub site: u32,
    /// What happened.
    pub kind: RecordKind,
}

impl Record {
    /// The 32 bytes of this record.
    pub fn encode(&self) -> [u8; RECORD_SIZE] {
        let mut b = [0u8; RECORD_SIZE];
        b[0..8].copy_from_slice(&self.tsc.to_le_bytes());
        b[8..16].copy_from_slice(&self.arg.to_le_bytes());
        b[16..20].copy_from_slice(&self.tid.to_le_bytes());
        b[20..24].copy_from_slice(&self.site.to_le_bytes());
        b[24] = self.kind as u8;
        b
    }

    /// Decodes 32 bytes; `None` if the kind byte is unknown.
    #[inline]
    pub fn decode(b: &[u8; RECORD_SIZE]) -> Option<Record> {
        let u64_at = |i: usize| crate::le::u64_at(b, i);
        let u32_at = |i: usize| crate::le::u32_at(b, i);
        Some(Record {
            tsc: u64_at(0),
            arg: u64_at(8),
            tid: u32_at(16),
            site: u32_at(20),
            kind: RecordKind::from_u8(b[24])?,
        })
    }
}

/// Writes a whole trace file, part by part, through `put`: the header (with its four counts
/// taken from the parts; `tsc_hz`, `start_tsc`, `pid` and `dropped` from `header`), the sites,
/// the threads as (tid, name offset) pairs, the string pool and the records. The one encoder the
/// runtime's dump and the synthetic traces of tests share.
pub fn write_trace<E>(
    header: TraceHeader,
    sites: &[SiteEntry],
    threads: &[(u32, u32)],
    strings: &[u8],
    records: &[Record],
    mut put: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let header = TraceHeader {
        sites: sites.len() as u32,
        threads: threads.len() as u32,
        strings: strings.len() as u32,
        records: records.len() as u64,
        ..header
    };
    put(&header.encode())?;
    for s in sites {
        put(&s.encode())?;
    }
    for (tid, name) in threads {
        put(&tid.to_le_bytes())?;
        put(&name.to_le_bytes())?;
    }
    put(strings)?;
    for r in records {
        put(&r.encode())?;
    }
    Ok(())
}

/// The header's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TraceHeader {
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// TSC at the start of recording.
    pub start_tsc: u64,
    /// Process id.
    pub pid: u32,
    /// Number of sites.
    pub sites: u32,
    /// Number of threads.
    pub threads: u32,
    /// String pool size.
    pub strings: u32,
    /// Number of records.
    pub records: u64,
    /// Records dropped because the buffer was full.
    pub dropped: u64,
}

impl TraceHeader {
    /// The 64 header bytes.
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(HEADER_SIZE as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.tsc_hz.to_le_bytes());
        b[24..32].copy_from_slice(&self.start_tsc.to_le_bytes());
        b[32..36].copy_from_slice(&self.pid.to_le_bytes());
        b[36..40].copy_from_slice(&self.sites.to_le_bytes());
        b[40..44].copy_from_slice(&self.threads.to_le_bytes());
        b[44..48].copy_from_slice(&self.strings.to_le_bytes());
        b[48..56].copy_from_slice(&self.records.to_le_bytes());
        b[56..64].copy_from_slice(&self.dropped.to_le_bytes());
        b
    }

    /// Decodes and checks a header; the error says what is wrong.
    pub fn decode(b: &[u8]) -> Result<TraceHeader, &'static str> {
        if b.len() < HEADER_SIZE {
            return Err("shorter than the 64-byte header");
        }
        if b[0..8] != MAGIC {
            return Err("not a bootprof trace (bad magic)");
        }
        let u32_at = |i: usize| crate::le::u32_at(b, i);
        let u64_at = |i: usize| crate::le::u64_at(b, i);
        if u32_at(8) != VERSION {
            return Err("unknown trace version");
        }
        if u32_at(12) as usize != HEADER_SIZE {
            return Err("unknown header size");
        }
        Ok(TraceHeader {
            tsc_hz: u64_at(16),
            start_tsc: u64_at(24),
            pid: u32_at(32),
            sites: u32_at(36),
            threads: u32_at(40),
            strings: u32_at(44),
            records: u64_at(48),
            dropped: u64_at(56),
        })
    }

    /// Total file size these counts imply, or `None` on overflow.
    pub fn file_size(&self) -> Option<u64> {
        (HEADER_SIZE as u64)
            .checked_add(u64::from(self.sites).checked_mul(SITE_SIZE as u64)?)?
            .checked_add(u64::from(self.threads).checked_mul(THREAD_SIZE as u64)?)?
            .checked_add(u64::from(self.strings))?
            .checked_add(self.records.checked_mul(RECORD_SIZE as u64)?)
    }
}

/// One site entry, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteEntry {
    /// The runtime's site id.
    pub id: u32,
    /// [`crate::Kind`] as a byte.
    pub kind: u8,
    /// String offset of the probe name (hook symbol for hooks), or [`NONE`].
    pub name: u32,
    /// String offset of the enclosing function, or [`NONE`].
    pub function: u32,
    /// String offset of the provider, or [`NONE`].
    pub provider: u32,
    /// Offset in the function.
    pub func_offset: u32,
    /// Address of the site in the traced process.
    pub address: u64,
}

impl SiteEntry {
    /// The 32 bytes of this entry.
    pub fn encode(&self) -> [u8; SITE_SIZE] {
        let mut b = [0u8; SITE_SIZE];
        b[0..4].copy_from_slice(&self.id.to_le_bytes());
        b[4] = self.kind;
        b[8..12].copy_from_slice(&self.name.to_le_bytes());
        b[12..16].copy_from_slice(&self.function.to_le_bytes());
        b[16..20].copy_from_slice(&self.provider.to_le_bytes());
        b[20..24].copy_from_slice(&self.func_offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.address.to_le_bytes());
        b
    }

    /// Decodes 32 bytes.
    pub fn decode(b: &[u8; SITE_SIZE]) -> SiteEntry {
        let u32_at = |i: usize| crate::le::u32_at(b, i);
        SiteEntry {
            id: u32_at(0),
            kind: b[4],
            name: u32_at(8),
            function: u32_at(12),
            provider: u32_at(16),
            func_offset: u32_at(20),
            address: crate::le::u64_at(b, 24),
        }
    }
}

/// How a hit becomes a record, the one rule shared by the recorder and the reports.
///
/// | site | record |
/// |---|---|
/// | `__fentry__`, `mcount` | ENTER of the enclosing function (`arg`: parent address) |
/// | `__cyg_profile_func_enter` | ENTER of the function at `this_fn` (`arg`), the enclosing one unless inlined there |
/// | `__cyg_profile_func_exit` | EXIT of the function at `this_fn` (`arg`) |
/// | probe `bootprof:enter` / `bootprof:exit` (`BOOTPROF_ENTER()`/`EXIT()`) | ENTER / EXIT of the enclosing function |
/// | probe `bpevent:<name>` (`BOOTPROF_EVENT(name)`) | EVENT `<name>` |
/// | probe `bpwait:<what>`, `bpunwait:<what>` | WAIT / UNWAIT on `<what>` |
/// | probe `bphold:<what>`, `bprelease:<what>` | HOLD / RELEASE of `<what>` |
/// | probe `bpthread:<name>` (`BOOTPROF_THREAD(name)`) | THREAD: this thread is `<name>` |
/// | any other probe `<provider>:<name>` | EVENT `<provider>:<name>` (`arg`: its first argument) |
/// | is-enabled tests | nothing |
pub fn record_kind(kind: crate::Kind, provider: &str, name: &str) -> Option<RecordKind> {
    use crate::Kind;
    Some(match kind {
        Kind::Fentry | Kind::Mcount | Kind::CygEnter => RecordKind::Enter,
        Kind::CygExit => RecordKind::Exit,
        Kind::IsEnabled => return None,
        Kind::Probe => match (provider, name) {
            ("bootprof", "enter") => RecordKind::Enter,
            ("bootprof", "exit") => RecordKind::Exit,
            ("bpwait", _) => RecordKind::Wait,
            ("bpunwait", _) => RecordKind::Unwait,
            ("bphold", _) => RecordKind::Hold,
            ("bprelease", _) => RecordKind::Release,
            ("bpthread", _) => RecordKind::Thread,
            _ => RecordKind::Event,
        },
    })
}

/// The name a report shows for a record of `kind` at a site: the function for ENTER/EXIT, the
/// bare name for the annotation providers, `provider:name` for other events.
pub fn display_name<'a>(
    kind: RecordKind,
    provider: &'a str,
    name: &'a str,
    function: &'a str,
) -> DisplayName<'a> {
    match kind {
        RecordKind::Enter | RecordKind::Exit => DisplayName::One(function),
        _ if matches!(
            provider,
            "bpevent" | "bpwait" | "bpunwait" | "bphold" | "bprelease" | "bpthread"
        ) =>
        {
            DisplayName::One(name)
        }
        _ => DisplayName::Two(provider, name),
    }
}

/// A name made of one part, or of `provider:name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisplayName<'a> {
    /// Shown as is.
    One(&'a str),
    /// Shown as `provider:name`.
    Two(&'a str, &'a str),
}

impl core::fmt::Display for DisplayName<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DisplayName::One(a) => f.write_str(a),
            DisplayName::Two(a, b) => write!(f, "{a}:{b}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind byte reads back as the kind stored with it, and no other byte reads as one.
    #[test]
    fn kind_bytes_round_trip() {
        let kinds = (0..=u8::MAX).filter_map(RecordKind::from_u8);
        assert_eq!(kinds.clone().count(), 9);
        for k in kinds {
            assert_eq!(RecordKind::from_u8(k as u8), Some(k));
        }
        assert_eq!(RecordKind::from_u8(RecordKind::Frame as u8 + 1), None);
    }
}
