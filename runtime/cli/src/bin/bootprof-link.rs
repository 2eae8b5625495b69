//! `bootprof-link`: a linker wrapper that turns probe call sites into long NOPs.
//!
//! Use it where the link command goes: `bootprof-link cc -o app main.o -lm`, or as a drop-in
//! driver (`-C linker=bootprof-link`, `CMAKE_C_LINKER_LAUNCHER=bootprof-link`) with the real
//! driver in `BOOTPROF_CC` (default `cc`). See DESIGN.md for the options.
//!
//! It carries the runtimes it links into programs (the whole runtime and the lean one, each for
//! executables and for shared objects), the runtime library the lean runtime loads, and the C
//! header, built in by `build.rs`.

// The standard library's start-up is not run: its main-thread setup reads `/proc/self/maps`
// (the stack guard, for the stack-overflow message) on every link, which a wrapper that runs
// once per link does without. `main` below does what else it did that matters here.
#![no_main]

use bootprof_link::runtime_lib::{Embedded, Query};
use bootprof_link::Error;

/// The runtime and header `build.rs` made.
static RUNTIME: Embedded = Embedded {
    object: include_bytes!(concat!(env!("OUT_DIR"), "/bootprof_runtime.o")),
    shared_object: include_bytes!(concat!(env!("OUT_DIR"), "/bootprof_runtime_shared.o")),
    lean: include_bytes!(concat!(env!("OUT_DIR"), "/bootprof_lean.o")),
    lean_shared: include_bytes!(concat!(env!("OUT_DIR"), "/bootprof_lean_shared.o")),
    library: include_bytes!(concat!(env!("OUT_DIR"), "/libbootprof.so")),
    header: include_bytes!(concat!(env!("OUT_DIR"), "/bootprof.h")),
    version: env!("CARGO_PKG_VERSION"),
    id: env!("BOOTPROF_RUNTIME_ID"),
};

const HELP: &str = "\
usage: bootprof-link [OPTIONS] [DRIVER] ARGS...

Runs the link ARGS through DRIVER (default: $BOOTPROF_CC, else cc) after rewriting every call to
a probe symbol (__dtrace_sdt_*, __dtrace_isenabled_*) or profiling hook (mcount, __fentry__,
__cyg_profile_func_enter/exit) in the objects and archives into a long NOP recorded in the
bootprof_sites table.

options (before DRIVER; also from $BOOTPROF_LINK_FLAGS):
  --verbose       report every site and every probe reference that is not a site
  --partial-link  gather by one partial link (DRIVER -r) of all objects, then rewrite it
  --no-runtime    do not link the bootprof runtime; probe stubs return at once
  --embed-runtime link the whole runtime into the output, not the lean runtime that loads the
                  runtime library (libbootprof.so) when something asks for it (static links
                  and programs that call the C API get the whole runtime anyway)
  --keep-temps    keep the directory of rewritten inputs
  --no-fork       remove the link's files before exiting, not in a process of its own that
                  outlives bootprof-link by a few milliseconds (for a container whose first
                  process reaps no orphans, or to time the whole link)
  --stats         print counts and phase times to stderr

alone, each prints a path (the runtime and header this bootprof-link carries are unpacked into
$XDG_CACHE_HOME/bootprof, else ~/.cache/bootprof, on first use):
  --print-include-dir     the directory holding bootprof.h (cc -I\"$(bootprof-link --print-include-dir)\")
  --print-pkg-config-dir  the directory holding bootprof.pc (for PKG_CONFIG_PATH)
  --print-runtime         the runtime object links of executables use ($BOOTPROF_RUNTIME when set:
                          an archive or object)
  --print-shared-runtime  the runtime object links of shared objects (-shared) use ($BOOTPROF_RUNTIME
                          when set)
  --print-library         the runtime library the lean runtime of the programs it links loads
                          (unless $BOOTPROF_LIBRARY names another when they run)
";

/// The C entry point, in place of the standard library's: `SIGPIPE` ignored as the standard
/// library's start-up does (a closed output is an error to report, not the end; commands this
/// one starts get the default back), and a panic ends the process with the standard library's
/// code for it (its message printed by the hook). The arguments are read through `std::env`
/// (glibc hands them to the standard library before `main`). A stack overflow is a plain
/// `SIGSEGV`, without the standard library's message.
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    // SAFETY: sets a signal's disposition to ignore, before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let code = match std::panic::catch_unwind(run) {
        Ok(()) => 0,
        Err(_) => 101,
    };
    // What the standard library's end would flush (`process::exit` flushes it itself).
    let _ = std::io::Write::flush(&mut std::io::stdout());
    code
}

fn run() {
    // gcc's driver runs us as its `lto-wrapper` during an LTO link we started.
    let mut args = std::env::args_os();
    let called = args.next().unwrap_or_default();
    if std::path::Path::new(&called).file_name()
        == Some(std::ffi::OsStr::new(bootprof_link::lto::GCC_WRAPPER))
    {
        let rest: Vec<_> = args.collect();
        std::process::exit(bootprof_link::lto::stand_in_for_lto_wrapper(&rest));
    }
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let [only] = argv.as_slice() {
        if only == "--help" || only == "-h" {
            print!("{HELP}");
            return;
        }
        if let Some(query) = Query::parse(only) {
            match query.answer(&RUNTIME) {
                Ok(path) => println!("{}", path.display()),
                Err(e) => {
                    eprintln!("bootprof-link: error: {e}");
                    std::process::exit(1);
                }
            }
            return;
        }
    }
    bootprof_link::pipeline::tune_allocator();
    match bootprof_link::run_link(argv, &RUNTIME) {
        Ok(code) => std::process::exit(code),
        // The link's own messages said why.
        Err(Error::LinkFailed(code)) => std::process::exit(code),
        Err(e) => {
            eprintln!("bootprof-link: error: {e}");
            let code = match e {
                Error::Command { status, .. } => bootprof_link::driver::exit_code(status),
                _ => 1,
            };
            std::process::exit(code);
        }
    }
}
