//! A session with more records than a report holds in memory, with `tests/runtime/many.c`: two
//! processes of two threads each, merged by time through a temporary file and read back from
//! it, every record there, in order, each thread's calls nested, each record under its own
//! process's names.

use super::{ok, tools, Work};
use bootprof_format::trace::RecordKind;
use std::collections::HashMap;
use std::process::Command;

/// Calls of step() per thread: 24 N records in all, past the million a report sorts in memory.
const N: u64 = 50_000;

#[test]
fn a_session_past_memory_is_merged_through_a_file() {
    let w = Work::new("scale");
    let exe = w.build("many", &["many.c"], &["-finstrument-functions"], &[]);
    let dir = w.path("many.session");
    ok(&Command::new(tools().join("bootprof"))
        .args(["run", "--keep", "all", "--mode", "call", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(&exe)
        .arg(N.to_string())
        .output()
        .unwrap());
    let t = bootprof_report::read_trace(&dir).unwrap();
    // Each process: main, two_threads, two workers' ENTER and EXIT, but the child's main ENTER
    // was recorded by its parent before the fork.
    assert_eq!(t.records.len() as u64, 24 * N + 8 + 7);
    assert!(
        t.records.as_slice().is_none(),
        "more than a run's worth of records is read from a file"
    );
    assert_eq!(t.processes.len(), 2);
    let mut last = 0;
    let mut stacks: HashMap<u32, Vec<&str>> = HashMap::new();
    let mut calls: HashMap<&str, u64> = HashMap::new();
    for (i, r) in t.records.iter().enumerate() {
        assert!(r.tsc >= last, "record {i} is out of order");
        last = r.tsc;
        let f = t.sites[r.site as usize].function.as_str();
        let (p, _) = t.thread_process[&r.tid];
        assert_eq!(
            t.sites[r.site as usize].process, p,
            "record {i}: another process's site"
        );
        let stack = stacks.entry(r.tid).or_default();
        match r.kind {
            RecordKind::Enter => {
                stack.push(f);
                *calls.entry(f).or_default() += 1;
            }
            RecordKind::Exit => match stack.pop() {
                Some(g) => assert_eq!(g, f, "record {i}: {f} returns inside {g}"),
                None => assert_eq!(f, "main", "record {i}: {f} returns, never entered"),
            },
            k => panic!("record {i}: {k:?}"),
        }
    }
    assert!(stacks.values().all(|s| s.is_empty()), "{stacks:?}");
    let expected = [
        ("main", 1),
        ("two_threads", 2),
        ("worker", 4),
        ("step", 4 * N),
        ("leaf", 8 * N),
    ];
    assert_eq!(calls, expected.into_iter().collect());
    // The report of it: the same counts, from the same file.
    let points = ok(&Command::new(tools().join("bootprof"))
        .args(["report", "--format", "points"])
        .arg(&dir)
        .output()
        .unwrap());
    let all = points.split("all 2 processes").nth(1).expect(&points);
    for (f, n) in expected {
        let line = all.lines().find(|l| l.split_whitespace().next() == Some(f));
        let count = line.and_then(|l| l.split_whitespace().nth(1));
        assert_eq!(count, Some(n.to_string().as_str()), "{f}:\n{points}");
    }
}
