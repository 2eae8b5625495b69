"""The programs' own tests: takes the build directories (builds.build_all) and runs, on every
variant and, for the bootprof builds, in every mode (every site disabled, every site enabled in
trap mode and in call mode): bzip2's `make test`, lz4's essential tests, jsoncpp's ctest, the
sqlite3 shell on a fixed script compared byte for byte with the plain build, and sqlite3's
testfixture on a set of test files. Hands on the results per variant and mode (pass or errors,
seconds, hits), and records a problem in the session for every failure, differing output, and
difference between trap and call mode in the hits each process saw."""
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import workloads

from .builds import cc_env, make_cflags
from .common import GRAPH_VARIANTS, MODES, VARIANTS, WORK, Failure, log, run
from .graph import balance, graph_cmd, test_mksh
from .sources import source_dir

UNPRIVILEGED = "bootprof-test"

# sqlite3's testfixture: the test files run on every testfixture build (all modes but trap), and
# the smaller set run in trap mode, where each of millions of hook hits is a SIGTRAP (~2 us).
SQLITE_TESTS = [
    "select1", "select2", "select4", "expr", "func", "insert", "update", "delete", "where",
    "join", "index", "trigger1", "view", "subquery", "window1", "json101", "trans", "pager1",
    "wal", "vacuum", "fts3aa", "rtree1",
]
# Chosen by their hits: each under about 4 million with -finstrument-functions (10 s of SIGTRAPs);
# trans.test alone hits 126 million times with -pg -mfentry, 508 million with
# -finstrument-functions (measured in call mode with BOOTPROF_STATS).
SQLITE_TRAP_TESTS = [
    "select1", "select4", "expr", "insert", "where", "join", "index", "trigger1", "view",
    "subquery", "json101", "vacuum",
]
# lz4's essential tests. With -finstrument-functions in trap mode every call of every function,
# inlined ones included, is a SIGTRAP (about 2 us each): about 15 million per MB that lz4
# compresses, so the essentials' 15-256 MB inputs (test-lz4-basic, -testmode, -contentSize,
# -dict) would take hours. That build and mode runs the essentials that work on small inputs.
LZ4_TESTS = ["test-lz4-essentials"]
LZ4_TRAP_SUBSET = [
    "test-lz4-multiple", "test-lz4-multiple-legacy", "test-lz4-frame-concatenation",
]


# jsoncpp's ctest: its unit tests (jsoncpp_test, 119 test cases), and test/runjsontests.py
# running jsontestrunner_exe on each of test/data's 63 files (parse, write, parse again, write
# again; three writer classes), once alone and once with JSONChecker's files. Every process starts
# with about 40,000 hits under -finstrument-functions (iostreams, strings), and two files take
# 16 million each (a 9.5 KB document's every character goes through a handful of functions):
# 228 million hits in all, about 8 minutes of SIGTRAPs. That build's trap mode runs the unit
# tests and the runner with JSONChecker's files, once, on test/data without the files over
# 100,000 hits (hits per file measured in call mode with BOOTPROF_STATS): about 15 million hits.
JSONCPP_CTEST = "ctest (jsoncpp_test, jsoncpp_readerwriter, jsoncpp_readerwriter_json_checker)"
JSONCPP_TRAP_LEAVE_OUT = [
    "legacy_test_large_01", "legacy_test_array_07", "fail_test_stack_limit",
    "legacy_test_array_05", "legacy_test_complex_01", "legacy_test_comment_02",
]


def mode_env(mode, stats):
    """The environment of a run in `mode`; "graph" is call mode with function exits by return
    hooking, each thread's last records kept (the caller names the session they go into, with
    BOOTPROF_SESSION: a program run without `bootprof run` that records with no session writes
    a trace file at exit and says so on stderr, which a test comparing stderr would see)."""
    env = {"BOOTPROF_STATS": str(stats)}
    if mode == "graph":
        env.update(BOOTPROF_ENABLE="*", BOOTPROF_MODE="call", BOOTPROF_GRAPH="1",
                   BOOTPROF_KEEP="last", BOOTPROF_BUFFER="4096")
    elif mode != "disabled":
        env.update(BOOTPROF_ENABLE="*", BOOTPROF_MODE=mode)
    return env


