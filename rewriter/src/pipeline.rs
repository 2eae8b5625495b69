//! The pipeline, top to bottom: [`run_link`] calls each phase in order with what the one before
//! handed on: args -> gather -> rewrite (scan -> patch -> emit, per object) -> stubs -> link.

use crate::args::LinkLine;
use crate::error::{Error, Result};
use crate::leftovers::Leftovers;
use crate::linker::Kind as Linker;
use crate::{args, check, driver, gather, link, pack, rewrite, runtime_lib, stubs};
use bootprof_format::Kind;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Runs `bootprof-link` with `argv` (without `argv[0]`), linking `runtime` into programs; returns
/// the process exit code. What the link leaves to remove (its private directory, a replaced
/// output) is removed after this process has exited ([`Leftovers::remove_after_exit`]; before it
/// returns with `--no-fork`): the caller should exit soon after this returns, writing little
/// memory.
pub fn run_link(argv: Vec<String>, runtime: &runtime_lib::Embedded) -> Result<i32> {
    // The link's own values are dropped before the remover is forked: their memory is not
    // copied for freeing.
    let (code, leftovers) = link(argv, runtime)?;
    leftovers.remove();
    Ok(code)
}

/// [`run_link`]'s link, with what it leaves to remove.
fn link(argv: Vec<String>, runtime: &runtime_lib::Embedded) -> Result<(i32, Leftovers)> {
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
    let linker = known_linker(&line);
    let packs = pack::Plan::new(&line, &gathered, linker.is_some());
    // The boundary checks made while GNU ld links, its one thread leaving the other CPUs free;
    // beside the rewriting for other linkers (lld's threads would share the CPUs with them, and
    // its long start leaves room beside the rewriting).
    let check_later = linker == Some(Linker::Bfd);
    // A link with a large object starts beside the rewriting. With GNU ld, which waits for the
    // rewriting, the rewriting's threads first, the link started from this thread meanwhile
    // (its files written whole in case it does start); with another linker (lld: a long start,
    // in which the rewriting hides), the link first, so that the driver gets a CPU at once.
    let early_wanted = largest_object.unwrap_or(0) >= LARGE_OBJECT;
    let start_link = || {
        early_wanted
            .then(|| start_early(&line, linker, runtime, &gathered, &packs, dir.path()))
            .flatten()
    };
    let (early, rewritten) = if check_later && early_wanted {
        std::thread::scope(|s| {
            let rewriting = s.spawn(|| {
                let whole = early_wanted;
                rewrite::rewrite_each(&line, &gathered, dir.path(), whole, check_later, &packs)
            });
            let early = start_link();
            let rewritten = rewriting.join();
            (
                early,
                rewritten.unwrap_or_else(|p| std::panic::resume_unwind(p)),
            )
        })
    } else {
        let early = start_link();
        let whole = early.is_some();
        let rewritten =
            rewrite::rewrite_each(&line, &gathered, dir.path(), whole, check_later, &packs);
        (early, rewritten)
    };
    if early.is_some() && line.options.verbose {
        eprintln!("bootprof-link: the link started beside the rewriting; its linker waits for bootprof's script");
    }
    let mut rewrites = rewrite::finish_rewrites(&line, gathered, rewritten)?;
    let scanned = start.elapsed();
    for note in &rewrites.notes {
        eprintln!("bootprof-link: {note}");
    }
    // The early link's plan where the rewriting bears out what was foreseen (the line follows
    // from that alone), not made again while its linker waits.
    let (plan, early) = match early {
        Some((running, plan, foreseen)) if foreseen.same_line(&rewrites) => (plan, Some(running)),
        early => {
            if let Some((running, ..)) = early {
                running.abandon();
                // An object whose references to probe symbols are no calls.
                note_abandoned(&line, "the rewriting changed its line");
            }
            (LinkPlan::new(&line, runtime, &rewrites, dir.path())?, None)
        }
    };
    plan.write_stubs(dir.path(), early.is_some())?;
    // The instruction-boundary checks the rewriting left: made while the final link runs (a
    // link started early, or the one started now), its output held back until they pass.
    let later = std::mem::take(&mut rewrites.later);
    if !later.is_empty() && line.options.verbose {
        let calls: usize = later.iter().map(rewrite::LaterChecks::calls).sum();
        eprintln!("bootprof-link: the instruction-boundary checks of {calls} calls are made beside the link");
    }
    let linked = match early {
        Some(mut running) => {
            if running.open(stubs::sites_script().as_bytes())? {
                let checks = || rewrite::check_later(later);
                running.finish_checked(&line, &plan.args, checks)?
            } else {
                // The linker ended without its script: whatever it did is not this link.
                running.abandon();
                note_abandoned(&line, "its linker ended without reading bootprof's script");
                plan.link(&line, dir.path(), later, linker)?
            }
        }
        None => plan.link(&line, dir.path(), later, linker)?,
    };
    if line.options.stats {
        print_stats(&rewrites, archives, start, scanned, codegen, linked.checked);
    }
    let leftovers = Leftovers {
        dir: dir.leave(),
        replaced: linked.replaced,
        now: line.options.no_fork,
    };
    Ok((linked.code, leftovers))
}

