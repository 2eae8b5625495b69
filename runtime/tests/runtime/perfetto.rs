//! `bootprof report --format perfetto` over real sessions, read back with the schema Perfetto's
//! own Python package generates from its `.proto` files (`tests/perfetto/summarize`, which reads
//! the trace as trace_processor does: interned names per sequence, events sorted per track, an
//! END ending the innermost open slice), and compared with what the trace holds: the frames the
//! timeline opens and closes (as every other format shows them) exactly, and the records
//! themselves (ENTERs, EVENTs, the blamed wait) independently of the timeline.

use super::*;
use bootprof_format::trace::RecordKind;
use bootprof_report::model::Model;
use bootprof_report::timeline::{self, Closed, Frame, FrameKind, Sink};
use serde_json::{json, Value};

/// `bootprof report --format perfetto -o OUT SESSION`, then `tests/perfetto/summarize OUT`.
/// Fails, with what to do, when python3 or its perfetto package is missing: tests/setup
/// installs them.
fn perfetto_summary(w: &Work, session: &Path) -> Value {
    let out = w.path("trace.pftrace");
    ok(&Command::new(tools().join("bootprof"))
        .args(["report", "--format", "perfetto", "-o"])
        .arg(&out)
        .arg(session)
        .output()
        .unwrap());
    let script = root().join("tests/perfetto/summarize");
    let o = Command::new("python3")
        .arg(&script)
        .arg(&out)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "python3: {e}: this test needs python3 and its `perfetto` package; run tests/setup"
            )
        });
    assert!(
        o.status.success(),
        "{} failed ({:?}): {}\nthis test needs python3 and its `perfetto` package; run tests/setup",
        script.display(),
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["errors"], json!([]), "{summary:#}");
    summary
}

/// What the Perfetto trace must show, from the timeline's walk: per thread its slices
/// `[category, name, begin, end, depth, args]` in the order they begin and its instants
/// `[category, name, ts, depth, args]`; the flows of the blames shown.
struct Expected<'a, 'm> {
    m: &'a Model<'m>,
    threads: Vec<Thread>,
    /// A blame whose frame opens next: (waiter, blame).
    blame: Option<(usize, usize)>,
    /// `[from tid, from name, ts, to tid, to name, ts]`.
    flows: Vec<Value>,
}

#[derive(Default)]
struct Thread {
    slices: Vec<Value>,
    open: Vec<usize>,
    max_depth: usize,
    instants: Vec<Value>,
}

impl Sink for Expected<'_, '_> {
    fn open(&mut self, lane: usize, below: &[Frame], frame: &Frame) -> std::io::Result<()> {
        let category = match (frame.mirrored, frame.kind) {
            (true, _) => "blamed",
            (false, FrameKind::Function) => "function",
            (false, FrameKind::Wait) => "wait",
            (false, FrameKind::Blame) => "blame",
        };
        let mut args = json!({});
        if let (Some((waiter, b)), "blame") = (self.blame.take(), category) {
            assert_eq!(waiter, lane);
            let m = self.m;
            let blame = &m.holds.blames[b];
            let holder = &m.lanes[blame.holder];
            args = json!({
                "holder": holder.label_text(),
                "holder_tid": holder.tid,
                "holder_pid": holder.pid,
                "held_since_ns": m.ns(m.trace.records.at(blame.hold).tsc),
                "released_at_ns": blame.end_ns,
            });
            let release = m.name(&m.trace.records.at(blame.release));
            self.flows.push(json!([
                m.lanes[lane].tid,
                m.text(frame.name),
                frame.start,
                holder.tid,
                m.text(release),
                blame.end_ns
            ]));
        }
        let t = &mut self.threads[lane];
        assert_eq!(t.open.len(), below.len());
        t.open.push(t.slices.len());
        t.max_depth = t.max_depth.max(t.open.len());
        // As the formats name frames: `name (inferred)` for a function with entries only.
        let name = self.m.frame_label(frame.name).into_owned();
        (t.slices).push(json!([
            category,
            name,
            frame.start,
            null,
            below.len(),
            args
        ]));
        Ok(())
    }

    fn close(
        &mut self,
        lane: usize,
        _: &[Frame],
        _: &Frame,
        end: u64,
        _: Closed,
    ) -> std::io::Result<()> {
        let t = &mut self.threads[lane];
        let i = t.open.pop().unwrap();
        t.slices[i][3] = json!(end);
        Ok(())
    }

    fn blame(&mut self, lane: usize, blame: usize, _t: u64) -> std::io::Result<()> {
        self.blame = Some((lane, blame));
        Ok(())
    }

