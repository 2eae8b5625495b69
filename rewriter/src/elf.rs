//! The x86-64 ELF layer under every phase: the type aliases that fix the target (64-bit,
//! little-endian), the checked view of one relocatable object the phases share, and the small
//! readers (section names, relocation names, mapping a file) written once here.

use crate::error::{Error, Location, Result};
use object::elf;
use object::read::elf::{FileHeader, SectionHeader, SectionTable, SymbolTable};
use object::read::SectionIndex;

/// The byte order of every file bootprof reads or writes.
pub use object::LittleEndian as LE;
/// An ELF file header of the one target.
pub type FileHeader64 = elf::FileHeader64<LE>;
/// A section header.
pub type SectionHeader64 = elf::SectionHeader64<LE>;
/// A symbol.
pub type Sym64 = elf::Sym64<LE>;
/// A relocation with addend.
pub type Rela64 = elf::Rela64<LE>;
/// A relocation without addend.
pub type Rel64 = elf::Rel64<LE>;
/// The section table of a parsed object.
pub type Sections<'d> = SectionTable<'d, FileHeader64>;
/// The symbol table of a parsed object.
pub type Symbols<'d> = SymbolTable<'d, FileHeader64>;

/// A checked relocatable object: its bytes, header, sections and symbol table, parsed once by
/// the scan and read by every later phase.
pub struct Object<'d> {
    /// The file's name in messages (for an archive member, `archive(member)`).
    pub file: String,
    /// The file's bytes.
    pub data: &'d [u8],
    /// The file header.
    pub header: &'d FileHeader64,
    /// The section headers.
    pub sections: Sections<'d>,
    /// The symbol table (empty when the object has none).
    pub symbols: Symbols<'d>,
    /// The symbol table's string table, as bytes (empty when there is none): names are read
    /// from it directly, most for their first bytes only.
    pub strings: &'d [u8],
}

impl std::fmt::Debug for Object<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Object({})", self.file)
    }
}

impl<'d> Object<'d> {
    /// Parses `data` (named `file` in messages): an x86-64 little-endian relocatable object with
    /// a readable section table whose section 0 is `SHT_NULL`.
    pub fn parse(data: &'d [u8], file: &str) -> Result<Object<'d>> {
        let header = parse_header(data, file)?;
        let at = || Location::file(file);
        let sections = header
            .sections(LE, data)
            .map_err(|e| Error::malformed(at(), e))?;
        let symbols = sections
            .symbols(LE, data, elf::SHT_SYMTAB)
            .map_err(|e| Error::malformed(at(), e))?;
        if sections
            .iter()
            .next()
            .is_some_and(|s| s.sh_type(LE) != elf::SHT_NULL)
        {
            return Err(Error::malformed(
                Location {
                    offset: Some(header.e_shoff(LE)),
                    ..at()
                },
                "section 0 is not SHT_NULL",
            ));
        }
        let strings = match symbols.string_section().0 {
            0 => &[][..],
            i => sections
                .section(SectionIndex(i))
                .and_then(|s| s.data(LE, data))
                .map_err(|e| Error::malformed(at(), e))?,
        };
        Ok(Object {
            file: file.to_string(),
            data,
            header,
            sections,
            symbols,
            strings,
        })
    }

    /// The symbol string table from a symbol's `st_name` on: its name and what follows, for a
    /// look at the name's first bytes without finding its end (empty when out of range).
    pub fn name_from(&self, st_name: u32) -> &'d [u8] {
        self.strings.get(st_name as usize..).unwrap_or_default()
    }

    /// A location in this object: the file, and the section `index` when given.
    pub fn at(&self, section: Option<usize>) -> Location {
        Location {
            section: section.map(|i| self.section_name(i)),
            ..Location::file(self.file.clone())
        }
    }

    /// The name of section `index`, or `#index` when it has none.
    pub fn section_name(&self, index: usize) -> String {
        self.section_name_in(index).into_owned()
    }

