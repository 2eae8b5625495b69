//! Builds the runtime `bootprof-link` carries inside itself, so that an installed `bootprof-link`
//! needs nothing else on disk. Takes the runtime's sources (this package sits in `runtime/`);
//! hands on, in `OUT_DIR`, `bootprof_runtime.o` (what `bootprof-link` links into executables),
//! `bootprof_runtime_shared.o` (what it links into shared objects) and `bootprof.h` (the C
//! header), and in the environment variable `BOOTPROF_RUNTIME_ID` a name for the three that
//! changes with their contents (the directory of the per-user cache they are written into).
//!
//! The runtime's staticlib (`runtime/c`: the runtime crate without the Rust standard library,
//! panics aborting; megabytes of archive, `core` and `alloc` included) comes from a nested cargo
//! with a target directory of its own under `OUT_DIR`, so it does not wait on the lock of the
//! build that runs this script. Two of them, side by side, one per [`Flavor`]: the executables'
//! ([`EXECUTABLE`]: initial-exec thread-locals) and the shared objects' ([`SHARED_OBJECT`]:
//! general-dynamic thread-locals, which a library loaded by `dlopen` needs, and the rule for
//! which of several copies in a process serves, runtime/src/serving.rs). It is built for the same target and profile
//! (release or debug), without the flags of this build (`RUSTFLAGS` and the like are for
//! `bootprof-link`, not for the code it links into other programs: a `-C linker=` or a sanitizer
//! there would break those links); `BOOTPROF_RUNTIME_RUSTFLAGS` gives the runtime flags of its own.
//!
//! The staticlib is then prelinked into one small object (a megabyte), by the rewriter's
//! `prelink.rs`: the code reachable from the archive's `bootprof_*` symbols, without debug
//! information or LLVM bitcode.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../rewriter/src/prelink.rs"]
mod prelink;
#[path = "../../rewriter/src/wrap.rs"]
mod wrap;

/// The entry point every linked site table calls (`stubs::REGISTER_SYMBOL` in the rewriter): an
/// archive without it is not the runtime.
const REGISTER_SYMBOL: &str = "bootprof_register";

fn main() {
    let manifest_dir = PathBuf::from(var("CARGO_MANIFEST_DIR"));
    let runtime = manifest_dir.parent().expect("runtime/cli has a parent");
    let out = PathBuf::from(var("OUT_DIR"));
    let header = runtime.join("include/bootprof.h");
    if !runtime.join("Cargo.toml").is_file() || !header.is_file() {
        fail(&format!(
            "the runtime's sources are not in {}: the bootprof package builds the runtime it \
             carries from the bootprof workspace (runtime/, beside runtime/cli)",
            runtime.display()
        ));
    }
    println!("cargo:rerun-if-changed=build.rs");
    for shared in ["prelink.rs", "wrap.rs"] {
        println!(
            "cargo:rerun-if-changed={}",
            manifest_dir
                .join("../../rewriter/src")
                .join(shared)
                .display()
        );
    }
    let workspace = runtime.parent().expect("runtime/ has a parent");
    for input in [
        runtime.join("src"),
        runtime.join("Cargo.toml"),
        runtime.join("c/src"),
        runtime.join("c/Cargo.toml"),
        runtime.join("format/src"),
        runtime.join("format/Cargo.toml"),
        header.clone(),
        workspace.join("Cargo.toml"),
        workspace.join("Cargo.lock"),
    ] {
        println!("cargo:rerun-if-changed={}", input.display());
    }
    println!("cargo:rerun-if-env-changed=BOOTPROF_RUNTIME_RUSTFLAGS");

    // The builds at once: each is mostly one crate compiled by one thread.
    let objects = std::thread::scope(|s| {
        let built = FLAVORS.map(|flavor| {
            let out = &out;
            s.spawn(move || {
                let archive = build_staticlib(runtime, out, flavor);
                let object = out.join(flavor.object);
                prelink::prelink(&archive, &object, flavor.required).unwrap_or_else(|e| {
                    fail(&format!("prelinking the runtime ({}): {e}", flavor.object))
                });
                object
            })
        });
        built.map(|b| {
            b.join()
                .unwrap_or_else(|_| fail("a runtime build thread panicked"))
        })
    });
    let library = out.join(LIBRARY_FILE);
    link_library(&objects[FLAVORS.len() - 1], &library, &out);
    let header_copy = out.join("bootprof.h");
    copy(&header, &header_copy);

    let mut contents = Vec::new();
    for file in objects.iter().chain([&library, &header_copy]) {
        contents.extend(read(file));
    }
    println!(
        "cargo:rustc-env=BOOTPROF_RUNTIME_ID={}-{:016x}",
        var("CARGO_PKG_VERSION"),
        fnv1a(&contents)
    );
}

