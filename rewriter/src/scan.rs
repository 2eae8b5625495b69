//! Scan: reads one relocatable x86-64 ELF object and finds its probe sites.
//!
//! Takes the object's bytes; hands on a [`Plan`]: the sites to patch (each verified by
//! [`crate::patch`]), the relocations against probe symbols that are not sites, and the probe
//! symbols the object references or defines (for the stub generator). Nothing is written here.

use crate::error::{Error, Location, Result};
use crate::guard::{self, GuardReloc};
use crate::patch::{self, Recognised};
use bootprof_format::{Form, Kind, GUARD_SECTION};
use object::elf;
use object::read::elf::{FileHeader, Rela, SectionHeader, SectionTable, Sym, SymbolTable};
use object::read::SectionIndex;
use object::LittleEndian as LE;
use std::collections::BTreeMap;

pub(crate) type FileHeader64 = elf::FileHeader64<LE>;

/// A probe symbol an object references (undefined in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSymbol {
    /// Its full name.
    pub name: Vec<u8>,
    /// What it is.
    pub kind: Kind,
}

/// One site found in an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteInfo {
    /// Index of the text section holding it.
    pub section: usize,
    /// Name of that section.
    pub section_name: String,
    /// Offset of the site's first byte in the section.
    pub offset: u64,
    /// The form it had.
    pub form: Form,
    /// What it is.
    pub kind: Kind,
    /// The probe symbol called.
    pub symbol: Vec<u8>,
    /// Enclosing function (empty when no symbol covers the site).
    pub function: Vec<u8>,
    /// Offset from the start of the enclosing function (or section).
    pub func_offset: u64,
    /// Index of the relocation section and of the entry in it.
    pub(crate) rela: (usize, usize),
    /// Index of the probe symbol in the symbol table.
    pub(crate) symbol_index: usize,
    /// The instruction bytes as compiled.
    pub(crate) orig: [u8; 8],
    /// For a [`Form::Guard`]: where its enabled jump goes, from its record.
    pub(crate) guard: Option<GuardTarget>,
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
}

/// What [`scan`] found in one object.
#[derive(Debug, Default)]
pub struct Plan<'d> {
    /// The sites, in section and offset order.
    pub sites: Vec<SiteInfo>,
    /// Probe symbols referenced (undefined) by the object.
    pub referenced: Vec<ProbeSymbol>,
    /// Probe symbols the object defines (no stub is generated for them).
    pub defined: Vec<Vec<u8>>,
    /// Relocations against probe symbols that are not sites.
    pub not_sites: Vec<NotASite>,
    /// Number of relocation entries in the object.
    pub relocations: usize,
    /// Whether the object calls the runtime's API (an undefined `bootprof_*` symbol).
    pub uses_runtime: bool,
    /// The parsed object, kept for the writer when there are sites.
    pub(crate) object: Option<Parsed<'d>>,
}

/// The parts of a parsed object the writer needs.
pub(crate) struct Parsed<'d> {
    pub file: String,
    pub data: &'d [u8],
    pub header: &'d FileHeader64,
    pub sections: SectionTable<'d, FileHeader64>,
    pub symbols: SymbolTable<'d, FileHeader64>,
}

impl std::fmt::Debug for Parsed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Parsed({})", self.file)
    }
}

/// Checks the ELF identification and header: 64-bit, little-endian, x86-64, relocatable.
pub(crate) fn parse_header<'d>(data: &'d [u8], file: &str) -> Result<&'d FileHeader64> {
    let at = || Location::file(file);
    if data.len() < 16 || &data[..4] != b"\x7fELF" {
        return Err(Error::NotElf(at()));
    }
    let unsupported = |what: String| Error::Unsupported { at: at(), what };
    if data[4] != elf::ELFCLASS64.0 {
        return Err(unsupported("32-bit (ELFCLASS32)".into()));
    }
    if data[5] != elf::ELFDATA2LSB.0 {
        return Err(unsupported("big-endian".into()));
    }
    let header = FileHeader64::parse(data).map_err(|e| malformed(at(), e))?;
    let machine = header.e_machine(LE);
    if machine != elf::EM_X86_64 {
        return Err(unsupported(format!("machine {} is not x86-64", machine.0)));
    }
    let ty = header.e_type(LE);
    if ty != elf::ET_REL {
        return Err(unsupported(format!(
            "type {} is not a relocatable object (ET_REL)",
            ty.0
        )));
    }
    Ok(header)
}

