//! Bad input: each test damages a copy of a good object in one place (or sets up a broken
//! environment) and checks that bootprof-link fails cleanly: a non-zero exit, a message naming the
//! file (and the section, offset and symbol where the damage is), no panic, and the output file
//! that was there before left byte-identical.

use crate::elf::{self, Elf};
use crate::util::{
    cmd, compile_c, link_bin, read, require, run, source_dir, temporaries_left, write, Out, TempDir,
};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const OLD_OUTPUT: &[u8] = b"an output from an earlier, successful link\n";

/// A temporary directory with the good object `main.o` (from `tests/sources/bad-input-base`)
/// and an `app` from an earlier link.
struct Setup {
    t: TempDir,
    good: PathBuf,
    out: PathBuf,
}

impl Setup {
    fn new(name: &str) -> Setup {
        let t = TempDir::new(name);
        let good = compile_c(
            &source_dir("bad-input-base").join("main.c"),
            &t.join("main.o"),
            &["-O2"],
        );
        let out = t.join("app");
        write(&out, OLD_OUTPUT);
        Setup { t, good, out }
    }

    /// A copy of the good object called `name`, changed by `damage`.
    fn damaged(&self, name: &str, damage: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
        let mut bytes = read(&self.good);
        damage(&mut bytes);
        let path = self.t.join(name);
        write(&path, bytes);
        path
    }

    /// Runs `bootprof-link cc -o app inputs...`.
    fn link(&self, inputs: &[&Path]) -> Out {
        self.link_to(&self.out, inputs)
    }

    /// Runs `bootprof-link cc -o out inputs...`.
    fn link_to(&self, out: &Path, inputs: &[&Path]) -> Out {
        run(cmd(link_bin(), ["cc".as_ref(), "-o".as_ref(), out.as_os_str()]).args(inputs))
    }

    /// The checks every bad-input test makes; `names` must all appear in stderr.
    #[track_caller]
    fn check_failed(&self, o: &Out, names: &[&str]) {
        o.no_panic();
        assert!(
            matches!(o.code, Some(c) if c != 0),
            "expected a non-zero exit (not a signal):{o}"
        );
        for name in names {
            assert!(o.stderr.contains(name), "stderr does not name `{name}`:{o}");
        }
        assert_eq!(
            read(&self.out),
            OLD_OUTPUT,
            "the earlier output was touched:{o}"
        );
        // A link started beside the rewriting (GNU ld, lld) was abandoned: nothing of it shows
        // or stays.
        assert!(
            !o.stderr.contains("abandoned this link"),
            "the abandoned linker's messages were shown:{o}"
        );
        let left = temporaries_left(self.t.path());
        assert!(
            left.is_empty(),
            "temporaries left beside the output {left:?}:{o}"
        );
    }

    /// The relocation against probe `symbol` in the good object.
    fn probe_rela(&self, symbol: &str) -> (Elf, elf::Rela) {
        let elf = Elf::open(&self.good);
        let rela = elf
            .probe_relas()
            .into_iter()
            .find(|(r, name)| name == symbol && r.r_type == elf::R_X86_64_PLT32 && r.addend == -4)
            .unwrap_or_else(|| panic!("no PLT32 relocation against {symbol}"))
            .0;
        (elf, rela)
    }
}

fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn text_file_named_like_an_object() {
    require!("cc");
    let s = Setup::new("bad-text");
    let bad = s.t.join("x.o");
    write(&bad, "this is not an object file\n");
    let o = s.link(&[&s.good, &bad]);
    s.check_failed(&o, &["x.o"]);
}

#[test]
fn thirty_two_bit_object() {
    require!("cc");
    let s = Setup::new("bad-32");
    // A real -m32 object when the compiler can make one, else ELFCLASS32 written into a copy.
    let src = source_dir("bad-input-base").join("main.c");
    let bad = s.t.join("main32.o");
    let m32 = run(cmd(
        "cc",
        [
            "-m32".as_ref(),
            "-c".as_ref(),
            src.as_os_str(),
            "-o".as_ref(),
        ],
    )
    .arg(&bad));
    let bad = if m32.code == Some(0) {
        bad
    } else {
        s.damaged("main32.o", |b| b[elf::EI_CLASS] = 1)
    };
    let o = s.link(&[&bad]);
    s.check_failed(&o, &["main32.o"]);
}

