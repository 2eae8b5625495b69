//! Reading a recording session: takes a session directory (or one lane file) as the runtime and
//! `bootprof run` left it (layout in `bootprof_format::lane`), at any moment: after every process
//! ended, however it ended, or while some still run; hands on one [`Trace`] holding every
//! process, each with its own sites and threads, and the [`Process`] list.
//!
//! Nothing in a lane is trusted: every chunk, blob and entry is bounds-checked, a record whose
//! commit byte is missing is counted (torn) and skipped, a chunk of an unknown type is counted
//! (damaged). A lane whose header cannot be trusted is left out with a problem line saying why;
//! the other processes are still read.

use crate::error::{Error, Location, Result};
use crate::intervals::{KeptChunks, Latency};
pub use crate::process::{signal_name, Counts, Ending, Process};
use crate::records::{merge_sorted, Records, Sorter, Spool};
use crate::trace::{Trace, TraceSite};
use bootprof_format::lane::{
    self as fmt, field, Chunk, End, Keep, LaneHeader, Meta, SessionHeader, CHUNK_SIZE,
    LANE_HEADER_SIZE,
};
use bootprof_format::trace::{Record, TraceHeader};
use bootprof_format::Kind;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How many chunks of a lane are read between lettings go of its pages (see
/// [`LaneData::let_go`]).
const LET_GO_CHUNKS: usize = 4 * 1024;

/// Whether `path` is a session directory or a lane file (not a single trace file).
pub fn is_session(path: &Path) -> bool {
    if path.is_dir() {
        return true;
    }
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| magic == fmt::LANE_MAGIC)
}

/// What one lane holds. Its records stay in its bytes (mapped) until the lanes are merged.
struct LaneData<'a> {
    /// The session directory it is read from (where the object files its tables name are).
    dir: Option<PathBuf>,
    header: LaneHeader,
    process: Process,
    sites: HashMap<u32, TraceSite>,
    threads: HashMap<u32, String>,
    /// Threads whose name the program gave (a THREAD record).
    named: std::collections::HashSet<u32>,
    /// The lane's bytes (padded to a whole chunk where the file was cut short).
    bytes: std::borrow::Cow<'a, [u8]>,
    /// The lane file's mapping, if `bytes` are its pages.
    map: Option<&'a memmap2::Mmap>,
    /// Chunks read since its pages were last let go.
    unreleased: std::cell::Cell<usize>,
    /// Each thread that has records, by tid, with its data chunks in the order it wrote them.
    data: Vec<(u32, Vec<usize>)>,
    /// For a lane that measured intervals: the records of its kept windows, as the lane has
    /// them (`tid` the real thread id, `site` the lane's site id).
    kept: Option<Vec<Record>>,
    /// The latest TSC of its records.
    last_tsc: Option<u64>,
    /// The site ids its records name.
    site_ids: std::collections::HashSet<u32>,
    /// Whether some thread's records go back in time (a hit in a signal handler that claimed
    /// its slot before the hit it interrupted): then the lanes' records are sorted, not merged.
    unsorted: bool,
    /// The last hit counts the lane holds, by the lane's site ids.
    counts: Option<Vec<(u32, u64)>>,
}

/// Reads the session in `path` (a directory), or the one lane file `path`.
pub fn read_session(path: &Path) -> Result<Trace> {
    let (dir, files) = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| Error::io(path, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "lane"))
            .collect();
        files.sort();
        (path.to_path_buf(), files)
    } else {
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        (dir, vec![path.to_path_buf()])
    };
    let session = std::fs::read(dir.join("session"))
        .ok()
        .and_then(|b| SessionHeader::decode(&b).ok());
    let mut problems = Vec::new();
    let maps: Vec<std::io::Result<memmap2::Mmap>> = files.iter().map(|f| map(f)).collect();
    let mut lanes = Vec::new();
    for (f, map) in files.iter().zip(&maps) {
        let lane = match map {
            Ok(map) => lane_of_bytes(Some(&dir), f, map, Some(map)),
            Err(e) => Err(Error::io(f, std::io::Error::new(e.kind(), e.to_string()))),
        };
        match lane {
            Ok(l) => lanes.push(l),
            Err(e) => problems.push(format!("left out: {e}")),
        }
    }
    if lanes.is_empty() {
        let what = if files.is_empty() {
            "holds no lane files: no process that carries the bootprof runtime ran in it (was \
             the program linked by bootprof-link?)"
                .to_string()
        } else {
            problems.join("; ")
        };
        return Err(Error::Malformed {
            at: Location::file(path.display().to_string()),
            format: "session",
            what,
        });
    }
    lanes.sort_by_key(|l| (l.process.start_tsc, l.process.pid));
    settle_endings(&mut lanes, session.as_ref());
    let hz = tsc_hz(&lanes, session.as_ref());
    merge(lanes, hz, session.as_ref(), problems)
}

/// The lane files of the session in `dir`, in name order (none if it cannot be read).
pub(crate) fn lane_files(dir: &Path) -> Vec<PathBuf> {
    let mut lanes: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "lane"))
        .collect();
    lanes.sort();
    lanes
}

