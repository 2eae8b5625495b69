//! Notes to stderr: takes a message from any module; hands it on to file descriptor 2 with one
//! `write(2)` (usable before `main`, in any thread). The runtime never writes to stdout.

use crate::prelude::*;

/// Writes `bootprof: <msg>` and a newline to stderr.
pub(crate) fn note(msg: &str) {
    note_parts(&[msg]);
}

/// Writes `bootprof: `, `parts` one after the other, and a newline to stderr, in one write:
/// without `core::fmt`, which the lean runtime leaves out.
pub(crate) fn note_parts<P: AsRef<[u8]>>(parts: &[P]) {
    let mut line = Vec::with_capacity(parts.iter().map(|p| p.as_ref().len()).sum::<usize>() + 11);
    line.extend_from_slice(b"bootprof: ");
    for part in parts {
        line.extend_from_slice(part.as_ref());
    }
    line.push(b'\n');
    write_stderr(&line);
}

/// Writes `text` to stderr as it is.
pub(crate) fn note_raw(text: &str) {
    write_stderr(text.as_bytes());
}

/// Writes `bytes` to stderr with one `write(2)`.
fn write_stderr(bytes: &[u8]) {
    // SAFETY: write(2) on fd 2 with a valid buffer; usable before main and in any thread.
    unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
}

/// Writes `v` in decimal at the start of `out`; returns the digits written. Async-signal-safe.
pub(crate) fn put_decimal(out: &mut [u8], mut v: u32) -> usize {
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out[..digits.len() - i].copy_from_slice(&digits[i..]);
    digits.len() - i
}
