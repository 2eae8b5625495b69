//! Rewrite: runs scan -> patch -> emit on one object ([`rewrite_object`], the unit the fuzz
//! target drives), and on every input [`gather`](crate::gather) handed on (`rewrite_each`,
//! `finish_rewrites`): objects in parallel, archives member by member, each changed input
//! written to the private directory. Hands on the link line with the rewritten inputs in place,
//! and what the inputs reference (for `stubs`).

use crate::archive;
use crate::args::{ArgKind, LinkLine};
use crate::elf::map;
use crate::error::{Error, Location, Result};
use crate::gather::{Gathered, Input, InputKind};
use crate::hash::FxHashSet;
use crate::pack::{self, Packer, Role};
use crate::site::{Found, NotASite};
use crate::{emit, patch, scan};
use bootprof_format::{Form, Kind};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The result of rewriting one relocatable object.
#[derive(Debug)]
pub struct Rewritten<'d> {
    /// The new object, or `None` when the object has no sites (use it unchanged).
    pub bytes: Option<Vec<u8>>,
    /// The sites found and patched, and the probe symbols referenced and defined.
    pub found: Found<'d>,
}

/// Rewrites one relocatable x86-64 ELF object: the rewriting core shared by every way of
/// gathering inputs. `file` names the object in messages. An object without sites, including
/// one rewritten before, comes back unchanged (`bytes` is `None`).
pub fn rewrite_object<'d>(data: &'d [u8], file: &str) -> Result<Rewritten<'d>> {
    let (emitted, found) = rewrite_pieces(data, file)?;
    Ok(Rewritten {
        bytes: emitted.map(|e| e.to_vec()),
        found,
    })
}

/// [`rewrite_object`] with the new object as the pieces of its file ([`emit::Emitted`]), most
/// of them borrowed from `data`: what a caller writing it to a file takes, without gathering it
/// into one buffer first.
pub fn rewrite_pieces<'d>(
    data: &'d [u8],
    file: &str,
) -> Result<(Option<emit::Emitted<'d>>, Found<'d>)> {
    let scanned = scan::scan(data, file)?;
    if !patch::defers(&scanned) {
        return emit_plan(patch::verify(scanned)?);
    }
    // The instruction-boundary checks of the large sections (an object compiled with
    // `-finstrument-functions`: each function decoded up to its exit hook) on another thread
    // from the moment their calls are recognised, while this one makes the sites and writes
    // the new object, then on both.
    let deferred = std::sync::OnceLock::new();
    let (checked, done) = std::thread::scope(|s| {
        let (ready, wait) = std::sync::mpsc::channel::<()>();
        let deferred = &deferred;
        let helper = s.spawn(move || {
            wait.recv().is_err() || deferred.get().is_none_or(patch::Deferred::work)
        });
        let plan = patch::verify_deferring(scanned, |d| {
            let _ = deferred.set(d);
            let _ = ready.send(());
        });
        drop(ready);
        let done = plan.and_then(emit_plan);
        let mine = deferred.get().is_none_or(patch::Deferred::work);
        (helper.join().unwrap_or(false) && mine, done)
    });
    if checked {
        return done;
    }
    // A call that is not an instruction (taken for one meanwhile, which may have made another
    // error): verified again without deferring, which says which.
    emit_plan(patch::verify(scan::scan(data, file)?)?)
}

/// The new object's pieces and the sites of `plan`.
fn emit_plan<'d>(plan: patch::Plan<'d>) -> Result<(Option<emit::Emitted<'d>>, Found<'d>)> {
    let emitted = match &plan.object {
        Some(obj) => Some(emit::emit(obj, &plan.found.sites)?),
        None => None,
    };
    Ok((emitted, plan.found))
}

/// [`rewrite_pieces`] with the instruction-boundary checks of the large sections left undone,
/// for [`check_later`] while the final link runs: GNU ld reads the inputs on one CPU, the checks
/// take another. (On two CPUs, the checks made beside the rewriting kept a linker started
/// beside it waiting for its script, and any link waiting for its inputs.) The object is written
/// meanwhile with its calls taken for sites; the link's output is held back until the checks
/// pass, and dropped when one fails.
fn rewrite_checking_later<'d>(
    data: &'d [u8],
    file: &str,
) -> Result<(
    Option<emit::Emitted<'d>>,
    Found<'d>,
    Vec<patch::DeferredSection<'d>>,
)> {
    let scanned = scan::scan(data, file)?;
    let mut deferred = None;
    let done = patch::verify_deferring(scanned, |d| deferred = Some(d)).and_then(emit_plan);
    match done {
        Ok((emitted, found)) => {
            let later = deferred.map_or_else(Vec::new, patch::Deferred::into_sections);
            Ok((emitted, found, later))
        }
        // An error made with calls not yet checked: if one is not an instruction, that is
        // the error to report.
        Err(e) => Err(match deferred {
            Some(d) if !d.work() => not_an_instruction(data, file),
            _ => e,
        }),
    }
}

