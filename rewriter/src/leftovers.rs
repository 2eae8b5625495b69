//! What a finished link leaves to remove, removed after `bootprof-link` has exited: the private
//! directory of rewritten inputs and generated files, and the old output the new one replaced.
//!
//! Freeing a file's pages and blocks is ext4's slowest step here: the sqlite3 shell's 3 MB pack
//! and its 2.6 MB old output held the link 0.5-0.9 ms past the moment its output was in place.
//! lld removes an old output on a thread beside its link for the same reason
//! (`lld::unlinkAsync`); here nothing is left to run beside, so a process of its own removes
//! them once this one has exited. The old output's name is gone before `bootprof-link` exits
//! (only its blocks wait for the descriptor the remover closes), so the output's directory holds
//! the output alone; the private directory in `$TMPDIR` stands a moment longer.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// How deep the remover goes into the private directory (bootprof-link writes none below its
/// first level; a driver's own temporaries may).
const DEPTH: u32 = 8;

/// The files a finished link no longer needs.
#[derive(Debug, Default)]
pub struct Leftovers {
    /// The private directory, no longer removed when dropped.
    pub dir: Option<PathBuf>,
    /// The replaced output, its name already removed: its blocks are freed with the last
    /// descriptor.
    pub replaced: Option<std::fs::File>,
    /// Removed by this process, before it exits (`--no-fork`: where no process reaps an orphan,
    /// as in a container whose first process does not, or to time the whole link).
    pub now: bool,
}

impl Leftovers {
    /// Removes the leftovers: [`Leftovers::remove_after_exit`], or now in this process when
    /// asked to.
    pub fn remove(self) {
        if self.now {
            self.remove_now();
        } else {
            self.remove_after_exit();
        }
    }

    /// Removes the leftovers after this process has exited: a child process of its own (in a
    /// session of its own, so that a terminal's signals to the caller's group do not stop it)
    /// closes every descriptor it inherited (the caller's pipes see their end when this process
    /// exits, not when the child does), waits for this process's exit (the read end of a pipe
    /// only this process writes to), then removes them. Removed here, now, where no child can
    /// be started. Call it last: after the fork, every page this process writes is copied.
    pub fn remove_after_exit(self) {
        if self.dir.is_none() && self.replaced.is_none() {
            return;
        }
        let dir = self
            .dir
            .as_ref()
            .and_then(|d| CString::new(d.as_os_str().as_bytes()).ok());
        let replaced = self.replaced.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        let mut pipe = [0; 2];
        // SAFETY: `pipe` has room for the two descriptors.
        if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return self.remove_now();
        }
        let [exited, alive] = pipe;
        // SAFETY: the child calls only async-signal-safe functions (`remover`), and ends with
        // `_exit`; this process's threads have ended or hold no lock the child takes.
        let pid = unsafe { libc::fork() };
        match pid {
            // SAFETY: in the fork's child.
            0 => unsafe { remover(exited, replaced, dir.as_deref()) },
            -1 => {
                // SAFETY: both are this function's own descriptors.
                unsafe {
                    libc::close(exited);
                    libc::close(alive);
                }
                self.remove_now();
            }
            _ => {
                // This process's descriptor of the old output closes now, before `alive` does
                // at its exit: the child's is then the last one, and its close frees the blocks.
                drop(self.replaced);
                // SAFETY: this function's own descriptor; `alive` stays open until the exit.
                unsafe { libc::close(exited) };
            }
        }
    }

    /// Removes the leftovers in this process.
    fn remove_now(self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The child of [`Leftovers::remove_after_exit`]: closes every descriptor but `exited` and
/// `replaced`, waits for `exited`'s end (its parent's exit), closes `replaced` and removes
/// `dir`, then exits.
///
/// # Safety
/// Only in the child of a fork: it exits, and calls only async-signal-safe functions.
unsafe fn remover(exited: RawFd, replaced: RawFd, dir: Option<&CStr>) -> ! {
    // SAFETY: as the function's own contract says.
    unsafe {
        libc::setsid();
        close_all_but([exited.min(replaced), exited.max(replaced)]);
        let mut byte = 0u8;
        while libc::read(exited, (&mut byte as *mut u8).cast(), 1) < 0
            && *libc::__errno_location() == libc::EINTR
        {}
        if replaced >= 0 {
            libc::close(replaced);
        }
        if let Some(dir) = dir {
            remove_tree(libc::AT_FDCWD, dir, DEPTH);
        }
        libc::_exit(0)
    }
}

/// Closes every descriptor but those of `keep` (ascending; a negative one is none).
///
/// # Safety
/// Async-signal-safe; closes descriptors other code may hold.
unsafe fn close_all_but(keep: [RawFd; 2]) {
    // SAFETY: as the function's own contract says.
    unsafe {
        let close = |from: RawFd, to: u32| {
            if libc::syscall(libc::SYS_close_range, from as u32, to, 0) != 0 {
                // A kernel before 5.9: one at a time, up to the limit of descriptors.
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                let most = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                    limit.rlim_cur.min(1 << 16) as u32
                } else {
                    1024
                };
                for fd in from as u32..=to.min(most) {
                    libc::close(fd as RawFd);
                }
            }
        };
        let mut from = 0;
        for fd in keep {
            if fd >= from {
                if fd > from {
                    close(from, (fd - 1) as u32);
                }
                from = fd + 1;
            }
        }
        close(from, u32::MAX);
    }
}

