"""Generation: the context a model reads, the answer it writes, and the references the answer cites.

``generate.context`` numbers each query's rows into ``[Document i] Title`` blocks within a
token budget; ``generate.answer`` asks a language model (``operators.llm``) to answer
from them and cite them; ``generate.references`` turns the cited rows into numbered
citations. Rows pass through every step: answers and references are per-query metadata.
"""
