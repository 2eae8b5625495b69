//! What the runtime needs of the system, over the C library directly (the runtime is `no_std`:
//! C programs get no Rust standard library, no unwinder and no `libgcc_s` with it): takes names,
//! paths (bytes) and closures; hands on environment variables, errors as `errno` values
//! ([`Errno`], shown as the standard library shows them), files ([`Fd`]), a mutex, one-time
//! initialisation, threads, the monotonic clock and sleeping, and the thread-local cells of
//! `thread_local_cells!`.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::fmt;
use core::sync::atomic::{AtomicU8, Ordering};

/// An `errno` value: what a failed call of the C library said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// The calling thread's `errno` now.
    pub fn last() -> Errno {
        // SAFETY: __errno_location returns the calling thread's errno.
        Errno(unsafe { *libc::__errno_location() })
    }
}

impl fmt::Display for Errno {
    /// As the standard library shows an OS error: `No such file or directory (os error 2)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 128];
        // SAFETY: the GNU strerror_r returns a NUL-terminated message, in the buffer we own or
        // in the C library's constant memory.
        let text = unsafe {
            let p = crate::syscall::strerror_r(self.0, buf.as_mut_ptr().cast(), buf.len());
            (!p.is_null()).then(|| core::ffi::CStr::from_ptr(p).to_bytes())
        };
        match text.map(core::str::from_utf8) {
            Some(Ok(text)) if !text.is_empty() => write!(f, "{text} (os error {})", self.0),
            _ => write!(f, "os error {}", self.0),
        }
    }
}

impl core::error::Error for Errno {}

#[cfg(feature = "std")]
impl From<Errno> for std::io::Error {
    fn from(e: Errno) -> std::io::Error {
        std::io::Error::from_raw_os_error(e.0)
    }
}

/// A result whose error is an [`Errno`].
pub type Result<T> = core::result::Result<T, Errno>;

/// `-1` (or any negative value) from a call of the C library -> its `errno`.
fn check(r: libc::c_int) -> Result<libc::c_int> {
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(r)
    }
}

/// The environment the runtime reads: in the runtime linked into executables, the one the
/// process started with, which the C library passes to the functions of `.init_array` (the
/// first of them to run here is the runtime's own); elsewhere the C library's `environ`. The
/// executables' runtime takes it so because naming `environ` costs every start-up a symbol
/// lookup by the dynamic loader, and the auxiliary vector follows that environment on the
/// initial stack (no call of `getauxval`, nor its symbol version, needed). What a program
/// changes with `setenv` later is not seen there. A shared library's constructor may call the
/// runtime before the executable's run (its sites registering with the executable's runtime):
/// then the environment and the vector are read from `/proc/self`, which has them as the
/// process started too. The lean runtime in an executable does the same; shared objects' copies
/// and the runtime library (loaded by `dlopen`, maybe after a `setenv` moved the environment)
/// read the C library's.
#[cfg(not(any(feature = "std", feature = "shared-object", feature = "library")))]
mod start {
    use alloc::vec::Vec;
    use core::sync::atomic::{AtomicPtr, Ordering};
    use libc::{c_char, c_int, c_ulong};

    /// The environment (null until known).
    static ENVP: AtomicPtr<*const c_char> = AtomicPtr::new(core::ptr::null_mut());
    /// The auxiliary vector, its (type, value) pairs up to `AT_NULL` (null until known).
    static AUXV: AtomicPtr<[c_ulong; 2]> = AtomicPtr::new(core::ptr::null_mut());

    /// What the C library calls each `.init_array` function with.
    type Init = extern "C" fn(c_int, *const *const c_char, *const *const c_char);

    extern "C" fn take(_argc: c_int, _argv: *const *const c_char, envp: *const *const c_char) {
        if envp.is_null() {
            return;
        }
        let mut at = envp;
        // SAFETY: the environment array, then the auxiliary vector, on the initial stack,
        // which the process never gives back. The C library may have taken variables out of
        // the environment in place (secure-execution mode), leaving a null for each at its
        // end: the vector starts at the first word after them that is not null (its first
        // type never is).
        unsafe {
            while !(*at).is_null() {
                at = at.add(1);
            }
            while (*at).is_null() {
                at = at.add(1);
            }
            AUXV.store(at.cast::<[c_ulong; 2]>().cast_mut(), Ordering::Relaxed);
        }
        ENVP.store(envp.cast_mut(), Ordering::Relaxed);
    }

