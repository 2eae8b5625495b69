//! Attaching to a running program (`bootprof attach`, `bootprof list --pid`), with
//! `tests/runtime/attach.c` (threads firing attach:even and attach:odd with the numbers of one
//! sequence, checking their own sums at the end): what an attach enables it records, and only
//! while attached; on detach the program's text is the file's again, byte for byte (read from
//! /proc/PID/mem); the program's own use of the attach signal is kept; strangers, programs in
//! secure-execution mode and programs with attaching turned off are refused; a hundred attaches
//! in a row; the live view prints what the session holds, and counts what it could not show
//! (with `tests/runtime/live.c` too, a stream of hits faster than it reads); attaching inside a
//! rootless container, and as an unprivileged user, needs no capability; the protocol's `count`
//! request refuses to be mixed with recording or to come after an `enable`.

use super::{ok, tools, Work, FORMS};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};

/// A running attach.c.
struct Target {
    child: Child,
    out: BufReader<ChildStdout>,
    pid: u32,
    exe: PathBuf,
}

impl Target {
    /// Starts `exe` with `threads` workers (through `wrapper`, e.g. setpriv, if given) and
    /// waits for its `ready`.
    fn start(exe: &Path, threads: u32, wrapper: &[&str], env: &[(&str, &str)]) -> Target {
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.arg(threads.to_string())
            .envs(env.iter().copied())
            .env_remove("BOOTPROF_ENABLE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        let pid = child.id();
        Target {
            child,
            out,
            pid,
            exe: exe.to_path_buf(),
        }
    }

    /// Closes its input and returns what it printed after `ready` (it must exit 0).
    fn finish(mut self) -> String {
        drop(self.child.stdin.take());
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        let st = self.child.wait().unwrap();
        assert!(st.success(), "{st:?}: {rest}");
        assert!(rest.starts_with("ok "), "{rest}");
        rest
    }

    /// Bytes of its executable's code that differ between memory and the file.
    fn text_differences(&self) -> usize {
        let file = std::fs::read(&self.exe).unwrap();
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap();
        let exe = std::fs::canonicalize(&self.exe).unwrap();
        // The load bias of a PIE: where its first mapping (file offset 0) starts.
        let bias = maps
            .lines()
            .find(|l| l.ends_with(exe.to_str().unwrap()) && l.split(' ').nth(2) == Some("00000000"))
            .and_then(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
            .expect("the executable's first mapping");
        let mut mem = std::fs::File::open(format!("/proc/{}/mem", self.pid)).unwrap();
        let u64_at = |at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap());
        let (phoff, phnum) = (
            u64_at(0x20) as usize,
            u16::from_le_bytes([file[0x38], file[0x39]]),
        );
        let mut differ = 0;
        for i in 0..phnum as usize {
            let ph = phoff + i * 56;
            let (kind, flags) = (&file[ph..ph + 4], file[ph + 4]);
            if kind != [1, 0, 0, 0] || flags & 1 == 0 {
                continue; // not an executable PT_LOAD
            }
            let (offset, vaddr, size) = (u64_at(ph + 8), u64_at(ph + 16), u64_at(ph + 32));
            let mut now = vec![0u8; size as usize];
            std::os::unix::fs::FileExt::read_exact_at(&mem, &mut now, bias + vaddr).unwrap();
            let was = &file[offset as usize..(offset + size) as usize];
            differ += now.iter().zip(was).filter(|(a, b)| a != b).count();
        }
        let _ = mem.read(&mut []);
        differ
    }

    /// Whether it has a handler for signal `sig` (`SigCgt` in /proc/PID/status).
    fn catches(&self, sig: u32) -> bool {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        let mask = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
            .unwrap();
        mask & (1 << (sig - 1)) != 0
    }

    /// Its threads.
    fn threads(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.pid))
            .unwrap()
            .count()
    }
}

/// A copy of `exe` in the directory `dir` of `w`, which every user may enter and run.
fn copy_for_all(w: &Work, exe: &Path, dir: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = w.path(dir);
    std::fs::create_dir(&bin).unwrap();
    for d in [&w.0, &bin] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let copy = bin.join(exe.file_name().unwrap());
    std::fs::copy(exe, &copy).unwrap();
    copy
}

