"""sources.grpo: documents extracted from GRPO chat prompts, deduplicated across rows."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from operators.errors import ParamsError, SourceError, SourceNotFoundError
from operators.ids import content_doc_id
from operators.registry import create
from operators.sources.grpo import parse_documents
from operators.testing import OperatorContract, sample_documents

DOCS = sample_documents(7).to_pylist()  # real Wikipedia leads: A..G below
A, B, C, D, E, F, G = DOCS
SYSTEM = {"role": "system", "content": "You answer questions from the given documents. Cite them as [n]."}


def documents_block(docs) -> str:
    return "<documents>" + "\n".join(f"[{i}] {d['title']}: {d['text']}" for i, d in enumerate(docs, 1)) + "</documents>"


def user(docs, question="Which of these is oldest?") -> dict:
    return {"role": "user", "content": f"Answer using the documents.\n{documents_block(docs)}\nQuestion: {question}"}


def grpo_rows() -> list[dict]:
    """Five training rows in the shapes GRPO data comes in; documents are shared between rows."""
    return [
        {"messages": [SYSTEM, user([A, B, C])], "answer": "A"},
        {"messages": [SYSTEM, user([B, D, E]), {"role": "assistant", "content": "<think>B fits</think> [1]"}],
         "answer": "B"},
        {"prompt": f"Read these.\n{documents_block([A, E, F])}\nWhat links them?", "answer": "E"},
        {"messages": [SYSTEM, {"role": "user", "content": "No documents in this one, just chat."}], "answer": "-"},
        {"prompt": [
            SYSTEM,
            {"role": "user", "content": [{"type": "text", "text": "Documents follow."},
                                         {"type": "text", "text": documents_block([C, G])}]},
            {"role": "assistant", "content": documents_block([{"title": "Invented", "text": "not a source"}])},
        ], "answer": "G"},
    ]


@pytest.fixture
def grpo_jsonl(tmp_path):
    path = tmp_path / "grpo_train.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in grpo_rows()), encoding="utf-8")
    return path


class TestGrpoContract(OperatorContract):
    operator_name = "sources.grpo"

    @pytest.fixture(autouse=True)
    def _data(self, grpo_jsonl):
        self.path = grpo_jsonl

    def make_operator(self, **params):
        return create(self.operator_name, {"path": str(self.path), **params})


def test_unique_documents_in_order_of_first_appearance(grpo_jsonl):
    out = create("sources.grpo", {"path": str(grpo_jsonl)})(pa.table({}))
    assert out.column_names == ["docno", "title", "text", "source_row", "occurrences"]
    expected = [A, B, C, D, E, F, G]
    assert out.select(["title", "text"]).to_pylist() == [{"title": d["title"], "text": d["text"]} for d in expected]
    assert out.column("docno").to_pylist() == [content_doc_id(d["title"], d["text"]) for d in expected]
    assert out.column("source_row").to_pylist() == [0, 0, 0, 1, 1, 2, 4]
    assert out.column("occurrences").to_pylist() == [2, 2, 2, 1, 2, 1, 1]
    assert "Invented" not in out.column("title").to_pylist()  # assistant messages are not searched


def test_roles_param_searches_other_messages(grpo_jsonl):
    out = create("sources.grpo", {"path": str(grpo_jsonl), "roles": ["user", "assistant"]})(pa.table({}))
    assert "Invented" in out.column("title").to_pylist()


def test_parquet_rows_give_the_same_documents(tmp_path, grpo_jsonl):
    chat_rows = [row for row in grpo_rows() if "messages" in row]
    jsonl = tmp_path / "chat.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in chat_rows), encoding="utf-8")
    parquet = tmp_path / "chat.parquet"
    pq.write_table(pa.Table.from_pylist(chat_rows), parquet)
    from_jsonl = create("sources.grpo", {"path": str(jsonl)})(pa.table({}))
    from_parquet = create("sources.grpo", {"path": str(parquet)})(pa.table({}))
    assert from_parquet.equals(from_jsonl)
    assert from_parquet.num_rows == 5  # A, B, C, D, E


def test_parse_documents_keeps_citations_and_reads_labelled_entries():
    block = "[1] Alpha: cites [3] and [1] inline.\n[2] Beta: second [2] [3] Title: Gamma Content: third one"
    assert parse_documents(block) == [
        ("Alpha", "cites [3] and [1] inline."),
        ("Beta", "second [2]"),
        ("Gamma", "third one"),
    ]
    assert parse_documents("[1] no title separator here") == [("", "no title separator here")]


def test_documents_sharing_a_content_id_get_distinct_docnos(tmp_path, caplog):
    opening = "x" * 100
    docs = [{"title": "Same", "text": opening + " one"}, {"title": "Same", "text": opening + " two"}]
    path = tmp_path / "clash.jsonl"
    path.write_text(json.dumps({"messages": [user(docs)]}) + "\n", encoding="utf-8")
    out = create("sources.grpo", {"path": str(path)})(pa.table({}))
    base = content_doc_id("Same", opening)
    assert out.column("docno").to_pylist() == [base, f"{base}-2"]
    assert "share content id" in caplog.text


def test_bad_line_missing_file_and_no_documents(tmp_path, grpo_jsonl):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(grpo_jsonl.read_text() + "{broken\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"bad\.jsonl, line 6"):
        create("sources.grpo", {"path": str(bad)})(pa.table({}))
    assert create("sources.grpo", {"path": str(bad), "on_error": "skip"})(pa.table({})).num_rows == 7
    with pytest.raises(SourceNotFoundError, match="absent.jsonl"):
        create("sources.grpo", {"path": str(tmp_path / "absent.jsonl")})(pa.table({}))
    empty = tmp_path / "plain.jsonl"
    empty.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    out = create("sources.grpo", {"path": str(empty)})(pa.table({}))
    assert out.num_rows == 0 and "docno" in out.column_names


def test_bad_params_name_the_field(grpo_jsonl):
    with pytest.raises(ParamsError) as err:
        create("sources.grpo", {"path": str(grpo_jsonl), "roles": []})
    assert err.value.field == "params.roles"
