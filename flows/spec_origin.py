"""Where a spec read from a file came from: the file, and the line of each of its keys, so that an error found when
the flow is built (an unknown operator or parameter, a missing input, a cycle) names the file and the line, as a
syntax error does. Why apart from ``flows.specfile``: that module reads the spec's values; this one reads the
spec's text again for its lines alone, and only for a spec from a file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from operators.errors import OperatorError, SpecError, TesseraError


def key_lines(text: str) -> dict[str, int]:
    """The 1-based line of each key of a YAML or JSON spec, by its dotted path (``steps.bm25.params.k``; a list's
    items by their index, ``steps.red.inputs.0``). Empty where the text does not compose (it was read already)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}
    stack: list[tuple[Node | None, str]] = [(root, "")]
    while stack:
        node, prefix = stack.pop()
        if isinstance(node, MappingNode):
            for key, value in node.value:
                if isinstance(key, ScalarNode):
                    path = f"{prefix}{key.value}"
                    lines.setdefault(path, key.start_mark.line + 1)
                    stack.append((value, path + "."))
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                lines.setdefault(f"{prefix}{index}", item.start_mark.line + 1)
                stack.append((item, f"{prefix}{index}."))
    return lines


@dataclass(frozen=True)
class SpecOrigin:
    """A spec's file and the lines of its keys (``key_lines``)."""

    path: Path
    lines: dict[str, int] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, path: Path) -> "SpecOrigin":
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError):
            return cls(path)
        return cls(path, key_lines(text))

    def line_of(self, field: str | None, step: str | None) -> int | None:
        """The line of the error's field where the file holds it (``steps.STEP.params.k``; a step's ``inputs`` as
        ``steps.STEP.inputs``; ``output``), else of its step: a field the file leaves out (a required param, one set
        in Python) is the step's to fix."""
        full = f"steps.{step}.{field}" if step and field and not field.startswith("steps.") else field
        paths = [full, field]
        if step and full and full.startswith(f"steps.{step}.params"):  # a mosaicRAG request's "1": {parameters}
            paths.append(f"{step}.parameters{full.removeprefix(f'steps.{step}.params')}")
        paths += [f"steps.{step}", step] if step else []
        return next((self.lines[path] for path in paths if path in self.lines), None)

    def where(self, field: str | None, step: str | None) -> str:
        line = self.line_of(field, step)
        return f"{self.path}, line {line}" if line is not None else str(self.path)

    def locate(self, err: TesseraError) -> TesseraError:
        """``err`` again (its class and attributes kept), its message led by the file and the line; one that names
        the file already is kept as it is."""
        if not isinstance(err, (SpecError, OperatorError)) or err.message.startswith(str(self.path)):
            return err
        located = type(err).__new__(type(err))
        located.__dict__.update(err.__dict__)
        located.message = f"{self.where(err.field, err.step)}: {err.message}"
        located.args = (str(located),)
        return located
