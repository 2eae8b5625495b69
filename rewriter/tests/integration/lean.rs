//! What the runtime costs a program's shape: a hello world built `-pg -mfentry` and linked
//! through `bootprof-link` (by GNU ld or lld) needs exactly the shared libraries its plain link needs (the runtime
//! brings no Rust standard library, no unwinder, no `libgcc_s`, no dynamic loader by name), and
//! its `-static` and `-static-pie` links are made without a word from the linker (the standard
//! library's `getaddrinfo` and `getpwuid_r` made glibc warn) and work: disabled, the program's
//! output; enabled from the environment, a trace of `main`. An executable exports none of the
//! runtime's entry points: its note leads shared objects' copies of the runtime to them.

use crate::util::{cmd, needed, require, run, write, TempDir, BOOTPROF};
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

/// The default-visibility `bootprof_*` and `__wrap_*` symbols `object` defines (`readelf -sW`),
/// or, for a linked binary, those of its dynamic symbol table (`--dyn-syms`).
fn entry_points(file: &Path, dynamic: bool) -> Vec<String> {
    let table = if dynamic { "--dyn-syms" } else { "-s" };
    let out = run(cmd("readelf", ["-W", table]).arg(file)).ok();
    let mut names: Vec<String> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() >= 8 && f[4] == "GLOBAL" && f[5] == "DEFAULT" && f[6] != "UND")
        .map(|f| f[7].split('@').next().unwrap_or_default().to_string())
        .filter(|n| n.starts_with("bootprof_") || n.starts_with("__wrap_"))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// An executable exports none of the runtime's symbols (GNU ld matches every symbol of a link
/// against any dynamic list, whatever it holds): the runtime object's note, in a `PT_NOTE`
/// segment of the executable, leads its shared objects' copies of the runtime to its entry
/// points instead.
#[test]
fn an_executable_exports_nothing_and_carries_the_runtime_note() {
    require!("readelf");
    let t = TempDir::new("lean-exports");
    let runtime = run(cmd(crate::util::link_bin(), ["--print-runtime"])).ok();
    let defined = entry_points(Path::new(runtime.stdout.trim()), false);
    assert!(
        defined.iter().any(|n| n == "bootprof_register")
            && defined.iter().any(|n| n == "__wrap_longjmp"),
        "{defined:?}"
    );
    for (name, link) in [("exports", &[][..]), ("exports-lld", &["-fuse-ld=lld"][..])] {
        let (_, ours) = hello(&t, name, &[], link);
        assert_eq!(entry_points(&ours, true), Vec::<String>::new(), "{name}");
        let headers = run(cmd("readelf", ["-lW"]).arg(&ours)).ok().stdout;
        assert!(
            note_segments(&headers)
                .iter()
                .any(|sections| sections.contains(&".note.bootprof")),
            "{name}: no PT_NOTE holds .note.bootprof:\n{headers}"
        );
        let notes = run(cmd("readelf", ["-nW"]).arg(&ours)).ok().stdout;
        assert!(
            notes.contains("bootprof") && notes.contains("0x42500001"),
            "{name}:\n{notes}"
        );
    }
}

/// The sections of each `PT_NOTE` segment in `readelf -lW`'s output `headers`.
fn note_segments(headers: &str) -> Vec<Vec<&str>> {
    let segments: Vec<&str> = headers
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("Type"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.trim_start().starts_with('['))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mapping: Vec<Vec<&str>> = headers
        .lines()
        .skip_while(|l| !l.contains("Section to Segment mapping"))
        .skip(2)
        .map(|l| l.split_whitespace().skip(1).collect())
        .collect();
    segments
        .iter()
        .zip(mapping)
        .filter(|(kind, _)| **kind == "NOTE")
        .map(|(_, sections)| sections)
        .collect()
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

/// A link without the default libraries (`-nostdlib`, start files and the C library named by
/// hand, as some build systems do) gets the runtime when it names the C library, and traces;
/// one that names no C library is refused with the output's name and no output file, since its
/// table would have no runtime to enable it; `--no-runtime` links such a table on request.
#[test]
fn links_without_the_default_libraries_get_the_runtime_or_are_refused() {
    let t = TempDir::new("lean-nostdlib");
    let src = t.join("hello.c");
    write(&src, HELLO);
    let object = t.join("hello.o");
    run(cmd("cc", ["-O2", "-pg", "-mfentry", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&object))
    .ok();
    let file = |name: &str| {
        let out = run(cmd("cc", [format!("-print-file-name={name}")])).ok();
        out.stdout.trim().to_string()
    };
    let start: Vec<String> = ["Scrt1.o", "crti.o", "crtbeginS.o"].map(file).to_vec();
    let end: Vec<String> = ["crtendS.o", "crtn.o"].map(file).to_vec();
    let link = |name: &str, options: &[&str], libraries: &[&str]| {
        let output = t.join(name);
        let out = run(cmd(crate::util::link_bin(), options)
            .args(["cc", "-nostdlib"])
            .args(&start)
            .arg(&object)
            .args(libraries)
            .args(&end)
            .arg("-o")
            .arg(&output));
        (output, out)
    };
    let (named, out) = link("named", &[], &["-lc"]);
    let out = out.ok();
    assert_eq!(out.stderr, "", "{out}");
    runs_and_traces(&t, &named, "named");

    let (bare, out) = link("bare", &[], &[]);
    assert_ne!(out.code, Some(0), "{out}");
    assert!(
        out.stderr.contains(&format!(
            "{}: this link has probe or hook sites but no C library",
            bare.display()
        )),
        "{out}"
    );
    assert!(out.stderr.contains("--no-runtime"), "{out}");
    assert!(!bare.exists(), "no output");

    let (asked, out) = link("asked", &["--no-runtime"], &["-lc"]);
    out.ok();
    let symbols = run(cmd("nm", [&asked])).ok().stdout;
    assert!(
        symbols.contains(" w bootprof_register") && !symbols.contains(" T bootprof_register"),
        "{symbols}"
    );
}
