"""A Tessera error as a notebook cell shows it: the caller's own frames and the error, not Tessera's.

IPython showed a refused argument (``Flow.load("hybrd")``, ``index.search(q, method="nope")``) with every frame of
Tessera's checks under the cell's line, 30 to 60 lines of its internals above the one line that says what to fix
(and a Ray run's error with the frames that follow the run). IPython asks an exception for ``_render_traceback_``
first: ``TesseraError`` gives it this short one, as ``tessera`` prints one line. An error raised from another
(``OperatorError`` from a plugin's ``KeyError``) keeps IPython's whole traceback, the cause's frames being the
caller's to read; so does every error while ``TESSERA_DEBUG`` is on (``os.environ["TESSERA_DEBUG"] = "1"``), as
the command's ``--debug``.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

#: Tessera's packages: a frame in a file under one of them is Tessera's own.
OURS = tuple(str(Path(__file__).resolve().parent.parent / name) + os.sep for name in ("flows", "operators", "serve"))
#: What the short traceback's last line says about the frames it leaves out.
LEFT_OUT = "(Tessera's own frames are left out; os.environ['TESSERA_DEBUG'] = '1' shows them)"


def wanted(err: BaseException) -> bool:
    """Whether IPython should show ``err`` short: in IPython, not debugging, and no cause of another's to show."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    debug = os.environ.get("TESSERA_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")
    return shell is not None and not debug and err.__cause__ is None and err.__traceback__ is not None


def short_traceback(err: BaseException) -> list[str]:
    """IPython's traceback of ``err`` cut at the first frame of Tessera's: the cells and functions that called it,
    then the error's line, then ``LEFT_OUT`` where frames were left out (with the exception Tessera's code was
    handling when it raised this one). The error keeps its whole traceback (``%debug``)."""
    frames = []
    tb = err.__traceback__
    while tb is not None and not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(OURS):
        frames.append(tb)
        tb = tb.tb_next
    shell = sys.modules["IPython"].get_ipython()
    if not frames:  # no frame of the caller's (an error kept and raised again): nothing to cut to
        return shell.InteractiveTB.structured_traceback(type(err), err, err.__traceback__, tb_offset=1)
    cut = None
    for kept in reversed(frames):
        cut = types.TracebackType(cut, kept.tb_frame, kept.tb_lasti, kept.tb_lineno)
    suppressed = err.__suppress_context__
    err.__suppress_context__ = suppressed or tb is not None
    try:
        lines = shell.InteractiveTB.structured_traceback(type(err), err, cut, tb_offset=1)
    finally:
        err.__suppress_context__ = suppressed
    return [*lines, LEFT_OUT] if tb is not None else lines
