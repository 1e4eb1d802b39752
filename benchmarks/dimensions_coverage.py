"""analyze.dimensions over the Wikipedia vital-articles corpus: speed, coverage, and a sample to audit by hand.

Runs the operator in-process over ../shared/data/wikipedia_vital10k_ovos (10,033 leads),
prints docs/s (gazetteer load apart), the share of documents with a date, a year and a
country, the most frequent countries and regions, and ``--audit N`` randomly drawn
extractions (seeded) next to their text, for a person to judge each one right or wrong:
precision has no gold labels here, so it is counted by reading.

``--search-dates N`` also times dateparser's ``search_dates`` on the first N leads and
shows what it finds in four sentences that name no date.

    .venv/bin/python benchmarks/dimensions_coverage.py [--limit N] [--audit 40] [--seed 0] [--search-dates 200]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from operators.registry import create

#: Sentences with numbers and words that are not dates.
NO_DATES = ["The runners climbed to 1500 metres in 1500 seconds.",
            "By 2000 people had signed the petition, and in 1200 games he scored 1800 points.",
            "Bees may visit 2000 flowers a day; the second hive is now empty.",
            "The temperature rose 1200 degrees from 1100 to 1500 kelvin."]
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "wikipedia_vital10k_ovos" / "corpus.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="documents read (default: all)")
    parser.add_argument("--audit", type=int, default=40, help="extractions printed for a manual audit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--search-dates", type=int, default=0, help="also time dateparser's search_dates on N leads")
    args = parser.parse_args()
    with open(CORPUS, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f][: args.limit]
    table = pa.table({"docno": [d["_id"] for d in docs], "title": [d["title"] for d in docs],
                      "text": [d["text"] for d in docs]})
    op = create("analyze.dimensions")
    started = time.perf_counter()
    op.ensure_setup()
    loaded = time.perf_counter()
    out = op(table).to_pylist()
    done = time.perf_counter()
    n = len(out)
    print(f"{n} documents; setup {loaded - started:.1f} s; extraction {done - loaded:.1f} s "
          f"= {n / (done - loaded):.0f} docs/s")
    for column in ("dates", "year", "country", "region"):
        have = sum(bool(r[column]) for r in out)
        print(f"  with {column}: {have} ({have / n:.1%})")
    print("  countries:", Counter(r["country"] for r in out if r["country"]).most_common(8))
    print("  regions:", Counter(r["region"] for r in out if r["region"]).most_common())
    if args.search_dates:
        compare_search_dates(docs[: args.search_dates])
    rng = random.Random(args.seed)
    print(f"\n{args.audit} random documents with something extracted (judge each date and place):")
    found = [r for r in out if r["dates"] or r["places"]]
    for row in rng.sample(found, min(args.audit, len(found))):
        print(f"\n[{row['docno']}] {row['title']}: dates={row['dates']} places={row['places']} "
              f"country={row['country']} year={row['year']}\n  {row['text']}")


def compare_search_dates(docs: list[dict]) -> None:
    from dateparser.search import search_dates

    false = [(text, [found for found, _ in search_dates(text, languages=["en"]) or []]) for text in NO_DATES]
    print(f"  search_dates on sentences with no date: {sum(len(f) for _, f in false)} found: {false}")
    started = time.perf_counter()
    found = sum(len(search_dates(d["text"], languages=["en"]) or []) for d in docs)
    seconds = time.perf_counter() - started
    print(f"  search_dates: {len(docs)} leads in {seconds:.1f} s = {len(docs) / seconds:.0f} docs/s ({found} found)")


if __name__ == "__main__":
    main()
