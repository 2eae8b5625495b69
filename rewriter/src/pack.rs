//! Packs: the rewritten copies of objects that stand side by side on the link line go to the
//! linker as members of one archive, read whole (`-Wl,--push-state,--whole-archive PACK
//! -Wl,--pop-state`), not as one new file each.
//!
//! Why: every new file is a new inode, and ext4 makes a new inode slowly after many were freed
//! (it passes over the recently deleted ones, looking each up): a link that rewrote linkbench's
//! 41 objects spent about 3 ms of CPU creating and removing their copies, a tenth of its time
//! over the plain link. Read whole, an archive's members are what the same objects named one by
//! one are: loaded in their order, each whether or not it defines a symbol the link needs; GNU ld
//! and lld link the same bytes either way (`cmp`). `--push-state`/`--pop-state` keep whatever
//! `--whole-archive` state the line itself sets around them.
//!
//! Only for GNU ld and lld (the linkers bootprof knows to read these options), and not for a
//! link with its own linker script, whose file-name patterns would meet `pack(member)` names.
//!
//! The members are written in line order as they are rewritten, by whichever rewriting thread
//! finishes the next one: a thread that finishes an object ahead of its turn leaves a copy of
//! its bytes (at most 64 MiB of them wait at once) and goes on rewriting.

use crate::archive::{append_member, header};
use crate::args::{ArgKind, LinkLine};
use crate::emit::Emitted;
use crate::error::{Error, Result};
use crate::gather::{Gathered, InputKind};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};

/// The linker options around a pack on the driver's line: its members are loaded as objects
/// named one by one would be, and the line's own `--whole-archive` state is kept.
pub const BEFORE: &str = "-Wl,--push-state,--whole-archive";
/// See [`BEFORE`].
pub const AFTER: &str = "-Wl,--pop-state";

/// How many bytes of members finished ahead of their turn may wait to be written: beyond it, a
/// thread waits for the members before its own (a program's first object may be its largest).
const AHEAD: usize = 64 << 20;

/// Which inputs may share a pack: runs of two or more objects that stand side by side on the
/// final line.
#[derive(Debug, Default)]
pub struct Plan {
    /// For each input (in `Gathered::inputs` order), its run, if it is in one.
    run: Vec<Option<usize>>,
    /// For each input in a run, where its member name is in its run's name table.
    name_at: Vec<usize>,
    /// Each run's `//` table: the member names of all its inputs, each ended by `/\n`.
    tables: Vec<Vec<u8>>,
}

/// What became of a rewritten input on the line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Role {
    /// Not in a pack: it stands alone (rewritten or not).
    #[default]
    Alone,
    /// The first member of the pack at this path, which stands in its place.
    Starts(PathBuf),
    /// A later member of the pack before it: it leaves the line.
    Joins,
}

impl Plan {
    /// The runs of `gathered`'s objects (linked by `line`) that may share a pack; none unless
    /// `linker_known` (GNU ld or lld) and the line has no linker script of its own.
    pub fn new(line: &LinkLine, gathered: &Gathered, linker_known: bool) -> Plan {
        let n = gathered.inputs.len();
        let mut plan = Plan {
            run: vec![None; n],
            name_at: vec![0; n],
            tables: Vec::new(),
        };
        if !linker_known || line.has_linker_script() {
            return plan;
        }
        // Each argument's place on the final line.
        let place: HashMap<usize, usize> = (gathered.order.iter())
            .filter(|a| !gathered.removed.contains(a))
            .enumerate()
            .map(|(place, &arg)| (arg, place))
            .collect();
        let packable = |i: usize| {
            let input = &gathered.inputs[i];
            input.kind == InputKind::Object
                && line.kinds.get(input.arg) != Some(&ArgKind::Library)
                && place.contains_key(&input.arg)
        };
        let mut i = 0;
        while i < n {
            let mut end = i + 1;
            while packable(i)
                && end < n
                && packable(end)
                && place[&gathered.inputs[end].arg] == place[&gathered.inputs[end - 1].arg] + 1
            {
                end += 1;
            }
            if end - i >= 2 {
                let mut table = Vec::new();
                for j in i..end {
                    plan.run[j] = Some(plan.tables.len());
                    plan.name_at[j] = table.len();
                    let input = &gathered.inputs[j];
                    table.extend_from_slice(member_name(input.arg, &input.path).as_bytes());
                    table.extend_from_slice(b"/\n");
                }
                plan.tables.push(table);
            }
            i = end;
        }
        plan
    }

    /// Whether input `i` goes to a pack if it is rewritten.
    pub fn packs(&self, i: usize) -> bool {
        self.run.get(i).is_some_and(Option::is_some)
    }