/// The error for an object some of whose calls a deferred check found off the instruction
/// boundaries: the object verified again without deferring, which says which call (a reference
/// to a probe symbol that is not a site, where the program can reach it).
fn not_an_instruction(data: &[u8], file: &str) -> Error {
    let verified = scan::scan(data, file).and_then(patch::verify);
    match verified.map(|plan| plan.found.not_sites.into_iter().find(|n| n.live)) {
        Err(e) => e,
        Ok(Some(n)) => live_reference(n),
        Ok(None) => Error::Internal(format!(
            "{file}: a deferred instruction-boundary check failed, and the object verified \
             again has every call on a boundary"
        )),
    }
}

/// The instruction-boundary checks of one object's large sections, left by the rewriting for
/// [`check_later`]: the object's mapping, its name, and each section's place in the file with
/// its calls (the offset their function starts at, the call's offset).
pub struct LaterChecks {
    data: Arc<memmap2::Mmap>,
    file: String,
    sections: Vec<LaterSection>,
}

/// A section's place in its file, and its calls as [`patch::DeferredSection`] has them.
type LaterSection = (Range<usize>, Vec<(usize, usize)>);

impl std::fmt::Debug for LaterChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let calls: usize = self.sections.iter().map(|(_, c)| c.len()).sum();
        write!(f, "LaterChecks({}: {calls} calls)", self.file)
    }
}

impl LaterChecks {
    /// The checks `sections` of the object `data` (its sections' bytes among them) names
    /// `file`; `None` when a section's bytes are not `data`'s.
    fn new(
        data: &Arc<memmap2::Mmap>,
        file: &str,
        sections: Vec<patch::DeferredSection<'_>>,
    ) -> Option<LaterChecks> {
        let base = data.as_ptr() as usize;
        let sections = sections
            .into_iter()
            .map(|(text, calls)| {
                let at = (text.as_ptr() as usize).checked_sub(base)?;
                (at + text.len() <= data.len()).then_some((at..at + text.len(), calls))
            })
            .collect::<Option<_>>()?;
        Some(LaterChecks {
            data: Arc::clone(data),
            file: file.to_string(),
            sections,
        })
    }

    /// How many calls it checks.
    pub fn calls(&self) -> usize {
        self.sections.iter().map(|(_, c)| c.len()).sum()
    }
}

/// Runs the checks the rewriting left (see `rewrite_checking_later`) on this thread: `Ok`
/// when every call is on an instruction boundary, else the error that names the first object's
/// call that is not, as the rewriting would have.
pub fn check_later(checks: Vec<LaterChecks>) -> Result<()> {
    for LaterChecks {
        data,
        file,
        sections,
    } in checks
    {
        let sections = sections
            .into_iter()
            .map(|(at, calls)| (&data[at], calls))
            .collect();
        if !patch::Deferred::of(sections).work() {
            return Err(not_an_instruction(&data, &file));
        }
    }
    Ok(())
}

/// What rewriting every input produced.
#[derive(Debug, Default)]
pub struct Rewrites {
    /// The link line's arguments with rewritten inputs substituted.
    pub args: Vec<String>,
    /// Probe symbols referenced by the inputs and defined by none, with their kind: the stubs
    /// to generate.
    pub referenced: BTreeMap<Vec<u8>, Kind>,
    /// Object files looked at (archive members included).
    pub objects: usize,
    /// Relocations in the objects looked at.
    pub relocations: usize,
    /// Sites patched.
    pub sites: usize,
    /// Whether an input calls the runtime's API.
    pub uses_runtime: bool,
    /// Whether an input calls the unwinder's `_Unwind_Backtrace`.
    pub walks_stacks: bool,
    /// Lines for `--verbose`, in input order.
    pub notes: Vec<String>,
    /// The instruction-boundary checks left for [`check_later`] (see `rewrite_each`).
    pub later: Vec<LaterChecks>,
    /// Each private copy, as the linker's messages name it, and its input's own name.
    pub renames: Vec<(String, String)>,
}

