"""analyze.sentiment: contract, prototype accuracy on obvious sentences, the NRC lexicon, a real classifier folder."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from operators import create
from operators.analyze._emotions import DEFAULT_PROTOTYPES, EMOTIONS
from operators.errors import OperatorError, ParamsError
from operators.models import ModelNotFoundError, load_sentence_transformer, resolve_model_path
from operators.testing import OperatorContract, sample_results

#: Two sentences per emotion, written for this test (none is a prototype sentence).
OBVIOUS = [
    ("My grandmother passed away last week and I still can't stop crying.", "sadness"),
    ("Nobody came to my birthday party and I spent the evening alone.", "sadness"),
    ("We won the championship and everyone was laughing and celebrating!", "joy"),
    ("I got the job offer today, this is the best day of my life.", "joy"),
    ("I can't wait to see my wife again, she means the world to me.", "love"),
    ("He held my hand and kissed me, and my heart melted.", "love"),
    ("The airline lost my luggage again and the staff just shrugged, I'm fuming.", "anger"),
    ("How dare they lie to my face like that, I want to scream at them.", "anger"),
    ("I heard footsteps behind me in the dark alley and my heart was pounding.", "fear"),
    ("The doctor called about my test results and I'm terrified it's cancer.", "fear"),
    ("I opened the door and all my friends jumped out, I had no idea!", "surprise"),
    ("I never expected to find a hundred dollar bill in my old jacket.", "surprise"),
]


@pytest.mark.integration
class TestSentimentContract(OperatorContract):
    operator_name = "analyze.sentiment"

    def make_input(self, n_queries: int = 3, per_query: int = 2) -> pa.Table:
        return sample_results(n_queries, per_query)


def texts_table(texts: list[str | None]) -> pa.Table:
    return pa.table({"docno": [f"d{i}" for i in range(len(texts))], "text": pa.array(texts, pa.string())})


@pytest.mark.integration
def test_prototypes_label_obvious_sentences():
    out = create("analyze.sentiment")(texts_table([text for text, _ in OBVIOUS]))
    predicted = out.column("emotion").to_pylist()
    correct = sum(p == gold for p, (_, gold) in zip(predicted, OBVIOUS))
    assert correct >= 10, f"{correct}/12 correct: {list(zip(predicted, [g for _, g in OBVIOUS]))}"  # measured: 11/12


@pytest.mark.integration
def test_prototype_scores_are_a_softmax_of_mean_cosine_similarity():
    texts = [OBVIOUS[0][0], OBVIOUS[6][0]]
    out = create("analyze.sentiment", {"temperature": 0.1})(texts_table(texts))
    model = load_sentence_transformer()
    vectors = model.encode(texts, convert_to_numpy=True).astype(np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = []
    for label in EMOTIONS:
        prototypes = model.encode(DEFAULT_PROTOTYPES[label], convert_to_numpy=True).astype(np.float64)
        prototypes /= np.linalg.norm(prototypes, axis=1, keepdims=True)
        similarity.append((vectors @ prototypes.T).mean(axis=1))
    logits = np.stack(similarity, axis=1) / 0.1
    expected = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    got = np.array([[row[label] for label in EMOTIONS] for row in out.column("emotion_scores").to_pylist()])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert out.column("emotion").to_pylist() == [EMOTIONS[i] for i in expected.argmax(axis=1)]


@pytest.mark.integration
def test_empty_texts_get_null_and_repeated_texts_the_same_scores():
    text = OBVIOUS[2][0]
    out = create("analyze.sentiment")(texts_table([text, None, "   ", text]))
    labels, scores = out.column("emotion").to_pylist(), out.column("emotion_scores").to_pylist()
    assert labels[1] is None and labels[2] is None and scores[1] is None and scores[2] is None
    assert labels[0] == labels[3] == "joy" and scores[0] == scores[3]
    assert list(scores[0]) == list(EMOTIONS) and abs(sum(scores[0].values()) - 1) < 1e-9


@pytest.mark.integration
def test_prototypes_and_labels_are_editable():
    params = {"prototypes": {"weather": ["It is raining and windy.", "The forecast says snow tomorrow."],
                             "cooking": ["Stir the sauce and add salt.", "Bake the bread for forty minutes."]},
              "output_column": "topic", "scores_column": "topic_scores"}
    op = create("analyze.sentiment", params)
    assert op.produces() == {"topic": "chip", "topic_scores": "data"}
    out = op(texts_table(["A thunderstorm is coming this afternoon.", "Fry the onions in butter."]))
    assert out.column("topic").to_pylist() == ["weather", "cooking"]
    assert out.schema.field("topic_scores").type == pa.struct([("weather", pa.float64()), ("cooking", pa.float64())])


@pytest.mark.integration
def test_lower_temperature_sharpens_scores_but_keeps_the_label():
    table = texts_table([OBVIOUS[8][0]])
    warm = create("analyze.sentiment", {"temperature": 1.0})(table)
    cold = create("analyze.sentiment", {"temperature": 0.02})(table)
    assert warm.column("emotion").to_pylist() == cold.column("emotion").to_pylist() == ["fear"]
    assert max(cold.column("emotion_scores")[0].as_py().values()) > max(warm.column("emotion_scores")[0]
                                                                       .as_py().values()) + 0.3


# -- lexicon -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nrc() -> dict[str, list[str]]:
    """The NRC lexicon as nrclex ships it, read here straight from the package's JSON file."""
    pytest.importorskip("nrclex", reason="method 'lexicon' needs nrclex (pip install tessera[lexicon])")
    from importlib import resources

    return json.loads(resources.files("nrclex.data").joinpath("nrc_en.json").read_text(encoding="utf-8"))


