//! The link started beside the rewriting: with GNU ld and lld, and an object of a megabyte or
//! more, bootprof-link starts the driver before the inputs are rewritten, and the linker waits
//! for bootprof's linker script, handed to it through a pipe once every input is written; and
//! the end of a link, whose output is checked once its linker exits. These tests check that
//! such a link makes the same binary as one started after the rewriting (`--keep-temps` starts
//! it so), that the linker's messages are shown once, in order, that a link that cannot go that
//! way (a driver failing before its linker reads the script, a line the rewriting changes, a
//! rewriting that fails) is abandoned without a trace and, where the rewriting succeeded, run
//! again, that a driver script linking twice has its script and inputs both times, and that the
//! linker's end is seen with or without a gate.

use crate::util::{
    cmd, compile_c, compile_case, have, link_bin, read, require, run, skipped, source_dir,
    temporaries_left, write, Out, TempDir, BOOTPROF,
};
use std::path::{Path, PathBuf};

/// The objects of two sources with sites, probes (`probes-multi-tu`) and function hooks
/// (`instrument-functions`, `-finstrument-functions`), and one of more than a megabyte, which
/// makes bootprof-link start the link beside the rewriting: a function of a megabyte of NOPs
/// after its probe's call.
fn objects(t: &TempDir) -> Vec<PathBuf> {
    let mut objs = compile_case(
        "probes-multi-tu",
        &["main.c", "stats.c", "util.c"],
        t.path(),
    );
    let shapes = source_dir("instrument-functions").join("shapes.c");
    let flags = ["-O2", "-finstrument-functions"];
    objs.push(compile_c(&shapes, &t.join("shapes.o"), &flags));
    let large = t.join("large.s");
    write(
        &large,
        ".text\n.globl large_pad\n.type large_pad,@function\nlarge_pad:\n\
         call __dtrace_sdt_large__pad\n.skip 1100000, 0x90\nret\n.size large_pad, .-large_pad\n\
         .section .note.GNU-stack,\"\",@progbits\n",
    );
    objs.push(compile_c(&large, &t.join("large.o"), &[]));
    objs
}

/// `bootprof-link [flags] cc [linker] -o out objs...`.
fn link(flags: &[&str], linker: &[&str], out: &Path, objs: &[PathBuf]) -> Out {
    run(cmd(link_bin(), flags)
        .arg("cc")
        .args(linker)
        .arg("-o")
        .arg(out)
        .args(objs))
}

/// `bootprof-link --verbose t/name -o out objs...`, the driver `name` a shell script of `body`.
fn link_with_driver(t: &TempDir, name: &str, body: &str, out: &Path, objs: &[PathBuf]) -> Out {
    let driver = t.join(name);
    write(&driver, format!("#!/bin/sh\n{body}\n"));
    std::fs::set_permissions(&driver, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    run(cmd(link_bin(), ["--verbose".as_ref(), driver.as_os_str()])
        .arg("-o")
        .arg(out)
        .args(objs))
}

/// The linker options to link with: the default (GNU ld here), GNU ld by name, and lld where it
/// is installed.
fn linkers() -> Vec<&'static [&'static str]> {
    let mut linkers: Vec<&[&str]> = vec![&[], &["-fuse-ld=bfd"]];
    if have("lld") {
        linkers.push(&["-fuse-ld=lld"]);
    } else {
        skipped("lld is not installed: GNU ld only");
    }
    linkers
}

/// Removes the directory a `--keep-temps` link names on stderr.
fn remove_kept(o: &Out) {
    let kept = o
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("bootprof-link: kept temporary files in "))
        .unwrap_or_else(|| panic!("no kept directory named:{o}"));
    std::fs::remove_dir_all(kept).unwrap();
}

#[test]
fn a_link_started_beside_the_rewriting_makes_the_same_binary() {
    require!("cc");
    let t = TempDir::new("early-same");
    let objs = objects(&t);
    for linker in linkers() {
        let (early, later) = (t.join("early"), t.join("later"));
        let o = link(&["--verbose"], linker, &early, &objs).ok();
        assert!(
            o.stderr.contains("the link started beside the rewriting"),
            "{linker:?}: the link did not start beside the rewriting:{o}"
        );
        assert!(!o.stderr.contains("abandoned"), "{linker:?}:{o}");
        // The output checked, and the inputs removed, once the linker ended.
        assert!(
            o.stderr.contains("the linker ended before its driver"),
            "{linker:?}: the linker's end was not seen:{o}"
        );
        let kept = link(&["--keep-temps", "--verbose"], linker, &later, &objs).ok();
        assert!(
            !kept.stderr.contains("started beside the rewriting"),
            "{linker:?}: a kept link must start after the rewriting:{kept}"
        );
        remove_kept(&kept);
        assert!(
            read(&early) == read(&later),
            "{linker:?}: the two links differ: {} and {}",
            early.display(),
            later.display()
        );
        let listed = run(cmd(BOOTPROF, ["list".as_ref(), early.as_os_str()])).ok();
        for name in ["cyg-enter", "area+", "large:pad"] {
            assert!(
                listed.stdout.contains(name),
                "{linker:?}: no {name}:{listed}"
            );
        }
        run(cmd(&early, [] as [&str; 0])).ok();
    }
}

