//! Which copy of the runtime serves the process: takes the registrations (`bootprof_register`,
//! `bootprof_unregister`) that reach this copy; hands on, for a copy carried by a shared object
//! (the feature `shared-object`, what `bootprof-link` links into `-shared` outputs), the copy
//! they belong to when it is another one.
//!
//! Every object `bootprof-link` links carries the runtime, and every copy a note
//! (`.note.bootprof`, see [`NOTE_NAME`]) that leads to its entry points (`bootprof_*`,
//! `__wrap_*`). A shared object's are default-visibility globals, so an object's calls to them
//! (the registration constructor's, the C API's, the wrapped `longjmp`'s) bind to the first
//! definition in the process's global lookup scope (the libraries loaded at start-up, then
//! those loaded `RTLD_GLOBAL`; an executable exports none of its own), or, when the global scope
//! has none, to the first in the object's own (a library `dlopen`ed `RTLD_LOCAL`: itself). The
//! rule: the executable's copy serves when it has one (its note says so); otherwise the one
//! the global scope resolves `bootprof_register` to. A copy in a shared object, when first
//! called:
//!
//! - if the executable carries the runtime, this copy never serves: each of its entry points
//!   ([`HANDED_ON`]) hands its call on to the executable's of the same name, from the table the
//!   note leads to (found with `dl_iterate_phdr`: no symbol is looked up or exported);
//! - else, if the global scope has no `bootprof_register`, or has its own, it serves, and first
//!   puts its object into the global scope and pins it there (`dlopen` of its own file with
//!   `RTLD_NOLOAD | RTLD_GLOBAL | RTLD_NODELETE`): every object loaded afterwards binds to it,
//!   and `dlclose` never unmaps it (sites of other objects point at its trampolines);
//! - if the global scope resolves the name to another copy, this one never serves: its entry
//!   points hand their calls on to that copy's (pinned, or in an executable that an older
//!   `bootprof-link` made export them, so the pointers stay good). That happens to an object
//!   bound to its own copy before another was promoted: one whose constructor ran after a
//!   library loaded by an earlier constructor had taken the global scope (with lazy binding only
//!   its registration reaches its own copy; bound at load, `-z now` or `RTLD_NOW`, all its
//!   calls do).
//!
//! A copy decides when its object is loaded, before its sites register, if the executable
//! carries the runtime (`DECIDE_AT_LOAD`); otherwise at its first registration or C API call.
//! The wrappers of `longjmp` and the stack walkers, which may run in a signal handler, never
//! decide (`dlopen` is not async-signal-safe): an undecided copy's act themselves, as they do
//! in the copy that serves.

use core::ffi::{c_char, c_void, CStr};

/// The entry points a copy that does not serve hands on ([`HANDED_ON`], as [`Elsewhere`] holds
/// them), and this copy's own, in the same order ([`ENTRIES`], which the note names).
macro_rules! entry_points {
    ($($module:ident::$name:ident),* $(,)?) => {
        pub(crate) const HANDED_ON: [&CStr; [$(stringify!($name)),*].len()] =
            [$(c_name(concat!(stringify!($name), "\0"))),*];
        /// This copy's entry points, in [`HANDED_ON`]'s order.
        pub(crate) static ENTRIES: Entries = Entries([$(crate::$module::$name as *const ()),*]);
    };
}

entry_points![
    capi::bootprof_register,
    capi::bootprof_unregister,
    capi::bootprof_last_error,
    capi::bootprof_enable,
    capi::bootprof_enable_mode,
    capi::bootprof_disable,
    capi::bootprof_notrace,
    capi::bootprof_stacktrace,
    capi::bootprof_set_graph,
    capi::bootprof_clear_notrace,
    capi::bootprof_add_handler,
    capi::bootprof_remove_handler,
    capi::bootprof_hits,
    capi::bootprof_site_count,
    capi::bootprof_site_info,
    capi::bootprof_check,
    capi::bootprof_record,
    capi::bootprof_dump,
    capi::bootprof_count_points,
    capi::bootprof_print_points,
    graph::__wrap_longjmp,
    graph::__wrap__longjmp,
    graph::__wrap_siglongjmp,
    graph::__wrap___longjmp_chk,
    graph::__wrap_backtrace,
    graph::__wrap__Unwind_Backtrace,
];

/// The name `name` (with its NUL) as a C string, at compile time.
const fn c_name(name: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(name.as_bytes()) {
        Ok(c) => c,
        Err(_) => panic!("an entry point's name"),
    }
}

/// This copy's entry points, for a shared object's copy to hand its calls on to when this copy
/// is the executable's (found through [`NOTE_NAME`]'s note, not through exported symbols), and
/// for the lean runtime when this copy is the runtime library.
#[repr(C)]
pub(crate) struct Entries([*const (); HANDED_ON.len()]);

