"""Timing: takes the build directories (builds.build_all) and hands on what each build costs on
a fixed workload (tests/realworld/workloads.py, every site disabled): wall and CPU seconds over
interleaved rounds, pinned to one CPU, with each build's paired ratio to the plain build;
exact instruction counts under callgrind; and the time of the program's final link, gcc
against bootprof-link."""
import os
import re
import shutil
import signal
import statistics
import subprocess
import time

import workloads

from .builds import cc_env, executable, make_cflags, sqlite_link_cmd
from .common import VARIANTS, log, run

# Timed runs go to one CPU (the second, where there are two), so that they do not wander.
PIN = ["taskset", "-c", "1"] if shutil.which("taskset") and (os.cpu_count() or 1) >= 2 else []


def timed(cmd, cwd, stdin_path=None, stdout_path=None, env=None):
    """Wall and CPU (user+sys) seconds of one run of cmd, pinned to one CPU."""
    before = os.times()
    t0 = time.perf_counter()
    with open(stdin_path, "rb") if stdin_path else open(os.devnull, "rb") as i, \
            open(stdout_path, "wb") if stdout_path else open(os.devnull, "wb") as o:
        subprocess.run(PIN + [str(c) for c in cmd], cwd=cwd, stdin=i, stdout=o, check=True,
                       env=dict(os.environ, **(env or {})))
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system
                                                          - before.children_system)
    return wall, cpu


def interleave(variants, one_run, rounds):
    """Runs one_run(variant) for every variant, round after round, the order rotated by one each
    round (A B C, B C A, C A B, ...) so that no variant always runs first or after the same
    one; returns, per variant, the median and the spread of wall and CPU seconds, and the median
    over rounds of its ratio to the first variant of the same round (paired: a slow spell of the
    machine that spans a round cancels out)."""
    samples = {v: [] for v in variants}
    for r in range(rounds + 1):
        k = r % len(variants)
        for v in variants[k:] + variants[:k]:
            s = one_run(v)
            if r > 0:  # round 0 warms the page cache and is not counted
                samples[v].append(s)
    out = {}
    base = samples[variants[0]]
    for v, ss in samples.items():
        walls = [w for w, _ in ss]
        cpus = [c for _, c in ss]
        out[v] = dict(wall=statistics.median(walls), cpu=statistics.median(cpus),
                      wall_min=min(walls), wall_max=max(walls), n=len(ss),
                      ratio=statistics.median(w / b for (w, _), (b, _) in zip(ss, base)),
                      cpu_ratio=statistics.median(c / b if b else 1.0
                                                  for (_, c), (_, b) in zip(ss, base)))
    return out


def link_times(prog, dirs, rounds, logf):
    """The program's final link, plain (gcc) vs bootprof-link, interleaved; for sqlite3's LTO
    build also its LTO link, plain (gcc, the same objects) vs bootprof-link."""
    def relink(variant):
        d = dirs[variant]
        cc, env = cc_env(variant)
        env = dict(env, BOOTPROF_LINK_FLAGS="")
        executable(prog, d).unlink()
        if prog == "bzip2":
            cmd, cwd = ["make", "bzip2", f"CC={cc}", f"CFLAGS={make_cflags(prog, variant)}"], d
        elif prog == "lz4":
            cflags = make_cflags(prog, variant)
            cmd, cwd = ["make", "-C", "programs", "lz4", f"CC={cc}", f"CFLAGS={cflags}"], d
        elif prog == "jsoncpp":
            # The runner's link alone, through CMake's rule (and its launcher).
            cmd, cwd = ["make", "-C", "build", "jsontestrunner_exe/fast"], d
        else:
            cmd, cwd = sqlite_link_cmd(variant), d
        t0 = time.perf_counter()
        run(cmd, cwd=cwd, env=env, log_to=logf)
        return time.perf_counter() - t0, 0.0
    out = {}
    if "plain" in dirs and "fentry" in dirs:
        res = interleave(["plain", "fentry"], relink, rounds)
        out.update({v: round(r["wall"] * 1000, 1) for v, r in res.items()})
    if prog == "sqlite3" and "fentry-lto" in dirs:
        d = dirs["fentry-lto"]

        def lto_link(which):
            cmd = sqlite_link_cmd("fentry-lto")
            if which == "plain-lto":
                # The same LTO link without bootprof (glibc's hooks), to another file.
                cmd = ["gcc"] + cmd[1:cmd.index("-o") + 1] + ["sqlite3.plain-lto"] \
                    + cmd[cmd.index("-o") + 2:]
            else:
                executable(prog, d).unlink()
            t0 = time.perf_counter()
            run(cmd, cwd=d, env=dict(cc_env("fentry-lto")[1], BOOTPROF_LINK_FLAGS=""),
                log_to=logf)
            return time.perf_counter() - t0, 0.0
        res = interleave(["plain-lto", "fentry-lto"], lto_link, rounds)
        out.update({v: round(r["wall"] * 1000, 1) for v, r in res.items()})
        out["lto-ratio"] = round(res["fentry-lto"]["ratio"], 2)
    return out


def json_input(scratch, size):
    """A generated JSON document of about size bytes in scratch (the runner writes its outputs
    beside it)."""
    doc = scratch / f"doc-{size}.json"
    if not doc.exists():
        doc.write_text(workloads.json_document(size))
    return doc


