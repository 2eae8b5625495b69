//! The C API (`runtime/include/bootprof.h`): takes C calls, and the registration every object
//! linked by `bootprof-link` makes from its constructor; hands them on to the Rust API (`api`),
//! the registry, the dispatcher's trampolines and the recorder, and hands back counts, site
//! descriptions and error messages as C values.
//!
//! Functions returning `int` return a count or 0 on success, and -1 on error, with the message
//! in [`bootprof_last_error`].

use crate::dispatch::HandlerFn;
use crate::prelude::*;
use core::cell::RefCell;
use core::ffi::{c_char, c_int, c_void, CStr};

crate::sys::thread_local_cells! {
    /// The last error's message, NUL-terminated (empty before the first).
    static LAST_ERROR: RefCell<Vec<u8>> = RefCell::new(Vec::new());
}

fn fail(msg: impl core::fmt::Display) -> c_int {
    let mut msg = msg.to_string().replace('\0', " ").into_bytes();
    msg.push(0);
    LAST_ERROR.with(|e| *e.borrow_mut() = msg);
    -1
}

/// The message of the last failed call on this thread.
#[no_mangle]
pub extern "C" fn bootprof_last_error() -> *const c_char {
    crate::serving::hand_on!(counterpart, bootprof_last_error());
    LAST_ERROR.with(|e| match e.borrow().is_empty() {
        true => c"".as_ptr(),
        false => e.borrow().as_ptr().cast(),
    })
}

/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn text<'a>(p: *const c_char) -> Result<&'a str, c_int> {
    if p.is_null() {
        return Err(fail("NULL pattern"));
    }
    // SAFETY: per the contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| fail("pattern is not UTF-8"))
}

fn count(r: Result<usize, crate::registry::Error>) -> c_int {
    match r {
        Ok(n) => n.min(c_int::MAX as usize) as c_int,
        Err(e) => fail(e),
    }
}

/// Records an object's site table and points its stubs' dispatch pointers at the runtime.
///
/// # Safety
/// Called by the constructor `bootprof-link` generates, with the object's own table bounds and
/// its three-pointer dispatch table.
#[no_mangle]
pub unsafe extern "C" fn bootprof_register(start: *const u8, stop: *const u8, ptrs: *mut usize) {
    crate::serving::hand_on!(counterpart, bootprof_register(start, stop, ptrs));
    if !ptrs.is_null() {
        for (i, t) in crate::dispatch::trampolines().into_iter().enumerate() {
            // SAFETY: the stub object's pointer table has three writable slots.
            unsafe { core::ptr::write_volatile(ptrs.add(i), t) };
        }
    }
    // Nothing in the environment for bootprof (a program run as usual): nothing to read but the
    // attach settings, and the table is read only when something needs its sites.
    let asked = crate::sys::any_var_starting("BOOTPROF_");
    if asked {
        crate::recorder::init_from_environment();
        crate::graph::init_from_environment();
        crate::filter::init_from_environment();
    }
    // SAFETY: the bounds come from the linker for this object.
    unsafe { crate::registry::register_table(start, stop) };
    if asked {
        crate::api::apply_environment();
    }
    // The runtime library's knock is the lean runtime's, which loaded it.
    #[cfg(not(feature = "library"))]
    crate::attach::init_from_environment(asked);
}

/// Forgets an object's sites (its destructor calls this: a library being `dlclose`d), putting
/// their NOPs back first.
///
/// # Safety
/// `start` must be the table start an earlier `bootprof_register` received.
#[no_mangle]
#[cfg_attr(not(feature = "std"), optimize(size))]
pub unsafe extern "C" fn bootprof_unregister(start: *const u8) {
    crate::serving::hand_on!(counterpart, bootprof_unregister(start));
    if !start.is_null() {
        crate::registry::unregister_table(start as u64);
    }
}

/// Enables the sites matching `pattern` in trap mode; returns how many changed, or -1.
///
/// # Safety
/// `pattern` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn bootprof_enable(pattern: *const c_char) -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_enable(pattern));
    // SAFETY: per the contract.
    unsafe { bootprof_enable_mode(pattern, crate::registry::Mode::Trap as c_int) }
}

/// Enables the sites matching `pattern` in `mode` (1 trap, 2 call); returns how many changed.
///
/// # Safety
/// `pattern` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn bootprof_enable_mode(pattern: *const c_char, mode: c_int) -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_enable_mode(pattern, mode));
    // SAFETY: per the contract.
    let p = match unsafe { text(pattern) } {
        Ok(p) => p,
        Err(e) => return e,
    };
    let mode = match mode {
        1 => crate::registry::Mode::Trap,
        2 => crate::registry::Mode::Call,
        _ => return fail(format!("mode {mode} is neither 1 (trap) nor 2 (call)")),
    };
    count(crate::api::enable_with(p, mode))
}

