//! The lean runtime: what a program carries when it uses no more than its sites (no call of
//! the C API, not static; `bootprof-link --embed-runtime` links the whole runtime instead).
//! Takes the registrations of site tables and every other entry point's calls; keeps the tables
//! until something asks for the runtime, then loads the runtime library (`libbootprof.so`,
//! this crate built with the feature `library`) and hands it the tables and, from then on,
//! every call. Until then a program that nobody traces pays for a knock handler and a list of
//! its tables, not for the runtime's code.
//!
//! What asks for the runtime: a variable the library acts on in the environment at start-up
//! (`BOOTPROF_ENABLE`, `BOOTPROF_SESSION`, ...: [`vars::LIBRARY`], read at the first
//! registration); an attach (the knock's listener loads the library, then serves through it);
//! a call of the C API, which reaches this copy only from another copy that hands its calls on
//! to this one (a program that calls the API itself carries the whole runtime).
//!
//! Where the library is: `$BOOTPROF_LIBRARY` (`bootprof run` sets it to its own), else, at an
//! attach, the copy the client offers in the user's private directory
//! (`bootprof_format::attach`), else the file `bootprof-link` wrote beside the lean runtime in
//! its cache when it linked the program, whose path it put into the program
//! (`bootprof_library_path`, in the stubs object). Neither in
//! secure-execution mode, where the environment is not trusted and nothing is loaded. A library
//! that cannot be loaded, or is of another version, is named on stderr with the reason; the
//! program then runs with its sites disabled, and the C API's calls fail with that reason (and
//! an attach that offers a library tries again).
//!
//! The wrapped functions (`longjmp`, `backtrace`, ...) may run in a signal handler: they never
//! load anything, and go to the real functions until the library serves.
//!
//! Locks: [`LOADING`] is held while the library is loaded (`dlopen`), [`KEPT`] while the kept
//! tables are handed to it (its `bootprof_register` runs under it), never the one inside the
//! other; the library never calls this copy. A registration, which comes from an object's
//! constructor under the dynamic loader's lock, takes `KEPT` only and never waits for a load
//! (but the first, which loads the library itself when the environment asks for it: the
//! dynamic loader's lock is this thread's then).

use crate::note::note_parts;
use crate::prelude::*;
use crate::serving::{Library, HANDED_ON, LIBRARY_SYMBOL, LIBRARY_VERSION};
use crate::sys::Mutex;
use crate::vars;
use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicPtr, Ordering};

/// The tables registered with this copy while no library serves: each `bootprof_register`'s
/// (start, stop, pointer table), and whether the library has them (from then on registrations
/// go straight to it).
struct Kept {
    tables: Vec<(usize, usize, usize)>,
    handed: bool,
}

static KEPT: Mutex<Kept> = Mutex::new(Kept {
    tables: Vec::new(),
    handed: false,
});

/// The library once it has the kept tables (null before): where every entry point's calls go.
static SERVING: AtomicPtr<Library> = AtomicPtr::new(core::ptr::null_mut());

/// The library once loaded (null before).
static LOADED: AtomicPtr<Library> = AtomicPtr::new(core::ptr::null_mut());

/// The attempts to load the library, one at a time: whether one was made, and why the last one
/// failed (a NUL-terminated message, what `bootprof_last_error` answers; never freed, as the
/// answer may be in use). A failed attempt is made again only when an attaching client offers
/// a library: the environment and the path in the program do not change.
static LOADING: Mutex<(bool, &'static [u8])> = Mutex::new((false, b"\0"));

extern "C" {
    /// The runtime library's path `bootprof-link` wrote into the program's stubs object
    /// (NUL-terminated; empty when it had none to give).
    static bootprof_library_path: [c_char; 1];
    /// The handle of the object that carries this copy (the C runtime's start files define it),
    /// with whose finalization the library's exit handlers run: before the destructors of this
    /// object, which unregister its sites (`Library::start`).
    static __dso_handle: *mut c_void;
}

/// The library that serves, once it does.
fn serving() -> Option<&'static Library> {
    // SAFETY: null, or a library that stays loaded (`RTLD_NODELETE`).
    unsafe { SERVING.load(Ordering::Acquire).as_ref() }
}

/// The library, once loaded.
fn loaded() -> Option<&'static Library> {
    // SAFETY: null, or a library that stays loaded (`RTLD_NODELETE`).
    unsafe { LOADED.load(Ordering::Acquire).as_ref() }
}

/// The library, loaded now if no attempt was made yet, with the kept tables handed to it;
/// `None` when it cannot be loaded.
fn library() -> Option<&'static Library> {
    library_or(None)
}

