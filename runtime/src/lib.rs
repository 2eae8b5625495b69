//! bootprof's runtime: takes the NOP sites `bootprof-link` recorded; turns them back on while the
//! program runs, and hands their hits on to handlers and to the event log.
//!
//! The probe lifecycle (call -> NOP -> int3 or call -> handler) is described once, in
//! `bootprof-format`. Here: every object linked by `bootprof-link` calls
//! [`bootprof_register`](capi::bootprof_register) from a constructor with its table; the
//! [`registry`] records the sites and publishes a lookup snapshot of them; [`enable`] and
//! [`disable`] patch them ([`text`]) in trap mode ([`trap`]: `int3` + SIGTRAP) or call mode
//! ([`dispatch`]: the call to the stub is put back); handlers get a [`Hit`].
//!
//! The modules form layers, each using only the ones below it: `syscall` (system calls made
//! directly, keeping the program's glibc symbol versions to a plain program's), `sys` (the C
//! library: the runtime is `no_std`), [`text`], `clock`,
//! `note` (stderr), `serving` (which of several copies of the runtime in one process serves:
//! shared objects carry one too), `sigchain` (signals that are not ours, on to the program's disposition),
//! `knock` (the attach signal's handler, which starts a listener thread only when knocked), `thread` (the thread's id and re-entry guard), `unwind` (a hit's call stack,
//! by frame pointers) -> `site` (the site records, their list and lookup snapshot) -> `buffer`
//! (the lane records go into) -> `counts` (exact hit counts, into the lane or to stderr) ->
//! `latency` (intervals and kept windows) -> [`recorder`] -> `filter` (calls kept by depth
//! and duration) -> [`graph`] (function exits by return hooking) -> [`dispatch`] -> [`trap`] -> [`registry`] -> `api` (the Rust API, re-exported
//! here) -> `attach` (`bootprof attach`'s conversation with the program) -> [`capi`]. Nothing below imports this root.
//!
//! `BOOTPROF_ENABLE="pattern,pattern"`, `BOOTPROF_NOTRACE="pattern,..."` (never enabled),
//! `BOOTPROF_STACKTRACE="pattern,..."` (enabled, and each hit's record followed by its call
//! stack), `BOOTPROF_MODE=trap|call`, `BOOTPROF_GRAPH=1` (record function exits, [`graph`]),
//! `BOOTPROF_DEPTH=N` and `BOOTPROF_MIN_TIME=NANOSECONDS` (record only the outermost N levels of
//! calls, only the calls that took that long: `filter`) are read when the first table registers, before the
//! program's own constructors; they are ignored (with a note on stderr) in secure-execution mode. The runtime
//! never writes to stdout.
#![deny(missing_docs)]
#![no_std]
// Without the standard library (what C programs link), thread-locals are `#[thread_local]`
// statics (see `sys`): the build that makes that library allows the feature.
#![cfg_attr(not(feature = "std"), feature(thread_local))]
// Code that runs once or rarely (reading settings, writing reports and traces, attaching) is built
// for size in the C build: every program carries it. The hit path is built for speed.
#![cfg_attr(not(feature = "std"), feature(optimize_attribute))]
// The lean runtime uses a few functions of the modules it shares with the whole runtime.
#![cfg_attr(feature = "lean", allow(dead_code, unused_imports, unused_macros))]
#[cfg(all(feature = "lean", feature = "std"))]
compile_error!("the lean runtime (feature `lean`) is built without the standard library");
#[cfg(all(feature = "lean", feature = "library"))]
compile_error!("the lean runtime loads the runtime library (feature `library`); it is not one");

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

/// What every module takes from `alloc` (the standard library's prelude has it).
#[allow(unused_imports)]
mod prelude {
    pub(crate) use alloc::borrow::ToOwned;
    pub(crate) use alloc::boxed::Box;
    pub(crate) use alloc::format;
    pub(crate) use alloc::string::{String, ToString};
    pub(crate) use alloc::vec;
    pub(crate) use alloc::vec::Vec;
}

// The lean runtime (feature `lean`) is the few modules every copy has, below `site`: which
// copy serves, the knock, the environment, and `lean`, which keeps the tables and loads the
// runtime library. Everything else is the whole runtime's.
#[cfg(not(feature = "lean"))]
mod api;
#[cfg(not(feature = "lean"))]
mod attach;
#[cfg(not(feature = "lean"))]
mod buffer;
#[cfg(not(feature = "lean"))]
pub mod capi;
mod clock;
#[cfg(not(feature = "lean"))]
mod counts;
#[cfg(not(feature = "lean"))]
pub mod dispatch;
#[cfg(not(feature = "lean"))]
mod filter;
#[cfg(not(feature = "lean"))]
pub mod graph;
// The runtime library's knock is the lean runtime's, which loaded it.
#[cfg(not(feature = "library"))]
mod knock;
#[cfg(not(feature = "lean"))]
pub(crate) mod latency;
#[cfg(feature = "lean")]
pub mod lean;
// The lean runtime's entry points are all in `lean`: `serving`'s table names them there.
#[cfg(feature = "lean")]
use lean as capi;
#[cfg(feature = "lean")]
use lean as graph;
#[cfg(not(feature = "lean"))]
mod macros;
mod note;
pub use bootprof_format::pattern;
#[cfg(not(feature = "lean"))]
pub mod recorder;
#[cfg(not(feature = "lean"))]
pub mod registry;
#[cfg_attr(not(feature = "shared-object"), allow(dead_code))]
mod serving;
mod sigchain;
#[cfg(not(feature = "lean"))]
mod site;
mod sys;
mod syscall;
#[cfg(not(feature = "lean"))]
pub mod text;
#[cfg(not(feature = "lean"))]
mod thread;
#[cfg(not(feature = "lean"))]
pub mod trap;
#[cfg(not(feature = "lean"))]
mod unwind;
#[cfg(any(feature = "lean", test))]
mod vars;
mod wrapped;

#[cfg(feature = "std")]
pub use api::dump;
#[cfg(not(feature = "lean"))]
pub use api::{
    add_handler, add_handler_fn, check, clear_notrace, disable, enable, enable_with, hits, notrace,
    record, remove_handler, set_graph, sites, stacktrace, HandlerId, SiteInfo,
};
pub use bootprof_format as format;
#[cfg(not(feature = "lean"))]
pub use dispatch::{HandlerFn, Hit};
pub use pattern::{Pattern, PatternError};
#[cfg(not(feature = "lean"))]
pub use registry::{Error, Mode};
