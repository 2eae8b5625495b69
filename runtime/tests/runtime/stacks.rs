//! Call stacks recorded at hits (`bootprof run --stacktrace`), checked against the return
//! addresses the program itself sees (`tests/runtime/stacks.c`), for probe and hook sites, in
//! trap and call mode, with hooks before the prologue (`__fentry__`) and after it (`mcount`,
//! `__cyg_profile_func_enter`), both forms of probes, and a tail jump; and under function-graph
//! tracing, where hooked frames return through a trampoline.

use super::*;
use bootprof_format::trace::RecordKind;
use bootprof_format::Kind;
use bootprof_report::model::Model;
use std::collections::HashMap;

/// The builds: each hook kind, each probe form, frame pointers kept.
const BUILDS: [(&str, &[&str]); 5] = [
    ("fentry-guards", &["-pg", "-mfentry"]),
    ("mcount-guards", &["-pg"]),
    (
        "fentry-calls",
        &["-pg", "-mfentry", "-DBOOTPROF_CALL_SITES"],
    ),
    ("cyg-guards", &["-finstrument-functions"]),
    (
        "cyg-calls",
        &["-finstrument-functions", "-DBOOTPROF_CALL_SITES"],
    ),
];

/// The sites whose hits record their stacks: a probe in st_c, st_c's own hooks, and the probe
/// st_tail ends with (a tail jump in the fentry-calls build).
const TRACED: [&str; 3] = ["st:leaf", "st_c", "st:tail"];

/// What `stacks` printed: its functions' addresses (`fn NAME ADDR`) and where each returns to
/// (`ret NAME ADDR`).
struct Seen {
    start: HashMap<String, u64>,
    ret: HashMap<String, u64>,
}

impl Seen {
    fn parse(out: &str) -> Seen {
        let mut seen = Seen {
            start: HashMap::new(),
            ret: HashMap::new(),
        };
        for line in out.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let Ok(addr) = u64::from_str_radix(f[2].trim_start_matches("0x"), 16) else {
                continue;
            };
            let map = if f[0] == "fn" {
                &mut seen.start
            } else {
                &mut seen.ret
            };
            map.insert(f[1].to_string(), addr);
        }
        assert_eq!((seen.start.len(), seen.ret.len()), (5, 5), "{out}");
        seen
    }

    /// The return addresses a stack taken in `function` starts with, innermost first: where
    /// `function` returns to, then its callers'.
    fn chain(&self, function: &str) -> Vec<u64> {
        [function, "st_b", "st_a", "main"]
            .iter()
            .map(|f| self.ret[*f])
            .collect()
    }

    /// `address` as the text report shows a frame: `function+0xOFFSET`.
    fn symbol(&self, address: u64) -> String {
        let (name, start) = (self.start.iter())
            .filter(|(_, &s)| s <= address)
            .max_by_key(|(_, &s)| s)
            .unwrap();
        format!("{name}+{:#x}", address - start)
    }
}

/// Checks every recorded stack of `t` against what the program saw: the hits of the traced
/// sites each have one, starting with the site's address and then exactly the return addresses
/// of the chain, at most 64 frames in all; every other hit has none. Returns how many stacks
/// each traced site had.
fn check_stacks(t: &bootprof_report::Trace, seen: &Seen, what: &str) -> HashMap<String, usize> {
    let m = Model::new(t);
    let mut stacks: HashMap<String, usize> = HashMap::new();
    let mut records = t.records.iter();
    while let Some(r) = records.next() {
        if r.kind == RecordKind::Frame {
            continue;
        }
        let site = &t.sites[r.site as usize];
        if r.kind == RecordKind::Exit && matches!(site.kind, Kind::Fentry | Kind::Mcount) {
            // A hooked return (function-graph tracing) records no stack.
            continue;
        }
        let traced = TRACED.iter().find(|&&p| {
            p == format!("{}:{}", site.provider, site.name)
                || (site.kind.is_hook() && p == site.function)
        });
        let frames: Vec<u64> = (m.stack_of(&r, records.ahead()).iter())
            .map(|f| f.arg)
            .collect();
        let Some(&pattern) = traced else {
            assert!(
                frames.is_empty(),
                "{what}: {site:?} is not traced: {frames:x?}"
            );
            continue;
        };
        assert!(
            (5..=64).contains(&frames.len()),
            "{what}: {site:?}: {frames:x?}"
        );
        assert_eq!(frames[0], site.address, "{what}: {site:?}: the site first");
        assert_eq!(
            frames[1..5],
            seen.chain(&site.function),
            "{what}: {site:?}: {frames:x?}"
        );
        *stacks.entry(pattern.to_string()).or_default() += 1;
    }
    stacks
}