/// What the lanes of the session in `dir` dropped, one line per lane that dropped records
/// (`name-pid: N records dropped (why)`), from their headers alone: what `bootprof run` and
/// `bootprof attach` say at the end, so that a loss is told where the recording ends and not
/// only in the reports.
pub fn dropped_records(dir: &Path) -> Vec<String> {
    let mut header = vec![0u8; LANE_HEADER_SIZE];
    let mut lines = Vec::new();
    for path in lane_files(dir) {
        let read = std::fs::File::open(&path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut header));
        let Some(h) = read.ok().and_then(|()| LaneHeader::decode(&header).ok()) else {
            continue; // the report says what is wrong with it
        };
        if h.dropped == 0 {
            continue;
        }
        let exe = String::from_utf8_lossy(exe_in_header(&header));
        let name = crate::process::exe_name(&exe);
        let keep = Keep::from_u32(h.keep).unwrap_or(Keep::Start);
        lines.push(format!(
            "{name}-{}: {} records dropped ({})",
            h.pid,
            h.dropped,
            crate::process::why_dropped(keep)
        ));
    }
    lines
}

/// The executable's path in a lane header (`header`, at least [`LANE_HEADER_SIZE`] bytes): up to
/// its NUL (its command line follows).
fn exe_in_header(header: &[u8]) -> &[u8] {
    let exe_area = &header[field::EXE..LANE_HEADER_SIZE];
    fmt::c_string(exe_area, 0, exe_area.len())
}

/// The lane file at `path`, mapped (a lane of a keep-all run can be gigabytes; only the pages
/// read are read).
fn map(path: &Path) -> std::io::Result<memmap2::Mmap> {
    let file = std::fs::File::open(path)?;
    // SAFETY: a read-only map of a file we only read; a writer still running changes only
    // bytes nothing here trusts.
    unsafe { memmap2::Mmap::map(&file) }
}

/// Checks and decodes one lane held in memory (`path` names it; a fork child's parent lane is
/// looked for in `dir`, if given). The fuzz target's unit.
pub fn parse_lane(data: &[u8], path: &Path) -> Result<Trace> {
    let mut lanes = vec![lane_of_bytes(None, path, data, None)?];
    settle_endings(&mut lanes, None);
    let hz = tsc_hz(&lanes, None);
    merge(lanes, hz, None, Vec::new())
}

/// `map` is the mapping `data` is, if it is one.
fn lane_of_bytes<'a>(
    dir: Option<&Path>,
    path: &Path,
    data: &'a [u8],
    map: Option<&'a memmap2::Mmap>,
) -> Result<LaneData<'a>> {
    let name = path.display().to_string();
    let mut bytes = std::borrow::Cow::Borrowed(data);
    let header = LaneHeader::decode(&bytes).map_err(|what| Error::Malformed {
        at: Location {
            section: Some("lane header".into()),
            offset: Some(0),
            ..Location::file(&name)
        },
        format: "lane",
        what: what.into(),
    })?;
    let keep = Keep::from_u32(header.keep).unwrap_or(Keep::Start);
    // A file cut short: the chunks it holds are read, the one it ends in up to the cut.
    let expected =
        (LANE_HEADER_SIZE as u64).saturating_add(in_use(&header).saturating_mul(CHUNK_SIZE as u64));
    let cut_bytes = expected.saturating_sub(bytes.len() as u64);
    if cut_bytes > 0 && (bytes.len() - LANE_HEADER_SIZE) % CHUNK_SIZE != 0 {
        let len = bytes.len().next_multiple_of(CHUNK_SIZE);
        bytes.to_mut().resize(len, 0);
    }
    let exe_area = &bytes[field::EXE..LANE_HEADER_SIZE];
    let exe_bytes = exe_in_header(&bytes);
    let exe = String::from_utf8_lossy(exe_bytes).into_owned();
    let args = exe_area[(exe_bytes.len() + 1).min(exe_area.len())..]
        .split(|&b| b == 0)
        .take_while(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let mut lane = LaneData {
        process: Process {
            pid: header.pid,
            ppid: header.ppid,
            lane: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            exe,
            args,
            start_tsc: header.start_tsc,
            start_realtime_ns: (header.start_realtime_ns != 0).then_some(header.start_realtime_ns),
            end_tsc: None,
            ending: Ending::Vanished,
            keep,
            records: 0,
            dropped: header.dropped,
            torn: 0,
            overwritten: 0,
            damaged: 0,
            cut_bytes,
            latency: None,
            counts: Counts::Off,
            filter: crate::filter::Filter {
                depth: (header.filter_depth != 0).then_some(header.filter_depth),
                min_ns: (header.filter_min_ns != 0).then_some(header.filter_min_ns),
            },
            filtered: header.filtered,
            unread_tables: Vec::new(),
        },
        dir: dir.map(Path::to_path_buf),
        header,
        sites: HashMap::new(),
        threads: HashMap::new(),
        named: Default::default(),
        bytes: std::borrow::Cow::Borrowed(&[]),
        map,
        unreleased: Default::default(),
        data: Vec::new(),
        kept: None,
        last_tsc: None,
        site_ids: Default::default(),
        unsorted: false,
        counts: None,
    };
    let header = lane.header.clone();
    if let Some(dir) = dir {
        inherit_metadata(dir, &header, &bytes, &mut lane, 0);
    }
    read_chunks(chunks_of(&bytes, in_use(&header)), &mut lane);
    lane.bytes = bytes;
    Ok(lane)
}

