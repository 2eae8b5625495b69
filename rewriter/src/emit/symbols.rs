//! The section symbols the table fragments relocate against: takes the object and its text
//! sections with sites; finds each one's local `STT_SECTION` symbol or plans a new one, inserted
//! after the existing locals (so every symbol index from the first global on moves up), and
//! writes the new symbol table and extended section index table.

use super::{Contents, Out};
use crate::elf::{Object, Sym64, LE};
use crate::error::{Error, Location, Result};
use object::elf;
use object::read::SectionIndex;
use object::{U16, U32};
use std::collections::{BTreeMap, HashMap};

/// The section symbol of every text section with sites, and how old symbol indices map to new.
pub(super) struct SectionSymbols {
    /// Index of the first global symbol in the input.
    first_global: usize,
    /// Text sections without a section symbol: each gets one, in this order, at
    /// `first_global + i`.
    missing: Vec<usize>,
    /// Text section -> its section symbol's index in the output.
    of: HashMap<usize, usize>,
}

impl SectionSymbols {
    /// The output index of input symbol `i`.
    pub(super) fn remap(&self, i: usize) -> usize {
        if i >= self.first_global {
            i + self.missing.len()
        } else {
            i
        }
    }

    /// Whether symbols were added (and so every index from the first global moved).
    pub(super) fn renumbered(&self) -> bool {
        !self.missing.is_empty()
    }

    /// The output index of text section `sec`'s section symbol.
    pub(super) fn of(&self, sec: usize) -> usize {
        self.of[&sec]
    }
}

/// Checks the symbol table's `sh_info` (the first global) and the extended section index
/// table's size; returns the first global's index.
pub(super) fn check(obj: &Object<'_>, out: &Out<'_>) -> Result<usize> {
    let nsyms = obj.symbols.len();
    let first_global = out.sections[out.symtab].sh_info() as usize;
    if first_global == 0 || first_global > nsyms {
        return Err(Error::malformed(
            named(obj, ".symtab"),
            format!("sh_info {first_global} is not a symbol index in 1..={nsyms}"),
        ));
    }
    let shndx = obj.symbols.shndx_section().0;
    if shndx != 0 && out.sections[shndx].data.bytes().len() != nsyms * 4 {
        return Err(Error::malformed(
            named(obj, ".symtab_shndx"),
            format!(
                "has {} bytes for {nsyms} symbols",
                out.sections[shndx].data.bytes().len()
            ),
        ));
    }
    Ok(first_global)
}

/// Finds or plans the section symbol of each key of `by_section`.
pub(super) fn section_symbols<T>(
    obj: &Object<'_>,
    by_section: &BTreeMap<usize, T>,
    first_global: usize,
) -> SectionSymbols {
    let mut of: HashMap<usize, usize> = HashMap::new();
    for (index, sym) in obj.symbols.enumerate() {
        if sym.st_type() == elf::STT_SECTION && sym.st_bind() == elf::STB_LOCAL {
            if let Ok(Some(SectionIndex(sec))) = obj.symbols.symbol_section(LE, sym, index) {
                if by_section.contains_key(&sec) {
                    of.entry(sec).or_insert(index.0);
                }
            }
        }
    }
    let missing: Vec<usize> = by_section
        .keys()
        .copied()
        .filter(|s| !of.contains_key(s))
        .collect();
    for (j, &sec) in missing.iter().enumerate() {
        of.insert(sec, first_global + j);
    }
    SectionSymbols {
        first_global,
        missing,
        of,
    }
}

/// Writes the new section symbols into the symbol table (after the existing locals, raising
/// `sh_info`) and into the extended section index table, when any are missing.
pub(super) fn insert(obj: &Object<'_>, out: &mut Out<'_>, syms: &SectionSymbols) {
    if !syms.renumbered() {
        return;
    }
    let (first_global, k) = (syms.first_global, syms.missing.len());
    let symtab = &mut out.sections[out.symtab];
    let old: Vec<Sym64> = super::table(symtab.data.bytes());
    let mut new = Vec::with_capacity(old.len() + k);
    new.extend_from_slice(&old[..first_global]);
    for &sec in &syms.missing {
        let shndx = if sec >= elf::SHN_LORESERVE as usize {
            elf::SHN_XINDEX
        } else {
            elf::SymbolSection(sec as u16)
        };
        let mut sym = Sym64 {
            st_shndx: U16::new(LE, shndx),
            ..Sym64::default()
        };
        sym.set_st_info(elf::STB_LOCAL, elf::STT_SECTION);
        new.push(sym);
    }
    new.extend_from_slice(&old[first_global..]);
    symtab.set(Contents::Syms(new));
    let info = symtab.sh_info() + k as u32;
    symtab.header.sh_info.set(LE, info);

    let shndx = obj.symbols.shndx_section().0;
    if shndx != 0 {
        let old: Vec<U32<LE>> = super::table(out.sections[shndx].data.bytes());
        let mut table = Vec::with_capacity(old.len() + k);
        table.extend_from_slice(&old[..first_global]);
        for &sec in &syms.missing {
            let v = if sec >= elf::SHN_LORESERVE as usize {
                sec as u32
            } else {
                0
            };
            table.push(U32::new(LE, v));
        }
        table.extend_from_slice(&old[first_global..]);
        out.sections[shndx].set(Contents::Words(table));
    }
}

/// The object's section `name` (for tables found by type, whatever their name).
fn named(obj: &Object<'_>, name: &str) -> Location {
    Location {
        section: Some(name.into()),
        ..obj.at(None)
    }
}
