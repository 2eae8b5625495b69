//! bootprof's integration tests: one test binary (auto-discovered by Cargo as the target
//! `integration`), one module per area. They run the real `bootprof-link` and `bootprof` binaries
//! on real programs compiled from `tests/sources/`, each test in its own temporary directory, and
//! skip (printing "skipped: <tool> not found") when an external tool is missing.
//!
//! | module | what |
//! |---|---|
//! | [`corpus`] | the C/C++ cases of `tests/sources/<case>/` and their directives, one test each |
//! | [`matrix`] | one case across -O0/-O2 x ld.bfd/lld x PIE/-no-pie/-static, every check |
//! | [`cli`] | invocation forms, response files, pass-through, failing links, `bootprof list` |
//! | [`benches`] | `benches/run --quick`: every benchmark suite builds and passes its checks |
//! | [`badinput`] | damaged or foreign inputs: an error naming the place, no panic, output kept |
//! | [`diagnostics`] | a closed pipe, a binary without a table, a trace not written: what bootprof says; outputs that are pipes are written into |
//! | [`srcline`] | `bootprof report --srcline`: file:line from DWARF, PIE or not; the note without -g |
//! | [`cmake`] | CMake projects linked through `CMAKE_C_LINKER_LAUNCHER` and `CMAKE_CXX_LINKER_LAUNCHER` (a C++ shared library and executable) |
//! | [`lto`] | `-flto` in every form (gcc, clang, both linkers, archives, C++): every site found, none left live |
//! | [`rust`] | a cargo project linked through `CARGO_TARGET_..._LINKER`, with and without the runtime crate |
//! | [`lean`] | a hello world's shared libraries are its plain link's; `-static` and `-static-pie` links are quiet and work |
//! | [`install`] | `cargo install --path runtime/cli`: the installed commands link, list, run and report from an unrelated directory with a clean environment; where the runtime and header are unpacked |
//! | [`structure`] | the crates' modules form layers: no import cycle |
//! | [`table`] | the site table's relocations (one per text section and target), and a version 1 table listing and counting as its version 2 table |
//! | [`realworld`] | bzip2, lz4, jsoncpp, mksh and the sqlite3 shell from Debian's sources: `tests/realworld/run --ci` |
//! | [`packs`] | objects side by side linked as one archive read whole: the same binary as named one by one, with both linkers; the line's `--whole-archive` kept |
//! | [`objdump`] | the independent count of call sites in the inputs |
//! | [`flamechart_script`] | the flame chart's zoom, reset and search, driven in headless Chromium |
//! | [`elf`], [`json`], [`util`] | hand-written ELF reading, `bootprof list --json` read, helpers |
//!
//! Set `BOOTPROF_TEST_KEEP=1` to keep the temporary directories.

mod badinput;
mod benches;
mod boot;
mod cli;
mod cmake;
mod corpus;
mod diagnostics;
mod early_link;
mod elf;
mod flamechart_script;
mod install;
mod json;
mod lean;
mod linker_scripts;
mod lto;
mod matrix;
mod objdump;
mod packs;
mod realworld;
mod report;
mod rust;
mod srcline;
mod structure;
mod table;
mod util;
