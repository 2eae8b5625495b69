//! Just enough ELF64 little-endian reading for the tests: section headers, symbols and RELA
//! entries, with the file offset of each field so a test can damage a copy of an object in one
//! precise place. Written by hand (the tests do not use the ELF library the rewriter uses); inputs
//! are objects the tests compiled themselves, so malformed input panics.

pub const SHT_SYMTAB: u32 = 2;
pub const SHT_RELA: u32 = 4;
pub const SHF_GROUP: u64 = 0x200;

pub const R_X86_64_PLT32: u32 = 4;

/// Offset of `e_shoff` in the file header.
pub const E_SHOFF: usize = 0x28;
/// Offset of `e_machine` in the file header.
pub const E_MACHINE: usize = 18;
/// Offset of `EI_CLASS` in the identification bytes.
pub const EI_CLASS: usize = 4;

/// One section header.
#[derive(Debug, Clone)]
pub struct Section {
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    pub offset: u64,
    pub size: u64,
    pub link: u32,
    pub info: u32,
}

/// One relocation entry of a RELA section.
#[derive(Debug, Clone)]
pub struct Rela {
    /// Index of the section the relocation applies to.
    pub target: usize,
    /// File offset of the entry itself (its `r_offset` field; `r_info` is 8 bytes later).
    pub entry_offset: usize,
    pub r_offset: u64,
    pub sym: u32,
    pub r_type: u32,
    pub addend: i64,
}

/// A parsed ELF64 file.
pub struct Elf {
    pub data: Vec<u8>,
    pub sections: Vec<Section>,
}

pub fn u16le(d: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(d[at..at + 2].try_into().unwrap())
}

pub fn u32le(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}

pub fn u64le(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

fn cstr(d: &[u8], at: usize) -> String {
    let end = d[at..]
        .iter()
        .position(|&b| b == 0)
        .map_or(d.len(), |n| at + n);
    String::from_utf8_lossy(&d[at..end]).into_owned()
}

impl Elf {
    /// Parses the section headers of `data`.
    pub fn parse(data: Vec<u8>) -> Elf {
        assert_eq!(&data[..4], b"\x7fELF", "not ELF");
        assert_eq!(data[EI_CLASS], 2, "not ELF64");
        let shoff = u64le(&data, E_SHOFF) as usize;
        let shentsize = u16le(&data, 0x3a) as usize;
        let shnum = u16le(&data, 0x3c) as usize;
        let shstrndx = u16le(&data, 0x3e) as usize;
        let header = |i: usize| shoff + i * shentsize;
        let strtab_off = u64le(&data, header(shstrndx) + 24) as usize;
        let sections = (0..shnum)
            .map(|i| {
                let h = header(i);
                Section {
                    name: cstr(&data, strtab_off + u32le(&data, h) as usize),
                    sh_type: u32le(&data, h + 4),
                    flags: u64le(&data, h + 8),
                    offset: u64le(&data, h + 24),
                    size: u64le(&data, h + 32),
                    link: u32le(&data, h + 40),
                    info: u32le(&data, h + 44),
                }
            })
            .collect();
        Elf { data, sections }
    }

    /// Reads and parses `path`.
    pub fn open(path: &std::path::Path) -> Elf {
        Elf::parse(crate::util::read(path))
    }

    /// The first section called `name`.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    fn symtab(&self) -> &Section {
        self.sections
            .iter()
            .find(|s| s.sh_type == SHT_SYMTAB)
            .expect("no symbol table")
    }

    /// Number of entries in the symbol table.
    pub fn symbol_count(&self) -> usize {
        (self.symtab().size / 24) as usize
    }

    /// Name of symbol `index`.
    pub fn symbol_name(&self, index: usize) -> String {
        let symtab = self.symtab();
        let strtab = &self.sections[symtab.link as usize];
        let entry = symtab.offset as usize + index * 24;
        cstr(
            &self.data,
            strtab.offset as usize + u32le(&self.data, entry) as usize,
        )
    }

    /// Section index (`st_shndx`) of symbol `index`; 0 for an undefined symbol.
    pub fn symbol_shndx(&self, index: usize) -> u16 {
        u16le(&self.data, self.symtab().offset as usize + index * 24 + 6)
    }

    /// The names of the functions (`STT_FUNC` symbols) the file defines.
    pub fn defined_functions(&self) -> Vec<String> {
        let symtab = self.symtab().offset as usize;
        (1..self.symbol_count())
            .filter(|&i| self.symbol_shndx(i) != 0 && self.data[symtab + i * 24 + 4] & 0xf == 2)
            .map(|i| self.symbol_name(i))
            .collect()
    }

    /// The names of the symbols the file references but does not define.
    pub fn undefined_symbols(&self) -> Vec<String> {
        (1..self.symbol_count())
            .filter(|&i| self.symbol_shndx(i) == 0)
            .map(|i| self.symbol_name(i))
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// Every RELA entry, in section and entry order.
    pub fn relas(&self) -> Vec<Rela> {
        let mut out = Vec::new();
        for s in self.sections.iter().filter(|s| s.sh_type == SHT_RELA) {
            for i in 0..(s.size / 24) as usize {
                let at = s.offset as usize + i * 24;
                let info = u64le(&self.data, at + 8);
                out.push(Rela {
                    target: s.info as usize,
                    entry_offset: at,
                    r_offset: u64le(&self.data, at),
                    sym: (info >> 32) as u32,
                    r_type: info as u32,
                    addend: u64le(&self.data, at + 16) as i64,
                });
            }
        }
        out
    }

    /// The relocations whose symbol is a probe or hook symbol, with the symbol's name.
    pub fn probe_relas(&self) -> Vec<(Rela, String)> {
        self.relas()
            .into_iter()
            .filter(|r| r.sym != 0)
            .map(|r| {
                let name = self.symbol_name(r.sym as usize);
                (r, name)
            })
            .filter(|(_, name)| crate::util::classify(name).is_some())
            .collect()
    }

    /// Names of the sections that belong to a COMDAT (or other) group.
    pub fn group_members(&self) -> std::collections::BTreeSet<String> {
        self.sections
            .iter()
            .filter(|s| s.flags & SHF_GROUP != 0)
            .map(|s| s.name.clone())
            .collect()
    }
}
