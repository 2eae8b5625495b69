//! Where a session keeps the site tables of the objects its processes loaded: each object's file
//! is linked into the session directory once (`object-DEV-INODE`), and a lane names it with its
//! size and build ID instead of holding a copy of the table; where the file cannot be linked
//! (another file system) or the object has no build ID, the table is copied into the lane as
//! before. A report reads the names from the linked file only while it is the file the process
//! loaded (a copy of the session elsewhere keeps it so), and says so when it is not.

use super::*;
use std::io::Write;
use std::os::unix::fs::MetadataExt;

/// The `object-*` files of the session `dir`.
fn object_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("object-"))
        })
        .collect();
    v.sort();
    v
}

/// The records of each process of `t`, and whether every site they name has its names.
fn records_and_names(t: &bootprof_report::Trace) -> (Vec<u64>, bool) {
    let records = t.processes.iter().map(|p| p.records).collect();
    let named = t.records.iter().all(|r| {
        let s = &t.sites[r.site as usize];
        s.name == "tick" && s.provider == "endings"
    });
    (records, named)
}

/// Two processes of one program in a session: its file is linked into the session once (the
/// same inode as the program), both lanes name it, and every record has its site's names.
#[test]
fn a_session_links_each_loaded_object_once() {
    let w = Work::new("tables-once");
    let exe = w.build("endings", &["endings.c"], &[], &[]);
    let script = "./endings exit 100 0; ./endings exit 200 0";
    let (t, o) = session_of(&w, "s", &["sh", "-c", script], &[]);
    ok(&o);
    let objects = object_files(&w.path("s"));
    assert_eq!(objects.len(), 1, "{objects:?}");
    let linked = std::fs::metadata(&objects[0]).unwrap();
    let program = std::fs::metadata(&exe).unwrap();
    assert_eq!((linked.dev(), linked.ino()), (program.dev(), program.ino()));
    assert_eq!(records_and_names(&t), (vec![100, 200], true));
    assert!(t.processes.iter().all(|p| p.unread_tables.is_empty()));
}

/// A session copied elsewhere (new inodes and times) reads as it did: the linked file is known
/// by its size and build ID.
#[test]
fn a_copied_session_keeps_its_names() {
    let w = Work::new("tables-copy");
    w.build("endings", &["endings.c"], &[], &[]);
    let (_, o) = session_of(&w, "s", &["./endings", "exit", "40", "0"], &[]);
    ok(&o);
    assert_eq!(object_files(&w.path("s")).len(), 1);
    let st = Command::new("cp")
        .arg("-r")
        .arg(w.path("s"))
        .arg(w.path("copy"))
        .status()
        .unwrap();
    assert!(st.success());
    let t = bootprof_report::read_trace(&w.path("copy")).unwrap();
    assert_eq!(records_and_names(&t), (vec![40], true));
    assert!(t.processes[0].unread_tables.is_empty());
}

/// A program without a build ID: its table is copied into the lane, nothing is linked.
#[test]
fn a_program_without_a_build_id_has_its_table_copied() {
    let w = Work::new("tables-no-id");
    w.build("endings", &["endings.c"], &[], &["-Wl,--build-id=none"]);
    let (t, o) = session_of(&w, "s", &["./endings", "exit", "20", "0"], &[]);
    ok(&o);
    assert_eq!(object_files(&w.path("s")), Vec::<PathBuf>::new());
    assert_eq!(records_and_names(&t), (vec![20], true));
}

/// An object file written after the run is not read for names: the report keeps the records,
/// unnamed, and says for each process that its table's names are missing and why.
#[test]
fn an_object_file_written_since_the_run_is_not_read() {
    let w = Work::new("tables-written");
    w.build("endings", &["endings.c"], &[], &[]);
    let (_, o) = session_of(&w, "s", &["./endings", "exit", "50", "0"], &[]);
    ok(&o);
    let objects = object_files(&w.path("s"));
    assert_eq!(objects.len(), 1, "{objects:?}");
    // Written in place, as `cp` over it would: same inode, new size and time.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&objects[0])
        .unwrap()
        .write_all(b"\0")
        .unwrap();
    let t = bootprof_report::read_trace(&w.path("s")).unwrap();
    assert_eq!(records_and_names(&t), (vec![50], false));
    let why = &t.processes[0].unread_tables;
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(
        why[0].contains("is no longer the file the process loaded"),
        "{why:?}"
    );
    let summary = report_of(&w.path("s"), "summary");
    assert!(
        summary.contains("the names of a site table are missing"),
        "{summary}"
    );
}

/// A session directory on another file system than the program: nothing is linked, the table
/// is copied into the lane, and the names are there.
#[test]
fn a_table_on_another_file_system_is_copied_into_the_lane() {
    let w = Work::new("tables-copied");
    let exe = w.build("endings", &["endings.c"], &[], &[]);
    let here = std::fs::metadata(&exe).unwrap().dev();
    let shm = Path::new("/dev/shm");
    let elsewhere = std::fs::metadata(shm).is_ok_and(|m| m.is_dir() && m.dev() != here);
    if !elsewhere {
        eprintln!(
            "a_table_on_another_file_system_is_copied_into_the_lane: /dev/shm is not another \
             file system here; not checked"
        );
        return;
    }
    let dir = shm.join(format!("bootprof-tables-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = Command::new(tools().join("bootprof"))
        .arg("run")
        .arg("-o")
        .arg(&dir)
        .args(["--", "./endings", "exit", "30", "0"])
        .current_dir(&w.0)
        .output()
        .unwrap();
    let t = bootprof_report::read_trace(&dir);
    let objects = object_files(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    ok(&o);
    assert_eq!(objects, Vec::<PathBuf>::new());
    assert_eq!(records_and_names(&t.unwrap()), (vec![30], true));
}
