//! Packs: with GNU ld and lld, the rewritten copies of objects that stand side by side on the
//! line go to the linker as one archive read whole (between `--push-state` and `--pop-state`).
//! These tests check, with both linkers, that the binary is byte for byte the one the same
//! objects named one by one make, that an object without sites parts a pack, that the members
//! are the objects in line order (`ar t`), and that the line's own `--whole-archive` holds
//! after a pack.

use crate::util::{
    cmd, compile_c, compile_case, have, link_bin, read, require, run, skipped, write, Out, TempDir,
    BOOTPROF,
};
use std::path::{Path, PathBuf};

/// The linker options to link with: GNU ld, and lld where it is installed.
fn linkers() -> Vec<&'static str> {
    let mut linkers = vec!["-fuse-ld=bfd"];
    if have("lld") {
        linkers.push("-fuse-ld=lld");
    } else {
        skipped("lld is not installed: GNU ld only");
    }
    linkers
}

/// `bootprof-link [flags] cc linker -o out args...`.
fn link(flags: &[&str], linker: &str, out: &Path, args: &[PathBuf]) -> Out {
    run(cmd(link_bin(), flags)
        .args(["cc", linker, "-o"])
        .arg(out)
        .args(args))
}

/// The directory a `--keep-temps` link names on stderr.
fn kept(o: &Out) -> PathBuf {
    let kept = o
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("bootprof-link: kept temporary files in "))
        .unwrap_or_else(|| panic!("no kept directory named:{o}"));
    PathBuf::from(kept)
}

/// The members of the archive at `path`, by `ar t`.
fn members(path: &Path) -> Vec<String> {
    let o = run(cmd("ar", ["t".as_ref(), path.as_os_str()])).ok();
    o.stdout.lines().map(str::to_string).collect()
}

#[test]
fn objects_side_by_side_are_packed_in_line_order_and_link_the_same_binary() {
    require!("cc", "ar");
    let t = TempDir::new("packs");
    let mut objs = compile_case(
        "probes-multi-tu",
        &["main.c", "util.c", "stats.c"],
        t.path(),
    );
    // An object without sites, between util.o and stats.o: it is linked as it is.
    let plain = t.join("plain.c");
    write(&plain, "int plain_value(void) { return 7; }\n");
    objs.insert(2, compile_c(&plain, &t.join("plain.o"), &["-O2"]));
    for linker in linkers() {
        let (packed, named) = (t.join("packed"), t.join("named"));
        let o = link(&["--keep-temps", "--verbose"], linker, &packed, &objs).ok();
        let dir = kept(&o);
        // Arguments: cc's own 0 to 2 (linker, -o, out), then the objects from 3 on.
        assert_eq!(
            members(&dir.join("0003.pack.a")),
            ["0003-main.o", "0004-util.o"],
            "{linker}:{o}"
        );
        assert_eq!(
            members(&dir.join("0006.pack.a")),
            ["0006-stats.o"],
            "{linker}:{o}"
        );
        assert!(
            o.stderr.contains("0003.pack.a: the rewritten ")
                && o.stderr.contains("util.o, read whole as one archive"),
            "{linker}: --verbose does not say what was packed:{o}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        // `-B` keeps bootprof-link from knowing the linker: the objects are named one by one.
        let mut args = vec![PathBuf::from("-B/usr/bin/")];
        args.extend(objs.iter().cloned());
        let o = link(&["--verbose"], linker, &named, &args).ok();
        assert!(!o.stderr.contains("pack.a"), "{linker}: packed with -B:{o}");
        assert!(
            read(&packed) == read(&named),
            "{linker}: the packed and the named link differ: {} and {}",
            packed.display(),
            named.display()
        );
        let listed = run(cmd(BOOTPROF, ["list".as_ref(), packed.as_os_str()])).ok();
        for site in ["app:start", "util:fold", "stats:report"] {
            assert!(listed.stdout.contains(site), "{linker}: no {site}:{listed}");
        }
        let ran = run(cmd(&packed, ["alpha", "beta"]));
        assert!(ran.stdout.contains("words 2 total 1404"), "{linker}:{ran}");
    }
}

#[test]
fn the_lines_own_whole_archive_holds_after_a_pack() {
    require!("cc", "ar");
    let t = TempDir::new("packs-whole");
    let objs = compile_case(
        "probes-multi-tu",
        &["main.c", "util.c", "stats.c"],
        t.path(),
    );
    // A member nothing references: linked only while --whole-archive holds.
    let extra = t.join("extra.c");
    write(&extra, "int extra_unused(void) { return 9; }\n");
    let extra = compile_c(&extra, &t.join("extra.o"), &["-O2"]);
    let lib = t.join("libextra.a");
    run(cmd(
        "ar",
        ["rc".as_ref(), lib.as_os_str(), extra.as_os_str()],
    ))
    .ok();
    for linker in linkers() {
        let out = t.join("app");
        let mut args = vec![PathBuf::from("-Wl,--whole-archive")];
        args.extend(objs.iter().cloned());
        args.extend([lib.clone(), PathBuf::from("-Wl,--no-whole-archive")]);
        let o = link(&["--verbose"], linker, &out, &args).ok();
        assert!(o.stderr.contains("pack.a"), "{linker}: no pack:{o}");
        let nm = run(cmd("nm", [out.as_os_str()])).ok();
        assert!(
            nm.stdout.contains(" T extra_unused"),
            "{linker}: libextra.a's member was not linked whole after the pack:{o}"
        );
    }
}

#[test]
fn the_linkers_messages_name_the_objects_not_their_private_copies() {
    require!("cc");
    let t = TempDir::new("packs-names");
    let objs = compile_case(
        "probes-multi-tu",
        &["main.c", "util.c", "stats.c"],
        t.path(),
    );
    for linker in linkers() {
        // stats.o left out: main.o's calls into it are undefined. Packed (main.o and util.o
        // side by side) and alone (main.o by itself).
        for objs in [&objs[..2], &objs[..1]] {
            let o = link(&[], linker, &t.join("app"), objs);
            assert_ne!(o.code, Some(0), "{linker}: the link succeeded:{o}");
            assert!(
                o.stderr.contains("stats_add"),
                "{linker}: no undefined reference:{o}"
            );
            let main = objs[0].display().to_string();
            assert!(
                o.stderr.contains(&format!("{main}:")),
                "{linker}: main.o is not named as the line names it:{o}"
            );
            assert!(
                !o.stderr.contains("bootprof-link.") && !o.stderr.contains("pack.a"),
                "{linker}: a private copy is named:{o}"
            );
        }
    }
}
