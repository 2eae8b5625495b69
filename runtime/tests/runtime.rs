//! The runtime, tested in real programs: the C programs in `tests/runtime/` are compiled, linked
//! through `bootprof-link` (which links the runtime in) and run as child processes, since signal
//! handlers and code patching are process-global.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `bootprof-link` and the runtime library of this test's profile, built once.
fn tools() -> &'static PathBuf {
    static TOOLS: OnceLock<PathBuf> = OnceLock::new();
    TOOLS.get_or_init(|| {
        // target/<profile>/deps/runtime-<hash>: the profile directory is two levels up.
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
        let release = dir.file_name().is_some_and(|n| n == "release");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args([
            "build",
            "-q",
            "-p",
            "bootprof-link",
            "-p",
            "bootprof-runtime",
        ])
        .current_dir(root());
        if release {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("cargo build");
        assert!(
            st.success(),
            "building bootprof-link and the runtime failed"
        );
        dir
    })
}

/// The two ways `bootprof.h` compiles a probe: guards (the default: a NOP in line, the call out
/// of line) and plain calls in line (`-DBOOTPROF_CALL_SITES`). The tests of probes run both.
const FORMS: [(&str, &[&str]); 2] = [("guards", &[]), ("calls", &["-DBOOTPROF_CALL_SITES"])];

/// A test's scratch directory, and the C flags of the probe form it builds with.
struct Work(PathBuf, &'static [&'static str]);

impl Work {
    fn new(name: &str) -> Work {
        Work::with(name, &[])
    }

    fn with(name: &str, form: &'static [&'static str]) -> Work {
        let d = std::env::temp_dir().join(format!("bootprof-rt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Work(d, form)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Compiles `sources` (from tests/runtime, or absolute) with `cflags` and links them through
    /// bootprof-link with `ldflags` into `out`.
    fn build(&self, out: &str, sources: &[&str], cflags: &[&str], ldflags: &[&str]) -> PathBuf {
        let mut objs = Vec::new();
        for src in sources {
            let src = if Path::new(src).is_absolute() {
                PathBuf::from(src)
            } else {
                root().join("tests/runtime").join(src)
            };
            let obj = self.path(&format!("{}.o", src.file_stem().unwrap().to_str().unwrap()));
            let st = Command::new("cc")
                .args(["-O2", "-pthread", "-fPIC"])
                .args(self.1)
                .args(cflags)
                .arg("-I")
                .arg(root().join("runtime/include"))
                .arg("-c")
                .arg(&src)
                .arg("-o")
                .arg(&obj)
                .status()
                .unwrap();
            assert!(st.success(), "cc {}", src.display());
            objs.push(obj);
        }
        let exe = self.path(out);
        let o = Command::new(tools().join("bootprof-link"))
            .args(["cc", "-pthread", "-o"])
            .arg(&exe)
            .args(&objs)
            .args(ldflags)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "bootprof-link: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        exe
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn run(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env_remove("BOOTPROF_ENABLE")
        .env_remove("BOOTPROF_MODE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn ok(o: &Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "status {:?}\nstdout:\n{out}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
fn stress_enable_disable_while_threads_run_sites() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("stress-{form}"), flags);
        let exe = w.build("stress", &["stress.c"], &[], &[]);
        let out = ok(&run(&exe, &["3"], &[]));
        assert!(out.contains("text identical"), "{out}");
        eprintln!("{out}");
    }
}

#[test]
fn hits_in_signal_handler_new_thread_and_forked_child() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("contexts-{form}"), flags);
        let exe = w.build("contexts", &["contexts.c"], &[], &[]);
        assert!(ok(&run(&exe, &["trap"], &[])).contains("ok (trap mode)"));
        assert!(ok(&run(&exe, &["call"], &[])).contains("ok (call mode)"));
    }
}

#[test]
fn probe_arguments_and_live_registers_in_both_modes() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("args-{form}"), flags);
        let exe = w.build("args", &["args.c"], &[], &[]);
        for mode in ["trap", "call"] {
            let out = ok(&run(&exe, &[mode], &[]));
            assert!(out.contains(&format!("ok ({mode} mode)")), "{form}: {out}");
        }
    }
}

