"""Tessera's operator library: the contract (``base``), the registry and one folder per category."""

from operators.base import Operator, Source
from operators.errors import (
    FlowCancelled,
    MissingColumnsError,
    OperatorError,
    ParamsError,
    SpecError,
    TesseraError,
    UnknownOperatorError,
)
from operators.registry import all_operators, create, get_operator

__all__ = [
    "FlowCancelled", "MissingColumnsError", "Operator", "OperatorError", "ParamsError", "Source",
    "SpecError", "TesseraError", "UnknownOperatorError", "all_operators", "create", "get_operator",
]
