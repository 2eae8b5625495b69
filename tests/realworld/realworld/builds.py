"""The builds: takes the unpacked sources (sources.source_dir) and a variant of VARIANTS, and
hands on a build directory per program and variant under WORK/build, compiled with the
program's own flags plus the variant's, through bootprof-link for the bootprof variants (as CC
for the Makefiles, as CMake's linker launcher for jsoncpp). A
build is kept while its stamp (flags, bootprof-link with the runtime it carries, and the header)
is unchanged. Also
where each program's binaries are in a build, and the sites bootprof-link put in them."""
import json
import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .common import (BIN, DOCS_ONLY, HERE, INCLUDE, LINK, TOOL, VARIANTS, WORK, Failure, log,
                     run)
from .sources import source_dir


def cc_env(variant):
    """CC for a variant: bootprof-link as a drop-in driver (the real one in BOOTPROF_CC), as a
    Makefile user would set it; --stats/--verbose print the sites into the build log."""
    if VARIANTS[variant]["bootprof"]:
        return str(LINK), {"BOOTPROF_CC": "gcc", "BOOTPROF_LINK_FLAGS": "--stats --verbose"}
    return "gcc", {}


def stamp_of(prog, variant, extra=""):
    parts = [prog, variant, " ".join(VARIANTS[variant]["flags"]), extra]
    for f in (LINK, INCLUDE / "bootprof.h"):
        st = f.stat()
        parts.append(f"{f.name}:{st.st_size}:{int(st.st_mtime)}")
    return "\n".join(parts)


def fresh_tree(src, dest, stamp):
    """True when dest already holds a build with this stamp; else a fresh copy of src."""
    sf = dest / ".bootprof-stamp"
    if sf.exists() and sf.read_text() == stamp:
        return True
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, symlinks=True)
    return False


def make_cflags(prog, variant):
    """CFLAGS as the program's Makefile sets them, plus the variant's flags."""
    own = {"bzip2": ["-Wall", "-Winline", "-O2", "-g", "-D_FILE_OFFSET_BITS=64"],
           "lz4": ["-O2", "-g"], "jsoncpp": ["-O2", "-g"]}[prog]
    return " ".join(own + VARIANTS[variant]["flags"])


def make_ldflags(variant):
    """LDFLAGS for a variant: its flags when it builds with LTO, whose code generation runs at
    link time and reads -pg there (as Debian's LDFLAGS carry -flto=auto), else none."""
    flags = VARIANTS[variant]["flags"]
    return " ".join(flags) if any(f.startswith("-flto") for f in flags) else ""


def build_bzip2(variant, logf):
    d = WORK / "build" / f"bzip2-{variant}"
    stamp = stamp_of("bzip2", variant)
    if fresh_tree(source_dir("bzip2"), d, stamp):
        return d
    cc, env = cc_env(variant)
    cflags = make_cflags("bzip2", variant)
    run(["make", "-j2", "bzip2", f"CC={cc}", f"CFLAGS={cflags}",
         f"LDFLAGS={make_ldflags(variant)}"], cwd=d, env=env, log_to=logf)
    (d / ".bootprof-stamp").write_text(stamp)
    return d


def build_lz4(variant, logf):
    d = WORK / "build" / f"lz4-{variant}"
    stamp = stamp_of("lz4", variant)
    if fresh_tree(source_dir("lz4"), d, stamp):
        return d
    cc, env = cc_env(variant)
    cflags = make_cflags("lz4", variant)
    run(["make", "-j2", "-C", "lib", "liblz4.a", f"CC={cc}", f"CFLAGS={cflags}"], cwd=d, env=env,
        log_to=logf)
    run(["make", "-j2", "-C", "programs", "lz4", f"CC={cc}", f"CFLAGS={cflags}"], cwd=d, env=env,
        log_to=logf)
    (d / ".bootprof-stamp").write_text(stamp)
    return d


# jsoncpp as Debian configures it (debian/rules: the shared library only), without the unit
# tests' run after each build (ours run them, in every mode).
JSONCPP_OPTIONS = ["-DBUILD_STATIC_LIBS=OFF", "-DBUILD_OBJECT_LIBS=OFF",
                   "-DJSONCPP_WITH_POST_BUILD_UNITTEST=OFF"]


