"""Summaries written by a language model: one per document (``summarize.documents``) or one per query over its
remaining documents (``summarize.results``, into the query's metadata)."""
