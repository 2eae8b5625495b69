//! The benchmark suite runs: `benches/run --quick` builds every variant of every suite
//! (the disabled-probe workload in six variants, the whole-program builds, the runtime, tracing
//! and link benchmarks) and passes each suite's own checks: every bootprof site holds its NOP,
//! the USDT notes are there, the instruction counts have the structure they must have, every
//! linked program prints the plain program's result. Its figures come from tiny runs on a busy
//! machine and are not looked at: timing is never asserted in a test.

use crate::util::{
    compile_c, link_bin, repo_root, require, run, skipped, write, TempDir, BOOTPROF,
};
use std::process::Command;

#[test]
fn every_benchmark_suite_runs_and_passes_its_checks() {
    if std::env::var_os("BOOTPROF_SKIP_REALWORLD").is_some() {
        // The whole-program suite builds the real programs' sources.
        skipped("BOOTPROF_SKIP_REALWORLD is set");
        return;
    }
    require!("python3", "make", "gcc", "valgrind", "uftrace", "ld.lld");
    let bin_dir = std::path::Path::new(link_bin()).parent().unwrap();
    if bin_dir != repo_root().join("target/release") {
        // The suites measure target/release's binaries.
        skipped("the benchmarks run on the release build (cargo test --release)");
        return;
    }
    let script = repo_root().join("benches/run");
    // The suites use target/release as cargo test built it: a nested `cargo build` would put
    // other artifacts in its place while other tests run them.
    let out = run(Command::new(&script)
        .arg("--quick")
        .env("BOOTPROF_NO_BUILD", "1"));
    println!("{}", out.stdout);
    assert_eq!(out.code, Some(0), "benches/run --quick failed:{out}");
    for suite in ["disabled", "wholeprogram", "runtime", "tracing", "link"] {
        assert!(
            out.stdout.contains(&format!("==== {suite}: ")),
            "suite {suite} did not run:{out}"
        );
    }
}

/// `benches/linkbench/walltime` runs each link in turn and prints a line for each with its
/// median over the first's; each output is there afterwards (removed and made again each run,
/// or kept with `--relink`), and a command that fails, or an option it does not know, stops it
/// with the reason.
#[test]
fn walltime_times_links_side_by_side() {
    require!("python3", "cc");
    let t = TempDir::new("walltime");
    let src = t.join("main.c");
    // No sites: the plain link must link it too (bootprof-link then passes the line through).
    write(&src, "int main(void) { return 0; }\n");
    let object = compile_c(&src, &t.join("main.o"), &[]);
    let script = repo_root().join("benches/linkbench/walltime");
    let (plain, linked) = (t.join("plain"), t.join("linked"));
    for relink in [false, true] {
        let mut c = Command::new(&script);
        c.args(["--rounds", "2"]);
        if relink {
            c.arg("--relink");
        }
        c.args(["--", "cc", "-o"]).arg(&plain).arg(&object);
        c.args(["--", link_bin(), "cc", "-o"])
            .arg(&linked)
            .arg(&object);
        let out = run(&mut c);
        assert_eq!(out.code, Some(0), "walltime failed:{out}");
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines.len(), 3, "a heading and a line a command:{out}");
        assert!(lines[0].starts_with("# 2 rounds"), "{out}");
        assert!(lines[1].contains("1.00x") && lines[1].ends_with(&format!("{}", object.display())));
        assert!(
            lines[2].contains("ms median") && lines[2].contains(link_bin()),
            "{out}"
        );
        assert!(plain.is_file() && linked.is_file());
    }
    let out = run(Command::new(&script)
        .args(["--", "cc", "-o"])
        .arg(t.join("x"))
        .arg(t.join("missing.o")));
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains("failed") && out.stderr.contains("missing.o"),
        "{out}"
    );
    let out = run(Command::new(&script).args(["--bogus", "--", "true"]));
    assert_eq!(out.code, Some(2), "{out}");
    assert!(out.stderr.contains("unknown option --bogus"), "{out}");
}

