//! The command-line contract of DESIGN.md: both invocation forms, options from the environment,
//! `@file` response files, pass-through of non-link and probe-free commands, failing links (the
//! driver's exit code and stderr, the old output kept), and `bootprof list`'s text and JSON forms.

use crate::elf::Elf;
use crate::json::list;
use crate::util::{
    cmd, compile_c, compile_case, link_bin, mkdir, read, require, run, source_dir, write, Out,
    TempDir, BOOTPROF,
};
use std::path::{Path, PathBuf};

const MULTI: &str = "probes-multi-tu";
const MULTI_FILES: &[&str] = &["main.c", "util.c", "stats.c"];
const MULTI_ARGS: &[&str] = &["alpha", "beta", "gamma", "delta"];

/// `bootprof-link cc -o out objects...`, requiring success.
fn link_explicit(out: &Path, objects: &[PathBuf]) -> Out {
    let o = run(cmd(link_bin(), ["cc".as_ref(), "-o".as_ref(), out.as_os_str()]).args(objects));
    o.no_panic();
    o.ok()
}

fn run_multi(program: &Path) -> Out {
    run(&mut cmd(program, MULTI_ARGS))
}

#[test]
fn version_passes_through() {
    require!("cc");
    let plain = run(&mut cmd("cc", ["--version"]));
    let ours = run(&mut cmd(link_bin(), ["cc", "--version"]));
    ours.no_panic();
    assert_eq!(ours.code, plain.code, "{ours}");
    assert_eq!(ours.stdout, plain.stdout, "{ours}");
}

#[test]
fn relocatable_link_passes_through() {
    require!("cc");
    let t = TempDir::new("dash-r");
    let objects = compile_case(MULTI, &["util.c", "stats.c"], t.path());
    let ours = t.join("ours.o");
    let o = run(cmd(
        link_bin(),
        [
            "cc".as_ref(),
            "-r".as_ref(),
            "-o".as_ref(),
            ours.as_os_str(),
        ],
    )
    .args(&objects));
    o.no_panic();
    o.ok();
    let elf = Elf::open(&ours);
    assert!(
        elf.section("bootprof_sites").is_none(),
        "-r output has a bootprof_sites section"
    );
    let before: usize = objects
        .iter()
        .map(|o| Elf::open(o).probe_relas().len())
        .sum();
    assert!(before > 0);
    assert_eq!(
        elf.probe_relas().len(),
        before,
        "relocations against probe symbols in the -r output"
    );
    // Pass-through means cc ran with the same arguments: the same bytes as cc's own -r.
    let theirs = t.join("theirs.o");
    run(cmd("cc", ["-r".as_ref(), "-o".as_ref(), theirs.as_os_str()]).args(&objects)).ok();
    assert!(read(&ours) == read(&theirs), "-r output differs from cc -r");
}

#[test]
fn probe_free_link_passes_through() {
    require!("cc");
    let t = TempDir::new("probe-free");
    let src = t.join("hello.c");
    write(
        &src,
        "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 3; }\n",
    );
    let object = compile_c(&src, &t.join("hello.o"), &["-O2"]);
    let out = t.join("app");
    run(cmd(
        "cc",
        ["-o".as_ref(), out.as_os_str(), object.as_os_str()],
    ))
    .ok();
    let plain = read(&out);
    link_explicit(&out, &[object]);
    assert!(
        read(&out) == plain,
        "a link without probes is not cc's own link"
    );
    assert_eq!(run(&mut cmd(&out, [""; 0])).code, Some(3));
}

