//! A cargo project (`tests/sources/rust-probes`, no dependencies, its own workspace) built with
//! `CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=<bootprof-link>`: rustc calls it in the drop-in
//! form with cc-style arguments and crates as `.rlib` archives. An `extern "C"` probe call compiles
//! to `ff 15` + R_X86_64_GOTPCREL, so the sites are `call-got` probes.

use crate::json::list;
use crate::objdump::calls_to_probes;
use crate::util::{
    cmd, defined_functions, link_bin, mkdir, needed, read, require, run, source_dir, write, TempDir,
};
use std::path::Path;

#[test]
fn cargo_project_linked_through_bootprof_link_bin() {
    require!("cargo", "rustc", "cc");
    let t = TempDir::new("rust");
    // Build a copy, so cargo writes its Cargo.lock in the temporary directory.
    let project = mkdir(t.join("rust-probes"));
    let src = source_dir("rust-probes");
    write(project.join("Cargo.toml"), read(src.join("Cargo.toml")));
    write(
        mkdir(project.join("src")).join("main.rs"),
        read(src.join("src/main.rs")),
    );
    let target = t.join("target");

    for (profile, flags) in [("debug", &[][..]), ("release", &["--release"][..])] {
        let mut c = cargo_build(&project.join("Cargo.toml"), &target, None);
        c.args(flags)
            .env("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER", link_bin());
        let built = run(&mut c);
        built.no_panic();
        if profile == "release" {
            // LLVM loads the probe's GOT slot once before the loop and calls through a register:
            // no call site, only a GOT load, and a call the table cannot turn off. The link is
            // refused, pointing at the `probe!` macro, whose call cannot be hoisted.
            assert_ne!(built.code, Some(0), "{built}");
            for want in [
                "__dtrace_sdt_rust__tick",
                "a GOT load",
                "bootprof_runtime::probe!",
            ] {
                assert!(built.stderr.contains(want), "no `{want}` in:{built}");
            }
            continue;
        }
        built.ok();

        let binary = target.join(profile).join("rust-probes");
        check_binary(&binary, profile);
    }
}

fn check_binary(binary: &Path, profile: &str) {
    let ran = run(&mut cmd(binary, [""; 0])).ok();
    assert_eq!(ran.stdout, "rust sum 45\n", "{profile}");
    let (listing, out) = list(binary);
    assert_eq!(out.code, Some(0), "{profile}:{out}");
    for s in &listing.sites {
        assert_eq!(
            (s.kind.as_str(), s.provider.as_deref(), s.name.as_str()),
            ("probe", Some("rust"), "tick"),
            "{profile}: {s:?}"
        );
        assert!(s.nop, "{profile}: {s:?}");
        assert_eq!(s.len, 6, "{profile}: {s:?}");
    }
    if profile == "debug" {
        // One call in the loop: one `call *__dtrace_sdt_rust__tick@GOTPCREL(%rip)`.
        assert_eq!(listing.sites.len(), 1, "{profile}:{}", listing.out);
        assert_eq!(listing.sites[0].form, "call-got", "{}", listing.out);
    }
}

