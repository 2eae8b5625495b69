//! Every machine-code byte pattern bootprof writes or recognises, defined once: the rewriter
//! recognises the original instructions and writes the NOPs, thunks and stubs; the runtime writes
//! `int3` and the enabled instructions and reads a stub's id; `bootprof list` checks the NOPs.
//!
//! | what | bytes | written by |
//! |---|---|---|
//! | original call / tail jump | [`Form::opcode`]: `e8`, `e9`, `ff 15`, `ff 25` + rel32 | the compiler |
//! | disabled site | [`disabled_bytes`] (table there) | the rewriter |
//! | guard (disabled) | [`NOP5`] | the C header's `asm goto` |
//! | trap-mode site | [`INT3`] over byte 0 | the runtime |
//! | call-mode site | [`enabled_bytes`]: `e8`/`e9` rel32 to the stub (+ `90` for 6-byte sites) | the runtime |
//! | stub | [`STUB`]: `lea name(%rip), %r11; jmp *ptr(%rip)` | the rewriter's stub object |
//! | tail thunk | [`THUNK`]: `lea 0(%rip), %r11; jmp stub+7` | the rewriter, per tail site |
//! | default dispatchers | [`RET`], [`XOR_EAX_RET`] | the stub object |

use crate::{Form, Kind, MAX_SITE_LEN};

/// `nopl 0x0(%rax,%rax,1)`: the 5-byte NOP a guard holds while disabled, and a disabled call.
pub const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];
/// `int3`: written over a site's first byte in trap mode, and during the cross-modification
/// protocol; also the padding between thunks.
pub const INT3: u8 = 0xcc;
/// `nop`: pads a 5-byte enabled call in a 6-byte site.
pub const NOP1: u8 = 0x90;
/// `ret`: the default dispatcher of probes and hooks (a stub without the runtime returns).
pub const RET: [u8; 1] = [0xc3];
/// `xor %eax,%eax; ret`: the default dispatcher of is-enabled tests (a probe reads as disabled).
pub const XOR_EAX_RET: [u8; 3] = [0x31, 0xc0, 0xc3];

/// `call rel32`.
pub const CALL_REL32: u8 = 0xe8;
/// `jmp rel32`.
pub const JMP_REL32: u8 = 0xe9;
/// Length of `call rel32` and `jmp rel32`, the instructions call mode writes: a call-mode
/// site's call returns to the site's address plus this.
pub const REL32_LEN: usize = 5;

impl Form {
    /// The opcode bytes of the instruction this form was, before its 32-bit displacement:
    /// `e8` (call), `e9` (tail jmp), `ff 15` (call through the GOT), `ff 25` (tail jmp through
    /// the GOT); a guard, enabled, is `e9`.
    pub fn opcode(self) -> &'static [u8] {
        match self {
            Form::CallRel32 => &[CALL_REL32],
            Form::JmpRel32 | Form::Guard => &[JMP_REL32],
            Form::CallGot => &[0xff, 0x15],
            Form::JmpGot => &[0xff, 0x25],
        }
    }
}

/// Which NOPs a fragment's is-enabled call sites hold while disabled: what its version says
/// ([`Nops::of_version`]). Every other site's NOP is the same in every version.
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Nops {
    /// Version 3 on: `mov $0, %eax`, one instruction. A thread is never inside it, so call mode
    /// can write its call over it while other threads run, as over any other site.
    #[default]
    Mov,
    /// Versions 1 and 2: `xor %eax, %eax` and a NOP, two instructions. A thread stopped between
    /// them resumes inside the bytes a call written over them would change.
    Xor,
}

impl Nops {
    /// The NOPs of a fragment of layout `version`.
    pub fn of_version(version: u16) -> Nops {
        if version >= crate::VERSION_3 {
            Nops::Mov
        } else {
            Nops::Xor
        }
    }
}