def jsoncpp_configure(variant):
    """The cmake command that configures jsoncpp's build directory for a variant: the flags in
    CMAKE_CXX_FLAGS (CMake passes them to the links too, as -flto needs), and for the bootprof
    variants bootprof-link as CMake's linker launcher, which CMake runs as `bootprof-link
    /usr/bin/c++ ARGS...` for the shared library and both executables."""
    cmd = ["cmake", "-G", "Unix Makefiles", "-S", ".", "-B", "build", "-DCMAKE_BUILD_TYPE=None",
           "-DCMAKE_CXX_COMPILER=g++", f"-DCMAKE_CXX_FLAGS={make_cflags('jsoncpp', variant)}"]
    link = " ".join(VARIANTS[variant].get("link", []))
    if link:
        cmd += [f"-DCMAKE_EXE_LINKER_FLAGS={link}", f"-DCMAKE_SHARED_LINKER_FLAGS={link}"]
    if VARIANTS[variant]["bootprof"]:
        cmd.append(f"-DCMAKE_CXX_LINKER_LAUNCHER={LINK}")
    return cmd + JSONCPP_OPTIONS


def check_launched(d, logf):
    """Every link of jsoncpp's build ran through the launcher: the verbose build log shows each
    output's link command starting with bootprof-link (a bootprof list of a binary linked
    without it would find no table, but this says why)."""
    lines = [line for line in Path(logf).read_text(errors="replace").splitlines()
             if line.startswith(f"{LINK} ")]
    for b in jsoncpp_binaries(d):
        rel = f"{b.parent.name}/{b.name}"
        if not any(f"-o ../../{rel} " in line for line in lines):
            raise Failure(f"{b}: not linked through the launcher {LINK} (see {logf})")


def build_jsoncpp(variant, logf):
    d = WORK / "build" / f"jsoncpp-{variant}"
    stamp = stamp_of("jsoncpp", variant, " ".join(jsoncpp_configure(variant)))
    if fresh_tree(source_dir("jsoncpp"), d, stamp):
        return d
    env = {"BOOTPROF_LINK_FLAGS": "--stats --verbose"} if VARIANTS[variant]["bootprof"] else {}
    run(jsoncpp_configure(variant), cwd=d, env=env, log_to=logf)
    run(["cmake", "--build", "build", "-j2", "--verbose"], cwd=d, env=env, log_to=logf)
    if VARIANTS[variant]["bootprof"]:
        check_launched(d, logf)
    (d / ".bootprof-stamp").write_text(stamp)
    return d


# mksh's test harness runs each test with a minimal environment of its own: bootprof's variables
# (the session, the mode, --graph) are to reach the shells it starts.
MKSH_KEEP_ENV = ("$new_env{'ENV'} = '/nonexistant';\n",
                 "$new_env{'ENV'} = '/nonexistant';\n"
                 "$new_env{$_} = $ENV{$_} foreach grep /^BOOTPROF_/, keys %ENV;\n")


def build_mksh(variant, logf):
    d = WORK / "build" / f"mksh-{variant}"
    stamp = stamp_of("mksh", variant, MKSH_KEEP_ENV[1])
    if fresh_tree(source_dir("mksh"), d, stamp):
        return d
    check = d / "check.pl"
    text = check.read_text()
    if MKSH_KEEP_ENV[0] not in text:
        raise Failure(f"{check}: no line {MKSH_KEEP_ENV[0].strip()!r} to keep BOOTPROF_* after")
    check.write_text(text.replace(MKSH_KEEP_ENV[0], MKSH_KEEP_ENV[1], 1))
    cc, env = cc_env(variant)
    # CPPFLAGS as Debian's build (debian/meat) sets them; with Debian's patches Build.sh wants
    # MKSH_BUILDMEAT.
    env = dict(env, CC=cc, CFLAGS=" ".join(["-O2", "-g"] + VARIANTS[variant]["flags"]),
               CPPFLAGS="-DMKSH_BUILDMEAT -DMKSH_EARLY_LOCALE_TRACKING")
    run(["sh", "Build.sh", "-r"], cwd=d, env=env, log_to=logf)
    (d / ".bootprof-stamp").write_text(stamp)
    return d


