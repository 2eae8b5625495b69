//! `--format folded`: takes a [`Model`]; hands on folded stacks for flame-graph tools
//! (`flamegraph.pl`, `inferno-flamegraph`, speedscope): one line per distinct stack,
//! `thread;outer;...;inner NANOSECONDS`, the value being the *self* time of the innermost frame
//! on that stack, summed over the trace, in nanoseconds. Lines are sorted; stacks with no self
//! time are left out (their time is in the lines of their children).
//!
//! The first frame is the thread's name (its tid when it has none); in a session of several
//! processes it is preceded by the process, `exe-pid`. A wait shows as a
//! `wait:<what>` frame, and the stacks of a thread blamed for it under
//! `wait:<what> (blamed on <thread>)` (see [`holds`](crate::holds)). Frame names have `;` turned
//! into `:` and line breaks into spaces, so every line splits back the same way.
//!
//! A frame of a function with entries only (`-pg`/`-mfentry` code recorded without `bootprof
//! run --graph`) is named with ` (inferred)` after the function, `main;run (inferred);parse
//! (inferred) 1200`: when it returned, so its time and the frames above it, were inferred (see
//! [`timeline`]). The frames of a recorded stack are unwound, not inferred: never marked. A folded line has no room for a comment: `bootprof report` says so on stderr.
//!
//! A hit whose call stack was recorded (`bootprof run --stacktrace`) adds to the line of its own
//! path under the thread: the functions of its stack, outermost first, from the outermost one
//! that is instrumented (`[unknown]` for an address between them that no instrumented function
//! holds), then the hit's name: an EVENT becomes a leaf under its real callers. A hit has no
//! duration: each one weighs 1 (nanosecond), so in a trace of such hits alone the values are
//! hit counts, and beside timed frames they are next to nothing.

use crate::model::{Model, NameId};
use crate::timeline::{self, Closed, Frame, Sink, Stack};
use std::collections::HashMap;
use std::io::{self, Write};

/// Writes the folded stacks.
pub fn write(m: &Model, out: &mut dyn Write) -> io::Result<()> {
    let tree = stacks(m)?;
    let mut lines: Vec<(String, u64)> = Vec::new();
    let mut path: Vec<(NameId, bool)> = Vec::new();
    for (node, &value) in tree.value.iter().enumerate() {
        if value == 0 {
            continue;
        }
        path.clear();
        let mut n = node as u32;
        while n != ROOT {
            let (parent, name, inferred) = tree.nodes[n as usize];
            path.push((name, inferred));
            n = parent;
        }
        let mut line = String::new();
        for (i, &(name, inferred)) in path.iter().rev().enumerate() {
            if i > 0 {
                line.push(';');
            }
            let text = if inferred {
                m.frame_label(name)
            } else {
                m.text(name).into()
            };
            line.extend(text.chars().map(|c| match c {
                ';' => ':',
                '\n' | '\r' => ' ',
                c => c,
            }));
        }
        lines.push((line, value));
    }
    lines.sort_unstable();
    for (line, value) in lines {
        writeln!(out, "{line} {value}")?;
    }
    Ok(())
}

const ROOT: u32 = u32::MAX;

/// The stacks as a tree: node -> (parent, name, whether the frame is inferred: a function with
/// entries only, as the timeline shows it, not in a recorded stack), and each node's self time.
pub struct Tree {
    nodes: Vec<(u32, NameId, bool)>,
    value: Vec<u64>,
}

/// The tree of every stack of `m`, with self times.
pub fn stacks(m: &Model) -> io::Result<Tree> {
    let mut sink = Folder {
        m,
        tree: Tree {
            nodes: Vec::new(),
            value: Vec::new(),
        },
        children: HashMap::new(),
        lanes: vec![Vec::new(); m.lanes.len()],
        roots: Vec::new(),
    };
    for lane in &m.lanes {
        // A session's stacks start with their process (`exe-pid`), then the thread.
        let under = match lane.process_label {
            crate::model::NO_NAME => ROOT,
            process => sink.child(ROOT, process, false),
        };
        let root = sink.child(under, lane.label, false);
        sink.roots.push(root);
    }
    timeline::walk(m, &mut sink)?;
    Ok(sink.tree)
}

struct Folder<'a, 'm> {
    m: &'a Model<'m>,
    tree: Tree,
    children: HashMap<(u32, NameId, bool), u32>,
    /// Per lane, the node of each open frame.
    lanes: Vec<Vec<u32>>,
    roots: Vec<u32>,
}

impl Folder<'_, '_> {
    fn child(&mut self, parent: u32, name: NameId, inferred: bool) -> u32 {
        let tree = &mut self.tree;
        *self
            .children
            .entry((parent, name, inferred))
            .or_insert_with(|| {
                tree.nodes.push((parent, name, inferred));
                tree.value.push(0);
                tree.nodes.len() as u32 - 1
            })
    }
}

impl Sink for Folder<'_, '_> {
    fn open(&mut self, lane: usize, _below: &[Frame], frame: &Frame) -> io::Result<()> {
        let parent = self.lanes[lane].last().copied().unwrap_or(self.roots[lane]);
        let inferred = self.m.entry_only(frame.name);
        let node = self.child(parent, frame.name, inferred);
        self.lanes[lane].push(node);
        Ok(())
    }

    fn stack(&mut self, lane: usize, stack: &Stack, _t: u64) -> io::Result<()> {
        let mut node = self.roots[lane];
        for &name in stack.path {
            node = self.child(node, name, false);
        }
        let value = &mut self.tree.value[node as usize];
        *value = value.saturating_add(1);
        Ok(())
    }

    fn close(
        &mut self,
        lane: usize,
        _below: &[Frame],
        frame: &Frame,
        end: u64,
        _how: Closed,
    ) -> io::Result<()> {
        if let Some(node) = self.lanes[lane].pop() {
            let total = end.saturating_sub(frame.start);
            let value = &mut self.tree.value[node as usize];
            *value = value.saturating_add(total.saturating_sub(frame.children));
        }
        Ok(())
    }
}
