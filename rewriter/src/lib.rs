//! `bootprof-link`'s library: the link-time rewriter that turns probe call sites into long NOPs
//! and records them in the site table.
//!
//! The pipeline, one module per phase (see `DESIGN.md`), run by [`pipeline::run_link`]:
//! [`args`] parses the link line -> [`gather`] collects the relocatable inputs (objects, archives,
//! or one partial link; [`lto`] turns IR inputs into the machine code their link generates) ->
//! per object ([`rewrite`]): [`scan`] finds the relocations against probe symbols -> [`patch`]
//! verifies each site (decoding it) and places it in its function -> [`emit`] writes the
//! rewritten object with its NOPs and table fragments; then [`stubs`] writes the object defining
//! every probe symbol -> [`link`] runs the final link, [`check`] makes sure no hook or probe call
//! survived outside the table, and the output moves into place atomically.
//!
//! Below the phases: [`site`] (what they hand each other), [`elf`] (the x86-64 ELF layer),
//! [`decode`] (with [`length`]), [`functions`] and [`guard`] (parts of `patch`), [`hash`], [`archive`], [`driver`] (running
//! commands), [`runtime_lib`] (the runtime as linked), [`prelink`] (the runtime archive made into
//! one small object), [`cache`] (where the runtime `bootprof-link` carries is unpacked),
//! [`leftovers`] (the files a link leaves, removed after the process) and [`error`].
#![deny(missing_docs)]
// Errors are built once per failed link; their size does not matter, their context does.
#![allow(clippy::result_large_err)]

pub mod archive;
pub mod args;
pub mod cache;
pub mod check;
pub mod decode;
pub mod driver;
pub mod elf;
pub mod emit;
pub mod error;
pub mod functions;
pub mod gather;
pub mod guard;
pub mod hash;
pub mod leftovers;
pub mod length;
pub mod link;
pub mod linker;
pub mod lto;
pub mod pack;
pub mod patch;
pub mod pipeline;
pub mod prelink;
pub mod rewrite;
pub mod runtime_lib;
pub mod scan;
pub mod site;
pub mod stubs;
pub mod wrap;

pub use error::{Error, Location, Result};
pub use pipeline::run_link;
pub use rewrite::{rewrite_object, Rewritten};
pub use site::{Found, NotASite, ProbeSymbol, SiteInfo};
