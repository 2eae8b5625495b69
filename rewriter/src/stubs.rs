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
//! A tail site's thunk (see `emit`) jumps to `<symbol> + 7`, the stub's `jmp`, with its own id in
//! r11: the `lea` is 7 bytes and comes first.
//!
//! Without the runtime the pointers stay on the defaults and every stub returns at once. With it,
//! `bootprof_register` (exported by the executable, found by shared objects too) records the
//! table and points the three pointers at its dispatchers. A stub touches only `r11`, which no
//! calling convention uses to pass anything, so `mcount`/`__fentry__` keep every argument register
//! and `rax`. Stubs and table bounds are hidden: each executable or shared object has its own.
//! The bounds come from the linker script fragment in `linker-scripts/` (see [`SITES_SCRIPT`]),
//! not from `__start_`/`__stop_`, whose mere reference makes GNU ld keep every fragment.

/// The add-on linker script `bootprof-link` passes with `-T` (INSERT: the default script stays).
pub const SITES_SCRIPT: &str = include_str!("../../linker-scripts/bootprof-sites.ld");
/// The fragment it includes.
pub const SITES_FRAGMENT: &str = include_str!("../../linker-scripts/bootprof-sites.inc");

use crate::error::{Error, Result};
use bootprof_format::Kind;
use object::write::{Object, Relocation, StandardSection, Symbol, SymbolId, SymbolSection};
use object::{
    elf, Architecture, BinaryFormat, Endianness, RelocationFlags, SectionKind, SymbolFlags,
    SymbolKind, SymbolScope,
};

/// Start of the table, defined by `linker-scripts/bootprof-sites.inc`.
pub const TABLE_START: &str = "__bootprof_sites_start";
/// End of the table.
pub const TABLE_STOP: &str = "__bootprof_sites_stop";

/// The runtime's registration entry point, `bootprof_register(start, stop, ptrs)`.
pub const REGISTER_SYMBOL: &str = "bootprof_register";
/// The runtime's entry point for an object going away, `bootprof_unregister(start)`.
pub const UNREGISTER_SYMBOL: &str = "bootprof_unregister";

