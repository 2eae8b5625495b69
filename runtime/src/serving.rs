//! Which copy of the runtime serves the process: takes the registrations (`bootprof_register`,
//! `bootprof_unregister`) that reach this copy; hands on, for a copy carried by a shared object
//! (the feature `shared-object`, what `bootprof-link` links into `-shared` outputs), the copy
//! they belong to when it is another one.
//!
//! Every object `bootprof-link` links carries the runtime: an executable exports its entry
//! points (`bootprof_*`, `__wrap_*`), a shared object has them as default-visibility globals. An
//! object's calls to them (the registration constructor's, the C API's, the wrapped `longjmp`'s)
//! therefore bind to the first definition in the process's global lookup scope (the executable,
//! the libraries loaded at start-up, then those loaded `RTLD_GLOBAL`), or, when the global scope
//! has none, to the first in the object's own (a library `dlopen`ed `RTLD_LOCAL`: itself). The
//! rule: the copy that serves is the one the global scope resolves `bootprof_register` to. A copy
//! in a shared object, when first called:
//!
//! - if the global scope has no `bootprof_register`, or has its own, it serves, and first puts
//!   its object into the global scope and pins it there (`dlopen` of its own file with
//!   `RTLD_NOLOAD | RTLD_GLOBAL | RTLD_NODELETE`): every object loaded afterwards binds to it,
//!   and `dlclose` never unmaps it (sites of other objects point at its trampolines);
//! - if the global scope resolves the name to another copy, this one never serves: each of its
//!   entry points ([`HANDED_ON`]) hands its call on to that copy's of the same name (pinned, or
//!   in the executable, so the pointers stay good). That happens to an object bound to its own
//!   copy before another was promoted: one whose constructor ran after a library loaded by an
//!   earlier constructor had taken the global scope (with lazy binding only its registration
//!   reaches its own copy; bound at load, `-z now` or `RTLD_NOW`, all its calls do).
//!
//! A copy decides at its first registration or C API call. The wrappers of `longjmp` and the
//! stack walkers, which may run in a signal handler, never decide (`dlopen` is not
//! async-signal-safe): an undecided copy's act themselves, as they do in the copy that serves.

use core::ffi::{c_char, c_void, CStr};

/// The entry points a copy that does not serve hands on, as [`Elsewhere`] holds them.
const HANDED_ON: [&CStr; 26] = [
    c"bootprof_register",
    c"bootprof_unregister",
    c"bootprof_last_error",
    c"bootprof_enable",
    c"bootprof_enable_mode",
    c"bootprof_disable",
    c"bootprof_notrace",
    c"bootprof_stacktrace",
    c"bootprof_set_graph",
    c"bootprof_clear_notrace",
    c"bootprof_add_handler",
    c"bootprof_remove_handler",
    c"bootprof_hits",
    c"bootprof_site_count",
    c"bootprof_site_info",
    c"bootprof_check",
    c"bootprof_record",
    c"bootprof_dump",
    c"bootprof_count_points",
    c"bootprof_print_points",
    c"__wrap_longjmp",
    c"__wrap__longjmp",
    c"__wrap_siglongjmp",
    c"__wrap___longjmp_chk",
    c"__wrap_backtrace",
    c"__wrap__Unwind_Backtrace",
];

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
    let i = HANDED_ON
        .iter()
        .position(|n| n.to_bytes() == name.as_bytes())?;
    Some(elsewhere.0[i]).filter(|&f| f != 0)
}

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

/// The global scope's definitions of [`HANDED_ON`] when another object defines
/// `bootprof_register` and `bootprof_unregister`; `None` when this copy serves.
fn decide() -> Option<Elsewhere> {
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
