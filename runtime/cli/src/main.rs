//! `bootprof`: the user-facing command, a thin layer over `bootprof-report`. `bootprof run`
//! records a program, `bootprof attach` one that runs already, `bootprof list` prints a binary's
//! probe-site table (or a running process's, with its sites' states), `bootprof report` turns a
//! trace into a report.

use bootprof_report::channel::OfferedLibrary;
use bootprof_report::run::RunOptions;
use bootprof_report::Format;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// The runtime library this `bootprof` carries (`runtime/cli/build.rs`), which the lean runtime
/// of the programs `bootprof run` runs loads.
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libbootprof.so"));

/// [`LIBRARY`] unpacked, or `None` (with a note) when it cannot be: the programs then load the
/// library `bootprof-link` put beside their runtime.
fn library() -> Option<PathBuf> {
    bootprof_link::runtime_lib::unpacked_library(env!("BOOTPROF_RUNTIME_ID"), LIBRARY)
        .map_err(|e| eprintln!("bootprof: note: the runtime library cannot be unpacked: {e}"))
        .ok()
}

/// [`LIBRARY`] as `bootprof attach` and `bootprof list --pid` offer it to a process whose lean
/// runtime has not loaded one.
fn offered() -> OfferedLibrary {
    OfferedLibrary {
        file_name: format!("libbootprof.{}.so", env!("BOOTPROF_RUNTIME_ID")),
        bytes: LIBRARY,
    }
}

/// Zero-cost probes for Linux x86-64 programs.
#[derive(Parser)]
#[command(name = "bootprof", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program with probes enabled and its hits recorded into a new session directory
    /// (`bootprof.<pid>.session` unless -o): every process of its tree that carries the runtime
    /// records into its own lane there, as it runs (with --count, only its hit counts, printed
    /// when the program ends). The programs must have been linked by bootprof-link.
    Run(RunOptions),
    /// Print the probe-site table of a linked executable or shared object, and check that every
    /// site holds its NOP (exit status 1 if one does not, or if the binary has no site table);
    /// with --pid, the live state of every site of a running process (enabled or not, mode, hit
    /// count), and whether each disabled one holds its NOP.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Show C++ and Rust functions by their symbols, not their demangled names.
        #[arg(long)]
        no_demangle: bool,
        /// A running process (linked by bootprof-link) to ask, instead of a file.
        #[arg(long, value_name = "PID", conflicts_with = "binary")]
        pid: Option<u32>,
        /// The executable or shared object.
        #[arg(required_unless_present = "pid")]
        binary: Option<PathBuf>,
    },
    /// Attach to a running program linked by bootprof-link: enable the chosen sites, record
    /// their hits into a new session directory, and detach (after --duration, on Ctrl-C, or
    /// when bootprof is killed), which disables exactly the sites this attach enabled and
    /// checks that each holds its NOP again. The program runs on; attach again at will.
    Attach(bootprof_report::attach::AttachOptions),
    /// Turn a session (`bootprof run`'s directory), one lane file or a single trace file
    /// (`bootprof.<pid>.trace`) into a report: ftrace-like text, Chrome trace JSON, a Perfetto
    /// trace, folded stacks, an SVG flame chart, a profile-point table, a summary, or the hit
    /// counts of a session run with --count; every process shown.
    Report {
        /// The output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write the report to this file (atomically) instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Flame chart: start the time axis at the first record rather than when recording
        /// began (leaving out the runtime's own set-up and whatever ran before the first hit).
        #[arg(long)]
        from_first_record: bool,
        /// Flame chart: its width in pixels (frames narrower than 0.1 pixel are left out, so a
        /// wider chart holds finer detail to zoom into).
        #[arg(long, value_name = "PIXELS", default_value_t = 1200,
              value_parser = clap::value_parser!(u32).range(300..=1_000_000))]
        width: u32,
        /// Text format: ftrace's trace options, comma-separated, `no` before a name to turn it
        /// off: print-parent (on), sym-offset, sym-addr, raw, hex, context-info (on),
        /// record-tgid.
        #[arg(long, value_name = "LIST", value_parser = bootprof_report::text::TextOptions::parse)]
        options: Option<bootprof_report::text::TextOptions>,
        /// Show C++ and Rust functions by their symbols, not their demangled names (with them,
        /// Chrome JSON gives each demangled function's symbol in its `args.symbol`).
        #[arg(long)]
        no_demangle: bool,
        /// Text, summary and points formats: show the source file:line of each function (its
        /// first line), probe and recorded stack frame, from the DWARF debug information of
        /// each process's executable (build with -g). Sites of shared libraries, and single
        /// trace files, are not covered; a note on stderr says what is not.
        #[arg(long)]
        srcline: bool,
        /// Keep only the calls of the outermost N levels of each thread (calls with EXITs:
        /// -finstrument-functions, `bootprof run --graph`, annotated regions), as `bootprof run
        /// --depth` does while recording; the report says how many calls it left out.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        depth: Option<u32>,
        /// Keep only the calls that took at least this long (e.g. 1ms, 250us), as `bootprof run
        /// --min-time` does while recording: a call shorter than that is left out, even inside
        /// a call that is kept.
        #[arg(long, value_name = "DURATION", value_parser = bootprof_report::run::parse_duration)]
        min_time: Option<u64>,
        /// The session directory, lane file or trace file.
        file: PathBuf,
    },
}