#[test]
fn object_for_another_machine() {
    require!("cc");
    let s = Setup::new("bad-machine");
    let bad = s.damaged("aarch64.o", |b| {
        b[elf::E_MACHINE..elf::E_MACHINE + 2].copy_from_slice(&183u16.to_le_bytes())
    });
    let o = s.link(&[&bad]);
    s.check_failed(&o, &["aarch64.o"]);
}

#[test]
fn truncated_object() {
    require!("cc");
    let s = Setup::new("bad-truncated");
    let bad = s.damaged("truncated.o", |b| {
        let half = b.len() / 2;
        b.truncate(half)
    });
    let o = s.link(&[&bad]);
    s.check_failed(&o, &["truncated.o"]);
}

#[test]
fn section_headers_past_the_end() {
    require!("cc");
    let s = Setup::new("bad-shoff");
    let bad = s.damaged("shoff.o", |b| {
        let past = b.len() as u64 + 0x1000;
        put_u64(b, elf::E_SHOFF, past)
    });
    let o = s.link(&[&bad]);
    s.check_failed(&o, &["shoff.o"]);
}

#[test]
fn relocation_offset_outside_its_section() {
    require!("cc");
    let s = Setup::new("bad-r-offset");
    let (elf, rela) = s.probe_rela("__dtrace_sdt_bad__first");
    let target = elf.sections[rela.target].clone();
    let outside = target.size + 0x100;
    let bad = s.damaged("r_offset.o", |b| put_u64(b, rela.entry_offset, outside));
    let o = s.link(&[&bad]);
    s.check_failed(&o, &["r_offset.o", &target.name, "offset"]);
}

#[test]
fn relocation_symbol_index_out_of_range() {
    require!("cc");
    let s = Setup::new("bad-r-sym");
    let (elf, rela) = s.probe_rela("__dtrace_sdt_bad__second");
    let target = elf.sections[rela.target].clone();
    let index = elf.symbol_count() as u64 + 1000;
    let info = (index << 32) | rela.r_type as u64;
    let bad = s.damaged("r_sym.o", |b| put_u64(b, rela.entry_offset + 8, info));
    let o = s.link(&[&bad]);
    s.check_failed(&o, &["r_sym.o", &target.name]);
}

#[test]
fn site_that_is_not_a_call() {
    require!("cc");
    let s = Setup::new("bad-not-call");
    let symbol = "__dtrace_sdt_bad__second";
    let (elf, rela) = s.probe_rela(symbol);
    let text = elf.sections[rela.target].clone();
    let opcode = (text.offset + rela.r_offset - 1) as usize;
    assert_eq!(
        read(&s.good)[opcode],
        0xe8,
        "the base object's call is not e8"
    );
    let bad = s.damaged("notcall.o", |b| b[opcode] = 0x90);
    let o = s.link(&[&bad]);
    s.check_failed(&o, &["notcall.o", &text.name, symbol]);
    let (insn, reloc) = (rela.r_offset - 1, rela.r_offset);
    assert!(
        [insn, reloc]
            .iter()
            .any(|off| o.stderr.contains(&format!("{off:#x}"))),
        "stderr gives neither offset {insn:#x} nor {reloc:#x}:{o}"
    );
}

#[test]
fn missing_driver() {
    require!("cc");
    let s = Setup::new("bad-driver");
    let o = run(cmd(
        link_bin(),
        ["-o".as_ref(), s.out.as_os_str(), s.good.as_os_str()],
    )
    .env("BOOTPROF_CC", "/nonexistent/cc")
    .env_remove("BOOTPROF_LINK_FLAGS"));
    s.check_failed(&o, &["/nonexistent/cc"]);
}

