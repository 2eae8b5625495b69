"""What every part of the real-programs run shares: the paths (repository, binaries under test,
work directory), the programs, variants and modes, the Failure exception, logging, the command
runner, and Session, the state of one run (its arguments, rounds, scratch directory, results and
problems) that the other modules take and fill in. Imports nothing of the package."""
import os
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HERE = ROOT / "tests" / "realworld"
# The binaries under test: target/release, or BOOTPROF_BIN_DIR (the integration test passes its own).
BIN = Path(os.environ.get("BOOTPROF_BIN_DIR", ROOT / "target" / "release"))
LINK = BIN / "bootprof-link"
TOOL = BIN / "bootprof"
INCLUDE = ROOT / "runtime" / "include"
WORK = Path(os.environ.get("BOOTPROF_REALWORLD_DIR", ROOT / "target" / "realworld"))
SRC = WORK / "src"
PROGRAMS = ["bzip2", "lz4", "sqlite3", "jsoncpp", "mksh"]
MODES = ["disabled", "trap", "call"]
# The -pg -mfentry builds that also run under `bootprof run --graph --mode call` (mode "graph":
# function exits by return hooking), by program.
GRAPH_VARIANTS = {"sqlite3": ["fentry"], "mksh": ["fentry"]}
# The variants --bench times: what the whole-program cost figure compares.
TIMED = ["plain", "gprof", "gprof-fentry", "fentry"]

# Inlining, cloning, and the interprocedural analyses that drop or merge calls of functions
# found to have no side effects, all off: a -pg -mfentry build and a -finstrument-functions build
# then have the same functions and the same calls (at -O2 gcc inlines and clones, and
# -finstrument-functions still hooks the functions it inlined and keeps the calls its hooks
# make impure), so their start-up charts can be compared call for call.
NO_INLINING = ["-fno-inline", "-fno-ipa-cp", "-fno-ipa-cp-clone", "-fno-ipa-sra",
               "-fno-partial-inlining", "-fno-ipa-icf", "-fno-reorder-blocks-and-partition",
               "-fno-ipa-pure-const", "-fno-ipa-modref"]
# The variants built only for the docs' comparison of the two charts (sqlite3, --docs).
DOCS_ONLY = ["fentry-noinline", "instrument-noinline"]

# The variants: compiler flags on top of the program's own, and whether bootprof-link links.
VARIANTS = {
    "plain": dict(flags=[], bootprof=False, what="plain build"),
    "gprof": dict(flags=["-pg"], bootprof=False, what="-pg, glibc's mcount and gmon.out"),
    "gprof-fentry": dict(
        flags=["-pg", "-mfentry"], bootprof=False, what="-pg -mfentry, glibc's __fentry__ and gmon.out"
    ),
    "fentry": dict(flags=["-pg", "-mfentry"], bootprof=True, what="-pg -mfentry, bootprof-link"),
    "fentry-lto": dict(
        flags=["-flto=auto", "-pg", "-mfentry"], bootprof=True,
        what="-flto=auto -pg -mfentry, bootprof-link (sites from LTO's code generation)"
    ),
    "instrument": dict(
        flags=["-finstrument-functions"], bootprof=True, what="-finstrument-functions, bootprof-link"
    ),
    "probes": dict(
        flags=[f"-I{INCLUDE}"], bootprof=True, what="named probes (bootprof.h), bootprof-link"
    ),
    "fentry-noinline": dict(
        flags=NO_INLINING + ["-pg", "-mfentry"], bootprof=True,
        what="-pg -mfentry without inlining or cloning, bootprof-link"
    ),
    "instrument-noinline": dict(
        flags=NO_INLINING + ["-finstrument-functions"], bootprof=True,
        what="-finstrument-functions without inlining or cloning, bootprof-link"
    ),
    # The second linker: lld through the compiler driver, as a CMake user would choose it.
    "fentry-lld": dict(
        flags=["-pg", "-mfentry"], link=["-fuse-ld=lld"], bootprof=True,
        what="-pg -mfentry, bootprof-link, linked by lld"
    ),
}
# The builds of jsoncpp that CI runs (the others: tests/realworld/run without --ci).
JSONCPP_CI = ["plain", "fentry", "instrument"]


class Failure(Exception):
    pass


def log(msg):
    print(f"realworld: {msg}", flush=True)


def run(cmd, cwd=None, env=None, log_to=None, check=True, stdin=None, stdout=None, timeout=None):
    """Runs cmd; its output goes to log_to (appended) unless stdout is given. Returns
    (returncode, seconds)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    t0 = time.perf_counter()
    with open(log_to, "ab") if log_to else open(os.devnull, "wb") as lf:
        if log_to:
            lf.write(f"\n$ {' '.join(map(str, cmd))}  (in {cwd})\n".encode())
            lf.flush()
        p = subprocess.run(
            [str(c) for c in cmd], cwd=cwd, env=full_env, stdin=stdin,
            stdout=stdout if stdout is not None else lf, stderr=lf, timeout=timeout,
        )
    secs = time.perf_counter() - t0
    if check and p.returncode != 0:
        raise Failure(f"{' '.join(map(str, cmd))} failed with {p.returncode} (see {log_to})")
    return p.returncode, secs


def sudo():
    return [] if os.geteuid() == 0 else ["sudo", "-n"]


class Session:
    """One run of the script: its parsed arguments, the timing rounds, a scratch directory (the
    caller removes it), the results by program (filled in as the run goes) and the problems
    found (each one makes the exit status 1)."""

    def __init__(self, args):
        self.args = args
        self.ci = args.ci
        self.bench = args.bench
        self.rounds = args.rounds if args.rounds else (1 if args.ci else 9 if args.bench else 5)
        self.results = {}
        self.problems = []
        self.scratch = Path(tempfile.mkdtemp(prefix="bootprof-realworld-"))
        os.chmod(self.scratch, 0o755)
        (WORK / "logs").mkdir(parents=True, exist_ok=True)

    def logf(self, name):
        return WORK / "logs" / f"{name}.log"

    def problem(self, msg):
        log(f"PROBLEM: {msg}")
        self.problems.append(msg)

    def variants(self, prog):
        if self.bench:
            chosen = TIMED
        elif prog == "sqlite3":
            chosen = ["plain", "fentry"] if self.ci else [
                v for v in VARIANTS
                if v != "fentry-lld" and (v not in DOCS_ONLY or self.args.docs)]
        elif prog == "jsoncpp":
            chosen = JSONCPP_CI if self.ci else [
                v for v in VARIANTS if v != "probes" and v not in DOCS_ONLY]
        elif prog == "mksh":
            # A shell whose errors, `return`, `break` and `exit` are siglongjmp: the -pg -mfentry
            # build, traced with --graph (and the plain build but in CI: its tests, which take
            # half a minute of sleeps a run, check their own outputs).
            chosen = ["fentry"] if self.ci else ["plain", "fentry"]
        else:
            chosen = [v for v in VARIANTS if v not in ["probes", "fentry-lld"] + DOCS_ONLY]
        wanted = getattr(self.args, "variants", None)
        if wanted:
            # The plain build is what every other one is compared with.
            chosen = [v for v in chosen if v == "plain" or v in wanted.split(",")]
        return chosen
