//! Where a trace's records live while it is reported: takes the records of a trace (a small one
//! decoded into memory; a trace file's, already checked, left in the file; a session's, sorted
//! into a spool file when there are many); hands them out by index or in order, by value.
//!
//! A report of a 37.5-million-record trace (1.2 GB of records) must not hold them: the formats
//! make one or two passes in order and look a few records up by index (a wait's start, a hit's
//! recorded stack), so a file-backed store reads each pass in blocks with `pread` and keeps a
//! handful of recently used blocks for the lookups. Memory is a few megabytes whatever the size;
//! the kernel's page cache does the rest.
//!
//! A file can change after it was checked (another program writing it): a record that no longer
//! decodes, or a read that fails, yields a placeholder and is remembered, and
//! [`Records::failure`] says what happened, so a report made of it is refused rather than
//! handed back wrong.

use bootprof_format::trace::{Record, RecordKind, NO_SITE, RECORD_SIZE};
use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Records per block read from a file (128 KiB: the bytes read and the records decoded from
/// them stay in the CPU's cache).
const BLOCK: usize = 4 * 1024;
/// Blocks kept for lookups by index (1 MiB).
const CACHED_BLOCKS: usize = 8;

/// A trace's records, in time order.
pub struct Records {
    store: Store,
}

enum Store {
    Memory(Vec<Record>),
    File(FileStore),
}

struct FileStore {
    file: Arc<File>,
    /// What the file is, for messages.
    name: String,
    /// File offset of record 0.
    offset: u64,
    len: usize,
    /// Sites of the trace: a record naming one past them is no longer what was checked.
    sites: u32,
    cache: RefCell<Vec<(usize, Vec<Record>)>>,
    failure: RefCell<Option<String>>,
}

impl Records {
    /// Records held in memory.
    pub fn from_vec(records: Vec<Record>) -> Records {
        Records {
            store: Store::Memory(records),
        }
    }

    /// The `len` records at `offset` in `file` (named `name` in messages), already checked:
    /// each a known kind naming one of `sites` sites (or none), in time order.
    pub fn in_file(file: File, name: String, offset: u64, len: usize, sites: u32) -> Records {
        Records {
            store: Store::File(FileStore {
                file: Arc::new(file),
                name,
                offset,
                len,
                sites,
                cache: RefCell::new(Vec::new()),
                failure: RefCell::new(None),
            }),
        }
    }

    /// How many.
    pub fn len(&self) -> usize {
        match &self.store {
            Store::Memory(v) => v.len(),
            Store::File(f) => f.len,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<Record> {
        match &self.store {
            Store::Memory(v) => v.get(i).copied(),
            Store::File(f) => (i < f.len).then(|| f.get(i)),
        }
    }

    /// Record `i`, which must be there: `i` comes from this trace (an index a pass handed on).
    pub fn at(&self, i: usize) -> Record {
        self.get(i)
            .unwrap_or_else(|| panic!("record {i} of {}", self.len()))
    }

    /// The first record.
    pub fn first(&self) -> Option<Record> {
        self.get(0)
    }

    /// The last record.
    pub fn last(&self) -> Option<Record> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// Every record, in order.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// The records from `start` on, in order.
    pub fn iter_from(&self, start: usize) -> Iter<'_> {
        Iter {
            records: self,
            next: start.min(self.len()),
            buf: Vec::new(),
            pos: 0,
            bytes: Vec::new(),
        }
    }

    /// The records in memory, if that is where they are (tests, small traces).
    pub fn as_slice(&self) -> Option<&[Record]> {
        match &self.store {
            Store::Memory(v) => Some(v),
            Store::File(_) => None,
        }
    }

    /// What went wrong reading the records back, if anything did: the file changed or could no
    /// longer be read after it was checked, so what was made of it is not to be trusted.
    pub fn failure(&self) -> Option<String> {
        match &self.store {
            Store::Memory(_) => None,
            Store::File(f) => f.failure.borrow().clone(),
        }
    }
}

impl FileStore {
    fn get(&self, i: usize) -> Record {
        let (no, at) = (i / BLOCK, i % BLOCK);
        let mut cache = self.cache.borrow_mut();
        if let Some(p) = cache.iter().position(|(b, _)| *b == no) {
            // Most recently used first: a pass's lookups mostly hit the first entry.
            if p != 0 {
                let entry = cache.remove(p);
                cache.insert(0, entry);
            }
        } else {
            let block = self.read_block(no * BLOCK);
            if cache.len() == CACHED_BLOCKS {
                cache.pop();
            }
            cache.insert(0, (no, block));
        }
        cache[0].1.get(at).copied().unwrap_or(PLACEHOLDER)
    }

    /// The block of records starting at `start` (up to [`BLOCK`] of them, fewer at the end).
    fn read_block(&self, start: usize) -> Vec<Record> {
        let mut block = Vec::new();
        self.read_into(start, &mut Vec::new(), &mut block);
        block
    }

    /// Appends the block of records starting at `start` to `out`, through `bytes` (a buffer
    /// reused from block to block).
    fn read_into(&self, start: usize, bytes: &mut Vec<u8>, out: &mut Vec<Record>) {
        let n = BLOCK.min(self.len.saturating_sub(start));
        bytes.resize(n * RECORD_SIZE, 0);
        let at = self.offset + (start * RECORD_SIZE) as u64;
        if let Err(e) = self.file.read_exact_at(bytes, at) {
            self.fail(format!(
                "{}: reading records at byte {at:#x}: {e}",
                self.name
            ));
            out.extend(std::iter::repeat_n(PLACEHOLDER, n));
            return;
        }
        // Decoded in place, the first record that no longer reads as checked noted.
        let base = out.len();
        out.resize(base + n, PLACEHOLDER);
        let mut changed = None;
        for (k, (chunk, slot)) in (bytes.chunks_exact(RECORD_SIZE))
            .zip(&mut out[base..])
            .enumerate()
        {
            match Record::decode(chunk.try_into().expect("chunks_exact")) {
                Some(r) if r.site == NO_SITE || r.site < self.sites => *slot = r,
                _ => _ = changed.get_or_insert(start + k),
            }
        }
        if let Some(i) = changed {
            self.fail(format!(
                "{}: record {i} changed after it was checked (the file was written to while \
                 it was read)",
                self.name
            ));
        }
    }

    fn fail(&self, what: String) {
        self.failure.borrow_mut().get_or_insert(what);
    }
}

/// What stands for a record that could not be read back (the report is then refused).
const PLACEHOLDER: Record = Record {
    tsc: 0,
    arg: 0,
    tid: 0,
    site: NO_SITE,
    kind: RecordKind::Event,
};

/// The records of a trace in order, by value; see [`Records::iter`]. [`Iter::ahead`] shows
/// the records after the last one handed out, at least [`AHEAD`] of them where there are.
pub struct Iter<'a> {
    records: &'a Records,
    /// Index of the next record.
    next: usize,
    /// For a file: the records read and not yet handed out (read here, not through the lookup
    /// cache, so that a pass does not push out the blocks lookups use), from `pos` on.
    buf: Vec<Record>,
    pos: usize,
    /// The bytes of the last block read.
    bytes: Vec<u8>,
}

/// How many records [`Iter::ahead`] shows at least (where the trace has them): more than the
/// FRAME records the runtime writes after a hit.
pub const AHEAD: usize = 1024;

impl<'a> Iter<'a> {
    /// The records after the last one handed out (all of them, or at least [`AHEAD`]).
    pub fn ahead(&self) -> &[Record] {
        match &self.records.store {
            Store::Memory(v) => v.get(self.next..).unwrap_or_default(),
            Store::File(_) => &self.buf[self.pos.min(self.buf.len())..],
        }
    }

    /// Reads the next block of `f` after what `buf` holds, dropping what was handed out.
    fn refill(&mut self, f: &FileStore) {
        let buffered = self.buf.len() - self.pos;
        let from = self.next + buffered;
        if from >= f.len {
            return;
        }
        self.buf.drain(..self.pos);
        self.pos = 0;
        f.read_into(from, &mut self.bytes, &mut self.buf);
    }
}

impl Iterator for Iter<'_> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        let r = match &self.records.store {
            Store::Memory(v) => *v.get(self.next)?,
            Store::File(f) => {
                // Refilled before it runs low, so that `ahead` always shows AHEAD records.
                if self.buf.len() - self.pos <= AHEAD {
                    self.refill(f);
                }
                let r = *self.buf.get(self.pos)?;
                self.pos += 1;
                r
            }
        };
        self.next += 1;
        Some(r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.records.len().saturating_sub(self.next);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl Clone for Records {
    fn clone(&self) -> Records {
        match &self.store {
            Store::Memory(v) => Records::from_vec(v.clone()),
            Store::File(f) => Records {
                store: Store::File(FileStore {
                    file: Arc::clone(&f.file),
                    name: f.name.clone(),
                    offset: f.offset,
                    len: f.len,
                    sites: f.sites,
                    cache: RefCell::new(Vec::new()),
                    failure: RefCell::new(f.failure.borrow().clone()),
                }),
            },
        }
    }
}

impl PartialEq for Records {
    fn eq(&self, other: &Records) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Records {}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.store {
            Store::Memory(v) => f.debug_list().entries(v).finish(),
            Store::File(s) => write!(f, "{} records in {}", s.len, s.name),
        }
    }
}