/// `stacks.c` built as `name` with frame pointers and `flags`.
fn build_stacks(w: &Work, name: &str, flags: &[&str]) -> PathBuf {
    let mut cflags = vec!["-fno-omit-frame-pointer"];
    cflags.extend(flags);
    w.build(name, &["stacks.c"], &cflags, &[])
}

/// Runs `stacks 3` under `bootprof run --mode MODE --stacktrace ...` into session `name`.
fn run_traced(w: &Work, exe: &Path, name: &str, mode: &str) -> (bootprof_report::Trace, Seen) {
    let (t, out) = run_traced_with(w, exe, name, &["--mode", mode], &[]);
    (t, Seen::parse(&out))
}

/// Runs `[wrapper...] bootprof run OPTIONS --stacktrace ... -o SESSION -- stacks 3` into session
/// `name`: the trace and what the program printed.
fn run_traced_with(
    w: &Work,
    exe: &Path,
    name: &str,
    options: &[&str],
    wrapper: &[&str],
) -> (bootprof_report::Trace, String) {
    let dir = w.path(name);
    let bootprof = tools().join("bootprof");
    let mut cmd = match wrapper {
        [] => Command::new(&bootprof),
        [first, rest @ ..] => {
            let mut c = Command::new(first);
            c.args(rest).arg(&bootprof);
            c
        }
    };
    cmd.arg("run").args(options).arg("-o").arg(&dir);
    for p in TRACED {
        cmd.args(["--stacktrace", p]);
    }
    let o = cmd.arg("--").arg(exe).arg("3").output().unwrap();
    let out = ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("matched no site"), "{stderr}");
    (bootprof_report::read_trace(&dir).unwrap(), out)
}

/// Under function-graph tracing every hooked frame's return address is the trampoline's (the
/// program's own `__builtin_return_address` sees it); the recorded stacks still name the real
/// callers, taken from the shadow stack. Address randomization is turned off (`setarch -R`) so
/// that a plain run of the program says what the real return addresses are.
#[test]
fn stacks_under_function_graph_tracing_name_the_real_callers() {
    let w = Work::new("stacks-graph");
    let no_aslr = ["setarch", "-R"];
    for (build, flags) in &BUILDS[..2] {
        let exe = build_stacks(&w, build, flags);
        let plain = Command::new(no_aslr[0])
            .args(&no_aslr[1..])
            .arg(&exe)
            .arg("3")
            .output()
            .unwrap();
        let seen = Seen::parse(&ok(&plain));
        for mode in ["trap", "call"] {
            let what = format!("{build} {mode} --graph");
            let name = format!("{build}-{mode}-graph");
            let options = ["--graph", "--mode", mode];
            let (t, out) = run_traced_with(&w, &exe, &name, &options, &no_aslr);
            let hooked = Seen::parse(&out);
            assert_eq!(hooked.start, seen.start, "{what}: the same addresses");
            for f in ["st_a", "st_b", "st_c"] {
                assert_ne!(
                    hooked.ret[f], seen.ret[f],
                    "{what}: {f} returns via the trampoline"
                );
            }
            let stacks = check_stacks(&t, &seen, &what);
            let want = HashMap::from([
                ("st:leaf".to_string(), 3),
                ("st:tail".to_string(), 3),
                ("st_c".to_string(), 3),
            ]);
            assert_eq!(stacks, want, "{what}");
            let exits = (t.records.iter())
                .filter(|r| r.kind == RecordKind::Exit)
                .count();
            assert_eq!(exits, 3 * 4 + 1, "{what}: every hooked call's EXIT");
        }
    }
}

#[test]
fn stacks_at_probe_and_hook_sites_are_the_callers_the_program_sees() {
    let w = Work::new("stacks");
    for (build, flags) in BUILDS {
        let exe = build_stacks(&w, build, flags);
        if build == "fentry-calls" {
            // The tail site must be a jump for the test to mean anything.
            let listing = site_listing(&exe);
            assert!(
                listing
                    .lines()
                    .any(|l| l.contains(" jmp ") && l.contains("st:tail")),
                "{listing}"
            );
        }
        for mode in ["trap", "call"] {
            let what = format!("{build} {mode}");
            let (t, seen) = run_traced(&w, &exe, &format!("{build}-{mode}"), mode);
            let stacks = check_stacks(&t, &seen, &what);
            // Three hits of each probe; st_c's hooks: its ENTER, and its EXIT with
            // -finstrument-functions.
            let hooks = if build.starts_with("cyg") { 6 } else { 3 };
            let want = HashMap::from([
                ("st:leaf".to_string(), 3),
                ("st:tail".to_string(), 3),
                ("st_c".to_string(), hooks),
            ]);
            assert_eq!(stacks, want, "{what}");
        }
    }
}

