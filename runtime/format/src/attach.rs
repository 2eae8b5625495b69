//! Attaching to a running program: the contract between the runtime inside it (which listens
//! only once knocked) and `bootprof attach` / `bootprof list --pid` (which knock).
//!
//! # The knock
//!
//! A program carries no thread, socket or timer for attaching. The client makes the knock file
//! [`knock_file`] in the user's private directory [`user_dir`] (mode 0700, owned by the
//! program's effective user) and sends the program the attach signal ([`DEFAULT_SIGNAL`],
//! SIGURG, whose default action is to ignore it, so a knock on a program without the runtime
//! does nothing; `BOOTPROF_ATTACH_SIGNAL` in the program's environment names another of
//! [`signal_number`]'s). The runtime's handler sees the file, starts one listener thread, and
//! the thread listens on the unix socket [`socket_file`] in the same directory, for one client,
//! whose credentials it checks (`SO_PEERCRED`: the program's own user, or root).
//!
//! A program that carries the lean runtime loads the runtime library before it listens. The
//! client offers its own: it puts a copy in the same directory and writes its file name (no
//! `/`, [`is_offered_library`]) into the knock file, which the lean runtime tries after
//! `BOOTPROF_LIBRARY` and before the library `bootprof-link` put beside it (which the process
//! may not be able to read: another user's cache, another machine's).
//!
//! # The conversation
//!
//! Lines of UTF-8 text, each ending in `\n`. The client sends a request; the program answers
//! with zero or more data lines, then one line `ok ...` or `error MESSAGE`.
//!
//! | request | answer |
//! |---|---|
//! | `hello 1` | `ok 1 PID SITES` |
//! | `list` | one [`SiteLine`] per registered site, then `ok COUNT` |
//! | `record KEEP RECORDS DIR` | a lane for this process in the session directory DIR (which the client made), recording from now: `ok` |
//! | `count` | (instead of `record`, before the first `enable`) hits counted exactly from now until the detach: `ok` |
//! | `notrace PATTERNS` | the comma-separated patterns this attach never enables: `ok` |
//! | `enable trap\|call PATTERNS` | the disabled sites matching the patterns enabled: `ok CHANGED` |
//! | `detach` | recording stopped, every site this attach enabled disabled and checked to hold its NOP again: `ok RESTORED NOT_RESTORED` (the second 0 unless the text could not be written back); after `count`, first a [`SiteLine`] per site it enabled (guards aside), its `hits` those made while it was enabled |
//!
//! A client that goes away without `detach` (killed, or its connection broken) is detached all
//! the same.

extern crate alloc;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The version of the conversation.
pub const PROTOCOL_VERSION: u32 = 1;
/// SIGURG: ignored by default, so a knock on a program without the runtime is harmless.
pub const DEFAULT_SIGNAL: i32 = 23;
/// The environment variable that turns attaching off (`0`).
pub const ENV_ATTACH: &str = "BOOTPROF_ATTACH";
/// The environment variable that chooses the attach signal.
pub const ENV_SIGNAL: &str = "BOOTPROF_ATTACH_SIGNAL";

/// Where the user directories are: [`USER_DIR_PREFIX`] and the user's id.
pub const USER_DIR_PREFIX: &str = "/tmp/.bootprof-";

/// The private directory of the user `uid` (in the program's mount namespace).
pub fn user_dir(uid: u32) -> String {
    format!("{USER_DIR_PREFIX}{uid}")
}

/// The start of a knock file's name; the pid follows.
pub const KNOCK_PREFIX: &str = "attach.";

/// Whether `name`, the contents of a knock file, names a runtime library the client offers in
/// [`user_dir`]: `libbootprof.ID.so`, a file name alone.
pub fn is_offered_library(name: &[u8]) -> bool {
    (name.starts_with(b"libbootprof.") && name.ends_with(b".so"))
        && name.len() <= 255
        && !name.contains(&b'/')
}

/// The knock file for the process `pid` (as the process itself sees its pid), in [`user_dir`].
pub fn knock_file(pid: u32) -> String {
    format!("{KNOCK_PREFIX}{pid}")
}

/// The listener's socket for the process `pid`, in [`user_dir`].
pub fn socket_file(pid: u32) -> String {
    format!("attach.{pid}.sock")
}

