//! Shared objects carry the runtime: a probed library works in a host linked without it, and
//! when several objects of one process carry it, one copy serves them all (one lane, one site
//! list), whatever the load order, `dlopen` and `dlclose` included. The programs are
//! `tests/runtime/shared_*.c`; the hosts are linked by plain `cc` unless said otherwise.

use super::{lanes_of, ok, root, tools, Work};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Table entries per probe in the default form: its guard and its call.
const PER_PROBE: usize = 2;

impl Work {
    /// `tests/runtime/shared_lib.c` as library `lib` (`liba`, `libb`), linked by bootprof-link
    /// with `ldflags` into `<lib><suffix>.so`.
    fn shared_lib(&self, lib: &str, suffix: &str, ldflags: &[&str]) -> PathBuf {
        let define = format!("-DLIB={lib}");
        let mut flags = vec!["-shared"];
        flags.extend(ldflags);
        let out = format!("{lib}{suffix}.so");
        self.build(&out, &["shared_lib.c"], &[&define], &flags)
    }

    /// `tests/runtime/NAME.c` compiled and linked by plain `cc` (no bootprof-link, no runtime)
    /// with `flags` into NAME.
    fn plain(&self, name: &str, flags: &[&str]) -> PathBuf {
        let out = self.path(name);
        let st = Command::new("cc")
            .args(["-O2", "-pthread", "-I"])
            .arg(root().join("tests/runtime"))
            .arg(root().join(format!("tests/runtime/{name}.c")))
            .arg("-o")
            .arg(&out)
            .args(flags)
            .args(["-ldl", &format!("-Wl,-rpath,{}", self.0.display())])
            .status()
            .unwrap();
        assert!(st.success(), "cc {name}.c");
        out
    }

    /// A plain host linked at start-up with the libraries `libs` (file names in this directory,
    /// in that order).
    fn plain_host(&self, name: &str, libs: &[&str]) -> PathBuf {
        let dir = format!("-L{}", self.0.display());
        let mut flags = vec![dir.as_str(), "-Wl,--no-as-needed"];
        let named: Vec<String> = libs.iter().map(|l| format!("-l:{l}")).collect();
        flags.extend(named.iter().map(String::as_str));
        let host = self.plain("shared_host", &flags);
        let renamed = self.path(name);
        std::fs::rename(&host, &renamed).unwrap();
        renamed
    }
}

/// What a `bootprof run -e '*:work'` of `command` left: the records per site name, the site ids
/// in the trace, the number of lanes, the program's stdout and `bootprof run`'s stderr.
struct Recorded {
    records: BTreeMap<String, usize>,
    ids: Vec<u32>,
    lanes: usize,
    stdout: String,
    stderr: String,
}

fn record(w: &Work, name: &str, command: &[&str], env: &[(&str, &str)]) -> Recorded {
    let dir = w.path(name);
    let mut cmd = Command::new(tools().join("bootprof"));
    cmd.args(["run", "-e", "*:work", "-o"])
        .arg(&dir)
        .arg("--")
        .args(command)
        .current_dir(&w.0)
        .envs(env.iter().copied());
    let o = cmd.output().unwrap();
    let stdout = ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let lanes = lanes_of(&dir).len();
    let t = bootprof_report::read_trace(&dir).unwrap_or_else(|e| panic!("{e}\n{stderr}"));
    let mut records = BTreeMap::new();
    for r in t.records.iter() {
        let s = &t.sites[r.site as usize];
        *records
            .entry(format!("{}:{}", s.provider, s.name))
            .or_insert(0) += 1;
    }
    let ids = t.sites.iter().map(|s| s.id).collect();
    Recorded {
        records,
        ids,
        lanes,
        stdout,
        stderr,
    }
}

impl Recorded {
    /// One lane, the records `want` (site name, count) and no others, unique site ids, and
    /// nothing said of missing lanes or unmatched patterns.
    fn check(&self, want: &[(&str, usize)], what: &str) {
        assert_eq!(self.lanes, 1, "{what}: lanes\n{}", self.stderr);
        let want: BTreeMap<String, usize> = want.iter().map(|&(n, c)| (n.into(), c)).collect();
        assert_eq!(self.records, want, "{what}: records\n{}", self.stderr);
        let mut ids = self.ids.clone();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), self.ids.len(), "{what}: site ids {:?}", self.ids);
        assert!(
            self.stderr.contains("(1 process recorded)") && !self.stderr.contains("warning"),
            "{what}: {}",
            self.stderr
        );
    }
}