pub(crate) fn malformed(at: Location, e: impl std::fmt::Display) -> Error {
    Error::Malformed {
        at,
        format: "ELF",
        what: e.to_string(),
    }
}

fn section_name(sections: &SectionTable<'_, FileHeader64>, index: usize) -> String {
    sections
        .section(SectionIndex(index))
        .ok()
        .and_then(|s| sections.section_name(LE, s).ok())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_else(|| format!("#{index}"))
}

/// Scans the object `data` (named `file` in messages) for probe sites.
pub fn scan<'d>(data: &'d [u8], file: &str) -> Result<Plan<'d>> {
    let header = parse_header(data, file)?;
    let at = || Location::file(file);
    let sections = header.sections(LE, data).map_err(|e| malformed(at(), e))?;
    let symbols = sections
        .symbols(LE, data, elf::SHT_SYMTAB)
        .map_err(|e| malformed(at(), e))?;
    if sections
        .iter()
        .next()
        .is_some_and(|s| s.sh_type(LE) != elf::SHT_NULL)
    {
        return Err(malformed(
            Location {
                offset: Some(header.e_shoff(LE)),
                ..at()
            },
            "section 0 is not SHT_NULL",
        ));
    }
    let mut plan = Plan {
        relocations: sections
            .iter()
            .filter(|s| s.sh_type(LE) == elf::SHT_RELA)
            .map(|s| (s.sh_size(LE) / 24) as usize)
            .sum(),
        ..Plan::default()
    };
    if symbols.is_empty() {
        return Ok(plan);
    }

    // Classify every symbol once, so the relocation loop is a table lookup.
    let mut class: Vec<u32> = vec![u32::MAX; symbols.len()];
    let mut probes: Vec<ProbeSymbol> = Vec::new();
    for (index, sym) in symbols.enumerate() {
        if index.0 == 0 || sym.st_bind() == elf::STB_LOCAL {
            continue;
        }
        let name = symbols.symbol_name(LE, sym).map_err(|e| {
            malformed(
                Location {
                    section: Some(".symtab".into()),
                    offset: Some(index.0 as u64 * 24),
                    ..at()
                },
                e,
            )
        })?;
        let Some((kind, _, _)) = Kind::classify(name) else {
            if name.starts_with(b"bootprof_") && sym.st_shndx(LE) == elf::SHN_UNDEF {
                plan.uses_runtime = true;
            }
            continue;
        };
        // A call to a probe symbol is a site whether the symbol is undefined here (the usual
        // case: the stub object will define it) or defined by the program itself (after a
        // partial link, calls bind to such a definition; it then gets no stub).
        class[index.0] = probes.len() as u32;
        let symbol = ProbeSymbol {
            name: name.to_vec(),
            kind,
        };
        if sym.st_shndx(LE) == elf::SHN_UNDEF {
            plan.referenced.push(symbol.clone());
        } else {
            plan.defined.push(name.to_vec());
        }
        probes.push(symbol);
    }
    let has_guards = sections.iter().any(|s| {
        sections
            .section_name(LE, s)
            .is_ok_and(|n| n == GUARD_SECTION.as_bytes())
    });
    if probes.is_empty() && !has_guards {
        return Ok(plan);
    }

    // Find the relocations against probe symbols, in every section.
    struct Candidate {
        rela: (usize, usize),
        r_offset: u64,
        r_type: elf::RelocationType,
        addend: i64,
        probe: u32,
        symbol_index: usize,
    }
    let mut candidates: BTreeMap<usize, Vec<Candidate>> = BTreeMap::new();
    let mut guard_relocs: Vec<GuardReloc> = Vec::new();
    let mut guard_sizes: BTreeMap<usize, u64> = BTreeMap::new();
    for (index, section) in sections.enumerate() {
        let sh_type = section.sh_type(LE);
        if sh_type != elf::SHT_RELA && sh_type != elf::SHT_REL {
            continue;
        }
        let target = section.sh_info(LE) as usize;
        let loc = |offset: Option<u64>, symbol: Option<String>| Location {
            section: Some(section_name(&sections, index.0)),
            offset,
            symbol,
            ..at()
        };
        if section.sh_link(LE) as usize != symbols.section().0 {
            continue;
        }
        let Some(target_section) = sections.section(SectionIndex(target)).ok() else {
            return Err(malformed(
                loc(None, None),
                format!("relocations for missing section {target}"),
            ));
        };
        let exec = target_section.sh_flags(LE).0 & elf::SHF_EXECINSTR.0 != 0;
        if sh_type == elf::SHT_REL {
            let (rels, _) = section
                .rel(LE, data)
                .map_err(|e| malformed(loc(None, None), e))?
                .unwrap_or((&[], SectionIndex(0)));
            if rels.iter().any(|r| {
                class
                    .get(r.r_sym(LE) as usize)
                    .is_some_and(|&c| c != u32::MAX)
            }) {
                return Err(Error::Unsupported {
                    at: loc(None, None),
                    what: "SHT_REL relocations against probe symbols".into(),
                });
            }
            continue;
        }
        let (relas, _) = section
            .rela(LE, data)
            .map_err(|e| malformed(loc(None, None), e))?
            .unwrap_or((&[], SectionIndex(0)));
        let target_size = target_section.sh_size(LE);
        if sections
            .section_name(LE, target_section)
            .is_ok_and(|n| n == GUARD_SECTION.as_bytes())
        {
            // Every relocation of a guard section belongs to a record: read them all.
            guard_sizes.insert(target, target_size);
            for (j, rela) in relas.iter().enumerate() {
                let sym = rela.r_sym(LE, false) as usize;
                if sym >= symbols.len() {
                    return Err(malformed(
                        loc(Some(j as u64 * 24), None),
                        format!(
                            "relocation {j} has symbol index {sym}, out of range ({} symbols)",
                            symbols.len()
                        ),
                    ));
                }
                guard_relocs.push(GuardReloc {
                    section: target,
                    rela: (index.0, j),
                    r_offset: rela.r_offset(LE),
                    r_type: rela.r_type(LE, false),
                    sym,
                    addend: rela.r_addend(LE),
                });
            }
            continue;
        }
        for (j, rela) in relas.iter().enumerate() {
            let sym = rela.r_sym(LE, false) as usize;
            let Some(&probe) = class.get(sym) else {
                return Err(malformed(
                    loc(Some(j as u64 * 24), None),
                    format!(
                        "relocation {j} has symbol index {sym}, out of range ({} symbols)",
                        symbols.len()
                    ),
                ));
            };
            if probe == u32::MAX {
                continue;
            }
            let r_offset = rela.r_offset(LE);
            let symbol = String::from_utf8_lossy(&probes[probe as usize].name).into_owned();
            if !exec {
                plan.not_sites.push(NotASite {
                    at: Location {
                        section: Some(section_name(&sections, target)),
                        offset: Some(r_offset),
                        symbol: Some(symbol),
                        ..at()
                    },
                    why: "in a section that is not executable",
                });
                continue;
            }
            if r_offset.checked_add(4).is_none_or(|end| end > target_size)
                || target_section.sh_type(LE) == elf::SHT_NOBITS
            {
                return Err(malformed(
                    Location {
                        section: Some(section_name(&sections, target)),
                        offset: Some(r_offset),
                        symbol: Some(symbol),
                        ..at()
                    },
                    format!("relocation points outside its section (size {target_size:#x})"),
                ));
            }
            candidates.entry(target).or_default().push(Candidate {
                rela: (index.0, j),
                r_offset,
                r_type: rela.r_type(LE, false),
                addend: rela.r_addend(LE),
                probe,
                symbol_index: sym,
            });
        }
    }

    // The guards' records, verified.
    let probe_of = |i: usize| {
        class
            .get(i)
            .filter(|&&c| c != u32::MAX)
            .map(|&c| (probes[c as usize].kind, &probes[c as usize].name[..]))
    };
    let ctx = guard::Ctx {
        file,
        data,
        sections: &sections,
        symbols: &symbols,
        probe: &probe_of,
    };
    let mut guard_sites = guard::guards(&ctx, guard_relocs, &guard_sizes)?;

    // Verify each candidate and place it in its function.
    let mut wanted: BTreeMap<usize, ()> = candidates.keys().map(|&k| (k, ())).collect();
    wanted.extend(guard_sites.iter().map(|g| (g.section, ())));
    let funcs_by_section = functions_in(&symbols, &wanted);
    for (&sec, cands) in &mut candidates {
        cands.sort_by_key(|c| c.r_offset);
        let section = sections
            .section(SectionIndex(sec))
            .map_err(|e| malformed(at(), e))?;
        let sname = section_name(&sections, sec);
        let text = section.data(LE, data).map_err(|e| {
            malformed(
                Location {
                    section: Some(sname.clone()),
                    ..at()
                },
                e,
            )
        })?;
        let funcs = funcs_by_section.get(&sec).map_or(&[][..], Vec::as_slice);
        // (candidate, start, form, decode-from)
        let mut verified: Vec<(&Candidate, usize, Form, usize)> = Vec::new();
        for c in cands.iter() {
            let r_offset = c.r_offset as usize;
            let probe = &probes[c.probe as usize];
            let where_ = || Location {
                section: Some(sname.clone()),
                offset: Some(c.r_offset),
                symbol: Some(String::from_utf8_lossy(&probe.name).into_owned()),
                ..at()
            };
            match patch::recognise(text, r_offset, c.r_type, c.addend) {
                Recognised::Site { start, form } => {
                    let from = enclosing(funcs, start as u64).map_or(0, |f| f.value as usize);
                    verified.push((c, start, form, from));
                }
                Recognised::NotASite(why) => plan.not_sites.push(NotASite { at: where_(), why }),
                Recognised::BadCall => {
                    let lo = r_offset.saturating_sub(2);
                    let bytes = text[lo..r_offset + 4]
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<Vec<_>>()
                        .join(" ");
                    return Err(Error::NotACall {
                        at: where_(),
                        reloc: patch::reloc_name(c.r_type),
                        bytes,
                    });
                }
            }
        }
        // Check instruction boundaries, one linear decode per function.
        let mut i = 0;
        while i < verified.len() {
            let from = verified[i].3;
            let mut j = i;
            while j < verified.len() && verified[j].3 == from {
                j += 1;
            }
            let starts: Vec<usize> = verified[i..j].iter().map(|v| v.1).collect();
            let ok = patch::on_boundaries(text, from, &starts);
            for (k, &(c, start, form, _)) in verified[i..j].iter().enumerate() {
                let probe = &probes[c.probe as usize];
                if !ok[k] {
                    plan.not_sites.push(NotASite {
                        at: Location {
                            section: Some(sname.clone()),
                            offset: Some(c.r_offset),
                            symbol: Some(String::from_utf8_lossy(&probe.name).into_owned()),
                            ..at()
                        },
                        why: "not on an instruction boundary when decoded from the function start",
                    });
                    continue;
                }
                if let Some(inside) = starts_inside(funcs, start as u64, form.len() as u64) {
                    return Err(symbol_inside_site(
                        Location {
                            section: Some(sname.clone()),
                            offset: Some(start as u64),
                            symbol: Some(String::from_utf8_lossy(&probe.name).into_owned()),
                            ..at()
                        },
                        inside,
                    ));
                }
                let func = enclosing(funcs, start as u64);
                let mut orig = [0u8; 8];
                orig[..form.len()].copy_from_slice(&text[start..start + form.len()]);
                // The displacement as compiled is zero (RELA); keep it so, whatever was there.
                orig[form.len() - 4..form.len()].fill(0);
                plan.sites.push(SiteInfo {
                    section: sec,
                    section_name: sname.clone(),
                    offset: start as u64,
                    form,
                    kind: probe.kind,
                    symbol: probe.name.clone(),
                    function: func.map(|f| f.name.to_vec()).unwrap_or_default(),
                    func_offset: start as u64 - func.map_or(0, |f| f.value),
                    rela: c.rela,
                    symbol_index: c.symbol_index,
                    orig,
                    guard: None,
                });
            }
            i = j;
        }
    }
    // Each guard's NOP must be an instruction of its function, as any site.
    for g in &mut guard_sites {
        let funcs = funcs_by_section
            .get(&g.section)
            .map_or(&[][..], Vec::as_slice);
        let func = enclosing(funcs, g.offset);
        let from = func.map_or(0, |f| f.value as usize);
        let text = sections
            .section(SectionIndex(g.section))
            .and_then(|s| s.data(LE, data))
            .map_err(|e| malformed(at(), e))?;
        let where_ = || Location {
            section: Some(g.section_name.clone()),
            offset: Some(g.offset),
            symbol: Some(String::from_utf8_lossy(&g.symbol).into_owned()),
            ..at()
        };
        if !patch::on_boundaries(text, from, &[g.offset as usize])[0] {
            return Err(malformed(
                where_(),
                "a guard's NOP is not on an instruction boundary when decoded from the \
                 function start",
            ));
        }
        if let Some(inside) = starts_inside(funcs, g.offset, 5) {
            return Err(symbol_inside_site(where_(), inside));
        }
        g.function = func.map(|f| f.name.to_vec()).unwrap_or_default();
        g.func_offset = g.offset - func.map_or(0, |f| f.value);
    }
    if !guard_sites.is_empty() {
        plan.sites.extend(guard_sites);
        plan.sites.sort_by_key(|s| (s.section, s.offset));
    }
    if !plan.sites.is_empty() {
        plan.object = Some(Parsed {
            file: file.to_string(),
            data,
            header,
            sections,
            symbols,
        });
    }
    Ok(plan)
}

