//! What the phases hand each other about sites: the probe symbols an object references, each
//! verified site with everything the writer needs, and the references that are not sites. Below
//! every phase; depends on nothing of the rewriter but its error location.

use crate::error::Location;
use bootprof_format::{Form, Kind};

/// A probe symbol of an object, its name borrowed from the object's string table (thousands of
/// them in a link; two allocations each were a tenth of the scan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSymbol<'d> {
    /// Its full name.
    pub name: &'d [u8],
    /// What it is.
    pub kind: Kind,
}

/// One site found in an object. Its names are borrowed from the object (and the section's name
/// shared by its sites): a link has tens of thousands of sites, and three allocations each were
/// a tenth of the rewriter's work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteInfo<'d> {
    /// Index of the text section holding it.
    pub section: usize,
    /// Name of that section.
    pub section_name: std::borrow::Cow<'d, str>,
    /// Offset of the site's first byte in the section.
    pub offset: u64,
    /// The form it had.
    pub form: Form,
    /// What it is.
    pub kind: Kind,
    /// The probe symbol called.
    pub symbol: &'d [u8],
    /// Enclosing function (empty when no symbol covers the site).
    pub function: &'d [u8],
    /// Offset from the start of the enclosing function (or section).
    pub func_offset: u64,
    /// Index of the relocation section and of the entry in it.
    pub(crate) rela: (usize, usize),
    /// Index of the probe symbol in the symbol table.
    pub(crate) symbol_index: usize,
    /// The instruction bytes as compiled.
    pub(crate) orig: [u8; 8],
    /// For a [`Form::Guard`]: where its enabled jump goes, from its record (boxed: guards are
    /// few, and every site would otherwise carry the room for one).
    pub(crate) guard: Option<Box<GuardTarget>>,
}

/// The jump target of a guard, as its `.bootprof_guard` record gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GuardTarget {
    /// The symbol the record's target relocation is against, and its addend.
    pub symbol: usize,
    pub addend: i64,
    /// The section the target is in.
    pub section: usize,
    /// The record's other two relocations (target, probe symbol), neutralised with the site's.
    pub relas: [(usize, usize); 2],
}

/// A relocation against a probe symbol that was left alone, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotASite {
    /// Where it is.
    pub at: Location,
    /// Why it is not a site.
    pub why: &'static str,
    /// Whether the program can reach the symbol through it (a reference in loaded code or data,
    /// not in debug information): such a reference would keep a disabled probe live, and fails
    /// the link.
    pub live: bool,
}

/// What rewriting found in one object, whether or not it has sites.
#[derive(Debug, Default)]
pub struct Found<'d> {
    /// The sites, in section and offset order.
    pub sites: Vec<SiteInfo<'d>>,
    /// Probe symbols referenced (undefined) by the object; the stub object must define them.
    pub referenced: Vec<ProbeSymbol<'d>>,
    /// Probe symbols the object defines (no stub is generated for them).
    pub defined: Vec<&'d [u8]>,
    /// Relocations against probe symbols left alone, and why.
    pub not_sites: Vec<NotASite>,
    /// Number of relocation entries in the object.
    pub relocations: usize,
    /// Whether the object calls the runtime's API (an undefined `bootprof_*` symbol).
    pub uses_runtime: bool,
    /// Whether the object calls the unwinder's `_Unwind_Backtrace` (an undefined reference).
    pub walks_stacks: bool,
}
