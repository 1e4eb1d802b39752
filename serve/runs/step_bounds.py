"""How much of the service a step from the network may ask for: its resource options (``batch_size``,
``concurrency``, ``num_cpus``, ``num_gpus``) and the params that set how many calls run at once, how long one may
wait and how often it is tried again.

A flow's spec bounds none of them (the CLI and Python keep any value: a flow of one's own on one's own machine), so a
request could ask for ``concurrency: 100000`` (threads, each a connection to a model server) or ``timeout: 1e9``
(a task that holds its worker and its key's slot for ever). The service bounds them by its ``limits``
(``serve/service_settings.py``), a 422 naming the field and the limit: the step's options by name, an operator's
params by the end of their name (``PARAM_LIMITS``), so that a new operator's ``*_timeout`` is bounded without a
marker. Only what the spec sets is checked: a default is the operator's, not the request's.
"""

from __future__ import annotations

from typing import Any

from serve.http.errors import ApiError

#: A step's resource options (``flows.spec.StepSpec``) and the limit of each.
STEP_OPTIONS = {"batch_size": "max_step_batch_size", "concurrency": "max_step_concurrency",
                "num_cpus": "max_step_num_cpus", "num_gpus": "max_step_num_gpus"}

#: An operator's params by how their names end (``rerank.api``'s ``max_retries``, ``retrieve.multi_hop``'s
#: ``follow_up_timeout``, ``sources.mosaic``'s ``concurrent_requests``), and the limit of each.
PARAM_LIMITS = (("batch_size", "max_step_batch_size"), ("batch_rows", "max_step_batch_size"),
                ("concurrency", "max_step_concurrency"), ("concurrent_requests", "max_step_concurrency"),
                ("timeout", "max_call_timeout_s"), ("retries", "max_call_retries"))


def param_limit(name: str) -> str | None:
    """The limit that bounds a param called ``name``, if one does."""
    for ending, limit in PARAM_LIMITS:
        if name == ending or name.endswith("_" + ending):
            return limit
    return None


def check_bounds(flow: Any, limits: Any) -> None:
    """A 422 naming the first option or param of the built ``flow``'s steps (and of the operators a step runs inside
    itself) that its spec sets above ``limits`` (``Limits``)."""
    for step in flow.needed_steps():
        options = flow.spec.steps[step]
        for option, limit in STEP_OPTIONS.items():
            check_value(getattr(options, option), f"steps.{step}.{option}", limit, limits)
        for place, each in flow.operators[step].walk(f"steps.{step}"):
            for name in sorted(each.params.model_fields_set):
                limit = param_limit(name)
                if limit is not None:
                    check_value(getattr(each.params, name), f"{place}.params.{name}", limit, limits)


def check_step_count(spec: Any, limits: Any) -> None:
    """A 422 naming ``steps`` for a flow of more steps than ``max_steps``, checked before it is built: every step
    runs and keeps its output, and a flow of 9,000 searches held a replica at 9 GB until Ray killed it."""
    if len(spec.steps) > limits.max_steps:
        raise ApiError(422, f"the flow has {len(spec.steps):,} steps, over this service's limit "
                       f"max_steps={limits.max_steps}", param="steps", code="max_steps")


def check_value(value: Any, field: str, limit: str, limits: Any) -> None:
    bound = getattr(limits, limit)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > bound:
        raise ApiError(422, f"{field}: {value} is over this service's limit {limit}={bound}; ask for "
                       f"{bound} at most (the CLI takes any value: a flow of one's own, on one's own machine)",
                       param=field, code=limit)