/// Records written in order: held in memory up to a run's worth (`RUN`), past that written
/// to a temporary file (`$TMPDIR`, removed when done) that the [`Records`] then read.
pub struct Spool {
    mem: Vec<Record>,
    run_len: usize,
    file: Option<File>,
    written: usize,
}

impl Default for Spool {
    fn default() -> Spool {
        Spool::with_run(RUN)
    }
}

impl Spool {
    /// A spool that holds up to `run_len` records in memory.
    pub fn with_run(run_len: usize) -> Spool {
        Spool {
            mem: Vec::new(),
            run_len: run_len.max(1),
            file: None,
            written: 0,
        }
    }

    /// Adds the next record.
    pub fn push(&mut self, r: Record) -> io::Result<()> {
        self.mem.push(r);
        let limit = if self.file.is_some() {
            BLOCK.min(self.run_len)
        } else {
            self.run_len
        };
        if self.mem.len() >= limit {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(tempfile::tempfile()?),
        };
        write_records(file, self.written as u64, &self.mem)?;
        self.written += self.mem.len();
        self.mem.clear();
        Ok(())
    }

    /// The records; `sites` is the trace's site count.
    pub fn finish(mut self, sites: u32) -> io::Result<Records> {
        if self.file.is_none() {
            return Ok(Records::from_vec(self.mem));
        }
        self.flush()?;
        let file = self.file.take().expect("flushed");
        let name = "the records sorted into a temporary file".to_string();
        Ok(Records::in_file(file, name, 0, self.written, sites))
    }
}

