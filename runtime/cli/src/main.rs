//! `bootprof`: the user-facing command, a thin layer over `bootprof-report`. `bootprof run`
//! records a program, `bootprof list` prints a binary's probe-site table, `bootprof report` turns
//! a trace into a report.

use bootprof_report::run::{Mode as RunMode, RunOptions};
use bootprof_report::Format;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Zero-cost probes for Linux x86-64 programs.
#[derive(Parser)]
#[command(name = "bootprof", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program with probes enabled and its hits recorded; the trace is written when it
    /// exits (bootprof.<pid>.trace unless -o). The program must have been linked by bootprof-link.
    Run {
        /// Patterns of the sites to enable (provider:name, or a function for hooks; `*`
        /// wildcards at either end). Repeatable; default: every site.
        #[arg(short = 'e', long = "enable", value_name = "PATTERN")]
        enable: Vec<String>,
        /// Patterns of sites never to enable, even when an --enable pattern matches them
        /// (ftrace's set_ftrace_notrace). Repeatable.
        #[arg(short = 'x', long = "notrace", value_name = "PATTERN")]
        notrace: Vec<String>,
        /// How enabled sites fire.
        #[arg(long, value_enum, default_value = "trap")]
        mode: RunMode,
        /// The trace file.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// Capacity of the event log, in records.
        #[arg(long, value_name = "RECORDS")]
        buffer: Option<usize>,
        /// Print the profile-point table to stderr when the program exits.
        #[arg(long)]
        points: bool,
        /// The program and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Print the probe-site table of a linked executable or shared object, and check that every
    /// site holds its NOP (exit status 1 if one does not).
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The executable or shared object.
        binary: PathBuf,
    },
    /// Turn a trace file (`bootprof.<pid>.trace`) into a report: ftrace-like text, Chrome trace
    /// JSON, folded stacks, an SVG flame chart, a profile-point table or a summary.
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
        /// The trace file.
        file: PathBuf,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            enable,
            notrace,
            mode,
            output,
            buffer,
            points,
            command,
        } => match bootprof_report::run::run(RunOptions {
            enable,
            notrace,
            mode,
            output,
            buffer,
            points,
            command,
        }) {
            Ok(code) => std::process::exit(code),
            Err(e) => {
                eprintln!("bootprof: error: {e}");
                std::process::exit(1);
            }
        },
        Command::List { json, binary } => match bootprof_report::list::list(&binary) {
            Ok(listing) => {
                let text = if json {
                    listing.to_json()
                } else {
                    listing.to_text()
                };
                print!("{text}");
                if listing.nop_count() != listing.sites.len() {
                    std::process::exit(1);
                }
            }
            Err(e) => {
                eprintln!("bootprof: error: {e}");
                std::process::exit(1);
            }
        },
        Command::Report {
            format,
            output,
            from_first_record,
            file,
        } => {
            let options = bootprof_report::Options {
                from_first_record,
                ..Default::default()
            };
            if let Err(e) = bootprof_report::report(&file, format, output.as_deref(), &options) {
                eprintln!("bootprof: error: {e}");
                std::process::exit(1);
            }
        }
    }
}