    /// The role of input `i`, rewritten or not (`rewritten`), after input `i - 1` (`previous`:
    /// whether that one went to a pack).
    fn role(&self, dir: &Path, arg: usize, i: usize, rewritten: bool, previous: bool) -> Role {
        if !rewritten || !self.packs(i) {
            Role::Alone
        } else if previous && i > 0 && self.run[i - 1] == self.run[i] {
            Role::Joins
        } else {
            Role::Starts(dir.join(format!("{arg:04}.pack.a")))
        }
    }

    /// The role of each input, from which were rewritten (in input order; `args`: each input's
    /// argument).
    pub fn roles(&self, dir: &Path, args: &[usize], rewritten: &[bool]) -> Vec<Role> {
        let mut previous = false;
        (0..rewritten.len())
            .map(|i| {
                let role = self.role(dir, args[i], i, rewritten[i], previous);
                previous = role != Role::Alone;
                role
            })
            .collect()
    }
}

/// The name of the member (or the file) that is input `arg`'s rewritten copy.
pub fn member_name(arg: usize, path: &Path) -> String {
    let base = path.file_name().and_then(|n| n.to_str()).unwrap_or("input");
    format!("{arg:04}-{base}")
}

/// How the linkers' messages name the member for input `arg` (`path`) of the pack at `pack`,
/// each with the input's own name to say instead: GNU ld's (and lld's) `PACK(MEMBER)`, and
/// lld's `MEMBER:(symbol)` (followed by [`archive_suffix`]).
pub fn member_renames(pack: &str, arg: usize, path: &Path) -> [(String, String); 2] {
    let (member, own) = (member_name(arg, path), path.display().to_string());
    [
        (format!("{pack}({member})"), own.clone()),
        (format!("{member}:("), format!("{own}:(")),
    ]
}

/// What lld adds after a pack's member, `in archive PACK`, and nothing to say instead: the
/// plain link's message names the object alone.
pub fn archive_suffix(pack: &str) -> (String, String) {
    (format!(" in archive {pack}"), String::new())
}

/// A member ahead of its turn, or an input that is no member: its bytes, if it is one.
type Waiting = Option<Vec<u8>>;

/// Writes the packs of [`Plan`] from the rewriting threads (see the module's documentation).
pub struct Packer<'p> {
    plan: &'p Plan,
    dir: &'p Path,
    /// Each input's argument.
    args: Vec<usize>,
    /// Each pack written under a name of its own first (see `rewrite::write_file`).
    whole: bool,
    /// How many bytes may wait ([`AHEAD`]).
    ahead: usize,
    state: Mutex<State>,
    /// Signalled when the next input to place changes, or the writing ends.
    turn: Condvar,
    /// Touched only by the thread that holds `State::writing`.
    writer: Mutex<Writer>,
}

#[derive(Default)]
struct State {
    /// The next input to place.
    next: usize,
    /// Whether a thread is placing inputs.
    writing: bool,
    /// Inputs finished ahead of their turn.
    waiting: BTreeMap<usize, Waiting>,
    /// Their bytes.
    waiting_bytes: usize,
    /// Whether the thread writing panicked: nobody waits any more (the panic ends the rewriting).
    failed: bool,
}

/// The writing taken by a thread: given up for the others if it panics, so that they do not
/// wait for a turn that never comes.
struct Writing<'a, 'p>(&'a Packer<'p>);

impl Drop for Writing<'_, '_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.failed = true;
        state.writing = false;
        drop(state);
        self.0.turn.notify_all();
    }
}

#[derive(Default)]
struct Writer {
    open: Option<OpenPack>,
    roles: Vec<Role>,
    /// The first failure, and the input being placed then.
    error: Option<(usize, Error)>,
}

struct OpenPack {
    path: PathBuf,
    /// Where it is written (`path` itself, or a name of its own until closed).
    writing: PathBuf,
    file: BufWriter<File>,
}

/// A member's bytes: as the rewriting left them, or a copy.
enum Bytes<'a, 'd> {
    Emitted(&'a Emitted<'d>),
    Copy(&'a [u8]),
}

impl Bytes<'_, '_> {
    fn len(&self) -> usize {
        match self {
            Bytes::Emitted(e) => e.len(),
            Bytes::Copy(b) => b.len(),
        }
    }

    fn write_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        match self {
            Bytes::Emitted(e) => e.write_to(out),
            Bytes::Copy(b) => out.write_all(b),
        }
    }
}