/// `bootprof ARGS`.
fn bootprof(args: &[&str]) -> Output {
    Command::new(tools().join("bootprof"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `bootprof attach PID OPTIONS -o DIR` (it must succeed).
fn attach(t: &Target, dir: &Path, options: &[&str]) -> Output {
    let pid = t.pid.to_string();
    let mut args = vec!["attach", pid.as_str(), "-o", dir.to_str().unwrap()];
    args.extend_from_slice(options);
    let o = bootprof(&args);
    ok(&o);
    o
}

/// Every record of a session: (probe name, argument); every one an EVENT of the attach:
/// provider, and the process's lane ended by the detach.
fn events(dir: &Path) -> Vec<(String, u64)> {
    timed_events(dir).0
}

/// [`events`], and the times of the records, of the lane's start and of its end (the detach).
fn timed_events(dir: &Path) -> (Vec<(String, u64)>, Vec<u64>, u64, u64) {
    let trace = bootprof_report::read_trace(dir).unwrap();
    assert_eq!(trace.processes.len(), 1);
    let p = &trace.processes[0];
    assert_eq!(p.ending, bootprof_report::session::Ending::Detached);
    let mut times = Vec::new();
    let events = trace
        .records
        .iter()
        .map(|r| {
            let site = &trace.sites[r.site as usize];
            assert_eq!(r.kind, bootprof_format::trace::RecordKind::Event);
            assert_eq!(site.provider, "attach");
            times.push(r.tsc);
            (site.name.clone(), r.arg)
        })
        .collect();
    (events, times, p.start_tsc, p.end_tsc.unwrap())
}

/// A program that carries the lean runtime and whose runtime library is gone (linked with a
/// cache of its own, since removed) asked for the library at start-up (`BOOTPROF_MODE` is one of
/// the library's variables), could not load it, and runs untraced; `bootprof attach` offers its
/// own library, which the program then loads, and the attach records.
#[test]
fn an_attach_offers_its_library_to_a_program_that_could_not_load_its_own() {
    let w = Work::new("attach-offered");
    w.build("attach", &["attach.c"], &[], &[]);
    let (exe, cache) = (w.path("attach-gone"), w.path("cache"));
    let o = Command::new(tools().join("bootprof-link"))
        .args(["cc", "-pthread", "-o"])
        .arg(&exe)
        .arg(w.path("attach.o"))
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .unwrap();
    ok(&o);
    std::fs::remove_dir_all(&cache).unwrap();
    let t = Target::start(&exe, 2, &[], &[("BOOTPROF_MODE", "call")]);
    let dir = w.path("s");
    attach(&t, &dir, &["-e", "attach:odd", "--duration", "0.3"]);
    let seen = events(&dir);
    assert!(
        !seen.is_empty() && seen.iter().all(|(name, _)| name == "odd"),
        "{seen:?}"
    );
    assert_eq!(t.text_differences(), 0);
    t.finish();
}

/// One attach in each mode and probe form: only the chosen sites fire, only while attached; the
/// text is the file's before, not during, and again after; `bootprof list --pid` shows the
/// states and hits during and after; no thread of the runtime's is left. The attach lasts until
/// Ctrl-C, sent once the listing has shown the sites enabled and hit: a fixed duration can end
/// before a listing on a loaded machine sees it.
#[test]
fn an_attach_records_while_attached_and_puts_the_files_text_back() {
    for (form, flags) in FORMS {
        let w = Work::with(&format!("attach-{form}"), flags);
        let exe = w.build("attach", &["attach.c"], &[], &[]);
        let t = Target::start(&exe, 2, &[], &[]);
        assert_eq!(t.text_differences(), 0);
        assert_eq!(t.threads(), 3);
        let pid = t.pid.to_string();
        let odd_hits = |listing: &str| listed_hits(listing, "attach:odd");
        for (n, mode) in ["trap", "call"].iter().enumerate() {
            let dir = w.path(&format!("s{n}"));
            let before = odd_hits(&ok(&bootprof(&["list", "--pid", &pid])));
            let during = Command::new(tools().join("bootprof"))
                .args(["attach", &pid, "-e", "attach:odd", "--mode", mode, "-o"])
                .arg(&dir)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // While attached: the sites enabled and hit, the text changed.
            let listing = listing_until(&pid, |l| l.contains(" enabled ") && odd_hits(l) > before);
            let odd_sites = listing.lines().filter(|l| l.contains("attach:odd")).count();
            assert_eq!(odd_sites, if form == "guards" { 2 } else { 1 }, "{listing}");
            assert!(listing.contains(&format!("enabled {mode}")), "{listing}");
            assert!(t.text_differences() > 0);
            Command::new("kill")
                .args(["-INT", &during.id().to_string()])
                .status()
                .unwrap();
            let o = during.wait_with_output().unwrap();
            assert!(o.status.success(), "{form} {mode}: {}", stderr(&o));
            assert_eq!(
                t.text_differences(),
                0,
                "{form} {mode}: the text is not the file's"
            );
            let after = ok(&bootprof(&["list", "--pid", &pid]));
            assert!(
                after.ends_with("sites, 0 enabled; every disabled site holds its NOP\n"),
                "{after}"
            );
            let got = events(&dir);
            assert!(!got.is_empty(), "{form} {mode}: nothing recorded");
            assert!(got.iter().all(|(name, arg)| name == "odd" && arg % 2 == 1));
        }
        // The listener and its conversations are gone.
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(t.threads(), 3);
        t.finish();
    }
}

/// A SIGURG that is not a knock (no knock file) reaches the program's own handler, before and
/// after an attach; the knocks of the attach do not.
#[test]
fn the_programs_own_handler_gets_the_signals_that_are_not_knocks() {
    let w = Work::new("attach-handler");
    let exe = w.build("attach", &["attach.c"], &[], &[]);
    let t = Target::start(&exe, 2, &[], &[("ATTACH_TEST_HANDLER", "1")]);
    let urg = |n: usize| {
        for _ in 0..n {
            Command::new("kill")
                .args(["-URG", &t.pid.to_string()])
                .status()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
    };
    urg(3);
    attach(&t, &w.path("s"), &["--duration", "0.1"]);
    urg(2);
    assert_eq!(t.text_differences(), 0);
    let out = t.finish();
    assert!(out.ends_with("urg 5\n"), "{out}");
}

/// Another user gets a clear error and changes nothing, whether stopped by the client (the
/// process is not theirs) or, with the socket's own permissions out of the way, by the
/// runtime's check of the peer's credentials; root may attach to another user's process.
#[test]
fn a_stranger_is_refused_and_root_is_let_in() {
    if !super::as_root("play another user") {
        return;
    }
    let w = Work::new("attach-users");
    let exe = w.build("attach", &["attach.c"], &[], &[]);
    let peer = w.path("peer");
    let st = Command::new("cc")
        .arg(super::root().join("tests/runtime/attach_peer.c"))
        .arg("-o")
        .arg(&peer)
        .status()
        .unwrap();
    assert!(st.success());
    let t = Target::start(&exe, 2, &[], &[]);
    let pid = t.pid.to_string();
    let bootprof_bin = tools().join("bootprof");
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bootprof_bin)
        .args(["attach", &pid, "--duration", "0.1"])
        .current_dir("/")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "bootprof: error: process {pid} belongs to user 0: only that user (or root) may \
             attach to it\n"
        )
    );
    // Knock by hand, then connect as user 65533 to a socket anyone may open.
    let dir = Path::new("/tmp/.bootprof-0");
    std::fs::write(dir.join(format!("attach.{pid}")), "").unwrap();
    let socket = dir.join(format!("attach.{pid}.sock"));
    for _ in 0..250 {
        Command::new("kill").args(["-URG", &pid]).status().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        if socket.exists() {
            break;
        }
    }
    // The listener makes its socket its user's only just after it binds it.
    std::thread::sleep(std::time::Duration::from_millis(100));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = Command::new(&peer)
        .arg(&socket)
        .arg("65533")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("error permission denied: process {pid} belongs to user 0, not to user 65533\n"),
        "{}",
        stderr(&o)
    );
    let listing = ok(&bootprof(&["list", "--pid", &pid]));
    assert!(listing.contains(" 0 enabled;"), "{listing}");
    assert_eq!(t.text_differences(), 0);
    t.finish();

    // Root attaches to a process of user 65534: the session is that user's to write into.
    let t = Target::start(
        &copy_for_all(&w, &exe, "bin"),
        2,
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
        &[],
    );
    attach(
        &t,
        &w.path("theirs"),
        &["-e", "attach:even", "--duration", "0.1"],
    );
    let got = events(&w.path("theirs"));
    assert!(!got.is_empty() && got.iter().all(|(name, _)| name == "even"));
    assert_eq!(t.text_differences(), 0);
    t.finish();
}