impl Rewrites {
    /// Whether `other` makes the same final link line: what the line is made from (the
    /// arguments, the probe symbols to stub, and whether the runtime's API and the unwinder
    /// are called) is the same.
    pub fn same_line(&self, other: &Rewrites) -> bool {
        self.args == other.args
            && self.referenced == other.referenced
            && self.uses_runtime == other.uses_runtime
            && self.walks_stacks == other.walks_stacks
    }
}

/// A guard of `bootprof.h` whose out-of-line call goes to `symbol`, and where it is.
#[derive(Debug, Clone)]
struct GuardCall {
    at: Location,
    symbol: Vec<u8>,
}

/// The outcome of rewriting one input.
#[derive(Default)]
pub(crate) struct Done {
    /// The rewritten copy written alone, in the input's place.
    replacement: Option<PathBuf>,
    /// Whether the rewritten copy went to a pack instead, and where that puts it.
    role: Role,
    /// The names of the probe symbols referenced and defined, one after another: a buffer for
    /// them all, not one allocation a name (thousands, most of them looked at once).
    names: Vec<u8>,
    /// Where each probe symbol referenced is in `names`, and its kind.
    referenced: Vec<(Range<usize>, Kind)>,
    /// Where each probe symbol defined is in `names`.
    defined: Vec<Range<usize>>,
    objects: usize,
    relocations: usize,
    sites: usize,
    uses_runtime: bool,
    walks_stacks: bool,
    notes: Vec<String>,
    guard_calls: Vec<GuardCall>,
    /// The first reference to a probe symbol that is not a site and that the program can reach.
    live: Option<NotASite>,
    /// The instruction-boundary checks left for [`check_later`].
    later: Option<LaterChecks>,
}

impl Done {
    /// Appends `name` to `names`; returns where it is.
    fn add_name(&mut self, name: &[u8]) -> Range<usize> {
        let start = self.names.len();
        self.names.extend_from_slice(name);
        start..self.names.len()
    }

    fn absorb(&mut self, file: &str, r: &Found<'_>, verbose: bool) {
        self.objects += 1;
        self.relocations += r.relocations;
        self.sites += r.sites.len();
        self.uses_runtime |= r.uses_runtime;
        self.walks_stacks |= r.walks_stacks;
        // Room made once (growing the buffer a name at a time copied it over and over).
        let names = r.referenced.iter().map(|p| p.name.len());
        self.names
            .reserve(names.chain(r.defined.iter().map(|d| d.len())).sum());
        self.referenced.reserve(r.referenced.len());
        self.defined.reserve(r.defined.len());
        for p in &r.referenced {
            let at = self.add_name(p.name);
            self.referenced.push((at, p.kind));
        }
        for d in &r.defined {
            let at = self.add_name(d);
            self.defined.push(at);
        }
        if self.live.is_none() {
            self.live = r.not_sites.iter().find(|n| n.live).cloned();
        }
        self.guard_calls.extend(
            r.sites
                .iter()
                .filter(|s| s.form == Form::Guard && s.kind == Kind::Probe)
                .map(|s| GuardCall {
                    at: Location {
                        section: Some(s.section_name.to_string()),
                        offset: Some(s.offset),
                        symbol: Some(String::from_utf8_lossy(s.symbol).into_owned()),
                        ..Location::file(file)
                    },
                    symbol: s.symbol.to_vec(),
                }),
        );
        if verbose && (!r.sites.is_empty() || !r.not_sites.is_empty()) {
            self.notes.push(format!(
                "{file}: {} sites, {} other references to probe symbols",
                r.sites.len(),
                r.not_sites.len()
            ));
            for s in &r.sites {
                self.notes.push(format!(
                    "{file}: section `{}` offset {:#x}: {} {} in {}+{:#x}",
                    s.section_name,
                    s.offset,
                    s.kind.name(),
                    String::from_utf8_lossy(s.symbol),
                    String::from_utf8_lossy(s.function),
                    s.func_offset
                ));
            }
            for n in &r.not_sites {
                self.notes.push(format!("{}: not a site: {}", n.at, n.why));
            }
        }
    }
}

