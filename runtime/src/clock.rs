//! Clocks: takes nothing; hands on the time stamp counter (what hits and records are stamped
//! with) and `CLOCK_MONOTONIC` in nanoseconds (what the recorder measures the TSC against).

/// Reads the time stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc is available on every x86-64 CPU.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// `CLOCK_MONOTONIC`, in nanoseconds.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// TSC ticks per second, measured over about 2 ms now (sleeping, not spinning): good to a
/// tenth of a percent, for a bound given in nanoseconds.
pub(crate) fn quick_tsc_hz() -> u64 {
    let start = (rdtsc(), monotonic_ns());
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 2_000_000,
    };
    loop {
        // SAFETY: nanosleep reads our timespec; an interrupted sleep only ends early.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
        let now = (rdtsc(), monotonic_ns());
        if now.1.saturating_sub(start.1) >= 2_000_000 {
            return (now.0.wrapping_sub(start.0) as u128 * 1_000_000_000
                / u128::from(now.1 - start.1)) as u64;
        }
    }
}