/// Attaching is off with BOOTPROF_ATTACH=0 and in secure-execution mode: no handler at all,
/// and `bootprof list --pid` says why; BOOTPROF_ATTACH_SIGNAL moves it to another signal, which
/// the client learns from the process's environment.
#[test]
fn attaching_can_be_turned_off_or_moved_and_setuid_programs_refuse() {
    let w = Work::new("attach-off");
    let exe = w.build("attach", &["attach.c"], &[], &[]);
    let t = Target::start(&exe, 1, &[], &[]);
    assert!(t.catches(23));
    t.finish();

    let t = Target::start(&exe, 1, &[], &[("BOOTPROF_ATTACH", "0")]);
    assert!(!t.catches(23));
    let o = bootprof(&["list", "--pid", &t.pid.to_string()]);
    assert_eq!(
        stderr(&o),
        format!(
            "bootprof: error: process {} has attaching turned off (BOOTPROF_ATTACH=0 in its \
             environment)\n",
            t.pid
        )
    );
    t.finish();

    let t = Target::start(&exe, 1, &[], &[("BOOTPROF_ATTACH_SIGNAL", "USR2")]);
    assert!(!t.catches(23) && t.catches(12));
    let listing = ok(&bootprof(&["list", "--pid", &t.pid.to_string()]));
    assert!(listing.contains(" 0 enabled;"), "{listing}");
    t.finish();

    if !super::as_root("make a set-user-ID binary") {
        return;
    }
    // A set-user-ID binary of user 65534, run by root: AT_SECURE.
    use std::os::unix::fs::PermissionsExt;
    let setuid = copy_for_all(&w, &exe, "setuid");
    std::os::unix::fs::chown(&setuid, Some(65534), None).unwrap();
    std::fs::set_permissions(&setuid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let t = Target::start(&setuid, 1, &[], &[]);
    assert!(!t.catches(23), "a set-user-ID program listens for knocks");
    let o = bootprof(&["list", "--pid", &t.pid.to_string()]);
    assert!(
        stderr(&o)
            .contains("secure-execution mode (set-user-ID or set-group-ID): it refuses attach"),
        "{}",
        stderr(&o)
    );
    t.finish();

    // A signal attaching may not use: the runtime says so and listens on SIGURG.
    let mut child = Command::new(&exe)
        .arg("1")
        .env_remove("BOOTPROF_ENABLE")
        .env("BOOTPROF_ATTACH_SIGNAL", "KILL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let caught = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    drop(child.stdin.take());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert!(
        stderr(&o).contains(
            "bootprof: BOOTPROF_ATTACH_SIGNAL=KILL is not a signal attaching may use (URG, \
             WINCH, USR1, USR2, RTMIN+N); using URG"
        ),
        "{}",
        stderr(&o)
    );
    let sig_cgt = caught
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:\t"))
        .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
        .unwrap();
    assert_ne!(
        sig_cgt & (1 << (23 - 1)),
        0,
        "SIGURG not caught: {sig_cgt:x}"
    );
}

/// A hundred attaches in a row to four threads that hit sites all the time, alternating trap
/// and call mode and three patterns: the program is unharmed (its sums are right), its text is
/// the file's after every detach, and each session holds hits of its own pattern only, all
/// from while it was attached (its lane's start to its end, which the next lane starts after).
#[test]
fn a_hundred_attaches_in_a_row() {
    let w = Work::new("attach-stress");
    let exe = w.build("attach", &["attach.c"], &[], &[]);
    let t = Target::start(&exe, 4, &[], &[]);
    let patterns = ["attach:odd", "attach:even", "attach:*"];
    let start = std::time::Instant::now();
    for i in 0..100 {
        let dir = w.path(&format!("s{i}"));
        let mode = ["trap", "call"][i % 2];
        let options = ["-e", patterns[i % 3], "--mode", mode, "--duration", "0.02"];
        attach(&t, &dir, &[&options[..], &["--buffer", "2000"]].concat());
        assert_eq!(
            t.text_differences(),
            0,
            "attach {i}: the text is not the file's"
        );
    }
    eprintln!("100 attaches in {:?}", start.elapsed());
    t.finish();
    let mut last_end = 0;
    let mut empty = 0;
    for i in 0..100 {
        let (got, times, start, end) = timed_events(&w.path(&format!("s{i}")));
        // On a loaded machine the workers may not run in some attach's 20 ms.
        empty += usize::from(got.is_empty());
        for (name, arg) in &got {
            let wanted = match i % 3 {
                0 => name == "odd" && arg % 2 == 1,
                1 => name == "even" && arg % 2 == 0,
                _ => (name == "odd") == (arg % 2 == 1),
            };
            assert!(wanted, "attach {i} ({}): {name} {arg}", patterns[i % 3]);
        }
        // Hits of this attach only: from its lane's start to its detach, after the one before.
        assert!(
            start > last_end,
            "attach {i} began before the one before ended"
        );
        for t in times {
            assert!(
                (start..=end).contains(&t),
                "attach {i}: a hit at {t}, not in {start}..{end}"
            );
        }
        last_end = end;
    }
    eprintln!("{empty} of 100 attaches recorded nothing");
    assert!(empty <= 10, "{empty} of 100 attaches recorded nothing");
}

/// `bootprof attach --live` prints each record of the session as it arrives; `bootprof run
/// --live` prints the lines of the text report (their times aside), as they arrive.
#[test]
fn the_live_view_shows_what_the_session_holds() {
    let w = Work::new("attach-live");
    let exe = w.build("attach", &["attach.c"], &[], &[]);
    let t = Target::start(&exe, 2, &[], &[]);
    let dir = w.path("s");
    let o = attach(
        &t,
        &dir,
        &[
            "-e",
            "attach:odd",
            "--duration",
            "0.2",
            "--keep",
            "all",
            "--live",
        ],
    );
    t.finish();
    let live = String::from_utf8_lossy(&o.stdout);
    let shown: Vec<u64> = live
        .lines()
        .map(|l| {
            let arg = l
                .split_once(": EVENT attach:odd arg=0x")
                .unwrap_or_else(|| panic!("{l}"))
                .1;
            u64::from_str_radix(arg, 16).unwrap()
        })
        .collect();
    let mut recorded: Vec<u64> = events(&dir).into_iter().map(|(_, a)| a).collect();
    let mut sorted = shown.clone();
    sorted.sort_unstable();
    recorded.sort_unstable();
    assert_eq!(sorted, recorded);
    assert!(stderr(&o).contains(&format!("live: {} records shown, 0 lost", shown.len())));

    let strip = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| match l.split_once("[000]") {
                Some((task, rest)) => format!("{task}{}", rest.split_once(": ").unwrap().1),
                None => l.to_string(),
            })
            .collect()
    };
    let threads = w.build("threads", &["threads.c"], &[], &[]);
    let dir = w.path("run");
    let o = Command::new(tools().join("bootprof"))
        .args(["run", "--live", "-o"])
        .arg(&dir)
        .arg(&threads)
        .output()
        .unwrap();
    let live = ok(&o);
    let report = super::report_of(&dir, "text");
    assert_eq!(strip(&live), strip(&report));
}

