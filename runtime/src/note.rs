//! Notes to stderr: takes a message from any module; hands it on to file descriptor 2 with one
//! `write(2)` (usable before `main`, in any thread). The runtime never writes to stdout.

use crate::prelude::*;

/// Writes `bootprof: <msg>` and a newline to stderr.
pub(crate) fn note(msg: &str) {
    note_raw(&format!("bootprof: {msg}\n"));
}

/// Writes `text` to stderr as it is.
pub(crate) fn note_raw(text: &str) {
    // SAFETY: write(2) on fd 2 with a valid buffer; usable before main and in any thread.
    unsafe { libc::write(2, text.as_ptr().cast(), text.len()) };
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
