#!/usr/bin/env python3
"""The measuring half of benches/disabled/run (the script builds the variants, in every layout).

Checks the binaries (every bootprof site holds its 5-byte NOP; nop5x1 differs from bootprof_call only
at the sites and holds five 1-byte NOPs there; the hot loops contain what each variant claims; the
usdt notes carry the semaphore; the layouts are what they claim), counts instructions per
iteration with callgrind, times the variants in interleaved rounds with rdtsc, and prints one
markdown table plus the goals. Exits 1 if something is broken; timing never fails the run."""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--bin", required=True)
ap.add_argument("--quick", type=int, default=0)
ap.add_argument("--rounds", default="")
ap.add_argument("--pin", default="")
ap.add_argument("--layouts", default="0")
opt = ap.parse_args()
os.chdir(opt.out)
quick = opt.quick == 1
pin = opt.pin.split()
LAYOUTS = [int(x) for x in opt.layouts.split()]
L0 = f"L{LAYOUTS[0]}"

VARIANTS = ["baseline", "bootprof", "bootprof_call", "nop5x1", "if_fp", "usdt", "call_empty",
            "asm_nop"]
WORKLOADS = ["throughput", "latency", "lock", "leaf"]
# The function holding each workload's probe site (leaf: the called function; the loop calling it
# is work_leaf).
FUNCS = {"throughput": "work_throughput", "latency": "work_latency", "lock": "work_lock",
         "leaf": "leaf_mix"}
NOP5 = bytes.fromhex("0f1f440000")
problems = []


def fail(msg):
    problems.append(msg)
    print("BROKEN: " + msg, file=sys.stderr, flush=True)