def read_stats(path):
    """Lines appended by the runtime at each process's exit (BOOTPROF_STATS)."""
    rows = []
    if Path(path).exists():
        for line in Path(path).read_text().splitlines():
            f = line.split("\t")
            if len(f) == 7:
                rows.append(dict(exe=Path(f[1]).name, sites=int(f[2]), enabled=int(f[3]),
                                 hits=int(f[4]), top=f[5], top_hits=int(f[6])))
    return rows


def stats_summary(rows):
    return dict(processes=len(rows), hits=sum(r["hits"] for r in rows),
                enabled=max((r["enabled"] for r in rows), default=0))


def test_bzip2(d, mode, logf, stats):
    for f in d.glob("sample*.rb2"):
        f.unlink()
    for f in d.glob("sample*.tst"):
        f.unlink()
    rc, secs = run(["make", "test"], cwd=d, env=mode_env(mode, stats), log_to=logf, check=False)
    return dict(passed=rc == 0, detail="make test (3 compressions, 3 decompressions, cmp)",
                seconds=round(secs, 2))


def trap_subset(prog, variant):
    """Whether the program's trap mode runs a subset of its tests in this build (lz4's
    LZ4_TRAP_SUBSET, jsoncpp's tests without JSONCPP_TRAP_LEAVE_OUT)."""
    return prog in ("lz4", "jsoncpp") and variant == "instrument"


def test_lz4(d, mode, logf, stats, variant, targets):
    cc, env = cc_env(variant)
    env = dict(env, **mode_env(mode, stats))
    cflags = make_cflags("lz4", variant)
    rc, secs = run(["make", "-C", "tests"] + targets + [f"CC={cc}", f"CFLAGS={cflags}"],
                   cwd=d, env=env, log_to=logf, check=False)
    return dict(passed=rc == 0, detail=f"make -C tests {' '.join(targets)}",
                seconds=round(secs, 2))


def jsoncpp_trap_data(d):
    """A copy of jsoncpp's test/data without JSONCPP_TRAP_LEAVE_OUT, with JSONChecker's files
    beside it where runjsontests.py looks for them (../jsonchecker); returns its data directory."""
    top = d / "trap-data"
    shutil.rmtree(top, ignore_errors=True)
    (top / "data").mkdir(parents=True)
    for f in sorted((d / "test" / "data").glob("*.json")):
        if f.stem in JSONCPP_TRAP_LEAVE_OUT:
            continue
        shutil.copy2(f, top / "data" / f.name)
        expected = f.with_suffix(".expected")
        if expected.exists():
            shutil.copy2(expected, top / "data" / expected.name)
    shutil.copytree(d / "test" / "jsonchecker", top / "jsonchecker")
    return top / "data"


def test_jsoncpp(d, mode, logf, stats, subset=False):
    """ctest in the build directory; with subset, the unit tests alone through ctest and the
    project's runner with JSONChecker's files on test/data without JSONCPP_TRAP_LEAVE_OUT."""
    env = mode_env(mode, stats)
    if not subset:
        rc, secs = run(["ctest", "--output-on-failure"], cwd=d / "build", env=env, log_to=logf,
                       check=False)
        return dict(passed=rc == 0, detail=JSONCPP_CTEST, seconds=round(secs, 2))
    rc1, s1 = run(["ctest", "--output-on-failure", "-R", "^jsoncpp_test$"], cwd=d / "build",
                  env=env, log_to=logf, check=False)
    rc2, s2 = run(["python3", "-B", d / "test" / "runjsontests.py", "--with-json-checker",
                   d / "build" / "bin" / "jsontestrunner_exe", jsoncpp_trap_data(d)], cwd=d,
                  env=env, log_to=logf, check=False)
    return dict(passed=rc1 == 0 and rc2 == 0, seconds=round(s1 + s2, 2),
                detail=f"jsoncpp_test; runjsontests.py --with-json-checker on test/data without "
                       f"its {len(JSONCPP_TRAP_LEAVE_OUT)} most-hit documents")


def sqlite_shell_output(d, mode, stats, script, scratch):
    """The shell's exit status, output and errors on the script, in one mode (graph: under
    bootprof run --graph, whose own lines on stderr are left out)."""
    db = scratch / f"shell-{d.name}-{mode}.db"
    db.unlink(missing_ok=True)
    cmd = [d / "sqlite3", "-batch", db]
    env = mode_env(mode, stats)
    if mode == "graph":
        session_dir = scratch / f"shell-{d.name}-graph.session"
        shutil.rmtree(session_dir, ignore_errors=True)
        cmd, env = graph_cmd(session_dir, cmd), {"BOOTPROF_STATS": str(stats)}
    p = subprocess.run(cmd, input=script.encode(), capture_output=True,
                       env=dict(os.environ, **env), timeout=3600)
    db.unlink(missing_ok=True)
    err = p.stderr
    if mode == "graph":
        shutil.rmtree(session_dir, ignore_errors=True)
        err = b"".join(line for line in err.splitlines(True) if not line.startswith(b"bootprof: "))
    return p.returncode, p.stdout, err


