"""The figures in docs/: takes the sqlite3 build directories (builds.build_all; the plain,
-finstrument-functions and named-probes builds) and remakes docs/sqlite3-startup.svg (and .png
where chromium is installed), docs/sqlite3-startup-summary.txt and docs/sqlite3-points.txt with
bootprof run and bootprof report; hands on the summary and the points in the session's
results."""
import os
import re
import shutil
import subprocess

import workloads

from .common import ROOT, TOOL, log


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
                        f"--screenshot={docs / 'sqlite3-startup.png'}",
                        f"--window-size={size}", f"file://{svg}"],
                       check=True, capture_output=True)
    summary = subprocess.run([TOOL, "report", trace, "--format", "summary"], check=True,
                             capture_output=True).stdout.decode()
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