impl LaneData<'_> {
    /// Lets the pages of the lane's file that were read go (they are read again if needed): a
    /// lane of a keep-all run can be gigabytes, and a mapped page read stays in the process's
    /// memory until then.
    fn let_go(&self) {
        self.unreleased.set(0);
        if let Some(map) = self.map {
            // SAFETY: a read-only shared mapping of a file: dropped pages are read from the
            // file again on the next access, and nothing holds on to their contents.
            _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }

    /// Notes that a chunk was read: every [`LET_GO_CHUNKS`] the pages are let go.
    fn chunk_read(&self) {
        let n = self.unreleased.get() + 1;
        self.unreleased.set(n);
        if n >= LET_GO_CHUNKS {
            self.let_go();
        }
    }

    /// The lane's chunks.
    fn chunks(&self) -> &[u8] {
        chunks_of(&self.bytes, in_use(&self.header))
    }

    /// The threads that have records, by tid.
    fn tids(&self) -> Vec<u32> {
        let mut tids: Vec<u32> = match &self.kept {
            Some(kept) => kept.iter().map(|r| r.tid).collect(),
            None => self.data.iter().map(|&(tid, _)| tid).collect(),
        };
        tids.sort_unstable();
        tids.dedup();
        tids
    }

    /// Each thread's records (by tid), in the order it wrote them.
    fn threads(&self) -> Vec<(u32, Box<dyn Iterator<Item = Record> + '_>)> {
        if let Some(kept) = &self.kept {
            // Sorted by thread: each thread's records are a run of them.
            return (kept.chunk_by(|a, b| a.tid == b.tid))
                .map(|run| -> (u32, Box<dyn Iterator<Item = Record> + '_>) {
                    (run[0].tid, Box::new(run.iter().copied()))
                })
                .collect();
        }
        (self.data.iter())
            .map(
                |(tid, list)| -> (u32, Box<dyn Iterator<Item = Record> + '_>) {
                    let chunks = self.chunks();
                    let each = list.iter().flat_map(move |&k| {
                        self.chunk_read();
                        let mut records = Vec::new();
                        if let Some((base, slots)) = data_chunk(chunks, k) {
                            fmt::slot_records(base, slots, |r| records.push(r.record(*tid)));
                        }
                        records
                    });
                    (*tid, Box::new(each))
                },
            )
            .collect()
    }

    /// The records of the data chunks in `chunks` (the lane's), thread by thread (by tid), each
    /// thread's in the order it wrote them, to `each`; returns the counts of the slots read.
    fn records_from(&self, chunks: &[u8], mut each: impl FnMut(Record)) -> fmt::SlotStats {
        let mut total = fmt::SlotStats::default();
        for (tid, list) in &self.data {
            for &k in list {
                if let Some((base, slots)) = data_chunk(chunks, k) {
                    let stats = fmt::slot_records(base, slots, |r| each(r.record(*tid)));
                    total.torn += stats.torn;
                    total.bad += stats.bad;
                    total.records += stats.records;
                }
                self.chunk_read();
            }
        }
        self.let_go();
        total
    }
}

/// The TSC base and the slots of chunk `k` of `chunks`, if it is a data chunk.
fn data_chunk(chunks: &[u8], k: usize) -> Option<(u64, &[u8])> {
    let at = k * CHUNK_SIZE;
    match fmt::chunk(&chunks[at..at + CHUNK_SIZE]) {
        Chunk::Data { base, slots, .. } => Some((base, slots)),
        _ => None,
    }
}

/// Chunks a lane's process claimed and could use: a claim past the lane's allocated end failed
/// (those records were dropped and counted), so it is not data missing from the file.
fn in_use(header: &LaneHeader) -> u64 {
    header.claimed.min(header.grown)
}

/// The chunks of a lane's bytes: the first `claimed` that the file holds.
fn chunks_of(bytes: &[u8], claimed: u64) -> &[u8] {
    let have = (bytes.len().saturating_sub(LANE_HEADER_SIZE) / CHUNK_SIZE) as u64;
    let n = claimed.min(have) as usize;
    &bytes[LANE_HEADER_SIZE..LANE_HEADER_SIZE + n * CHUNK_SIZE]
}