def tcl_config():
    for g in ["/usr/lib/tcl8.*/tclConfig.sh", "/usr/lib/x86_64-linux-gnu/tcl8.*/tclConfig.sh"]:
        hits = sorted(Path("/").glob(g.lstrip("/")))
        if hits:
            return hits[-1].parent
    raise Failure("tclConfig.sh not found (apt-get install tcl-dev)")


def sqlite_generated(flavour, logf):
    """A configured sqlite3 tree with the amalgamation (sqlite3.c, shell.c) made by its own
    build (needs tclsh), from the Debian sources, or from them with the probes patch."""
    d = WORK / "build" / f"sqlite3-gen-{flavour}"
    patch = HERE / "sqlite3-probes.patch"
    stamp = f"sqlite3-gen {flavour} fts3 fts4 rtree " + (patch.read_text() if flavour == "probes"
                                                         else "")
    sf = d / ".bootprof-stamp"
    if sf.exists() and sf.read_text() == stamp:
        return d
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(source_dir("sqlite3"), d / "src", symlinks=True)
    if flavour == "probes":
        with open(patch, "rb") as pf:
            p = subprocess.run(["patch", "-p1", "--no-backup-if-mismatch"], cwd=d / "src",
                               stdin=pf, capture_output=True)
        if p.returncode != 0:
            raise Failure(f"{patch} does not apply to {source_dir('sqlite3').name}: "
                          f"{p.stdout.decode(errors='replace')}")
    (d / "bld").mkdir()
    # FTS3/4 and R-Tree in the library (and so in testfixture) for fts3aa.test and rtree1.test.
    run(["../src/configure", f"--with-tcl={tcl_config()}", "--enable-fts3", "--enable-fts4",
         "--enable-rtree", "CFLAGS=-O2"], cwd=d / "bld", log_to=logf)
    run(["make", "sqlite3.c", "shell.c"], cwd=d / "bld", log_to=logf)
    sf.write_text(stamp)
    return d


SQLITE_SHELL_DEFS = [
    "-DSQLITE_THREADSAFE=1", "-DSQLITE_ENABLE_MATH_FUNCTIONS", "-DSQLITE_ENABLE_FTS4",
    "-DSQLITE_ENABLE_RTREE", "-DSQLITE_ENABLE_EXPLAIN_COMMENTS", "-DSQLITE_ENABLE_DBSTAT_VTAB",
    "-DSQLITE_ENABLE_BYTECODE_VTAB", "-DSQLITE_ENABLE_STMTVTAB", "-DSQLITE_ENABLE_DBPAGE_VTAB",
    "-DHAVE_READLINE=0",
]


def sqlite_link_cmd(variant):
    cc, _ = cc_env(variant)
    return [cc, "-O2"] + VARIANTS[variant]["flags"] + [
        "-o", "sqlite3", "shell.o", "sqlite3.o", "-lm", "-ldl", "-lpthread", "-lz"]


def build_sqlite3(variant, logf, testfixture):
    gen = sqlite_generated("probes" if variant == "probes" else "orig", logf)
    d = WORK / "build" / f"sqlite3-{variant}"
    stamp = stamp_of("sqlite3", variant, f"testfixture={testfixture}\n"
                     + (gen / ".bootprof-stamp").read_text())
    sf = d / ".bootprof-stamp"
    if sf.exists() and sf.read_text() == stamp:
        return d
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(gen / "bld", d, symlinks=True)
    cc, env = cc_env(variant)
    flags = ["-O2"] + VARIANTS[variant]["flags"]
    for src in ["sqlite3.c", "shell.c"]:
        run([cc] + flags + SQLITE_SHELL_DEFS + ["-c", src, "-o", src.replace(".c", ".o")],
            cwd=d, env=env, log_to=logf)
    run(sqlite_link_cmd(variant), cwd=d, env=env, log_to=logf)
    if testfixture:
        # The project's own rule (libtool, one compile of the test sources and the amalgamation),
        # with our CC and flags.
        run(["make", "testfixture", f"CC={cc}", f"CFLAGS={' '.join(flags)}"], cwd=d, env=env,
            log_to=logf)
    sf.write_text(stamp)
    return d