/// `shared_host`'s lines for `libs`, with one runtime serving (every library sees every
/// library's sites and hits), then the object the global scope resolves `bootprof_register` to
/// (in a host without the runtime, the serving one).
fn host_lines(libs: &[&str], sites: usize, hits: usize, global: &str) -> String {
    let mut s: String = libs
        .iter()
        .map(|l| format!("{l}: {sites} sites, {hits} hits\n"))
        .collect();
    s.push_str(&format!("global bootprof_register in {global}\n"));
    s
}

/// [`host_lines`] for a host built with `HOST_PROBE`: its own runtime's line before the last.
fn hosting_lines(libs: &[&str], sites: usize, hits: usize, global: &str) -> String {
    let mut s = host_lines(libs, sites, hits, global);
    let at = s.find("global").unwrap();
    s.insert_str(at, &format!("host: {sites} sites, {hits} hits\n"));
    s
}

/// The dynamic symbol table of `exe`, as `readelf --dyn-syms -W` prints it.
fn dynamic_symbols(exe: &Path) -> String {
    let o = Command::new("readelf")
        .args(["--dyn-syms", "-W"])
        .arg(exe)
        .output()
        .unwrap();
    ok(&o)
}

fn run_plain(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    super::run(exe, args, env)
}

/// A probed library in a host without the runtime records its probes with the runtime it
/// carries, linked at start-up or loaded RTLD_LOCAL, under `bootprof run` and with
/// `BOOTPROF_ENABLE` alone; disabled, its probes count nothing.
#[test]
fn a_probed_library_records_in_a_host_without_the_runtime() {
    let w = Work::new("shared-plain");
    let lib = w.shared_lib("liba", "", &[]);
    let host = w.plain_host("host", &["liba.so"]);
    let lib_arg = format!("liba={}", lib.display());
    for args in [vec!["liba"], vec![lib_arg.as_str()]] {
        let mut command = vec!["./host"];
        command.extend(&args);
        let r = record(&w, &format!("session-{}", args[0].len()), &command, &[]);
        r.check(&[("liba:work", 10)], args[0]);
        assert_eq!(r.stdout, host_lines(&["liba"], PER_PROBE, 10, "liba.so"));
        let out = ok(&run_plain(&host, &args, &[("BOOTPROF_ENABLE", "liba:*")]));
        assert_eq!(out, host_lines(&["liba"], PER_PROBE, 10, "liba.so"));
        let out = ok(&run_plain(&host, &args, &[]));
        assert_eq!(out, host_lines(&["liba"], PER_PROBE, 0, "liba.so"));
    }
}

/// A probed library in a host that carries the runtime itself uses the host's: one runtime, the
/// host's, sees the host's and both libraries' sites and hits, linked by GNU ld and by lld with
/// `-z now` (each library's calls bound at load). A host linked with a library at start-up
/// exports the runtime's entry points the library also defines (the linkers do so for any
/// symbol a library on the link line has), so the library's calls bind to the host's; a host
/// that loads its libraries with `dlopen` only exports none of them, and the libraries' own
/// copies find the host's through its note and hand every call on.
#[test]
fn a_probed_library_in_a_host_with_the_runtime_uses_the_hosts() {
    type HostCase<'a> = (&'a str, &'a [&'a str], [&'a str; 2], bool, Option<&'a str>);
    let w = Work::new("shared-host");
    for (suffix, ldflags) in [("", &[][..]), ("-lld", &["-fuse-ld=lld", "-Wl,-z,now"][..])] {
        let liba = w.shared_lib("liba", suffix, ldflags);
        let libb = w.shared_lib("libb", suffix, ldflags);
        let dir = format!("-L{}", w.0.display());
        let rpath = format!("-Wl,-rpath,{}", w.0.display());
        let link_liba = format!("-l:liba{suffix}.so");
        let (a_arg, b_arg) = (
            format!("liba={}", liba.display()),
            format!("libb={}", libb.display()),
        );
        // Host, what its link adds, its arguments, whether it exports the entry points, where
        // the global scope's bootprof_register is (None: the host itself).
        let linked: HostCase = (
            "linked",
            &[&dir, "-Wl,--no-as-needed", &link_liba],
            ["liba", &b_arg],
            true,
            None,
        );
        let loaded: HostCase = ("loaded", &[], [&a_arg, &b_arg], false, Some("(none)"));
        for (host, link, args, exports, global) in [linked, loaded] {
            let what = format!("{host}{suffix}");
            let global = global.unwrap_or(&what);
            let mut flags = link.to_vec();
            flags.extend(["-ldl", &rpath]);
            flags.extend(ldflags);
            let exe = w.build(&what, &["shared_host.c"], &["-DHOST_PROBE"], &flags);
            let dynsym = dynamic_symbols(&exe);
            assert_eq!(
                dynsym.contains(" bootprof_register"),
                exports,
                "{what}:\n{dynsym}"
            );
            let command = [format!("./{what}").as_str(), args[0], args[1]].map(String::from);
            let command: Vec<&str> = command.iter().map(String::as_str).collect();
            let r = record(&w, &format!("session-{what}"), &command, &[]);
            r.check(
                &[("host:work", 10), ("liba:work", 10), ("libb:work", 10)],
                &what,
            );
            let want = hosting_lines(&["liba", "libb"], 3 * PER_PROBE, 30, global);
            assert_eq!(r.stdout, want, "{what}");
        }
    }
}

