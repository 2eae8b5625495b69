//! Instruction lengths for `decode::on_boundaries`: the length of the x86-64
//! instruction at the start of a byte slice, for the encodings compilers emit most, without a
//! full decoder.
//!
//! Takes a slice of 64-bit code; hands on `Some(length)` when the instruction is one of the
//! forms below and iced-x86 decodes it as a valid instruction of that length, `None` for
//! anything else (VEX/EVEX, x87, `lock`, `0x67`, far and system instructions, opcodes whose
//! validity depends on their ModRM byte or prefix in ways not listed here, an instruction
//! running past the slice or beyond 15 bytes). `None` is not a verdict: the caller decodes that
//! instruction with iced. A `Some` that iced would not give is a wrong boundary check, so the
//! tables stay on the safe side; the tests hold them to iced at every offset of real code and
//! on random bytes.

/// Legacy prefixes an instruction may carry here, as read before its REX byte and opcode.
#[derive(Default, Clone, Copy)]
struct Prefixes {
    /// `0x66`: operand size 16 bits (or the SSE mandatory prefix).
    operand_size: bool,
    /// `0xf2` or `0xf3`: `repne`/`rep` (or the SSE mandatory prefix); `0` for none.
    rep: u8,
    /// REX.W: operand size 64 bits.
    rex_w: bool,
}

impl Prefixes {
    /// Size of a "z" immediate (16 or 32 bits): 2 bytes under `0x66` without REX.W, else 4.
    fn imm_z(self) -> usize {
        if self.operand_size && !self.rex_w {
            2
        } else {
            4
        }
    }
}

/// Length of the instruction at the start of `code`, or `None` to let iced decode it.
pub(crate) fn length(code: &[u8]) -> Option<usize> {
    let mut p = Prefixes::default();
    let mut i = 0;
    // Legacy prefixes: operand size, rep/repne, and the segment overrides (`cs`/`ds` also
    // mean branch hints and `notrack`). One `f2`/`f3` at most: with two, which one is the
    // mandatory prefix of an SSE instruction is a rule left to iced.
    // `lock` (alone, first) only on the read-modify-write forms of [`lockable`].
    let lock = code.first() == Some(&0xf0);
    i += usize::from(lock);
    loop {
        match *code.get(i)? {
            0x66 => p.operand_size = true,
            0xf2 | 0xf3 if p.rep == 0 && !lock => p.rep = code[i],
            0x26 | 0x2e | 0x36 | 0x3e | 0x64 | 0x65 => {}
            _ => break,
        }
        i += 1;
    }
    let mut byte = *code.get(i)?;
    if byte & 0xf0 == 0x40 {
        p.rex_w = byte & 0x08 != 0;
        i += 1;
        byte = *code.get(i)?;
    }
    let rest = &code[i + 1..];
    if lock && !lockable(byte, rest)? {
        return None;
    }
    let tail = if byte == 0x0f {
        two_byte(rest, p)?
    } else {
        one_byte(byte, rest, p)?
    };
    let len = i + 1 + tail;
    (len <= 15 && len <= code.len()).then_some(len)
}

/// Whether `lock` may come before opcode `op` followed by `rest` (its ModRM byte first): the
/// read-modify-write instructions with a memory destination that compilers emit for atomics
/// (`add`, `or`, `adc`, `sbb`, `and`, `sub`, `xor`, `xchg`, `inc`, `dec`, `not`, `neg`,
/// `cmpxchg`, `xadd`, `bts`, `btr`, `btc`); `None` when `rest` is too short to tell.
fn lockable(op: u8, rest: &[u8]) -> Option<bool> {
    let (first, after) = (*rest.first()?, rest.get(1));
    let (m, second) = match op {
        0x0f => (*after?, Some(first)),
        _ => (first, None),
    };
    let reg = (m >> 3) & 7;
    Some(
        m < 0xc0
            && match (op, second) {
                (0x00..=0x33, None) => op & 7 < 2 && op & 0x38 != 0x38,
                (0x80 | 0x81 | 0x83, None) => reg != 7,
                (0x86 | 0x87, None) => true,
                (0xf6 | 0xf7, None) => reg == 2 || reg == 3,
                (0xfe | 0xff, None) => reg < 2,
                (0x0f, Some(0xb0 | 0xb1 | 0xc0 | 0xc1 | 0xab | 0xb3 | 0xbb)) => true,
                _ => false,
            },
    )
}

