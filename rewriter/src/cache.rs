//! The per-user cache where `bootprof-link` unpacks the files it carries (the runtime object it
//! links, the C header, the pkg-config file), so that linkers and compilers can read them. Takes
//! a directory name and the files; hands on the directory, with every file in it written once.
//!
//! The directory is `$XDG_CACHE_HOME/bootprof/<name>`, else `~/.cache/bootprof/<name>`; when that
//! cannot be written (no home, a read-only one), `$TMPDIR/bootprof-<uid>/<name>`, which must
//! belong to this user and be closed to others. Directories are made 0700, files 0644. A file
//! that is missing, or not of the length of what is carried, is written to a temporary beside
//! it and renamed into place, so links running at the same time never see half a file.

use crate::error::{Error, Result};
use std::borrow::Cow;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `$XDG_CACHE_HOME/bootprof`, else `$HOME/.cache/bootprof` (relative or empty values ignored,
/// as the XDG base directory specification says).
fn user_cache() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .map(|cache| cache.join("bootprof"))
}

/// `$TMPDIR/bootprof-<uid>`, made now if missing; an error if it is not a directory of this
/// user's that others cannot open (someone else could put files there).
fn temporary_cache() -> Result<PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let dir = std::env::temp_dir().join(format!("bootprof-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io(&dir, e)),
    }
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| Error::io(&dir, e))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(Error::Usage(format!(
            "{}: not a directory of user {uid} closed to others, so bootprof-link does not \
             unpack its runtime there (remove it, or set XDG_CACHE_HOME to a writable directory)",
            dir.display()
        )));
    }
    Ok(dir)
}

/// The files of a cache directory: paths relative to it, with their contents (borrowed when
/// they are carried by the executable: a link unpacks hundreds of kilobytes it need not copy).
pub type Files = Vec<(&'static str, Cow<'static, [u8]>)>;

/// The directory `<cache>/<name>` holding `files` (paths relative to it, with their contents),
/// written now where missing or of another length. `files` is given the directory, for contents that
/// name it.
pub fn unpack(name: &str, files: impl Fn(&Path) -> Files) -> Result<PathBuf> {
    let first = match user_cache() {
        Some(root) => match fill(&root.join(name), &files) {
            Ok(dir) => return Ok(dir),
            Err(e) => Some(e),
        },
        None => None,
    };
    fill(&temporary_cache()?.join(name), &files).map_err(|e| match first {
        // Both failed: the user's cache is the one to fix.
        Some(first) => first,
        None => e,
    })
}

/// Makes `dir` and writes `files` into it. A file already there costs one `statx` (its
/// directories are made only for a file that is not).
fn fill(dir: &Path, files: &impl Fn(&Path) -> Files) -> Result<PathBuf> {
    for (relative, contents) in files(dir) {
        let path = dir.join(relative);
        if holds(&path, &contents) {
            continue;
        }
        let parent = path.parent().expect("a file in the directory");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| Error::io(parent, e))?;
        write_once(&path, &contents).map_err(|e| Error::io(&path, e))?;
    }
    Ok(dir.to_path_buf())
}

/// Whether `path` is a file of `contents`' length: taken to hold them (see [`write_once`]).
fn holds(path: &Path, contents: &[u8]) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == contents.len() as u64)
}

/// Makes `path` hold `contents` (mode 0644), unless it already does: a file of that length
/// there is taken to (every file is written whole, under a temporary name, then renamed, into a
/// directory named after the contents' hash), so that a link stats the files it carries rather
/// than reading two megabytes back.
fn write_once(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    if holds(path, contents) {
        return Ok(());
    }
    let parent = path.parent().expect("a file in a directory");
    let mut temporary = tempfile::Builder::new()
        .prefix(".unpacking.")
        .tempfile_in(parent)?;
    temporary.write_all(contents)?;
    temporary
        .as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    temporary.persist(path).map_err(|e| e.error)?;
    Ok(())
}