/// A fork child's lane names its parent's: the sites and thread names the parent described
/// before the fork are the child's too (read from the parent's first chunks, and its parent's).
fn inherit_metadata(
    dir: &Path,
    header: &LaneHeader,
    bytes: &[u8],
    lane: &mut LaneData,
    depth: u32,
) {
    let parent = fmt::c_string(bytes, field::PARENT_LANE, 64);
    if parent.is_empty() || depth > 64 || parent.contains(&b'/') {
        return;
    }
    let path = dir.join(String::from_utf8_lossy(parent).as_ref());
    let Ok(data) = map(&path) else {
        return;
    };
    let Ok(ph) = LaneHeader::decode(&data) else {
        return;
    };
    inherit_metadata(dir, &ph, &data, lane, depth + 1);
    let upto = header.parent_chunks.min(in_use(&ph));
    let chunks = chunks_of(&data, upto);
    let mut k = 0;
    while k < chunks.len() / CHUNK_SIZE {
        k += read_meta_at(chunks, k, lane, Whose::Parent).max(1);
    }
}

/// The bytes of the site table a [`Meta::TableFile`] entry names: read from the object file the
/// process linked into the session directory `dir`, if that is still the file it was (its size
/// and the object's build ID); else why not.
pub(crate) fn table_file_bytes(
    dir: Option<&Path>,
    meta: &Meta,
) -> std::result::Result<Vec<u8>, String> {
    use object::Object;
    let Meta::TableFile {
        len,
        offset,
        size,
        build_id,
        name,
        ..
    } = *meta
    else {
        return Ok(Vec::new());
    };
    let name = String::from_utf8_lossy(name);
    // A name from the lane stays in the session directory.
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(format!("the lane names the object file {name:?}"));
    }
    let Some(dir) = dir else {
        return Err(format!(
            "they are in the object file {name} of the session directory, which is not known"
        ));
    };
    let path = dir.join(&*name);
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: a read-only private mapping; a file changed under it gives wrong bytes, which
    // the size and build ID checks and the table's own checks catch, not undefined behaviour
    // in this reader (every read below is bounds-checked).
    let map =
        unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("{}: {e}", path.display()))?;
    let changed = || {
        format!(
            "{} is no longer the file the process loaded: its size or build ID differs",
            path.display()
        )
    };
    if map.len() as u64 != size {
        return Err(changed());
    }
    let id = object::File::parse(&*map)
        .ok()
        .and_then(|elf| elf.build_id().ok().flatten());
    if id != Some(build_id) {
        return Err(changed());
    }
    let table = usize::try_from(offset)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(at, n)| map.get(at..at.checked_add(n)?));
    let table = table.ok_or_else(|| format!("{}: no {len} bytes at {offset}", path.display()))?;
    Ok(table.to_vec())
}

/// Whose lane a metadata blob is read from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Whose {
    Own,
    /// A fork child's parent: its sites and threads are the child's too, its counts are not.
    Parent,
}

/// Reads the metadata blob starting at chunk `k` of `chunks` into `lane` if there is one;
/// returns the chunks it spans (0 if chunk `k` is no metadata chunk).
fn read_meta_at(chunks: &[u8], k: usize, lane: &mut LaneData, whose: Whose) -> usize {
    let at = k * CHUNK_SIZE;
    let Chunk::Meta { len } = fmt::chunk(&chunks[at..at + CHUNK_SIZE]) else {
        return 0;
    };
    let start = at + fmt::CHUNK_HEADER_SIZE;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| start.checked_add(l))
        .filter(|&e| e <= chunks.len());
    let Some(end) = end else {
        lane.process.damaged += 1;
        return 1;
    };
    let mut blob = &chunks[start..end];
    while !blob.is_empty() {
        let Some((meta, n)) = Meta::decode(blob) else {
            lane.process.damaged += 1;
            break;
        };
        blob = &blob[n..];
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let mut read_sites = |meta: Meta| {
            for site in meta.sites() {
                match site_of(&site) {
                    Some(s) => {
                        lane.sites.insert(s.id, s);
                    }
                    None => lane.process.damaged += 1,
                }
            }
        };
        match meta {
            Meta::Site { .. } | Meta::Table { .. } => read_sites(meta),
            Meta::TableFile { .. } => match table_file_bytes(lane.dir.as_deref(), &meta) {
                Ok(table) => read_sites(meta.with_table(&table)),
                Err(why) => lane.process.unread_tables.push(why),
            },
            Meta::Thread { tid, name, given } => {
                // A name the program gave outranks the kernel's, whichever came later.
                if given || !lane.named.contains(&tid) {
                    lane.threads.insert(tid, text(name));
                }
                if given {
                    lane.named.insert(tid);
                }
            }
            // Each holds every count since the start: the last one read (written) is the one.
            Meta::Counts { counts } if whose == Whose::Own => {
                lane.counts = Some(fmt::counts(counts).collect());
            }
            Meta::Counts { .. } => {}
        }
    }
    fmt::meta_chunks(len) as usize
}

