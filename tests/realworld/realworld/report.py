"""The results as text: takes the session's results (by program: sites, tests, shell,
testfixture, link times, run times, callgrind counts) and hands on the Markdown tables that
become results.md and the output's end; update_benchmarks writes them into their section of
BENCHMARKS.md (real programs, or with --bench whole-program cost)."""
import os
import re
import subprocess
import time

from .checks import SQLITE_TESTS, SQLITE_TRAP_TESTS
from .common import PROGRAMS, ROOT


def fmt_ms(x):
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def report(results, ci):
    """The tables of this run, as Markdown; a table with no rows (e.g. sites and tests in
    --bench mode) is left out."""
    tables = []
    L = ["| program | build | sites (binary: count) | refused | link ms (plain → bootprof) |",
         "|---|---|---|---|---|"]
    tables.append(L)
    for prog in PROGRAMS:
        r = results.get(prog)
        if not r:
            continue
        link = r.get("link_ms", {})
        for v, s in r.get("sites", {}).items():
            sites = ", ".join(f"{b}: {x['sites']}" for b, x in s["binaries"].items())
            lk = ""
            if v == "fentry" and "fentry" in link:
                lk = f"{fmt_ms(link['plain'])} → {fmt_ms(link['fentry'])}"
            elif v == "fentry-lto" and "fentry-lto" in link:
                lk = (f"{fmt_ms(link['plain-lto'])} (plain LTO) → {fmt_ms(link['fentry-lto'])} "
                      f"({link['lto-ratio']}x)")
            L.append(f"| {prog} | {v} | {sites} | {len(s['refused'])} | {lk} |")
    L = ["| program | tests | build | disabled | trap (all sites) | call (all sites) | "
         "call, --graph (all sites) |",
         "|---|---|---|---|---|---|---|"]
    tables.append(L)

    def cell(m):
        if not m:
            return "–"
        if "passed" in m:
            ok = "pass" if m["passed"] else "**FAIL**"
        elif "identical" in m:
            ok = "identical" if m["identical"] else "**DIFFERS**"
        else:
            ok = f"{m['errors']} errors / {m['tests']}"
        hits = f", {m['hits']:,} hits" if m.get("hits") else ""
        g = m.get("graph")
        pairs = (f", {g['paired']:,} ENTER/EXIT pairs, {g['open_at_end']} open at the end"
                 if g else "")
        return f"{ok} ({m['seconds']} s{hits}{pairs})"
    for prog in PROGRAMS:
        r = results.get(prog)
        if not r:
            continue
        for key, label in [("tests", None), ("shell", "shell, fixed SQL script vs plain output"),
                           ("testfixture", "testfixture")]:
            for v, modes in r.get(key, {}).items():
                lab = label or r[key][v]["disabled"].get("detail", "")
                if key == "testfixture":
                    lab = (f"testfixture, {len(SQLITE_TESTS)} files "
                           f"(trap: {len(SQLITE_TRAP_TESTS)})")
                if key == "shell" and "trap" in modes:
                    lab += f"; trap: {modes['trap']['script']}"
                trap_detail = modes.get("trap", {}).get("detail")
                if key == "tests" and trap_detail and trap_detail != lab:
                    lab += f"; trap: {trap_detail}"
                L.append(f"| {prog} | {lab} | {v} | {cell(modes.get('disabled'))} | "
                         f"{cell(modes.get('trap'))} | {cell(modes.get('call'))} | "
                         f"{cell(modes.get('graph'))} |")
    L = ["| program | attached while running | build | output | records | after detach |",
         "|---|---|---|---|---|---|"]
    tables.append(L)
    for prog in PROGRAMS:
        a = (results.get(prog) or {}).get("attach")
        if a:
            L.append(f"| {prog} | `bootprof attach PID -e '*' --mode call --duration 1`, the "
                     f"script fed through a pipe | fentry | "
                     f"{'identical' if a['identical'] else '**DIFFERS**'} | {a['records']:,} | "
                     f"{a['list_verdict']} |")
    L = ["| program | workload | build | wall s (median) | × plain (paired) | CPU s | "
         "× plain (paired) | spread (min–max s) |",
         "|---|---|---|---|---|---|---|---|"]
    tables.append(L)
    for prog in PROGRAMS:
        r = results.get(prog)
        if not r or "runtime" not in r:
            continue
        rt = r["runtime"]
        for v, x in rt["results"].items():
            L.append(f"| {prog} | {rt['what']} ({rt['rounds']} rounds) | {v} | {x['wall']:.3f} | "
                     f"{x['ratio']:.3f} | {x['cpu']:.3f} | {x['cpu_ratio']:.3f} | "
                     f"{x['wall_min']:.3f}–{x['wall_max']:.3f} |")
    cgs = [(prog, results[prog]["callgrind"]) for prog in PROGRAMS
           if (results.get(prog) or {}).get("callgrind")]
    if cgs:
        L = ["| program | workload under callgrind | build | instructions | × plain |",
             "|---|---|---|---|---|"]
        tables.append(L)
        for prog, cg in cgs:
            for v, x in cg["results"].items():
                if x["instructions"] is None:
                    L.append(f"| {prog} | {cg['what']} | {v} | – ({x['why']}) | – |")
                    continue
                ratio = f"{x['ratio']:.4f}" if x["ratio"] else "–"
                L.append(f"| {prog} | {cg['what']} | {v} | {x['instructions']:,} | {ratio} |")
    refused = [(prog, v, x) for prog in PROGRAMS for v, s in
               results.get(prog, {}).get("sites", {}).items() for x in s["refused"]]
    if refused:
        L = ["Probe references bootprof-link left alone (not call sites):", ""]
        L += [f"- {prog} {v}: `{x}`" for prog, v, x in refused[:20]]
        tables.append(L)
    return "\n\n".join("\n".join(t) for t in tables if len(t) > 2) + "\n"


def update_benchmarks(table, cmd, section):
    """Replaces the text between the section's markers in BENCHMARKS.md (or appends it)."""
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text()
    begin, end = f"<!-- {section}:begin -->", f"<!-- {section}:end -->"
    machine = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                             capture_output=True).stdout.decode().strip()
    body = (f"{begin}\nMeasured {time.strftime('%Y-%m-%d')} on {machine}, {os.cpu_count()} "
            f"cores (a VM), with `{cmd}`:\n\n{table}{end}")
    if begin in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: body, text, flags=re.S)
    else:
        title = {"realworld": "Real programs", "wholeprogram": "Whole-program cost"}
        text += f"\n## {title[section]}\n\n" + body + "\n"
    path.write_text(text)
