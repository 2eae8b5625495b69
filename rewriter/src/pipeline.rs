//! The pipeline, top to bottom: [`run_link`] calls each phase in order with what the one before
//! handed on: args -> gather -> rewrite (scan -> patch -> emit, per object) -> stubs -> link.

use crate::error::{Error, Result};
use crate::{args, check, driver, gather, link, rewrite, runtime_lib, stubs};
use std::path::Path;
use std::time::Instant;

/// Runs `bootprof-link` with `argv` (without argv[0]), linking `runtime` into programs; returns
/// the process exit code.
pub fn run_link(argv: Vec<String>, runtime: &runtime_lib::Embedded) -> Result<i32> {
    let start = Instant::now();
    let driver = std::env::var("BOOTPROF_CC").unwrap_or_else(|_| "cc".into());
    let flags = std::env::var("BOOTPROF_LINK_FLAGS").unwrap_or_default();
    let line = args::parse(argv, &driver, &flags)?;
    if let Some(why) = line.passthrough {
        if line.options.verbose {
            eprintln!("bootprof-link: passing the line through unchanged: {why}");
        }
        return Err(driver::exec_unchanged(&line));
    }
    let dir = PrivateDir::new(line.options.keep_temps)?;
    let gathered = gather::gather(&line, dir.path())?;
    let largest_object = gathered
        .inputs
        .iter()
        .filter(|i| i.kind == gather::InputKind::Object)
        .filter_map(|i| match &i.data {
            Some(data) => Some(data.len()),
            None => std::fs::metadata(&i.path).ok().map(|m| m.len() as usize),
        })
        .max();
    allocate_in_huge_pages(largest_object.unwrap_or(0));
    let archives = gathered.archives;
    let codegen = gathered.codegen;
    let rewrites = rewrite::rewrite_inputs(&line, gathered, dir.path())?;
    let scanned = start.elapsed();
    for note in &rewrites.notes {
        eprintln!("bootprof-link: {note}");
    }
    let mut args = rewrites.args;
    // Our mcount/__fentry__ replace glibc's: -pg must not bring in gcrt1.o and gmon, whether or
    // not this link found hooks.
    args.retain(|a| a != "-pg");
    let runtime = if !rewrites.referenced.is_empty() || rewrites.uses_runtime {
        runtime_lib::runtime_args(&line, runtime, rewrites.uses_runtime, rewrites.walks_stacks)?
    } else {
        runtime_lib::RuntimeArgs::default()
    };
    if !rewrites.referenced.is_empty() {
        let symbols: Vec<_> = rewrites
            .referenced
            .iter()
            .map(|(n, k)| (n.clone(), *k))
            .collect();
        let stubs = stubs::stub_object(&symbols, runtime.library.as_deref())?;
        args.push(write_private(dir.path(), "bootprof-stubs.o", &stubs)?);
        if !line.has_linker_script() {
            // The table's place and bounds; a program with its own script INCLUDEs the fragment.
            let script = write_private(dir.path(), "bootprof-sites.ld", stubs::SITES_SCRIPT)?;
            write_private(dir.path(), "bootprof-sites.inc", stubs::SITES_FRAGMENT)?;
            args.push(format!("-L{}", dir.path().display()));
            args.push(format!("-Wl,-T,{script}"));
        }
    } else if runtime.library.is_some() {
        // The lean runtime without a stub object to name its library: not made (a lean runtime
        // goes only to links with sites, whose probe symbols get stubs).
        return Err(Error::Internal(
            "the lean runtime was chosen for a link without stubs".into(),
        ));
    }
    args.extend(runtime.args);
    let traced = check::traced_symbols(rewrites.referenced.keys().map(Vec::as_slice));
    let (code, checked) = link::final_link(&line, args, &traced, dir.path(), || dir.remove())?;
    if line.options.stats {
        let total = start.elapsed();
        // One write: stderr is unbuffered, and `eprintln!` writes each piece on its own.
        let stats = format!(
            "bootprof-link: stats: objects={} archives={} relocations={} sites={} scan_ms={:.3} link_ms={:.3} total_ms={:.3} codegen_ms={:.3} check_ms={:.3}\n",
            rewrites.objects,
            archives,
            rewrites.relocations,
            rewrites.sites,
            (scanned - codegen).as_secs_f64() * 1e3,
            (total - scanned - checked).as_secs_f64() * 1e3,
            total.as_secs_f64() * 1e3,
            codegen.as_secs_f64() * 1e3,
            checked.as_secs_f64() * 1e3
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), stats.as_bytes());
    }
    Ok(code)
}

