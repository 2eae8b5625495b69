"""What `walltime` and `pairdiff` share: their options and command lines, and one timed run of a
link (its output removed first unless relinking, a pause before it)."""

import os
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass
class Line:
    """The options before the first `--`, and the commands between the `--`s."""

    rounds: int
    relink: bool
    settle: float
    cmds: list[list[str]]


def fail(tool: str, msg: str) -> None:
    print(f"{tool}: {msg}", file=sys.stderr)
    sys.exit(2)


def parse(tool: str, usage: str, args: list[str], rounds: int, settle_ms: int) -> Line:
    """`args` as `[--rounds N] [--relink] [--settle MS] -- COMMAND [-- COMMAND ...]`, with
    `rounds` and `settle_ms` the defaults; an unknown option ends the tool with `usage`."""
    line = Line(rounds, False, settle_ms / 1e3, [])
    while args and args[0] != "--":
        if args[0] == "--rounds" and len(args) > 1 and args[1].isdigit():
            line.rounds, args = int(args[1]), args[2:]
        elif args[0] == "--relink":
            line.relink, args = True, args[1:]
        elif args[0] == "--settle" and len(args) > 1 and args[1].isdigit():
            line.settle, args = int(args[1]) / 1e3, args[2:]
        else:
            fail(tool, f"unknown option {args[0]}\n{usage}")
    for word in args:
        if word == "--":
            line.cmds.append([])
        else:
            line.cmds[-1].append(word)
    line.cmds = [c for c in line.cmds if c]
    return line


def timed(tool: str, cmd: list[str], line: Line) -> float:
    """Runs `cmd` once and returns its wall time in ms: its output (the path after its `-o`)
    removed first, untimed, unless relinking, and `line.settle` waited; a failure ends the tool."""
    out = cmd[cmd.index("-o") + 1] if "-o" in cmd[:-1] else None
    if out and not line.relink and os.path.lexists(out):
        os.unlink(out)
    time.sleep(line.settle)
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = (time.perf_counter() - t) * 1e3
    if p.returncode != 0:
        fail(tool, f"`{' '.join(cmd)}` failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return elapsed
