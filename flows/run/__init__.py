"""``python -m flows.run``: see ``flows.commands.run``."""