/// Merges `streams`, each sorted by TSC, into `out`: records of equal TSC come out in the
/// order of their streams, so the merge of stably sorted parts of a sequence is its stable
/// sort.
pub fn merge_sorted<'a>(
    streams: Vec<Box<dyn Iterator<Item = Record> + 'a>>,
    out: &mut Spool,
) -> io::Result<()> {
    use std::cmp::Reverse;
    let mut streams = streams;
    let mut heap = std::collections::BinaryHeap::with_capacity(streams.len());
    let mut heads: Vec<Option<Record>> = streams.iter_mut().map(|s| s.next()).collect();
    for (k, head) in heads.iter().enumerate() {
        if let Some(r) = head {
            heap.push(Reverse((r.tsc, k)));
        }
    }
    while let Some(Reverse((_, k))) = heap.pop() {
        let r = heads[k].take().expect("a stream in the heap has a head");
        out.push(r)?;
        heads[k] = streams[k].next();
        if let Some(next) = &heads[k] {
            heap.push(Reverse((next.tsc, k)));
        }
    }
    Ok(())
}

/// Records of a session, gathered in any order and handed on sorted by TSC, stably (records of
/// equal TSC keep the order they came in). Up to a run's worth they are sorted in memory; past
/// that each full run is sorted and written to a temporary file (`$TMPDIR`, removed when done),
/// and the runs are merged into a second one that the [`Records`] read: memory stays at one run
/// whatever the session holds.
pub struct Sorter {
    run: Vec<Record>,
    run_len: usize,
    /// The runs written, and where: (record offset, records).
    runs: Vec<(u64, usize)>,
    spill: Option<File>,
    written: u64,
}

