//! Reading a trace file: takes the bytes the runtime's recorder dumped (layout and record
//! semantics in `bootprof_format::trace`); hands on a [`Trace`] with every string resolved and
//! every record checked.
//!
//! Nothing in the file is trusted: every count is checked against the file size with checked
//! arithmetic, every string offset against the pool, every record's kind and site index, and
//! the order of the records. Anything wrong is an [`Error::Malformed`] naming the part of the
//! file (`header`, `sites`, `threads`, `strings`, `records`) and the offset **from the start of
//! the file** of the offending field, so `xxd -s OFFSET` shows it.
//!
//! A file cut short (a full disk, a writer killed while dumping) is data up to the cut: what is
//! complete before it is read, names past it show as `?`, and [`Trace::truncated`] says where it
//! ends and how much is missing. Only a header that cannot be trusted (too short, bad magic or
//! version, no TSC frequency, counts that overflow) is refused.

use crate::error::{Error, Location, Result};
use crate::records::Records;
use bootprof_format::le::u32_at;
use bootprof_format::trace::{
    Record, SiteEntry, TraceHeader, HEADER_SIZE, MAGIC, NONE, NO_SITE, RECORD_SIZE, SITE_SIZE,
    THREAD_SIZE, VERSION,
};
use bootprof_format::Kind;
use std::path::Path;

/// A trace, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The header (counts, TSC frequency, start, pid).
    pub header: TraceHeader,
    /// The sites, indexed by [`Record::site`].
    pub sites: Vec<TraceSite>,
    /// The threads the recorder saw: tid and name, if the thread named itself.
    pub threads: Vec<(u32, Option<String>)>,
    /// The records, sorted by TSC.
    pub records: Records,
    /// Where the file was cut short, if it was.
    pub truncated: Option<Truncation>,
    /// The processes of a session, in the order they started (empty for a single trace file,
    /// whose process is the header's pid).
    pub processes: Vec<crate::process::Process>,
    /// For a session: each thread's key (a record's `tid`) -> its process (an index into
    /// `processes`) and its real thread id. Keys are real tids unless two processes share one.
    pub thread_process: std::collections::HashMap<u32, (usize, u32)>,
    /// Parts of a session that could not be read (one line each).
    pub problems: Vec<String>,
}

/// How a trace file was cut short; everything before the cut was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The part of the file the cut falls in: `sites`, `threads`, `strings` or `records`.
    pub part: &'static str,
    /// The file's length.
    pub len: u64,
    /// The length its header's counts promise.
    pub expected_len: u64,
    /// Records the header promises that could not be read.
    pub records_missing: u64,
}

impl std::fmt::Display for Truncation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cut short in its {} at byte {:#x} of {:#x}: {} bytes and {} records are missing",
            self.part,
            self.len,
            self.expected_len,
            self.expected_len - self.len,
            self.records_missing
        )
    }
}

impl Trace {
    /// Shows C++ and Rust functions by their demangled names (`Json::Value::asString() const`,
    /// not `_ZNK4Json5Value8asStringEv`), keeping each symbol in [`TraceSite::symbol`]. Every
    /// report shows `function`; `--no-demangle` skips this.
    pub fn demangle_names(&mut self) {
        let mut seen: std::collections::HashMap<String, Option<String>> = Default::default();
        for site in &mut self.sites {
            if site.symbol.is_some() {
                continue;
            }
            let demangled = seen
                .entry(site.function.clone())
                .or_insert_with_key(|f| bootprof_format::demangle::demangle(f));
            if let Some(d) = demangled {
                site.symbol = Some(std::mem::replace(&mut site.function, d.clone()));
            }
        }
    }

    /// What the trace does not hold, in one line, if anything: records the recorder dropped
    /// because its buffer was full, and records lost where the file was cut short; and, for a
    /// process that measured intervals, that only its kept windows are there (what a report's
    /// header says; [`Trace::losses_only`] leaves that out).
    pub fn losses(&self) -> Option<String> {
        self.losses_with(crate::process::Process::notes)
    }

    /// [`Trace::losses`] without what is left out by design (the windows of a latency run).
    pub fn losses_only(&self) -> Option<String> {
        self.losses_with(crate::process::Process::losses)
    }

