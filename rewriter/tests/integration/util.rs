//! Shared helpers: where things are, per-test temporary directories, running commands, finding
//! external tools (a missing one makes a test print "skipped: ..." and return), and the probe
//! symbol naming rules, written again here so the tests do not trust the code they test.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The `bootprof-link` binary under test, in the target directory of this test's profile. The
/// commands are another package of the workspace (`bootprof`, which installs both) and `cargo
/// test` builds only this package, so the first call builds them, once, for the same profile
/// (`bootprof-link` carries the runtime it links into programs).
pub fn link_bin() -> &'static str {
    static LINK: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINK.get_or_init(|| {
        // target/<profile>/deps/integration-<hash>: the profile directory is two levels up.
        let exe = std::env::current_exe().expect("the test binary's path");
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>");
        let link = dir.join("bootprof-link");
        let tool = dir.join("bootprof");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-q", "-p", "bootprof"])
            .current_dir(repo_root());
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd
            .status()
            .expect("cannot run cargo to build the commands");
        assert!(
            status.success() && link.is_file() && tool.is_file(),
            "building {} and {} failed",
            link.display(),
            tool.display()
        );
        link.display().to_string()
    })
}

/// The `bootprof` command under test (`bootprof list`, `run`, `report`): beside `bootprof-link`,
/// built by [`link_bin`] on first use.
pub struct Bootprof;

/// The `bootprof` command under test, usable wherever a program name is.
pub const BOOTPROF: Bootprof = Bootprof;

impl AsRef<OsStr> for Bootprof {
    fn as_ref(&self) -> &OsStr {
        static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        PATH.get_or_init(|| Path::new(link_bin()).with_file_name("bootprof"))
            .as_os_str()
    }
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("rewriter/ has a parent")
        .to_path_buf()
}

/// `tests/sources/<case>` at the repository root.
pub fn source_dir(case: &str) -> PathBuf {
    repo_root().join("tests/sources").join(case)
}

/// A directory of its own for one test under `std::env::temp_dir()`, removed when dropped
/// (kept, and its path printed, when `BOOTPROF_TEST_KEEP` is set).
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// A fresh, empty directory whose name contains `name`, the process id and a counter.
    pub fn new(name: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("bootprof-it-{name}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the directory.
    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.path.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("BOOTPROF_TEST_KEEP").is_some() {
            eprintln!("kept {}", self.path.display());
        } else {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Creates `dir` (and its parents) and returns it.
pub fn mkdir(dir: impl AsRef<Path>) -> PathBuf {
    let dir = dir.as_ref();
    fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir.to_path_buf()
}

/// Reads a file, panicking with its name.
pub fn read(path: impl AsRef<Path>) -> Vec<u8> {
    let path = path.as_ref();
    fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Writes a file, panicking with its name.
pub fn write(path: impl AsRef<Path>, data: impl AsRef<[u8]>) {
    let path = path.as_ref();
    fs::write(path, data).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What a finished command did.
pub struct Out {
    /// The command line, for messages.
    pub cmdline: String,
    /// The exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Out {
    /// Panics, showing the command and its output, unless it exited 0.
    #[track_caller]
    pub fn ok(self) -> Out {
        if self.code != Some(0) {
            panic!("command failed: {self}");
        }
        self
    }

    /// Asserts that the command's stderr has no sign of a Rust panic.
    #[track_caller]
    pub fn no_panic(&self) -> &Out {
        assert!(
            !self.stderr.contains("panicked") && !self.stderr.contains("RUST_BACKTRACE"),
            "the command panicked: {self}"
        );
        self
    }
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\n$ {}\nexit: {:?}\n--- stdout\n{}--- stderr\n{}---",
            self.cmdline, self.code, self.stdout, self.stderr
        )
    }
}

/// The command line of `cmd` as text (environment overrides first), for messages.
pub fn cmdline(cmd: &Command) -> String {
    let mut s = String::new();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            s += &format!("{}={} ", k.to_string_lossy(), v.to_string_lossy());
        }
    }
    if let Some(dir) = cmd.get_current_dir() {
        s = format!("(cd {} && ", dir.display()) + &s;
    }
    s += &cmd.get_program().to_string_lossy();
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains(char::is_whitespace) {
            s += &format!(" '{a}'");
        } else {
            s += &format!(" {a}");
        }
    }
    if cmd.get_current_dir().is_some() {
        s += ")";
    }
    s
}