/// The final link fails with exit code 7: bootprof-link exits 7 and passes the stderr on. The fake
/// driver hands everything but a final link (compiles, `-r`, queries) to the real cc.
#[test]
fn failing_linker_exit_code_passes_through() {
    require!("cc");
    let s = Setup::new("bad-linker");
    let fake = s.t.join("fakecc");
    write(
        &fake,
        "#!/bin/sh\n\
         for a in \"$@\"; do\n\
           case \"$a\" in -c|-r|-Wl,-r|-E|-S|--version|-print-*|-dump*) exec cc \"$@\";; esac\n\
         done\n\
         echo 'fakecc: the final link fails on purpose' >&2\n\
         exit 7\n",
    );
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = run(cmd(
        link_bin(),
        [fake.as_os_str(), "-o".as_ref(), s.out.as_os_str()],
    )
    .arg(&s.good));
    s.check_failed(&o, &["fails on purpose"]);
    assert_eq!(
        o.code,
        Some(7),
        "the linker's exit code is not passed through:{o}"
    );
}

#[test]
fn output_path_that_cannot_be_written() {
    require!("cc");
    let s = Setup::new("bad-output");
    let o = run(cmd(link_bin(), ["cc", "-o", "/nonexistent-dir/app"]).arg(&s.good));
    s.check_failed(&o, &["/nonexistent-dir"]);
}

/// A hand-written object holding one guard of `bootprof.h`'s shape (a 5-byte NOP at `1:`, its
/// out-of-line call at `2:`) and, in `.bootprof_guard`, the record `record` (assembler lines).
fn guard_object(s: &Setup, name: &str, record: &str) -> PathBuf {
    let src = s.t.join(format!("{name}.s"));
    write(
        &src,
        format!(
            ".text\n.globl main\n.type main,@function\nmain:\n\
             1: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\
             3: xor %eax, %eax\n   ret\n\
             2: call __dtrace_sdt_guard__site\n   jmp 3b\n\
             .size main, .-main\n\
             .data\ndatum: .quad 0\n\
             .section .bootprof_guard,\"\",@progbits\n.balign 8\n{record}\n\
             .section .note.GNU-stack,\"\",@progbits\n"
        ),
    );
    compile_c(&src, &s.t.join(format!("{name}.o")), &[])
}

#[test]
fn guard_records_that_are_wrong() {
    require!("cc");
    let s = Setup::new("bad-guard");
    // The good record links and runs (the guard stays a NOP, the call behind it too).
    let good = guard_object(
        &s,
        "good",
        ".long 1b - ., 2b - .\n.quad __dtrace_sdt_guard__site",
    );
    let ok_out = s.t.join("ok-app");
    s.link_to(&ok_out, &[&good]).ok();
    assert_eq!(run(cmd(&ok_out, [""; 0])).code, Some(0));

    // (record, what stderr must name besides the file and the section)
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "notnop",
            ".long 3b - ., 2b - .\n.quad __dtrace_sdt_guard__site",
            &[
                "is not the 5-byte NOP",
                "`.text`",
                "0x5",
                "__dtrace_sdt_guard__site",
            ],
        ),
        (
            "incomplete",
            ".long 1b - ., 0\n.quad __dtrace_sdt_guard__site",
            &["`.bootprof_guard` offset 0x0", "incomplete guard record"],
        ),
        (
            "notprobe",
            ".long 1b - ., 2b - .\n.quad main",
            &["`.bootprof_guard` offset 0x8", "not a probe symbol"],
        ),
        (
            "target-in-data",
            ".long 1b - ., datum - .\n.quad __dtrace_sdt_guard__site",
            &[
                "`.bootprof_guard` offset 0x4",
                "not code",
                "__dtrace_sdt_guard__site",
            ],
        ),
        (
            "odd-size",
            ".long 1b - ., 2b - .\n.quad __dtrace_sdt_guard__site\n.byte 0",
            &[
                "`.bootprof_guard` offset 0x10",
                "not a whole number of 16-byte records",
            ],
        ),
    ];
    for (name, record, names) in cases {
        let obj = guard_object(&s, name, record);
        let o = s.link(&[&obj]);
        let file = format!("{name}.o");
        let mut all = vec![file.as_str(), ".bootprof_guard"];
        if name == "notnop" {
            all.pop();
        }
        all.extend_from_slice(names);
        s.check_failed(&o, &all);
    }
}

