"""The figures in docs/: takes the sqlite3 build directories (builds.build_all; the plain,
-finstrument-functions and named-probes builds) and remakes docs/sqlite3-startup.svg (and .png
where chromium is installed), docs/sqlite3-startup-summary.txt and docs/sqlite3-points.txt with
bootprof run and bootprof report; hands on the summary and the points in the session's
results. From jsoncpp's -finstrument-functions build it remakes docs/jsoncpp-startup.svg (.png)
and docs/jsoncpp-startup-summary.txt the same way."""
import os
import re
import shutil
import statistics
import subprocess

import workloads

from .builds import executable
from .common import NO_INLINING, ROOT, TOOL, Failure, log


def chart(trace, svg, scratch):
    """The flame chart of a session as svg, its screenshot beside it (.png, where chromium is
    installed), and its summary report, which it hands on."""
    # From the first record: recording begins before bootprof registers and enables the
    # program's sites, which takes longer than the start-up it then records.
    subprocess.run([TOOL, "report", trace, "--format", "flamechart", "--from-first-record",
                    "-o", svg], check=True)
    m = re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', svg.read_text())
    size = f"{m.group(1)},{min(int(m.group(2)), 4000)}" if m else "1200,800"
    chromium = shutil.which("chromium")
    if chromium:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-quic", "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                        f"--user-data-dir={scratch / 'profile'}",
                        f"--screenshot={svg.with_suffix('.png')}",
                        f"--window-size={size}", f"file://{svg}"],
                       check=True, capture_output=True)
    return subprocess.run([TOOL, "report", trace, "--format", "summary"], check=True,
                          capture_output=True).stdout.decode()


def make_docs(session, dirs):
    """The sqlite3 shell's start-up and first query as a flame chart (function tracing from
    the first constructor, -finstrument-functions build), and the profile points of the named
    probes over the fixed script."""
    docs = ROOT / "docs"
    scratch = session.scratch / "docs"
    scratch.mkdir()
    db = scratch / "first.db"
    with open(os.devnull, "wb") as null:
        subprocess.run([dirs["plain"] / "sqlite3", "-batch", db],
                       input=workloads.sqlite_script(2000).encode(), stdout=null, check=True)
    trace = scratch / "startup.session"
    subprocess.run([TOOL, "run", "--mode", "call", "-o", trace, "--", dirs["instrument"]
                    / "sqlite3", "-batch", db], input=workloads.SQLITE_FIRST_QUERY.encode(),
                   check=True, capture_output=True)
    svg = docs / "sqlite3-startup.svg"
    summary = chart(trace, svg, scratch)
    script = scratch / "points.sql"
    script.write_text(workloads.sqlite_script(20000))
    pdb = scratch / "points.db"
    with open(script, "rb") as i:
        p = subprocess.run([TOOL, "run", "--points", "-o", scratch / "points.session", "--",
                            dirs["probes"] / "sqlite3", "-batch", pdb], stdin=i,
                           capture_output=True, check=True)
    points = subprocess.run([TOOL, "report", scratch / "points.session", "--format", "points"],
                            check=True, capture_output=True).stdout.decode()
    (docs / "sqlite3-points.txt").write_text(
        "# bootprof report --format points: the named probes of tests/realworld/"
        "sqlite3-probes.patch\n# over the fixed script (tests/realworld/workloads.py, "
        "20000 rows), made by tests/realworld/run --docs\n\n" + points)
    (docs / "sqlite3-startup-summary.txt").write_text(summary)
    session.results["docs"] = dict(startup_summary=summary, points=points,
                                   runtime_points_table=p.stderr.decode(errors="replace")[-4000:])
    log(f"wrote {svg}, docs/sqlite3-points.txt")
    if "fentry" in dirs:
        graph_chart(session, dirs, db, scratch)


# Runs of the start-up per build for the comparison of the two charts, the two builds' runs
# alternating: the spread of the recorded span over these is the noise the durations are judged
# against.
STARTUP_RUNS = 9


def startup(exe, db, trace, graph):
    """The shell's start-up and first query on db, every site recorded in call mode (with
    --graph: exits by return hooking) into the session trace."""
    subprocess.run([TOOL, "run", "--mode", "call"] + (["--graph"] if graph else [])
                   + ["-o", trace, "--", exe, "-batch", db],
                   input=workloads.SQLITE_FIRST_QUERY.encode(), check=True, capture_output=True)