/// The bytes a disabled site holds, for a site of `kind` that was `form`, in a fragment whose
/// is-enabled call sites hold `nops`.
///
/// | before | after |
/// |---|---|
/// | `e8 rel32` (call) | `0f 1f 44 00 00` (nopl 0x0(%rax,%rax,1)) |
/// | `ff 15 rel32` (call via GOT) | `66 0f 1f 44 00 00` (nopw 0x0(%rax,%rax,1)) |
/// | `e9 rel32` (tail jmp) | `c3` (ret) + `0f 1f 40 00` (nopl 0x0(%rax)) |
/// | `ff 25 rel32` (tail jmp via GOT) | `c3` (ret) + `0f 1f 44 00 00` |
/// | is-enabled `e8` call | `b8 00 00 00 00` (mov $0x0,%eax) |
/// | is-enabled `ff 15` call | `40 b8 00 00 00 00` (the same `mov` with an empty REX prefix) |
/// | is-enabled `e9` tail jmp | `33 c0` (xor %eax,%eax) + `c3` + `66 90` (xchg %ax,%ax) |
/// | is-enabled `ff 25` tail jmp | `33 c0` + `c3` + `0f 1f 00` |
/// | guard (either kind) | `0f 1f 44 00 00`, as compiled |
///
/// [`Nops::Xor`] (tables written before version 3): is-enabled `e8` call `33 c0` + `0f 1f 00`
/// (nopl (%rax)), `ff 15` call `33 c0` + `0f 1f 40 00`. An is-enabled tail site needs two
/// instructions in every version (zero, then return).
///
/// Only bytes `[..form.len()]` of the result are meaningful; the rest are zero.
#[inline]
pub fn disabled_bytes(kind: Kind, form: Form, nops: Nops) -> [u8; MAX_SITE_LEN] {
    // Each pattern a whole array (a constant to copy), not a slice of its length copied in:
    // enabling, the output check and `bootprof list` ask for tens of thousands.
    const fn padded<const N: usize>(bytes: [u8; N]) -> [u8; MAX_SITE_LEN] {
        let mut out = [0u8; MAX_SITE_LEN];
        let mut i = 0;
        while i < N {
            out[i] = bytes[i];
            i += 1;
        }
        out
    }
    match (kind == Kind::IsEnabled, form) {
        (_, Form::Guard) => const { padded(NOP5) },
        (false, Form::CallRel32) => const { padded(NOP5) },
        (false, Form::CallGot) => const { padded([0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00]) },
        (false, Form::JmpRel32) => const { padded([0xc3, 0x0f, 0x1f, 0x40, 0x00]) },
        (false, Form::JmpGot) => const { padded([0xc3, 0x0f, 0x1f, 0x44, 0x00, 0x00]) },
        (true, Form::CallRel32) => match nops {
            Nops::Mov => const { padded([0xb8, 0x00, 0x00, 0x00, 0x00]) },
            Nops::Xor => const { padded([0x33, 0xc0, 0x0f, 0x1f, 0x00]) },
        },
        (true, Form::CallGot) => match nops {
            Nops::Mov => const { padded([0x40, 0xb8, 0x00, 0x00, 0x00, 0x00]) },
            Nops::Xor => const { padded([0x33, 0xc0, 0x0f, 0x1f, 0x40, 0x00]) },
        },
        (true, Form::JmpRel32) => const { padded([0x33, 0xc0, 0xc3, 0x66, 0x90]) },
        (true, Form::JmpGot) => const { padded([0x33, 0xc0, 0xc3, 0x0f, 0x1f, 0x00]) },
    }
}

/// Copies a site's `len` bytes (4 to [`MAX_SITE_LEN`]; a site has 5 or 6) from `from` to `to`
/// as two 4-byte moves that overlap: a copy of a length the compiler does not know is a call of
/// `memcpy`, a hundred instructions for five bytes, and a link copies tens of thousands.
#[inline]
pub fn copy_site_bytes(to: &mut [u8], from: &[u8], len: usize) {
    debug_assert!((4..=MAX_SITE_LEN).contains(&len));
    to[..4].copy_from_slice(&from[..4]);
    to[len - 4..len].copy_from_slice(&from[len - 4..len]);
}

/// Whether the first `len` bytes of `a` and `b` (4 to [`MAX_SITE_LEN`]) are the same, compared as
/// [`copy_site_bytes`] copies them.
#[inline]
pub fn same_site_bytes(a: &[u8], b: &[u8], len: usize) -> bool {
    debug_assert!((4..=MAX_SITE_LEN).contains(&len));
    a[..4] == b[..4] && a[len - 4..len] == b[len - 4..len]
}

/// Whether a disabled site of `kind` and `form` with NOPs `nops` is more than one instruction: a
/// thread may stop inside it, between the two, and resume at its second. The bytes after the
/// first may then not be changed while other threads run.
pub fn disabled_is_two_instructions(kind: Kind, form: Form, nops: Nops) -> bool {
    kind == Kind::IsEnabled && (form.is_tail() || (form != Form::Guard && nops == Nops::Xor))
}

/// The bytes a call-mode site holds while enabled: `e8 rel32` (a call to its stub) or, for a tail
/// site or a guard, `e9 rel32` (a jump to its thunk or its out-of-line code), followed by
/// [`NOP1`] in a 6-byte site. `rel` is the target's distance from the end of the
/// [`REL32_LEN`]-byte instruction. Only bytes `[..form.len()]` are meaningful.
#[inline]
pub fn enabled_bytes(form: Form, rel: i32) -> [u8; MAX_SITE_LEN] {
    let mut b = [0u8; MAX_SITE_LEN];
    b[0] = if form.is_tail() || form == Form::Guard {
        JMP_REL32
    } else {
        CALL_REL32
    };
    b[1..REL32_LEN].copy_from_slice(&rel.to_le_bytes());
    if form.len() > REL32_LEN {
        b[REL32_LEN] = NOP1;
    }
    b
}

