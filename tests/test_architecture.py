"""The house, drawn from the imports: no circles, each floor importing only the floors below it.

``serve -> flows -> operators``; inside ``flows``, ``commands`` (the CLI) -> the jobs
(``train`` -> ``bench`` -> ``ingestion``) -> the engine; ``flows.api`` is a front door
beside the CLI. Operators know nothing of Ray, Serve, FastAPI or the engine. Inside ``serve``,
the top level holds the entry points and the settings, everything else a folder by subject;
``serve.http`` (the plumbing) is the floor, and the routers (``serve.routes``) are ``serve.api``'s
alone. Every import counts, including those inside functions. The graph comes from grimp
(import-linter's).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("flows", "operators", "serve")
JOBS = ("flows.train", "flows.bench", "flows.ingestion")  # each may import the ones after it
#: The job entry points (``python -m ...``): thin files that may import the CLI.
ENTRY_POINTS = {"flows.__main__", "flows.cli", "flows.run.__main__", "flows.ingest.__main__", "flows.bench.__main__",
                "flows.train.__main__"}
FRONT_DOORS = ("flows.commands", "flows.api", "flows.run", "flows.ingest", "flows.__main__")
MAX_LINES = 400
#: serve's top level: the app and its ingress (``serve.app:build_app``, ``serve.api:app``), the service they hold, the
#: settings (``python -m serve.check_args``) and the model API's bodies; any other module goes into a folder.
SERVE_TOP = {"serve.api", "serve.app", "serve.service", "serve.settings", "serve.service_settings", "serve.check_args",
             "serve.schemas", "serve.token_ids", "serve.cohere_embed", "serve.health"}
SERVE_FOLDERS = {"chat", "deployments", "http", "indices", "routes", "runs", "security", "tasks"}


@pytest.fixture(scope="module")
def graph():
    """The graph of the repository's packages. grimp finds a package through ``sys.modules`` first, and pytest's
    importlib mode may have registered the test package ``tests/serve`` as ``serve`` in this worker: while the
    graph is built, the names resolve from the repository's root."""
    shadowed = {name: sys.modules.pop(name) for name in PACKAGES if name in sys.modules}
    sys.path.insert(0, str(REPO))
    try:
        return grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)
    finally:
        sys.path.remove(str(REPO))
        sys.modules.update(shadowed)


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def imports(graph, importer_in: str, imported_in: str, *, exact: bool = False) -> list[str]:
    """Direct imports from modules in ``importer_in`` (that module alone if ``exact``) to modules in
    ``imported_in``, with line numbers."""
    found = []
    for importer in sorted(m for m in graph.modules if (m == importer_in if exact else within(m, importer_in))):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if within(imported, imported_in) and importer not in ENTRY_POINTS:
                lines = [d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported)]
                found.append(f"{importer} -> {imported} (line {', '.join(map(str, lines))})")
    return found


def test_no_import_circles(graph):
    circles = []
    for module in sorted(m for m in graph.modules if any(within(m, p) for p in PACKAGES)):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back:
                circles.append(" -> ".join((module, *back)))
    assert not circles, "import circles (move the shared code down, do not hide the import):\n" + "\n".join(circles)


def test_operators_know_nothing_of_ray_serve_or_the_engine(graph):
    for outside in ("ray", "fastapi", "flows", "serve"):
        assert imports(graph, "operators", outside) == []


def test_the_engine_never_imports_serve(graph):
    assert imports(graph, "flows", "serve") == []


def test_only_entry_points_import_the_front_doors(graph):
    for door in FRONT_DOORS:
        importers = {m for m in graph.find_modules_that_directly_import(door)} if door in graph.modules else set()
        for module in sorted(m for m in graph.modules if within(m, door)):
            importers |= graph.find_modules_that_directly_import(module)
        outside = sorted(m for m in importers if not within(m, door) and m not in ENTRY_POINTS)
        assert outside == [], f"{door} is imported by {outside}"


def test_jobs_import_only_later_jobs_and_the_engine(graph):
    for i, job in enumerate(JOBS):
        for earlier in JOBS[:i]:
            assert imports(graph, job, earlier) == []


def test_the_engine_imports_no_job(graph):
    engine = sorted(m for m in graph.modules if within(m, "flows")
                    and not any(within(m, p) for p in (*JOBS, *FRONT_DOORS)))
    assert "flows.spec" in engine and "flows.executors.ray_data" in engine
    for module in engine:
        for job in JOBS:
            assert imports(graph, module, job, exact=True) == [], f"{module} imports the job {job}"


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(REPO)): n for package in PACKAGES for p in (REPO / package).rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these modules (over {MAX_LINES} lines): {long}"


