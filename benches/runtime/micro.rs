//! Micro-benchmarks of the runtime's hot paths, in one run:
//! - the SIGTRAP handler's and call-mode dispatcher's site lookup: hash table vs binary search,
//!   over 1,000 to 1,000,000 sites;
//! - one record into the event log, without and with reading the timestamp.
//!
//! `cargo bench -p bootprof-runtime --bench micro` (`-- --quick` for a short check).
fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let lookups = if quick { 20_000 } else { 2_000_000 };
    println!(
        "{:>10} {:>14} {:>16} {:>8}",
        "sites", "hash ns/lookup", "binary ns/lookup", "ratio"
    );
    for n in [1_000usize, 100_000, 1_000_000] {
        let (hash, sorted) = bootprof_runtime::registry::lookup_benchmark(n, lookups);
        println!(
            "{n:>10} {hash:>14.1} {sorted:>16.1} {:>7.2}x",
            sorted / hash
        );
    }
    let n = if quick { 10_000 } else { 1_000_000 };
    let (bare, with_tsc) = bootprof_runtime::recorder::record_benchmark(n);
    println!();
    println!("{:<44} {:>10}", "one record into the event log", "ns");
    println!("{:<44} {:>10.2}", "without reading the timestamp", bare);
    println!("{:<44} {:>10.2}", "with rdtsc", with_tsc);
}
