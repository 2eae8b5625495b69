//! Scan: reads one relocatable x86-64 ELF object and finds the relocations against probe
//! symbols.
//!
//! Takes the object's bytes; hands on [`Scanned`]: the parsed object, the probe symbols it
//! references or defines (for the stub generator), the candidate sites (relocations against
//! probe symbols in executable sections), the relocations of its `.bootprof_guard` records, and
//! the references that cannot be sites (in data). Nothing is decoded or written here: `patch`
//! verifies the candidates.

use crate::elf::{Object, Rela64, SectionHeader64, LE};
use crate::error::{Error, Location, Result};
use crate::site::{NotASite, ProbeSymbol};
use bootprof_format::{Kind, GUARD_SECTION};
use object::elf;
use object::read::elf::{Rela, SectionHeader, Sym};
use object::read::SectionIndex;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

/// Size of one `Elf64_Rela`.
const RELA_SIZE: u64 = std::mem::size_of::<crate::elf::Rela64>() as u64;
/// Size of one `Elf64_Sym`.
const SYM_SIZE: u64 = std::mem::size_of::<crate::elf::Sym64>() as u64;
/// `class` of a symbol that is not a probe symbol.
const NOT_A_PROBE: u32 = u32::MAX;

/// A relocation against a probe symbol in an executable section: a site if `patch` finds a call
/// or jump under it.
pub(crate) struct Candidate {
    /// The relocation section's index and the entry's index in it.
    pub rela: (usize, usize),
    pub r_offset: u64,
    pub r_type: elf::RelocationType,
    pub addend: i64,
    /// Index into [`Scanned::probes`].
    pub probe: u32,
    /// The probe symbol's index in the symbol table.
    pub symbol_index: usize,
}

/// One relocation of a guard section.
pub(crate) struct GuardReloc {
    /// The guard section's index.
    pub section: usize,
    /// The relocation section's index and the entry's index in it.
    pub rela: (usize, usize),
    pub r_offset: u64,
    pub r_type: elf::RelocationType,
    pub sym: usize,
    pub addend: i64,
}

/// What [`scan`] found in one object.
#[derive(Debug)]
pub struct Scanned<'d> {
    /// The parsed object.
    pub object: Object<'d>,
    /// Probe symbols referenced (undefined) by the object.
    pub referenced: Vec<ProbeSymbol<'d>>,
    /// Probe symbols the object defines (no stub is generated for them).
    pub defined: Vec<&'d [u8]>,
    /// Relocations against probe symbols that cannot be sites (outside executable sections).
    pub not_sites: Vec<NotASite>,
    /// Number of relocation entries in the object.
    pub relocations: usize,
    /// Whether the object calls the runtime's API (an undefined `bootprof_*` symbol).
    pub uses_runtime: bool,
    /// Whether the object calls `_Unwind_Backtrace` (an undefined reference).
    pub walks_stacks: bool,
    /// Every probe symbol of the symbol table, referenced or defined.
    pub(crate) probes: Vec<ProbeSymbol<'d>>,
    /// For each symbol index, its index in `probes`, or [`NOT_A_PROBE`].
    class: Vec<u32>,
    /// Candidate sites by text section, in relocation order.
    pub(crate) candidates: BTreeMap<usize, Vec<Candidate>>,
    /// The relocations of the guard sections, and each guard section's size.
    pub(crate) guard_relocs: Vec<GuardReloc>,
    pub(crate) guard_sizes: BTreeMap<usize, u64>,
}

impl std::fmt::Debug for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Candidate({:?}@{:#x})", self.rela, self.r_offset)
    }
}

impl std::fmt::Debug for GuardReloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GuardReloc({:?}@{:#x})", self.rela, self.r_offset)
    }
}

impl<'d> Scanned<'d> {
    /// The kind and name of the probe symbol at symbol index `index`, if it is one.
    pub(crate) fn probe_at(&self, index: usize) -> Option<(Kind, &'d [u8])> {
        self.class
            .get(index)
            .filter(|&&c| c != NOT_A_PROBE)
            .map(|&c| (self.probes[c as usize].kind, self.probes[c as usize].name))
    }
}

/// Scans the object `data` (named `file` in messages) for relocations against probe symbols.
pub fn scan<'d>(data: &'d [u8], file: &str) -> Result<Scanned<'d>> {
    let mut scanned = symbols(data, file)?;
    if scanned.object.symbols.is_empty() {
        return Ok(scanned);
    }
    let sections = &scanned.object.sections;
    let has_guards = sections.iter().any(|s| {
        sections
            .section_name(LE, s)
            .is_ok_and(|n| n == GUARD_SECTION.as_bytes())
    });
    if scanned.probes.is_empty() && !has_guards {
        return Ok(scanned);
    }
    let sections = scanned.object.sections;
    for (index, section) in sections.enumerate() {
        scan_relocation_section(&mut scanned, index.0, section)?;
    }
    Ok(scanned)
}