/// A guard whose probe function the program defines itself: the guard's out-of-line call keeps
/// only what bootprof's stub keeps, so bootprof-link refuses it and says what to do. With the
/// probe compiled as a plain call the same program links.
#[test]
fn guard_calling_a_probe_function_the_program_defines() {
    require!("cc");
    let s = Setup::new("bad-guard-defined");
    let src = s.t.join("defined.c");
    write(
        &src,
        "#include \"bootprof.h\"\n\
         void __dtrace_sdt_app__mine(unsigned long x) { (void)x; }\n\
         int main(int argc, char **argv) { (void)argv; BOOTPROF_PROBE(app, mine, argc); return 0; }\n",
    );
    let include = crate::util::repo_root().join("runtime/include");
    let include = include.to_str().unwrap();
    let guarded = compile_c(&src, &s.t.join("defined.o"), &["-O2", "-I", include]);
    let o = s.link(&[&guarded]);
    s.check_failed(
        &o,
        &[
            "defined.o",
            "`.text",
            "__dtrace_sdt_app__mine",
            "which the program defines itself",
            "BOOTPROF_CALL_SITES",
        ],
    );
    let calls = compile_c(
        &src,
        &s.t.join("calls.o"),
        &["-O2", "-I", include, "-DBOOTPROF_CALL_SITES"],
    );
    s.link_to(&s.t.join("calls-app"), &[&calls]).ok();
}

/// A probe whose address the program takes, in data or in code, and calls through a pointer:
/// those calls would reach the stub outside the site table, where the probe can never be turned
/// on. The link is refused, naming the reference; with only direct calls it succeeds.
#[test]
fn probe_address_taken_is_refused_naming_the_reference() {
    require!("cc");
    let s = Setup::new("bad-address-taken");
    let src = source_dir("address-taken").join("main.c");
    for (flag, section, symbol, why) in [
        (
            "-DTAKE_IN_DATA",
            "`.data",
            "__dtrace_sdt_app__y",
            "address is taken in data",
        ),
        (
            "-DTAKE_IN_CODE",
            "`.text",
            "__dtrace_sdt_app__x",
            "a GOT load",
        ),
    ] {
        let object = compile_c(&src, &s.t.join("taken.o"), &["-O2", flag]);
        let o = s.link(&[&object]);
        s.check_failed(
            &o,
            &[
                "taken.o",
                section,
                "offset 0x",
                symbol,
                why,
                "not a call site",
            ],
        );
    }
    let direct = compile_c(&src, &s.t.join("direct.o"), &["-O2"]);
    s.link_to(&s.t.join("direct-app"), &[&direct]).ok();
}

/// A symbol that starts inside a site's call instruction (found by the fuzzer: patching the call
/// changed how the code after the symbol decoded, so a second rewrite found more sites). Compiled
/// code never has one; the object is refused, naming the symbol and the site.
#[test]
fn symbol_starting_inside_a_call_site() {
    require!("cc");
    let s = Setup::new("bad-symbol-inside");
    let src = s.t.join("inside.s");
    write(
        &src,
        ".text\n.globl main\n.type main,@function\nmain:\n\
         call __dtrace_sdt_bad__inside\n\
         xor %eax, %eax\n   ret\n\
         .size main, .-main\n\
         .globl middle\n.type middle,@function\n.set middle, main + 2\n\
         .section .note.GNU-stack,\"\",@progbits\n",
    );
    let obj = compile_c(&src, &s.t.join("inside.o"), &[]);
    let o = s.link(&[&obj]);
    s.check_failed(
        &o,
        &[
            "inside.o",
            ".text",
            "__dtrace_sdt_bad__inside",
            "middle",
            "0x2",
        ],
    );
}