    fn instant(
        &mut self,
        lane: usize,
        _index: usize,
        r: &bootprof_format::trace::Record,
        name: u32,
        t: u64,
    ) -> std::io::Result<()> {
        let (category, args) = match r.kind {
            RecordKind::Event => ("event", json!({ "arg": r.arg })),
            RecordKind::Hold | RecordKind::Release => ("hold", json!({ "what": r.kind.name() })),
            _ => return Ok(()),
        };
        let t_ = &mut self.threads[lane];
        let depth = t_.open.len();
        (t_.instants).push(json!([category, self.m.text(name), t, depth, args]));
        Ok(())
    }
}

/// The summary `tests/perfetto/summarize` must print for `trace`, less the track uuids, and the
/// flows as `[from tid, from name, ts, to tid, to name, ts]`.
fn expected_summary(trace: &bootprof_report::Trace) -> (Value, Value, Value) {
    let mut m = Model::new(trace);
    bootprof_report::holds::blame(&mut m);
    let mut e = Expected {
        m: &m,
        threads: (0..m.lanes.len()).map(|_| Thread::default()).collect(),
        blame: None,
        flows: Vec::new(),
    };
    timeline::walk(&m, &mut e).unwrap();
    let threads: Vec<Value> = (m.lanes.iter().zip(&e.threads))
        .map(|(lane, t)| {
            json!({
                "pid": lane.pid, "tid": lane.tid, "name": lane.label_text(),
                "begins": t.slices.len(), "ends": t.slices.len(), "max_depth": t.max_depth,
                "slices": t.slices, "instants": t.instants,
            })
        })
        .collect();
    let processes: Vec<Value> = (trace.processes.iter())
        .map(|p| {
            let end = format!("process end: {}", p.ending);
            json!({
                "pid": p.pid, "name": p.label(), "cmdline": p.args,
                "instants": [["process", end, m.ns(p.end_tsc.unwrap()), 0, {}]],
            })
        })
        .collect();
    (json!(processes), json!(threads), json!(e.flows))
}

/// The summary with the track uuids left out, and its flows as `[from tid, from name, ts, to
/// tid, to name, ts]`.
fn without_uuids(summary: &Value) -> (Value, Value, Value) {
    let mut processes = summary["processes"].clone();
    for p in processes.as_array_mut().unwrap() {
        p.as_object_mut().unwrap().remove("uuid");
    }
    let mut threads = summary["threads"].clone();
    let mut tid_of = std::collections::HashMap::new();
    for t in threads.as_array_mut().unwrap() {
        let t = t.as_object_mut().unwrap();
        tid_of.insert(t["uuid"].as_u64().unwrap(), t["tid"].clone());
        t.remove("uuid");
        t.remove("parent");
    }
    let flows: Vec<Value> = (summary["flows"].as_array().unwrap().iter())
        .map(|f| {
            assert_eq!(
                (&f["terminated"], &f["events"]),
                (&json!(true), &json!(2)),
                "{f}"
            );
            let (from, to) = (&f["from"], &f["to"]);
            let tid = |end: &Value| tid_of[&end[0].as_u64().unwrap()].clone();
            json!([tid(from), from[1], from[2], tid(to), to[1], to[2]])
        })
        .collect();
    (processes, threads, json!(flows))
}

/// The Perfetto trace of session `s` in `w`, read back by `tests/perfetto/summarize`, checked
/// against the timeline's walk of `trace` (the session read back): the summary, and its
/// processes, threads and flows less the track uuids.
fn summary_as_timeline_shows(
    w: &Work,
    trace: &bootprof_report::Trace,
) -> (Value, Value, Value, Value) {
    let summary = perfetto_summary(w, &w.path("s"));
    let (processes, threads, flows) = without_uuids(&summary);
    let (want_processes, want_threads, want_flows) = expected_summary(trace);
    assert_eq!(processes, want_processes, "{summary:#}");
    assert_eq!(threads, want_threads, "{summary:#}");
    assert_eq!(flows, want_flows, "{summary:#}");
    (summary, processes, threads, flows)
}