/// [`length`], by tables where it can: an instruction of at most one REX prefix and no legacy
/// prefix, whose length follows from its opcode, its ModRM byte and the base of its SIB byte,
/// is measured with two table lookups and no branch on what it is; anything else is
/// [`length`]'s (as is the last 15 bytes of a slice). The answer is always [`length`]'s: the
/// tables are built from the same rules, and a test compares the two over every opcode, ModRM
/// and SIB base. The decoding of a function is a chain in which each instruction's place waits
/// for the length of the one before, and [`length`]'s branches on the opcode, mispredicted from
/// one instruction to the next, made each link of it about 40 cycles.
#[inline(always)]
pub(crate) fn fast_length(code: &[u8]) -> Option<usize> {
    let Some(head) = code.first_chunk::<16>() else {
        return slow_length(code);
    };
    // The bytes read are taken from one load by shifts: loading each at a place that depends
    // on the byte before would add a load's latency to the chain for each.
    let w = u64::from_le_bytes(*head.first_chunk::<8>().expect("16 bytes"));
    let byte = |i: usize| (w >> (8 * i)) as u8;
    let b0 = byte(0);
    let rex = usize::from(b0 & 0xf0 == 0x40);
    let rex_w = usize::from(b0 & 0xf8 == 0x48);
    let two = usize::from(byte(rex) == 0x0f);
    // The opcode's entry: one-byte opcodes first, then the two-byte ones (after `0f`).
    let e = OPCODES[two * 256 + usize::from(byte(rex + two))];
    let at = rex + 1 + two;
    let modrm = byte(at);
    // `&` and `|`, not `&&` and `||`: one branch, nearly never taken, where short-circuits
    // made one each, some taken as often as not.
    let reg_ok = (e >> 8) as u8 & (1 << ((modrm >> 3) & 7)) != 0;
    let mem_ok = (e & MEMORY == 0) | (modrm < 0xc0);
    if (e & SLOW != 0) | !reg_ok | !mem_ok {
        return slow_length(code);
    }
    let m = MODRM[usize::from(modrm)];
    let sib_disp = usize::from((m & SIB_BASE != 0) & (byte(at + 1) & 7 == 5)) * 4;
    let has_modrm = usize::from(e & HAS_MODRM != 0);
    let imm = match usize::from(e & IMM) {
        IMM_V => 4 + 4 * rex_w,
        n => n,
    };
    Some(at + has_modrm * (usize::from(m & MODRM_LEN) + sib_disp) + imm)
}

/// [`length`], kept out of [`fast_length`]'s loops: it is seldom needed.
#[cold]
#[inline(never)]
fn slow_length(code: &[u8]) -> Option<usize> {
    length(code)
}

/// An entry of [`OPCODES`]: the immediate's bytes ([`IMM_V`]: 8 with REX.W, else 4).
const IMM: u16 = 0x0f;
/// ... an immediate of 4 bytes, or 8 under REX.W (`mov $imm, %reg`).
const IMM_V: usize = 0x0f;
/// ... a ModRM byte follows.
const HAS_MODRM: u16 = 0x10;
/// ... the ModRM byte must name memory (`lea`).
const MEMORY: u16 = 0x20;
/// ... [`length`] decides (prefixes, escapes, and opcodes whose length depends on more).
const SLOW: u16 = 0x40;
/// ... bits 8-15: the ModRM `reg` values the opcode takes (all, without a ModRM byte).
const ANY_REG: u16 = 0xff00;

/// An entry of [`MODRM`]: the bytes of the ModRM byte, its SIB byte and displacement.
const MODRM_LEN: u8 = 0x0f;
/// ... a SIB byte with `mod` 0: a base of 5 means a 32-bit displacement instead.
const SIB_BASE: u8 = 0x10;

