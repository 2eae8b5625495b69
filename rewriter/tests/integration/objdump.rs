//! The independent count of call sites: what the compiler emitted, read from `objdump -dr` of the
//! input objects, and the check that no call or jump to a probe symbol survives in a linked
//! output, read from `objdump -d`.
//!
//! A site is a `call`/`jmp` instruction (`e8`, `e9`, `ff 15`, `ff 25`) whose relocation
//! (`R_X86_64_PLT32`/`PC32` for the first two, `GOTPCREL`/`GOTPCRELX`/`REX_GOTPCRELX` for the
//! others, addend -4, covering the instruction's last four bytes) targets a probe or hook symbol;
//! or a guard of `bootprof.h`: a record of section `.bootprof_guard` (16 bytes: site, target,
//! probe symbol), read from `readelf -rW`, whose site objdump shows as a 5-byte `nopl`.

use crate::elf::Elf;
use crate::util::{classify, cmd, run};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A call site found in an input object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Expected {
    pub kind: &'static str,
    pub form: &'static str,
    /// The enclosing function (the symbol objdump names the code after).
    pub function: String,
    pub func_offset: u64,
    pub section: String,
    pub symbol: String,
}

impl Expected {
    /// `(kind, form, function, func_offset)`: what the listing of a linked output must show.
    pub fn identity(&self) -> (String, String, String, u64) {
        (
            self.kind.to_string(),
            self.form.to_string(),
            self.function.clone(),
            self.func_offset,
        )
    }
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim(), 16).ok()
}

/// Splits a relocation's symbol expression (`sym-0x4`, `sym+0x10`, `sym`) into name and addend.
fn split_addend(expr: &str) -> (&str, i64) {
    if let Some(i) = expr.rfind("-0x") {
        (&expr[..i], -(hex(&expr[i + 3..]).unwrap_or(0) as i64))
    } else if let Some(i) = expr.rfind("+0x") {
        (&expr[..i], hex(&expr[i + 3..]).unwrap_or(0) as i64)
    } else {
        (expr, 0)
    }
}