/// [`library`], with the one an attaching client offers (`offered`) among the places tried.
fn library_or(offered: Option<&[u8]>) -> Option<&'static Library> {
    let library = loaded().or_else(|| {
        let mut loading = LOADING.lock();
        if let Some(library) = loaded() {
            return Some(library);
        }
        if loading.0 && offered.is_none() {
            return None;
        }
        loading.0 = true;
        match load(offered) {
            Ok(library) => {
                LOADED.store((library as *const Library).cast_mut(), Ordering::Release);
                Some(library)
            }
            Err(why) => {
                loading.1 = why.leak();
                None
            }
        }
    })?;
    let mut kept = KEPT.lock();
    if !kept.handed {
        let register = library.entries.get("bootprof_register")?;
        // SAFETY: a word the start files define.
        (library.start)(unsafe { __dso_handle });
        for (start, stop, ptrs) in core::mem::take(&mut kept.tables) {
            // SAFETY: the library's function of that name, with what this copy's was given.
            unsafe {
                crate::serving::typed_as(bootprof_register as Register, register)(
                    start as *const u8,
                    stop as *const u8,
                    ptrs as *mut usize,
                )
            };
        }
        kept.handed = true;
        SERVING.store((library as *const Library).cast_mut(), Ordering::Release);
    }
    Some(library)
}

type Register = unsafe extern "C" fn(*const u8, *const u8, *mut usize);

/// Loads the library from the first place that has one of this runtime's version; notes on
/// stderr why none could be loaded, or why a place before the one loaded was passed over.
fn load(offered: Option<&[u8]>) -> Result<&'static Library, Vec<u8>> {
    if crate::sys::auxv(libc::AT_SECURE) != 0 {
        let mut why = b"the runtime library is not loaded in secure-execution mode (set-user-ID, \
            set-group-ID or file capabilities): the BOOTPROF_ variables are ignored"
            .to_vec();
        note_parts(&[&why]);
        why.push(0);
        return Err(why);
    }
    let mut tried: Vec<u8> = Vec::new();
    let from_environment = crate::sys::var_os(vars::LIBRARY_PATH).filter(|p| !p.is_empty());
    // SAFETY: a NUL-terminated string bootprof-link wrote into the stubs object.
    let written = unsafe { CStr::from_ptr((&raw const bootprof_library_path).cast()) };
    let places = [
        (from_environment.unwrap_or_default(), vars::LIBRARY_PATH),
        (
            offered.unwrap_or_default(),
            "offered by the attaching bootprof",
        ),
        (written.to_bytes(), "where bootprof-link put it"),
    ];
    for (path, whence) in places.into_iter().filter(|(p, _)| !p.is_empty()) {
        let why = match open(path) {
            Ok(library) if tried.is_empty() => return Ok(library),
            Ok(library) => {
                // A library asked for and not used is not passed over in silence.
                let parts: [&[u8]; 4] = [b"the runtime library ", &tried, b"; loaded ", path];
                note_parts(&parts);
                return Ok(library);
            }
            Err(why) => why,
        };
        if !tried.is_empty() {
            tried.extend_from_slice(b"; ");
        }
        let parts: [&[u8]; 5] = [path, b" (", whence.as_bytes(), b"): ", &why];
        for part in parts {
            tried.extend_from_slice(part);
        }
    }
    if tried.is_empty() {
        tried.extend_from_slice(b"the program names none");
    }
    let mut why = b"the runtime library could not be loaded, so nothing is traced: ".to_vec();
    why.extend_from_slice(&tried);
    why.extend_from_slice(
        b". Set BOOTPROF_LIBRARY to a libbootprof.so (bootprof-link --print-library), run the \
          program under `bootprof run`, or link it with bootprof-link --embed-runtime",
    );
    note_parts(&[&why]);
    why.push(0);
    Err(why)
}