/// A configure-style link that fails (undefined symbol): cc's exit code and its linker's message
/// pass through, and an existing output is left as it was. With and without probes in the inputs.
#[test]
fn failing_link_passes_exit_code_and_keeps_output() {
    require!("cc");
    let t = TempDir::new("undefined");
    let sources = [
        (
            "conftest",
            "int missing_function(void);\nint main(void) { return missing_function(); }\n",
        ),
        (
            "probed",
            "extern void __dtrace_sdt_conf__test(unsigned long);\nint missing_function(void);\n\
             int main(void) { __dtrace_sdt_conf__test(1); return missing_function(); }\n",
        ),
    ];
    for (name, text) in sources {
        let src = t.join(format!("{name}.c"));
        write(&src, text);
        let object = compile_c(&src, &t.join(format!("{name}.o")), &[]);
        let plain = run(cmd("cc", ["-o".as_ref(), t.join("plain").as_os_str()]).arg(&object));
        assert_ne!(plain.code, Some(0));

        let out = t.join(format!("{name}-app"));
        write(&out, "the previous output\n");
        let o = run(cmd(link_bin(), ["cc".as_ref(), "-o".as_ref(), out.as_os_str()]).arg(&object));
        o.no_panic();
        assert_eq!(
            o.code, plain.code,
            "{name}: exit code differs from cc's:{o}"
        );
        assert!(
            o.stderr.contains("undefined reference") && o.stderr.contains("missing_function"),
            "{name}: the linker's message is not passed on:{o}"
        );
        assert_eq!(
            read(&out),
            b"the previous output\n",
            "{name}: the old output was touched"
        );
    }
}

/// A link over an existing output puts the new program in its place and leaves nothing else
/// behind: no temporary beside the output when bootprof-link exits, and no private directory in
/// `$TMPDIR` once the process that removes it after the link has ended; with `--no-fork`, none
/// when bootprof-link exits.
#[test]
fn relinking_replaces_the_output_and_leaves_nothing_behind() {
    require!("cc");
    let t = TempDir::new("relink");
    let objects = compile_case(MULTI, MULTI_FILES, t.path());
    let (bin, tmp) = (t.join("bin"), t.join("tmp"));
    mkdir(&bin);
    mkdir(&tmp);
    let out = bin.join("app");
    write(&out, "the previous output\n");
    for (round, no_fork) in [(0, false), (1, false), (2, true), (3, true)] {
        let mut link = cmd(link_bin(), [] as [&std::ffi::OsStr; 0]);
        if no_fork {
            link.arg("--no-fork");
        }
        let o = run(link
            .args(["cc".as_ref(), "-o".as_ref(), out.as_os_str()])
            .args(&objects)
            .env("TMPDIR", &tmp));
        o.no_panic();
        o.ok();
        let listed = |dir: &Path| -> Vec<_> {
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect()
        };
        assert_eq!(listed(&bin), ["app"], "round {round}: beside the output");
        // Removed after bootprof-link's exit: a few milliseconds, ten seconds on a loaded machine.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !no_fork && !listed(&tmp).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(listed(&tmp).is_empty(), "round {round}: left in TMPDIR");
        let ran = run_multi(&out);
        assert!(ran.stdout.contains("words 4"), "round {round}:{ran}");
    }
}

/// The drop-in form (driver from $BOOTPROF_CC, default cc) links the same program as the
/// explicit form; options come from $BOOTPROF_LINK_FLAGS.
#[test]
fn drop_in_form_and_link_flags_from_env() {
    require!("cc");
    let t = TempDir::new("drop-in");
    let objects = compile_case(MULTI, MULTI_FILES, t.path());
    let explicit = t.join("explicit");
    link_explicit(&explicit, &objects);
    let (want, _) = list(&explicit);
    let want_run = run_multi(&explicit);

    for (env_cc, name) in [(Some("cc"), "with-env"), (None, "default-cc")] {
        let out = t.join(name);
        let mut c = cmd(link_bin(), ["-o".as_ref(), out.as_os_str()]);
        c.args(&objects).env_remove("BOOTPROF_LINK_FLAGS");
        match env_cc {
            Some(cc) => c.env("BOOTPROF_CC", cc),
            None => c.env_remove("BOOTPROF_CC"),
        };
        let o = run(&mut c);
        o.no_panic();
        o.ok();
        let (got, _) = list(&out);
        assert_eq!(got.identities(), want.identities(), "{name}: sites");
        let ran = run_multi(&out);
        assert_eq!(
            (ran.stdout, ran.code),
            (want_run.stdout.clone(), want_run.code)
        );
    }

    let out = t.join("stats");
    let o = run(cmd(link_bin(), ["-o".as_ref(), out.as_os_str()])
        .args(&objects)
        .env("BOOTPROF_CC", "cc")
        .env("BOOTPROF_LINK_FLAGS", " --stats "));
    o.no_panic();
    let o = o.ok();
    let line = o
        .stderr
        .lines()
        .find(|l| l.starts_with("bootprof-link: stats: "))
        .unwrap_or_else(|| panic!("no stats line:{o}"));
    let field = |k: &str| -> String {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k}= in `{line}`"))
            .to_string()
    };
    assert_eq!(field("objects"), "3", "{line}");
    assert_eq!(field("archives"), "0", "{line}");
    assert_eq!(field("sites"), want.count.to_string(), "{line}");
    for k in ["relocations", "scan_ms", "link_ms", "total_ms"] {
        field(k)
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{k} in `{line}`"));
    }
}