/// The call sites in one object, as `objdump -dr` shows them.
pub fn sites_in_object(object: &Path) -> Vec<Expected> {
    let out = run(&mut cmd("objdump", ["-dr".as_ref(), object.as_os_str()])).ok();
    let mut sites = Vec::new();
    let mut section = String::new();
    let (mut function, mut function_addr) = (String::new(), 0u64);
    // Per section: the functions objdump names (start, name) and the instructions (address,
    // bytes), for the guards.
    let mut starts: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    let mut insns: BTreeMap<(String, u64), Vec<u8>> = BTreeMap::new();
    // The last instruction: address and first bytes (continuation lines carry no mnemonic).
    let mut last: Option<(u64, Vec<u8>)> = None;
    for line in out.stdout.lines() {
        if let Some(name) = line.strip_prefix("Disassembly of section ") {
            section = name.trim_end_matches(':').to_string();
            last = None;
            continue;
        }
        if let Some(rest) = line.strip_suffix(">:") {
            if let Some((addr, name)) = rest.split_once(" <") {
                if let Some(addr) = hex(addr) {
                    function = name.to_string();
                    function_addr = addr;
                    starts
                        .entry(section.clone())
                        .or_default()
                        .push((addr, function.clone()));
                    last = None;
                    continue;
                }
            }
        }
        if let Some(reloc) = line.strip_prefix("\t\t\t") {
            // `2: R_X86_64_GOTPCRELX\t__fentry__-0x4`
            let Some((off, rest)) = reloc.split_once(": ") else {
                continue;
            };
            let Some((r_type, expr)) = rest.split_once('\t') else {
                continue;
            };
            let (Some(r_offset), Some((addr, bytes))) = (hex(off), last.as_ref()) else {
                continue;
            };
            let (symbol, addend) = split_addend(expr.trim());
            let Some((kind, _, _)) = classify(symbol) else {
                continue;
            };
            let plt = matches!(r_type, "R_X86_64_PLT32" | "R_X86_64_PC32");
            let got = matches!(
                r_type,
                "R_X86_64_GOTPCREL" | "R_X86_64_GOTPCRELX" | "R_X86_64_REX_GOTPCRELX"
            );
            let form = match bytes.as_slice() {
                [0xe8, ..] if plt && r_offset == addr + 1 => "call",
                [0xe9, ..] if plt && r_offset == addr + 1 => "jmp",
                [0xff, 0x15, ..] if got && r_offset == addr + 2 => "call-got",
                [0xff, 0x25, ..] if got && r_offset == addr + 2 => "jmp-got",
                _ => continue,
            };
            if addend != -4 {
                continue;
            }
            sites.push(Expected {
                kind,
                form,
                function: function.clone(),
                func_offset: addr - function_addr,
                section: section.clone(),
                symbol: symbol.to_string(),
            });
            continue;
        }
        // `   9:\te8 00 00 00 00       \tcall   e <f+0xe>`
        let mut fields = line.split('\t');
        let (Some(addr), Some(bytes), Some(text)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (Some(addr), false) = (addr.trim().strip_suffix(':').and_then(hex), text.is_empty())
        else {
            continue;
        };
        let bytes: Vec<u8> = bytes
            .split_whitespace()
            .filter_map(|b| u8::from_str_radix(b, 16).ok())
            .collect();
        insns.insert((section.clone(), addr), bytes.clone());
        last = Some((addr, bytes));
    }
    sites.extend(guards_in_object(object, &starts, &insns));
    sites
}

/// The guards of one object: `readelf -rW` of its `.rela.bootprof_guard`, each record's site
/// (`section + offset` at record offset 0) checked to be a 5-byte `nopl` instruction in
/// `objdump -d`'s view, and placed in the function objdump names there.
fn guards_in_object(
    object: &Path,
    starts: &BTreeMap<String, Vec<(u64, String)>>,
    insns: &BTreeMap<(String, u64), Vec<u8>>,
) -> Vec<Expected> {
    let out = run(&mut cmd("readelf", ["-rW".as_ref(), object.as_os_str()])).ok();
    // (guard section, record offset) -> (site section, site offset), and the probe symbol; an
    // object has one guard section per COMDAT group with guards, and one outside groups.
    let mut place: BTreeMap<(usize, u64), (String, u64)> = BTreeMap::new();
    let mut symbol: BTreeMap<(usize, u64), String> = BTreeMap::new();
    let (mut inside, mut nth) = (false, 0);
    for line in out.stdout.lines() {
        if line.starts_with("Relocation section ") {
            inside = line.contains("'.rela.bootprof_guard'");
            nth += 1;
            continue;
        }
        // `0000000000000000  0000000200000002 R_X86_64_PC32  0000000000000000 .text + 50`
        let f: Vec<&str> = line.split_whitespace().collect();
        if !inside || f.len() < 5 || hex(f[0]).is_none() {
            continue;
        }
        let r_offset = hex(f[0]).unwrap();
        let record = (nth, r_offset - r_offset % 16);
        let addend = match f.get(5..7) {
            Some(["+", a]) => hex(a).unwrap_or(0) as i64,
            Some(["-", a]) => -(hex(a).unwrap_or(0) as i64),
            _ => 0,
        };
        match (r_offset % 16, f[2]) {
            (0, "R_X86_64_PC32") => {
                assert_eq!(
                    hex(f[3]),
                    Some(0),
                    "{}: a guard's site relative to a symbol other than its section: {line}",
                    object.display()
                );
                place.insert(record, (f[4].to_string(), addend as u64));
            }
            (8, "R_X86_64_64") => {
                symbol.insert(record, f[4].to_string());
            }
            _ => {}
        }
    }
    let mut guards = Vec::new();
    for (record, (section, offset)) in place {
        let sym = symbol.get(&record).unwrap_or_else(|| {
            panic!(
                "{}: guard record {record:?} names no probe",
                object.display()
            )
        });
        let (kind, _, _) = classify(sym)
            .unwrap_or_else(|| panic!("{}: guard record names {sym}", object.display()));
        assert_eq!(
            insns.get(&(section.clone(), offset)).map(Vec::as_slice),
            Some(&[0x0f, 0x1f, 0x44, 0x00, 0x00][..]),
            "{}: the guard at {section}+{offset:#x} is not a 5-byte nopl in objdump's view",
            object.display()
        );
        let (start, function) = starts
            .get(&section)
            .and_then(|f| f.iter().rev().find(|(a, _)| *a <= offset))
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "{}: no function holds {section}+{offset:#x}",
                    object.display()
                )
            });
        guards.push(Expected {
            kind,
            form: "guard",
            function,
            func_offset: offset - start,
            section,
            symbol: sym.clone(),
        });
    }
    guards
}