    // Priority 98: before the constructor that registers the object's sites (99, the stubs'),
    // in an executable and in a shared library made of this runtime.
    #[used]
    #[link_section = ".init_array.00098"]
    static TAKE: Init = take;

    /// The environment: a null-terminated array of NUL-terminated strings.
    pub fn environ() -> *const *const c_char {
        let p = ENVP.load(Ordering::Relaxed);
        if !p.is_null() {
            return p;
        }
        // Before `take` ran: the environment from /proc, kept for the life of the process.
        let mut text = super::read(b"/proc/self/environ").unwrap_or_default();
        // Each entry NUL-terminated, the last too.
        text.push(0);
        let text = text.leak();
        let mut entries: Vec<*const c_char> = text
            .split_mut(|&b| b == 0)
            .filter(|e| !e.is_empty())
            .map(|e| e.as_ptr().cast())
            .collect();
        entries.push(core::ptr::null());
        let p = entries.leak().as_mut_ptr();
        match ENVP.compare_exchange(
            core::ptr::null_mut(),
            p,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => p,
            Err(taken) => taken,
        }
    }

    /// The auxiliary vector's entry `kind`, or 0.
    pub fn auxv(kind: c_ulong) -> c_ulong {
        let mut pair = AUXV.load(Ordering::Relaxed);
        if pair.is_null() {
            // Before `take` ran: the vector from /proc (pairs up to AT_NULL), kept.
            let bytes = super::read(b"/proc/self/auxv").unwrap_or_default();
            let mut pairs: Vec<[c_ulong; 2]> = bytes
                .chunks_exact(16)
                .map(|p| {
                    let word = |w: &[u8]| c_ulong::from_le_bytes(w.try_into().unwrap_or([0; 8]));
                    [word(&p[..8]), word(&p[8..])]
                })
                .collect();
            pairs.push([libc::AT_NULL, 0]);
            let p = pairs.leak().as_mut_ptr();
            pair = match AUXV.compare_exchange(
                core::ptr::null_mut(),
                p,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => p,
                Err(taken) => taken,
            };
        }
        // SAFETY: pairs up to AT_NULL (see AUXV), never freed.
        unsafe {
            while (*pair)[0] != libc::AT_NULL {
                if (*pair)[0] == kind {
                    return (*pair)[1];
                }
                pair = pair.add(1);
            }
        }
        0
    }
}

/// See [`start`]: the C library's environment, and `getauxval`.
#[cfg(any(feature = "std", feature = "shared-object", feature = "library"))]
mod start {
    use libc::c_char;

    extern "C" {
        /// The process's environment, as the C library keeps it.
        #[link_name = "environ"]
        static ENVIRON: *const *const c_char;
    }

    /// The environment: a null-terminated array of NUL-terminated strings (or null).
    pub fn environ() -> *const *const c_char {
        // SAFETY: a word the C library keeps.
        unsafe { ENVIRON }
    }

    /// The auxiliary vector's entry `kind`, or 0. Not read from after the environment: a
    /// constructor that ran `setenv` first has moved `environ` elsewhere, and what follows it
    /// then is not the vector.
    pub fn auxv(kind: libc::c_ulong) -> libc::c_ulong {
        // SAFETY: no preconditions.
        unsafe { libc::getauxval(kind) }
    }
}

/// Each `NAME=VALUE` entry of the environment, as a NUL-terminated string.
fn entries() -> impl Iterator<Item = *const u8> {
    // SAFETY: the environment: a null-terminated array of NUL-terminated strings, which the
    // runtime never changes; read as getenv reads it.
    let mut at = start::environ();
    core::iter::from_fn(move || {
        // SAFETY: as above; stops at the null entry.
        unsafe {
            if at.is_null() || (*at).is_null() {
                return None;
            }
            let entry = (*at).cast::<u8>();
            at = at.add(1);
            Some(entry)
        }
    })
}