/// Tail sites (a probe as the last statement, compiled as a call: `jmp`; the exit hook of a
/// void -finstrument-functions function) leave no return address: in call mode each hit must
/// still go to its own site, as in trap mode.
#[test]
fn tail_sites_credit_each_hit_to_its_own_function() {
    let w = Work::new("tails");
    let exe = w.build(
        "tails",
        &["tails.c"],
        &["-DBOOTPROF_CALL_SITES", "-finstrument-functions"],
        &[],
    );
    // The sites must be tail jumps for the test to mean anything.
    let list = Command::new(tools().join("bootprof"))
        .args(["list"])
        .arg(&exe)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&list.stdout);
    for f in ["t_one", "t_two", "t_three", "v_one", "v_two", "v_three"] {
        assert!(
            listing
                .lines()
                .any(|l| l.contains(" jmp ") && l.contains(&format!(" {f}+"))),
            "{f} has no tail site:\n{listing}"
        );
    }
    for mode in ["trap", "call"] {
        let out = ok(&run(&exe, &[mode], &[]));
        assert!(out.contains(&format!("({mode} mode)")), "{out}");
    }
}

#[test]
fn bootprof_enable_applies_before_the_first_constructor() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("early-{form}"), flags);
        let exe = w.build("early", &["early.c"], &[], &[]);
        let seen = |env: &[(&str, &str)]| ok(&run(&exe, &[], env));
        assert!(seen(&[]).contains("constructor: 0"));
        assert!(seen(&[("BOOTPROF_ENABLE", "boot:*")]).contains("constructor: 1"));
        assert!(
            seen(&[("BOOTPROF_ENABLE", "boot:*"), ("BOOTPROF_MODE", "call")])
                .contains("constructor: 1")
        );
        // A malformed pattern is reported on stderr, and nothing is enabled; stdout stays clean.
        let o = run(&exe, &[], &[("BOOTPROF_ENABLE", "a*b")]);
        assert!(ok(&o).contains("constructor: 0"));
        assert!(String::from_utf8_lossy(&o.stderr).contains("bad pattern"));
    }
}

#[test]
fn bootprof_enable_is_ignored_in_secure_execution_mode() {
    // AT_SECURE is set when the effective user differs from the real one: a set-user-ID binary
    // owned by `nobody`, run by root.
    // SAFETY: getuid has no preconditions.
    if unsafe { libc_getuid() } != 0 {
        eprintln!("skipped: needs root to make a set-user-ID binary");
        return;
    }
    let w = Work::new("secure");
    let exe = w.build("early", &["early.c"], &[], &[]);
    // The binary must be reachable by `nobody`: copy it to a world-readable directory.
    let dir = std::env::temp_dir().join(format!("bootprof-rt-secure-bin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("early");
    std::fs::copy(&exe, &bin).unwrap();
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "chmod 755 {d} && chown nobody {b} && chmod 4755 {b}",
            d = dir.display(),
            b = bin.display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    let o = run(&bin, &[], &[("BOOTPROF_ENABLE", "boot:*")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        ok(&o).contains("constructor: 0"),
        "enabled despite AT_SECURE"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("secure-execution"));
}

extern "C" {
    #[link_name = "getuid"]
    fn libc_getuid() -> u32;
}

#[test]
fn sigtrap_that_is_not_ours_goes_to_the_previous_handler_or_the_default() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("chain-{form}"), flags);
        let exe = w.build("chain", &["chain.c"], &[], &[]);
        assert!(ok(&run(&exe, &["prev"], &[])).contains("chained"));
        let o = run(&exe, &[], &[]);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            o.status.signal(),
            Some(5),
            "the default action of SIGTRAP: {:?}",
            o.status
        );
    }
}

#[test]
fn patterns_notrace_and_disable_restore() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("select-{form}"), flags);
        let exe = w.build("select", &["select.c"], &[], &[]);
        let out = ok(&run(&exe, &[], &[]));
        assert!(out.contains("malformed: bad pattern `a*b`"), "{out}");
        assert!(out.contains("text identical after disable"));
    }
}

