//! Generate stubs: takes every probe symbol the inputs reference and do not define; hands on one
//! relocatable object that defines them all, so the final link succeeds, and that registers the
//! linked object's site table with the runtime.
//!
//! ```text
//! <symbol>:         4c 8d 1d rel32   lea <symbol's name>(%rip), %r11   ; the probe's id
//!                   ff 25 rel32      jmp *__bootprof_dispatch_ptrs+8*class(%rip)
//! __bootprof_ptrs:  .quad default_probe, default_isenabled, default_hook   (writable)
//! default_probe:    c3               ret
//! default_isenabled: 31 c0 c3        xor %eax,%eax; ret   (a probe reads as disabled)
//! default_hook:     c3               ret
//! ctor (.init_array.00099):
//!     mov bootprof_register@GOTPCREL(%rip), %rax    ; weak: 0 without the runtime
//!     test %rax,%rax; je 1f
//!     mov __bootprof_sites_start@GOTPCREL(%rip), %rdi
//!     mov __bootprof_sites_stop@GOTPCREL(%rip), %rsi
//!     lea __bootprof_ptrs(%rip), %rdx
//!     jmp *%rax                                     ; bootprof_register(start, stop, ptrs)
//! 1:  ret
//! dtor (.fini_array.00099):  bootprof_unregister(__bootprof_sites_start) when the runtime is there
//! ```
//!
//! The stub's bytes and the offsets of its displacements are `bootprof_format::code::STUB`. A tail
//! site's thunk (see `emit`) jumps to `<symbol> + 7` (`code::STUB_JMP`), the stub's `jmp`, with
//! its own id in r11: the `lea` is 7 bytes and comes first.
//!
//! Without the runtime the pointers stay on the defaults and every stub returns at once. With it,
//! `bootprof_register` records the table and points the three pointers at its dispatchers: the
//! GOT entry binds to the first definition in the global lookup scope (an executable's exported
//! runtime, else the first shared object's copy: every object `bootprof-link` links carries
//! one), and the runtime hands it on when another copy serves (runtime/src/serving.rs). A stub touches only `r11`, which no
//! calling convention uses to pass anything, so `mcount`/`__fentry__` keep every argument register
//! and `rax`. Stubs and table bounds are hidden: each executable or shared object has its own.
//! The bounds come from the linker script fragment in `linker-scripts/` (see [`SITES_SCRIPT`]),
//! not from `__start_`/`__stop_`, whose mere reference makes GNU ld keep every fragment.

/// The add-on linker script `bootprof-link` passes with `-T` (INSERT: the default script stays).
pub const SITES_SCRIPT: &str = include_str!("../../linker-scripts/bootprof-sites.ld");
/// The fragment it includes.
pub const SITES_FRAGMENT: &str = include_str!("../../linker-scripts/bootprof-sites.inc");

/// The script `bootprof-link` hands the linker: [`SITES_SCRIPT`] with the fragment it
/// `INCLUDE`s written in, so that a link makes no file for the fragment, nor names the private
/// directory with `-L` for the linker to find it (where each `-l` would be looked for first).
pub fn sites_script() -> String {
    SITES_SCRIPT.replacen("INCLUDE bootprof-sites.inc", SITES_FRAGMENT, 1)
}

use crate::error::{Error, Result};
use bootprof_format::code;
use bootprof_format::Kind;
use object::write::{
    Object, Relocation, SectionId, StandardSection, Symbol, SymbolId, SymbolSection,
};
use object::{
    elf, Architecture, BinaryFormat, Endianness, RelocationFlags, SectionKind, SymbolFlags,
    SymbolKind, SymbolScope,
};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Start and end of the table, defined by `linker-scripts/bootprof-sites.inc`.
pub use bootprof_format::{TABLE_START, TABLE_STOP};

