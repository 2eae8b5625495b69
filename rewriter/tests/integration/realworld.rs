//! Real programs nobody here wrote, in the subset CI runs: `tests/realworld/run --ci`
//! fetches bzip2, lz4, sqlite3 and jsoncpp (C++, built by CMake with `bootprof-link` as
//! `CMAKE_CXX_LINKER_LAUNCHER`) from Debian's source packages, builds them plain, with glibc's
//! `-pg` and through `bootprof-link` (`-pg -mfentry`, `-finstrument-functions`), runs bzip2's,
//! lz4's and jsoncpp's own tests with every site disabled, then enabled in trap and in call mode,
//! and compares the sqlite3 shell's output on a fixed SQL script with the plain build's, byte for
//! byte (the `-pg -mfentry` build also under `bootprof run --graph --mode call`); it builds mksh
//! `-pg -mfentry` (a shell whose error handling is `siglongjmp`) and runs its own tests with every
//! site disabled and under `--graph`, where every thread's ENTERs and EXITs must pair up. The
//! script exits non-zero on any test the plain build passes and a bootprof build fails,
//! any differing output, any link of jsoncpp's that did not go through the launcher, any site
//! without its NOP, and any difference between trap and call mode in the hits each process saw.
//!
//! The script needs `apt-get source` (and root or sudo for a deb-src entry and a few packages:
//! `tests/setup` fetches the sources beforehand). Set `BOOTPROF_SKIP_REALWORLD=1` to skip it on a
//! machine that cannot fetch them; CI never sets it.

use crate::util::{link_bin, repo_root, require, run, skipped, BOOTPROF};
use std::process::Command;

#[test]
fn bzip2_lz4_jsoncpp_mksh_and_the_sqlite3_shell_pass_their_own_checks() {
    if std::env::var_os("BOOTPROF_SKIP_REALWORLD").is_some() {
        skipped("BOOTPROF_SKIP_REALWORLD is set");
        return;
    }
    require!("python3", "make", "gcc", "g++", "cmake", "ctest");
    // The script uses the binaries under test as they are (no nested `cargo build` replacing them
    // while other tests run); link_bin() makes sure they are built.
    let link = link_bin();
    let bin_dir = std::path::Path::new(link).parent().unwrap();
    assert_eq!(
        std::path::Path::new(&BOOTPROF).parent().unwrap(),
        bin_dir,
        "bootprof and bootprof-link in one directory"
    );
    let script = repo_root().join("tests/realworld/run");
    let mut cmd = Command::new(&script);
    cmd.args(["--ci"])
        .env("BOOTPROF_NO_BUILD", "1")
        .env("BOOTPROF_BIN_DIR", bin_dir);
    let out = run(&mut cmd);
    // Its progress and its table (shown with --nocapture); its logs are under
    // target/realworld/logs.
    println!("{}", out.stdout);
    assert_eq!(out.code, Some(0), "tests/realworld/run --ci failed:{out}");
    assert!(
        out.stdout.contains("realworld: done in") && out.stdout.contains("0 problems"),
        "the script did not finish cleanly:{out}"
    );
}