#[cfg(any(feature = "lean", feature = "library"))]
impl Entries {
    /// The entry point `name` (one of [`HANDED_ON`]), if this table has it (not 0).
    pub(crate) fn get(&self, name: &str) -> Option<usize> {
        Some(self.0[position(name)?] as usize).filter(|&f| f != 0)
    }
}

// SAFETY: addresses of functions, never written.
unsafe impl Sync for Entries {}

/// The note every copy carries (`.note.bootprof`, `SHF_ALLOC`, so the final link gives it a
/// `PT_NOTE` segment), of name [`NOTE_NAME`] and type [`NOTE_ENTRIES`]; its 16-byte descriptor:
/// the number of entry points (u32), 4 bytes of zero, and the distance in bytes from the eighth
/// byte of the descriptor to [`ENTRIES`] (i64, resolved by the final link: no run-time
/// relocation, nothing exported).
const NOTE_NAME: &[u8] = b"bootprof\0";
/// See [`NOTE_NAME`].
const NOTE_ENTRIES: u32 = 0x4250_0001;

core::arch::global_asm!(
    ".pushsection .note.bootprof,\"a\",@note",
    ".balign 4",
    ".long 9, 16, {kind}",
    ".asciz \"bootprof\"",
    ".balign 4",
    ".long {count}, 0",
    "1: .quad {entries} - 1b",
    ".popsection",
    kind = const NOTE_ENTRIES,
    count = const HANDED_ON.len(),
    entries = sym ENTRIES,
);

/// In a copy of the runtime that does not serve, hands the call of the entry point `$name` (one
/// of [`HANDED_ON`]) on to the serving copy's, and returns what that returns. `$lookup` is
/// [`counterpart`], or [`counterpart_if_decided`] in entry points that may run in a signal
/// handler. Nothing in the other builds.
macro_rules! hand_on {
    ($lookup:ident, $name:ident($($arg:ident),*)) => {
        // (The return of a function that never returns is unreachable: the wrapped jumps'.)
        #[cfg(feature = "shared-object")]
        #[allow(unreachable_code)]
        if let Some(f) = crate::serving::$lookup(stringify!($name)) {
            // SAFETY: the serving copy's function of the same name, so of the same signature
            // (bootprof.h's, in every copy of the runtime), given what this one was given.
            return unsafe {
                let this = $name as unsafe extern "C" fn($(crate::serving::hand_on!(@any $arg)),*) -> _;
                crate::serving::typed_as(this, f)($($arg),*)
            };
        }
    };
    (@any $arg:ident) => { _ };
}
pub(crate) use hand_on;

/// The function at `addr`, typed as `this` (a function pointer).
///
/// # Safety
/// `addr` must be a function of that type.
pub(crate) unsafe fn typed_as<F: Copy>(this: F, addr: usize) -> F {
    const { assert!(size_of::<F>() == size_of::<usize>()) };
    let _ = this;
    // SAFETY: per the contract; the sizes are equal.
    unsafe { core::mem::transmute_copy(&addr) }
}

/// The serving copy's definitions of [`HANDED_ON`], in that order (0 where it has none: an
/// executable linked by an older `bootprof-link` exports only the registration entry points).
pub(crate) struct Elsewhere([usize; HANDED_ON.len()]);

/// This copy's decision: `None` when it serves.
static DECIDED: crate::sys::OnceLock<Option<Elsewhere>> = crate::sys::OnceLock::new();

/// The serving copy's function `name` (one of [`HANDED_ON`]), when another copy serves: what
/// this copy's entry point of that name hands its call on to. Decides first if this copy has not
/// yet (see [`decided`]).
pub(crate) fn counterpart(name: &str) -> Option<usize> {
    lookup(elsewhere()?, name)
}

/// As [`counterpart`], but an undecided copy stays undecided and answers `None`: for entry
/// points that may run in a signal handler.
pub(crate) fn counterpart_if_decided(name: &str) -> Option<usize> {
    lookup(DECIDED.get()?.as_ref()?, name)
}

fn lookup(elsewhere: &Elsewhere, name: &str) -> Option<usize> {
    Some(elsewhere.0[position(name)?]).filter(|&f| f != 0)
}

/// The place of the entry point `name` in [`HANDED_ON`].
fn position(name: &str) -> Option<usize> {
    HANDED_ON
        .iter()
        .position(|n| n.to_bytes() == name.as_bytes())
}

/// The version of [`Library`]'s layout and of [`HANDED_ON`]'s list: the lean runtime loads only a
/// runtime library of its own version (a program linked by another `bootprof-link` may meet
/// another `bootprof`'s library through `BOOTPROF_LIBRARY`).
#[cfg(any(feature = "lean", feature = "library"))]
pub(crate) const LIBRARY_VERSION: u32 = 1;

