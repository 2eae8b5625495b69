//! `bootprof report --srcline`: takes a trace; hands on the source file and line of each of its
//! sites and of the addresses of its recorded stacks, read from the DWARF line tables of each
//! process's executable, and notes on what it could not cover.
//!
//! Each executable is read once (by `object`; `addr2line` reads the DWARF sections handed to
//! it), whichever processes ran it. The trace holds run-time addresses: the executable's load
//! bias in each process (0 unless it is position-independent) is the one difference between the
//! sites the process registered and the same sites in the executable's own table (matched by
//! kind, function and offset), found by a vote. A site that matches no entry of the table at
//! that bias belongs to a shared library, which is not covered: the trace does not record where
//! libraries were mapped. Neither is a single trace file, which does not name its executable.
//!
//! A function's line is that of its first instruction (where `addr2line` puts the function's
//! address: the line of its opening), found from any of its sites (a site's address less its
//! offset in the function); a function hook's site has its function's line, a probe's or an
//! annotation's its own. A return address of a recorded stack is looked up one byte back, in
//! its call.

use crate::trace::Trace;
use addr2line::gimli;
use bootprof_format::linked::{linked_sites, Image};
use bootprof_format::trace::RecordKind;
use bootprof_format::Kind;
use object::read::elf::ElfFile64;
use object::{LittleEndian as LE, Object, ObjectSection};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// The source lines of a trace's sites and stack addresses.
#[derive(Debug, Default)]
pub struct SourceLines {
    /// Per site of the trace, `file:line` of the site.
    sites: Vec<Option<String>>,
    /// Per site of the trace, `file:line` of its function's first instruction.
    functions: Vec<Option<String>>,
    /// (process, run-time address) of a recorded frame -> `file:line`.
    frames: HashMap<(usize, u64), String>,
    /// What is not covered, once each: a binary without debug information, one that cannot be
    /// read or does not match the trace, the sites of shared libraries.
    pub notes: Vec<String>,
    /// Sites of processes whose executable was read that are not the executable's.
    library_sites: usize,
}

impl SourceLines {
    /// The source lines of `trace`.
    pub fn of(trace: &Trace) -> SourceLines {
        let mut lines = SourceLines {
            sites: vec![None; trace.sites.len()],
            functions: vec![None; trace.sites.len()],
            ..SourceLines::default()
        };
        if trace.processes.is_empty() {
            lines.notes.push(
                "a single trace file does not name its executable: no source lines (a session, \
                 from `bootprof run`, does)"
                    .into(),
            );
            return lines;
        }
        let mut exes: Vec<&str> = Vec::new();
        for p in &trace.processes {
            if !exes.contains(&p.exe.as_str()) {
                exes.push(&p.exe);
            }
        }
        for exe in exes {
            if let Err(note) = lines.read_executable(trace, exe) {
                lines.notes.push(format!("{exe}: {note}"));
            }
        }
        if lines.library_sites > 0 {
            lines.notes.push(format!(
                "{} of shared libraries: no source line, as the trace does not record where \
                 libraries were mapped",
                match lines.library_sites {
                    1 => "1 site".to_string(),
                    n => format!("{n} sites"),
                }
            ));
        }
        lines
    }

    /// `file:line` of site `site` of the trace.
    pub fn site(&self, site: u32) -> Option<&str> {
        self.sites.get(site as usize)?.as_deref()
    }

    /// `file:line` of the first instruction of the function that holds site `site`.
    pub fn function(&self, site: u32) -> Option<&str> {
        self.functions.get(site as usize)?.as_deref()
    }

    /// `file:line` of `address`, a frame of a stack recorded in process `process`.
    pub fn frame(&self, process: usize, address: u64) -> Option<&str> {
        self.frames.get(&(process, address)).map(String::as_str)
    }