/// `tests/sources/rust-lto` with each of rustc's LTO forms, with and without `-Zinstrument-mcount`
/// (nightly-only: `RUSTC_BOOTSTRAP=1`): `-C lto=fat` and `thin` hand the linker machine code,
/// `-C linker-plugin-lto` hands it bitcode, which rustc's own lld turns into code during the
/// link. The table holds as many sites as the same build without bootprof has calls to the probe
/// and to `mcount`, each a NOP, and the program runs the same. The program does not depend on the
/// runtime crate: bootprof-link links the runtime in, it needs no library more than the plain
/// build, and `bootprof run` traces its probe and hooks.
#[test]
fn cargo_project_with_each_lto_form() {
    require!("cargo", "rustc", "cc", "objdump");
    let t = TempDir::new("rust-lto");
    let project = mkdir(t.join("rust-lto"));
    let src = source_dir("rust-lto");
    write(project.join("Cargo.toml"), read(src.join("Cargo.toml")));
    write(
        mkdir(project.join("src")).join("main.rs"),
        read(src.join("src/main.rs")),
    );
    let mut report = Vec::new();
    for (lto, flags) in [
        ("fat", ""),
        ("thin", ""),
        ("off", "-C linker-plugin-lto"),
        (
            "fat",
            "-Zinstrument-mcount -C symbol-mangling-version=legacy -Z unstable-options",
        ),
        ("thin", "-Zinstrument-mcount -C symbol-mangling-version=v0"),
        ("off", "-C linker-plugin-lto -Zinstrument-mcount"),
    ] {
        let name = format!("lto={lto} {flags}");
        let build = |through_bootprof: bool| {
            let target = t.join(format!("target-{lto}-{}-{through_bootprof}", flags.len()));
            let mut rustflags = flags.to_string();
            let mut c = cargo_build(&project.join("Cargo.toml"), &target, None);
            c.arg("--release");
            if through_bootprof {
                c.env("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER", link_bin());
            } else {
                // Without bootprof the probe symbol has no definition.
                rustflags.push_str(" -C link-arg=-Wl,--unresolved-symbols=ignore-all");
                c.env_remove("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
            }
            c.env("CARGO_PROFILE_RELEASE_LTO", lto)
                .env("RUSTFLAGS", rustflags)
                .env("RUSTC_BOOTSTRAP", "1");
            let built = run(&mut c);
            built.no_panic();
            built.ok();
            target.join("release").join("rust-lto")
        };
        let plain = build(false);
        let expected = calls_to_probes(&plain, &defined_functions(&plain)).len();
        let binary = build(true);
        let listing = crate::lto::check_table(&binary, expected, &name);
        assert!(
            listing.sites.iter().any(|s| s.name == "tick"),
            "{name}: {}",
            listing.out
        );
        if flags.contains("mcount") {
            // The hook of `tick` is listed by its demangled name, legacy or v0 mangling alike.
            let prefix = if flags.contains("legacy") {
                "_ZN"
            } else {
                "_R"
            };
            assert!(
                listing.sites.iter().any(|s| s.kind == "mcount"
                    && s.function == "rust_lto::tick"
                    && s.symbol.starts_with(prefix)),
                "{name}: {}",
                listing.out
            );
        }
        let ran = run(&mut cmd(&binary, [""; 0])).ok();
        assert_eq!(ran.stdout, "rust sum 90\n", "{name}");
        // The program does not depend on the runtime crate: bootprof-link links the runtime in
        // (without the standard library: no library the plain build does not need), so its
        // sites can be enabled and traced.
        assert_eq!(needed(&binary), needed(&plain), "{name}");
        traced_ticks(&t.join(format!("session-{}", report.len())), &binary, &name);
        report.push(format!("{name}: {} sites", listing.sites.len()));
    }
    println!("{}", report.join("\n"));
}

/// `tests/sources/rust-graph`, which depends on the runtime crate, built with
/// `-Zinstrument-mcount` (nightly-only: `RUSTC_BOOTSTRAP=1`) and traced with `bootprof run
/// --graph` in both modes: its panics unwind through hooked frames to `catch_unwind`, a
/// backtrace taken inside hooked frames names the real callers (the unwinder's
/// `_Unwind_Backtrace` is wrapped: without it the walk went from the trampoline to the
/// trampoline without end), the output is the untraced run's, and every call has its EXIT.
#[test]
fn rust_panics_and_backtraces_through_hooked_returns() {
    require!("cargo", "rustc", "cc");
    let t = TempDir::new("rust-graph");
    let project = mkdir(t.join("rust-graph"));
    let runtime = crate::util::repo_root().join("runtime");
    write(
        project.join("Cargo.toml"),
        format!(
            "[package]\nname = \"rust-graph\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
             publish = false\n\n[dependencies]\nbootprof-runtime = {{ path = {:?} }}\n\n\
             [workspace]\n",
            runtime.display().to_string()
        ),
    );
    // The example's lock file: the runtime's dependencies at the versions the workspace has.
    let lock = crate::util::repo_root().join("examples/rust/Cargo.lock");
    write(project.join("Cargo.lock"), read(lock));
    write(
        mkdir(project.join("src")).join("main.rs"),
        read(source_dir("rust-graph").join("src/main.rs")),
    );
    let flags = "-Zinstrument-mcount -C force-frame-pointers=yes";
    let mut c = cargo_build(&project.join("Cargo.toml"), &t.join("target"), Some(flags));
    c.arg("--release")
        .env("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER", link_bin());
    run(&mut c).ok();
    let binary = t.join("target/release/rust-graph");
    let plain = run(cmd(&binary, [""; 0]).env("SHOW_BACKTRACE", "1")).ok();
    assert_eq!(plain.stdout, "rust graph sum 228\n");

    // main, then each n: level1 > level2 > level3, the panic hook inside level3 for a
    // multiple of 3, and every EXIT.
    let mut expected = vec!["rust_graph::main".to_string()];
    for n in 1..=6 {
        expected.extend(["level1", "level2", "level3"].map(|f| format!("rust_graph::{f}")));
        if n % 3 == 0 {
            expected.push("rust_graph::main::{closure#0}".into());
            expected.push("EXIT rust_graph::main::{closure#0}".into());
        }
        expected.extend(["level3", "level2", "level1"].map(|f| format!("EXIT rust_graph::{f}")));
    }
    expected.push("EXIT rust_graph::main".into());
    for mode in ["trap", "call"] {
        let session = t.join(format!("graph-{mode}"));
        // Under `timeout`: a backtrace that cannot get past the trampoline never ends.
        let mut traced = cmd("timeout", ["120"]);
        traced
            .arg(crate::util::BOOTPROF)
            .args(["run", "--graph", "--mode", mode])
            .args(["-e", "rust_graph::*", "-o"])
            .arg(&session)
            .arg("--")
            .arg(&binary)
            .env("SHOW_BACKTRACE", "1");
        let traced = run(traced).ok();
        assert_eq!(traced.stdout, plain.stdout, "{mode}");
        let frames: Vec<&str> = (traced.stderr.lines())
            .filter_map(|l| l.trim_start().split_once(": ").map(|(_, f)| f))
            .filter(|f| f.starts_with("rust_graph::"))
            .collect();
        assert_eq!(
            frames,
            [
                "rust_graph::level3",
                "rust_graph::level2",
                "rust_graph::level1",
                "rust_graph::main"
            ],
            "{mode}: the backtrace inside hooked frames:\n{}",
            traced.stderr
        );
        let report = run(cmd(
            crate::util::BOOTPROF,
            ["report".as_ref(), session.as_os_str()],
        ))
        .ok();
        let calls: Vec<String> = (report.stdout.lines())
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once(": ").map(|(_, what)| what))
            .map(|what| what.split(" <-").next().unwrap_or(what).to_string())
            .collect();
        assert_eq!(calls, expected, "{mode}:\n{}", report.stdout);
    }
}