/// Prints `bootprof: error: ...` and exits with status 1.
fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("bootprof: error: {e}");
    std::process::exit(1);
}

/// Run by the C library before `main` (and so before Rust's start-up ignores SIGPIPE), to note
/// whether SIGPIPE was ignored, for the programs `bootprof run` starts.
#[used]
#[link_section = ".init_array"]
static NOTE_SIGPIPE: extern "C" fn() = bootprof_report::signals::note_sigpipe_before_main;

fn main() {
    // A closed pipe ends bootprof as it ends cat: killed by SIGPIPE, quietly.
    bootprof_report::signals::die_on_closed_pipe();
    let cli = Cli::parse();
    match cli.command {
        Command::Run(mut options) => match bootprof_report::run::run({
            options.library = library();
            options
        }) {
            Ok(code) => std::process::exit(code),
            Err(e) => fail(e),
        },
        Command::Attach(mut options) => match bootprof_report::attach::attach({
            options.library = Some(offered());
            options
        }) {
            Ok(code) => std::process::exit(code),
            Err(e) => fail(e),
        },
        Command::List {
            json,
            pid: Some(pid),
            ..
        } => {
            let (text, all_nop) =
                bootprof_report::attach::list_pid(pid, json, None, Some(&offered()))
                    .unwrap_or_else(|e| fail(e));
            print!("{text}");
            if !all_nop {
                std::process::exit(1);
            }
        }
        Command::List {
            json,
            no_demangle,
            binary,
            ..
        } => {
            let binary = binary.unwrap_or_default();
            let mut listing = bootprof_report::list::list(&binary).unwrap_or_else(|e| fail(e));
            if !no_demangle {
                listing.demangle_names();
            }
            print!(
                "{}",
                if json {
                    listing.to_json()
                } else {
                    listing.to_text()
                }
            );
            if listing.nop_count() != listing.sites.len() {
                std::process::exit(1);
            }
        }
        Command::Report {
            format,
            output,
            from_first_record,
            width,
            options: text,
            no_demangle,
            srcline,
            depth,
            min_time,
            file,
        } => {
            if text.is_some() && format != Format::Text {
                fail("--options applies to --format text only");
            }
            let options = bootprof_report::Options {
                from_first_record,
                width,
                text: text.unwrap_or_default(),
                demangle: !no_demangle,
                srcline,
                filter: bootprof_report::filter::Filter {
                    depth,
                    min_ns: min_time,
                },
                ..Default::default()
            };
            if let Err(e) = bootprof_report::report(&file, format, output.as_deref(), &options) {
                fail(e);
            }
        }
    }
}
