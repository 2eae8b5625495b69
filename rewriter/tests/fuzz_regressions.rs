//! Fuzz regressions: `rewrite_object` must return (`Ok` or `Err`), never panic, on every input
//! the fuzzer (`rewriter/fuzz/run`) has found to crash it, kept in `rewriter/fuzz/regressions/`,
//! and on the seed objects `rewriter/fuzz/make-seeds` compiles, when they are present in
//! `rewriter/fuzz/corpus/rewrite_object/` (the `.o` files there; the corpus is not committed).
//!
//! Each input runs under `catch_unwind` so that one failure lists every input that panics.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn files(dir: &Path, only_objects: bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| !only_objects || p.extension().is_some_and(|e| e == "o"))
        .collect();
    files.sort();
    files
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}

/// Every regression input and seed object: the call returns, whatever it returns.
#[test]
fn rewrite_object_returns_on_every_fuzz_input() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut inputs = files(&fuzz.join("regressions"), false);
    let seeds = files(&fuzz.join("corpus/rewrite_object"), true);
    if seeds.is_empty() {
        eprintln!("fuzz_regressions: no seed objects (run rewriter/fuzz/make-seeds); skipped them");
    }
    inputs.extend(seeds);

    let mut panicked = Vec::new();
    for path in &inputs {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            // Whatever is rewritten must be accepted again, and left as it is (idempotence).
            if let Ok(bootprof_link::Rewritten {
                bytes: Some(out), ..
            }) = bootprof_link::rewrite_object(&data, &name)
            {
                match bootprof_link::rewrite_object(&out, &name) {
                    Ok(again) => {
                        assert!(again.bytes.is_none(), "rewriting twice changed the object")
                    }
                    Err(e) => panic!("the rewritten object is rejected: {e}"),
                }
            }
        }));
        if let Err(payload) = result {
            panicked.push(format!("{}: {}", path.display(), panic_message(&*payload)));
        }
    }
    assert!(
        panicked.is_empty(),
        "rewrite_object panicked on {} of {} inputs:\n{}",
        panicked.len(),
        inputs.len(),
        panicked.join("\n")
    );
    eprintln!("fuzz_regressions: {} inputs, none panicked", inputs.len());
}

/// The guards of `bootprof.h` (`tests/sources/header-guards`, compiled here at -O0 and -O2, with
/// and without -ffunction-sections): rewriting finds the guards and their out-of-line calls, and a
/// rewritten object is left as it is when rewritten again (its guard records have no relocations
/// left, its calls are NOPs).
#[test]
fn guard_objects_rewrite_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let src = root.join("tests/sources/header-guards/main.c");
    let dir = std::env::temp_dir().join(format!("bootprof-guard-idem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for flags in [&["-O0"][..], &["-O2"], &["-O2", "-ffunction-sections"]] {
        let obj = dir.join("main.o");
        let st = std::process::Command::new("cc")
            .args(flags)
            .arg("-c")
            .arg("-I")
            .arg(root.join("runtime/include"))
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status();
        let Ok(st) = st else {
            eprintln!("skipped: cc not found");
            return;
        };
        assert!(st.success(), "cc {flags:?} {}", src.display());
        let data = std::fs::read(&obj).unwrap();
        let first = bootprof_link::rewrite_object(&data, "main.o").unwrap();
        let guards = first
            .found
            .sites
            .iter()
            .filter(|s| s.form == bootprof_format::Form::Guard)
            .count();
        // Every probe's guard has its call out of line, and every call its guard (inlining and
        // unrolling may copy both).
        let names = |form_is_guard: bool, kind: bootprof_format::Kind| {
            let mut v: Vec<&[u8]> = first
                .found
                .sites
                .iter()
                .filter(|s| (s.form == bootprof_format::Form::Guard) == form_is_guard)
                .filter(|s| s.kind == kind)
                .map(|s| s.symbol)
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let probe = bootprof_format::Kind::Probe;
        assert_eq!(names(true, probe), names(false, probe), "{flags:?}");
        // main.c has 11 probe names and 2 is-enabled tests, all in guards.
        assert_eq!(
            names(true, probe).len(),
            11,
            "{flags:?}: {:#?}",
            first.found.sites
        );
        let isenabled = names(true, bootprof_format::Kind::IsEnabled);
        assert_eq!(isenabled.len(), 2, "{flags:?}");
        assert!(guards >= 13, "{flags:?}: {guards} guards");
        let rewritten = first.bytes.unwrap();
        let again = bootprof_link::rewrite_object(&rewritten, "main.o").unwrap();
        assert!(
            again.bytes.is_none() && again.found.sites.is_empty(),
            "{flags:?}: rewritten twice"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