/// A session of a program with two threads (nested regions, events, a wait blamed on the other
/// thread's hold) and a forked child: the Perfetto trace holds each process and thread, every
/// frame as a balanced, nested slice, every event, the process ends, and the blame as a flow.
#[test]
fn perfetto_trace_of_threads_a_blamed_wait_and_a_child() {
    let w = Work::new("perfetto");
    w.build("threads", &["threads.c"], &[], &[]);
    let (t, _) = session_of(&w, "s", &["./threads"], &[]);
    assert_eq!(t.processes.len(), 2);
    let (summary, processes, threads, flows) = summary_as_timeline_shows(&w, &t);
    assert!(summary["clock_snapshots"][0]["1"].as_u64().unwrap() > 1_600_000_000 * 1_000_000_000);

    // The same, from the records rather than the timeline: the processes as `name-pid`, both
    // ending with exit 0; per thread, a function slice per ENTER and an instant per EVENT, in
    // order.
    for (p, q) in processes.as_array().unwrap().iter().zip(&t.processes) {
        assert_eq!(p["name"], format!("threads-{}", q.pid));
        assert_eq!(p["instants"][0][1], "process end: exit 0");
    }
    let threads = threads.as_array().unwrap();
    let mut names: Vec<&str> = threads
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    // The child's thread is named after its executable.
    assert_eq!(names, ["loader", "main", "threads"], "{summary:#}");
    for thread in threads {
        let tid = thread["tid"].as_u64().unwrap() as u32;
        let of_kind = |kind| -> Vec<(String, u64)> {
            (t.records.iter())
                .filter(|r| t.real_tid(r.tid) == tid && r.kind == kind)
                .map(|r| {
                    let s = &t.sites[r.site as usize];
                    let name = if kind == RecordKind::Enter {
                        &s.function
                    } else {
                        &s.name
                    };
                    (name.clone(), r.arg)
                })
                .collect()
        };
        let slices = |category: &str| -> Vec<String> {
            (thread["slices"].as_array().unwrap().iter())
                .filter(|s| s[0] == category)
                .map(|s| s[1].as_str().unwrap().to_string())
                .collect()
        };
        let enters: Vec<String> = of_kind(RecordKind::Enter)
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(slices("function"), enters, "{thread:#}");
        let events: Vec<(String, u64)> = (thread["instants"].as_array().unwrap().iter())
            .filter(|i| i[0] == "event")
            .map(|i| {
                let name = i[1].as_str().unwrap();
                (
                    name.trim_start_matches("app:").to_string(),
                    i[4]["arg"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(events, of_kind(RecordKind::Event), "{thread:#}");
        assert_eq!(thread["begins"], thread["ends"]);
    }
    // main's wait on the table is blamed on the loader, which holds the table until its
    // RELEASE: the blame slice says so and a flow goes from it to that release.
    let named = |name: &str| threads.iter().find(|t| t["name"] == name).unwrap();
    let (main, loader) = (named("main"), named("loader"));
    let blame = (main["slices"].as_array().unwrap().iter())
        .find(|s| s[0] == "blame")
        .expect("a blame slice on main");
    assert_eq!(blame[1], "wait:table (blamed on loader)");
    assert_eq!(blame[5]["holder"], "loader");
    assert_eq!(blame[5]["holder_tid"], loader["tid"]);
    let release = (loader["instants"].as_array().unwrap().iter())
        .find(|i| i[4]["what"] == "RELEASE")
        .unwrap();
    assert_eq!(blame[5]["released_at_ns"], release[2]);
    assert_eq!(
        flows,
        json!([[
            main["tid"],
            blame[1],
            blame[2],
            loader["tid"],
            release[1],
            release[2]
        ]])
    );
    // use_table > the blame > the loader's build > fill > fill_row.
    assert_eq!(main["max_depth"], 5);
    assert_eq!(loader["max_depth"], 3);
}

/// Entries-only hooks (`-pg -mfentry`), two processes in a session: the frames a later ENTER
/// does not show as returned stay open until their process ends, and close there, as in the
/// other formats; no slice is left open and none ends after its process.
#[test]
fn perfetto_closes_entries_only_frames_where_their_process_ended() {
    let w = Work::new("perfetto-entries");
    // (Longer than 5 ms, so that its TSC rate comes from its own start and end, the same each
    // time it is read.)
    let t = entries_only_session(&w);
    let (_, processes, threads, _) = summary_as_timeline_shows(&w, &t);
    for thread in threads.as_array().unwrap() {
        let slices = thread["slices"].as_array().unwrap();
        assert!(slices.len() > 10, "{thread:#}");
        let process = (processes.as_array().unwrap().iter())
            .find(|q| q["pid"] == thread["pid"])
            .unwrap();
        let ended = process["instants"][0][2].as_u64().unwrap();
        let last = slices.iter().map(|s| s[3].as_u64().unwrap()).max().unwrap();
        assert!(
            last <= ended,
            "a slice ends at {last}, its process at {ended}"
        );
        // main's frame never sees an EXIT: it closes where the process ended, and its name says
        // its end was inferred.
        assert_eq!(slices[0][1], "main (inferred)");
        assert_eq!(slices[0][3].as_u64().unwrap(), ended);
    }
}