/// The runtime library's file name (in `OUT_DIR`, and in bootprof-link's cache).
const LIBRARY_FILE: &str = "libbootprof.so";

/// The runtimes `bootprof-link` carries, the runtime library's object last.
const FLAVORS: [&Flavor; 5] = [&EXECUTABLE, &SHARED_OBJECT, &LEAN, &LEAN_SHARED, &LIBRARY];

/// Links the runtime library, `libbootprof.so`, from its prelinked `object` into `library`: it
/// exports one symbol, the table of its entry points the lean runtime looks up, and its
/// wrappers call the C library's real functions (`--wrap`, as in a program's link); loaded, it
/// stays (`-z nodelete`: sites point into it).
fn link_library(object: &Path, library: &Path, out: &Path) {
    let script = out.join("libbootprof.map");
    std::fs::write(&script, "{ global: bootprof_library; local: *; };\n")
        .unwrap_or_else(|e| fail(&format!("{}: {e}", script.display())));
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut link = Command::new(cc);
    link.args(["-shared", "-o"])
        .arg(library)
        .arg(object)
        .arg(format!("-Wl,--version-script={}", script.display()))
        .args([
            "-Wl,-soname,libbootprof.so",
            "-Wl,-z,nodelete",
            "-Wl,--as-needed",
        ])
        // In the library, `__real_NAME` is the C library's, as in a program's link.
        .args(wrap::WRAPPED.map(|(name, _)| format!("-Wl,--wrap={name}")));
    prelink::run(&mut link).unwrap_or_else(|e| fail(&format!("linking the runtime library: {e}")));
}

/// One of the runtimes `bootprof-link` carries: how it is built, where it goes.
struct Flavor {
    /// The prelinked object's file name in `OUT_DIR` (what bootprof-link.rs includes).
    object: &'static str,
    /// The symbol the object must define.
    required: &'static str,
    /// The nested build's target directory under `OUT_DIR`.
    target_dir: &'static str,
    /// The `runtime/c` features of the build.
    features: &'static str,
    /// The rustc flags of the build.
    rustflags: &'static str,
}

/// The runtime linked into executables: initial-exec thread-locals, what an executable's own
/// code uses (a `-static` link and a PIE alike), with no `__tls_get_addr` and so no dependency
/// on the dynamic loader by name. Calls into the C library go through the PLT, as C code makes
/// them: bound when first made, not all at start-up (rustc's default goes through the GOT, which
/// the dynamic loader fills before `main`: tens of thousands of instructions of symbol lookups).
/// Panic locations without file, line and column (`-Zlocation-detail=none`, both runtimes: a
/// panic is a bug in the runtime, and its message still says what went wrong): the locations are
/// then all one, where each was a pointer the dynamic loader relocated at every start-up and a
/// file name in every program's read-only data.
const EXECUTABLE: Flavor = Flavor {
    object: "bootprof_runtime.o",
    required: REGISTER_SYMBOL,
    target_dir: "runtime-target",
    features: "standalone",
    rustflags: "-Ztls-model=initial-exec -Zplt=yes -Zlocation-detail=none",
};

/// The runtime linked into shared objects: rustc's default thread-locals for
/// position-independent code, general-dynamic, since the runtime's (17 KB) do not fit in the
/// static TLS block glibc keeps for libraries loaded by `dlopen` ("cannot allocate memory in
/// static TLS block"); and the feature `shared-object`, the rule for which of several copies in
/// a process serves.
const SHARED_OBJECT: Flavor = Flavor {
    object: "bootprof_runtime_shared.o",
    required: REGISTER_SYMBOL,
    target_dir: "runtime-target-shared",
    features: "standalone,shared-object",
    rustflags: "-Zplt=yes -Zlocation-detail=none",
};