/// For each one-byte opcode, then each two-byte one, without legacy prefixes: what
/// [`one_byte`] and [`two_byte`] say, as [`fast_length`] reads it.
static OPCODES: [u16; 512] = opcodes();

/// For each ModRM byte: what [`modrm_len`] says, as [`fast_length`] reads it.
static MODRM: [u8; 256] = modrm_table();

/// Sets the entries of `t` from `lo` to `hi` (both included) to `e`.
const fn fill(t: &mut [u16; 512], lo: usize, hi: usize, e: u16) {
    let mut op = lo;
    while op <= hi {
        t[op] = e;
        op += 1;
    }
}

/// Sets the entries of `t` at each of `ops` to `e`.
const fn each(t: &mut [u16; 512], ops: &[usize], e: u16) {
    let mut i = 0;
    while i < ops.len() {
        t[ops[i]] = e;
        i += 1;
    }
}

const fn opcodes() -> [u16; 512] {
    let mut t = [SLOW; 512];
    let (fast, modrm, mem) = (ANY_REG, ANY_REG | HAS_MODRM, ANY_REG | HAS_MODRM | MEMORY);
    // Only `reg` values in `regs` (a mask), with a ModRM byte.
    const fn group(regs: u16) -> u16 {
        (regs << 8) | HAS_MODRM
    }
    // The ALU forms of 00-3f: r/m (0-3), al with an immediate byte (4), eax with 4 bytes (5).
    let mut op = 0;
    while op < 0x40 {
        t[op] = match op & 7 {
            0..=3 => modrm,
            4 => fast | 1,
            5 => fast | 4,
            _ => SLOW,
        };
        op += 1;
    }
    fill(&mut t, 0x50, 0x5f, fast);
    fill(&mut t, 0x90, 0x99, fast);
    each(&mut t, &[0x9c, 0x9d, 0xc3, 0xc9, 0xcc, 0xf4, 0xf5], fast);
    fill(&mut t, 0xa4, 0xa7, fast);
    fill(&mut t, 0xaa, 0xaf, fast);
    fill(&mut t, 0xf8, 0xfd, fast);
    t[0x63] = modrm;
    fill(&mut t, 0x84, 0x8b, modrm);
    let not6 = 0xff & !(1 << 6);
    fill(&mut t, 0xd0, 0xd3, group(not6));
    t[0x68] = fast | 4;
    t[0x69] = modrm | 4;
    fill(&mut t, 0x70, 0x7f, fast | 1);
    each(&mut t, &[0x6a, 0xa8, 0xcd, 0xeb], fast | 1);
    fill(&mut t, 0xb0, 0xb7, fast | 1);
    each(&mut t, &[0x6b, 0x80, 0x83], modrm | 1);
    each(&mut t, &[0xc0, 0xc1], group(not6) | 1);
    t[0x81] = modrm | 4;
    t[0x8d] = mem;
    t[0x8f] = group(1);
    t[0xa9] = fast | 4;
    fill(&mut t, 0xb8, 0xbf, fast | IMM_V as u16);
    t[0xc2] = fast | 2;
    t[0xc6] = group(1) | 1;
    t[0xc7] = group(1) | 4;
    t[0xc8] = fast | 3;
    each(&mut t, &[0xe8, 0xe9], fast | 4);
    t[0xfe] = group(0b11);
    t[0xff] = group(0b0101_0111);
    // After `0f` (at 256 on): the second opcode byte counts in `at`, so these are the bytes
    // after it.
    const TWO: usize = 256;
    each(&mut t, &[TWO + 0x05, TWO + 0x0b, TWO + 0xa2], fast);
    fill(&mut t, TWO + 0xc8, TWO + 0xcf, fast);
    t[TWO + 0x1f] = group(1);
    fill(&mut t, TWO + 0x80, TWO + 0x8f, fast | 4);
    fill(&mut t, TWO + 0x40, TWO + 0x4f, modrm);
    fill(&mut t, TWO + 0x90, TWO + 0x9f, modrm);
    let with_modrm = [
        0xa3, 0xa5, 0xab, 0xad, 0xaf, 0xb0, 0xb1, 0xb6, 0xb7, 0xbe, 0xbf, 0xc0, 0xc1, 0xbc, 0xbd,
        0x10, 0x11, 0x51, 0x58, 0x59, 0x5c, 0x5d, 0x5e, 0x5f, 0x5a, 0x14, 0x15, 0x28, 0x29, 0x54,
        0x55, 0x56, 0x57, 0xef, 0x2e, 0x2f, 0x6f, 0x7f,
    ];
    let mut i = 0;
    while i < with_modrm.len() {
        t[TWO + with_modrm[i]] = modrm;
        i += 1;
    }
    each(&mut t, &[TWO + 0xa4, TWO + 0xac], modrm | 1);
    t[TWO + 0xba] = group(0xf0) | 1;
    t
}

