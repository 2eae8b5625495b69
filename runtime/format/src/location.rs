//! Where in an input a problem lies, for the error messages of every crate that reads these
//! formats (the rewriter's objects, the tools' binaries and traces).

extern crate std;
use std::string::String;

/// Where in an input a problem lies; printed as `file: section `s` offset 0x..: symbol `x``.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// The input file (for an archive member: `archive(member)`).
    pub file: String,
    /// The section name, if the problem is inside one.
    pub section: Option<String>,
    /// The offset in the section (or in the file when there is no section).
    pub offset: Option<u64>,
    /// The symbol concerned, if any.
    pub symbol: Option<String>,
}

impl Location {
    /// A location naming only the file.
    pub fn file(file: impl Into<String>) -> Self {
        Location {
            file: file.into(),
            ..Location::default()
        }
    }
}

impl core::fmt::Display for Location {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.file)?;
        if let Some(s) = &self.section {
            write!(f, ": section `{s}`")?;
        }
        if let Some(o) = self.offset {
            write!(f, " offset {o:#x}")?;
        }
        if let Some(s) = &self.symbol {
            write!(f, " symbol `{s}`")?;
        }
        Ok(())
    }
}