    fn losses_with(
        &self,
        of_process: fn(&crate::process::Process) -> Option<String>,
    ) -> Option<String> {
        let dropped = (self.header.dropped > 0).then(|| {
            format!(
                "{} records were dropped (the recording buffer was full)",
                self.header.dropped
            )
        });
        let cut = self
            .truncated
            .as_ref()
            .map(|c| format!("the trace file was {c}"));
        let mut parts: Vec<String> = if self.processes.is_empty() {
            dropped.into_iter().chain(cut).collect()
        } else {
            self.processes
                .iter()
                .filter_map(|p| Some(format!("{}: {}", p.label(), of_process(p)?)))
                .collect()
        };
        parts.extend(self.problems.iter().cloned());
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// The process of the thread keyed `tid` (a session's), if the trace is a session.
    pub fn process_of(&self, tid: u32) -> Option<(usize, &crate::process::Process)> {
        let &(p, _) = self.thread_process.get(&tid)?;
        Some((p, self.processes.get(p)?))
    }

    /// The real thread id of the thread keyed `tid`.
    pub fn real_tid(&self, tid: u32) -> u32 {
        self.thread_process.get(&tid).map_or(tid, |&(_, t)| t)
    }
}

/// One site of a trace, with its strings resolved (an absent string is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSite {
    /// What the site is.
    pub kind: Kind,
    /// The probe's provider (empty for hooks).
    pub provider: String,
    /// The probe's name, or the hook symbol.
    pub name: String,
    /// The enclosing function: its symbol as recorded, or its demangled name once
    /// [`Trace::demangle_names`] has run (the symbol then in `symbol`).
    pub function: String,
    /// The function's symbol, when `function` holds its demangled name.
    pub symbol: Option<String>,
    /// Offset of the site in its function.
    pub func_offset: u32,
    /// Address of the site in the traced process.
    pub address: u64,
    /// The runtime's site id.
    pub id: u32,
    /// The process it belongs to (an index into [`Trace::processes`]; 0 for a single trace).
    pub process: usize,
}

/// Reads and checks the single trace file at `path` (see `crate::input` for sessions too). The
/// records are checked in pieces and left in the file (see [`Records`]): reading needs little
/// memory however many there are.
pub fn read_trace_file(path: &Path) -> Result<Trace> {
    use std::io::Read;
    let file_name = path.display().to_string();
    let io = |e| Error::io(path, e);
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    // The header, then everything before the records (as much of it as the file has).
    let mut front = vec![0; len.min(HEADER_SIZE as u64) as usize];
    file.read_exact(&mut front).map_err(io)?;
    let header = parse_header(&front, len, &file_name)?;
    let layout = parts(&header, len, &file_name)?;
    front.resize(layout.front_len(len), 0);
    file.read_exact(&mut front[HEADER_SIZE..]).map_err(io)?;
    let mut trace = parse_front(&front, header, &layout, len, &file_name)?;
    let end = layout.records_end(&header, len);
    let mut chunk = vec![0; RECORD_SIZE * 32768];
    let records_at = front.len() as u64;
    let mut checked = Checked::new(records_at, trace.header.sites);
    while checked.at < end {
        let n = chunk.len().min((end - checked.at) as usize);
        file.read_exact(&mut chunk[..n]).map_err(io)?;
        checked.records(&chunk[..n], &file_name, |_| ())?;
    }
    let sites = trace.header.sites;
    trace.records = Records::in_file(file, file_name, records_at, checked.count, sites);
    Ok(trace)
}

/// Checks and decodes a trace held in memory; `file` names it in errors.
pub fn parse_trace(data: &[u8], file: &str) -> Result<Trace> {
    let len = data.len() as u64;
    let header = parse_header(data, len, file)?;
    let layout = parts(&header, len, file)?;
    let front = layout.front_len(len);
    let mut trace = parse_front(&data[..front], header, &layout, len, file)?;
    let end = layout.records_end(&header, len) as usize;
    let mut records = Vec::with_capacity((end - front) / RECORD_SIZE);
    let mut checked = Checked::new(front as u64, trace.header.sites);
    checked.records(&data[front..end], file, |r| records.push(r))?;
    trace.records = Records::from_vec(records);
    Ok(trace)
}

fn malformed(file: &str, section: &str, offset: u64, what: String) -> Error {
    Error::Malformed {
        at: Location {
            section: Some(section.to_string()),
            offset: Some(offset),
            ..Location::file(file)
        },
        format: "trace",
        what,
    }
}