/// Whether the NUL-terminated string at `s` starts with `prefix` (read no further than the
/// first byte that differs).
fn starts_with(s: *const u8, prefix: &[u8]) -> bool {
    // SAFETY: a NUL-terminated string: every byte up to the first that differs from the prefix
    // (the NUL differs from any byte of a name) is part of it.
    prefix
        .iter()
        .enumerate()
        .all(|(i, &b)| unsafe { *s.add(i) } == b)
}

/// Whether any environment variable's name starts with `prefix` (one pass over the
/// environment, each entry read only as far as it matches: how start-up learns that nobody
/// asked bootprof for anything).
pub fn any_var_starting(prefix: &str) -> bool {
    entries().any(|e| starts_with(e, prefix.as_bytes()))
}

/// The auxiliary vector's entry `kind` (`AT_SECURE`, `AT_EUID`, `AT_BASE`), or 0.
pub fn auxv(kind: libc::c_ulong) -> libc::c_ulong {
    start::auxv(kind)
}

/// The environment variable `name`, as bytes, if it is set (read as `getenv` reads it, without
/// a call into the C library: each entry only as far as it differs from `name=`).
pub fn var_os(name: &str) -> Option<&'static [u8]> {
    let name = name.as_bytes();
    entries().find_map(|e| {
        // SAFETY: the entry starts with `name` (so is at least that long, and its NUL comes
        // later), then `=`, then a NUL-terminated value that lives as long as the process.
        unsafe {
            if !starts_with(e, name) || *e.add(name.len()) != b'=' {
                return None;
            }
            let value = e.add(name.len() + 1);
            let mut len = 0;
            while *value.add(len) != 0 {
                len += 1;
            }
            Some(core::slice::from_raw_parts(value, len))
        }
    })
}

/// The environment variable `name`, if it is set and valid UTF-8.
pub fn var(name: &str) -> Option<&'static str> {
    var_os(name).and_then(|v| core::str::from_utf8(v).ok())
}

/// Whether the environment variable `name` is set and not empty.
pub fn is_set(name: &str) -> bool {
    var_os(name).is_some_and(|v| !v.is_empty())
}

/// Whether the environment variable `name` is exactly `value`.
pub fn var_is(name: &str, value: &str) -> bool {
    var_os(name) == Some(value.as_bytes())
}

/// `path` with a NUL after it, for the C library.
pub struct CPath(Vec<u8>);

impl CPath {
    /// A copy of `path` (bytes, no NUL inside) with a NUL after it.
    pub fn new(path: &[u8]) -> CPath {
        let mut v = Vec::with_capacity(path.len() + 1);
        v.extend_from_slice(path);
        v.push(0);
        CPath(v)
    }

    /// The NUL-terminated path.
    pub fn as_ptr(&self) -> *const libc::c_char {
        self.0.as_ptr().cast()
    }
}

/// `path` for a message (bytes that are not UTF-8 shown as U+FFFD).
pub fn display(path: &[u8]) -> alloc::borrow::Cow<'_, str> {
    String::from_utf8_lossy(path)
}

/// `dir/name`.
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(dir.len() + 1 + name.len());
    v.extend_from_slice(dir);
    if !dir.ends_with(b"/") {
        v.push(b'/');
    }
    v.extend_from_slice(name);
    v
}

/// An open file descriptor, closed when dropped.
pub struct Fd(pub libc::c_int);

impl Fd {
    /// Opens `path` with `flags` (`O_CLOEXEC` added) and, for a new file, `mode`.
    pub fn open(path: &[u8], flags: libc::c_int, mode: libc::mode_t) -> Result<Fd> {
        let p = CPath::new(path);
        // SAFETY: a NUL-terminated path.
        check(unsafe { libc::open(p.as_ptr(), flags | libc::O_CLOEXEC, mode) }).map(Fd)
    }

    /// Writes all of `data`, going on after short writes and interruptions.
    pub fn write_all(&self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            // SAFETY: writes from a buffer we borrow.
            let n = unsafe { libc::write(self.0, data.as_ptr().cast(), data.len()) };
            if n < 0 {
                let e = Errno::last();
                if e.0 == libc::EINTR {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(Errno(libc::EIO));
            }
            data = &data[n as usize..];
        }
        Ok(())
    }

