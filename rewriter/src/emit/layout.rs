//! The file: takes the input's bytes (for its ELF header) and the output sections; lays the
//! sections out after the ELF header, each at its alignment, then the section header table, and
//! sets the header's section-table fields (with the extended forms past `SHN_LORESERVE`). Hands
//! on the file as its pieces in order ([`Emitted`]): the contents a rewrite left alone stay
//! borrowed from the input and go to the output file in the same write as the rest, never copied
//! into one buffer first (most of an object is such contents).

use super::{Contents, OutSection};
use crate::elf::{FileHeader64, SectionHeader64, LE};
use object::elf;
use object::pod::{bytes_of, bytes_of_slice};
use std::io::{IoSlice, Write};

/// Zeros for the padding before a section (at most its alignment, clamped to 4096, less one).
static ZEROS: [u8; 4096] = [0; 4096];

/// A rewritten object file, as the pieces it is made of, in file order.
pub struct Emitted<'d> {
    header: FileHeader64,
    /// Each section with contents: the padding before it, and its contents.
    contents: Vec<(usize, Contents<'d>)>,
    /// The padding before the section header table, and the table.
    table_pad: usize,
    table: Vec<SectionHeader64>,
    len: usize,
}

impl Emitted<'_> {
    /// The file's size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the file is empty (never: it has an ELF header).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pieces of the file, in order (empty ones left out).
    fn pieces(&self) -> Vec<IoSlice<'_>> {
        let mut pieces = Vec::with_capacity(2 * self.contents.len() + 3);
        pieces.push(IoSlice::new(bytes_of(&self.header)));
        for (pad, data) in &self.contents {
            if *pad > 0 {
                pieces.push(IoSlice::new(&ZEROS[..*pad]));
            }
            pieces.push(IoSlice::new(data.bytes()));
        }
        pieces.push(IoSlice::new(&ZEROS[..self.table_pad]));
        pieces.push(IoSlice::new(bytes_of_slice(&self.table)));
        pieces.retain(|p| !p.is_empty());
        pieces
    }

    /// Writes the file to `out` with vectored writes, the unchanged contents straight from the
    /// input.
    pub fn write_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut pieces = self.pieces();
        let mut rest = &mut pieces[..];
        while !rest.is_empty() {
            match out.write_vectored(rest) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut rest, n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The file's bytes, in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut file = Vec::with_capacity(self.len);
        for piece in self.pieces() {
            file.extend_from_slice(&piece);
        }
        file
    }
}

/// Lays out the object file.
pub(super) fn write<'d>(
    input: &[u8],
    sections: Vec<OutSection<'d>>,
    shstrndx: usize,
) -> Emitted<'d> {
    let ehsize = std::mem::size_of::<FileHeader64>();
    let (header, _) =
        object::pod::from_bytes::<FileHeader64>(input).expect("the input's header was parsed");
    let mut header = *header;
    let mut len = ehsize;
    let mut table = Vec::with_capacity(sections.len());
    let mut contents = Vec::with_capacity(sections.len());
    for (i, sec) in sections.into_iter().enumerate() {
        let mut sh = sec.header;
        if i == 0 {
            table.push(sh);
            continue;
        }
        if matches!(sec.data, Contents::None) {
            sh.sh_offset.set(LE, len as u64);
            table.push(sh);
            continue;
        }
        let align = sh.sh_addralign.get(LE).clamp(1, 4096) as usize;
        let pad = len.next_multiple_of(align) - len;
        len += pad;
        sh.sh_offset.set(LE, len as u64);
        len += sec.data.bytes().len();
        table.push(sh);
        contents.push((pad, sec.data));
    }
    let table_pad = len.next_multiple_of(8) - len;
    len += table_pad;
    let shoff = len as u64;
    len += table.len() * std::mem::size_of::<SectionHeader64>();
    let count = table.len();
    let extended = elf::SHN_LORESERVE as usize;
    if count >= extended {
        table[0].sh_size.set(LE, count as u64);
    }
    if shstrndx >= extended {
        table[0].sh_link.set(LE, shstrndx as u32);
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
    Emitted {
        header,
        contents,
        table_pad,
        table,
        len,
    }
}
