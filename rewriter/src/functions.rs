//! Which function encloses an offset of a text section, from the object's symbols: how `patch`
//! places each site in its function (for the table's names, and to decode from the function's
//! first byte when it checks instruction boundaries).

use crate::elf::{Symbols, LE};
use crate::error::{Error, Location};
use object::elf;
use object::read::elf::Sym;
use object::read::SectionIndex;
use std::collections::BTreeMap;

/// A symbol that may enclose sites.
pub(crate) struct Func<'d> {
    pub value: u64,
    pub size: u64,
    pub name: &'d [u8],
    pub is_func: bool,
}

/// Named symbols defined in the sections that are keys of `wanted`, each list sorted by address
/// (functions first at equal address).
pub(crate) fn functions_in<'d, T>(
    symbols: &Symbols<'d>,
    wanted: &BTreeMap<usize, T>,
) -> BTreeMap<usize, Vec<Func<'d>>> {
    let mut out: BTreeMap<usize, Vec<Func<'d>>> = BTreeMap::new();
    for (index, sym) in symbols.enumerate() {
        let ty = sym.st_type();
        if index.0 == 0 || ty == elf::STT_SECTION || ty == elf::STT_FILE {
            continue;
        }
        let Some(SectionIndex(sec)) = symbols.symbol_section(LE, sym, index).ok().flatten() else {
            continue;
        };
        if !wanted.contains_key(&sec) {
            continue;
        }
        let Ok(name) = symbols.symbol_name(LE, sym) else {
            continue;
        };
        if name.is_empty() || name.starts_with(b".L") {
            continue;
        }
        out.entry(sec).or_default().push(Func {
            value: sym.st_value(LE),
            size: sym.st_size(LE),
            name,
            is_func: ty == elf::STT_FUNC,
        });
    }
    for funcs in out.values_mut() {
        funcs.sort_by_key(|f| (f.value, !f.is_func));
    }
    out
}

/// A symbol that starts strictly inside the `len` bytes of the instruction at `start`. Compiled
/// code never has one; patching such an instruction would change how the code after that
/// symbol decodes (and so which of its calls are sites), so the object is refused.
pub(crate) fn starts_inside<'a, 'd>(
    funcs: &'a [Func<'d>],
    start: u64,
    len: u64,
) -> Option<&'a Func<'d>> {
    let first = funcs.partition_point(|f| f.value <= start);
    funcs[first..].first().filter(|f| f.value < start + len)
}

pub(crate) fn symbol_inside_site(at: Location, inside: &Func<'_>) -> Error {
    Error::malformed(
        at,
        format!(
            "symbol `{}` starts at offset {:#x}, inside the site's instruction",
            String::from_utf8_lossy(inside.name),
            inside.value
        ),
    )
}

/// The function covering `offset`: the last `STT_FUNC` starting at or before it whose size covers
/// it, or else the last named symbol starting at or before it.
pub(crate) fn enclosing<'a, 'd>(funcs: &'a [Func<'d>], offset: u64) -> Option<&'a Func<'d>> {
    let upto = funcs.partition_point(|f| f.value <= offset);
    let before = &funcs[..upto];
    before
        .iter()
        .rev()
        .find(|f| f.is_func && offset - f.value < f.size.max(1))
        .or_else(|| before.last())
}
