//! The one error type of the reports. Every variant that concerns an input names the file, and,
//! where known, the section (or part of a trace) and offset. Panics are reserved for bugs.

pub use bootprof_format::location::Location;
use std::path::PathBuf;

/// Everything that can go wrong in `bootprof list`, `bootprof report` and `bootprof run`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is not an ELF file at all.
    #[error("{0}: not an ELF file")]
    NotElf(Location),
    /// The input is ELF, but not what we handle (32-bit, big-endian, another machine).
    #[error("{at}: unsupported ELF file: {what} (bootprof handles x86-64 little-endian ELF only)")]
    Unsupported {
        /// Where.
        at: Location,
        /// What is unsupported.
        what: String,
    },
    /// The input's structure is inconsistent (offsets outside the file, bad counts, ...).
    #[error("{at}: malformed {format}: {what}")]
    Malformed {
        /// Where.
        at: Location,
        /// What kind of input: `ELF` or `trace`.
        format: &'static str,
        /// What is wrong.
        what: String,
    },
    /// A binary has no site table.
    #[error(
        "{0}: no bootprof site table (it was not linked by bootprof-link, or none of its inputs \
         calls a probe or a profiling hook)"
    )]
    NoTable(Location),
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A usage error on the command line.
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// Shorthand for an I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A malformed ELF file.
    pub fn malformed_elf(at: Location, e: impl std::fmt::Display) -> Error {
        Error::Malformed {
            at,
            format: "ELF",
            what: e.to_string(),
        }
    }
}

/// The reports' result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
