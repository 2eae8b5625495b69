//! Instruction decoding for `patch`: decides whether the bytes under a relocation against a probe
//! symbol are one of the call forms we rewrite, and whether an offset is an instruction boundary.
//!
//! Takes a text section's bytes and one relocation; hands on a `Recognised` verdict. The
//! opcodes of each form are [`Form::opcode`]; the bytes written for each are in
//! [`bootprof_format::disabled_bytes`], with their before/after table.

use crate::length;
use bootprof_format::Form;
use iced_x86::{Decoder, DecoderOptions};
use object::elf;

/// What the bytes under a relocation against a probe symbol are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recognised {
    /// A site: the instruction starts at `start` (a section offset) and has this form.
    Site {
        /// Offset of the instruction's first byte.
        start: usize,
        /// Its form.
        form: Form,
    },
    /// Not a call or jump (address taken, a GOT load, data): leave the relocation as it is.
    NotASite(&'static str),
    /// A relocation type that only calls and jumps use, on bytes that are not a call or jump:
    /// the object is corrupt or not what the compiler would emit.
    BadCall,
}

/// Looks at the bytes of `text` under a relocation of type `r_type` at `r_offset` with `addend`.
///
/// Only the forms of the prior-art table are accepted: `e8`/`e9` + rel32 with `R_X86_64_PLT32` or
/// `R_X86_64_PC32`, and `ff 15`/`ff 25` + RIP-relative disp32 with one of the GOTPCREL types. The
/// relocation must cover the last four bytes of the instruction (addend -4). The opcode bytes
/// decide the instruction whole: in 64-bit code `e8`, `e9` are always `call`/`jmp rel32` and the
/// ModRM byte `15`/`25` after `ff` is always `call`/`jmp qword [rip+disp32]`, so the scan's
/// check that the relocation's four bytes lie inside the section leaves nothing for a decoder
/// to reject (the `forms_decode_as_iced_does` test holds iced-x86 to that). Whether the
/// instruction starts on an instruction boundary is [`on_boundaries`]' decoding.
pub(crate) fn recognise(
    text: &[u8],
    r_offset: usize,
    r_type: elf::RelocationType,
    addend: i64,
) -> Recognised {
    let (start, form) = match r_type {
        elf::R_X86_64_PLT32 | elf::R_X86_64_PC32 => {
            let form = match opcode_before(text, r_offset, [Form::CallRel32, Form::JmpRel32]) {
                Some(form) => form,
                None if r_type == elf::R_X86_64_PLT32 => return Recognised::BadCall,
                None => return Recognised::NotASite("address taken (not a call or jump)"),
            };
            (r_offset - form.opcode().len(), form)
        }
        elf::R_X86_64_GOTPCREL | elf::R_X86_64_GOTPCRELX | elf::R_X86_64_REX_GOTPCRELX => {
            let Some(form) = opcode_before(text, r_offset, [Form::CallGot, Form::JmpGot]) else {
                return Recognised::NotASite("a GOT load, not a call or jump through the GOT");
            };
            (r_offset - form.opcode().len(), form)
        }
        _ => return Recognised::NotASite("a data or absolute relocation"),
    };
    if addend != -4 {
        return if r_type == elf::R_X86_64_PLT32 {
            Recognised::BadCall
        } else {
            Recognised::NotASite("a call to an offset from the symbol")
        };
    }
    if text.len() < start + form.len() {
        return Recognised::BadCall;
    }
    Recognised::Site { start, form }
}

/// Which of `forms` has its opcode right before `r_offset` in `text`.
fn opcode_before(text: &[u8], r_offset: usize, forms: [Form; 2]) -> Option<Form> {
    forms.into_iter().find(|f| {
        let op = f.opcode();
        r_offset
            .checked_sub(op.len())
            .is_some_and(|s| &text[s..r_offset] == op)
    })
}