def sh(cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def insns_at(prog, addr, length):
    d = sh(["objdump", "-d", "--no-show-raw-insn", f"--start-address={addr:#x}",
            f"--stop-address={addr + length:#x}", prog]).stdout
    return [l.split("\t", 1)[1].strip() for l in d.splitlines() if re.match(r"^\s+[0-9a-f]+:\t", l)]


# ---- bootprof's site tables, and nop5x1 made from bootprof_call's (in every layout) -------------
nsites = len(FUNCS)
ndiff = 0


def listed(prog, forms):
    """The sites `bootprof list --json` shows, checked: each form of `forms` once per workload
    function (a guard there; its call there too, or in the function's .cold part), every one a
    bench:site probe holding its 5-byte NOP in the file."""
    listing = json.loads(sh([opt.bin + "/bootprof", "list", "--json", prog], check=False).stdout
                         or "{}")
    sites = listing.get("sites", [])
    n = nsites * len(forms)
    if listing.get("count") != n or len(sites) != n or listing.get("nop_ok") != n:
        fail(f"{prog}: bootprof list shows count={listing.get('count')} "
             f"nop_ok={listing.get('nop_ok')}, expected {n} sites, all NOPs")
    image = open(prog, "rb").read()
    for form in forms:
        mine = [s for s in sites if s.get("form") == form]
        where = sorted((s.get("function") or "").removesuffix(".cold") for s in mine)
        if where != sorted(FUNCS.values()):
            fail(f"{prog}: {form} sites in {where}, expected one in each of "
                 f"{sorted(FUNCS.values())}")
    for s in sites:
        off = s["file_offset"]
        if not (s.get("nop") and s.get("len") == 5 and s.get("kind") == "probe"
                and (s.get("provider"), s.get("name")) == ("bench", "site")):
            fail(f"{prog}: unexpected site {s}")
        if image[off:off + 5] != NOP5:
            fail(f"{prog}: {s['function']} site at file offset {off:#x} holds "
                 f"{image[off:off + 5].hex(' ')}, not 0f 1f 44 00 00")
    return sites


for lay in LAYOUTS:
    d = f"L{lay}"
    listed(f"{d}/bootprof", ["guard", "call"])
    sites = listed(f"{d}/bootprof_call", ["call"])
    image = bytearray(open(f"{d}/bootprof_call", "rb").read())
    for s in sites:
        off = s["file_offset"]
        image[off:off + 5] = b"\x90" * 5
    open(f"{d}/nop5x1", "wb").write(image)
    os.chmod(f"{d}/nop5x1", 0o755)
    a, b = open(f"{d}/bootprof_call", "rb").read(), open(f"{d}/nop5x1", "rb").read()
    ndiff = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
    if ndiff != 5 * nsites:
        fail(f"{d}/nop5x1 differs from bootprof_call in {ndiff} bytes, expected {5 * nsites}")
    for s in sites:
        got5 = insns_at(f"{d}/bootprof_call", s["address"], 5)
        got1 = insns_at(f"{d}/nop5x1", s["address"], 5)
        if len(got5) != 1 or not got5[0].startswith("nopl"):
            fail(f"objdump {d}/bootprof_call at {s['address']:#x}: {got5}, expected one nopl")
        if got1 != ["nop"] * 5:
            fail(f"objdump {d}/nop5x1 at {s['address']:#x}: {got1}, expected five nop")


# ---- the hot loops, from objdump -d ------------------------------------------------------------
def functions(prog):
    """{name: (start, [(addr, insn text)])} for the workload functions."""
    d = sh(["objdump", "-d", "--no-show-raw-insn", prog]).stdout
    funcs, cur = {}, None
    for line in d.splitlines():
        m = re.match(r"^([0-9a-f]+) <([^>]+)>:$", line)
        if m:
            cur = m.group(2) if m.group(2) in list(FUNCS.values()) + ["work_leaf"] else None
            if cur:
                funcs[cur] = (int(m.group(1), 16), [])
            continue
        m = re.match(r"^\s+([0-9a-f]+):\t(.*)$", line)
        if m and cur:
            funcs[cur][1].append((int(m.group(1), 16), m.group(2).strip()))
    return funcs


def body_of(insns):
    """A loop-less function's instructions up to its last ret (no padding)."""
    last = max((k for k, (_, t) in enumerate(insns) if t.startswith("ret")), default=len(insns) - 1)
    return insns[:last + 1]


def hot_loop(insns):
    """The instructions of the function's widest conditional backward branch (its loop), in
    address order. Unconditional jumps back do not count: a guard's out-of-line call block ends
    with a `jmp` back into the loop, and must not be taken for the loop."""
    best = None
    for addr, text in insns:
        m = re.match(r"^j(?!mp)\w+\s+([0-9a-f]+) <", text)
        if m and int(m.group(1), 16) < addr:
            t = int(m.group(1), 16)
            if best is None or addr - t > best[1] - best[0]:
                best = (t, addr)
    if best is None:
        return []
    return [(a, t) for a, t in insns if best[0] <= a <= best[1]]


PROBE_RE = {"bootprof": r"^nopl\s+0x0\(%rax,%rax,1\)$",
            "bootprof_call": r"^nopl\s+0x0\(%rax,%rax,1\)$", "if_fp": r"<probe_fp>",
            "usdt": r"<bench_site_semaphore>", "call_empty": r"^call.*<empty_hook>",
            "asm_nop": r"^nopl\s+0x0\(%rax,%rax,1\)$"}
offsets = {}  # (layout, variant) -> work_throughput's offset in its 64-byte line
for lay in LAYOUTS:
    d = f"L{lay}"
    f = open(f"{d}/loops.txt", "w")
    for v in VARIANTS:
        fs = functions(f"{d}/{v}")
        offsets[(lay, v)] = fs.get("work_throughput", (0, []))[0] % 64
        for w in WORKLOADS:
            ins = fs.get(FUNCS[w], (0, []))[1]
            if w == "leaf":
                outer = hot_loop(fs.get("work_leaf", (0, []))[1])
                f.write(f"== {v} work_leaf: {len(outer)} instructions in the loop\n")
                f.write("".join(f"  {a:x}: {t}\n" for a, t in outer))
                loop = body_of(ins)
                f.write(f"== {v} {FUNCS[w]} (called once per iteration): {len(loop)} instructions\n")
            else:
                loop = hot_loop(ins)
                f.write(f"== {v} {FUNCS[w]}: {len(loop)} instructions in the loop\n")
            f.write("".join(f"  {a:x}: {t}\n" for a, t in loop))
            body = "\n".join(t for _, t in loop)
            if not loop:
                fail(f"{d}/{v} {FUNCS[w]}: no loop found in the disassembly")
            want = PROBE_RE.get(v)
            if want and not re.search(want, body, re.M):
                fail(f"{d}/{v} {FUNCS[w]}: the loop lacks its probe ({want})")
            if v == "nop5x1" and "nop\nnop\nnop\nnop\nnop" not in body:
                fail(f"{d}/nop5x1 {FUNCS[w]}: the loop lacks the five 1-byte NOPs")
            if v == "baseline" and re.search(r"^nopl|probe|semaphore|empty_hook", body, re.M):
                fail(f"{d}/baseline {FUNCS[w]}: the loop has a probe:\n{body}")
            if v == "baseline" and w in ("throughput", "latency") and re.search(r"^call", body, re.M):
                fail(f"{d}/baseline {FUNCS[w]}: the loop has a call:\n{body}")
    f.close()
# Each layout moves the workload's code by its padding: work_throughput's offset in its 64-byte
# line is the same for every variant of a layout, and moves with the padding.
for lay in LAYOUTS:
    got = {offsets[(lay, v)] for v in VARIANTS}
    want = (offsets[(LAYOUTS[0], "baseline")] + lay - LAYOUTS[0]) % 64
    if got != {want}:
        fail(f"layout {lay}: work_throughput at offsets {sorted(got)} in its 64-byte line, "
             f"expected {want} for every variant (the padding object did not come first?)")

# ---- usdt: the stapsdt notes carry the semaphore -----------------------------------------------
notes = sh(["readelf", "-n", f"{L0}/usdt"]).stdout
sems = re.findall(r"Semaphore: (0x[0-9a-f]+)", notes)
symsem = re.search(r"^([0-9a-f]+) \w bench_site_semaphore$", sh(["nm", f"{L0}/usdt"]).stdout, re.M)
if len(sems) != nsites or not symsem or any(int(x, 16) != int(symsem.group(1), 16) for x in sems):
    fail(f"usdt: readelf -n shows semaphores {sems}, expected {nsites} notes at bench_site_semaphore")
usdt_sem = sems[0] if sems else "?"


# ---- sizes -------------------------------------------------------------------------------------
def sizes(prog):
    text = 0
    for line in sh(["size", "-A", prog]).stdout.splitlines():
        p = line.split()
        if p and p[0] == ".text":
            text = int(p[1])
    fn = {}
    for line in sh(["nm", "-S", prog]).stdout.splitlines():
        p = line.split()
        if len(p) == 4 and p[3] in FUNCS.values():
            fn[p[3]] = int(p[1], 16)
    return text, fn


size = {v: sizes(f"{L0}/{v}") for v in VARIANTS}

if problems:  # the binaries are not what they claim: no point running them
    print(f"{len(problems)} problem(s): see BROKEN above", file=sys.stderr)
    sys.exit(1)

# ---- instructions per iteration (callgrind, first layout) --------------------------------------
n1, n2 = (10000, 20000) if quick else (100000, 200000)


def callgrind(v, w, n):
    f = f"{L0}/cg.{v}.{w}.{n}.out"
    sh(["valgrind", "--tool=callgrind", f"--callgrind-out-file={f}", f"./{L0}/{v}", w, str(n), "0"])
    m = re.search(r"^summary: (\d+)$", open(f).read(), re.M)
    return int(m.group(1))


log(f"callgrind: {len(VARIANTS) * len(WORKLOADS) * 2} runs ...")
jobs = [(v, w, n) for v in VARIANTS for w in WORKLOADS for n in (n1, n2)]
with ThreadPoolExecutor(max_workers=2) as ex:
    counts = dict(zip(jobs, ex.map(lambda j: callgrind(*j), jobs)))
ipi = {(v, w): (counts[(v, w, n2)] - counts[(v, w, n1)]) / (n2 - n1)
       for v in VARIANTS for w in WORKLOADS}
for (v, w), x in ipi.items():
    if abs(x - round(x)) > 0.02:
        fail(f"callgrind {v} {w}: {x:.3f} instructions per iteration, not a whole number")
for w in WORKLOADS:
    nop_vs_call = ipi[("nop5x1", w)] - ipi[("bootprof_call", w)]
    if round(nop_vs_call) != 4:
        fail(f"callgrind {w}: nop5x1 - bootprof_call = {nop_vs_call:.2f} instructions per "
             f"iteration; one site per iteration must make it exactly 4")
    for v in ("bootprof", "bootprof_call"):
        if round(ipi[(v, w)] - ipi[("baseline", w)]) < 1:
            fail(f"callgrind {w}: {v} - baseline = "
                 f"{ipi[(v, w)] - ipi[('baseline', w)]:.2f} < 1: the site is not executed?")
    if round(ipi[("asm_nop", w)] - ipi[("baseline", w)]) < 1:
        fail(f"callgrind {w}: asm_nop - baseline < 1: the NOP is not executed?")
startup = {v: counts[(v, "lock", n1)] - ipi[(v, "lock")] * n1 for v in VARIANTS}

if problems:  # no point timing broken binaries
    print(f"{len(problems)} problem(s): see BROKEN above", file=sys.stderr)
    sys.exit(1)

# ---- time: interleaved rounds ------------------------------------------------------------------
rounds = int(opt.rounds) if opt.rounds else (2 if quick else 8 * len(LAYOUTS))
target_s = 0.005 if quick else 0.2
chunks = 4 if quick else 20


def timed(lay, v, w, n):
    """One process: warm-up (n/5), then n iterations in `chunks` timed chunks. Returns the
    median chunk's and the fastest chunk's TSC ticks per iteration, and the TSC rate."""
    p = sh(pin + [f"./L{lay}/{v}", w, str(n), str(max(n // 5, 1)), str(chunks)])
    lo, med, _, rate = (float(x) for x in p.stdout.split()[:4])
    return med, lo, rate


iters = {}
for w in WORKLOADS:  # N for a run of target_s at the baseline's fastest-chunk speed
    n0 = 200000 if quick else 2000000
    timed(LAYOUTS[0], "baseline", w, n0)
    _, lo, rate = timed(LAYOUTS[0], "baseline", w, n0)
    iters[w] = max(int(target_s * 1e9 * rate / lo) // chunks * chunks, chunks * 1000)
ORDER = VARIANTS + ["baseline2"]
log("timing: " + ", ".join(f"{w} {iters[w]} iterations" for w in WORKLOADS) +
    f"; {rounds} rounds of {len(WORKLOADS) * len(ORDER)} runs ...")
# per (variant, workload): [(layout, median-chunk ticks/iter, fastest-chunk ticks/iter)] by round
data = {(v, w): [] for v in ORDER for w in WORKLOADS}
tick_per_ns = []
t_start = time.time()
with open("raw.tsv", "w") as raw:
    raw.write("round\tlayout\tworkload\tvariant\tmedian_chunk_ticks\tmin_chunk_ticks\tticks_per_ns\n")
    # Round -1 settles the machine and is thrown away. Every round runs every variant once per
    # workload, back to back, in one layout (round r: layout r mod the number of layouts); the
    # order is rotated by one each round so that no variant always runs first.
    for r in range(-1, rounds):
        lay = LAYOUTS[max(r, 0) % len(LAYOUTS)]
        for w in WORKLOADS:
            k = max(r, 0) % len(ORDER)
            for v in ORDER[k:] + ORDER[:k]:
                med, lo, rate = timed(lay, "baseline" if v == "baseline2" else v, w, iters[w])
                raw.write(f"{r}\t{lay}\t{w}\t{v}\t{med:.4f}\t{lo:.4f}\t{rate:.4f}\n")
                if r >= 0:
                    data[(v, w)].append((lay, med, lo))
                    tick_per_ns.append(rate)
log(f"timing took {time.time() - t_start:.0f} s")


def median_ci(xs):
    """A distribution-free confidence interval of the median, ~95% or more (order statistics
    of a binomial(n, 1/2)): (lo, hi, coverage)."""
    xs, n = sorted(xs), len(xs)
    tail = lambda j: sum(math.comb(n, i) for i in range(j)) / 2 ** n  # P(X <= j - 1)
    j = 1  # the interval is [x_(j), x_(n-j+1)] (1-based), coverage 1 - 2 P(X <= j - 1)
    while j + 1 <= (n + 1) // 2 and tail(j + 1) <= 0.025:
        j += 1
    return xs[j - 1], xs[n - j], 1 - 2 * tail(j)


med = statistics.median
stat = {}
for w in WORKLOADS:
    base = data[("baseline", w)]
    elo, ehi, _ = median_ci([x[1] - y[1] for x, y in zip(data[("baseline2", w)], base)])
    floor = max(abs(elo), abs(ehi))
    for v in ORDER:
        xs = data[(v, w)]
        d = [x[1] - y[1] for x, y in zip(xs, base)]        # paired with the same round's baseline
        dbest = [x[2] - y[2] for x, y in zip(xs, base)]
        lo, hi, cov = median_ci(d)
        per_layout = [med([x[1] - y[1] for x, y in zip(xs, base) if x[0] == lay])
                      for lay in LAYOUTS if any(x[0] == lay for x in xs)]
        vals = [x[1] for x in xs]
        stat[(v, w)] = dict(med=med(vals), lo=min(vals), hi=max(vals), delta=med(d), dlo=lo,
                            dhi=hi, cov=cov, best=med(dbest), lay_lo=min(per_layout),
                            lay_hi=max(per_layout), ratio=med(vals) / med(x[1] for x in base),
                            floor=floor)
coverage = stat[("bootprof", "throughput")]["cov"]

# ---- the table ---------------------------------------------------------------------------------
cpu = "?"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
cc = open("build.txt").read().strip()
mode = "quick (CI check, figures meaningless)" if quick else "full"
L = []
L.append(f"{time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} cores, {mode}; {cc}; "
         f"pinned: {' '.join(pin) or 'no'}; TSC {med(tick_per_ns):.3f} ticks/ns.")
L.append(f"{rounds} interleaved rounds (each: {', '.join(ORDER)}, per workload; the order rotated "
         f"by one each round; one more round first, thrown away), cycling through "
         f"{len(LAYOUTS)} code/data layouts (padding {', '.join(map(str, LAYOUTS))} bytes); one "
         f"run = {' / '.join(str(iters[w]) for w in WORKLOADS)} iterations "
         f"({' / '.join(WORKLOADS)}) in {chunks} chunks after a warm-up; a run's figure is its "
         f"median chunk.")
L.append("")
L.append(f"| workload | variant | ticks/iter (median) | min-max | per-site cost, ticks [{coverage:.0%} CI] "
         "| per-layout range | fastest-chunk cost | ratio to baseline | instr/iter | instr over "
         "baseline | site fn bytes |")
L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for w in WORKLOADS:
    for v in ORDER:
        s = stat[(v, w)]
        vv = "baseline" if v == "baseline2" else v
        name = {"baseline2": "baseline, 2nd run (noise)", "asm_nop": "asm_nop (reference)"}.get(v, v)
        ins = ipi[(vv, w)]
        dins = ins - ipi[("baseline", w)]
        if v == "baseline":
            cost = lay = best = "-"
        else:
            cost = f"{s['delta']:+.2f} [{s['dlo']:+.2f}, {s['dhi']:+.2f}]"
            lay = f"{s['lay_lo']:+.2f} .. {s['lay_hi']:+.2f}"
            best = f"{s['best']:+.2f}"
        L.append(f"| {w} | {name} | {s['med']:.2f} | {s['lo']:.2f}-{s['hi']:.2f} | {cost} | {lay} | "
                 f"{best} | {s['ratio']:.3f} | {ins:.0f} | "
                 f"{'-' if v == 'baseline' else f'{dins:+.0f}'} | {size[vv][1].get(FUNCS[w], 0)} |")
L.append("")
L.append("Per-site cost: the median over rounds of (variant - baseline of the same round and "
         "layout), TSC ticks per iteration (one site per iteration), with a distribution-free "
         "confidence interval of that median (order statistics); per-layout range: the lowest and "
         "highest of the per-layout medians; fastest-chunk cost: the same median computed from "
         "each run's fastest chunk instead of its median chunk. Noise floor of a workload: the "
         "larger end (in absolute value) of the confidence interval of the baseline's 2nd run. "
         f"instr/iter: callgrind, (count at {n2} - count at {n1} iterations) / {n2 - n1}; "
         "valgrind counts each NOP as one instruction. nop5x1 is the bootprof_call binary with each "
         "site's 5 bytes overwritten by 90 90 90 90 90, byte-identical otherwise "
         f"({ndiff} bytes differ, checked): its code layout is bootprof's. Site fn bytes: the "
         "function holding the site (nm -S; work_* or leaf_mix). Whole .text: " +
         ", ".join(f"{v} {size[v][0]}" for v in VARIANTS) +
         " bytes (bootprof's includes the bootprof runtime linked into the program). Start-up: "
         "bootprof runs " + f"{startup['bootprof'] - startup['baseline']:+.0f}" + " instructions "
         "more than the baseline before main returns (dynamic linking of the runtime, its "
         f"constructor). usdt semaphore at {usdt_sem} (readelf -n).")
L.append("")


def cost(v, w):
    return stat[(v, w)]["delta"]


def verdict(ok):
    return "**met**" if ok else "**not met**"


G = []
bt, ft, ct = cost("bootprof", "throughput"), cost("if_fp", "throughput"), cost("call_empty", "throughput")
G.append(f"- throughput: bootprof per-site cost {bt:+.2f} ticks <= 0.5 x if_fp ({ft:+.2f}) and "
         f"<= 0.5 x call_empty ({ct:+.2f}): {verdict(bt <= 0.5 * ft and bt <= 0.5 * ct)} "
         f"(vs if_fp: {verdict(bt <= 0.5 * ft)}, vs call_empty: {verdict(bt <= 0.5 * ct)})")
for w in ("latency", "lock"):
    s = stat[("bootprof", w)]
    c, fl = s["delta"], s["floor"]
    ok = abs(c) <= fl or s["dlo"] <= 0 <= s["dhi"]
    G.append(f"- {w}: bootprof indistinguishable from baseline (its interval "
             f"[{s['dlo']:+.2f}, {s['dhi']:+.2f}] holds 0, or |{c:+.2f}| <= noise floor {fl:.2f} "
             f"ticks): {verdict(ok)}" +
             ("" if ok or c > 0 else " (bootprof measured FASTER than the baseline)"))
G.append(f"- leaf (no goal set): per-call cost bootprof {cost('bootprof', 'leaf'):+.2f} ticks, "
         f"bootprof_call {cost('bootprof_call', 'leaf'):+.2f}, "
         f"if_fp {cost('if_fp', 'leaf'):+.2f}, usdt {cost('usdt', 'leaf'):+.2f}, call_empty "
         f"{cost('call_empty', 'leaf'):+.2f}, asm_nop {cost('asm_nop', 'leaf'):+.2f}")
extra = {w: ipi[("bootprof", w)] - ipi[("baseline", w)] for w in WORKLOADS}
extra_call = {w: ipi[("bootprof_call", w)] - ipi[("baseline", w)] for w in WORKLOADS}
G.append("- instructions: bootprof <= baseline + 1 per site (the NOP alone): " +
         verdict(all(round(x) <= 1 for x in extra.values())) + " (" +
         ", ".join(f"{w} {x:+.0f}" for w, x in extra.items()) +
         "; the guard's NOP is one of them, anything more is code the compiler moved for the "
         "out-of-line call; bootprof_call, the call in line: " +
         ", ".join(f"{w} {x:+.0f}" for w, x in extra_call.items()) +
         ", its argument set-up and register copies stay in line; asm_nop: " +
         ", ".join(f"{w} {ipi[('asm_nop', w)] - ipi[('baseline', w)]:+.0f}" for w in WORKLOADS) +
         "); nop5x1 - bootprof_call = " +
         ", ".join(f"{ipi[('nop5x1', w)] - ipi[('bootprof_call', w)]:+.0f}" for w in WORKLOADS) +
         " (must be +4: checked)")


def fn_bytes(v):
    return sum(size[v][1].values())


bsz, csz, fsz = fn_bytes("bootprof"), fn_bytes("bootprof_call"), fn_bytes("if_fp")
G.append(f"- size: bootprof's site functions ({bsz} bytes, out-of-line calls included) no larger "
         f"than if_fp's ({fsz}): {verdict(bsz <= fsz)} (bootprof_call {csz}, baseline "
         f"{fn_bytes('baseline')}, usdt {fn_bytes('usdt')}, call_empty {fn_bytes('call_empty')})")
for w in WORKLOADS:
    G.append(f"  - {w}: noise floor {stat[('bootprof', w)]['floor']:.2f} ticks; costs: " +
             ", ".join(f"{v} {cost(v, w):+.2f}" for v in ORDER[1:]))
L.append("Goals:")
L.extend(G)
if quick:
    L.append("")
    L.append("(--quick: the timing figures come from tiny runs and mean nothing; only the checks count.)")
table = "\n".join(L) + "\n"
open("table.md", "w").write(table)
# The same figures for benches/run's summary.
json.dump(dict(quick=bool(quick), rounds=rounds, workloads={
    w: {v: dict(ticks=stat[(v, w)]["med"], cost=stat[(v, w)]["delta"],
                ci=[stat[(v, w)]["dlo"], stat[(v, w)]["dhi"]],
                instr=ipi[("baseline" if v == "baseline2" else v, w)])
        for v in ORDER} for w in WORKLOADS},
    goals=[g for g in G if not g.startswith("  ")]), open("results.json", "w"), indent=1)
print(table)
if problems:
    print(f"{len(problems)} problem(s): see BROKEN above", file=sys.stderr)
    sys.exit(1)
