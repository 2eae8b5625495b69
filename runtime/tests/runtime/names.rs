//! Demangled names, with `tests/runtime/shapes.cpp` (a C++ program built `-pg -mfentry`, every
//! function a hook site): `bootprof list` and the reports show C++ functions as people read them
//! and keep the symbols where asked (`--no-demangle`, JSON), and patterns select a function by
//! its demangled name, whole or without its parameter list, in `bootprof run` and in
//! `BOOTPROF_ENABLE` alike.

use super::{ok, run, tools, Work};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles shapes.cpp with `c++ -pg -mfentry` and links it through bootprof-link.
fn build_shapes(w: &Work) -> PathBuf {
    w.build_cxx(
        "shapes",
        "shapes.cpp",
        &["-O1", "-pg", "-mfentry", "-fno-omit-frame-pointer"],
    )
}

const OUTPUT: &str = "areas 33.0 ints 6 doubles 5.0 total 6 added 12\n";

fn bootprof(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(tools().join("bootprof"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Hits per function in the session `dir`, as `bootprof report --format text` names them (the
/// last column of each ENTER line: `name() {`), read without and with `--no-demangle`.
fn entries(w: &Work, session: &str, demangle: bool) -> BTreeMap<String, usize> {
    let mut args = vec!["report", "--format", "text", "--options", "noprint-parent"];
    if !demangle {
        args.push("--no-demangle");
    }
    args.push(session);
    let text = ok(&bootprof(&args, &w.0));
    let mut hits = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some((_, name)) = line.split_once(": ") {
            *hits.entry(name.trim().to_string()).or_insert(0) += 1;
        }
    }
    hits
}

#[test]
fn lists_and_reports_show_demangled_names_and_keep_the_symbols() {
    let w = Work::new("names-list");
    let exe = build_shapes(&w);
    assert_eq!(ok(&run(&exe, &[], &[])), OUTPUT);

    let text = ok(&bootprof(&["list", "shapes"], &w.0));
    for want in [
        " geo::Circle::area() const+0x0 nop",
        " geo::scale(int)+0x0 nop",
        " geo::scale(double)+0x0 nop",
        " (anonymous namespace)::helper(int)+0x0 nop",
        " geo::Adder::operator()(int) const+0x0 nop",
        " int geo::total<int>(std::vector<int, std::allocator<int> > const&)+0x0 nop",
        " main+0x0 nop",
    ] {
        assert!(text.contains(want), "no `{want}` in:\n{text}");
    }
    assert!(!text.contains(" _Z"), "{text}");
    let raw = ok(&bootprof(&["list", "--no-demangle", "shapes"], &w.0));
    assert!(raw.contains(" _ZNK3geo6Circle4areaEv+0x0 nop"), "{raw}");
    assert!(raw.contains(" _ZN3geo5scaleEi+0x0 nop"), "{raw}");
    assert_eq!(raw.lines().count(), text.lines().count());

    let json: serde_json::Value =
        serde_json::from_str(&ok(&bootprof(&["list", "--json", "shapes"], &w.0))).unwrap();
    let sites = json["sites"].as_array().unwrap();
    let by_symbol = |symbol: &str| {
        sites
            .iter()
            .find(|s| s["symbol"] == symbol)
            .unwrap_or_else(|| panic!("no {symbol} in {json}"))
    };
    assert_eq!(
        by_symbol("_ZNK3geo6Circle4areaEv")["function"],
        "geo::Circle::area() const"
    );
    assert_eq!(by_symbol("main")["function"], "main");

    // Every site in call mode: the reports name the functions as `bootprof list` does.
    let o = bootprof(
        &[
            "run",
            "--mode",
            "call",
            "-o",
            "all.session",
            "--",
            "./shapes",
        ],
        &w.0,
    );
    assert_eq!(ok(&o), OUTPUT);
    let hits = entries(&w, "all.session", true);
    for (function, n) in [
        ("geo::Circle::area() const", 2),
        ("geo::Square::area() const", 1),
        ("geo::scale(int)", 2),
        ("geo::scale(double)", 1),
        ("(anonymous namespace)::helper(int)", 1),
        ("geo::Adder::operator()(int) const", 1),
        ("main", 1),
    ] {
        assert_eq!(hits.get(function), Some(&n), "{function}: {hits:?}");
    }
    let raw = entries(&w, "all.session", false);
    assert_eq!(raw.get("_ZNK3geo6Circle4areaEv"), Some(&2), "{raw:?}");
    assert_eq!(raw.values().sum::<usize>(), hits.values().sum::<usize>());

    let folded = ok(&bootprof(
        &["report", "--format", "folded", "all.session"],
        &w.0,
    ));
    assert!(
        // Recorded without --graph: entries only, marked.
        folded.contains(";main (inferred);geo::Circle::area() const (inferred) "),
        "{folded}"
    );
    let chrome: serde_json::Value = serde_json::from_str(&ok(&bootprof(
        &["report", "--format", "chrome", "all.session"],
        &w.0,
    )))
    .unwrap();
    let events = chrome["traceEvents"].as_array().unwrap();
    let begins = |name: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "B" && e["name"] == name)
            .collect::<Vec<_>>()
    };
    // Entries only: the frames' names say their ends were inferred.
    let area = begins("geo::Circle::area() const (inferred)");
    assert_eq!(area.len(), 2);
    assert!(area
        .iter()
        .all(|e| e["args"]["symbol"] == "_ZNK3geo6Circle4areaEv"));
    // A C function has no symbol of its own to show.
    let main = begins("main (inferred)");
    assert_eq!(main.len(), 1);
    assert!(main.iter().all(|e| e.get("args").is_none()));
}

/// `-e` and `BOOTPROF_ENABLE` patterns select hooks by demangled name, whole or without its
/// parameter list, as well as by symbol; a near miss is answered with demangled names.
#[test]
fn patterns_match_demangled_names() {
    let w = Work::new("names-patterns");
    build_shapes(&w);
    let cases: [(&str, &[&str]); 6] = [
        // The destructors it selects as well are never called.
        ("geo::Circle::*", &["geo::Circle::area() const"]),
        ("geo::scale", &["geo::scale(double)", "geo::scale(int)"]),
        ("geo::scale(int)", &["geo::scale(int)"]),
        (
            "*::area",
            &["geo::Circle::area() const", "geo::Square::area() const"],
        ),
        ("_ZN3geo5scaleEd", &["geo::scale(double)"]),
        ("(anonymous*", &["(anonymous namespace)::helper(int)"]),
    ];
    for (i, (pattern, want)) in cases.iter().enumerate() {
        let session = format!("p{i}.session");
        let o = bootprof(
            &["run", "-e", pattern, "-o", &session, "--", "./shapes"],
            &w.0,
        );
        assert_eq!(ok(&o), OUTPUT, "{pattern}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("matches none"), "{pattern}: {stderr}");
        let hits = entries(&w, &session, true);
        let got: Vec<&str> = hits.keys().map(String::as_str).collect();
        assert_eq!(&got, want, "{pattern}");

        // The same pattern given to the runtime directly.
        let session = w.path(&format!("env{i}.session"));
        std::fs::create_dir(&session).unwrap();
        let exe = w.path("shapes");
        let o = run(
            &exe,
            &[],
            &[
                ("BOOTPROF_ENABLE", pattern),
                ("BOOTPROF_SESSION", session.to_str().unwrap()),
            ],
        );
        assert_eq!(ok(&o), OUTPUT);
        let again = entries(&w, session.to_str().unwrap(), true);
        assert_eq!(again, hits, "BOOTPROF_ENABLE={pattern}");
    }

    let o = bootprof(
        &[
            "run",
            "-e",
            "geo::Circel::*",
            "-o",
            "miss.session",
            "--",
            "./shapes",
        ],
        &w.0,
    );
    assert_eq!(ok(&o), OUTPUT);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(
            "pattern `geo::Circel::*` (-e) matched no site of ./shapes (14 sites); nearest: \
             geo::Circle::area() const, geo::Circle::~Circle(), "
        ),
        "{stderr}"
    );
}

/// `tests/runtime/inlined.c` built `-O2 -finstrument-functions`: the hooks gcc leaves for the
/// functions it inlined into `outer` lie in `outer`'s code, and their records are named after
/// the inlined functions (by the `this_fn` each hook passes), in both modes and in every format
/// that names calls; a report never shows `outer` calling itself.
#[test]
fn hooks_of_inlined_functions_are_named_after_them() {
    let w = Work::new("names-inlined");
    let exe = w.build("inlined", &["inlined.c"], &["-finstrument-functions"], &[]);
    // The premise: outer holds the hooks of square and twice besides its own.
    let listing = ok(&bootprof(&["list", exe.to_str().unwrap()], &w.0));
    let in_outer = listing.lines().filter(|l| l.contains(" outer+")).count();
    assert_eq!(in_outer, 6, "{listing}");
    let calls = [
        "outer",
        "square",
        "EXIT square",
        "twice",
        "EXIT twice",
        "EXIT outer",
    ];
    let mut want = vec!["main".to_string()];
    for _ in 0..3 {
        want.extend(calls.iter().map(|c| c.to_string()));
    }
    want.push("EXIT main".into());
    for mode in ["trap", "call"] {
        let session = w.path(&format!("{mode}.session"));
        let s = session.to_str().unwrap();
        let o = bootprof(&["run", "--mode", mode, "-o", s, "--", "./inlined"], &w.0);
        assert_eq!(ok(&o), "11\n");
        let text = ok(&bootprof(&["report", s, "--format", "text"], &w.0));
        let got: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once(": ").map(|(_, what)| what))
            .collect();
        assert_eq!(got, want, "{mode} mode:\n{text}");
        let folded = ok(&bootprof(&["report", s, "--format", "folded"], &w.0));
        let mut stacks: Vec<&str> = folded
            .lines()
            .filter_map(|l| l.rsplit_once(' ').map(|(stack, _)| stack))
            .map(|stack| stack.split_once(";main").map_or(stack, |(_, rest)| rest))
            .collect();
        stacks.sort_unstable();
        assert_eq!(
            stacks,
            ["", ";outer", ";outer;square", ";outer;twice"],
            "{mode} mode:\n{folded}"
        );
        let chrome = ok(&bootprof(&["report", s, "--format", "chrome"], &w.0));
        for name in ["square", "twice"] {
            let n = chrome.matches(&format!("\"name\":\"{name}\"")).count();
            assert!(n >= 3, "{mode} mode: {n} {name} events:\n{chrome}");
        }
    }
}