/// `bootprof run` of `tests/sources/rust-lto`'s `binary` with every site enabled in call mode:
/// the session holds the probe's 10 hits, and with `-Zinstrument-mcount` the 10 entries of
/// `rust_lto::tick` too.
fn traced_ticks(session: &Path, binary: &Path, name: &str) {
    let traced = run(cmd(crate::util::BOOTPROF, ["run", "--mode", "call", "-o"])
        .arg(session)
        .arg("--")
        .arg(binary))
    .ok();
    assert_eq!(traced.stdout, "rust sum 90\n", "{name}");
    let text = run(cmd(crate::util::BOOTPROF, ["report"]).arg(session)).ok();
    let lines = |what: &str| text.stdout.lines().filter(|l| l.contains(what)).count();
    assert_eq!(lines(": EVENT rust:tick arg="), 10, "{name}:{text}");
    if name.contains("mcount") {
        assert_eq!(lines(": rust_lto::tick <-"), 10, "{name}:{text}");
    }
}

/// `cargo build --offline --quiet` of the project `manifest` into `target`, with `rustflags`
/// (and `RUSTC_BOOTSTRAP=1`, for the nightly-only flags) or none, with nothing of the calling
/// build's settings; the caller adds the profile and the linker.
fn cargo_build(manifest: &Path, target: &Path, rustflags: Option<&str>) -> std::process::Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut c = cmd(&cargo, ["build", "--offline", "--quiet"]);
    c.arg("--manifest-path")
        .arg(manifest)
        .env("CARGO_TARGET_DIR", target)
        .env("BOOTPROF_CC", "cc")
        .env_remove("BOOTPROF_LINK_FLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_BUILD_RUSTFLAGS");
    match rustflags {
        Some(flags) => c.env("RUSTFLAGS", flags).env("RUSTC_BOOTSTRAP", "1"),
        None => c.env_remove("RUSTFLAGS"),
    };
    c
}