/// A symbol that may enclose sites.
struct Func<'d> {
    value: u64,
    size: u64,
    name: &'d [u8],
    is_func: bool,
}

/// Named symbols defined in the sections that are keys of `wanted`, each list sorted by address
/// (functions first at equal address).
fn functions_in<'d, T>(
    symbols: &SymbolTable<'d, FileHeader64>,
    wanted: &BTreeMap<usize, T>,
) -> BTreeMap<usize, Vec<Func<'d>>> {
    let mut out: BTreeMap<usize, Vec<Func<'d>>> = BTreeMap::new();
    for (index, sym) in symbols.enumerate() {
        let ty = sym.st_type();
        if index.0 == 0 || ty == elf::STT_SECTION || ty == elf::STT_FILE {
            continue;
        }
        let Some(SectionIndex(sec)) = symbols.symbol_section(LE, sym, index).ok().flatten() else {
            continue;
        };
        if !wanted.contains_key(&sec) {
            continue;
        }
        let Ok(name) = symbols.symbol_name(LE, sym) else {
            continue;
        };
        if name.is_empty() || name.starts_with(b".L") {
            continue;
        }
        out.entry(sec).or_default().push(Func {
            value: sym.st_value(LE),
            size: sym.st_size(LE),
            name,
            is_func: ty == elf::STT_FUNC,
        });
    }
    for funcs in out.values_mut() {
        funcs.sort_by_key(|f| (f.value, !f.is_func));
    }
    out
}

