"""embed.sentence_transformer: contract and behaviour with the packaged MiniLM."""

import numpy as np
import pyarrow as pa
import pytest

from operators import create
from operators.embed.sentence_transformer import arrow_to_vectors
from operators.models import ModelNotFoundError, resolve_model_path
from operators.testing import OperatorContract, sample_results


@pytest.mark.integration
class TestEmbedContract(OperatorContract):
    operator_name = "embed.sentence_transformer"

    def make_input(self, n_queries: int = 3, per_query: int = 2) -> pa.Table:
        return sample_results(n_queries, per_query)  # two rows a query keep the encodes few on CPU


@pytest.mark.integration
def test_vectors_are_normalised_and_match_direct_encode():
    table = sample_results(2, 4)
    op = create("embed", {"title_column": "title"})
    vectors = arrow_to_vectors(op(table).column("vector"))
    assert vectors.shape == (table.num_rows, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    from operators.models import load_sentence_transformer

    titles, texts = table.column("title").to_pylist(), table.column("text").to_pylist()
    direct = load_sentence_transformer().encode(
        [f"{t}. {x}" if t else x for t, x in zip(titles, texts)], normalize_embeddings=True)
    np.testing.assert_allclose(vectors, direct, atol=1e-5)


@pytest.mark.integration
def test_related_texts_are_closer_than_unrelated():
    op = create("embed")
    out = op(pa.table({"text": ["bees make honey", "honey is produced by bees", "the stock market fell"]}))
    v = arrow_to_vectors(out.column("vector"))
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3


def test_missing_model_fails_at_once_with_what_to_do(tmp_path):
    import pytest

    with pytest.raises(ModelNotFoundError, match="nothing is downloaded"):
        resolve_model_path("org/some-model-not-here")
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve_model_path(str(tmp_path))


@pytest.mark.integration
def test_half_precision_runs_the_model_in_it_and_hands_on_float32_vectors_close_to_full():
    import torch

    from operators.models import load_sentence_transformer

    table = sample_results(2, 4)
    full = arrow_to_vectors(create("embed", {"title_column": "title"})(table).column("vector"))
    op = create("embed", {"title_column": "title", "dtype": "bfloat16"})
    half = op(table)
    assert half.schema.field("vector").type == pa.list_(pa.float32(), 384)
    assert next(op._model.parameters()).dtype == torch.bfloat16
    assert next(load_sentence_transformer().parameters()).dtype == torch.float32, "the float32 model is its own"
    cosines = (arrow_to_vectors(half.column("vector")) * full).sum(axis=1)
    assert cosines.min() > 0.99 and not np.allclose(cosines, 1.0, atol=1e-7)  # close, and really computed in bf16


def test_a_precision_the_backend_or_model_cannot_take_is_refused_naming_it():
    import pytest

    from operators.errors import ParamsError
    from operators.models.sentence_transformers import BackendNotAvailableError

    with pytest.raises(ParamsError) as err:
        create("embed", {"dtype": "int4"})
    assert err.value.field == "params.dtype"
    with pytest.raises(BackendNotAvailableError, match="dtype 'float16' applies to backend 'torch'"):
        create("embed", {"dtype": "float16", "backend": "onnx"})(pa.table({"text": ["bees"]}))