/// A probed library that a host carrying the runtime loads at start-up only as the dependency of
/// a plain library (`shared_mid.c`: nothing of the probed one on the host's link line): its
/// constructor registers before the host's constructors have run, through its own copy, which
/// the host's note leads to the host's runtime. One runtime, the host's, records both; GNU ld,
/// and lld with `-z now`.
#[test]
fn a_probed_library_loaded_before_the_hosts_constructors_uses_the_hosts() {
    let w = Work::new("shared-indirect");
    for (suffix, ldflags) in [("", &[][..]), ("-lld", &["-fuse-ld=lld", "-Wl,-z,now"][..])] {
        w.shared_lib("liba", suffix, ldflags);
        let dir = format!("-L{}", w.0.display());
        let rpath = format!("-Wl,-rpath,{}", w.0.display());
        let liba = format!("-l:liba{suffix}.so");
        let mid = w.plain(
            "shared_mid",
            &["-shared", "-fPIC", &dir, "-Wl,--no-as-needed", &liba],
        );
        std::fs::rename(&mid, w.path(&format!("libmid{suffix}.so"))).unwrap();
        let libmid = format!("-l:libmid{suffix}.so");
        let mut flags = vec![dir.as_str(), "-Wl,--no-as-needed", &libmid, "-ldl", &rpath];
        flags.extend(ldflags);
        let what = format!("host{suffix}");
        let host = w.build(&what, &["shared_host.c"], &["-DHOST_PROBE"], &flags);
        // Whether a linker exports the host's entry points here is its own business (it may read
        // the plain library's dependencies); either way the host's runtime serves.
        let global = match dynamic_symbols(&host).contains(" bootprof_register") {
            true => what.clone(),
            false => format!("liba{suffix}.so"),
        };
        let r = record(
            &w,
            &format!("session{suffix}"),
            &[&format!("./{what}"), "liba"],
            &[],
        );
        r.check(&[("host:work", 10), ("liba:work", 10)], &what);
        let want = hosting_lines(&["liba"], 2 * PER_PROBE, 20, &global);
        assert_eq!(r.stdout, want, "{what}");
    }
}

