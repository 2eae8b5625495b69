"""Real programs, end to end: bzip2, lz4, sqlite3, jsoncpp (C++, built with CMake) and mksh (a
shell whose error handling is siglongjmp) from Debian's source packages, built plain, with glibc's
-pg, and through bootprof-link (-pg -mfentry, -finstrument-functions, sqlite3 with named probes
from bootprof.h, jsoncpp also linked by lld), then judged by their own tests with every probe
disabled and with every site enabled in trap mode and in call mode; the -pg -mfentry builds of
sqlite3 and mksh also under `bootprof run --graph --mode call` (function exits by return hooking;
sqlite3's testfixture too, outside --ci;
mksh's sessions checked for ENTERs and EXITs that pair up on every thread); and the -pg -mfentry
sqlite3 shell attached to by `bootprof attach` while it reads its script from a pipe.

usage: tests/realworld/run [--ci | --bench] [--only bzip2,lz4,sqlite3,jsoncpp,mksh] [--variants V,...]
                           [--rounds N] [--fetch-only] [--no-build] [--update-benchmarks] [--docs]

  --ci                 the subset CI runs: bzip2 and lz4 end to end (every variant and mode), the
                       sqlite3 shell script compared byte for byte (plain and -pg -mfentry, every
                       mode, and -pg -mfentry under --graph and attached to while it
                       runs), jsoncpp's ctest (plain, -pg -mfentry
                       and -finstrument-functions, every mode), mksh's check.t (-pg -mfentry,
                       disabled and under --graph); small workloads, one timing round
  --bench              whole-program cost only (what disabled sites cost a real program's run):
                       build plain, -pg, -pg -mfentry with glibc's hooks, and -pg -mfentry
                       through bootprof-link (sites disabled), time a fixed workload in
                       interleaved rounds (default 9), and count its instructions under
                       callgrind; no tests
  --only P,...         these programs only (mksh: its tests only, no timing)
  --variants V,...     these builds only (and the plain one): plain, gprof, gprof-fentry, fentry,
                       fentry-lto, instrument, probes (sqlite3), fentry-lld (jsoncpp)
  --rounds N           interleaved timing rounds (default 5, links 3; --ci: 1; --bench: 9)
  --fetch-only         fetch and unpack the sources, then stop (tests/setup calls this)
  --no-build           use the binaries as they are (no cargo build first; also when
                       BOOTPROF_NO_BUILD is set)
  --update-benchmarks  write the results table into BENCHMARKS.md (the real-programs section, or
                       with --bench the whole-program section)
  --docs               remake docs/sqlite3-startup.svg/.png and docs/sqlite3-points.txt (with
                       sqlite3), docs/jsoncpp-startup.svg/.png (with jsoncpp; `--only jsoncpp
                       --variants instrument --docs` makes only that chart)

The binaries under test are target/release's, or BOOTPROF_BIN_DIR's.
Sources come from `apt-get source` (a deb-src entry for the running release is added when none
exists; as root, or through sudo). Work happens in target/realworld (BOOTPROF_REALWORLD_DIR).
Results: target/realworld/results.json and results.md. Exit status 1 when a bootprof build fails
a test the plain build passes, prints different output, leaves a site without its NOP, or hits
differently in trap and call mode.

This module takes the command line and runs the steps in order: sources (fetch), builds, then
checks and timing (or with --bench timing only), docs, and report; it writes the results and
returns the exit status (2 on an error that stops the run).
"""
import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time

from .attach import attach_shell
from .bench import callgrind, link_times, runtimes
from .builds import build_all, site_report
from .checks import shell_compare, suite, testfixture
from .common import BIN, LINK, PROGRAMS, ROOT, TOOL, VARIANTS, WORK, Failure, Session, log
from .docs import make_docs, make_jsoncpp_docs
from .report import report, update_benchmarks
from .sources import fetch


def bench_programs(session, progs, dirs):
    """--bench: run times and callgrind counts only (of the programs with a timed workload)."""
    for prog in progs:
        if prog == "mksh":
            continue
        r = session.results.setdefault(prog, {})
        r["runtime"] = runtimes(session, prog, dirs[prog])
        r["callgrind"] = callgrind(session, prog, dirs[prog])


