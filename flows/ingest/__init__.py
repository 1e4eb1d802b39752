"""``python -m flows.ingest``: see ``flows.commands.ingest``."""
