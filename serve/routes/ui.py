"""The web UI: the static files under ``serve/ui`` (a page, its style, its scripts) served at ``/ui/``, and ``/``
sending a browser there.

The page is plain HTML, CSS and JavaScript with no build step and no package from npm: it calls the same
routes any client calls (``/v1/search``, ``/task/*``, ``/tasks``, ``/flows``, ``/v1/chat/completions``,
``/v1/models``), so it can do nothing an API key could not, and it holds no data. That is why
``serve.security.auth`` lets ``/`` and ``/ui/`` through without a key; every request the page makes carries the key
typed into it.

The files are sent with a Content-Security-Policy that allows only the page's own files and calls to the same
origin: the script builds every element from the service's text as text, and the policy is the second fence
should a future change forget.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

from serve.security.auth import UI_PATH

UI_DIR = Path(__file__).resolve().parent.parent / "ui"

router = APIRouter(tags=["ui"])


@router.get("/", include_in_schema=False)
@router.get(UI_PATH, include_in_schema=False)
def home(request: Request) -> RedirectResponse:
    """A browser opening the service's address, or the page's without its last ``/`` (the app does not redirect
    slashes: serve/api.py), lands on the page, below the app's route prefix if it has one."""
    return RedirectResponse(request.scope.get("root_path", "").rstrip("/") + UI_PATH + "/", status_code=307)


#: Sent with every file of the page.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class UiFiles(StaticFiles):
    """The page's files, with the security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def static_files() -> StaticFiles:
    return UiFiles(directory=UI_DIR, html=True)