/// The error for a reference to a probe symbol that is not a site but that the program can reach:
/// through it the program would call the probe's stub while the probe is disabled, outside the
/// site table's control.
fn live_reference(n: NotASite) -> Error {
    Error::Refused {
        at: n.at,
        what: format!(
            "a reference to a probe symbol or hook that is not a call site bootprof-link can turn \
             into a NOP ({}): through it the program would reach the probe while it is disabled. \
             Call probes directly (in Rust through bootprof_runtime::probe!, whose call LLVM \
             cannot hoist out of a loop) and do not take their address",
            n.why
        ),
    }
}

/// A unique, deterministic name for the private copy of argument `arg`.
fn private_name(dir: &Path, arg: usize, path: &Path) -> PathBuf {
    dir.join(pack::member_name(arg, path))
}

/// Input `turn.i`'s turn to be placed in the packs, taken once: when its member is put, or
/// when dropped (an input not rewritten, written alone, or failed), so that the inputs after it
/// never wait for it in vain.
struct Turn<'a, 'p> {
    packer: &'a Packer<'p>,
    i: usize,
    taken: bool,
}

impl Turn<'_, '_> {
    fn put(&mut self, member: Option<&emit::Emitted<'_>>) {
        if !std::mem::replace(&mut self.taken, true) {
            self.packer.put(self.i, member);
        }
    }
}

impl Drop for Turn<'_, '_> {
    fn drop(&mut self) {
        self.put(None);
    }
}

fn rewrite_input(input: &Input, dir: &Path, how: How, turn: &mut Turn<'_, '_>) -> Result<Done> {
    let data = match &input.data {
        Some(data) => Arc::clone(data),
        None => Arc::new(map(&input.path)?),
    };
    let file = input.path.display().to_string();
    let mut done = Done::default();
    let new_at = |dir: &Path| private_name(dir, input.arg, &input.path);
    match input.kind {
        InputKind::NotElf => return Err(Error::NotElf(Location::file(file))),
        InputKind::Object => {
            let (emitted, found) = if how.check_later {
                let (emitted, found, later) = rewrite_checking_later(&data, &file)?;
                if !later.is_empty() {
                    let checks = LaterChecks::new(&data, &file, later).ok_or_else(|| {
                        Error::Internal(format!("{file}: a section's bytes outside its file"))
                    })?;
                    done.later = Some(checks);
                }
                (emitted, found)
            } else {
                rewrite_pieces(&data, &file)?
            };
            done.absorb(&file, &found, how.verbose);
            if let Some(emitted) = emitted {
                if turn.packer.packs(turn.i) {
                    turn.put(Some(&emitted));
                    return Ok(done);
                }
                let out = new_at(dir);
                write_file(&out, how.whole, |f| emitted.write_to(f))?;
                done.replacement = Some(out);
            }
        }
        InputKind::Archive => {
            let new = archive::rewrite_archive(&data, &input.path, |member, bytes| {
                let name = format!("{file}({member})");
                let r = rewrite_object(bytes, &name)?;
                done.absorb(&name, &r.found, how.verbose);
                Ok(r.bytes)
            })?;
            if let Some(bytes) = new {
                let out = new_at(dir);
                write_file(&out, how.whole, |f| std::io::Write::write_all(f, &bytes))?;
                done.replacement = Some(out);
            }
        }
    }
    Ok(done)
}

/// Writes the file `path` by `write`. `whole`: under a name of its own first, then renamed, so
/// that it is at `path` only whole, for a link started before the rewriting ends (see
/// `link::Gate`), which may look for it (a rename each: 0.4 ms on linkbench's 42 objects).
pub(crate) fn write_file(
    path: &Path,
    whole: bool,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<()> {
    if !whole {
        return std::fs::File::create(path)
            .and_then(|mut f| write(&mut f))
            .map_err(|e| Error::io(path, e));
    }
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::File::create(&partial)
        .and_then(|mut f| write(&mut f))
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            Error::io(path, e)
        })
}

/// How [`rewrite_each`] rewrites each input.
#[derive(Clone, Copy)]
struct How {
    /// `--verbose`: notes of what was found.
    verbose: bool,
    /// Each file written whole (see [`write_file`]).
    whole: bool,
    /// The boundary checks of large sections left for [`check_later`].
    check_later: bool,
}

