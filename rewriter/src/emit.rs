//! Emit: writes the rewritten object for a [`Plan`] with sites.
//!
//! Takes the parsed object and its verified sites; hands on the bytes of a new relocatable object
//! in which
//! - each site holds its NOP form and its relocation is `R_X86_64_NONE`;
//! - each tail site jumping to a stub has a thunk at the end of its text section, which its table
//!   entry targets (the site's identity in call mode);
//! - each text section with sites has a `bootprof_sites` fragment (`SHF_LINK_ORDER` to that text
//!   section, and in its COMDAT group if it has one) with a `.rela` section giving each entry the
//!   site's address and its stub's address;
//! - a local `STT_SECTION` symbol exists for each such text section (inserted after the existing
//!   locals when missing; every user of symbol indices is renumbered: relocations, group
//!   signatures, `.llvm_addrsig`, the call-graph profile and the extended section index table).
//!
//! Original sections keep their indices; new sections go at the end.

use crate::error::{Error, Location, Result};
use crate::scan::{malformed, Parsed, SiteInfo};
use bootprof_format::{self as format, field, Kind, ENTRY_SIZE, HEADER_SIZE};
use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::read::SectionIndex;
use object::LittleEndian as LE;
use std::collections::{BTreeMap, HashMap};

const SHDR: usize = 64;
const SYM: usize = 24;
const RELA: usize = 24;
const SHT_LLVM_ADDRSIG: u32 = 0x6fff_4c03;
const SHT_LLVM_CALL_GRAPH_PROFILE: u32 = 0x6fff_4c09;

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// A section of the output: its header (64 bytes) and its contents.
struct OutSection<'d> {
    header: [u8; SHDR],
    data: Data<'d>,
}

enum Data<'d> {
    /// No file contents (SHT_NULL, SHT_NOBITS).
    None,
    Borrowed(&'d [u8]),
    Owned(Vec<u8>),
}

impl Data<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Data::None => &[],
            Data::Borrowed(b) => b,
            Data::Owned(v) => v,
        }
    }
}

