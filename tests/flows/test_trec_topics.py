"""TREC topic files as queries (``flows.trec_topics``): the classic form (Robust04's ``topics.301-450``) and the XML
form (TREC-COVID's ``topics-rnd1.xml``), each topic's number its qid and its title its query. Read a line at a time,
a classic file ran sixteen "queries" such as ``<top>`` and ``<num> Number: 301`` silently, and a file named
``topics.301-450`` or ``.xml`` was refused for its suffix. Real files in tmp_path; the command line in-process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from flows.queries import read_queries
from operators.errors import SpecError

CLASSIC = """<top>
<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in international criminal activity.

<narr> Narrative:
A relevant document must as a minimum identify the organization.
</top>

<top>

<head> Tipster Topic Description
<num> Number: 051
<dom> Domain: International Economics
<title> Topic: Airbus Subsidies
   and their trade disputes

<desc> Description:
Document will discuss government assistance to Airbus Industrie.
</top>
"""

XML = """<?xml version="1.0" encoding="UTF-8"?>
<topics task="2020-round1">
  <topic number="1">
    <query>coronavirus origin</query>
    <question>what is the origin of COVID-19</question>
  </topic>
  <topic number="2">
    <query>coronavirus response to weather &amp; climate</query>
  </topic>
</topics>
"""


def pairs(table) -> list[tuple[str, str]]:
    return list(zip(table.column("qid").to_pylist(), table.column("query").to_pylist()))


@pytest.mark.parametrize("name", ["topics.txt", "topics.301-450", "topics"])
def test_a_classic_topic_file_is_one_query_a_topic_its_title(tmp_path, name):
    (tmp_path / name).write_text(CLASSIC, encoding="utf-8")
    assert pairs(read_queries(str(tmp_path / name))) == [
        ("301", "International Organized Crime"), ("051", "Airbus Subsidies and their trade disputes")]


@pytest.mark.parametrize("name", ["topics-rnd1.xml", "topics.txt"])
def test_an_xml_topic_file_is_one_query_a_topic_its_query(tmp_path, name):
    (tmp_path / name).write_text(XML, encoding="utf-8")
    assert pairs(read_queries(str(tmp_path / name))) == [
        ("1", "coronavirus origin"), ("2", "coronavirus response to weather & climate")]


@pytest.mark.parametrize("text, said", [
    ("<top>\n<title> No number\n</top>\n", "topics.txt:1: a TREC topic without its number (<num>)"),
    ("<top>\n<num> Number: 7\n<desc> Description:\nOnly a description.\n</top>\n<top>\n",
     "topics.txt:1: TREC topic 7 has no <title> text"),
    ('<topics><topic number="3"><question>q</question></topic></topics>', "topics.txt:1: TREC topic 3 has no <query> "
                                                                          "text"),
    ("<topics>\n</topics>\n", "topics.txt: starts as a TREC topic file but holds no complete topic (<topic "
                              "number=...> ... </topic>)")])
def test_a_topic_without_a_number_or_a_title_is_refused_naming_its_line(tmp_path, text, said):
    (tmp_path / "topics.txt").write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        read_queries(str(tmp_path / "topics.txt"))
    assert err.value.field == "queries" and err.value.message == f"{tmp_path}/{said}"


@pytest.mark.process
def test_tessera_run_reads_topics_from_a_file_and_from_standard_input(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in [
        {"_id": "d1", "text": "Organized crime groups operate across borders."},
        {"_id": "d2", "text": "Airbus subsidies led to trade disputes with Boeing."}]), encoding="utf-8")
    (tmp_path / "topics.301-450").write_text(CLASSIC, encoding="utf-8")
    spec = {"name": "lex", "steps": {"bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(corpus)}}}}
    (tmp_path / "lex.json").write_text(json.dumps(spec), encoding="utf-8")
    for queries, stdin in ((str(tmp_path / "topics.301-450"), None), ("-", CLASSIC)):
        done = subprocess.run([sys.executable, "-m", "flows", "run", str(tmp_path / "lex.json"), "--queries", queries,
                               "--json", "--no-cache"], input=stdin, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        top = {row["qid"]: row["docno"] for row in json.loads(done.stdout)["rows"] if row["rank"] == 1}
        assert top == {"301": "d1", "051": "d2"}
