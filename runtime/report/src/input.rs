//! What `bootprof report` reads: takes a path (or bytes); hands on a [`Trace`] from a session
//! directory or lane file ([`crate::session`]) or from a single trace file ([`crate::trace`]).

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

/// Reads a lane file (bytes starting with the lane magic) or a single trace file held in memory;
/// `name` names it in errors. What the reader's fuzz target and its regression test feed.
pub fn parse(data: &[u8], name: &str) -> Result<Trace> {
    if data.starts_with(&bootprof_format::lane::LANE_MAGIC) {
        crate::session::parse_lane(data, Path::new(name))
    } else {
        crate::trace::parse_trace(data, name)
    }
}
