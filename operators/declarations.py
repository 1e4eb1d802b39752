"""What an operator declares from its params alone, before any data flows: the columns it writes and reads, and what
it needs to run (models, environment variables, local files, an index's features, a language model).

Why apart from ``operators.base``: the engine reads these to check a whole flow before any step loads or runs
(``flows.spec``, ``flows.model_check``); ``Operator`` inherits them from ``StepDeclarations``, and a step overrides
those its params decide. The contract they belong to is ``operators.base``'s docstring.
"""

from __future__ import annotations

from typing import Literal

from operators.local_files import marked_params

Role = Literal["rank", "score", "text", "chip", "data", "id"]


class StepDeclarations:
    """What a step declares from its params alone (a base of ``Operator``; see ``operators.base``)."""

    def produces(self) -> dict[str, Role]:
        """Columns this step writes, with their role. Derived from params only."""
        return {}

    def reads(self) -> list[str] | None:
        """Input columns the output depends on; ``None`` means every column."""
        return None

    def requires(self) -> list[str]:
        """Input columns that must be present (checked before ``transform``)."""
        return list(self.reads() or [])

    def required_columns(self) -> list[str]:
        """Input columns a flow is refused for, before any step runs, when no step above it can bring them
        (``flows.spec_columns.missing_columns``): ``requires()``, and those a step checks itself as it runs, with an
        error of its own (``postprocess.filter``'s columns: the filter's error says which name is close)."""
        return self.requires()

    def unset_params(self) -> dict[str, str]:
        """Params the spec may leave for whoever runs it to fill in (``tessera bench`` sets a benchmark's dataset)
        but that must be set before it runs: ``{"params.NAME": what it is}``. Checked before a served flow runs."""
        return {}

    def missing_files(self) -> dict[str, str]:
        """The local files this step reads that are not there now, ``{"params.NAME": its setup's error}``: asked
        before a served flow runs and by ``GET /flows`` (a stat or two, no reading)."""
        return {}

    def index_needs(self) -> tuple[str, ...]:
        """What an index built for this step must hold (``bm25``, ``dense``; read for steps that leave ``index``
        unset, by ``FlowSpec.index_features``): the class's ``index_features``, unless its params decide."""
        return tuple(getattr(self, "index_features", ("bm25", "dense")))

    def required_models(self) -> dict[str, str]:
        """The model references this step loads, keyed by what names each one (``{"params.model":
        "tessera-cross-encoder"}``). Nothing is loaded; the engine resolves them before a flow runs."""
        return {}

    def calls_model(self) -> bool:
        """Whether the step asks a language model with its params: it then waits on the model for seconds to
        minutes (the service runs such a flow on its answers' threads, ``serve/http/threads.py``). The language-model
        steps do (``LLMStep``); ``query.contextualize`` and ``retrieve.multi_hop`` only with ``llm``."""
        return False

    def required_env(self) -> dict[str, str]:
        """The environment variables this step reads (a key, a password), keyed by the param that names each
        (``{"params.api_key_env": "COHERE_API_KEY"}``): by default every set param marked ``env_var()``. Read
        from the params only, so a flow whose variable is unset is refused before any step runs."""
        return {f"params.{name}": value for name in marked_params(self.Params, "env_var")
                if isinstance(value := getattr(self.params, name, None), str) and value}