/// Disables the sites matching `pattern`; returns how many changed, or -1.
///
/// # Safety
/// `pattern` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn bootprof_disable(pattern: *const c_char) -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_disable(pattern));
    // SAFETY: per the contract.
    match unsafe { text(pattern) } {
        Ok(p) => count(crate::api::disable(p)),
        Err(e) => e,
    }
}

/// Adds a notrace pattern; 0 or -1.
///
/// # Safety
/// `pattern` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn bootprof_notrace(pattern: *const c_char) -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_notrace(pattern));
    // SAFETY: per the contract.
    match unsafe { text(pattern) } {
        Ok(p) => crate::api::notrace(p).map_or_else(fail, |()| 0),
        Err(e) => e,
    }
}

/// Records (`on` = 1) or stops recording (0) the call stack at every hit of the sites matching
/// `pattern`; returns how many match, or -1. Enabling them is separate.
///
/// # Safety
/// `pattern` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn bootprof_stacktrace(pattern: *const c_char, on: c_int) -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_stacktrace(pattern, on));
    // SAFETY: per the contract.
    match unsafe { text(pattern) } {
        Ok(p) => count(crate::api::stacktrace(p, on != 0)),
        Err(e) => e,
    }
}

/// Records function exits of hooked functions (`on` = 1) or stops hooking new calls (0); 0.
#[no_mangle]
pub extern "C" fn bootprof_set_graph(on: c_int) -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_set_graph(on));
    crate::api::set_graph(on != 0);
    0
}

/// Removes every notrace pattern.
#[no_mangle]
pub extern "C" fn bootprof_clear_notrace() {
    crate::serving::hand_on!(counterpart, bootprof_clear_notrace());
    crate::api::clear_notrace();
}

/// Registers `func(hit, cookie)` for the sites matching `pattern`; returns the handler's id.
///
/// # Safety
/// `pattern` must be a NUL-terminated string; `func` must be safe to call from any thread and
/// from a signal handler (trap mode).
#[no_mangle]
pub unsafe extern "C" fn bootprof_add_handler(
    pattern: *const c_char,
    func: Option<HandlerFn>,
    cookie: *mut c_void,
) -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_add_handler(pattern, func, cookie));
    // SAFETY: per the contract.
    let p = match unsafe { text(pattern) } {
        Ok(p) => p,
        Err(e) => return e,
    };
    let Some(func) = func else {
        return fail("NULL handler");
    };
    match crate::api::add_handler_fn(p, func, cookie) {
        Ok(id) => id.0 as c_int,
        Err(e) => fail(e),
    }
}

/// Removes handler `id`; 0, or -1 if there is none.
#[no_mangle]
pub extern "C" fn bootprof_remove_handler(id: c_int) -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_remove_handler(id));
    if id >= 0 && crate::api::remove_handler(crate::api::HandlerId(id as usize)) {
        0
    } else {
        fail(format!("no handler {id}"))
    }
}

/// The sum of the hit counters of the sites matching `pattern`, or -1.
///
/// # Safety
/// `pattern` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn bootprof_hits(pattern: *const c_char) -> i64 {
    crate::serving::hand_on!(counterpart, bootprof_hits(pattern));
    // SAFETY: per the contract.
    match unsafe { text(pattern) } {
        Ok(p) => crate::api::hits(p).map_or_else(|e| i64::from(fail(e)), |n| n as i64),
        Err(e) => i64::from(e),
    }
}

/// Number of registered sites.
#[no_mangle]
pub extern "C" fn bootprof_site_count() -> usize {
    crate::serving::hand_on!(counterpart, bootprof_site_count());
    crate::site::lock().site_count()
}

/// One site, for `bootprof_site_info` (layout is `struct bootprof_site`).
#[repr(C)]
pub struct CSite {
    /// Id.
    pub id: u32,
    /// Kind (`BOOTPROF_KIND_*`).
    pub kind: u8,
    /// 0 disabled, 1 trap, 2 call.
    pub mode: u8,
    /// Reserved.
    pub reserved: u16,
    /// Address.
    pub address: u64,
    /// Provider.
    pub provider: *const c_char,
    /// Name.
    pub name: *const c_char,
    /// Function.
    pub function: *const c_char,
    /// Offset in the function.
    pub func_offset: u32,
    /// Reserved.
    pub reserved2: u32,
    /// Hits so far.
    pub hits: u64,
}

