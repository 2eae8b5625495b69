//! A linked executable's or shared object's site tables, read through its loadable segments:
//! where each site's bytes are in the file, whether they are its disabled (NOP) bytes, and the
//! names the table points at. Shared by `bootprof list` and by `bootprof-link`'s check of the
//! binary it has just linked.

extern crate std;

use crate::{Site, SECTION_NAME};
use object::read::elf::ElfFile64;
use object::{LittleEndian as LE, Object, ObjectSection, ObjectSegment};
use std::string::{String, ToString};
use std::vec::Vec;

/// A linked ELF file's bytes, addressed by virtual address through its loadable segments.
pub struct Image<'d> {
    data: &'d [u8],
    /// (virtual address, file offset, file size) of each segment.
    segments: Vec<(u64, u64, u64)>,
    /// The segment the last address was found in: a table's sites come in address order, most
    /// in the segment of the one before.
    last: core::cell::Cell<usize>,
}

impl<'d> Image<'d> {
    /// The image of `elf`, whose bytes are `data`.
    pub fn new(elf: &ElfFile64<'d, LE>, data: &'d [u8]) -> Image<'d> {
        Image {
            data,
            segments: elf
                .segments()
                .map(|s| (s.address(), s.file_range().0, s.file_range().1))
                .collect(),
            last: core::cell::Cell::new(0),
        }
    }

    /// Where the byte at `addr` is in the file.
    pub fn offset_of(&self, addr: u64) -> Option<u64> {
        let holds = |&(va, _, size): &(u64, u64, u64)| addr >= va && addr - va < size;
        let at = match self.segments.get(self.last.get()).filter(|s| holds(s)) {
            Some(_) => self.last.get(),
            None => {
                let at = self.segments.iter().position(holds)?;
                self.last.set(at);
                at
            }
        };
        let (va, off, _) = self.segments[at];
        Some(off + (addr - va))
    }

    /// The `len` bytes at `addr`.
    pub fn bytes_at(&self, addr: u64, len: usize) -> Option<&'d [u8]> {
        let off = usize::try_from(self.offset_of(addr)?).ok()?;
        self.data.get(off..off.checked_add(len)?)
    }

    /// The NUL-terminated string at `addr` (at most 4 KiB).
    pub fn string_at(&self, addr: Option<u64>) -> Option<String> {
        let off = usize::try_from(self.offset_of(addr?)?).ok()?;
        let rest = self.data.get(off..)?;
        let end = rest.iter().take(4096).position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    }
}

/// One site of a linked binary's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkedSite {
    /// The table entry, addresses resolved.
    pub site: Site,
    /// Whether the bytes at the site are its disabled bytes.
    pub nop: bool,
}

/// Why a binary's tables could not be read: the message, for the caller's location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable(pub String);

impl core::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Every site of every `bootprof_sites` section of `elf`, in table order, each checked against
/// its disabled bytes; `None` when the binary has no such section.
pub fn linked_sites(
    elf: &ElfFile64<'_, LE>,
    image: &Image<'_>,
) -> Result<Option<Vec<LinkedSite>>, Unreadable> {
    let mut sites = Vec::new();
    let mut tables = 0;
    for (bytes, address) in tables_of(elf) {
        tables += 1;
        for site in crate::sites(bytes?, address) {
            let site = site.map_err(|e| Unreadable(e.to_string()))?;
            let nop = holds_nop(image, &site.place());
            sites.push(LinkedSite { site, nop });
        }
    }
    Ok((tables > 0).then_some(sites))
}

/// The first site of `elf`'s tables (in table order) whose bytes are not its disabled bytes,
/// read whole; `None` when every site holds its NOP or there is no table. The tables are read
/// as [`linked_sites`] reads them, with the same errors, but only each site's place: what a
/// check of the binary just linked needs.
pub fn first_without_nop(
    elf: &ElfFile64<'_, LE>,
    image: &Image<'_>,
) -> Result<Option<Site>, Unreadable> {
    let unreadable = |e: crate::TableError| Unreadable(e.to_string());
    for (bytes, address) in tables_of(elf) {
        let bytes = bytes?;
        for (i, place) in crate::sites(bytes, address).places().enumerate() {
            let place = place.map_err(unreadable)?;
            if !holds_nop(image, &place) {
                // Entries before it read without error as places: they read whole too.
                let site = crate::sites(bytes, address).nth(i);
                return site.transpose().map_err(unreadable);
            }
        }
    }
    Ok(None)
}

/// The bytes and address of each `bootprof_sites` section of `elf`.
fn tables_of<'e, 'd: 'e>(
    elf: &'e ElfFile64<'d, LE>,
) -> impl Iterator<Item = (Result<&'d [u8], Unreadable>, u64)> + 'e {
    elf.sections()
        .filter(|s| s.name() == Ok(SECTION_NAME))
        .map(|s| (s.data().map_err(|e| Unreadable(e.to_string())), s.address()))
}

/// Whether the bytes at `place` in `image` are its disabled bytes.
fn holds_nop(image: &Image<'_>, place: &crate::Place) -> bool {
    let len = place.form.len();
    image
        .bytes_at(place.site, len)
        .is_some_and(|b| crate::code::same_site_bytes(b, &place.nop(), len))
}
