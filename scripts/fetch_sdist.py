#!/usr/bin/env python3
"""Download one pinned sdist file from the package index, without building it.

    fetch_sdist.py PROJECT FILE SHA256 DEST_DIR

Why not `pip download --no-binary :all:`: pip then prepares the sdist's
metadata, which runs its build backend in an isolated environment with the
newest setuptools the index serves. Since setuptools dropped what
vobject 0.9.9's `setup.cfg` (`version = attr: vobject.VERSION`) relies on,
that fails on a clean machine, although all we want is the archive's .ics
test files. This reads the index's simple page (PEP 503; `PIP_INDEX_URL` or
PyPI), takes the link named FILE, and checks the pinned sha256.
"""

import hashlib
import os
import re
import sys
import urllib.parse
import urllib.request


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    project, name, sha, dest = sys.argv[1:]
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    page_url = f"{index}/{re.sub(r'[-_.]+', '-', project).lower()}/"
    with urllib.request.urlopen(page_url, timeout=120) as r:
        page = r.read().decode("utf-8", "replace")
    links = [urllib.parse.urljoin(page_url, h) for h in re.findall(r'href="([^"]+)"', page)]
    found = [u for u in links if urllib.parse.unquote(urllib.parse.urlparse(u).path).endswith("/" + name)]
    if not found:
        print(f"{name} is not on {page_url}", file=sys.stderr)
        return 1
    with urllib.request.urlopen(found[0].split("#", 1)[0], timeout=300) as r:
        data = r.read()
    got = hashlib.sha256(data).hexdigest()
    if got != sha:
        print(f"{name} from {page_url} has sha256 {got}, not the pinned {sha}", file=sys.stderr)
        return 1
    os.makedirs(dest, exist_ok=True)
    tmp = os.path.join(dest, name + ".part")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(dest, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