/// The library at `path`, loaded for good (`RTLD_NODELETE`: sites point into it), when it is
/// one of this runtime's version; else why not.
fn open(path: &[u8]) -> Result<&'static Library, Vec<u8>> {
    let c_path = crate::sys::CPath::new(path);
    let flags = libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE;
    // SAFETY: a NUL-terminated path.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), flags) };
    if handle.is_null() {
        // SAFETY: dlerror's message, NUL-terminated, or null.
        let e = unsafe { libc::dlerror() };
        return Err(match e.is_null() {
            true => b"dlopen failed".to_vec(),
            // SAFETY: as above.
            false => unsafe { CStr::from_ptr(e) }.to_bytes().to_vec(),
        });
    }
    // SAFETY: a handle dlopen gave and a NUL-terminated name.
    let found = unsafe { libc::dlsym(handle, LIBRARY_SYMBOL.as_ptr()) };
    if found.is_null() {
        return Err(b"not a bootprof runtime library (no bootprof_library)".to_vec());
    }
    // SAFETY: a bootprof runtime library's table: its version says whether it is this layout.
    let version = unsafe { *found.cast::<u32>() };
    if version != LIBRARY_VERSION {
        let mut e = b"a runtime library of another version of bootprof (its version ".to_vec();
        put_number(&mut e, version);
        e.extend_from_slice(b", this program's runtime needs ");
        put_number(&mut e, LIBRARY_VERSION);
        e.push(b')');
        return Err(e);
    }
    // SAFETY: of this version: a `Library`, in a library that stays loaded.
    let library = unsafe { &*found.cast::<Library>() };
    if library.count as usize != HANDED_ON.len() {
        return Err(b"a runtime library with another list of entry points".to_vec());
    }
    Ok(library)
}

/// Appends `v` in decimal to `out`.
fn put_number(out: &mut Vec<u8>, v: u32) {
    let mut digits = [0u8; 10];
    let n = crate::note::put_decimal(&mut digits, v);
    out.extend_from_slice(&digits[..n]);
}

/// Whether a variable the library acts on is set (see [`vars::LIBRARY`]).
fn asked_at_start() -> bool {
    vars::LIBRARY
        .iter()
        .any(|name| crate::sys::var_os(name).is_some())
}

/// The knock's listener (see `knock`): loads the library (the one the client offers among the
/// places tried), then serves the client through it.
extern "C" fn listener(arg: *mut c_void) -> *mut c_void {
    if let Some(library) = library_or(crate::knock::offered_library().as_deref()) {
        (library.listen)(arg);
    }
    crate::knock::listener_done();
    core::ptr::null_mut()
}

/// Records an object's site table: kept until the library serves, then the library's. The first
/// registration installs the knock's handler, and loads the library at once when the
/// environment asks for it.
///
/// # Safety
/// As the runtime's `bootprof_register`: called by the constructor `bootprof-link` generates.
#[no_mangle]
pub unsafe extern "C" fn bootprof_register(start: *const u8, stop: *const u8, ptrs: *mut usize) {
    crate::serving::hand_on!(counterpart, bootprof_register(start, stop, ptrs));
    static FIRST: crate::sys::Once = crate::sys::Once::new();
    let mut at_start = false;
    FIRST.call_once(|| {
        let asked = crate::sys::any_var_starting("BOOTPROF_");
        crate::knock::init_from_environment(asked, listener);
        at_start = asked && asked_at_start();
    });
    let mut kept = KEPT.lock();
    if !kept.handed {
        kept.tables
            .push((start as usize, stop as usize, ptrs as usize));
        drop(kept);
        if at_start {
            library();
        }
        return;
    }
    drop(kept);
    if let Some(f) = serving().and_then(|l| l.entries.get("bootprof_register")) {
        // SAFETY: the library's function of that name, with what this one was given.
        unsafe { crate::serving::typed_as(bootprof_register as Register, f)(start, stop, ptrs) };
    }
}

/// Forgets an object's site table (its destructor calls this), in the library once it serves.
///
/// # Safety
/// As the runtime's `bootprof_unregister`.
#[no_mangle]
pub unsafe extern "C" fn bootprof_unregister(start: *const u8) {
    crate::serving::hand_on!(counterpart, bootprof_unregister(start));
    let mut kept = KEPT.lock();
    if !kept.handed {
        kept.tables.retain(|&(s, _, _)| s != start as usize);
        return;
    }
    drop(kept);
    if let Some(f) = serving().and_then(|l| l.entries.get("bootprof_unregister")) {
        type Unregister = unsafe extern "C" fn(*const u8);
        // SAFETY: the library's function of that name.
        unsafe { crate::serving::typed_as(bootprof_unregister as Unregister, f)(start) };
    }
}

/// The message of the last failed call: the library's, or why it could not be loaded.
#[no_mangle]
pub extern "C" fn bootprof_last_error() -> *const c_char {
    crate::serving::hand_on!(counterpart, bootprof_last_error());
    match serving() {
        Some(library) => match library.entries.get("bootprof_last_error") {
            // SAFETY: the library's function of that name.
            Some(f) => unsafe { crate::serving::typed_as(bootprof_last_error as LastError, f)() },
            None => c"".as_ptr(),
        },
        None => LOADING.lock().1.as_ptr().cast(),
    }
}

type LastError = extern "C" fn() -> *const c_char;

