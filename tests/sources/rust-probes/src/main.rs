//! A Rust program calling a probe symbol through `extern "C"`: each call compiles to
//! `call *__dtrace_sdt_rust__tick@GOTPCREL(%rip)` (`ff 15` + R_X86_64_GOTPCREL), which
//! bootprof-link turns into a 6-byte NOP. Without bootprof-link the symbol is undefined.

extern "C" {
    fn __dtrace_sdt_rust__tick(v: u64);
}

fn main() {
    let mut sum = 0u64;
    for i in 0..10u64 {
        // SAFETY: the probe symbol is defined by the stub bootprof-link generates; it takes one
        // integer argument and returns at once (or runs the handlers when enabled).
        unsafe { __dtrace_sdt_rust__tick(i) };
        sum += i;
    }
    println!("rust sum {sum}");
}
