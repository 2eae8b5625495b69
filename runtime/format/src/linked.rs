//! A linked executable's or shared object's site tables, read through its loadable segments:
//! where each site's bytes are in the file, whether they are its disabled (NOP) bytes, and the
//! names the table points at. Shared by `bootprof list` and by `bootprof-link`'s check of the
//! binary it has just linked.

extern crate std;

use crate::{code, Site, SECTION_NAME};
use object::read::elf::ElfFile64;
use object::{LittleEndian as LE, Object, ObjectSection, ObjectSegment};
use std::string::{String, ToString};
use std::vec::Vec;

/// A linked ELF file's bytes, addressed by virtual address through its loadable segments.
pub struct Image<'d> {
    data: &'d [u8],
    /// Each loadable segment.
    segments: Vec<Segment>,
}

/// A loadable segment: (virtual address, file offset, file size).
type Segment = (u64, u64, u64);

impl<'d> Image<'d> {
    /// The image of `elf`, whose bytes are `data`.
    pub fn new(elf: &ElfFile64<'d, LE>, data: &'d [u8]) -> Image<'d> {
        Image {
            data,
            segments: elf
                .segments()
                .map(|s| (s.address(), s.file_range().0, s.file_range().1))
                .collect(),
        }
    }

    /// Where the byte at `addr` is in the file.
    pub fn offset_of(&self, addr: u64) -> Option<u64> {
        self.segment_of(addr).map(|(va, off, _)| off + (addr - va))
    }

    /// The segment holding the byte at `addr`.
    fn segment_of(&self, addr: u64) -> Option<Segment> {
        self.segments
            .iter()
            .find(|&&(va, _, size)| addr >= va && addr - va < size)
            .copied()
    }

    /// The `len` bytes at `addr`.
    pub fn bytes_at(&self, addr: u64, len: usize) -> Option<&'d [u8]> {
        self.bytes_in(self.segment_of(addr)?, addr, len)
    }

    /// The `len` bytes at `addr`, which must be in `segment` (one of [`Image::segment_of`]'s).
    fn bytes_in(&self, (va, off, size): Segment, addr: u64, len: usize) -> Option<&'d [u8]> {
        if addr < va || addr - va >= size {
            return None;
        }
        let at = usize::try_from(off + (addr - va)).ok()?;
        self.data.get(at..at.checked_add(len)?)
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
    let found = each_linked_site(elf, image, |site| {
        sites.push(site);
        true
    })?;
    Ok(found.then_some(sites))
}

/// Calls `each` with every site of every `bootprof_sites` section of `elf`, in table order, each
/// checked against its disabled bytes, until it returns false; returns whether the binary has
/// such a section. What checks a table without keeping it (bootprof-link's check of the binary
/// it has just linked, tens of thousands of sites) uses.
pub fn each_linked_site(
    elf: &ElfFile64<'_, LE>,
    image: &Image<'_>,
    mut each: impl FnMut(LinkedSite) -> bool,
) -> Result<bool, Unreadable> {
    let mut tables = 0;
    // The segment of the last site: a table's sites are in one or two text segments.
    let mut segment = (0u64, 0u64, 0u64);
    for section in elf.sections().filter(|s| s.name() == Ok(SECTION_NAME)) {
        tables += 1;
        let bytes = section.data().map_err(|e| Unreadable(e.to_string()))?;
        for site in crate::sites(bytes, section.address()) {
            let site = site.map_err(|e| Unreadable(e.to_string()))?;
            let (va, _, size) = segment;
            if site.site < va || site.site - va >= size {
                segment = image.segment_of(site.site).unwrap_or_default();
            }
            let len = site.form.len();
            let expected = code::disabled_bytes(site.kind, site.form);
            let nop = image
                .bytes_in(segment, site.site, len)
                .is_some_and(|b| b == &expected[..len]);
            if !each(LinkedSite { site, nop }) {
                return Ok(true);
            }
        }
    }
    Ok(tables > 0)
}