/// Checks that each of `starts` (sorted offsets in `text`) is an instruction boundary when
/// `text` is decoded linearly from `from` (lengths from [`length`], iced-x86 for the rest): sets the flag of each in `ok` (as long as `starts`;
/// reused by the caller from function to function).
///
/// Compiler output on x86-64 keeps no data inside functions, so decoding from the function's
/// first byte reaches every instruction; a start that decoding steps over is not an instruction.
pub(crate) fn on_boundaries(text: &[u8], from: usize, starts: &[usize], ok: &mut [bool]) {
    // Every flag is written in the one pass (clearing them first was a call of `memset` per
    // function), and a hook's call, mostly its function's first instruction, needs no decoding.
    let mut pos = start(text, from);
    for (ok, &s) in ok.iter_mut().zip(starts) {
        while pos < s {
            pos = after(text, pos);
        }
        *ok = pos == s;
    }
}

/// [`on_boundaries`] for many functions, two decoded side by side, one instruction of each in
/// turn: `calls` are (the offset a function starts at, a call's offset) in function order and,
/// within a function, in offset order; `flag` is told each call's index in `calls` and whether
/// it is on an instruction boundary. Each decoding is a chain in which an instruction's place
/// waits for the length of the one before; two chains side by side keep the CPU busy where one
/// leaves it waiting. The calls are cut in two halves at a function's start, each half's
/// functions decoded one after another in its lane. The loop that decodes holds only the two
/// places and the two calls they go to; a lane that reaches its call leaves it.
pub(crate) fn on_boundaries_lanes(
    text: &[u8],
    calls: &[(usize, usize)],
    mut flag: impl FnMut(usize, bool),
) {
    let mut mid = calls.len() / 2;
    while mid > 0 && mid < calls.len() && calls[mid].0 == calls[mid - 1].0 {
        mid += 1;
    }
    let mut a = Lane::new(&calls[..mid], 0);
    let mut b = Lane::new(&calls[mid..], mid);
    let (mut live_a, mut live_b) = (a.settle(text, &mut flag), b.settle(text, &mut flag));
    loop {
        match (live_a, live_b) {
            (true, true) => {
                let (mut pa, mut pb) = (a.pos, b.pos);
                while pa < a.target && pb < b.target {
                    pa = after(text, pa);
                    pb = after(text, pb);
                }
                (a.pos, b.pos) = (pa, pb);
            }
            (true, false) => {
                while a.pos < a.target {
                    a.pos = after(text, a.pos);
                }
            }
            (false, true) => {
                while b.pos < b.target {
                    b.pos = after(text, b.pos);
                }
            }
            (false, false) => return,
        }
        live_a = live_a && a.settle(text, &mut flag);
        live_b = live_b && b.settle(text, &mut flag);
    }
}

/// Where the instruction at `pos` of `text` ends, or [`STUCK`] when there is none (the end of
/// `text`, or bytes that are no instruction): the decoding of [`on_boundaries`] stops there.
#[inline(always)]
fn after(text: &[u8], pos: usize) -> usize {
    match text.get(pos..).filter(|code| !code.is_empty()) {
        Some(code) => instruction_length(code).map_or(STUCK, |len| pos + len),
        None => STUCK,
    }
}

/// The place of a decoding that cannot go on: past every call.
const STUCK: usize = usize::MAX;

/// Where the decoding of a function starting at `from` starts: there, or [`STUCK`] past the
/// end of `text`.
fn start(text: &[u8], from: usize) -> usize {
    if from > text.len() {
        STUCK
    } else {
        from
    }
}

/// One lane of [`on_boundaries_lanes`]: the calls it has left and the index of the first, the
/// function being decoded, where its decoding is ([`STUCK`] when it cannot go on), and the
/// call it goes to.
struct Lane<'a> {
    calls: &'a [(usize, usize)],
    index: usize,
    function: usize,
    pos: usize,
    target: usize,
}

impl<'a> Lane<'a> {
    fn new(calls: &'a [(usize, usize)], index: usize) -> Self {
        Lane {
            calls,
            index,
            function: STUCK,
            pos: STUCK,
            target: 0,
        }
    }