/// Decodes everything but the records of a trace of `len` bytes laid out as `layout` from
/// `data`, the bytes before the records (fewer when the file ends before them). The trace comes
/// back with no records.
fn parse_front(
    data: &[u8],
    header: TraceHeader,
    layout: &Layout,
    len: u64,
    file: &str,
) -> Result<Trace> {
    let upto = |at: usize| at.min(data.len());
    let pool = Pool {
        bytes: &data[upto(layout.strings_at)..upto(layout.records_at)],
        cut: layout.records_at > data.len(),
        file,
    };
    let site_bytes = &data[HEADER_SIZE..upto(layout.threads_at)];
    let mut sites = Vec::with_capacity(site_bytes.len() / SITE_SIZE);
    for (i, chunk) in site_bytes.chunks_exact(SITE_SIZE).enumerate() {
        let at = HEADER_SIZE + i * SITE_SIZE;
        let entry = SiteEntry::decode(chunk.try_into().expect("chunks_exact"));
        let kind = Kind::from_u8(entry.kind).ok_or_else(|| {
            malformed(
                file,
                "sites",
                at as u64 + 4,
                format!("site {i} has an unknown kind {}", entry.kind),
            )
        })?;
        sites.push(TraceSite {
            kind,
            name: pool
                .string("sites", at + 8, entry.name)?
                .unwrap_or_default(),
            function: pool
                .string("sites", at + 12, entry.function)?
                .unwrap_or_default(),
            provider: pool
                .string("sites", at + 16, entry.provider)?
                .unwrap_or_default(),
            symbol: None,
            func_offset: entry.func_offset,
            address: entry.address,
            id: entry.id,
            process: 0,
        });
    }
    let thread_bytes = &data[upto(layout.threads_at)..upto(layout.strings_at)];
    let mut threads = Vec::with_capacity(thread_bytes.len() / THREAD_SIZE);
    for (i, chunk) in thread_bytes.chunks_exact(THREAD_SIZE).enumerate() {
        let at = layout.threads_at + i * THREAD_SIZE;
        let tid = u32_at(chunk, 0);
        threads.push((tid, pool.string("threads", at + 4, u32_at(chunk, 4))?));
    }
    Ok(Trace {
        header,
        sites,
        threads,
        records: Records::from_vec(Vec::new()),
        truncated: layout.truncation(&header, len),
        processes: Vec::new(),
        thread_process: Default::default(),
        problems: Vec::new(),
    })
}

/// Checks the header of a trace of `len` bytes, field by field, so each complaint points at its
/// field.
fn parse_header(data: &[u8], len: u64, file: &str) -> Result<TraceHeader> {
    let bad = |offset: u64, what: String| malformed(file, "header", offset, what);
    if data.len() < HEADER_SIZE {
        return Err(bad(
            len,
            format!("truncated: {len} bytes, shorter than the {HEADER_SIZE}-byte header"),
        ));
    }
    if data[0..8] != MAGIC {
        return Err(bad(0, "not a bootprof trace (bad magic)".into()));
    }
    let version = u32_at(data, 8);
    if version != VERSION {
        return Err(bad(
            8,
            format!("unknown trace version {version} (this bootprof reads version {VERSION})"),
        ));
    }
    let header = TraceHeader::decode(data).map_err(|what| bad(12, what.to_string()))?;
    if header.tsc_hz == 0 {
        return Err(bad(16, "the TSC frequency is zero".into()));
    }
    Ok(header)
}

/// Where the parts of a trace start, and where it ends by its header's counts.
struct Layout {
    threads_at: usize,
    strings_at: usize,
    records_at: usize,
    end: u64,
}

impl Layout {
    /// How many bytes of a file of `len` come before the records.
    fn front_len(&self, len: u64) -> usize {
        self.records_at.min(len as usize)
    }

    /// Where the last whole record the file holds ends.
    fn records_end(&self, header: &TraceHeader, len: u64) -> u64 {
        let front = self.front_len(len) as u64;
        let whole = ((len - front) / RECORD_SIZE as u64).min(header.records);
        front + whole * RECORD_SIZE as u64
    }

    /// Where a file of `len` bytes was cut short, if it was.
    fn truncation(&self, header: &TraceHeader, len: u64) -> Option<Truncation> {
        if len >= self.end {
            return None;
        }
        let part = [
            ("sites", self.threads_at),
            ("threads", self.strings_at),
            ("strings", self.records_at),
        ]
        .into_iter()
        .find(|&(_, stop)| len < stop as u64)
        .map_or("records", |(p, _)| p);
        let read =
            (self.records_end(header, len) - self.front_len(len) as u64) / RECORD_SIZE as u64;
        Some(Truncation {
            part,
            len,
            expected_len: self.end,
            records_missing: header.records - read,
        })
    }
}