/// Records a [`Sorter`] sorts in memory (32 MiB).
const RUN: usize = 1 << 20;

impl Default for Sorter {
    fn default() -> Sorter {
        Sorter::with_run(RUN)
    }
}

impl Sorter {
    /// A sorter whose runs hold `run_len` records.
    pub fn with_run(run_len: usize) -> Sorter {
        Sorter {
            run: Vec::new(),
            run_len: run_len.max(1),
            runs: Vec::new(),
            spill: None,
            written: 0,
        }
    }

    /// Adds a record.
    pub fn push(&mut self, r: Record) -> io::Result<()> {
        if self.run.len() == self.run_len {
            self.spill_run()?;
        }
        self.run.push(r);
        Ok(())
    }

    fn spill_run(&mut self) -> io::Result<()> {
        sort(&mut self.run);
        let file = match &mut self.spill {
            Some(f) => f,
            None => self.spill.insert(tempfile::tempfile()?),
        };
        write_records(file, self.written, &self.run)?;
        self.runs.push((self.written, self.run.len()));
        self.written += self.run.len() as u64;
        self.run.clear();
        Ok(())
    }

    /// The records, sorted; `sites` is the trace's site count.
    pub fn finish(mut self, sites: u32) -> io::Result<Records> {
        if self.runs.is_empty() {
            sort(&mut self.run);
            return Ok(Records::from_vec(self.run));
        }
        if !self.run.is_empty() {
            self.spill_run()?;
        }
        self.run = Vec::new();
        let spill = self.spill.take().expect("runs were written");
        let failed = RefCell::new(None);
        let streams = (self.runs.iter())
            .map(|&(at, len)| -> Box<dyn Iterator<Item = Record> + '_> {
                Box::new(RunReader {
                    spill: &spill,
                    at,
                    left: len,
                    block: Vec::new().into_iter(),
                    failed: &failed,
                })
            })
            .collect();
        let mut out = Spool::with_run(self.run_len);
        merge_sorted(streams, &mut out)?;
        if let Some(e) = failed.into_inner() {
            return Err(e);
        }
        out.finish(sites)
    }
}

/// Sorts by TSC, stably, unless already sorted.
fn sort(records: &mut [Record]) {
    if !records.is_sorted_by_key(|r| r.tsc) {
        records.sort_by_key(|r| r.tsc);
    }
}

/// Writes `records` at record offset `at` of `file`.
fn write_records(file: &File, at: u64, records: &[Record]) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(BLOCK * RECORD_SIZE);
    let mut offset = at * RECORD_SIZE as u64;
    for part in records.chunks(BLOCK) {
        bytes.clear();
        bytes.extend(part.iter().flat_map(|r| r.encode()));
        file.write_all_at(&bytes, offset)?;
        offset += bytes.len() as u64;
    }
    Ok(())
}

/// A sorted run of a [`Sorter`]'s file, read a block at a time; a read that fails ends it and
/// is kept in `failed`.
struct RunReader<'a> {
    spill: &'a File,
    /// Record offset of the next block.
    at: u64,
    left: usize,
    block: std::vec::IntoIter<Record>,
    failed: &'a RefCell<Option<io::Error>>,
}