    /// [`Object::section_name`], borrowed from the object where it can be: what each of
    /// tens of thousands of sites keeps (a copy of it is a pointer's, its drop nothing).
    pub fn section_name_in(&self, index: usize) -> std::borrow::Cow<'d, str> {
        self.sections
            .section(SectionIndex(index))
            .ok()
            .and_then(|s| self.sections.section_name(LE, s).ok())
            .map_or_else(|| format!("#{index}").into(), String::from_utf8_lossy)
    }

    /// The executable sections with contents: each one's index and bytes.
    pub fn executable_sections(&self) -> impl Iterator<Item = (usize, &'d [u8])> + '_ {
        self.sections
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.sh_flags(LE).0 & elf::SHF_EXECINSTR.0 != 0 && s.sh_type(LE) != elf::SHT_NOBITS
            })
            .filter_map(|(i, s)| Some((i, s.data(LE, self.data).ok()?)))
    }

    /// The contents of section `index`.
    pub fn section_data(&self, index: usize) -> Result<&'d [u8]> {
        let section = self
            .sections
            .section(SectionIndex(index))
            .map_err(|e| Error::malformed(self.at(None), e))?;
        section
            .data(LE, self.data)
            .map_err(|e| Error::malformed(self.at(Some(index)), e))
    }
}

/// Checks the ELF identification and header: 64-bit, little-endian, x86-64, relocatable.
pub fn parse_header<'d>(data: &'d [u8], file: &str) -> Result<&'d FileHeader64> {
    let at = || Location::file(file);
    if data.len() < 16 || !bootprof_format::file::is_elf(data) {
        return Err(Error::NotElf(at()));
    }
    let unsupported = |what: String| Error::Unsupported { at: at(), what };
    if data[4] != elf::ELFCLASS64.0 {
        return Err(unsupported("32-bit (ELFCLASS32)".into()));
    }
    if data[5] != elf::ELFDATA2LSB.0 {
        return Err(unsupported("big-endian".into()));
    }
    let header = FileHeader64::parse(data).map_err(|e| Error::malformed(at(), e))?;
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

/// The NUL-terminated string at the start of `bytes` (all of them when there is no NUL). Symbol
/// names are short: a loop in line finds their end sooner than a call to a search routine, and
/// looking at eight bytes a step (a word has a zero byte where `(w - 0x01..01) & !w & 0x80..80`
/// has a bit set, the lowest such byte being the first zero) sooner than one at a time.
pub fn c_str(bytes: &[u8]) -> &[u8] {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut end = 0;
    while let Some(word) = bytes.get(end..end + 8) {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let zero = w.wrapping_sub(ONES) & !w & HIGHS;
        if zero != 0 {
            return &bytes[..end + (zero.trailing_zeros() / 8) as usize];
        }
        end += 8;
    }
    while end < bytes.len() && bytes[end] != 0 {
        end += 1;
    }
    &bytes[..end]
}

/// Name of an x86-64 relocation type, for messages.
pub fn reloc_name(r_type: elf::RelocationType) -> &'static str {
    match r_type {
        elf::R_X86_64_NONE => "R_X86_64_NONE",
        elf::R_X86_64_64 => "R_X86_64_64",
        elf::R_X86_64_PC32 => "R_X86_64_PC32",
        elf::R_X86_64_PLT32 => "R_X86_64_PLT32",
        elf::R_X86_64_GOTPCREL => "R_X86_64_GOTPCREL",
        elf::R_X86_64_32 => "R_X86_64_32",
        elf::R_X86_64_32S => "R_X86_64_32S",
        elf::R_X86_64_PC64 => "R_X86_64_PC64",
        elf::R_X86_64_GOTPCRELX => "R_X86_64_GOTPCRELX",
        elf::R_X86_64_REX_GOTPCRELX => "R_X86_64_REX_GOTPCRELX",
        _ => "R_X86_64_?",
    }
}

/// Maps `path` read-only.
pub fn map(path: &std::path::Path) -> Result<memmap2::Mmap> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the map is read-only and private to this process; like every linker we assume
    // inputs are not truncated under us while the link runs.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::c_str;

    /// The string ends at its first NUL wherever that is in a word, whatever follows it (bytes
    /// of 0x01 and 0x80 after a NUL are what the word test could mistake for more zeros).
    #[test]
    fn a_string_ends_at_its_first_nul() {
        for len in 0..20 {
            for after in [0x00, 0x01, 0x80, 0xff] {
                let mut bytes: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                bytes.push(0);
                bytes.extend([after; 9]);
                assert_eq!(c_str(&bytes), &bytes[..len], "{len} {after:#x}");
            }
            let unterminated: Vec<u8> = vec![0x80; len];
            assert_eq!(c_str(&unterminated), &unterminated[..]);
        }
        assert_eq!(c_str(b"\x01\x00\x01"), b"\x01");
    }
}
