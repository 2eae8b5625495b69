//! `bootprof run` grows each lane ahead of its process (runtime/report/src/grow.rs):
//! `tests/runtime/grow.c` records a known run of events and looks at its own lane. The records
//! must be the same with the grower and without it (`--no-grow-ahead`), the lanes must end as
//! long as their processes made them, and a lane whose process outlives the run must not be
//! cut under it.

use super::*;

/// Header fields of a lane (bootprof_format::lane::field) the tests read: the end the process
/// saw, and the chunks it grew the lane to.
const END_TSC: usize = 72;
const GROWN: usize = 120;

/// The lane's length, and the length the chunks its process grew it to take.
fn lane_lengths(lane: &Path) -> (u64, u64) {
    let b = std::fs::read(lane).unwrap();
    let grown = u64::from_le_bytes(b[GROWN..GROWN + 8].try_into().unwrap());
    (b.len() as u64, 4096 + grown * 4096)
}

/// What the text report says happened, without the task and time columns.
fn events(dir: &Path) -> Vec<String> {
    report_of(dir, "text")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_once(": ").map_or(l, |(_, e)| e).to_string())
        .collect()
}

/// 50,000 events (800 KB of records) with the grower and without: the program sees its lane
/// run ahead of what it grew only with the grower, the text report's events are the same, and
/// each lane ends exactly as long as the chunks its process grew it to (what the grower made
/// and the process never used is cut off), as long as without the grower.
#[test]
fn growing_lanes_ahead_changes_no_record_and_leaves_no_byte_past_them() {
    let w = Work::new("grow");
    w.build("grow", &["grow.c"], &[], &[]);
    let mut seen = Vec::new();
    for (name, extra, wait, says) in [
        ("with", None, "10000", "ahead\n"),
        ("without", Some("--no-grow-ahead"), "300", "not ahead\n"),
    ] {
        let dir = w.path(name);
        let o = Command::new(tools().join("bootprof"))
            .args(["run", "--mode", "call"])
            .args(extra)
            .arg("-o")
            .arg(&dir)
            .args(["--", "./grow", "50000", wait])
            .current_dir(&w.0)
            .output()
            .unwrap();
        assert_eq!(ok(&o), says, "{name}");
        let t = bootprof_report::read_trace(&dir).unwrap();
        assert_eq!(
            args_by_process(&t, "tick"),
            [(0..50_000).collect::<Vec<u64>>()]
        );
        assert_eq!(t.processes[0].dropped, 0);
        let [lane] = &lanes_of(&dir)[..] else {
            panic!("one lane in {}", dir.display())
        };
        let (len, grown) = lane_lengths(lane);
        assert_eq!(len, grown, "{name}: the lane's length and its chunks'");
        seen.push((events(&dir), len));
    }
    assert_eq!(seen[0].0.len(), seen[1].0.len());
    assert!(seen[0] == seen[1], "the sessions differ");
}

/// A process that outlives `bootprof run` (a fork child that goes on recording after its parent
/// ended the run) keeps its lane as the grower left it, ahead of what it grew, never cut while
/// it still writes it: its records are whole. Its parent's lane, whose process ended, is cut back
/// to its chunks.
#[test]
fn a_lane_still_written_after_the_run_ends_is_not_cut_under_its_process() {
    let w = Work::new("grow-orphan");
    w.build("grow", &["grow.c"], &[], &[]);
    let dir = w.path("s");
    let go = w.path("go");
    let out = w.path("out");
    let st = Command::new(tools().join("bootprof"))
        .args(["run", "--mode", "call", "-o"])
        .arg(&dir)
        .args(["--", "./grow", "50000", "10000"])
        .arg(&go)
        .current_dir(&w.0)
        .stdout(std::fs::File::create(&out).unwrap())
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(&go, "").unwrap();
    let result = go.with_extension("result");
    for i in 0.. {
        if result.exists() {
            break;
        }
        assert!(i < 3000, "the child never wrote {}", result.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "ahead\nchild ahead\n"
    );
    assert_eq!(std::fs::read_to_string(&result).unwrap(), "kept\n");
    // The child's lane is the one of a pid other than the session's root's, made second.
    let lanes = lanes_of(&dir);
    assert_eq!(lanes.len(), 2, "{lanes:?}");
    let t = bootprof_report::read_trace(&dir).unwrap();
    let root = t.header.pid;
    let (parent, child): (Vec<&PathBuf>, Vec<&PathBuf>) = lanes.iter().partition(|p| {
        p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&format!("{root}."))
    });
    let (len, grown) = lane_lengths(parent[0]);
    assert_eq!(len, grown, "the parent's lane");
    for i in 0.. {
        let b = std::fs::read(child[0]).unwrap();
        if b[END_TSC..END_TSC + 8] != [0; 8] {
            break;
        }
        assert!(i < 3000, "the child never ended");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let t = bootprof_report::read_trace(&dir).unwrap();
    let mut args = args_by_process(&t, "tick");
    args.sort();
    assert_eq!(
        args,
        [
            (0..50_000).collect::<Vec<u64>>(),
            (50_000..150_000).collect()
        ]
    );
}