impl<'p> Packer<'p> {
    /// Packs into `dir` as `plan` says, for inputs whose arguments are `args`.
    pub fn new(plan: &'p Plan, dir: &'p Path, args: Vec<usize>, whole: bool) -> Packer<'p> {
        Packer {
            plan,
            dir,
            args,
            whole,
            ahead: AHEAD,
            state: Mutex::default(),
            turn: Condvar::new(),
            writer: Mutex::default(),
        }
    }

    /// Whether input `i` goes to a pack if it is rewritten.
    pub fn packs(&self, i: usize) -> bool {
        self.plan.packs(i)
    }

    /// Hands on input `i`, once: the rewritten object for its pack (`packs(i)`), or `None` for
    /// an input that is not rewritten, is written alone, or failed.
    pub fn put(&self, i: usize, member: Option<&Emitted<'_>>) {
        self.put_bytes(i, member.map(Bytes::Emitted));
    }

    fn put_bytes(&self, i: usize, member: Option<Bytes<'_, '_>>) {
        let mut copy: Option<Waiting> = None;
        let mut state = self.lock();
        loop {
            if state.failed {
                return;
            }
            if state.next == i && !state.writing {
                state.writing = true;
                drop(state);
                let writing = Writing(self);
                match &copy {
                    Some(bytes) => self.place(i, bytes.as_deref().map(Bytes::Copy)),
                    None => self.place(i, member),
                }
                self.place_waiting(i + 1);
                return std::mem::forget(writing);
            }
            let Some(waiting) = &copy else {
                drop(state);
                copy = Some(member.as_ref().map(|m| {
                    let mut bytes = Vec::with_capacity(m.len());
                    // Writing to memory fails only where allocating does (an abort).
                    let _ = m.write_to(&mut bytes);
                    bytes
                }));
                state = self.lock();
                continue;
            };
            let len = waiting.as_ref().map_or(0, Vec::len);
            if state.waiting_bytes == 0 || state.waiting_bytes + len <= self.ahead {
                state.waiting_bytes += len;
                state.waiting.insert(i, copy.take().flatten());
                return;
            }
            state = self.turn.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Places the inputs that wait from `next` on, in turn; then gives up the writing.
    fn place_waiting(&self, mut next: usize) {
        let mut state = self.lock();
        state.next = next;
        while let Some(waiting) = state.waiting.remove(&next) {
            state.waiting_bytes -= waiting.as_ref().map_or(0, Vec::len);
            drop(state);
            self.turn.notify_all();
            self.place(next, waiting.as_deref().map(Bytes::Copy));
            next += 1;
            state = self.lock();
            state.next = next;
        }
        state.writing = false;
        drop(state);
        self.turn.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Places input `i`, in turn: its member appended to its pack, or the open pack closed.
    fn place(&self, i: usize, member: Option<Bytes<'_, '_>>) {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let previous = w.roles.last().is_some_and(|r| *r != Role::Alone);
        let role = self
            .plan
            .role(self.dir, self.args[i], i, member.is_some(), previous);
        if w.error.is_none() {
            let written = match (&role, &member) {
                (Role::Alone, _) | (_, None) => self.close(&mut w.open),
                (Role::Starts(path), Some(m)) => self
                    .close(&mut w.open)
                    .and_then(|()| self.open(path, i))
                    .and_then(|open| self.append(w.open.insert(open), i, m)),
                (Role::Joins, Some(m)) => match &mut w.open {
                    Some(open) => self.append(open, i, m),
                    None => Err(Error::Internal("a pack's member without its pack".into())),
                },
            };
            if let Err(e) = written {
                w.error = Some((i, e));
            }
        }
        w.roles.push(role);
    }

    /// Creates the pack at `path`, whose first member is input `i`: the archive's magic, and
    /// its run's name table.
    fn open(&self, path: &Path, i: usize) -> Result<OpenPack> {
        let writing = if self.whole {
            let mut partial = path.as_os_str().to_owned();
            partial.push(".partial");
            PathBuf::from(partial)
        } else {
            path.to_path_buf()
        };
        let run = self.plan.run.get(i).copied().flatten();
        let table = run
            .and_then(|run| self.plan.tables.get(run))
            .ok_or_else(|| Error::Internal(format!("input {i} starts a pack outside a run")))?;
        let file = File::create(&writing).and_then(|f| {
            let mut file = BufWriter::with_capacity(64 << 10, f);
            file.write_all(&object::archive::MAGIC)?;
            append_member(&mut file, header(b"//", b"0"), table.len(), |f| {
                f.write_all(table)
            })?;
            Ok(file)
        });
        let file = file.map_err(|e| Error::io(&writing, e))?;
        Ok(OpenPack {
            path: path.to_path_buf(),
            writing,
            file,
        })
    }

    fn append(&self, open: &mut OpenPack, i: usize, member: &Bytes<'_, '_>) -> Result<()> {
        let name = format!("/{}", self.plan.name_at[i]);
        append_member(
            &mut open.file,
            header(name.as_bytes(), b"644"),
            member.len(),
            |f| member.write_to(f),
        )
        .map_err(|e| Error::io(&open.writing, e))
    }

    /// Closes the open pack, if any: written out, and at its name.
    fn close(&self, open: &mut Option<OpenPack>) -> Result<()> {
        let Some(pack) = open.take() else {
            return Ok(());
        };
        let OpenPack {
            path,
            writing,
            file,
        } = pack;
        file.into_inner()
            .map_err(std::io::IntoInnerError::into_error)
            .and_then(|_| match writing != path {
                true => std::fs::rename(&writing, &path),
                false => Ok(()),
            })
            .map_err(|e| Error::io(&path, e))
    }

    /// Every input's role, once every input was put; or the first failure to write a pack, and
    /// the input whose member it was.
    pub fn finish(self) -> std::result::Result<Vec<Role>, (usize, Error)> {
        let mut w = std::mem::take(&mut *self.writer.lock().unwrap_or_else(|e| e.into_inner()));
        let last = w.roles.len().saturating_sub(1);
        if w.roles.len() != self.args.len() {
            let placed = format!("{} of {} inputs placed", w.roles.len(), self.args.len());
            w.error.get_or_insert((last, Error::Internal(placed)));
        }
        if let Err(e) = self.close(&mut w.open) {
            w.error.get_or_insert((last, e));
        }
        match w.error {
            Some(e) => Err(e),
            None => Ok(w.roles),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gather::Input;
    use object::read::archive::ArchiveFile;

    fn line(args: &[&str]) -> LinkLine {
        let argv = args.iter().map(|a| a.to_string()).collect();
        crate::args::parse(argv, "cc", "").unwrap()
    }

    /// What gathering hands on for `line`, its objects at arguments `objects`.
    fn gathered(line: &LinkLine, objects: &[usize]) -> Gathered {
        let inputs = (objects.iter())
            .map(|&arg| Input {
                arg,
                path: PathBuf::from(&line.args[arg]),
                kind: InputKind::Object,
                data: None,
            })
            .collect();
        Gathered {
            args: line.args.clone(),
            order: (0..line.args.len()).collect(),
            inputs,
            ..Gathered::default()
        }
    }

    #[test]
    fn objects_side_by_side_share_a_pack_and_one_not_rewritten_splits_it() {
        // -o app a.o b.o -lm c.o d.o e.o
        let l = line(&["cc", "-o", "app", "a.o", "b.o", "-lm", "c.o", "d.o", "e.o"]);
        let plan = Plan::new(&l, &gathered(&l, &[2, 3, 5, 6, 7]), true);
        assert!((0..5).all(|i| plan.packs(i)));
        assert_eq!(plan.tables.len(), 2, "-lm parts the runs");
        let dir = Path::new("/d");
        let roles = plan.roles(dir, &[2, 3, 5, 6, 7], &[true, true, true, false, true]);
        let pack = |arg: usize| Role::Starts(dir.join(format!("{arg:04}.pack.a")));
        assert_eq!(
            roles,
            [pack(2), Role::Joins, pack(5), Role::Alone, pack(7)],
            "d.o, not rewritten, stands between two packs"
        );
        // A member's name is its rewritten copy's, in its run's table.
        let table = &plan.tables[1];
        assert_eq!(&table[plan.name_at[3]..][..9], b"0006-d.o/");
    }

    #[test]
    fn no_packs_for_an_unknown_linker_a_linker_script_or_a_lone_object() {
        let l = line(&["cc", "-o", "app", "a.o", "b.o"]);
        let g = gathered(&l, &[2, 3]);
        assert!(!Plan::new(&l, &g, false).packs(0), "unknown linker");
        let l = line(&["cc", "-o", "app", "a.o", "b.o", "-T", "x.ld"]);
        let g = gathered(&l, &[2, 3]);
        assert!(
            !Plan::new(&l, &g, true).packs(0),
            "a linker script of its own"
        );
        let l = line(&["cc", "-o", "app", "a.o", "-lm", "b.o"]);
        let plan = Plan::new(&l, &gathered(&l, &[2, 4]), true);
        assert!(
            !plan.packs(0) && !plan.packs(1),
            "no two objects side by side"
        );
        let roles = plan.roles(Path::new("/d"), &[2, 4], &[true, true]);
        assert_eq!(roles, [Role::Alone, Role::Alone]);
    }

    /// The members of the archive at `path`: name and bytes.
    fn members(path: &Path) -> Vec<(String, Vec<u8>)> {
        let data = std::fs::read(path).unwrap();
        let archive = ArchiveFile::parse(&*data).unwrap();
        (archive.members())
            .map(|m| {
                let m = m.unwrap();
                let name = String::from_utf8_lossy(m.name()).into_owned();
                (name, m.data(&*data).unwrap().to_vec())
            })
            .collect()
    }

    #[test]
    fn members_put_out_of_turn_from_many_threads_are_written_in_line_order() {
        let l = line(&["cc", "-o", "app", "a.o", "b.o", "c.o", "d.o", "e.o", "f.o"]);
        let g = gathered(&l, &[2, 3, 4, 5, 6, 7]);
        let plan = Plan::new(&l, &g, true);
        let dir = tempfile::tempdir().unwrap();
        let mut packer = Packer::new(&plan, dir.path(), vec![2, 3, 4, 5, 6, 7], true);
        // Room for one waiting member at a time: the later ones wait for their turn.
        packer.ahead = 1;
        // Odd sizes, so that members need the padding byte; c.o (input 2) is not rewritten.
        let bytes: Vec<Vec<u8>> = (0..6).map(|i| vec![b'a' + i as u8; 101 + i]).collect();
        // The last first, from this thread: it waits, copied, and takes the room there is.
        packer.put_bytes(5, Some(Bytes::Copy(&bytes[5])));
        std::thread::scope(|s| {
            for i in [3, 4, 1, 0, 2] {
                let (packer, bytes) = (&packer, &bytes);
                s.spawn(move || {
                    let member = (i != 2).then(|| Bytes::Copy(&bytes[i]));
                    packer.put_bytes(i, member);
                });
            }
        });
        let roles = packer.finish().unwrap();
        let pack = |arg: usize| dir.path().join(format!("{arg:04}.pack.a"));
        assert_eq!(
            roles,
            [
                Role::Starts(pack(2)),
                Role::Joins,
                Role::Alone,
                Role::Starts(pack(5)),
                Role::Joins,
                Role::Joins
            ]
        );
        let first = members(&pack(2));
        let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["0002-a.o", "0003-b.o"]);
        assert_eq!(first[1].1, bytes[1]);
        let second = members(&pack(5));
        let names: Vec<&str> = second.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["0005-d.o", "0006-e.o", "0007-f.o"]);
        assert!(second
            .iter()
            .zip(&bytes[3..])
            .all(|((_, got), want)| got == want));
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 2, "no partial pack left: {left:?}");
    }

    #[test]
    fn a_pack_that_cannot_be_written_fails_at_its_first_member_naming_it() {
        let l = line(&["cc", "-o", "app", "a.o", "b.o"]);
        let g = gathered(&l, &[2, 3]);
        let plan = Plan::new(&l, &g, true);
        let dir = Path::new("/nonexistent/bootprof");
        let packer = Packer::new(&plan, dir, vec![2, 3], false);
        packer.put_bytes(1, Some(Bytes::Copy(b"b")));
        packer.put_bytes(0, Some(Bytes::Copy(b"a")));
        let (i, e) = packer.finish().unwrap_err();
        assert_eq!(i, 0);
        assert!(
            e.to_string().contains("/nonexistent/bootprof/0002.pack.a"),
            "{e}"
        );
    }

    #[test]
    fn a_writer_that_panics_leaves_no_thread_waiting() {
        let l = line(&["cc", "-o", "app", "a.o", "b.o", "c.o"]);
        let g = gathered(&l, &[2, 3, 4]);
        let plan = Plan::new(&l, &g, true);
        let dir = tempfile::tempdir().unwrap();
        let mut packer = Packer::new(&plan, dir.path(), vec![2, 3, 4], false);
        packer.ahead = 1;
        // Inputs 1 and 2 wait (the second for room), input 0's writer panics while placing it.
        let joined = std::thread::scope(|s| {
            let packer = &packer;
            packer.put_bytes(1, Some(Bytes::Copy(b"b")));
            let waiting = s.spawn(move || packer.put_bytes(2, Some(Bytes::Copy(b"c"))));
            let panicking = s.spawn(move || {
                let _writing = {
                    let mut state = packer.lock();
                    state.writing = true;
                    Writing(packer)
                };
                panic!("a writer's bug");
            });
            (panicking.join().is_err(), waiting.join().is_ok())
        });
        assert_eq!(joined, (true, true), "the waiting thread returned");
        assert!(packer.finish().is_err(), "the inputs were not all placed");
    }
}