/// The runtime's registration entry point, `bootprof_register(start, stop, ptrs)`.
pub const REGISTER_SYMBOL: &str = "bootprof_register";
/// The runtime's entry point for an object going away, `bootprof_unregister(start)`.
pub const UNREGISTER_SYMBOL: &str = "bootprof_unregister";
/// The runtime library's path, which the lean runtime loads (a hidden, NUL-terminated string of
/// the stubs object, when the link carries the lean runtime).
pub const LIBRARY_PATH_SYMBOL: &str = "bootprof_library_path";

/// Index of a stub's dispatcher in the pointer table: the probe's for probes and for the
/// `-finstrument-functions` hooks (ordinary calls, which leave the vector registers to the
/// callee: nothing of them to keep), the is-enabled one's, and the hook's for `mcount` and
/// `__fentry__` (called before the function's code, which may still need every argument
/// register, vector ones included).
pub fn dispatcher_index(kind: Kind) -> usize {
    match kind {
        Kind::Probe | Kind::CygEnter | Kind::CygExit => 0,
        Kind::IsEnabled => 1,
        Kind::Mcount | Kind::Fentry => 2,
    }
}

fn reloc(r_type: elf::RelocationType, offset: u64, symbol: SymbolId, addend: i64) -> Relocation {
    Relocation {
        offset,
        symbol,
        addend,
        flags: RelocationFlags::Elf { r_type },
    }
}

/// The stub object being built: its sections, the symbols every part refers to, and the
/// relocations collected until every section's data is in place. Sections and symbols are
/// created in one fixed order, so the object is the same for the same symbols.
struct Stubs<'a> {
    obj: Object<'a>,
    text: SectionId,
    names: SectionId,
    data: SectionId,
    init: SectionId,
    names_sym: SymbolId,
    text_sym: SymbolId,
    data_sym: SymbolId,
    /// `bootprof_register`, `bootprof_unregister`, and the table's bounds.
    register: SymbolId,
    unregister: SymbolId,
    start: SymbolId,
    stop: SymbolId,
    relocs: Vec<(SectionId, Relocation)>,
}

/// Builds the stub object for `symbols` (sorted, unique: the output is deterministic).
pub fn stub_object(symbols: &[(Vec<u8>, Kind)], library: Option<&Path>) -> Result<Vec<u8>> {
    let mut s = Stubs::new();
    s.add_defaults();
    for (name, kind) in symbols {
        s.add_stub(name, *kind);
    }
    if let Some(library) = library {
        s.add_library_path(library);
    }
    s.add_ctor();
    s.add_dtor();
    let Stubs {
        mut obj, relocs, ..
    } = s;
    for (section, r) in relocs {
        obj.add_relocation(section, r)
            .map_err(|e| Error::Internal(format!("cannot build the stub object: {e}")))?;
    }
    obj.write()
        .map_err(|e| Error::Internal(format!("cannot write the stub object: {e}")))
}

/// Gives `section` of `obj` the ELF type `sh_type` and flags `sh_flags`.
fn set_flags(obj: &mut Object<'_>, section: SectionId, sh_type: elf::SectionType, sh_flags: u64) {
    obj.section_mut(section).flags = object::SectionFlags::Elf {
        sh_type,
        sh_flags: elf::SectionFlags(sh_flags),
    };
}

/// A weak undefined symbol of `obj` (0 when nothing defines it).
fn undefined(obj: &mut Object<'_>, name: &str, scope: SymbolScope) -> SymbolId {
    obj.add_symbol(Symbol {
        name: name.as_bytes().to_vec(),
        value: 0,
        size: 0,
        kind: SymbolKind::Unknown,
        scope,
        weak: true,
        section: SymbolSection::Undefined,
        flags: SymbolFlags::None,
    })
}