/// The layout of a trace of `len` bytes with `header`: the counts must not overflow, and the file
/// must not be longer than they say (it may be shorter: cut short).
fn parts(header: &TraceHeader, len: u64, file: &str) -> Result<Layout> {
    let bad = |section: &str, offset: u64, what: String| malformed(file, section, offset, what);
    let overflow = |name: &str, field: u64| {
        bad(
            "header",
            field,
            format!("the {name} count overflows the file layout"),
        )
    };
    let threads_at = part_end(HEADER_SIZE as u64, u64::from(header.sites), SITE_SIZE)
        .ok_or_else(|| overflow("sites", 36))?;
    let strings_at = part_end(threads_at, u64::from(header.threads), THREAD_SIZE)
        .ok_or_else(|| overflow("threads", 40))?;
    let records_at = strings_at
        .checked_add(u64::from(header.strings))
        .ok_or_else(|| overflow("strings", 44))?;
    let end =
        part_end(records_at, header.records, RECORD_SIZE).ok_or_else(|| overflow("records", 48))?;
    let index =
        |at: u64, name: &str, field: u64| usize::try_from(at).map_err(|_| overflow(name, field));
    if end < len {
        return Err(bad(
            "records",
            end,
            format!(
                "{} bytes after the last record (the header's counts do not match the file size)",
                len - end
            ),
        ));
    }
    Ok(Layout {
        threads_at: index(threads_at, "sites", 36)?,
        strings_at: index(strings_at, "threads", 40)?,
        records_at: index(records_at, "strings", 44)?,
        end,
    })
}

/// The string pool of a trace.
struct Pool<'a> {
    bytes: &'a [u8],
    /// Whether the file ends inside the pool: a string past its end is unknown (`?`), not wrong.
    cut: bool,
    file: &'a str,
}

impl Pool<'_> {
    /// The string at pool offset `at`, or `None` for [`NONE`]; `field` is the file offset of the
    /// reference, in `section`, for messages.
    fn string(&self, section: &str, field: usize, at: u32) -> Result<Option<String>> {
        if at == NONE {
            return Ok(None);
        }
        let bad = |what: String| malformed(self.file, section, field as u64, what);
        let past_the_cut = self
            .bytes
            .get(at as usize..)
            .is_none_or(|t| !t.contains(&0));
        if self.cut && past_the_cut {
            return Ok(Some("?".into()));
        }
        let tail = self.bytes.get(at as usize..).ok_or_else(|| {
            bad(format!(
                "string offset {at:#x} is outside the {}-byte string pool",
                self.bytes.len()
            ))
        })?;
        let nul = tail.iter().position(|&b| b == 0).ok_or_else(|| {
            bad(format!(
                "the string at pool offset {at:#x} is not NUL-terminated"
            ))
        })?;
        Ok(Some(String::from_utf8_lossy(&tail[..nul]).into_owned()))
    }
}

/// Where checking a trace's records has got to.
struct Checked {
    /// File offset of the next record.
    at: u64,
    /// Records checked.
    count: usize,
    last_tsc: u64,
    sites: u32,
}

impl Checked {
    /// Checking from the first record, at file offset `at`, of a trace with `sites` sites.
    fn new(at: u64, sites: u32) -> Checked {
        Checked {
            at,
            count: 0,
            last_tsc: 0,
            sites,
        }
    }

    /// Checks the records in `data`, the next ones of the file, handing each to `each`.
    fn records(&mut self, data: &[u8], file: &str, mut each: impl FnMut(Record)) -> Result<()> {
        let bad = |offset: u64, what: String| malformed(file, "records", offset, what);
        let sites = self.sites;
        for chunk in data.chunks_exact(RECORD_SIZE) {
            let (i, at) = (self.count, self.at);
            let bytes: &[u8; RECORD_SIZE] = chunk.try_into().expect("chunks_exact");
            let record = Record::decode(bytes).ok_or_else(|| {
                bad(
                    at + 24,
                    format!("record {i} has an unknown kind {}", bytes[24]),
                )
            })?;
            if record.site != NO_SITE && record.site >= sites {
                return Err(bad(
                    at + 20,
                    format!(
                        "record {i} names site {} but the trace has {sites} sites",
                        record.site
                    ),
                ));
            }
            if record.tsc < self.last_tsc {
                return Err(bad(
                    at,
                    format!(
                        "record {i} is out of order: its TSC {} is before the previous record's {}",
                        record.tsc, self.last_tsc
                    ),
                ));
            }
            self.last_tsc = record.tsc;
            self.count += 1;
            self.at += RECORD_SIZE as u64;
            each(record);
        }
        Ok(())
    }
}