def unprivileged_prefix(scratch):
    """testfixture refuses to run as root: as root, run it as a system user of our own."""
    if os.geteuid() != 0:
        return []
    if subprocess.run(["id", "-u", UNPRIVILEGED], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        UNPRIVILEGED], check=True)
    shutil.chown(scratch, UNPRIVILEGED)
    # runuser keeps the environment (BOOTPROF_*) but for HOME, SHELL, USER and LOGNAME.
    return ["runuser", "-u", UNPRIVILEGED, "--"]


def test_testfixture(d, mode, logf, scratch, names):
    """Runs each test file in a fresh scratch directory as an unprivileged user; returns
    per-file errors/tests from the fixture's own summary line."""
    tf_dir = scratch / f"tf-{d.name}-{mode}"
    shutil.rmtree(tf_dir, ignore_errors=True)
    tf_dir.mkdir(parents=True)
    # The fixture and the tests go where the unprivileged user can read them.
    shutil.copy2(d / "testfixture", tf_dir / "testfixture")
    # test/ and ext/ side by side, as in the source tree: the extensions' tests (ext/rtree/...)
    # source ../../test/tester.tcl.
    testdir = scratch / "test"
    if not testdir.exists():
        shutil.copytree(source_dir("sqlite3") / "test", testdir)
        shutil.copytree(source_dir("sqlite3") / "ext", scratch / "ext")
        for p in [testdir, scratch / "ext"]:
            subprocess.run(["chmod", "-R", "a+rX", p], check=True)
    prefix = unprivileged_prefix(tf_dir)
    stats = tf_dir / "stats"
    session = tf_dir / "graph.session"
    if mode == "graph":
        # Every process of every test file records into one session (a lane each).
        session.mkdir(mode=0o700)
        if prefix:
            shutil.chown(session, UNPRIVILEGED)
    results = {}
    for name in names:
        work = tf_dir / name
        work.mkdir()
        if prefix:
            shutil.chown(work, UNPRIVILEGED)
        env = mode_env(mode, stats)
        if mode == "graph":
            env["BOOTPROF_SESSION"] = str(session)
        t0 = time.perf_counter()
        found = [testdir / f"{name}.test"] + sorted((scratch / "ext").glob(f"*/{name}.test"))
        test_file = next((f for f in found if f.exists()), None)
        if test_file is None:
            raise Failure(f"no {name}.test under {testdir} or {scratch / 'ext'}")
        p = subprocess.run(prefix + [str(tf_dir / "testfixture"), str(test_file)],
                           cwd=work, env=dict(os.environ, **env), capture_output=True,
                           timeout=3600)
        secs = time.perf_counter() - t0
        out = p.stdout.decode(errors="replace")
        with open(logf, "a") as lf:
            lf.write(f"\n== testfixture {name}.test ({d.name}, {mode}): exit {p.returncode}\n")
            lf.write(out[-3000:] + p.stderr.decode(errors="replace")[-2000:])
        m = re.search(r"(\d+) errors? out of (\d+) tests", out)
        failed = re.findall(r"^! (\S+) ", out, re.M)
        results[name] = dict(errors=int(m.group(1)) if m else None,
                             tests=int(m.group(2)) if m else None, exit=p.returncode,
                             failed=failed[:20], seconds=round(secs, 2))
    return results, read_stats(stats)


def check_modes(session, prog, variant, per_mode):
    """Trap and call mode run the same code: in these single-threaded programs each process
    must see the same number of hits in both."""
    trap, call = per_mode.get("trap"), per_mode.get("call")
    if not trap or not call:
        return
    key = lambda rows: sorted((r["exe"], r["hits"]) for r in rows)  # noqa: E731
    if key(trap) != key(call):
        session.problem(f"{prog} {variant}: hits differ between trap and call mode: "
                        f"{key(trap)[:5]} vs {key(call)[:5]}")
    for mode, rows in per_mode.items():
        hits = sum(r["hits"] for r in rows)
        if mode == "disabled" and hits:
            session.problem(f"{prog} {variant}: {hits} hits with every site disabled")
        if mode != "disabled" and not hits:
            session.problem(f"{prog} {variant} {mode}: no hits with every site enabled")