/// Rewrites `inputs` on up to `available_parallelism` threads, packed as `plan` says; results
/// in input order.
fn rewrite_all(inputs: &[Input], dir: &Path, how: How, plan: &pack::Plan) -> Vec<Result<Done>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(inputs.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Done>>>> =
        Mutex::new((0..inputs.len()).map(|_| None).collect());
    let packer = Packer::new(plan, dir, inputs.iter().map(|i| i.arg).collect(), how.whole);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                // In input order: a pack's members are written in turn.
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(input) = inputs.get(i) else { break };
                let mut turn = Turn {
                    packer: &packer,
                    i,
                    taken: false,
                };
                let r = rewrite_input(input, dir, how, &mut turn);
                drop(turn);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    let mut results: Vec<Result<Done>> = (results.into_inner())
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every input was rewritten"))
        .collect();
    match packer.finish() {
        Ok(roles) => {
            for (r, role) in results.iter_mut().zip(roles) {
                if let Ok(done) = r {
                    done.role = role;
                }
            }
        }
        Err((i, e)) => results[i] = Err(e),
    }
    results
}

/// Rewrites every input of `gathered` (from `line`) into `dir`, packed as `plan` says; each
/// written `whole` (see `write_file`) for a link already started. With `check_later`, the
/// instruction-boundary checks of objects' large sections are left in [`Rewrites::later`]: the
/// caller makes them ([`check_later`]) before it uses anything linked from these inputs. It
/// borrows `gathered`, so that the link can be started from it meanwhile; [`finish_rewrites`]
/// hands on the [`Rewrites`]. Each input rewritten, or why not.
pub(crate) fn rewrite_each(
    line: &LinkLine,
    gathered: &Gathered,
    dir: &Path,
    whole: bool,
    check_later: bool,
    plan: &pack::Plan,
) -> Vec<Result<Done>> {
    let how = How {
        verbose: line.options.verbose,
        whole,
        check_later,
    };
    rewrite_all(&gathered.inputs, dir, how, plan)
}

/// The first error of what [`rewrite_each`] did, or the rewrites of `gathered`.
pub(crate) fn finish_rewrites(
    line: &LinkLine,
    gathered: Gathered,
    results: Vec<Result<Done>>,
) -> Result<Rewrites> {
    let mut dones = Vec::with_capacity(results.len());
    for result in results {
        let mut done = result?;
        if let Some(n) = done.live.take() {
            return Err(live_reference(n));
        }
        dones.push(done);
    }
    combine(line, gathered, dones)
}

/// What `finish_rewrites` will hand on, foreseen from the inputs' symbol tables alone (each
/// object mapped for this, only its symbols read): the link line and the probe symbols to stub
/// are known before any code is read, so that the link can start while the rewriting runs.
/// `None` where that cannot be told so: an archive among the inputs (its
/// members are read one by one as they are rewritten), a file that is not an object, or one
/// that does not parse (the rewriting says why). An object that references probe symbols it
/// does not define is foreseen rewritten. Where that is wrong (its references are no calls, or
/// it calls probe symbols it defines itself), the line differs, which the caller sees.
pub fn foresee(
    line: &LinkLine,
    gathered: &Gathered,
    dir: &Path,
    plan: &pack::Plan,
) -> Option<Rewrites> {
    let mut dones = Vec::with_capacity(gathered.inputs.len());
    for input in &gathered.inputs {
        if input.kind != InputKind::Object {
            return None;
        }
        let data = match &input.data {
            Some(data) => Arc::clone(data),
            None => Arc::new(map(&input.path).ok()?),
        };
        let file = input.path.display().to_string();
        let scanned = scan::symbols(&data, &file).ok()?;
        let mut done = Done::default();
        if scanned.references_probe_symbols() {
            done.replacement = Some(private_name(dir, input.arg, &input.path));
        }
        let found = Found {
            referenced: scanned.referenced,
            defined: scanned.defined,
            uses_runtime: scanned.uses_runtime,
            walks_stacks: scanned.walks_stacks,
            ..Found::default()
        };
        done.absorb(&file, &found, false);
        dones.push(done);
    }
    // Packed as the rewriting will pack them.
    let rewritten: Vec<bool> = dones.iter().map(|d| d.replacement.is_some()).collect();
    let args: Vec<usize> = gathered.inputs.iter().map(|i| i.arg).collect();
    for (done, role) in dones.iter_mut().zip(plan.roles(dir, &args, &rewritten)) {
        if role != Role::Alone {
            done.replacement = None;
        }
        done.role = role;
    }
    let gathered = Gathered {
        args: gathered.args.clone(),
        order: gathered.order.clone(),
        inputs: gathered.inputs.clone(),
        removed: gathered.removed.clone(),
        ..Gathered::default()
    };
    combine(line, gathered, dones).ok()
}