    /// Reads into `buf`: the bytes read (0 at the end), going on after interruptions.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize> {
        loop {
            // SAFETY: reads into a buffer we own.
            let n = unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = Errno::last();
            if e.0 != libc::EINTR {
                return Err(e);
            }
        }
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this owns.
        unsafe { libc::close(self.0) };
    }
}

/// The whole file at `path`.
pub fn read(path: &[u8]) -> Result<Vec<u8>> {
    let f = Fd::open(path, libc::O_RDONLY, 0)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// The whole file at `path` as text (bytes that are not UTF-8 shown as U+FFFD).
pub fn read_to_string(path: &[u8]) -> Result<String> {
    read(path).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// What the symbolic link at `path` points to.
pub fn read_link(path: &[u8]) -> Result<Vec<u8>> {
    let p = CPath::new(path);
    let mut buf = alloc::vec![0u8; 4096];
    // SAFETY: a NUL-terminated path and a buffer we own, of the length given.
    let n = unsafe { libc::readlink(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(Errno::last());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// Removes the file at `path`.
pub fn remove_file(path: &[u8]) -> Result<()> {
    let p = CPath::new(path);
    // SAFETY: a NUL-terminated path.
    check(unsafe { libc::unlink(p.as_ptr()) }).map(drop)
}

/// Renames `from` to `to` (replacing `to`).
pub fn rename(from: &[u8], to: &[u8]) -> Result<()> {
    let (f, t) = (CPath::new(from), CPath::new(to));
    // SAFETY: NUL-terminated paths.
    check(unsafe { libc::rename(f.as_ptr(), t.as_ptr()) }).map(drop)
}

/// Sets the permission bits of `path`.
pub fn chmod(path: &[u8], mode: libc::mode_t) -> Result<()> {
    let p = CPath::new(path);
    // SAFETY: a NUL-terminated path.
    check(unsafe { libc::chmod(p.as_ptr(), mode) }).map(drop)
}

/// What `lstat` says of `path` (a symbolic link itself, not what it points to).
pub fn lstat(path: &[u8]) -> Result<libc::stat> {
    let p = CPath::new(path);
    // SAFETY: a NUL-terminated path and a stat we own (all zeroes is a valid stat).
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        check(crate::syscall::lstat(p.as_ptr(), &mut st)).map(|_| st)
    }
}

/// The names in the directory at `path`, but `.` and `..`.
pub fn read_dir(path: &[u8]) -> Result<Vec<Vec<u8>>> {
    let p = CPath::new(path);
    // SAFETY: a NUL-terminated path; each entry read is used before the next readdir, and the
    // stream is closed once.
    unsafe {
        let dir = libc::opendir(p.as_ptr());
        if dir.is_null() {
            return Err(Errno::last());
        }
        let mut names = Vec::new();
        loop {
            let entry = libc::readdir(dir);
            if entry.is_null() {
                break;
            }
            let name = core::ffi::CStr::from_ptr((*entry).d_name.as_ptr()).to_bytes();
            if name != b"." && name != b".." {
                names.push(name.to_vec());
            }
        }
        libc::closedir(dir);
        Ok(names)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds, for measuring how long something took.
#[derive(Clone, Copy)]
pub struct Instant(u64);

impl Instant {
    /// Now.
    pub fn now() -> Instant {
        Instant(crate::clock::monotonic_ns())
    }

    /// Nanoseconds since this instant.
    pub fn elapsed_ns(self) -> u64 {
        crate::clock::monotonic_ns().saturating_sub(self.0)
    }
}

/// A file mapping of this process, as `/proc/self/maps` shows it.
pub struct FileMapping {
    /// Its start and end.
    pub lo: usize,
    /// Its end.
    pub hi: usize,
    /// The file offset of its start.
    pub offset: u64,
    /// The file's device (major, minor) and inode.
    pub file: (u32, u32, u64),
    /// The file's path when it was mapped (a file since put in its place is not this one).
    pub path: String,
}

/// Which loaded object [`in_object`] describes.
#[derive(Clone, Copy)]
pub(crate) enum Object {
    /// The main program (the loader describes it first).
    Main,
    /// The object one of whose loaded segments holds this address.
    Holding(usize),
}

/// `describe`'s answer for the loaded object `object`, given its load bias and its program
/// headers as the loader describes them; `None` when no loaded object is `object`.
pub(crate) fn in_object<T, F: FnMut(usize, &[libc::Elf64_Phdr]) -> Option<T>>(
    object: Object,
    describe: F,
) -> Option<T> {
    struct Walk<T, F> {
        object: Object,
        describe: F,
        found: Option<T>,
    }
    unsafe extern "C" fn each<T, F: FnMut(usize, &[libc::Elf64_Phdr]) -> Option<T>>(
        info: *mut libc::dl_phdr_info,
        _: libc::size_t,
        data: *mut core::ffi::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader's description of one loaded object, valid for the call: its
        // program headers; `data` is our walk.
        unsafe {
            let (info, walk) = (&*info, &mut *data.cast::<Walk<T, F>>());
            let phdrs = core::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum));
            let bias = info.dlpi_addr as usize;
            if let Object::Holding(addr) = walk.object {
                let holds = |ph: &libc::Elf64_Phdr| {
                    let at = bias.wrapping_add(ph.p_vaddr as usize);
                    ph.p_type == libc::PT_LOAD && (at..at + ph.p_memsz as usize).contains(&addr)
                };
                if !phdrs.iter().any(holds) {
                    return 0;
                }
            }
            walk.found = (walk.describe)(bias, phdrs);
            1
        }
    }
    // The walk is generic, not a `dyn` closure: a trait object's table is a pointer the dynamic
    // loader relocates at every start-up.
    let mut walk = Walk {
        object,
        describe,
        found: None,
    };
    // SAFETY: `each` writes only `walk`, and stops the walk at the object it looks for.
    unsafe { libc::dl_iterate_phdr(Some(each::<T, F>), (&raw mut walk).cast()) };
    walk.found
}

/// The first answer of `find` for the `PT_NOTE` segments of `object` (each segment's mapped
/// bytes and its alignment, in program-header order); `None` when `find` answers none, or no
/// loaded object is `object`.
pub(crate) fn in_notes<T>(
    object: Object,
    mut find: impl FnMut(&[u8], usize) -> Option<T>,
) -> Option<T> {
    in_object(object, |bias, phdrs| {
        phdrs
            .iter()
            .filter(|ph| ph.p_type == libc::PT_NOTE)
            .find_map(|ph| {
                let at = bias.wrapping_add(ph.p_vaddr as usize);
                // SAFETY: a note segment of a loaded object, mapped and readable while the
                // object is loaded (it is: the loader describes it).
                let notes =
                    unsafe { core::slice::from_raw_parts(at as *const u8, ph.p_memsz as usize) };
                find(notes, ph.p_align as usize)
            })
    })
}

/// Where the `len` bytes at `addr` of the main program are in its file: the offset in the file
/// of the first, when the pages of one loaded segment hold them all (its mapping holds the
/// file's bytes from its first page to its last, those before and after the segment's own on
/// those pages included), from the program headers the loader describes (no `/proc/self/maps`
/// to read); `None` otherwise.
pub(crate) fn offset_in_executable(addr: usize, len: usize) -> Option<u64> {
    in_object(Object::Main, |bias, phdrs| {
        phdrs.iter().find_map(|ph| {
            let at = bias.wrapping_add(ph.p_vaddr as usize);
            let pages = at & !4095..(at + ph.p_filesz as usize).next_multiple_of(4096);
            let held = pages.start <= addr && addr + len <= pages.end;
            (ph.p_type == libc::PT_LOAD && held && ph.p_offset as usize + addr >= at)
                .then(|| (ph.p_offset as usize + addr - at) as u64)
        })
    })
}

/// The file mapping of this process that holds address `addr`; `None` for anonymous memory.
pub fn file_mapping_of(addr: usize) -> Option<FileMapping> {
    let maps = read_to_string(b"/proc/self/maps").ok()?;
    maps.lines().find_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        let (lo, hi) = fields.next()?.split_once('-')?;
        let (lo, hi) = (
            usize::from_str_radix(lo, 16).ok()?,
            usize::from_str_radix(hi, 16).ok()?,
        );
        if !(lo..hi).contains(&addr) {
            return None;
        }
        let offset = u64::from_str_radix(fields.nth(1)?, 16).ok()?;
        let (major, minor) = fields.next()?.split_once(':')?;
        let (major, minor) = (
            u32::from_str_radix(major, 16).ok()?,
            u32::from_str_radix(minor, 16).ok()?,
        );
        let inode: u64 = fields.next()?.parse().ok()?;
        let path = fields.next()?;
        (inode != 0 && path.starts_with('/')).then(|| FileMapping {
            lo,
            hi,
            offset,
            file: (major, minor, inode),
            path: path.into(),
        })
    })
}

/// `madvise(MADV_POPULATE_WRITE)`: the whole pages of `[start, start + len)` made present and
/// writable in one system call (a private file mapping's pages copied, anonymous ones zeroed),
/// where touching them one by one takes a page fault each. Best effort: a kernel without it
/// (before 5.14) faults the pages in as they are used.
pub fn populate_write(start: usize, len: usize) {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    let first = start.next_multiple_of(4096);
    let end = (start + len) & !4095;
    if end > first {
        // SAFETY: advice on pages of the caller's own mapping; no byte changes.
        unsafe { libc::madvise(first as *mut _, end - first, MADV_POPULATE_WRITE) };
    }
}

/// Room for `n` values of `T` that is never freed, its pages made writable before it is
/// returned ([`populate_write`]). Room of a megabyte or more (the site records of a table of
/// 16,000 sites and more) is asked for in transparent huge pages where the kernel offers them
/// (its `enabled` mode `always` or `madvise`): one 2 MiB page is zeroed in about a quarter of the time
/// the 512 small pages it replaces take to fault in, and a program's start-up with every site
/// enabled waits for it. Elsewhere, and when the mapping fails, it comes from the allocator.
pub fn lasting_room<T>(n: usize) -> &'static mut [core::mem::MaybeUninit<T>] {
    let bytes = n * core::mem::size_of::<T>();
    if bytes >= HUGE_PAGE / 2 && core::mem::align_of::<T>() <= 4096 {
        if let Some(start) = huge_room(bytes) {
            populate_write(start, bytes);
            // SAFETY: `bytes` fresh bytes, page-aligned, never unmapped; uninitialized values
            // need no initialization.
            return unsafe { core::slice::from_raw_parts_mut(start as *mut _, n) };
        }
    }
    let room = Box::leak(Box::<[T]>::new_uninit_slice(n));
    populate_write(room.as_ptr() as usize, bytes);
    room
}

/// The size of a transparent huge page on x86-64.
pub const HUGE_PAGE: usize = 2 << 20;

/// A new private anonymous read-write mapping of `bytes` rounded up to whole huge pages, aligned
/// to [`HUGE_PAGE`] and advised to be made of huge pages (advice only: a kernel without them
/// ignores it), not yet populated; its start, or `None` when the mapping fails. Its length is
/// `bytes.next_multiple_of(HUGE_PAGE)`; it is the caller's to unmap.
pub fn huge_room(bytes: usize) -> Option<usize> {
    let len = bytes.next_multiple_of(HUGE_PAGE);
    // SAFETY: a new private anonymous mapping; only its aligned middle is kept.
    let at = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len + HUGE_PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return None;
    }
    let (at, end) = (at as usize, at as usize + len + HUGE_PAGE);
    let start = at.next_multiple_of(HUGE_PAGE);
    // SAFETY: the parts of the mapping before and after the aligned room, ours alone.
    unsafe {
        if start > at {
            libc::munmap(at as *mut _, start - at);
        }
        if end > start + len {
            libc::munmap((start + len) as *mut _, end - (start + len));
        }
        libc::madvise(start as *mut _, len, libc::MADV_HUGEPAGE);
    }
    Some(start)
}

