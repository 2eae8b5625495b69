//! Patch (verify): takes [`Scanned`]; decodes the bytes under each candidate relocation, checks
//! that each site is a whole instruction of its function, reads the guards' records, and places
//! every site in its function. Hands on a [`Plan`]: the verified sites with their NOP forms, and
//! the references that are not sites. Nothing is written here: `emit` writes the NOPs.

use crate::decode::{self, Recognised};
use crate::elf::{reloc_name, Object};
use crate::error::{Error, Location, Result};
use crate::functions::{functions_in, symbol_inside_site, Cursor, Func};
use crate::guard;
use crate::scan::{Candidate, Scanned};
use crate::site::{Found, NotASite, SiteInfo};
use bootprof_format::{code, Form};
use std::sync::Arc;

/// What [`verify`] found in one object, and the parsed object when it has sites (for `emit`).
#[derive(Debug, Default)]
pub struct Plan<'d> {
    /// The sites and probe symbols.
    pub found: Found<'d>,
    /// The parsed object, kept for the writer when there are sites.
    pub object: Option<Object<'d>>,
}

/// A candidate whose bytes are a call or jump of `form` starting at `start`, its place among the
/// section's symbols ([`Cursor::seek`]), and the offset its function starts at (where decoding
/// for the boundary check begins).
struct Call<'c> {
    candidate: &'c Candidate,
    start: usize,
    form: Form,
    place: usize,
    from: usize,
}