/// Reads every chunk: metadata into the lane's sites and threads, data into its records (each
/// thread's chunks in the order it wrote them). A lane that measured intervals holds, as its
/// records, those of its kept windows (its rings are only where they were copied from).
fn read_chunks(chunks: &[u8], lane: &mut LaneData) {
    let n = chunks.len() / CHUNK_SIZE;
    // Per thread: (records before, chunk index).
    let mut data: HashMap<u32, Vec<(u64, usize)>> = HashMap::new();
    let mut kept = KeptChunks::default();
    let mut k = 0;
    while k < n {
        let at = k * CHUNK_SIZE;
        lane.chunk_read();
        match fmt::chunk(&chunks[at..at + CHUNK_SIZE]) {
            Chunk::Meta { .. } => {
                k += read_meta_at(chunks, k, lane, Whose::Own);
                continue;
            }
            Chunk::Latency { len } => {
                k += read_latency_at(chunks, k, len, lane);
                continue;
            }
            Chunk::Data { tid, before, .. } => data.entry(tid).or_default().push((before, k)),
            Chunk::Kept {
                window,
                tid,
                before,
                ..
            } => kept.add(window, tid, before, k),
            Chunk::Unknown(_) => lane.process.damaged += 1,
            Chunk::Empty => {}
        }
        k += 1;
    }
    if let Some(mut latency) = lane.process.latency.take() {
        let mut stats = fmt::SlotStats::default();
        let records = kept.records(chunks, &mut latency, &mut stats);
        lane.process.torn += stats.torn;
        lane.process.damaged += stats.bad;
        lane.process.records += records.len() as u64;
        lane.process.latency = Some(latency);
        lane.last_tsc = records.iter().map(|r| r.tsc).max();
        lane.site_ids = records.iter().map(|r| r.site).collect();
        lane.unsorted = records
            .windows(2)
            .any(|w| w[0].tid == w[1].tid && w[1].tsc < w[0].tsc);
        lane.kept = Some(records);
        return;
    }
    let mut tids: Vec<u32> = data.keys().copied().collect();
    tids.sort_unstable();
    for tid in tids {
        let mut list = data.remove(&tid).unwrap_or_default();
        list.sort_unstable();
        if let Some(&(first, _)) = list.first() {
            // Only a ring reuses chunks: what it wrote before its oldest kept chunk is gone.
            if lane.process.keep == Keep::Last {
                lane.process.overwritten += first;
            }
        }
        lane.data
            .push((tid, list.into_iter().map(|(_, k)| k).collect()));
    }
    // Counted now (the records themselves are read again when the lanes are merged).
    let mut last = None;
    let mut seen = std::collections::HashSet::new();
    // A bit per site id (24 bits in a slot: at most 2 MiB).
    let mut site_bits: Vec<u64> = Vec::new();
    let mut unsorted = false;
    let mut previous = (u32::MAX, 0);
    let stats = lane.records_from(chunks, |r| {
        last = last.max(Some(r.tsc));
        if previous.0 == r.tid {
            unsorted |= r.tsc < previous.1;
        } else {
            seen.insert(r.tid);
        }
        previous = (r.tid, r.tsc);
        let (word, bit) = (r.site as usize / 64, r.site % 64);
        if word >= site_bits.len() {
            site_bits.resize(word + 1, 0);
        }
        site_bits[word] |= 1 << bit;
    });
    lane.data.retain(|(tid, _)| seen.contains(tid));
    lane.last_tsc = last;
    lane.site_ids = (site_bits.iter().enumerate())
        .flat_map(|(w, &bits)| {
            (0..64)
                .filter(move |b| bits >> b & 1 == 1)
                .map(move |b| w as u32 * 64 + b)
        })
        .collect();
    lane.unsorted = unsorted;
    lane.process.torn += stats.torn;
    lane.process.damaged += stats.bad;
    lane.process.records += stats.records;
}

/// Reads the latency area of `len` bytes starting at chunk `k`; returns the chunks it spans.
fn read_latency_at(chunks: &[u8], k: usize, len: u64, lane: &mut LaneData) -> usize {
    let start = k * CHUNK_SIZE + fmt::CHUNK_HEADER_SIZE;
    let area = usize::try_from(len)
        .ok()
        .and_then(|l| chunks.get(start..start.checked_add(l)?))
        .and_then(Latency::decode);
    match area {
        Some(l) if lane.process.latency.is_none() => lane.process.latency = Some(l),
        _ => {
            lane.process.damaged += 1;
            return 1;
        }
    }
    fmt::meta_chunks(len) as usize
}

/// The site a [`Meta::Site`] entry describes (of process 0, its symbol unknown); `None` for
/// another entry or an unknown kind.
pub(crate) fn site_of(meta: &Meta) -> Option<TraceSite> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let Meta::Site {
        id,
        kind,
        func_offset,
        address,
        provider,
        name,
        function,
    } = *meta
    else {
        return None;
    };
    Some(TraceSite {
        kind: Kind::from_u8(kind)?,
        provider: text(provider),
        name: text(name),
        function: text(function),
        symbol: None,
        func_offset,
        address,
        id,
        process: 0,
    })
}

