//! Static archives: takes an archive's bytes and a function that rewrites one member; hands on a
//! private copy of the archive with the rewritten members, or `None` when no member changed.
//!
//! Reading is `object::read::archive`'s: GNU archives with a 32-bit (`/`) or 64-bit (`/SYM64/`)
//! symbol index, regular or thin (`!<thin>`, members in their own files, read relative to the
//! archive). The writer is ours because `object` has none: it writes a regular GNU archive with
//! the members in their order, under their names (long ones in a `//` table) and with their
//! dates, owners and modes, and the symbol index with the same symbols in the same order,
//! pointing at the members' new places (the rewriter adds only local symbols, so the index stays
//! right). A thin archive so becomes a regular one holding its members' contents.

use crate::error::{Error, Location, Result};
use object::archive::Header;
use object::read::archive::{ArchiveFile, ArchiveKind};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// Size of a member header.
const HEADER_SIZE: usize = std::mem::size_of::<Header>();

/// One member: where its header was, its name, its header's other fields, its contents.
struct Member<'a> {
    old_offset: u64,
    name: &'a [u8],
    header: &'a Header,
    data: Cow<'a, [u8]>,
}

/// Rewrites the archive `data` (read from `path`): `rewrite(member_name, bytes)` returns the new
/// bytes of a member, or `None` to keep it. Returns `None` when nothing changed (and the archive is
/// not thin).
pub fn rewrite_archive(
    data: &[u8],
    path: &Path,
    mut rewrite: impl FnMut(&str, &[u8]) -> Result<Option<Vec<u8>>>,
) -> Result<Option<Vec<u8>>> {
    let bad = |what: String| Error::Archive {
        at: Location::file(path.display().to_string()),
        what,
    };
    let archive = ArchiveFile::parse(data).map_err(|e| bad(e.to_string()))?;
    let wide = match archive.kind() {
        ArchiveKind::Gnu | ArchiveKind::Unknown => false,
        ArchiveKind::Gnu64 => true,
        ArchiveKind::Bsd | ArchiveKind::Bsd64 => {
            return Err(bad("BSD-format archives are not supported".into()))
        }
        kind => return Err(bad(format!("{kind:?}-format archives are not supported"))),
    };
    let mut members = read_members(&archive, data, path)?;
    let mut changed = false;
    for m in &mut members {
        if !bootprof_format::file::is_elf(&m.data) {
            continue;
        }
        let name = String::from_utf8_lossy(m.name);
        if let Some(new) = rewrite(&name, &m.data)? {
            m.data = Cow::Owned(new);
            changed = true;
        }
    }
    if !changed && !archive.is_thin() {
        return Ok(None);
    }
    let index = match archive.symbols().map_err(|e| bad(e.to_string()))? {
        Some(symbols) => {
            let mut index = Vec::new();
            for s in symbols {
                let s = s.map_err(|e| bad(e.to_string()))?;
                index.push((s.name(), s.offset().0));
            }
            Some(index)
        }
        None => None,
    };
    write_archive(&members, index.as_deref(), wide)
        .map(Some)
        .map_err(bad)
}

/// The members of `archive`, with their contents (for a thin archive, read from their files).
fn read_members<'a>(
    archive: &ArchiveFile<'a>,
    data: &'a [u8],
    path: &Path,
) -> Result<Vec<Member<'a>>> {
    let file = path.display().to_string();
    let mut out = Vec::new();
    for member in archive.members() {
        let member = member.map_err(|e| Error::Archive {
            at: Location::file(file.clone()),
            what: e.to_string(),
        })?;
        let header = member.header().ok_or_else(|| Error::Archive {
            at: Location::file(file.clone()),
            what: "a member without a GNU header".into(),
        })?;
        // The header lies inside `data`: its distance from the start is the member's offset,
        // which the symbol index refers to.
        let old_offset = (header as *const Header as usize - data.as_ptr() as usize) as u64;
        let name = member.name();
        let contents = if member.is_thin() {
            let member_path = path
                .parent()
                .unwrap_or(Path::new("."))
                .join(String::from_utf8_lossy(name).as_ref());
            Cow::Owned(std::fs::read(&member_path).map_err(|e| Error::io(member_path, e))?)
        } else {
            Cow::Borrowed(member.data(data).map_err(|e| Error::Archive {
                at: Location {
                    offset: Some(old_offset),
                    ..Location::file(file.clone())
                },
                what: e.to_string(),
            })?)
        };
        out.push(Member {
            old_offset,
            name,
            header,
            data: contents,
        });
    }
    Ok(out)
}