/// Sleeps for `ns` nanoseconds (the whole time, through interruptions).
pub fn sleep_ns(ns: u64) {
    let mut left = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: two timespecs we own.
    while unsafe { libc::nanosleep(&left, &mut left) } != 0 && Errno::last().0 == libc::EINTR {}
}

/// Runs `f` when the process exits (`atexit`), with the finalization of the object that carries
/// this copy of the runtime: before that object's destructors, which unregister its sites. In
/// the runtime library, the object is the one carrying the lean runtime that loaded it
/// ([`set_exit_object`]), not the library: a library loaded while a shared library's
/// constructor ran (its sites registering first) is finalized after every object it serves,
/// whose destructors would have taken their sites away before the counts are printed and the
/// trace written.
pub fn at_exit(f: extern "C" fn()) {
    #[cfg(feature = "library")]
    {
        extern "C" {
            fn __cxa_atexit(
                f: extern "C" fn(*mut libc::c_void),
                arg: *mut libc::c_void,
                dso: *mut libc::c_void,
            ) -> libc::c_int;
        }
        extern "C" fn call(f: *mut libc::c_void) {
            // SAFETY: the function at_exit was given, passed as its argument.
            let f: extern "C" fn() = unsafe { core::mem::transmute(f) };
            f();
        }
        let dso = EXIT_OBJECT.load(Ordering::Acquire);
        // SAFETY: registers `call` with `f` for the exit of the object `dso` names.
        unsafe { __cxa_atexit(call, f as *mut libc::c_void, dso) };
    }
    #[cfg(not(feature = "library"))]
    // SAFETY: registers a function with no preconditions.
    unsafe {
        libc::atexit(f);
    }
}

