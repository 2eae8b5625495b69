//! Panics that unwind through functions whose returns `bootprof run --graph` hooked, caught by
//! `catch_unwind` two frames up, and a backtrace taken inside hooked frames (with
//! `SHOW_BACKTRACE` set). Built by rewriter/tests/integration/rust.rs with `-Zinstrument-mcount`,
//! linked through bootprof-link, depending on the runtime crate.
use std::panic;

#[inline(never)]
fn level3(n: u32) -> u32 {
    if n % 3 == 0 {
        panic!("boom {n}");
    }
    if n == 4 && std::env::var_os("SHOW_BACKTRACE").is_some() {
        eprintln!("{}", std::backtrace::Backtrace::force_capture());
    }
    n * 2
}

#[inline(never)]
fn level2(n: u32) -> u32 {
    level3(n) + 1
}

#[inline(never)]
fn level1(n: u32) -> u32 {
    panic::catch_unwind(|| level2(n)).unwrap_or(100)
}

fn main() {
    // A probe keeps the runtime in the link.
    bootprof_runtime::probe!(rgraph, start);
    panic::set_hook(Box::new(|info| {
        let what = info.payload().downcast_ref::<String>();
        eprintln!("caught: {}", what.map_or("?", |s| s));
    }));
    let sum: u32 = (1..=6).map(level1).sum();
    println!("rust graph sum {sum}");
}
