"""How the Python API refuses an index it cannot open: in a Python caller's words, naming the argument and the
``ingest(...)`` call that resumes, where the engine's errors say the ``tessera`` command or name no argument.

Why a module of its own: ``Index`` and ``Flow.load`` (``flows.api.flow_and_index``) both open indices and refuse
them alike. An attribute ``Index`` or ``Flow`` lacks (``no_attribute``, ``no_flow_attribute``) is refused here too,
beside them.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from operators.errors import (MissingAttributeError, SpecError, TesseraError, close_names, did_you_mean,
                             see_docs, short_repr, unknown_name_hint)


@contextlib.contextmanager
def resume_said() -> Iterator[None]:
    """An index folder whose first ingestion was interrupted refused with the ``ingest(...)`` call that resumes it
    (``first_ingest.with_resume``; the CLI says its command), not only that "the command that started it" does."""
    from operators.store.errors import UnfinishedFirstIngestError

    try:
        yield
    except UnfinishedFirstIngestError as err:
        from flows.ingestion.first_ingest import with_resume

        raise with_resume(err, python=True)


def not_an_index(call: str, given: Any) -> TesseraError:
    """``Index(x)``'s and ``Index.open(x)``'s refusal of an ``x`` that is no index: the same error from both (it was a
    ``SpecError`` from one, an ``IndexStoreError`` from the other), naming ``path`` and what it got."""
    from operators.store.errors import IndexArgumentError

    return IndexArgumentError(f"{call} takes an index's folder (a path) or name, or an open Index; got "
                              f"{type(given).__name__} {short_repr(given)}", field="path")


#: Other words for ``Index``'s own changes, as another library or the store names them, and what to call instead.
_ADD = ("use index.add(documents): a list of dicts, a pandas DataFrame, a pyarrow Table or a file, cut and embedded "
        "as ingest does")
_UPDATE = "use index.update(documents), which replaces the documents with their ids"
OTHER_WORDS = {"insert": _ADD, "add_documents": _ADD, "append": _ADD, "upsert": _UPDATE, "replace": _UPDATE,
               "remove": "use index.delete(doc_ids)", "delete_documents": "use index.delete(doc_ids)"}


class UnknownAttributeError(MissingAttributeError):
    """An attribute ``flows.api.Index`` lacks, saying where it is (the store's) or what was meant."""


def no_attribute(index: Any, name: str) -> UnknownAttributeError:
    """``index.NAME`` that ``flows.api.Index`` lacks: the API's own method for another word (``upsert``: update),
    the store's (``index.store.compact``), or the close names and those it has."""
    if name in OTHER_WORDS:  # the store's upsert and delete_documents take chunks with vectors, ids alone
        said = f"; {OTHER_WORDS[name]}"
    elif hasattr(type(index.store), name):
        said = f"; the index's store has it: index.store.{name} (operators.store.Index); see {see_docs('indices')}"
    else:
        known = sorted({"store", "report", *(a for a in dir(type(index)) if not a.startswith("_"))})
        hint = did_you_mean(close_names(name, known))
        said = f"{'; ' + hint if hint else ''} (it has: {', '.join(known)}; index.store is operators.store.Index)"
    return UnknownAttributeError(f"flows.api.Index has no {name!r}{said}", name=name, obj=index)


#: What a PyTerrier pipeline's user writes of a ``Flow``, and what a flow does instead.
_RUN = "a Flow runs with flow.run(queries) (one text, a list, a dict {qid: text} or a qid, query table)"
FLOW_WORDS = {"search": _RUN, "transform": _RUN, "query": _RUN, "invoke": _RUN, "execute": _RUN,
              "index": "the flow's index is Flow.load's: Flow.load(flow, index=...) gives it another",
              "compile": "a flow is checked and built when it is loaded (flow.built); nothing is left to compile"}
ALGEBRA = ("there is no operator algebra on flows (PyTerrier's >>, +, %): a pipeline is a spec, where >> is a step "
           "after another, + two branches fanned in to fuse.weighted (or fuse.rrf), and % a postprocess.reduce step "
           f"with k; Flow.load takes the spec as a dict: see {see_docs('python')} and "
           f"{see_docs('flows', 'Inputs and fan-in')}")


class NoAlgebraError(SpecError, TypeError):
    """``flow >> other`` (PyTerrier's algebra): a ``SpecError`` saying what a spec writes instead, and the
    ``TypeError`` Python raises for an operator a type does not support."""


class UnknownFlowAttributeError(MissingAttributeError):
    """An attribute ``flows.api.Flow`` lacks, saying what a flow does instead."""


def no_flow_attribute(flow: Any, name: str) -> UnknownFlowAttributeError:
    """``flow.NAME`` that ``Flow`` lacks: what to call instead (``search``: run), or the close names."""
    if name in FLOW_WORDS:
        said = f"; {FLOW_WORDS[name]}"
    else:
        said = unknown_name_hint(name, (a for a in {*dir(type(flow)), *vars(flow)} if not a.startswith("_")), "it has")
    return UnknownFlowAttributeError(f"a Flow has no {name!r}{said}", name=name, obj=flow)