def point_counts(trace):
    """Calls per function from the points table (ENTER/EXIT pairs), and the whole table."""
    table = subprocess.run([TOOL, "report", trace, "--format", "points"], check=True,
                           capture_output=True).stdout.decode()
    rows = table.split("\n----")[1].splitlines()[1:]
    return {r.split()[0]: int(r.split()[1]) for r in rows if r.strip()}, table


# The pairs of builds whose start-up charts docs/sqlite3-startup-compare.txt compares: the
# -finstrument-functions build and the -pg -mfentry build traced with --graph, at -O2 as sqlite3
# ships (gcc inlines and clones differently in the two), and both without inlining or cloning
# (common.NO_INLINING), where they must have the same functions and calls; with the file names
# of each pair's charts (sqlite3-startup.svg is make_docs's own).
CHART_PAIRS = [
    ("instrument", "fentry", "sqlite3-startup.svg", "sqlite3-startup-graph.svg"),
    ("instrument-noinline", "fentry-noinline", "sqlite3-startup-noinline.svg",
     "sqlite3-startup-graph-noinline.svg"),
]


def graph_chart(session, dirs, db, scratch):
    """The start-up from each pair of CHART_PAIRS whose builds there are: the
    -finstrument-functions build traced plainly, the -pg -mfentry build under --graph, each
    STARTUP_RUNS times; the charts of the fastest run of each, with their summaries, and
    docs/sqlite3-startup-compare.txt, each pair's calls per function and spans. A difference in
    the pair without inlining is a problem."""
    docs = ROOT / "docs"
    sections, results = [], {}
    for inst, fentry, inst_svg, fentry_svg in CHART_PAIRS:
        if inst not in dirs or fentry not in dirs:
            continue
        spans, counts, runs = {}, {}, {inst: [], fentry: []}
        for i in range(STARTUP_RUNS):
            for build, graph in [(inst, False), (fentry, True)]:
                trace = scratch / f"startup-{build}-{i}.session"
                startup(dirs[build] / "sqlite3", db, trace, graph)
                runs[build].append((recorded_span(trace), trace))
        for build, svg in [(inst, inst_svg), (fentry, fentry_svg)]:
            spans[build] = sorted(s for s, _ in runs[build])
            counts[build] = point_counts(min(runs[build])[1])[0]
            if svg != "sqlite3-startup.svg":
                summary = chart(min(runs[build])[1], docs / svg, scratch)
                (docs / svg.replace(".svg", "-summary.txt")).write_text(summary)
        text, equal = compare_counts(counts[inst], counts[fentry], spans, inst_svg, fentry_svg)
        sections.append(text)
        results[fentry] = dict(spans_ms=spans, compare=text)
        if fentry.endswith("-noinline") and not equal:
            session.problem("sqlite3 without inlining: the -pg -mfentry --graph chart and the "
                            "-finstrument-functions chart differ in functions or calls "
                            "(docs/sqlite3-startup-compare.txt)")
    head = ["# The sqlite3 shell's start-up and first query (tests/realworld/run --docs): calls per",
            "# function (bootprof report --format points) of a -finstrument-functions build against",
            "# the -pg -mfentry build of the same source traced with bootprof run --graph --mode",
            f"# call, the fastest of {STARTUP_RUNS} runs of each (the builds alternating); at -O2,",
            "# and without inlining or cloning (" + " ".join(NO_INLINING) + ").", "", ""]
    (docs / "sqlite3-startup-compare.txt").write_text("\n".join(head) + "".join(sections))
    session.results["docs-graph"] = results
    log("wrote the --graph charts and docs/sqlite3-startup-compare.txt")