/// `benches/linkbench/pairdiff` runs two links in pairs and prints the median and mean of their
/// differences; a command that fails, or a line without two commands, stops it with the reason.
#[test]
fn pairdiff_prints_the_difference_of_two_links_pair_by_pair() {
    require!("python3", "cc");
    let t = TempDir::new("pairdiff");
    let src = t.join("main.c");
    write(&src, "int main(void) { return 0; }\n");
    let object = compile_c(&src, &t.join("main.o"), &[]);
    let script = repo_root().join("benches/linkbench/pairdiff");
    let mut c = Command::new(&script);
    c.args(["--rounds", "2", "--settle", "0", "--", "cc", "-o"])
        .arg(t.join("a"))
        .arg(&object);
    c.args(["--", link_bin(), "--no-fork", "cc", "-o"])
        .arg(t.join("b"))
        .arg(&object);
    let out = run(&mut c);
    assert_eq!(out.code, Some(0), "pairdiff failed:{out}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "a heading and the difference:{out}");
    assert!(lines[0].starts_with("# 2 pairs"), "{out}");
    assert!(
        lines[1].starts_with("first minus second: median ") && lines[1].contains("standard error"),
        "{out}"
    );
    let failing = run(Command::new(&script)
        .args(["--", "cc", "-o"])
        .arg(t.join("x"))
        .arg(t.join("missing.o"))
        .args(["--", "true"]));
    assert_eq!(failing.code, Some(2), "{failing}");
    assert!(failing.stderr.contains("missing.o"), "{failing}");
    let one = run(Command::new(&script).args(["--", "true"]));
    assert_eq!(one.code, Some(2), "{one}");
    assert!(one.stderr.contains("usage"), "{one}");
}

/// `benches/runtime/first-record --against NAME=VALUE` runs each run as a pair, with and without
/// the variable, and prints both medians and the median of the pairs' differences; an `--against`
/// that is not `NAME=VALUE` stops it with the reason before anything runs.
#[test]
fn first_record_times_pairs_against_a_variable() {
    require!("python3", "cc");
    let t = TempDir::new("first-record");
    let src = t.join("main.c");
    write(
        &src,
        "int work(int x) { return x * 3; }\n\
         int main(int argc, char **argv) { (void)argv; return work(argc) == 3 ? 0 : 1; }\n",
    );
    let object = compile_c(&src, &t.join("main.o"), &["-O1", "-pg", "-mfentry"]);
    let program = t.join("main");
    run(Command::new(link_bin())
        .args(["cc", "-o"])
        .arg(&program)
        .arg(&object))
    .ok();
    let script = repo_root().join("benches/runtime/first-record");
    let against = "BOOTPROF_TEXT_WRITE=inplace";
    let out = run(Command::new(&script)
        .args(["--runs", "2", "--bootprof"])
        .arg(BOOTPROF)
        .args(["--against", against])
        .arg(&program)
        .stdin(std::process::Stdio::null()));
    assert_eq!(out.code, Some(0), "first-record failed:{out}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        5,
        "two pairs, two medians and the difference:{out}"
    );
    for (i, line) in lines[..2].iter().enumerate() {
        assert!(
            line.starts_with(&format!("run {}: session start -> exec ", i + 1))
                && line.contains(&format!("; with {against}: exec -> first record ")),
            "{out}"
        );
    }
    assert!(lines[2].starts_with("medians of 2: "), "{out}");
    assert!(
        lines[3].starts_with(&format!("medians of 2 with {against}: ")),
        "{out}"
    );
    assert!(
        lines[4].starts_with(&format!(
            "exec -> first record, as given minus with {against}: median "
        )) && lines[4].contains(" of 2 pairs, middle half "),
        "{out}"
    );
    for bad in ["BOOTPROF_TEXT_WRITE", "=inplace"] {
        let out = run(Command::new(&script)
            .args(["--against", bad])
            .arg(&program)
            .stdin(std::process::Stdio::null()));
        assert_eq!(out.code, Some(2), "{out}");
        assert!(
            out.stderr
                .contains(&format!("--against wants NAME=VALUE, not '{bad}'")),
            "{out}"
        );
    }
}
