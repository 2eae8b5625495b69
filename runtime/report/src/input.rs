//! What `bootprof report` reads: takes a path; hands on a [`Trace`] from a session directory or
//! lane file ([`crate::session`]) or from a single trace file ([`crate::trace`]).

use crate::error::Result;
use crate::trace::Trace;
use std::path::Path;

/// Reads the session directory, lane file or trace file at `path`.
pub fn read_trace(path: &Path) -> Result<Trace> {
    if crate::session::is_session(path) {
        crate::session::read_session(path)
    } else {
        crate::trace::read_trace_file(path)
    }
}
