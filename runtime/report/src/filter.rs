//! Report-time filters (`bootprof report --depth N --min-time DURATION`): takes the ENTER and
//! EXIT records of a trace and the filter; hands on the indices of the ENTER and EXIT records of the calls it leaves out,
//! which every format then skips (`Model::left_out`), as if the runtime had not recorded them
//! (`bootprof run --depth --min-time` filters the same way while recording).
//!
//! A call is a frame of a name that has EXITs: an ENTER and the EXIT that ends it (the
//! innermost open frame of its name, as the timeline pairs them). `--depth N` keeps the calls
//! of the outermost N levels of each thread; `--min-time D` keeps a call that took at least D,
//! decided at its EXIT, so that a call nested in a kept one but shorter than D is left out.
//! A frame that never sees its EXIT (the trace ended first, or it was left by a `longjmp`)
//! has no duration: only `--depth` applies to it. Functions with entries only
//! (`Model::entry_only`) have no calls to filter: their records all stay.

/// What to leave out; the default leaves out nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Keep only the calls of the outermost this many levels per thread.
    pub depth: Option<u32>,
    /// Keep only the calls that took at least this many nanoseconds.
    pub min_ns: Option<u64>,
}

impl Filter {
    /// Whether it leaves anything out.
    pub fn is_some(&self) -> bool {
        self.depth.is_some() || self.min_ns.is_some()
    }

    /// `--depth N --min-time D`, as the options were given (for the notes).
    pub fn options(&self) -> String {
        let depth = self.depth.map(|d| format!("--depth {d}"));
        let time = self.min_ns.map(|ns| format!("--min-time {}", duration(ns)));
        depth.into_iter().chain(time).collect::<Vec<_>>().join(" ")
    }
}

/// `ns` in the largest unit that shows it whole: `1ms`, `250us`, `1500ns`.
pub fn duration(ns: u64) -> String {
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1000)] {
        if ns >= scale && ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// The records a filter left out.
#[derive(Clone, Debug)]
pub struct Filtered {
    filter: Filter,
    /// One bit per record.
    bits: Vec<u64>,
    /// Calls left out.
    calls: u64,
}

impl Filtered {
    /// Whether record `index` is left out.
    #[inline]
    pub fn contains(&self, index: usize) -> bool {
        self.bits
            .get(index / 64)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    /// Calls left out.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// What the reports say of it.
    pub fn describe(&self) -> String {
        format!(
            "filtered at report time ({}): {} call{} left out",
            self.filter.options(),
            self.calls,
            if self.calls == 1 { "" } else { "s" }
        )
    }

    fn leave_out(&mut self, index: usize) {
        self.bits[index / 64] |= 1 << (index % 64);
    }
}

/// An open call: its ENTER's index, time and name.
struct Open {
    index: usize,
    start: u64,
    name: u32,
}

/// Finds the calls a filter leaves out, fed the ENTER and EXIT records of the names that have
/// EXITs, in order (the model does: [`crate::model::Model::filter`]).
pub struct Calls {
    out: Filtered,
    depth: usize,
    min: u64,
    /// Per lane, its open calls.
    stacks: Vec<Vec<Open>>,
}

impl Calls {
    /// Before the first of `records` records of `lanes` lanes.
    pub fn new(filter: Filter, records: usize, lanes: usize) -> Calls {
        Calls {
            out: Filtered {
                filter,
                bits: vec![0; records.div_ceil(64)],
                calls: 0,
            },
            depth: filter.depth.map_or(usize::MAX, |d| d as usize),
            min: filter.min_ns.unwrap_or(0),
            stacks: (0..lanes).map(|_| Vec::new()).collect(),
        }
    }

    /// The ENTER record `index` of `name` on `lane`, at `t` ns.
    pub fn enter(&mut self, lane: usize, index: usize, name: u32, t: u64) {
        self.stacks[lane].push(Open {
            index,
            start: t,
            name,
        });
    }

    /// The EXIT record `index` of `name` on `lane`, at `t` ns: it ends the innermost open call
    /// of that name (the ones above it ended without an EXIT).
    pub fn exit(&mut self, lane: usize, index: usize, name: u32, t: u64) {
        let stack = &mut self.stacks[lane];
        let Some(at) = stack.iter().rposition(|o| o.name == name) else {
            // An EXIT without its ENTER: the reports drop it anyway.
            return;
        };
        while stack.len() > at + 1 {
            let open = stack.pop().expect("a call above the one that ends");
            Calls::unended(&mut self.out, self.depth, stack.len(), &open);
        }
        let open = stack.pop().expect("the call that ends");
        if stack.len() >= self.depth || t.saturating_sub(open.start) < self.min {
            self.out.leave_out(open.index);
            self.out.leave_out(index);
            self.out.calls += 1;
        }
    }

    /// A call that ended without an EXIT, at `level`: only its depth decides.
    fn unended(out: &mut Filtered, depth: usize, level: usize, open: &Open) {
        if level >= depth {
            out.leave_out(open.index);
            out.calls += 1;
        }
    }

    /// After the last record: what was left out.
    pub fn finish(mut self) -> Filtered {
        for stack in &mut self.stacks {
            while let Some(open) = stack.pop() {
                Calls::unended(&mut self.out, self.depth, stack.len(), &open);
            }
        }
        self.out
    }
}
