//! Boot holds: takes the WAIT/UNWAIT and HOLD/RELEASE records of a trace; hands on each wait
//! and, where one can be named, the thread to blame for it and for how long.
//!
//! A thread that waits is idle; the interesting question is what it waited *for*. The
//! annotations say it: `bpwait:<what>` / `bpunwait:<what>` around the wait,
//! `bphold:<what>` / `bprelease:<what>` around the work other threads do that the waiter needs.
//! The scheduler is not consulted. The rule, after FreeBSD's TSLOG:
//!
//! 1. Pair records per thread and per `what`: an UNWAIT ends the latest open WAIT, a RELEASE
//!    ends the latest open HOLD (so nested holds of one thing pair inside out). A WAIT never
//!    ended is shown as waiting until the end of the trace but blamed on no one; a HOLD never
//!    released blames no one.
//! 2. For a wait on `what` by thread W from WAIT to UNWAIT, the holder H is the thread other than
//!    W whose RELEASE of `what` came last before the UNWAIT: the one W was still waiting for.
//! 3. H is blamed from the latest of its HOLD, its creation (its first record in the trace: a
//!    thread cannot block anyone before it exists) and the WAIT, until its RELEASE. If that
//!    interval is empty (H released before W started waiting), no one is blamed.
//! 4. The reports show W's wait as a frame `wait:<what>`; during the blamed interval that frame
//!    is `wait:<what> (blamed on H)` and H's stacks of that time are copied on top of it, so
//!    W's timeline says what work it was really waiting for (see `timeline`). If H itself waits
//!    on someone during that time, that blame is copied too.
//!
//! Time of W's wait not covered by the blamed interval stays a plain `wait:<what>`.

use crate::model::{Blame, Holds, Model, NameId, Wait, NO_NAME};
use bootprof_format::trace::RecordKind;
use std::collections::HashMap;

/// Finds the waits and blame of `m`'s trace and records them in `m.holds`, with the frame of
/// each blame (`wait:<what> (blamed on <holder>)`) interned.
pub fn blame(m: &mut Model<'_>) {
    m.holds = find(m);
    for b in 0..m.holds.blames.len() {
        let blame = &m.holds.blames[b];
        let name = format!(
            "wait:{} (blamed on {})",
            m.text(blame.what),
            m.lanes[blame.holder].label_text()
        );
        m.holds.blames[b].frame = m.intern(&name);
    }
}

/// Finds the waits and blame of `m`'s trace (`frame` names are left to [`blame`]).
fn find(m: &Model) -> Holds {
    let records = &m.trace.records;
    let mut holds = Holds::default();
    let mut open_waits: HashMap<(usize, NameId), Vec<usize>> = HashMap::new();
    let mut open_holds: HashMap<(usize, NameId), Vec<usize>> = HashMap::new();
    // Per `what`: (RELEASE index, HOLD index, holder lane), in release order.
    let mut released: HashMap<NameId, Vec<(usize, usize, usize)>> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        let key = match r.kind {
            RecordKind::Wait | RecordKind::Unwait | RecordKind::Hold | RecordKind::Release => {
                (m.lane(r.tid), m.name(&r))
            }
            _ => continue,
        };
        match r.kind {
            RecordKind::Wait => {
                open_waits.entry(key).or_default().push(holds.waits.len());
                holds.waits.push(Wait {
                    lane: key.0,
                    what: key.1,
                    frame: m.wait_frame(&r),
                    start: i,
                    end: None,
                    blame: None,
                });
            }
            RecordKind::Unwait => {
                if let Some(w) = open_waits.get_mut(&key).and_then(|v| v.pop()) {
                    holds.waits[w].end = Some(i);
                }
            }
            RecordKind::Hold => open_holds.entry(key).or_default().push(i),
            _ => {
                if let Some(h) = open_holds.get_mut(&key).and_then(|v| v.pop()) {
                    released.entry(key.1).or_default().push((i, h, key.0));
                }
            }
        }
    }
    for w in 0..holds.waits.len() {
        let wait = holds.waits[w].clone();
        let Some(end) = wait.end else { continue };
        let Some(list) = released.get(&wait.what) else {
            continue;
        };
        let before = list.partition_point(|&(rel, _, _)| rel < end);
        let Some(&(release, hold, holder)) = list[..before]
            .iter()
            .rev()
            .find(|&&(_, _, lane)| lane != wait.lane)
        else {
            continue;
        };
        let start = wait.start.max(hold).max(m.lanes[holder].first);
        if start >= release {
            continue;
        }
        holds.waits[w].blame = Some(holds.blames.len());
        holds.blames.push(Blame {
            waiter: wait.lane,
            holder,
            what: wait.what,
            wait: wait.frame,
            hold,
            start,
            release,
            start_ns: m.ns(records.at(start).tsc),
            end_ns: m.ns(records.at(release).tsc),
            frame: NO_NAME,
        });
    }
    holds
}