def check_program(session, prog, dirs):
    """One program's sites, own tests (or shell and testfixture), link times, run times and
    (but for --ci) callgrind counts, into the session's results."""
    r = session.results.setdefault(prog, {})
    r["sites"] = {}
    for v, d in dirs.items():
        if VARIANTS[v]["bootprof"]:
            r["sites"][v] = site_report(prog, d, session.logf(f"build-{prog}-{v}"))
            log(f"{prog} {v}: {r['sites'][v]['total']} sites, all hold their NOP; "
                f"{len(r['sites'][v]['refused'])} probe references left alone")
    if prog in ("bzip2", "lz4", "jsoncpp", "mksh"):
        r["tests"] = suite(session, prog, dirs)
    else:
        r["shell"] = shell_compare(session, dirs)
        if "fentry" in dirs:
            r["attach"] = attach_shell(session, dirs["fentry"],
                                       (WORK / "sqlite3-script.sql").read_text(),
                                       (WORK / "sqlite3-script.out").read_bytes())
        if not session.ci:
            r["testfixture"] = testfixture(session, dirs)
    if prog == "mksh":
        # Here for its error handling under --graph: no workload is timed.
        return
    link_rounds = session.args.rounds or (1 if session.ci else 3)
    r["link_ms"] = link_times(prog, dirs, link_rounds, session.logf(f"link-{prog}"))
    r["runtime"] = runtimes(session, prog, dirs)
    if not session.ci:
        r["callgrind"] = callgrind(session, prog, dirs)


def run_programs(session, progs):
    """Builds the programs, then checks and times them (or with --bench times them only), then
    with --docs remakes the docs/ figures; returns the build directories."""
    dirs = build_all(session, progs)
    if session.bench:
        bench_programs(session, progs, dirs)
        return dirs
    for prog in progs:
        check_program(session, prog, dirs[prog])
    if session.args.docs and "sqlite3" in progs:
        make_docs(session, dirs["sqlite3"])
    if session.args.docs and "jsoncpp" in progs:
        make_jsoncpp_docs(session, dirs["jsoncpp"])
    return dirs


def parse_args():
    """The arguments and the programs they name (exits with the usage on an unknown one)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ci", action="store_true")
    ap.add_argument("--only", default=",".join(PROGRAMS))
    ap.add_argument("--variants", default="")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--fetch-only", action="store_true")
    ap.add_argument("--update-benchmarks", action="store_true")
    ap.add_argument("--docs", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    progs = [p for p in args.only.split(",") if p]
    for p in progs:
        if p not in PROGRAMS:
            ap.error(f"unknown program {p} (known: {', '.join(PROGRAMS)})")
    return args, progs


def prepare_binaries(args):
    """cargo build of the binaries under test (unless --no-build or BOOTPROF_NO_BUILD), then
    makes sure they are there."""
    if not (args.no_build or os.environ.get("BOOTPROF_NO_BUILD")):
        subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path",
                        ROOT / "Cargo.toml", "-p", "bootprof"], check=True)
    for f in (LINK, TOOL):
        if not f.is_file():
            raise Failure(f"{f} not found (build with cargo build --release)")


def write_results(session, args, t0):
    """results.json, results.md, the table on stdout (and with --update-benchmarks in
    BENCHMARKS.md), and the problems; returns the exit status."""
    table = report(session.results, args.ci)
    session.results["problems"] = session.problems
    (WORK / "results.json").write_text(json.dumps(session.results, indent=1))
    (WORK / "results.md").write_text(table)
    print()
    print(table)
    if args.update_benchmarks:
        update_benchmarks(table, "tests/realworld/run " + " ".join(sys.argv[1:]),
                          "wholeprogram" if args.bench else "realworld")
    log(f"done in {time.perf_counter() - t0:.0f} s; {len(session.problems)} problems")
    for p in session.problems:
        print(f"  - {p}")
    return 1 if session.problems else 0


def main():
    args, progs = parse_args()
    # One run at a time per work directory (CI's cargo test may start the real-programs test and
    # the benchmarks' --quick check together, and both build here).
    WORK.mkdir(parents=True, exist_ok=True)
    lock = open(WORK / ".lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        fetch(progs)
        if args.fetch_only:
            return 0
        prepare_binaries(args)
        session = Session(args)
        t0 = time.perf_counter()
        try:
            run_programs(session, progs)
        finally:
            shutil.rmtree(session.scratch, ignore_errors=True)
        return write_results(session, args, t0)
    except Failure as e:
        print(f"realworld: error: {e}", file=sys.stderr)
        return 2