#[test]
fn text_writes_fall_back_to_proc_self_mem_and_fail_cleanly() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("textwrite-{form}"), flags);
        let exe = w.build("select", &["select.c"], &[], &[]);
        assert!(
            ok(&run(&exe, &[], &[("BOOTPROF_TEXT_WRITE", "procmem")])).contains("text identical")
        );
        let out = ok(&run(&exe, &["fail"], &[("BOOTPROF_TEXT_WRITE", "fail")]));
        assert!(out.contains("error: cannot write code at"), "{out}");
        assert!(out.contains("left the code untouched"));
    }
}

#[test]
fn shared_library_and_dlopen_register_their_tables() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("dso-{form}"), flags);
        let lib = w.build("libdsolib.so", &["dso_lib.c"], &[], &["-shared"]);
        let plugin = w.build("plugin.so", &["dso_plugin.c"], &[], &["-shared"]);
        let ld = format!("-Wl,-rpath,{}", w.0.display());
        let exe = w.build(
            "dso_main",
            &["dso_main.c"],
            &[],
            &[&format!("-L{}", w.0.display()), "-ldsolib", "-ldl", &ld],
        );
        assert!(lib.exists());
        let out = ok(&run(&exe, &[plugin.to_str().unwrap()], &[]));
        assert!(out.contains("ok"), "{out}");
    }
}

/// A generated `-pg -mfentry` program with many functions and named probes: every site enabled
/// and disabled in each mode leaves the code byte-identical to the file, and each enabled site
/// fires exactly as often as its function runs.
#[test]
fn large_program_all_sites_enabled_then_disabled() {
    const FUNCS: usize = 3000;
    for (form, flags) in FORMS {
        let w = Work::with(&format!("large-{form}"), flags);
        let mut c = format!(
            "#include \"check.h\"\n#include \"bootprof.h\"\n#include <time.h>\n#define FUNCS {FUNCS}\n\
             static long hits;\nstatic void count(const struct bootprof_hit *h, void *c) {{ (void)h; (void)c; hits++; }}\n",
        );
        for i in 0..FUNCS {
            c.push_str(&format!(
                "__attribute__((noinline)) long f{i}(long x) {{ {} return x * {} + {i}; }}\n",
                if i % 4 == 0 {
                    format!("BOOTPROF_PROBE(gen, p{i}, x);")
                } else {
                    String::new()
                },
                i % 7 + 1
            ));
        }
        c.push_str("typedef long (*fn_t)(long);\nstatic fn_t table[] = {");
        for i in 0..FUNCS {
            c.push_str(&format!("f{i},"));
        }
        c.push_str(
            "};\n\
             static long run_all(void) { long s = 0; for (unsigned i = 0; i < sizeof table / sizeof *table; i++) s += table[i](i); return s; }\n\
             static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }\n\
             int main(void) {\n\
               long want = run_all();\n\
               CHECK(bootprof_add_handler(\"*\", count, 0) >= 0, \"handler\");\n\
               for (int mode = 1; mode <= 2; mode++) {\n\
                 double t0 = now();\n\
                 int n = bootprof_enable_mode(\"f*\", mode);\n\
                 n += bootprof_enable_mode(\"gen:*\", mode);\n\
                 double t1 = now();\n\
                 CHECK(n == FUNCS + FUNCS / 4 * PER_PROBE, \"enabled %d sites\", n);\n\
                 hits = 0;\n\
                 CHECK(run_all() == want, \"results changed when enabled\");\n\
                 CHECK(hits == FUNCS + FUNCS / 4, \"mode %d: %ld hits for %d sites\", mode, hits, n);\n\
                 double t2 = now();\n\
                 CHECK(bootprof_disable(\"*\") == n, \"disable\");\n\
                 double t3 = now();\n\
                 struct text_cmp t = text_vs_file();\n\
                 CHECK(t.differing == 0, \"mode %d: %ld bytes differ after disable\", mode, t.differing);\n\
                 printf(\"mode %d: %d sites, enable %.0f sites/s, disable %.0f sites/s\\n\", mode, n, n / (t1 - t0), n / (t3 - t2));\n\
               }\n\
               CHECK(run_all() == want, \"results changed after disable\");\n\
               return 0;\n\
             }\n",
        );
        let src = w.path("large.c");
        std::fs::write(&src, c).unwrap();
        let exe = w.build(
            "large",
            &[src.to_str().unwrap()],
            &[
                "-O1",
                "-pg",
                "-mfentry",
                "-I",
                &root().join("tests/runtime").display().to_string(),
            ],
            &[],
        );
        let out = ok(&run(&exe, &[], &[]));
        eprintln!("{out}");
        assert_eq!(out.lines().count(), 2, "{out}");
    }
}

