//! The two ways a hit is recorded: a hit that is only recorded goes the dispatcher's short way
//! (`dispatch::record_only`), one that a handler gets too the general way. `tests/runtime/paths.c`
//! run both ways must record the same calls, exactly: built with `-pg -mfentry` under `bootprof
//! run --graph` (ENTERs at the hooks, EXITs by return hooking) in call and trap mode, and built
//! with `-finstrument-functions` (ENTERs and EXITs at the hooks).

use super::*;

/// `bootprof run OPTIONS -o SESSION -- EXE` with the program's handler or without it: the
/// program's output, the report's summary line (`N records (M dropped)`) and the text report's
/// events, in order (a caller outside the program, main's in the C library, shown as `?`).
fn recorded(
    w: &Work,
    exe: &Path,
    options: &[&str],
    handler: bool,
) -> (String, String, Vec<String>) {
    let dir = w.path(&format!(
        "{}-{}-{handler}",
        exe.file_name().unwrap().to_str().unwrap(),
        options.join("")
    ));
    let o = Command::new(tools().join("bootprof"))
        .arg("run")
        .args(options)
        .arg("-o")
        .arg(&dir)
        .arg("--")
        .arg(exe)
        .env("RECORD_PATHS_HANDLER", if handler { "1" } else { "0" })
        .output()
        .unwrap();
    let out = ok(&o);
    let text = report_of(&dir, "text");
    let summary = text
        .lines()
        .find_map(|l| l.split_once(" threads, ").map(|(_, rest)| rest))
        .and_then(|rest| rest.split(", TSC").next())
        .unwrap_or_else(|| panic!("no summary line in\n{text}"))
        .to_string();
    let events = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (_, event) = l.split_once(": ").unwrap();
            match event.split_once(" <-0x") {
                Some((call, _)) => format!("{call} <-?"),
                None => event.to_string(),
            }
        })
        .collect();
    (out, summary, events)
}

/// The calls of paths.c, in order; `callers`: whether each ENTER names its caller (a hook of
/// `-pg` code records it; a `-finstrument-functions` hook does not).
fn calls(callers: bool) -> Vec<String> {
    let lines = "main <-?|scale <-main|EXIT scale|outer <-main|\
                 mid <-outer|leaf <-mid|EXIT leaf|leaf <-mid|EXIT leaf|EXIT mid|\
                 mid <-outer|leaf <-mid|EXIT leaf|leaf <-mid|EXIT leaf|EXIT mid|\
                 EXIT outer|EXIT main";
    lines
        .split('|')
        .map(|l| match (callers, l.split_once(" <-")) {
            (false, Some((call, _))) => call.to_string(),
            _ => l.to_string(),
        })
        .collect()
}

/// A do-nothing handler on every site sends each hit the general way; without it each hit
/// goes the short way. Both record the same ENTERs and EXITs, with the same callers, none
/// dropped, and the program computes the same (the hook kept its vector argument).
#[test]
fn a_hit_records_the_same_the_short_way_and_the_general_way() {
    let w = Work::new("paths");
    let fentry = w.build("fentry", &["paths.c"], &["-pg", "-mfentry"], &[]);
    let instrumented = w.build(
        "instrumented",
        &["paths.c"],
        &["-finstrument-functions"],
        &[],
    );
    let runs: [(&Path, &[&str], bool, &str); 3] = [
        (&fentry, &["--graph", "--mode", "call"], true, "9"),
        (&fentry, &["--graph", "--mode", "trap"], true, "9"),
        // Every call's two hooks, but main's EXIT, before main prints.
        (&instrumented, &["--mode", "call"], false, "17"),
    ];
    for (exe, options, callers, hits) in runs {
        let what = format!("{} {options:?}", exe.display());
        for handler in [false, true] {
            let (out, summary, events) = recorded(&w, exe, options, handler);
            let handled = if handler { hits } else { "0" };
            assert_eq!(
                out,
                format!("5 6.0 handled {handled}\n"),
                "{what} {handler}"
            );
            assert_eq!(summary, "18 records (0 dropped)", "{what} {handler}");
            assert_eq!(events, calls(callers), "{what} {handler}");
        }
    }
}