/// Prints `--stats`' line: what `rewrites` counted, and where the time from `start` went (the
/// rewriting until `scanned`, of which `codegen` was LTO's, and `checked` in output checks).
fn print_stats(
    rewrites: &rewrite::Rewrites,
    archives: usize,
    start: Instant,
    scanned: std::time::Duration,
    codegen: std::time::Duration,
    checked: std::time::Duration,
) {
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

/// Says, under `--verbose`, that the link started beside the rewriting was abandoned, and why.
fn note_abandoned(line: &LinkLine, why: &str) {
    if line.options.verbose {
        eprintln!("bootprof-link: the link started beside the rewriting was abandoned ({why}); linking again");
    }
}

/// The final link's line, with the files it names that this process writes.
#[derive(Debug)]
struct LinkPlan {
    /// The driver's arguments (the output not yet redirected).
    args: Vec<String>,
    /// The symbols the linker reports the references of ([`check::traced_symbols`]), and the
    /// inputs' own names for their private copies in its messages.
    messages: link::Messages,
    /// The probe symbols to stub; none: no stub object (no site in the link).
    stubs: Vec<(Vec<u8>, Kind)>,
    /// The runtime library the stubs name (the lean runtime loads it).
    library: Option<PathBuf>,
    /// Whether the line names the site table's linker script (not when the link has its own).
    script: bool,
}

/// The stub object's name in the private directory.
const STUBS: &str = "bootprof-stubs.o";
/// The site table's linker script's name in the private directory.
const SCRIPT: &str = "bootprof-sites.ld";

impl LinkPlan {
    /// The final link of `line`, its inputs rewritten as `rewrites` says, linking `runtime`.
    fn new(
        line: &LinkLine,
        runtime: &runtime_lib::Embedded,
        rewrites: &rewrite::Rewrites,
        dir: &Path,
    ) -> Result<LinkPlan> {
        let stubbed = !rewrites.referenced.is_empty();
        let script = stubbed && !line.has_linker_script();
        let mut args = Vec::with_capacity(rewrites.args.len() + 16);
        if script {
            // The table's place and bounds (a program with its own script INCLUDEs the fragment).
            // Before the inputs: lld reads its files in line order, and the script is the gate
            // of a link started early (`link::Gate`).
            args.push(format!("-Wl,-T,{}", dir.join(SCRIPT).display()));
        }
        // Our mcount/__fentry__ replace glibc's: -pg must not bring in gcrt1.o and gmon, whether
        // or not this link found hooks.
        args.extend(rewrites.args.iter().filter(|a| *a != "-pg").cloned());
        let runtime = if stubbed || rewrites.uses_runtime {
            runtime_lib::runtime_args(line, runtime, rewrites.uses_runtime, rewrites.walks_stacks)?
        } else {
            runtime_lib::RuntimeArgs::default()
        };
        if stubbed {
            args.push(dir.join(STUBS).display().to_string());
        } else if runtime.library.is_some() {
            // The lean runtime without a stub object to name its library: not made (a lean
            // runtime goes only to links with sites, whose probe symbols get stubs).
            return Err(Error::Internal(
                "the lean runtime was chosen for a link without stubs".into(),
            ));
        }
        args.extend(runtime.args);
        let traced = check::traced_symbols(rewrites.referenced.keys().map(Vec::as_slice));
        let stubs = rewrites.referenced.iter().map(|(n, k)| (n.clone(), *k));
        Ok(LinkPlan {
            args,
            messages: link::Messages {
                traced,
                renames: link::Renames::new(rewrites.renames.clone()),
            },
            stubs: stubs.collect(),
            library: runtime.library,
            script,
        })
    }

    /// Writes the stub object (`whole`: see [`rewrite::write_file`]).
    fn write_stubs(&self, dir: &Path, whole: bool) -> Result<()> {
        if !self.stubs.is_empty() {
            let stubs = stubs::stub_object(&self.stubs, self.library.as_deref())?;
            let write = |f: &mut std::fs::File| std::io::Write::write_all(f, &stubs);
            rewrite::write_file(&dir.join(STUBS), whole, write)?;
        }
        Ok(())
    }

    /// Runs the link now, its inputs and stubs written: the script a file. `linker`: the
    /// linker the driver runs, when known.
    fn link(
        &self,
        line: &LinkLine,
        dir: &Path,
        later: Vec<rewrite::LaterChecks>,
        linker: Option<Linker>,
    ) -> Result<link::Linked> {
        if self.script {
            // In place of a gate's name, if one was made.
            let _ = std::fs::remove_file(dir.join(SCRIPT));
            write_private(dir, SCRIPT, stubs::sites_script())?;
        }
        let checks = || rewrite::check_later(later);
        link::final_link(
            line,
            &self.args,
            &self.messages,
            dir,
            checks,
            linker.is_some(),
        )
    }
}

/// Starts the final link before the rewriting, on the line the inputs' symbol tables foretell
/// ([`rewrite::foresee`], handed back for the caller to compare), with its linker script as the gate ([`link::Gate`]) that holds the
/// linker until every input is written: the driver and its linker's start (3-4 ms of GNU ld's,
/// about 15 of lld's) run beside the rewriting. Only where that is safe to rely on: a line with
/// bootprof's script (no `-T` of its own), a linker known to read its `-T` scripts first and
/// from a pipe (GNU ld, lld: `linker`, as [`known_linker`] finds it), and not with `--keep-temps` (a
/// kept script must be a file). `None` otherwise, or when anything fails: the link then starts
/// after the rewriting.
///
/// The caller starts it only for a link with an object of [`LARGE_OBJECT`] bytes or more: the
/// driver needs a CPU the rewriting leaves free, which a link dominated by one large object
/// does (its rewriting is one thread's for the most part; sqlite3's `-finstrument-functions`
/// objects, on two CPUs: 2.5-4 ms less with lld, whose start is long, 0.4-2.4 ms with GNU ld).
/// Many smaller objects keep every CPU busy: linkbench's 42 took as long or up to 2 ms longer.
fn start_early(
    line: &LinkLine,
    linker: Option<Linker>,
    runtime: &runtime_lib::Embedded,
    gathered: &gather::Gathered,
    packs: &pack::Plan,
    dir: &Path,
) -> Option<(link::Running, LinkPlan, rewrite::Rewrites)> {
    if line.options.keep_temps || linker.is_none() {
        return None;
    }
    let foreseen = rewrite::foresee(line, gathered, dir, packs)?;
    let plan = LinkPlan::new(line, runtime, &foreseen, dir).ok()?;
    if !plan.script {
        return None;
    }
    let gate = link::Gate::new(&dir.join(SCRIPT)).ok()?;
    let running = link::start(line, &plan.args, &plan.messages, dir, Some(gate), true).ok()?;
    Some((running, plan, foreseen))
}

/// The linker the driver runs for `line`, when it is GNU ld or lld: by the last `-fuse-ld=`,
/// else by what `ld` on `PATH` is. `None` with `-B` (the driver looks for its linker there
/// first) or clang's `--ld-path=`, and for any other linker. Both read their `-T` scripts first
/// (`start_early`).
fn known_linker(line: &LinkLine) -> Option<Linker> {
    if line
        .args
        .iter()
        .any(|a| a.starts_with("-B") || a.starts_with("--ld-path"))
    {
        return None;
    }
    match crate::lto::fuse_ld(line) {
        Some(linker) => crate::linker::kind(linker),
        None => {
            let path = std::env::var_os("PATH")?;
            let ld = std::env::split_paths(&path)
                .map(|d| d.join("ld"))
                .find(|ld| ld.exists())?;
            let ld = std::fs::canonicalize(ld).ok()?;
            crate::linker::kind(&ld.file_name()?.to_string_lossy())
        }
    }
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

/// The size of an object from which [`allocate_in_huge_pages`] gives the heap huge pages, and
/// from which the link starts beside the rewriting (`start_early`): both pay where one large
/// object's rewriting dominates the link.
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
/// kept (`--keep-temps`) or left to remove later ([`PrivateDir::leave`]).
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

    /// The directory's path, for the caller to remove (none when it is kept: said so).
    fn leave(mut self) -> Option<PathBuf> {
        if self.keep {
            return None;
        }
        self.dir.take().map(tempfile::TempDir::keep)
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else {
            return;
        };
        if self.keep {
            eprintln!(
                "bootprof-link: kept temporary files in {}",
                dir.keep().display()
            );
        }
    }
}