def private_imports(graph) -> set[tuple[str, str]]:
    """``(importer, module.name)`` for each ``from module import _name`` between the packages where ``_name`` is not
    a module (a package's private module is its own package's to use), read from grimp's import details; a statement
    that goes on past its first line is read whole from its file. The name imported counts, not the importer's alias
    for it (``import chunks as _chunks`` imports a public name)."""
    found, lines = set(), {}
    for importer in (m for m in graph.modules if m.split(".")[0] in PACKAGES):
        for imported in (m for m in graph.find_modules_directly_imported_by(importer) if m.split(".")[0] in PACKAGES):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                line = detail["line_contents"]
                if not line.startswith(f"from {imported} import "):
                    continue
                try:
                    statement = ast.parse(line)
                except SyntaxError:  # it goes on ("(" or "\\"): its lines up to the first that ends it
                    if importer not in lines:
                        file = REPO.joinpath(*importer.split("."))
                        lines[importer] = (file / "__init__.py" if file.is_dir() else file.with_suffix(".py")) \
                            .read_text(encoding="utf-8").splitlines()
                    rest = lines[importer][detail["line_number"]:]
                    statement = next(tree for end in range(1, len(rest) + 1)
                                     if (tree := _parsed("\n".join([line, *rest[:end]]))) is not None)
                names = [alias.name for alias in statement.body[0].names if alias.name.startswith("_")]
                found |= {(importer, f"{imported}.{name}") for name in names
                          if f"{imported}.{name}" not in graph.modules}
    return found


def _parsed(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def test_no_module_imports_another_modules_private_name(graph):
    """A module's private name is its own to change: ``first_ingest`` imported ``pending._read_json``, which a rename
    in ``pending`` would have broken unseen."""
    found = sorted(private_imports(graph))
    assert found == [], f"make these names public (or import a public one): {found}"


def test_serve_top_level_holds_only_the_entry_points_and_settings(graph):
    top = {m for m in graph.modules if m.count(".") == 1 and m.startswith("serve.")}
    folders = {m.split(".")[1] for m in graph.modules if m.count(".") == 1 and m.startswith("serve.")
               and (REPO / "serve" / m.split(".")[1]).is_dir()}
    assert top - {f"serve.{f}" for f in folders} == SERVE_TOP, "put a new serve module in the folder of its subject"
    assert folders == SERVE_FOLDERS, "a new serve folder: add it to docs/serving.md's layout and to SERVE_FOLDERS"


def test_serve_http_is_the_floor(graph):
    assert [i for i in imports(graph, "serve.http", "serve") if " -> serve.http" not in i] == []


def test_only_the_ingress_imports_the_routers(graph):
    routers = [m for m in graph.modules if within(m, "serve.routes")]
    importers = {f"{m} -> {r}" for r in routers for m in graph.find_modules_that_directly_import(r)
                 if not within(m, "serve.routes") and m != "serve.api"}
    assert not importers, "only serve.api includes the routers: move what they share down"


#: Where each call takes its encoding as a positional argument.
ENCODING_AT = {"read_text": 0, "write_text": 1, "open": 3}


def text_io_without_encoding(tree: ast.Module) -> list[int]:
    """Lines of ``open(...)`` in text mode, ``.read_text()`` and ``.write_text()`` that name no ``encoding``: they use
    the locale's encoding (ASCII or Latin-1 under some locales), where Tessera's files (JSON, YAML, JSONL in any
    language) are UTF-8."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or any(k.arg == "encoding" for k in node.keywords):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name in ("read_text", "write_text") and isinstance(node.func, ast.Attribute):
            if len(node.args) <= ENCODING_AT[name]:
                found.append(node.lineno)
        elif name == "open" and isinstance(node.func, ast.Name) and len(node.args) <= ENCODING_AT[name]:
            mode = next((k.value for k in node.keywords if k.arg == "mode"), node.args[1:2] and node.args[1])
            if not mode or (isinstance(mode, ast.Constant) and "b" not in str(mode.value)):
                found.append(node.lineno)
    return found


def test_text_files_are_read_and_written_as_utf8():
    found = {f"{p.relative_to(REPO)}:{line}" for package in (*PACKAGES, "benchmarks")
             for p in (REPO / package).rglob("*.py")
             for line in text_io_without_encoding(ast.parse(p.read_text(encoding="utf-8")))}
    assert not found, f"name encoding='utf-8' (or open in binary) at: {sorted(found)}"