const fn modrm_table() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut m = 0;
    while m < 256 {
        let (md, rm) = (m >> 6, m & 7);
        t[m] = match (md, rm) {
            (3, _) => 1,
            (0, 4) => 2 | SIB_BASE,
            (0, 5) => 5,
            (0, _) => 1,
            (1, 4) => 3,
            (1, _) => 2,
            (_, 4) => 6,
            _ => 5,
        };
        m += 1;
    }
    t
}

/// Bytes after the one-byte opcode `op` (ModRM, SIB, displacement, immediate) in `rest`.
fn one_byte(op: u8, rest: &[u8], p: Prefixes) -> Option<usize> {
    let modrm = |imm: usize| Some(modrm_len(rest)? + imm);
    let reg = || rest.first().map(|m| (m >> 3) & 7);
    match op {
        // ALU r/m forms, then al/eax with an immediate.
        0x00..=0x3f if op & 7 < 4 => modrm(0),
        0x00..=0x3f if op & 7 == 4 => Some(1),
        0x00..=0x3f if op & 7 == 5 => Some(p.imm_z()),
        0x50..=0x5f | 0x90..=0x99 | 0x9c | 0x9d | 0xc3 | 0xc9 | 0xcc | 0xf4 | 0xf5 => Some(0),
        0xa4..=0xa7 | 0xaa..=0xaf | 0xf8..=0xfd => Some(0),
        0x63 | 0x84..=0x8b => modrm(0),
        // Shifts and rotates; `/6` (an undocumented `sal`) left to iced.
        0xd0..=0xd3 if reg()? != 6 => modrm(0),
        0x68 => Some(p.imm_z()),
        0x69 => modrm(p.imm_z()),
        0x6a | 0x70..=0x7f | 0xa8 | 0xb0..=0xb7 | 0xcd | 0xeb if !jumps_with_66(op, p) => Some(1),
        0x6b | 0x80 | 0x83 => modrm(1),
        0xc0 | 0xc1 if reg()? != 6 => modrm(1),
        0x81 => modrm(p.imm_z()),
        0x8d if rest.first()? >> 6 != 3 => modrm(0),
        0x8f if reg()? == 0 => modrm(0),
        0xa9 => Some(p.imm_z()),
        0xb8..=0xbf if p.rex_w => Some(8),
        0xb8..=0xbf => Some(p.imm_z()),
        0xc2 => Some(2),
        0xc6 if reg()? == 0 => modrm(1),
        0xc7 if reg()? == 0 => modrm(p.imm_z()),
        0xc8 => Some(3),
        0xe8 | 0xe9 if !p.operand_size => Some(4),
        0xf6 if reg()? == 0 => modrm(1),
        0xf6 if reg()? >= 2 => modrm(0),
        0xf7 if reg()? == 0 => modrm(p.imm_z()),
        0xf7 if reg()? >= 2 => modrm(0),
        0xfe if reg()? <= 1 => modrm(0),
        0xff if matches!(reg()?, 0 | 1 | 2 | 4 | 6) => modrm(0),
        // x87, without a legacy prefix: the forms iced-x86 takes for instructions.
        0xd8..=0xdf if !p.operand_size && p.rep == 0 => {
            let m = *rest.first()?;
            let i = usize::from(op - 0xd8);
            let valid = match m {
                0xc0.. => X87_REGISTER_FORMS[i] >> (m - 0xc0) & 1,
                _ => u64::from(X87_MEMORY_FORMS[i] >> ((m >> 3) & 7) & 1),
            };
            (valid != 0).then_some(())?;
            modrm(0)
        }
        _ => None,
    }
}

