//! The benchmark suite runs: `benches/run --quick` builds every variant of every suite
//! (the disabled-probe workload in six variants, the whole-program builds, the runtime, tracing
//! and link benchmarks) and passes each suite's own checks: every bootprof site holds its NOP,
//! the USDT notes are there, the instruction counts have the structure they must have, every
//! linked program prints the plain program's result. Its figures come from tiny runs on a busy
//! machine and are not looked at: timing is never asserted in a test.

use crate::util::{link_bin, repo_root, require, run, skipped};
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
