//! Static archives: takes an archive's bytes and a function that rewrites one member; hands on a
//! private copy of the archive with the rewritten members, or `None` when no member changed.
//!
//! Members keep their order, names and headers, so the linker pulls in exactly the members it
//! would have pulled from the original; the symbol index (`/` or `/SYM64/`) keeps its symbols and
//! gets the members' new offsets (the rewriter adds only local symbols, so the index's symbols
//! stay right). A thin archive (`!<thin>`) becomes a regular one holding its members' contents.

use crate::error::{Error, Location, Result};
use std::path::Path;

const MAGIC: &[u8; 8] = b"!<arch>\n";
const THIN_MAGIC: &[u8; 8] = b"!<thin>\n";
const HEADER: usize = 60;

/// Whether `data` starts like an archive.
pub fn is_archive(data: &[u8]) -> bool {
    data.starts_with(MAGIC) || data.starts_with(THIN_MAGIC)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MemberKind {
    Symbols32,
    Symbols64,
    LongNames,
    Regular,
}

struct Member<'a> {
    header: [u8; HEADER],
    kind: MemberKind,
    name: String,
    /// Offset of the header in the original archive.
    offset: usize,
    data: std::borrow::Cow<'a, [u8]>,
}

fn parse_decimal(field: &[u8]) -> Option<usize> {
    let s = std::str::from_utf8(field).ok()?.trim_end();
    if s.is_empty() {
        return Some(0);
    }
    s.parse().ok()
}

/// Reads the members of `data`; for a thin archive, reads member files relative to `path`.
fn members<'a>(data: &'a [u8], path: &Path) -> Result<Vec<Member<'a>>> {
    let file = path.display().to_string();
    let err = |offset: usize, what: String| Error::Archive {
        at: Location {
            offset: Some(offset as u64),
            ..Location::file(file.clone())
        },
        what,
    };
    let thin = data.starts_with(THIN_MAGIC);
    let mut pos = MAGIC.len();
    let mut out = Vec::new();
    let mut long_names: &[u8] = &[];
    while pos < data.len() {
        if data.len() - pos < HEADER {
            if data[pos..].iter().all(|&b| b == b'\n') {
                break;
            }
            return Err(err(pos, "truncated member header".into()));
        }
        let mut header = [0u8; HEADER];
        header.copy_from_slice(&data[pos..pos + HEADER]);
        if &header[58..60] != b"`\n" {
            return Err(err(pos, "bad member header terminator".into()));
        }
        let size =
            parse_decimal(&header[48..58]).ok_or_else(|| err(pos, "bad member size".into()))?;
        let raw_name = std::str::from_utf8(&header[..16]).unwrap_or("").trim_end();
        let kind = match raw_name {
            "/" => MemberKind::Symbols32,
            "/SYM64/" => MemberKind::Symbols64,
            "//" => MemberKind::LongNames,
            _ if raw_name.starts_with("#1/") || raw_name.starts_with("__.SYMDEF") => {
                return Err(err(pos, "BSD-format archives are not supported".into()));
            }
            _ => MemberKind::Regular,
        };
        let name = match raw_name.strip_prefix('/') {
            Some(index) if kind == MemberKind::Regular => {
                let at: usize = index
                    .parse()
                    .map_err(|_| err(pos, format!("bad long name `{raw_name}`")))?;
                let rest = long_names
                    .get(at..)
                    .ok_or_else(|| err(pos, "long name out of range".into()))?;
                let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                String::from_utf8_lossy(&rest[..end])
                    .trim_end_matches('/')
                    .to_string()
            }
            _ => raw_name.trim_end_matches('/').to_string(),
        };
        let body_start = pos + HEADER;
        // Thin archives store only the index and the long names; members live in their files.
        let stored = !thin || kind != MemberKind::Regular;
        let member_data: std::borrow::Cow<'a, [u8]> = if stored {
            let end = body_start
                .checked_add(size)
                .filter(|&e| e <= data.len())
                .ok_or_else(|| {
                    err(
                        pos,
                        format!("member `{name}` runs past the end of the archive"),
                    )
                })?;
            std::borrow::Cow::Borrowed(&data[body_start..end])
        } else {
            let member_path = path.parent().unwrap_or(Path::new(".")).join(&name);
            std::borrow::Cow::Owned(
                std::fs::read(&member_path).map_err(|e| Error::io(member_path, e))?,
            )
        };
        if kind == MemberKind::LongNames {
            if let std::borrow::Cow::Borrowed(b) = member_data {
                long_names = b;
            }
        }
        out.push(Member {
            header,
            kind,
            name,
            offset: pos,
            data: member_data,
        });
        pos = body_start + if stored { size + (size & 1) } else { 0 };
    }
    Ok(out)
}

