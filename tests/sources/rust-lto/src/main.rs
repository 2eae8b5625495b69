//! A Rust program with one probe call written as `asm!("call ...")` (what the runtime crate's
//! `probe!` macro does: LLVM cannot hoist it), built with LTO: with `-C linker-plugin-lto` its
//! code, and with `-Zinstrument-mcount` its `mcount` hooks, are generated at link time.

use std::arch::asm;

extern "C" {
    fn __dtrace_sdt_rust__tick();
}

#[inline(never)]
fn tick(v: u64) -> u64 {
    // SAFETY: the probe symbol is bootprof's stub, which keeps every register but r11 and takes
    // no argument here.
    unsafe { asm!("call {f}", f = sym __dtrace_sdt_rust__tick, out("r11") _, clobber_abi("C")) };
    v * 2
}

fn main() {
    let mut sum = 0u64;
    for i in 0..10u64 {
        sum += tick(i);
    }
    println!("rust sum {sum}");
}