/// Ctrl-C (SIGINT) detaches as --duration does, even when it comes as soon as the sites are
/// enabled (bootprof catches it from before it enables any); bootprof killed (SIGKILL) leaves the
/// runtime to detach by itself when the connection breaks: the sites it enabled are disabled
/// again. Each signal is sent once the sites were hit, so that the session holds records however
/// slowly the program runs on a loaded machine.
#[test]
fn ctrl_c_detaches_and_so_does_killing_bootprof() {
    let w = Work::new("attach-kill");
    let exe = w.build("attach", &["attach.c"], &[], &[]);
    let t = Target::start(&exe, 2, &[], &[]);
    let pid = t.pid.to_string();
    // Whether a listing shows some sites enabled, and the hits of attach:even so far.
    let state = |listing: &str| {
        let hits = listed_hits(listing, "attach:even");
        (!listing.contains(" 0 enabled;"), hits)
    };
    // Waits until some sites are enabled and hit after `since` hits (so that the session holds
    // records however loaded the machine is), or (`on` false) until none is enabled.
    let enabled = |on: bool, since: u64| {
        let reached = |l: &str| {
            let (some, hits) = state(l);
            some == on && (!on || hits > since)
        };
        let last = listing_until(&pid, reached);
        assert!(
            reached(&last),
            "never {}",
            if on { "enabled" } else { "disabled again" }
        );
    };
    for (signal, code) in [("INT", Some(0)), ("KILL", None)] {
        let dir = w.path(signal);
        let before = state(&ok(&bootprof(&["list", "--pid", &pid]))).1;
        let client = Command::new(tools().join("bootprof"))
            .args(["attach", &pid, "-e", "attach:even", "-o"])
            .arg(&dir)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        enabled(true, before);
        Command::new("kill")
            .args([&format!("-{signal}"), &client.id().to_string()])
            .status()
            .unwrap();
        let o = client.wait_with_output().unwrap();
        assert_eq!(o.status.code(), code, "{}", stderr(&o));
        enabled(false, 0);
        assert_eq!(t.text_differences(), 0, "after SIG{signal}");
        let got = events(&dir);
        assert!(!got.is_empty() && got.iter().all(|(name, _)| name == "even"));
    }
    t.finish();
}

