//! Probes in a Rust program, enabled and handled in-process.
//! Build and run through bootprof-link (see examples/run).
use bootprof_runtime::{probe, probe_enabled, Mode};
use std::sync::atomic::{AtomicU64, Ordering};

fn checksum(data: &[u8]) -> u64 {
    let mut h = 1469598103934665603u64;
    for (i, &b) in data.iter().enumerate() {
        h = (h ^ u64::from(b)).wrapping_mul(1099511628211);
        probe!(rust, byte, i, b);
    }
    h
}

fn main() {
    static SEEN: AtomicU64 = AtomicU64::new(0);
    let data = b"zero-cost probes";
    println!("disabled: checksum {:x}, enabled? {}", checksum(data), probe_enabled!(rust, byte));
    let sites = bootprof_runtime::sites();
    println!("sites: {}", sites.len());
    bootprof_runtime::add_handler("rust:*", |hit| {
        SEEN.fetch_add(hit.args[1], Ordering::Relaxed);
    })
    .expect("handler");
    for mode in [Mode::Trap, Mode::Call] {
        SEEN.store(0, Ordering::Relaxed);
        let n = bootprof_runtime::enable_with("rust:*", mode).expect("enable");
        let sum = checksum(data);
        let expect: u64 = data.iter().map(|&b| u64::from(b)).sum();
        println!(
            "{mode:?}: {n} sites enabled, checksum {sum:x}, handler saw byte sum {} (expected {expect}), enabled? {}",
            SEEN.load(Ordering::Relaxed),
            probe_enabled!(rust, byte)
        );
        bootprof_runtime::disable("*").expect("disable");
    }
}