/// Writes the rewritten object. `sites` are sorted by section then offset.
pub(crate) fn emit(obj: &Parsed<'_>, sites: &[SiteInfo], file: &str) -> Result<Vec<u8>> {
    let data = obj.data;
    let at = |section: Option<String>| Location {
        section,
        ..Location::file(file)
    };
    let n = obj.sections.len();
    let symtab = obj.symbols.section().0;
    let shndx = obj.symbols.shndx_section().0;
    let shstrndx = obj
        .header
        .shstrndx(LE, data)
        .map_err(|e| malformed(at(None), e))? as usize;

    // Copy every section header and borrow its contents.
    let mut out: Vec<OutSection<'_>> = Vec::with_capacity(n + 2 * sites.len());
    for (index, section) in obj.sections.enumerate() {
        let mut header = [0u8; SHDR];
        header.copy_from_slice(object::pod::bytes_of(section));
        let contents = if index.0 == 0 || section.sh_type(LE) == elf::SHT_NOBITS {
            Data::None
        } else {
            Data::Borrowed(section.data(LE, data).map_err(|e| {
                malformed(
                    at(Some(obj.sections.section_name(LE, section).map_or_else(
                        |_| format!("#{}", index.0),
                        |n| String::from_utf8_lossy(n).into_owned(),
                    ))),
                    e,
                )
            })?)
        };
        out.push(OutSection {
            header,
            data: contents,
        });
    }

    // Text sections with sites, and the section symbol each fragment relocates against.
    let mut by_section: BTreeMap<usize, Vec<&SiteInfo>> = BTreeMap::new();
    for s in sites {
        by_section.entry(s.section).or_default().push(s);
    }
    let mut section_symbol: HashMap<usize, usize> = HashMap::new();
    for (index, sym) in obj.symbols.enumerate() {
        if sym.st_type() == elf::STT_SECTION && sym.st_bind() == elf::STB_LOCAL {
            if let Ok(Some(SectionIndex(sec))) = obj.symbols.symbol_section(LE, sym, index) {
                if by_section.contains_key(&sec) {
                    section_symbol.entry(sec).or_insert(index.0);
                }
            }
        }
    }
    let nsyms = obj.symbols.len();
    let first_global = out[symtab].sh_info() as usize;
    if first_global == 0 || first_global > nsyms {
        return Err(malformed(
            at(Some(".symtab".into())),
            format!("sh_info {first_global} is not a symbol index in 1..={nsyms}"),
        ));
    }
    if shndx != 0 && out[shndx].data.bytes().len() != nsyms * 4 {
        return Err(malformed(
            at(Some(".symtab_shndx".into())),
            format!(
                "has {} bytes for {nsyms} symbols",
                out[shndx].data.bytes().len()
            ),
        ));
    }
    // The names of the new sections are appended to this table: it must be a string table.
    if shstrndx == 0
        || shstrndx >= n
        || shstrndx == symtab
        || out[shstrndx].sh_type() != elf::SHT_STRTAB.0
    {
        return Err(malformed(
            at(None),
            format!("section name table index {shstrndx} is not a string table"),
        ));
    }
    let missing: Vec<usize> = by_section
        .keys()
        .copied()
        .filter(|s| !section_symbol.contains_key(s))
        .collect();
    let k = missing.len();
    let remap = |i: usize| if i >= first_global { i + k } else { i };
    for (j, &sec) in missing.iter().enumerate() {
        section_symbol.insert(sec, first_global + j);
    }
    let total = n + 2 * by_section.len();
    if total >= elf::SHN_LORESERVE as usize && shndx == 0 {
        return Err(Error::Unsupported {
            at: at(None),
            what: format!(
                "{total} sections need an extended section index table, which this object lacks"
            ),
        });
    }

    if k > 0 {
        // The symbol table, with the new section symbols after the existing locals.
        let old = out[symtab].data.bytes();
        let mut syms = Vec::with_capacity(old.len() + k * SYM);
        syms.extend_from_slice(&old[..first_global * SYM]);
        for &sec in &missing {
            let mut s = [0u8; SYM];
            s[4] = (elf::STB_LOCAL.0 << 4) | elf::STT_SECTION.0;
            let shn = if sec >= elf::SHN_LORESERVE as usize {
                elf::SHN_XINDEX.0
            } else {
                sec as u16
            };
            put_u16(&mut s, 6, shn);
            syms.extend_from_slice(&s);
        }
        syms.extend_from_slice(&old[first_global * SYM..]);
        out[symtab].data = Data::Owned(syms);
        out[symtab].set_size();
        let info = out[symtab].sh_info() + k as u32;
        put_u32(&mut out[symtab].header, 44, info);
        if shndx != 0 {
            let old = out[shndx].data.bytes();
            let mut table = Vec::with_capacity(old.len() + k * 4);
            table.extend_from_slice(&old[..first_global * 4]);
            for &sec in &missing {
                let v = if sec >= elf::SHN_LORESERVE as usize {
                    sec as u32
                } else {
                    0
                };
                table.extend_from_slice(&v.to_le_bytes());
            }
            table.extend_from_slice(&old[first_global * 4..]);
            out[shndx].data = Data::Owned(table);
            out[shndx].set_size();
        }
    }

    // Renumber symbol references and neutralise the site relocations.
    let mut site_relas: HashMap<usize, Vec<usize>> = HashMap::new();
    for s in sites {
        let guard_relas = s.guard.iter().flat_map(|g| g.relas);
        for (sec, j) in std::iter::once(s.rela).chain(guard_relas) {
            site_relas.entry(sec).or_default().push(j);
        }
    }
    for (i, sec) in out.iter_mut().enumerate() {
        let ty = sec.sh_type();
        let linked = sec.sh_link() as usize == symtab;
        let entsize = match ty {
            t if t == elf::SHT_RELA.0 && linked => RELA,
            t if t == elf::SHT_REL.0 && linked => 16,
            t if t == elf::SHT_GROUP.0 && linked => {
                let sig = remap(sec.sh_info() as usize) as u32;
                put_u32(&mut sec.header, 44, sig);
                continue;
            }
            SHT_LLVM_ADDRSIG if k > 0 => {
                let remapped = remap_addrsig(sec.data.bytes(), remap).ok_or_else(|| {
                    malformed(at(Some(".llvm_addrsig".into())), "truncated ULEB128")
                })?;
                sec.data = Data::Owned(remapped);
                sec.set_size();
                continue;
            }
            SHT_LLVM_CALL_GRAPH_PROFILE if k > 0 && sec.sh_entsize() == 16 => {
                let mut v = sec.data.bytes().to_vec();
                for e in v.chunks_exact_mut(16) {
                    let (from, to) = (get_u32(e, 0) as usize, get_u32(e, 4) as usize);
                    put_u32(e, 0, remap(from) as u32);
                    put_u32(e, 4, remap(to) as u32);
                }
                sec.data = Data::Owned(v);
                continue;
            }
            _ => continue,
        };
        let neutral = site_relas.get(&i);
        if k == 0 && neutral.is_none() {
            continue;
        }
        let mut v = sec.data.bytes().to_vec();
        if k > 0 {
            for e in v.chunks_exact_mut(entsize) {
                let info = get_u64(e, 8);
                let sym = remap((info >> 32) as usize) as u64;
                put_u64(e, 8, (sym << 32) | (info & 0xffff_ffff));
            }
        }
        for &j in neutral.into_iter().flatten() {
            let e = &mut v[j * entsize..(j + 1) * entsize];
            let info = get_u64(e, 8);
            put_u64(
                e,
                8,
                (info & !0xffff_ffff) | u64::from(elf::R_X86_64_NONE.0),
            );
        }
        sec.data = Data::Owned(v);
    }

    // Patch the sites, and give each tail site that jumps to a stub a thunk of its own.
    //
    // A call site leaves its return address, by which call mode knows the site; a tail jump
    // leaves none, and all the tail sites of one symbol would share its stub (so, for instance,
    // every tail call of `__cyg_profile_func_exit` would be credited to one function). The thunk,
    // appended to the site's own text section, loads its own address into r11 (the site's id) and
    // jumps past the stub's `lea` to its `jmp *dispatcher`:
    //     4c 8d 1d 00 00 00 00    lea 0(%rip), %r11
    //     e9 rel32                jmp <stub> + 7     (R_X86_64_PC32, <stub> + 3)
    // The site's table entry targets the thunk. Probe symbols the program defines have no stub
    // and keep their own target.
    let mut rela_of: HashMap<usize, usize> = HashMap::new();
    for (i, sec) in out.iter().enumerate() {
        if sec.sh_type() == elf::SHT_RELA.0 && sec.sh_link() as usize == symtab {
            rela_of.entry(sec.sh_info() as usize).or_insert(i);
        }
    }
    let has_stub = |s: &SiteInfo| {
        s.form.is_tail()
            && obj
                .symbols
                .symbol(object::read::SymbolIndex(s.symbol_index))
                .is_ok_and(|sym| sym.st_shndx(LE) == elf::SHN_UNDEF)
    };
    let mut thunk_at: HashMap<(usize, u64), u64> = HashMap::new();
    for (&sec, list) in &by_section {
        let mut text = out[sec].data.bytes().to_vec();
        for s in list {
            let bytes = format::disabled_bytes(s.kind, s.form);
            let start = s.offset as usize;
            text[start..start + s.form.len()].copy_from_slice(&bytes[..s.form.len()]);
        }
        let tails: Vec<&&SiteInfo> = list.iter().filter(|s| has_stub(s)).collect();
        if !tails.is_empty() {
            let Some(&rela_sec) = rela_of.get(&sec) else {
                return Err(Error::Internal(format!(
                    "{file}: a tail site in section #{sec}, which has no relocation section"
                )));
            };
            let mut relas = out[rela_sec].data.bytes().to_vec();
            while text.len() % 16 != 0 {
                text.push(0xcc);
            }
            for s in tails {
                let at = text.len() as u64;
                text.extend_from_slice(&[0x4c, 0x8d, 0x1d, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0]);
                let mut rela = [0u8; RELA];
                put_u64(&mut rela, 0, at + 8);
                put_u64(
                    &mut rela,
                    8,
                    ((remap(s.symbol_index) as u64) << 32) | u64::from(elf::R_X86_64_PC32.0),
                );
                put_u64(&mut rela, 16, 3);
                relas.extend_from_slice(&rela);
                thunk_at.insert((sec, s.offset), at);
            }
            out[rela_sec].data = Data::Owned(relas);
            out[rela_sec].set_size();
        }
        out[sec].data = Data::Owned(text);
        out[sec].set_size();
    }

    // Section names for the new sections.
    let mut names = out[shstrndx].data.bytes().to_vec();
    let frag_name = names.len() as u32;
    names.extend_from_slice(format::SECTION_NAME.as_bytes());
    names.push(0);
    let rela_name = names.len() as u32;
    names.extend_from_slice(b".rela");
    names.extend_from_slice(format::SECTION_NAME.as_bytes());
    names.push(0);
    out[shstrndx].data = Data::Owned(names);
    out[shstrndx].set_size();
    // When the symbol string table is this same section (LLVM's habit), appending keeps every
    // old offset valid.

    // Groups the text sections belong to.
    let mut group_of: HashMap<usize, usize> = HashMap::new();
    for (g, sec) in out.iter().enumerate() {
        if sec.sh_type() == elf::SHT_GROUP.0 {
            for m in sec.data.bytes().chunks_exact(4).skip(1) {
                let m = get_u32(m, 0) as usize;
                if by_section.contains_key(&m) {
                    group_of.insert(m, g);
                }
            }
        }
    }

    // The fragments.
    for (&sec, list) in &by_section {
        let frag_index = out.len();
        // A call site's target is its stub (the probe symbol); a guard's, its out-of-line code.
        let (bytes, relas) = fragment(list, section_symbol[&sec], |s| {
            match (&s.guard, thunk_at.get(&(sec, s.offset))) {
                (Some(g), _) => (remap(g.symbol), g.addend),
                (None, Some(&at)) => (section_symbol[&sec], at as i64),
                (None, None) => (remap(s.symbol_index), 0),
            }
        });
        let group_flag = if group_of.contains_key(&sec) {
            elf::SHF_GROUP.0
        } else {
            0
        };
        let mut h = [0u8; SHDR];
        put_u32(&mut h, 0, frag_name);
        put_u32(&mut h, 4, elf::SHT_PROGBITS.0);
        put_u64(
            &mut h,
            8,
            elf::SHF_ALLOC.0 | elf::SHF_LINK_ORDER.0 | group_flag,
        );
        put_u32(&mut h, 40, sec as u32);
        put_u64(&mut h, 48, 8);
        let mut f = OutSection {
            header: h,
            data: Data::Owned(bytes),
        };
        f.set_size();
        out.push(f);
        let mut h = [0u8; SHDR];
        put_u32(&mut h, 0, rela_name);
        put_u32(&mut h, 4, elf::SHT_RELA.0);
        put_u64(&mut h, 8, elf::SHF_INFO_LINK.0 | group_flag);
        put_u32(&mut h, 40, symtab as u32);
        put_u32(&mut h, 44, frag_index as u32);
        put_u64(&mut h, 48, 8);
        put_u64(&mut h, 56, RELA as u64);
        let mut r = OutSection {
            header: h,
            data: Data::Owned(relas),
        };
        r.set_size();
        out.push(r);
        if let Some(&g) = group_of.get(&sec) {
            let mut members = out[g].data.bytes().to_vec();
            members.extend_from_slice(&(frag_index as u32).to_le_bytes());
            members.extend_from_slice(&(frag_index as u32 + 1).to_le_bytes());
            out[g].data = Data::Owned(members);
            out[g].set_size();
        }
    }

    Ok(layout(data, out, shstrndx))
}

