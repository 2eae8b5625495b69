//! The runtime, tested in real programs: the C programs in `tests/runtime/` are compiled, linked
//! through `bootprof-link` (which links the runtime in) and run as child processes, since signal
//! handlers and code patching are process-global.

use bootprof_format::Nops;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

// More tests, in files of their own (the C programs they run are in `tests/runtime/`).
#[path = "runtime/attach.rs"]
mod attach;
#[path = "runtime/count.rs"]
mod count;
#[path = "runtime/filter.rs"]
mod filter;
#[path = "runtime/graph.rs"]
mod graph;
#[path = "runtime/grow.rs"]
mod grow;
#[path = "runtime/latency.rs"]
mod latency;
#[path = "runtime/names.rs"]
mod names;
#[path = "runtime/paths.rs"]
mod paths;
#[path = "runtime/perfetto.rs"]
mod perfetto;
#[path = "runtime/scale.rs"]
mod scale;
#[path = "runtime/shared.rs"]
mod shared;
#[path = "runtime/stacks.rs"]
mod stacks;
#[path = "runtime/tables.rs"]
mod tables;

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
            "-p",
            "bootprof",
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
        self.build_with(out, sources, cflags, ldflags, &[])
    }

    /// [`Work::build`], bootprof-link run with the variables `env` added.
    fn build_with(
        &self,
        out: &str,
        sources: &[&str],
        cflags: &[&str],
        ldflags: &[&str],
        env: &[(&str, &str)],
    ) -> PathBuf {
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
            .envs(env.iter().copied())
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

impl Work {
    /// Compiles the C++ program `source` (in tests/runtime) with `c++ FLAGS` and links it
    /// through bootprof-link into `out`.
    fn build_cxx(&self, out: &str, source: &str, flags: &[&str]) -> PathBuf {
        let obj = self.path(&format!("{out}.o"));
        let st = Command::new("c++")
            .args(flags)
            .arg("-c")
            .arg(root().join("tests/runtime").join(source))
            .arg("-o")
            .arg(&obj)
            .status()
            .unwrap();
        assert!(st.success(), "c++ {source}");
        let exe = self.path(out);
        let o = Command::new(tools().join("bootprof-link"))
            .args(["c++", "-o"])
            .arg(&exe)
            .arg(&obj)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
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
        .env_remove("BOOTPROF_STACKTRACE")
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

/// `bootprof report --format FORMAT SESSION`'s output (it must succeed).
fn report_of(session: &Path, format: &str) -> String {
    ok(&Command::new(tools().join("bootprof"))
        .args(["report", "--format", format])
        .arg(session)
        .output()
        .unwrap())
}

/// `bootprof list EXE`: the site table of a linked program, as text.
fn site_listing(exe: &Path) -> String {
    let list = Command::new(tools().join("bootprof"))
        .arg("list")
        .arg(exe)
        .output()
        .unwrap();
    String::from_utf8_lossy(&list.stdout).into_owned()
}

/// Also: an is-enabled site whose NOP is one instruction keeps call mode when enabled while other
/// threads run; in a table written before version 3 (`xor` and a NOP) it gets trap mode's int3
/// instead, and disabling puts that NOP back (the text ends identical to the file).
#[test]
fn stress_enable_disable_while_threads_run_sites() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("stress-{form}"), flags);
        let exe = w.build("stress", &["stress.c"], &[], &[]);
        let out = ok(&run(&exe, &["3", "call"], &[]));
        assert!(out.contains("text identical"), "{out}");
        eprintln!("{out}");
        if flags.is_empty() {
            continue; // guards are one instruction in every version
        }
        // Version 2's layout is version 3's: a version 3 table with version 2's NOPs.
        let v3 = w.build_with("stress-v3", &["stress.c"], &[], &[], &[V3]);
        let old = exe.with_file_name("stress-v2");
        assert!(with_table_version(&v3, &old, bootprof_format::VERSION_2, Nops::Xor) > 0);
        let out = ok(&run(&old, &["3", "trap"], &[]));
        assert!(out.contains("text identical"), "{out}");
        eprintln!("version 2: {out}");
    }
}

/// What makes bootprof-link write tables of version 3, the layout of versions 2 and 3.
const V3: (&str, &str) = ("BOOTPROF_LINK_TABLE_VERSION", "3");

/// Copies the linked program `exe` to `to` with its site table as a bootprof-link writing tables
/// of `version` would have left it: each fragment's header says `version`, and each site whose
/// NOP differs under `nops` (version 2's, say) holds that NOP. Returns how many sites changed.
/// The layout stays: `exe`'s table is of version 3 for an older `version`.
fn with_table_version(exe: &Path, to: &Path, version: u16, nops: Nops) -> usize {
    use bootprof_format::{disabled_bytes, HEADER_SIZE, SECTION_NAME, VERSION, VERSION_3};
    use object::{Object, ObjectSection};
    use std::os::unix::fs::PermissionsExt;
    let mut data = std::fs::read(exe).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let file_offset = |addr: u64| {
        let s = elf
            .sections()
            .find(|s| s.address() <= addr && addr < s.address() + s.size())
            .unwrap();
        (s.file_range().unwrap().0 + (addr - s.address())) as usize
    };
    let table = elf.section_by_name(SECTION_NAME).unwrap();
    let (table_at, bytes) = (file_offset(table.address()), table.data().unwrap().to_vec());
    let mut writes = Vec::new();
    for site in bootprof_format::sites(&bytes, table.address()) {
        let site = site.unwrap();
        let (now, then) = (
            site.place().nop(),
            disabled_bytes(site.kind, site.form, nops),
        );
        if now != then {
            writes.push((file_offset(site.site), then[..site.form.len()].to_vec()));
        }
    }
    let changed = writes.len();
    // The fragments, one after another (zero words between them skipped, as readers do).
    let mut at = 0;
    while at + HEADER_SIZE <= bytes.len() {
        let word = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
        if word(at) == 0 {
            at += 4;
            continue;
        }
        let was = u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]);
        assert_eq!(
            was,
            if version < VERSION {
                VERSION_3
            } else {
                VERSION
            }
        );
        writes.push((table_at + at + 4, version.to_le_bytes().to_vec()));
        at += word(at + 12) as usize;
    }
    drop(elf);
    for (offset, new) in writes {
        data[offset..offset + new.len()].copy_from_slice(&new);
    }
    std::fs::write(to, &data).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
    changed
}