impl Stubs<'_> {
    fn new() -> Self {
        let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let text = obj.add_section(
            Vec::new(),
            b".text.bootprof_stubs".to_vec(),
            SectionKind::Text,
        );
        let names = obj.section_id(StandardSection::ReadOnlyString);
        let data = obj.add_section(
            Vec::new(),
            b".data.bootprof_ptrs".to_vec(),
            SectionKind::Data,
        );
        let init = obj.add_section(Vec::new(), b".init_array.00099".to_vec(), SectionKind::Data);
        let alloc_write = elf::SHF_ALLOC.0 | elf::SHF_WRITE.0;
        set_flags(&mut obj, init, elf::SHT_INIT_ARRAY, alloc_write);
        let stack = obj.add_section(Vec::new(), b".note.GNU-stack".to_vec(), SectionKind::Other);
        set_flags(&mut obj, stack, elf::SHT_PROGBITS, 0);
        let names_sym = obj.section_symbol(names);
        let text_sym = obj.section_symbol(text);
        let data_sym = obj.section_symbol(data);
        let register = undefined(&mut obj, REGISTER_SYMBOL, SymbolScope::Dynamic);
        let unregister = undefined(&mut obj, UNREGISTER_SYMBOL, SymbolScope::Dynamic);
        let start = undefined(&mut obj, TABLE_START, SymbolScope::Linkage);
        let stop = undefined(&mut obj, TABLE_STOP, SymbolScope::Linkage);
        Stubs {
            obj,
            text,
            names,
            data,
            init,
            names_sym,
            text_sym,
            data_sym,
            register,
            unregister,
            start,
            stop,
            relocs: Vec::new(),
        }
    }

    /// The default dispatchers and the pointer table that starts on them.
    fn add_defaults(&mut self) {
        for (i, code) in [&code::RET[..], &code::XOR_EAX_RET, &code::RET]
            .into_iter()
            .enumerate()
        {
            let at = self.obj.append_section_data(self.text, code, 16);
            let slot = self.obj.append_section_data(self.data, &[0u8; 8], 8);
            debug_assert_eq!(slot, 8 * i as u64);
            self.relocs.push((
                self.data,
                reloc(elf::R_X86_64_64, slot, self.text_sym, at as i64),
            ));
        }
    }

    /// [`LIBRARY_PATH_SYMBOL`]: the runtime library's path, NUL-terminated, for the lean
    /// runtime to load.
    fn add_library_path(&mut self, library: &Path) {
        let mut path = library.as_os_str().as_bytes().to_vec();
        path.push(0);
        let rodata = self.obj.section_id(StandardSection::ReadOnlyData);
        let at = self.obj.append_section_data(rodata, &path, 1);
        self.obj.add_symbol(Symbol {
            name: LIBRARY_PATH_SYMBOL.as_bytes().to_vec(),
            value: at,
            size: path.len() as u64,
            kind: SymbolKind::Data,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(rodata),
            flags: SymbolFlags::None,
        });
    }

    /// The stub of probe symbol `name`: [`code::STUB`], its id the symbol's name string.
    fn add_stub(&mut self, name: &[u8], kind: Kind) {
        let mut cname = name.to_vec();
        cname.push(0);
        let name_off = self.obj.append_section_data(self.names, &cname, 1);
        let at = self.obj.append_section_data(self.text, &code::STUB, 16);
        self.obj.add_symbol(Symbol {
            name: name.to_vec(),
            value: at,
            size: code::STUB.len() as u64,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(self.text),
            flags: SymbolFlags::None,
        });
        let slot = 8 * dispatcher_index(kind) as i64;
        let (name_disp, ptr_disp) = (at + code::STUB_NAME_DISP, at + code::STUB_PTR_DISP);
        let (text, names_sym, data_sym) = (self.text, self.names_sym, self.data_sym);
        self.relocs.extend([
            (
                text,
                reloc(
                    elf::R_X86_64_PC32,
                    name_disp,
                    names_sym,
                    name_off as i64 - 4,
                ),
            ),
            (
                text,
                reloc(elf::R_X86_64_PC32, ptr_disp, data_sym, slot - 4),
            ),
        ]);
    }

    /// The registration constructor, called from `.init_array`.
    fn add_ctor(&mut self) {
        let text = self.text;
        let at = self.obj.append_section_data(text, &CTOR, 16);
        self.relocs.extend([
            (
                text,
                reloc(elf::R_X86_64_GOTPCREL, at + 3, self.register, -4),
            ),
            (text, reloc(elf::R_X86_64_GOTPCREL, at + 15, self.start, -4)),
            (text, reloc(elf::R_X86_64_GOTPCREL, at + 22, self.stop, -4)),
            (text, reloc(elf::R_X86_64_PC32, at + 29, self.data_sym, -4)),
        ]);
        self.obj.append_section_data(self.init, &[0u8; 8], 8);
        self.relocs.push((
            self.init,
            reloc(elf::R_X86_64_64, 0, self.text_sym, at as i64),
        ));
    }

    /// The destructor, called from `.fini_array`: the object (a dlclose'd library) is going
    /// away; its sites must go first.
    fn add_dtor(&mut self) {
        let text = self.text;
        let at = self.obj.append_section_data(text, &DTOR, 16);
        self.relocs.extend([
            (
                text,
                reloc(elf::R_X86_64_GOTPCREL, at + 3, self.unregister, -4),
            ),
            (text, reloc(elf::R_X86_64_GOTPCREL, at + 15, self.start, -4)),
        ]);
        let fini =
            self.obj
                .add_section(Vec::new(), b".fini_array.00099".to_vec(), SectionKind::Data);
        let alloc_write = elf::SHF_ALLOC.0 | elf::SHF_WRITE.0;
        set_flags(&mut self.obj, fini, elf::SHT_FINI_ARRAY, alloc_write);
        self.obj.append_section_data(fini, &[0u8; 8], 8);
        self.relocs
            .push((fini, reloc(elf::R_X86_64_64, 0, self.text_sym, at as i64)));
    }
}