/// How each process ended: what its parent (`bootprof run`) saw, else what the process wrote,
/// else an `exec` when a later lane has its pid, else still running (while the session runs and
/// the pid lives), else gone without a word.
fn settle_endings(lanes: &mut [LaneData], session: Option<&SessionHeader>) {
    let session_running = session.is_none_or(|s| s.end == (0, 0));
    let this_boot = current_boot_id();
    for i in 0..lanes.len() {
        let h = &lanes[i].header;
        let seen = |(kind, code): (u32, u32)| match End::from_u32(kind) {
            End::Exit => Some(Ending::Exit(code)),
            End::Signal => Some(Ending::Signal(code)),
            End::Detached => Some(Ending::Detached),
            End::Unknown => None,
        };
        let later_exec = lanes[i + 1..]
            .iter()
            .any(|l| l.header.pid == h.pid && l.header.start_tsc >= h.start_tsc);
        let alive = session_running
            && Some(h.boot_id) == this_boot
            && Path::new(&format!("/proc/{}", h.pid)).exists();
        let ending = if later_exec && h.end_tsc == 0 {
            Ending::Exec
        } else if let Some(e) = seen(h.reaped).or_else(|| seen(h.end)) {
            e
        } else if alive {
            Ending::Running
        } else {
            Ending::Vanished
        };
        let last = lanes[i].last_tsc;
        let end_tsc = (h.end_tsc != 0).then_some(h.end_tsc).or(last);
        // A counting process's counts, when it wrote some, are set when the lanes are merged.
        let unwritten = (h.flags & fmt::FLAG_COUNTS != 0 && lanes[i].counts.is_none()).then(|| {
            Counts::NotWritten {
                wrote_end: End::from_u32(h.end.0) != End::Unknown,
            }
        });
        let p = &mut lanes[i].process;
        p.ending = ending;
        p.end_tsc = end_tsc;
        if let Some(c) = unwritten {
            p.counts = c;
        }
    }
}

/// The kernel's boot id now, as the lanes store it (read once: it is the same until a reboot).
pub(crate) fn current_boot_id() -> Option<[u8; 16]> {
    static ID: std::sync::OnceLock<Option<[u8; 16]>> = std::sync::OnceLock::new();
    *ID.get_or_init(read_boot_id)
}

fn read_boot_id() -> Option<[u8; 16]> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let hex: Vec<u8> = text
        .bytes()
        .filter(u8::is_ascii_hexdigit)
        .map(|c| (c as char).to_digit(16).unwrap_or(0) as u8)
        .collect();
    if hex.len() != 32 {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        id[i] = pair[0] << 4 | pair[1];
    }
    Some(id)
}

/// The TSC frequency: measured by `bootprof run` over the whole session; else by a process that
/// ran long enough; else between the lanes' starts when they lie 5 ms apart or more; else, on
/// the boot that recorded them, between the session's start (or the first lane's) and now.
fn tsc_hz(lanes: &[LaneData], session: Option<&SessionHeader>) -> u64 {
    if let Some(hz) = session.and_then(|s| rate(s.start, s.end)) {
        return hz;
    }
    if let Some(hz) = lanes
        .iter()
        .map(|l| l.header.tsc_hz)
        .max()
        .filter(|&h| h > 0)
    {
        return hz;
    }
    let first = lanes
        .iter()
        .map(|l| (l.header.start_tsc, l.header.start_ns))
        .min();
    let last = lanes
        .iter()
        .map(|l| (l.header.start_tsc, l.header.start_ns))
        .max();
    if let Some(hz) = first.zip(last).and_then(|(a, b)| rate(a, b)) {
        return hz;
    }
    // On the boot that recorded them: from the session's start (or the first lane's) to now;
    // else (another boot, or nonsense times) this machine's rate, measured over 6 ms.
    let start = session.map(|s| s.start).or(first).unwrap_or((0, 0));
    let same_boot = current_boot_id().is_some_and(|id| {
        session.map_or_else(
            || lanes.iter().all(|l| l.header.boot_id == id),
            |s| s.boot_id == id,
        )
    });
    if let Some(hz) = rate(start, clocks_now()).filter(|_| same_boot) {
        return hz;
    }
    machine_tsc_hz()
}

/// This machine's TSC rate, measured over 6 ms the first time it is asked for: a reader of many
/// lanes from elsewhere (or of damaged ones) waits once, not once per lane.
fn machine_tsc_hz() -> u64 {
    static HZ: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HZ.get_or_init(|| {
        let then = clocks_now();
        std::thread::sleep(std::time::Duration::from_millis(6));
        rate(then, clocks_now()).unwrap_or(1_000_000_000)
    })
}

/// The TSC rate between two readings of (TSC, `CLOCK_MONOTONIC` ns) taken more than 5 ms apart,
/// if the TSC advanced; `None` for times out of order, too close, or a rate that is no rate (0
/// or beyond `u64`: the times of a damaged lane or session file are anything).
fn rate((t0, n0): (u64, u64), (t1, n1): (u64, u64)) -> Option<u64> {
    let ns = n1.checked_sub(n0).filter(|&ns| ns > 5_000_000)?;
    let ticks = t1.checked_sub(t0).filter(|&t| t > 0)?;
    u64::try_from(u128::from(ticks) * 1_000_000_000 / u128::from(ns))
        .ok()
        .filter(|&hz| hz > 0)
}