def executable(prog, d):
    """The program's own executable in build directory d (for sqlite3, the shell; for jsoncpp,
    the reader/writer test runner, which parses a file and writes it back)."""
    return {"bzip2": d / "bzip2", "lz4": d / "programs" / "lz4", "sqlite3": d / "sqlite3",
            "jsoncpp": d / "build" / "bin" / "jsontestrunner_exe", "mksh": d / "mksh"}[prog]


def jsoncpp_binaries(d):
    """jsoncpp's reader/writer runner, its unit tests and its shared library."""
    return [executable("jsoncpp", d), d / "build" / "bin" / "jsoncpp_test"] + sorted(
        f for f in (d / "build" / "lib").glob("libjsoncpp.so.*.*") if not f.is_symlink())


def binaries(prog, d):
    """The ELF files of a build that carry sites."""
    if prog == "jsoncpp":
        return jsoncpp_binaries(d)
    return [executable(prog, d)] + {
        "bzip2": sorted(f for f in d.glob("libbz2.so.*") if not f.is_symlink()),
        "lz4": [],
        "mksh": [],
        "sqlite3": [d / "testfixture"] if (d / "testfixture").exists() else [],
    }[prog]


def site_report(prog, d, logf):
    """Sites per binary from `bootprof list --json` (which also checks every site holds its
    NOP), and the probe references bootprof-link left alone, from its --verbose log."""
    out = {}
    for b in binaries(prog, d):
        p = subprocess.run([TOOL, "list", "--json", b], capture_output=True)
        if p.returncode != 0:
            raise Failure(f"bootprof list {b}: {p.stderr.decode(errors='replace')}")
        listed = json.loads(p.stdout)
        if listed["nop_ok"] != listed["count"]:
            raise Failure(f"{b}: {listed['count'] - listed['nop_ok']} sites without their NOP")
        sites = listed["sites"]
        kinds = {}
        for s in sites:
            kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
        out[b.name] = dict(sites=len(sites), kinds=kinds)
    text = Path(logf).read_text(errors="replace") if Path(logf).exists() else ""
    refused = sorted(set(re.findall(r"bootprof-link: (.*: not a site: .*)", text)))
    return dict(binaries=out, refused=refused,
                total=sum(v["sites"] for v in out.values()))


def build_all(session, progs):
    """Builds every variant of every program the session asks for; returns
    {program: {variant: build directory}}."""
    jobs = []
    for prog in progs:
        for v in session.variants(prog):
            jobs.append((prog, v))
    dirs = {}

    def one(job):
        prog, v = job
        logf = session.logf(f"build-{prog}-{v}")
        logf.unlink(missing_ok=True)
        t0 = time.perf_counter()
        if prog == "bzip2":
            d = build_bzip2(v, logf)
        elif prog == "lz4":
            d = build_lz4(v, logf)
        elif prog == "jsoncpp":
            d = build_jsoncpp(v, logf)
        elif prog == "mksh":
            d = build_mksh(v, logf)
        else:
            d = build_sqlite3(v, logf, testfixture=not (session.ci or session.bench)
                              and (v == "plain" or VARIANTS[v]["bootprof"])
                              and v not in DOCS_ONLY)
        log(f"built {prog} {v} in {time.perf_counter() - t0:.0f} s")
        return job, d

    # The sqlite3 amalgamations first (every sqlite3 variant needs one), then two builds at a
    # time, the long sqlite3 ones first.
    if "sqlite3" in progs:
        with ThreadPoolExecutor(2) as ex:
            list(ex.map(lambda f: sqlite_generated(f, session.logf(f"build-sqlite3-gen-{f}")),
                        ["orig"] + (["probes"] if "probes" in session.variants("sqlite3") else [])))
    jobs.sort(key=lambda j: j[0] != "sqlite3")
    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
        for (prog, v), d in ex.map(one, jobs):
            dirs.setdefault(prog, {})[v] = d
    return dirs