    /// Flags the calls the decoding has reached or passed (starting each function's decoding
    /// at its start), and aims at the next one ahead; whether there is one.
    #[inline]
    fn settle(&mut self, text: &[u8], flag: &mut impl FnMut(usize, bool)) -> bool {
        while let Some((&(from, s), rest)) = self.calls.split_first() {
            if self.function != from {
                (self.function, self.pos) = (from, start(text, from));
            }
            if self.pos < s {
                self.target = s;
                return true;
            }
            flag(self.index, self.pos == s);
            (self.calls, self.index) = (rest, self.index + 1);
        }
        false
    }
}

/// Length of the instruction at the start of `code`: [`length::fast_length`]'s, else iced-x86's
/// (which the length tables defer to for anything they do not know); `None` when iced finds
/// no valid instruction there (an invalid opcode, or one running past `code`).
#[inline(always)]
fn instruction_length(code: &[u8]) -> Option<usize> {
    length::fast_length(code).or_else(|| iced_length(code))
}

/// iced-x86's length of the instruction at the start of `code`, `None` when it is invalid.
#[cold]
#[inline(never)]
pub fn iced_length(code: &[u8]) -> Option<usize> {
    let insn = Decoder::new(64, code, DecoderOptions::NONE).decode();
    (!insn.is_invalid()).then(|| insn.len())
}

/// What decoding a section end to end takes, for `bootprof-scanbench --decode`: the
/// instructions decoded, how many of them neither `length::length` nor `length::fast_length`
/// answers (left to iced-x86), and the median time of `passes` passes of each way, in
/// nanoseconds: one chain by `length::length`, one by `length::fast_length`, and the two
/// halves side by side as the deferred boundary checks decode (`on_boundaries_lanes`).
#[derive(Debug, Clone, Copy)]
pub struct DecodeTimes {
    /// Instructions decoded.
    pub instructions: usize,
    /// Of them, those left to iced-x86.
    pub to_iced: usize,
    /// Nanoseconds a pass with `length::length`, one chain.
    pub length_ns: u64,
    /// Nanoseconds a pass with `length::fast_length`, one chain.
    pub fast_ns: u64,
    /// Nanoseconds a pass with two chains side by side.
    pub lanes_ns: u64,
}

