//! A cargo project (`tests/sources/rust-probes`, no dependencies, its own workspace) built with
//! `CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=<bootprof-link>`: rustc calls it in the drop-in
//! form with cc-style arguments and crates as `.rlib` archives. An `extern "C"` probe call compiles
//! to `ff 15` + R_X86_64_GOTPCREL, so the sites are `call-got` probes.

use crate::json::list;
use crate::objdump::calls_to_probes;
use crate::util::{
    cmd, defined_functions, link_bin, mkdir, read, require, run, source_dir, write, TempDir,
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
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());

    for (profile, flags) in [("debug", &[][..]), ("release", &["--release"][..])] {
        let mut c = cmd(&cargo, ["build", "--offline", "--quiet"]);
        c.args(flags)
            .arg("--manifest-path")
            .arg(project.join("Cargo.toml"))
            .env("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER", link_bin())
            .env("CARGO_TARGET_DIR", &target)
            .env("BOOTPROF_CC", "cc")
            .env_remove("BOOTPROF_LINK_FLAGS")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET")
            .env_remove("CARGO_BUILD_RUSTFLAGS");
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
/// and to `mcount`, each a NOP, and the program runs the same.
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
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
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
            let mut c = cmd(&cargo, ["build", "--offline", "--quiet", "--release"]);
            if through_bootprof {
                c.env("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER", link_bin());
            } else {
                // Without bootprof the probe symbol has no definition.
                rustflags.push_str(" -C link-arg=-Wl,--unresolved-symbols=ignore-all");
                c.env_remove("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
            }
            c.arg("--manifest-path")
                .arg(project.join("Cargo.toml"))
                .env("CARGO_TARGET_DIR", &target)
                .env("CARGO_PROFILE_RELEASE_LTO", lto)
                .env("RUSTFLAGS", rustflags)
                .env("RUSTC_BOOTSTRAP", "1")
                .env("BOOTPROF_CC", "cc")
                .env_remove("BOOTPROF_LINK_FLAGS")
                .env_remove("CARGO_ENCODED_RUSTFLAGS")
                .env_remove("CARGO_BUILD_TARGET")
                .env_remove("CARGO_BUILD_RUSTFLAGS");
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
        report.push(format!("{name}: {} sites", listing.sites.len()));
    }
    println!("{}", report.join("\n"));
}