/// Two probed libraries in a host without the runtime, linked at start-up or loaded RTLD_LOCAL,
/// in both orders, linked by GNU ld and by lld with `-z now` (every call bound at load): the
/// first loaded serves, the other's calls and registration go to it, and both libraries' probes
/// are recorded into one lane.
#[test]
fn two_libraries_in_a_host_without_the_runtime_share_one() {
    let w = Work::new("shared-two");
    for (suffix, ldflags) in [("", &[][..]), ("-lld", &["-fuse-ld=lld", "-Wl,-z,now"][..])] {
        let a = w.shared_lib("liba", suffix, ldflags);
        let b = w.shared_lib("libb", suffix, ldflags);
        let (a_so, b_so) = (format!("liba{suffix}.so"), format!("libb{suffix}.so"));
        let (a_arg, b_arg) = (
            format!("liba={}", a.display()),
            format!("libb={}", b.display()),
        );
        let cases: [(&str, &[&str], [&str; 2], &str); 5] = [
            ("start-up a b", &[&a_so, &b_so], ["liba", "libb"], &a_so),
            ("start-up b a", &[&b_so, &a_so], ["liba", "libb"], &b_so),
            ("dlopen a b", &[], [&a_arg, &b_arg], &a_so),
            ("dlopen b a", &[], [&b_arg, &a_arg], &b_so),
            ("start-up b, dlopen a", &[&b_so], [&a_arg, "libb"], &b_so),
        ];
        for (i, (what, startup, args, serving)) in cases.into_iter().enumerate() {
            let what = format!("{what}{suffix}");
            let name = format!("host{suffix}-{i}");
            w.plain_host(&name, startup);
            let command = [format!("./{name}").as_str(), args[0], args[1]].map(String::from);
            let command: Vec<&str> = command.iter().map(String::as_str).collect();
            let r = record(&w, &format!("session{suffix}-{i}"), &command, &[]);
            r.check(&[("liba:work", 10), ("libb:work", 10)], &what);
            let libs = args.map(|a| &a[..4]);
            let want = host_lines(&libs, 2 * PER_PROBE, 20, serving);
            assert_eq!(r.stdout, want, "{what}");
        }
    }
}

/// A library bound to its own runtime (nothing in the global scope when it was relocated) whose
/// constructor runs after another library loaded RTLD_LOCAL took the global scope (a dependency
/// of it loaded that one): its registration goes to the serving copy, and both libraries'
/// probes are recorded into one lane. Its C API calls reach the serving copy too: through its
/// own copy, which hands them on, when they were bound at load (`-z now`).
#[test]
fn a_library_bound_to_its_own_copy_registers_with_the_serving_one() {
    let w = Work::new("shared-forward");
    let libb = w.shared_lib("libb", "", &[]);
    let trigger = w.plain("shared_trigger", &["-shared", "-fPIC"]);
    std::fs::rename(&trigger, w.path("libtrigger.so")).unwrap();
    let dir = format!("-L{}", w.0.display());
    let rpath = format!("-Wl,-rpath,{}", w.0.display());
    let deps = ["-Wl,--no-as-needed", "-l:libtrigger.so", &dir, &rpath];
    let lazy = w.shared_lib("liba", "-lazy", &deps);
    let mut now_flags = deps.to_vec();
    now_flags.push("-Wl,-z,now");
    let now = w.shared_lib("liba", "-now", &now_flags);
    w.plain_host("host", &[]);
    let env = [("SHARED_TRIGGER", libb.to_str().unwrap())];
    let b_arg = format!("libb={}", libb.display());
    for lib in [lazy, now] {
        let what = lib.file_name().unwrap().to_str().unwrap().to_string();
        let a_arg = format!("liba={}", lib.display());
        let r = record(
            &w,
            &format!("session-{what}"),
            &["./host", &a_arg, &b_arg],
            &env,
        );
        r.check(&[("liba:work", 10), ("libb:work", 10)], &what);
        let want = host_lines(&["liba", "libb"], 2 * PER_PROBE, 20, "libb.so");
        assert_eq!(r.stdout, want, "{what}");
    }
}

/// `dlopen` and `dlclose` of two probed libraries, alternating, 50 times, in a host without the
/// runtime (checks in `shared_loop.c`): the first serves and stays loaded, the other's sites
/// come and go, every hit counts; recorded into one lane.
#[test]
fn dlopen_and_dlclose_in_a_loop_keep_one_runtime() {
    let w = Work::new("shared-loop");
    let a = w.shared_lib("liba", "", &[]);
    let b = w.shared_lib("libb", "", &[]);
    w.plain("shared_loop", &[]);
    let (a_arg, b_arg) = (
        format!("liba={}", a.display()),
        format!("libb={}", b.display()),
    );
    let r = record(&w, "session", &["./shared_loop", &a_arg, &b_arg, "50"], &[]);
    r.check(&[("liba:work", 75), ("libb:work", 75)], "dlopen loop");
    assert_eq!(
        r.stdout,
        format!(
            "50 rounds: {PER_PROBE} sites alone, {} with libb; liba hits 75\n",
            2 * PER_PROBE
        )
    );
}