/// For each x87 opcode `d8` to `df`: the ModRM `reg` values that name an instruction when the
/// ModRM byte names memory (bit `reg`).
const X87_MEMORY_FORMS: [u8; 8] = [
    0b1111_1111,
    0b1111_1101,
    0b1111_1111,
    0b1010_1111,
    0b1111_1111,
    0b1101_1111,
    0b1111_1111,
    0b1111_1111,
];

/// For each x87 opcode `d8` to `df`: the ModRM bytes `c0` to `ff` that name an instruction
/// (bit `modrm - 0xc0`).
const X87_REGISTER_FORMS: [u64; 8] = [
    0xffff_ffff_ffff_ffff,
    0xffff_7f33_ff01_ffff,
    0x0000_0200_ffff_ffff,
    0x00ff_ff1f_ffff_ffff,
    0xffff_ffff_ffff_ffff,
    0x0000_ffff_ffff_ffff,
    0xffff_ffff_02ff_ffff,
    0x00ff_ff01_ffff_ffff,
];

/// Whether `op` is a relative jump that `0x66` would make a 16-bit one: left to iced.
fn jumps_with_66(op: u8, p: Prefixes) -> bool {
    p.operand_size && matches!(op, 0x70..=0x7f | 0xeb)
}

/// Bytes after `0f` (the second opcode byte included) in `rest`.
fn two_byte(rest: &[u8], p: Prefixes) -> Option<usize> {
    let op = *rest.first()?;
    let after = &rest[1..];
    let modrm = |imm: usize| Some(1 + modrm_len(after)? + imm);
    let sse = matches!(
        op,
        0x10 | 0x11 | 0x14 | 0x15 | 0x28 | 0x29 | 0x2a | 0x2c | 0x2d | 0x51 | 0x54..=0x59
            | 0x5c..=0x5f | 0x6f | 0x70 | 0x7e | 0x7f | 0x5a | 0xef | 0xc2
    );
    // `f2`/`f3` only where the tables below say what they mean; with `66` as well on an SSE
    // instruction, which of them is the mandatory prefix is iced's rule.
    let rep_known = if sse {
        !p.operand_size
    } else {
        matches!(op, 0xb8 | 0xbc | 0xbd)
    };
    if p.rep != 0 && !rep_known {
        return None;
    }
    match op {
        0x05 | 0x0b | 0xa2 | 0xc8..=0xcf => Some(1),
        0x1f if (after.first()? >> 3) & 7 == 0 => modrm(0),
        0x80..=0x8f if !p.operand_size => Some(5),
        0x40..=0x4f | 0x90..=0x9f | 0xa3 | 0xa5 | 0xab | 0xad | 0xaf | 0xb3 | 0xbb => modrm(0),
        0xb0 | 0xb1 | 0xb6 | 0xb7 | 0xbe | 0xbf | 0xc0 | 0xc1 => modrm(0),
        0xbc | 0xbd if p.rep != 0xf2 => modrm(0),
        0xb8 if p.rep == 0xf3 => modrm(0),
        0xa4 | 0xac => modrm(1),
        0xba if (after.first()? >> 3) & 7 >= 4 => modrm(1),
        // SSE with a mandatory prefix or none: the four variants of each are all valid.
        0x10 | 0x11 | 0x51 | 0x58 | 0x59 | 0x5c..=0x5f | 0x5a => modrm(0),
        // Packed only (no `f2`/`f3` form).
        0x14 | 0x15 | 0x28 | 0x29 | 0x54..=0x57 | 0xef if p.rep == 0 => modrm(0),
        0x2a | 0x2c | 0x2d if p.rep != 0 => modrm(0),
        0x2e | 0x2f if p.rep == 0 => modrm(0),
        0x6f | 0x7f if p.rep != 0xf2 => modrm(0),
        // MMX, or SSE2 under `66`: the integer forms.
        0x60..=0x6b
        | 0x6e
        | 0x74..=0x76
        | 0xd1..=0xd5
        | 0xd8..=0xdf
        | 0xe0..=0xe5
        | 0xe8..=0xee
        | 0xf1..=0xf6
        | 0xf8..=0xfe
            if p.rep == 0 =>
        {
            modrm(0)
        }
        // SSE2 only.
        0x6c | 0x6d | 0xd6 if p.operand_size && p.rep == 0 => modrm(0),
        // `pshufw`, `pshufd`, `pshufhw`, `pshuflw`.
        0x70 => modrm(1),
        // `movd`, `movq` (`f3`).
        0x7e if p.rep != 0xf2 => modrm(0),
        // `movlps`/`movhps` (or `movhlps`/`movlhps` between registers); under `66`, `movlpd`
        // and `movhpd`, memory only; the stores, memory only.
        0x12 | 0x16 if p.rep == 0 && (!p.operand_size || *after.first()? < 0xc0) => modrm(0),
        0x13 | 0x17 if p.rep == 0 && *after.first()? < 0xc0 => modrm(0),
        // `cmpps`/`cmppd`/`cmpss`/`cmpsd`, `shufps`/`shufpd`, `pinsrw`; `pextrw` from a register.
        0xc2 => modrm(1),
        0xc4 | 0xc6 if p.rep == 0 => modrm(1),
        0xc5 if p.rep == 0 && *after.first()? >= 0xc0 => modrm(1),
        _ => None,
    }
}

