//! Times the rewriting core alone: `rewrite_object` over every object named on the command line,
//! in process and on one thread (but that a section of 128 KiB or more shares its
//! instruction-boundary checks with a second thread, as in `bootprof-link`), with the inputs
//! already in memory (no file I/O, no temporary files, no link). Prints one line: `scanbench: objects=N relocations=N sites=N passes=N
//! median_ms=F min_ms=F mrelocs_per_s=F` (throughput from the median pass).
//!
//! usage: bootprof-scanbench [--passes N] OBJECT...
//!        bootprof-scanbench --decode [--passes N] OBJECT...
//!
//! With `--decode`, times decoding each executable section of 64 KiB or more from end to end
//! instead (`bootprof_link::decode::decode_times`): one line a section, with the instructions
//! decoded, how many are left to iced-x86, and the median milliseconds of a pass with
//! `length`, with `fast_length`, and with the section's two halves side by side; and first,
//! what iced-x86's first decode in the process took (it builds its tables then).

use std::time::Instant;

fn main() {
    // The allocator as bootprof-link sets it.
    bootprof_link::pipeline::tune_allocator();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let decode = args.first().is_some_and(|a| a == "--decode");
    if decode {
        args.remove(0);
    }
    let mut passes = 15;
    if args.first().is_some_and(|a| a == "--passes") && args.len() > 1 {
        passes = args[1].parse().expect("--passes takes a number");
        args.drain(..2);
    }
    let inputs: Vec<(String, Vec<u8>)> = args
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
            (p, data)
        })
        .collect();
    if decode {
        decode_sections(&inputs, passes);
        return;
    }
    let largest = inputs.iter().map(|(_, data)| data.len()).max();
    bootprof_link::pipeline::allocate_in_huge_pages(largest.unwrap_or(0));

    let pass = || {
        let (mut relocations, mut sites) = (0, 0);
        for (name, data) in &inputs {
            let r =
                bootprof_link::rewrite_object(data, name).unwrap_or_else(|e| panic!("{name}: {e}"));
            relocations += r.found.relocations;
            sites += r.found.sites.len();
            std::hint::black_box(&r.bytes);
        }
        (relocations, sites)
    };
    let (relocations, sites) = pass(); // warm-up
    let mut ms: Vec<f64> = (0..passes)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(pass());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    println!(
        "scanbench: objects={} relocations={relocations} sites={sites} passes={passes} \
         median_ms={median:.3} min_ms={:.3} mrelocs_per_s={:.2}",
        inputs.len(),
        ms[0],
        relocations as f64 / median / 1e3
    );
}

/// `--decode`: iced-x86's first decode, then each large executable section's decoding times.
fn decode_sections(inputs: &[(String, Vec<u8>)], passes: usize) {
    use bootprof_link::elf::Object;
    let code = [
        0x66, 0x0f, 0x3a, 0x0f, 0xc1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let t = Instant::now();
    std::hint::black_box(bootprof_link::decode::iced_length(&code));
    println!(
        "iced-x86's first decode: {:.3} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    for (name, data) in inputs {
        let object = Object::parse(data, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (index, text) in object.executable_sections() {
            if text.len() < 64 << 10 {
                continue;
            }
            let d = bootprof_link::decode::decode_times(text, passes);
            let ms = |ns: u64| ns as f64 / 1e6;
            println!(
                "{name} {}: {} bytes, {} instructions, {} left to iced; ms a pass: length {:.3}, \
                 fast_length {:.3}, two chains {:.3}",
                object.section_name(index),
                text.len(),
                d.instructions,
                d.to_iced,
                ms(d.length_ns),
                ms(d.fast_ns),
                ms(d.lanes_ns)
            );
        }
    }
}