impl Iterator for RunReader<'_> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        if let Some(r) = self.block.next() {
            return Some(r);
        }
        let n = (BLOCK / 4).min(self.left);
        if n == 0 {
            return None;
        }
        let mut bytes = vec![0u8; n * RECORD_SIZE];
        if let Err(e) = self
            .spill
            .read_exact_at(&mut bytes, self.at * RECORD_SIZE as u64)
        {
            self.failed.borrow_mut().get_or_insert(e);
            self.left = 0;
            return None;
        }
        self.at += n as u64;
        self.left -= n;
        let records: Vec<Record> = (bytes.chunks_exact(RECORD_SIZE))
            .map(|c| Record::decode(c.try_into().expect("chunks_exact")).unwrap_or(PLACEHOLDER))
            .collect();
        self.block = records.into_iter();
        self.block.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tsc: u64, n: u64) -> Record {
        Record {
            tsc,
            arg: n,
            tid: (n % 3) as u32,
            site: (n % 5) as u32,
            kind: RecordKind::Enter,
        }
    }

    /// Records past a run's worth are sorted through files; the result is what a stable sort in
    /// memory gives (equal TSCs in the order they came), read back in order and by index, and
    /// a run's worth or less stays in memory.
    #[test]
    fn spilled_runs_merge_into_a_stable_sort() {
        let mut seed = 0x9e37_79b9u64;
        let input: Vec<Record> = (0..10_000)
            .map(|n| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // Few distinct TSCs: many ties, whose order the sort must keep.
                record(seed % 300, n)
            })
            .collect();
        let mut expected = input.clone();
        expected.sort_by_key(|r| r.tsc);
        for run in [7, 1000, 4096, 10_000, 20_000] {
            let mut sorter = Sorter::with_run(run);
            for r in &input {
                sorter.push(*r).unwrap();
            }
            let records = sorter.finish(5).unwrap();
            assert_eq!(
                records.as_slice().is_some(),
                run >= input.len(),
                "run {run}"
            );
            assert_eq!(records.len(), expected.len());
            assert!(records.iter().eq(expected.iter().copied()), "run {run}");
            for i in [0, 1, 4095, 4096, 9999, 17, 5000, 3] {
                assert_eq!(records.get(i), Some(expected[i]), "run {run}, record {i}");
            }
            assert_eq!(records.get(10_000), None);
            assert_eq!(records.last(), expected.last().copied());
            assert_eq!(records.failure(), None);
        }
    }

    /// Records in a file that changed after they were checked: a kind no longer known, a site
    /// past the trace's, a file cut short. Each reads as a placeholder and the failure says
    /// where, rather than a panic or a wrong record passed off as checked.
    #[test]
    fn a_file_changed_after_it_was_checked_is_a_failure() {
        use std::io::Write;
        let good: Vec<Record> = (0..10).map(|n| record(n, n)).collect();
        let file_of = |bytes: &[u8]| {
            let mut f = tempfile::tempfile().unwrap();
            f.write_all(bytes).unwrap();
            f
        };
        let bytes: Vec<u8> = good.iter().flat_map(|r| r.encode()).collect();
        let whole = Records::in_file(file_of(&bytes), "t".into(), 0, 10, 5);
        assert!(whole.iter().eq(good.iter().copied()));
        assert_eq!(whole.failure(), None);

        let mut kind = bytes.clone();
        kind[3 * RECORD_SIZE + 24] = 77;
        let mut site = bytes.clone();
        site[4 * RECORD_SIZE + 20] = 9;
        let short = &bytes[..8 * RECORD_SIZE];
        for (bytes, what) in [
            (&kind[..], "record 3 changed"),
            (&site[..], "record 4 changed"),
            (short, "reading records at byte 0x0"),
        ] {
            let records = Records::in_file(file_of(bytes), "t".into(), 0, 10, 5);
            let read: Vec<Record> = records.iter().collect();
            assert_eq!(read.len(), 10);
            let failure = records.failure().expect("a failure");
            assert!(
                failure.starts_with("t: ") && failure.contains(what),
                "{failure}"
            );
        }
    }
}
