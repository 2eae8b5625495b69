//! ELF notes: the walk over a `PT_NOTE` segment's bytes (in the host's byte order) that the
//! runtime uses to find its own note and the build ID of a loaded object, and that a report
//! uses on the object's file.

/// The note type of a GNU build ID (owner `GNU`).
pub const NT_GNU_BUILD_ID: u32 = 3;

/// One note of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Note<'a> {
    /// Its owner's name as stored (`namesz` bytes, with its NUL).
    pub name: &'a [u8],
    /// Its type.
    pub kind: u32,
    /// Its descriptor (`descsz` bytes).
    pub desc: &'a [u8],
}

/// The notes of `bytes` (a `PT_NOTE` segment's contents, its notes padded to `align`: 4, or 8
/// for a segment aligned to 8), in order, up to the first that does not fit.
pub fn notes(bytes: &[u8], align: usize) -> impl Iterator<Item = Note<'_>> {
    let align = align.max(4);
    let mut at = 0usize;
    core::iter::from_fn(move || {
        let word = |at: usize| {
            let b = bytes.get(at..at.checked_add(4)?)?;
            Some(u32::from_ne_bytes(b.try_into().ok()?) as usize)
        };
        let (namesz, descsz, kind) = (word(at)?, word(at + 4)?, word(at + 8)?);
        let name = at + 12;
        // The descriptor and the next note start at `align` from the segment's start (for 4,
        // the same as padding the name and the descriptor each; for 8, not).
        let name_end = name.checked_add(namesz)?;
        let desc = name_end.checked_next_multiple_of(align)?;
        let end = desc.checked_add(descsz)?;
        let note = Note {
            name: bytes.get(name..name_end)?,
            kind: kind as u32,
            desc: bytes.get(desc..end)?,
        };
        at = end.checked_next_multiple_of(align)?;
        Some(note)
    })
}

/// The GNU build ID among the notes of `bytes` (see [`notes`]), if there is one.
pub fn gnu_build_id(bytes: &[u8], align: usize) -> Option<&[u8]> {
    notes(bytes, align)
        .find(|n| n.name == b"GNU\0" && n.kind == NT_GNU_BUILD_ID && !n.desc.is_empty())
        .map(|n| n.desc)
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    fn note(out: &mut Vec<u8>, name: &[u8], kind: u32, desc: &[u8], align: usize) {
        for w in [name.len() as u32, desc.len() as u32, kind] {
            out.extend_from_slice(&w.to_ne_bytes());
        }
        out.extend_from_slice(name);
        out.resize(out.len().next_multiple_of(align), 0);
        out.extend_from_slice(desc);
        out.resize(out.len().next_multiple_of(align), 0);
    }

    /// A build ID behind another owner's note, with either alignment; none in a segment cut
    /// short, or without one.
    #[test]
    fn the_build_id_is_found_behind_other_notes_and_not_in_a_cut_segment() {
        for align in [4, 8] {
            let mut seg = Vec::new();
            note(&mut seg, b"bootprof\0", 1, &[7; 16], align);
            note(&mut seg, b"GNU\0", 1, &[1; 5], align);
            note(&mut seg, b"GNU\0", NT_GNU_BUILD_ID, &[0xab; 20], align);
            assert_eq!(notes(&seg, align).count(), 3);
            assert_eq!(gnu_build_id(&seg, align), Some(&[0xab; 20][..]));
            // Into the build ID (past its padding).
            let cut = seg.len() - (align + 1);
            assert_eq!(gnu_build_id(&seg[..cut], align), None);
            assert_eq!(gnu_build_id(&seg[..20], align), None);
        }
        assert_eq!(notes(&[0xff; 12], 4).count(), 0);
    }
}
