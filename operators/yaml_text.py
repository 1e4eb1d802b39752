"""PyYAML's errors said on one line, for the files Tessera reads as YAML (flow specs, the models file): its own text
spreads over lines, with ``in "<unicode string>"`` and a snippet under a caret, and names a tab only as a character
"that cannot start any token"."""

from __future__ import annotations

import yaml


def tab_hint(err: BaseException) -> str:
    """What to do about a tab, which PyYAML names only as "found character '\\t' that cannot start any token"."""
    problem = getattr(err, "problem", None) or ""
    return "; YAML indents with spaces, not tabs: replace the tab with spaces" if "'\\t'" in problem else ""


def yaml_problem(err: BaseException) -> str:
    """PyYAML's problem and where (line and column), on one line, with the tab's hint."""
    mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
    if mark is None or not problem:
        return " ".join(str(err).split())
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1}){tab_hint(err)}"


class DaysAsWritten(yaml.SafeLoader):
    """PyYAML's safe loader, but a scalar that looks like a date and names no day (``2024-02-30``, ``2021-13-01``) is
    its text, as if quoted: PyYAML raised a bare ``ValueError`` for it (an internal error of ``tessera run``), where
    the text reaches the check that names its field (a filter's ``date_from: must be a valid date``)."""

    def construct_yaml_timestamp(self, node):
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError:
            return self.construct_scalar(node)


DaysAsWritten.add_constructor("tag:yaml.org,2002:timestamp", DaysAsWritten.construct_yaml_timestamp)
