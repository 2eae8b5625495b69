//! The linker process of a link, found under its driver, and the linker's exit, which comes
//! before the driver's: after GNU ld exits, collect2 and gcc's driver take another 1.1-1.7 ms to
//! end (the `-finstrument-functions` sqlite3 link). What needs only the linker's output, and its
//! inputs no more (the output check, removing the rewritten inputs), can start then, on a CPU
//! the ending driver leaves free. A link started through a gate ([`crate::link::Gate`]) finds
//! its linker once the linker has read the script; another looks for it while it runs.
//!
//! Found only where the linker's exit is the link's end: the processes from the driver down to
//! the linker are compiler drivers and collect2, each waiting for the one it ran (collect2 runs
//! the linker a second time only for LTO without the linker plugin, [`runs_once`]), and the
//! linker is GNU ld or lld. A driver that is a script, or anything else, could run the linker
//! again: the caller then waits for the driver.

use crate::args::LinkLine;
use std::os::fd::{FromRawFd, OwnedFd};

/// Whether the linker's exit may be taken for the link's end, as far as `line` says: not with
/// `-fno-use-linker-plugin`, where collect2 links once more when an input holds gcc's IR (which
/// the final link keeps when gcc's plugin is off, [`crate::lto`]).
pub fn runs_once(line: &LinkLine) -> bool {
    !line.args.iter().any(|a| a == "-fno-use-linker-plugin")
}

/// A linker bootprof-link knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// GNU ld (`ld.bfd`): one thread.
    Bfd,
    /// LLVM's lld: several threads, after a long start (its LLVM library loaded).
    Lld,
}

/// The linker a name is: an executable's file name (`ld.bfd`, `x86_64-linux-gnu-ld.bfd`,
/// `ld.lld`, `lld`) or what `-fuse-ld=` names (`bfd`, `lld`); `None` for any other.
pub fn kind(name: &str) -> Option<Kind> {
    if name.ends_with("ld.bfd") || name == "bfd" {
        Some(Kind::Bfd)
    } else if name.ends_with("lld") {
        Some(Kind::Lld)
    } else {
        None
    }
}

/// A linker process under a running link's driver, to wait for.
pub struct Linker {
    /// The process's file descriptor (`pidfd_open`): readable once it has exited.
    pidfd: OwnedFd,
}

/// What [`Linker::find`] found under a driver.
pub enum Found {
    /// The linker.
    Linker(Linker),
    /// Not yet: a process of the chain has not started the next (or is gone meanwhile).
    NotYet,
    /// Not a chain whose linker's exit ends the link, or a system that cannot tell (no
    /// `/proc/PID/task/TID/children`, no `pidfd_open`).
    Never,
}

impl Linker {
    /// The linker under the driver `driver` (a process ID), as the module says: each process of
    /// the chain has exactly one child, the last is the linker (by its executable's name), and it
    /// has none yet. Once found, the linker runs for as long as it links, so the process found
    /// is the one waited for.
    pub fn find(driver: u32) -> Found {
        let mut parent = None;
        let mut pid = driver;
        loop {
            let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
                // The driver's own unreadable: no `/proc` to tell (the caller knows when the
                // driver is gone). Below it, a process gone meanwhile.
                return if parent.is_none() {
                    Found::Never
                } else {
                    Found::NotYet
                };
            };
            let Some(name) = exe.file_name().and_then(|n| n.to_str()) else {
                return Found::Never;
            };
            let Some(children) = children(pid) else {
                // The driver's own list unreadable: a kernel without the lists.
                return if parent.is_none() {
                    Found::Never
                } else {
                    Found::NotYet
                };
            };
            if kind(name).is_some() {
                if !children.is_empty() {
                    return Found::Never;
                }
                let Some(pidfd) = pidfd_open(pid) else {
                    return Found::Never;
                };
                // Still the process found, not one that took its ID after it ended.
                if parent.is_some_and(|p| !children_of(p).contains(&pid)) {
                    return Found::NotYet;
                }
                return Found::Linker(Linker { pidfd });
            }
            if !is_driver(name) {
                return Found::Never;
            }
            match children[..] {
                // A driver yet to start the next, or whose child has not yet exec'd (a child
                // of `vfork` shows its parent's executable until then).
                [] => return Found::NotYet,
                [child] => (parent, pid) = (Some(pid), child),
                _ => return Found::Never,
            }
        }
    }

    /// Waits until the linker has exited; `false` if that cannot be told.
    pub fn wait(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut poll = libc::pollfd {
            fd: self.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: one pollfd, valid for the call; the descriptor is ours.
            match unsafe { libc::poll(&mut poll, 1, -1) } {
                1 => return poll.revents & libc::POLLIN != 0,
                -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
                }
                _ => return false,
            }
        }
    }
}

/// The children of process `pid`, from every one of its threads; `None` when `/proc` does not
/// say (a kernel without `CONFIG_PROC_CHILDREN`, the process gone).
fn children(pid: u32) -> Option<Vec<u32>> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let text = std::fs::read_to_string(task.ok()?.path().join("children")).ok()?;
        found.extend(
            text.split_ascii_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    Some(found)
}

/// [`children`], none when `/proc` does not say.
fn children_of(pid: u32) -> Vec<u32> {
    children(pid).unwrap_or_default()
}

/// Whether an executable's file name is a compiler driver's (`cc`, `gcc`, `g++`, `clang`,
/// `x86_64-linux-gnu-gcc-14`, `clang-19`, ...) or collect2's: a dash-separated part of it says.
fn is_driver(name: &str) -> bool {
    name.split('-')
        .any(|part| ["cc", "c++", "gcc", "g++", "clang", "clang++", "collect2"].contains(&part))
}

/// `pidfd_open(pid, 0)`.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a process ID and flags; it returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative return is a descriptor this process now owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collect2_linking_twice_without_the_plugin_is_foreseen() {
        let line = |args: &[&str]| {
            let argv = args.iter().map(|a| a.to_string()).collect();
            crate::args::parse(argv, "cc", "").expect("a link line")
        };
        assert!(runs_once(&line(&["cc", "-o", "app", "a.o"])));
        assert!(runs_once(&line(&["cc", "-flto", "-o", "app", "a.o"])));
        assert!(!runs_once(&line(&[
            "cc",
            "-flto",
            "-fno-use-linker-plugin",
            "-o",
            "app",
            "a.o"
        ])));
    }

    #[test]
    fn drivers_and_linkers_are_told_by_their_executables_names() {
        for driver in ["cc", "gcc", "g++", "c++", "clang", "clang-19", "clang++"] {
            assert!(is_driver(driver), "{driver}");
        }
        assert!(is_driver("x86_64-linux-gnu-gcc-14"));
        assert!(is_driver("collect2"));
        for other in ["sh", "bash", "python3", "ccache", "make", "ld"] {
            assert!(!is_driver(other), "{other}");
        }
        for bfd in ["ld.bfd", "x86_64-linux-gnu-ld.bfd", "bfd"] {
            assert_eq!(kind(bfd), Some(Kind::Bfd), "{bfd}");
        }
        for lld in ["ld.lld", "lld"] {
            assert_eq!(kind(lld), Some(Kind::Lld), "{lld}");
        }
        // A file named `ld` itself is not told apart (`ld` on PATH is taken as what it links to).
        for other in ["ld", "ld.gold", "mold", "ld.mold", "collect2", "gold"] {
            assert_eq!(kind(other), None, "{other}");
        }
    }
}