/// Fills `out` with site `i` (0 <= i < bootprof_site_count()); 0, or -1 if out of range.
///
/// # Safety
/// `out` must point to a writable `struct bootprof_site`.
#[no_mangle]
pub unsafe extern "C" fn bootprof_site_info(i: usize, out: *mut CSite) -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_site_info(i, out));
    let reg = crate::site::lock();
    let Some(s) = reg.site(i) else {
        return fail(format!("no site {i}"));
    };
    let mode = s.mode().map_or(0, |m| m as u8);
    let [provider, name, function] = s.c_names();
    let site = CSite {
        id: s.id,
        kind: s.kind as u8,
        mode,
        reserved: 0,
        address: s.addr,
        provider: provider.cast(),
        name: name.cast(),
        function: function.cast(),
        func_offset: s.func_offset,
        reserved2: 0,
        hits: s.hits.load(core::sync::atomic::Ordering::Relaxed),
    };
    // SAFETY: per the contract.
    unsafe { out.write(site) };
    0
}

/// 1 if the runtime owns SIGTRAP (or needs not), 0 if the program replaced its handler.
#[no_mangle]
pub extern "C" fn bootprof_check() -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_check());
    c_int::from(crate::api::check())
}

/// Starts (1) or stops (0) recording hits of enabled sites into the event log; 0, or -1.
#[no_mangle]
pub extern "C" fn bootprof_record(on: c_int) -> c_int {
    crate::serving::hand_on!(counterpart, bootprof_record(on));
    if on == 0 {
        crate::recorder::stop();
        return 0;
    }
    if crate::api::record() {
        0
    } else {
        fail("cannot map the record buffer")
    }
}

/// Writes the event log to `path` (NULL: `BOOTPROF_OUTPUT`, else `bootprof.<pid>.trace`);
/// returns the number of records written, or -1. Counting hits (`BOOTPROF_COUNT=1`), writes the
/// counts so far (into the session's lane, else to stderr) and the event log only if the program
/// started recording (else returns 0).
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn bootprof_dump(path: *const c_char) -> i64 {
    crate::serving::hand_on!(counterpart, bootprof_dump(path));
    let path = if path.is_null() {
        crate::recorder::default_path()
    } else {
        // SAFETY: per the contract.
        unsafe { CStr::from_ptr(path) }.to_bytes().to_vec()
    };
    match crate::recorder::dump_on_demand(&path) {
        Ok(n) => n.unwrap_or(0) as i64,
        Err(e) => i64::from(fail(format!("{}: {e}", crate::sys::display(&path)))),
    }
}

/// Starts accounting profile points (recorded ENTER/EXIT pairs), from now on: what
/// `BOOTPROF_POINTS=1` does from the start. Without either, the first [`bootprof_print_points`]
/// starts it.
#[no_mangle]
pub extern "C" fn bootprof_count_points() {
    crate::serving::hand_on!(counterpart, bootprof_count_points());
    crate::recorder::count_points();
}

/// Writes the profile-point table to file descriptor `fd` (e.g. 2). The points are accounted
/// from the first call of this or of [`bootprof_count_points`] (the first of this finds none),
/// or from the start with `BOOTPROF_POINTS=1`.
#[no_mangle]
pub extern "C" fn bootprof_print_points(fd: c_int) {
    crate::serving::hand_on!(counterpart, bootprof_print_points(fd));
    let table = crate::recorder::points_table();
    // SAFETY: write(2) with our own buffer.
    unsafe { libc::write(fd, table.as_ptr().cast(), table.len()) };
}

/// What the runtime library (this crate built with the feature `library`, `libbootprof.so`)
/// exports for the lean runtime that loads it (`lean`).
#[cfg(feature = "library")]
mod library {
    use crate::serving::{Library, ENTRIES, HANDED_ON, LIBRARY_VERSION};

    /// [`Library::start`].
    extern "C" fn start(exit_object: *mut core::ffi::c_void) {
        crate::sys::set_exit_object(exit_object);
    }

    /// What the lean runtime that loads this library finds under `serving::LIBRARY_SYMBOL` (the
    /// only symbol the library exports).
    #[no_mangle]
    #[used]
    static bootprof_library: Library = Library {
        version: LIBRARY_VERSION,
        count: HANDED_ON.len() as u32,
        entries: &ENTRIES,
        start,
        listen: crate::attach::serve_knock,
    };
}
