//! Fuzz regressions: the trace and session readers must return (`Ok` or `Err`), never panic, on
//! every input the fuzzer (`runtime/report/fuzz/run`) has found to crash them, kept in
//! `runtime/report/fuzz/regressions/`, and on the seeds `runtime/report/fuzz/make-seeds` records,
//! when they are present in `runtime/report/fuzz/corpus/read_trace/` (the `.lane` and `.trace`
//! files there; the corpus is not committed). What reads back is reported in every format, as
//! the fuzz target does, and its Chrome report must be JSON.
//!
//! Each input runs under `catch_unwind` so that one failure lists every input that panics.

use bootprof_report::{write_report, Format, Options};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn files(dir: &Path, only_seeds: bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| !only_seeds || p.extension().is_some_and(|e| e == "lane" || e == "trace"))
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

/// What the fuzz target (`runtime/report/fuzz/fuzz_targets/read_trace.rs`) does with one input.
fn read_and_report(data: &[u8]) {
    let Ok(trace) = bootprof_report::input::parse(data, "fuzz input") else {
        return;
    };
    let _ = trace.losses();
    let options = Options::default();
    for format in Format::ALL {
        let mut out = Vec::new();
        write_report(&trace, format, &options, &mut out)
            .unwrap_or_else(|e| panic!("{format:?}: writing into memory failed: {e}"));
        if format == Format::Chrome {
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&out) {
                panic!("the Chrome report is not JSON: {e}");
            }
        }
        if format == Format::Perfetto {
            // A Perfetto trace is `repeated TracePacket packet = 1`: key 0x0a, length, packet.
            let mut rest = &out[..];
            while !rest.is_empty() {
                let key = prost::encoding::decode_varint(&mut rest);
                let len = prost::encoding::decode_varint(&mut rest);
                match (key, len) {
                    (Ok(0x0a), Ok(n)) if n as usize <= rest.len() => rest = &rest[n as usize..],
                    _ => panic!("the Perfetto report is not a stream of packets"),
                }
            }
        }
    }
}

/// Every regression input and seed: reading returns, whatever it returns, and so do the reports.
#[test]
fn readers_return_on_every_fuzz_input() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut inputs = files(&fuzz.join("regressions"), false);
    assert!(
        !inputs.is_empty(),
        "no regression inputs in {}",
        fuzz.display()
    );
    let seeds = files(&fuzz.join("corpus/read_trace"), true);
    if seeds.is_empty() {
        eprintln!("fuzz_regressions: no seeds (run runtime/report/fuzz/make-seeds); skipped them");
    }
    inputs.extend(seeds);

    let mut panicked = Vec::new();
    for path in &inputs {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let result = panic::catch_unwind(AssertUnwindSafe(|| read_and_report(&data)));
        if let Err(payload) = result {
            panicked.push(format!("{}: {}", path.display(), panic_message(&*payload)));
        }
    }
    assert!(
        panicked.is_empty(),
        "reading or reporting panicked on {} of {} inputs:\n{}",
        panicked.len(),
        inputs.len(),
        panicked.join("\n")
    );
    eprintln!("fuzz_regressions: {} inputs, none panicked", inputs.len());
}
