//! What the runtime costs a program's shape: a hello world built `-pg -mfentry` and linked
//! through `bootprof-link` (by GNU ld or lld) needs exactly the shared libraries its plain link needs (the runtime
//! brings no Rust standard library, no unwinder, no `libgcc_s`, no dynamic loader by name), and
//! its `-static` and `-static-pie` links are made without a word from the linker (the standard
//! library's `getaddrinfo` and `getpwuid_r` made glibc warn) and work: disabled, the program's
//! output; enabled from the environment, a trace of `main`. An executable exports none of the
//! runtime's entry points: its note leads shared objects' copies of the runtime to them.
//!
//! Which runtime: a program with sites only carries the lean runtime (at most 64 KB more than
//! its plain link), which loads the runtime library when asked; a static link, a program that
//! calls the C API and `--embed-runtime` carry the whole runtime. A runtime library that cannot
//! be loaded is named with the reason, and `BOOTPROF_LIBRARY` or `bootprof run` gives another.

use crate::util::{cmd, needed, nm, require, run, write, TempDir, BOOTPROF};
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
    let object = hello_object(t, name, flags);
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

/// `object` linked into `output` by `bootprof-link OPTIONS cc` (with `env` set), which must
/// succeed.
fn link(options: &[&str], object: &Path, output: &Path, env: &[(&str, &Path)]) -> crate::util::Out {
    let mut c = cmd(crate::util::link_bin(), options);
    c.arg("cc").arg(object).arg("-o").arg(output);
    for (name, value) in env {
        c.env(name, value);
    }
    run(c).ok()
}

/// The hello world compiled `-O2 -pg -mfentry` with `flags` into `NAME.o`.
fn hello_object(t: &TempDir, name: &str, flags: &[&str]) -> std::path::PathBuf {
    let src = t.join("hello.c");
    write(&src, HELLO);
    let object = t.join(format!("{name}.o"));
    run(cmd("cc", ["-O2", "-pg", "-mfentry", "-c"])
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&object))
    .ok();
    object
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