/// The TSC and `CLOCK_MONOTONIC` in nanoseconds (the clock of the lanes' start times), read
/// together.
pub(crate) fn clocks_now() -> (u64, u64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: rdtsc is on every x86-64 CPU; clock_gettime writes the timespec we own.
    unsafe {
        let tsc = core::arch::x86_64::_rdtsc();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        (tsc, ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

/// One trace of all lanes: sites concatenated (each lane's ids mapped to indices), threads keyed
/// by their tid, or by a number of their own where two processes' threads share a tid (an
/// `exec`, or a reused pid), records merged in time order (see [`merge_records`]).
fn merge(
    mut lanes: Vec<LaneData>,
    hz: u64,
    session: Option<&SessionHeader>,
    problems: Vec<String>,
) -> Result<Trace> {
    let mut sites = Vec::new();
    let mut threads = Vec::new();
    let mut thread_process: HashMap<u32, (usize, u32)> = HashMap::new();
    // Keys for threads whose tid an earlier lane took: numbers no lane's thread has.
    let taken: std::collections::HashSet<u32> = lanes.iter().flat_map(|l| l.tids()).collect();
    let mut next_key = 0xF000_0000u32;
    let start_tsc = lanes.iter().map(|l| l.header.start_tsc).min().unwrap_or(0);
    let dropped = lanes.iter().map(|l| l.process.dropped).sum();
    let mut ids = Vec::with_capacity(lanes.len());
    for (p, lane) in lanes.iter_mut().enumerate() {
        let mut index_of: HashMap<u32, u32> = HashMap::new();
        let mut listed: Vec<u32> = lane.sites.keys().copied().collect();
        listed.sort_unstable();
        for id in listed {
            let mut site = lane.sites.remove(&id).expect("listed");
            site.process = p;
            index_of.insert(id, sites.len() as u32);
            sites.push(site);
        }
        let mut key_of: HashMap<u32, u32> = HashMap::new();
        for tid in lane.tids() {
            let key = if thread_process.contains_key(&tid) {
                next_key = (next_key + 1..=u32::MAX)
                    .chain(1..next_key)
                    .find(|k| !taken.contains(k) && !thread_process.contains_key(k))
                    .expect("fewer threads than u32 values");
                next_key
            } else {
                tid
            };
            thread_process.insert(key, (p, tid));
            key_of.insert(tid, key);
            threads.push((key, lane.threads.get(&tid).cloned()));
        }
        // The index in `sites` of the lane's site `id`.
        let mut index = |id: u32, sites: &mut Vec<TraceSite>| {
            *index_of.entry(id).or_insert_with(|| {
                // A site whose description the lane lost: shown as `?`.
                sites.push(TraceSite {
                    kind: Kind::Probe,
                    provider: "?".into(),
                    name: format!("site{id}"),
                    function: "?".into(),
                    symbol: None,
                    func_offset: 0,
                    address: 0,
                    id,
                    process: p,
                });
                sites.len() as u32 - 1
            })
        };
        let mut named: Vec<u32> = lane.site_ids.iter().copied().collect();
        named.sort_unstable();
        for id in named {
            index(id, &mut sites);
        }
        if let Some(counts) = lane.counts.take() {
            lane.process.counts = Counts::Written {
                hits: counts
                    .into_iter()
                    .map(|(id, hits)| (index(id, &mut sites), hits))
                    .collect(),
                // The counts are written just before the end: an end written means they are its.
                at_end: End::from_u32(lane.header.end.0) != End::Unknown,
            };
        }
        ids.push(LaneIds {
            sites: SiteIds::new(index_of),
            keys: key_of,
        });
    }
    let records = merge_records(&lanes, &ids, sites.len() as u32).map_err(|e| {
        let what = format!("sorting the session's records in a temporary file: {e}");
        Error::io(std::env::temp_dir(), std::io::Error::new(e.kind(), what))
    })?;
    let processes: Vec<Process> = lanes.into_iter().map(|l| l.process).collect();
    Ok(Trace {
        header: TraceHeader {
            tsc_hz: hz,
            start_tsc: session.map_or(start_tsc, |s| s.start.0.min(start_tsc)),
            pid: match session {
                Some(s) => s.root_pid,
                None => processes.first().map_or(0, |p: &Process| p.pid),
            },
            sites: sites.len() as u32,
            threads: threads.len() as u32,
            strings: 0,
            records: records.len() as u64,
            dropped,
        },
        sites,
        threads,
        records,
        truncated: None,
        processes,
        thread_process,
        problems,
    })
}

/// How a lane's ids become the trace's: its site ids to indices into the trace's sites (every
/// id its records name is there), its threads' tids to their keys.
struct LaneIds {
    sites: SiteIds,
    keys: HashMap<u32, u32>,
}

/// A lane's site ids -> the trace's indices: a table by id where the ids are small, as the
/// runtime gives them (numbered from 0), else a map.
enum SiteIds {
    Table(Vec<u32>),
    Map(HashMap<u32, u32>),
}

impl SiteIds {
    fn new(map: HashMap<u32, u32>) -> SiteIds {
        match map.keys().max() {
            Some(&max) if max < 1 << 20 => {
                let mut table = vec![u32::MAX; max as usize + 1];
                for (id, index) in map {
                    table[id as usize] = index;
                }
                SiteIds::Table(table)
            }
            _ => SiteIds::Map(map),
        }
    }

    fn get(&self, id: u32) -> Option<u32> {
        match self {
            SiteIds::Table(t) => t.get(id as usize).copied().filter(|&i| i != u32::MAX),
            SiteIds::Map(m) => m.get(&id).copied(),
        }
    }
}

/// The records of all lanes, ids mapped, in time order, ties in the order of the lanes and, in
/// a lane, of the thread ids: each thread's records are in time order as it wrote them, so they
/// are merged (one pass, written once); where some thread's go back in time they are sorted
/// instead ([`Sorter`]). Either way the result is the stable sort by time of the lanes' records
/// thread by thread.
fn merge_records(lanes: &[LaneData], ids: &[LaneIds], sites: u32) -> std::io::Result<Records> {
    let mut streams: Vec<Box<dyn Iterator<Item = Record> + '_>> = Vec::new();
    for (lane, ids) in lanes.iter().zip(ids) {
        for (tid, records) in lane.threads() {
            let key = ids.keys[&tid];
            // A site not seen when the lane was first read is in a record its process wrote
            // since (the session still runs): left out, like every record written after.
            streams.push(Box::new(records.filter_map(move |mut r| {
                r.site = ids.sites.get(r.site)?;
                r.tid = key;
                Some(r)
            })));
        }
    }
    if lanes.iter().any(|l| l.unsorted) {
        let mut sorter = Sorter::default();
        for stream in streams {
            for r in stream {
                sorter.push(r)?;
            }
        }
        return sorter.finish(sites);
    }
    let mut out = Spool::default();
    merge_sorted(streams, &mut out)?;
    out.finish(sites)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Times from damaged headers are anything: no rate comes of them, and no overflow.
    #[test]
    fn a_rate_needs_times_in_order_and_apart() {
        assert_eq!(
            rate((0, 0), (3_000_000_000, 1_000_000_000)),
            Some(3_000_000_000)
        );
        assert_eq!(rate((0, 0), (1, 4_000_000)), None, "too close");
        assert_eq!(rate((5, 0), (4, 1_000_000_000)), None, "the TSC went back");
        assert_eq!(
            rate((0, 1_000_000_000), (9, 0)),
            None,
            "the clock went back"
        );
        // A start time near the end of u64 (as the fuzzer made one): n0 + 5 ms overflowed.
        assert_eq!(rate((0, u64::MAX - 1), (1, u64::MAX)), None);
        assert_eq!(rate((0, 0), (1, 2_000_000_000)), None, "below 1 Hz");
        assert_eq!(rate((0, 0), (u64::MAX, 5_000_001)), None, "beyond u64");
    }

    /// Every way a table-file entry can fail to lead to its table is told, and the bytes it
    /// leads to are the file's: a name that leaves the session directory, no directory, no
    /// such file, a file of another size or without the build ID, a table past the file's end.
    #[test]
    fn a_table_file_is_read_only_when_it_is_the_file_named() {
        use object::Object;
        let dir = tempfile::tempdir().unwrap();
        // An ELF file with a build ID: this test's own executable, linked into the directory.
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let id = object::File::parse(&*exe).unwrap().build_id().unwrap();
        let Some(id) = id else {
            eprintln!("this test's executable has no build ID; not checked");
            return;
        };
        std::fs::write(dir.path().join("object-1-2"), &exe).unwrap();
        std::fs::write(dir.path().join("object-1-3"), vec![0u8; exe.len()]).unwrap();
        let entry = |name: &'static str, offset: u64, len: u64, size: u64| Meta::TableFile {
            first_id: 0,
            address: 0x1000,
            len,
            offset,
            size,
            build_id: id,
            name: name.as_bytes(),
        };
        let size = exe.len() as u64;
        let read = |meta: Meta, dir: Option<&Path>| table_file_bytes(dir, &meta);
        let here = Some(dir.path());
        assert_eq!(
            read(entry("object-1-2", 16, 8, size), here),
            Ok(exe[16..24].to_vec())
        );
        let fails = |meta: Meta, dir: Option<&Path>, why: &str| {
            let e = read(meta, dir).unwrap_err();
            assert!(e.contains(why), "{e:?} lacks {why:?}");
        };
        for bad in ["../object-1-2", ".object", ""] {
            fails(
                entry(bad, 0, 8, size),
                here,
                "the lane names the object file",
            );
        }
        fails(entry("object-1-2", 0, 8, size), None, "which is not known");
        fails(
            entry("object-9-9", 0, 8, size),
            here,
            "object-9-9: No such file",
        );
        fails(
            entry("object-1-2", 0, 8, size + 1),
            here,
            "is no longer the file",
        );
        fails(
            entry("object-1-3", 0, 8, size),
            here,
            "is no longer the file",
        );
        fails(
            entry("object-1-2", size - 4, 8, size),
            here,
            &format!("no 8 bytes at {}", size - 4),
        );
    }
}