/// Runs `cmd` (a `Command` or `&mut Command`) to completion with stdin closed, capturing its
/// output.
pub fn run(mut cmd: impl std::borrow::BorrowMut<Command>) -> Out {
    let cmd = cmd.borrow_mut();
    let cmdline = cmdline(cmd);
    let output = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{cmdline}`: {e}"));
    Out {
        cmdline,
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `Command::new(program).args(args)`.
pub fn cmd<I, S>(program: impl AsRef<OsStr>, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = Command::new(program);
    c.args(args);
    c
}

/// Whether `tool` can be run: a program on `PATH` (or a path), or one of the pseudo-tools
/// `lld` (ld.lld for `-fuse-ld=lld`) and `static` (glibc's static libraries for `-static`).
/// Answers are cached.
pub fn have(tool: &str) -> bool {
    static CACHE: Mutex<Option<HashMap<String, bool>>> = Mutex::new(None);
    if let Some(&known) = CACHE
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .get(tool)
    {
        return known;
    }
    let found = match tool {
        "lld" => on_path("ld.lld"),
        "static" => {
            let out = run(&mut cmd("cc", ["-print-file-name=libc.a"]));
            Path::new(out.stdout.trim()).is_absolute()
        }
        _ => on_path(tool),
    };
    CACHE
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .insert(tool.to_string(), found);
    found
}

fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// Headless Chromium with the flags the flame chart tests use (no sandbox, GPU, network or
/// first-run work; a profile of its own in `dir`), or `None` (after saying "skipped") when
/// `BOOTPROF_SKIP_CHROMIUM` is set. Without chromium the test fails: `tests/setup` installs it,
/// and a test that passes without looking would hide a chart that no longer works.
pub fn chromium(dir: &TempDir) -> Option<Command> {
    if std::env::var_os("BOOTPROF_SKIP_CHROMIUM").is_some() {
        skipped("BOOTPROF_SKIP_CHROMIUM is set");
        return None;
    }
    assert!(
        have("chromium"),
        "chromium not found: tests/setup installs it (set BOOTPROF_SKIP_CHROMIUM=1 to skip \
         the flame chart tests that need it)"
    );
    let mut c = cmd(
        "chromium",
        [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ],
    );
    c.arg(format!(
        "--user-data-dir={}",
        dir.join("chromium-profile").display()
    ));
    Some(c)
}

/// Says that (part of) a test was skipped, and why.
pub fn skipped(why: &str) {
    println!("skipped: {why}");
    eprintln!("skipped: {why}");
}

/// Returns from the test (after printing "skipped: <tool> not found") unless every tool is there.
macro_rules! require {
    ($($tool:expr),+ $(,)?) => {
        $(
            if !$crate::util::have($tool) {
                $crate::util::skipped(&format!("{} not found", $tool));
                return;
            }
        )+
    };
}
pub(crate) use require;

/// What a call to `symbol` is, by the naming rules of DESIGN.md: `(kind, provider, name)`;
/// `provider` is empty for the profiling hooks, whose name is the symbol.
pub fn classify(symbol: &str) -> Option<(&'static str, &str, &str)> {
    let hook = match symbol {
        "mcount" => Some("mcount"),
        "__fentry__" => Some("fentry"),
        "__cyg_profile_func_enter" => Some("cyg-enter"),
        "__cyg_profile_func_exit" => Some("cyg-exit"),
        _ => None,
    };
    if let Some(kind) = hook {
        return Some((kind, "", symbol));
    }
    let (kind, rest) = if let Some(rest) = symbol.strip_prefix("__dtrace_sdt_") {
        ("probe", rest)
    } else if let Some(rest) = symbol.strip_prefix("__dtrace_isenabled_") {
        ("is-enabled", rest)
    } else {
        return None;
    };
    let (provider, name) = rest.split_once("__")?;
    if provider.is_empty() || name.is_empty() {
        return None;
    }
    Some((kind, provider, name))
}

/// Whether `symbol` is a named probe or is-enabled symbol (not a hook).
pub fn is_probe_symbol(symbol: &str) -> bool {
    matches!(classify(symbol), Some((kind, _, _)) if kind == "probe" || kind == "is-enabled")
}

/// The defined symbols of `binary`, from `nm`, as `(type letter, name)`.
pub fn nm(binary: &Path) -> Vec<(char, String)> {
    let out = run(&mut cmd("nm", [binary])).ok();
    out.stdout
        .lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace().rev();
            let name = parts.next()?;
            let ty = parts.next()?.chars().next()?;
            Some((ty, name.to_string()))
        })
        .collect()
}

/// The names of the functions (text symbols) `binary` defines.
pub fn defined_functions(binary: &Path) -> std::collections::BTreeSet<String> {
    nm(binary)
        .into_iter()
        .filter(|(ty, _)| matches!(ty, 'T' | 't' | 'W' | 'i'))
        .map(|(_, name)| name)
        .collect()
}

/// The temporaries bootprof-link left in `dir` (`.NAME.bootprof-*.tmp`, its output's name
/// while the link runs): none once it has ended, whether the link failed or not.
pub fn temporaries_left(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".bootprof-"))
        .collect()
}

/// Compiles `src` with `cc -c flags` into `object`, requiring success.
pub fn compile_c(src: &Path, object: &Path, flags: &[&str]) -> PathBuf {
    run(cmd("cc", ["-c"]).args(flags).arg(src).arg("-o").arg(object)).ok();
    object.to_path_buf()
}

/// Compiles the sources of corpus case `case` (each `name.c` listed) into `dir` at -O2.
pub fn compile_case(case: &str, files: &[&str], dir: &Path) -> Vec<PathBuf> {
    files
        .iter()
        .map(|f| {
            let stem = Path::new(f).file_stem().unwrap().to_string_lossy();
            compile_c(
                &source_dir(case).join(f),
                &dir.join(format!("{stem}.o")),
                &["-O2"],
            )
        })
        .collect()
}

/// The `DT_NEEDED` entries of `binary`, in order (`readelf -d`).
pub fn needed(binary: &Path) -> Vec<String> {
    let out = run(cmd("readelf", ["-dW"]).arg(binary)).ok();
    out.stdout
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1))
        .map(|l| l.trim_end_matches(']').to_string())
        .collect()
}