/// Bytes of the ModRM byte at the start of `rest` with its SIB byte and displacement
/// (64-bit addressing: no `0x67`).
fn modrm_len(rest: &[u8]) -> Option<usize> {
    let m = *rest.first()?;
    let (md, rm) = (m >> 6, m & 7);
    if md == 3 {
        return Some(1);
    }
    let mut len = 1;
    let mut base = rm;
    if rm == 4 {
        base = rest.get(1)? & 7;
        len += 1;
    }
    len += match md {
        0 if base == 5 => 4,
        0 => 0,
        1 => 1,
        _ => 4,
    };
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::length;
    use iced_x86::{Decoder, DecoderOptions};

    /// iced's length of the instruction at the start of `code`, `None` when it is invalid.
    fn iced(code: &[u8]) -> Option<usize> {
        let insn = Decoder::new(64, code, DecoderOptions::NONE).decode();
        (!insn.is_invalid()).then(|| insn.len())
    }

    /// Every `Some` of [`length`] at every offset of `code` is iced's verdict; returns how many
    /// offsets `length` answered.
    fn agree(code: &[u8], what: &str) -> usize {
        let mut answered = 0;
        for at in 0..code.len() {
            let window = &code[at..code.len().min(at + 16)];
            if let Some(n) = length(window) {
                assert_eq!(
                    Some(n),
                    iced(window),
                    "{what}+{at:#x}: {:02x?}",
                    &window[..n.min(window.len())]
                );
                answered += 1;
            }
        }
        answered
    }

    #[test]
    fn common_forms() {
        let cases: &[(&[u8], usize)] = &[
            (&[0x55], 1),                                     // push %rbp
            (&[0x48, 0x89, 0xe5], 3),                         // mov %rsp,%rbp
            (&[0x48, 0x83, 0xec, 0x10], 4),                   // sub $0x10,%rsp
            (&[0x48, 0x8b, 0x44, 0x24, 0x08], 5),             // mov 0x8(%rsp),%rax
            (&[0x8b, 0x05, 1, 2, 3, 4], 6),                   // mov x(%rip),%eax
            (&[0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8], 10),      // movabs $imm64,%rax
            (&[0x66, 0xb8, 1, 2], 4),                         // mov $imm16,%ax
            (&[0xc7, 0x44, 0x24, 4, 1, 2, 3, 4], 8),          // movl $imm32,0x4(%rsp)
            (&[0x66, 0xc7, 0x44, 0x24, 4, 1, 2], 7),          // movw $imm16,0x4(%rsp)
            (&[0x66, 0x0f, 0x1f, 0x44, 0, 0], 6),             // nopw 0x0(%rax,%rax,1)
            (&[0xf3, 0x0f, 0x1e, 0xfa], 4),                   // endbr64 (left to iced)
            (&[0x0f, 0x85, 1, 2, 3, 4], 6),                   // jne rel32
            (&[0xf2, 0x0f, 0x10, 0x05, 1, 2, 3, 4], 8),       // movsd x(%rip),%xmm0
            (&[0x2e, 0x48, 0x8d, 0x84, 0x00, 1, 2, 3, 4], 9), // cs lea
            (&[0x66, 0x0f, 0x6e, 0xc0], 4),                   // movd %eax,%xmm0
            (&[0x66, 0x48, 0x0f, 0x7e, 0xc0], 5),             // movq %xmm0,%rax
            (&[0xf3, 0x0f, 0x7e, 0x44, 0x24, 8], 6),          // movq 0x8(%rsp),%xmm0
            (&[0x66, 0x0f, 0x70, 0xc1, 0x4e], 5),             // pshufd $0x4e,%xmm1,%xmm0
            (&[0xdb, 0x6c, 0x24, 0x10], 4),                   // fldt 0x10(%rsp)
            (&[0xd9, 0xc9], 2),                               // fxch %st(1)
            (&[0xf0, 0x48, 0x83, 0x0c, 0x24, 0x00], 6),       // lock orq $0,(%rsp)
            (&[0x0f, 0x16, 0x44, 0x24, 8], 5),                // movhps 0x8(%rsp),%xmm0
            (&[0x66, 0x0f, 0xc5, 0xc0, 1], 5),                // pextrw $1,%xmm0,%eax
            (&[0xf2, 0x0f, 0xc2, 0xca, 1], 5),                // cmpltsd %xmm2,%xmm1
        ];
        for &(code, len) in cases {
            assert_eq!(iced(code), Some(len), "{code:02x?}");
            // endbr64 is iced's: `f3 0f 1e` is not in the tables.
            let expected = (!code.starts_with(&[0xf3, 0x0f, 0x1e])).then_some(len);
            assert_eq!(length(code), expected, "{code:02x?}");
        }
        assert_eq!(length(&[0x48, 0x89, 0xe5]), Some(3));
        assert_eq!(length(&[0x48, 0x89]), None, "runs past the slice");
        assert_eq!(length(&[0xc4, 0xe2, 0x79, 0x18, 0xc0]), None, "VEX: iced's");
    }

    /// [`fast_length`] is [`length`] over every first byte, opcode after a REX prefix, second
    /// opcode byte after `0f`, ModRM byte and SIB base: all that its tables read (the other
    /// bytes only fill the slice).
    #[test]
    fn fast_length_is_length() {
        use super::fast_length;
        let mut code = [0x11u8; 16];
        let mut compared = 0;
        for b0 in 0..=255u8 {
            let rex = b0 & 0xf0 == 0x40;
            for op in 0..=if rex { 255u8 } else { 0 } {
                let at = usize::from(rex);
                code[0] = b0;
                code[at] = if rex { op } else { b0 };
                let two = code[at] == 0x0f;
                for op2 in 0..=if two { 255u8 } else { 0 } {
                    let m_at = at + 1 + usize::from(two);
                    if two {
                        code[at + 1] = op2;
                    }
                    for modrm in 0..=255u8 {
                        code[m_at] = modrm;
                        for base in [0u8, 4, 5] {
                            code[m_at + 1] = 0x20 | base;
                            assert_eq!(fast_length(&code), length(&code), "{code:02x?}");
                            compared += 1;
                        }
                    }
                }
            }
        }
        assert!(compared > 1_000_000);
    }

    /// Random bytes from a fixed seed, biased to the prefixes and opcodes the tables know,
    /// compared at every offset.
    #[test]
    fn agrees_with_iced_on_random_bytes() {
        // splitmix64.
        let mut state = 0x0123_4567_89ab_cdefu64;
        let mut next = move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let z = (state ^ (state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        const LEADS: [u8; 18] = [
            0x66, 0xf2, 0xf3, 0x2e, 0x3e, 0x64, 0x48, 0x41, 0x4c, 0x0f, 0x0f, 0x0f, 0xd9, 0xdb,
            0xdd, 0xdf, 0xf0, 0xf0,
        ];
        let mut code = Vec::with_capacity(1 << 22);
        while code.len() < 1 << 22 {
            let r = next();
            match r % 4 {
                0 => code.push(LEADS[(r >> 8) as usize % LEADS.len()]),
                _ => code.extend_from_slice(&(r >> 8).to_le_bytes()[..(r as usize >> 3) % 6 + 1]),
            }
        }
        assert!(agree(&code, "random") > 1 << 20);
    }

    /// Every offset of the executable sections of this test program (rustc's code, and the C
    /// library's start-up code linked into it) and of the C library (gcc's).
    #[test]
    fn agrees_with_iced_on_real_code() {
        let mut files = vec!["/proc/self/exe".to_string()];
        files.extend(
            [
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
            ]
            .iter()
            .find(|p| std::path::Path::new(p).exists())
            .map(|p| p.to_string()),
        );
        // A wider body on demand: a file listing ELF files, one a line.
        if let Ok(list) = std::env::var("BOOTPROF_LENGTH_CORPUS") {
            let list = std::fs::read_to_string(&list).unwrap();
            files.extend(list.lines().filter(|s| !s.is_empty()).map(String::from));
        }
        let mut answered = 0;
        for file in &files {
            answered += agree_in_file(file);
        }
        assert!(answered > 100_000, "{answered} offsets compared");
    }

    /// The tables answer nearly every instruction of compiled code, so that iced is seldom
    /// asked (and its tables, built on first use, seldom built): counted along the linear
    /// decoding of this test program's text.
    #[test]
    fn answers_most_compiled_code() {
        let (mut answered, mut all) = (0, 0);
        each_text("/proc/self/exe", |text, _| {
            let mut pos = 0;
            while let Some(n) = iced(&text[pos..text.len().min(pos + 16)]) {
                answered += usize::from(length(&text[pos..]).is_some());
                all += 1;
                pos += n;
            }
        });
        assert!(answered * 100 > all * 97, "{answered} of {all}");
    }

    /// [`agree`] over each executable section of the ELF file `path`.
    fn agree_in_file(path: &str) -> usize {
        let mut answered = 0;
        each_text(path, |text, name| {
            answered += agree(text, &format!("{path} {name}"))
        });
        answered
    }

    /// Calls `f` with the bytes and name of each executable section of the ELF file `path` (an
    /// object, a shared object or an executable; anything else has none).
    fn each_text(path: &str, mut f: impl FnMut(&[u8], &str)) {
        use object::elf::{FileHeader64, SHF_EXECINSTR, SHT_NOBITS};
        use object::read::elf::{FileHeader, SectionHeader};
        let le = object::LittleEndian;
        let data = std::fs::read(path).unwrap();
        let Ok(header) = FileHeader64::<object::LittleEndian>::parse(&*data) else {
            return;
        };
        let sections = header.sections(le, &*data).unwrap();
        for section in sections.iter() {
            if section.sh_flags(le).0 & SHF_EXECINSTR.0 == 0 || section.sh_type(le) == SHT_NOBITS {
                continue;
            }
            let name = sections.section_name(le, section).unwrap_or(b"?");
            f(
                section.data(le, &*data).unwrap(),
                &String::from_utf8_lossy(name),
            );
        }
    }
}
