"""The web UI: three static files under ``serve/ui`` served at ``/ui/``, and ``/`` sending a browser there.

The page is plain HTML, CSS and JavaScript with no build step and no package from npm: it calls the same
routes any client calls (``/v1/search``, ``/task/*``, ``/tasks``, ``/v1/chat/completions``, ``/v1/models``),
so it can do nothing an API key could not, and it holds no data. That is why ``serve.auth`` lets ``/`` and
``/ui/`` through without a key; every request the page makes carries the key typed into it.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

UI_DIR = Path(__file__).resolve().parent / "ui"
#: Where the page lives below the app's route prefix.
UI_PATH = "/ui"

router = APIRouter(tags=["ui"])


@router.get("/", include_in_schema=False)
def home() -> RedirectResponse:
    """A browser opening the service's address lands on the page (relative, so a route prefix is kept)."""
    return RedirectResponse("ui/", status_code=307)


def static_files() -> StaticFiles:
    return StaticFiles(directory=UI_DIR, html=True)