/// A symbol that starts strictly inside the `len` bytes of the instruction at `start`. Compiled
/// code never has one; patching such an instruction would change how the code after that
/// symbol decodes (and so which of its calls are sites), so the object is refused.
fn starts_inside<'a, 'd>(funcs: &'a [Func<'d>], start: u64, len: u64) -> Option<&'a Func<'d>> {
    let first = funcs.partition_point(|f| f.value <= start);
    funcs[first..].first().filter(|f| f.value < start + len)
}

fn symbol_inside_site(at: Location, inside: &Func<'_>) -> Error {
    malformed(
        at,
        format!(
            "symbol `{}` starts at offset {:#x}, inside the site's instruction",
            String::from_utf8_lossy(inside.name),
            inside.value
        ),
    )
}

/// The function covering `offset`: the last `STT_FUNC` starting at or before it whose size covers
/// it, or else the last named symbol starting at or before it.
fn enclosing<'a, 'd>(funcs: &'a [Func<'d>], offset: u64) -> Option<&'a Func<'d>> {
    let upto = funcs.partition_point(|f| f.value <= offset);
    let before = &funcs[..upto];
    before
        .iter()
        .rev()
        .find(|f| f.is_func && offset - f.value < f.size.max(1))
        .or_else(|| before.last())
}
