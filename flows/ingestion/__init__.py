"""Ingestion: read -> chunk -> embed -> write, into a sharded index directory, resumable.
::

    tessera ingest --source data/sample/corpus.jsonl --index idx [--executor ray|local]
    ray job submit --runtime-env cluster/runtime_env.yaml -- \
        python -m flows.ingest --source corpus.jsonl --index /shared/idx
    flows.ingestion.ingest("data/sample/corpus.jsonl", "idx", settings={"dense": False})

How it works (one module a concern: ``plan``, ``staging`` (and ``staged_files``), ``shards``, ``ray_pipeline``
(and ``ray_results``), ``progress``, ``ledger``; ``job`` runs them, and ``shard_commits`` commits what they write):

0. **Check** (driver, ``checks``), before anything is created: the options, the source (a missing path
   fails naming it), the settings, the embed model (the index's encoder, on this machine) and
   the ``colbert`` model.
1. **Stage** (``staging``, on the driver). The read step's documents are streamed in
   source order and cut into deterministic shards of ``shard_size`` documents, each
   written atomically under ``<index>/_ingest/<source key>/``. A record that cannot be
   read (a JSONL line, a CSV row, a whole file: ``records``) goes to the failure ledger
   with its file and line, not into a crash, and the rest is read on. Shards the manifest already
   lists are not staged again; an unchanged source is not even read again.
2. **Process** each unfinished shard (``shards``): chunk (``preprocess.chunk``,
   optional), embed (``embed.sentence_transformer``; skipped for BM25-only indices),
   write (``Index.write_shard``: one shard folder, atomically). On Ray Data
   (``ray_pipeline``) these are a task stage, an actor-pool stage and a task stage
   that keep each shard in one block; ``executor="local"`` runs the same functions
   in-process. A shard's vectors exist only while its block is in flight and are then
   on disk, so memory is bounded by a few shards, whatever the corpus size.
3. **Commit** (driver): for each written shard, its failures are appended to
   ``failures.jsonl`` (``ledger``), then ``Index.commit`` records the shard in the
   manifest and its staged files are deleted; a shard whose commit fails is removed.

Exactly once: a document is in the index iff its shard is in the manifest. Two ingests of the same
source at once plan the same shard ids: a shard the other committed first (before this one read, wrote
or committed it) counts as done by another ingest (``shards_elsewhere``), not as this run's. A run that
dies anywhere (a killed embed worker is restarted by Ray; a killed driver, or a crash
between a shard's write and its commit, is resumed by running the same command again)
re-processes only the shards not in the manifest, and ``Index.commit`` refuses a
docno that is already live (the staged documents' ids are checked against the live ones first, so a
shard that would be refused is not embedded: ``refused.first_live``). ``--retry-failed`` processes only
the ledger's open failures into a new shard; read failures are read again from their file and line,
or the whole file (fix the line or file, then retry).

Progress (``progress``): documents are counted as they are embedded, not only when their
shard commits. Fault hooks for the tests: ``TESSERA_FAULT`` (see ``flows.ingestion.faults``)."""

from flows.ingestion.checks import DEFAULT_SHARD_SIZE, CheckedIngest, check_ingest
from flows.ingestion.job import ingest
from flows.ingestion.plan import DEFAULT_SPEC, IngestPlan, build_plan, load_spec
from flows.ingestion.report import IngestReport

__all__ = ["DEFAULT_SHARD_SIZE", "DEFAULT_SPEC", "CheckedIngest", "IngestPlan", "IngestReport", "build_plan",
           "check_ingest", "ingest", "load_spec"]
