"""Attaching to a real program while it works: the -pg -mfentry sqlite3 shell reads the fixed
SQL script from a pipe that is fed a line at a time over four seconds; `bootprof attach PID -e '*' --mode call
--duration 1` enables every site, records a second of its functions into a session and detaches;
`bootprof list --pid` then checks every site holds its NOP again while the shell still runs.
Judged by: the shell's output identical to the plain build's (an untouched run), the attach and
the list exiting 0, the session holding records, and the list's verdict."""
import re
import shutil
import subprocess
import threading
import time

from .common import TOOL, log

# How long feeding the script takes (the shell is still running, waiting for input, when the
# one-second attach has ended and the list looks).
FEED_SECONDS = 4.0


def feed(stdin, script):
    """Writes script to stdin a line at a time, spread evenly over FEED_SECONDS, then closes
    it."""
    lines = script.splitlines(True)
    try:
        for line in lines:
            stdin.write(line.encode())
            stdin.flush()
            time.sleep(FEED_SECONDS / len(lines))
    finally:
        stdin.close()


def attach_shell(session, d, script, expected):
    """The shell of build directory d on script (see the module's text); expected is the plain
    build's output. Returns the result (identical, records, list verdict, seconds) and records a
    problem for anything wrong."""
    scratch = session.scratch
    db = scratch / f"attach-{d.name}.db"
    db.unlink(missing_ok=True)
    out_dir = scratch / f"attach-{d.name}.session"
    shutil.rmtree(out_dir, ignore_errors=True)
    logf = session.logf(f"attach-sqlite3-{d.name}")
    t0 = time.perf_counter()
    shell = subprocess.Popen([d / "sqlite3", "-batch", db], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    feeder = threading.Thread(target=feed, args=(shell.stdin, script))
    feeder.start()
    output = {}
    reader = threading.Thread(target=lambda: output.update(out=shell.stdout.read()))
    reader.start()
    # Let the runtime's constructors run before the knock (a knock before them is lost, and
    # bootprof attach would wait for a listener that never starts).
    time.sleep(0.2)
    attach = subprocess.run([TOOL, "attach", str(shell.pid), "-e", "*", "--mode", "call",
                             "--duration", "1", "--keep", "all", "-o", out_dir],
                            capture_output=True, timeout=120)
    listing = subprocess.run([TOOL, "list", "--pid", str(shell.pid)], capture_output=True,
                             timeout=60)
    still_running = shell.poll() is None
    feeder.join()
    reader.join()
    err = shell.stderr.read()
    rc = shell.wait()
    secs = time.perf_counter() - t0
    summary = subprocess.run([TOOL, "report", "--format", "summary", out_dir],
                             capture_output=True, timeout=600)
    with open(logf, "wb") as f:
        for what, p in [("attach", attach), ("list --pid", listing), ("report", summary)]:
            f.write(f"$ bootprof {what}: exit {p.returncode}\n".encode() + p.stdout[-4000:]
                    + p.stderr[-4000:])
    m = re.search(rb"(\d+) records \((\d+) dropped\)", summary.stdout)
    records = int(m.group(1)) if m else 0
    last = listing.stdout.decode(errors="replace").strip().splitlines()[-1:] or [""]
    nops_back = listing.returncode == 0 and "every disabled site holds its NOP" in last[0] \
        and ", 0 enabled;" in last[0]
    identical = rc == 0 and output.get("out") == expected
    r = dict(identical=identical, attach_ok=attach.returncode == 0, records=records,
             nops_back=nops_back, running_at_list=still_running, seconds=round(secs, 2),
             list_verdict=last[0])
    log(f"sqlite3 shell {d.name} attached for 1 s: "
        f"{'identical output' if identical else 'OUTPUT DIFFERS'}, {records:,} records, "
        f"after detach: {last[0]} ({secs:.1f} s)")
    problems = []
    if not identical:
        problems.append(f"output differs from the plain build's (exit {rc}: "
                        f"{err.decode(errors='replace')[-500:]})")
    if attach.returncode != 0:
        problems.append(f"bootprof attach failed: {attach.stderr.decode(errors='replace')}")
    if not records:
        problems.append("the session holds no records")
    if not still_running:
        problems.append("the shell ended before the list after detach (feed it longer)")
    if not nops_back:
        problems.append(f"after detach, bootprof list --pid says: {last[0]}")
    for p in problems:
        session.problem(f"sqlite3 shell {d.name} attached: {p} (see {logf})")
    shutil.rmtree(out_dir, ignore_errors=True)
    db.unlink(missing_ok=True)
    return r
