//! Generate stubs: takes every probe symbol the inputs reference and do not define; hands on one
//! relocatable object that defines them all, so the final link succeeds.
//!
//! Each stub is
//!
//! ```text
//! <symbol>:  4c 8d 1d rel32   lea <symbol's name>(%rip), %r11   ; the probe's id for the dispatcher
//!            e9 rel32         jmp __bootprof_dispatch_<class>
//! ```
//!
//! The three dispatchers are defined here weak (`ret`; `xor %eax,%eax; ret` for is-enabled, so a
//! probe reads as disabled) and strongly by the runtime when it is linked. A stub touches only
//! `r11`, which no calling convention uses to pass anything, so `mcount`/`__fentry__` keep every
//! argument register and `rax`. Stubs are hidden: each executable or shared object has its own,
//! and the table's PC-relative `target` field needs no dynamic relocation.

use crate::error::{Error, Result};
use bootprof_format::Kind;
use object::write::{Object, Relocation, StandardSection, Symbol, SymbolSection};
use object::{
    elf, Architecture, BinaryFormat, Endianness, RelocationFlags, SectionKind, SymbolFlags,
    SymbolKind, SymbolScope,
};

/// Name of the dispatcher a stub of `kind` jumps to.
pub fn dispatcher(kind: Kind) -> &'static str {
    match kind {
        Kind::Probe => "__bootprof_dispatch_probe",
        Kind::IsEnabled => "__bootprof_dispatch_isenabled",
        _ => "__bootprof_dispatch_hook",
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
    let stack = obj.add_section(Vec::new(), b".note.GNU-stack".to_vec(), SectionKind::Other);
    obj.section_mut(stack).flags = object::SectionFlags::Elf {
        sh_type: elf::SHT_PROGBITS,
        sh_flags: elf::SectionFlags(0),
    };
    let names_sym = obj.section_symbol(names);

    let define = |obj: &mut Object<'_>, name: &[u8], code: &[u8], weak: bool| {
        let value = obj.append_section_data(text, code, 16);
        obj.add_symbol(Symbol {
            name: name.to_vec(),
            value,
            size: code.len() as u64,
            kind: SymbolKind::Text,
            scope: SymbolScope::Linkage,
            weak,
            section: SymbolSection::Section(text),
            flags: SymbolFlags::None,
        });
        value
    };
    let mut dispatchers = std::collections::HashMap::new();
    for (kind, code) in [
        (Kind::Probe, &[0xc3u8][..]),               // ret
        (Kind::IsEnabled, &[0x31, 0xc0, 0xc3][..]), // xor %eax,%eax; ret
        (Kind::Mcount, &[0xc3][..]),                // ret
    ] {
        let name = dispatcher(kind).as_bytes();
        define(&mut obj, name, code, true);
        let id = obj.symbol_id(name).expect("just defined");
        dispatchers.insert(dispatcher(kind), id);
    }
    for (name, kind) in symbols {
        let mut cname = name.clone();
        cname.push(0);
        let name_off = obj.append_section_data(names, &cname, 1);
        let code = [0x4c, 0x8d, 0x1d, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0];
        let at = define(&mut obj, name, &code, false);
        let fail =
            |e: object::write::Error| Error::Internal(format!("cannot build the stub object: {e}"));
        obj.add_relocation(
            text,
            Relocation {
                offset: at + 3,
                symbol: names_sym,
                addend: name_off as i64 - 4,
                flags: RelocationFlags::Elf {
                    r_type: elf::R_X86_64_PC32,
                },
            },
        )
        .map_err(fail)?;
        obj.add_relocation(
            text,
            Relocation {
                offset: at + 8,
                symbol: dispatchers[dispatcher(*kind)],
                addend: -4,
                flags: RelocationFlags::Elf {
                    r_type: elf::R_X86_64_PLT32,
                },
            },
        )
        .map_err(fail)?;
    }
    obj.write()
        .map_err(|e| Error::Internal(format!("cannot write the stub object: {e}")))
}
