//! Fuzz target: `rewrite_object` must never panic, and rewriting is idempotent.
//!
//! Takes arbitrary bytes as a relocatable object. When the rewriter produces a new object, that
//! object is rewritten again: it must be accepted (`Ok`) and come back unchanged (`bytes: None`),
//! since every site in it is already a NOP and the call sites are gone.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(first) = bootprof_link::rewrite_object(data, "fuzz.o") else {
        return;
    };
    let Some(bytes) = first.bytes else {
        return;
    };
    match bootprof_link::rewrite_object(&bytes, "fuzz.o") {
        Ok(second) => assert!(
            second.bytes.is_none(),
            "rewriting is not idempotent: the rewritten object ({} sites) was rewritten again \
             ({} sites)",
            first.found.sites.len(),
            second.found.sites.len()
        ),
        Err(e) => panic!(
            "the rewritten object ({} sites) is rejected by the rewriter: {e}",
            first.found.sites.len()
        ),
    }
});
