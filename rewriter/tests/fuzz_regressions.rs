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
            if let Ok(bootprof_rewriter::Rewritten {
                bytes: Some(out), ..
            }) = bootprof_rewriter::rewrite_object(&data, &name)
            {
                match bootprof_rewriter::rewrite_object(&out, &name) {
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
