"""Ray's C++ lines that a Tessera user cannot act on, kept off the terminal of a ``tessera`` process.

Ray 2.60 logs an error line from the driver's core worker for every Ray Data actor it starts:
"Actor ... has constructor arguments in the object store and max_restarts > 0". Ray Data itself
passes those arguments (its context and transformer, as object refs); nothing in a flow causes it
and nothing a user does removes it (ray-project/ray#57733; ``max_restarts=0`` would drop the actors'
fault tolerance, and ``RAY_BACKEND_LOG_LEVEL`` would silence real errors of every Ray process too).

C++ writes to file descriptor 2 directly, so Python's logging cannot drop it. A ``tessera`` process
therefore routes descriptor 2 through a small filter process that copies everything through, byte
for byte and at once, except whole lines that match ``KNOWN_NOISE``. Python's ``sys.stderr`` keeps
writing to the terminal itself (progress bars still see a terminal). Being a process of its own,
the filter outlives a crash of the command and still passes its last words on.
``TESSERA_RAW_STDERR=1`` turns it off. Remove it once Ray stops logging the line.

A Jupyter kernel passes what its descriptor 2 gets into the running cell, so a notebook's Ray run printed the line
in red under the cell, once per actor. There ``ensure_ray`` turns the filter on as it starts Ray, keeping
``sys.stderr`` (the kernel's stream, which writes to the cell itself); the filter writes into the kernel's pipe.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading

#: Whole lines the filter drops: Ray's C++ log prefix, then the message of ray-project/ray#57733.
KNOWN_NOISE = re.compile(
    rb"^\[[^\]]*\] core_worker\.cc:\d+: Actor with class name: '[^']*' and ID: '[0-9a-f]+' has constructor "
    rb"arguments in the object store and max_restarts > 0\. .*$")

#: The filter, run as ``python -c``: a line that starts like a C++ log line ("[2026-...") is held until
#: its end and dropped if it is noise; anything else passes through as soon as it is read. A terminal's
#: Ctrl-C (or `timeout`'s SIGTERM) reaches the whole process group, the filter too: it ignores it and goes
#: on passing the command's last words (its "cancelled" line) until the command closes the pipe.
_FILTER = r"""
import os, re, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the command's to handle; this ends with its pipe
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as is `timeout`'s SIGTERM to the whole group
noise = re.compile(sys.argv[1].encode("latin-1"))
held, passing = b"", False
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    data = held + chunk
    held, out = b"", []
    while data:
        if passing:
            end = data.find(b"\n")
            out.append(data if end < 0 else data[:end + 1])
            data, passing = (b"", True) if end < 0 else (data[end + 1:], False)
        elif data.startswith(b"["):
            end = data.find(b"\n")
            if end < 0:
                held, data = data, b""
            else:
                line, data = data[:end + 1], data[end + 1:]
                if not noise.match(line.rstrip(b"\r\n")):
                    out.append(line)
        else:
            passing = True
    if out:
        os.write(1, b"".join(out))
if held:
    os.write(1, held)
"""


def filter_known_ray_noise(*, python_stderr: bool = True) -> None:
    """Route this process's descriptor 2 through the filter (once; not when ``TESSERA_RAW_STDERR`` is set), and
    ``sys.stderr`` straight to where descriptor 2 went unless not ``python_stderr`` (a Jupyter kernel's stream)."""
    if os.environ.get("TESSERA_RAW_STDERR", "") not in ("", "0") or getattr(filter_known_ray_noise, "_on", False):
        return
    try:
        sys.stderr.flush()
        terminal = os.dup(2)
        read_end, write_end = os.pipe()
        with _ctrl_c_ignored():  # inherited through exec: the filter ignores a Ctrl-C from its first instruction
            child = subprocess.Popen([sys.executable, "-c", _FILTER, KNOWN_NOISE.pattern.decode("latin-1")],
                                     stdin=read_end, stdout=terminal, stderr=terminal, close_fds=True)
    except OSError:  # no descriptors or no process to spare: the line stays, nothing else changes
        return
    os.close(read_end)
    os.dup2(write_end, 2)
    os.close(write_end)
    filter_known_ray_noise._on = True  # type: ignore[attr-defined]
    atexit.register(_drain, child, terminal)
    if not python_stderr:
        return
    # Python's own writes go straight to the terminal (still a terminal for progress bars and colours).
    sys.stderr = open(terminal, "w", buffering=1, encoding=sys.stderr.encoding, errors="backslashreplace",
                      closefd=False)


@contextlib.contextmanager
def _ctrl_c_ignored():
    """SIGINT ignored while the filter is started, so that it starts ignoring it: a Ctrl-C in the moment before
    its own ``signal.signal`` line ran killed it, and the command's last words with it (a flaky test found it).
    Python keeps an ignored SIGINT it inherits. Only the main thread may change a handler; elsewhere, as before."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _drain(child: subprocess.Popen, terminal: int) -> None:
    """At exit (after Ray's own shutdown, registered later): hand descriptor 2 back and let the filter finish
    writing, so that nothing it holds appears after the shell's prompt."""
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os.dup2(terminal, 2)
    try:
        child.wait(timeout=1)
    except subprocess.TimeoutExpired:  # a Ray process still holds the pipe: the filter ends when it does
        pass
