//! Clocks: takes nothing; hands on the time stamp counter (what hits and records are stamped
//! with), `CLOCK_MONOTONIC` and `CLOCK_REALTIME` in nanoseconds, and the TSC's rate measured
//! against the monotonic clock.

/// Reads the time stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc is available on every x86-64 CPU.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// `clock`, in nanoseconds.
fn ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC`, in nanoseconds.
pub(crate) fn monotonic_ns() -> u64 {
    ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME`, in nanoseconds.
pub(crate) fn realtime_ns() -> u64 {
    ns(libc::CLOCK_REALTIME)
}

/// The TSC and `CLOCK_MONOTONIC` now.
pub(crate) fn now() -> (u64, u64) {
    (rdtsc(), monotonic_ns())
}

/// TSC ticks per second between two readings of [`now`], if they lie at least `min_ns` apart.
pub(crate) fn hz_between((t0, n0): (u64, u64), (t1, n1): (u64, u64), min_ns: u64) -> Option<u64> {
    (n1.saturating_sub(n0) >= min_ns.max(1))
        .then(|| (t1.wrapping_sub(t0) as u128 * 1_000_000_000 / u128::from(n1 - n0)) as u64)
}

/// TSC ticks per second, measured over about 2 ms now (sleeping, not spinning): good to a
/// tenth of a percent, for a bound given in nanoseconds.
pub(crate) fn quick_tsc_hz() -> u64 {
    let start = now();
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 2_000_000,
    };
    loop {
        // SAFETY: nanosleep reads our timespec; an interrupted sleep only ends early.
        unsafe { libc::nanosleep(&pause, core::ptr::null_mut()) };
        if let Some(hz) = hz_between(start, now(), 2_000_000) {
            return hz;
        }
    }
}
