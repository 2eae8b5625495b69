//! Which function encloses an offset of a text section, from the object's symbols: how `patch`
//! places each site in its function (for the table's names, and to decode from the function's
//! first byte when it checks instruction boundaries).

use crate::elf::{c_str, Object, LE};
use crate::error::{Error, Location};
use object::elf;
use object::read::elf::Sym;
use object::read::SectionIndex;

/// A symbol that may enclose sites.
pub(crate) struct Func<'d> {
    pub value: u64,
    pub size: u64,
    /// The symbol string table from the symbol's name on ([`Func::name`] ends it).
    name_from: &'d [u8],
    pub is_func: bool,
}

impl<'d> Func<'d> {
    /// The symbol's name.
    pub fn name(&self) -> &'d [u8] {
        c_str(self.name_from)
    }
}

/// Named symbols defined in the sections `wanted` marks (indexed by section), by section, each
/// list sorted by address (functions first at equal address). Names are looked at for their
/// first bytes only: a program has tens of thousands of symbols, and only the functions that
/// hold sites need their whole names.
pub(crate) fn functions_in<'d>(obj: &Object<'d>, wanted: &[bool]) -> Vec<Vec<Func<'d>>> {
    let mut out: Vec<Vec<Func<'d>>> = (0..wanted.len()).map(|_| Vec::new()).collect();
    let symbols = &obj.symbols;
    for (index, sym) in symbols.enumerate() {
        let ty = sym.st_type();
        if index.0 == 0 || ty == elf::STT_SECTION || ty == elf::STT_FILE {
            continue;
        }
        let sec = match sym.st_shndx(LE) {
            elf::SHN_UNDEF => continue,
            elf::SHN_XINDEX => match symbols.symbol_section(LE, sym, index) {
                Ok(Some(SectionIndex(sec))) => sec,
                _ => continue,
            },
            s if s.0 >= elf::SHN_LORESERVE => continue,
            s => s.0 as usize,
        };
        if !wanted.get(sec).is_some_and(|&w| w) {
            continue;
        }
        let st_name = sym.st_name(LE);
        let name_from = obj.name_from(st_name);
        if name_from.first().is_none_or(|&b| b == 0) || name_from.starts_with(b".L") {
            continue;
        }
        out[sec].push(Func {
            value: sym.st_value(LE),
            size: sym.st_size(LE),
            name_from,
            is_func: ty == elf::STT_FUNC,
        });
    }
    for funcs in &mut out {
        funcs.sort_by_key(|f| (f.value, !f.is_func));
    }
    out
}

/// Where an offset is among a section's symbols ([`functions_in`]'s list): `next`, the index of
/// the first symbol starting after it. Sites are placed in offset order: [`Cursor::seek`] moves
/// from the last place, most often by one symbol, where a binary search took a dozen steps.
pub(crate) struct Cursor<'a, 'd> {
    funcs: &'a [Func<'d>],
    next: usize,
}

impl<'a, 'd> Cursor<'a, 'd> {
    pub fn new(funcs: &'a [Func<'d>]) -> Cursor<'a, 'd> {
        Cursor { funcs, next: 0 }
    }

    /// Moves to `offset`; returns the place ([`Cursor::enclosing`] and [`Cursor::starts_inside`]
    /// take it): a few steps forward from the last place, else a binary search.
    pub fn seek(&mut self, offset: u64) -> usize {
        let (funcs, next) = (self.funcs, self.next);
        if next == 0 || funcs[next - 1].value <= offset {
            let stop = (next + 4).min(funcs.len());
            let mut n = next;
            while n < stop && funcs[n].value <= offset {
                n += 1;
            }
            if n < stop || n == funcs.len() {
                self.next = n;
                return n;
            }
        }
        self.next = funcs.partition_point(|f| f.value <= offset);
        self.next
    }

    /// The function covering `offset` (placed at `next` by [`Cursor::seek`]): the last
    /// `STT_FUNC` starting at or before it whose size covers it, or else the last named symbol
    /// starting at or before it.
    pub fn enclosing(&self, next: usize, offset: u64) -> Option<&'a Func<'d>> {
        let before = &self.funcs[..next];
        before
            .iter()
            .rev()
            .find(|f| f.is_func && offset - f.value < f.size.max(1))
            .or_else(|| before.last())
    }

    /// A symbol that starts strictly inside the `len` bytes of the instruction at `start`
    /// (placed at `next`). Compiled code never has one; patching such an instruction would
    /// change how the code after that symbol decodes (and so which of its calls are sites), so
    /// the object is refused.
    pub fn starts_inside(&self, next: usize, start: u64, len: u64) -> Option<&'a Func<'d>> {
        self.funcs.get(next).filter(|f| f.value < start + len)
    }
}

pub(crate) fn symbol_inside_site(at: Location, inside: &Func<'_>) -> Error {
    Error::malformed(
        at,
        format!(
            "symbol `{}` starts at offset {:#x}, inside the site's instruction",
            String::from_utf8_lossy(inside.name()),
            inside.value
        ),
    )
}