/// Rewrites the archive `data` (read from `path`): `rewrite(member_name, bytes)` returns the new
/// bytes of a member, or `None` to keep it. Returns `None` when nothing changed (and the archive is
/// not thin).
pub fn rewrite_archive(
    data: &[u8],
    path: &Path,
    mut rewrite: impl FnMut(&str, &[u8]) -> Result<Option<Vec<u8>>>,
) -> Result<Option<Vec<u8>>> {
    let thin = data.starts_with(THIN_MAGIC);
    let mut members = members(data, path)?;
    let mut changed = false;
    for m in members.iter_mut().filter(|m| m.kind == MemberKind::Regular) {
        if !m.data.starts_with(b"\x7fELF") {
            continue;
        }
        if let Some(new) = rewrite(&m.name, &m.data)? {
            m.data = std::borrow::Cow::Owned(new);
            changed = true;
        }
    }
    if !changed && !thin {
        return Ok(None);
    }

    // New offsets: old header offset -> new header offset.
    let mut new_offset = std::collections::HashMap::new();
    let mut pos = MAGIC.len();
    for m in &members {
        new_offset.insert(m.offset, pos);
        pos += HEADER + m.data.len() + (m.data.len() & 1);
    }
    let mut out = Vec::with_capacity(pos);
    out.extend_from_slice(MAGIC);
    for m in &members {
        let mut header = m.header;
        let size = format!("{:<10}", m.data.len());
        header[48..58].copy_from_slice(size.as_bytes());
        out.extend_from_slice(&header);
        match m.kind {
            MemberKind::Symbols32 => {
                out.extend_from_slice(&remap_index::<4>(&m.data, &new_offset, path)?)
            }
            MemberKind::Symbols64 => {
                out.extend_from_slice(&remap_index::<8>(&m.data, &new_offset, path)?)
            }
            _ => out.extend_from_slice(&m.data),
        }
        if m.data.len() & 1 == 1 {
            out.push(b'\n');
        }
    }
    Ok(Some(out))
}

/// Rewrites the member offsets of a GNU symbol index with `W`-byte big-endian words.
fn remap_index<const W: usize>(
    index: &[u8],
    new_offset: &std::collections::HashMap<usize, usize>,
    path: &Path,
) -> Result<Vec<u8>> {
    let bad = |what: &str| Error::Archive {
        at: Location {
            section: Some(if W == 4 { "/" } else { "/SYM64/" }.into()),
            ..Location::file(path.display().to_string())
        },
        what: what.into(),
    };
    let word = |at: usize| -> Option<u64> {
        let b = index.get(at..at + W)?;
        Some(b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    };
    let count = word(0).ok_or_else(|| bad("truncated symbol index"))? as usize;
    let table_end = count
        .checked_add(1)
        .and_then(|c| c.checked_mul(W))
        .filter(|&e| e <= index.len())
        .ok_or_else(|| bad("symbol index count runs past its member"))?;
    let mut out = index.to_vec();
    for i in 0..count {
        let at = W * (i + 1);
        let old = word(at).ok_or_else(|| bad("truncated symbol index"))? as usize;
        let new = *new_offset
            .get(&old)
            .ok_or_else(|| bad("symbol index points at no member"))?;
        let bytes = (new as u64).to_be_bytes();
        out[at..at + W].copy_from_slice(&bytes[8 - W..]);
    }
    debug_assert!(table_end <= out.len());
    Ok(out)
}