/// Times the decoding of `text` from its first byte to its end, `passes` times each way
/// (see [`DecodeTimes`]).
pub fn decode_times(text: &[u8], passes: usize) -> DecodeTimes {
    let (mut instructions, mut to_iced, mut pos) = (0, 0, 0);
    while pos < text.len() {
        to_iced += usize::from(length::length(&text[pos..]).is_none());
        instructions += 1;
        pos = match after(text, pos) {
            STUCK => pos + 1,
            next => next,
        };
    }
    let median = |run: &dyn Fn()| {
        let mut ns: Vec<u64> = (0..passes.max(1))
            .map(|_| {
                let t = std::time::Instant::now();
                run();
                t.elapsed().as_nanos() as u64
            })
            .collect();
        ns.sort_unstable();
        ns[ns.len() / 2]
    };
    let chain = |len: fn(&[u8]) -> Option<usize>| {
        let mut pos = 0;
        while pos < text.len() {
            pos += len(&text[pos..])
                .or_else(|| iced_length(&text[pos..]))
                .unwrap_or(1);
        }
        std::hint::black_box(pos);
    };
    let half = text.len() / 2;
    let calls = [(0, half), (half, text.len())];
    DecodeTimes {
        instructions,
        to_iced,
        length_ns: median(&|| chain(length::length)),
        fast_ns: median(&|| chain(length::fast_length)),
        lanes_ns: median(&|| {
            on_boundaries_lanes(text, &calls, |_, ok| {
                std::hint::black_box(ok);
            })
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let text = [
            0x55, 0xe8, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0, 0xff, 0x15, 0, 0, 0, 0,
        ];
        assert_eq!(
            recognise(&text, 2, elf::R_X86_64_PLT32, -4),
            Recognised::Site {
                start: 1,
                form: Form::CallRel32
            }
        );
        assert_eq!(
            recognise(&text, 7, elf::R_X86_64_PLT32, -4),
            Recognised::Site {
                start: 6,
                form: Form::JmpRel32
            }
        );
        assert_eq!(
            recognise(&text, 13, elf::R_X86_64_GOTPCRELX, -4),
            Recognised::Site {
                start: 11,
                form: Form::CallGot
            }
        );
        let boundaries = |from, starts: &[usize]| {
            let mut ok = vec![false; starts.len()];
            on_boundaries(&text, from, starts, &mut ok);
            ok
        };
        assert_eq!(boundaries(0, &[1, 6, 11]), [true, true, true]);
        assert_eq!(boundaries(0, &[2]), [false]);
        assert_eq!(boundaries(1, &[1, 6, 11]), [true, true, true]);
        assert_eq!(boundaries(1, &[1, 7]), [true, false]);
        assert_eq!(boundaries(18, &[18]), [false]);
    }

    /// Functions decoded two side by side flag each call as each decoded alone does: on this
    /// test program's code, from starts that are instructions and starts that are not, with
    /// calls on boundaries, inside instructions and past the end, in lanes of unequal work.
    #[test]
    fn lanes_flag_as_one_function_alone() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let text = &exe[exe.len() / 4..exe.len() / 4 + (256 << 10)];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let (mut reached, mut compared) = (0, 0);
        for _ in 0..200 {
            let mut calls = Vec::new();
            let mut from = next(4096);
            for _ in 0..next(30) {
                let mut starts: Vec<usize> = (0..next(6)).map(|_| from + next(400)).collect();
                if next(8) == 0 {
                    starts.push(text.len() + 3);
                }
                // Some calls put where decoding arrives, so that some are on boundaries.
                let mut pos = from;
                for _ in 0..next(40) {
                    match text.get(pos..).and_then(instruction_length) {
                        Some(n) => pos += n,
                        None => break,
                    }
                }
                starts.push(pos);
                starts.sort();
                calls.extend(starts.into_iter().map(|s| (from, s)));
                from += 1 + next(8192);
            }
            let mut side_by_side = vec![None; calls.len()];
            on_boundaries_lanes(text, &calls, |i, ok| {
                assert!(
                    side_by_side[i].replace(ok).is_none(),
                    "call {i} flagged twice"
                );
            });
            let mut alone = Vec::new();
            for group in calls.chunk_by(|a, b| a.0 == b.0) {
                let starts: Vec<usize> = group.iter().map(|c| c.1).collect();
                let mut ok = vec![false; starts.len()];
                on_boundaries(text, group[0].0, &starts, &mut ok);
                alone.extend(ok.into_iter().map(Some));
            }
            assert_eq!(side_by_side, alone, "{calls:x?}");
            reached += alone.iter().filter(|&&o| o == Some(true)).count();
            compared += alone.len();
        }
        assert!(
            reached > 500 && reached < compared,
            "{reached} of {compared} on boundaries"
        );
    }

    /// The decoding timed for `bootprof-scanbench --decode` counts the instructions and those
    /// left to iced-x86 (here a VEX instruction), and times each way.
    #[test]
    fn decode_times_counts_instructions() {
        // push %rbp; vmovdqa %xmm0,%xmm1 (VEX: iced's); mov %rsp,%rbp; ret
        let one: &[u8] = &[0x55, 0xc5, 0xf9, 0x6f, 0xc8, 0x48, 0x89, 0xe5, 0xc3];
        let text: Vec<u8> = one.iter().copied().cycle().take(one.len() * 100).collect();
        let d = decode_times(&text, 3);
        assert_eq!((d.instructions, d.to_iced), (400, 100));
        assert!(d.length_ns > 0 && d.fast_ns > 0 && d.lanes_ns > 0, "{d:?}");
    }

    /// Each form's bytes, with any displacement, are the instruction `recognise` takes them for.
    #[test]
    fn forms_decode_as_iced_does() {
        use iced_x86::{Code, Register};
        let cases = [
            (Form::CallRel32, Code::Call_rel32_64),
            (Form::JmpRel32, Code::Jmp_rel32_64),
            (Form::CallGot, Code::Call_rm64),
            (Form::JmpGot, Code::Jmp_rm64),
        ];
        for (form, code) in cases {
            for disp in [0u32, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX] {
                let mut bytes = form.opcode().to_vec();
                bytes.extend_from_slice(&disp.to_le_bytes());
                let insn = Decoder::new(64, &bytes, DecoderOptions::NONE).decode();
                assert_eq!((insn.code(), insn.len()), (code, form.len()), "{form:?}");
                if matches!(form, Form::CallGot | Form::JmpGot) {
                    assert_eq!(insn.memory_base(), Register::RIP);
                }
            }
        }
    }

    /// Every disabled site's bytes, of every kind, form and NOP version, decode as what they
    /// stand for: instructions filling the site exactly, one of them unless
    /// `disabled_is_two_instructions` says two (the rule enabling while threads run follows);
    /// an is-enabled site's leave `eax` zero (`mov $0` or `xor` of itself).
    #[test]
    fn disabled_bytes_decode_as_their_instructions() {
        use bootprof_format::code::disabled_is_two_instructions;
        use bootprof_format::{disabled_bytes, Kind, Nops};
        use iced_x86::{Mnemonic, OpKind, Register};
        let forms = [
            Form::CallRel32,
            Form::CallGot,
            Form::JmpRel32,
            Form::JmpGot,
            Form::Guard,
        ];
        for kind in [Kind::Probe, Kind::IsEnabled, Kind::Fentry] {
            for form in forms {
                for nops in [Nops::Mov, Nops::Xor] {
                    let bytes = disabled_bytes(kind, form, nops);
                    let mut decoder = Decoder::new(64, &bytes[..form.len()], DecoderOptions::NONE);
                    let insns: Vec<_> = decoder.iter().collect();
                    let case = format!("{kind:?} {form:?} {nops:?}");
                    assert!(insns.iter().all(|i| !i.is_invalid()), "{case}");
                    // A tail site's `ret` ends it: what follows is never run.
                    let run = match insns.iter().position(|i| i.mnemonic() == Mnemonic::Ret) {
                        Some(ret) => ret + 1,
                        None => insns.len(),
                    };
                    let two = disabled_is_two_instructions(kind, form, nops);
                    assert_eq!(run, if two { 2 } else { 1 }, "{case}");
                    if kind == Kind::IsEnabled && form != Form::Guard {
                        let zero = &insns[0];
                        assert_eq!(zero.op0_register(), Register::EAX, "{case}");
                        let zeroes = match zero.mnemonic() {
                            Mnemonic::Mov => {
                                zero.op1_kind() == OpKind::Immediate32 && zero.immediate32() == 0
                            }
                            Mnemonic::Xor => zero.op1_register() == Register::EAX,
                            _ => false,
                        };
                        assert!(zeroes, "{case}");
                    }
                }
            }
        }
    }

    #[test]
    fn not_sites() {
        // lea sym(%rip), %rax
        let lea = [0x48, 0x8d, 0x05, 0, 0, 0, 0];
        assert!(matches!(
            recognise(&lea, 3, elf::R_X86_64_PC32, -4),
            Recognised::NotASite(_)
        ));
        // mov sym@GOTPCREL(%rip), %rax
        let mov = [0x48, 0x8b, 0x05, 0, 0, 0, 0];
        assert!(matches!(
            recognise(&mov, 3, elf::R_X86_64_REX_GOTPCRELX, -4),
            Recognised::NotASite(_)
        ));
        assert_eq!(
            recognise(&lea, 3, elf::R_X86_64_PLT32, -4),
            Recognised::BadCall
        );
        let call = [0xe8, 0, 0, 0, 0];
        assert_eq!(
            recognise(&call, 1, elf::R_X86_64_PLT32, 0),
            Recognised::BadCall
        );
        assert_eq!(
            recognise(&call, 0, elf::R_X86_64_PLT32, -4),
            Recognised::BadCall
        );
    }
}