    /// Looks up the sites and frames of every process of `trace` that ran `exe`; the error is a
    /// note on why it could not.
    fn read_executable(&mut self, trace: &Trace, exe: &str) -> Result<(), String> {
        let file = std::fs::File::open(exe).map_err(|e| format!("cannot read it: {e}"))?;
        // SAFETY: the map is read-only and private; a binary changed while it is read makes the
        // lines wrong, not the reading unsafe (every read is bounds-checked).
        let data =
            unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("cannot read it: {e}"))?;
        let elf =
            ElfFile64::<LE>::parse(&*data).map_err(|e| format!("not a readable ELF file: {e}"))?;
        let image = Image::new(&elf, &data);
        let table = table_addresses(&elf, &image)?;
        let sections = debug_sections(&elf);
        if !sections.contains_key(".debug_info") || !sections.contains_key(".debug_line") {
            return Err("no debug information (built without -g, or stripped): its \
                        functions have no source line"
                .into());
        }
        let empty: &[u8] = &[];
        let dwarf = gimli::Dwarf::load(|id| -> Result<_, ()> {
            let data = sections.get(id.name()).map_or(empty, |d| &d[..]);
            Ok(gimli::EndianSlice::new(data, gimli::RunTimeEndian::Little))
        })
        .expect("loading borrows sections and cannot fail");
        let context = addr2line::Context::from_dwarf(dwarf)
            .map_err(|e| format!("malformed debug information: {e}"))?;
        let lookup = |address: u64| source_line(&context, address);
        for (index, process) in trace.processes.iter().enumerate() {
            if process.exe != exe {
                continue;
            }
            let Some(bias) = load_bias(trace, index, &table) else {
                self.notes.push(format!(
                    "{exe}: none of the sites process {} registered is in its table (was it \
                     rebuilt since the run?): no source lines for that process",
                    process.label()
                ));
                continue;
            };
            for (i, site) in trace.sites.iter().enumerate() {
                if site.process != index {
                    continue;
                }
                let address = site.address.wrapping_sub(bias);
                if !table.contains(&(key(site.kind, &site.function, site.func_offset), address)) {
                    self.library_sites += 1;
                    continue;
                }
                let function = lookup(address.wrapping_sub(u64::from(site.func_offset)));
                self.sites[i] = if site.kind.is_hook() {
                    function.clone()
                } else {
                    lookup(address)
                };
                self.functions[i] = function;
            }
            self.read_frames(trace, index, bias, &lookup);
        }
        Ok(())
    }

    /// Looks up the frames of the stacks recorded by process `index`, whose executable was
    /// loaded `bias` bytes past its link-time addresses.
    fn read_frames(
        &mut self,
        trace: &Trace,
        index: usize,
        bias: u64,
        lookup: &dyn Fn(u64) -> Option<String>,
    ) {
        for r in trace.records.iter() {
            if r.kind != RecordKind::Frame || trace.process_of(r.tid).map(|(i, _)| i) != Some(index)
            {
                continue;
            }
            if self.frames.contains_key(&(index, r.arg)) {
                continue;
            }
            // The first frame is the site itself; the others are return addresses, which
            // follow their calls.
            let site_address = trace.sites.get(r.site as usize).map(|s| s.address);
            let back = u64::from(site_address != Some(r.arg));
            if let Some(line) = lookup(r.arg.wrapping_sub(bias).wrapping_sub(back)) {
                self.frames.insert((index, r.arg), line);
            }
        }
    }
}

/// What identifies a site in both the trace and the table: its kind, its function and its
/// offset there.
type SiteKey = (u8, String, u32);

fn key(kind: Kind, function: &str, func_offset: u32) -> SiteKey {
    (kind as u8, function.to_string(), func_offset)
}

/// The executable's own sites: (key, link-time address).
fn table_addresses(elf: &ElfFile64<LE>, image: &Image) -> Result<HashSet<(SiteKey, u64)>, String> {
    let sites = linked_sites(elf, image)
        .map_err(|e| format!("unreadable site table: {e}"))?
        .unwrap_or_default();
    Ok(sites
        .into_iter()
        .map(|l| {
            let function = image.string_at(l.site.function).unwrap_or_default();
            (key(l.site.kind, &function, l.site.func_offset), l.site.site)
        })
        .collect())
}

/// How far past its link-time addresses process `index` loaded its executable: the difference
/// between the addresses of its sites and those of the same sites in `table` that most sites
/// agree on; `None` when no site is in the table.
fn load_bias(trace: &Trace, index: usize, table: &HashSet<(SiteKey, u64)>) -> Option<u64> {
    let mut by_key: HashMap<&SiteKey, Vec<u64>> = HashMap::new();
    for (k, address) in table {
        by_key.entry(k).or_default().push(*address);
    }
    let mut votes: HashMap<u64, usize> = HashMap::new();
    for site in trace.sites.iter().filter(|s| s.process == index) {
        let k = key(site.kind, &site.function, site.func_offset);
        for &address in by_key.get(&k).into_iter().flatten() {
            *votes.entry(site.address.wrapping_sub(address)).or_default() += 1;
        }
    }
    votes
        .into_iter()
        .max_by_key(|&(bias, n)| (n, std::cmp::Reverse(bias)))
        .map(|(bias, _)| bias)
}

/// The DWARF sections of `elf` by name, decompressed when they are compressed.
fn debug_sections<'d>(elf: &ElfFile64<'d, LE>) -> HashMap<&'static str, Cow<'d, [u8]>> {
    let mut sections = HashMap::new();
    for id in [
        gimli::SectionId::DebugAbbrev,
        gimli::SectionId::DebugAddr,
        gimli::SectionId::DebugAranges,
        gimli::SectionId::DebugInfo,
        gimli::SectionId::DebugLine,
        gimli::SectionId::DebugLineStr,
        gimli::SectionId::DebugRanges,
        gimli::SectionId::DebugRngLists,
        gimli::SectionId::DebugStr,
        gimli::SectionId::DebugStrOffsets,
    ] {
        let data = elf
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok());
        if let Some(data) = data {
            sections.insert(id.name(), data);
        }
    }
    sections
}

/// `file:line` of the link-time `address`, the file relative to its compilation directory when
/// it lies inside it.
fn source_line<R: gimli::Reader>(context: &addr2line::Context<R>, address: u64) -> Option<String> {
    let location = context.find_location(address).ok()??;
    let (file, line) = (location.file?, location.line?);
    let comp_dir = context
        .find_dwarf_and_unit(address)
        .skip_all_loads()
        .and_then(|unit| {
            unit.comp_dir
                .as_ref()?
                .to_string_lossy()
                .ok()
                .map(Cow::into_owned)
        });
    let file = match comp_dir {
        Some(dir) => file
            .strip_prefix(dir.as_str())
            .and_then(|f| f.strip_prefix('/'))
            .unwrap_or(file),
        None => file,
    };
    Some(format!("{file}:{line}"))
}
