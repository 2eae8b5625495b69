//! `bootprof list`: takes a linked executable or shared object; hands on its site table, resolved
//! (addresses, file offsets, names) and checked (does each site hold its disabled bytes?).

use crate::error::{Error, Location, Result};
use bootprof_format::{self as format, Form, Kind};
use format::linked::{linked_sites, Image, LinkedSite};
use object::read::elf::ElfFile64;
use object::{LittleEndian as LE, Object};
use serde::ser::{SerializeMap, Serializer};
use std::path::Path;

/// One site of a linked binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedSite {
    /// Virtual address of the site (unrelocated for a PIE).
    pub address: u64,
    /// Where its bytes are in the file.
    pub file_offset: Option<u64>,
    /// What it is.
    pub kind: Kind,
    /// The instruction it replaced.
    pub form: Form,
    /// Provider, for named probes.
    pub provider: Option<String>,
    /// Probe name, or the hook symbol for function hooks.
    pub name: String,
    /// Enclosing function: its symbol, or its demangled name once [`Listing::demangle_names`]
    /// has run.
    pub function: Option<String>,
    /// The function's demangled name as the table stores it for the runtime's patterns (C++ and
    /// Rust names; tables linked before it was stored have none).
    pub demangled: Option<String>,
    /// The function's symbol, when `function` holds its demangled name.
    pub symbol: Option<String>,
    /// Offset in the function.
    pub func_offset: u32,
    /// Whether the site holds its disabled (NOP) bytes.
    pub nop: bool,
}

/// The table of one binary.
#[derive(Debug, Clone)]
pub struct Listing {
    /// The file.
    pub file: String,
    /// Its sites, by address.
    pub sites: Vec<ListedSite>,
}

/// Reads the site table of the binary at `path`.
pub fn list(path: &Path) -> Result<Listing> {
    let data = {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: the map is read-only and private; the binary is not expected to change while
        // it is read (a concurrent writer could only make the listing wrong, not unsafe to use,
        // as every read is bounds-checked).
        unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?
    };
    let file = path.display().to_string();
    let at = |section: Option<&str>, offset: Option<u64>| Location {
        section: section.map(String::from),
        offset,
        ..Location::file(file.clone())
    };
    if data.len() < 16 || !format::file::is_elf(&data) {
        return Err(Error::NotElf(at(None, None)));
    }
    if !format::file::is_elf64_le(&data) {
        return Err(Error::Unsupported {
            at: at(None, None),
            what: "not a 64-bit little-endian ELF file".into(),
        });
    }
    let elf =
        ElfFile64::<LE>::parse(&*data).map_err(|e| Error::malformed_elf(at(None, None), e))?;
    if elf.architecture() != object::Architecture::X86_64 {
        return Err(Error::Unsupported {
            at: at(None, None),
            what: format!("architecture {:?}", elf.architecture()),
        });
    }
    let image = Image::new(&elf, &data);
    let table = linked_sites(&elf, &image)
        .map_err(|e| Error::malformed_elf(at(Some(format::SECTION_NAME), None), e))?;
    let Some(table) = table else {
        return Err(Error::NoTable(at(None, None)));
    };
    let mut sites: Vec<ListedSite> = table
        .into_iter()
        .map(|LinkedSite { site, nop }| ListedSite {
            address: site.site,
            file_offset: image.offset_of(site.site),
            kind: site.kind,
            form: site.form,
            provider: image.string_at(site.provider),
            name: image.string_at(site.name).unwrap_or_default(),
            function: image.string_at(site.function),
            demangled: image.string_at(site.demangled),
            symbol: None,
            func_offset: site.func_offset,
            nop,
        })
        .collect();
    sites.sort_by_key(|s| s.address);
    Ok(Listing { file, sites })
}

impl Listing {
    /// Shows each function by its demangled name (the table's, or, for a table linked before
    /// it stored them, demangled here), keeping its symbol in [`ListedSite::symbol`].
    pub fn demangle_names(&mut self) {
        for s in &mut self.sites {
            let Some(function) = &s.function else {
                continue;
            };
            if s.symbol.is_some() {
                continue;
            }
            let demangled = s
                .demangled
                .clone()
                .or_else(|| format::demangle::demangle(function));
            if let Some(d) = demangled {
                s.symbol = s.function.replace(d);
            }
        }
    }

    /// How many sites hold their NOP.
    pub fn nop_count(&self) -> usize {
        self.sites.iter().filter(|s| s.nop).count()
    }

    /// The text form (see DESIGN.md).
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for s in &self.sites {
            let probe = match &s.provider {
                Some(p) => format!("{p}:{}", s.name),
                None => "-".into(),
            };
            let _ = writeln!(
                out,
                "{:#018x} {:>10} {:<10} {:<8} {:<32} {}+{:#x} {}",
                s.address,
                s.file_offset.map_or("-".into(), |o| format!("{o:#x}")),
                s.kind.name(),
                s.form.name(),
                probe,
                s.function.as_deref().unwrap_or("?"),
                s.func_offset,
                if s.nop { "nop" } else { "BAD" }
            );
        }
        let bad = self.sites.len() - self.nop_count();
        if bad == 0 {
            let _ = writeln!(out, "{} sites, all hold their NOP", self.sites.len());
        } else {
            let _ = writeln!(
                out,
                "{} sites, {bad} do not hold their NOP",
                self.sites.len()
            );
        }
        out
    }

    /// The JSON form (see DESIGN.md): serde_json's compact form with a space after each `:` and
    /// `,`, and one site per line.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, ListFormatter);
        let written = (|| {
            let mut map = ser.serialize_map(Some(4))?;
            map.serialize_entry("file", &self.file)?;
            map.serialize_entry("count", &self.sites.len())?;
            map.serialize_entry("nop_ok", &self.nop_count())?;
            map.serialize_entry("sites", &self.sites)?;
            map.end()
        })();
        written.expect("writing JSON to memory cannot fail");
        out.push(b'\n');
        String::from_utf8(out).expect("serde_json writes UTF-8")
    }
}

impl serde::Serialize for ListedSite {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(11))?;
        map.serialize_entry("address", &self.address)?;
        map.serialize_entry("file_offset", &self.file_offset)?;
        map.serialize_entry("kind", self.kind.name())?;
        map.serialize_entry("form", self.form.name())?;
        map.serialize_entry("len", &self.form.len())?;
        map.serialize_entry("provider", &self.provider)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("function", &self.function)?;
        map.serialize_entry("symbol", &self.symbol.as_ref().or(self.function.as_ref()))?;
        map.serialize_entry("func_offset", &self.func_offset)?;
        map.serialize_entry("nop", &self.nop)?;
        map.end()
    }
}

/// The layout of `bootprof list --json`: `"key": value, "key": value` inside objects, and each
/// element of the (one) array on a line of its own, indented by two spaces.
struct ListFormatter;

impl serde_json::ser::Formatter for ListFormatter {
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        w.write_all(if first { b"" } else { b", " })
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        w.write_all(if first { b"\n  " } else { b",\n  " })
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b"\n]")
    }
}