/// The object whose finalization runs the runtime library's exit handlers: what the lean runtime
/// that loaded it passes (its object's `__dso_handle`).
#[cfg(feature = "library")]
static EXIT_OBJECT: core::sync::atomic::AtomicPtr<libc::c_void> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// See [`at_exit`]: called by the lean runtime before it hands the library anything.
#[cfg(feature = "library")]
pub fn set_exit_object(dso: *mut libc::c_void) {
    EXIT_OBJECT.store(dso, Ordering::Release);
}

/// A mutual-exclusion lock, usable in a `static`: a flag taken with one atomic exchange (no call
/// into the C library, so a program that never contends pays nothing at start-up to bind one),
/// and a waiter yields the processor until it is free. The runtime's locks are held briefly,
/// or by a batch of code writes that other threads would wait for anyway.
pub struct Mutex<T> {
    locked: core::sync::atomic::AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, which holds the lock.
unsafe impl<T: Send> Sync for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Mutex<T> {}

impl<T> Mutex<T> {
    /// An unlocked mutex holding `data`.
    pub const fn new(data: T) -> Mutex<T> {
        Mutex {
            locked: core::sync::atomic::AtomicBool::new(false),
            data: UnsafeCell::new(data),
        }
    }

    /// Waits for the lock; the guard gives it back when dropped.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 64 {
                core::hint::spin_loop();
            } else {
                // SAFETY: no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
        MutexGuard { mutex: self }
    }
}