/// `start + count * size`, or `None` on overflow.
fn part_end(start: u64, count: u64, size: usize) -> Option<u64> {
    start.checked_add(count.checked_mul(size as u64)?)
}

/// Writing traces: the encoder the tests (and benchmarks) use to make synthetic traces.
pub mod build {
    use bootprof_format::trace::{Record, RecordKind, SiteEntry, TraceHeader, NONE, NO_SITE};
    use bootprof_format::Kind;
    use std::collections::HashMap;

    /// Builds a trace file in memory.
    #[derive(Debug, Default)]
    pub struct TraceBuilder {
        /// The header; the counts are filled in by [`TraceBuilder::bytes`].
        pub header: TraceHeader,
        sites: Vec<SiteEntry>,
        threads: Vec<(u32, u32)>,
        strings: Vec<u8>,
        interned: HashMap<String, u32>,
        /// The records, in the order added (which should be TSC order).
        pub records: Vec<Record>,
    }

    impl TraceBuilder {
        /// An empty trace of process `pid` with the TSC at `tsc_hz` starting at `start_tsc`.
        pub fn new(pid: u32, tsc_hz: u64, start_tsc: u64) -> TraceBuilder {
            TraceBuilder {
                header: TraceHeader {
                    tsc_hz,
                    start_tsc,
                    pid,
                    ..TraceHeader::default()
                },
                ..TraceBuilder::default()
            }
        }

        fn string(&mut self, s: &str) -> u32 {
            if let Some(&at) = self.interned.get(s) {
                return at;
            }
            let at = self.strings.len() as u32;
            self.strings.extend_from_slice(s.as_bytes());
            self.strings.push(0);
            self.interned.insert(s.to_string(), at);
            at
        }

        /// Adds a site; returns its index.
        pub fn site(
            &mut self,
            kind: Kind,
            provider: &str,
            name: &str,
            function: &str,
            address: u64,
            func_offset: u32,
        ) -> u32 {
            let id = self.sites.len() as u32;
            let mut opt = |s: &str| if s.is_empty() { NONE } else { self.string(s) };
            let entry = SiteEntry {
                id,
                kind: kind as u8,
                name: opt(name),
                function: opt(function),
                provider: opt(provider),
                func_offset,
                address,
            };
            self.sites.push(entry);
            self.sites.len() as u32 - 1
        }

        /// Adds a thread (with a name, or `None`).
        pub fn thread(&mut self, tid: u32, name: Option<&str>) {
            let name = name.map_or(NONE, |n| self.string(n));
            self.threads.push((tid, name));
        }

        /// Adds a record.
        pub fn record(&mut self, tsc: u64, tid: u32, kind: RecordKind, site: u32, arg: u64) {
            self.records.push(Record {
                tsc,
                arg,
                tid,
                site,
                kind,
            });
        }

        /// Adds a THREAD record without a site.
        pub fn no_site(&mut self, tsc: u64, tid: u32, kind: RecordKind) {
            self.record(tsc, tid, kind, NO_SITE, 0);
        }

