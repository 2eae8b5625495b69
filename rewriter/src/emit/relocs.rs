//! Symbol indices and site relocations: takes the output sections, the sites and the symbol
//! renumbering; renumbers every user of symbol indices (relocation sections, group signatures,
//! `.llvm_addrsig`, the call-graph profile) when section symbols were inserted, and removes the
//! relocation of every site (and those of every guard record): the final link has nothing to do
//! for them (an `R_X86_64_NONE` left in their place would still be read, and its symbol looked
//! up, for each of tens of thousands of sites).

use super::symbols::SectionSymbols;
use super::{Contents, Out};
use crate::elf::{Rel64, Rela64, LE};
use crate::error::{Error, Location, Result};
use crate::site::SiteInfo;
use object::elf;
use object::U32;

/// `SHT_LLVM_ADDRSIG`: ULEB128 symbol indices of address-significant symbols.
const SHT_LLVM_ADDRSIG: u32 = 0x6fff_4c03;
/// `SHT_LLVM_CALL_GRAPH_PROFILE`: (from, to) symbol-index pairs and a weight.
const SHT_LLVM_CALL_GRAPH_PROFILE: u32 = 0x6fff_4c09;

/// Renumbers symbol references and removes the site relocations.
pub(super) fn renumber(
    out: &mut Out<'_>,
    sites: &[SiteInfo<'_>],
    syms: &SectionSymbols,
) -> Result<()> {
    // The relocations to remove: a bit each, by relocation section. (Sorting the (section,
    // entry) pairs, which come in the sites' order, not the relocations', cost 5 M instructions
    // for sqlite3's 19,700 sites.)
    let mut dropping: Vec<Vec<u64>> = vec![Vec::new(); out.sections.len()];
    let mut drop = |(sec, entry): (usize, usize)| {
        if let Some(bits) = dropping.get_mut(sec) {
            if bits.len() <= entry / 64 {
                bits.resize(entry / 64 + 1, 0);
            }
            bits[entry / 64] |= 1 << (entry % 64);
        }
    };
    for s in sites {
        drop(s.rela);
        if let Some(g) = &s.guard {
            g.relas.iter().copied().for_each(&mut drop);
        }
    }
    let renumbered = syms.renumbered();
    let remap = |i: u32| syms.remap(i as usize) as u32;
    let file = out.file.clone();
    for (sec, dropped) in out.sections.iter_mut().zip(&dropping) {
        let linked = sec.sh_link() as usize == out.symtab;
        match sec.sh_type() {
            t if t == elf::SHT_RELA.0 && linked => {
                if !renumbered && dropped.is_empty() {
                    continue;
                }
                let mut relas: Vec<Rela64> = kept(sec.data.bytes(), dropped);
                if renumbered {
                    for r in &mut relas {
                        let (sym, ty) = (r.r_sym(LE, false), r.r_type(LE, false));
                        r.set_r_info(LE, false, remap(sym), ty);
                    }
                }
                sec.set(Contents::Relas(relas));
            }
            t if t == elf::SHT_REL.0 && linked => {
                if !renumbered && dropped.is_empty() {
                    continue;
                }
                let mut rels: Vec<Rel64> = kept(sec.data.bytes(), dropped);
                if renumbered {
                    for r in &mut rels {
                        let (sym, ty) = (r.r_sym(LE), r.r_type(LE));
                        r.set_r_info(LE, remap(sym), ty);
                    }
                }
                sec.set(Contents::Rels(rels));
            }
            t if t == elf::SHT_GROUP.0 && linked => {
                let signature = remap(sec.sh_info());
                sec.header.sh_info.set(LE, signature);
            }
            SHT_LLVM_ADDRSIG if renumbered => {
                let remapped =
                    remap_addrsig(sec.data.bytes(), |i| syms.remap(i)).ok_or_else(|| {
                        Error::malformed(
                            Location {
                                section: Some(".llvm_addrsig".into()),
                                ..Location::file(file.clone())
                            },
                            "truncated ULEB128",
                        )
                    })?;
                sec.set(Contents::Bytes(remapped));
            }
            SHT_LLVM_CALL_GRAPH_PROFILE if renumbered && sec.sh_entsize() == 16 => {
                let mut entries: Vec<[U32<LE>; 4]> = super::table(sec.data.bytes());
                for e in &mut entries {
                    e[0] = U32::new(LE, remap(e[0].get(LE)));
                    e[1] = U32::new(LE, remap(e[1].get(LE)));
                }
                // Only whole entries are rewritten; a trailing partial one is kept as it was.
                let mut bytes = object::pod::bytes_of_slice(&entries).to_vec();
                bytes.extend_from_slice(&sec.data.bytes()[bytes.len()..]);
                sec.data = Contents::Bytes(bytes);
            }
            _ => {}
        }
    }
    Ok(())
}

/// The entries of a table section, copied out of its bytes (as [`super::table`]), but for
/// those whose bits `drop` sets (bit `j % 64` of word `j / 64` for entry `j`): the runs between
/// them copied whole.
fn kept<T: object::pod::Pod>(bytes: &[u8], drop: &[u64]) -> Vec<T> {
    let whole = bytes.len() - bytes.len() % std::mem::size_of::<T>();
    let all = object::pod::slice_from_all_bytes::<T>(&bytes[..whole])
        .expect("object's ELF types are unaligned");
    let dropped: usize = drop.iter().map(|w| w.count_ones() as usize).sum();
    let mut out = Vec::with_capacity(all.len().saturating_sub(dropped));
    let mut from = 0;
    for (w, &word) in drop.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let j = (w * 64 + bits.trailing_zeros() as usize).min(all.len());
            out.extend_from_slice(&all[from.min(j)..j]);
            from = j + 1;
            bits &= bits - 1;
        }
    }
    out.extend_from_slice(&all[from.min(all.len())..]);
    out
}

/// Renumbers the ULEB128 symbol indices of an `.llvm_addrsig` section.
fn remap_addrsig(bytes: &[u8], remap: impl Fn(usize) -> usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len() + 8);
    let mut i = 0;
    while i < bytes.len() {
        let (mut v, mut shift) = (0u64, 0u32);
        loop {
            let b = *bytes.get(i)?;
            i += 1;
            v |= u64::from(b & 0x7f).checked_shl(shift)?;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let mut v = remap(v as usize) as u64;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            out.push(if v != 0 { b | 0x80 } else { b });
            if v == 0 {
                break;
            }
        }
    }
    Some(out)
}
