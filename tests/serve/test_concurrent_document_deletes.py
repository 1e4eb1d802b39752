"""``POST /v1/indices/{name}/delete`` sent several times at once for the same id: each request read the id as live
before any of them committed, and each answered ``deleted: [id]``. Only the one whose commit tombstoned it did."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from tests.serve.conftest import uploaded_index


def test_of_deletes_of_one_id_at_once_only_the_one_that_deleted_it_says_so(make_service):
    service = make_service()
    uploaded_index(service)
    start = threading.Barrier(6)

    def delete(_):
        start.wait()
        return service.indices.delete_documents("notes", ["bees"], "local")

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(delete, range(6)))
    assert sorted(answer["deleted"] for answer in answers) == [[]] * 5 + [["bees"]], answers
    assert sum(answer["chunks"] for answer in answers) == 1, answers
    assert all(answer["missing"] == ([] if answer["deleted"] else ["bees"]) for answer in answers), answers
    again = service.indices.delete_documents("notes", ["bees", "ants"], "local")  # ants is still there
    assert (again["deleted"], again["missing"], again["chunks"]) == (["ants"], ["bees"], 1)