/// The registration constructor, in `.init_array`.
#[rustfmt::skip]
const CTOR: [u8; 39] = [
    0x48, 0x8b, 0x05, 0, 0, 0, 0, // 0:  mov bootprof_register@GOTPCREL(%rip), %rax
    0x48, 0x85, 0xc0,             // 7:  test %rax, %rax
    0x74, 0x17,                   // 10: je 35
    0x48, 0x8b, 0x3d, 0, 0, 0, 0, // 12: mov __bootprof_sites_start@GOTPCREL(%rip), %rdi
    0x48, 0x8b, 0x35, 0, 0, 0, 0, // 19: mov __bootprof_sites_stop@GOTPCREL(%rip), %rsi
    0x48, 0x8d, 0x15, 0, 0, 0, 0, // 26: lea __bootprof_ptrs(%rip), %rdx
    0xff, 0xe0,                   // 33: jmp *%rax
    0xc3,                         // 35: ret
    0xcc, 0xcc, 0xcc,             // padding
];

/// The destructor, in `.fini_array`.
#[rustfmt::skip]
const DTOR: [u8; 24] = [
    0x48, 0x8b, 0x05, 0, 0, 0, 0, // 0:  mov bootprof_unregister@GOTPCREL(%rip), %rax
    0x48, 0x85, 0xc0,             // 7:  test %rax, %rax
    0x74, 0x09,                   // 10: je 21
    0x48, 0x8b, 0x3d, 0, 0, 0, 0, // 12: mov __bootprof_sites_start@GOTPCREL(%rip), %rdi
    0xff, 0xe0,                   // 19: jmp *%rax
    0xc3,                         // 21: ret
    0xcc, 0xcc,                   // padding
];

#[cfg(test)]
mod tests {
    /// `text` without its `/* */` comments.
    fn uncommented(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("/*") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find("*/").expect("a comment ends");
            rest = &rest[start + end + 2..];
        }
        out + rest
    }

    #[test]
    fn the_script_handed_to_the_linker_holds_its_fragment_and_includes_no_file() {
        let script = uncommented(&super::sites_script());
        assert!(!script.contains("INCLUDE"), "{script}");
        let fragment = uncommented(super::SITES_FRAGMENT);
        assert!(script.contains(fragment.trim()), "{script}");
        assert!(
            script.trim_end().ends_with("INSERT AFTER .rodata;"),
            "{script}"
        );
    }
}
