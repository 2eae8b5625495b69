//! `bootprof-link`: a linker wrapper that turns probe call sites into long NOPs.
//!
//! Use it where the link command goes: `bootprof-link cc -o app main.o -lm`, or as a drop-in
//! driver (`-C linker=bootprof-link`, `CMAKE_C_LINKER_LAUNCHER=bootprof-link`) with the real
//! driver in `BOOTPROF_CC` (default `cc`). See DESIGN.md for the options.

use bootprof_link::Error;

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
  --keep-temps    keep the directory of rewritten inputs
  --stats         print counts and phase times to stderr
";

fn main() {
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
    if argv.first().is_some_and(|a| a == "--help" || a == "-h") && argv.len() == 1 {
        print!("{HELP}");
        return;
    }
    match bootprof_link::run_link(argv) {
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