        /// The file's bytes.
        pub fn bytes(&self) -> Vec<u8> {
            let mut out = Vec::new();
            let parts = (&self.sites, &self.threads, &self.strings, &self.records);
            bootprof_format::trace::write_trace(
                self.header,
                parts.0,
                parts.1,
                parts.2,
                parts.3,
                |b| {
                    out.extend_from_slice(b);
                    Ok::<(), std::convert::Infallible>(())
                },
            )
            .unwrap_or_else(|never| match never {});
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::build::TraceBuilder;
    use super::*;
    use bootprof_format::trace::RecordKind as K;

    /// A small trace using every record kind, two threads, a hold and a wait.
    pub(crate) fn small() -> Vec<u8> {
        let mut b = TraceBuilder::new(42, 1_000_000_000, 1000);
        let main = b.site(Kind::Fentry, "", "__fentry__", "main", 0x1000, 0);
        let f = b.site(Kind::Fentry, "", "__fentry__", "f", 0x1100, 0);
        let fx = b.site(
            Kind::CygExit,
            "",
            "__cyg_profile_func_exit",
            "f",
            0x1140,
            0x40,
        );
        let ev = b.site(Kind::Probe, "app", "start", "main", 0x1010, 0x10);
        let w = b.site(Kind::Probe, "bpwait", "root", "main", 0x1020, 0x20);
        let uw = b.site(Kind::Probe, "bpunwait", "root", "main", 0x1030, 0x30);
        let h = b.site(Kind::Probe, "bphold", "root", "worker", 0x1200, 4);
        let r = b.site(Kind::Probe, "bprelease", "root", "worker", 0x1210, 0x14);
        let t = b.site(Kind::Probe, "bpthread", "worker", "worker", 0x1220, 0x24);
        b.thread(1, Some("main"));
        b.thread(2, None);
        b.record(1000, 1, K::Enter, main, 0);
        b.record(1100, 2, K::Thread, t, 0);
        b.record(1200, 2, K::Hold, h, 0);
        b.record(1300, 1, K::Enter, f, 0x1005);
        b.record(1400, 1, K::Event, ev, 7);
        b.record(1500, 1, K::Exit, fx, 0);
        b.record(1600, 1, K::Wait, w, 0);
        b.record(1700, 2, K::Release, r, 0);
        b.record(1800, 1, K::Unwait, uw, 0);
        b.bytes()
    }

    #[test]
    fn reads_a_small_trace() {
        let t = parse_trace(&small(), "t").unwrap();
        assert_eq!(t.header.pid, 42);
        assert_eq!(t.sites.len(), 9);
        assert_eq!(t.sites[3].provider, "app");
        assert_eq!(t.sites[0].provider, "");
        assert_eq!(t.sites[2].kind, Kind::CygExit);
        assert_eq!(t.threads, vec![(1, Some("main".into())), (2, None)]);
        assert_eq!(t.records.len(), 9);
        assert_eq!(t.records.at(3).arg, 0x1005);
    }

    fn malformed(data: &[u8]) -> (String, u64, String) {
        match parse_trace(data, "t") {
            Err(Error::Malformed { at, what, format }) => {
                assert_eq!(format, "trace");
                assert_eq!(at.file, "t");
                (at.section.unwrap(), at.offset.unwrap(), what)
            }
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    /// A file cut anywhere after its header is read up to the cut: the sites, threads and
    /// records complete before it, the cut described; one cut inside the header is refused.
    #[test]
    fn every_cut_is_read_up_to_the_cut() {
        let data = small();
        let whole = parse_trace(&data, "t").unwrap();
        assert_eq!(whole.truncated, None);
        let records_at = data.len() - whole.records.len() * RECORD_SIZE;
        for n in 0..data.len() {
            if n < HEADER_SIZE {
                let (part, offset, what) = malformed(&data[..n]);
                assert_eq!(part, "header", "cut at {n}: {what}");
                assert!(offset <= n as u64, "cut at {n}: offset {offset:#x}: {what}");
                continue;
            }
            let t = parse_trace(&data[..n], "t").unwrap_or_else(|e| panic!("cut at {n}: {e}"));
            let cut = t.truncated.clone().expect("a cut is reported");
            assert_eq!((cut.len, cut.expected_len), (n as u64, data.len() as u64));
            let records = n.saturating_sub(records_at) / RECORD_SIZE;
            assert!(
                t.records.iter().eq(whole.records.iter().take(records)),
                "cut at {n}"
            );
            assert_eq!(cut.records_missing, (whole.records.len() - records) as u64);
            assert_eq!(
                t.sites.len(),
                ((n - HEADER_SIZE) / SITE_SIZE).min(whole.sites.len())
            );
            for (got, full) in t.sites.iter().zip(&whole.sites) {
                assert_eq!(
                    (got.kind, got.address),
                    (full.kind, full.address),
                    "cut at {n}"
                );
                assert!(
                    got.name == full.name || got.name == "?",
                    "cut at {n}: {got:?}"
                );
            }
            assert!(cut.to_string().contains(&format!(
                "{records_missing} records are missing",
                records_missing = cut.records_missing
            )));
        }
    }

    /// Reading a file in pieces finds what reading it whole finds, at every length.
    #[test]
    fn reading_a_file_agrees_with_parsing_bytes() {
        let data = small();
        let path =
            std::env::temp_dir().join(format!("bootprof-trace-{}.trace", std::process::id()));
        let name = path.display().to_string();
        for n in (0..data.len()).chain([data.len()]) {
            std::fs::write(&path, &data[..n]).unwrap();
            let read = read_trace_file(&path).map_err(|e| e.to_string());
            let parsed = parse_trace(&data[..n], &name).map_err(|e| e.to_string());
            assert_eq!(read, parsed, "cut at {n}");
        }
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn bad_fields_are_named() {
        let data = small();
        let mut d = data.clone();
        d[0] = b'X';
        assert_eq!(malformed(&d).0, "header");
        let mut d = data.clone();
        d[8] = 9;
        assert_eq!(malformed(&d).1, 8);
        let mut d = data.clone();
        d[16..24].fill(0);
        assert_eq!(malformed(&d).1, 16);
        // A record count one too many: the file looks cut short by one record.
        let mut d = data.clone();
        d[48] += 1;
        let t = parse_trace(&d, "t").unwrap();
        assert_eq!(
            t.truncated.map(|c| (c.part, c.records_missing)),
            Some(("records", 1))
        );
        // A huge site count overflows nothing but does not fit: the file looks cut in its sites
        // (the bytes after the real sites are read as sites, or refused as such).
        let mut d = data.clone();
        d[36..40].copy_from_slice(&u32::MAX.to_le_bytes());
        match parse_trace(&d, "t") {
            Ok(t) => assert_eq!(t.truncated.map(|c| c.part), Some("sites")),
            Err(_) => assert_eq!(malformed(&d).0, "sites"),
        }
        // A huge record count overflows the layout.
        let mut d = data.clone();
        d[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(malformed(&d), ("header".into(), 48, malformed(&d).2));
        // Trailing garbage.
        let mut d = data.clone();
        d.push(0);
        assert_eq!(malformed(&d).1, data.len() as u64);
    }

    #[test]
    fn bad_strings_records_and_order_are_named() {
        let data = small();
        let t = parse_trace(&data, "t").unwrap();
        let records_at = data.len() - t.records.len() * RECORD_SIZE;
        let strings = t.header.strings as usize;
        let strings_at = records_at - strings;
        // A site's name offset past the pool.
        let mut d = data.clone();
        d[HEADER_SIZE + 8..HEADER_SIZE + 12].copy_from_slice(&(strings as u32).to_le_bytes());
        assert_eq!(malformed(&d).0, "sites");
        assert_eq!(malformed(&d).1, HEADER_SIZE as u64 + 8);
        // The pool's last NUL gone: the last string is not terminated.
        let mut d = data.clone();
        d[strings_at + strings - 1] = b'x';
        let (section, _, what) = malformed(&d);
        assert!(what.contains("NUL"), "{section}: {what}");
        // An unknown record kind.
        let mut d = data.clone();
        d[records_at + 24] = 99;
        assert_eq!(malformed(&d).1, records_at as u64 + 24);
        // A site index past the table.
        let mut d = data.clone();
        d[records_at + 20..records_at + 24].copy_from_slice(&9u32.to_le_bytes());
        assert_eq!(malformed(&d).1, records_at as u64 + 20);
        // Out of order.
        let mut d = data.clone();
        let second = records_at + RECORD_SIZE;
        d[second..second + 8].copy_from_slice(&10u64.to_le_bytes());
        assert_eq!(
            malformed(&d),
            ("records".into(), second as u64, malformed(&d).2)
        );
        // An unknown site kind.
        let mut d = data;
        d[HEADER_SIZE + 4] = 0;
        assert_eq!(malformed(&d).1, HEADER_SIZE as u64 + 4);
    }

    /// Random byte flips: an error or a trace, never a panic, and every report of a trace that
    /// reads back is made without a panic too.
    #[test]
    fn random_flips_never_panic() {
        let data = small();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut read = 0;
        for _ in 0..3000 {
            let mut d = data.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() % d.len() as u64) as usize;
                d[i] ^= 1 << (next() % 8);
            }
            if let Ok(t) = parse_trace(&d, "t") {
                read += 1;
                for format in crate::Format::ALL {
                    let mut out = Vec::new();
                    crate::write_report(&t, format, &Default::default(), &mut out).unwrap();
                }
            }
        }
        assert!(read > 100, "only {read} flipped traces read back");
    }
}
