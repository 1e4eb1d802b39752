"""Every registered operator has a contract test (a subclass of operators.testing.OperatorContract) and a scope the
executors batch by."""

import ast
from pathlib import Path

from operators.plugins import _scope_problem
from operators.registry import all_operators, skipped_modules

TESTS = Path(__file__).resolve().parent


def contract_tested_operators() -> set[str]:
    names = set()
    for path in TESTS.rglob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        if "OperatorContract" not in text:  # no subclass of it: not parsed (most test files)
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                getattr(b, "id", getattr(b, "attr", None)) == "OperatorContract" for b in node.bases
            ):
                for stmt in node.body:
                    if (isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", None) == "operator_name"
                            and isinstance(stmt.value, ast.Constant)):
                        names.add(stmt.value.value)
    return names


def test_every_operator_has_a_contract_test():
    missing = sorted(set(all_operators()) - contract_tested_operators())
    assert not missing, f"operators without an OperatorContract test: {missing}"


def test_no_operator_module_failed_to_import():
    assert skipped_modules() == {}


def test_every_operators_scope_is_one_the_executors_batch_by():
    """A plugin's scope is checked when it registers (``_scope_problem``); a built-in's only here, at no import cost:
    one such as ``rows`` registered and ran, batched as no scope says."""
    wrong = {name: problem for name, cls in all_operators().items() if (problem := _scope_problem(cls))}
    assert not wrong, wrong
