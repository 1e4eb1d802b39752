"""Names that become file names or hosts are whole-string matches: ``$`` also matches before a final newline, so
``evil\\n`` passed as a flow name and was saved as ``evil\\n.yaml`` (a file ``GET /flows`` then reported missing)."""

import pytest

from flows.bench.flowdefs import NAME as BENCH_FLOW_NAME
from flows.store import NAME_PATTERN, check_name, saved_path
from operators._outbound_policy import _HOST_NAME, _NUMERIC_HOST
from operators.errors import SpecError
from operators.store.shard import SHARD_ID
from serve.settings import _DEPLOYMENT_NAME


@pytest.mark.parametrize("pattern, good", [(NAME_PATTERN, "my_flow.v2"), (BENCH_FLOW_NAME, "hybrid"),
                                           (_DEPLOYMENT_NAME, "embedder"), (SHARD_ID, "add-0001"),
                                           (_HOST_NAME, "example.org"), (_NUMERIC_HOST, "10.0.0.1")])
def test_a_name_with_a_final_newline_does_not_match(pattern, good):
    assert pattern.match(good) and not pattern.match(good + "\n")


def test_a_flow_name_with_a_final_newline_is_refused_and_names_no_saved_flow(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    with pytest.raises(SpecError) as refused:
        check_name("evil\n")
    assert refused.value.field == "name"
    assert saved_path("evil\n") is None
