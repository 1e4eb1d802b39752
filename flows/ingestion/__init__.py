"""The parts of the ingestion flow (``flows.ingest``): staging, per-shard work, the Ray pipeline, the ledger."""
