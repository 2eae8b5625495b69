//! The environment variables the runtime reads, in one list: the lean runtime loads the runtime
//! library at start-up when one of [`LIBRARY`] is set, and a test checks that every variable
//! the runtime's sources name is in [`LIBRARY`] or [`LEAN`].

/// The variables the runtime library acts on (read when it is loaded: at start-up, when one of
/// them is set, or at an attach or a call of the C API).
pub(crate) const LIBRARY: [&str; 20] = [
    "BOOTPROF_BUFFER",
    "BOOTPROF_COUNT",
    "BOOTPROF_DEPTH",
    "BOOTPROF_DUMP_SIGNAL",
    "BOOTPROF_ENABLE",
    "BOOTPROF_GRAPH",
    "BOOTPROF_KEEP",
    "BOOTPROF_LATENCY",
    "BOOTPROF_LATENCY_MIN",
    "BOOTPROF_LATENCY_WINDOWS",
    "BOOTPROF_MIN_TIME",
    "BOOTPROF_MODE",
    "BOOTPROF_NOTRACE",
    "BOOTPROF_OUTPUT",
    "BOOTPROF_POINTS",
    "BOOTPROF_RECORD",
    "BOOTPROF_SESSION",
    "BOOTPROF_STACKTRACE",
    "BOOTPROF_STATS",
    "BOOTPROF_TEXT_WRITE",
];

/// The variables the lean runtime reads itself: attaching's (`knock`) and where the runtime
/// library is.
pub(crate) const LEAN: [&str; 3] = [
    bootprof_format::attach::ENV_ATTACH,
    bootprof_format::attach::ENV_SIGNAL,
    LIBRARY_PATH,
];

/// The runtime library's path, before the one `bootprof-link` wrote into the program.
pub(crate) const LIBRARY_PATH: &str = "BOOTPROF_LIBRARY";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    /// Every `"BOOTPROF_..."` the runtime's sources name is a variable of one list or the other:
    /// a variable added to the runtime without being added here would be ignored at start-up by
    /// a program carrying the lean runtime.
    #[test]
    fn every_variable_the_runtime_reads_is_listed() {
        extern crate std;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut named = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == "vars.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (at, _) in text.match_indices("\"BOOTPROF_") {
                let name: String = text[at + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                // A name's prefix alone (`any_var_starting("BOOTPROF_")`) is not a variable.
                if !name.ends_with('_') {
                    named.push((name, path.display().to_string()));
                }
            }
        }
        assert!(named.iter().any(|(n, _)| n == "BOOTPROF_ENABLE"));
        for (name, file) in named {
            assert!(
                LIBRARY.contains(&name.as_str()) || LEAN.contains(&name.as_str()),
                "{file} names {name}, which runtime/src/vars.rs does not list"
            );
        }
    }
}