/// Puts the inputs' outcomes `dones` together: the link line with the rewritten inputs in
/// place, the probe symbols referenced and defined by none, and the counts.
fn combine(line: &LinkLine, gathered: Gathered, mut dones: Vec<Done>) -> Result<Rewrites> {
    let Gathered {
        mut args,
        order,
        inputs,
        mut removed,
        notes,
        ..
    } = gathered;
    let mut r = Rewrites {
        notes,
        ..Rewrites::default()
    };
    let mut guard_calls = Vec::new();
    // The packs, by the argument of their first member, in whose place they stand; and the
    // last one started, which a member that joins is in.
    let mut packs = BTreeMap::new();
    let mut last_pack = None;
    for (input, done) in inputs.iter().zip(&mut dones) {
        guard_calls.append(&mut done.guard_calls);
        r.objects += done.objects;
        r.relocations += done.relocations;
        r.sites += done.sites;
        r.uses_runtime |= done.uses_runtime;
        r.walks_stacks |= done.walks_stacks;
        r.notes.append(&mut done.notes);
        r.later.extend(done.later.take());
        match std::mem::take(&mut done.role) {
            Role::Alone => {}
            Role::Starts(pack) => {
                let pack = pack.display().to_string();
                r.renames.push(pack::archive_suffix(&pack));
                r.renames
                    .extend(pack::member_renames(&pack, input.arg, &input.path));
                packs.insert(input.arg, (pack, vec![input.path.display().to_string()]));
                last_pack = Some(input.arg);
            }
            Role::Joins => {
                removed.insert(input.arg);
                if let Some((pack, members)) = last_pack.and_then(|arg| packs.get_mut(&arg)) {
                    r.renames
                        .extend(pack::member_renames(pack, input.arg, &input.path));
                    members.push(input.path.display().to_string());
                }
            }
        }
        if let Some(new) = done.replacement.take() {
            let new = new.display().to_string();
            r.renames
                .push((new.clone(), input.path.display().to_string()));
            match line.kinds.get(input.arg) {
                // `-l name` is two arguments: the path replaces both.
                Some(ArgKind::Library) if line.args[input.arg] == "-l" => {
                    args[input.arg] = new;
                    removed.insert(input.arg + 1);
                }
                _ => args[input.arg] = new,
            }
        }
    }
    // Looked up by hash: the names share long prefixes (`__dtrace_isenabled_provider__`), which
    // make each comparison of a sort or a binary search a long one.
    let mut defined: FxHashSet<&[u8]> = FxHashSet::with_capacity_and_hasher(
        dones.iter().map(|d| d.defined.len()).sum(),
        Default::default(),
    );
    defined.extend((dones.iter()).flat_map(|d| d.defined.iter().map(|at| &d.names[at.clone()])));
    let is_defined = |name: &[u8]| defined.contains(name);
    // A guard's out-of-line call keeps only what bootprof's stub and dispatcher keep (every
    // register but r11; the stack unaligned): it must not reach a function the program defines.
    if let Some(c) = guard_calls.iter().find(|c| is_defined(&c.symbol)) {
        return Err(Error::Refused {
            at: c.at.clone(),
            what: format!(
                "a bootprof.h guard calls `{}`, which the program defines itself; the guard's \
                 out-of-line call is only safe into bootprof's stub (compile with \
                 -DBOOTPROF_CALL_SITES, or drop the definition)",
                String::from_utf8_lossy(&c.symbol)
            ),
        });
    }
    r.referenced = (dones.iter())
        .flat_map(|d| {
            d.referenced
                .iter()
                .map(|(at, kind)| (&d.names[at.clone()], *kind))
        })
        .filter(|(name, _)| !is_defined(name))
        .map(|(name, kind)| (name.to_vec(), kind))
        .collect();
    if line.options.verbose {
        for (pack, members) in packs.values() {
            r.notes.push(format!(
                "{pack}: the rewritten {}, read whole as one archive",
                members.join(" ")
            ));
        }
    }
    r.args = Vec::with_capacity(order.len() + 2 * packs.len());
    for i in order.into_iter().filter(|i| !removed.contains(i)) {
        match packs.remove(&i) {
            Some((pack, _)) => r
                .args
                .extend([pack::BEFORE.into(), pack, pack::AFTER.into()]),
            None => r.args.push(std::mem::take(&mut args[i])),
        }
    }
    Ok(r)
}