def modes_of(prog, variant, ci):
    """The modes a build's tests run in: disabled only for a plain build; for bootprof's,
    every site enabled in trap and in call mode, and under --graph where GRAPH_VARIANTS says.
    mksh, here for --graph, runs disabled and under --graph (and in call mode but in CI): its
    suite takes half a minute of sleeps a run."""
    graph = ["graph"] if variant in GRAPH_VARIANTS.get(prog, []) else []
    if not VARIANTS[variant]["bootprof"]:
        return ["disabled"]
    if prog == "mksh":
        return (["disabled"] if ci else ["disabled", "call"]) + graph
    return MODES + graph


def run_suite(prog, d, mode, logf, stats, variant, subset=None, scratch=None):
    """One run of the program's own tests in one mode; subset (by default: in trap mode where
    trap_subset says so) runs the smaller set."""
    if prog == "mksh":
        return test_mksh(d, mode, logf, stats, scratch)
    if subset is None:
        subset = mode == "trap" and trap_subset(prog, variant)
    if prog == "bzip2":
        return test_bzip2(d, mode, logf, stats)
    if prog == "lz4":
        return test_lz4(d, mode, logf, stats, variant, LZ4_TRAP_SUBSET if subset else LZ4_TESTS)
    return test_jsoncpp(d, mode, logf, stats, subset)


def suite(session, prog, dirs):
    """The program's own tests, on every variant and (bootprof builds) in every mode."""
    out = {}
    for v, d in dirs.items():
        out[v] = {}
        rows_by_mode = {}
        for mode in modes_of(prog, v, session.ci):
            stats = session.scratch / f"stats-{prog}-{v}-{mode}"
            logf = session.logf(f"test-{prog}-{v}-{mode}")
            logf.unlink(missing_ok=True)
            r = run_suite(prog, d, mode, logf, stats, v, scratch=session.scratch)
            rows = read_stats(stats)
            rows_by_mode[mode] = rows
            r.update(stats_summary(rows))
            out[v][mode] = r
            log(f"{prog} {v} {mode}: {'passed' if r['passed'] else 'FAILED'} "
                f"({r['seconds']} s, {r['hits']} hits in {r['processes']} processes)")
            if not r["passed"]:
                session.problem(f"{prog} {v} {mode}: tests failed (see {logf})")
        if VARIANTS[v]["bootprof"]:
            if trap_subset(prog, v):
                # Trap mode ran a subset: compare it with call mode on the same tests.
                stats = session.scratch / f"stats-{prog}-{v}-call-subset"
                run_suite(prog, d, "call", session.logf(f"test-{prog}-{v}-call-subset"), stats,
                          v, subset=True)
                rows_by_mode = dict(rows_by_mode, call=read_stats(stats))
            check_modes(session, prog, v, rows_by_mode)
    return out