#[test]
fn hooks_give_function_and_parent_without_reentry_for_fentry_and_mcount() {
    let w = Work::new("hooks");
    for (name, flags) in [
        ("fentry", &["-O1", "-pg", "-mfentry"][..]),
        ("mcount", &["-O1", "-pg"][..]),
    ] {
        let exe = w.build(name, &["hooks.c"], flags, &[]);
        for mode in ["trap", "call"] {
            let out = ok(&run(&exe, &[mode], &[]));
            assert!(out.contains("ok"), "{name} {mode}: {out}");
        }
    }
}

#[test]
fn c_program_linking_the_shared_runtime_library_itself() {
    let w = Work::new("shared-runtime");
    let lib_dir = tools().clone();
    assert!(
        lib_dir.join("libbootprof_runtime.so").is_file(),
        "no libbootprof_runtime.so"
    );
    let rpath = format!("-Wl,-rpath,{}", lib_dir.display());
    let libs = format!("-L{}", lib_dir.display());
    // --no-runtime: the program brings the runtime itself, as a shared library.
    let exe = {
        let obj = w.path("early.o");
        let st = Command::new("cc")
            .args(["-O2", "-c", "-I"])
            .arg(root().join("runtime/include"))
            .arg(root().join("tests/runtime/early.c"))
            .arg("-o")
            .arg(&obj)
            .status()
            .unwrap();
        assert!(st.success());
        let exe = w.path("early");
        let o = Command::new(lib_dir.join("bootprof-link"))
            .args(["--no-runtime", "cc", "-o"])
            .arg(&exe)
            .arg(&obj)
            .args([libs.as_str(), "-lbootprof_runtime", rpath.as_str()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        exe
    };
    assert!(ok(&run(&exe, &[], &[("BOOTPROF_ENABLE", "boot:*")])).contains("constructor: 1"));
}

/// A trace file, decoded with the format crate (the reports have their own reader; this one
/// checks the recorder against the format's definition).
struct Trace {
    header: bootprof_format::trace::TraceHeader,
    /// (provider, name, function) per site.
    sites: Vec<(String, String, String)>,
    records: Vec<bootprof_format::trace::Record>,
}

fn read_trace(path: &Path) -> Trace {
    use bootprof_format::trace::*;
    let d = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header = TraceHeader::decode(&d).unwrap();
    assert_eq!(
        header.file_size(),
        Some(d.len() as u64),
        "size implied by the header"
    );
    let mut off = HEADER_SIZE;
    let entries: Vec<SiteEntry> = (0..header.sites as usize)
        .map(|i| SiteEntry::decode(d[off + i * SITE_SIZE..][..SITE_SIZE].try_into().unwrap()))
        .collect();
    off += header.sites as usize * SITE_SIZE + header.threads as usize * THREAD_SIZE;
    let pool = &d[off..off + header.strings as usize];
    off += header.strings as usize;
    let s = |o: u32| -> String {
        if o == NONE {
            return String::new();
        }
        let rest = &pool[o as usize..];
        String::from_utf8_lossy(&rest[..rest.iter().position(|&b| b == 0).unwrap()]).into_owned()
    };
    let sites = entries
        .iter()
        .map(|e| (s(e.provider), s(e.name), s(e.function)))
        .collect();
    let records = (0..header.records as usize)
        .map(|i| {
            Record::decode(
                d[off + i * RECORD_SIZE..][..RECORD_SIZE]
                    .try_into()
                    .unwrap(),
            )
            .unwrap()
        })
        .collect();
    Trace {
        header,
        sites,
        records,
    }
}

#[test]
fn boot_example_phases_have_their_durations_in_the_trace() {
    use bootprof_format::trace::RecordKind;
    let w = Work::new("boot");
    let exe = w.build(
        "boot",
        &[root().join("examples/boot/main.c").to_str().unwrap()],
        &[],
        &[],
    );
    let trace_path = w.path("boot.trace");
    let o = Command::new(tools().join("bootprof"))
        .args(["run", "--points", "-o"])
        .arg(&trace_path)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(ok(&o).contains("booted with 3 settings"));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("parse_config"),
        "points table on stderr"
    );
    let t = read_trace(&trace_path);
    assert_eq!(t.header.dropped, 0);
    assert!(
        t.header.tsc_hz > 100_000_000,
        "TSC frequency {}",
        t.header.tsc_hz
    );
    let ms = |ticks: u64| ticks as f64 * 1e3 / t.header.tsc_hz as f64;
    // ENTER/EXIT pairs of each annotated function (one thread each here).
    let mut open: std::collections::HashMap<String, u64> = Default::default();
    let mut took: std::collections::HashMap<String, f64> = Default::default();
    let (mut wait, mut hold) = (None, None);
    for r in &t.records {
        let (provider, name, function) = &t.sites[r.site as usize];
        match r.kind {
            RecordKind::Enter => drop(open.insert(function.clone(), r.tsc)),
            RecordKind::Exit => {
                let start = open.remove(function).expect("EXIT without ENTER");
                took.insert(function.clone(), ms(r.tsc - start));
            }
            RecordKind::Wait => wait = Some(r.tsc),
            RecordKind::Unwait => wait = wait.map(|w| r.tsc - w),
            RecordKind::Hold => hold = Some(r.tsc),
            RecordKind::Release => hold = hold.map(|h| r.tsc - h),
            _ => assert!(matches!(
                (provider.as_str(), name.as_str()),
                ("bpevent", "booted") | ("bpthread", _)
            )),
        }
    }
    // Sleeps are lower bounds; a loaded machine may add, never take away.
    for (f, want) in [
        ("early_init", 20.0),
        ("parse_config", 30.0),
        ("warm_cache", 60.0),
        ("delay", 40.0),
    ] {
        let got = took[f];
        assert!(
            got >= want && got < want + 100.0,
            "{f}: {got:.2} ms, want about {want}"
        );
    }
    let (wait, hold) = (ms(wait.unwrap()), ms(hold.unwrap()));
    assert!(
        wait >= 55.0 && hold >= 60.0 && (wait - hold).abs() < 20.0,
        "wait {wait:.2} ms, hold {hold:.2} ms"
    );
    assert!(took["main"] >= 130.0, "main {}", took["main"]);

    // notrace wins over the default "enable everything": an annotated function left out.
    let o = Command::new(tools().join("bootprof"))
        .args(["run", "-x", "delay", "-o"])
        .arg(&trace_path)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    ok(&o);
    let t = read_trace(&trace_path);
    assert!(t
        .records
        .iter()
        .all(|r| t.sites[r.site as usize].2 != "delay"));
    assert!(t
        .records
        .iter()
        .any(|r| t.sites[r.site as usize].2 == "parse_config"));
}

#[test]
fn full_buffer_keeps_the_start_and_counts_the_drops() {
    use bootprof_format::trace::RecordKind;
    let w = Work::new("flood");
    let exe = w.build("flood", &["flood.c"], &[], &[]);
    let trace_path = w.path("flood.trace");
    let o = run(
        &exe,
        &[],
        &[
            ("BOOTPROF_ENABLE", "flood:*"),
            ("BOOTPROF_OUTPUT", trace_path.to_str().unwrap()),
            ("BOOTPROF_BUFFER", "1000"),
        ],
    );
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("4000 dropped"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let t = read_trace(&trace_path);
    assert_eq!((t.header.records, t.header.dropped), (1000, 4000));
    let args: Vec<u64> = t
        .records
        .iter()
        .filter(|r| r.kind == RecordKind::Event)
        .map(|r| r.arg)
        .collect();
    assert_eq!(
        args,
        (0..1000).collect::<Vec<u64>>(),
        "the first 1000 events, in order"
    );
}

/// The files the runtime creates: a trace dumped into a directory where symlinks were planted
/// under the old temporary name, the trace's name and the stats file's name writes through none
/// of them (the victim keeps its bytes), replaces the planted trace symlink with a file of its
/// own, readable by its user only, and leaves no temporary behind.
#[test]
fn dump_and_stats_never_write_through_a_planted_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let w = Work::new("planted");
    let exe = w.build("planted", &["planted.c"], &[], &[]);
    let dir = w.path("shared");
    std::fs::create_dir(&dir).unwrap();
    let trace_path = dir.join("boot.trace");
    let stats = dir.join("stats");
    let victim = w.path("victim");
    std::fs::write(&victim, b"precious\n").unwrap();
    let o = run(
        &exe,
        &[
            trace_path.to_str().unwrap(),
            victim.to_str().unwrap(),
            stats.to_str().unwrap(),
        ],
        &[
            ("BOOTPROF_ENABLE", "planted:*"),
            ("BOOTPROF_OUTPUT", trace_path.to_str().unwrap()),
            ("BOOTPROF_STATS", stats.to_str().unwrap()),
        ],
    );
    let out = ok(&o);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n", "{out}");
    let meta = std::fs::symlink_metadata(&trace_path).unwrap();
    assert!(meta.file_type().is_file(), "{meta:?}");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(read_trace(&trace_path).header.records, 100);
    // The stats file is the planted symlink still: it was not written through.
    assert!(std::fs::symlink_metadata(&stats)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot append to"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let old_tmp = out.trim().rsplit('/').next().unwrap().to_string();
    let mut expected = vec!["boot.trace".to_string(), old_tmp, "stats".into()];
    expected.sort();
    assert_eq!(left, expected);
}

#[test]
fn dump_on_a_signal_while_running() {
    let w = Work::new("sigdump");
    let exe = w.build("flood", &["flood.c"], &[], &[]);
    let trace_path = w.path("sig.trace");
    let o = run(
        &exe,
        &[trace_path.to_str().unwrap()],
        &[
            ("BOOTPROF_ENABLE", "flood:*"),
            ("BOOTPROF_RECORD", "1"),
            ("BOOTPROF_OUTPUT", trace_path.to_str().unwrap()),
            ("BOOTPROF_DUMP_SIGNAL", "USR2"),
        ],
    );
    assert!(ok(&o).contains("dumped on signal"));
    // The dump at exit replaced the one made on the signal: all 5000 events.
    assert_eq!(read_trace(&trace_path).header.records, 5000);
}

/// The function tracer against an outside opinion: for the same `-pg -mfentry` run, every
/// function entry bootprof records matches uftrace's, in order, with the same caller.
#[test]
fn function_trace_matches_uftrace_call_for_call() {
    use bootprof_format::trace::RecordKind;
    if Command::new("uftrace").arg("--version").output().is_err() {
        eprintln!("skipped: uftrace not found");
        return;
    }
    let w = Work::new("uftrace");
    let flags = ["-O0", "-pg", "-mfentry"];
    let ours = w.build("calls", &["calls.c"], &flags, &[]);
    // uftrace's run: the same object linked plainly (uftrace provides __fentry__ itself).
    let obj = w.path("calls.o");
    let plain = w.path("calls-plain");
    let st = Command::new("cc")
        .args(["-pg", "-o"])
        .arg(&plain)
        .arg(&obj)
        .status()
        .unwrap();
    assert!(st.success());
    let data = w.path("uftrace.data");
    let o = Command::new("uftrace")
        .arg("record")
        .arg("-d")
        .arg(&data)
        .arg(&plain)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "uftrace record: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dump = Command::new("uftrace")
        .arg("dump")
        .arg("-d")
        .arg(&data)
        .arg("--no-libcall")
        .output()
        .unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout);
    // "[entry] compute(55...) depth: 1": the caller is the innermost open entry.
    let mut theirs = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    for line in dump.lines() {
        let Some(rest) = line.split("] ").nth(1) else {
            continue;
        };
        let name = rest.split('(').next().unwrap().to_string();
        if line.contains("[entry]") {
            theirs.push((name.clone(), stack.last().cloned().unwrap_or_default()));
            stack.push(name);
        } else if line.contains("[exit ]") {
            stack.pop();
        }
    }
    assert!(
        theirs.len() > 20,
        "uftrace saw {} entries:\n{dump}",
        theirs.len()
    );

    let trace_path = w.path("calls.trace");
    let o = Command::new(tools().join("bootprof"))
        .args(["run", "-o"])
        .arg(&trace_path)
        .arg("--")
        .arg(&ours)
        .output()
        .unwrap();
    assert!(ok(&o).contains("sum:"));
    let t = read_trace(&trace_path);
    // Function start addresses from the table, to name the function a parent address is in.
    let d = std::fs::read(&trace_path).unwrap();
    let mut starts: Vec<(u64, String)> = (0..t.header.sites as usize)
        .map(|i| {
            let off = bootprof_format::trace::HEADER_SIZE + i * bootprof_format::trace::SITE_SIZE;
            let e = bootprof_format::trace::SiteEntry::decode(d[off..off + 32].try_into().unwrap());
            (e.address - u64::from(e.func_offset), t.sites[i].2.clone())
        })
        .collect();
    starts.sort();
    let caller_of = |parent: u64| -> String {
        match starts.partition_point(|(a, _)| *a <= parent) {
            0 => String::new(),
            i => {
                let (start, name) = &starts[i - 1];
                // Beyond the traced functions (libc's start-up code): no traced caller.
                if parent - start < 4096 && !name.is_empty() {
                    name.clone()
                } else {
                    String::new()
                }
            }
        }
    };
    let mine: Vec<(String, String)> = t
        .records
        .iter()
        .filter(|r| r.kind == RecordKind::Enter)
        .map(|r| (t.sites[r.site as usize].2.clone(), caller_of(r.arg)))
        .collect();
    assert_eq!(mine, theirs, "bootprof (left) and uftrace (right) disagree");
}

#[test]
fn stats_file_gets_one_line_per_process_with_its_hits() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("stats-{form}"), flags);
        let exe = w.build("flood", &["flood.c"], &[], &[]);
        let stats = w.path("stats");
        let s = stats.to_str().unwrap();
        ok(&run(&exe, &[], &[("BOOTPROF_STATS", s)]));
        for mode in ["trap", "call"] {
            let env = [
                ("BOOTPROF_STATS", s),
                ("BOOTPROF_ENABLE", "flood:*"),
                ("BOOTPROF_MODE", mode),
            ];
            ok(&run(&exe, &[], &env));
        }
        let text = std::fs::read_to_string(&stats).unwrap();
        let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(rows.len(), 3, "{text}");
        // One probe: a guard and its call, or the call alone.
        let sites = if flags.is_empty() { "2" } else { "1" };
        for (row, (enabled, hits)) in
            rows.iter()
                .zip([("0", "0"), (sites, "5000"), (sites, "5000")])
        {
            assert_eq!(row.len(), 7, "{text}");
            assert!(row[1].ends_with("/flood"), "{text}");
            assert_eq!((row[2], row[3], row[4]), (sites, enabled, hits), "{text}");
        }
        assert_eq!((rows[1][5], rows[1][6]), ("tick", "5000"), "{text}");
        // A file that cannot be opened: the program still succeeds, and stderr names the file.
        let bad = w.path("no-such-dir/stats");
        let o = run(&exe, &[], &[("BOOTPROF_STATS", bad.to_str().unwrap())]);
        ok(&o);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("cannot append to") && err.contains("no-such-dir/stats"),
            "{err}"
        );
    }
}