/// Objects named in an `@file` with GNU quoting (double quotes, single quotes, backslash escapes),
/// from a directory whose name has a space in it.
#[test]
fn response_file_with_quoted_paths() {
    require!("cc");
    let t = TempDir::new("response-file");
    let spaced = mkdir(t.join("dir with space"));
    let objects = compile_case(MULTI, MULTI_FILES, &spaced);
    let direct = t.join("direct");
    link_explicit(&direct, &objects);
    let (want, _) = list(&direct);

    let path = |o: &PathBuf| o.display().to_string();
    let rsp = t.join("objects.rsp");
    write(
        &rsp,
        format!(
            "\"{}\"\n'{}'\n{}\n",
            path(&objects[0]),
            path(&objects[1]),
            path(&objects[2]).replace(' ', "\\ ")
        ),
    );
    let out = t.join("via-rsp");
    let o = run(
        cmd(link_bin(), ["cc".as_ref(), "-o".as_ref(), out.as_os_str()])
            .arg(format!("@{}", rsp.display())),
    );
    o.no_panic();
    o.ok();
    let (got, _) = list(&out);
    assert_eq!(
        got.identities(),
        want.identities(),
        "sites via the response file"
    );
    assert!(got.count > 0);
    let (a, b) = (run_multi(&direct), run_multi(&out));
    assert_eq!((a.stdout, a.code), (b.stdout, b.code));
}

/// `--verbose` names the relocations against probe symbols that are not sites.
#[test]
fn verbose_reports_every_site_of_a_program() {
    require!("cc");
    let t = TempDir::new("verbose");
    let object = compile_c(
        &source_dir("address-taken").join("main.c"),
        &t.join("direct.o"),
        &["-O2"],
    );
    let out = t.join("app");
    let o = run(cmd(
        link_bin(),
        [
            "--verbose".as_ref(),
            "cc".as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
        ],
    )
    .arg(&object));
    o.no_panic();
    let o = o.ok();
    for symbol in ["__dtrace_sdt_app__x", "__dtrace_sdt_app__y"] {
        assert!(
            o.stderr
                .lines()
                .any(|l| l.contains(symbol) && l.contains("direct.o") && l.contains("probe")),
            "--verbose does not report the site calling {symbol}:{o}"
        );
    }
}

