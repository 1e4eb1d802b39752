"""A real nginx in front of a service on localhost, configured with the ``location`` block that docs/serving.md
("Behind a reverse proxy") gives operators, so the documented lines are the ones the tests run.

nginx is Debian's package (``apt-get install nginx``); a test that needs it skips, saying so, where it is absent."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.serve.conftest import free_port

DOC = Path(__file__).resolve().parents[2] / "docs" / "serving.md"


def nginx_binary() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        pytest.skip("nginx is not installed (apt-get install nginx): the reverse-proxy tests run a real one")
    return found


def documented_location() -> str:
    """The ```nginx block of docs/serving.md's "Behind a reverse proxy" section."""
    section = DOC.read_text().split("### Behind a reverse proxy", 1)[1]
    return re.search(r"```nginx\n(.*?)```", section, re.S).group(1)


@contextmanager
def nginx_in_front(upstream: str, folder: Path, location: str | None = None):
    """nginx on a free port of 127.0.0.1 proxying ``/tessera/`` to ``upstream`` (a base URL) with the documented
    block (its upstream's port replaced), or ``location``: yields the proxy's base URL,
    ``http://127.0.0.1:PORT/tessera``. It compresses every type, as operators often set it: nginx's gzip then holds
    a stream of events until its end, unless the response turns its buffering off."""
    binary, port = nginx_binary(), free_port()
    location = (location or documented_location()).replace("http://127.0.0.1:8000/", f"http://{urlsplit(upstream).netloc}/")
    temp = "".join(f"{kind}_temp_path {folder / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                      "scgi"))
    (folder / "nginx.conf").write_text(
        f"daemon off; worker_processes 1; pid {folder / 'nginx.pid'}; error_log {folder / 'error.log'};\n"
        f"events {{ worker_connections 64; }}\n"
        f"http {{ access_log off; gzip on; gzip_types *; {temp}\n"
        f"server {{ listen 127.0.0.1:{port};\n{location}\n}} }}\n")
    process = subprocess.Popen([binary, "-p", str(folder), "-c", str(folder / "nginx.conf")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}/tessera"
        for _ in range(200):
            assert process.poll() is None, f"nginx did not start: {process.stdout.read()}"
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)
