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
//! - if the global scope resolves the name to another copy, this one never serves: it hands
//!   every registration on to that one (pinned, or in the executable, so the pointer stays
//!   good). That happens to an object bound to its own copy before another was promoted: one
//!   whose constructor ran after a library loaded by an earlier constructor had taken the
//!   global scope.
//!
//! The C API of such a copy (an object that bound its calls to its own copy: `-z now`, in that
//! same load order) is not handed on: only registrations are.

use core::ffi::{c_char, c_void};

/// `bootprof_register`'s signature.
pub(crate) type RegisterFn = unsafe extern "C" fn(*const u8, *const u8, *mut usize);
/// `bootprof_unregister`'s signature.
pub(crate) type UnregisterFn = unsafe extern "C" fn(*const u8);

/// Another copy's entry points, which this copy's registrations go to.
#[derive(Clone, Copy)]
pub(crate) struct Elsewhere {
    pub register: RegisterFn,
    pub unregister: UnregisterFn,
}

/// This copy's decision: `None` when it serves.
static DECIDED: crate::sys::OnceLock<Option<Elsewhere>> = crate::sys::OnceLock::new();

/// A byte of this copy's own, for `dladdr` to name its object (not an entry point: its address
/// is this copy's, never another's).
static MARK: u8 = 0;

/// The copy this one's registrations go to, if it is not this one; decided at the first call.
/// A copy that serves then puts its object into the global scope and pins it, after the
/// decision is recorded: that `dlopen` runs the constructors of its object (and of their
/// dependencies) when they have not run yet (another object's constructor registering first),
/// and those register with this copy, which then serves them at once.
pub(crate) fn elsewhere() -> Option<Elsewhere> {
    let mut serves_first = false;
    let decided = *DECIDED.get_or_init(|| {
        let decided = decide();
        serves_first = decided.is_none();
        decided
    });
    if serves_first {
        promote();
    }
    decided
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

/// The global scope's definition of `name` (NUL-terminated), or null.
fn global(name: &core::ffi::CStr) -> *mut c_void {
    // SAFETY: dlopen(NULL) hands back the main program, whose scope dlsym then searches: the
    // executable, the libraries loaded at start-up, those loaded RTLD_GLOBAL since.
    unsafe {
        let main = libc::dlopen(core::ptr::null(), libc::RTLD_LAZY);
        if main.is_null() {
            return core::ptr::null_mut();
        }
        libc::dlsym(main, name.as_ptr())
    }
}

/// The global scope's `bootprof_register` and `bootprof_unregister` when another object defines
/// them; `None` when this copy serves.
fn decide() -> Option<Elsewhere> {
    let own = object_of((&raw const MARK).cast()).map(|(base, _)| base);
    let register = global(c"bootprof_register");
    let unregister = global(c"bootprof_unregister");
    if !register.is_null() && !unregister.is_null() {
        let theirs = object_of(register).map(|(base, _)| base);
        if theirs.is_some() && theirs != own {
            // SAFETY: the global scope's definitions of the two entry points, of the runtime
            // that serves (their signatures are bootprof.h's, in every copy).
            return Some(unsafe {
                Elsewhere {
                    register: core::mem::transmute::<*mut c_void, RegisterFn>(register),
                    unregister: core::mem::transmute::<*mut c_void, UnregisterFn>(unregister),
                }
            });
        }
    }
    None
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