/// The reports show the recorded stacks: the text report a `<stack trace>` line and ` => `
/// lines naming the functions (the address where none is known), the folded stacks the real
/// chain with the hit as its leaf, Chrome JSON the frames in `args.stack`.
#[test]
fn stacks_in_the_text_folded_and_chrome_reports() {
    let w = Work::new("stack-reports");
    let exe = build_stacks(&w, "stacks", &["-pg", "-mfentry"]);
    let (t, seen) = run_traced(&w, &exe, "s", "call");
    let report = |format: &str| report_of(&w.path("s"), format);
    let hit = (t.records.iter())
        .find(|r| r.kind == RecordKind::Event && t.sites[r.site as usize].name == "leaf")
        .unwrap();
    let leaf = &t.sites[hit.site as usize];
    let text = report("text");
    let lines: Vec<&str> = text.lines().collect();
    let at = (lines.iter())
        .position(|l| l.ends_with("EVENT st:leaf arg=0x0"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(lines[at + 1].ends_with(": <stack trace>"), "{text}");
    let want: Vec<String> = [
        format!("{}+{:#x}", leaf.function, leaf.func_offset),
        seen.symbol(seen.ret["st_c"]),
        seen.symbol(seen.ret["st_b"]),
        seen.symbol(seen.ret["st_a"]),
    ]
    .iter()
    .map(|s| format!(" => {s}"))
    .collect();
    assert_eq!(lines[at + 2..at + 6], want, "{text}");
    assert!(
        want[1].starts_with(" => st_b+") && want[3].starts_with(" => main+"),
        "{want:?}"
    );
    // Where main returns to is in the C library, which holds no site: its address.
    assert_eq!(
        lines[at + 6],
        format!(" => {:#x}", seen.ret["main"]),
        "{text}"
    );
    // A hit whose site is not traced has no stack.
    let other = (lines.iter())
        .position(|l| l.contains("EVENT st:other"))
        .unwrap();
    assert!(!lines[other + 1].contains("<stack trace>"), "{text}");

    // Each probe's hits are a leaf under their real callers, from main (the C library's frame
    // below it is left out), in the thread's own tree.
    let folded = report("folded");
    let root = &t.processes[0].label();
    for leaf in ["st_c;st:leaf", "st_tail;st:tail"] {
        let line = format!("{root};stacks;main;st_a;st_b;{leaf} 3");
        assert!(folded.lines().any(|l| l == line), "{line}\n{folded}");
    }
    assert!(!folded.contains("[unknown]"), "{folded}");
    let chrome: serde_json::Value = serde_json::from_str(&report("chrome")).unwrap();
    let stacks: Vec<&serde_json::Value> = chrome["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "stack" && e["name"] == "st:leaf")
        .collect();
    assert_eq!(stacks.len(), 3);
    assert_eq!(stacks[0]["args"]["stack"][1], want[1][4..]);
}

/// Without a session, the trace file dumped at exit (`BOOTPROF_OUTPUT`) keeps the stacks.
#[test]
fn stacks_are_kept_in_the_trace_file_dumped_at_exit() {
    let w = Work::new("stack-dump");
    let exe = build_stacks(&w, "stacks", &["-finstrument-functions"]);
    let path = w.path("stacks.trace");
    let o = run(
        &exe,
        &["3"],
        &[
            ("BOOTPROF_ENABLE", "st:*"),
            ("BOOTPROF_STACKTRACE", &TRACED.join(",")),
            ("BOOTPROF_MODE", "trap"),
            ("BOOTPROF_OUTPUT", path.to_str().unwrap()),
        ],
    );
    let seen = Seen::parse(&ok(&o));
    let t = bootprof_report::read_trace(&path).unwrap();
    let stacks = check_stacks(&t, &seen, "dump");
    // st_c's hooks are enabled by their --stacktrace pattern alone (BOOTPROF_ENABLE names the
    // probes only); other functions' hooks are not enabled.
    assert_eq!(stacks["st_c"], 6);
    assert_eq!((stacks["st:leaf"], stacks["st:tail"]), (3, 3));
    assert!(t.records.iter().all(|r| {
        let s = &t.sites[r.site as usize];
        !s.kind.is_hook() || s.function == "st_c"
    }));
}