#[test]
fn a_link_of_small_objects_is_checked_once_its_linker_ends() {
    require!("cc");
    let t = TempDir::new("linker-ends");
    // No object of a megabyte: the link starts after the rewriting, and bootprof-link looks for
    // its linker under the driver while it runs.
    let objs = compile_case(
        "probes-multi-tu",
        &["main.c", "stats.c", "util.c"],
        t.path(),
    );
    for linker in linkers() {
        let out = t.join("app");
        let o = link(&["--verbose"], linker, &out, &objs).ok();
        assert!(
            !o.stderr.contains("started beside the rewriting"),
            "{linker:?}:{o}"
        );
        assert!(
            o.stderr.contains("the linker ended before its driver"),
            "{linker:?}: the linker was not found:{o}"
        );
        let listed = run(cmd(BOOTPROF, ["list".as_ref(), out.as_os_str()])).ok();
        assert!(
            listed.stdout.contains("stats:report"),
            "{linker:?}:{listed}"
        );
        run(cmd(&out, [] as [&str; 0])).ok();
        let left = temporaries_left(t.path());
        assert!(left.is_empty(), "{linker:?}: temporaries left {left:?}:{o}");
    }
}

#[test]
fn the_linkers_messages_are_shown_once_and_in_order() {
    require!("cc");
    let t = TempDir::new("early-messages");
    let objs = objects(&t);
    let out = t.join("app");
    // Two warnings GNU ld prints while reading its options, after bootprof's script.
    let o = link(
        &[],
        &["-Wl,-z,bootprof-first", "-Wl,-z,bootprof-second"],
        &out,
        &objs,
    )
    .ok();
    let first = o.stderr.matches("bootprof-first").count();
    let second = o.stderr.matches("bootprof-second").count();
    assert_eq!((first, second), (1, 1), "each warning once:{o}");
    assert!(
        o.stderr.find("bootprof-first") < o.stderr.find("bootprof-second"),
        "in the linker's order:{o}"
    );
}

#[test]
fn a_driver_script_that_links_twice_has_its_inputs_and_script_both_times() {
    require!("cc");
    let t = TempDir::new("early-twice");
    let objs = objects(&t);
    // A script, not a compiler driver: its linker's exit is not the link's end, and the second
    // link reads bootprof's script as a file.
    let script = "cc \"$@\" || exit $?\necho \"link-twice: once more\" >&2\nexec cc \"$@\"";
    let out = t.join("app");
    let o = link_with_driver(&t, "link-twice", script, &out, &objs).ok();
    assert!(o.stderr.contains("link-twice: once more"), "{o}");
    assert!(o.stderr.contains("started beside the rewriting"), "{o}");
    assert!(
        !o.stderr.contains("the linker ended before its driver"),
        "{o}"
    );
    let listed = run(cmd(BOOTPROF, ["list".as_ref(), out.as_os_str()])).ok();
    assert!(listed.stdout.contains("large:pad"), "{listed}");
    run(cmd(&out, [] as [&str; 0])).ok();
    let left = temporaries_left(t.path());
    assert!(left.is_empty(), "temporaries left {left:?}:{o}");
}

#[test]
fn a_driver_that_fails_before_its_linker_is_run_again_and_reported_once() {
    require!("cc");
    let t = TempDir::new("early-driver-fails");
    let objs = objects(&t);
    let script = "echo \"failing-cc: this driver runs no linker\" >&2\nexit 3";
    let out = t.join("app");
    let o = link_with_driver(&t, "failing-cc", script, &out, &objs);
    o.no_panic();
    assert_eq!(o.code, Some(3), "the driver's status:{o}");
    assert_eq!(
        o.stderr.matches("this driver runs no linker").count(),
        1,
        "the driver's message once:{o}"
    );
    assert!(
        o.stderr
            .contains("its linker ended without reading bootprof's script"),
        "{o}"
    );
    assert!(!out.exists(), "an output was made:{o}");
    let left = temporaries_left(t.path());
    assert!(left.is_empty(), "temporaries left {left:?}:{o}");
}