def runtimes(session, prog, dirs):
    """Run time of a fixed workload: plain vs glibc -pg vs bootprof (-pg -mfentry, every site
    disabled), interleaved rounds."""
    vs = [v for v in VARIANTS if v in dirs]
    scratch = session.scratch / f"time-{prog}"
    scratch.mkdir(exist_ok=True)
    size = (2 if session.ci else 24) << 20
    inp = scratch / "corpus.txt"
    if prog in ("bzip2", "lz4") and not inp.exists():
        inp.write_bytes(workloads.corpus(size if prog == "bzip2" else size * 4))
    if prog == "bzip2":
        def one(v):
            b = executable(prog, dirs[v])
            w1, c1 = timed([b, "-9", "-c"], scratch, inp, scratch / "c.bz2")
            w2, c2 = timed([b, "-d", "-c"], scratch, scratch / "c.bz2")
            return w1 + w2, c1 + c2
        what = f"bzip2 -9 then -d of {size >> 20} MiB of generated text"
    elif prog == "lz4":
        def one(v):
            b = executable(prog, dirs[v])
            w1, c1 = timed([b, "-9", "-c"], scratch, inp, scratch / "c.lz4")
            w2, c2 = timed([b, "-d", "-c"], scratch, scratch / "c.lz4")
            w3, c3 = timed([b, "-1", "-c"], scratch, inp)
            return w1 + w2 + w3, c1 + c2 + c3
        what = f"lz4 -9, -d, -1 of {size * 4 >> 20} MiB of generated text"
    elif prog == "jsoncpp":
        mib = 1 if session.ci else 8
        doc = json_input(scratch, mib << 20)

        def one(v):
            return timed([executable(prog, dirs[v]), doc], scratch)
        what = f"jsontestrunner_exe on {mib} MiB of generated JSON (parse, write, parse, write)"
    else:
        rows = 2000 if session.ci else 100000
        script = scratch / "bench.sql"
        script.write_text(workloads.sqlite_script(rows))

        def one(v):
            db = scratch / "bench.db"
            db.unlink(missing_ok=True)
            return timed([executable(prog, dirs[v]), "-batch", db], scratch, script)
        what = f"sqlite3 shell, the fixed script with {rows} rows, on a file database"
    assert vs[0] == "plain"
    res = interleave(vs, one, session.rounds)
    log(f"{prog} run time ({what}): " + ", ".join(
        f"{v} {r['wall']:.3f} s ({r['ratio']:.3f}x)" for v, r in res.items()))
    return dict(what=what, rounds=session.rounds, results=res)


def callgrind(session, prog, dirs):
    """Exact instruction counts of a small fixed workload under callgrind, every build (hooks
    disabled): what the sites cost without timing noise or code-layout luck. Returns the
    workload's description and {variant: {instructions, ratio to plain}}."""
    if not shutil.which("valgrind"):
        return None
    scratch = session.scratch / f"cg-{prog}"
    scratch.mkdir(exist_ok=True)
    if prog == "sqlite3":
        inp = scratch / "cg.sql"
        inp.write_text(workloads.sqlite_script(2000))
        what = "sqlite3 shell, the fixed script with 2000 rows"
    elif prog == "jsoncpp":
        inp = scratch / "empty"
        inp.write_bytes(b"")
        doc = json_input(scratch, 256 << 10)
        what = "jsontestrunner_exe on 256 KiB of generated JSON"
    else:
        inp = scratch / "corpus.txt"
        inp.write_bytes(workloads.corpus(1 << 20))
        what = f"{prog} -9 of 1 MiB of generated text"
    out = {}
    for v in [v for v in VARIANTS if v in dirs]:
        if prog == "sqlite3":
            db = scratch / "cg.db"
            db.unlink(missing_ok=True)
            cmd = [executable(prog, dirs[v]), "-batch", db]
        elif prog == "jsoncpp":
            cmd = [executable(prog, dirs[v]), doc]
        else:
            cmd = [executable(prog, dirs[v]), "-9", "-c"]
        with open(inp, "rb") as i:
            p = subprocess.run(["valgrind", "--tool=callgrind",
                                f"--callgrind-out-file={scratch / ('callgrind.' + v)}"] + cmd,
                               stdin=i, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               cwd=scratch)
        m = re.search(r"Collected : (\d+)", p.stderr.decode(errors="replace"))
        if p.returncode == 0 and m:
            out[v] = int(m.group(1))
        elif p.returncode < 0 or p.returncode > 128:
            # glibc's -pg runtime arms a SIGPROF timer, which kills the program under valgrind
            # before it ends: a count up to there is no count of the workload.
            sig = -p.returncode if p.returncode < 0 else p.returncode - 128
            out[v] = f"killed by {signal.Signals(sig).name} under valgrind"
        else:
            out[v] = f"valgrind exited {p.returncode}"
    base = out.get("plain") if isinstance(out.get("plain"), int) else None
    return dict(what=what, results={
        v: dict(instructions=n, ratio=round(n / base, 4) if base else None)
        if isinstance(n, int) else dict(instructions=None, why=n)
        for v, n in out.items()})
