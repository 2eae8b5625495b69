//! Micro-benchmarks of the runtime's hot paths, in one run:
//! - the SIGTRAP handler's and call-mode dispatcher's site lookup: the table's address buckets vs
//!   binary search, over 1,000 to 1,000,000 sites;
//! - one record into the event log, without and with reading the timestamp: into anonymous
//!   memory (no session), and into a session's lane file keeping the start, the last records or
//!   all of them (each in a process of its own: the recorder's buffer is one per process); the
//!   buffer grown beforehand, and (a third figure) while it grows.
//!
//! `cargo bench -p bootprof-runtime --bench micro` (`-- --quick` for a short check).
fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 10_000 } else { 1_000_000 };
    if std::env::var_os("BOOTPROF_MICRO_RECORD").is_some() {
        let (bare, with_tsc, growing) = bootprof_runtime::recorder::record_benchmark(n);
        println!("{bare} {with_tsc} {}", growing.unwrap_or(f64::NAN));
        return;
    }
    let lookups = if quick { 20_000 } else { 2_000_000 };
    println!(
        "{:>10} {:>17} {:>16} {:>8}",
        "sites", "buckets ns/lookup", "binary ns/lookup", "ratio"
    );
    for n in [1_000usize, 100_000, 1_000_000] {
        let (buckets, sorted) = bootprof_runtime::registry::lookup_benchmark(n, lookups);
        println!(
            "{n:>10} {buckets:>17.1} {sorted:>16.1} {:>7.2}x",
            sorted / buckets
        );
    }
    println!();
    println!(
        "one record into the event log, {n} records (ns per record; median of 5 processes each)"
    );
    println!(
        "{:<34} {:>16} {:>12} {:>22}",
        "buffer", "without the TSC", "with rdtsc", "growing, without TSC"
    );
    let session = std::env::temp_dir().join(format!("bootprof-micro-{}", std::process::id()));
    for (label, keep, in_session) in [
        ("memory (no session), keep start", "start", false),
        ("session lane, keep start", "start", true),
        ("session lane, keep last", "last", true),
        ("session lane, keep all", "all", true),
    ] {
        let mut runs: Vec<(f64, f64, f64)> = (0..5)
            .map(|_| {
                let _ = std::fs::remove_dir_all(&session);
                std::fs::create_dir(&session).unwrap();
                let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
                cmd.args(std::env::args().skip(1))
                    .env("BOOTPROF_MICRO_RECORD", "1")
                    .env("BOOTPROF_KEEP", keep)
                    .env_remove("BOOTPROF_SESSION");
                if in_session {
                    cmd.env("BOOTPROF_SESSION", &session);
                }
                let out = cmd.output().unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                let mut f = text.split_whitespace().map(|x| x.parse::<f64>().unwrap());
                (f.next().unwrap(), f.next().unwrap(), f.next().unwrap())
            })
            .collect();
        let mut median = |key: fn(&(f64, f64, f64)) -> f64| {
            runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
            key(&runs[2])
        };
        let (bare, tsc, growing) = (median(|r| r.0), median(|r| r.1), median(|r| r.2));
        let growing = if growing.is_nan() {
            "-".to_string()
        } else {
            format!("{growing:.2}")
        };
        println!("{label:<34} {bare:>16.2} {tsc:>12.2} {growing:>22}");
    }
    let _ = std::fs::remove_dir_all(&session);
}
