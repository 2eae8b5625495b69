//! The site table's fragments: takes the output sections, the sites of each text section, the
//! section symbols and the thunks; appends, per text section with sites, a `bootprof_sites`
//! fragment (`SHF_LINK_ORDER` to its text section, in the section's COMDAT group if it has one)
//! and its `.rela` section, and their names to the section name table.
//!
//! A fragment is laid out by `bootprof_format` (header, entries, name pool); every address in it
//! is a relocation: the site (against its text section's symbol) and the target (the probe
//! symbol's stub, the site's thunk, or a guard's out-of-line code).

use super::symbols::SectionSymbols;
use super::text::Thunks;
use super::{Contents, Out, OutSection};
use crate::elf::{Rela64, SectionHeader64, LE};
use crate::site::SiteInfo;
use bootprof_format::{self as format, field, Kind, ENTRY_SIZE, HEADER_SIZE};
use object::elf;
use object::{I64, U32, U64};
use std::collections::{BTreeMap, HashMap};

/// Appends a fragment and its relocation section for each key of `by_section`.
pub(super) fn add_fragments(
    out: &mut Out<'_>,
    by_section: &BTreeMap<usize, Vec<&SiteInfo>>,
    syms: &SectionSymbols,
    thunks: &Thunks,
) {
    let (frag_name, rela_name) = add_names(out);
    let group_of = groups_of(out, by_section);
    for (&sec, list) in by_section {
        let frag_index = out.sections.len();
        let text_symbol = syms.of(sec);
        // A call site's target is its stub (the probe symbol); a guard's, its out-of-line code;
        // a tail site's, its thunk.
        let (bytes, relas) = fragment(list, text_symbol, |s| {
            match (&s.guard, thunks.get(&(sec, s.offset))) {
                (Some(g), _) => (syms.remap(g.symbol), g.addend),
                (None, Some(&at)) => (text_symbol, at as i64),
                (None, None) => (syms.remap(s.symbol_index), 0),
            }
        });
        let group_flag = if group_of.contains_key(&sec) {
            elf::SHF_GROUP.0
        } else {
            0
        };
        let mut fragment = OutSection {
            header: section_header(
                frag_name,
                elf::SHT_PROGBITS,
                elf::SHF_ALLOC.0 | elf::SHF_LINK_ORDER.0 | group_flag,
                (sec as u32, 0),
                0,
            ),
            data: Contents::None,
        };
        fragment.set(Contents::Bytes(bytes));
        out.sections.push(fragment);
        let mut rela = OutSection {
            header: section_header(
                rela_name,
                elf::SHT_RELA,
                elf::SHF_INFO_LINK.0 | group_flag,
                (out.symtab as u32, frag_index as u32),
                std::mem::size_of::<Rela64>() as u64,
            ),
            data: Contents::None,
        };
        rela.set(Contents::Relas(relas));
        out.sections.push(rela);
        if let Some(&g) = group_of.get(&sec) {
            let mut members: Vec<U32<LE>> = super::table(out.sections[g].data.bytes());
            members.push(U32::new(LE, frag_index as u32));
            members.push(U32::new(LE, frag_index as u32 + 1));
            out.sections[g].set(Contents::Words(members));
        }
    }
}

/// Appends the names of the new sections to the section name table; returns their offsets.
/// (When the symbol string table is this same section, LLVM's habit, appending keeps every old
/// offset valid.)
fn add_names(out: &mut Out<'_>) -> (u32, u32) {
    let mut names = out.sections[out.shstrndx].data.bytes().to_vec();
    let frag_name = names.len() as u32;
    names.extend_from_slice(format::SECTION_NAME.as_bytes());
    names.push(0);
    let rela_name = names.len() as u32;
    names.extend_from_slice(b".rela");
    names.extend_from_slice(format::SECTION_NAME.as_bytes());
    names.push(0);
    out.sections[out.shstrndx].set(Contents::Bytes(names));
    (frag_name, rela_name)
}

/// The group each text section of `by_section` belongs to, if any.
fn groups_of<T>(out: &Out<'_>, by_section: &BTreeMap<usize, T>) -> HashMap<usize, usize> {
    let mut group_of = HashMap::new();
    for (g, sec) in out.sections.iter().enumerate() {
        if sec.sh_type() == elf::SHT_GROUP.0 {
            let words: Vec<U32<LE>> = super::table(sec.data.bytes());
            for m in words.iter().skip(1) {
                let m = m.get(LE) as usize;
                if by_section.contains_key(&m) {
                    group_of.insert(m, g);
                }
            }
        }
    }
    group_of
}

