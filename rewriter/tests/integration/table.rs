//! The site table's layout as the final link sees it: version 2 gives the linker one relocation
//! per fragment for its text section and one per distinct target, and a table of version 1 (what
//! bootprof-link wrote before) still lists, enables and counts the same as the one it replaces.

use crate::elf::{u32le, Elf, SHT_RELA};
use crate::json::list;
use crate::util::{
    cmd, compile_c, link_bin, mkdir, read, require, run, source_dir, write, TempDir, BOOTPROF,
};
use bootprof_format::{self as format, field, ENTRY_SIZE, HEADER_SIZE, TARGETS_AT, TEXT_FIELD};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The fentry case (`__fentry__` in every function, through the GOT, and one probe call),
/// compiled with its flags into `dir`.
fn fentry_objects(dir: &Path) -> Vec<PathBuf> {
    ["main.c", "sort.c"]
        .iter()
        .map(|f| {
            let object = dir.join(f.replace(".c", ".o"));
            compile_c(
                &source_dir("fentry").join(f),
                &object,
                &["-O2", "-pg", "-mfentry"],
            )
        })
        .collect()
}

/// Each rewritten object's relocations of its `bootprof_sites` fragments hold one relocation for its text section and
/// one per probe symbol its sites call, however many sites call it (two per site before).
#[test]
fn the_table_has_one_relocation_per_text_section_and_target() {
    require!("cc");
    let t = TempDir::new("table-relocs");
    for object in fentry_objects(t.path()) {
        let data = read(&object);
        let name = object.display().to_string();
        let rewritten = bootprof_link::rewrite_object(&data, &name).expect("rewrites");
        let sites = &rewritten.found.sites;
        assert!(
            sites
                .iter()
                .all(|s| !s.form.is_tail() && s.form != format::Form::Guard),
            "{name}: a tail site or guard (a target of its own): {sites:#?}"
        );
        let sections: BTreeSet<usize> = sites.iter().map(|s| s.section).collect();
        let symbols: BTreeSet<(usize, &[u8])> =
            sites.iter().map(|s| (s.section, s.symbol)).collect();
        let elf = Elf::parse(rewritten.bytes.clone().expect("a rewritten object"));
        let relocs: usize = elf
            .sections
            .iter()
            .filter(|s| {
                s.sh_type == SHT_RELA && elf.sections[s.info as usize].name == format::SECTION_NAME
            })
            .map(|s| (s.size / 24) as usize)
            .sum();
        assert_eq!(
            relocs,
            sections.len() + symbols.len(),
            "{name}: {} sites in {} text sections calling {} symbols",
            sites.len(),
            sections.len(),
            symbols.len()
        );
        assert!(
            relocs < 2 * sites.len(),
            "{name}: {relocs} relocations, {} sites",
            sites.len()
        );
    }
}

/// Rewrites the version 3 table at `table` (the bytes of a linked binary's `bootprof_sites`) into
/// the version 1 layout in place: each fragment's entries move up over its target block, their
/// site and target become distances from the field, their names' distances grow by the move; the
/// fragment keeps its size (the bytes left between entries and names are zero).
fn to_version_1(table: &mut [u8]) {
    let mut at = 0;
    while at + 4 <= table.len() {
        if u32le(table, at) == 0 {
            at += 4;
            continue;
        }
        let version = u16::from_le_bytes([table[at + 4], table[at + 5]]);
        assert_eq!(version, format::VERSION_3, "fragment at {at:#x}");
        let (count, size) = (u32le(table, at + 8), u32le(table, at + 12));
        let text = u32le(table, at + TEXT_FIELD) as i32 as i64 + TEXT_FIELD as i64;
        let targets = u32le(table, at + TEXT_FIELD + 4);
        let from = format::entries_at(targets);
        let moved = (from - HEADER_SIZE) as i64;
        let header = format::encode_header(format::VERSION_1, count, size);
        let mut entries = Vec::new();
        for i in 0..count as usize {
            let old = from + i * ENTRY_SIZE;
            let new = (HEADER_SIZE + i * ENTRY_SIZE) as i64;
            let mut e = table[at + old..at + old + ENTRY_SIZE].to_vec();
            let word = |e: &[u8], f: usize| u32le(e, f);
            let put = |e: &mut Vec<u8>, f: usize, v: i64| {
                e[f..f + 4].copy_from_slice(&(v as i32).to_le_bytes())
            };
            let site = text + i64::from(word(&e, field::SITE));
            let slot = TARGETS_AT + 4 * word(&e, field::TARGET) as usize;
            let target = slot as i64 + u32le(table, at + slot) as i32 as i64;
            put(&mut e, field::SITE, site - new - field::SITE as i64);
            put(&mut e, field::TARGET, target - new - field::TARGET as i64);
            for f in [
                field::PROVIDER,
                field::NAME,
                field::FUNCTION,
                field::DEMANGLED,
            ] {
                let d = word(&e, f) as i32 as i64;
                if d != 0 {
                    put(&mut e, f, d + moved);
                }
            }
            entries.extend_from_slice(&e);
        }
        let end = at + from + count as usize * ENTRY_SIZE;
        table[at..at + HEADER_SIZE].copy_from_slice(&header);
        table[at + HEADER_SIZE..end].fill(0);
        table[at + HEADER_SIZE..at + HEADER_SIZE + entries.len()].copy_from_slice(&entries);
        at += size as usize;
    }
}