/// Entry points that hand their calls on: to the copy that serves when it is another one, else
/// to the library (`$lookup`: [`library`], which loads it, or [`serving`], which does not);
/// without one, `$without` is the answer.
macro_rules! handed_on {
    ($decided:ident, $lookup:ident: $(
        $(#[$meta:meta])*
        fn $name:ident($($arg:ident: $t:ty),*) $(-> $ret:ty)? = $without:expr;
    )*) => {$(
        $(#[$meta])*
        ///
        /// # Safety
        /// As the runtime's function of this name (`bootprof.h`, or the C library's for the
        /// wrapped ones).
        #[no_mangle]
        #[allow(unused_unsafe)]
        pub unsafe extern "C" fn $name($($arg: $t),*) $(-> $ret)? {
            crate::serving::hand_on!($decided, $name($($arg),*));
            match $lookup().and_then(|l| l.entries.get(stringify!($name))) {
                // SAFETY: the library's function of this name, so of this signature.
                Some(f) => unsafe {
                    let this = $name as unsafe extern "C" fn($($t),*) $(-> $ret)?;
                    crate::serving::typed_as(this, f)($($arg),*)
                },
                // SAFETY: per the contract.
                None => unsafe { $without },
            }
        }
    )*};
}

handed_on! { counterpart, library:
    /// `bootprof_enable`.
    fn bootprof_enable(pattern: *const c_char) -> c_int = -1;
    /// `bootprof_enable_mode`.
    fn bootprof_enable_mode(pattern: *const c_char, mode: c_int) -> c_int = -1;
    /// `bootprof_disable`.
    fn bootprof_disable(pattern: *const c_char) -> c_int = -1;
    /// `bootprof_notrace`.
    fn bootprof_notrace(pattern: *const c_char) -> c_int = -1;
    /// `bootprof_stacktrace`.
    fn bootprof_stacktrace(pattern: *const c_char, on: c_int) -> c_int = -1;
    /// `bootprof_set_graph`.
    fn bootprof_set_graph(on: c_int) -> c_int = -1;
    /// `bootprof_clear_notrace`.
    fn bootprof_clear_notrace() = ();
    /// `bootprof_add_handler`.
    fn bootprof_add_handler(pattern: *const c_char, f: *const c_void, cookie: *mut c_void) -> c_int = -1;
    /// `bootprof_remove_handler`.
    fn bootprof_remove_handler(id: c_int) -> c_int = -1;
    /// `bootprof_hits`.
    fn bootprof_hits(pattern: *const c_char) -> i64 = -1;
    /// `bootprof_site_count`.
    fn bootprof_site_count() -> usize = 0;
    /// `bootprof_site_info`.
    fn bootprof_site_info(i: usize, out: *mut c_void) -> c_int = -1;
    /// `bootprof_check`.
    fn bootprof_check() -> c_int = -1;
    /// `bootprof_record`.
    fn bootprof_record(on: c_int) -> c_int = -1;
    /// `bootprof_dump`.
    fn bootprof_dump(path: *const c_char) -> i64 = -1;
    /// `bootprof_count_points`.
    fn bootprof_count_points() = ();
    /// `bootprof_print_points`.
    fn bootprof_print_points(fd: c_int) = ();
}

handed_on! { counterpart_if_decided, serving:
    /// `longjmp`, as the program calls it.
    fn __wrap_longjmp(env: *mut u64, val: c_int) -> ! =
        crate::wrapped::bootprof_real_longjmp(env, val);
    /// `_longjmp`, as the program calls it.
    fn __wrap__longjmp(env: *mut u64, val: c_int) -> ! =
        crate::wrapped::bootprof_real__longjmp(env, val);
    /// `siglongjmp`, as the program calls it.
    fn __wrap_siglongjmp(env: *mut u64, val: c_int) -> ! =
        crate::wrapped::bootprof_real_siglongjmp(env, val);
    /// `__longjmp_chk`, as the program calls it.
    fn __wrap___longjmp_chk(env: *mut u64, val: c_int) -> ! =
        crate::wrapped::bootprof_real___longjmp_chk(env, val);
    /// `backtrace`, as the program calls it.
    fn __wrap_backtrace(buffer: *mut *mut c_void, size: c_int) -> c_int =
        crate::wrapped::bootprof_real_backtrace(buffer, size);
    /// `_Unwind_Backtrace`, as the program calls it.
    fn __wrap__Unwind_Backtrace(trace: *mut c_void, arg: *mut c_void) -> c_int =
        match crate::wrapped::REAL_UNWIND_BACKTRACE {
            0 => crate::wrapped::END_OF_STACK,
            f => core::mem::transmute::<usize, crate::wrapped::UnwindBacktrace>(f)(trace, arg),
        };
}
