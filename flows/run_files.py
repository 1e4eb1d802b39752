"""``read_trec_run(path)``: a TREC run file as a Tessera table, in trec_eval's order (``operators.trec_run_files``,
where ``retrieve.run_file`` reads it too; this is its place in the Python API)."""

from operators.trec_run_files import read_trec_run

__all__ = ["read_trec_run"]
