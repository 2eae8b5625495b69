//! Worst-interval tracing in a lane: the *latency area* a process writes when it measures the
//! intervals from one set of sites (FROM) to another (TO), and the *kept windows*: copies of the
//! records around the longest intervals, taken from the threads' flight-recorder rings before the
//! rings overwrite them.
//!
//! # The latency area
//!
//! One run of chunks of the lane, claimed together when recording starts; its first chunk's
//! header has type [`super::lane::CHUNK_LATENCY`] and word 0 the area's length in bytes (after
//! the header), like a metadata blob. The area is a row of little-endian words the runtime
//! updates in place with atomics, so a reader sees the figures of a process that is still
//! running or that died:
//!
//! ```text
//! word 0   windows to keep (N)            word 7   windows kept over the run
//! word 1   intervals measured             word 8   intervals over the bound not kept (no longer
//! word 2   sum of their TSC ticks                   than any of the N kept then)
//! word 3   shortest (u64::MAX: none yet)  word 9   TO hits with no FROM open on their thread
//! word 4   longest                        word 10  FROM hits past the nesting depth (ignored)
//! word 5   lower bound, ticks (0: none)   word 11  TSC ticks per second the bound was taken at
//! word 6   lower bound, ns                word 12  histogram buckets (HIST_BUCKETS)
//!                                         word 13  windows not kept for want of room
//! bytes 128..384   the FROM patterns, NUL-padded      bytes 384..640   the TO patterns
//! bytes 640..      HIST_BUCKETS words: intervals per bucket (see [`bucket`])
//! then             N + 1 window descriptors of 8 words (one is always free, for the next)
//! ```
//!
//! A window descriptor: word 0 the window's number (1, 2, ...; 0 = free), written last, so a
//! descriptor is whole or not there; word 1 the thread; words 2, 3 the TSC of the FROM and TO
//! records; word 4 the first chunk of its copy and word 5 how many; word 6 flags
//! ([`WINDOW_RING_SHORT`], [`WINDOW_CHUNKS_LOST`], [`WINDOW_BEFORE_LANE`]); word 7 the TSC the interval started at
//! (when the FROM hit's recording was done: what recording cost is not the program's time).
//! Every interval's length is from its start to its TO record.
//!
//! # Kept windows
//!
//! A window is a copy of every data chunk of the process whose records overlap the interval
//! (the thread's own and the other threads'), made by the thread that closed the interval. Each
//! copy has type [`super::lane::CHUNK_KEPT`] and the data chunk's header otherwise (base TSC,
//! records before, thread), plus the window's number in word 2. A window that a longer one
//! replaces is freed (its descriptor first, then its chunks are punched out of the file, and may
//! be reused), so a lane holds the rings and at most N + 1 windows however long the program runs.

use crate::le::u64_at;

/// Offsets (in words) of the area's counters.
pub mod word {
    /// Windows to keep.
    pub const LIMIT: usize = 0;
    /// Intervals measured.
    pub const COUNT: usize = 1;
    /// Sum of the intervals' ticks.
    pub const SUM: usize = 2;
    /// Shortest interval.
    pub const MIN: usize = 3;
    /// Longest interval.
    pub const MAX: usize = 4;
    /// Lower bound of a kept interval, in ticks (0: keep the N longest).
    pub const BOUND_TICKS: usize = 5;
    /// The lower bound as asked, in nanoseconds.
    pub const BOUND_NS: usize = 6;
    /// Windows kept over the run.
    pub const KEPT: usize = 7;
    /// Intervals over the bound that were not kept (no longer than any of the N kept then).
    pub const NOT_KEPT: usize = 8;
    /// TO hits with no FROM open.
    pub const UNOPENED: usize = 9;
    /// FROM hits past the nesting depth.
    pub const TOO_DEEP: usize = 10;
    /// Ticks per second the bound was converted at.
    pub const BOUND_HZ: usize = 11;
    /// Histogram buckets.
    pub const BUCKETS: usize = 12;
    /// Windows not kept for want of room in the lane.
    pub const NO_ROOM: usize = 13;
}

/// Byte offset of the FROM patterns in the area.
pub const FROM_AT: usize = 128;
/// Byte offset of the TO patterns.
pub const TO_AT: usize = 384;
/// Room for each pattern list.
pub const PATTERN_LEN: usize = 256;
/// Byte offset of the histogram.
pub const HIST_AT: usize = 640;
/// Sub-buckets per power of two: a bucket is at most 1/16 (6.25%) of its values wide.
pub const SUB_BUCKETS: u64 = 16;
/// Buckets of the histogram: values below 16 ticks exactly, then 16 per power of two up to 2^64.
pub const HIST_BUCKETS: usize = 976;
/// Words of a window descriptor.
pub const WINDOW_WORDS: usize = 8;
/// A window flag: some thread's ring no longer held the interval's start (raise the buffer).
pub const WINDOW_RING_SHORT: u64 = 1;
/// A window flag: another thread's chunk was being rewritten while it was copied (left out).
pub const WINDOW_CHUNKS_LOST: u64 = 2;
/// A window flag: the interval started before this lane did (in the parent, before a `fork`).
pub const WINDOW_BEFORE_LANE: u64 = 4;
/// Most windows a process can be asked to keep.
pub const MAX_WINDOWS: u64 = 10_000;

