//! What kind of file an input is, by its first bytes: the one place the rewriter and the tools
//! sniff ELF, archive and LLVM bitcode magic.

#[cfg(feature = "std")]
extern crate std;

/// `\x7fELF`.
pub const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
/// A regular static archive.
pub const ARCHIVE_MAGIC: &[u8; 8] = b"!<arch>\n";
/// A thin archive (members stay in their own files).
pub const THIN_ARCHIVE_MAGIC: &[u8; 8] = b"!<thin>\n";
/// How many leading bytes [`classify`] needs to tell every kind apart.
pub const SNIFF_LEN: usize = 18;

/// What kind of file an input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A relocatable ELF object (`ET_REL`, either byte order).
    Object,
    /// Any other ELF file: an executable or shared object.
    OtherElf,
    /// A static archive, regular or thin.
    Archive,
    /// LLVM bitcode (clang `-flto`), raw or in its wrapper.
    Bitcode,
    /// Anything else.
    Other,
}

/// Whether `data` starts with the ELF magic.
pub fn is_elf(data: &[u8]) -> bool {
    data.starts_with(ELF_MAGIC)
}

/// Whether `data` starts like a static archive (regular or thin).
pub fn is_archive(data: &[u8]) -> bool {
    data.starts_with(ARCHIVE_MAGIC) || data.starts_with(THIN_ARCHIVE_MAGIC)
}

/// Whether `data` is a 64-bit little-endian ELF file (`ELFCLASS64`, `ELFDATA2LSB`).
pub fn is_elf64_le(data: &[u8]) -> bool {
    is_elf(data) && data.len() >= 16 && data[4] == 2 && data[5] == 1
}

/// The kind of file whose first bytes (at least [`SNIFF_LEN`] of them, when the file has that
/// many) are `head`.
pub fn classify(head: &[u8]) -> FileKind {
    if is_archive(head) {
        return FileKind::Archive;
    }
    if head.starts_with(b"BC\xc0\xde") || head.starts_with(&[0xde, 0xc0, 0x17, 0x0b]) {
        return FileKind::Bitcode;
    }
    if !is_elf(head) {
        return FileKind::Other;
    }
    if head.len() < SNIFF_LEN {
        return FileKind::OtherElf;
    }
    // e_type, in the file's own byte order (a big-endian object is still an object: the
    // rewriter then says why it cannot take it).
    let e_type = match head[5] {
        2 => u16::from_be_bytes([head[16], head[17]]),
        _ => u16::from_le_bytes([head[16], head[17]]),
    };
    if e_type == 1 {
        FileKind::Object
    } else {
        FileKind::OtherElf
    }
}

/// Whether an output at `path` is written in place rather than replaced by a new file renamed
/// over it: it is there and is neither a regular file nor a directory (symbolic links followed):
/// `/dev/null`, `/dev/stdout`, a terminal, a named pipe. Renaming over one would put a regular
/// file where the device was (root may write in `/dev`), and a reader of the pipe would never
/// see the bytes.
#[cfg(feature = "std")]
pub fn written_in_place(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).is_ok_and(|m| written_in_place_mode(m.mode()))
}

/// [`written_in_place`]'s rule on what `stat` says of the path (`st_mode`), for a reader without
/// the standard library (the runtime's dump): neither a regular file nor a directory.
pub fn written_in_place_mode(mode: u32) -> bool {
    const KIND: u32 = 0o170_000;
    const REGULAR: u32 = 0o100_000;
    const DIRECTORY: u32 = 0o040_000;
    !matches!(mode & KIND, REGULAR | DIRECTORY)
}

#[cfg(test)]
mod tests {
    use super::written_in_place_mode;

    #[test]
    fn only_regular_files_and_directories_are_replaced() {
        // Regular file and directory (mode 0644 / 0755) are replaced; a character device, a
        // FIFO, a socket, a block device and a symbolic link's own mode are written into.
        assert!(!written_in_place_mode(0o100_644));
        assert!(!written_in_place_mode(0o040_755));
        for kind in [0o020_000, 0o010_000, 0o140_000, 0o060_000, 0o120_000] {
            assert!(written_in_place_mode(kind | 0o666), "{kind:o}");
        }
    }
}