impl OutSection<'_> {
    fn sh_type(&self) -> u32 {
        get_u32(&self.header, 4)
    }
    fn sh_link(&self) -> u32 {
        get_u32(&self.header, 40)
    }
    fn sh_info(&self) -> u32 {
        get_u32(&self.header, 44)
    }
    fn sh_entsize(&self) -> u64 {
        get_u64(&self.header, 56)
    }
    fn set_size(&mut self) {
        let size = self.data.bytes().len() as u64;
        put_u64(&mut self.header, 32, size);
    }
}

/// Builds one fragment: header, entries, name pool; and its relocations (site, and target: the
/// symbol and addend `target_of` gives).
fn fragment(
    list: &[&SiteInfo],
    text_symbol: usize,
    target_of: impl Fn(&SiteInfo) -> (usize, i64),
) -> (Vec<u8>, Vec<u8>) {
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
    let mut relas = Vec::with_capacity(list.len() * 2 * RELA);
    for (i, s) in list.iter().enumerate() {
        let e = HEADER_SIZE + i * ENTRY_SIZE;
        let func_offset = u32::try_from(s.func_offset).unwrap_or(u32::MAX);
        let entry = format::encode_entry(s.kind, s.form, func_offset, &s.orig[..s.form.len()]);
        bytes[e..e + ENTRY_SIZE].copy_from_slice(&entry);
        let (provider, name) = match Kind::classify(&s.symbol) {
            Some((kind, provider, name)) if !kind.is_hook() => (Some(provider), name),
            _ => (None, &s.symbol[..]),
        };
        let mut set = |fieldoff: usize, target: usize| {
            let v = target as i64 - (e + fieldoff) as i64;
            put_u32(&mut bytes, e + fieldoff, v as i32 as u32);
        };
        if let Some(p) = provider {
            set(field::PROVIDER, intern(p));
        }
        set(field::NAME, intern(name));
        if !s.function.is_empty() {
            set(field::FUNCTION, intern(&s.function));
        }
        let mut rela = [0u8; RELA];
        put_u64(&mut rela, 0, (e + field::SITE) as u64);
        put_u64(
            &mut rela,
            8,
            ((text_symbol as u64) << 32) | u64::from(elf::R_X86_64_PC32.0),
        );
        put_u64(&mut rela, 16, s.offset);
        relas.extend_from_slice(&rela);
        let (target, addend) = target_of(s);
        put_u64(&mut rela, 0, (e + field::TARGET) as u64);
        put_u64(
            &mut rela,
            8,
            ((target as u64) << 32) | u64::from(elf::R_X86_64_PC32.0),
        );
        put_u64(&mut rela, 16, addend as u64);
        relas.extend_from_slice(&rela);
    }
    bytes.extend_from_slice(&pool);
    while bytes.len() % 8 != 0 {
        bytes.push(0);
    }
    let size = bytes.len() as u32;
    bytes[..HEADER_SIZE].copy_from_slice(&format::encode_header(list.len() as u32, size));
    (bytes, relas)
}

