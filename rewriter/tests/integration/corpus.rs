//! The corpus: real C and C++ programs under `tests/sources/<case>/`, with directives in comments
//! of the case's first file (`main.c` or `main.cc`), one `#[test]` per case. Each case runs through
//! the whole matrix of [`crate::matrix`].
//!
//! Directives (`//#Key: value`, a key may repeat where it says so):
//!
//! | key | meaning |
//! |---|---|
//! | `Driver` | compiler and link driver: `cc` (default), `c++`, `clang` |
//! | `Objects` | sources compiled to the objects on the link line, in order (default: the first file) |
//! | `Compile` | extra compiler flags |
//! | `Link` | extra link flags, after the inputs |
//! | `Archive` | `libname.a src...`: a static library of these sources, after the objects |
//! | `Shared` | `libname.so src...`: a shared library (-fPIC) the program links against |
//! | `Args` | the program's arguments |
//! | `ExpectStdout` | one line of the expected output (repeat for more lines) |
//! | `ExpectExit` | the expected exit code (default 0) |
//! | `ExpectKinds` | site kinds that must appear in the table |
//! | `ExpectForm` | `O0 form` / `O2 form`: a site form that must appear at that level (repeat) |
//! | `Absent` | functions the link must leave out, with their sites (archive members, gc) |
//! | `Skip` | matrix entries that make no sense for the case: `static`, `no-pie`, `lld` |

use crate::util::{read, source_dir};
use std::path::PathBuf;

/// A corpus case read from its directives.
#[derive(Debug, Default)]
pub struct Case {
    pub dir: PathBuf,
    pub driver: String,
    pub objects: Vec<String>,
    pub compile: Vec<String>,
    pub link: Vec<String>,
    pub archive: Option<(String, Vec<String>)>,
    pub shared: Option<(String, Vec<String>)>,
    pub args: Vec<String>,
    pub expect_stdout: Option<String>,
    pub expect_exit: i32,
    pub expect_kinds: Vec<String>,
    pub expect_forms: Vec<(String, String)>,
    pub absent: Vec<String>,
    pub skip: Vec<String>,
}

fn words(v: &str) -> Vec<String> {
    v.split_whitespace().map(str::to_string).collect()
}

fn library(key: &str, v: &str) -> (String, Vec<String>) {
    let mut w = words(v);
    assert!(
        w.len() >= 2,
        "`{key}` needs a library name and sources: {v}"
    );
    let name = w.remove(0);
    (name, w)
}

impl Case {
    /// Reads the directives of case `name`.
    pub fn load(name: &str) -> Case {
        let dir = source_dir(name);
        let first = ["main.c", "main.cc", "main.cpp"]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{}: no main.c or main.cc", dir.display()));
        let text = String::from_utf8(read(&first)).expect("UTF-8 source");
        let mut case = Case {
            driver: "cc".into(),
            ..Case::default()
        };
        let mut stdout = Vec::new();
        for line in text.lines() {
            let Some(d) = line.trim().strip_prefix("//#") else {
                continue;
            };
            let (key, v) = d
                .split_once(':')
                .unwrap_or_else(|| panic!("{}: bad directive `{line}`", first.display()));
            let v = v.trim();
            match key {
                "Driver" => case.driver = v.to_string(),
                "Objects" => case.objects = words(v),
                "Compile" => case.compile.extend(words(v)),
                "Link" => case.link.extend(words(v)),
                "Archive" => case.archive = Some(library(key, v)),
                "Shared" => case.shared = Some(library(key, v)),
                "Args" => case.args = words(v),
                "ExpectStdout" => stdout.push(v.to_string()),
                "ExpectExit" => case.expect_exit = v.parse().expect("ExpectExit: a number"),
                "ExpectKinds" => case.expect_kinds.extend(words(v)),
                "ExpectForm" => {
                    let (opt, form) = v.split_once(' ').expect("ExpectForm: O0|O2 form");
                    case.expect_forms
                        .push((opt.to_string(), form.trim().to_string()));
                }
                "Absent" => case.absent.extend(words(v)),
                "Skip" => case.skip.extend(words(v)),
                _ => panic!("{}: unknown directive `{key}`", first.display()),
            }
        }
        if case.objects.is_empty() {
            case.objects = vec![first.file_name().unwrap().to_string_lossy().into_owned()];
        }
        if !stdout.is_empty() {
            case.expect_stdout = Some(stdout.join("\n") + "\n");
        }
        case.dir = dir;
        case
    }

    /// Whether the `-pg` family of checks applies (no gmon.out, no gcrt1/gmon symbols).
    pub fn is_pg(&self) -> bool {
        self.compile.iter().any(|f| f == "-pg")
    }
}

/// Every corpus case; each has a test below.
pub const CASES: &[&str] = &[
    "probes-multi-tu",
    "fentry",
    "mcount",
    "instrument-functions",
    "cxx-comdat",
    "static-archive",
    "shared-lib",
    "gc-sections",
    "no-plt",
    "clang-probes",
    "header-guards",
    "header-guards-cxx",
    "header-guards-clang",
];

/// Directories of `tests/sources` that are not corpus cases (each has its own test module).
const NOT_CASES: &[&str] = &[
    "address-taken",
    "bad-input-base",
    "cmake-cxx-project",
    "cmake-project",
    "lto",
    "rust-graph",
    "rust-lto",
    "rust-probes",
];

#[test]
fn every_source_directory_is_a_case_with_a_test() {
    let root = crate::util::repo_root().join("tests/sources");
    let mut dirs: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|d| !NOT_CASES.contains(&d.as_str()))
        .collect();
    dirs.sort();
    let mut cases: Vec<String> = CASES.iter().map(|c| c.to_string()).collect();
    cases.sort();
    assert_eq!(dirs, cases, "tests/sources and corpus::CASES disagree");
    for case in CASES {
        Case::load(case);
    }
}

macro_rules! corpus_tests {
    ($($test:ident => $case:literal,)+) => {
        $(
            #[test]
            fn $test() {
                crate::matrix::run_case($case);
            }
        )+
    };
}

corpus_tests! {
    probes_multi_tu => "probes-multi-tu",
    fentry => "fentry",
    mcount => "mcount",
    instrument_functions => "instrument-functions",
    cxx_comdat => "cxx-comdat",
    static_archive => "static-archive",
    shared_lib => "shared-lib",
    gc_sections => "gc-sections",
    no_plt => "no-plt",
    clang_probes => "clang-probes",
    header_guards => "header-guards",
    header_guards_cxx => "header-guards-cxx",
    header_guards_clang => "header-guards-clang",
}