/// The runtime objects bootprof-link carries hold no `R_X86_64_NONE` relocation (the partial
/// link leaves one for each relocation of an unwind entry it drops, which every link would read
/// for nothing), and every unwind entry they keep still has the relocation of its start address.
#[test]
fn the_carried_runtime_objects_keep_their_unwind_relocations_and_no_empty_ones() {
    require!("readelf");
    for query in ["--print-runtime", "--print-shared-runtime"] {
        let object = run(cmd(crate::util::link_bin(), [query])).ok().stdout;
        let object = Path::new(object.trim());
        let relocs = run(cmd("readelf", ["-rW"]).arg(object)).ok().stdout;
        assert!(
            !relocs.contains("R_X86_64_NONE"),
            "{query}: {}",
            object.display()
        );
        // Offsets of the relocations of .eh_frame, and of each FDE's start address field.
        let in_eh_frame: std::collections::BTreeSet<u64> = relocs
            .split("Relocation section")
            .filter(|s| s.starts_with(" '.rela.eh_frame'"))
            .flat_map(|s| s.lines().skip(2))
            .filter_map(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
            .collect();
        let frames = run(cmd("readelf", ["-wf"]).arg(object)).ok().stdout;
        let fdes: Vec<u64> = frames
            .lines()
            .filter(|l| l.contains(" FDE cie="))
            .map(|l| u64::from_str_radix(l.split_whitespace().next().unwrap(), 16).unwrap() + 8)
            .collect();
        assert!(fdes.len() > 10, "{query}: {frames}");
        let lost: Vec<&u64> = fdes.iter().filter(|f| !in_eh_frame.contains(f)).collect();
        assert!(
            lost.is_empty(),
            "{query}: FDEs without relocations at {lost:x?}"
        );
    }
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
    let object = hello_object(&t, "hello", &[]);
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

/// Whether `binary` carries the lean runtime (the runtime library's path, which only it reads)
/// or the whole one (the graph tracer's trampoline, which only it has); panics if neither or
/// both.
fn carries_lean(binary: &Path) -> bool {
    let names: Vec<String> = nm(binary).into_iter().map(|(_, n)| n).collect();
    let lean = names.iter().any(|n| n == "bootprof_library_path");
    let whole = names.iter().any(|n| n == "bootprof_graph_return");
    assert_ne!(
        lean,
        whole,
        "{}: lean {lean}, whole {whole}",
        binary.display()
    );
    lean
}

/// A hello world with sites only carries the lean runtime, at most 64 KB more than its plain
/// link, and traces through the runtime library; `--embed-runtime`, a static link and a program
/// that calls the C API carry the whole runtime.
#[test]
fn a_program_with_sites_only_carries_the_lean_runtime_and_others_the_whole() {
    require!("nm");
    let t = TempDir::new("lean-which");
    let (plain, ours) = hello(&t, "lean", &[], &[]);
    assert!(carries_lean(&ours));
    let (plain_size, size) = (file_size(&plain), file_size(&ours));
    assert!(
        size <= plain_size + 64 * 1024,
        "{size} bytes against the plain link's {plain_size}"
    );
    runs_and_traces(&t, &ours, "lean");

    let (_, embedded) = hello(&t, "embedded", &[], &[]);
    let object = t.join("embedded.o");
    let embedded_link = link(&["--embed-runtime"], &object, &embedded, &[]);
    assert_eq!(embedded_link.stderr, "", "{embedded_link}");
    assert!(!carries_lean(&embedded));
    runs_and_traces(&t, &embedded, "embedded");

    let (_, fixed) = hello(&t, "static", &[], &["-static"]);
    assert!(!carries_lean(&fixed));

    // The program enables its own probe through the C API: it must not depend on a file.
    let src = t.join("api.c");
    write(
        &src,
        "#include <stdio.h>\n#include \"bootprof.h\"\n\
         int main(void) { int n = bootprof_enable(\"main\"); printf(\"%d\\n\", n); return 0; }\n",
    );
    let include = crate::util::repo_root().join("runtime/include");
    let object = t.join("api.o");
    run(cmd("cc", ["-O2", "-pg", "-mfentry", "-c"])
        .arg(format!("-I{}", include.display()))
        .arg(&src)
        .arg("-o")
        .arg(&object))
    .ok();
    let api = t.join("api");
    link(&[], &object, &api, &[]);
    assert!(!carries_lean(&api));
    let ran = run(cmd(&api, [""; 0])
        .env_remove("BOOTPROF_LIBRARY")
        .env("XDG_CACHE_HOME", t.join("no-cache")))
    .ok();
    assert_eq!(ran.stdout, "1\n", "{ran}");
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .len()
}

/// The runtime library bootprof-link put beside the lean runtime is where a program looks for
/// it: gone (a cleared cache), the program says so on stderr, naming the path, the reason and
/// what to do, and runs with its sites disabled; `BOOTPROF_LIBRARY` names another, which it
/// then loads, and `bootprof run` hands it its own. A `BOOTPROF_LIBRARY` that is not a runtime
/// library, or one of another version, is named with the reason before the program's own is
/// loaded.
#[test]
fn a_missing_runtime_library_is_named_and_another_can_be_given() {
    let t = TempDir::new("lean-library");
    let object = hello_object(&t, "hello", &[]);
    // Linked with a cache of its own, then the cache removed.
    let cache = t.join("cache");
    let gone = t.join("gone");
    link(&[], &object, &gone, &[("XDG_CACHE_HOME", &cache)]);
    let put = run(cmd(crate::util::link_bin(), ["--print-library"]).env("XDG_CACHE_HOME", &cache))
        .ok()
        .stdout
        .trim()
        .to_string();
    assert!(put.starts_with(&cache.display().to_string()), "{put}");
    std::fs::remove_dir_all(&cache).unwrap();
    let trace = t.join("gone.trace");
    let traced = |library: Option<&Path>| {
        let _ = std::fs::remove_file(&trace);
        let mut c = cmd(&gone, [""; 0]);
        c.env("BOOTPROF_ENABLE", "*")
            .env("BOOTPROF_OUTPUT", &trace)
            .env_remove("BOOTPROF_LIBRARY");
        if let Some(library) = library {
            c.env("BOOTPROF_LIBRARY", library);
        }
        run(c).ok()
    };
    let ran = traced(None);
    assert_eq!(ran.stdout, "hello\n", "{ran}");
    assert!(
        ran.stderr.starts_with(
            "bootprof: the runtime library could not be loaded, so nothing is traced: "
        ) && ran.stderr.contains(&format!(
            "{put} (where bootprof-link put it): {put}: cannot open"
        )) && ran
            .stderr
            .contains("Set BOOTPROF_LIBRARY to a libbootprof.so")
            && ran.stderr.contains("--embed-runtime"),
        "{ran}"
    );
    assert!(!trace.exists(), "nothing traced, nothing written");

    // Another library, named by BOOTPROF_LIBRARY.
    let library = run(cmd(crate::util::link_bin(), ["--print-library"]))
        .ok()
        .stdout
        .trim()
        .to_string();
    let ran = traced(Some(Path::new(&library)));
    assert!(ran.stderr.contains("records written to"), "{ran}");
    let text = run(cmd(BOOTPROF, ["report"]).arg(&trace)).ok();
    assert!(text.stdout.contains(": main <-"), "{text}");

    // bootprof run's own.
    let session = t.join("run.session");
    let recorded = run(cmd(BOOTPROF, ["run", "-o"])
        .arg(&session)
        .arg("--")
        .arg(&gone)
        .env_remove("BOOTPROF_LIBRARY"))
    .ok();
    assert!(
        !recorded.stderr.contains("could not be loaded"),
        "{recorded}"
    );
    let text = run(cmd(BOOTPROF, ["report"]).arg(&session)).ok();
    assert!(text.stdout.contains(": main <-"), "{text}");

    // A library of another version, and a shared library that is none, before the program's own.
    let (other, not_ours) = (t.join("libother.so"), t.join("libnone.so"));
    for (so, source) in [
        (
            &other,
            "const struct { unsigned version, count; } bootprof_library = { 99, 26 };\n",
        ),
        (&not_ours, "int something_else = 1;\n"),
    ] {
        let c = so.with_extension("c");
        write(&c, source);
        run(cmd("cc", ["-shared", "-fPIC", "-o"]).arg(so).arg(&c)).ok();
    }
    let program = t.join("kept");
    link(&[], &object, &program, &[]);
    for (so, why) in [
        (
            &other,
            "a runtime library of another version of bootprof (its version 99, this program's \
             runtime needs 1)",
        ),
        (
            &not_ours,
            "not a bootprof runtime library (no bootprof_library)",
        ),
    ] {
        let ran = run(cmd(&program, [""; 0])
            .env("BOOTPROF_ENABLE", "*")
            .env("BOOTPROF_OUTPUT", &trace)
            .env("BOOTPROF_LIBRARY", so))
        .ok();
        let said = format!(
            "bootprof: the runtime library {} (BOOTPROF_LIBRARY): {why}; loaded ",
            so.display()
        );
        assert!(ran.stderr.starts_with(&said), "{said}\n{ran}");
        let text = run(cmd(BOOTPROF, ["report"]).arg(&trace)).ok();
        assert!(text.stdout.contains(": main <-"), "{text}");
    }
}