/// A call's bytes inside another instruction: an `e8` and a call relocation against a probe in
/// the immediate of a `movabs`, which decoding from the function's start steps over. Refused,
/// naming the object, section, offset and probe, both in a small section (checked as the sites
/// are made) and in one of 256 KiB (checked while GNU ld links, its output then dropped, and
/// verified again to say which call).
#[test]
fn call_hidden_inside_another_instruction() {
    require!("cc");
    let s = Setup::new("bad-hidden-call");
    for (name, pad) in [("small", 16), ("large", 256 << 10)] {
        let src = s.t.join(format!("{name}.s"));
        write(
            &src,
            format!(
                ".text\n.globl main\n.type main,@function\nmain:\n\
                 call __dtrace_sdt_ok__first\n\
                 .byte 0x48, 0xb8, 0xe8\n\
                 .reloc ., R_X86_64_PLT32, __dtrace_sdt_bad__hidden - 4\n\
                 .long 0\n.byte 0, 0, 0\n\
                 xor %eax, %eax\n   ret\n\
                 .size main, .-main\n\
                 .type pad,@function\npad:\n.skip {pad}, 0x90\n   ret\n.size pad, .-pad\n\
                 .section .note.GNU-stack,\"\",@progbits\n"
            ),
        );
        let obj = compile_c(&src, &s.t.join(format!("{name}.o")), &[]);
        let o = s.link(&[&obj]);
        s.check_failed(
            &o,
            &[
                &format!("{name}.o"),
                ".text",
                "offset 0x8",
                "__dtrace_sdt_bad__hidden",
                "not on an instruction boundary",
            ],
        );
    }
}

/// An archive holding the good object, built by `ar`, and its bytes.
fn archive_of(s: &Setup, name: &str) -> (PathBuf, Vec<u8>) {
    let lib = s.t.join(name);
    run(cmd(
        "ar",
        ["rcs".as_ref(), lib.as_os_str(), s.good.as_os_str()],
    ))
    .ok();
    let bytes = read(&lib);
    (lib, bytes)
}

// Archives are read by object's reader: its complaints must still name the archive.
#[test]
fn a_damaged_archive_is_an_error_naming_it() {
    require!("cc", "ar");
    let s = Setup::new("bad-archive");
    let (lib, good) = archive_of(&s, "libgood.a");
    // A member whose size runs past the end of the file.
    let mut bytes = good.clone();
    let header = bytes
        .windows(7)
        .position(|w| w == b"main.o/")
        .expect("the member's header");
    bytes[header + 48..header + 58].copy_from_slice(b"9999999   ");
    let bad = s.t.join("libbad.a");
    write(&bad, &bytes);
    let o = s.link(&[&bad]);
    s.check_failed(&o, &["libbad.a", "malformed archive"]);
    // A member header whose terminator is wrong.
    let mut bytes = good;
    bytes[header + 58] = b'x';
    write(&bad, &bytes);
    let o = s.link(&[&bad]);
    s.check_failed(&o, &["libbad.a", "malformed archive"]);
    // The good archive still links.
    run(cmd(
        link_bin(),
        ["cc".as_ref(), "-o".as_ref(), s.t.join("ok").as_os_str()],
    )
    .arg("-Wl,--whole-archive")
    .arg(&lib)
    .arg("-Wl,--no-whole-archive"))
    .ok();
}

#[test]
fn a_bsd_archive_is_refused_by_name() {
    require!("cc", "ar");
    let s = Setup::new("bsd-archive");
    // BSD's symbol table member, `__.SYMDEF`, in place of GNU's `/`.
    let mut bytes = b"!<arch>\n".to_vec();
    let symdef = b"\0\0\0\0\0\0\0\0";
    bytes.extend_from_slice(
        format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            "__.SYMDEF",
            0,
            0,
            0,
            644,
            symdef.len()
        )
        .as_bytes(),
    );
    bytes.extend_from_slice(symdef);
    let member = read(&s.good);
    bytes.extend_from_slice(
        format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            "main.o",
            0,
            0,
            0,
            644,
            member.len()
        )
        .as_bytes(),
    );
    bytes.extend_from_slice(&member);
    if member.len() % 2 == 1 {
        bytes.push(b'\n');
    }
    let bsd = s.t.join("libbsd.a");
    write(&bsd, &bytes);
    let o = s.link(&[&bsd]);
    s.check_failed(&o, &["libbsd.a", "BSD-format archives are not supported"]);
}