/// `bootprof run --count --mode MODE -o DIR/MODE -- APP 9 3 7` (DIR: APP's directory), its
/// output with DIR taken out.
fn counts(app: &Path, mode: &str) -> String {
    let session = app.with_file_name(mode);
    let o = run(cmd(BOOTPROF, ["run", "--count", "--mode", mode, "-o"])
        .arg(&session)
        .arg("--")
        .arg(app)
        .args(["9", "3", "7"])
        .current_dir(app.parent().unwrap()));
    o.no_panic();
    let o = o.ok();
    let dir = app.parent().unwrap().display().to_string();
    format!("{}\n{}", o.stdout, o.stderr).replace(&dir, "DIR")
}

/// Binaries whose tables are of version 3 (wide entries, as bootprof-link wrote before version
/// 4) and of version 1 (made from the version 3 one) list the same sites and count the same hits
/// in trap and call mode (call mode goes through each site's target) as the version 4 table
/// bootprof-link writes.
#[test]
fn tables_of_versions_3_and_1_read_as_version_4() {
    require!("cc");
    let t = TempDir::new("table-v1");
    let objects = fentry_objects(t.path());
    let v4 = mkdir(t.join("v4")).join("app");
    run(cmd(link_bin(), ["cc".as_ref(), "-o".as_ref(), v4.as_os_str()]).args(&objects)).ok();
    let v3 = mkdir(t.join("v3")).join("app");
    let mut link_v3 = cmd(link_bin(), ["cc".as_ref(), "-o".as_ref(), v3.as_os_str()]);
    run(link_v3
        .env("BOOTPROF_LINK_TABLE_VERSION", "3")
        .args(&objects))
    .ok();
    let mut bytes = read(&v3);
    let elf = Elf::parse(bytes.clone());
    let table = elf.section("bootprof_sites").expect("a site table");
    let (start, end) = (table.offset as usize, (table.offset + table.size) as usize);
    to_version_1(&mut bytes[start..end]);
    let version = u16::from_le_bytes([bytes[start + 4], bytes[start + 5]]);
    assert_eq!(version, format::VERSION_1, "the first fragment's version");
    let v1 = mkdir(t.join("v1")).join("app");
    write(&v1, &bytes);
    std::fs::set_permissions(&v1, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let (new, _) = list(&v4);
    for old in [&v3, &v1] {
        let (old, out) = list(old);
        assert_eq!(old.sites, new.sites, "{}", out.stdout);
    }
    assert!(new.count >= 4 && new.nop_ok == new.count);
    let table_size = |exe: &Path| {
        Elf::parse(read(exe))
            .section("bootprof_sites")
            .unwrap()
            .size
    };
    assert!(table_size(&v4) < table_size(&v3), "compact entries");
    for mode in ["trap", "call"] {
        let counted = counts(&v4, mode);
        assert!(counted.contains("sort_longs"), "{mode}: {counted}");
        assert_eq!(counts(&v3, mode), counted, "{mode}");
        assert_eq!(counts(&v1, mode), counted, "{mode}");
    }
}

/// The check of a linked binary finds a site that lost its NOP wherever it is in the table and
/// names it (address, function and offset) as the listing does, which reads the same table
/// whole; the binary as linked passes.
#[test]
fn the_output_check_names_a_site_without_its_nop() {
    require!("cc");
    let t = TempDir::new("table-nop");
    let objects = fentry_objects(t.path());
    let app = t.join("app");
    run(cmd(link_bin(), ["cc".as_ref(), "-o".as_ref(), app.as_os_str()]).args(&objects)).ok();
    bootprof_link::check::check_output(&app, &app).expect("the linked binary holds every NOP");
    let (listing, _) = list(&app);
    assert!(listing.count >= 4, "{}", listing.out);
    for site in [&listing.sites[0], listing.sites.last().unwrap()] {
        let mut bytes = read(&app);
        // `call` with a zero displacement over the NOP.
        let at = site.file_offset as usize;
        bytes[at..at + site.len as usize].fill(0);
        bytes[at] = 0xe8;
        let broken = t.join("broken");
        write(&broken, &bytes);
        let err = bootprof_link::check::check_output(&broken, &app).unwrap_err();
        let expected = format!(
            "the site at {:#x} ({}+{:#x}) does not hold its NOP",
            site.address, site.function, site.func_offset
        );
        assert!(err.to_string().contains(&expected), "{err}\n{expected}");
        let (broken_listing, _) = list(&broken);
        assert_eq!(
            broken_listing.nop_ok,
            listing.count - 1,
            "{}",
            broken_listing.out
        );
    }
}