/// Verifies the candidates and guards of `scanned`.
pub fn verify(mut scanned: Scanned<'_>) -> Result<Plan<'_>> {
    let mut not_sites = std::mem::take(&mut scanned.not_sites);
    let mut guard_sites = guard::guards(&scanned)?;
    let mut wanted = vec![false; scanned.object.sections.len()];
    for &sec in scanned.candidates.keys() {
        wanted[sec] = true;
    }
    for g in &guard_sites {
        wanted[g.section] = true;
    }
    let funcs_by_section = functions_in(&scanned.object, &wanted);
    let funcs_of = |sec: usize| funcs_by_section.get(sec).map_or(&[][..], Vec::as_slice);
    // Sized for every candidate and guard: a site is a hundred bytes, and growing the vector
    // copied them all each time.
    let candidates: usize = scanned.candidates.values().map(Vec::len).sum();
    let mut sites = Vec::with_capacity(candidates + guard_sites.len());
    for (&sec, candidates) in &scanned.candidates {
        let mut candidates: Vec<&Candidate> = candidates.iter().collect();
        candidates.sort_by_key(|c| c.r_offset);
        let text = scanned.object.section_data(sec)?;
        let funcs = funcs_of(sec);
        let recognised = recognise_all(&scanned, sec, text, funcs, &candidates, &mut not_sites)?;
        check_boundaries(
            &scanned,
            sec,
            text,
            funcs,
            recognised,
            &mut sites,
            &mut not_sites,
        )?;
    }
    for g in &mut guard_sites {
        place_guard(&scanned.object, g, funcs_of(g.section))?;
    }
    if !guard_sites.is_empty() {
        sites.extend(guard_sites);
        sites.sort_by_key(|s| (s.section, s.offset));
    }
    Ok(Plan {
        object: (!sites.is_empty()).then_some(scanned.object),
        found: Found {
            sites,
            referenced: scanned.referenced,
            defined: scanned.defined,
            not_sites,
            relocations: scanned.relocations,
            uses_runtime: scanned.uses_runtime,
            walks_stacks: scanned.walks_stacks,
        },
    })
}

/// Where candidate `c` of section `sec` is, for messages.
fn candidate_at(scanned: &Scanned<'_>, sec: usize, offset: u64, c: &Candidate) -> Location {
    Location {
        offset: Some(offset),
        symbol: Some(String::from_utf8_lossy(scanned.probes[c.probe as usize].name).into_owned()),
        ..scanned.object.at(Some(sec))
    }
}

/// Decodes the bytes under each candidate of section `sec`: calls and jumps go on, other
/// references become not-sites, and a call-only relocation on other bytes is an error.
fn recognise_all<'c>(
    scanned: &Scanned<'_>,
    sec: usize,
    text: &[u8],
    funcs: &[Func<'_>],
    candidates: &[&'c Candidate],
    not_sites: &mut Vec<NotASite>,
) -> Result<Vec<Call<'c>>> {
    let mut out = Vec::with_capacity(candidates.len());
    let mut cursor = Cursor::new(funcs);
    for &c in candidates {
        let r_offset = c.r_offset as usize;
        match decode::recognise(text, r_offset, c.r_type, c.addend) {
            Recognised::Site { start, form } => {
                let place = cursor.seek(start as u64);
                let from = cursor
                    .enclosing(place, start as u64)
                    .map_or(0, |f| f.value as usize);
                out.push(Call {
                    candidate: c,
                    start,
                    form,
                    place,
                    from,
                });
            }
            Recognised::NotASite(why) => not_sites.push(NotASite {
                at: candidate_at(scanned, sec, c.r_offset, c),
                why,
                live: true,
            }),
            Recognised::BadCall => {
                let lo = r_offset.saturating_sub(2);
                let bytes = text[lo..r_offset + 4]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                return Err(Error::NotACall {
                    at: candidate_at(scanned, sec, c.r_offset, c),
                    reloc: reloc_name(c.r_type),
                    bytes,
                });
            }
        }
    }
    Ok(out)
}

/// Checks that each recognised call is on an instruction boundary (one linear decode per
/// function) and that no symbol starts inside it; hands the good ones on as sites.
fn check_boundaries<'d>(
    scanned: &Scanned<'d>,
    sec: usize,
    text: &[u8],
    funcs: &[Func<'d>],
    recognised: Vec<Call<'_>>,
    sites: &mut Vec<SiteInfo<'d>>,
    not_sites: &mut Vec<NotASite>,
) -> Result<()> {
    let section_name: Arc<str> = scanned.object.section_name(sec).into();
    let cursor = Cursor::new(funcs);
    let (mut starts, mut ok) = (Vec::new(), Vec::new());
    for group in recognised.chunk_by(|a, b| a.from == b.from) {
        starts.clear();
        starts.extend(group.iter().map(|v| v.start));
        ok.resize(starts.len(), false);
        decode::on_boundaries(text, group[0].from, &starts, &mut ok[..starts.len()]);
        for (v, &ok) in group.iter().zip(&ok) {
            let c = v.candidate;
            if !ok {
                not_sites.push(NotASite {
                    at: candidate_at(scanned, sec, c.r_offset, c),
                    why: "not on an instruction boundary when decoded from the function start",
                    live: true,
                });
                continue;
            }
            let (start, form) = (v.start, v.form);
            if let Some(inside) = cursor.starts_inside(v.place, start as u64, form.len() as u64) {
                return Err(symbol_inside_site(
                    candidate_at(scanned, sec, start as u64, c),
                    inside,
                ));
            }
            let (kind, symbol) = scanned
                .probe_at(c.symbol_index)
                .expect("a candidate's symbol is a probe symbol");
            let func = cursor.enclosing(v.place, start as u64);
            let mut orig = [0u8; 8];
            code::copy_site_bytes(&mut orig, &text[start..start + form.len()], form.len());
            // The displacement as compiled is zero (RELA); keep it so, whatever was there.
            orig[form.len() - 4..form.len()].fill(0);
            sites.push(SiteInfo {
                section: sec,
                section_name: section_name.clone(),
                offset: start as u64,
                form,
                kind,
                symbol,
                function: func.map_or(&[][..], Func::name),
                func_offset: start as u64 - func.map_or(0, |f| f.value),
                rela: c.rela,
                symbol_index: c.symbol_index,
                orig,
                guard: None,
            });
        }
    }
    Ok(())
}

/// Checks that guard `g`'s NOP is an instruction of its function, as any site, and names the
/// function.
fn place_guard<'d>(obj: &Object<'d>, g: &mut SiteInfo<'d>, funcs: &[Func<'d>]) -> Result<()> {
    let mut cursor = Cursor::new(funcs);
    let place = cursor.seek(g.offset);
    let func = cursor.enclosing(place, g.offset);
    let from = func.map_or(0, |f| f.value as usize);
    let text = obj.section_data(g.section)?;
    let where_ = || Location {
        section: Some(g.section_name.to_string()),
        offset: Some(g.offset),
        symbol: Some(String::from_utf8_lossy(g.symbol).into_owned()),
        ..Location::file(obj.file.clone())
    };
    let mut ok = [false];
    decode::on_boundaries(text, from, &[g.offset as usize], &mut ok);
    if !ok[0] {
        return Err(Error::malformed(
            where_(),
            "a guard's NOP is not on an instruction boundary when decoded from the function start",
        ));
    }
    if let Some(inside) = cursor.starts_inside(place, g.offset, 5) {
        return Err(symbol_inside_site(where_(), inside));
    }
    g.function = func.map_or(&[][..], Func::name);
    g.func_offset = g.offset - func.map_or(0, |f| f.value);
    Ok(())
}