/// What the runtime library (`libbootprof.so`, the runtime built with the feature `library`)
/// hands the lean runtime that loads it, under the exported name [`LIBRARY_SYMBOL`]: its entry
/// points, in [`HANDED_ON`]'s order, and the attach listener's work (`attach::serve_knock`), which
/// the lean runtime's knock starts.
#[cfg(any(feature = "lean", feature = "library"))]
#[repr(C)]
pub(crate) struct Library {
    /// [`LIBRARY_VERSION`].
    pub version: u32,
    /// The number of entry points, `HANDED_ON.len()`.
    pub count: u32,
    /// The library's entry points.
    pub entries: &'static Entries,
    /// Called once, before anything else: the `__dso_handle` of the object that carries the lean
    /// runtime, whose finalization runs the library's exit handlers (`sys::at_exit`).
    pub start: extern "C" fn(*mut c_void),
    /// Serves the client that knocked, on the listener thread.
    pub listen: extern "C" fn(*mut c_void) -> *mut c_void,
}

/// The runtime library's one exported symbol, a [`Library`].
#[cfg(any(feature = "lean", feature = "library"))]
pub(crate) const LIBRARY_SYMBOL: &CStr = c"bootprof_library";

/// A byte of this copy's own, for `dladdr` to name its object (not an entry point: its address
/// is this copy's, never another's).
static MARK: u8 = 0;

/// The copy this one's registrations go to, if it is not this one; decided at the first call.
/// A copy that serves then puts its object into the global scope and pins it, after the
/// decision is recorded: that `dlopen` runs the constructors of its object (and of their
/// dependencies) when they have not run yet (another object's constructor registering first),
/// and those register with this copy, which then serves them at once.
fn elsewhere() -> Option<&'static Elsewhere> {
    let mut serves_first = false;
    let decided = DECIDED.get_or_init(|| {
        let decided = decide();
        serves_first = decided.is_none();
        decided
    });
    if serves_first {
        promote();
    }
    decided.as_ref()
}

/// The object holding `addr`, by its load address and file name; `None` outside any object.
fn object_of(addr: *const c_void) -> Option<(usize, *const c_char)> {
    // SAFETY: an all-zero Dl_info is valid (pointers null); dladdr only writes it.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: dladdr reads the loader's tables for any address.
    match unsafe { libc::dladdr(addr, &mut info) } {
        0 => None,
        _ => Some((info.dli_fbase as usize, info.dli_fname)),
    }
}

/// The serving copy's entry points when another copy serves: the executable's (its note names
/// them), else the global scope's definitions of [`HANDED_ON`] when another object defines
/// `bootprof_register` and `bootprof_unregister`; `None` when this copy serves.
fn decide() -> Option<Elsewhere> {
    if let Some(decided) = decided_by_note() {
        return decided;
    }
    // SAFETY: dlopen(NULL) hands back the main program, whose scope dlsym then searches: the
    // executable, the libraries loaded at start-up, those loaded RTLD_GLOBAL since.
    let main = unsafe { libc::dlopen(core::ptr::null(), libc::RTLD_LAZY) };
    if main.is_null() {
        return None;
    }
    // SAFETY: a handle dlopen gave and NUL-terminated names.
    let found = HANDED_ON.map(|name| unsafe { libc::dlsym(main, name.as_ptr()) } as usize);
    let own = object_of((&raw const MARK).cast()).map(|(base, _)| base);
    let theirs = object_of(found[0] as *const c_void).map(|(base, _)| base);
    let elsewhere = found[0] != 0 && found[1] != 0 && theirs.is_some() && theirs != own;
    elsewhere.then_some(Elsewhere(found))
}

/// The decision when the main program carries the runtime (its copy serves; `Some(None)` when
/// it is this one); `None` when it does not.
fn decided_by_note() -> Option<Option<Elsewhere>> {
    let entries = main_program_entries()?;
    Some((entries.as_ptr() != ENTRIES.0.as_ptr()).then(|| {
        let mut found = [0; HANDED_ON.len()];
        for (f, &e) in found.iter_mut().zip(entries) {
            *f = e as usize;
        }
        Elsewhere(found)
    }))
}

/// A shared object's copy decides at load, before its object's sites register (priority 99, the
/// stubs' constructor), when the executable carries the runtime: so the entry points that may
/// run in a signal handler (which never decide) hand on to it from the start. Otherwise the
/// decision waits for the first call (it may need `dlopen`).
#[cfg(feature = "shared-object")]
#[used]
#[link_section = ".init_array.00098"]
static DECIDE_AT_LOAD: extern "C" fn() = {
    extern "C" fn decide_at_load() {
        if let Some(decided) = decided_by_note() {
            let _ = DECIDED.set(decided);
        }
    }
    decide_at_load
};