/// Writes a regular GNU archive of `members`, with a symbol index of `index` (name, old member
/// offset) when the original had one: 64-bit words when `wide`.
fn write_archive(
    members: &[Member<'_>],
    index: Option<&[(&[u8], u64)]>,
    wide: bool,
) -> std::result::Result<Vec<u8>, String> {
    let word = if wide { 8 } else { 4 };
    let index_size = index.map(|symbols| {
        word * (1 + symbols.len()) + symbols.iter().map(|(n, _)| n.len() + 1).sum::<usize>()
    });
    // Names that do not fit a header's 16 bytes (with GNU's closing `/`) go to the `//` table.
    let mut long_names = Vec::new();
    let mut name_fields = Vec::with_capacity(members.len());
    for m in members {
        if m.name.len() <= 15 && !m.name.contains(&b'/') {
            let mut field = m.name.to_vec();
            field.push(b'/');
            name_fields.push(field);
        } else {
            name_fields.push(format!("/{}", long_names.len()).into_bytes());
            long_names.extend_from_slice(m.name);
            long_names.extend_from_slice(b"/\n");
        }
    }
    let padded = |size: usize| HEADER_SIZE + size + (size & 1);
    let mut pos = object::archive::MAGIC.len();
    pos += index_size.map_or(0, padded);
    if !long_names.is_empty() {
        pos += padded(long_names.len());
    }
    let mut new_offset = HashMap::new();
    for m in members {
        new_offset.insert(m.old_offset, pos);
        pos += padded(m.data.len());
    }

    let mut out = Vec::with_capacity(pos);
    out.extend_from_slice(&object::archive::MAGIC);
    if let (Some(symbols), Some(size)) = (index, index_size) {
        let mut table = Vec::with_capacity(size);
        let put = |table: &mut Vec<u8>, v: usize| {
            table.extend_from_slice(&(v as u64).to_be_bytes()[8 - word..]);
        };
        put(&mut table, symbols.len());
        for &(_, old) in symbols {
            let new = new_offset
                .get(&old)
                .ok_or("the symbol index points at no member")?;
            put(&mut table, *new);
        }
        for (name, _) in symbols {
            table.extend_from_slice(name);
            table.push(0);
        }
        let name: &[u8] = if wide { b"/SYM64/" } else { b"/" };
        append_bytes(&mut out, header(name, b"0"), &table)?;
    }
    if !long_names.is_empty() {
        append_bytes(&mut out, header(b"//", b"0"), &long_names)?;
    }
    for (m, name) in members.iter().zip(name_fields) {
        let mut header = *m.header;
        header.name = field(&name);
        append_bytes(&mut out, header, &m.data)?;
    }
    Ok(out)
}

/// [`append_member`] of `data`, in memory.
fn append_bytes(out: &mut Vec<u8>, header: Header, data: &[u8]) -> std::result::Result<(), String> {
    append_member(out, header, data.len(), |f| f.write_all(data)).map_err(|e| e.to_string())
}

/// A member's header named by the field `name`, with no date or owner, and `mode`; its size
/// is [`append_member`]'s to set. (Mode 0 for the symbol index and the long-name table.)
pub(crate) fn header(name: &[u8], mode: &[u8]) -> Header {
    Header {
        name: field(name),
        date: field(b"0"),
        uid: field(b"0"),
        gid: field(b"0"),
        mode: field(mode),
        size: field(b"0"),
        terminator: object::archive::TERMINATOR,
    }
}

/// A header field: `text` padded with spaces.
fn field<const N: usize>(text: &[u8]) -> [u8; N] {
    let mut f = [b' '; N];
    f[..text.len()].copy_from_slice(text);
    f
}

/// Appends a member to an archive being written: `header`, its size set to `size`; the
/// contents, which `write` writes (an error unless they are `size` bytes); and a newline to make
/// the size even.
pub(crate) fn append_member<W: Write>(
    out: &mut W,
    mut header: Header,
    size: usize,
    write: impl FnOnce(&mut Counted<'_, W>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    header.size = field(size.to_string().as_bytes());
    out.write_all(object::pod::bytes_of(&header))?;
    let mut counted = Counted { out, len: 0 };
    write(&mut counted)?;
    if counted.len != size {
        return Err(std::io::Error::other(format!(
            "a member of {size} bytes written as {}",
            counted.len
        )));
    }
    if size & 1 == 1 {
        counted.out.write_all(b"\n")?;
    }
    Ok(())
}

/// A writer that counts what it passes on.
pub(crate) struct Counted<'a, W: Write> {
    out: &'a mut W,
    len: usize,
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.len += n;
        Ok(n)
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        let n = self.out.write_vectored(bufs)?;
        self.len += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
