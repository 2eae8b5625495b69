"""Function-graph tracing of real programs (`bootprof run --graph --mode call`): takes a build
directory of a -pg -mfentry build (builds.build_all) and hands on the command that runs a
program under it, and the check of the session it leaves: on every thread, every EXIT closes the
innermost open ENTER, of the same function (a frame left by `longjmp` or `exit` without its EXIT,
or an EXIT put on the wrong frame, breaks that). Frames still open when a thread's records end
(a process that called `exit` from inside them, one that `exec`ed, one whose buffer was full) and
EXITs of frames a fork child inherited from its parent (entered before the fork, so on the
parent's thread) are counted, not errors. Also mksh's own test suite (check.t through check.pl:
its error handling, `return`, `break` and `exit` leave frames by `siglongjmp`), in every mode."""
import collections
import re
import subprocess

from .common import TOOL, Failure, log, run

# Records kept per process of a graph session: every process is checked on what it kept (the
# first records, as `--keep start` keeps them), and the biggest of mksh's tests run millions of
# calls, which a trace of each would only make slower to read.
GRAPH_BUFFER = "50000"

# A line of `bootprof report --format text`: an ENTER is `NAME <-CALLER`, an EXIT `EXIT NAME`.
TEXT_LINE = re.compile(r"^\s*\S+\s+\(\s*(\d+)\)\s+\[\d+\]\s+[\d.]+: (?:EXIT (\S+)$|(\S+) <-)")


def graph_cmd(session_dir, cmd):
    """cmd under `bootprof run --graph --mode call`, recording into session_dir."""
    return [TOOL, "run", "--graph", "--mode", "call", "--buffer", GRAPH_BUFFER, "-o",
            session_dir, "--"] + [str(c) for c in cmd]


def balance(session_dir, logf):
    """Pairs the ENTERs and EXITs of every thread of a graph session (see the module's text);
    hands on the counts, with up to 5 mismatches as (thread, open frame, EXIT)."""
    text = logf.with_suffix(".txt")
    with open(text, "wb") as out:
        p = subprocess.run([TOOL, "report", "--format", "text", session_dir], stdout=out,
                           stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Failure(f"bootprof report {session_dir}: {p.stderr.decode(errors='replace')}")
    stacks = collections.defaultdict(list)
    records = paired = inherited = 0
    mismatches = []
    with open(text, errors="replace") as f:
        for line in f:
            m = TEXT_LINE.match(line)
            if not m:
                continue
            records += 1
            stack = stacks[m.group(1)]
            if m.group(3):
                stack.append(m.group(3))
            elif not stack:
                inherited += 1
            elif stack.pop() == m.group(2):
                paired += 1
            elif len(mismatches) < 5:
                mismatches.append((m.group(1), stack[-1] if stack else "", m.group(2)))
    text.unlink()
    if records == 0:
        raise Failure(f"{session_dir}: no ENTER or EXIT recorded")
    open_frames = sum(len(s) for s in stacks.values())
    return dict(records=records, threads=len(stacks), paired=paired, inherited=inherited,
                open_at_end=open_frames, mismatches=mismatches,
                balanced=not mismatches and 2 * paired + inherited + open_frames == records)


def test_mksh(d, mode, logf, stats, scratch):
    """mksh's test suite as Debian runs it (no controlling terminal here), in one mode (graph:
    under bootprof run --graph, then the session's balance)."""
    env = {"BOOTPROF_STATS": str(stats)}
    if mode in ("trap", "call"):
        env.update(BOOTPROF_ENABLE="*", BOOTPROF_MODE=mode)
    cmd = ["./test.sh", "-U", "C.UTF-8", "-C", "regress:no-ctty"]
    session_dir = scratch / f"mksh-{d.name}-{mode}.session"
    if mode == "graph":
        subprocess.run(["rm", "-rf", session_dir], check=True)
        cmd = graph_cmd(session_dir, cmd)
    rc, secs = run(cmd, cwd=d, env=env, log_to=logf, check=False)
    tail = logf.read_text(errors="replace")[-4000:]
    m = re.search(r"Total failed: (\d+)", tail)
    r = dict(passed=rc == 0 and m is not None and m.group(1) == "0", seconds=round(secs, 2),
             detail="./test.sh -U C.UTF-8 -C regress:no-ctty (check.t)")
    if mode == "graph":
        b = balance(session_dir, logf)
        subprocess.run(["rm", "-rf", session_dir], check=True)
        r["graph"] = b
        log(f"mksh {d.name} graph: {b['records']:,} records on {b['threads']} threads, "
            f"{b['paired']:,} ENTER/EXIT pairs, {b['open_at_end']} frames open at the end, "
            f"{b['inherited']} EXITs of frames entered before a fork; "
            f"{'balanced' if b['balanced'] else 'NOT BALANCED: ' + str(b['mismatches'])}")
        r["passed"] = r["passed"] and b["balanced"]
    return r
