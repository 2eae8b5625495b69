//! Emit: writes the rewritten object for a [`Plan`](crate::patch::Plan) with sites.
//!
//! Takes the parsed object and its verified sites; hands on the bytes of a new relocatable object
//! in which
//! - each site holds its NOP form and its relocation is gone, as are its guard record's
//!   (`text`, `relocs`);
//! - each tail site jumping to a stub has a thunk at the end of its text section, which its table
//!   entry targets (the site's identity in call mode) (`text`);
//! - each text section with sites has a `bootprof_sites` fragment (`SHF_LINK_ORDER` to that text
//!   section, and in its COMDAT group if it has one) with a `.rela` section giving each entry the
//!   site's address and its stub's address (`fragment`);
//! - a local `STT_SECTION` symbol exists for each such text section (inserted after the existing
//!   locals when missing, `symbols`; every user of symbol indices is renumbered, `relocs`:
//!   relocations, group signatures, `.llvm_addrsig`, the call-graph profile and the extended
//!   section index table).
//!
//! Original sections keep their indices; new sections go at the end (`layout`). Every header,
//! symbol and relocation is an `object::elf` structure; contents stay borrowed from the input
//! until a phase changes them.

mod fragment;
mod layout;

pub use layout::Emitted;
mod relocs;
mod symbols;
mod text;

use crate::elf::{Object, Rel64, Rela64, SectionHeader64, Sym64, LE};
use crate::error::{Error, Result};
use crate::site::SiteInfo;
use object::elf;
use object::pod::{bytes_of_slice, Pod};
use object::read::elf::{FileHeader, SectionHeader};
use object::U32;
use std::collections::BTreeMap;

/// A section of the output: its header and its contents.
struct OutSection<'d> {
    header: SectionHeader64,
    data: Contents<'d>,
}

/// A section's contents: as read, or rewritten (typed where they are a table).
enum Contents<'d> {
    /// No file contents (`SHT_NULL`, `SHT_NOBITS`).
    None,
    Borrowed(&'d [u8]),
    Bytes(Vec<u8>),
    Syms(Vec<Sym64>),
    Relas(Vec<Rela64>),
    Rels(Vec<Rel64>),
    Words(Vec<U32<LE>>),
}

impl Contents<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Contents::None => &[],
            Contents::Borrowed(b) => b,
            Contents::Bytes(v) => v,
            Contents::Syms(v) => bytes_of_slice(v),
            Contents::Relas(v) => bytes_of_slice(v),
            Contents::Rels(v) => bytes_of_slice(v),
            Contents::Words(v) => bytes_of_slice(v),
        }
    }
}

/// The entries of a table section, copied out of its bytes (a trailing partial entry is
/// ignored, as a reader of the table would).
fn table<T: Pod>(bytes: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    let whole = bytes.len() - bytes.len() % size;
    object::pod::slice_from_all_bytes::<T>(&bytes[..whole])
        .expect("object's ELF types are unaligned")
        .to_vec()
}

impl<'d> OutSection<'d> {
    fn sh_type(&self) -> u32 {
        self.header.sh_type.get(LE).0
    }
    fn sh_link(&self) -> u32 {
        self.header.sh_link.get(LE)
    }
    fn sh_info(&self) -> u32 {
        self.header.sh_info.get(LE)
    }
    fn sh_entsize(&self) -> u64 {
        self.header.sh_entsize.get(LE)
    }
    /// Replaces the contents and sets `sh_size` to their length.
    fn set(&mut self, data: Contents<'d>) {
        self.data = data;
        let size = self.data.bytes().len() as u64;
        self.header.sh_size.set(LE, size);
    }
}

/// The object being written: its sections, and the indices every step needs.
struct Out<'d> {
    file: String,
    sections: Vec<OutSection<'d>>,
    symtab: usize,
    shstrndx: usize,
}

/// Writes the rewritten object. `sites` are sorted by section then offset.
pub fn emit<'d>(obj: &Object<'d>, sites: &[SiteInfo<'_>]) -> Result<Emitted<'d>> {
    let mut out = copy_sections(obj)?;
    // The sites come sorted by section: one map entry per run of them, not a lookup per site.
    let mut by_section: BTreeMap<usize, Vec<&SiteInfo<'_>>> = BTreeMap::new();
    for run in sites.chunk_by(|a, b| a.section == b.section) {
        by_section
            .entry(run[0].section)
            .or_default()
            .extend(run.iter());
    }
    let first_global = symbols::check(obj, &out)?;
    check_name_table(&out, obj)?;
    let syms = symbols::section_symbols(obj, &by_section, first_global);
    let total = out.sections.len() + 2 * by_section.len();
    if total >= elf::SHN_LORESERVE as usize && obj.symbols.shndx_section().0 == 0 {
        return Err(Error::Unsupported {
            at: obj.at(None),
            what: format!(
                "{total} sections need an extended section index table, which this object lacks"
            ),
        });
    }
    symbols::insert(obj, &mut out, &syms);
    relocs::renumber(&mut out, sites, &syms)?;
    let thunks = text::patch_sites(obj, &mut out, &by_section, &syms)?;
    fragment::add_fragments(&mut out, &by_section, &syms, &thunks)?;
    Ok(layout::write(obj.data, out.sections, out.shstrndx))
}

/// Copies every section header of `obj` and borrows its contents.
fn copy_sections<'d>(obj: &Object<'d>) -> Result<Out<'d>> {
    let symtab = obj.symbols.section().0;
    let shstrndx = obj
        .header
        .shstrndx(LE, obj.data)
        .map_err(|e| Error::malformed(obj.at(None), e))? as usize;
    let mut sections = Vec::with_capacity(obj.sections.len() + 2);
    for (index, section) in obj.sections.enumerate() {
        let data = if index.0 == 0 || section.sh_type(LE) == elf::SHT_NOBITS {
            Contents::None
        } else {
            Contents::Borrowed(
                section
                    .data(LE, obj.data)
                    .map_err(|e| Error::malformed(obj.at(Some(index.0)), e))?,
            )
        };
        sections.push(OutSection {
            header: *section,
            data,
        });
    }
    Ok(Out {
        file: obj.file.clone(),
        sections,
        symtab,
        shstrndx,
    })
}

/// The names of the new sections are appended to the section name table: it must be a string
/// table of its own.
fn check_name_table(out: &Out<'_>, obj: &Object<'_>) -> Result<()> {
    let (n, i) = (out.sections.len(), out.shstrndx);
    if i == 0 || i >= n || i == out.symtab || out.sections[i].sh_type() != elf::SHT_STRTAB.0 {
        return Err(Error::malformed(
            obj.at(None),
            format!("section name table index {i} is not a string table"),
        ));
    }
    Ok(())
}
