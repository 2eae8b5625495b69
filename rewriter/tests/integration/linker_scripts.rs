//! `linker-scripts/`: a program with its own full linker script (-T) places the table by
//! INCLUDEing `bootprof-sites.inc`; bootprof-link then adds no script of its own. Both linkers.

use crate::util::{cmd, compile_c, have, link_bin, repo_root, run, write, TempDir, BOOTPROF};

#[test]
fn full_custom_script_includes_the_fragment() {
    let dir = TempDir::new("linker-script");
    let src = dir.join("m.c");
    write(
        &src,
        "#include <stdio.h>\n\
         extern void __dtrace_sdt_ls__hit(unsigned long);\n\
         extern long bootprof_hits(const char *);\n\
         int main(void) {\n\
           for (int i = 0; i < 3; i++) __dtrace_sdt_ls__hit(i);\n\
           printf(\"custom script ok, hits %ld\\n\", bootprof_hits(\"ls:*\"));\n\
           return 0;\n\
         }\n",
    );
    let obj = compile_c(&src, &dir.join("m.o"), &["-O1", "-fno-pie"]);
    // GNU ld's own default script for a non-PIE executable, with the fragment included after
    // .rodata: a stand-in for a program's hand-written script.
    let verbose = run(cmd("ld", ["--verbose"])).ok().stdout;
    let body: Vec<&str> = verbose
        .split("==================================================")
        .collect();
    assert!(body.len() >= 3, "ld --verbose printed no script");
    let script = body[1].replacen("  .rodata1", "  INCLUDE bootprof-sites.inc\n  .rodata1", 1);
    assert_ne!(script, body[1], "no .rodata1 line to insert after");
    let script_path = dir.join("full.ld");
    write(&script_path, script);
    let scripts = repo_root().join("linker-scripts");
    for ld in ["bfd", "lld"] {
        if ld == "lld" && !have("ld.lld") {
            eprintln!("skipped: ld.lld not found");
            continue;
        }
        let exe = dir.join(format!("m.{ld}"));
        let o = run(cmd(link_bin(), ["--verbose", "cc", "-no-pie"])
            .arg(format!("-fuse-ld={ld}"))
            .arg(format!("-L{}", scripts.display()))
            .arg(format!("-Wl,-T,{}", script_path.display()))
            .arg(&obj)
            .arg("-o")
            .arg(&exe))
        .ok();
        assert!(
            !o.stderr.contains("bootprof-sites.ld"),
            "added its own script: {}",
            o.stderr
        );
        assert_eq!(
            run(cmd(&exe, [] as [&str; 0])).ok().stdout,
            "custom script ok, hits 0\n"
        );
        let listed = run(cmd(BOOTPROF, ["list".as_ref(), exe.as_os_str()]))
            .ok()
            .stdout;
        assert!(
            listed.contains("3 sites, all hold their NOP"),
            "{ld}: {listed}"
        );
        // The runtime found the table through the fragment's bounds: enable works.
        let enabled = run(cmd(&exe, [] as [&str; 0]).env("BOOTPROF_ENABLE", "ls:*")).ok();
        assert_eq!(enabled.stdout, "custom script ok, hits 3\n");
    }
}