/// Index of a stub's dispatcher in the pointer table.
pub fn dispatcher_index(kind: Kind) -> usize {
    match kind {
        Kind::Probe => 0,
        Kind::IsEnabled => 1,
        _ => 2,
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

/// Builds the stub object for `symbols` (sorted, unique: the output is deterministic).
pub fn stub_object(symbols: &[(Vec<u8>, Kind)]) -> Result<Vec<u8>> {
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
    obj.section_mut(init).flags = object::SectionFlags::Elf {
        sh_type: elf::SHT_INIT_ARRAY,
        sh_flags: elf::SectionFlags(elf::SHF_ALLOC.0 | elf::SHF_WRITE.0),
    };
    let stack = obj.add_section(Vec::new(), b".note.GNU-stack".to_vec(), SectionKind::Other);
    obj.section_mut(stack).flags = object::SectionFlags::Elf {
        sh_type: elf::SHT_PROGBITS,
        sh_flags: elf::SectionFlags(0),
    };
    let names_sym = obj.section_symbol(names);
    let text_sym = obj.section_symbol(text);
    let data_sym = obj.section_symbol(data);
    let undefined = |obj: &mut Object<'_>, name: &str, scope: SymbolScope| {
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
    };
    let register = undefined(&mut obj, REGISTER_SYMBOL, SymbolScope::Dynamic);
    let unregister = undefined(&mut obj, UNREGISTER_SYMBOL, SymbolScope::Dynamic);
    let start = undefined(&mut obj, TABLE_START, SymbolScope::Linkage);
    let stop = undefined(&mut obj, TABLE_STOP, SymbolScope::Linkage);

    // The default dispatchers and the pointer table that starts on them.
    let mut relocs: Vec<(object::write::SectionId, Relocation)> = Vec::new();
    for (i, code) in [&[0xc3u8][..], &[0x31, 0xc0, 0xc3], &[0xc3]]
        .into_iter()
        .enumerate()
    {
        let at = obj.append_section_data(text, code, 16);
        let slot = obj.append_section_data(data, &[0u8; 8], 8);
        debug_assert_eq!(slot, 8 * i as u64);
        relocs.push((data, reloc(elf::R_X86_64_64, slot, text_sym, at as i64)));
    }

    // The stubs.
    for (name, kind) in symbols {
        let mut cname = name.clone();
        cname.push(0);
        let name_off = obj.append_section_data(names, &cname, 1);
        let code = [0x4c, 0x8d, 0x1d, 0, 0, 0, 0, 0xff, 0x25, 0, 0, 0, 0];
        let at = obj.append_section_data(text, &code, 16);
        obj.add_symbol(Symbol {
            name: name.clone(),
            value: at,
            size: code.len() as u64,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(text),
            flags: SymbolFlags::None,
        });
        let slot = 8 * dispatcher_index(*kind) as i64;
        relocs.push((
            text,
            reloc(elf::R_X86_64_PC32, at + 3, names_sym, name_off as i64 - 4),
        ));
        relocs.push((text, reloc(elf::R_X86_64_PC32, at + 9, data_sym, slot - 4)));
    }

    // The registration constructor.
    #[rustfmt::skip]
    let ctor: [u8; 39] = [
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
    let at = obj.append_section_data(text, &ctor, 16);
    relocs.push((text, reloc(elf::R_X86_64_GOTPCREL, at + 3, register, -4)));
    relocs.push((text, reloc(elf::R_X86_64_GOTPCREL, at + 15, start, -4)));
    relocs.push((text, reloc(elf::R_X86_64_GOTPCREL, at + 22, stop, -4)));
    relocs.push((text, reloc(elf::R_X86_64_PC32, at + 29, data_sym, -4)));
    obj.append_section_data(init, &[0u8; 8], 8);
    relocs.push((init, reloc(elf::R_X86_64_64, 0, text_sym, at as i64)));

    // The destructor: the object (a dlclose'd library) is going away; its sites must go first.
    #[rustfmt::skip]
    let dtor: [u8; 24] = [
        0x48, 0x8b, 0x05, 0, 0, 0, 0, // 0:  mov bootprof_unregister@GOTPCREL(%rip), %rax
        0x48, 0x85, 0xc0,             // 7:  test %rax, %rax
        0x74, 0x09,                   // 10: je 21
        0x48, 0x8b, 0x3d, 0, 0, 0, 0, // 12: mov __bootprof_sites_start@GOTPCREL(%rip), %rdi
        0xff, 0xe0,                   // 19: jmp *%rax
        0xc3,                         // 21: ret
        0xcc, 0xcc,                   // padding
    ];
    let at = obj.append_section_data(text, &dtor, 16);
    relocs.push((text, reloc(elf::R_X86_64_GOTPCREL, at + 3, unregister, -4)));
    relocs.push((text, reloc(elf::R_X86_64_GOTPCREL, at + 15, start, -4)));
    let fini = obj.add_section(Vec::new(), b".fini_array.00099".to_vec(), SectionKind::Data);
    obj.section_mut(fini).flags = object::SectionFlags::Elf {
        sh_type: elf::SHT_FINI_ARRAY,
        sh_flags: elf::SectionFlags(elf::SHF_ALLOC.0 | elf::SHF_WRITE.0),
    };
    obj.append_section_data(fini, &[0u8; 8], 8);
    relocs.push((fini, reloc(elf::R_X86_64_64, 0, text_sym, at as i64)));

    for (section, r) in relocs {
        obj.add_relocation(section, r)
            .map_err(|e| Error::Internal(format!("cannot build the stub object: {e}")))?;
    }
    obj.write()
        .map_err(|e| Error::Internal(format!("cannot write the stub object: {e}")))
}