/// `bootprof list --pid PID`, every 20 ms for at most 5 s, until `done` holds for its listing;
/// the last listing (for which `done` may not hold).
fn listing_until(pid: &str, done: impl Fn(&str) -> bool) -> String {
    let mut listing = String::new();
    for _ in 0..250 {
        listing = ok(&bootprof(&["list", "--pid", pid]));
        if done(&listing) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    listing
}

/// The hits `bootprof list --pid` showed for the sites of the probe `name` (provider:name), all
/// together: each line's last field.
fn listed_hits(listing: &str, name: &str) -> u64 {
    let name = format!(" {name} ");
    listing
        .lines()
        .filter(|l| l.contains(&name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// What `--live` printed: the numbers of the EVENT records of one provider it showed (in the
/// order shown), the counts of its `LOST` lines of each cause, its other lines, and the three
/// counts of its closing line on stderr.
struct LiveView {
    numbers: Vec<u64>,
    /// `LOST N RECORDS (the reader fell behind)`: a ring chunk overwritten before it was read.
    behind: Vec<u64>,
    /// `LOST N RECORDS (dropped: the buffer was full)`.
    dropped: Vec<u64>,
    other: Vec<String>,
    /// Records shown, lost (the reader fell behind), dropped (buffer full).
    closing: [u64; 3],
    /// Records dropped, summed over bootprof's closing warnings of the session's lanes.
    warned: u64,
}

impl LiveView {
    /// Reads the output `o` of a `--live` whose records are EVENTs of `provider`'s probes, and
    /// checks what holds however much was lost: the closing line counts the records shown
    /// and sums the LOST lines of each cause, and no record is shown twice.
    fn of(o: &Output, provider: &str) -> LiveView {
        let text = ok(o);
        let event = format!(": EVENT {provider}:");
        let mut view = LiveView {
            numbers: Vec::new(),
            behind: Vec::new(),
            dropped: Vec::new(),
            other: Vec::new(),
            closing: [0; 3],
            warned: 0,
        };
        for line in text.lines() {
            if let Some(n) = line
                .strip_prefix("LOST ")
                .and_then(|rest| rest.split_once(' '))
            {
                let (count, cause) = (n.0.parse().unwrap(), n.1);
                match cause {
                    "RECORDS (the reader fell behind)" => view.behind.push(count),
                    "RECORDS (dropped: the buffer was full)" => view.dropped.push(count),
                    _ => panic!("{line}"),
                }
            } else if let Some((_, probe)) = line.split_once(&event) {
                let (_, arg) = probe
                    .split_once(" arg=0x")
                    .unwrap_or_else(|| panic!("{line}"));
                view.numbers.push(u64::from_str_radix(arg, 16).unwrap());
            } else {
                view.other.push(line.to_string());
            }
        }
        let err = stderr(o);
        let closing = err
            .lines()
            .find(|l| l.starts_with("bootprof: live: "))
            .unwrap_or_else(|| panic!("no closing line: {err}"));
        let counts: Vec<u64> = closing.split(' ').filter_map(|w| w.parse().ok()).collect();
        view.closing = counts.try_into().unwrap();
        // What the session's lanes dropped, as bootprof says at its end.
        view.warned = err
            .lines()
            .filter_map(|l| l.strip_prefix("bootprof: warning: "))
            .filter_map(|l| l.split_once(": ")?.1.split_once(" records dropped ("))
            .map(|(n, _)| n.parse::<u64>().unwrap())
            .sum();
        let [shown, lost, dropped] = view.closing;
        assert_eq!(
            closing,
            format!(
                "bootprof: live: {shown} records shown, {lost} lost (the reader fell behind), \
                 {dropped} dropped (buffer full)"
            )
        );
        assert_eq!(shown, view.numbers.len() as u64, "{closing}");
        assert_eq!(lost, view.behind.iter().sum::<u64>(), "{closing}");
        assert_eq!(dropped, view.dropped.iter().sum::<u64>(), "{closing}");
        let mut sorted = view.numbers.clone();
        sorted.sort_unstable();
        let before = sorted.len();
        sorted.dedup();
        assert_eq!(sorted.len(), before, "records shown twice");
        view
    }

    /// Checks that it shows what the session in `dir`, whose buffer filled, holds: the same
    /// records, and as many dropped, in LOST lines; none lost otherwise.
    fn holds_what_a_full_buffer_kept(&self, dir: &Path) {
        let [shown, lost, dropped] = self.closing;
        assert!(!self.dropped.is_empty() && lost == 0, "{:?}", self.closing);
        let (p, mut kept) = session_of(dir);
        assert_eq!((p.records, p.dropped), (shown, dropped));
        let mut numbers = self.numbers.clone();
        numbers.sort_unstable();
        kept.sort_unstable();
        assert_eq!(numbers, kept);
    }

    /// Whether it showed every number of `numbers` (what the session holds at the end).
    fn shows_all(&self, numbers: impl IntoIterator<Item = u64>) -> bool {
        let shown: std::collections::HashSet<u64> = self.numbers.iter().copied().collect();
        numbers.into_iter().all(|n| shown.contains(&n))
    }
}

/// `bootprof run --live OPTIONS -o DIR live 2 HITS` (tests/runtime/live.c, its sites in call
/// mode: fast hits), read; the program made its HITS hits.
fn run_live(w: &Work, dir: &Path, options: &[&str], hits: u64) -> LiveView {
    let exe = w.build("live", &["live.c"], &[], &[]);
    let o = Command::new(tools().join("bootprof"))
        .args(["run", "--live", "--mode", "call", "-e", "live:hit"])
        .args(options)
        .arg("-o")
        .arg(dir)
        .arg(exe)
        .args(["2".to_string(), hits.to_string()])
        .output()
        .unwrap();
    let view = LiveView::of(&o, "live");
    let made = format!("hits {hits}");
    assert!(view.other.contains(&made), "{:?}", view.other);
    view
}

/// `bootprof attach --live --mode call OPTIONS -o DIR` to attach.c (two threads), read.
fn attach_live(w: &Work, dir: &Path, options: &[&str]) -> LiveView {
    let exe = w.build("attach", &["attach.c"], &[], &[]);
    let t = Target::start(&exe, 2, &[], &[]);
    let o = attach(&t, dir, &[&["--live", "--mode", "call"], options].concat());
    t.finish();
    LiveView::of(&o, "attach")
}

/// The session's one process, and the numbers (arguments) of its records.
fn session_of(dir: &Path) -> (bootprof_report::process::Process, Vec<u64>) {
    let trace = bootprof_report::read_trace(dir).unwrap();
    assert_eq!(trace.processes.len(), 1);
    let numbers = trace.records.iter().map(|r| r.arg).collect();
    (trace.processes[0].clone(), numbers)
}

/// With `--keep last` and a ring of a few hundred records per thread, threads that hit a site
/// tens of millions of times a second overwrite most chunks before the reader (every 20 ms)
/// gets to them: the live view says so in LOST lines, and what it showed plus what it counted
/// lost is every record the program made (known from live.c's count, and from the session's
/// ring: the records it kept plus those it overwrote), with none both shown and counted lost;
/// everything the ring kept at the end was shown. For `bootprof run --live` and `bootprof attach
/// --live`.
#[test]
fn the_live_view_counts_the_records_a_ring_overwrote_before_it_read_them() {
    let w = Work::new("live-ring");
    let ring = ["--keep", "last", "--buffer", "300"];
    let hits = 3_000_000;
    let dir = w.path("s-run");
    let view = run_live(&w, &dir, &ring, hits);
    let [shown, lost, dropped] = view.closing;
    assert!(
        !view.behind.is_empty() && dropped == 0,
        "{:?}",
        view.closing
    );
    assert_eq!(shown + lost, hits, "{:?}", view.closing);
    assert!(view.numbers.iter().all(|&n| n < hits));
    let (p, kept) = session_of(&dir);
    assert_eq!(p.records + p.overwritten, hits);
    assert!(view.shows_all(kept), "a record the ring kept was not shown");

    let dir = w.path("s-attach");
    let view = attach_live(
        &w,
        &dir,
        &[&["-e", "attach:*", "--duration", "0.3"], &ring[..]].concat(),
    );
    let [shown, lost, _] = view.closing;
    assert!(!view.behind.is_empty(), "{:?}", view.closing);
    let (p, kept) = session_of(&dir);
    assert_eq!(
        shown + lost,
        p.records + p.overwritten,
        "{:?}",
        view.closing
    );
    assert!(view.shows_all(kept), "a record the ring kept was not shown");
}

/// With `--keep start` and a buffer of a thousand records, the buffer fills at once and every
/// later record is dropped: the live view says so in LOST lines (as they are dropped, from the
/// lane's count), shows exactly the records the session holds, and what it showed plus what it
/// counted dropped is every record the program made. For `bootprof run --live` and `bootprof
/// attach --live`.
#[test]
fn the_live_view_counts_the_records_a_full_buffer_dropped() {
    let w = Work::new("live-full");
    let full = ["--keep", "start", "--buffer", "1000"];
    let hits = 300_000;
    let dir = w.path("s-run");
    let view = run_live(&w, &dir, &full, hits);
    let [shown, _, dropped] = view.closing;
    assert_eq!(shown + dropped, hits, "{:?}", view.closing);
    assert!(shown <= 1000, "{:?}", view.closing);
    assert_eq!(view.warned, dropped, "the drops bootprof run warns of");
    view.holds_what_a_full_buffer_kept(&dir);

    let dir = w.path("s-attach");
    let view = attach_live(
        &w,
        &dir,
        &[&["-e", "attach:odd", "--duration", "0.2"], &full[..]].concat(),
    );
    assert!(view.closing[2] > 0, "{:?}", view.closing);
    assert_eq!(
        view.warned, view.closing[2],
        "the drops bootprof attach warns of"
    );
    view.holds_what_a_full_buffer_kept(&dir);
}

/// Who starts the container: user 65534 (`setpriv`) when the tests run as root, so that no
/// root is involved; else the user running them.
const NOBODY: [&str; 4] = [
    "setpriv",
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
];

/// `unshare` making a container: a user namespace whose root is the user who runs it (mapped
/// to nothing else: no capability outside it), a pid namespace (the program is its pid 1) with
/// its own /proc, and a mount namespace.
const UNSHARE: [&str; 6] = [
    "unshare",
    "--user",
    "--map-root-user",
    "--pid",
    "--fork",
    "--mount-proc",
];

/// The user who may start containers here, as a command prefix (see [`NOBODY`]): root too if
/// only root may (that container's root still has no capability outside it); `Err`, saying
/// why, when no one may.
fn container_starter(root: bool) -> Result<Vec<&'static str>, String> {
    let mut why = String::new();
    for prefix in [&NOBODY[..], &[]] {
        if !root && !prefix.is_empty() {
            continue;
        }
        let argv = [prefix, &UNSHARE[..], &["true"]].concat();
        let o = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
        if o.status.success() {
            return Ok(prefix.to_vec());
        }
        let sep = if why.is_empty() { "" } else { "; " };
        why += &format!("{sep}`{}`: {}", argv.join(" "), stderr(&o).trim_end());
    }
    Err(why)
}

/// Attaching inside a container needs no capability and no ptrace: `bootprof list --pid` and
/// `bootprof attach`, run in the container's namespaces (`nsenter`) by its root (the
/// unprivileged user who made it), attach to the program there (its pid 1, with its own /tmp
/// as a container has), record what they enabled, and leave every site's NOP behind; and a
/// program and `bootprof attach` both run by an unprivileged user (65534) do the same without
/// any namespace. No root anywhere when the tests run as root.
#[test]
fn attaching_inside_a_container_or_as_an_unprivileged_user_needs_no_capability() {
    // SAFETY: getuid has no preconditions.
    let root = unsafe { super::libc_getuid() } == 0;
    let starter = match container_starter(root) {
        Ok(prefix) => prefix,
        Err(why) => {
            eprintln!("skipped: this machine does not let a container be made here: {why}");
            return;
        }
    };
    let w = Work::new("attach-container");
    let exe = copy_for_all(&w, &w.build("attach", &["attach.c"], &[], &[]), "bin");
    // Where sessions go: anyone may make one there (the container's root may be user 65534).
    let sessions = w.path("sessions");
    std::fs::create_dir(&sessions).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sessions, std::fs::Permissions::from_mode(0o777)).unwrap();
    // The container's own /tmp (a tmpfs), as a container has, the test's directory bound into
    // it at its place. (Sharing the host's, the container's root, user 0 there, would find
    // /tmp/.bootprof-0 the host's root's: not its own, so no attach.)
    let script = "exec 3<\"$1\" && mount -t tmpfs tmpfs /tmp && mkdir -p \"$1\" && \
                  mount --no-canonicalize --bind /proc/self/fd/3 \"$1\" && exec 3<&- && \
                  exec \"$2\" \"$3\"";
    let work = w.0.to_str().unwrap();
    let wrapper = [&starter[..], &UNSHARE, &["sh", "-c", script, "sh", work]].concat();
    let mut t = Target::start(&exe, 2, &wrapper, &[]);
    // The program is the child of unshare, whose pid `start` knows.
    let children = format!("/proc/{0}/task/{0}/children", t.pid);
    t.pid = std::fs::read_to_string(children)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let outer = t.pid.to_string();
    let nsenter = ["nsenter", "--target", &outer, "--user", "--pid", "--mount"];
    let inside = [&starter[..], &nsenter, &["--preserve-credentials"]].concat();
    let dir = sessions.join("container");
    attaches_and_detaches(&t, &inside, "1", &dir);
    assert_eq!(
        session_of(&dir).0.pid,
        1,
        "the lane names the pid the container sees"
    );
    t.finish();

    if !root {
        eprintln!("not tried: a program of user 65534 (the tests do not run as root)");
        return;
    }
    let t = Target::start(&exe, 2, &NOBODY, &[]);
    let dir = sessions.join("nobody");
    attaches_and_detaches(&t, &NOBODY, &t.pid.to_string(), &dir);
    t.finish();
}

/// Runs `bootprof list --pid PID` (the target `t` as `prefix` sees it: `pid`), `bootprof
/// attach` recording attach:odd into `dir`, and `bootprof list --pid` again, each through
/// `prefix`: the attach records what it enabled, only while attached, and afterwards every
/// site holds its NOP again (as the runtime says, and as the program's memory shows).
fn attaches_and_detaches(t: &Target, prefix: &[&str], pid: &str, dir: &Path) {
    let exe = tools().join("bootprof");
    let bootprof = |args: &[&str]| {
        let all = [prefix, &[exe.to_str().unwrap()], args].concat();
        Command::new(all[0])
            .args(&all[1..])
            .current_dir("/")
            .output()
            .unwrap()
    };
    let nops = "4 sites, 0 enabled; every disabled site holds its NOP\n";
    let before = ok(&bootprof(&["list", "--pid", pid]));
    assert!(before.ends_with(nops), "{before}");
    let dir_arg = dir.to_str().unwrap();
    let options = ["-e", "attach:odd", "--mode", "call", "--duration", "0.3"];
    let o = bootprof(&[&["attach", pid, "-o", dir_arg], &options[..]].concat());
    ok(&o);
    assert!(
        stderr(&o).starts_with(&format!(
            "bootprof: attached to process {pid}: 2 sites enabled"
        )),
        "{}",
        stderr(&o)
    );
    let after = ok(&bootprof(&["list", "--pid", pid]));
    assert!(after.ends_with(nops), "{after}");
    assert_eq!(t.text_differences(), 0, "the text is not the file's");
    let got = events(dir);
    assert!(!got.is_empty(), "nothing recorded");
    assert!(got.iter().all(|(name, arg)| name == "odd" && arg % 2 == 1));
}

/// What `bootprof attach` and `bootprof list --pid` say of a process they cannot attach to, each
/// a clear error (exit status 1) that changes nothing: no such process, one that has ended (a
/// zombie), a signal name attaching may not use, a user directory others may enter, and a
/// process without bootprof's runtime (no answer to the knock).
#[test]
fn what_cannot_be_attached_to_is_said() {
    let fails_with = |args: &[&str], want: &str| {
        let o = bootprof(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with("bootprof: error: ") && stderr(&o).contains(want),
            "{args:?}: {}",
            stderr(&o)
        );
    };
    // Counting records nothing: options that say how to record are refused with it, before
    // anything is attached to.
    for option in [
        &["-o", "x"][..],
        &["--keep", "last"],
        &["--buffer", "10"],
        &["--live"],
    ] {
        let args = [&["attach", "1", "--count"][..], option].concat();
        let o = bootprof(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot be used with"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    // pid_max is never a process's id.
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap();
    let none = pid_max.trim();
    fails_with(&["attach", none], &format!("no process {none}"));
    fails_with(&["list", "--pid", none], &format!("no process {none}"));

    // A child that exited and was not reaped yet.
    let mut zombie = Command::new("true").spawn().unwrap();
    let zpid = zombie.id().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(format!("/proc/{zpid}/status"))
        .unwrap()
        .contains("State:\tZ")
    {
        assert!(std::time::Instant::now() < deadline, "true never exited");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    fails_with(&["attach", &zpid], &format!("process {zpid} has ended"));
    zombie.wait().unwrap();

    // A process without the runtime ignores the knock (SIGURG's default); a bad signal name is
    // refused before any knock.
    let mut plain = Command::new("sleep").arg("60").spawn().unwrap();
    let ppid = plain.id().to_string();
    fails_with(
        &["attach", &ppid, "--signal", "KILL"],
        "KILL is not a signal attaching may use",
    );
    fails_with(
        &["attach", &ppid, "--duration", "0.1"],
        &format!("no answer from process {ppid} within 5 s"),
    );

    // A user directory that others may enter is refused, not used (user 65533's: no other test
    // makes one).
    let dir = Path::new("/tmp/.bootprof-65533");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir(dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(dir, Some(65533), Some(65533)).unwrap();
    let mut theirs = Command::new("setpriv")
        .args([
            "--reuid=65533",
            "--regid=65533",
            "--clear-groups",
            "sleep",
            "60",
        ])
        .spawn()
        .unwrap();
    let tpid = theirs.id().to_string();
    // setpriv execs sleep: wait until the process runs as 65533.
    while !std::fs::read_to_string(format!("/proc/{tpid}/status"))
        .unwrap()
        .contains("Uid:\t65533")
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    fails_with(
        &["attach", &tpid],
        "/tmp/.bootprof-65533 is not a directory private to user 65533 (mode 0700): remove it",
    );
    for child in [&mut plain, &mut theirs] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `bootprof attach --count`: the hits of the sites it enabled while it was attached, exact with
/// four threads on one site (the runtime's plain counter loses some), in both modes; hits before
/// and after it, and those of an earlier attach, are not in its table; the program prints no
/// table of its own at exit.
#[test]
fn an_attach_counts_exactly_the_hits_made_while_attached() {
    let w = Work::new("attach-count");
    let exe = w.build("attach_count", &["attach_count.c"], &[], &[]);
    let mut child = Command::new(&exe)
        .env_remove("BOOTPROF_ENABLE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut run_hits = |n: u64| {
        use std::io::Write;
        writeln!(input, "{n}").unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(line == "ready\n" || line == format!("done {n}\n"), "{line}");
        if line == "ready\n" {
            line.clear();
            out.read_line(&mut line).unwrap();
            assert_eq!(line, format!("done {n}\n"));
        }
    };
    let pid = child.id().to_string();
    run_hits(1000);
    for (mode, n) in [("trap", 20_000u64), ("call", 250_000), ("call", 100_000)] {
        let mut client = Command::new(tools().join("bootprof"))
            .args(["attach", &pid, "--count", "--mode", mode, "-e", "ac:*"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = BufReader::new(client.stderr.take().unwrap());
        let mut line = String::new();
        said.read_line(&mut line).unwrap();
        assert!(
            line.starts_with(&format!(
                "bootprof: attached to process {pid}: 4 sites enabled in {mode} mode, counting"
            )),
            "{line}"
        );
        run_hits(n);
        Command::new("kill")
            .args(["-INT", &client.id().to_string()])
            .status()
            .unwrap();
        let mut rest = String::new();
        said.read_to_string(&mut rest).unwrap();
        let o = client.wait_with_output().unwrap();
        assert!(o.status.success(), "{rest}");
        assert!(
            rest.contains("4 sites disabled again, each holds its NOP"),
            "{rest}"
        );
        let table = String::from_utf8(o.stdout).unwrap();
        let want = format!(
            "     hits  kind        site\n{:>9}  probe       ac:hot\n{:>9}  probe       ac:warm\n",
            4 * n,
            2 * n
        );
        assert_eq!(table, want, "{mode} mode, {n} hits a thread");
        run_hits(1000);
    }
    drop(input);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "",
        "no table of its own"
    );
}

/// The `count` request, spoken by hand: it must come before the first `enable` (the hits each
/// site had when it was enabled are taken then), and an attach counts or records, once; each
/// refusal leaves the attach as it was, and its detach disables what it enabled.
#[test]
fn the_count_request_refuses_what_it_cannot_mix() {
    use bootprof_report::channel::Channel;
    let w = Work::new("attach-count-refusals");
    let exe = w.build("attach", &["attach.c"], &[], &[]);
    let t = Target::start(&exe, 2, &[], &[]);
    let refused = |ch: &mut Channel, request: &str| -> String {
        let e = ch.request(request).expect_err(request);
        e.strip_prefix(&format!("process {}: ", t.pid))
            .unwrap_or_else(|| panic!("{e}"))
            .to_string()
    };
    let detached = |mut ch: Channel| ch.request("detach").unwrap();

    let mut ch = Channel::open(t.pid, None, None).unwrap();
    // Each BOOTPROF_PROBE is two sites: the probe and the guard that skips its arguments.
    assert_eq!(ch.request("enable call attach:even").unwrap().1, "2");
    assert_eq!(
        refused(&mut ch, "count"),
        "`count` must come before the first `enable`"
    );
    assert_eq!(
        detached(ch),
        (vec![], "2 0".to_string()),
        "no counts to hand on"
    );

    let mut ch = Channel::open(t.pid, None, None).unwrap();
    assert_eq!(ch.request("count").unwrap().1, "");
    assert_eq!(
        refused(&mut ch, "count"),
        "this attach records or counts already"
    );
    let session = w.path("session");
    std::fs::create_dir_all(&session).unwrap();
    let record = format!("record all 1000 {}", session.display());
    assert_eq!(
        refused(&mut ch, &record),
        "this attach records or counts already"
    );
    assert_eq!(ch.request("enable call attach:odd").unwrap().1, "2");
    let (lines, answer) = detached(ch);
    assert_eq!(answer, "2 0");
    let counted: Vec<String> = lines
        .iter()
        .map(|l| bootprof_format::attach::SiteLine::decode(l).unwrap().name)
        .collect();
    assert_eq!(
        counted,
        ["odd"],
        "the probe this attach enabled (its guard's hits are its)"
    );

    let mut ch = Channel::open(t.pid, None, None).unwrap();
    assert_eq!(ch.request(&record).unwrap().1, "");
    assert_eq!(
        refused(&mut ch, "count"),
        "this attach records or counts already"
    );
    assert_eq!(detached(ch).1, "0 0", "nothing enabled, nothing to disable");

    let listing = ok(&bootprof(&["list", "--pid", &t.pid.to_string()]));
    assert!(listing.contains(" 0 enabled;"), "{listing}");
    assert_eq!(t.text_differences(), 0);
    t.finish();
}