def shell_compare(session, dirs):
    """The sqlite3 shell on a fixed script: output byte for byte against the plain build,
    every sqlite3 variant, every mode (trap on a smaller script)."""
    rows = 400 if session.ci else 20000
    big = workloads.sqlite_script(rows)
    small = workloads.sqlite_script(200)
    ref = {}
    for script_name, script in [("big", big), ("small", small)]:
        rc, outp, err = sqlite_shell_output(dirs["plain"], "disabled", session.scratch / "x",
                                            script, session.scratch)
        if rc != 0:
            raise Failure(f"plain sqlite3 fails the script: {err.decode(errors='replace')}")
        ref[script_name] = outp
    (WORK / "sqlite3-script.sql").write_text(big)
    (WORK / "sqlite3-script.out").write_bytes(ref["big"])

    def trap_small(v):
        # Trap mode pays a SIGTRAP (~2 us) per hit: function hooks hit tens of millions of
        # times on the big script, the named probes about a hundred thousand.
        return v in ("fentry", "fentry-lto", "instrument")

    res = {}
    for v, d in dirs.items():
        res[v] = {}
        per_mode = {}
        for mode in modes_of("sqlite3", v, session.ci):
            which = "small" if mode == "trap" and trap_small(v) else "big"
            script = big if which == "big" else small
            stats = session.scratch / f"stats-sqlite3-shell-{v}-{mode}-{which}"
            t0 = time.perf_counter()
            rc, outp, err = sqlite_shell_output(d, mode, stats, script, session.scratch)
            secs = time.perf_counter() - t0
            same = rc == 0 and outp == ref[which]
            srows = read_stats(stats)
            per_mode[mode] = srows
            res[v][mode] = dict(script=f"{which} ({rows if which == 'big' else 200} rows)",
                                identical=same, seconds=round(secs, 2), **stats_summary(srows))
            log(f"sqlite3 shell {v} {mode} ({which}): "
                f"{'identical output' if same else 'OUTPUT DIFFERS'} ({secs:.1f} s, "
                f"{res[v][mode]['hits']} hits)")
            if not same:
                (WORK / f"sqlite3-{v}-{mode}.out").write_bytes(outp + err)
                session.problem(f"sqlite3 shell {v} {mode}: output differs from the plain build "
                                f"(exit {rc}; {WORK}/sqlite3-{v}-{mode}.out)")
        if VARIANTS[v]["bootprof"] and "trap" in per_mode:
            # Compare trap and call on the same script: when trap mode ran the small one, run
            # call mode on it too.
            call_rows = per_mode["call"]
            if trap_small(v):
                stats = session.scratch / f"stats-sqlite3-shell-{v}-call-small"
                sqlite_shell_output(d, "call", stats, small, session.scratch)
                call_rows = read_stats(stats)
            check_modes(session, "sqlite3 shell", v, {"trap": per_mode["trap"], "call": call_rows})
    return res


def testfixture(session, dirs):
    """sqlite3's testfixture on SQLITE_TESTS (trap mode: SQLITE_TRAP_TESTS), every build that
    has one, every mode (and, for the -pg -mfentry build, under graph tracing: every function's
    return hooked, in call mode, each thread's last records kept); a problem for each file with
    more errors than in the plain build, and for a mode that enabled sites and saw no hit."""
    res = {}
    for v, d in dirs.items():
        if not (d / "testfixture").exists():
            continue
        modes = MODES if VARIANTS[v]["bootprof"] else ["disabled"]
        if v in GRAPH_VARIANTS.get("sqlite3", []):
            modes = modes + ["graph"]
        res[v] = {}
        for mode in modes:
            names = SQLITE_TRAP_TESTS if mode == "trap" else SQLITE_TESTS
            logf = session.logf(f"test-sqlite3-{v}-{mode}")
            logf.unlink(missing_ok=True)
            per_file, srows = test_testfixture(d, mode, logf, session.scratch, names)
            errors = sum((r["errors"] or 0) for r in per_file.values())
            tests = sum((r["tests"] or 0) for r in per_file.values())
            res[v][mode] = dict(files=per_file, errors=errors, tests=tests,
                                seconds=round(sum(r["seconds"] for r in per_file.values()), 1),
                                **stats_summary(srows))
            if mode == "graph":
                # Every thread's ENTERs and EXITs pair up (what each kept: its last records).
                g = balance(session.scratch / f"tf-{d.name}-{mode}" / "graph.session", logf)
                res[v][mode]["graph"] = g
                log(f"sqlite3 testfixture {v} graph: {g['records']:,} records kept, "
                    f"{g['paired']:,} ENTER/EXIT pairs, "
                    f"{'balanced' if g['balanced'] else 'NOT BALANCED: ' + str(g['mismatches'])}")
                if not g["balanced"]:
                    session.problem(f"sqlite3 testfixture {v} graph: ENTER/EXIT do not pair up: "
                                    f"{g['mismatches']}")
            if mode != "disabled" and not res[v][mode]["hits"]:
                session.problem(f"sqlite3 testfixture {v} {mode}: no hits with every site "
                                f"enabled")
            log(f"sqlite3 testfixture {v} {mode}: {errors} errors in {tests} tests "
                f"({len(names)} files, {res[v][mode]['seconds']} s, "
                f"{res[v][mode]['hits']} hits)")
    base = res.get("plain", {}).get("disabled", {}).get("files", {})
    for v, modes in res.items():
        for mode, r in modes.items():
            for name, f in r["files"].items():
                b = base.get(name)
                if f["errors"] is None or (b and f["errors"] > (b["errors"] or 0)):
                    session.problem(f"sqlite3 testfixture {v} {mode}: {name}.test: "
                                    f"{f['errors']} errors (plain: {b and b['errors']}), "
                                    f"failed: {' '.join(f['failed'][:5])}")
    return res