/// `--keep-temps` keeps the directory of rewritten inputs and prints where it is.
#[test]
fn keep_temps_prints_an_existing_directory() {
    require!("cc");
    let t = TempDir::new("keep-temps");
    let objects = compile_case(MULTI, &["util.c"], t.path());
    let main = compile_c(&source_dir(MULTI).join("main.c"), &t.join("main.o"), &[]);
    let stats = compile_c(&source_dir(MULTI).join("stats.c"), &t.join("stats.o"), &[]);
    let out = t.join("app");
    let o = run(cmd(
        link_bin(),
        [
            "--keep-temps".as_ref(),
            "cc".as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
        ],
    )
    .arg(&main)
    .args(&objects)
    .arg(&stats));
    o.no_panic();
    let o = o.ok();
    let kept: Vec<PathBuf> = format!("{}\n{}", o.stdout, o.stderr)
        .split(|c: char| c.is_whitespace() || c == '`' || c == '\'' || c == '"')
        .filter(|w| w.starts_with('/'))
        .map(|w| PathBuf::from(w.trim_end_matches([':', ',', '.'])))
        .filter(|p| p.is_dir() && !p.starts_with(t.path()))
        .collect();
    assert!(!kept.is_empty(), "no kept directory printed:{o}");
    for dir in kept {
        assert!(
            dir.join("bootprof-stubs.o").is_file(),
            "{}: the kept directory lost its files:{o}",
            dir.display()
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// `bootprof list` text form: one line per site sorted by address, with the documented fields,
/// then the summary; it agrees with the JSON form.
#[test]
fn list_text_agrees_with_json() {
    require!("cc");
    let t = TempDir::new("list-text");
    let objects = compile_case(MULTI, MULTI_FILES, t.path());
    let app = t.join("app");
    link_explicit(&app, &objects);
    let (json, _) = list(&app);
    let o = run(cmd(BOOTPROF, ["list".as_ref(), app.as_os_str()]));
    o.no_panic();
    let o = o.ok();
    let lines: Vec<&str> = o.stdout.lines().collect();
    let (summary, sites) = lines.split_last().expect("no output");
    assert_eq!(
        *summary,
        format!("{} sites, all hold their NOP", json.count),
        "summary:{o}"
    );
    assert_eq!(sites.len() as u64, json.count, "one line per site:{o}");
    let mut by_address = json.sites.clone();
    by_address.sort_by_key(|s| s.address);
    for (line, site) in sites.iter().zip(&by_address) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            f.len(),
            7,
            "ADDRESS FILE_OFFSET KIND FORM PROBE FUNCTION+OFF STATE: `{line}`"
        );
        let num = |s: &str| {
            let s = s.trim_start_matches("0x");
            u64::from_str_radix(s, 16).unwrap_or_else(|_| panic!("not hex: `{s}` in `{line}`"))
        };
        assert_eq!(num(f[0]), site.address, "`{line}` vs {site:?}");
        assert_eq!(num(f[1]), site.file_offset, "`{line}` vs {site:?}");
        assert_eq!(f[2], site.kind, "`{line}`");
        assert_eq!(f[3], site.form, "`{line}`");
        let probe = match &site.provider {
            Some(p) => format!("{p}:{}", site.name),
            None => "-".to_string(),
        };
        assert_eq!(f[4], probe, "`{line}`");
        assert!(
            f[5].starts_with(&format!("{}+", site.function)),
            "`{line}` vs {site:?}"
        );
        assert_eq!(f[6], "nop", "`{line}`");
    }
}

/// A site whose bytes are not its NOP (here an int3 written over the first one) is reported: BAD
/// in the text, `nop: false` in JSON, exit 1.
#[test]
fn list_reports_a_site_without_its_nop() {
    require!("cc");
    let t = TempDir::new("list-bad");
    let objects = compile_case(MULTI, MULTI_FILES, t.path());
    let app = t.join("app");
    link_explicit(&app, &objects);
    let (json, _) = list(&app);
    let victim = json
        .sites
        .iter()
        .min_by_key(|s| s.address)
        .expect("no sites")
        .clone();
    let mut bytes = read(&app);
    bytes[victim.file_offset as usize] = 0xcc;
    let patched = t.join("patched");
    write(&patched, bytes);

    let (after, out) = list(&patched);
    assert_eq!(
        out.code,
        Some(1),
        "bootprof list --json of a patched binary:{out}"
    );
    assert_eq!(after.count, json.count);
    assert_eq!(after.nop_ok, json.count - 1, "{}", after.out);
    let bad: Vec<_> = after.sites.iter().filter(|s| !s.nop).collect();
    assert_eq!(bad.len(), 1, "{}", after.out);
    assert_eq!(bad[0].address, victim.address);

    let o = run(cmd(BOOTPROF, ["list".as_ref(), patched.as_os_str()]));
    o.no_panic();
    assert_eq!(o.code, Some(1), "{o}");
    assert!(
        o.stdout.lines().filter(|l| l.ends_with(" BAD")).count() == 1,
        "{o}"
    );
    assert_eq!(
        o.stdout.lines().last(),
        Some(format!("{} sites, 1 do not hold their NOP", json.count).as_str()),
        "{o}"
    );
}

/// Regression (found by the link benchmark): a program that defines a probe function itself had
/// its calls rewritten by the default gather but not after a partial link, where the calls bind
/// to the definition. Both modes must find the same sites and run the same.
#[test]
fn both_gather_modes_rewrite_calls_to_probes_the_program_defines() {
    let dir = TempDir::new("defined-probes");
    write(
        dir.join("a.c"),
        "#include <stdio.h>\n\
         void __dtrace_sdt_app__x(unsigned long);\n\
         int __dtrace_isenabled_app__x(void);\n\
         int main(void) { for (int i = 0; i < 3; i++) if (!__dtrace_isenabled_app__x()) __dtrace_sdt_app__x(i); puts(\"ok\"); return 0; }\n",
    );
    write(
        dir.join("p.c"),
        "#include <stdio.h>\n\
         void __dtrace_sdt_app__x(unsigned long v) { printf(\"probe fn %lu\\n\", v); }\n\
         int __dtrace_isenabled_app__x(void) { return 0; }\n",
    );
    let objects = vec![
        compile_c(&dir.join("a.c"), &dir.join("a.o"), &["-O2"]),
        compile_c(&dir.join("p.c"), &dir.join("p.o"), &["-O2"]),
    ];
    let mut listed = Vec::new();
    for mode in ["", "--partial-link"] {
        let out = dir.join(format!("t{mode}"));
        let mut c = cmd(link_bin(), [] as [&str; 0]);
        if !mode.is_empty() {
            c.arg(mode);
        }
        run(c.arg("cc").arg("-o").arg(&out).args(&objects)).ok();
        assert_eq!(
            run(cmd(&out, [] as [&str; 0])).ok().stdout,
            "ok\n",
            "{mode}"
        );
        let text = run(cmd(BOOTPROF, ["list".as_ref(), out.as_os_str()]))
            .ok()
            .stdout;
        listed.push(text.lines().last().unwrap_or_default().to_string());
    }
    assert_eq!(listed[0], "2 sites, all hold their NOP");
    assert_eq!(listed[0], listed[1], "default and --partial-link disagree");
}

/// `-static-pie` (the runtime inside, probes enabled from the environment) and `-nostdlib` (no
/// C library: with `--no-runtime`, which such a link needs, the stubs alone) both link and
/// run.
#[test]
fn static_pie_and_nostdlib_links() {
    let dir = TempDir::new("static-pie-nostdlib");
    write(
        dir.join("a.c"),
        "#include <stdio.h>\n\
         void __dtrace_sdt_sp__hit(unsigned long);\n\
         long bootprof_hits(const char *);\n\
         int main(void) { __dtrace_sdt_sp__hit(1); printf(\"hits %ld\\n\", bootprof_hits(\"sp:*\")); return 0; }\n",
    );
    let obj = compile_c(&dir.join("a.c"), &dir.join("a.o"), &["-O2", "-fPIE"]);
    let exe = dir.join("sp");
    run(cmd(link_bin(), ["cc", "-static-pie", "-o"])
        .arg(&exe)
        .arg(&obj))
    .ok();
    let file = run(cmd("file", [exe.as_os_str()])).ok().stdout;
    assert!(file.contains("static-pie"), "{file}");
    assert_eq!(run(cmd(&exe, [] as [&str; 0])).ok().stdout, "hits 0\n");
    let enabled = run(cmd(&exe, [] as [&str; 0]).env("BOOTPROF_ENABLE", "sp:*")).ok();
    assert_eq!(enabled.stdout, "hits 1\n");

    write(
        dir.join("n.c"),
        "void __dtrace_sdt_bare__start(unsigned long);\n\
         void _start(void) {\n\
           __dtrace_sdt_bare__start(1);\n\
           __asm__ volatile(\"mov $60, %eax; mov $7, %edi; syscall\");\n\
         }\n",
    );
    let obj = compile_c(&dir.join("n.c"), &dir.join("n.o"), &["-O2", "-fno-pie"]);
    let exe = dir.join("bare");
    run(cmd(
        link_bin(),
        [
            "--no-runtime",
            "cc",
            "-nostdlib",
            "-static",
            "-no-pie",
            "-o",
        ],
    )
    .arg(&exe)
    .arg(&obj))
    .ok();
    assert_eq!(run(cmd(&exe, [] as [&str; 0])).code, Some(7));
    let listed = run(cmd(BOOTPROF, ["list".as_ref(), exe.as_os_str()]))
        .ok()
        .stdout;
    assert!(
        listed.ends_with("1 sites, all hold their NOP\n"),
        "{listed}"
    );
}

/// `-v` alone asks the driver for its version: passed through untouched.
#[test]
fn verbose_flag_alone_passes_through() {
    let theirs = run(cmd("cc", ["-v"]));
    let ours = run(cmd(link_bin(), ["cc", "-v"]));
    assert_eq!(ours.code, theirs.code);
    assert_eq!(ours.stderr, theirs.stderr);
}

/// `-pg` on the link line: bootprof's hooks replace glibc's, so its profiling start-up (gcrt1.o,
/// gmon) never comes in: the program has no `__monstartup` and writes no gmon.out.
#[test]
fn pg_on_the_link_line_brings_no_gmon() {
    require!("cc", "nm");
    let t = TempDir::new("no-gmon");
    let src = t.join("hooked.c");
    write(
        &src,
        "#include <stdio.h>\n\
         __attribute__((noinline)) static int f(int x) { return x + 1; }\n\
         int main(void) { printf(\"%d\\n\", f(41)); return 0; }\n",
    );
    for hooks in [&["-pg"][..], &["-pg", "-mfentry"]] {
        let object = compile_c(&src, &t.join("hooked.o"), &[&["-O2"][..], hooks].concat());
        let app = t.join("app");
        run(cmd(link_bin(), ["cc"])
            .args(hooks)
            .arg(&object)
            .arg("-o")
            .arg(&app))
        .ok();
        let symbols = crate::util::nm(&app);
        assert!(
            !symbols
                .iter()
                .any(|(_, n)| n.contains("monstartup") || n.contains("mcleanup")),
            "{hooks:?}: gmon's start-up is in the program: {symbols:?}"
        );
        let ran = run(cmd(&app, [""; 0]).current_dir(t.path())).ok();
        assert_eq!(ran.stdout, "42\n");
        assert!(
            !t.join("gmon.out").exists(),
            "{hooks:?}: the program wrote gmon.out"
        );
    }
}

/// `BOOTPROF_RUNTIME` naming no file is a usage error that says so and what to do, before
/// anything is linked: the previous output stays as it was.
#[test]
fn a_runtime_that_is_not_a_file_is_refused() {
    require!("cc");
    let t = TempDir::new("no-runtime-file");
    let objects = compile_case(MULTI, MULTI_FILES, t.path());
    let out = t.join("app");
    write(&out, "the previous output\n");
    let missing = t.join("nowhere/libbootprof_runtime_c.a");
    let o = run(
        cmd(link_bin(), ["cc".as_ref(), "-o".as_ref(), out.as_os_str()])
            .args(&objects)
            .env("BOOTPROF_RUNTIME", &missing),
    );
    o.no_panic();
    assert_ne!(o.code, Some(0), "{o}");
    assert!(
        o.stderr.contains(&format!(
            "BOOTPROF_RUNTIME names {}, which is not a file: point it at a runtime archive \
             (libbootprof_runtime_c.a) or object, or unset it to link the runtime bootprof-link \
             carries",
            missing.display()
        )),
        "{o}"
    );
    assert_eq!(read(&out), b"the previous output\n");
}
