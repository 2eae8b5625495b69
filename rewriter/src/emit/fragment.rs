//! The site table's fragments: takes the output sections, the sites of each text section, the
//! section symbols and the thunks; appends, per text section with sites, a `bootprof_sites`
//! fragment (`SHF_LINK_ORDER` to its text section, in the section's COMDAT group if it has one)
//! and its `.rela` section, and their names to the section name table.
//!
//! A fragment is laid out by `bootprof_format` (version 4: header, target block, compact
//! entries, name pool); its addresses are relocations, as few as the final link can be given:
//! the text section's start (against its section symbol; each entry holds its site's offset
//! from it) and each distinct target once (the probe symbol's stub, shared by all its call
//! sites; a tail site's thunk; a guard's out-of-line code).

use super::symbols::SectionSymbols;
use super::text::Thunks;
use super::{Contents, Out, OutSection};
use crate::elf::{Rela64, SectionHeader64, LE};
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::site::SiteInfo;
use bootprof_format::{
    self as format, compact, field, Kind, Layout, COMPACT_ENTRY_SIZE, HEADER_SIZE, TARGETS_AT,
    TEXT_FIELD,
};
use object::elf;
use object::{I64, U32, U64};
use std::collections::{BTreeMap, HashMap};

/// Appends a fragment and its relocation section for each key of `by_section`.
pub(super) fn add_fragments(
    out: &mut Out<'_>,
    by_section: &BTreeMap<usize, Vec<&SiteInfo<'_>>>,
    syms: &SectionSymbols,
    thunks: &Thunks,
) -> Result<()> {
    let (frag_name, rela_name) = add_names(out);
    let group_of = groups_of(out, by_section);
    for (&sec, list) in by_section {
        let frag_index = out.sections.len();
        let text_symbol = syms.of(sec);
        // A call site's target is its stub (the probe symbol); a guard's, its out-of-line code;
        // a tail site's, its thunk.
        let thunks = thunks.get(&sec).map_or(&[][..], Vec::as_slice);
        // The sites come in offset order, as the thunks do: one walk over both.
        let mut next_thunk = 0;
        let mut thunk_of = |offset: u64| {
            while thunks.get(next_thunk).is_some_and(|t| t.0 < offset) {
                next_thunk += 1;
            }
            let t = thunks.get(next_thunk).filter(|t| t.0 == offset)?;
            Some(t.1)
        };
        let (bytes, relas) = fragment(list, text_symbol, |s| {
            match (&s.guard, thunk_of(s.offset)) {
                (Some(g), _) => (syms.remap(g.symbol), g.addend),
                (None, Some(at)) => (text_symbol, at as i64),
                (None, None) => (syms.remap(s.symbol_index), 0),
            }
        })
        .map_err(|offset| Error::Unsupported {
            at: crate::error::Location {
                section: Some(list[0].section_name.to_string()),
                offset: Some(offset),
                ..crate::error::Location::file(out.file.clone())
            },
            what: "a site more than 4 GiB into its section".into(),
        })?;
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
    Ok(())
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

/// The pool of a fragment's names, written after its entries: each probe, provider and function
/// name once (its offset in the pool by its bytes). Kept apart from the entries while they are
/// written, and appended after them: the entries need no zeroed room made first.
#[derive(Default)]
struct Pool<'a> {
    bytes: Vec<u8>,
    at: FxHashMap<&'a [u8], usize>,
    /// Where a compact slot's name is, by the symbol its sites call.
    named: FxHashMap<&'a [u8], usize>,
}

impl<'a> Pool<'a> {
    /// The offset of `name` in the pool, appended when it is not there yet.
    fn intern(&mut self, name: &'a [u8]) -> usize {
        let bytes = &mut self.bytes;
        *self.at.entry(name).or_insert_with(|| append(bytes, name))
    }

    /// Where the names of `function` are in the pool: its own, and for a wide entry its
    /// demangled name's (a compact entry finds that after the function's own, empty for a name
    /// that is not mangled). `last` is the function of the run of sites before, whose names
    /// are where they were.
    fn function(
        &mut self,
        function: &'a [u8],
        layout: Layout,
        last: &mut Option<LastFunction<'a>>,
    ) -> (usize, Option<usize>) {
        if let Some((_, at, demangled)) = last.filter(|l| same_place(l.0, function)) {
            return (at, demangled);
        }
        // Not interned: no other run of sites has this function.
        let at = append(&mut self.bytes, function);
        let demangled = demangled(function);
        let demangled = match layout {
            Layout::Wide => demangled.map(|d| append(&mut self.bytes, d.as_bytes())),
            Layout::Compact => {
                let d = demangled.as_deref().unwrap_or_default();
                append(&mut self.bytes, d.as_bytes());
                None
            }
        };
        *last = Some((function, at, demangled));
        (at, demangled)
    }

    /// The offset in the pool of the name of what calls to `symbol` call, appended when it is
    /// not there yet: a probe's provider and name, one after the other, or the hook's name.
    fn intern_named(&mut self, symbol: &'a [u8]) -> usize {
        let bytes = &mut self.bytes;
        *self
            .named
            .entry(symbol)
            .or_insert_with(|| match called_names(symbol) {
                (Some(provider), name) => {
                    let at = append(bytes, provider);
                    append(bytes, name);
                    at
                }
                (None, name) => append(bytes, name),
            })
    }
}

/// Appends `name` and its NUL to `bytes`; returns where it starts.
fn append(bytes: &mut Vec<u8>, name: &[u8]) -> usize {
    let at = bytes.len();
    bytes.extend_from_slice(name);
    bytes.push(0);
    at
}

/// The slot of each site's target (`target_of` gives its symbol and addend), and the distinct
/// targets in slot order. A function's sites are adjacent and mostly call one symbol: the last
/// target is checked before the map.
fn target_slots(
    list: &[&SiteInfo<'_>],
    mut target_of: impl FnMut(&SiteInfo<'_>) -> (usize, i64),
) -> (Vec<u32>, Vec<(usize, i64)>) {
    let mut targets: Vec<(usize, i64)> = Vec::new();
    // Sized once for the most it can hold, one target a site (growing it rehashes each time).
    let mut slot_of: FxHashMap<(usize, i64), u32> =
        FxHashMap::with_capacity_and_hasher(list.len(), Default::default());
    // The last two targets: a function's entry and exit hooks take turns.
    let mut recent: [Option<((usize, i64), u32)>; 2] = [None; 2];
    let mut slots = Vec::with_capacity(list.len());
    for s in list {
        let target = target_of(s);
        let slot = match recent.iter().flatten().find(|&&(t, _)| t == target) {
            Some(&(_, slot)) => slot,
            None => {
                let slot = *slot_of.entry(target).or_insert_with(|| {
                    targets.push(target);
                    targets.len() as u32 - 1
                });
                recent = [Some((target, slot)), recent[0]];
                slot
            }
        };
        slots.push(slot);
    }
    (slots, targets)
}

/// The version of the tables written: [`format::VERSION`], or [`format::VERSION_3`] (wide
/// entries) when `BOOTPROF_LINK_TABLE_VERSION` says 3, so that tests can make the tables
/// bootprof-link wrote before and check that they are still read.
fn table_version() -> u16 {
    static VERSION: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *VERSION.get_or_init(
        || match std::env::var("BOOTPROF_LINK_TABLE_VERSION").as_deref() {
            Ok("3") => format::VERSION_3,
            _ => format::VERSION,
        },
    )
}

/// Builds one fragment of [`table_version`] (of version 3 when a site is too far into its
/// function for a compact entry's 16-bit offset): header, target block and slots, entries, name
/// pool; and its relocations: the text section's start (`text_symbol`), and each distinct
/// target once.
fn fragment(
    list: &[&SiteInfo<'_>],
    text_symbol: usize,
    target_of: impl FnMut(&SiteInfo<'_>) -> (usize, i64),
) -> Result<(Vec<u8>, Vec<Rela64>), u64> {
    let (slots, targets) = target_slots(list, target_of);
    let far = || list.iter().any(|s| s.func_offset > u64::from(u16::MAX));
    let version = match table_version() {
        format::VERSION if far() => format::VERSION_3,
        v => v,
    };
    let layout = Layout::of_version(version);
    let (entry_size, slot_size) = (layout.entry_size(), layout.slot_size());
    let entries_at = layout.entries_at(targets.len() as u32);
    let entries_end = entries_at + list.len() * entry_size;
    let mut bytes = Vec::with_capacity(entries_end + list.len() * 24);
    bytes.resize(entries_at, 0);
    bytes[TEXT_FIELD + 4..TEXT_FIELD + 8].copy_from_slice(&(targets.len() as u32).to_le_bytes());
    let mut relas = Vec::with_capacity(1 + targets.len());
    relas.push(pc32(TEXT_FIELD, text_symbol, 0));
    for (i, &(symbol, addend)) in targets.iter().enumerate() {
        relas.push(pc32(TARGETS_AT + slot_size * i, symbol, addend));
    }
    // The map sized for one interned name a site, so that it is never rehashed as it grows:
    // about what a fragment of probes needs (their providers are few), more than one of hooks.
    let mut pool = Pool {
        bytes: Vec::with_capacity(list.len() * 24),
        at: FxHashMap::with_capacity_and_hasher(list.len(), Default::default()),
        named: FxHashMap::default(),
    };
    // Names are stored PC-relative, as the distance from the field (at `field_at` in the
    // fragment) to the string (the pool follows the entries).
    let to_pool = |field_at: usize, in_pool: usize| {
        (((entries_end + in_pool) as i64 - field_at as i64) as i32).to_le_bytes()
    };
    // A compact entry's names are its slot's: each slot is named by the first site calling it.
    let mut named = vec![false; targets.len()];
    // A function's sites are adjacent (sorted by offset): its names are written (and demangled)
    // once, and a probe's are looked up once per run of its sites. A run is told by its name's
    // place in the object's string table, where its symbol's name is (two symbols of one name
    // only write it twice), not by comparing the names.
    let mut last_function: Option<LastFunction<'_>> = None;
    // The last two symbols: a function's entry and exit hooks take turns.
    let mut recent_symbols: [Option<Named<'_>>; 2] = [None; 2];
    for (i, (s, &slot)) in list.iter().zip(&slots).enumerate() {
        let e = entries_at + i * entry_size;
        let offset = u32::try_from(s.offset).map_err(|_| s.offset)?;
        let mut entry = [0u8; format::ENTRY_SIZE];
        let set = |entry: &mut [u8; format::ENTRY_SIZE], field: usize, in_pool: usize| {
            entry[field..field + 4].copy_from_slice(&to_pool(e + field, in_pool));
        };
        let function_field = match layout {
            Layout::Wide => {
                let func_offset = u32::try_from(s.func_offset).unwrap_or(u32::MAX);
                let orig = &s.orig[..s.form.len()];
                entry = format::encode_entry(s.kind, s.form, func_offset, orig);
                entry[field::SITE..field::SITE + 4].copy_from_slice(&offset.to_le_bytes());
                entry[field::TARGET..field::TARGET + 4].copy_from_slice(&slot.to_le_bytes());
                let recent = recent_symbols.iter().flatten();
                let (provider, name) = match recent.copied().find(|l| same_place(l.0, s.symbol)) {
                    Some((_, provider, name)) => (provider, name),
                    None => {
                        let (provider, name) = called_names(s.symbol);
                        let provider = provider.map(|p| pool.intern(p));
                        let name = pool.intern(name);
                        recent_symbols = [Some((s.symbol, provider, name)), recent_symbols[0]];
                        (provider, name)
                    }
                };
                if let Some(p) = provider {
                    set(&mut entry, field::PROVIDER, p);
                }
                set(&mut entry, field::NAME, name);
                field::FUNCTION
            }
            Layout::Compact => {
                // Fits: a fragment with a site further into its function is wide.
                let func_offset = s.func_offset as u16;
                let compact = format::encode_compact_entry(s.kind, s.form, func_offset);
                entry[..COMPACT_ENTRY_SIZE].copy_from_slice(&compact);
                entry[compact::SITE..compact::SITE + 4].copy_from_slice(&offset.to_le_bytes());
                let slot_at = TARGETS_AT + slot_size * slot as usize;
                let distance = (slot_at as i64 - (e + compact::SLOT) as i64) as i32;
                entry[compact::SLOT..compact::SLOT + 4].copy_from_slice(&distance.to_le_bytes());
                if !std::mem::replace(&mut named[slot as usize], true) {
                    let name = pool.intern_named(s.symbol);
                    bytes[slot_at + 4..slot_at + 8].copy_from_slice(&to_pool(slot_at + 4, name));
                }
                compact::FUNCTION
            }
        };
        if !s.function.is_empty() {
            let (function, demangled) = pool.function(s.function, layout, &mut last_function);
            set(&mut entry, function_field, function);
            if let Some(d) = demangled {
                set(&mut entry, field::DEMANGLED, d);
            }
        }
        bytes.extend_from_slice(&entry[..entry_size]);
    }
    bytes.extend_from_slice(&pool.bytes);
    bytes.resize(bytes.len().next_multiple_of(8), 0);
    let size = bytes.len() as u32;
    let header = format::encode_header(version, list.len() as u32, size);
    bytes[..HEADER_SIZE].copy_from_slice(&header);
    Ok((bytes, relas))
}

/// The names of what calls to `symbol` call: a probe's provider and name, or a hook's name.
fn called_names(symbol: &[u8]) -> (Option<&[u8]>, &[u8]) {
    match Kind::classify(symbol) {
        Some((kind, provider, name)) if !kind.is_hook() => (Some(provider), name),
        _ => (None, symbol),
    }
}

/// A function's symbol (its bytes in the input), and where its name and (wide) its demangled
/// name are in the pool.
type LastFunction<'a> = (&'a [u8], usize, Option<usize>);

/// A site's symbol (its bytes in the input), and where its provider (if a probe) and name are
/// in the pool.
type Named<'a> = (&'a [u8], Option<usize>, usize);

/// Whether `a` and `b` are the same bytes of the input (not only equal ones).
fn same_place(a: &[u8], b: &[u8]) -> bool {
    std::ptr::eq(a, b)
}

/// The demangled name of the function `symbol` (C++ or Rust; `None` for a C name, told by its
/// first bytes without reading it as text).
fn demangled(symbol: &[u8]) -> Option<String> {
    if !format::demangle::may_be_mangled(symbol) {
        return None;
    }
    format::demangle::demangle(std::str::from_utf8(symbol).ok()?)
}
