//! bootprof's link-time rewriter: the library behind `bootprof-link` and `bootprof list`.
//!
//! The pipeline, one module per phase (see `DESIGN.md`):
//! `args` parse the link line -> `gather` collect the relocatable inputs (objects, archive
//! members, or one partial link) -> [`scan`] find relocations against probe symbols ->
//! [`patch`] verify each site and choose its NOP -> [`emit`] write the rewritten object with its
//! table fragments, and [`stubs`] the object defining every probe symbol -> [`link`] run the final
//! link with the rewritten inputs and move the output into place atomically.
#![deny(missing_docs)]

pub(crate) mod emit;
pub mod error;
pub(crate) mod patch;
pub mod scan;

pub use error::{Error, Location, Result};
pub use scan::{NotASite, Plan, ProbeSymbol, SiteInfo};

/// The result of rewriting one relocatable object.
#[derive(Debug)]
pub struct Rewritten {
    /// The new object, or `None` when the object has no sites (use it unchanged).
    pub bytes: Option<Vec<u8>>,
    /// The sites found and patched.
    pub sites: Vec<SiteInfo>,
    /// Probe symbols the object references; the stub object must define them.
    pub referenced: Vec<ProbeSymbol>,
    /// Probe symbols the object defines itself.
    pub defined: Vec<Vec<u8>>,
    /// Relocations against probe symbols left alone, and why.
    pub not_sites: Vec<NotASite>,
}

/// Rewrites one relocatable x86-64 ELF object: the rewriting core shared by every way of
/// gathering inputs. `file` names the object in messages. An object without sites, including
/// one rewritten before, comes back unchanged (`bytes` is `None`).
pub fn rewrite_object(data: &[u8], file: &str) -> Result<Rewritten> {
    let plan = scan::scan(data, file)?;
    let bytes = match &plan.object {
        Some(obj) => Some(emit::emit(obj, &plan.sites, file)?),
        None => None,
    };
    Ok(Rewritten {
        bytes,
        sites: plan.sites,
        referenced: plan.referenced,
        defined: plan.defined,
        not_sites: plan.not_sites,
    })
}