/// Sets the C library's allocator up for a process that runs one link and exits (the
/// `bootprof-link` command): the memory the process frees is kept for its next allocations.
/// Each object's rewritten sections are freed once written, and by default glibc hands blocks of
/// 128 KiB and more back to the kernel at once, so the next object faulted them in again, page
/// by page, and every thread was interrupted to flush its TLB (1 ms of the 7 ms rewriting
/// linkbench's 42 objects). With another C library than glibc, nothing.
pub fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets the allocator's thresholds; called before any thread starts.
    unsafe {
        // The largest threshold glibc takes for mapping a block of its own: 32 MiB.
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

/// For a link with an object of [`LARGE_OBJECT`] bytes or more, before the rewriting starts
/// its threads (after [`tune_allocator`]): every thread allocates from the one heap, whose
/// first [`HEAP_IN_HUGE_PAGES`] bytes are advised into transparent huge pages. A fresh process
/// faults in every page it writes: rewriting sqlite3's objects built with
/// `-finstrument-functions` (2.5 MB and 0.5 MB) took about 1,800 more page faults, one each,
/// with an arena of each thread's own, then freed them all at exit. Where the kernel gives huge
/// pages only to memory advised so (`enabled` `madvise`, the usual setting) or to all, one fault
/// makes 2 MiB; where it gives none, the advice does nothing. Not for links of small objects
/// only: there the threads' many small allocations wait for each other on the one heap
/// (linkbench's 42 objects of 300 KB at most: 0.5-0.7 ms more), and few pages are new.
pub fn allocate_in_huge_pages(largest_object: usize) {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets the allocator's parameters, called before any thread starts;
    // the block is ours from malloc to free, and the advice changes no byte of it.
    unsafe {
        if largest_object < LARGE_OBJECT {
            return;
        }
        libc::mallopt(libc::M_ARENA_MAX, 1);
        // A block below the mapping threshold comes from the heap, and goes back to its top
        // when freed (never trimmed): the heap's next allocations are in the advised range.
        let block = libc::malloc(HEAP_IN_HUGE_PAGES) as usize;
        if block != 0 {
            let start = block.next_multiple_of(4096);
            let end = (block + HEAP_IN_HUGE_PAGES) & !4095;
            libc::madvise(start as *mut _, end - start, libc::MADV_HUGEPAGE);
            libc::free(block as *mut _);
        }
    }
}

/// The size of an object from which [`allocate_in_huge_pages`] gives the heap huge pages.
pub const LARGE_OBJECT: usize = 1 << 20;

/// How much of the heap [`allocate_in_huge_pages`] advises into huge pages: address space only
/// until written, and more than a link of a few large objects needs at once.
pub const HEAP_IN_HUGE_PAGES: usize = 30 << 20;

/// Writes `contents` to `name` in the private directory; returns its path.
fn write_private(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> Result<String> {
    let path = dir.join(name);
    std::fs::write(&path, contents).map_err(|e| Error::io(&path, e))?;
    Ok(path.display().to_string())
}

/// The private directory of rewritten inputs and generated files, removed when dropped unless
/// kept (`--keep-temps`).
struct PrivateDir {
    dir: Option<tempfile::TempDir>,
    keep: bool,
}

impl PrivateDir {
    fn new(keep: bool) -> Result<PrivateDir> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("bootprof-link.{}.", std::process::id()))
            .tempdir()
            .map_err(|e| Error::io(std::env::temp_dir(), e))?;
        Ok(PrivateDir {
            dir: Some(dir),
            keep,
        })
    }

    fn path(&self) -> &Path {
        self.dir.as_ref().expect("present until dropped").path()
    }

    /// Removes the directory and its files, unless they are to be kept; whatever that leaves
    /// (a directory in it) goes when dropped. Errors are ignored, as dropping a `TempDir`
    /// ignores them. (On a thread beside the output check: removing the directory itself takes
    /// ext4 a quarter of a millisecond.)
    fn remove(&self) {
        if self.keep {
            return;
        }
        if let Ok(entries) = std::fs::read_dir(self.path()) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let _ = std::fs::remove_dir(self.path());
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let dir = self.dir.take().expect("present until dropped");
        if self.keep {
            eprintln!(
                "bootprof-link: kept temporary files in {}",
                dir.keep().display()
            );
        }
    }
}
