"""How many texts of one request a model deployment sends to its model at once (``HostedOperator.part_size``): 64,
so that other clients' requests get their turn between the parts, but never less than the model's forward pass,
which a smaller part would cut short (a GPU's 128, a static model's 1,024, a batch size the params set). The real
embedding operator with the packaged MiniLM; the method without Serve around it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from operators import create
from serve.deployments._hosted import FAIR_SHARE, HostedOperator

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("params, size", [({}, FAIR_SHARE), ({"encode_batch_size": 16}, FAIR_SHARE),
                                          ({"encode_batch_size": 256}, 256)])
def test_a_part_is_64_texts_or_one_forward_pass_if_that_is_more(params, size):
    op = create("embed.sentence_transformer", {"model": "all-MiniLM-L6-v2", **params}, step_id="e")
    op.ensure_setup()
    assert HostedOperator.part_size(SimpleNamespace(op=op)) == size