/// A header for a new section, 8-aligned; its size is set with its contents.
fn section_header(
    name: u32,
    sh_type: elf::SectionType,
    flags: u64,
    (link, info): (u32, u32),
    entsize: u64,
) -> SectionHeader64 {
    SectionHeader64 {
        sh_name: U32::new(LE, name),
        sh_type: U32::new(LE, sh_type),
        sh_flags: U64::new(LE, elf::SectionFlags(flags)),
        sh_addr: U64::new(LE, 0),
        sh_offset: U64::new(LE, 0),
        sh_size: U64::new(LE, 0),
        sh_link: U32::new(LE, link),
        sh_info: U32::new(LE, info),
        sh_addralign: U64::new(LE, 8),
        sh_entsize: U64::new(LE, entsize),
    }
}

/// A relocation `R_X86_64_PC32` at `offset` against symbol `sym` with `addend`.
fn pc32(offset: usize, sym: usize, addend: i64) -> Rela64 {
    let mut r = Rela64 {
        r_offset: U64::new(LE, offset as u64),
        r_info: U64::new(LE, 0),
        r_addend: I64::new(LE, addend),
    };
    r.set_r_info(LE, false, sym as u32, elf::R_X86_64_PC32);
    r
}

/// Builds one fragment: header, entries, name pool; and its relocations (site, and target: the
/// symbol and addend `target_of` gives).
fn fragment(
    list: &[&SiteInfo],
    text_symbol: usize,
    target_of: impl Fn(&SiteInfo) -> (usize, i64),
) -> (Vec<u8>, Vec<Rela64>) {
    let entries_end = HEADER_SIZE + list.len() * ENTRY_SIZE;
    let mut pool: Vec<u8> = Vec::new();
    let mut pool_index: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut intern = |s: &[u8]| -> usize {
        if let Some(&at) = pool_index.get(s) {
            return at;
        }
        let at = entries_end + pool.len();
        pool.extend_from_slice(s);
        pool.push(0);
        pool_index.insert(s.to_vec(), at);
        at
    };
    let mut bytes = vec![0u8; entries_end];
    let mut relas = Vec::with_capacity(list.len() * 2);
    let mut names_of = HashMap::new();
    for (i, s) in list.iter().enumerate() {
        let e = HEADER_SIZE + i * ENTRY_SIZE;
        let func_offset = u32::try_from(s.func_offset).unwrap_or(u32::MAX);
        let entry = format::encode_entry(s.kind, s.form, func_offset, &s.orig[..s.form.len()]);
        bytes[e..e + ENTRY_SIZE].copy_from_slice(&entry);
        let (provider, name) = match Kind::classify(&s.symbol) {
            Some((kind, provider, name)) if !kind.is_hook() => (Some(provider), name),
            _ => (None, &s.symbol[..]),
        };
        // Names are stored PC-relative, as the distance from the field to the string.
        let mut set = |field: usize, target: usize| {
            let v = (target as i64 - (e + field) as i64) as i32;
            bytes[e + field..e + field + 4].copy_from_slice(&v.to_le_bytes());
        };
        if let Some(p) = provider {
            set(field::PROVIDER, intern(p));
        }
        set(field::NAME, intern(name));
        if !s.function.is_empty() {
            set(field::FUNCTION, intern(&s.function));
            if let Some(d) = demangled(&mut names_of, &s.function) {
                set(field::DEMANGLED, intern(d.as_bytes()));
            }
        }
        relas.push(pc32(e + field::SITE, text_symbol, s.offset as i64));
        let (target, addend) = target_of(s);
        relas.push(pc32(e + field::TARGET, target, addend));
    }
    bytes.extend_from_slice(&pool);
    while bytes.len() % 8 != 0 {
        bytes.push(0);
    }
    let size = bytes.len() as u32;
    bytes[..HEADER_SIZE].copy_from_slice(&format::encode_header(list.len() as u32, size));
    (bytes, relas)
}

/// The demangled name of the function `symbol` (C++ or Rust; `None` for a C name), demangled
/// once per fragment: a function's sites share one fragment.
fn demangled<'c>(
    cache: &'c mut HashMap<Vec<u8>, Option<String>>,
    symbol: &[u8],
) -> Option<&'c str> {
    cache
        .entry(symbol.to_vec())
        .or_insert_with(|| {
            let symbol = std::str::from_utf8(symbol).ok()?;
            format::demangle::demangle(symbol)
        })
        .as_deref()
}