#[test]
fn a_rewriting_that_fails_abandons_the_waiting_link_without_a_trace() {
    require!("cc");
    let t = TempDir::new("early-rewrite-fails");
    let mut objs = objects(&t);
    // A megabyte object whose second probe call hides inside another instruction.
    let bad = t.join("bad.s");
    write(
        &bad,
        ".text\n.globl bad_pad\n.type bad_pad,@function\nbad_pad:\n\
         call __dtrace_sdt_ok__first\n\
         .byte 0x48, 0xb8, 0xe8\n\
         .reloc ., R_X86_64_PLT32, __dtrace_sdt_bad__hidden - 4\n\
         .long 0\n.byte 0, 0, 0\n\
         .skip 1100000, 0x90\nret\n.size bad_pad, .-bad_pad\n\
         .section .note.GNU-stack,\"\",@progbits\n",
    );
    objs.push(compile_c(&bad, &t.join("bad.o"), &[]));
    // GNU ld's link checks the calls of the large section while its linker runs, after the
    // linker has its script; lld's, beside the rewriting, before.
    let mut linkers: Vec<(&[&str], bool)> = vec![(&[], true)];
    if have("lld") {
        linkers.push((&["-fuse-ld=lld"], false));
    } else {
        skipped("lld is not installed: GNU ld only");
    }
    for (linker, checked_beside_the_link) in linkers {
        let out = t.join("app");
        let o = link(&["--verbose"], linker, &out, &objs);
        o.no_panic();
        assert!(
            matches!(o.code, Some(c) if c != 0),
            "{linker:?}: the link must fail:{o}"
        );
        assert!(
            o.stderr.contains("the link started beside the rewriting"),
            "{linker:?}: the link did not start beside the rewriting:{o}"
        );
        assert_eq!(
            o.stderr
                .contains("checks of 3 calls are made beside the link"),
            checked_beside_the_link,
            "{linker:?}: where the calls were checked:{o}"
        );
        for name in [
            "bad.o",
            "__dtrace_sdt_bad__hidden",
            "not on an instruction boundary",
        ] {
            assert!(
                o.stderr.contains(name),
                "{linker:?}: stderr does not name `{name}`:{o}"
            );
        }
        // Nothing of the abandoned linker: none of its messages, no output, no temporaries.
        for linker_said in ["abandoned this link", "syntax error", "collect2"] {
            assert!(
                !o.stderr.contains(linker_said),
                "{linker:?}: the linker's `{linker_said}`:{o}"
            );
        }
        assert!(!out.exists(), "{linker:?}: an output was made:{o}");
        let left = temporaries_left(t.path());
        assert!(left.is_empty(), "{linker:?}: temporaries left {left:?}:{o}");
    }
}

#[test]
fn a_line_the_rewriting_does_not_bear_out_is_linked_again() {
    require!("cc");
    let t = TempDir::new("early-line-changed");
    let mut objs = objects(&t);
    // A megabyte object that calls a probe symbol it defines itself: its symbol table shows no
    // probe reference, so the line foreseen keeps it as it is, but its call is a site.
    let own = t.join("own.s");
    write(
        &own,
        ".text\n.globl own_pad\n.type own_pad,@function\nown_pad:\n\
         call __dtrace_sdt_own__probe\n.skip 1100000, 0x90\nret\n.size own_pad, .-own_pad\n\
         .globl __dtrace_sdt_own__probe\n.type __dtrace_sdt_own__probe,@function\n\
         __dtrace_sdt_own__probe:\nret\n.size __dtrace_sdt_own__probe, .-__dtrace_sdt_own__probe\n\
         .section .note.GNU-stack,\"\",@progbits\n",
    );
    objs.push(compile_c(&own, &t.join("own.o"), &[]));
    let (again, later) = (t.join("again"), t.join("later"));
    let o = link(&["--verbose"], &[], &again, &objs).ok();
    assert!(
        o.stderr
            .contains("abandoned (the rewriting changed its line); linking again"),
        "the early link was not abandoned:{o}"
    );
    assert!(!o.stderr.contains("abandoned this link"), "{o}");
    let kept = link(&["--keep-temps"], &[], &later, &objs).ok();
    remove_kept(&kept);
    assert!(read(&again) == read(&later), "the two links differ:{o}");
    let listed = run(cmd(BOOTPROF, ["list".as_ref(), again.as_os_str()])).ok();
    assert!(
        listed.stdout.contains("own:probe"),
        "no own:probe site:{listed}"
    );
    assert!(temporaries_left(t.path()).is_empty(), "{o}");
}