def test_lexicon_scores_are_shares_of_nrc_emotion_tags(nrc):
    words = ["abandon", "furious", "happy", "danger"]
    out = create("analyze.sentiment", {"method": "lexicon"})(texts_table([" and ".join(words).upper() + "!"]))
    tags = [tag for word in words for tag in nrc[word] if tag in EMOTIONS]
    expected = {label: tags.count(label) / len(tags) for label in EMOTIONS}
    got = out.column("emotion_scores")[0].as_py()
    assert got == pytest.approx(expected)
    assert out.column("emotion")[0].as_py() == max(EMOTIONS, key=lambda label: (expected[label],
                                                                                -EMOTIONS.index(label)))


def test_lexicon_finds_inflected_forms_and_has_no_love(nrc):
    assert "loved" not in nrc and "joy" in nrc["love"]
    out = create("analyze.sentiment", {"method": "lexicon"})(texts_table(
        ["She loved him.", "The table is brown.", "I adore you, darling"]))
    assert out.column("emotion").to_pylist()[:2] == ["joy", None]  # 'loved' -> 'love' (joy); no emotion word
    assert out.column("emotion_scores")[1].as_py() is None
    assert out.column("emotion_scores")[2].as_py()["love"] == 0.0  # NRC has no love


def test_lexicon_additions_replace_nrc_entries(nrc):
    op = create("analyze.sentiment", {"method": "lexicon", "lexicon_additions": {"adore": ["love"],
                                                                                 "darling": ["love"]}})
    scores = op(texts_table(["I adore you, darling"])).column("emotion_scores")[0].as_py()
    assert scores["love"] == 1.0 and op(texts_table(["adore"])).column("emotion")[0].as_py() == "love"


# -- classifier --------------------------------------------------------------------------------------------

#: Deliberately not in EMOTIONS order, and capitalised: the operator must map ids through id2label.
CHECKPOINT_LABELS = ["Joy", "Fear", "Sadness", "Surprise", "Anger", "Love"]


@pytest.fixture(scope="module")
def classifier_folder(tmp_path_factory):
    """A real text-classification checkpoint: MiniLM's encoder with a seeded, untrained 6-label head."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    source = str(resolve_model_path("minilm"))
    torch.manual_seed(7)
    model = BertForSequenceClassification.from_pretrained(
        source, num_labels=6, id2label=dict(enumerate(CHECKPOINT_LABELS)),
        label2id={label: i for i, label in enumerate(CHECKPOINT_LABELS)})
    folder = tmp_path_factory.mktemp("emotion-classifier")
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


@pytest.mark.integration
def test_classifier_scores_are_the_checkpoint_softmax(classifier_folder):
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    texts = [OBVIOUS[0][0], OBVIOUS[4][0], " ".join(["word"] * 50_000)]  # the last must be truncated, not crash
    out = create("analyze.sentiment", {"method": "classifier", "model": str(classifier_folder)})(texts_table(texts))
    tokenizer = AutoTokenizer.from_pretrained(classifier_folder)
    model = BertForSequenceClassification.from_pretrained(classifier_folder).eval()
    with torch.no_grad():
        logits = model(**tokenizer(texts, padding=True, truncation=True, return_tensors="pt")).logits
    expected = torch.softmax(logits, dim=-1).numpy()
    labels = [label.lower() for label in CHECKPOINT_LABELS]
    got = np.array([[row[label] for label in labels] for row in out.column("emotion_scores").to_pylist()])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert out.column("emotion").to_pylist() == [labels[i] for i in expected.argmax(axis=1)]
    assert out.schema.field("emotion_scores").type.names == labels


def test_classifier_needs_a_classification_folder(tmp_path):
    with pytest.raises(ParamsError, match="params.model"):
        create("analyze.sentiment", {"method": "classifier"})
    missing = create("analyze.sentiment", {"method": "classifier", "model": str(tmp_path / "absent")})
    with pytest.raises(ModelNotFoundError, match="text-classification checkpoint folder.*--local-dir"):
        missing.setup()
    encoder_only = create("analyze.sentiment", {"method": "classifier", "model": "minilm"})
    with pytest.raises(ModelNotFoundError, match="BertModel.*not a \\*ForSequenceClassification"):
        encoder_only.setup()


def test_bad_input_names_the_field():
    with pytest.raises(ParamsError, match="params.lexicon_additions"):
        create("analyze.sentiment", {"method": "lexicon", "lexicon_additions": {"adore": ["lust"]}})
    with pytest.raises(ParamsError, match="params.prototypes"):
        create("analyze.sentiment", {"prototypes": {"only": ["one label"]}})
    with pytest.raises(ParamsError, match="params.model"):
        create("analyze.sentiment", {"method": "lexicon", "model": "minilm"})
    with pytest.raises(OperatorError, match="input_column 'text' must hold text"):
        create("analyze.sentiment", {"method": "lexicon"})(pa.table({"text": [1, 2]}))