/// The call sites of several objects that are linked together. A site in a section of a COMDAT
/// group counts once however many objects carry a copy of the group (the linker keeps one).
pub fn sites_in_objects(objects: &[PathBuf]) -> Vec<Expected> {
    let mut seen = BTreeSet::new();
    let mut all = Vec::new();
    for object in objects {
        let groups = Elf::open(object).group_members();
        for site in sites_in_object(object) {
            let key = (
                site.section.clone(),
                site.function.clone(),
                site.func_offset,
                site.symbol.clone(),
            );
            if groups.contains(&site.section) && !seen.insert(key) {
                continue;
            }
            all.push(site);
        }
    }
    all
}

/// The smallest address range of `binary` holding every function named in `functions` (from
/// `nm -S`), or `None` when it defines none of them.
fn address_hull(binary: &Path, functions: &BTreeSet<String>) -> Option<(u64, u64)> {
    let out = run(cmd(
        "nm",
        ["-S".as_ref(), "--defined-only".as_ref(), binary.as_os_str()],
    ))
    .ok();
    let mut hull: Option<(u64, u64)> = None;
    for line in out.stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (addr, size, name) = match f[..] {
            [addr, size, _, name] => (hex(addr)?, hex(size)?, name),
            [addr, _, name] => (hex(addr)?, 0, name),
            _ => continue,
        };
        if functions.contains(name) {
            let (lo, hi) = hull.unwrap_or((addr, addr + size));
            hull = Some((lo.min(addr), hi.max(addr + size)));
        }
    }
    hull
}

/// The lines of `objdump -d binary` where code other than the stubs calls or jumps to a probe or
/// hook symbol (directly, through its PLT entry, or through a GOT slot objdump names after it).
/// Only the address range of `functions` (the functions of the inputs) is disassembled: the
/// runtime and libc around them are large and are not rewritten code.
pub fn calls_to_probes(binary: &Path, functions: &BTreeSet<String>) -> Vec<String> {
    let mut c = cmd("objdump", ["-d"]);
    if let Some((lo, hi)) = address_hull(binary, functions) {
        c.arg(format!("--start-address={lo:#x}"))
            .arg(format!("--stop-address={hi:#x}"));
    }
    let out = run(c.arg(binary)).ok();
    let mut bad = Vec::new();
    let mut function = String::new();
    let mut previous = String::new();
    for line in out.stdout.lines() {
        if let Some(rest) = line.strip_suffix(">:") {
            if let Some((_, name)) = rest.split_once(" <") {
                function = name.to_string();
                continue;
            }
        }
        // The stubs themselves, the dispatchers, and PLT entries are not rewritten code.
        let base = function.split('@').next().unwrap_or("");
        if classify(base).is_some() || base.starts_with("__bootprof") || function.contains("@plt") {
            continue;
        }
        let Some(text) = line.split('\t').nth(2) else {
            continue;
        };
        let prev = std::mem::replace(&mut previous, text.to_string());
        let is_branch = text
            .split_whitespace()
            .take(3)
            .any(|w| matches!(w, "call" | "callq" | "jmp" | "jmpq"));
        if !is_branch {
            continue;
        }
        let mut rest = text;
        while let Some(start) = rest.find('<') {
            let Some(len) = rest[start..].find('>') else {
                break;
            };
            let target = &rest[start + 1..start + len];
            let name = target.split(['@', '+']).next().unwrap_or("");
            // A tail site's thunk (after the functions of its section): `lea 0x0(%rip),%r11`,
            // then a jump past the stub's own `lea`, to the stub + 7. Never run while disabled.
            let thunk = target.ends_with("+0x7")
                && text.starts_with("jmp")
                && prev.split_whitespace().take(2).collect::<Vec<_>>() == ["lea", "0x0(%rip),%r11"];
            if classify(name).is_some() && !thunk {
                bad.push(format!("in <{function}>: {}", line.trim()));
            }
            rest = &rest[start + len..];
        }
    }
    bad
}
