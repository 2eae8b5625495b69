//! Fuzz target: the trace and session readers must never panic, hang or allocate more than the
//! input justifies, and every report of what they read must be made without a panic.
//!
//! Takes arbitrary bytes: those that start with the lane magic (`BPLANE\0\0`) are one lane file
//! of a recording session, anything else a single trace file (`input::parse`). When the bytes read back, every format `bootprof report` has is written, as
//! `report` writes it (`write_report`), and the Chrome format must be valid JSON.
//!
//! `runtime/report/tests/fuzz_regressions.rs` replays the kept inputs through the same calls.
#![no_main]

use bootprof_report::{write_report, Format, Options};
use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use std::io::{self, Write};

/// Keeps what a report writes up to `LIMIT` bytes and counts the rest, so that the reports of
/// an input read back are checked without the harness itself holding their whole size.
#[derive(Default)]
struct Kept {
    bytes: Vec<u8>,
    dropped: usize,
}

const LIMIT: usize = 1 << 20;

impl Write for Kept {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.dropped == 0 && self.bytes.len() + b.len() <= LIMIT {
            self.bytes.extend_from_slice(b);
        } else {
            self.dropped += b.len();
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = bootprof_report::input::parse(data, "fuzz input") else {
        return;
    };
    let _ = trace.losses();
    let options = Options::default();
    for format in Format::ALL {
        let mut out = Kept::default();
        write_report(&trace, format, &options, &mut out)
            .unwrap_or_else(|e| panic!("{format:?}: writing into memory failed: {e}"));
        if format == Format::Chrome && out.dropped == 0 {
            // Checked for syntax only: building the value would cost more than the report.
            if let Err(e) = serde_json::from_slice::<IgnoredAny>(&out.bytes) {
                panic!("the Chrome report is not JSON: {e}");
            }
        }
    }
});