/// The signal `name` names, if it may be the attach signal: `URG` (the default), `WINCH`,
/// `USR1`, `USR2` (with or without `SIG`), `RTMIN+N`, or a number of one of them or of a
/// real-time signal (34 to 64). Stop and fatal signals may not: their default action could not
/// be carried out for a signal that is not a knock without losing the handler.
pub fn signal_number(name: &str) -> Option<i32> {
    let name = name.trim_ascii();
    if let Ok(n) = name.parse::<i32>() {
        return matches!(n, 10 | 12 | 23 | 28 | 34..=64).then_some(n);
    }
    let bare = name.strip_prefix("SIG").unwrap_or(name);
    match bare {
        "URG" => Some(23),
        "WINCH" => Some(28),
        "USR1" => Some(10),
        "USR2" => Some(12),
        _ => {
            let n: i32 = bare.strip_prefix("RTMIN+")?.parse().ok()?;
            // glibc keeps SIGRTMIN (32) and 33 for itself: its SIGRTMIN is 34.
            (0..=30).contains(&n).then_some(34 + n)
        }
    }
}

/// One site as the `list` request answers it: a line of tab-separated fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteLine {
    /// The site's id in the process.
    pub id: u32,
    /// Its address in the process.
    pub address: u64,
    /// `disabled`, `trap` or `call` (a site on its way to call mode is `call`).
    pub state: String,
    /// Whether the code at the site is exactly its NOP (what the file holds).
    pub holds_nop: bool,
    /// Hits counted so far.
    pub hits: u64,
    /// The site's kind, as `bootprof_format::Kind` names it.
    pub kind: String,
    /// The provider (empty for hooks).
    pub provider: String,
    /// The probe's name (the hook symbol for hooks).
    pub name: String,
    /// The enclosing function's symbol (empty if unknown).
    pub function: String,
    /// Its demangled name (empty when not mangled).
    pub demangled: String,
    /// The site's offset in its function.
    pub func_offset: u32,
}

impl SiteLine {
    /// The line, without its `\n`.
    pub fn encode(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n'], " ");
        format!(
            "site\t{}\t{:#x}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            self.id,
            self.address,
            self.state,
            if self.holds_nop { "nop" } else { "code" },
            self.hits,
            self.kind,
            clean(&self.provider),
            clean(&self.name),
            clean(&self.function),
            clean(&self.demangled),
            self.func_offset
        )
    }

    /// The site a line describes, if it is one.
    pub fn decode(line: &str) -> Option<SiteLine> {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 12 || f[0] != "site" {
            return None;
        }
        Some(SiteLine {
            id: f[1].parse().ok()?,
            address: u64::from_str_radix(f[2].strip_prefix("0x")?, 16).ok()?,
            state: f[3].into(),
            holds_nop: match f[4] {
                "nop" => true,
                "code" => false,
                _ => return None,
            },
            hits: f[5].parse().ok()?,
            kind: f[6].into(),
            provider: f[7].into(),
            name: f[8].into(),
            function: f[9].into(),
            demangled: f[10].into(),
            func_offset: f[11].parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_library_file_name_is_an_offered_library() {
        assert!(is_offered_library(b"libbootprof.0.1.0-1a2b3c4d5e6f7a8b.so"));
        for name in [
            &b""[..],
            b"libbootprof.so/../../etc/x.so",
            b"/tmp/libbootprof.x.so",
            b"libc.so",
            b"libbootprof.x.so.tmp",
        ] {
            assert!(
                !is_offered_library(name),
                "{}",
                String::from_utf8_lossy(name)
            );
        }
        assert!(!is_offered_library(&[b'l'; 300]));
    }

    #[test]
    fn a_site_line_reads_back_as_written() {
        let s = SiteLine {
            id: 7,
            address: 0x401234,
            state: "trap".into(),
            holds_nop: false,
            hits: 12,
            kind: "probe".into(),
            provider: "app".into(),
            name: "tick".into(),
            function: "_Z4workv".into(),
            demangled: "work()".into(),
            func_offset: 20,
        };
        assert_eq!(SiteLine::decode(&s.encode()), Some(s));
        assert_eq!(SiteLine::decode("ok 3"), None);
    }

    #[test]
    fn only_signals_whose_default_can_be_kept_may_knock() {
        assert_eq!(signal_number("URG"), Some(23));
        assert_eq!(signal_number("SIGUSR2"), Some(12));
        assert_eq!(signal_number("RTMIN+2"), Some(36));
        assert_eq!(signal_number("40"), Some(40));
        assert_eq!(signal_number("TSTP"), None);
        assert_eq!(signal_number("9"), None);
        assert_eq!(signal_number("SEGV"), None);
    }
}