/// `lea rel32(%rip), %r11`: the first instruction of a stub and of a thunk, loading the site's or
/// the probe's id into r11 (which no calling convention passes anything in).
pub const LEA_R11: [u8; 3] = [0x4c, 0x8d, 0x1d];
/// Length of a [`LEA_R11`] instruction with its displacement.
pub const LEA_R11_LEN: usize = 7;

/// A stub, one per probe symbol the program references and does not define:
///
/// ```text
/// 0:  4c 8d 1d rel32    lea <symbol's name>(%rip), %r11    ; the probe's id: its name string
/// 7:  ff 25 rel32       jmp *ptrs+8*class(%rip)            ; the kind's dispatcher
/// ```
///
/// The displacements are relocated (`R_X86_64_PC32` at [`STUB_NAME_DISP`] and
/// [`STUB_PTR_DISP`]). A tail site's thunk enters at [`STUB_JMP`], with its own id in r11.
pub const STUB: [u8; 13] = [0x4c, 0x8d, 0x1d, 0, 0, 0, 0, 0xff, 0x25, 0, 0, 0, 0];
/// Offset of the name displacement in [`STUB`].
pub const STUB_NAME_DISP: u64 = 3;
/// Offset of the stub's `jmp *ptr(%rip)`: where a thunk jumps.
pub const STUB_JMP: u64 = LEA_R11_LEN as u64;
/// Offset of the dispatcher-pointer displacement in [`STUB`].
pub const STUB_PTR_DISP: u64 = 9;

/// The id a stub at `addr` loads into r11 (the address of its probe's name string), from its
/// first [`LEA_R11_LEN`] bytes `code`; `None` when they are not a [`LEA_R11`] (a guard's target
/// is the program's own code, not a stub).
pub fn stub_id(addr: u64, code: &[u8; LEA_R11_LEN]) -> Option<u64> {
    if code[..3] != LEA_R11 {
        return None;
    }
    let rel = i32::from_le_bytes([code[3], code[4], code[5], code[6]]);
    Some((addr as i64 + LEA_R11_LEN as i64 + rel as i64) as u64)
}

/// A tail site's thunk, appended to its text section (16-aligned, [`INT3`] padding):
///
/// ```text
/// 0:  4c 8d 1d 00 00 00 00    lea 0(%rip), %r11    ; the thunk's own address + 7: the site's id
/// 7:  e9 rel32                jmp <stub> + 7       ; the stub's jmp *dispatcher
/// ```
///
/// A tail jump leaves no return address to find its site by; the thunk gives each tail site an
/// id of its own. The jump's displacement, at [`THUNK_JMP_DISP`], is relocated `R_X86_64_PC32`
/// against the probe symbol with addend [`THUNK_JMP_ADDEND`].
pub const THUNK: [u8; 12] = [0x4c, 0x8d, 0x1d, 0, 0, 0, 0, JMP_REL32, 0, 0, 0, 0];
/// Offset of the jump's displacement in [`THUNK`].
pub const THUNK_JMP_DISP: u64 = 8;
/// Addend of the thunk's jump relocation: the stub's [`STUB_JMP`], less the 4 bytes of the
/// displacement itself.
pub const THUNK_JMP_ADDEND: i64 = STUB_JMP as i64 - 4;
/// Alignment of the first thunk in a text section.
pub const THUNK_ALIGN: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stub_and_thunk_share_the_lea() {
        assert_eq!(STUB[..3], LEA_R11);
        assert_eq!(THUNK[..3], LEA_R11);
        assert_eq!(
            STUB[STUB_JMP as usize..STUB_JMP as usize + 2],
            Form::JmpGot.opcode()[..]
        );
        assert_eq!(THUNK[THUNK_JMP_DISP as usize - 1], JMP_REL32);
        let mut code = [0u8; LEA_R11_LEN];
        code.copy_from_slice(&STUB[..LEA_R11_LEN]);
        code[3..].copy_from_slice(&0x100i32.to_le_bytes());
        assert_eq!(stub_id(0x1000, &code), Some(0x1107));
        assert_eq!(stub_id(0x1000, &[0x0f, 0x1f, 0x44, 0, 0, 0, 0]), None);
    }

    #[test]
    fn enabled_forms() {
        assert_eq!(
            enabled_bytes(Form::CallGot, -5)[..6],
            [0xe8, 0xfb, 0xff, 0xff, 0xff, 0x90]
        );
        assert_eq!(enabled_bytes(Form::JmpRel32, 1)[..5], [0xe9, 1, 0, 0, 0]);
        assert_eq!(enabled_bytes(Form::Guard, 1)[0], JMP_REL32);
    }
}
