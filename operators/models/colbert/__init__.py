"""ColBERT models, loaded offline from any common checkpoint layout (not an operator).

``model``: ``ColbertModel`` (encoding, saving, identity), ``load_colbert``/``new_colbert``
and the ``maxsim`` score; ``checkpoints``: reading Tessera, PyLate and Stanford layouts.
"""

from operators.models.colbert.checkpoints import (CONFIG_FILE, FORMAT, LINEAR_FILE, ColbertCheckpointError,
                                                  ColbertConfig, read_checkpoint)
from operators.models.colbert.model import ColbertModel, load_colbert, maxsim, new_colbert

__all__ = ["CONFIG_FILE", "FORMAT", "LINEAR_FILE", "ColbertCheckpointError", "ColbertConfig", "ColbertModel",
           "load_colbert", "maxsim", "new_colbert", "read_checkpoint"]