/// Byte offset of descriptor `i` in the area.
pub const fn window_at(i: usize) -> usize {
    HIST_AT + HIST_BUCKETS * 8 + i * WINDOW_WORDS * 8
}

/// Length in bytes of an area keeping `limit` windows.
pub const fn area_len(limit: u64) -> usize {
    window_at(limit as usize + 1)
}

/// The histogram bucket of an interval of `ticks`.
#[inline]
pub const fn bucket(ticks: u64) -> usize {
    if ticks < SUB_BUCKETS {
        return ticks as usize;
    }
    let e = 63 - ticks.leading_zeros() as u64;
    ((e - 3) * SUB_BUCKETS + ((ticks >> (e - 4)) & (SUB_BUCKETS - 1))) as usize
}

/// The smallest interval bucket `b` holds.
pub const fn bucket_low(b: usize) -> u64 {
    let b = b as u64;
    if b < SUB_BUCKETS {
        return b;
    }
    let e = b / SUB_BUCKETS + 3;
    (SUB_BUCKETS + b % SUB_BUCKETS) << (e - 4)
}

/// The largest interval bucket `b` holds.
pub const fn bucket_high(b: usize) -> u64 {
    if b + 1 >= HIST_BUCKETS {
        u64::MAX
    } else {
        bucket_low(b + 1) - 1
    }
}

/// One kept window, as its descriptor says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Its number (which kept chunks are its copy).
    pub number: u64,
    /// The thread whose interval it is.
    pub tid: u32,
    /// TSC of the FROM record.
    pub from_tsc: u64,
    /// TSC of the TO record.
    pub to_tsc: u64,
    /// TSC the interval started at (just after the FROM record was written).
    pub start_tsc: u64,
    /// First chunk of its copy, and how many.
    pub chunks: (u64, u64),
    /// `WINDOW_*` flags.
    pub flags: u64,
}

impl Window {
    /// The interval's length in ticks.
    pub fn ticks(&self) -> u64 {
        self.to_tsc.saturating_sub(self.start_tsc)
    }
}

/// A latency area, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Area<'a> {
    /// The counters (`word::*`), the first 16 words.
    pub words: [u64; 16],
    /// The FROM and TO patterns.
    pub from: &'a [u8],
    /// See `from`.
    pub to: &'a [u8],
    /// Intervals per bucket.
    pub histogram: &'a [u8],
    /// The descriptors' bytes.
    descriptors: &'a [u8],
}

impl<'a> Area<'a> {
    /// Decodes the area in `b` (its bytes after the chunk header); `None` if it is too short for
    /// what its own first word says.
    pub fn decode(b: &'a [u8]) -> Option<Area<'a>> {
        if b.len() < HIST_AT {
            return None;
        }
        let mut words = [0u64; 16];
        for (i, w) in words.iter_mut().enumerate() {
            *w = u64_at(b, i * 8);
        }
        let limit = words[word::LIMIT];
        if limit == 0
            || limit > MAX_WINDOWS
            || words[word::BUCKETS] != HIST_BUCKETS as u64
            || b.len() < area_len(limit)
        {
            return None;
        }
        Some(Area {
            words,
            from: crate::lane::c_string(b, FROM_AT, PATTERN_LEN),
            to: crate::lane::c_string(b, TO_AT, PATTERN_LEN),
            histogram: &b[HIST_AT..HIST_AT + HIST_BUCKETS * 8],
            descriptors: &b[window_at(0)..area_len(limit)],
        })
    }

    /// Intervals in bucket `b`.
    pub fn bucket_count(&self, b: usize) -> u64 {
        u64_at(self.histogram, b * 8)
    }

    /// The windows whose descriptors are whole, longest first.
    pub fn windows(&self) -> impl Iterator<Item = Window> + 'a {
        let d = self.descriptors;
        (0..d.len() / (WINDOW_WORDS * 8)).filter_map(move |i| {
            let at = i * WINDOW_WORDS * 8;
            let w = |k: usize| u64_at(d, at + k * 8);
            (w(0) != 0).then(|| Window {
                number: w(0),
                tid: w(1) as u32,
                from_tsc: w(2),
                to_tsc: w(3),
                chunks: (w(4), w(5)),
                flags: w(6),
                start_tsc: w(7),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value falls in the bucket whose bounds hold it, buckets are contiguous, and a bucket
    /// is at most 1/16 of its values wide.
    #[test]
    fn buckets_cover_every_value_without_gaps() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(15), 15);
        assert_eq!(bucket(16), 16);
        assert_eq!(bucket(u64::MAX), HIST_BUCKETS - 1);
        for b in 0..HIST_BUCKETS - 1 {
            assert_eq!(bucket_high(b) + 1, bucket_low(b + 1), "bucket {b}");
            assert_eq!(bucket(bucket_low(b)), b);
            assert_eq!(bucket(bucket_high(b)), b);
            let (lo, hi) = (bucket_low(b), bucket_high(b));
            assert!(
                lo < 16 || (hi - lo + 1) * 16 <= lo,
                "bucket {b}: {lo}..{hi}"
            );
        }
        for v in [
            17u64,
            1000,
            1_000_000,
            3_000_000_000,
            1 << 40,
            (1 << 63) + 5,
        ] {
            let b = bucket(v);
            assert!(bucket_low(b) <= v && v <= bucket_high(b), "{v}");
        }
    }
}