/// A site table of a version this runtime does not know (a newer bootprof-link wrote it) is
/// ignored with a note that names the version, and the program runs with nothing enabled.
#[test]
fn a_site_table_of_an_unknown_version_is_ignored_with_its_reason() {
    let w = Work::new("future-table");
    let exe = w.build("early", &["early.c"], &[], &[]);
    let future = exe.with_file_name("early-future");
    let version = bootprof_format::VERSION + 1;
    assert_eq!(with_table_version(&exe, &future, version, Nops::Mov), 0);
    let o = run(&future, &[], &[("BOOTPROF_ENABLE", "boot:*")]);
    assert!(ok(&o).contains("constructor: 0"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("bootprof: ignoring the site table at 0x")
            && stderr.contains(&format!("has unknown version {version}")),
        "{stderr}"
    );
}

/// An entry of a loaded site table that cannot be read (its slot pointer between two slots) ends
/// the reading of that table with a note naming the entry; the sites read before it are kept and
/// enabled, the rest are not. (Probes as calls in line: one entry each, in text order.)
#[test]
fn a_bad_entry_keeps_the_sites_before_it_and_is_named() {
    use bootprof_format::{compact, name_of, Name, SECTION_NAME};
    use object::{Object, ObjectSection};
    use std::os::unix::fs::PermissionsExt;
    let w = Work::with("bad-entry", &["-DBOOTPROF_CALL_SITES"]);
    let exe = w.build("ordered", &["ordered.c"], &[], &[]);
    let both = ok(&run(&exe, &[], &[("BOOTPROF_ENABLE", "order:*")]));
    assert!(both.contains("first 1 second 1"), "{both}");
    // order:second's entry: its offset in the table and in the file.
    let mut data = std::fs::read(&exe).unwrap();
    let (entry, at) = {
        let elf = object::File::parse(&*data).unwrap();
        let table = elf.section_by_name(SECTION_NAME).unwrap();
        let (bytes, base) = (table.data().unwrap(), table.address());
        let mut sites = bootprof_format::sites(bytes, base);
        let named_second = |core: &bootprof_format::SiteCore| {
            let name = name_of(bytes, base, core.entry, core.layout, Name::Probe);
            name.is_some_and(|a| bytes[(a - base) as usize..].starts_with(b"second\0"))
        };
        let core = std::iter::from_fn(|| sites.next_core())
            .map(Result::unwrap)
            .find(named_second)
            .expect("order:second has an entry");
        (
            core.entry,
            table.file_range().unwrap().0 as usize + core.entry,
        )
    };
    // Its slot pointer moved by 4 bytes: between two slots.
    let slot = at + compact::SLOT;
    let d = i32::from_le_bytes(data[slot..slot + 4].try_into().unwrap()) + 4;
    data[slot..slot + 4].copy_from_slice(&d.to_le_bytes());
    let broken = exe.with_file_name("ordered-broken");
    std::fs::write(&broken, &data).unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = run(&broken, &[], &[("BOOTPROF_ENABLE", "order:*")]);
    assert!(ok(&o).contains("first 1 second 0"), "{}", ok(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("bootprof: ignoring the site table at 0x")
            && stderr.contains(&format!("site table entry at offset {entry:#x} is invalid")),
        "{stderr}"
    );
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
    let listing = site_listing(&exe);
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

/// A copy of `exe`, owned by `nobody` and set-user-ID, in a directory of its own that `nobody`
/// can reach (`bootprof-rt-NAME-bin-PID` in the temporary directory, made anew): run by root, it
/// runs in secure-execution mode (AT_SECURE: the effective user differs from the real one).
/// Returns the directory and the copy.
fn set_user_id_copy(exe: &Path, name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("bootprof-rt-{name}-bin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join(exe.file_name().unwrap());
    std::fs::copy(exe, &bin).unwrap();
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
    (dir, bin)
}

#[test]
fn bootprof_enable_is_ignored_in_secure_execution_mode() {
    // AT_SECURE is set when the effective user differs from the real one: a set-user-ID binary
    // owned by `nobody`, run by root.
    if !as_root("make a set-user-ID binary") {
        return;
    }
    let w = Work::new("secure");
    let exe = w.build("early", &["early.c"], &[], &[]);
    let (dir, bin) = set_user_id_copy(&exe, "secure");
    let o = run(&bin, &[], &[("BOOTPROF_ENABLE", "boot:*")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        ok(&o).contains("constructor: 0"),
        "enabled despite AT_SECURE"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("secure-execution"));
}

/// A program carrying the lean runtime loads nothing in secure-execution mode: started
/// set-user-ID with `BOOTPROF_ENABLE` and a `BOOTPROF_LIBRARY` (whose constructor would say it
/// ran), it says on stderr that the variables are ignored, the library is not loaded, and
/// nothing is traced.
#[test]
fn the_lean_runtime_loads_no_library_in_secure_execution_mode() {
    if !as_root("make a set-user-ID binary") {
        return;
    }
    let w = Work::new("secure-lean");
    let src = w.path("hello.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint main(void) { puts(\"ran\"); return 0; }\n",
    )
    .unwrap();
    let exe = w.build("hello", &[src.to_str().unwrap()], &["-pg", "-mfentry"], &[]);
    let library = w.path("libloud.so");
    let loud = w.path("loud.c");
    std::fs::write(
        &loud,
        "#include <unistd.h>\n__attribute__((constructor)) static void said(void) \
         { write(2, \"LOADED\\n\", 7); }\n",
    )
    .unwrap();
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&loud)
        .status()
        .unwrap();
    assert!(st.success());
    let (dir, bin) = set_user_id_copy(&exe, "secure-lean");
    // Where `nobody` may write: a trace would be written there if anything were traced.
    let traces = dir.join("traces");
    std::fs::create_dir(&traces).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&traces, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let trace = traces.join("hello.trace");
    let o = run(
        &bin,
        &[],
        &[
            ("BOOTPROF_ENABLE", "*"),
            ("BOOTPROF_LIBRARY", library.to_str().unwrap()),
            ("BOOTPROF_OUTPUT", trace.to_str().unwrap()),
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let traced = trace.exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(ok(&o), "ran\n");
    assert!(
        stderr.contains("the runtime library is not loaded in secure-execution mode")
            && !stderr.contains("LOADED"),
        "{stderr}"
    );
    assert!(!traced, "a trace was written");
}

extern "C" {
    #[link_name = "getuid"]
    fn libc_getuid() -> u32;
}

/// Whether the tests run as root; if not, says that the test, which needs root `to`, is skipped.
fn as_root(to: &str) -> bool {
    // SAFETY: getuid has no preconditions.
    let root = unsafe { libc_getuid() } == 0;
    if !root {
        eprintln!("skipped: needs root to {to}");
    }
    root
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

/// Every site of a program of 8,000 functions, 500 KB of code, enabled in call mode while it has
/// one thread: the runs of pages holding sites are moved whole (copied into anonymous memory and
/// put in place of the file's pages), the program computes the same and every site hits, and
/// disabling gives back the file's bytes; the same when every site is enabled from the
/// environment as the program starts (`BOOTPROF_ENABLE='*'`, as `bootprof run` does). Not moved:
/// with `BOOTPROF_TEXT_WRITE=inplace`, a run with a page written before (as a debugger's
/// breakpoint writes one), pages moved before (the second round), and while another thread runs.
#[test]
fn large_runs_of_code_moved_whole_only_when_alone_and_unwritten() {
    const FUNCS: usize = 8000;
    let w = Work::new("moved");
    let mut h = format!("#define FUNCS {FUNCS}\n");
    for i in 0..FUNCS {
        h.push_str(&format!(
            "__attribute__((noinline)) long f{i}(long x) {{ return x * {} + {i}; }}\n",
            i % 7 + 2
        ));
    }
    h.push_str("static long (*const table[])(long) = {");
    for i in 0..FUNCS {
        h.push_str(&format!("f{i},"));
    }
    h.push_str("};\n");
    std::fs::write(w.path("moved_funcs.h"), h).unwrap();
    let include = w.0.display().to_string();
    let flags = [
        "-O1",
        "-pg",
        "-mfentry",
        "-falign-functions=64",
        "-I",
        &include,
    ];
    let exe = w.build("moved", &["moved.c"], &flags, &[]);
    let rounds = |how: &str, env: &[(&str, &str)]| -> Vec<(u64, bool)> {
        let out = ok(&run(&exe, &[how], env));
        out.lines()
            .map(|l| {
                let moved = l.split(' ').nth(3).and_then(|n| n.parse().ok());
                (moved.expect(&out), l.ends_with("middle moved"))
            })
            .collect()
    };
    let fresh = rounds("fresh", &[]);
    assert!(
        fresh[0].0 >= 64 * 4096 && fresh[0].1,
        "moved at the first enable: {fresh:?}"
    );
    assert_eq!(fresh[1], (0, true), "the second round: pages moved stay");
    let kept = [(0, false), (0, false)];
    assert_eq!(rounds("fresh", &[("BOOTPROF_TEXT_WRITE", "inplace")]), kept);
    assert_eq!(rounds("thread", &[]), kept);
    let written = rounds("written", &[]);
    eprintln!("fresh {fresh:?}, written {written:?}");
    assert!(!written[0].1, "the written page's run moved: {written:?}");
    let at_start = [("BOOTPROF_ENABLE", "*"), ("BOOTPROF_MODE", "call")];
    let started = ok(&run(&exe, &["started"], &at_start));
    assert_eq!(started.trim(), "started: middle moved");
    let in_place = [at_start[0], at_start[1], ("BOOTPROF_TEXT_WRITE", "inplace")];
    let started = ok(&run(&exe, &["started"], &in_place));
    assert_eq!(started.trim(), "started: middle named");
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
    // The runtime as a shared library of the program's own: made from the object bootprof-link
    // carries (`--print-runtime`), its entry points exported.
    let lib_dir = w.path("lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    let object = Command::new(tools().join("bootprof-link"))
        .arg("--print-runtime")
        .output()
        .unwrap();
    let object = String::from_utf8(object.stdout).unwrap();
    let st = Command::new("cc")
        .args(["-shared", "-o"])
        .arg(lib_dir.join("libbootprof_runtime.so"))
        .arg(object.trim())
        .arg("-Wl,--export-dynamic-symbol=bootprof_*")
        .status()
        .unwrap();
    assert!(st.success());
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
        let o = Command::new(tools().join("bootprof-link"))
            .args(["--no-runtime", "cc", "-o"])
            .arg(&exe)
            .arg(&obj)
            .args([libs.as_str(), "-lbootprof_runtime", rpath.as_str()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        exe
    };
    // Without cargo's LD_LIBRARY_PATH, which the loader searches before the rpath: a
    // libbootprof_runtime.so of another build in the target directory would be loaded instead.
    let o = Command::new(&exe)
        .env_remove("LD_LIBRARY_PATH")
        .env("BOOTPROF_ENABLE", "boot:*")
        .output()
        .unwrap();
    let out = ok(&o);
    assert!(out.contains("constructor: 1"), "{out}");
}

/// A trace file, decoded with the format crate (the reports have their own reader; this one
/// checks the recorder against the format's definition).
#[derive(Debug)]
struct Trace {
    header: bootprof_format::trace::TraceHeader,
    /// (provider, name, function) per site.
    sites: Vec<(String, String, String)>,
    /// Start address of each site's function.
    starts: Vec<u64>,
    records: Vec<bootprof_format::trace::Record>,
}

fn read_trace(path: &Path) -> Trace {
    use bootprof_format::trace::*;
    if path.is_dir() {
        return read_session(path);
    }
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
    let starts = entries
        .iter()
        .map(|e| e.address - u64::from(e.func_offset))
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
        starts,
        records,
    }
}

/// A session directory of one process, read straight from `bootprof_format::lane` (the lane's
/// sites in id order; records sorted by time, their `site` an index into those sites).
fn read_session(dir: &Path) -> Trace {
    use bootprof_format::lane::*;
    use bootprof_format::trace::*;
    let lanes = lanes_of(dir);
    assert_eq!(
        lanes.len(),
        1,
        "one process in {}: {lanes:?}",
        dir.display()
    );
    let d = std::fs::read(&lanes[0]).unwrap();
    let h = LaneHeader::decode(&d).unwrap();
    let chunks = &d[LANE_HEADER_SIZE..LANE_HEADER_SIZE + h.claimed as usize * CHUNK_SIZE];
    let mut sites = std::collections::BTreeMap::new();
    let mut raw = Vec::new();
    let mut k = 0;
    while k < h.claimed as usize {
        let c = &chunks[k * CHUNK_SIZE..][..CHUNK_SIZE];
        match chunk(c) {
            Chunk::Meta { len } => {
                let mut blob = &chunks[k * CHUNK_SIZE + CHUNK_HEADER_SIZE..][..len as usize];
                while let Some((m, n)) = Meta::decode(blob) {
                    // A table in an object file linked into the session: its bytes from there.
                    let linked;
                    let m = match m {
                        Meta::TableFile {
                            len, offset, name, ..
                        } => {
                            let file =
                                std::fs::read(dir.join(String::from_utf8_lossy(name).as_ref()));
                            linked = file.unwrap();
                            m.with_table(&linked[offset as usize..(offset + len) as usize])
                        }
                        m => m,
                    };
                    for site in m.sites() {
                        let Meta::Site {
                            id,
                            provider,
                            name,
                            function,
                            address,
                            func_offset,
                            ..
                        } = site
                        else {
                            unreachable!("sites() yields site entries");
                        };
                        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                        let start = address - u64::from(func_offset);
                        sites.insert(id, ((s(provider), s(name), s(function)), start));
                    }
                    blob = &blob[n..];
                }
                assert!(blob.is_empty(), "whole metadata entries");
                k += meta_chunks(len) as usize;
                continue;
            }
            Chunk::Data {
                tid, base, slots, ..
            } => {
                let stats = slot_records(base, slots, |r| raw.push((tid, r)));
                assert_eq!((stats.torn, stats.bad), (0, 0));
            }
            other => assert_eq!(other, Chunk::Empty),
        }
        k += 1;
    }
    let index: std::collections::HashMap<u32, u32> = sites
        .keys()
        .enumerate()
        .map(|(i, id)| (*id, i as u32))
        .collect();
    let tsc_hz = std::fs::read(dir.join("session"))
        .ok()
        .and_then(|b| SessionHeader::decode(&b).ok())
        .map_or(0, |s| {
            ((s.end.0 - s.start.0) as u128 * 1_000_000_000 / u128::from(s.end.1 - s.start.1)) as u64
        });
    let mut records: Vec<Record> = raw
        .into_iter()
        .map(|(tid, r)| Record {
            tsc: r.tsc,
            arg: r.arg,
            tid,
            site: index[&r.site],
            kind: r.kind,
        })
        .collect();
    records.sort_by_key(|r| r.tsc);
    Trace {
        header: TraceHeader {
            pid: h.pid,
            sites: sites.len() as u32,
            records: records.len() as u64,
            dropped: h.dropped,
            start_tsc: h.start_tsc,
            tsc_hz,
            ..TraceHeader::default()
        },
        starts: sites.values().map(|s| s.1).collect(),
        sites: sites.into_values().map(|s| s.0).collect(),
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
    let trace_path = w.path("boot-notrace.trace");
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
    let mut starts: Vec<(u64, String)> = (0..t.sites.len())
        .map(|i| (t.starts[i], t.sites[i].2.clone()))
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

/// Runs `command` under `bootprof run -o SESSION` with extra `env`; returns the session read
/// back by the report crate and the run's output.
fn session_of(
    w: &Work,
    name: &str,
    command: &[&str],
    env: &[(&str, &str)],
) -> (bootprof_report::Trace, Output) {
    let dir = w.path(name);
    let mut cmd = Command::new(tools().join("bootprof"));
    cmd.arg("run")
        .arg("-o")
        .arg(&dir)
        .arg("--")
        .args(command)
        .current_dir(&w.0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    let t = bootprof_report::read_trace(&dir)
        .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&o.stderr)));
    (t, o)
}

/// The (first) lane file of the session in `dir`.
fn lane_file(dir: &Path) -> PathBuf {
    lanes_of(dir).swap_remove(0)
}

/// The lane files of the session `dir`, by name.
fn lanes_of(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "lane"))
        .collect();
    v.sort();
    v
}

/// Per process of a session: its records of site `name`, in order, as their arguments.
fn args_by_process(t: &bootprof_report::Trace, name: &str) -> Vec<Vec<u64>> {
    let mut out = vec![Vec::new(); t.processes.len()];
    for r in t.records.iter() {
        if t.sites[r.site as usize].name == name {
            let (p, _) = t
                .process_of(r.tid)
                .expect("a session's thread has a process");
            out[p].push(r.arg);
        }
    }
    out
}

/// However a process ends, every record it made is in its lane, and the session says how it
/// ended: as `bootprof run` (its parent, a subreaper) saw it, and, under a shell that reaps it
/// instead, as the process saw it itself (its exit status, or the fatal signal its handler
/// caught; `_exit` and SIGKILL leave no word, and say so).
#[test]
fn every_ending_leaves_every_record_in_the_session() {
    use bootprof_report::session::Ending::{self, *};
    let w = Work::new("endings");
    w.build("endings", &["endings.c"], &[], &[]);
    let cases: [(&str, Ending, Ending); 10] = [
        ("exit", Exit(3), Exit(3)),
        ("thread-exit", Exit(4), Exit(4)),
        ("_exit", Exit(5), Vanished),
        ("abort", Signal(6), Signal(6)),
        ("segv", Signal(11), Signal(11)),
        ("bus", Signal(7), Signal(7)),
        ("ill", Signal(4), Signal(4)),
        ("fpe", Signal(8), Signal(8)),
        ("kill", Signal(9), Vanished),
        ("exec-other", Exit(0), Vanished),
    ];
    for (how, direct, under_shell) in cases {
        let shell = format!("./endings {how} 1000; true");
        for (label, command, want) in [
            ("direct", vec!["./endings", how, "1000"], direct),
            ("shell", vec!["sh", "-c", shell.as_str()], under_shell),
        ] {
            let (t, o) = session_of(&w, &format!("{how}-{label}"), &command, &[]);
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                t.processes.len(),
                1,
                "{how} {label}: {:?}\n{stderr}",
                t.processes
            );
            let p = &t.processes[0];
            assert_eq!(p.ending, want, "{how} {label}\n{stderr}");
            assert_eq!(
                (p.records, p.dropped, p.torn, p.damaged),
                (1000, 0, 0, 0),
                "{how} {label}"
            );
            assert_eq!(
                args_by_process(&t, "tick")[0],
                (0..1000).collect::<Vec<u64>>(),
                "{how} {label}"
            );
            assert!(p.exe.ends_with("/endings"), "{}", p.exe);
        }
    }
    // exec of a program that carries the runtime: a second lane of the same pid.
    let (t, _) = session_of(
        &w,
        "exec-self",
        &["./endings", "exec-self", "1000", "7"],
        &[],
    );
    let got: Vec<(u32, Ending, u64)> = t
        .processes
        .iter()
        .map(|p| (p.pid, p.ending, p.records))
        .collect();
    let pid = t.processes[0].pid;
    assert_eq!(got, [(pid, Exec, 1000), (pid, Exit(0), 7)]);
}

/// A process the OOM killer ends (in a memory cgroup of its own) keeps its records. Needs a
/// writable memory cgroup (v1 or v2), as root has; says so and checks nothing without one.
#[test]
fn the_oom_killer_leaves_every_record_in_the_session() {
    use bootprof_report::session::Ending;
    let name = format!("bootprof-oom-{}", std::process::id());
    let groups = [
        (
            format!("/sys/fs/cgroup/memory/{name}"),
            "memory.limit_in_bytes",
        ),
        (format!("/sys/fs/cgroup/{name}"), "memory.max"),
        (format!("/sys/fs/cgroup/unified/{name}"), "memory.max"),
    ];
    let Some((group, _)) = groups.iter().find(|(g, limit)| {
        std::fs::create_dir(g).is_ok()
            && (std::fs::write(format!("{g}/{limit}"), "67108864").is_ok()
                || std::fs::remove_dir(g).is_err())
    }) else {
        eprintln!("the_oom_killer_leaves_every_record_in_the_session: no writable memory cgroup here; not checked");
        return;
    };
    let _ = std::fs::write(format!("{group}/memory.swappiness"), "0");
    let w = Work::new("oom");
    w.build("endings", &["endings.c"], &[], &[]);
    let join = format!("echo $$ > {group}/cgroup.procs && exec ./endings oom 5000");
    let (t, _) = session_of(&w, "oom", &["sh", "-c", &join], &[]);
    let events = std::fs::read_to_string(format!("{group}/memory.events"))
        .or_else(|_| std::fs::read_to_string(format!("{group}/memory.oom_control")))
        .unwrap_or_default();
    let _ = std::fs::remove_dir(group);
    assert!(
        events.contains("oom_kill 1"),
        "the OOM killer ended it: {events}"
    );
    let p = &t.processes[0];
    assert_eq!((p.ending, p.records), (Ending::Signal(9), 5000));
}

/// A shell running three programs, one of which forks twice: one session, a lane per process
/// with its own records (a fork child's named through its parent's sites), parents right.
#[test]
fn a_shell_and_a_forking_program_record_into_one_session() {
    let w = Work::new("tree");
    w.build("endings", &["endings.c"], &[], &[]);
    w.build("forks", &["forks.c"], &[], &[]);
    let script = "./endings exit 100 7; ./endings exit 200 8; ./forks";
    let (t, o) = session_of(&w, "tree", &["sh", "-c", script], &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("5 processes recorded"));
    let mut got: Vec<(String, u64, String)> = t
        .processes
        .iter()
        .map(|p| {
            (
                p.label().split('-').next().unwrap().to_string(),
                p.records,
                p.ending.to_string(),
            )
        })
        .collect();
    // The two children run at once: either may start first.
    got[3..].sort();
    let want = [
        ("endings", 100, "exit 7"),
        ("endings", 200, "exit 8"),
        ("forks", 50, "exit 0"),
        ("forks", 20, "exit 0"),
        ("forks", 30, "exit 0"),
    ];
    let want: Vec<(String, u64, String)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), *b, c.to_string()))
        .collect();
    assert_eq!(got, want);
    let shell = t.processes[0].ppid;
    assert!(t.processes[..3].iter().all(|p| p.ppid == shell));
    assert_eq!(
        (t.processes[3].ppid, t.processes[4].ppid),
        (t.processes[2].pid, t.processes[2].pid)
    );
    let mut steps = args_by_process(&t, "step");
    let seq = |n: u64| (0..n).collect::<Vec<u64>>();
    assert_eq!(steps[2], [seq(10), seq(40)].concat());
    steps[3..].sort_by_key(Vec::len);
    assert_eq!((steps[3].clone(), steps[4].clone()), (seq(20), seq(30)));
    assert!(t
        .sites
        .iter()
        .all(|s| s.name != "?" && !s.provider.starts_with('?')));
}

/// A start-up that hangs is read while it runs: every record so far, and "still running".
#[test]
fn a_hung_program_is_read_while_it_runs() {
    use bootprof_report::session::Ending;
    use std::io::BufRead;
    let w = Work::new("hang");
    w.build("endings", &["endings.c"], &[], &[]);
    let dir = w.path("hang");
    let mut child = Command::new(tools().join("bootprof"))
        .arg("run")
        .arg("-o")
        .arg(&dir)
        .args(["--", "./endings", "hang", "777"])
        .current_dir(&w.0)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let t = bootprof_report::read_trace(&dir).unwrap();
    let p = &t.processes[0];
    assert_eq!((p.ending, p.records), (Ending::Running, 777));
    Command::new("kill")
        .arg(p.pid.to_string())
        .status()
        .unwrap();
    child.wait().unwrap();
    let t = bootprof_report::read_trace(&dir).unwrap();
    assert_eq!(t.processes[0].ending, Ending::Signal(15));
}

/// The three keep modes on 10,000 records with room for 1,000: the first ones and the drops
/// counted; each thread's last ones and the overwritten ones counted; all of them.
#[test]
fn keep_start_last_and_all() {
    let w = Work::new("keep");
    w.build("endings", &["endings.c"], &[], &[]);
    let mut seen = Vec::new();
    for keep in ["start", "last", "all"] {
        let dir = w.path(keep);
        let o = Command::new(tools().join("bootprof"))
            .arg("run")
            .args(["--keep", keep, "--buffer", "1000", "-o"])
            .arg(&dir)
            .args(["--", "./endings", "exit", "10000", "0"])
            .current_dir(&w.0)
            .output()
            .unwrap();
        ok(&o);
        let t = bootprof_report::read_trace(&dir).unwrap();
        let args = args_by_process(&t, "tick").remove(0);
        let p = &t.processes[0];
        seen.push((keep, args.len(), p.dropped, p.overwritten));
        let n = args.len() as u64;
        match keep {
            "start" => {
                assert_eq!((args, p.dropped), ((0..1000).collect(), 9000));
                let said = String::from_utf8_lossy(&o.stderr);
                let warning = format!(
                    "bootprof: warning: endings-{}: 9000 records dropped (buffer full, or no \
                     room to grow the lane)\n",
                    p.pid
                );
                assert!(said.ends_with(&warning), "{said}");
            }
            "last" => {
                // A ring of whole chunks: at least the last 1000, at most a chunk more.
                assert!((1000..=1000 + 2 * 254).contains(&n), "{n}");
                assert_eq!(args, (10_000 - n..10_000).collect::<Vec<u64>>());
                assert_eq!((p.overwritten, p.dropped), (10_000 - n, 0));
            }
            _ => assert_eq!((args, p.dropped), ((0..10_000).collect(), 0)),
        }
    }
    eprintln!("kept, dropped, overwritten: {seen:?}");
    // A flight recorder without a session, dumped at exit as one trace file: the last ones.
    let trace_path = w.path("last.trace");
    let o = Command::new(w.path("endings"))
        .args(["exit", "10000", "0"])
        .env("BOOTPROF_ENABLE", "*")
        .env("BOOTPROF_KEEP", "last")
        .env("BOOTPROF_BUFFER", "1000")
        .env("BOOTPROF_OUTPUT", &trace_path)
        .output()
        .unwrap();
    ok(&o);
    let t = read_trace(&trace_path);
    let args: Vec<u64> = t.records.iter().map(|r| r.arg).collect();
    let n = args.len() as u64;
    assert!((1000..=1000 + 2 * 254).contains(&n), "{n}");
    assert_eq!(args, (10_000 - n..10_000).collect::<Vec<u64>>());
}

/// A program that redirects descriptors by number, as a shell does (`4>file`), under a session
/// that keeps everything: descriptors 3 to 9 are free at main (the runtime keeps its session
/// directory and lane out of the way), and the lane growing 200,000 records' worth never touches
/// the program's file on descriptor 4.
#[test]
fn the_runtime_keeps_its_descriptors_out_of_the_programs_way() {
    let w = Work::new("redirects");
    w.build("redirects", &["redirects.c"], &[], &[]);
    let dir = w.path("s");
    let file = w.path("own-file");
    let o = Command::new(tools().join("bootprof"))
        .args(["run", "--keep", "all", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(w.path("redirects"))
        .arg(&file)
        .arg("200000")
        .current_dir(&w.0)
        .output()
        .unwrap();
    assert_eq!(ok(&o), "3-9 free; file: 4 bytes, keep\n");
    let t = bootprof_report::read_trace(&dir).unwrap();
    let args = args_by_process(&t, "tick").remove(0);
    assert_eq!(args, (0..200_000).collect::<Vec<u64>>());
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");
}

/// `bootprof report` over a session of five processes (one crashes): every format shows every
/// process, and the crash where it happened.
#[test]
fn every_report_format_shows_every_process_of_a_session() {
    let w = Work::new("formats");
    w.build("endings", &["endings.c"], &[], &[]);
    w.build("forks", &["forks.c"], &[], &[]);
    let script = "./endings exit 100 0; ./forks; ./endings segv 50";
    let (t, _) = session_of(&w, "s", &["sh", "-c", script], &[]);
    assert_eq!(t.processes.len(), 5);
    let labels: Vec<String> = t.processes.iter().map(|p| p.label()).collect();
    let pids: Vec<u32> = t.processes.iter().map(|p| p.pid).collect();
    let crashed = &t.processes[4];
    let report = |format: &str| report_of(&w.path("s"), format);
    let text = report("text");
    for p in &t.processes {
        let tgid = format!("({:>7}) [000]", p.pid);
        assert_eq!(
            text.lines().filter(|l| l.contains(&tgid)).count() as u64,
            p.records + 1,
            "{tgid}"
        );
    }
    assert!(text.contains("PROCESS END killed by SIGSEGV"), "{text}");
    let chrome: serde_json::Value = serde_json::from_str(&report("chrome")).unwrap();
    let events = chrome["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, labels);
    for (p, pid) in t.processes.iter().zip(&pids) {
        let instants = events
            .iter()
            .filter(|e| e["ph"] == "i" && e["pid"] == *pid && e["cat"] == "event")
            .count() as u64;
        assert_eq!(instants, p.records, "pid {pid}");
    }
    assert!(events
        .iter()
        .any(|e| e["pid"] == crashed.pid && e["name"] == "process end: killed by SIGSEGV"));
    // (Folded stacks need functions: `folded_stacks_and_points_are_per_process_in_a_session`.)
    let svg = report("flamechart");
    for p in &t.processes[..4] {
        assert!(
            svg.contains(&format!("<title>{} ended: exit 0</title>", p.label())),
            "{}",
            p.label()
        );
    }
    assert!(svg.contains(&format!(
        "<title>{} crashed: killed by SIGSEGV</title>",
        crashed.label()
    )));
    let summary = report("summary");
    for p in &t.processes {
        let line = summary
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&p.pid.to_string()))
            .unwrap_or_else(|| panic!("no line for {}:\n{summary}", p.pid));
        assert!(
            line.contains(&p.ending.to_string()) && line.contains(&format!(" {} ", p.records)),
            "{line}"
        );
    }
}

/// Function stacks over a session: folded stacks start with the process, points are per process
/// and in total.
#[test]
fn folded_stacks_and_points_are_per_process_in_a_session() {
    let w = Work::new("fold");
    let exe = w.build("calls", &["calls.c"], &["-finstrument-functions"], &[]);
    let (t, _) = session_of(
        &w,
        "s",
        &["sh", "-c", &format!("{0}; {0}", exe.display())],
        &[],
    );
    assert_eq!(t.processes.len(), 2);
    let report = |format: &str| report_of(&w.path("s"), format);
    let folded = report("folded");
    for p in &t.processes {
        assert!(
            folded
                .lines()
                .any(|l| l.starts_with(&format!("{};", p.label()))),
            "{}\n{folded}",
            p.label()
        );
    }
    assert!(folded.lines().all(|l| t
        .processes
        .iter()
        .any(|p| l.starts_with(&format!("{};", p.label())))));
    let points = report("points");
    let count = |table: &str| -> u64 {
        table
            .lines()
            .find(|l| l.starts_with("main "))
            .and_then(|l| l.split_whitespace().nth(1))
            .map_or(0, |n| n.parse().unwrap())
    };
    let sections: Vec<&str> = points.split("\nprocess ").collect();
    let total = points
        .split("all 2 processes")
        .nth(1)
        .expect("a total table");
    assert_eq!(count(total), 2, "{points}");
    assert!(points.starts_with(&format!("process {}", t.processes[0].label())));
    assert_eq!(sections.len(), 2);
    assert_eq!(count(sections[0]), 1);
}

/// A lane cut at every eighth of its length is read up to the cut, says how much is missing,
/// and never loses what comes before it.
#[test]
fn a_lane_cut_short_is_read_up_to_the_cut() {
    let w = Work::new("cut");
    w.build("endings", &["endings.c"], &[], &[]);
    let (full, _) = session_of(&w, "s", &["./endings", "exit", "3000", "0"], &[]);
    let lane = lane_file(&w.path("s"));
    let bytes = std::fs::read(&lane).unwrap();
    let claimed = bootprof_format::lane::LaneHeader::decode(&bytes)
        .unwrap()
        .claimed as usize;
    let used =
        bootprof_format::lane::LANE_HEADER_SIZE + claimed * bootprof_format::lane::CHUNK_SIZE;
    let mut last = 0;
    for eighth in 1..=8 {
        let cut = used * eighth / 8;
        let copy = w.path(&format!("cut{eighth}.lane"));
        std::fs::write(&copy, &bytes[..cut]).unwrap();
        match bootprof_report::read_trace(&copy) {
            Err(e) => assert!(
                cut < bootprof_format::lane::LANE_HEADER_SIZE,
                "{eighth}/8: {e}"
            ),
            Ok(t) => {
                let p = &t.processes[0];
                assert!(p.records >= last, "{eighth}/8");
                last = p.records;
                assert_eq!(p.cut_bytes, (used - cut) as u64, "{eighth}/8");
                let args = args_by_process(&t, "tick").remove(0);
                assert_eq!(
                    args,
                    (0..args.len() as u64).collect::<Vec<u64>>(),
                    "a prefix"
                );
                if eighth < 8 {
                    assert!(t.losses().unwrap().contains("cut short"), "{eighth}/8");
                }
            }
        }
        std::fs::remove_file(&copy).unwrap();
    }
    assert_eq!(last, full.processes[0].records);
}

/// The files of a session: in a directory others could write to (`BOOTPROF_SESSION` set by hand),
/// a symlink planted under the name a process's lane would take is never written through (the
/// lane takes the next free name), and every lane is its user's only; `bootprof run` never uses
/// a session directory, or a symlink, that is already there.
#[test]
fn session_files_are_never_written_through_a_planted_symlink() {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::fs::PermissionsExt;
    let w = Work::new("planted-session");
    let exe = w.build("endings", &["endings.c"], &[], &[]);
    let shared = w.path("shared");
    std::fs::create_dir(&shared).unwrap();
    let victim = w.path("victim");
    std::fs::write(&victim, b"precious\n").unwrap();
    // And where the program's file would be linked into the session.
    let exe_meta = std::fs::metadata(&exe).unwrap();
    let object = format!("object-{:x}-{}", exe_meta.dev(), exe_meta.ino());
    std::os::unix::fs::symlink(&victim, shared.join(&object)).unwrap();
    // The shell plants the symlink under its own pid, then becomes the program (same pid).
    let script = format!(
        "ln -s {} {}/$$.0.lane && exec ./endings exit 100 0",
        victim.display(),
        shared.display()
    );
    let o = Command::new("sh")
        .args(["-c", &script])
        .current_dir(&w.0)
        .env("BOOTPROF_SESSION", &shared)
        .env("BOOTPROF_ENABLE", "*")
        .output()
        .unwrap();
    ok(&o);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
    let mut names: Vec<String> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(
        names[0].ends_with(".0.lane") && names[1].ends_with(".1.lane") && names[2] == object,
        "{names:?}"
    );
    let lane = shared.join(&names[1]);
    let meta = std::fs::symlink_metadata(&lane).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let t = bootprof_report::read_trace(&lane).unwrap();
    assert_eq!(t.processes[0].records, 100);
    // The table was copied into the lane instead: its names are there.
    assert!(t.processes[0].unread_tables.is_empty());
    assert!(t.sites.iter().all(|s| s.name == "tick"));
    // bootprof run: an existing directory, or a symlink to one, is refused before anything runs.
    let link = w.path("session-link");
    std::os::unix::fs::symlink(&shared, &link).unwrap();
    for dir in [&shared, &link] {
        let o = Command::new(tools().join("bootprof"))
            .arg("run")
            .arg("-o")
            .arg(dir)
            .args(["--", "./endings", "exit", "1", "0"])
            .current_dir(&w.0)
            .output()
            .unwrap();
        assert!(
            !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("already exists")
        );
    }
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 3);
    // A session directory bootprof run makes is its user's only, and so is its session file.
    let (_, _) = session_of(&w, "mine", &["./endings", "exit", "1", "0"], &[]);
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        (mode(&w.path("mine")), mode(&w.path("mine/session"))),
        (0o700, 0o600)
    );
}

/// A session `s` in `w` of two `-pg -mfentry` processes (entries only: each process's last frames
/// are still open when it ends), 0.2 s apart, read back.
fn entries_only_session(w: &Work) -> bootprof_report::Trace {
    let exe = w.build("calls", &["calls.c"], &["-pg", "-mfentry"], &[]);
    let script = format!("{0}; sleep 0.2; {0}", exe.display());
    let (t, _) = session_of(w, "s", &["sh", "-c", &script], &[("BOOTPROF_MODE", "call")]);
    assert_eq!(t.processes.len(), 2);
    t
}

/// In a session of `-pg -mfentry` processes (entries only, so each process's last frames are
/// still open when it ends), every frame closes by the end of its own process, not at the end of
/// the session.
#[test]
fn open_frames_close_where_their_process_ended() {
    let w = Work::new("open-frames");
    let t = entries_only_session(&w);
    let chrome: serde_json::Value =
        serde_json::from_str(&report_of(&w.path("s"), "chrome")).unwrap();
    let events = chrome["traceEvents"].as_array().unwrap();
    let first = t.processes[0].pid;
    let ts = |e: &serde_json::Value| e["ts"].as_f64().unwrap();
    let end = events
        .iter()
        .find(|e| e["pid"] == first && e["cat"] == "process")
        .map(ts)
        .expect("the first process's end");
    let last_e = events
        .iter()
        .filter(|e| e["pid"] == first && e["ph"] == "E")
        .map(ts)
        .fold(0.0, f64::max);
    assert!(
        last_e > 0.0 && last_e <= end,
        "frames end at {last_e} us, the process at {end} us"
    );
}

/// A session on a file system that fills up: the lane keeps what it could allocate, the rest is
/// dropped and counted (never a SIGBUS, never taken for a file cut short), and `bootprof run`
/// says at its end how many records each process dropped; on one too small for
/// a lane at all, the process records in memory and says so, leaving no lane behind. Needs a
/// small tmpfs (mount, as root has); says so and checks nothing without one.
#[test]
fn a_full_file_system_drops_records_and_counts_them() {
    let w = Work::new("fullfs");
    w.build("endings", &["endings.c"], &[], &[]);
    let mount = |dir: &Path, size: &str| {
        std::fs::create_dir_all(dir).unwrap();
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let (small, tiny) = (w.path("small"), w.path("tiny"));
    if !mount(&small, "64k") {
        eprintln!("a_full_file_system_drops_records_and_counts_them: cannot mount a tmpfs here; not checked");
        return;
    }
    let umount = |dir: &Path| {
        let _ = Command::new("umount").arg(dir).status();
    };
    let run_in = |session: &Path| {
        Command::new(w.path("endings"))
            .args(["exit", "100000", "0"])
            .current_dir(&w.0)
            .env("BOOTPROF_SESSION", session)
            .env("BOOTPROF_ENABLE", "*")
            .env("BOOTPROF_KEEP", "all")
            .output()
            .unwrap()
    };
    let o = run_in(&small);
    let lane = std::fs::read_dir(&small)
        .unwrap()
        .next()
        .map(|e| e.unwrap().path());
    let t = lane
        .as_deref()
        .map(|l| bootprof_report::read_trace(l).unwrap());
    umount(&small);
    ok(&o);
    let t = t.expect("a lane");
    let p = &t.processes[0];
    assert!(p.records > 0 && p.dropped > 0, "{p:?}");
    assert_eq!((p.records + p.dropped, p.cut_bytes), (100_000, 0), "{p:?}");
    assert_eq!(
        args_by_process(&t, "tick")[0],
        (0..p.records).collect::<Vec<u64>>()
    );
    assert!(t
        .losses()
        .unwrap()
        .contains("records dropped (no room to grow the lane)"));
    // The same under `bootprof run`, which grows the lane ahead of the process: it keeps what
    // fits, and says at the end what was dropped.
    assert!(mount(&small, "64k"));
    let session = small.join("S");
    let o = Command::new(tools().join("bootprof"))
        .args(["run", "--keep", "all", "-o"])
        .arg(&session)
        .arg("--")
        .arg(w.path("endings"))
        .args(["exit", "100000", "0"])
        .current_dir(&w.0)
        .output()
        .unwrap();
    let t = bootprof_report::read_trace(&session);
    umount(&small);
    ok(&o);
    let p = t.unwrap().processes.remove(0);
    assert!(p.records > 0 && p.dropped > 0, "{p:?}");
    assert_eq!((p.records + p.dropped, p.cut_bytes), (100_000, 0), "{p:?}");
    let said = String::from_utf8_lossy(&o.stderr);
    let warning = format!(
        "bootprof: warning: endings-{}: {} records dropped (no room to grow the lane)\n",
        p.pid, p.dropped
    );
    assert!(said.ends_with(&warning), "{said}");
    // Too small for a lane's first chunks: recorded in memory, dumped at exit, no lane left.
    assert!(mount(&tiny, "16k"));
    let o = run_in(&tiny);
    let left = std::fs::read_dir(&tiny).unwrap().count();
    umount(&tiny);
    let stderr = String::from_utf8_lossy(&o.stderr);
    ok(&o);
    assert!(
        stderr.contains("recording in memory instead") && left == 0,
        "{left} files; {stderr}"
    );
    let dumped = std::fs::read_dir(&w.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "trace"))
        .expect("the dump at exit");
    assert_eq!(read_trace(&dumped).header.records, 100_000);
}

/// Bad settings and a damaged lane each get a clear word: an unknown `BOOTPROF_KEEP` keeps the
/// start and says so; a `BOOTPROF_SESSION` that is no directory records in memory and says so;
/// a session with a lane whose header cannot be trusted is read without it, naming it and why.
#[test]
fn bad_session_settings_and_a_damaged_lane_are_explained() {
    let w = Work::new("bad-session");
    w.build("endings", &["endings.c"], &[], &[]);
    let run_with = |env: &[(&str, &str)]| {
        let mut c = Command::new(w.path("endings"));
        c.args(["exit", "10", "0"])
            .current_dir(&w.0)
            .env("BOOTPROF_ENABLE", "*");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        ok(&o);
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let session = w.path("s");
    std::fs::create_dir(&session).unwrap();
    let stderr = run_with(&[
        ("BOOTPROF_SESSION", session.to_str().unwrap()),
        ("BOOTPROF_KEEP", "everything"),
    ]);
    assert!(
        stderr.contains("BOOTPROF_KEEP=everything is not start, last or all; keeping the start"),
        "{stderr}"
    );
    let missing = w.path("no-such-dir");
    let stderr = run_with(&[("BOOTPROF_SESSION", missing.to_str().unwrap())]);
    assert!(
        stderr.contains("cannot use the session directory")
            && stderr.contains("recording in memory instead"),
        "{stderr}"
    );
    // A second lane, its magic damaged: the first is read, the second named as left out.
    let good = std::fs::read_dir(&session)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[0] = b'X';
    std::fs::write(session.join("1.0.lane"), &bytes).unwrap();
    let t = bootprof_report::read_trace(&session).unwrap();
    assert_eq!(t.processes.len(), 1);
    let losses = t.losses().unwrap();
    assert!(
        losses.contains("left out") && losses.contains("1.0.lane") && losses.contains("bad magic"),
        "{losses}"
    );
}
