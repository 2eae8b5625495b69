//! Little-endian reads at a byte offset, for the layouts of this crate and their readers. The
//! caller has checked the bounds: a read past the end is a bug and panics.

/// The `u16` at `at`.
#[inline]
pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// The `u32` at `at`.
#[inline]
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The `u64` at `at`.
#[inline]
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}
