//! The file: takes the input's bytes (for its ELF header) and the output sections; lays the
//! sections out after the ELF header, each at its alignment, then the section header table, and
//! sets the header's section-table fields (with the extended forms past `SHN_LORESERVE`).

use super::{Contents, OutSection};
use crate::elf::{FileHeader64, SectionHeader64, LE};
use object::elf;
use object::pod::bytes_of;

/// Writes the object file.
pub(super) fn write(input: &[u8], mut sections: Vec<OutSection<'_>>, shstrndx: usize) -> Vec<u8> {
    let ehsize = std::mem::size_of::<FileHeader64>();
    let shdr = std::mem::size_of::<SectionHeader64>();
    let size_hint = sections
        .iter()
        .map(|s| s.data.bytes().len() + 16)
        .sum::<usize>()
        + sections.len() * shdr;
    let mut file = Vec::with_capacity(ehsize + size_hint);
    let (header, _) =
        object::pod::from_bytes::<FileHeader64>(input).expect("the input's header was parsed");
    let mut header = *header;
    file.resize(ehsize, 0);
    for sec in sections.iter_mut().skip(1) {
        if matches!(sec.data, Contents::None) {
            sec.header.sh_offset.set(LE, file.len() as u64);
            continue;
        }
        let align = sec.header.sh_addralign.get(LE).clamp(1, 4096) as usize;
        while file.len() % align != 0 {
            file.push(0);
        }
        sec.header.sh_offset.set(LE, file.len() as u64);
        file.extend_from_slice(sec.data.bytes());
    }
    while file.len() % 8 != 0 {
        file.push(0);
    }
    let shoff = file.len() as u64;
    let count = sections.len();
    let extended = elf::SHN_LORESERVE as usize;
    if count >= extended {
        sections[0].header.sh_size.set(LE, count as u64);
    }
    if shstrndx >= extended {
        sections[0].header.sh_link.set(LE, shstrndx as u32);
    }
    for sec in &sections {
        file.extend_from_slice(bytes_of(&sec.header));
    }
    // No program headers in a relocatable object.
    header.e_shoff.set(LE, shoff);
    header
        .e_shnum
        .set(LE, if count >= extended { 0 } else { count as u16 });
    header.e_shstrndx.set(
        LE,
        if shstrndx >= extended {
            elf::SHN_XINDEX
        } else {
            elf::SymbolSection(shstrndx as u16)
        },
    );
    file[..ehsize].copy_from_slice(bytes_of(&header));
    file
}
