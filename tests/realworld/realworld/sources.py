"""The programs' sources: takes the program names and hands on their Debian source trees,
unpacked by `apt-get source` under WORK/src (source_dir finds one; jsoncpp's source package is
libjsoncpp). On the way it installs the packages the builds and tests need, and adds a deb-src
entry for the running release when there is none (as root, or through sudo)."""
import os
import re
import shutil
import subprocess
from pathlib import Path

from .common import SRC, Failure, log, sudo

# Packages the builds and tests need, by the command that shows they are there.
NEEDS = {
    "dpkg-source": "dpkg-dev",
    "tclsh": "tcl",
    "/usr/include/tcl/tcl.h": "tcl-dev",
    "/usr/include/zlib.h": "zlib1g-dev",
    "runuser": "util-linux",
    "patch": "patch",
    "valgrind": "valgrind",
    "cmake": "cmake",
    "g++": "g++",
    "perl": "perl",
}
# Debian's source package of a program, where its name is not the program's.
SOURCE_PACKAGE = {"jsoncpp": "libjsoncpp"}


def package(prog):
    return SOURCE_PACKAGE.get(prog, prog)


def have_deb_src():
    files = [Path("/etc/apt/sources.list")] + sorted(Path("/etc/apt/sources.list.d").glob("*"))
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        if re.search(r"^\s*deb-src\s", text, re.M):
            return True
        if f.suffix == ".sources":
            for stanza in text.split("\n\n"):
                m = re.search(r"^Types:(.*)$", stanza, re.M)
                enabled = not re.search(r"^Enabled:\s*no", stanza, re.M | re.I)
                if m and "deb-src" in m.group(1).split() and enabled:
                    return True
    return False


def add_deb_src():
    """Adds deb-src twins of the running release's `deb` entries (deb822 and one-line forms)."""
    stanzas = []
    for f in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in f.read_text().split("\n\n"):
            m = re.search(r"^Types:(.*)$", stanza, re.M)
            if m and "deb" in m.group(1).split() and "debian" in stanza:
                stanzas.append(re.sub(r"^Types:.*$", "Types: deb-src", stanza.strip(), flags=re.M))
    lines = []
    lst = Path("/etc/apt/sources.list")
    if lst.exists():
        for line in lst.read_text().splitlines():
            if re.match(r"^\s*deb\s", line) and "debian" in line:
                lines.append(re.sub(r"^\s*deb\s", "deb-src ", line))
    if not stanzas and not lines:
        raise Failure("no Debian `deb` entry in /etc/apt to derive a deb-src entry from")
    body = ""
    if stanzas:
        body = "# Added by bootprof's tests/realworld/run: apt-get source needs deb-src.\n"
        body += "\n\n".join(stanzas) + "\n"
        target = "/etc/apt/sources.list.d/bootprof-deb-src.sources"
    else:
        body = "\n".join(lines) + "\n"
        target = "/etc/apt/sources.list.d/bootprof-deb-src.list"
    subprocess.run(sudo() + ["tee", target], input=body.encode(), stdout=subprocess.DEVNULL,
                   check=True)
    log(f"added {target}")


def source_dir(prog):
    dirs = sorted(d for d in SRC.glob(f"{package(prog)}-*")
                  if d.is_dir() and (d / "debian").is_dir())
    return dirs[-1] if dirs else None


def install_needs():
    missing = sorted({pkg for what, pkg in NEEDS.items()
                      if not (Path(what).exists() if what.startswith("/") else shutil.which(what))})
    if missing:
        log(f"installing {' '.join(missing)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(sudo() + ["apt-get", "update", "-qq"], env=env, check=True)
        subprocess.run(sudo() + ["apt-get", "install", "-y", "-qq", "--no-install-recommends"]
                       + missing, env=env, check=True, stdout=subprocess.DEVNULL)


def fetch(progs):
    install_needs()
    missing = [p for p in progs if source_dir(p) is None]
    if not missing:
        return
    SRC.mkdir(parents=True, exist_ok=True)
    if not have_deb_src():
        add_deb_src()
        subprocess.run(sudo() + ["apt-get", "update", "-qq"], check=True)
    packages = [package(p) for p in missing]
    log(f"apt-get source {' '.join(packages)}")
    p = subprocess.run(["apt-get", "source", "-qq"] + packages, cwd=SRC,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if p.returncode != 0:
        # A stale package list names versions the mirror no longer has: refresh and retry once.
        subprocess.run(sudo() + ["apt-get", "update", "-qq"], check=True)
        p = subprocess.run(["apt-get", "source", "-qq"] + packages, cwd=SRC,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for prog in missing:
        if source_dir(prog) is None:
            raise Failure(f"apt-get source {package(prog)} gave no source tree in {SRC}: "
                          f"{p.stderr.decode(errors='replace').strip()[-400:]}")