/// Renumbers the ULEB128 symbol indices of an `.llvm_addrsig` section.
fn remap_addrsig(bytes: &[u8], remap: impl Fn(usize) -> usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len() + 8);
    let mut i = 0;
    while i < bytes.len() {
        let (mut v, mut shift) = (0u64, 0u32);
        loop {
            let b = *bytes.get(i)?;
            i += 1;
            v |= u64::from(b & 0x7f).checked_shl(shift)?;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let mut v = remap(v as usize) as u64;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            out.push(if v != 0 { b | 0x80 } else { b });
            if v == 0 {
                break;
            }
        }
    }
    Some(out)
}

/// Lays the sections out after the ELF header, then the section header table.
fn layout(data: &[u8], mut out: Vec<OutSection<'_>>, shstrndx: usize) -> Vec<u8> {
    let ehsize = std::mem::size_of::<crate::scan::FileHeader64>();
    let size_hint = out.iter().map(|s| s.data.bytes().len() + 16).sum::<usize>() + out.len() * SHDR;
    let mut file = Vec::with_capacity(ehsize + size_hint);
    file.extend_from_slice(&data[..ehsize]);
    for sec in out.iter_mut().skip(1) {
        let bytes = sec.data.bytes();
        if matches!(sec.data, Data::None) {
            put_u64(&mut sec.header, 24, file.len() as u64);
            continue;
        }
        let align = get_u64(&sec.header, 48).clamp(1, 4096) as usize;
        while file.len() % align != 0 {
            file.push(0);
        }
        put_u64(&mut sec.header, 24, file.len() as u64);
        file.extend_from_slice(bytes);
    }
    while file.len() % 8 != 0 {
        file.push(0);
    }
    let shoff = file.len() as u64;
    let count = out.len();
    if count >= elf::SHN_LORESERVE as usize {
        put_u64(&mut out[0].header, 32, count as u64);
    }
    if shstrndx >= elf::SHN_LORESERVE as usize {
        put_u32(&mut out[0].header, 40, shstrndx as u32);
    }
    for sec in &out {
        file.extend_from_slice(&sec.header);
    }
    // e_shoff, e_shnum, e_shstrndx; no program headers in a relocatable object.
    put_u64(&mut file, 40, shoff);
    let shnum = if count >= elf::SHN_LORESERVE as usize {
        0
    } else {
        count as u16
    };
    put_u16(&mut file, 60, shnum);
    let strndx = if shstrndx >= elf::SHN_LORESERVE as usize {
        elf::SHN_XINDEX.0
    } else {
        shstrndx as u16
    };
    put_u16(&mut file, 62, strndx);
    file
}