/// The first half of [`scan`]: the object parsed and its symbols classified (the probe symbols
/// it references and defines, whether it calls the runtime or the unwinder), its relocations not
/// read. What the link line will be follows from this alone, unless the object's references to
/// probe symbols turn out to be no sites.
pub fn symbols<'d>(data: &'d [u8], file: &str) -> Result<Scanned<'d>> {
    let object = Object::parse(data, file)?;
    let relocations = object
        .sections
        .iter()
        .filter(|s| s.sh_type(LE) == elf::SHT_RELA)
        .map(|s| (s.sh_size(LE) / RELA_SIZE) as usize)
        .sum();
    let mut scanned = Scanned {
        object,
        referenced: Vec::new(),
        defined: Vec::new(),
        not_sites: Vec::new(),
        relocations,
        uses_runtime: false,
        walks_stacks: false,
        probes: Vec::new(),
        class: Vec::new(),
        candidates: BTreeMap::new(),
        guard_relocs: Vec::new(),
        guard_sizes: BTreeMap::new(),
    };
    if !scanned.object.symbols.is_empty() {
        classify_symbols(&mut scanned)?;
    }
    Ok(scanned)
}

impl Scanned<'_> {
    /// Whether the object references probe symbols it does not define: then it has sites,
    /// unless none of its references to them is a call. (An object that defines probe symbols,
    /// a program's own stubs, mostly does not call them.)
    pub fn references_probe_symbols(&self) -> bool {
        !self.referenced.is_empty()
    }
}

/// Classifies every symbol once, so the relocation loop is a table lookup: fills `probes`,
/// `class`, `referenced`, `defined`, `uses_runtime` and `walks_stacks`.
fn classify_symbols(s: &mut Scanned<'_>) -> Result<()> {
    let symbols = s.object.symbols;
    s.class = vec![NOT_A_PROBE; symbols.len()];
    for (index, sym) in symbols.enumerate() {
        if index.0 == 0 || sym.st_bind() == elf::STB_LOCAL {
            continue;
        }
        let st_name = sym.st_name(LE);
        let from = s.object.name_from(st_name);
        // Every name that matters starts with `_` (`__fentry__`, `__dtrace_...`,
        // `__cyg_profile_...`, `_Unwind_Backtrace`), `m` (`mcount`) or `b` (`bootprof_...`):
        // most of a program's symbols are passed over on their first byte.
        if !matches!(from.first(), Some(b'_' | b'm' | b'b')) {
            if (st_name as usize) < s.object.strings.len() {
                continue;
            }
            return Err(Error::malformed(
                Location {
                    section: Some(".symtab".into()),
                    offset: Some(index.0 as u64 * SYM_SIZE),
                    ..Location::file(s.object.file.clone())
                },
                format!("symbol name offset {st_name:#x} is outside the string table"),
            ));
        }
        let name = crate::elf::c_str(from);
        let Some((kind, _, _)) = Kind::classify(name) else {
            if sym.st_shndx(LE) == elf::SHN_UNDEF {
                s.uses_runtime |= name.starts_with(b"bootprof_");
                s.walks_stacks |= name == b"_Unwind_Backtrace";
            }
            continue;
        };
        // A call to a probe symbol is a site whether the symbol is undefined here (the usual
        // case: the stub object will define it) or defined by the program itself (after a
        // partial link, calls bind to such a definition; it then gets no stub).
        s.class[index.0] = s.probes.len() as u32;
        let symbol = ProbeSymbol { name, kind };
        if sym.st_shndx(LE) == elf::SHN_UNDEF {
            s.referenced.push(symbol);
        } else {
            s.defined.push(name);
        }
        s.probes.push(symbol);
    }
    Ok(())
}

