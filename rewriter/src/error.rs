//! The one error type of the rewriter. Every variant that concerns an input names the file, and,
//! where known, the section, offset and symbol. Panics are reserved for bugs in this crate.

pub use bootprof_format::location::Location;
use std::path::PathBuf;

/// Everything that can go wrong in `bootprof-link`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is not an ELF file at all.
    #[error("{0}: not an ELF file")]
    NotElf(Location),
    /// The input is ELF, but not what we handle (32-bit, big-endian, another machine, not ET_REL).
    #[error("{at}: unsupported ELF file: {what} (bootprof handles x86-64 little-endian ELF only)")]
    Unsupported {
        /// Where.
        at: Location,
        /// What is unsupported.
        what: String,
    },
    /// The input's structure is inconsistent (offsets outside the file, bad indices, ...).
    #[error("{at}: malformed {format}: {what}")]
    Malformed {
        /// Where.
        at: Location,
        /// What kind of input: `ELF` or `trace`.
        format: &'static str,
        /// What is wrong.
        what: String,
    },
    /// A relocation against a probe symbol that must be a call or jump is not one.
    #[error(
        "{at}: relocation {reloc} against a probe symbol is not at a call or jump: bytes {bytes}"
    )]
    NotACall {
        /// Where.
        at: Location,
        /// The relocation type's name.
        reloc: &'static str,
        /// The bytes found, hex.
        bytes: String,
    },
    /// Well-formed input that bootprof-link will not link as it is, and why.
    #[error("{at}: {what}")]
    Refused {
        /// Where.
        at: Location,
        /// Why, and what to do instead.
        what: String,
    },
    /// A static archive is malformed.
    #[error("{at}: malformed archive: {what}")]
    Archive {
        /// Where.
        at: Location,
        /// What is wrong.
        what: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The driver or linker could not be started.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A command that bootprof-link runs itself (partial link, compile) failed; its stderr was shown.
    #[error("`{command}` failed with {status}")]
    Command {
        /// The command line, shortened.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
    },
    /// A link we ran failed; its own messages have passed through, this is its exit status.
    #[error("the link failed with exit status {0}")]
    LinkFailed(i32),
    /// A bug in bootprof, reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(String),
    /// A usage error on the command line.
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// A malformed ELF object: `what` is wrong at `at`.
    pub fn malformed(at: Location, what: impl std::fmt::Display) -> Error {
        Error::Malformed {
            at,
            format: "ELF",
            what: what.to_string(),
        }
    }

    /// Shorthand for an I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// The rewriter's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
