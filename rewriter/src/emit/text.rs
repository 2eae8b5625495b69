//! The text sections: takes the output sections and the sites of each text section; writes each
//! site's NOP, and gives each tail site that jumps to a stub a thunk of its own at the end of its
//! section, with the relocation of the thunk's jump. Hands on where each thunk is.
//!
//! A call site leaves its return address, by which call mode knows the site; a tail jump leaves
//! none, and all the tail sites of one symbol would share its stub (so, for instance, every tail
//! call of `__cyg_profile_func_exit` would be credited to one function). The thunk
//! ([`code::THUNK`]) loads its own address into r11 (the site's id) and jumps past the stub's
//! `lea` to its `jmp *dispatcher`. The site's table entry targets the thunk. Probe symbols the
//! program defines have no stub and keep their own target.

use super::symbols::SectionSymbols;
use super::{Contents, Out};
use crate::elf::{Object, Rela64, LE};
use crate::error::{Error, Result};
use crate::site::SiteInfo;
use bootprof_format::code;
use object::elf;
use object::read::elf::Sym;
use object::read::SymbolIndex;
use object::{I64, U64};
use std::collections::{BTreeMap, HashMap};

/// Where each tail site's thunk is: text section -> (site offset, thunk offset in the section),
/// in site order.
pub(super) type Thunks = HashMap<usize, Vec<(u64, u64)>>;

/// Writes the NOPs and thunks of every text section in `by_section`.
pub(super) fn patch_sites(
    obj: &Object<'_>,
    out: &mut Out<'_>,
    by_section: &BTreeMap<usize, Vec<&SiteInfo<'_>>>,
    syms: &SectionSymbols,
) -> Result<Thunks> {
    let mut rela_of: HashMap<usize, usize> = HashMap::new();
    for (i, sec) in out.sections.iter().enumerate() {
        if sec.sh_type() == elf::SHT_RELA.0 && sec.sh_link() as usize == out.symtab {
            rela_of.entry(sec.sh_info() as usize).or_insert(i);
        }
    }
    let has_stub = |s: &SiteInfo<'_>| {
        s.form.is_tail()
            && obj
                .symbols
                .symbol(SymbolIndex(s.symbol_index))
                .is_ok_and(|sym| sym.st_shndx(LE) == elf::SHN_UNDEF)
    };
    let mut thunks = Thunks::new();
    // The NOPs of the version the fragments are written in.
    let nops = bootprof_format::Nops::of_version(bootprof_format::VERSION);
    for (&sec, list) in by_section {
        let tails: Vec<&&SiteInfo<'_>> = list.iter().filter(|s| has_stub(s)).collect();
        // Room for the thunks made at once: growing a copy of a megabyte of code copies it again.
        let original = out.sections[sec].data.bytes();
        let room = code::THUNK_ALIGN + tails.len() * code::THUNK.len();
        let mut text = Vec::with_capacity(original.len() + room);
        text.extend_from_slice(original);
        for s in list {
            let bytes = bootprof_format::disabled_bytes(s.kind, s.form, nops);
            let (start, len) = (s.offset as usize, s.form.len());
            code::copy_site_bytes(&mut text[start..start + len], &bytes, len);
        }
        if !tails.is_empty() {
            let Some(&rela_sec) = rela_of.get(&sec) else {
                return Err(Error::Internal(format!(
                    "{}: a tail site in section #{sec}, which has no relocation section",
                    out.file
                )));
            };
            let mut relas: Vec<Rela64> = super::table(out.sections[rela_sec].data.bytes());
            relas.reserve(tails.len());
            let mut at_section = Vec::with_capacity(tails.len());
            while text.len() % code::THUNK_ALIGN != 0 {
                text.push(code::INT3);
            }
            for s in tails {
                let at = text.len() as u64;
                text.extend_from_slice(&code::THUNK);
                let mut rela = Rela64 {
                    r_offset: U64::new(LE, at + code::THUNK_JMP_DISP),
                    r_info: U64::new(LE, 0),
                    r_addend: I64::new(LE, code::THUNK_JMP_ADDEND),
                };
                let sym = syms.remap(s.symbol_index) as u32;
                rela.set_r_info(LE, false, sym, elf::R_X86_64_PC32);
                relas.push(rela);
                at_section.push((s.offset, at));
            }
            thunks.insert(sec, at_section);
            out.sections[rela_sec].set(Contents::Relas(relas));
        }
        out.sections[sec].set(Contents::Bytes(text));
    }
    Ok(thunks)
}