/// Removes `name` under the directory `parent`: a file, or a directory with what it holds, to
/// `depth` levels below it. Whatever cannot be removed stays, as a `TempDir` dropped leaves it.
///
/// # Safety
/// Async-signal-safe (no allocation: the entries are read into the stack); `parent` is a
/// directory descriptor or `AT_FDCWD`.
unsafe fn remove_tree(parent: RawFd, name: &CStr, depth: u32) {
    // SAFETY: as the function's own contract says.
    unsafe {
        if libc::unlinkat(parent, name.as_ptr(), 0) == 0 {
            return;
        }
        let fd = libc::openat(
            parent,
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return;
        }
        // `linux_dirent64` records, 8-byte aligned.
        let mut buf = [0u64; 512];
        loop {
            let n = libc::syscall(
                libc::SYS_getdents64,
                fd,
                buf.as_mut_ptr(),
                std::mem::size_of_val(&buf),
            );
            if n <= 0 {
                break;
            }
            let bytes = std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize);
            let mut at = 0;
            while at + 19 < bytes.len() {
                // d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name (NUL-terminated).
                let reclen = u16::from_ne_bytes([bytes[at + 16], bytes[at + 17]]) as usize;
                if reclen == 0 || at + reclen > bytes.len() {
                    break;
                }
                if let Ok(entry) = CStr::from_bytes_until_nul(&bytes[at + 19..at + reclen]) {
                    if entry != c"." && entry != c".." {
                        if depth > 0 {
                            remove_tree(fd, entry, depth - 1);
                        } else {
                            libc::unlinkat(fd, entry.as_ptr(), 0);
                        }
                    }
                }
                at += reclen;
            }
        }
        libc::close(fd);
        libc::unlinkat(parent, name.as_ptr(), libc::AT_REMOVEDIR);
    }
}

#[cfg(test)]
mod tests {
    use super::remove_tree;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_tree_is_removed_to_its_depth_and_what_lies_deeper_stays() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("private");
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        for name in ["x.o", "a/y.o", "a/b/z.o"] {
            std::fs::write(dir.join(name), name).unwrap();
        }
        // Many entries: more than one read of the directory.
        for i in 0..300 {
            std::fs::write(dir.join(format!("{i:04}-a-long-name-for-an-object.o")), "").unwrap();
        }
        // A symbolic link to a directory is removed, not followed.
        let outside = top.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("kept"), "").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
        let remove = |path: &std::path::Path, depth| {
            let path = CString::new(path.as_os_str().as_bytes()).unwrap();
            // SAFETY: a path, from the working directory.
            unsafe { remove_tree(libc::AT_FDCWD, &path, depth) }
        };
        // Depth 1: `a/b` is one level too deep, so it and `a` stay.
        remove(&dir, 1);
        assert!(dir.join("a/b/z.o").exists());
        assert!(!dir.join("a/y.o").exists() && !dir.join("x.o").exists());
        assert!(!dir.join("link").exists() && outside.join("kept").exists());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "only `a` stays"
        );
        remove(&dir, 2);
        assert!(!dir.exists());
        // A file, and a name that is not there.
        let file = top.path().join("file");
        std::fs::write(&file, "").unwrap();
        remove(&file, 0);
        remove(&file, 0);
        assert!(!file.exists());
    }
}
