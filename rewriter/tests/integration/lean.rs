//! What the runtime costs a program's shape: a hello world built `-pg -mfentry` and linked
//! through `bootprof-link` (by GNU ld or lld) needs exactly the shared libraries its plain link needs (the runtime
//! brings no Rust standard library, no unwinder, no `libgcc_s`, no dynamic loader by name), and
//! its `-static` and `-static-pie` links are made without a word from the linker (the standard
//! library's `getaddrinfo` and `getpwuid_r` made glibc warn) and work: disabled, the program's
//! output; enabled from the environment, a trace of `main`.

use crate::util::{cmd, needed, run, write, TempDir, BOOTPROF};
use std::path::Path;

const HELLO: &str = "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n";

/// Compiles the hello world with `flags` and links it with `cc` as it is and through
/// bootprof-link (each with `link`); returns (plain, bootprof) after checking the bootprof
/// link said nothing on stderr.
fn hello(
    t: &TempDir,
    name: &str,
    flags: &[&str],
    link: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf) {
    let src = t.join("hello.c");
    write(&src, HELLO);
    let object = t.join(format!("{name}.o"));
    run(cmd("cc", ["-O2", "-pg", "-mfentry", "-c"])
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&object))
    .ok();
    let plain = t.join(format!("{name}-plain"));
    run(cmd("cc", link).arg(&object).arg("-o").arg(&plain)).ok();
    let ours = t.join(name);
    let linked = run(cmd(crate::util::link_bin(), ["cc"])
        .args(link)
        .arg(&object)
        .arg("-o")
        .arg(&ours))
    .ok();
    assert_eq!(
        linked.stderr, "",
        "{name}: the link said something:{linked}"
    );
    (plain, ours)
}

/// Disabled, the program's output; with every site enabled in call mode and a trace file, the
/// trace holds `main`'s entry.
fn runs_and_traces(t: &TempDir, binary: &Path, name: &str) {
    let ran = run(cmd(binary, [""; 0]).env_remove("BOOTPROF_ENABLE")).ok();
    assert_eq!(ran.stdout, "hello\n", "{name}");
    let trace = t.join(format!("{name}.trace"));
    let traced = run(cmd(binary, [""; 0])
        .env("BOOTPROF_ENABLE", "*")
        .env("BOOTPROF_MODE", "call")
        .env("BOOTPROF_OUTPUT", &trace))
    .ok();
    assert_eq!(traced.stdout, "hello\n", "{name}");
    let text = run(cmd(BOOTPROF, ["report"]).arg(&trace)).ok();
    assert_eq!(
        text.stdout
            .lines()
            .filter(|l| l.contains(": main <-"))
            .count(),
        1,
        "{name}:{text}"
    );
}

#[test]
fn hello_world_needs_no_library_its_plain_link_does_not() {
    let t = TempDir::new("lean-needed");
    // GNU ld, and lld (which would make a weak reference to the unwinder a strong one).
    for (name, link) in [("hello", &[][..]), ("hello-lld", &["-fuse-ld=lld"][..])] {
        let (plain, ours) = hello(&t, name, &[], link);
        assert_eq!(needed(&ours), needed(&plain), "{name}");
        assert_eq!(needed(&plain), ["libc.so.6"], "{name}");
        runs_and_traces(&t, &ours, name);
    }
}

#[test]
fn static_and_static_pie_links_are_quiet_and_work() {
    let t = TempDir::new("lean-static");
    for (name, compile, link) in [
        ("static", &[][..], &["-static"][..]),
        ("static-pie", &["-fPIE"][..], &["-static-pie"][..]),
    ] {
        let (_, ours) = hello(&t, name, compile, link);
        assert!(needed(&ours).is_empty(), "{name}: {:?}", needed(&ours));
        runs_and_traces(&t, &ours, name);
    }
}
