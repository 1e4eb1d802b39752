"""``tessera models prune [--yes] [--json]``: list (and with ``--yes`` remove) what Tessera made in
``$TESSERA_HOME/models`` that nothing reads: checkpoints ``tessera train`` kept aside when it replaced them, and
ONNX query-encoder exports no longer read (``flows.train.prune``)."""

from __future__ import annotations

from flows.commands._support import EXIT_OK, console, escape, print_json
from operators.byte_sizes import format_bytes


def prune(yes: bool, as_json: bool) -> int:
    from flows.train.prune import prunable, remove
    from operators.models.references import models_dir

    folder = models_dir()
    found = prunable(folder)
    counted = _counted(found)  # before they are removed: a partial file is a file, the rest folders
    for item in found if yes else []:
        remove(item)
    total = sum(item.size for item in found)
    if as_json:
        print_json({"folder": str(folder), "removed": yes, "bytes": total,
                    "items": [{"path": str(i.path), "kind": i.kind, "why": i.why, "bytes": i.size} for i in found]})
        return EXIT_OK
    out = console()
    if not found:
        out.print(f"nothing to prune in {escape(str(folder))}")
        return EXIT_OK
    from rich.table import Table

    table = Table(title=f"{'removed' if yes else 'would remove'} from {escape(str(folder))}", title_justify="left",
                  title_style="bold")
    for col in ("name", "kind", "size", "why"):
        table.add_column(col, overflow="fold", justify="right" if col == "size" else "left")
    for item in found:  # an export's partial file with its export folder: which one it is in
        table.add_row(escape(str(item.path.relative_to(folder))), item.kind, format_bytes(item.size), escape(item.why))
    out.print(table)
    out.print(f"{'removed' if yes else 'total'}: {counted}, {format_bytes(total)}"
              + ("" if yes else " (tessera models prune --yes removes them)"))
    return EXIT_OK


def _counted(found: list) -> str:
    """``2 folders``, ``1 folder, 1 file``: what the items are (an export's partial file is a file)."""
    files = sum(1 for item in found if not item.path.is_dir())
    folders = len(found) - files
    parts = [f"{n} {word}{'' if n == 1 else 's'}" for n, word in ((folders, "folder"), (files, "file")) if n]
    return ", ".join(parts)