/// The lock of a [`Mutex`], held until dropped.
pub struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
}

impl<T> core::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T> core::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.locked.store(false, Ordering::Release);
    }
}

/// Runs something once per process, whichever thread asks first; the others wait for it.
pub struct Once {
    state: AtomicU8,
    lock: Mutex<()>,
}

impl Once {
    /// Not run yet.
    pub const fn new() -> Once {
        Once {
            state: AtomicU8::new(0),
            lock: Mutex::new(()),
        }
    }

    /// Runs `f` if no call has run it yet; returns when it has run.
    pub fn call_once(&self, f: impl FnOnce()) {
        if self.state.load(Ordering::Acquire) == 1 {
            return;
        }
        let _held = self.lock.lock();
        if self.state.load(Ordering::Relaxed) == 0 {
            f();
            self.state.store(1, Ordering::Release);
        }
    }

    /// Whether it has run.
    pub fn is_completed(&self) -> bool {
        self.state.load(Ordering::Acquire) == 1
    }
}

/// A value set once, then read without a lock.
pub struct OnceLock<T> {
    once: Once,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: the value is written once, under the Once, before `state` is released; read only after.
unsafe impl<T: Send + Sync> Sync for OnceLock<T> {}

impl<T> OnceLock<T> {
    /// Empty.
    pub const fn new() -> OnceLock<T> {
        OnceLock {
            once: Once::new(),
            value: UnsafeCell::new(None),
        }
    }