/// Looks at section `index`: when it holds relocations against the symbol table, records those
/// against probe symbols (candidates, guard relocations or not-sites).
fn scan_relocation_section(
    s: &mut Scanned<'_>,
    index: usize,
    section: &SectionHeader64,
) -> Result<()> {
    let (data, sections) = (s.object.data, &s.object.sections);
    let sh_type = section.sh_type(LE);
    if sh_type != elf::SHT_RELA && sh_type != elf::SHT_REL {
        return Ok(());
    }
    if section.sh_link(LE) as usize != s.object.symbols.section().0 {
        return Ok(());
    }
    // Where errors are, made once (the closures below must not hold on to `s`).
    let here = s.object.at(Some(index));
    let loc = |offset: Option<u64>| Location {
        offset,
        ..here.clone()
    };
    let target = section.sh_info(LE) as usize;
    let Some(target_section) = sections.section(SectionIndex(target)).ok() else {
        return Err(Error::malformed(
            loc(None),
            format!("relocations for missing section {target}"),
        ));
    };
    if sh_type == elf::SHT_REL {
        let (rels, _) = section
            .rel(LE, data)
            .map_err(|e| Error::malformed(loc(None), e))?
            .unwrap_or((&[], SectionIndex(0)));
        if rels.iter().any(|r| {
            s.class
                .get(r.r_sym(LE) as usize)
                .is_some_and(|&c| c != NOT_A_PROBE)
        }) {
            return Err(Error::Unsupported {
                at: loc(None),
                what: "SHT_REL relocations against probe symbols".into(),
            });
        }
        return Ok(());
    }
    let (relas, _) = section
        .rela(LE, data)
        .map_err(|e| Error::malformed(loc(None), e))?
        .unwrap_or((&[], SectionIndex(0)));
    let nsyms = s.object.symbols.len();
    let out_of_range = |j: usize, sym: usize| {
        Error::malformed(
            loc(Some(j as u64 * RELA_SIZE)),
            format!("relocation {j} has symbol index {sym}, out of range ({nsyms} symbols)"),
        )
    };
    let target_size = target_section.sh_size(LE);
    if sections
        .section_name(LE, target_section)
        .is_ok_and(|n| n == GUARD_SECTION.as_bytes())
    {
        // Every relocation of a guard section belongs to a record: read them all.
        s.guard_sizes.insert(target, target_size);
        return add_guard_relocs(s, (index, target), relas, out_of_range);
    }
    let exec = target_section.sh_flags(LE).0 & elf::SHF_EXECINSTR.0 != 0;
    let nobits = target_section.sh_type(LE) == elf::SHT_NOBITS;
    // The section's candidates, kept aside and moved into the map at the end: at most one a
    // relocation, room made for that many at the first (growing the vector copied them all each
    // time, and looking the section up in the map for each was most of the rest).
    let mut candidates = Vec::new();
    for (j, rela) in relas.iter().enumerate() {
        let sym = rela.r_sym(LE, false) as usize;
        let Some(&probe) = s.class.get(sym) else {
            return Err(out_of_range(j, sym));
        };
        if probe == NOT_A_PROBE {
            continue;
        }
        let r_offset = rela.r_offset(LE);
        // Built only for a message: most relocations here are sites.
        let at = || Location {
            offset: Some(r_offset),
            symbol: Some(String::from_utf8_lossy(s.probes[probe as usize].name).into_owned()),
            ..s.object.at(Some(target))
        };
        if !exec {
            let at = at();
            let loaded = target_section.sh_flags(LE).0 & elf::SHF_ALLOC.0 != 0;
            s.not_sites.push(NotASite {
                at,
                why: if loaded {
                    "its address is taken in data (a section that is not executable)"
                } else {
                    "in a section that is not loaded (debug information)"
                },
                live: loaded,
            });
            continue;
        }
        if r_offset.checked_add(4).is_none_or(|end| end > target_size) || nobits {
            return Err(Error::malformed(
                at(),
                format!("relocation points outside its section (size {target_size:#x})"),
            ));
        }
        if candidates.is_empty() {
            candidates.reserve(relas.len() - j);
        }
        candidates.push(Candidate {
            rela: (index, j),
            r_offset,
            r_type: rela.r_type(LE, false),
            addend: rela.r_addend(LE),
            probe,
            symbol_index: sym,
        });
    }
    add_candidates(s, target, candidates);
    Ok(())
}

/// Records every relocation of the guard section `target` (`relas`, of relocation section
/// `index`); `out_of_range` makes the error for a symbol index past the symbol table.
fn add_guard_relocs(
    s: &mut Scanned<'_>,
    (index, target): (usize, usize),
    relas: &[Rela64],
    out_of_range: impl Fn(usize, usize) -> Error,
) -> Result<()> {
    let nsyms = s.object.symbols.len();
    for (j, rela) in relas.iter().enumerate() {
        let sym = rela.r_sym(LE, false) as usize;
        if sym >= nsyms {
            return Err(out_of_range(j, sym));
        }
        s.guard_relocs.push(GuardReloc {
            section: target,
            rela: (index, j),
            r_offset: rela.r_offset(LE),
            r_type: rela.r_type(LE, false),
            sym,
            addend: rela.r_addend(LE),
        });
    }
    Ok(())
}

/// Adds `candidates` to those of section `target`: moved in when it has none yet.
fn add_candidates(s: &mut Scanned<'_>, target: usize, candidates: Vec<Candidate>) {
    if candidates.is_empty() {
        return;
    }
    match s.candidates.entry(target) {
        Entry::Vacant(place) => {
            place.insert(candidates);
        }
        Entry::Occupied(mut place) => place.get_mut().extend(candidates),
    }
}