/// The entry points of the main program's copy of the runtime, from its note (see
/// [`NOTE_NAME`]); `None` when it has none (an executable linked with `--no-runtime`, by an
/// older `bootprof-link`, or not by `bootprof-link`).
fn main_program_entries() -> Option<&'static [*const ()]> {
    // SAFETY: the main program's notes are mapped; a bootprof note among them is its copy's.
    // (The runtime's note is padded to 4, whatever the segment that holds it says.)
    crate::sys::in_notes(crate::sys::Object::Main, |notes, _| unsafe {
        entries_in(notes)
    })
}

/// The entry points the bootprof note among `notes` (a `PT_NOTE` segment's bytes, mapped) names.
///
/// # Safety
/// A bootprof note in `notes` is one a copy of the runtime made: its table is mapped.
unsafe fn entries_in(notes: &[u8]) -> Option<&'static [*const ()]> {
    let note = bootprof_format::note::notes(notes, 4)
        .find(|n| n.name == NOTE_NAME && n.kind == NOTE_ENTRIES && n.desc.len() >= 16)?;
    let count = u32::from_ne_bytes(note.desc[..4].try_into().ok()?) as usize;
    let offset = i64::from_ne_bytes(note.desc[8..16].try_into().ok()?);
    let table = note.desc[8..].as_ptr().wrapping_offset(offset as isize);
    // SAFETY: per the contract: the note's distance leads to its copy's table.
    Some(unsafe { core::slice::from_raw_parts(table.cast(), count.min(HANDED_ON.len())) })
}

/// Puts this copy's object into the global scope and keeps it loaded for good; a note on stderr
/// when that fails (the copy serves anyway; objects loaded later then find no runtime in the
/// global scope and serve themselves).
fn promote() {
    let name = object_of((&raw const MARK).cast()).map(|(_, name)| name);
    let flags = libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL | libc::RTLD_NODELETE;
    // SAFETY: RTLD_NOLOAD opens nothing: it changes the flags of the object already loaded under
    // that name (ours), which the handle's count then keeps (never closed: NODELETE anyway).
    let handle = name
        .filter(|n| !n.is_null())
        .map_or(core::ptr::null_mut(), |n| unsafe { libc::dlopen(n, flags) });
    if handle.is_null() {
        crate::note::note(
            "the runtime in a shared library could not make itself global (dlopen RTLD_NOLOAD \
             failed): libraries loaded later will not find it",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    /// A note of `name`, `kind` and the 16-byte descriptor of `count` entries at `table`, as the
    /// note section lays it out at `at` bytes into a buffer that starts at `base`.
    fn note(name: &[u8], kind: u32, count: u32, base: usize, at: usize, table: usize) -> Vec<u8> {
        let mut n = Vec::new();
        n.extend((name.len() as u32).to_ne_bytes());
        n.extend(16u32.to_ne_bytes());
        n.extend(kind.to_ne_bytes());
        n.extend(name);
        n.resize(n.len().next_multiple_of(4), 0);
        n.extend(count.to_ne_bytes());
        n.extend(0u32.to_ne_bytes());
        let from = base + at + n.len();
        n.extend((table as i64 - from as i64).to_ne_bytes());
        n
    }

    /// The table is found behind another owner's note, through its PC-relative distance, with
    /// no more entries than this copy hands on; a segment without it, a truncated note and a
    /// note of another name or type are passed over.
    #[test]
    fn the_entries_note_is_found_among_others_and_checked() {
        let table: [*const (); 30] = [core::ptr::null(); 30];
        let t = table.as_ptr() as usize;
        let mut buf = vec![0u8; 256];
        let base = buf.as_ptr() as usize;
        let gnu = note(b"GNU\0", NOTE_ENTRIES, 1, base, 0, t);
        let ours = note(NOTE_NAME, NOTE_ENTRIES, 30, base, gnu.len(), t);
        let all = [gnu.clone(), ours.clone()].concat();
        buf[..all.len()].copy_from_slice(&all);
        // SAFETY: the note leads to `table`, alive for the test.
        let found = unsafe { entries_in(&buf[..all.len()]) }.expect("found");
        assert_eq!((found.as_ptr() as usize, found.len()), (t, HANDED_ON.len()));
        // SAFETY: no bootprof note: nothing is dereferenced.
        unsafe {
            assert!(entries_in(&buf[..gnu.len()]).is_none());
            assert!(entries_in(&buf[..all.len() - 1]).is_none());
            let other = note(NOTE_NAME, NOTE_ENTRIES + 1, 30, base, 0, t);
            buf[..other.len()].copy_from_slice(&other);
            assert!(entries_in(&buf[..other.len()]).is_none());
            assert!(entries_in(&[]).is_none());
        }
    }
}