    /// The value, made by `f` if it is not there yet.
    pub fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
        // SAFETY: written only inside call_once, which no other thread is in at the same time.
        self.once
            .call_once(|| unsafe { *self.value.get() = Some(f()) });
        self.get().expect("set by call_once")
    }

    /// The value, if it is there.
    pub fn get(&self) -> Option<&T> {
        if !self.once.is_completed() {
            return None;
        }
        // SAFETY: complete: never written again.
        unsafe { (*self.value.get()).as_ref() }
    }

    /// Sets the value if it is not there yet; else hands `value` back.
    #[cfg_attr(feature = "library", allow(dead_code))]
    pub fn set(&self, value: T) -> core::result::Result<(), T> {
        let mut value = Some(value);
        // SAFETY: as in get_or_init.
        self.once
            .call_once(|| unsafe { *self.value.get() = value.take() });
        match value {
            None => Ok(()),
            Some(v) => Err(v),
        }
    }
}

/// A thread started by [`spawn`].
pub struct Thread(libc::pthread_t);

impl Thread {
    /// Waits for the thread to end.
    pub fn join(self) {
        // SAFETY: a thread we started and join once.
        unsafe { libc::pthread_join(self.0, core::ptr::null_mut()) };
    }
}

/// Starts `f` on a new thread named `name` (at most 15 bytes, as the kernel keeps it).
pub fn spawn(name: &'static core::ffi::CStr, f: impl FnOnce() + Send + 'static) -> Result<Thread> {
    type Start = Box<dyn FnOnce() + Send>;
    extern "C" fn start(arg: *mut libc::c_void) -> *mut libc::c_void {
        // SAFETY: the pointer spawn leaked, given to this thread only.
        let f: Box<Start> = unsafe { Box::from_raw(arg.cast()) };
        f();
        core::ptr::null_mut()
    }
    let arg: Box<Start> = Box::new(Box::new(f));
    let arg = Box::into_raw(arg);
    let mut thread: libc::pthread_t = 0;
    // SAFETY: `start` takes ownership of `arg` if the thread starts; else it is taken back here.
    let r = unsafe { libc::pthread_create(&mut thread, core::ptr::null(), start, arg.cast()) };
    if r != 0 {
        // SAFETY: the thread did not start: the box is still ours.
        drop(unsafe { Box::from_raw(arg) });
        return Err(Errno(r));
    }
    // SAFETY: a thread we just started.
    unsafe { libc::pthread_setname_np(thread, name.as_ptr()) };
    Ok(Thread(thread))
}

/// Thread-local cells whose first value is a constant: with the standard library (Rust
/// programs, feature `std`) its `thread_local!`; without (what C programs link) `#[thread_local]`
/// statics, the same initial-exec or local-exec TLS the standard library's compiles to. Each is
/// used as `NAME.with(|cell| ...)`.
macro_rules! thread_local_cells {
    ($($(#[$meta:meta])* static $name:ident: $t:ty = $init:expr;)*) => {
        #[cfg(feature = "std")]
        std::thread_local! {
            $($(#[$meta])* static $name: $t = const { $init };)*
        }
        $(
            #[cfg(not(feature = "std"))]
            $(#[$meta])*
            #[thread_local]
            static $name: crate::sys::Local<$t> = crate::sys::Local($init);
        )*
    };
}

pub(crate) use thread_local_cells;

/// A `#[thread_local]` static's value, reached as the standard library's `LocalKey` is.
#[cfg(not(feature = "std"))]
pub struct Local<T>(pub T);

#[cfg(not(feature = "std"))]
impl<T> Local<T> {
    /// `f` of the calling thread's value.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.0)
    }
}
