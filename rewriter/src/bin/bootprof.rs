//! `bootprof`: the user-facing command. `bootprof list` prints a binary's probe-site table.

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
    /// Print the probe-site table of a linked executable or shared object, and check that every
    /// site holds its NOP (exit status 1 if one does not).
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The executable or shared object.
        binary: PathBuf,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::List { json, binary } => match bootprof_rewriter::list::list(&binary) {
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
    }
}