def compare_counts(inst, graph, spans, inst_svg, graph_svg):
    """The comparison of calls per function, as text, and whether the two agree: the functions
    both charts have, with equal or different counts, and those only one has (at -O2 gcc inlines
    differently in the two builds: a -finstrument-functions build calls its hooks for inlined
    functions too)."""
    both = sorted(set(inst) & set(graph))
    same = [f for f in both if inst[f] == graph[f]]
    differ = [f for f in both if inst[f] != graph[f]]
    only_i = sorted(set(inst) - set(graph), key=lambda f: -inst[f])
    only_g = sorted(set(graph) - set(inst), key=lambda f: -graph[f])
    builds = list(spans)
    out = [f"## {builds[0]} (docs/{inst_svg}) against {builds[1]} with --graph "
           f"(docs/{graph_svg})", "",
           f"functions in both: {len(both)}; same calls: {len(same)} "
           f"({sum(inst[f] for f in same):,} calls); different: {len(differ)}",
           f"only -finstrument-functions (inlined in the -pg build): {len(only_i)} "
           f"({sum(inst.values()) - sum(inst[f] for f in both):,} calls)",
           f"only -pg -mfentry (gcc's clones, e.g. .part/.isra/.constprop): {len(only_g)}", ""]
    for build, s in spans.items():
        out.append(f"recorded span, ms, {build}: " + ", ".join(f"{x:.2f}" for x in s))
    (a, sa), (b, sb) = spans.items()
    overlap = max(sa[0], sb[0]) <= min(sa[-1], sb[-1])
    out.append(f"median span, ms: {a} {statistics.median(sa):.2f}, {b} "
               f"{statistics.median(sb):.2f} ({statistics.median(sb) / statistics.median(sa):.2f}x);"
               f" the two builds' spans {'overlap' if overlap else 'do NOT overlap'}")
    out += ["", "different calls (function, -finstrument-functions, -pg -mfentry --graph):"]
    out += [f"  {f} {inst[f]} {graph[f]}" for f in differ]
    out += ["", "only -finstrument-functions (first 40, by calls):"]
    out += [f"  {f} {inst[f]}" for f in only_i[:40]]
    out += ["", "only -pg -mfentry --graph:"]
    out += [f"  {f} {graph[f]}" for f in only_g[:40]]
    return "\n".join(out) + "\n\n", not (differ or only_i or only_g)


# The document jsoncpp's chart reads: one of its own test files, small enough that the chart
# shows each phase (read, parse, print the tree, write, parse the rewrite, write again) as a
# readable frame.
JSONCPP_CHART_INPUT = "legacy_test_complex_01.json"
# The C++ standard library's functions, left out of the chart: string, map, deque and allocator
# templates are seven in ten of the hooks' hits and would bury jsoncpp's own functions. By their
# symbols (a template function's demangled name starts with its return type, `void std::...`),
# and by name for the rest.
JSONCPP_CHART_NOTRACE = ["_ZSt*", "_ZNSt*", "_ZNKSt*", "std::*", "__gnu_cxx::*"]
# Runs of the start-up; the chart shows the shortest, the one least disturbed by the machine's
# other work (on a busy machine one run can take twice as long as the next).
JSONCPP_CHART_RUNS = 5


def recorded_span(trace):
    """Milliseconds from a session's first record to its last (its summary's threads line)."""
    summary = subprocess.run([TOOL, "report", trace, "--format", "summary"], check=True,
                             capture_output=True).stdout.decode()
    m = re.search(r"first\s+([\d.]+) ms\s+last\s+([\d.]+) ms", summary)
    if not m:
        raise Failure(f"no thread's first and last record in the summary of {trace}")
    return float(m.group(2)) - float(m.group(1))


def make_jsoncpp_docs(session, dirs):
    """jsoncpp's reader/writer runner (the -finstrument-functions build, with its shared library)
    on one of jsoncpp's test documents, every site but the standard library's enabled in call
    mode from the first constructor on, the shortest of JSONCPP_CHART_RUNS runs:
    docs/jsoncpp-startup.svg (.png) and docs/jsoncpp-startup-summary.txt."""
    if "instrument" not in dirs:
        raise Failure("the jsoncpp chart needs the instrument build (--variants instrument)")
    docs = ROOT / "docs"
    scratch = session.scratch / "docs-jsoncpp"
    scratch.mkdir()
    d = dirs["instrument"]
    doc = scratch / JSONCPP_CHART_INPUT
    shutil.copy2(d / "test" / "data" / JSONCPP_CHART_INPUT, doc)
    notrace = [a for pattern in JSONCPP_CHART_NOTRACE for a in ("-x", pattern)]
    runs = []
    for i in range(JSONCPP_CHART_RUNS):
        trace = scratch / f"startup-{i}.session"
        subprocess.run([TOOL, "run", "--mode", "call", "-e", "*"] + notrace
                       + ["-o", trace, "--", executable("jsoncpp", d), doc],
                       check=True, capture_output=True)
        runs.append((recorded_span(trace), trace))
    span, trace = min(runs)
    svg = docs / "jsoncpp-startup.svg"
    summary = chart(trace, svg, scratch)
    (docs / "jsoncpp-startup-summary.txt").write_text(summary)
    session.results["docs-jsoncpp"] = dict(startup_summary=summary,
                                           spans_ms=sorted(s for s, _ in runs))
    log(f"wrote {svg} ({span:.2f} ms, the shortest of {len(runs)} runs), "
        f"docs/jsoncpp-startup-summary.txt")