/// The lean runtime linked into executables that use no more than their sites: what
/// [`EXECUTABLE`] is built with, less the whole runtime (feature `lean`); it has no
/// thread-locals.
const LEAN: Flavor = Flavor {
    object: "bootprof_lean.o",
    required: REGISTER_SYMBOL,
    target_dir: "runtime-target-lean",
    features: "standalone,lean",
    rustflags: "-Zplt=yes -Zlocation-detail=none",
};

/// The lean runtime linked into shared objects: with the rule for which copy serves.
const LEAN_SHARED: Flavor = Flavor {
    object: "bootprof_lean_shared.o",
    required: REGISTER_SYMBOL,
    target_dir: "runtime-target-lean-shared",
    features: "standalone,lean,shared-object",
    rustflags: "-Zplt=yes -Zlocation-detail=none",
};

/// The runtime library the lean runtime loads (`libbootprof.so`, linked from this object by
/// [`link_library`]): the whole runtime, its thread-locals general-dynamic (a library loaded by
/// `dlopen`).
const LIBRARY: Flavor = Flavor {
    object: "bootprof_library.o",
    required: "bootprof_library",
    target_dir: "runtime-target-library",
    features: "standalone,library",
    rustflags: "-Zplt=yes -Zlocation-detail=none",
};

/// Builds the `bootprof-runtime` staticlib of `flavor` with a nested cargo; returns the
/// archive's path.
fn build_staticlib(runtime: &Path, out: &Path, flavor: &Flavor) -> PathBuf {
    let target = var("TARGET");
    let release = var("PROFILE") == "release";
    let profile = if release { "release" } else { "dev" };
    let target_dir = out.join(flavor.target_dir);
    let mut cargo = Command::new(var("CARGO"));
    cargo
        .args([
            "rustc",
            "--lib",
            "--crate-type",
            "staticlib",
            "--manifest-path",
        ])
        .arg(runtime.join("c/Cargo.toml"))
        .args(["--features", flavor.features])
        // No unwinding (a panic aborts: no unwinder, no libgcc_s) and one code generation unit,
        // whatever the workspace's profile says. No LTO: its code generation calls the C library
        // through the global offset table whatever `-Zplt` says (see below).
        .args(["--config", &format!("profile.{profile}.panic=\"abort\"")])
        .args(["--config", &format!("profile.{profile}.lto=false")])
        .args(["--config", &format!("profile.{profile}.codegen-units=1")])
        // `#![feature(thread_local)]` in the runtime's no_std build (see runtime/src/sys.rs):
        // the same thread-locals the standard library's `thread_local!` compiles to.
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["--target", &target])
        .arg("--target-dir")
        .arg(&target_dir);
    if release {
        cargo.arg("--release");
    }
    // This build's own flags, linker and target directory are not the runtime's.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let per_target = name.starts_with("CARGO_TARGET_")
            && (name.ends_with("_LINKER") || name.ends_with("_RUSTFLAGS"));
        if per_target
            || matches!(
                &*name,
                "RUSTFLAGS"
                    | "CARGO_ENCODED_RUSTFLAGS"
                    | "CARGO_BUILD_RUSTFLAGS"
                    | "CARGO_TARGET_DIR"
                    | "CARGO_BUILD_TARGET_DIR"
                    | "CARGO_BUILD_TARGET"
            )
        {
            cargo.env_remove(&*name);
        }
    }
    let mut flags = std::ffi::OsString::from(flavor.rustflags);
    if let Some(more) = std::env::var_os("BOOTPROF_RUNTIME_RUSTFLAGS") {
        flags.push(" ");
        flags.push(more);
    }
    cargo.env("RUSTFLAGS", flags);
    prelink::run(&mut cargo)
        .unwrap_or_else(|e| fail(&format!("building the runtime staticlib: {e}")));
    let archive = target_dir
        .join(&target)
        .join(if release { "release" } else { "debug" })
        .join("libbootprof_runtime_c.a");
    if !archive.is_file() {
        fail(&format!(
            "the runtime's build left no {}",
            archive.display()
        ));
    }
    archive
}

/// FNV-1a, 64 bits: a name for the contents, not a defence against anyone.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| fail(&format!("cargo did not set {name}")))
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())))
}

fn copy(from: &Path, to: &Path) {
    if let Err(e) = std::fs::copy(from, to) {
        fail(&format!(
            "copying {} to {}: {e}",
            from.display(),
            to.display()
        ));
    }
}

/// Stops the build with `message` (cargo shows a failed build script's stderr).
fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}
