//! Guards: reads the `.bootprof_guard` records the C header's `asm goto` leaves in an object (one
//! per `BOOTPROF_PROBE`/`BOOTPROF_ENABLED`: where its 5-byte NOP is, where the enabled jump goes,
//! which probe it belongs to) and turns each into a site of [`Form::Guard`].
//!
//! Part of `patch`: takes the scanned object and the relocations of its guard section(s); hands
//! on verified guard sites. A record is accepted only whole: `R_X86_64_PC32` at +0 to the NOP,
//! `R_X86_64_PC32` at +4 to the jump's target, `R_X86_64_64` at +8 to a probe symbol; the NOP
//! must be exactly `0f 1f 44 00 00` on an instruction boundary of an executable section, the
//! target inside an executable section. A record without relocations, or whose three are
//! `R_X86_64_NONE` (as bootprof-link left them before it removed them), was rewritten already and
//! is skipped (rewriting is idempotent); anything else is an error naming the record.

use crate::elf::{reloc_name, Object, LE};
use crate::error::{Error, Location, Result};
use crate::scan::{GuardReloc, Scanned};
use crate::site::{GuardTarget, SiteInfo};
use bootprof_format::{Form, Kind, GUARD_RECORD_SIZE, GUARD_SECTION, NOP5};
use object::elf;
use object::read::elf::{SectionHeader, Sym};
use object::read::SymbolIndex;
use std::collections::BTreeMap;

/// Turns the relocations of the scanned object's guard sections into guard sites.
pub(crate) fn guards<'d>(scanned: &Scanned<'d>) -> Result<Vec<SiteInfo<'d>>> {
    let ctx = &scanned.object;
    let sizes = &scanned.guard_sizes;
    let rec_at = |offset: u64, symbol: Option<String>| Location {
        section: Some(GUARD_SECTION.to_string()),
        offset: Some(offset),
        symbol,
        ..Location::file(ctx.file.clone())
    };
    for (_, &size) in sizes.iter() {
        if size % GUARD_RECORD_SIZE as u64 != 0 {
            return Err(bad(
                rec_at(size - size % GUARD_RECORD_SIZE as u64, None),
                format!("size {size:#x} is not a whole number of {GUARD_RECORD_SIZE}-byte records"),
            ));
        }
    }
    // (section, record) -> the relocations at +0, +4, +8.
    let mut records: BTreeMap<(usize, u64), [Option<&GuardReloc>; 3]> = BTreeMap::new();
    for r in &scanned.guard_relocs {
        if r.r_type == elf::R_X86_64_NONE {
            continue;
        }
        let record = r.r_offset - r.r_offset % GUARD_RECORD_SIZE as u64;
        let (field, want) = match r.r_offset % GUARD_RECORD_SIZE as u64 {
            0 => (0, elf::R_X86_64_PC32),
            4 => (1, elf::R_X86_64_PC32),
            8 => (2, elf::R_X86_64_64),
            _ => (3, elf::R_X86_64_NONE),
        };
        if field == 3 || r.r_type != want {
            return Err(bad(
                rec_at(r.r_offset, None),
                format!(
                    "unexpected relocation {} at record offset {}",
                    reloc_name(r.r_type),
                    r.r_offset % GUARD_RECORD_SIZE as u64
                ),
            ));
        }
        let slot = &mut records.entry((r.section, record)).or_default()[field];
        if slot.is_some() {
            return Err(bad(
                rec_at(r.r_offset, None),
                "two relocations at one field",
            ));
        }
        *slot = Some(r);
    }
    let mut out = Vec::with_capacity(records.len());
    for ((_, record), fields) in records {
        let [Some(site), Some(target), Some(probe)] = fields else {
            return Err(bad(
                rec_at(record, None),
                "incomplete guard record (needs relocations at +0, +4 and +8)",
            ));
        };
        let Some((kind, name)) = scanned.probe_at(probe.sym) else {
            return Err(bad(
                rec_at(record + 8, None),
                format!("names symbol #{}, which is not a probe symbol", probe.sym),
            ));
        };
        let symbol = String::from_utf8_lossy(name).into_owned();
        if !matches!(kind, Kind::Probe | Kind::IsEnabled) || probe.addend != 0 {
            return Err(bad(
                rec_at(record + 8, Some(symbol)),
                "a guard belongs to a named probe or an is-enabled test, with addend 0",
            ));
        }
        let (sec, offset) = code_place(ctx, site, rec_at(record, Some(symbol.clone())))?;
        let text = ctx.section_data(sec)?;
        let start = offset as usize;
        if text.get(start..start + 5) != Some(&NOP5[..]) {
            let bytes = text
                .get(start..(start + 5).min(text.len()))
                .unwrap_or_default()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ");
            return Err(bad(
                Location {
                    section: Some(ctx.section_name(sec)),
                    offset: Some(offset),
                    symbol: Some(symbol),
                    ..Location::file(ctx.file.clone())
                },
                format!(
                    "the guard recorded at {GUARD_SECTION}+{record:#x} is not the 5-byte NOP \
                     0f 1f 44 00 00: bytes {bytes}"
                ),
            ));
        }
        let (target_sec, _) = code_place(ctx, target, rec_at(record + 4, Some(symbol.clone())))?;
        let mut orig = [0u8; 8];
        orig[0] = 0xe9;
        out.push(SiteInfo {
            section: sec,
            section_name: ctx.section_name(sec).into(),
            offset,
            form: Form::Guard,
            kind,
            symbol: name,
            function: &[],
            func_offset: 0,
            rela: site.rela,
            symbol_index: probe.sym,
            orig,
            guard: Some(Box::new(GuardTarget {
                symbol: target.sym,
                addend: target.addend,
                section: target_sec,
                relas: [target.rela, probe.rela],
            })),
        });
    }
    Ok(out)
}

fn bad(at: Location, what: impl Into<String>) -> Error {
    Error::malformed(at, what.into())
}

/// The executable section and offset a `sym + addend` field of a record points at.
fn code_place(obj: &Object<'_>, r: &GuardReloc, at: Location) -> Result<(usize, u64)> {
    let sym = obj
        .symbols
        .symbol(SymbolIndex(r.sym))
        .map_err(|e| bad(at.clone(), e.to_string()))?;
    let section = obj
        .symbols
        .symbol_section(LE, sym, SymbolIndex(r.sym))
        .ok()
        .flatten()
        .ok_or_else(|| {
            bad(
                at.clone(),
                format!(
                    "points at symbol #{}, which is not defined in a section",
                    r.sym
                ),
            )
        })?;
    let header = obj
        .sections
        .section(section)
        .map_err(|e| bad(at.clone(), e.to_string()))?;
    let size = header.sh_size(LE);
    let offset = sym.st_value(LE).wrapping_add(r.addend as u64);
    if header.sh_flags(LE).0 & elf::SHF_EXECINSTR.0 == 0
        || header.sh_type(LE) == elf::SHT_NOBITS
        || offset >= size
    {
        return Err(bad(
            at,
            format!(
                "points at {}+{offset:#x}, which is not code",
                obj.section_name(section.0)
            ),
        ));
    }
    Ok((section.0, offset))
}
