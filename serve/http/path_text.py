"""The ``text`` path convertor: the rest of a URL's path, ``/`` and every character included, for a route whose last
part is a name a client chose (a document's id, a model's).

Why not Starlette's ``path``: its pattern is ``.*``, whose ``.`` stops at a newline and whose route ends with ``$``,
which matches before a last newline. A document uploaded with the id ``"a\\nb"`` (an id may hold any text) was never
found by ``GET /v1/indices/{name}/documents/a%0Ab`` (404 ``no route``), and ``.../ab%0A`` answered with the
document ``ab``, another one.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor


class AnyText(Convertor[str]):
    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("text", AnyText())
