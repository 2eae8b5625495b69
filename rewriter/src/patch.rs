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
pub fn verify(scanned: Scanned<'_>) -> Result<Plan<'_>> {
    verify_with(scanned, None::<fn(Deferred<'_>)>)
}

/// The instruction-boundary checks of the calls in sections of at least [`DEFER_MIN`] bytes,
/// handed over by [`verify_deferring`] for [`Deferred::work`]: for each such section its bytes and the
/// calls as (the offset their function starts at, the call's offset), in that order.
#[derive(Default)]
pub struct Deferred<'d> {
    sections: Vec<DeferredSection<'d>>,
    /// The next chunk of [`Deferred::chunks`] to take.
    next: std::sync::atomic::AtomicUsize,
    /// Chunks of calls (section, first call, end), whole functions each.
    chunks: Vec<(usize, usize, usize)>,
}

/// A section's bytes and the calls whose boundary checks [`Deferred`] holds: (the offset their
/// function starts at, the call's offset).
pub type DeferredSection<'d> = (&'d [u8], Vec<(usize, usize)>);

/// The smallest section whose boundary checks [`verify_deferring`] defers: the sections of an
/// object compiled with `-finstrument-functions` hold most of its code, each function decoded
/// from its first byte to its exit hook (sqlite3's 1.3 MB `.text`: 2.7 ms on one CPU with
/// `length::fast_length`, `bootprof-scanbench --decode`).
pub const DEFER_MIN: usize = 128 << 10;

/// Calls of a chunk of [`Deferred`]: enough for a chunk's decoding to outweigh taking it.
const CHUNK_CALLS: usize = 512;

impl<'d> Deferred<'d> {
    /// Takes chunks of checks until none is left (several threads may work at once); whether
    /// every call this thread checked is on an instruction boundary.
    pub fn work(&self) -> bool {
        let mut all = true;
        loop {
            let k = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&(sec, lo, hi)) = self.chunks.get(k) else {
                return all;
            };
            let (text, calls) = &self.sections[sec];
            decode::on_boundaries_lanes(text, &calls[lo..hi], |_, ok| all &= ok);
        }
    }

    /// The sections' bytes and calls, to be checked later ([`Deferred::of`] takes them back).
    pub fn into_sections(self) -> Vec<DeferredSection<'d>> {
        self.sections
    }

    /// The checks of `sections` (each its bytes and calls, as [`Deferred::into_sections`] gives
    /// them), for [`Deferred::work`].
    pub fn of(sections: Vec<DeferredSection<'d>>) -> Deferred<'d> {
        let mut d = Deferred {
            sections,
            ..Deferred::default()
        };
        d.cut();
        d
    }

    /// Cuts the calls of each section into chunks of whole functions.
    fn cut(&mut self) {
        for (sec, (_, calls)) in self.sections.iter().enumerate() {
            let mut lo = 0;
            while lo < calls.len() {
                let mut hi = (lo + CHUNK_CALLS).min(calls.len());
                while hi < calls.len() && calls[hi].0 == calls[hi - 1].0 {
                    hi += 1;
                }
                self.chunks.push((sec, lo, hi));
                lo = hi;
            }
        }
    }
}

/// [`verify`], with the instruction-boundary checks of large sections handed to `hand_over` as
/// soon as their calls are recognised, for [`Deferred::work`] (on other threads, beside the
/// making of the sites and the writing of the new object), and their calls taken for sites
/// meanwhile. `hand_over` is not called when no section is that large. When a deferred check
/// fails, the plan is not to be used: [`verify`] then says which call is not an instruction.
pub fn verify_deferring<'d>(
    scanned: Scanned<'d>,
    hand_over: impl FnOnce(Deferred<'d>),
) -> Result<Plan<'d>> {
    verify_with(scanned, Some(hand_over))
}

/// Whether [`verify_deferring`] would defer checks of `scanned`: it has a section of calls of
/// at least [`DEFER_MIN`] bytes.
pub fn defers(scanned: &Scanned<'_>) -> bool {
    scanned
        .candidates
        .keys()
        .any(|&sec| scanned.object.section_data(sec).is_ok_and(deferrable))
}

/// Whether the boundary checks of the calls in section bytes `text` may be deferred.
fn deferrable(text: &[u8]) -> bool {
    text.len() >= DEFER_MIN
}

/// [`verify`], handing the boundary checks of large sections to `hand_over` when given.
fn verify_with<'d>(
    mut scanned: Scanned<'d>,
    hand_over: Option<impl FnOnce(Deferred<'d>)>,
) -> Result<Plan<'d>> {
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
    // Every section's calls recognised first, so that the deferred boundary checks can start
    // while the sites are made.
    let mut recognised = Vec::with_capacity(scanned.candidates.len());
    for (&sec, candidates) in &scanned.candidates {
        let mut candidates: Vec<&Candidate> = candidates.iter().collect();
        candidates.sort_by_key(|c| c.r_offset);
        let text = scanned.object.section_data(sec)?;
        let funcs = funcs_of(sec);
        let calls = recognise_all(&scanned, sec, text, funcs, &candidates, &mut not_sites)?;
        recognised.push((sec, text, calls));
    }
    let mut later = Deferred::default();
    let handing = hand_over.is_some();
    let deferring = |text: &[u8]| handing && deferrable(text);
    for (_, text, calls) in &recognised {
        if deferring(text) {
            let calls = calls.iter().map(|c| (c.from, c.start)).collect();
            later.sections.push((*text, calls));
        }
    }
    if let Some(hand_over) = hand_over.filter(|_| !later.sections.is_empty()) {
        later.cut();
        hand_over(later);
    }
    for (sec, text, calls) in recognised {
        let decode = !deferring(text);
        let found = (&mut sites, &mut not_sites);
        check_boundaries(&scanned, (sec, text), funcs_of(sec), calls, found, decode)?;
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
/// function) and that no symbol starts inside it; hands the good ones on as sites. Without
/// `decode`, the boundary checks are left to [`Deferred`], and every call is taken for an
/// instruction meanwhile.
fn check_boundaries<'d>(
    scanned: &Scanned<'d>,
    (sec, text): (usize, &[u8]),
    funcs: &[Func<'d>],
    recognised: Vec<Call<'_>>,
    (sites, not_sites): (&mut Vec<SiteInfo<'d>>, &mut Vec<NotASite>),
    decode: bool,
) -> Result<()> {
    let section_name = scanned.object.section_name_in(sec);
    let cursor = Cursor::new(funcs);
    let (mut starts, mut ok) = (Vec::new(), Vec::new());
    for group in recognised.chunk_by(|a, b| a.from == b.from) {
        starts.clear();
        starts.extend(group.iter().map(|v| v.start));
        ok.clear();
        ok.resize(starts.len(), !decode);
        if decode {
            decode::on_boundaries(text, group[0].from, &starts, &mut ok);
        }
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
